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
fn c42_a_childs_banner_goes_with_its_stderr_by_default_a_bare_channel_delivers_it() {
    assert_eq!(ChannelConfig::default().pollution, None);
    assert_eq!(
        Config::default().channel.pollution,
        Some(PollutionPolicy::Divert)
    );
    let now = Instant::now();
    let mut session = Session::new(&Config::default(), true, now);
    session.handle_read(b"banner\n{\"id\":1}\n", now);
    // The first item is the first message: the banner is not an item.
    assert!(matches!(
        session.poll_received(),
        Some(Received::Message(m)) if &m[..] == b"{\"id\":1}"
    ));
    assert_eq!(session.poll_received(), None);
    // The background task hands it on, named once, with the stderr lines.
    session.handle_driver_wake(now);
    assert!(matches!(
        session.poll_output(),
        childwire_core::Output::StdoutNotice(_)
    ));
    assert!(matches!(
        session.poll_output(),
        childwire_core::Output::StdoutLine(line) if &line[..] == b"banner"
    ));
    let counters = session.counters();
    assert_eq!((counters.polluted, counters.polluted_diverted), (1, 1));
    // Over a bare channel, every line is a message.
    let mut channel = Channel::new(Lines, &ChannelConfig::default());
    channel.handle_read(b"banner\n", now);
    assert!(matches!(channel.poll_received(), Some(Frame::Message(_))));
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

/// Every line `Divert` set aside, oldest first.
fn diverted_lines<F: childwire_core::Framing>(inbound: &mut Channel<F>) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| inbound.poll_diverted())
        .map(|line| line.to_vec())
        .collect()
}

fn divert() -> Channel<Lines> {
    channel(Lines, Some(PollutionPolicy::Divert))
}

#[test]
fn c39_divert_takes_pollution_out_of_the_queue_and_keeps_it_for_the_owner() {
    let mut inbound = divert();
    inbound.handle_read(
        b"Starting server on stdio...\n{\"id\":1}\n[INFO] listening\n",
        Instant::now(),
    );
    inbound.handle_read(b"Loaded 3 tools\n{\"id\":2}\n", Instant::now());
    // The caller gets the messages and nothing else: no notice, no banner.
    let frames = drain(&mut inbound);
    let [Frame::Message(first), Frame::Message(second)] = &frames[..] else {
        panic!("only the two messages: {frames:?}");
    };
    assert_eq!(
        (&first[..], &second[..]),
        (&b"{\"id\":1}"[..], &b"{\"id\":2}"[..])
    );
    // The owner gets every other line, in order, without its `\n`.
    assert_eq!(
        diverted_lines(&mut inbound),
        [
            &b"Starting server on stdio..."[..],
            b"[INFO] listening",
            b"Loaded 3 tools"
        ]
    );
    // And each kind named once, from its first line.
    let notices: Vec<_> = std::iter::from_fn(|| inbound.poll_diverted_notice()).collect();
    let named: Vec<_> = notices
        .iter()
        .map(|n| (n.kind, n.line, n.diverted, n.dropped))
        .collect();
    assert_eq!(
        named,
        [
            (PollutionKind::Text, 1, true, false),
            (PollutionKind::LogLine, 3, true, false)
        ]
    );
    assert!(
        notices[0]
            .to_string()
            .ends_with("(kept apart from the messages)"),
        "{}",
        notices[0]
    );
    let counts = inbound.pollution_counts().expect("detection on");
    assert_eq!(
        (
            counts.lines,
            counts.polluted,
            counts.diverted,
            counts.dropped
        ),
        (5, 3, 3, 0)
    );
    assert_eq!(counts.of(PollutionKind::Text), 2);
    assert_eq!(
        (inbound.backlog().messages, inbound.backlog().bytes),
        (0, 0),
        "nothing set aside counts as queued"
    );
}

#[test]
fn c39_divert_keeps_at_most_its_bound_and_counts_what_it_drops() {
    use childwire_core::ITEM_OVERHEAD;
    use childwire_core::pollution::DIVERTED_HIGH_WATER;

    let line = vec![b'x'; 1000];
    let fits = DIVERTED_HIGH_WATER / (line.len() + ITEM_OVERHEAD);
    let mut inbound = divert();
    let lines = 3 * fits;
    for i in 0..lines {
        inbound.handle_read(&line, Instant::now());
        inbound.handle_read(format!("\n{{\"id\":{i}}}\n").as_bytes(), Instant::now());
        // Reading never waits for the lines set aside.
        assert!(!inbound.is_held_back());
    }
    // Every message came through, whatever happened to the pollution.
    let frames = drain(&mut inbound);
    assert_eq!(frames.len(), lines, "{:?}", &frames[..3]);
    assert!(frames.iter().all(|f| matches!(f, Frame::Message(_))));
    let counts = inbound.pollution_counts().expect("detection on").clone();
    assert_eq!(
        (counts.polluted, counts.diverted, counts.dropped),
        (lines as u64, fits as u64, (lines - fits) as u64)
    );
    // The oldest were kept; once taken, there is room again.
    assert_eq!(diverted_lines(&mut inbound).len(), fits);
    inbound.handle_read(b"again\n", Instant::now());
    assert_eq!(diverted_lines(&mut inbound), [&b"again"[..]]);
    assert_eq!(
        inbound.pollution_counts().map(|c| c.diverted),
        Some(fits as u64 + 1)
    );
}

#[test]
fn c39_divert_a_first_line_of_its_kind_that_finds_no_room_is_named_dropped() {
    use childwire_core::pollution::DIVERTED_HIGH_WATER;

    let mut inbound = divert();
    // One banner line as long as the bound leaves no room for the next.
    let mut banner = vec![b'x'; DIVERTED_HIGH_WATER - 200];
    banner.push(b'\n');
    inbound.handle_read(&banner, Instant::now());
    inbound.handle_read(
        b"[WARN] no config, using the defaults, which may be wrong for this host; see --help\n",
        Instant::now(),
    );
    inbound.handle_read(
        b"INFO: one more log line that finds no room either, and is only counted\n",
        Instant::now(),
    );
    let notices: Vec<_> = std::iter::from_fn(|| inbound.poll_diverted_notice()).collect();
    let named: Vec<_> = notices.iter().map(|n| (n.kind, n.dropped)).collect();
    assert_eq!(
        named,
        [(PollutionKind::Text, false), (PollutionKind::LogLine, true)]
    );
    assert!(
        notices[1].to_string().ends_with("(dropped)"),
        "{}",
        notices[1]
    );
    assert_eq!(diverted_lines(&mut inbound).len(), 1);
    let counts = inbound.pollution_counts().expect("detection on");
    assert_eq!((counts.diverted, counts.dropped), (1, 2));
}

#[test]
fn c39_divert_on_a_content_length_channel_keeps_the_notice_apart() {
    let mut inbound = channel(ContentLength, Some(PollutionPolicy::Divert));
    inbound.handle_read(
        b"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n",
        Instant::now(),
    );
    inbound.handle_read(b"Content-Length: 2\r\n\r\n{}", Instant::now());
    let notice = inbound
        .poll_diverted_notice()
        .expect("named from its first line");
    assert_eq!(notice.kind, PollutionKind::JsonOnContentLength);
    // The decoder's notice of the bytes it dropped stays an item; the
    // frame after it is delivered.
    let frames = drain(&mut inbound);
    assert!(
        matches!(&frames[..], [Frame::Malformed(_), Frame::Message(m)] if &m[..] == b"{}"),
        "{frames:?}"
    );
    assert!(inbound.poll_diverted_notice().is_none());
}
