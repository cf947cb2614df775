//! The wire tap: an opt-in observer that sees what crosses a transport,
//! both ways, with the runtime's timestamps.
//!
//! A [`Tap`] set with [`Config::tap`](crate::Config::tap) (or
//! [`Transport::with_tap`](crate::Transport::with_tap) for a channel over a
//! pipe pair) is called with a [`TapEvent`] and the time from
//! [`Runtime::now`]:
//!
//! - [`Sent`](TapEvent::Sent): a message accepted for sending (`send`,
//!   `send_many`, the `Sink`), as the caller gave it, framing excluded;
//! - [`Received`](TapEvent::Received) and [`Notice`](TapEvent::Notice): a
//!   message or a notice as the receiver hands it out (`recv`, `recv_many`,
//!   the `Stream`), so in the order the caller sees them;
//! - [`Stderr`](TapEvent::Stderr): a line the child wrote to stderr, with
//!   its level, when stderr is captured ([`StderrMode::Show`] or
//!   [`StderrMode::Capture`]);
//! - [`Exited`](TapEvent::Exited): the child's end, once, when the receiver
//!   hands the exit report out, or else when the transport is gone and the
//!   report is known.
//!
//! The tap is called outside the transport's locks, but inside the call
//! that moved the item (`recv`'s poll, `send`), in the caller's task: it
//! must not block, or that call waits for it (a timeout around `recv`
//! cannot fire while the tap blocks inside it). Hand slow work to a thread
//! or a channel, as [`Recorder`] does. It may call back into the transport
//! from another task. A tap that panics is not called again; the
//! transport goes on, and a `tracing` error says so once. With no tap set,
//! all it costs is a check of an `Option`; with one, `send_many` sends its
//! messages one by one, so that the tap sees each as it is accepted.
//!
//! [`Recorder`] (feature `serde`) writes the events as NDJSON: a recording
//! of the session, which `relay --log` writes too.
//!
//! [`StderrMode::Show`]: crate::StderrMode::Show
//! [`StderrMode::Capture`]: crate::StderrMode::Capture
// Without the `serde` feature the recorder is not built: its links go to
// docs.rs, which builds every feature.
#![cfg_attr(
    not(feature = "serde"),
    doc = "[`Recorder`]: https://docs.rs/childwire-async/latest/childwire_async/tap/struct.Recorder.html"
)]

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Instant;

use childwire_core::stderr_level::{Level, level_of};
use childwire_core::{ExitReport, Malformed, Oversized, PollutionNotice, Received};

use crate::StderrCallback;
use crate::exit_handle::ExitHandle;
use crate::runtime::Runtime;

#[cfg(feature = "serde")]
mod recorder;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use recorder::{Direction, RECORDER_QUEUE_LIMIT, RECORDER_STALL, Recorder};

/// An observer of a transport: sees each message both ways, each notice,
/// the child's stderr lines and its exit. See the [module docs](self).
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::Instant;
/// use childwire_async::Config;
/// use childwire_async::tap::{Tap, TapEvent};
///
/// /// Counts the bytes sent to the child.
/// #[derive(Default)]
/// struct BytesSent(AtomicU64);
///
/// impl Tap for BytesSent {
///     fn event(&self, _at: Instant, event: TapEvent<'_>) {
///         if let TapEvent::Sent(message) = event {
///             self.0.fetch_add(message.len() as u64, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let mut config = Config::default();
/// config.tap(BytesSent::default());
/// ```
pub trait Tap: Send + Sync + 'static {
    /// Called with each event, and `at`, the runtime's time when it
    /// happened, in the task that moved it. Events of one direction come in
    /// their order; a sender in another task may see its `Sent` reported a
    /// little after a `Received` that happened later.
    ///
    /// It must not block: it runs inside the transport's `recv` and `send`,
    /// which wait for it. A tap with slow work (writing a file, a socket)
    /// queues it for a thread of its own, up to a bound, as [`Recorder`]
    /// does.
    #[cfg_attr(not(feature = "serde"), doc = "")]
    #[cfg_attr(
        not(feature = "serde"),
        doc = "[`Recorder`]: https://docs.rs/childwire-async/latest/childwire_async/tap/struct.Recorder.html"
    )]
    fn event(&self, at: Instant, event: TapEvent<'_>);
}

