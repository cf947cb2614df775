//! How the parts of a child transport are joined: what one part decides,
//! routed to the other, as plain functions over the parts.
//!
//! [`Session`](crate::Session) is these functions over the parts it owns. A
//! driver that holds the parts apart (each pipe driven from its own task,
//! behind its own lock, after [`Session::into_parts`](crate::Session::into_parts))
//! calls the same functions at the same points, so it decides nothing the
//! session would not.

use std::time::Instant;

use crate::ending::Exit;
use crate::framing::Framing;
use crate::outbound::{Closed, Outbound};
use crate::supervisor::Supervisor;

/// After any change to the outbound half: tells the supervisor whether
/// bytes wait for stdin (a shutdown closes stdin once they are written),
/// and, when the write timeout gave up on the child, to close its stdin
/// (the end then counts as [`EndedBy::StdinClose`](crate::EndedBy)).
/// Harmless to call more often.
pub fn route_outbound<F: Framing>(
    outbound: &Outbound<F>,
    supervisor: &mut Supervisor,
    now: Instant,
) {
    if matches!(outbound.closed(), Some(Closed::Stalled { .. })) {
        supervisor.handle_close_stdin(now);
    }
    supervisor.handle_outbound(!outbound.is_drained(), now);
}

/// The child's stdin is closed, for `reason`: by the driver after
/// [`Action::CloseStdin`](crate::Action::CloseStdin) ([`Closed::Closing`]),
/// or because a write failed ([`Closed::PeerClosed`]). What was still
/// queued is dropped, sending fails from now on (with the first reason
/// given), and the lifecycle knows nothing more will be flushed.
pub fn stdin_closed<F: Framing>(
    outbound: &mut Outbound<F>,
    supervisor: &mut Supervisor,
    reason: Closed,
    now: Instant,
) {
    outbound.abort(reason);
    let _ = outbound.poll_close();
    supervisor.handle_stdin_closed(now);
}

/// The child was reaped with `exit`: sending ends (what was queued is
/// dropped), and the lifecycle decides the end.
pub fn exited<F: Framing>(
    outbound: &mut Outbound<F>,
    supervisor: &mut Supervisor,
    exit: Exit,
    now: Instant,
) {
    outbound.abort(Closed::Exited);
    let _ = outbound.poll_close();
    supervisor.handle_exit(exit, now);
}
