//! The child's life from spawn to reap as a sans-IO state machine.
//!
//! [`Lifecycle`] decides when to close the child's stdin, when to send SIGTERM
//! and SIGKILL, and when the child's end can be reported. It never reads the
//! clock and performs no I/O: the adapter passes every event in together with
//! `now`, and carries out the [`Action`]s it hands back.

use std::fmt;
use std::time::{Duration, Instant};

use crate::report::{Counters, ExitReport};

/// The shutdown graces of a [`Lifecycle`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LifecycleConfig {
    /// Time from the shutdown request until SIGTERM. It covers flushing the
    /// queued output, closing stdin and waiting for the child to exit on EOF.
    /// Default 2 s (the MCP stdio recommendation). Zero skips the wait.
    pub stdin_grace: Duration,
    /// Time from SIGTERM until SIGKILL. Default 2 s. Zero skips the wait.
    pub term_grace: Duration,
    /// After the exit was observed, how long to wait for stdout and stderr to
    /// reach EOF before reporting the end anyway (a grandchild may hold the
    /// pipes open). Default 1 s.
    pub drain_grace: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            stdin_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            drain_grace: Duration::from_secs(1),
        }
    }
}

/// A signal the adapter delivers: to the process group (`killpg`) when the
/// child leads one, else to the child's PID.
///
/// On Windows, which has no signals, the async layer carries out the same
/// two steps: [`Term`](Signal::Term) is a `CTRL_BREAK_EVENT` to the child's
/// console process group, [`Kill`](Signal::Kill) terminates the job object
/// that holds the child and everything it started. Reports still name the
/// steps SIGTERM and SIGKILL.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGTERM: asks the child to exit.
    ///
    /// On Windows: `GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT)` to the
    /// child's process group (it leads one with
    /// [`Command::process_group`](crate::Command::process_group), the
    /// default). Console programs (node, python) exit on it unless they
    /// handle it. It only reaches a child that shares the host's console:
    /// a host without one (a GUI application) cannot send it, delivery
    /// fails and the schedule goes on to [`Kill`](Signal::Kill) after
    /// `term_grace`, as it does without a group.
    Term,
    /// SIGKILL: ends the child; it cannot be caught.
    ///
    /// On Windows: `TerminateJobObject` on the child's job, which ends the
    /// child and everything it started, with exit code 1 (what
    /// `std::process::Child::kill` and libuv use).
    Kill,
}

impl Signal {
    /// The POSIX signal number (15 or 9; the same on every Unix).
    #[must_use]
    pub fn number(self) -> i32 {
        match self {
            Signal::Term => 15,
            Signal::Kill => 9,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
        })
    }
}

/// What the adapter must do now, from [`Lifecycle::poll_action`].
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Close (drop) the child's stdin, so it sees EOF. Then report it with
    /// [`Lifecycle::handle_stdin_closed`].
    CloseStdin,
    /// Deliver this signal to the child's group (or to its PID without a
    /// group). Report a failure with [`Lifecycle::handle_signal_failed`].
    Signal(Signal),
    /// End with SIGKILL whatever the child left behind: what is left of its
    /// process group (if it leads one: the group ID cannot be reused while
    /// any member lives, so this only hits the child's own descendants),
    /// and wherever the platform can find them, the processes that escaped
    /// the group but still hold the child's end of its pipes, and its
    /// cgroup (when contained in one). On Windows: everything still in the
    /// child's job object (none of it can leave the job), counted and then
    /// terminated; whether those held the pipes is not known there. Asked
    /// once: after the leader was
    /// reaped, or at once when the driver stops
    /// ([`Lifecycle::handle_driver_stopped`]). Report what it found with
    /// [`Lifecycle::handle_swept`]; the exit report waits for it (at most
    /// until the drain deadline).
    Sweep,
}

