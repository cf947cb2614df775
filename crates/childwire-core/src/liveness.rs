//! Whether a running server answers, works or hangs, from a protocol ping
//! with a deadline, the CPU time of its process tree and its output.
//!
//! A server stopped by SIGSTOP or deadlocked and one busy in a two-minute
//! tool call both leave a ping unanswered; only the second uses CPU or
//! sends progress. [`Liveness`] tells them apart, as a sans-IO machine: the
//! adapter sends the pings it asks for, reads the tree's CPU time when it
//! asks (`childwire_async::tree_cpu_time`), and passes in answers and
//! output; it hands out a [`Verdict`] whenever the verdict changes.

use std::time::{Duration, Instant};

/// What [`Liveness`] says of a server.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// It answered its last ping, or the one in flight is not late yet.
    Answering,
    /// A ping went unanswered, but its CPU time advanced or it sent output
    /// within [`LivenessConfig::hung_after`]: it is working.
    Busy,
    /// No answer, no CPU time and no output for
    /// [`LivenessConfig::hung_after`].
    Hung,
}

/// The timings of a [`Liveness`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LivenessConfig {
    /// Time between pings (from one sent to the next). Default 15 s.
    pub ping_every: Duration,
    /// How long a ping may go unanswered before it counts as missed.
    /// Default 5 s.
    pub ping_timeout: Duration,
    /// How long without any sign of life (an answer, CPU time, output)
    /// makes a server hung. Longer than the longest time the server may
    /// spend waiting idle without answering pings (on the network, say):
    /// such a wait shows no CPU time either. Default 60 s.
    pub hung_after: Duration,
    /// How often to read the tree's CPU time. Default 1 s.
    pub cpu_every: Duration,
}

impl Default for LivenessConfig {
    fn default() -> Self {
        Self {
            ping_every: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(5),
            hung_after: Duration::from_secs(60),
            cpu_every: Duration::from_secs(1),
        }
    }
}

/// The shortest period: a zero `ping_every` or `cpu_every` is taken as
/// this, so that the machine never asks to be called again at once forever.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// A running server's liveness, as a pure state machine.
///
/// # How to drive it
///
/// Create it with [`Liveness::new`] when watching starts (after the
/// server's initialization, for protocols that want it before a ping).
/// Inputs, each with the current time:
/// - [`handle_ping_sent`](Self::handle_ping_sent): a ping went out;
/// - [`handle_ping_answered`](Self::handle_ping_answered): an answer to a
///   ping came back (a late one too; an error answer counts: the server
///   read and answered it);
/// - [`handle_output`](Self::handle_output): anything else came from the
///   server (a message, a progress notification);
/// - [`handle_cpu`](Self::handle_cpu): the tree's total CPU time, read
///   when [`poll_cpu`](Self::poll_cpu) asked;
/// - [`handle_timeout`](Self::handle_timeout): early and repeated calls are
///   harmless.
///
/// After every input drain:
/// 1. [`poll_ping`](Self::poll_ping): send a ping now (then report it);
/// 2. [`poll_cpu`](Self::poll_cpu): read the CPU time now (then report it);
/// 3. [`poll_verdict`](Self::poll_verdict): the verdict, when it changed;
/// 4. [`poll_timeout`](Self::poll_timeout): when to call
///    [`handle_timeout`](Self::handle_timeout).
///
/// One ping is in flight at a time; a ping missed frees the slot for the
/// next one, `ping_every` after it was sent. CPU time that only goes down
/// (a descendant reaped without being counted) is not a sign of life.
/// `now` should be monotonic; an earlier `now` never panics.
///
/// ```
/// use std::time::{Duration, Instant};
/// use childwire_core::liveness::{Liveness, LivenessConfig, Verdict};
///
/// let start = Instant::now();
/// let mut config = LivenessConfig::default();
/// config.hung_after = Duration::from_secs(10);
/// let mut liveness = Liveness::new(config, start);
/// assert!(liveness.poll_ping(start));
/// liveness.handle_ping_sent(start);
/// liveness.handle_ping_answered(start + Duration::from_millis(3));
/// assert_eq!(liveness.poll_verdict(), Some(Verdict::Answering));
/// // Stopped: nothing answers, no CPU time, no output.
/// let later = start + Duration::from_secs(11);
/// liveness.handle_timeout(later);
/// assert_eq!(liveness.poll_verdict(), Some(Verdict::Hung));
/// ```
#[derive(Debug, Clone)]
pub struct Liveness {
    config: LivenessConfig,
    /// The last sign of life (the start counts as one).
    last_sign: Instant,
    /// The ping in flight: when it was sent.
    in_flight: Option<Instant>,
    /// When the next ping is due (if none is in flight).
    next_ping: Instant,
    /// A ping was answered since watching started.
    answered: bool,
    /// A ping was missed and none answered since.
    missed: bool,
    /// Some sign of work (CPU time, output) was seen since the last answer.
    worked: bool,
    /// The last CPU time read.
    cpu: Option<Duration>,
    /// When to read it next.
    next_cpu: Instant,
    verdict: Option<Verdict>,
    reported: Option<Verdict>,
}

