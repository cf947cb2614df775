//! Idle stop and lazy restart of a supervised child on a simulated clock:
//! when the running generation counts as idle, what a send does while it
//! rests, and that a request being answered keeps it running.

use std::time::{Duration, Instant};

use childwire_core::{
    AfterSend, Closed, EndedBy, Exit, ExitReport, GenerationEvent, Generations, GenerationsConfig,
    Message, Received, SendStep, WhileDown,
};

const IDLE: Duration = Duration::from_secs(60);
const NOTIFICATION: &[u8] = br#"{"jsonrpc":"2.0","method":"n"}"#;

fn request(id: u32) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#).into_bytes()
}

fn answer(id: u32) -> Received {
    Received::Message(Message::new(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#
    )))
}

/// Generation 1 initialized at `now`, with `idle_stop` and `while_down`.
fn running(now: Instant, while_down: WhileDown) -> Generations {
    let mut config = GenerationsConfig::default();
    config.idle_stop = Some(IDLE);
    config.while_down = while_down;
    let mut gens = Generations::new(config, now);
    gens.handle_spawned(now);
    gens.handle_initialized(now);
    gens
}

/// A send that goes through to the running generation.
fn sent(gens: &mut Generations, body: &[u8], now: Instant) {
    let SendStep::Send { ticket, .. } = gens.handle_send(body, now, None) else {
        panic!("expected the send to go to the running generation")
    };
    assert_eq!(gens.handle_sent(ticket, Ok(())), AfterSend::Done);
}

/// The stopped generation's graceful end.
fn stopped_report() -> ExitReport {
    let mut report = ExitReport::new(Exit::Code(0), EndedBy::StdinClose, Duration::from_millis(3));
    report.shutdown_requested = true;
    report
}

#[test]
fn a_generation_is_stopped_once_idle_for_the_configured_time_and_not_before() {
    let start = Instant::now();
    let mut gens = running(start, WhileDown::Wait);
    assert_eq!(gens.poll_timeout(), Some(start + IDLE));
    gens.handle_timeout(start + IDLE - Duration::from_millis(1));
    assert_eq!(gens.poll_idle_stop(), None);
    // Traffic either way moves the deadline.
    let later = start + Duration::from_secs(30);
    sent(&mut gens, NOTIFICATION, later);
    gens.handle_timeout(start + IDLE);
    assert_eq!(gens.poll_idle_stop(), None);
    let latest = start + Duration::from_secs(50);
    gens.handle_received(&Received::Message(Message::new("{}")), latest);
    assert_eq!(gens.poll_timeout(), Some(latest + IDLE));
    gens.handle_timeout(latest + IDLE);
    assert_eq!(gens.poll_idle_stop(), Some(1));
    assert_eq!(gens.poll_idle_stop(), None, "handed out once");
    assert_eq!(gens.running(), None, "sends wait from now on");
}

#[test]
fn a_request_waiting_for_its_answer_keeps_the_child_running() {
    let start = Instant::now();
    let mut gens = running(start, WhileDown::Wait);
    sent(&mut gens, &request(7), start);
    // A ten-minute tool call: no deadline while it runs.
    assert_eq!(gens.poll_timeout(), None);
    gens.handle_timeout(start + 10 * IDLE);
    assert_eq!(gens.poll_idle_stop(), None);
    // Its answer: the idle time counts from there.
    let answered = start + 10 * IDLE;
    gens.handle_received(&answer(7), answered);
    assert_eq!(gens.poll_timeout(), Some(answered + IDLE));
}

