//! `Mutex` and `ReentrantMutex`: fair, exclusive, across processes.

use std::marker::PhantomData;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::acquire::{Attempt, LockSpec, Patience, Rule, Waiters};
use super::held::{HeldLock, Hold, Holders, LockState, Tracker};
use super::monitor::LockMonitor;
use super::naming::MUTEX_MARKER;
use crate::client::core::lock;
use crate::error::{Error, Result};
use crate::proto::Acl;
use crate::Client;

/// A fair (first come, first served) distributed mutex at a lock path.
///
/// Contenders in any process create an EPHEMERAL_SEQUENTIAL node under the
/// path; the lowest sequence holds the lock, and each other contender watches
/// only its predecessor. Nodes are named `_c_<uuid>-lock-<seq>` like Curator's
/// `InterProcessMutex`, and kazoo's `<uuid>__lock__<seq>` nodes (and its
/// `ReadLock`'s `<uuid>__rlock__<seq>`) count as contenders too, so zklock
/// processes can share a path with Curator's, or with kazoo's (given the
/// `extra_lock_patterns` and within the caveats of the README's
/// "Interoperability with Curator and kazoo"; never with both at once).
/// So do an [`RwLock`](crate::RwLock)'s read and write nodes: a mutex and a
/// read-write lock on one path exclude each other among zklock processes.
///
/// Share one `Mutex` between a process's threads: a thread that already
/// holds the path through another lock object is not recognised, and waits
/// on itself until its deadline instead of getting `WouldDeadlock`.
///
/// A lock object, like its guards and monitors, holds a handle on its
/// [`Client`]: the session stays open while any of them lives. A guard
/// borrows its lock object, so keep the object in a variable: `let m =
/// client.mutex(p)?; let g = m.lock()?;`, not `client.mutex(p)?.lock()?`.
#[derive(Debug)]
pub struct Mutex {
    spec: LockSpec,
    waiters: Waiters,
    holders: Holders,
}

impl Mutex {
    /// A mutex at `path` (created on demand as container nodes, which the
    /// server deletes once empty). Not at `/`, unless the client has a
    /// chroot: then `/` is the chroot node.
    pub fn new(client: &Client, path: &str) -> Result<Mutex> {
        Ok(Mutex {
            spec: LockSpec::new(client, path)?,
            waiters: Waiters::default(),
            holders: Holders::default(),
        })
    }