/// What an [`Action::Sweep`] found and ended, for
/// [`Lifecycle::handle_swept`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Swept {
    /// Processes found alive and sent SIGKILL (each counted once, however it
    /// was found).
    pub ended: u32,
    /// Some of them still held the child's end of its stdin, stdout or
    /// stderr pipe: the pipes were not drained when the child exited.
    pub held_pipes: bool,
}

/// Where the child is in its life. Phases only move forward, in the order
/// listed (some may be skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// No shutdown asked yet.
    Running,
    /// Shutdown asked; waiting for the queued output to be written.
    Flushing,
    /// Stdin is closed; waiting for the child to exit until the stdin deadline.
    StdinClosed,
    /// SIGTERM sent; waiting for the child to exit until the term deadline.
    Terminating,
    /// SIGKILL sent; waiting for the reap.
    Killing,
    /// The exit was observed; waiting for stdout and stderr to reach EOF.
    Exited,
    /// The exit report was handed out; nothing more happens.
    Done,
}

/// How the process ended, as the OS reported it.
///
/// Adapters convert `std::process::ExitStatus` with `code()` and, on Unix,
/// `ExitStatusExt::signal()`.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// Exited normally with this code.
    Code(i32),
    /// Terminated by this signal number.
    Signal(i32),
}

impl Exit {
    /// `true` for exit code 0.
    #[must_use]
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

impl fmt::Display for Exit {
    /// `exited with code 3`, `killed by SIGKILL`; a Windows crash code is
    /// shown in hex with its NTSTATUS name: `exited with code 0xC0000005
    /// (STATUS_ACCESS_VIOLATION)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Exit::Code(code) => match ntstatus_name(code) {
                // The bits as Windows reports them (the i32 is negative).
                #[allow(clippy::cast_sign_loss)]
                Some(name) => write!(f, "exited with code {:#010X} ({name})", code as u32),
                None => write!(f, "exited with code {code}"),
            },
            Exit::Signal(signo) => match signal_name(signo) {
                Some(name) => write!(f, "killed by {name}"),
                None => write!(f, "killed by signal {signo}"),
            },
        }
    }
}

/// The name of a common signal number (`9` → `"SIGKILL"`), or `None`.
///
/// Only numbers that are the same on every Unix are named.
#[must_use]
pub fn signal_name(signo: i32) -> Option<&'static str> {
    Some(match signo {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// The name of a Windows NTSTATUS that ends a process when it crashes or is
/// interrupted (`0xC0000005` → `"STATUS_ACCESS_VIOLATION"`), given as the
/// exit code `std` reports (`ExitStatus::code`, the `u32` read as `i32`),
/// or `None`.
///
/// These values cannot be Unix exit codes (0 to 255), so a code is named
/// whatever the platform.
///
/// ```
/// use childwire_core::Exit;
/// use childwire_core::lifecycle::ntstatus_name;
///
/// assert_eq!(ntstatus_name(0xC000_00FD_u32 as i32), Some("STATUS_STACK_OVERFLOW"));
/// assert_eq!(ntstatus_name(1), None);
/// assert_eq!(
///     Exit::Code(0xC000_0005_u32 as i32).to_string(),
///     "exited with code 0xC0000005 (STATUS_ACCESS_VIOLATION)"
/// );
/// ```
#[must_use]
pub fn ntstatus_name(code: i32) -> Option<&'static str> {
    // Reinterpreted, not converted: Windows' DWORD exit code, as std hands it.
    #[allow(clippy::cast_sign_loss)]
    let status = code as u32;
    Some(match status {
        0x8000_0003 => "STATUS_BREAKPOINT",
        0x8000_0004 => "STATUS_SINGLE_STEP",
        0xC000_0005 => "STATUS_ACCESS_VIOLATION",
        0xC000_0006 => "STATUS_IN_PAGE_ERROR",
        0xC000_0017 => "STATUS_NO_MEMORY",
        0xC000_001D => "STATUS_ILLEGAL_INSTRUCTION",
        0xC000_0025 => "STATUS_NONCONTINUABLE_EXCEPTION",
        0xC000_008C => "STATUS_ARRAY_BOUNDS_EXCEEDED",
        0xC000_008D => "STATUS_FLOAT_DENORMAL_OPERAND",
        0xC000_008E => "STATUS_FLOAT_DIVIDE_BY_ZERO",
        0xC000_0090 => "STATUS_FLOAT_INVALID_OPERATION",
        0xC000_0094 => "STATUS_INTEGER_DIVIDE_BY_ZERO",
        0xC000_0095 => "STATUS_INTEGER_OVERFLOW",
        0xC000_0096 => "STATUS_PRIVILEGED_INSTRUCTION",
        0xC000_00FD => "STATUS_STACK_OVERFLOW",
        0xC000_0135 => "STATUS_DLL_NOT_FOUND",
        0xC000_0138 => "STATUS_ORDINAL_NOT_FOUND",
        0xC000_0139 => "STATUS_ENTRYPOINT_NOT_FOUND",
        0xC000_013A => "STATUS_CONTROL_C_EXIT",
        0xC000_0142 => "STATUS_DLL_INIT_FAILED",
        0xC000_0374 => "STATUS_HEAP_CORRUPTION",
        0xC000_0409 => "STATUS_STACK_BUFFER_OVERRUN",
        0xC000_0417 => "STATUS_INVALID_CRUNTIME_PARAMETER",
        0xC000_0420 => "STATUS_ASSERTION_FAILURE",
        _ => return None,
    })
}

/// Which shutdown step ended the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndedBy {
    /// No shutdown was asked, or the child exited before its stdin was closed.
    OnItsOwn,
    /// The child exited after its stdin was closed, before SIGTERM.
    StdinClose,
    /// The child exited after SIGTERM, before SIGKILL.
    Sigterm,
    /// The child exited after SIGKILL.
    Sigkill,
}