/// A tap shared with the caller: e.g. a [`Recorder`] the caller also
/// flushes, or records in itself.
#[cfg_attr(not(feature = "serde"), doc = "")]
#[cfg_attr(
    not(feature = "serde"),
    doc = "[`Recorder`]: https://docs.rs/childwire-async/latest/childwire_async/tap/struct.Recorder.html"
)]
impl<T: Tap + ?Sized> Tap for Arc<T> {
    fn event(&self, at: Instant, event: TapEvent<'_>) {
        (**self).event(at, event);
    }
}

/// A [`Tap`] made of a closure.
///
/// ```
/// use childwire_async::Config;
/// use childwire_async::tap::{self, TapEvent};
///
/// let mut config = Config::default();
/// config.tap(tap::from_fn(|at, event| {
///     if let TapEvent::Stderr { line, level } = event {
///         eprintln!("{at:?} {level:?} {}", String::from_utf8_lossy(line));
///     }
/// }));
/// ```
pub fn from_fn<F>(f: F) -> FromFn<F>
where
    F: Fn(Instant, TapEvent<'_>) + Send + Sync + 'static,
{
    FromFn(f)
}

/// The [`Tap`] of [`from_fn`].
#[derive(Clone)]
pub struct FromFn<F>(F);

impl<F> Tap for FromFn<F>
where
    F: Fn(Instant, TapEvent<'_>) + Send + Sync + 'static,
{
    fn event(&self, at: Instant, event: TapEvent<'_>) {
        (self.0)(at, event);
    }
}

impl<F> fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FromFn(..)")
    }
}

