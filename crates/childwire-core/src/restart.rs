//! When to restart a child that ended unexpectedly, and when to give up.
//!
//! The MCP specification (2026-07-28, stdio, "Unexpected termination") asks
//! a client to restart a server that dies unexpectedly. Restarting at once
//! and forever turns a server that crashes on start-up into a busy loop, so
//! [`RestartPolicy`] spaces the restarts out (exponential backoff with
//! jitter), limits them (a budget of restarts in a row, refilled only by a
//! child that stayed up, and a cap on restarts within a sliding window), and
//! ends with a verdict that names why it gave up and lists every
//! generation that counted.
//!
//! It is sans-IO like the rest of the core: the driver passes in the time
//! and a seed for the jitter, spawns the child itself and waits for the
//! instant the policy names.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// The most generations a [`RestartPolicy`] keeps in its history, whatever
/// its limits say.
pub const MAX_HISTORY: usize = 1024;

/// The limits of a [`RestartPolicy`].
///
/// ```
/// use std::time::Duration;
/// use childwire_core::restart::{RestartConfig, backoff};
///
/// // Three quick tries, at most 5 s apart, then the verdict; a server up
/// // for a minute has earned three more.
/// let mut config = RestartConfig::default();
/// config.budget = 3;
/// config.max_backoff = Duration::from_secs(5);
/// config.stable_after = Duration::from_secs(60);
/// assert_eq!(backoff(&config, 3), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RestartConfig {
    /// The wait before the first restart of a streak. Default 250 ms.
    pub initial_backoff: Duration,
    /// The longest wait between an exit and the restart. Default 30 s.
    pub max_backoff: Duration,
    /// How much the wait grows with each restart in a row. Default 2.
    /// Values below 1 (or not finite) count as 1: the wait never shrinks
    /// within a streak.
    pub multiplier: f64,
    /// How much of the wait is random, from 0 (none) to 1 (anywhere from
    /// zero to the full wait). The wait is drawn from
    /// `[wait × (1 − jitter), wait]`, so servers restarted together do not
    /// come back in lockstep. Default 0.2. Clamped to `0..=1`.
    pub jitter: f64,
    /// Restarts in a row allowed without a generation that stayed up for
    /// [`stable_after`](Self::stable_after). The next unexpected exit after
    /// that many ends in [`GiveUpReason::BudgetSpent`]. Default 5; 0 never
    /// restarts.
    pub budget: u32,
    /// How long a generation must stay up for the budget to refill and the
    /// backoff to start over. Default 30 s.
    pub stable_after: Duration,
    /// At most this many restarts within [`window`](Self::window), however
    /// long each generation stayed up: a guard against a child that
    /// crashes every minute forever. Default 10.
    pub max_in_window: u32,
    /// The sliding window of [`max_in_window`](Self::max_in_window).
    /// Default 10 minutes.
    pub window: Duration,
}

impl Default for RestartConfig {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(30),
            multiplier: 2.0,
            jitter: 0.2,
            budget: 5,
            stable_after: Duration::from_secs(30),
            max_in_window: 10,
            window: Duration::from_secs(600),
        }
    }
}

/// One run of the child, as the policy saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    /// Its number: 1 for the first spawn, counting every start since the
    /// policy was created (or last restarted by the caller after a verdict).
    pub number: u32,
    /// When it was started ([`RestartPolicy::handle_started`]).
    pub started: Instant,
    /// When it ended ([`RestartPolicy::handle_exit`]).
    pub ended: Instant,
    /// Whether it ended unexpectedly (not asked to).
    pub unexpected: bool,
}

impl Generation {
    /// How long it stayed up.
    #[must_use]
    pub fn uptime(&self) -> Duration {
        self.ended.saturating_duration_since(self.started)
    }
}