impl fmt::Display for EndedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndedBy::OnItsOwn => "on its own",
            EndedBy::StdinClose => "after stdin was closed",
            EndedBy::Sigterm => "after SIGTERM",
            EndedBy::Sigkill => "after SIGKILL",
        })
    }
}

/// Why delivering a [`Signal`] failed.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalError {
    /// ESRCH: no such process (or group). The child already exited and
    /// awaits its reap, so escalation stops.
    NoSuchProcess,
    /// EPERM: not allowed to signal the process. Escalation continues.
    PermissionDenied,
    /// Any other failure. Escalation continues.
    Other {
        /// The OS error number, if there was one.
        errno: Option<i32>,
    },
}

impl SignalError {
    /// Classifies the error of a failed `kill`/`killpg`.
    #[cfg(unix)]
    #[must_use]
    pub fn from_io(err: &std::io::Error) -> Self {
        // ESRCH and EPERM have these numbers on every Unix; std maps neither
        // to a distinct `ErrorKind` we could match instead.
        const EPERM: i32 = 1;
        const ESRCH: i32 = 3;
        match err.raw_os_error() {
            Some(ESRCH) => SignalError::NoSuchProcess,
            Some(EPERM) => SignalError::PermissionDenied,
            errno => SignalError::Other { errno },
        }
    }
}

impl fmt::Display for SignalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignalError::NoSuchProcess => f.write_str("no such process"),
            SignalError::PermissionDenied => f.write_str("permission denied"),
            SignalError::Other { errno: Some(errno) } => {
                write!(f, "signal delivery failed (os error {errno})")
            }
            SignalError::Other { errno: None } => f.write_str("signal delivery failed"),
        }
    }
}

impl std::error::Error for SignalError {}