    /// Sets the data stored in this mutex's lock nodes (default:
    /// `host=<name> pid=<pid> thread=<name>`, so tools can show the holder).
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.spec.data = Some(data.into());
        self
    }

    /// Sets the ACL of the lock nodes and directories (default: open).
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.spec.acl = acl;
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.spec.path
    }

    /// Blocks until the lock is held. Fails with the session's error if the
    /// session ends (`SessionExpired`, say, or `Closed` if another thread
    /// closes the client), with `LockLost` if the waiting
    /// node is deleted (by an operator), with `Cancelled` after
    /// [`Mutex::cancel`], or with `WouldDeadlock` if this thread already
    /// holds it. A request the server refuses ends it with that error
    /// (`NoAuth` from the lock path's ACL, `NotReadOnly` on a read-only
    /// server...). Lost connections and throttled creates are retried: the
    /// create (with, on a path's first use, its directory's) up to 10
    /// times, the wait's other requests until two session
    /// timeouts pass without progress (a listing or watch event, or the
    /// predecessor's release), and then their last error ends it.
    pub fn lock(&self) -> Result<MutexGuard<'_>> {
        self.acquire(Patience::FOREVER)?
            .ok_or_else(crate::error::ended_without_deadline)
    }

    /// One attempt that does not wait for other holders: `Ok(None)` if
    /// another contender holds it. It still waits for the server's answers,
    /// through a reconnect if need be, and fails as [`Mutex::lock`] does
    /// (`WouldDeadlock` included).
    pub fn try_lock(&self) -> Result<Option<MutexGuard<'_>>> {
        self.acquire(Patience::one_try())
    }

    /// Waits up to `timeout`: `Ok(None)` if the lock was not acquired in time,
    /// whatever the connection does (so a timeout shorter than a round trip
    /// acquires nothing, even a free lock). A zero timeout is
    /// [`Mutex::try_lock`], which waits for the server's answers; one too
    /// long to make a deadline of waits without one. Fails as
    /// [`Mutex::lock`] does.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<MutexGuard<'_>>> {
        self.acquire(Patience::within(timeout))
    }

    /// Waits until `deadline`: `Ok(None)` if the lock was not acquired in
    /// time, whatever the connection does. A deadline already passed is
    /// [`Mutex::try_lock`], which waits for the server's answers. Fails as
    /// [`Mutex::lock`] does.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MutexGuard<'_>>> {
        self.acquire(Patience::until(deadline))
    }

    /// Wakes every attempt under way on this mutex (`lock`, `try_lock_for`,
    /// `try_lock_until`), which then fail with `Cancelled` and leave no node
    /// behind: a node whose create is still unanswered is deleted by the
    /// client's I/O thread when the answer comes, so it can be seen briefly
    /// after the call returns. Callable from any thread. Not sticky: a call
    /// that starts after it (or has not registered its attempt yet) is not
    /// cancelled, so to stop a call racing with it, cancel until the call
    /// returns.
    pub fn cancel(&self) {
        self.waiters.cancel();
    }

    /// True if the calling thread holds this mutex.
    pub fn is_held_by_current_thread(&self) -> bool {
        self.holders.current_thread_holds()
    }

    fn acquire(&self, patience: Patience) -> Result<Option<MutexGuard<'_>>> {
        if self.is_held_by_current_thread() {
            return Err(Error::WouldDeadlock);
        }
        let held = attempt(&self.spec, &self.waiters, patience)?;
        Ok(held.map(|held| MutexGuard {
            hold: Hold::new(held, &self.holders, true),
        }))
    }
}

fn attempt(spec: &LockSpec, waiters: &Waiters, patience: Patience) -> Result<Option<HeldLock>> {
    Attempt {
        spec,
        marker: MUTEX_MARKER,
        rule: Rule::Exclusive,
        waiters,
    }
    .run(patience)
}

/// Proof that a [`Mutex`] is held. Dropping it releases the lock without
/// waiting: the node's delete lingers for
/// [`release_linger`](crate::Config::release_linger) (200 µs by default)
/// so that this client's next acquisition of the path can carry it, goes
/// ahead of any other request of the client, is retried through reconnects
/// while the session lives (and after a back-off, on the same connection,
/// when the server throttles it), and is not sent if the lock is already
/// `Lost`.
/// [`MutexGuard::unlock`] releases at once and waits for the server's
/// confirmation: call it before a process exits, since a delete left to
/// the client's threads is lost with them (the node then lasts until the
/// session times out). Not `Clone`: one guard, one release. Not `Send`, like
/// [`std::sync::MutexGuard`]: the mutex knows its holder by thread, to
/// refuse a second `lock` there with `WouldDeadlock`; another thread
/// follows the lock through [`MutexGuard::monitor`].
///
/// ```compile_fail
/// fn hand_over<T: Send>(_: T) {}
/// # fn main() -> zklock::Result<()> {
/// let client = zklock::Client::connect("127.0.0.1:2181")?;
/// let lock = client.mutex("/locks/job")?;
/// hand_over(lock.lock()?);
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct MutexGuard<'a> {
    hold: Hold<'a>,
}