/// Why a [`RestartPolicy`] stopped restarting, said in words by its
/// `Display`.
///
/// ```
/// use std::time::Duration;
/// use childwire_core::restart::GiveUpReason;
///
/// let reason = GiveUpReason::BudgetSpent { restarts: 5, stable_after: Duration::from_secs(30) };
/// assert_eq!(
///     reason.to_string(),
///     "it ended again after 5 restarts in a row, none of which stayed up 30.0 s"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUpReason {
    /// This many restarts in a row were spent and the child still ended
    /// before it had stayed up long enough to refill the budget.
    BudgetSpent {
        /// The restarts in the streak ([`RestartConfig::budget`]).
        restarts: u32,
        /// What a generation needed to refill it
        /// ([`RestartConfig::stable_after`]).
        stable_after: Duration,
    },
    /// This many restarts already happened within the window.
    TooManyInWindow {
        /// The restarts within the window ([`RestartConfig::max_in_window`]).
        restarts: u32,
        /// The window ([`RestartConfig::window`]).
        window: Duration,
    },
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GiveUpReason::BudgetSpent {
                restarts,
                stable_after,
            } => write!(
                f,
                "it ended again after {restarts} restart{} in a row, none of which stayed up {}",
                plural(restarts),
                Secs(stable_after)
            ),
            GiveUpReason::TooManyInWindow { restarts, window } => write!(
                f,
                "it was already restarted {restarts} time{} within {}",
                plural(restarts),
                Secs(window)
            ),
        }
    }
}

/// What to do after a child ended, from [`RestartPolicy::handle_exit`].
#[derive(Debug, Clone, PartialEq)]
pub enum RestartVerdict {
    /// Spawn the child again at `at` (`poll_timeout` says the same).
    Restart {
        /// When to spawn it: the exit's time plus `delay`.
        at: Instant,
        /// The wait, jitter included.
        delay: Duration,
        /// Which restart in a row this is (1 for the first after a stable
        /// run).
        attempt: u32,
    },
    /// The end was asked for: nothing to restart.
    Stop,
    /// The budget is spent: do not restart; report why, with the
    /// generations that led here (see [`RestartPolicy::history`]).
    GiveUp {
        /// Why.
        reason: GiveUpReason,
        /// The generations that counted, oldest first.
        history: Vec<Generation>,
    },
}

/// Where the policy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No generation started yet.
    Idle,
    /// A generation is up since `since`; `stable` once it stayed up long
    /// enough to refill the budget.
    Running { since: Instant, stable: bool },
    /// Waiting to restart at `at`.
    Waiting { at: Instant },
    /// A verdict other than restart was given.
    Over,
}