impl Liveness {
    /// Starts watching at `now`: a ping and a CPU reading are due at once.
    #[must_use]
    pub fn new(mut config: LivenessConfig, now: Instant) -> Self {
        config.ping_every = config.ping_every.max(MIN_PERIOD);
        config.cpu_every = config.cpu_every.max(MIN_PERIOD);
        Self {
            config,
            last_sign: now,
            in_flight: None,
            next_ping: now,
            answered: false,
            missed: false,
            worked: false,
            cpu: None,
            next_cpu: now,
            verdict: None,
            reported: None,
        }
    }

    // ---- getters ----

    /// The verdict now (`None` until the first answer, missed ping, sign
    /// of work or hang).
    #[must_use]
    pub fn verdict(&self) -> Option<Verdict> {
        self.verdict
    }

    /// The configuration (zero periods raised to 1 ms).
    #[must_use]
    pub fn config(&self) -> &LivenessConfig {
        &self.config
    }

    /// When the last sign of life came (the start counts as one).
    #[must_use]
    pub fn last_sign(&self) -> Instant {
        self.last_sign
    }

    // ---- inputs ----

    /// A ping went out at `now`.
    pub fn handle_ping_sent(&mut self, now: Instant) {
        self.in_flight = Some(now);
        self.next_ping = now.checked_add(self.config.ping_every).unwrap_or(now);
        self.update(now);
    }

    /// A ping's answer came back at `now`.
    pub fn handle_ping_answered(&mut self, now: Instant) {
        self.in_flight = None;
        self.answered = true;
        self.missed = false;
        self.worked = false;
        self.sign(now);
    }

    /// Something other than a ping's answer came from the server at `now`.
    pub fn handle_output(&mut self, now: Instant) {
        self.worked = true;
        self.sign(now);
    }

    /// The tree's total CPU time (user and system, its reaped descendants
    /// included), read at `now`.
    pub fn handle_cpu(&mut self, total: Duration, now: Instant) {
        let advanced = self.cpu.is_some_and(|before| total > before);
        self.cpu = Some(total);
        self.next_cpu = now.checked_add(self.config.cpu_every).unwrap_or(now);
        if advanced {
            self.worked = true;
            self.sign(now);
        } else {
            self.update(now);
        }
    }