/// What every guard offers: the fencing token and the lock's state.
macro_rules! guard_accessors {
    () => {
        /// The lock node's creation zxid. It strictly increases from one
        /// holder of this path to the next, even across re-creations of the
        /// lock directory: give it to the protected storage so that it can
        /// reject writes from a holder that has since lost the lock. With
        /// an [`RwLock`](crate::RwLock), a writer's token exceeds every
        /// earlier holder's, and a reader's exceeds the earlier writers';
        /// readers holding together have no order among themselves (a
        /// later reader may be granted first).
        ///
        /// A node created together with this client's previous release of
        /// the lock (see [`Config::release_linger`](crate::Config::release_linger))
        /// learns its zxid from the server when first asked: the first call
        /// may wait for it (one read round trip, longer only through a
        /// reconnect, or a server's timeouts or throttling, asked again
        /// after a back-off). 0, which no resource checking tokens accepts, if the
        /// lock is lost before its token is known (it is then `Lost`), or
        /// if the server's answers cannot be had (more than 3 undecodable
        /// replies, or a refusal: the lock is then not marked `Lost`, and a
        /// later call asks again). 0 too, and the lock `Lost` for good, once its
        /// session has expired and a new one followed it (see
        /// [`new_session_on_expiry`](crate::ClientBuilder::new_session_on_expiry)):
        /// the client is connected again, but not as this lock's holder.
        pub fn fencing_token(&self) -> i64 {
            self.held().fencing_token()
        }

        /// The lock node's path.
        pub fn node(&self) -> &str {
            self.held().node()
        }

        /// `Held`, `Suspended` (connection lost: stop touching the resource)
        /// or `Lost` (final).
        ///
        /// A lock granted without waiting starts watching its node when its
        /// state is first asked for (or its token, unless the create told
        /// it), so a lock/unlock loop that never asks sends nothing for it.
        /// The first call waits for that watch's reply (one read round
        /// trip), so a node deleted before it already shows as `Lost`;
        /// later calls answer at once.
        pub fn state(&self) -> LockState {
            self.held().state()
        }

        /// Blocks until the state is no longer `Held` (or `timeout` passes)
        /// and returns it. Starts watching the node if nothing asked yet
        /// (see [`Self::state`]).
        pub fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
            self.held().wait_while_held(timeout)
        }

        /// A channel that receives every later change of [`Self::state`],
        /// until it is dropped (see [`StateChanges`](crate::StateChanges)).
        /// Starts watching the node if nothing asked yet.
        pub fn state_changes(&self) -> crate::StateChanges<LockState> {
            self.held().state_changes()
        }

        /// The node, token and state of this hold for another thread: the
        /// guard itself is not `Send`.
        pub fn monitor(&self) -> crate::recipes::LockMonitor {
            crate::recipes::LockMonitor::new(self.held().tracker())
        }

        /// Applies `ops` atomically, all or none, and only while this lock
        /// is held: one [`multi`](crate::Client::multi) transaction that
        /// first checks that the lock node still exists. The server applies
        /// a transaction at one point in its order of writes; a passed
        /// check means that no conflicting holder could exist at that point
        /// (no other holder at all, or for a read lock no writer), whatever
        /// this guard's state said when the call was made
        /// (an operator may have deleted the node since, say). See
        /// [`check_op`](Self::check_op) for why.
        ///
        /// The outcomes, and the index in [`Error::MultiFailed`], are those
        /// of `ops`; an empty `ops` asks the server whether the lock is
        /// still held. Errors: `LockLost` if the lock node is gone or the
        /// session expired (nothing applied; the guard's state turns
        /// `Lost`); `Closed` or `AuthFailed` if the session ended so
        /// (nothing applied; the guard turns `Lost` with the session);
        /// `NoAuth` if the lock node's ACL denies this session reading it; otherwise as for [`multi`](crate::Client::multi),
        /// where `ConnectionLoss` and `Timeout` leave the outcome unknown.
        pub fn multi(&self, ops: &[crate::Op]) -> Result<Vec<crate::OpOutcome>> {
            self.held().multi(ops)
        }

        /// An op for your own [`multi`](crate::Client::multi) that fails
        /// the transaction (with `NoNode`) unless this lock is still held,
        /// to write under several locks at once, say. It checks that the
        /// lock node exists: the node of a lock once held stays ahead of
        /// every contender it excludes for as long as it exists (it is the
        /// lowest contender; a read node, ahead of every writer still
        /// waiting), since nodes created later always come after it, so a
        /// transaction that passes the check was applied while the lock
        /// was held. Nodes are named by a
        /// per-attempt uuid, so no other hold can have the same node.
        pub fn check_op(&self) -> crate::Op {
            self.held().check_op()
        }
    };
}
pub(crate) use guard_accessors;

