//! The few OS calls the core's decisions need: delivering signals and
//! reading exit statuses.

use childwire_core::{Action, Exit, Signal, SignalError};

/// Carries out a signal [`Action`] on the child `pid`: to its group when it
/// leads one (C13), else to the process alone.
pub(crate) fn deliver(action: Action, pid: Option<u32>, group: bool) -> Result<(), SignalError> {
    let (signal, group) = match action {
        Action::Signal(signal) => (signal, group),
        Action::SweepGroup => (Signal::Kill, true),
        Action::CloseStdin => return Ok(()),
    };
    let Some(pid) = pid else {
        return Err(SignalError::NoSuchProcess);
    };
    send(pid, signal, group)
}

#[cfg(unix)]
fn send(pid: u32, signal: Signal, group: bool) -> Result<(), SignalError> {
    use rustix::process::{Pid, Signal as Sig, kill_process, kill_process_group};
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or(SignalError::NoSuchProcess)?;
    let sig = match signal {
        Signal::Term => Sig::TERM,
        Signal::Kill => Sig::KILL,
    };
    let sent = if group {
        kill_process_group(pid, sig)
    } else {
        kill_process(pid, sig)
    };
    sent.map_err(|errno| SignalError::from_io(&errno.into()))
}

#[cfg(not(unix))]
fn send(_pid: u32, _signal: Signal, _group: bool) -> Result<(), SignalError> {
    // Without signals there is no graceful step to take; the adapters' child
    // handles kill on drop.
    Err(SignalError::Other { errno: None })
}

/// The core's view of an exit status.
pub(crate) fn exit_of(status: std::process::ExitStatus) -> Exit {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Exit::Signal(signal);
        }
    }
    Exit::Code(status.code().unwrap_or(-1))
}
