//! The small types that say how a child's life ended: [`Exit`], [`Signal`],
//! [`EndedBy`], [`Swept`]. The family, and the types built from them, is
//! described in one place: the [`report`](crate::report) module.
//!
//! This module is a leaf: it uses nothing else in the crate, so the
//! lifecycle and the report can both build on it.

use std::fmt;

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

/// What an [`Action::Sweep`](crate::Action::Sweep) found and ended, for
/// [`Lifecycle::handle_swept`](crate::Lifecycle::handle_swept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Swept {
    /// Processes found alive and sent SIGKILL (each counted once, however it
    /// was found).
    pub ended: u32,
    /// Some of them still held the child's end of its stdin, stdout or
    /// stderr pipe: the pipes were not drained when the child exited.
    pub held_pipes: bool,
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
/// use childwire_core::ntstatus_name;
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

/// Which shutdown step ended the child: the last one handed out before the
/// exit that can have caused it. The steps are listed (and ordered) as the
/// shutdown takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EndedBy {
    /// No shutdown was asked, or the child exited before its stdin was closed.
    OnItsOwn,
    /// The child exited after the shutdown's goodbye (see
    /// [`Goodbye`](crate::Goodbye)), before any signal.
    Goodbye,
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
            EndedBy::Goodbye => "after the goodbye",
            EndedBy::StdinClose => "after stdin was closed",
            EndedBy::Sigterm => "after SIGTERM",
            EndedBy::Sigkill => "after SIGKILL",
        })
    }
}

impl EndedBy {
    /// The signal this step sent, if it was one.
    ///
    /// ```
    /// use childwire_core::{EndedBy, Signal};
    ///
    /// assert_eq!(EndedBy::Sigterm.signal(), Some(Signal::Term));
    /// assert_eq!(EndedBy::from(Signal::Kill), EndedBy::Sigkill);
    /// assert_eq!(EndedBy::StdinClose.signal(), None);
    /// ```
    #[must_use]
    pub fn signal(self) -> Option<Signal> {
        match self {
            EndedBy::Sigterm => Some(Signal::Term),
            EndedBy::Sigkill => Some(Signal::Kill),
            EndedBy::OnItsOwn | EndedBy::Goodbye | EndedBy::StdinClose => None,
        }
    }
}

impl From<Signal> for EndedBy {
    fn from(signal: Signal) -> Self {
        match signal {
            Signal::Term => EndedBy::Sigterm,
            Signal::Kill => EndedBy::Sigkill,
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