impl MutexGuard<'_> {
    fn held(&self) -> &HeldLock {
        self.hold.held()
    }

    guard_accessors!();

    /// Releases the lock and waits for the server to confirm the delete.
    /// `LockLost` if the lock had already been lost (its node gone, or its
    /// session expired). An error that leaves the delete's outcome unknown
    /// (a [retryable](Error::is_retryable) one such as `ConnectionLoss` or
    /// `Timeout`, or an undecodable reply's `Protocol`) leaves the delete
    /// to be retried in the background while the session lives, as a
    /// dropped guard's is; the guard is gone either way. A delete the
    /// server throttles (refuses unapplied, to shed load) is asked for
    /// again after a back-off of 100 ms doubling to 2 s, up to 10 times,
    /// before `ThrottledOp` leaves it to the background too.
    pub fn unlock(self) -> Result<()> {
        self.hold.unlock()
    }
}

/// A [`Mutex`] that the holding thread may lock again, with Curator
/// `InterProcessMutex` semantics: a per-thread hold count, and the node is
/// deleted when the count returns to zero.
#[derive(Debug)]
pub struct ReentrantMutex {
    spec: LockSpec,
    waiters: Waiters,
    holder: std::sync::Mutex<Option<Reentry>>,
}

#[derive(Debug)]
struct Reentry {
    thread: ThreadId,
    count: usize,
    held: HeldLock,
}

impl ReentrantMutex {
    /// A reentrant mutex at `path`.
    pub fn new(client: &Client, path: &str) -> Result<ReentrantMutex> {
        Ok(ReentrantMutex {
            spec: LockSpec::new(client, path)?,
            waiters: Waiters::default(),
            holder: std::sync::Mutex::new(None),
        })
    }