/// A sans-IO restart policy: exponential backoff with jitter, a budget of
/// restarts in a row that only a child that stayed up refills, a cap on
/// restarts within a window, and a verdict when they are spent.
///
/// # How to drive it
///
/// Create it with [`new`](Self::new) and a seed for the jitter (any value;
/// a fixed one makes the waits reproducible). Then:
///
/// 1. [`handle_started`](Self::handle_started) when a generation was
///    spawned (the first one too);
/// 2. [`handle_exit`](Self::handle_exit) when it ended, saying whether the
///    end was unexpected (not after a shutdown or close the caller asked
///    for). Act on the [`RestartVerdict`]: on `Restart { at, .. }` spawn again at
///    `at` and go to 1; `Stop` and `GiveUp` end the supervision. A spawn
///    that fails is reported with
///    [`handle_spawn_failed`](Self::handle_spawn_failed), which gives the
///    next verdict;
/// 3. [`poll_timeout`](Self::poll_timeout) after every input: the restart
///    instant while waiting, the moment the running generation counts as
///    stable while running. Call [`handle_timeout`](Self::handle_timeout)
///    when it comes; calling it early, late or twice is harmless.
///
/// When the caller ends the supervision (a shutdown, perhaps while a
/// restart is awaited), [`handle_stop`](Self::handle_stop) cancels any
/// restart: every exit reported after it gives `Stop`.
///
/// `now` should be monotonic; an earlier `now` than before never panics (a
/// generation's uptime is then zero). No input order can make it panic.
///
/// # Rules
///
/// - The wait before the `n`th restart in a row is
///   `min(initial_backoff × multiplier^(n−1), max_backoff)`, less a random
///   part of at most `jitter` of it.
/// - A generation that stays up `stable_after` refills the budget and
///   starts the backoff over (noticed by `handle_timeout` or at its exit,
///   whichever comes first).
/// - An unexpected exit gives up when the streak already holds `budget`
///   restarts, or when `max_in_window` restarts happened within `window`
///   before it; the budget is checked first.
/// - The history keeps the generations that can count toward a verdict
///   (`max(budget, max_in_window) + 1` of them, the newest, at most
///   [`MAX_HISTORY`]), so memory is bounded however long the child lives.
///
/// # Example
///
/// A child that crashes at once, again and again:
///
/// ```
/// use std::time::{Duration, Instant};
/// use childwire_core::restart::{GiveUpReason, RestartConfig, RestartPolicy, RestartVerdict};
///
/// let mut config = RestartConfig::default();
/// config.budget = 3;
/// config.jitter = 0.0;
/// let mut policy = RestartPolicy::new(config, 7);
/// let mut now = Instant::now();
/// policy.handle_started(now);
/// let mut waits = Vec::new();
/// loop {
///     now += Duration::from_millis(10); // it crashes 10 ms after each start
///     match policy.handle_exit(now, true) {
///         RestartVerdict::Restart { at, delay, .. } => {
///             waits.push(delay);
///             now = at;
///             policy.handle_started(now);
///         }
///         RestartVerdict::GiveUp { reason, history } => {
///             assert!(matches!(reason, GiveUpReason::BudgetSpent { restarts: 3, .. }));
///             assert_eq!(history.len(), 4, "the first run and three restarts");
///             break;
///         }
///         RestartVerdict::Stop => unreachable!("every exit was unexpected"),
///     }
/// }
/// assert_eq!(waits, [250, 500, 1000].map(Duration::from_millis));
/// ```
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    config: RestartConfig,
    state: State,
    /// Restarts in the current streak (since the last stable generation).
    streak: u32,
    /// When each restart within the window was decided, oldest first; at
    /// most `max_in_window` kept.
    restarts_in_window: VecDeque<Instant>,
    history: VecDeque<Generation>,
    generations: u32,
    /// The last verdict, repeated by a spurious `handle_exit`.
    last: Option<RestartVerdict>,
    rng: u64,
}

impl RestartPolicy {
    /// A policy with `config`, its jitter drawn from a generator seeded
    /// with `seed`.
    #[must_use]
    pub fn new(config: RestartConfig, seed: u64) -> Self {
        Self {
            config,
            state: State::Idle,
            streak: 0,
            restarts_in_window: VecDeque::new(),
            history: VecDeque::new(),
            generations: 0,
            last: None,
            rng: seed,
        }
    }

    // ---- getters ----

    /// The configuration it was created with.
    #[must_use]
    pub fn config(&self) -> &RestartConfig {
        &self.config
    }

    /// Restarts left in the budget before the next unexpected exit gives
    /// up (the window's cap aside).
    #[must_use]
    pub fn budget_left(&self) -> u32 {
        self.config.budget.saturating_sub(self.streak)
    }

    /// Generations started so far.
    #[must_use]
    pub fn generations(&self) -> u32 {
        self.generations
    }

    /// The generations that can count toward a verdict, oldest first: the
    /// newest `max(budget, max_in_window) + 1`, at most [`MAX_HISTORY`].
    pub fn history(&self) -> impl ExactSizeIterator<Item = &Generation> {
        self.history.iter()
    }

    /// Whether a restart is being waited for.
    #[must_use]
    pub fn is_waiting(&self) -> bool {
        matches!(self.state, State::Waiting { .. })
    }

    // ---- inputs ----

