//! What ends `--restart`'s watch: the end of stdin, or SIGINT, SIGTERM or
//! SIGHUP (Ctrl-C at a terminal), caught so the server is shut down the
//! MCP way rather than left behind.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::signals::{Signal, Signals};

/// The signals that end the watch.
#[cfg(unix)]
const CAUGHT: [Signal; 3] = [Signal::Term, Signal::Int, Signal::Hup];
#[cfg(not(unix))]
const CAUGHT: [Signal; 1] = [Signal::Int];

/// Whether stdin has ended, and who waits for it.
#[derive(Default)]
struct Eof {
    ended: bool,
    waker: Option<Waker>,
}

/// The end of stdin or a signal, whichever comes first.
pub(super) struct Stop {
    signals: Option<Signals>,
    eof: Arc<Mutex<Eof>>,
}

impl Stop {
    /// Starts catching the signals and reading stdin to its end, on a
    /// thread of its own: a blocking read works the same on every runtime,
    /// and the process ends without waiting for it.
    pub(super) fn new(name: &str) -> Self {
        let signals = match Signals::new(CAUGHT) {
            Ok(signals) => Some(signals),
            Err(err) => {
                note!("{name}: cannot catch signals ({err}); end stdin to end the session");
                None
            }
        };
        let eof: Arc<Mutex<Eof>> = Arc::default();
        let seen = Arc::clone(&eof);
        let reader = std::thread::Builder::new()
            .name("stdin-eof".to_owned())
            .spawn(move || {
                // What is typed is not for anyone: only its end counts.
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                let mut eof = seen.lock().unwrap_or_else(PoisonError::into_inner);
                eof.ended = true;
                if let Some(waker) = eof.waker.take() {
                    waker.wake();
                }
            });
        if let Err(err) = reader {
            note!("{name}: cannot watch stdin ({err}); Ctrl-C ends the session");
        }
        Self { signals, eof }
    }

    /// Ready with the reason once stdin has ended or a signal came.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<String> {
        if let Some(signals) = &mut self.signals {
            match futures_core::Stream::poll_next(Pin::new(signals), cx) {
                Poll::Ready(Some(Ok(signal))) => return Poll::Ready(name(signal).to_owned()),
                Poll::Ready(_) => self.signals = None,
                Poll::Pending => {}
            }
        }
        let mut eof = self.eof.lock().unwrap_or_else(PoisonError::into_inner);
        if eof.ended {
            return Poll::Ready("end of stdin".to_owned());
        }
        eof.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

fn name(signal: Signal) -> &'static str {
    match signal {
        #[cfg(unix)]
        Signal::Term => "SIGTERM",
        Signal::Int => "SIGINT",
        #[cfg(unix)]
        Signal::Hup => "SIGHUP",
        _ => "a signal",
    }
}