#[test]
fn the_next_send_starts_a_generation_runs_its_initialization_and_then_goes() {
    let start = Instant::now();
    // Even with `WhileDown::Fail`: a resting child is not down.
    let mut gens = running(start, WhileDown::Fail);
    let idle_at = start + IDLE;
    gens.handle_timeout(idle_at);
    assert_eq!(gens.poll_idle_stop(), Some(1));
    gens.handle_ended(stopped_report(), idle_at);
    let Some(GenerationEvent::Exited(report)) = gens.poll_event() else {
        panic!("the stopped generation's report comes first")
    };
    assert!(report.stopped_when_idle);
    assert!(report.to_string().contains("stopped when idle"), "{report}");
    assert!(gens.poll_event().is_none());
    // Resting: nothing is scheduled, nothing restarts by itself.
    assert_eq!(gens.poll_timeout(), None);
    let hour = idle_at + Duration::from_secs(3600);
    assert!(!gens.restart_due(hour));
    assert!(!gens.is_over());

    // A send an hour later: it waits, and the start is due at once.
    assert!(matches!(
        gens.handle_send(&request(8), hour, None),
        SendStep::Wait { after: 1, .. }
    ));
    assert!(gens.restart_due(hour));
    gens.handle_spawned(hour);
    // While the new generation initializes, another send waits too.
    assert!(matches!(
        gens.handle_send(NOTIFICATION, hour, None),
        SendStep::Wait { .. }
    ));
    gens.handle_initialized(hour);
    assert_eq!(gens.running(), Some(2));
    assert!(matches!(
        gens.handle_send(&request(8), hour, None),
        SendStep::Send { generation: 2, .. }
    ));
}

#[test]
fn a_send_while_the_idle_generation_is_stopping_starts_the_next_at_its_end() {
    let start = Instant::now();
    let mut gens = running(start, WhileDown::Wait);
    gens.handle_timeout(start + IDLE);
    assert_eq!(gens.poll_idle_stop(), Some(1));
    let during = start + IDLE + Duration::from_millis(1);
    assert!(matches!(
        gens.handle_send(&request(1), during, None),
        SendStep::Wait { .. }
    ));
    assert!(
        !gens.restart_due(during),
        "not before the stopped one ended"
    );
    let ended = during + Duration::from_millis(5);
    gens.handle_ended(stopped_report(), ended);
    assert!(gens.restart_due(ended));
}

#[test]
fn a_send_cut_short_by_the_idle_stop_is_sent_again_to_the_next_generation() {
    let start = Instant::now();
    let mut gens = running(start, WhileDown::Fail);
    // A notification under way when the stop is decided (it set the idle
    // clock, so the clock moved past it: a slow write).
    let SendStep::Send { ticket, .. } = gens.handle_send(NOTIFICATION, start, None) else {
        panic!()
    };
    gens.handle_timeout(start + IDLE);
    assert_eq!(gens.poll_idle_stop(), Some(1));
    assert_eq!(
        gens.handle_sent(ticket, Err(Closed::Closing)),
        AfterSend::Retry
    );
}

#[test]
fn a_crash_after_a_wake_counts_as_down_again() {
    let start = Instant::now();
    let mut gens = running(start, WhileDown::Fail);
    gens.handle_timeout(start + IDLE);
    let _ = gens.poll_idle_stop();
    gens.handle_ended(stopped_report(), start + IDLE);
    let wake = start + 2 * IDLE;
    let _ = gens.handle_send(&request(1), wake, None);
    gens.handle_spawned(wake);
    gens.handle_initialized(wake);
    // Generation 2 crashes: with `WhileDown::Fail`, sends fail while it is down.
    gens.handle_ended(
        ExitReport::new(Exit::Signal(9), EndedBy::OnItsOwn, Duration::ZERO),
        wake,
    );
    assert!(matches!(
        gens.handle_send(NOTIFICATION, wake, None),
        SendStep::Refuse(Closed::Exited, _)
    ));
}

#[test]
fn a_stop_while_resting_ends_the_supervision() {
    let start = Instant::now();
    let mut gens = running(start, WhileDown::Wait);
    gens.handle_timeout(start + IDLE);
    let _ = gens.poll_idle_stop();
    gens.handle_ended(stopped_report(), start + IDLE);
    gens.handle_stop();
    assert!(gens.is_over());
    assert!(matches!(
        gens.handle_send(NOTIFICATION, start + IDLE, None),
        SendStep::Refuse(Closed::Closing, _)
    ));
}

#[test]
fn without_idle_stop_nothing_is_scheduled_while_running() {
    let start = Instant::now();
    let mut gens = Generations::new(GenerationsConfig::default(), start);
    gens.handle_spawned(start);
    gens.handle_initialized(start);
    assert_eq!(gens.poll_timeout(), None);
    gens.handle_timeout(start + 100 * IDLE);
    assert_eq!(gens.poll_idle_stop(), None);
}
