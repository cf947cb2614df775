//! The state the driver task and the user's handles share.
//!
//! One plain mutex guards the [`Session`]. It is locked only inside `poll`
//! functions and never held across an `.await`, as in quinn's driver.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use childwire_core::Session;

pub(crate) type SharedRef = Arc<Shared>;

pub(crate) struct Shared {
    state: Mutex<State>,
}

impl Shared {
    pub(crate) fn new(session: Session) -> SharedRef {
        Arc::new(Shared {
            state: Mutex::new(State {
                session,
                recv_waker: None,
                send_wakers: Vec::new(),
                done_wakers: Vec::new(),
                driver_waker: None,
                driver_stopped: false,
                handles: 0,
                abandoned: false,
            }),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the session in a
        // state its own methods keep consistent; go on with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) struct State {
    pub(crate) session: Session,
    /// The receiver waiting for an item.
    pub(crate) recv_waker: Option<Waker>,
    /// Senders waiting for room in the queue, or for it to drain.
    pub(crate) send_wakers: Vec<Waker>,
    /// `shutdown()` calls waiting for the report.
    pub(crate) done_wakers: Vec<Waker>,
    pub(crate) driver_waker: Option<Waker>,
    /// The driver task ended without a report (its runtime shut down).
    pub(crate) driver_stopped: bool,
    /// Live user handles (senders and the receiver).
    pub(crate) handles: usize,
    /// Every handle was dropped without a shutdown: the child is to be
    /// killed (C14).
    pub(crate) abandoned: bool,
}

impl State {
    pub(crate) fn wake_driver(&mut self) {
        if let Some(waker) = self.driver_waker.take() {
            waker.wake();
        }
    }

    /// Wakes every user future whose condition may now hold.
    pub(crate) fn wake_users(&mut self) {
        let over = self.driver_stopped || self.session.report().is_some();
        if self.session.has_received() || over {
            if let Some(waker) = self.recv_waker.take() {
                waker.wake();
            }
        }
        if self.session.send_ready() || over {
            self.send_wakers.drain(..).for_each(Waker::wake);
        }
        if over {
            self.done_wakers.drain(..).for_each(Waker::wake);
        }
    }

    pub(crate) fn register(wakers: &mut Vec<Waker>, waker: &Waker) {
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }
}