/// The child's life from spawn to reap, as a pure state machine.
///
/// # How to drive it
///
/// Create it at spawn with [`Lifecycle::new`]. Then, after **every** input
/// call (`handle_*`), drain the outputs in this order:
///
/// 1. [`poll_action`](Self::poll_action) until `None`, carrying out each
///    [`Action`] (and reporting the outcome with `handle_stdin_closed` or
///    `handle_signal_failed`, which are inputs again);
/// 2. [`poll_end`](Self::poll_end): `Some` once, when the child's end is
///    known: the exit report, to complete with the stderr tail and counters;
/// 3. [`poll_timeout`](Self::poll_timeout): arm a timer for this instant (or
///    none for `None`); when it fires, call
///    [`handle_timeout`](Self::handle_timeout) with the current time.
///
/// Inputs, each taking `now`:
/// - [`handle_shutdown`](Self::handle_shutdown): the user asked for a
///   graceful shutdown;
/// - [`handle_outbound_drained`](Self::handle_outbound_drained) /
///   [`handle_outbound_pending`](Self::handle_outbound_pending): the write
///   queue became empty / non-empty;
/// - [`handle_close_stdin`](Self::handle_close_stdin): the channel gave up
///   on stdin (a write timed out): close it now, shutdown or not;
/// - [`handle_stdin_closed`](Self::handle_stdin_closed): stdin was closed
///   (by us, or broken by the child: EPIPE);
/// - [`handle_exit`](Self::handle_exit): the child was reaped;
/// - [`handle_stdout_eof`](Self::handle_stdout_eof) and
///   [`handle_stderr_eof`](Self::handle_stderr_eof);
/// - [`handle_signal_failed`](Self::handle_signal_failed);
/// - [`handle_swept`](Self::handle_swept): what the sweep ended;
/// - [`handle_driver_stopped`](Self::handle_driver_stopped): the adapter
///   stops driving (its runtime is going away): kill and sweep now;
/// - [`handle_timeout`](Self::handle_timeout): safe to call early, late or
///   repeatedly (spurious calls are no-ops).
///
/// `now` should be monotonic (`Instant`); an earlier `now` than before never
/// panics, it just does not move anything forward. Every input also fires any
/// deadline that `now` has reached, so a zero grace acts within the same
/// drain. No input order can make it panic.
///
/// # Guarantees
///
/// - SIGTERM is never asked before `stdin_grace` has passed since the
///   shutdown request, and SIGKILL never before `stdin_grace + term_grace`.
/// - Once the exit was observed, no [`Action::Signal`] is ever asked again
///   (the PID may be reused); only one [`Action::Sweep`], whether the child
///   leads its own group or not (what escaped the group is swept too).
/// - [`poll_timeout`](Self::poll_timeout) never moves backwards within one
///   [`Phase`].
#[derive(Debug, Clone)]
pub struct Lifecycle {
    config: LifecycleConfig,
    process_group: bool,
    spawned_at: Instant,
    phase: Phase,
    shutdown_at: Option<Instant>,
    /// The write queue is known to be empty. Unknown counts as not empty, so
    /// a session that never reports it loses nothing: stdin then closes at
    /// the stdin deadline.
    outbound_drained: bool,
    /// Stdin is closed or a close was decided.
    stdin_closed: bool,
    stdin_deadline: Option<Instant>,
    term_deadline: Option<Instant>,
    /// ESRCH came back: the child is gone and awaits its reap.
    process_gone: bool,
    // Decided but not yet handed out, in this order.
    pending_close: bool,
    pending_term: bool,
    pending_kill: bool,
    pending_sweep: bool,
    /// The sweep was decided (pending or handed out); it happens once.
    sweep_decided: bool,
    /// What the sweep found, once reported.
    swept: Option<Swept>,
    /// The adapter stops driving: no timer will fire again, so the end is
    /// reported as soon as the exit is known, drained or not.
    driver_stopped: bool,
    /// Every handle was dropped ([`handle_abandoned`](Self::handle_abandoned)).
    abandoned: bool,
    // Handed out: what the adapter was actually told to do.
    close_sent: bool,
    term_sent: bool,
    kill_sent: bool,
    /// The end as far as known: set when the exit is observed.
    exited: Option<ExitReport>,
    stdout_eof: bool,
    stderr_eof: bool,
    drain_deadline: Option<Instant>,
    /// The end, decided and not yet handed out.
    ending: Option<ExitReport>,
}