    /// Sets the data stored in the lock nodes (default:
    /// `host=<name> pid=<pid> thread=<name>`).
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.spec.data = Some(data.into());
        self
    }

    /// Sets the ACL of the lock nodes and directories (default: open).
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.spec.acl = acl;
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.spec.path
    }

    /// Blocks until held; returns at once (counting) if this thread holds
    /// it, or with `LockLost` if this thread's hold is known to be lost
    /// (drop its guards first). Otherwise it fails as [`Mutex::lock`]
    /// does, and also when another thread's hold was recorded after this
    /// attempt's grant (one of the two nodes was deleted meanwhile): then
    /// the recorded hold stays, and this attempt's node is given up, with
    /// `LockLost` if it is gone, or `ConnectionLoss` if the server cannot
    /// confirm it just then. The other attempts below fail the same way.
    pub fn lock(&self) -> Result<ReentrantMutexGuard<'_>> {
        self.acquire(Patience::FOREVER)?
            .ok_or_else(crate::error::ended_without_deadline)
    }

    /// One attempt that does not wait for other holders: `Ok(None)` if
    /// another thread or contender holds it. It still waits for the
    /// server's answers, through a reconnect if need be.
    pub fn try_lock(&self) -> Result<Option<ReentrantMutexGuard<'_>>> {
        self.acquire(Patience::one_try())
    }

    /// Waits up to `timeout` (without a deadline if too long to make one).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<ReentrantMutexGuard<'_>>> {
        self.acquire(Patience::within(timeout))
    }

    /// Waits until `deadline`.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<ReentrantMutexGuard<'_>>> {
        self.acquire(Patience::until(deadline))
    }

    /// Wakes every attempt under way with `Cancelled` (see
    /// [`Mutex::cancel`]; calls that start later are not cancelled).
    pub fn cancel(&self) {
        self.waiters.cancel();
    }

    /// How many times the calling thread holds the lock (0 if not at all).
    pub fn hold_count(&self) -> usize {
        let me = std::thread::current().id();
        lock(&self.holder)
            .as_ref()
            .filter(|r| r.thread == me)
            .map_or(0, |r| r.count)
    }

    fn acquire(&self, patience: Patience) -> Result<Option<ReentrantMutexGuard<'_>>> {
        let me = std::thread::current().id();
        if let Some(reentry) = lock(&self.holder).as_mut().filter(|r| r.thread == me) {
            // Curator hands out a lost hold again; a caller that checks only
            // the result would then act as the holder beside the next one.
            if reentry.held.is_known_lost() {
                return Err(Error::LockLost);
            }
            reentry.count += 1;
            return Ok(Some(ReentrantMutexGuard {
                mutex: self,
                hold: reentry.held.id(),
                tracker: reentry.held.tracker(),
                unlocked: false,
                _not_send: PhantomData,
            }));
        }
        let Some(held) = attempt(&self.spec, &self.waiters, patience)? else {
            return Ok(None);
        };
        let (hold, tracker) = (held.id(), held.tracker());
        let mut holder = lock(&self.holder);
        if holder.as_ref().is_some_and(|r| !r.held.is_known_lost()) {
            // Another thread's hold was recorded since this one was granted
            // (see `Holders::add`): one of the two is lost. Unless the
            // server confirms this one, the other stays the holder, and its
            // node with it; this one is given up (its node deleted, if
            // still there).
            drop(holder);
            match held.state() {
                LockState::Held => {}
                LockState::Lost => return Err(Error::LockLost),
                LockState::Suspended => return Err(Error::ConnectionLoss),
            }
            holder = lock(&self.holder);
        }
        *holder = Some(Reentry {
            thread: me,
            count: 1,
            held,
        });
        drop(holder);
        Ok(Some(ReentrantMutexGuard {
            mutex: self,
            hold,
            tracker,
            unlocked: false,
            _not_send: PhantomData,
        }))
    }

    /// Drops one hold of the lock `hold`; the last one takes the node
    /// out. A hold of a lock that was lost and has since been acquired
    /// again (by another thread) is stale and changes nothing.
    fn release_one(&self, hold: u64) -> Release {
        let mut holder = lock(&self.holder);
        let Some(reentry) = holder.as_mut().filter(|r| r.held.id() == hold) else {
            return Release::Stale;
        };
        reentry.count = reentry.count.saturating_sub(1);
        if reentry.count > 0 {
            return Release::StillHeld;
        }
        match holder.take() {
            Some(reentry) => Release::Last(reentry.held),
            None => Release::Stale,
        }
    }
}

/// What dropping one hold of a [`ReentrantMutex`] did.
enum Release {
    /// Other holds remain.
    StillHeld,
    /// That was the last hold: release this.
    Last(HeldLock),
    /// The hold's lock was lost and is no longer the mutex's.
    Stale,
}