    /// The time has come, or not.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.update(now);
    }

    fn sign(&mut self, now: Instant) {
        self.last_sign = self.last_sign.max(now);
        self.update(now);
    }

    /// Lets `now` miss the ping in flight, and decides the verdict.
    fn update(&mut self, now: Instant) {
        if let Some(sent) = self.in_flight {
            if sent
                .checked_add(self.config.ping_timeout)
                .is_some_and(|deadline| now >= deadline)
            {
                self.in_flight = None;
                self.missed = true;
            }
        }
        let hung = self
            .last_sign
            .checked_add(self.config.hung_after)
            .is_some_and(|at| now >= at);
        self.verdict = if hung {
            Some(Verdict::Hung)
        } else if self.answered && !self.missed {
            Some(Verdict::Answering)
        } else if self.missed || self.worked {
            Some(Verdict::Busy)
        } else {
            self.verdict.filter(|&verdict| verdict != Verdict::Hung)
        };
    }

    // ---- outputs ----

    /// Whether to send a ping now: none is in flight and the next is due.
    #[must_use]
    pub fn poll_ping(&self, now: Instant) -> bool {
        self.in_flight.is_none() && now >= self.next_ping
    }

    /// Whether to read the tree's CPU time now.
    #[must_use]
    pub fn poll_cpu(&self, now: Instant) -> bool {
        now >= self.next_cpu
    }

    /// The verdict, once each time it changes.
    #[must_use]
    pub fn poll_verdict(&mut self) -> Option<Verdict> {
        if self.verdict == self.reported {
            return None;
        }
        self.reported = self.verdict;
        self.verdict
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) (and poll
    /// again): the next ping, the ping in flight's deadline, the next CPU
    /// reading, or the moment the server would be hung.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ping = match self.in_flight {
            Some(sent) => sent.checked_add(self.config.ping_timeout),
            None => Some(self.next_ping),
        };
        let hung = match self.verdict {
            Some(Verdict::Hung) => None,
            _ => self.last_sign.checked_add(self.config.hung_after),
        };
        [ping, Some(self.next_cpu), hung]
            .into_iter()
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A server on a simulated clock: whether it answers pings (after
    /// `answer_after`), whether its CPU time advances, from when.
    struct Server {
        answers: bool,
        answer_after: Duration,
        cpu_per_ms: u32,
    }

    /// Drives `liveness` from `start` to `until`, always to the earliest
    /// deadline (a ping's answer or the machine's timeout); the server's
    /// behaviour may change at `switch` to `after`. Returns every verdict
    /// with the time it was handed out.
    fn run(
        liveness: &mut Liveness,
        start: Instant,
        until: Instant,
        mut server: Server,
        switch: Option<(Instant, Server)>,
    ) -> Vec<(Duration, Verdict)> {
        let mut switch = switch;
        let mut verdicts = Vec::new();
        let mut cpu = Duration::ZERO;
        let mut cpu_at = start;
        let mut answer_at: Option<Instant> = None;
        let mut now = start;
        loop {
            if let Some((at, _)) = &switch {
                if now >= *at {
                    let (_, next) = switch.take().expect("checked");
                    server = next;
                }
            }
            cpu += (now - cpu_at) * server.cpu_per_ms / 1000;
            cpu_at = now;
            if answer_at.is_some_and(|at| now >= at) && server.answers {
                answer_at = None;
                liveness.handle_ping_answered(now);
            }
            liveness.handle_timeout(now);
            if liveness.poll_ping(now) {
                liveness.handle_ping_sent(now);
                answer_at = Some(now + server.answer_after);
            }
            if liveness.poll_cpu(now) {
                liveness.handle_cpu(cpu, now);
            }
            while let Some(verdict) = liveness.poll_verdict() {
                verdicts.push((now - start, verdict));
            }
            let next = [
                liveness.poll_timeout(),
                answer_at.filter(|_| server.answers),
            ]
            .into_iter()
            .flatten()
            .chain(switch.as_ref().map(|(at, _)| *at))
            .min()
            .expect("the machine always has a next deadline");
            assert!(next >= now, "the timeout went back: {next:?} < {now:?}");
            // Time moves at least a millisecond: a deadline at `now` was
            // handled above.
            now = next.max(now + MS);
            if now > until {
                return verdicts;
            }
        }
    }

    fn config() -> LivenessConfig {
        LivenessConfig {
            ping_every: 200 * MS,
            ping_timeout: 100 * MS,
            hung_after: 1000 * MS,
            cpu_every: 50 * MS,
        }
    }

    #[test]
    fn a_server_stopped_with_sigstop_is_hung_within_the_configured_time() {
        let start = Instant::now();
        let mut liveness = Liveness::new(config(), start);
        let answering = Server {
            answers: true,
            answer_after: 2 * MS,
            cpu_per_ms: 10,
        };
        // SIGSTOP at 3 s: no answer, no CPU time, no output.
        let stopped = Server {
            answers: false,
            answer_after: 2 * MS,
            cpu_per_ms: 0,
        };
        let stop = start + 3000 * MS;
        let verdicts = run(
            &mut liveness,
            start,
            start + 6000 * MS,
            answering,
            Some((stop, stopped)),
        );
        assert_eq!(verdicts[0], (2 * MS, Verdict::Answering), "{verdicts:?}");
        let hung = verdicts
            .iter()
            .find(|(_, verdict)| *verdict == Verdict::Hung)
            .expect("declared hung");
        // The last sign came at most a CPU period before the stop.
        assert!(
            hung.0 <= 3000 * MS + config().hung_after,
            "hung only at {:?}: {verdicts:?}",
            hung.0
        );
        assert!(
            hung.0 >= 3000 * MS + config().hung_after - config().cpu_every,
            "hung too early, at {:?}: {verdicts:?}",
            hung.0
        );
        // Between the stop and the hang: a missed ping makes it busy (its
        // last CPU time still counts) or it goes straight to hung.
        assert!(
            verdicts
                .iter()
                .filter(|(at, _)| *at > 3000 * MS)
                .all(|(_, verdict)| *verdict != Verdict::Answering),
            "{verdicts:?}"
        );
        assert_eq!(liveness.verdict(), Some(Verdict::Hung));
        assert_eq!(liveness.poll_verdict(), None, "handed out once");
    }

    #[test]
    fn a_server_computing_for_twice_the_hung_time_is_busy_not_hung() {
        let start = Instant::now();
        let mut liveness = Liveness::new(config(), start);
        let computing = Server {
            answers: false,
            answer_after: Duration::ZERO,
            cpu_per_ms: 1000,
        };
        let done = Server {
            answers: true,
            answer_after: 2 * MS,
            cpu_per_ms: 0,
        };
        let end = start + 2 * config().hung_after;
        let verdicts = run(
            &mut liveness,
            start,
            end + 500 * MS,
            computing,
            Some((end, done)),
        );
        assert!(
            !verdicts
                .iter()
                .any(|(_, verdict)| *verdict == Verdict::Hung),
            "{verdicts:?}"
        );
        assert_eq!(
            verdicts.first().map(|(_, verdict)| *verdict),
            Some(Verdict::Busy),
            "{verdicts:?}"
        );
        assert_eq!(liveness.verdict(), Some(Verdict::Answering), "{verdicts:?}");
    }

    #[test]
    fn output_is_a_sign_of_life_and_a_late_answer_revives_a_hung_server() {
        let start = Instant::now();
        let mut liveness = Liveness::new(config(), start);
        liveness.handle_ping_sent(start);
        liveness.handle_cpu(Duration::from_secs(1), start);
        // Missed at 100 ms, no CPU: busy (the start counts as a sign).
        liveness.handle_timeout(start + 100 * MS);
        assert_eq!(liveness.poll_verdict(), Some(Verdict::Busy));
        // Progress at 900 ms keeps it from hanging at 1 s.
        liveness.handle_output(start + 900 * MS);
        liveness.handle_timeout(start + 1500 * MS);
        assert_eq!(liveness.poll_verdict(), None);
        assert!(
            liveness
                .poll_timeout()
                .is_some_and(|at| at <= start + 1900 * MS),
            "called again by the time it would hang"
        );
        liveness.handle_timeout(start + 1900 * MS);
        assert_eq!(liveness.poll_verdict(), Some(Verdict::Hung));
        // CPU time that went down (a descendant reaped) is no sign.
        liveness.handle_cpu(Duration::from_millis(500), start + 1950 * MS);
        assert_eq!(liveness.verdict(), Some(Verdict::Hung));
        liveness.handle_ping_answered(start + 2000 * MS);
        assert_eq!(liveness.poll_verdict(), Some(Verdict::Answering));
    }

    #[test]
    fn one_ping_is_in_flight_at_a_time_and_a_missed_one_frees_the_slot() {
        let start = Instant::now();
        let mut liveness = Liveness::new(config(), start);
        assert!(liveness.poll_ping(start));
        liveness.handle_ping_sent(start);
        assert!(!liveness.poll_ping(start + 50 * MS), "one in flight");
        assert_eq!(
            liveness.poll_timeout(),
            Some(start),
            "the CPU reading is due"
        );
        liveness.handle_cpu(Duration::ZERO, start);
        assert_eq!(liveness.poll_timeout(), Some(start + 50 * MS));
        liveness.handle_timeout(start + 100 * MS);
        assert!(
            !liveness.poll_ping(start + 100 * MS),
            "missed, next not due"
        );
        assert!(
            liveness.poll_ping(start + 200 * MS),
            "due ping_every after the last"
        );
        // A zero period is raised, so the machine never spins.
        let mut zero = config();
        zero.ping_every = Duration::ZERO;
        zero.cpu_every = Duration::ZERO;
        let mut liveness = Liveness::new(zero, start);
        liveness.handle_cpu(Duration::ZERO, start);
        assert_eq!(liveness.poll_timeout(), Some(start), "the first ping");
        liveness.handle_ping_sent(start);
        assert_eq!(liveness.poll_timeout(), Some(start + MS));
    }
}