impl Lifecycle {
    /// Starts the machine for a child spawned at `now`. With
    /// `process_group`, the child leads its own group: signals go to the
    /// whole group. Either way, after the leader exits what it left behind
    /// is swept once ([`Action::Sweep`]), so launchers such as `sh -c` or
    /// `npx` leave no orphaned grandchildren.
    #[must_use]
    pub fn new(config: LifecycleConfig, process_group: bool, now: Instant) -> Self {
        Self {
            config,
            process_group,
            spawned_at: now,
            phase: Phase::Running,
            shutdown_at: None,
            outbound_drained: false,
            stdin_closed: false,
            stdin_deadline: None,
            term_deadline: None,
            process_gone: false,
            pending_close: false,
            pending_term: false,
            pending_kill: false,
            pending_sweep: false,
            sweep_decided: false,
            swept: None,
            driver_stopped: false,
            abandoned: false,
            close_sent: false,
            term_sent: false,
            kill_sent: false,
            exited: None,
            stdout_eof: false,
            stderr_eof: false,
            drain_deadline: None,
            ending: None,
        }
    }

    // ---- getters ----

    /// The current phase.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether the child leads its own process group (signals go to the
    /// group).
    #[must_use]
    pub fn process_group(&self) -> bool {
        self.process_group
    }

    /// The configuration it was created with.
    #[must_use]
    pub fn config(&self) -> &LifecycleConfig {
        &self.config
    }