    /// A generation was spawned at `now`. After a `Stop` or `GiveUp`
    /// verdict this is a fresh start the caller chose: the budget, the
    /// window and the history start over.
    pub fn handle_started(&mut self, now: Instant) {
        if self.state == State::Over {
            self.streak = 0;
            self.restarts_in_window.clear();
            self.history.clear();
            self.generations = 0;
        }
        self.generations = self.generations.saturating_add(1);
        self.state = State::Running {
            since: now,
            stable: false,
        };
        self.last = None;
    }

    /// The running generation ended at `now`; `unexpected` unless the
    /// caller asked for the end (shutdown, close). Returns what to do.
    ///
    /// Called again before the next [`handle_started`](Self::handle_started)
    /// it repeats the verdict (an exit reported twice is counted once).
    /// Called before any start, it counts a generation started at `now`.
    pub fn handle_exit(&mut self, now: Instant, unexpected: bool) -> RestartVerdict {
        let since = match self.state {
            State::Running { since, .. } => since,
            State::Idle => {
                self.handle_started(now);
                now
            }
            State::Waiting { .. } | State::Over => {
                if let Some(last) = &self.last {
                    return last.clone();
                }
                // Unreachable: these states are entered with a verdict.
                return RestartVerdict::Stop;
            }
        };
        self.refill_if_stable(since, now);
        self.record(Generation {
            number: self.generations,
            started: since,
            ended: now,
            unexpected,
        });
        let verdict = self.decide(now, unexpected);
        self.state = match verdict {
            RestartVerdict::Restart { at, .. } => State::Waiting { at },
            RestartVerdict::Stop | RestartVerdict::GiveUp { .. } => State::Over,
        };
        self.last = Some(verdict.clone());
        verdict
    }

    /// Spawning a generation failed at `now`: it counts as a generation
    /// that ended unexpectedly at once. Returns what to do next.
    pub fn handle_spawn_failed(&mut self, now: Instant) -> RestartVerdict {
        self.handle_started(now);
        self.handle_exit(now, true)
    }

    /// The caller ends the supervision: no restart from now on. A restart
    /// being awaited is cancelled; the running generation's exit, when it
    /// is reported, gives [`RestartVerdict::Stop`] (it is not recorded). A
    /// later [`handle_started`](Self::handle_started) starts over.
    pub fn handle_stop(&mut self) {
        if self.state != State::Over {
            self.state = State::Over;
            self.last = Some(RestartVerdict::Stop);
        }
    }

