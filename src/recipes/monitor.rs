//! A held lock's node, token and state, for threads other than the holder's.

use std::sync::Arc;
use std::time::Duration;

use super::held::{LockState, Tracker};
use crate::changes::StateChanges;
use crate::error::Result;
use crate::{Op, OpOutcome};

/// A view of one held lock that any thread may keep: its node, fencing
/// token and state, without the guard. Guards are not `Send` (a lock knows
/// its holds by thread), so a watchdog or a worker thread that must stop
/// when the lock is lost takes a monitor instead:
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// # let client = zklock::Client::connect("127.0.0.1:2181")?;
/// let lock = client.mutex("/locks/nightly")?;
/// let guard = lock.lock()?;
/// let monitor = guard.monitor();
/// std::thread::spawn(move || {
///     if monitor.wait_while_held(None) != zklock::LockState::Held {
///         eprintln!("lock on {} lost or suspended: stopping", monitor.node());
///     }
/// });
/// // ... the job, with `guard` held ...
/// # Ok(()) }
/// ```
///
/// The monitor follows the hold, not the guard's lifetime: once the lock
/// is released (its guard dropped, which marks it at once, or its `unlock`
/// answered; for a [`ReentrantMutex`](crate::ReentrantMutex), its thread's
/// last guard) or the node deleted, the state turns `Lost`. Cloning is cheap
/// and releases nothing. A monitor keeps its client's session open, as a
/// [`Client`](crate::Client) handle does.
#[derive(Debug, Clone)]
pub struct LockMonitor {
    tracker: Arc<Tracker>,
}

impl LockMonitor {
    pub(crate) fn new(tracker: Arc<Tracker>) -> LockMonitor {
        LockMonitor { tracker }
    }

    /// The lock node's path.
    pub fn node(&self) -> &str {
        self.tracker.node()
    }

    /// The lock node's creation zxid, as the guard's
    /// [`fencing_token`](crate::MutexGuard::fencing_token) gives it.
    pub fn fencing_token(&self) -> i64 {
        self.tracker.fencing_token()
    }

    /// `Held`, `Suspended` or `Lost`, as the guard's
    /// [`state`](crate::MutexGuard::state) gives it.
    pub fn state(&self) -> LockState {
        self.tracker.state()
    }

    /// Blocks until the state is no longer `Held` (or `timeout` passes) and
    /// returns it.
    pub fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        self.tracker.wait_while_held(timeout)
    }

    /// A channel that receives every later change of [`Self::state`],
    /// until it is dropped (see [`StateChanges`]).
    pub fn state_changes(&self) -> StateChanges<LockState> {
        self.tracker.state_changes()
    }

    /// Applies `ops` atomically, and only while the lock is held, as the
    /// guard's [`multi`](crate::MutexGuard::multi) does: a worker thread
    /// writes under the holder's lock. `LockLost` once the guard is
    /// released.
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpOutcome>> {
        self.tracker.multi(ops)
    }

    /// An op that fails its transaction unless the lock is still held (see
    /// [`MutexGuard::check_op`](crate::MutexGuard::check_op)).
    pub fn check_op(&self) -> Op {
        self.tracker.check_op()
    }

    /// How many `state_changes` receivers of this hold (the guard's and
    /// its monitors') are registered: for tests that check none outlives
    /// its receiver.
    #[cfg(feature = "testing")]
    pub fn state_listener_count(&self) -> usize {
        self.tracker.state_listener_count()
    }
}