    /// Whether shutdown was asked.
    #[must_use]
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown_at.is_some()
    }

    /// The exit, once observed. While this is `None` the child has not been
    /// reaped, so its PID is still its own (a drop path may signal it).
    #[must_use]
    pub fn exit(&self) -> Option<Exit> {
        self.exited.as_ref().map(|report| report.exit)
    }

    // ---- inputs ----

    /// The user asked for a graceful shutdown. Asking again changes
    /// nothing; asking after the exit was observed changes nothing.
    ///
    /// With the write queue already known empty (or stdin already closed) it
    /// goes straight to closing stdin; otherwise it waits for
    /// [`handle_outbound_drained`](Self::handle_outbound_drained) until the
    /// stdin deadline (`now + stdin_grace`).
    pub fn handle_shutdown(&mut self, now: Instant) {
        if self.phase != Phase::Running || self.exited.is_some() {
            self.advance(now);
            return;
        }
        self.shutdown_at = Some(now);
        self.stdin_deadline = now.checked_add(self.config.stdin_grace);
        self.phase = Phase::Flushing;
        if self.stdin_closed {
            self.phase = Phase::StdinClosed;
        } else if self.outbound_drained {
            self.close_stdin();
        }
        self.advance(now);
    }

    /// The session's write queue is empty. Call it whenever that becomes true
    /// (calling it more often is harmless), also before any shutdown.
    pub fn handle_outbound_drained(&mut self, now: Instant) {
        self.outbound_drained = true;
        if self.phase == Phase::Flushing {
            self.close_stdin();
        }
        self.advance(now);
    }

    /// The session queued bytes, so its write queue is not empty any more.
    pub fn handle_outbound_pending(&mut self, now: Instant) {
        self.outbound_drained = false;
        self.advance(now);
    }

    /// The channel gave up on stdin (its write timeout ran out): close it now
    /// with [`Action::CloseStdin`], whether a shutdown was asked or not. The
    /// child's exit then counts as [`EndedBy::StdinClose`].
    pub fn handle_close_stdin(&mut self, now: Instant) {
        if self.exited.is_none() {
            self.close_stdin_now();
        }
        self.advance(now);
    }

    /// Stdin was closed: by us after [`Action::CloseStdin`], or broken by the
    /// child (EPIPE). Nothing more will be flushed.
    pub fn handle_stdin_closed(&mut self, now: Instant) {
        self.stdin_closed = true;
        if self.phase == Phase::Flushing {
            self.phase = Phase::StdinClosed;
        }
        self.advance(now);
    }

    /// The child was reaped. Ends the escalation at once, whatever the phase
    ///: no signal is asked after this. Only the first exit counts.
    pub fn handle_exit(&mut self, exit: Exit, now: Instant) {
        if self.exited.is_none() {
            // The exit names the signal that ended the child when it is
            // one we sent: SIGKILL sent after it (its grace ran out before
            // the exit was seen, as on a clock that jumps) did not.
            let died_of_term = exit == Exit::Signal(Signal::Term.number());
            let ended_by = if self.kill_sent && !(self.term_sent && died_of_term) {
                EndedBy::Sigkill
            } else if self.term_sent {
                EndedBy::Sigterm
            } else if self.close_sent {
                EndedBy::StdinClose
            } else {
                EndedBy::OnItsOwn
            };
            let since = self.shutdown_at.unwrap_or(self.spawned_at);
            self.exited = Some(ExitReport {
                exit,
                ended_by,
                shutdown_requested: self.shutdown_at.is_some(),
                elapsed: now.saturating_duration_since(since),
                pipes_drained: true,
                stray_processes_ended: 0,
                stderr_tail: String::new(),
                stderr_callback_panicked: false,
                counters: Counters::default(),
                unreceived_messages: 0,
                unreceived_bytes: 0,
                stdout_held_back: false,
                unanswered_ids: Vec::new(),
            });
            // Undelivered steps are moot now, and a signal could hit a reused PID.
            self.pending_close = false;
            self.pending_term = false;
            self.pending_kill = false;
            self.decide_sweep();
            self.stdin_deadline = None;
            self.term_deadline = None;
            self.drain_deadline = now.checked_add(self.config.drain_grace);
            self.phase = Phase::Exited;
        }
        self.advance(now);
    }

    /// The child's stdout reached EOF (it may come before the exit).
    pub fn handle_stdout_eof(&mut self, now: Instant) {
        self.stdout_eof = true;
        self.advance(now);
    }

    /// The child's stderr reached EOF (it may come before the exit). Without
    /// a stderr pipe (inherit or discard mode) call it right after spawn.
    pub fn handle_stderr_eof(&mut self, now: Instant) {
        self.stderr_eof = true;
        self.advance(now);
    }

    /// Delivering `signal` failed. [`SignalError::NoSuchProcess`] means the
    /// child is gone but not yet reaped: escalation stops and the machine
    /// waits for [`handle_exit`](Self::handle_exit). Other errors keep the
    /// schedule. Either way the signal does not count as the step that
    /// ended the child.
    pub fn handle_signal_failed(&mut self, signal: Signal, err: SignalError, now: Instant) {
        // An undelivered signal did not end the child, so it must not be
        // named in the ending (kill/killpg fail only when nothing got it).
        match signal {
            Signal::Term => self.term_sent = false,
            Signal::Kill => self.kill_sent = false,
        }
        if err == SignalError::NoSuchProcess {
            self.process_gone = true;
            self.pending_term = false;
            self.pending_kill = false;
        }
        self.advance(now);
    }

    /// The [`Action::Sweep`] was carried out and found `swept`. The exit
    /// report counts what it ended, and says the pipes were held if any of
    /// them held the child's pipes. Only the first report counts.
    pub fn handle_swept(&mut self, swept: Swept, now: Instant) {
        if self.sweep_decided && self.swept.is_none() {
            self.swept = Some(swept);
        }
        self.advance(now);
    }

    /// The adapter stops driving the child for good (its task is dropped:
    /// the runtime shuts down), so no timer will fire and no pipe will be
    /// read again. Unless the exit was already observed, SIGKILL is asked
    /// at once; the sweep is asked at once too (what escaped the group is
    /// ended now, not after a reap that may never be seen); and the end is
    /// reported as soon as the exit is known, without waiting for the
    /// pipes. The adapter should wait (briefly) for the exit and report it.
    pub fn handle_driver_stopped(&mut self, now: Instant) {
        if !self.driver_stopped {
            self.driver_stopped = true;
            if self.exited.is_none() && !self.kill_sent {
                self.pending_close = false;
                self.pending_term = false;
                self.pending_kill = true;
                self.phase = self.phase.max(Phase::Killing);
            }
            self.decide_sweep();
        }
        self.advance(now);
    }

    /// The user asked to stop the child now: SIGKILL (to its group, with
    /// one) at once, without closing stdin or SIGTERM first, unless its exit
    /// was already observed or it is already gone. It counts as an asked-for
    /// end: the report says [`shutdown_requested`](ExitReport::shutdown_requested)
    /// and [`EndedBy::Sigkill`]. Asking again changes nothing. The end is
    /// reported as usual: after the sweep, once the pipes drained or
    /// `drain_grace` passed.
    pub fn handle_kill(&mut self, now: Instant) {
        if self.exited.is_none() && !self.kill_sent && !self.process_gone {
            self.shutdown_at.get_or_insert(now);
            self.pending_close = false;
            self.pending_term = false;
            self.pending_kill = true;
            self.phase = self.phase.max(Phase::Killing);
        }
        self.advance(now);
    }

    /// Every handle on the transport was dropped without a shutdown. With
    /// `kill`, the non-graceful path: SIGKILL (to the group), then the
    /// sweep, and the end counts as [`EndedBy::Sigkill`]. Without it, the
    /// child is left to run: its stdin is closed (it reads EOF) and nothing
    /// else is sent. Nothing changes after a shutdown or the exit, or the
    /// second time.
    pub fn handle_abandoned(&mut self, kill: bool, now: Instant) {
        let first = !std::mem::replace(&mut self.abandoned, true);
        if first && self.shutdown_at.is_none() && self.exited.is_none() && !self.kill_sent {
            if kill {
                self.pending_close = false;
                self.pending_term = false;
                self.pending_kill = true;
                self.phase = self.phase.max(Phase::Killing);
            } else {
                self.close_stdin_now();
            }
        }
        self.advance(now);
    }

    /// A deadline from [`poll_timeout`](Self::poll_timeout) may have passed.
    /// Early, late and repeated calls are fine: only deadlines `now` has
    /// reached fire.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    // ---- outputs ----

    /// The next thing the adapter must do, if any. Drain until `None` after
    /// every input.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        if std::mem::take(&mut self.pending_close) {
            self.close_sent = true;
            return Some(Action::CloseStdin);
        }
        if std::mem::take(&mut self.pending_term) {
            self.term_sent = true;
            return Some(Action::Signal(Signal::Term));
        }
        if std::mem::take(&mut self.pending_kill) {
            self.kill_sent = true;
            return Some(Action::Signal(Signal::Kill));
        }
        if std::mem::take(&mut self.pending_sweep) {
            return Some(Action::Sweep);
        }
        None
    }

    /// The child's end, exactly once: after the exit was observed, the sweep
    /// reported and both pipes reached EOF, or `drain_grace` passed since
    /// the exit (at once after the exit once the driver stopped). Moves the
    /// phase to [`Phase::Done`]. The report's stderr tail and counters are
    /// empty: the lifecycle does not know them.
    #[must_use]
    pub fn poll_end(&mut self) -> Option<ExitReport> {
        let ending = self.ending.take()?;
        self.phase = Phase::Done;
        Some(ending)
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next; `None`
    /// when nothing is scheduled.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Flushing | Phase::StdinClosed if !self.process_gone => self.stdin_deadline,
            Phase::Terminating if !self.process_gone => self.term_deadline,
            Phase::Exited if self.ending.is_none() => self.drain_deadline,
            _ => None,
        }
    }

    // ---- internals ----

    fn close_stdin(&mut self) {
        self.close_stdin_now();
        self.phase = Phase::StdinClosed;
    }

    /// Decides the sweep, once.
    fn decide_sweep(&mut self) {
        if !self.sweep_decided {
            self.sweep_decided = true;
            self.pending_sweep = true;
        }
    }

    /// Decides the close of stdin, once; the phase is the caller's business.
    fn close_stdin_now(&mut self) {
        if !self.stdin_closed {
            self.stdin_closed = true;
            self.pending_close = true;
        }
    }

    /// Fires every deadline `now` has reached. A deadline of `None` (an
    /// overflowing grace) never fires.
    fn advance(&mut self, now: Instant) {
        let reached = |deadline: Option<Instant>| deadline.is_some_and(|d| now >= d);
        loop {
            match self.phase {
                Phase::Flushing | Phase::StdinClosed
                    if !self.process_gone && reached(self.stdin_deadline) =>
                {
                    // The flush ran out of time: close stdin anyway, with the signal.
                    self.close_stdin();
                    self.pending_term = true;
                    self.phase = Phase::Terminating;
                    // From `now`, not the deadline: a late timer still gives
                    // the child its whole term_grace after the signal.
                    self.term_deadline = now.checked_add(self.config.term_grace);
                }
                Phase::Terminating if !self.process_gone && reached(self.term_deadline) => {
                    self.pending_kill = true;
                    self.phase = Phase::Killing;
                }
                Phase::Exited if self.ending.is_none() => {
                    let drained = self.stdout_eof && self.stderr_eof;
                    let swept = self.swept.is_some();
                    let end = (drained && swept)
                        || reached(self.drain_deadline)
                        || (self.driver_stopped && (swept || !self.pending_sweep));
                    if end {
                        if let Some(mut report) = self.exited.clone() {
                            let swept = self.swept.unwrap_or_default();
                            // Holders found by the sweep are dead now and the
                            // pipes may reach EOF, but they were held.
                            report.pipes_drained = drained && !swept.held_pipes;
                            report.stray_processes_ended = swept.ended;
                            self.ending = Some(report);
                        }
                    }
                    return;
                }
                _ => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit code `std` reports for a Windows status: its bits as `i32`.
    #[allow(clippy::cast_possible_wrap)]
    fn code(status: u32) -> Exit {
        Exit::Code(status as i32)
    }

    #[test]
    fn c15_windows_crash_codes_are_shown_in_hex_with_their_ntstatus_name() {
        for (status, name) in [
            (0xC000_0005, "STATUS_ACCESS_VIOLATION"),
            (0xC000_00FD, "STATUS_STACK_OVERFLOW"),
            (0xC000_0409, "STATUS_STACK_BUFFER_OVERRUN"),
            (0xC000_013A, "STATUS_CONTROL_C_EXIT"),
            (0xC000_0135, "STATUS_DLL_NOT_FOUND"),
            (0xC000_0142, "STATUS_DLL_INIT_FAILED"),
            (0xC000_001D, "STATUS_ILLEGAL_INSTRUCTION"),
            (0xC000_0094, "STATUS_INTEGER_DIVIDE_BY_ZERO"),
            (0xC000_0374, "STATUS_HEAP_CORRUPTION"),
            (0xC000_0017, "STATUS_NO_MEMORY"),
            (0x8000_0003, "STATUS_BREAKPOINT"),
        ] {
            let Exit::Code(raw) = code(status) else {
                unreachable!()
            };
            assert_eq!(ntstatus_name(raw), Some(name));
            assert_eq!(
                code(status).to_string(),
                format!("exited with code {status:#010X} ({name})")
            );
        }
    }

    #[test]
    fn c15_ordinary_codes_are_shown_in_decimal_without_a_name() {
        for raw in [0, 1, 3, 127, 255, -1, 0x4000_0000] {
            assert_eq!(ntstatus_name(raw), None, "{raw}");
            assert_eq!(
                Exit::Code(raw).to_string(),
                format!("exited with code {raw}")
            );
        }
        // An unknown NTSTATUS keeps the plain form too.
        assert_eq!(
            code(0xC0FF_EE00).to_string(),
            "exited with code -1056969216"
        );
    }
}
