//! This process's own end signals (SIGTERM, SIGINT, SIGHUP, SIGQUIT; Ctrl-C
//! on Windows), caught and handed out as a stream, on whichever runtime the
//! program runs on: Tokio's own signal handling inside a Tokio runtime,
//! `async-signal` (smol-rs) on smol and async-std.
//!
//! The same shape as `async-signal`'s `Signals`, so code written against it
//! needs only its `use` line changed; a Tokio-only build then compiles no
//! second reactor just to catch signals.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

/// A signal this process can catch.
///
/// Every variant exists on every platform; one the platform cannot catch
/// (all but [`Signal::Int`] on Windows) is refused by [`Signals::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// `SIGTERM`: a polite request to end.
    Term,
    /// `SIGINT`: Ctrl-C.
    Int,
    /// `SIGHUP`: the terminal or session went away.
    Hup,
    /// `SIGQUIT`: Ctrl-\.
    Quit,
}

/// The signals caught, from [`Signals::new`] on, as a stream of the ones
/// that came. While it lives, a caught signal no longer has its default
/// action (ending the process).
pub struct Signals(Inner);

enum Inner {
    #[cfg(all(feature = "tokio", unix))]
    Tokio(Vec<(Signal, tokio::signal::unix::Signal)>),
    #[cfg(all(feature = "tokio", windows))]
    Tokio(tokio::signal::windows::CtrlC),
    #[cfg(any(feature = "smol", feature = "async-std"))]
    Async(async_signal::Signals),
}

impl Signals {
    /// Catches `signals` from now on: through Tokio when called inside a
    /// Tokio runtime, else through `async-signal`.
    pub fn new(signals: impl IntoIterator<Item = Signal>) -> io::Result<Self> {
        let signals: Vec<Signal> = signals.into_iter().collect();
        #[cfg(feature = "tokio")]
        if tokio::runtime::Handle::try_current().is_ok() {
            return Self::tokio(&signals);
        }
        #[cfg(any(feature = "smol", feature = "async-std"))]
        {
            Self::async_signal(&signals)
        }
        #[cfg(not(any(feature = "smol", feature = "async-std")))]
        {
            let _ = signals;
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "signals are caught through Tokio in this build, and no Tokio runtime runs",
            ))
        }
    }

    #[cfg(all(feature = "tokio", unix))]
    fn tokio(signals: &[Signal]) -> io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut caught = Vec::with_capacity(signals.len());
        for &wanted in signals {
            let kind = match wanted {
                Signal::Term => SignalKind::terminate(),
                Signal::Int => SignalKind::interrupt(),
                Signal::Hup => SignalKind::hangup(),
                Signal::Quit => SignalKind::quit(),
            };
            caught.push((wanted, signal(kind)?));
        }
        Ok(Self(Inner::Tokio(caught)))
    }

    #[cfg(all(feature = "tokio", windows))]
    fn tokio(signals: &[Signal]) -> io::Result<Self> {
        if let Some(other) = signals.iter().find(|signal| **signal != Signal::Int) {
            return Err(unsupported(*other));
        }
        Ok(Self(Inner::Tokio(tokio::signal::windows::ctrl_c()?)))
    }

    #[cfg(any(feature = "smol", feature = "async-std"))]
    fn async_signal(signals: &[Signal]) -> io::Result<Self> {
        let mut caught = Vec::with_capacity(signals.len());
        for &wanted in signals {
            caught.push(match wanted {
                Signal::Int => async_signal::Signal::Int,
                #[cfg(unix)]
                Signal::Term => async_signal::Signal::Term,
                #[cfg(unix)]
                Signal::Hup => async_signal::Signal::Hup,
                #[cfg(unix)]
                Signal::Quit => async_signal::Signal::Quit,
                #[cfg(not(unix))]
                other => return Err(unsupported(other)),
            });
        }
        Ok(Self(Inner::Async(async_signal::Signals::new(caught)?)))
    }
}

#[cfg(not(unix))]
fn unsupported(signal: Signal) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{signal:?}: only Ctrl-C (Signal::Int) can be caught here"),
    )
}

impl Stream for Signals {
    type Item = io::Result<Signal>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match &mut self.get_mut().0 {
            #[cfg(all(feature = "tokio", unix))]
            Inner::Tokio(caught) => {
                for (name, signal) in caught.iter_mut() {
                    if let Poll::Ready(got) = signal.poll_recv(cx) {
                        return Poll::Ready(got.map(|()| Ok(*name)));
                    }
                }
                Poll::Pending
            }
            #[cfg(all(feature = "tokio", windows))]
            Inner::Tokio(ctrl_c) => ctrl_c
                .poll_recv(cx)
                .map(|got| got.map(|()| Ok(Signal::Int))),
            #[cfg(any(feature = "smol", feature = "async-std"))]
            Inner::Async(signals) => Pin::new(signals)
                .poll_next(cx)
                .map(|got| got.map(|signal| signal.map(from_async_signal))),
        }
    }
}

#[cfg(any(feature = "smol", feature = "async-std"))]
fn from_async_signal(signal: async_signal::Signal) -> Signal {
    match signal {
        #[cfg(unix)]
        async_signal::Signal::Term => Signal::Term,
        #[cfg(unix)]
        async_signal::Signal::Hup => Signal::Hup,
        #[cfg(unix)]
        async_signal::Signal::Quit => Signal::Quit,
        // Only the signals asked for come: Int, on every platform.
        _ => Signal::Int,
    }
}
