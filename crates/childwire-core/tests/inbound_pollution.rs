//! C39 through the receiving half: a `Channel` (and so a `Session`) queues one pollution notice just before the line it names,
//! counts the rest, and names NDJSON on a `Content-Length` channel from its
//! first line, before the stream ends.

use std::time::Instant;

use childwire_core::{
    Channel, ChannelConfig, Config, ContentLength, Frame, Framing, Lines, PollutionKind,
    PollutionPolicy, Received, Session,
};

fn drain<F: Framing>(inbound: &mut Channel<F>) -> Vec<Frame> {
    std::iter::from_fn(|| inbound.poll_received()).collect()
}

/// A channel with a MiB for messages and for the queue, naming pollution
/// with `policy`.
fn channel<F: Framing>(framing: F, policy: Option<PollutionPolicy>) -> Channel<F> {
    let mut config = ChannelConfig::default();
    config.max_message_size = 1 << 20;
    config.recv_high_water = 1 << 20;
    config.pollution = policy;
    Channel::new(framing, &config)
}

#[test]
fn c39_a_banner_is_named_once_just_before_it_and_json_follows() {
    let mut inbound = channel(Lines, Some(PollutionPolicy::Deliver));
    inbound.handle_read(
        b"Starting server on stdio...\nready\n{\"id\":1}\n",
        Instant::now(),
    );
    let frames = drain(&mut inbound);
    let [
        Frame::Pollution(notice),
        Frame::Message(banner),
        Frame::Message(ready),
        Frame::Message(json),
    ] = &frames[..]
    else {
        panic!("one notice, then the three lines: {frames:?}");
    };
    assert_eq!(notice.kind, PollutionKind::Text);
    assert_eq!(&banner[..], b"Starting server on stdio...");
    assert_eq!(&ready[..], b"ready");
    assert_eq!(&json[..], b"{\"id\":1}");
    let counts = inbound.pollution_counts().expect("detection on");
    assert_eq!((counts.lines, counts.polluted, counts.dropped), (3, 2, 0));
}

#[test]
fn c39_the_drop_policy_drops_the_lines_and_the_counters_say_so() {
    let mut config = ChannelConfig::default();
    config.pollution = Some(PollutionPolicy::Drop);
    let mut channel = Channel::new(Lines, &config);
    let now = Instant::now();
    channel.handle_read(b"banner\n{\"id\":1}\nmore\n", now);
    let frames: Vec<_> = std::iter::from_fn(|| channel.poll_received()).collect();
    assert!(
        matches!(&frames[..], [Frame::Pollution(n), Frame::Message(m)] if n.dropped && &m[..] == b"{\"id\":1}"),
        "{frames:?}"
    );
    let counters = channel.counters();
    assert_eq!((counters.polluted, counters.polluted_dropped), (2, 2));
}

#[test]
fn c39_a_child_names_pollution_by_default_a_bare_channel_does_not() {
    assert_eq!(ChannelConfig::default().pollution, None);
    assert_eq!(
        Config::default().channel.pollution,
        Some(PollutionPolicy::Deliver)
    );
    let now = Instant::now();
    let mut session = Session::new(&Config::default(), true, now);
    session.handle_read(b"banner\n", now);
    assert!(matches!(
        session.poll_received(),
        Some(Received::Pollution(_))
    ));
    assert!(matches!(
        session.poll_received(),
        Some(Received::Message(_))
    ));
    assert_eq!(session.counters().polluted, 1);
}

#[test]
fn c39_detection_off_delivers_lines_as_they_are() {
    let mut inbound = channel(Lines, None);
    inbound.handle_read(b"banner\n", Instant::now());
    assert!(matches!(&drain(&mut inbound)[..], [Frame::Message(_)]));
    assert!(inbound.pollution_counts().is_none());
}

#[test]
fn c39_ndjson_on_a_content_length_channel_is_named_from_its_first_line() {
    let mut inbound = channel(ContentLength, Some(PollutionPolicy::Deliver));
    inbound.handle_read(b"{\"jsonrpc\":\"2.0\",", Instant::now());
    assert!(
        drain(&mut inbound).is_empty(),
        "the line is not complete yet"
    );
    inbound.handle_read(b"\"id\":0,\"result\":{}}\n", Instant::now());
    // No header will ever come, and the stream has not ended: named now.
    let frames = drain(&mut inbound);
    let [Frame::Pollution(notice)] = &frames[..] else {
        panic!("one notice before the end: {frames:?}");
    };
    assert_eq!(notice.kind, PollutionKind::JsonOnContentLength);
    assert!(
        notice.to_string().contains("newline-delimited JSON"),
        "{notice}"
    );
    inbound.handle_read(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n", Instant::now());
    inbound.handle_read_eof(Instant::now());
    // The decoder's own notice for the dropped bytes follows; not named again.
    let frames = drain(&mut inbound);
    assert!(matches!(&frames[..], [Frame::Malformed(_)]), "{frames:?}");
    assert_eq!(inbound.pollution_counts().map(|c| c.polluted), Some(1));
}

#[test]
fn c39_a_session_hands_the_notice_out_as_received() {
    let now = Instant::now();
    let mut config = Config::default();
    config.pollution(Some(PollutionPolicy::Deliver));
    let mut session = Session::new(&config, true, now);
    session.handle_read(b"Content-Length: 2\r\n\r\n{}", now);
    let Some(Received::Pollution(notice)) = session.poll_received() else {
        panic!("the notice first");
    };
    assert_eq!(notice.kind, PollutionKind::ContentLengthHeader);
    assert!(notice.to_string().contains("LSP-style framing"), "{notice}");
}
