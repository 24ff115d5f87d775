//! One guard type for every lock kind, for code that picks the kind at run
//! time.

use std::time::Duration;

use super::{
    LockMonitor, LockState, MutexGuard, ReentrantMutexGuard, RwLockReadGuard, RwLockWriteGuard,
};
use crate::error::Result;

/// A guard of any lock kind, for code that chooses the kind at run time (a
/// command-line flag that asks for a read or a write lock, say) and then
/// treats every hold alike. Each method does what the wrapped guard's
/// method of the same name does; see [`MutexGuard`] for the details.
///
/// Made with `From` (or `.into()`) from any of the four guards, and taken
/// apart with `match`. Like them it is not `Clone` and not `Send`, and
/// dropping it releases the lock (for a [`ReentrantMutexGuard`], this
/// hold).
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// let client = zklock::Client::connect("127.0.0.1:2181")?;
/// let lock = zklock::RwLock::new(&client, "/locks/report")?;
/// let read_only = std::env::args().any(|a| a == "--read");
/// let guard: zklock::AnyGuard<'_> = if read_only {
///     lock.read()?.into()
/// } else {
///     lock.write()?.into()
/// };
/// println!("holding {} with token {}", guard.node(), guard.fencing_token());
/// guard.unlock()?;
/// # Ok(()) }
/// ```
///
/// ```compile_fail
/// fn hand_over<T: Send>(_: T) {}
/// # fn main() -> zklock::Result<()> {
/// let client = zklock::Client::connect("127.0.0.1:2181")?;
/// let lock = client.mutex("/locks/job")?;
/// hand_over(zklock::AnyGuard::from(lock.lock()?));
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub enum AnyGuard<'a> {
    /// A [`Mutex`](crate::Mutex) held.
    Mutex(MutexGuard<'a>),
    /// One hold of a [`ReentrantMutex`](crate::ReentrantMutex).
    Reentrant(ReentrantMutexGuard<'a>),
    /// A read lock of an [`RwLock`](crate::RwLock).
    Read(RwLockReadGuard<'a>),
    /// The write lock of an [`RwLock`](crate::RwLock).
    Write(RwLockWriteGuard<'a>),
}

/// `$body` with `$g` bound to the guard inside `$guard`, whatever its kind.
macro_rules! with_guard {
    ($guard:expr, $g:ident => $body:expr) => {
        match $guard {
            AnyGuard::Mutex($g) => $body,
            AnyGuard::Reentrant($g) => $body,
            AnyGuard::Read($g) => $body,
            AnyGuard::Write($g) => $body,
        }
    };
}

impl AnyGuard<'_> {
    /// The lock node's creation zxid (see [`MutexGuard::fencing_token`]).
    pub fn fencing_token(&self) -> i64 {
        with_guard!(self, g => g.fencing_token())
    }

    /// The lock node's path.
    pub fn node(&self) -> &str {
        with_guard!(self, g => g.node())
    }

    /// `Held`, `Suspended` or `Lost` (see [`MutexGuard::state`]).
    pub fn state(&self) -> LockState {
        with_guard!(self, g => g.state())
    }

    /// Blocks until the state is no longer `Held` (or `timeout` passes) and
    /// returns it.
    pub fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        with_guard!(self, g => g.wait_while_held(timeout))
    }

    /// A channel that receives every later change of [`Self::state`].
    pub fn state_changes(&self) -> crate::StateChanges<LockState> {
        with_guard!(self, g => g.state_changes())
    }

    /// The node, token and state of this hold for another thread.
    pub fn monitor(&self) -> LockMonitor {
        with_guard!(self, g => g.monitor())
    }

    /// Applies `ops` atomically, and only while this lock is held (see
    /// [`MutexGuard::multi`]).
    pub fn multi(&self, ops: &[crate::Op]) -> Result<Vec<crate::OpOutcome>> {
        with_guard!(self, g => g.multi(ops))
    }

    /// An op that fails its transaction unless this lock is still held
    /// (see [`MutexGuard::check_op`]).
    pub fn check_op(&self) -> crate::Op {
        with_guard!(self, g => g.check_op())
    }

    /// Releases the lock (for a reentrant hold, this hold) and waits for
    /// the server's confirmation, as the wrapped guard's `unlock` does.
    pub fn unlock(self) -> Result<()> {
        with_guard!(self, g => g.unlock())
    }
}

impl<'a> From<MutexGuard<'a>> for AnyGuard<'a> {
    fn from(guard: MutexGuard<'a>) -> Self {
        AnyGuard::Mutex(guard)
    }
}

impl<'a> From<ReentrantMutexGuard<'a>> for AnyGuard<'a> {
    fn from(guard: ReentrantMutexGuard<'a>) -> Self {
        AnyGuard::Reentrant(guard)
    }
}

impl<'a> From<RwLockReadGuard<'a>> for AnyGuard<'a> {
    fn from(guard: RwLockReadGuard<'a>) -> Self {
        AnyGuard::Read(guard)
    }
}

impl<'a> From<RwLockWriteGuard<'a>> for AnyGuard<'a> {
    fn from(guard: RwLockWriteGuard<'a>) -> Self {
        AnyGuard::Write(guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guard_may_be_read_from_other_threads() {
        fn shared_between_threads<T: Sync>() {}
        shared_between_threads::<MutexGuard<'static>>();
        shared_between_threads::<ReentrantMutexGuard<'static>>();
        shared_between_threads::<RwLockReadGuard<'static>>();
        shared_between_threads::<RwLockWriteGuard<'static>>();
        shared_between_threads::<AnyGuard<'static>>();
    }
}
