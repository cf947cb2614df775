//! A model of the [`RestartPolicy`] rules checked against the real policy
//! after every input. The property test and the fuzz target hold the
//! policy to the same rules; each brings its own way of generating [`Op`]s
//! (with the `arbitrary` feature, `Op` implements `Arbitrary`).
//!
//! The model is written the obvious way, from the rules in the policy's
//! docs: it keeps every restart it saw in a list and counts the streak and
//! the window from it, where the policy keeps bounded counters. It checks
//! that an expected end always stops, that the policy restarts exactly when
//! neither the budget nor the window is spent (and gives up with the right
//! reason otherwise), that each wait is the backoff for its place in the
//! streak less at most its jitter, that the history lists the newest
//! generations in order, and that `poll_timeout` names the restart.

use std::time::{Duration, Instant};

use crate::restart::{
    GiveUpReason, MAX_HISTORY, RestartConfig, RestartPolicy, RestartVerdict, backoff,
};

/// One input to the policy, or a move of the clock.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// [`RestartPolicy::handle_started`]; while a restart is awaited, only
    /// once its instant came (the clock moves there first).
    Start,
    /// [`RestartPolicy::handle_exit`].
    Exit {
        /// Whether the end was unexpected.
        unexpected: bool,
    },
    /// [`RestartPolicy::handle_spawn_failed`].
    SpawnFailed,
    /// [`RestartPolicy::handle_stop`].
    Stop,
    /// [`RestartPolicy::handle_timeout`] with the current time.
    Timeout,
    /// Moves the clock this far forward, then `handle_timeout`.
    Advance(Duration),
    /// Moves the clock to `poll_timeout`, then `handle_timeout`.
    AdvanceToDeadline,
}

/// Clock steps of up to 65.535 s, so a sequence of them cannot overflow an
/// `Instant`.
#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Op {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0..=6u8)? {
            0 => Op::Start,
            1 => Op::Exit {
                unexpected: u.arbitrary()?,
            },
            2 => Op::SpawnFailed,
            3 => Op::Timeout,
            4 => Op::Stop,
            5 => Op::Advance(Duration::from_millis(u64::from(u.arbitrary::<u16>()?))),
            _ => Op::AdvanceToDeadline,
        })
    }
}

/// A broken rule, said in words.
pub type Violation = String;

macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// What the model expects of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Idle,
    Running(Instant),
    Waiting(Instant),
    Over,
}

/// Plays ops against a `RestartPolicy` and checks the rules after each.
pub struct Checker {
    policy: RestartPolicy,
    config: RestartConfig,
    now: Instant,
    state: Expect,
    /// When each restart was decided, and whether it began a streak anew
    /// (its generation's predecessor had been stable): all of them.
    restarts: Vec<Instant>,
    /// Restarts since the last stable generation.
    streak: u32,
    /// Generations started (the policy numbers them so).
    starts: u32,
    /// The caller stopped the supervision: every exit now gives `Stop`.
    stopped: bool,
    /// (number, started, ended, unexpected) of every generation that ended.
    generations: Vec<(u32, Instant, Instant, bool)>,
}

impl Checker {
    /// A checker over a new policy with `config` and `seed`, its clock at
    /// `start`.
    pub fn new(config: RestartConfig, seed: u64, start: Instant) -> Self {
        Self {
            policy: RestartPolicy::new(config.clone(), seed),
            config,
            now: start,
            state: Expect::Idle,
            restarts: Vec::new(),
            streak: 0,
            starts: 0,
            stopped: false,
            generations: Vec::new(),
        }
    }

    /// Applies one op and checks the rules.
    pub fn apply(&mut self, op: &Op) -> Result<(), Violation> {
        match *op {
            Op::Start => {
                if let Expect::Waiting(at) = self.state {
                    self.now = self.now.max(at);
                }
                self.start();
                self.policy.handle_started(self.now);
            }
            Op::Exit { unexpected } => self.exit(unexpected, false)?,
            Op::SpawnFailed => self.exit(true, true)?,
            Op::Stop => {
                if self.state != Expect::Over {
                    self.state = Expect::Over;
                    self.stopped = true;
                }
                self.policy.handle_stop();
            }
            Op::Timeout => self.timeout(),
            Op::Advance(step) => {
                self.now += step;
                self.timeout();
            }
            Op::AdvanceToDeadline => {
                if let Some(at) = self.policy.poll_timeout() {
                    self.now = self.now.max(at);
                }
                self.timeout();
            }
        }
        self.check_timeout()
    }

    /// `handle_timeout`: a generation up for `stable_after` refills the
    /// budget now.
    fn timeout(&mut self) {
        if let Expect::Running(since) = self.state {
            if self.now.saturating_duration_since(since) >= self.config.stable_after {
                self.streak = 0;
            }
        }
        self.policy.handle_timeout(self.now);
    }

    fn start(&mut self) {
        self.stopped = false;
        if self.state == Expect::Over {
            self.restarts.clear();
            self.streak = 0;
            self.starts = 0;
            self.generations.clear();
        }
        self.starts += 1;
        self.state = Expect::Running(self.now);
    }