/// One hold of a [`ReentrantMutex`]; the lock is released when the last
/// hold of the thread is dropped. Not `Send`: holds belong to a thread;
/// another thread follows the lock through [`ReentrantMutexGuard::monitor`].
/// `Sync`, like the other guards: other threads may read its token and
/// state.
#[must_use = "the hold is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct ReentrantMutexGuard<'a> {
    mutex: &'a ReentrantMutex,
    /// The id of the lock this hold belongs to.
    hold: u64,
    /// That lock's state, token and node, used outside the mutex's lock:
    /// learning them may wait for a reply, and other threads' calls on the
    /// mutex must not wait with it.
    tracker: Arc<Tracker>,
    /// Set by `unlock`, which has dropped the hold already.
    unlocked: bool,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl ReentrantMutexGuard<'_> {
    /// This hold's tracker; `None` if its lock was lost and the mutex has
    /// been acquired again since.
    fn current(&self) -> Option<&Arc<Tracker>> {
        let holder = lock(&self.mutex.holder);
        let current = holder.as_ref().is_some_and(|r| r.held.id() == self.hold);
        current.then_some(&self.tracker)
    }

    /// The lock node's creation zxid (see [`MutexGuard::fencing_token`]).
    pub fn fencing_token(&self) -> i64 {
        self.tracker.fencing_token()
    }

    /// The lock node's path.
    pub fn node(&self) -> &str {
        self.tracker.node()
    }

    /// `Held`, `Suspended` or `Lost`.
    pub fn state(&self) -> LockState {
        match self.current() {
            Some(tracker) => tracker.state(),
            None => LockState::Lost,
        }
    }

    /// Blocks until the state is no longer `Held` (or `timeout` passes)
    /// and returns it.
    pub fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        match self.current() {
            Some(tracker) => tracker.wait_while_held(timeout),
            None => LockState::Lost,
        }
    }

    /// The node, token and state of this hold for another thread: the
    /// guard itself is not `Send`.
    pub fn monitor(&self) -> LockMonitor {
        LockMonitor::new(self.tracker.clone())
    }

    /// A channel that receives every later state change, until it is
    /// dropped (see [`StateChanges`](crate::StateChanges)).
    pub fn state_changes(&self) -> crate::StateChanges<LockState> {
        self.current()
            .map(|t| t.state_changes())
            .unwrap_or_else(|| crate::StateChanges::ended(LockState::Lost))
    }

    /// Applies `ops` atomically, and only while this lock is held (see
    /// [`MutexGuard::multi`]). `LockLost` at once if the mutex has been
    /// acquired again since this hold's lock was lost.
    pub fn multi(&self, ops: &[crate::Op]) -> Result<Vec<crate::OpOutcome>> {
        match self.current() {
            Some(tracker) => tracker.multi(ops),
            None => Err(Error::LockLost),
        }
    }

    /// An op that fails its transaction unless this lock is still held
    /// (see [`MutexGuard::check_op`]).
    pub fn check_op(&self) -> crate::Op {
        self.tracker.check_op()
    }

    /// Drops this hold; if it was the last, releases the lock and waits for
    /// the server's confirmation. `LockLost` if the lock had been lost and
    /// this was its last hold, or the mutex has been acquired again since;
    /// `Ok` for an earlier hold, even of a lost lock (its
    /// [`state`](Self::state) says so).
    pub fn unlock(mut self) -> Result<()> {
        let release = self.mutex.release_one(self.hold);
        // Dropped whole (its tracker, and the client handle in it, too),
        // but not released twice.
        self.unlocked = true;
        match release {
            Release::StillHeld => Ok(()),
            Release::Last(held) => held.release(),
            Release::Stale => Err(Error::LockLost),
        }
    }
}

impl Drop for ReentrantMutexGuard<'_> {
    fn drop(&mut self) {
        if self.unlocked {
            return;
        }
        if let Release::Last(held) = self.mutex.release_one(self.hold) {
            drop(held);
        }
    }
}

impl Client {
    /// A [`Mutex`] at `path` on this client's session.
    pub fn mutex(&self, path: &str) -> Result<Mutex> {
        Mutex::new(self, path)
    }

    /// A [`ReentrantMutex`] at `path` on this client's session.
    pub fn reentrant_mutex(&self, path: &str) -> Result<ReentrantMutex> {
        ReentrantMutex::new(self, path)
    }
}