    /// A deadline from [`poll_timeout`](Self::poll_timeout) may have
    /// passed: a running generation that stayed up long enough refills the
    /// budget. Spurious calls are no-ops.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let State::Running { since, .. } = self.state {
            self.refill_if_stable(since, now);
        }
    }

    // ---- outputs ----

    /// When to act next: the restart instant while waiting for one, the
    /// moment the running generation becomes stable (for
    /// [`handle_timeout`](Self::handle_timeout)), else `None`.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Waiting { at } => Some(at),
            State::Running {
                since,
                stable: false,
            } => since.checked_add(self.config.stable_after),
            _ => None,
        }
    }

    // ---- internals ----

    fn refill_if_stable(&mut self, since: Instant, now: Instant) {
        if let State::Running { stable, .. } = &mut self.state {
            if !*stable && now.saturating_duration_since(since) >= self.config.stable_after {
                *stable = true;
                self.streak = 0;
            }
        }
    }

    fn record(&mut self, generation: Generation) {
        let keep = self.config.budget.max(self.config.max_in_window);
        let keep = usize::try_from(keep)
            .unwrap_or(usize::MAX)
            .saturating_add(1)
            .min(MAX_HISTORY);
        while self.history.len() >= keep {
            self.history.pop_front();
        }
        self.history.push_back(generation);
    }

    fn decide(&mut self, now: Instant, unexpected: bool) -> RestartVerdict {
        if !unexpected {
            return RestartVerdict::Stop;
        }
        if self.streak >= self.config.budget {
            return self.give_up(GiveUpReason::BudgetSpent {
                restarts: self.streak,
                stable_after: self.config.stable_after,
            });
        }
        // Restarts decided more than `window` ago no longer count.
        while let Some(&first) = self.restarts_in_window.front() {
            if now.saturating_duration_since(first) >= self.config.window {
                self.restarts_in_window.pop_front();
            } else {
                break;
            }
        }
        let in_window = u32::try_from(self.restarts_in_window.len()).unwrap_or(u32::MAX);
        if in_window >= self.config.max_in_window {
            return self.give_up(GiveUpReason::TooManyInWindow {
                restarts: in_window,
                window: self.config.window,
            });
        }
        self.streak += 1;
        self.restarts_in_window.push_back(now);
        let delay = self.jittered(backoff(&self.config, self.streak));
        RestartVerdict::Restart {
            // An unrepresentable instant (centuries ahead) cannot be waited
            // for anyway: restart now rather than never.
            at: now.checked_add(delay).unwrap_or(now),
            delay,
            attempt: self.streak,
        }
    }

    fn give_up(&self, reason: GiveUpReason) -> RestartVerdict {
        RestartVerdict::GiveUp {
            reason,
            history: self.history.iter().copied().collect(),
        }
    }

    /// `wait` less a random part of at most `jitter` of it.
    fn jittered(&mut self, wait: Duration) -> Duration {
        let jitter = clamp_unit(self.config.jitter);
        if jitter == 0.0 {
            return wait;
        }
        let cut = wait.as_secs_f64() * jitter * unit(splitmix64(&mut self.rng));
        wait.saturating_sub(Duration::try_from_secs_f64(cut).unwrap_or(Duration::ZERO))
    }
}

/// The wait before the `attempt`th restart in a row (1-based), before
/// jitter: `min(initial × multiplier^(attempt−1), max)`.
///
/// ```
/// use std::time::Duration;
/// use childwire_core::restart::{RestartConfig, backoff};
///
/// let config = RestartConfig::default();
/// assert_eq!(backoff(&config, 1), Duration::from_millis(250));
/// assert_eq!(backoff(&config, 3), Duration::from_secs(1));
/// assert_eq!(backoff(&config, 40), Duration::from_secs(30), "capped");
/// ```
#[must_use]
pub fn backoff(config: &RestartConfig, attempt: u32) -> Duration {
    let multiplier = if config.multiplier.is_finite() && config.multiplier >= 1.0 {
        config.multiplier
    } else {
        1.0
    };
    let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
    let secs = config.initial_backoff.as_secs_f64() * multiplier.powi(exponent);
    // NaN, infinity and overflow all land on the cap.
    let wait = Duration::try_from_secs_f64(secs).unwrap_or(config.max_backoff);
    wait.min(config.max_backoff)
}

fn clamp_unit(value: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.clamp(0.0, 1.0)
    }
}

/// SplitMix64: a tiny generator, plenty for spreading restarts apart.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `bits` as a number in `[0, 1)`.
fn unit(bits: u64) -> f64 {
    // The top 53 bits: exactly what an f64 mantissa holds.
    #[allow(clippy::cast_precision_loss)]
    let top = (bits >> 11) as f64;
    top / (1u64 << 53) as f64
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A duration in seconds, as reports show it (`1.5 s`).
struct Secs(Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} s", self.0.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_stays_below_one() {
        assert_eq!(unit(0), 0.0);
        assert!(unit(u64::MAX) < 1.0);
    }

    #[test]
    fn nonsense_settings_do_not_panic() {
        let config = RestartConfig {
            multiplier: f64::NAN,
            jitter: f64::INFINITY,
            initial_backoff: Duration::MAX,
            max_backoff: Duration::MAX,
            ..RestartConfig::default()
        };
        let mut policy = RestartPolicy::new(config, 0);
        let now = Instant::now();
        policy.handle_started(now);
        assert!(matches!(
            policy.handle_exit(now, true),
            RestartVerdict::Restart { .. }
        ));
    }
}