    fn exit(&mut self, unexpected: bool, spawn_failed: bool) -> Result<(), Violation> {
        let repeated = matches!(self.state, Expect::Waiting(_) | Expect::Over);
        let before = self.policy.history().copied().collect::<Vec<_>>();
        let verdict = if spawn_failed {
            self.start();
            self.policy.handle_spawn_failed(self.now)
        } else {
            if self.state == Expect::Idle {
                self.start();
            }
            self.policy.handle_exit(self.now, unexpected)
        };
        if repeated && !spawn_failed {
            // A second report of the same end repeats the verdict and
            // changes nothing.
            let after = self.policy.history().copied().collect::<Vec<_>>();
            check!(before == after, "a repeated exit changed the history");
            match (self.state, &verdict) {
                (Expect::Waiting(at), RestartVerdict::Restart { at: again, .. }) => {
                    check!(*again == at, "a repeated exit moved the restart");
                }
                (Expect::Over, RestartVerdict::Stop) => {}
                (Expect::Over, RestartVerdict::GiveUp { .. }) => {
                    check!(!self.stopped, "gave up after the caller stopped");
                }
                (state, verdict) => {
                    return Err(format!("repeated exit in {state:?} gave {verdict:?}"));
                }
            }
            return Ok(());
        }
        let Expect::Running(since) = self.state else {
            return Err(format!("exit in unexpected state {:?}", self.state));
        };
        let unexpected = unexpected || spawn_failed;
        if self.now.saturating_duration_since(since) >= self.config.stable_after {
            self.streak = 0;
        }
        self.generations
            .push((self.starts, since, self.now, unexpected));
        self.check_history()?;

        let window_count = self
            .restarts
            .iter()
            .filter(|&&at| self.now.saturating_duration_since(at) < self.config.window)
            .count();
        let expected_reason = if !unexpected {
            None
        } else if self.streak >= self.config.budget {
            Some(GiveUpReason::BudgetSpent {
                restarts: self.streak,
                stable_after: self.config.stable_after,
            })
        } else if window_count >= self.config.max_in_window as usize {
            Some(GiveUpReason::TooManyInWindow {
                restarts: self.config.max_in_window,
                window: self.config.window,
            })
        } else {
            None
        };
        match verdict {
            RestartVerdict::Stop => {
                check!(!unexpected, "an unexpected exit stopped without a reason");
                self.state = Expect::Over;
            }
            RestartVerdict::GiveUp { reason, history } => {
                check!(
                    expected_reason == Some(reason),
                    "gave up with {reason:?}, expected {expected_reason:?} (streak {}, {window_count} in window)",
                    self.streak
                );
                let listed: Vec<_> = self.policy.history().copied().collect();
                check!(
                    history == listed,
                    "the verdict's history is not the policy's"
                );
                self.state = Expect::Over;
            }
            RestartVerdict::Restart { at, delay, attempt } => {
                check!(unexpected, "an expected exit was restarted");
                check!(
                    expected_reason.is_none(),
                    "restarted where it should give up: {expected_reason:?}"
                );
                self.streak += 1;
                self.restarts.push(self.now);
                check!(
                    attempt == self.streak,
                    "attempt {attempt}, expected {}",
                    self.streak
                );
                check!(at == self.now + delay, "at is not now + delay");
                let full = backoff(&self.config, self.streak);
                let model = model_backoff(&self.config, self.streak);
                // Two ways of computing the same power differ in rounding.
                let slack = Duration::from_micros(1) + model.mul_f64(1e-9);
                check!(
                    full <= model + slack && model <= full + slack,
                    "backoff {full:?} for attempt {}, expected {model:?}",
                    self.streak
                );
                let jitter = if self.config.jitter.is_nan() {
                    0.0
                } else {
                    self.config.jitter.clamp(0.0, 1.0)
                };
                let least = full.mul_f64(1.0 - jitter);
                check!(
                    delay <= full && delay + Duration::from_micros(1) >= least,
                    "delay {delay:?} outside [{least:?}, {full:?}]"
                );
                self.state = Expect::Waiting(at);
            }
        }
        Ok(())
    }

    /// The history is the newest generations, numbered in order.
    fn check_history(&self) -> Result<(), Violation> {
        let history: Vec<_> = self.policy.history().copied().collect();
        let keep = (self.config.budget.max(self.config.max_in_window) as usize + 1)
            .min(MAX_HISTORY)
            .min(self.generations.len());
        check!(
            history.len() == keep,
            "history holds {}, expected {keep}",
            history.len()
        );
        let first = self.generations.len() - keep;
        for (offset, generation) in history.iter().enumerate() {
            let (number, started, ended, unexpected) = self.generations[first + offset];
            check!(
                generation.number == number
                    && generation.started == started
                    && generation.ended == ended
                    && generation.unexpected == unexpected,
                "history entry {offset} is {generation:?}, expected #{number} {started:?}..{ended:?}"
            );
        }
        Ok(())
    }

    fn check_timeout(&self) -> Result<(), Violation> {
        let timeout = self.policy.poll_timeout();
        match self.state {
            Expect::Waiting(at) => check!(
                timeout == Some(at),
                "waiting for {at:?}, poll_timeout says {timeout:?}"
            ),
            Expect::Running(since) => check!(
                timeout.is_none() || timeout == since.checked_add(self.config.stable_after),
                "running since {since:?}, poll_timeout says {timeout:?}"
            ),
            Expect::Idle | Expect::Over => {
                check!(timeout.is_none(), "nothing to wait for, but {timeout:?}");
            }
        }
        check!(
            self.policy.budget_left() <= self.config.budget,
            "more budget than configured"
        );
        Ok(())
    }
}

/// The backoff by repeated multiplication, capped at every step.
fn model_backoff(config: &RestartConfig, attempt: u32) -> Duration {
    let multiplier = if config.multiplier.is_finite() && config.multiplier >= 1.0 {
        config.multiplier
    } else {
        1.0
    };
    let cap = config.max_backoff.as_secs_f64();
    let mut secs = config.initial_backoff.as_secs_f64();
    for _ in 1..attempt {
        if secs >= cap {
            break;
        }
        secs *= multiplier;
    }
    Duration::from_secs_f64(secs.min(cap))
}