/// What a [`Tap`] sees.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum TapEvent<'a> {
    /// A message accepted for sending, as given (framing excluded).
    Sent(&'a [u8]),
    /// A message handed out by the receiver.
    Received(&'a [u8]),
    /// A notice handed out by the receiver.
    Notice(Notice<'a>),
    /// A line the child wrote to stderr (without its line terminator), and
    /// the level it names, if any
    /// ([`level_of`]).
    Stderr {
        /// The line as the child wrote it.
        line: &'a [u8],
        /// Its level; `None` when it names none.
        level: Option<Level>,
    },
    /// The child's end.
    Exited(&'a ExitReport),
}

/// A notice the receiver handed out: what [`Received`] holds besides
/// messages and the exit.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Notice<'a> {
    /// A message over the size limit was dropped.
    Oversized(&'a Oversized),
    /// Bytes that break the wire format were dropped.
    Malformed(&'a Malformed),
    /// A stdout line that is not a JSON message, named.
    Pollution(&'a PollutionNotice),
}

/// The event of one received item (`None` for a kind of item this
/// version does not know).
fn event_of(item: &Received) -> Option<TapEvent<'_>> {
    Some(match item {
        Received::Message(message) => TapEvent::Received(message),
        Received::Oversized(notice) => TapEvent::Notice(Notice::Oversized(notice)),
        Received::Malformed(notice) => TapEvent::Notice(Notice::Malformed(notice)),
        Received::Pollution(notice) => TapEvent::Notice(Notice::Pollution(notice)),
        Received::Exited(report) => TapEvent::Exited(report),
        _ => return None,
    })
}

/// The tap a [`Config`](crate::Config) holds, shared by every transport spawned with it
/// (each generation of a supervised child): a tap that panicked stays
/// silenced.
#[derive(Clone)]
pub(crate) struct TapSlot(Arc<TapCell>);

impl TapSlot {
    pub(crate) fn new(tap: impl Tap) -> Self {
        Self(Arc::new(TapCell {
            tap: Box::new(tap),
            panicked: AtomicBool::new(false),
        }))
    }
}

/// A set tap, shared by every handle of the transport (senders and the
/// receiver call it from their own tasks, outside the transport's locks).
/// An atomic rather than a lock: it is read on every tapped message and
/// written once, if ever. Only a transport with a tap has one; without a
/// tap each hook is one `Option` check (the gate's rows moved by at most
/// 0.7% when the hooks landed, `cargo xtask bench --check`).
struct TapCell {
    tap: Box<dyn Tap>,
    /// The tap panicked once: it is not called again.
    panicked: AtomicBool,
}

impl TapCell {
    fn call(&self, at: Instant, event: TapEvent<'_>) {
        if self.panicked.load(Ordering::Relaxed) {
            return;
        }
        if catch_unwind(AssertUnwindSafe(|| self.tap.event(at, event))).is_err()
            && !self.panicked.swap(true, Ordering::Relaxed)
        {
            crate::log::error!("the transport's tap panicked; it is not called again");
        }
    }
}

/// A transport's handle on its tap, in each sender, the receiver and the
/// stderr callback; `None` without a tap, and then every hook is one check.
pub(crate) struct Hook<R: Runtime>(Option<Arc<Tapped<R>>>);

/// A transport's tap, with what its hooks need: the clock, and the exit
/// report for the transport's end.
struct Tapped<R: Runtime> {
    cell: Arc<TapCell>,
    rt: R,
    exit: ExitHandle,
    /// The exit was shown to the tap. An atomic: the receiver and the last
    /// handle's drop may race to show it, from different tasks, once per
    /// transport.
    exited: AtomicBool,
}

impl<R: Runtime> Clone for Hook<R> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<R: Runtime> Hook<R> {
    pub(crate) fn none() -> Self {
        Self(None)
    }

    /// The hook of one transport on `slot`'s tap; `exit` is its report.
    pub(crate) fn new(slot: Option<&TapSlot>, rt: &R, exit: ExitHandle) -> Self {
        Self(slot.map(|slot| {
            Arc::new(Tapped {
                cell: Arc::clone(&slot.0),
                rt: rt.clone(),
                exit,
                exited: AtomicBool::new(false),
            })
        }))
    }

    /// Whether there is a tap.
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// A message accepted for sending.
    #[inline]
    pub(crate) fn sent_one(&self, message: &[u8]) {
        if let Some(tapped) = &self.0 {
            tapped.sent_one(message);
        }
    }

    /// `item`, which `poll_recv` hands out, shown first.
    pub(crate) fn received(&self, item: Poll<Option<Received>>) -> Poll<Option<Received>> {
        if let (Some(tapped), Poll::Ready(Some(item))) = (&self.0, &item) {
            tapped.received(std::slice::from_ref(item));
        }
        item
    }

    /// Items `recv_many` moved, after the first (which `poll_recv` showed).
    #[inline]
    pub(crate) fn received_all(&self, items: &[Received]) {
        if let Some(tapped) = &self.0 {
            tapped.received(items);
        }
    }

    /// `callback` with the tap shown each stderr line first; the tap's
    /// handle stays with the background task until the child's end, so a
    /// transport dropped early still shows the exit.
    pub(crate) fn with_stderr(&self, callback: Option<StderrCallback>) -> Option<StderrCallback> {
        let Some(tapped) = self.0.clone() else {
            return callback;
        };
        Some(Arc::new(move |line: &[u8]| {
            let level = level_of(line);
            tapped
                .cell
                .call(tapped.rt.now(), TapEvent::Stderr { line, level });
            if let Some(callback) = &callback {
                callback(line);
            }
        }))
    }
}

impl<R: Runtime> Tapped<R> {
    #[cold]
    #[inline(never)]
    fn sent_one(&self, message: &[u8]) {
        self.cell.call(self.rt.now(), TapEvent::Sent(message));
    }

    #[cold]
    #[inline(never)]
    fn received(&self, items: &[Received]) {
        let at = self.rt.now();
        for item in items {
            if matches!(item, Received::Exited(_)) && self.exited.swap(true, Ordering::Relaxed) {
                continue;
            }
            if let Some(event) = event_of(item) {
                self.cell.call(at, event);
            }
        }
    }
}

impl<R: Runtime> Drop for Tapped<R> {
    /// The transport is gone (every handle, and the background task): if
    /// the receiver never handed the report out, the tap gets it now.
    fn drop(&mut self) {
        if *self.exited.get_mut() {
            return;
        }
        if let Some(report) = self.exit.get() {
            self.cell.call(self.rt.now(), TapEvent::Exited(&report));
        }
    }
}

impl<R: Runtime> fmt::Debug for Hook<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Hook(tap)"
        } else {
            "Hook(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::Config;

    #[test]
    fn a_panicking_tap_is_called_once_and_then_left_alone() {
        let calls = Arc::new(Mutex::new(0));
        let counted = Arc::clone(&calls);
        let mut config = Config::default();
        config.tap(from_fn(move |_, _| {
            *counted.lock().unwrap() += 1;
            panic!("a tap that fails");
        }));
        let cell = &config.tap.as_ref().unwrap().0;
        let at = Instant::now();
        cell.call(at, TapEvent::Sent(b"{}"));
        cell.call(at, TapEvent::Received(b"{}"));
        assert_eq!(*calls.lock().unwrap(), 1);
        assert!(cell.panicked.load(Ordering::Relaxed));
    }
}
