//! The crate's log events and the child's span: `tracing`'s with the
//! `tracing` feature, nothing without it.
//!
//! Call sites write `crate::log::warn!(...)` (and `debug!`, `info!`,
//! `error!`, `debug_span!`, [`Span`]) with `tracing`'s syntax. Without the
//! feature an event's fields and message are type-checked (so what only a
//! log reads is still used, and stays correct) inside `if false`: nothing of
//! them is evaluated, nothing is formatted.

#[cfg(feature = "tracing")]
pub(crate) use tracing::{Span, debug, debug_span, error, info, warn};

/// The child's span, without `tracing`: nothing to enter.
#[cfg(not(feature = "tracing"))]
#[derive(Clone, Debug)]
pub(crate) struct Span;

#[cfg(not(feature = "tracing"))]
impl Span {
    /// Does nothing; `tracing`'s returns a guard.
    pub(crate) fn enter(&self) {}
}

/// What an event names, used without being evaluated: `target: ...`,
/// fields (`name = value`, `name = %value`, `name = ?value`), then the
/// message and its arguments.
#[cfg(not(feature = "tracing"))]
macro_rules! unused {
    () => {};
    (target: $target:expr, $($rest:tt)*) => {
        let _ = $target;
        $crate::log::unused!($($rest)*);
    };
    ($field:ident = % $value:expr $(, $($rest:tt)*)?) => {
        let _ = &$value;
        $crate::log::unused!($($($rest)*)?);
    };
    ($field:ident = ? $value:expr $(, $($rest:tt)*)?) => {
        let _ = &$value;
        $crate::log::unused!($($($rest)*)?);
    };
    ($field:ident = $value:expr $(, $($rest:tt)*)?) => {
        let _ = &$value;
        $crate::log::unused!($($($rest)*)?);
    };
    ($($message:tt)+) => {
        let _ = ::std::format_args!($($message)+);
    };
}

/// An event that is not logged: its parts type-checked, never run.
#[cfg(not(feature = "tracing"))]
macro_rules! event {
    ($($event:tt)*) => {
        if false {
            $crate::log::unused!($($event)*);
        }
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! debug_span {
    ($name:literal $(, $($fields:tt)*)?) => {{
        if false {
            $crate::log::unused!($($($fields)*)?);
        }
        $crate::log::Span
    }};
}

#[cfg(not(feature = "tracing"))]
pub(crate) use {debug_span, event as debug, event as error, event as info, event as warn, unused};
