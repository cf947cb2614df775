//! Waiting for a condition with a deadline.

use std::thread;
use std::time::{Duration, Instant};

/// How often [`wait_until`] re-checks its condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Polls `cond` every [`POLL_INTERVAL`] until it holds or `deadline` has passed; returns whether
/// it held.
///
/// This waits for an event that has no notification to await (a process disappearing from
/// `/proc`, say): it returns as soon as the event is seen, and the deadline only bounds a
/// failure. The condition is checked once more at the deadline, so a zero deadline still checks
/// once.
pub fn wait_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        thread::sleep(POLL_INTERVAL.min(end - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_as_soon_as_the_condition_holds() {
        let mut calls = 0;
        let start = Instant::now();
        assert!(wait_until(Duration::from_secs(10), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn gives_up_at_the_deadline_and_checks_at_least_once() {
        let mut calls = 0;
        let start = Instant::now();
        assert!(!wait_until(Duration::from_millis(30), || {
            calls += 1;
            false
        }));
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(calls >= 2, "checked {calls} times");

        let mut zero_calls = 0;
        assert!(!wait_until(Duration::ZERO, || {
            zero_calls += 1;
            false
        }));
        assert_eq!(zero_calls, 1);
    }
}
