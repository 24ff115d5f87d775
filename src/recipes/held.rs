//! A lock node this process holds: its state, its fencing token, and its
//! guaranteed release.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::changes::{Listeners, StateChanges};
use crate::client::core::{lock, time_left, wait_on, NotifyFn, ReplySlot, Watcher};
use crate::error::{Error, Result};
use crate::proto::{EventType, Response};
use crate::session::{
    answered_for_now, refused_for_now, throttled_back_off, Release, State, Successor,
};
use crate::{Client, Op, OpOutcome};

use super::acquire::ask_until_answered;
use super::naming::release_note;
use crate::client::path::last_segment;

/// How many times `unlock` asks again for a release the server throttled
/// before it returns `ThrottledOp`, leaving the delete to the background:
/// 13.1 s of back-offs in all.
const MAX_THROTTLED_RELEASES: u32 = 10;

/// Whether a held lock can still be relied on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockState {
    /// Held: the session is connected to a read-write server and the lock
    /// node exists.
    Held,
    /// The connection is lost but the session may live, or the session is
    /// held only by a read-only server, through which the quorum hears
    /// nothing of it. Do not touch the protected resource: if the session
    /// expires, another contender can acquire. Becomes `Held` again if the
    /// client reconnects to a read-write server in time.
    Suspended,
    /// The session ended, the lock node was deleted, or the lock was
    /// released (its guard unlocked or dropped). Final.
    Lost,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Tracked>,
    /// Locked inside `state` when both are.
    listeners: Listeners<LockState>,
    changed: Condvar,
    /// Set when a node watch's exists request fails (lost with a
    /// connection, say): no watcher was kept, so the node's deletion could
    /// go unseen until the watch is set again.
    watch_unset: AtomicBool,
    /// Set while a watch fired by a write to the node is being set again:
    /// until its reply, a deletion of the node could be unheard of.
    rewatching: AtomicBool,
    /// How many times in a row the server throttled the node watch's
    /// request: its next back-off grows with it.
    watch_throttled: AtomicU32,
}

#[derive(Debug)]
struct Tracked {
    state: LockState,
    /// Threads in `wait_while_held`: without any, a change wakes nobody
    /// (and costs no system call, which matters on every release).
    sleepers: usize,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            state: Mutex::new(Tracked {
                state: LockState::Held,
                sleepers: 0,
            }),
            listeners: Listeners::new(),
            changed: Condvar::new(),
            watch_unset: AtomicBool::new(false),
            rewatching: AtomicBool::new(false),
            watch_throttled: AtomicU32::new(0),
        }
    }

    fn get(&self) -> LockState {
        lock(&self.state).state
    }

    fn set(&self, new: LockState) {
        let mut tracked = lock(&self.state);
        if tracked.state == new || tracked.state == LockState::Lost {
            return;
        }
        tracked.state = new;
        // Under the state's lock, as are subscriptions.
        self.listeners.publish(new);
        let sleepers = tracked.sleepers > 0;
        drop(tracked);
        if sleepers {
            self.changed.notify_all();
        }
    }

    /// Blocks until the state is no longer `Held` or `timeout` passes, and
    /// returns the state then.
    fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        // A timeout too long to make a deadline of waits without one.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut tracked = lock(&self.state);
        loop {
            if tracked.state != LockState::Held {
                return tracked.state;
            }
            let Some(left) = time_left(deadline) else {
                return tracked.state;
            };
            tracked.sleepers += 1;
            tracked = wait_on(&self.changed, tracked, left);
            tracked.sleepers -= 1;
        }
    }
}

/// An acquired lock node. Dropping it deletes the node in the background;
/// [`HeldLock::release`] deletes it and waits for the server's answer.
#[derive(Debug)]
pub(crate) struct HeldLock {
    /// The node's server path (chroot included).
    server_node: String,
    /// The release note (a server path) if the release is announced: see
    /// [`release_note`].
    note: Option<String>,
    /// What a node created in the release's transaction may conclude.
    successor: Option<Successor>,
    /// Identifies this hold within the process.
    id: u64,
    tracker: Arc<Tracker>,
    callback: u64,
    released: bool,
}

/// The watch on our own lock node, set as soon as we first need to wait (in
/// the same write as the watch on the predecessor). It marks the lock lost
/// if anyone deletes the node, also before the lock is granted. A lock
/// granted at once sets it only when first asked about (see [`Tracker`]).
#[derive(Debug)]
pub(crate) struct NodeWatch {
    shared: Arc<Shared>,
    /// Where the watch's exists reply lands: it carries the node's Stat.
    reply: Option<Arc<ReplySlot>>,
}

/// What a session state means for a lock held in it.
fn lock_state(state: State) -> LockState {
    match state {
        State::Connected => LockState::Held,
        // A read-only server is cut off from the quorum, which hears
        // nothing of the session through it and may expire it. 3.8 servers
        // refuse to resume a quorum session there; older ones let it in.
        State::Disconnected | State::ConnectedReadOnly => LockState::Suspended,
        State::Expired | State::AuthFailed | State::Closed => LockState::Lost,
    }
}

/// Queues an exists watch on `node` (a user path), sent with the client's
/// next write. It marks `shared` lost, and runs `on_lost` (on the I/O
/// thread), when the node is deleted, the session ends, or the reply says
/// the node is gone already (another session may delete it before the watch
/// reaches the server). A write to the node (Curator's `Revoker` makes one)
/// fires the one-shot watch too, and a caller's removal of its own watches
/// on the node takes it (the server has one per session and path): either
/// way it is set again at once, else the node's later deletion would go
/// unseen. One the server throttled or timed out itself (on a connection
/// that stays up, so no reconnect would set it again) is asked for again
/// after a back-off (see [`rewatch_after_throttling`]). Any other failed
/// reply (lost with a connection, undecodable, a refusal) leaves no watch,
/// and marks the watch unset in `shared`. `None` if it cannot be queued
/// (and `shared` lost if the session is over).
fn start_node_watch(
    client: &Client,
    session: u64,
    node: &str,
    shared: &Arc<Shared>,
    on_lost: Arc<dyn Fn() + Send + Sync>,
) -> Option<Arc<ReplySlot>> {
    let (on_event, lost_event) = (shared.clone(), on_lost.clone());
    // Weak: the watcher lives in the session, which must not keep itself open.
    let again = client.downgrade();
    let reply_client = again.clone();
    let notify: NotifyFn = Arc::new(move |event| match event.event_type {
        EventType::NodeDeleted | EventType::None => {
            on_event.set(LockState::Lost);
            lost_event();
        }
        EventType::NodeDataChanged | EventType::DataWatchRemoved
            if on_event.get() != LockState::Lost =>
        {
            if let Some(client) = again.upgrade() {
                on_event.rewatching.store(true, Ordering::SeqCst);
                // The event's path is the node's, as the user sees it.
                let path = &event.path;
                let again = start_node_watch(&client, session, path, &on_event, lost_event.clone());
                if again.is_none() {
                    on_event.rewatching.store(false, Ordering::SeqCst);
                }
                client.shared().flush();
            }
        }
        _ => {}
    });
    let on_reply = shared.clone();
    let node_path = node.to_owned();
    let watcher = Watcher::Notify(notify.clone());
    let queued = client.start_watch_exists(session, node, watcher, move |reply| {
        match reply {
            Err(Error::NoNode) => {
                on_reply.set(LockState::Lost);
                on_lost();
                // The reply left a watch for the node's creation, which
                // never comes; it would hold this hold's state, and its
                // listeners' channels open, for the rest of the session.
                if let Some(client) = reply_client.upgrade() {
                    client.drop_creation_watch(session, &node_path, notify.clone());
                }
            }
            // Refused or timed out by the server on a connection that stays
            // up: no reconnect will set it again.
            Err(e) if answered_for_now(e) && on_reply.get() != LockState::Lost => {
                on_reply.rewatching.store(true, Ordering::SeqCst);
                let again = reply_client.upgrade().is_some_and(|client| {
                    rewatch_after_throttling(&client, session, &node_path, &on_reply, &on_lost)
                });
                if again {
                    // Still being set: `rewatching` stays until it is.
                    return;
                }
                on_reply.watch_unset.store(true, Ordering::SeqCst);
            }
            // No watcher was kept: the watch is not set, and no reconnect
            // sets it again. An undecodable reply (the server set it, but
            // the connection it was set on is dropped) leaves it as unset
            // as a lost connection does.
            Err(_) => on_reply.watch_unset.store(true, Ordering::SeqCst),
            Ok(_) => on_reply.watch_throttled.store(0, Ordering::SeqCst),
        }
        on_reply.rewatching.store(false, Ordering::SeqCst);
    });
    match queued {
        Ok(slot) => Some(slot),
        Err(e) => {
            if e.is_session_lost() {
                shared.set(LockState::Lost);
            }
            None
        }
    }
}

/// Sets the node watch again after the server throttled or timed it out. Once the
/// back-off is over, a plain exists (no watch) asks whether the node is
/// still there, and the watch is set only if the lock is not lost by then:
/// set as it was, a watch whose node went meanwhile (released, say) would
/// wait for a creation that never comes, on the server and in every
/// re-registration, for the rest of the session. False if the question
/// cannot be queued (the session is over); `rewatching` stays set until
/// the watch is set or given up.
fn rewatch_after_throttling(
    client: &Client,
    session: u64,
    node: &str,
    shared: &Arc<Shared>,
    on_lost: &Arc<dyn Fn() + Send + Sync>,
) -> bool {
    let times = shared.watch_throttled.fetch_add(1, Ordering::SeqCst);
    let due = Instant::now() + throttled_back_off(times.saturating_add(1));
    let (weak, node_path) = (client.downgrade(), node.to_owned());
    let (shared, on_lost) = (shared.clone(), on_lost.clone());
    let answered = move |reply: &Result<Response>| {
        // `Some(true)`: being set (its reply clears `rewatching`);
        // `Some(false)`: not set; `None`: not wanted any more.
        let being_set = if shared.get() == LockState::Lost {
            None
        } else {
            match (reply, weak.upgrade()) {
                (Err(Error::NoNode), _) => {
                    shared.set(LockState::Lost);
                    on_lost();
                    None
                }
                (Ok(_), Some(client)) => {
                    let lost = on_lost.clone();
                    let set = start_node_watch(&client, session, &node_path, &shared, lost);
                    client.shared().flush();
                    Some(set.is_some())
                }
                (Err(e), Some(client)) if answered_for_now(e) => Some(rewatch_after_throttling(
                    &client, session, &node_path, &shared, &on_lost,
                )),
                _ => Some(false),
            }
        };
        match being_set {
            Some(true) => {}
            Some(false) => {
                shared.watch_unset.store(true, Ordering::SeqCst);
                shared.rewatching.store(false, Ordering::SeqCst);
            }
            None => shared.rewatching.store(false, Ordering::SeqCst),
        }
    };
    client.start_exists_at(session, node, due, answered).is_ok()
}

impl NodeWatch {
    /// Queues an exists watch on `node` (a user path) without sending it: it
    /// goes out with this client's next write. `on_lost` runs (on the I/O
    /// thread) when the node turns out gone, e.g. to wake a waiting attempt.
    pub(crate) fn start(
        client: &Client,
        session: u64,
        node: &str,
        on_lost: impl Fn() + Send + Sync + 'static,
    ) -> NodeWatch {
        let shared = Arc::new(Shared::new());
        let reply = start_node_watch(client, session, node, &shared, Arc::new(on_lost));
        NodeWatch { shared, reply }
    }

    /// True once the node is known to be gone (or the session over).
    pub(crate) fn is_lost(&self) -> bool {
        self.shared.get() == LockState::Lost
    }

    /// True if the watch is not known to be set: its request failed (lost
    /// with a connection, say).
    pub(crate) fn is_unset(&self) -> bool {
        self.shared.watch_unset.load(Ordering::SeqCst)
    }

    /// True if the node's deletion, had it happened, would be known by
    /// now: the watch is set and not being set again after a write to the
    /// node fired it.
    pub(crate) fn is_armed(&self) -> bool {
        !self.is_unset() && !self.shared.rewatching.load(Ordering::SeqCst)
    }
}

/// What a held lock shares with the handles a caller uses without the lock
/// at hand: its state, the watch on its node and its fencing token.
///
/// The node of a lock granted at once is not watched until its state or
/// token is first asked for: a lock/unlock loop that never asks sends no
/// request for it. Whoever asks first sets the watch, with an exists whose
/// reply also brings the token. A lock that had to wait has its watch from
/// the wait.
#[derive(Debug)]
pub(crate) struct Tracker {
    client: Client,
    /// The node as the user sees it.
    node: String,
    shared: Arc<Shared>,
    watch: Mutex<Watching>,
    /// Notified as a caller has read the watch's reply (`Watching::Reading`
    /// ends).
    reply_in: Condvar,
    /// Set once the watch was wanted (its state or changes asked for, its
    /// token read from the server, or set by the wait): from then on it is
    /// set again on every reconnect that finds it unset, by the state
    /// callback, since nobody may ask again (a watchdog blocked on its
    /// changes, say).
    asked: AtomicBool,
    /// The node's czxid, once known.
    token: OnceLock<i64>,
    /// The session the node was created in (see
    /// [`Session::generation`](crate::session::Session::generation)). Once
    /// a new session has replaced it (see
    /// [`new_session_on_expiry`](crate::ClientBuilder::new_session_on_expiry)),
    /// the lock is lost for good, whatever the new session's state: the
    /// node went with its session.
    session: u64,
}

/// The watch on a held node.
#[derive(Debug)]
enum Watching {
    /// Not set yet (or its request failed).
    Unset,
    /// Set, with the exists reply that set it until someone takes it.
    Set(Option<Arc<ReplySlot>>),
    /// Set, and a caller is reading the reply that set it, this one: until
    /// it has, the state may not show what the reply says (a node deleted
    /// before anyone asked), and other callers of `state` wait for it.
    Reading(Arc<ReplySlot>),
}

impl Tracker {
    /// True once a new session has replaced the one the node was created
    /// in.
    fn session_replaced(&self) -> bool {
        self.client.check_session(self.session).is_err()
    }

    /// Marks the lock lost if its session has been replaced, and says so.
    /// Asked before anything the new session would answer, which knows
    /// nothing of the old one: a check of the node there could pass while
    /// the servers still hold the old session (the client may declare an
    /// expiry before the servers end the session).
    fn lost_with_its_session(&self) -> bool {
        let replaced = self.session_replaced();
        if replaced {
            self.shared.set(LockState::Lost);
        }
        replaced
    }

    /// Applies the client's `state` to the lock: `Lost`, whatever the
    /// state, once the node's session has been replaced.
    fn follow(&self, state: State) {
        let lock_state = if self.session_replaced() {
            LockState::Lost
        } else {
            lock_state(state)
        };
        self.shared.set(lock_state);
    }

    /// Sets the node watch if it is not set yet; with `take_reply`, returns
    /// the exists reply's slot if nobody took it yet.
    fn watch(self: &Arc<Self>, take_reply: bool) -> Option<Arc<ReplySlot>> {
        if self.lost_with_its_session() {
            return None;
        }
        self.asked.store(true, Ordering::SeqCst);
        let mut watching = lock(&self.watch);
        // A watch whose request failed is set again.
        if self.shared.watch_unset.swap(false, Ordering::SeqCst) {
            *watching = Watching::Unset;
        }
        match &mut *watching {
            Watching::Set(reply) if take_reply => {
                let taken = reply.take();
                if let Some(slot) = &taken {
                    *watching = Watching::Reading(slot.clone());
                }
                return taken;
            }
            Watching::Set(_) | Watching::Reading(_) => return None,
            Watching::Unset => {}
        }
        // Lost is final, and the node gone or going: an exists now would
        // leave a watch for a creation that never comes, for the rest of
        // the session (a monitor asked after the release, say).
        if self.shared.get() == LockState::Lost {
            return None;
        }
        // Disconnected, the state says so already: the watch is set on the
        // reconnect (see `on_state`).
        if !self.client.state().is_connected() {
            return None;
        }
        let slot = start_node_watch(
            &self.client,
            self.session,
            &self.node,
            &self.shared,
            Arc::new(|| {}),
        )?;
        *watching = if take_reply {
            Watching::Reading(slot.clone())
        } else {
            Watching::Set(Some(slot.clone()))
        };
        drop(watching);
        self.client.shared().flush();
        take_reply.then_some(slot)
    }

    /// Follows the session's state (a followed hold back from `Suspended`
    /// once the server shows its node: see [`Tracker::confirm_node`]);
    /// connected again, sets the watch if it was wanted and is not set
    /// (asked for while disconnected, or its request lost with the
    /// connection, which took the server's watch).
    fn on_state(self: &Arc<Self>, state: State) {
        let asked = self.asked.load(Ordering::SeqCst);
        if state == State::Connected && asked && self.shared.get() == LockState::Suspended {
            self.confirm_node(0);
        } else {
            self.follow(state);
        }
        if state == State::Connected && asked {
            self.watch(false);
        }
    }

    /// Back from `Suspended` on a reconnect: `Held` again only once the
    /// server shows the node, with an exists sent behind the handshake's
    /// re-registration of the node watch (after `throttled` ones that the
    /// server throttled or timed out, each asked again after a back-off).
    /// Another client may have deleted the node meanwhile, which
    /// that watch tells only a round trip after the handshake: until then
    /// the guard would say `Held`, its node gone. An exists that fails with
    /// its connection (or session) leaves the guard `Suspended`: the state
    /// change that follows, or the next reconnect's check, settles it.
    fn confirm_node(self: &Arc<Self>, throttled: u32) {
        let tracker = Arc::downgrade(self);
        let due = match throttled {
            0 => Instant::now(),
            times => Instant::now() + throttled_back_off(times),
        };
        let asked = self
            .client
            .start_exists_at(self.session, &self.node, due, move |reply| {
                let Some(tracker) = tracker.upgrade() else {
                    return;
                };
                match reply {
                    Ok(_) => tracker.follow(tracker.client.state()),
                    Err(Error::NoNode) => tracker.shared.set(LockState::Lost),
                    // Refused or timed out by the server on a connection
                    // that stays up: no reconnect will ask again.
                    Err(e) if answered_for_now(e) => {
                        tracker.confirm_node(throttled.saturating_add(1))
                    }
                    Err(e) if e.is_retryable() || e.is_session_lost() => {}
                    Err(Error::Protocol(_)) => {}
                    // Answered otherwise on a connection that stays up:
                    // as if unchecked.
                    Err(_) => tracker.follow(tracker.client.state()),
                }
            });
        match asked {
            Ok(_) => self.client.shared().flush(),
            Err(_) => self.follow(self.client.state()),
        }
    }

    /// Waits for an exists reply on the node, and keeps the token it brings.
    fn read_token(&self, slot: &ReplySlot) -> Option<i64> {
        match self.client.shared().wait(slot) {
            Ok(Response::Exists(r)) => Some(*self.token.get_or_init(|| r.stat.czxid)),
            _ => None,
        }
    }

    /// The state as last heard, without asking the server (`Lost` once a
    /// new session has replaced the node's).
    fn known_state(&self) -> LockState {
        self.lost_with_its_session();
        self.shared.get()
    }

    /// True once the lock is known to be lost, without asking the server.
    fn is_known_lost(&self) -> bool {
        self.known_state() == LockState::Lost
    }

    /// The state; the first time, after a round trip that sets the watch
    /// (made by one caller; the others wait for its answer).
    pub(crate) fn state(self: &Arc<Self>) -> LockState {
        self.settle_watch();
        self.shared.get()
    }

    /// Sets the node watch if it is not set yet, and reads the reply of
    /// the exists that set it if nobody has yet; a caller that finds
    /// another reading it waits for that (and then reads a newer one still
    /// unread itself). The token, if this caller read it.
    fn settle_watch(self: &Arc<Self>) -> Option<i64> {
        loop {
            if let Some(slot) = self.watch(true) {
                return self.read_handed_out(slot);
            }
            if !self.wait_for_reader() {
                return None;
            }
        }
    }

    /// Reads the reply [`watch`](Self::watch) handed out, then lets the
    /// callers waiting for it go on (even if this thread panics).
    fn read_handed_out(&self, slot: Arc<ReplySlot>) -> Option<i64> {
        struct Done<'a>(&'a Tracker, &'a Arc<ReplySlot>);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                let mut watching = lock(&self.0.watch);
                if matches!(&*watching, Watching::Reading(read) if Arc::ptr_eq(read, self.1)) {
                    *watching = Watching::Set(None);
                }
                drop(watching);
                self.0.reply_in.notify_all();
            }
        }
        let _done = Done(self, &slot);
        self.read_token(&slot)
    }

    /// Waits while another caller reads the reply of the node watch's
    /// exists; false if nobody was reading.
    fn wait_for_reader(&self) -> bool {
        let mut watching = lock(&self.watch);
        let mut waited = false;
        while matches!(*watching, Watching::Reading(_)) {
            waited = true;
            watching = wait_on(&self.reply_in, watching, None);
        }
        waited
    }

    /// Blocks until the state is no longer `Held` or `timeout` passes, and
    /// returns the state then.
    pub(crate) fn wait_while_held(self: &Arc<Self>, timeout: Option<Duration>) -> LockState {
        self.watch(false);
        self.shared.wait_while_held(timeout)
    }

    /// A channel that receives every later state change, until dropped.
    pub(crate) fn state_changes(self: &Arc<Self>) -> StateChanges<LockState> {
        // Subscribed before the watch is asked for: a connection lost
        // right after that request changes the state before this returns,
        // and the change must reach the channel.
        let changes = {
            // Under the state's lock: a change is either seen here or sent.
            let tracked = lock(&self.shared.state);
            if tracked.state == LockState::Lost {
                return StateChanges::ended(LockState::Lost);
            }
            self.shared.listeners.lock().subscribe()
        };
        self.watch(false);
        changes
    }

    #[cfg(feature = "testing")]
    pub(crate) fn state_listener_count(&self) -> usize {
        self.shared.listeners.len()
    }

    /// The node's czxid. Unless known from the create, the first call waits
    /// for the node watch's exists reply (setting the watch if needed), or
    /// asks again if that reply failed. 0, which no
    /// resource that checks tokens accepts, if the lock is lost first, or
    /// if the server's answers cannot be had (undecodable again and again,
    /// see [`AskAgain`](crate::client::AskAgain), or a refusal): a
    /// later call asks again. 0 too once a new session has replaced the
    /// node's: a token of a lock lost with its session, handed to a
    /// resource while the client is connected again, must not pass for a
    /// holder's.
    pub(crate) fn fencing_token(self: &Arc<Self>) -> i64 {
        let token = self.learn_token();
        if self.lost_with_its_session() {
            return 0;
        }
        token
    }

    /// The node's czxid (see [`Self::fencing_token`]), which a new session
    /// may have answered for: the caller checks the session after.
    fn learn_token(self: &Arc<Self>) -> i64 {
        if self.lost_with_its_session() {
            return 0;
        }
        if let Some(token) = self.token.get() {
            return *token;
        }
        if let Some(token) = self.settle_watch().or_else(|| self.token.get().copied()) {
            return token;
        }
        let what = format_args!("the fencing token of {}", self.node);
        let asked = ask_until_answered(&self.client, &what, || {
            self.client.check_session(self.session)?;
            self.client.exists(&self.node)
        });
        match asked {
            Ok(Some(stat)) => *self.token.get_or_init(|| stat.czxid),
            Ok(None) => {
                self.shared.set(LockState::Lost);
                0
            }
            // Ended or ending (closed by another thread, say): the node
            // goes with the session, and the state says so once it ends.
            Err(e) if e.is_session_lost() => {
                self.shared.set(LockState::Lost);
                0
            }
            // Nothing learnt of the node, which may well be there and
            // held: marked lost, a dropped guard would leave it behind (a
            // lost node is not deleted) for the rest of the session.
            Err(e) => {
                log::debug!("fencing token of {} not learnt: {e}", self.node);
                0
            }
        }
    }

    /// The node's path as the user sees it.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// An op that fails its transaction unless the node still exists.
    pub(crate) fn check_op(&self) -> Op {
        Op::check(self.node.clone(), None)
    }

    /// `ops` in one transaction behind [`Self::check_op`]: applied only
    /// while the node exists, which, for the node of a lock once held, is
    /// while the lock is held, since a contender created later can never
    /// come before it. The results and a failing op's index are those of
    /// `ops`.
    ///
    /// Sent only in the node's session: once a new one has replaced it,
    /// `LockLost` and nothing sent (the check could pass there while the
    /// servers still hold the old session).
    pub(crate) fn multi(&self, ops: &[Op]) -> Result<Vec<OpOutcome>> {
        if self.shared.get() == LockState::Lost || self.lost_with_its_session() {
            return Err(Error::LockLost);
        }
        let check = self.check_op();
        let in_session = Some(self.session);
        match self
            .client
            .multi_of(std::iter::once(&check).chain(ops), in_session)
        {
            Ok(mut outcomes) => {
                if !outcomes.is_empty() {
                    outcomes.remove(0);
                }
                Ok(outcomes)
            }
            Err(Error::MultiFailed { index: 0, error }) => match *error {
                Error::NoNode => {
                    self.shared.set(LockState::Lost);
                    Err(Error::LockLost)
                }
                // Not about the hold (`NoAuth`: an ACL that denies the
                // holder reading its own node), nor about any op of
                // `ops`.
                other => Err(other),
            },
            Err(Error::MultiFailed { index, error }) => Err(Error::MultiFailed {
                index: index.saturating_sub(1),
                error,
            }),
            Err(Error::SessionExpired) => {
                self.shared.set(LockState::Lost);
                Err(Error::LockLost)
            }
            Err(e) => Err(e),
        }
    }
}

/// Where a lock was granted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grant {
    /// The session the node was created in (see
    /// [`Session::generation`](crate::session::Session::generation)).
    pub(crate) session: u64,
    /// The connection on which what granted the lock was heard (a listing,
    /// or a deletion or note), or an earlier one, which costs only a
    /// needless confirmation of the node (see
    /// [`Shared::connection_count`](crate::client::core::Shared::connection_count)).
    pub(crate) connection: u64,
}

impl HeldLock {
    /// Starts tracking `node` (a server path), held by `client`'s session
    /// and watched by `watch` if the attempt had to wait for it;
    /// `fencing_token` is the node's czxid if known. `announce`: announce
    /// the release with a note, which only a hold of the lowest contender
    /// node (an exclusive lock) may do. `successor`: what the release
    /// passes on to the same kind of hold, if it is plain (not announced,
    /// as a note's create counts too). `grant`: where the lock was granted.
    pub(crate) fn new(
        client: &Client,
        node: String,
        fencing_token: Option<i64>,
        watch: Option<NodeWatch>,
        announce: bool,
        successor: Option<Successor>,
        grant: Grant,
    ) -> HeldLock {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let Grant {
            session,
            connection: granted_on,
        } = grant;
        let waited = watch.is_some();
        let (shared, watching) = match watch {
            Some(NodeWatch { shared, reply }) => (shared, Watching::Set(reply)),
            None => (Arc::new(Shared::new()), Watching::Unset),
        };
        let tracker = Arc::new(Tracker {
            client: client.clone(),
            node: client.client_path(node.clone()),
            shared,
            watch: Mutex::new(watching),
            reply_in: Condvar::new(),
            asked: AtomicBool::new(waited),
            token: fencing_token.map(OnceLock::from).unwrap_or_default(),
            session,
        });
        // Weak: the client keeps its callbacks, and the tracker the client.
        let on_state = Arc::downgrade(&tracker);
        let callback = client.shared().add_state_callback(Arc::new(move |state| {
            if let Some(tracker) = on_state.upgrade() {
                tracker.on_state(state);
            }
        }));
        let held = HeldLock {
            note: announce.then(|| release_note(&node)),
            successor: successor.filter(|_| !announce),
            server_node: node,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            tracker,
            callback,
            released: false,
        };
        // The session's state may have changed between acquiring and
        // registering, and may change again while it is applied here, with
        // the callback setting it too: apply it until it was the latest
        // (Lost is final, so an expiry is never undone). A new session may
        // even have replaced the node's, and be connected by now, with the
        // expiry told to callbacks before this one was registered: `follow`
        // asks which session is current after reading the state, and a new
        // session is current before any of its states is published.
        for _ in 0..16 {
            let state = client.state();
            held.tracker.follow(state);
            if client.state() == state {
                break;
            }
        }
        // A reconnect since the grant was heard, before the callback above
        // was registered, went unseen by it: the node may have been deleted
        // while the client was cut off, which the node watch, set again by
        // the handshake, tells only a round trip later. Back from
        // `Suspended` as after any reconnect: `Held` once the server shows
        // the node. (A hold granted at once asks the server on its first
        // state question anyway.)
        let reconnected = client.shared().connection_count() != granted_on;
        if waited && reconnected && held.tracker.shared.get() == LockState::Held {
            held.tracker.shared.set(LockState::Suspended);
            held.tracker.confirm_node(0);
        }
        held
    }

    pub(crate) fn node(&self) -> &str {
        &self.tracker.node
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The node's czxid (see [`Tracker::fencing_token`]).
    pub(crate) fn fencing_token(&self) -> i64 {
        self.tracker.fencing_token()
    }

    /// The lock's state, token and watch, to use without this lock at hand.
    pub(crate) fn tracker(&self) -> Arc<Tracker> {
        self.tracker.clone()
    }

    /// See [`Tracker::state`].
    pub(crate) fn state(&self) -> LockState {
        self.tracker.state()
    }

    /// See [`Tracker::wait_while_held`].
    pub(crate) fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        self.tracker.wait_while_held(timeout)
    }

    /// See [`Tracker::state_changes`].
    pub(crate) fn state_changes(&self) -> StateChanges<LockState> {
        self.tracker.state_changes()
    }

    /// See [`Tracker::multi`].
    pub(crate) fn multi(&self, ops: &[Op]) -> Result<Vec<OpOutcome>> {
        self.tracker.multi(ops)
    }

    /// See [`Tracker::check_op`].
    pub(crate) fn check_op(&self) -> Op {
        self.tracker.check_op()
    }

    /// See [`Tracker::known_state`].
    fn known_state(&self) -> LockState {
        self.tracker.known_state()
    }

    /// True once the lock is known to be lost, without asking the server.
    pub(crate) fn is_known_lost(&self) -> bool {
        self.tracker.is_known_lost()
    }

    fn release_of_node(&self) -> Release {
        Release {
            path: self.server_node.clone(),
            note: self.note.clone(),
            successor: self.successor,
        }
    }

    /// Asks for the release until the server does more than throttle it
    /// (refuse it unapplied, to shed load), after a back-off each time (see
    /// [`throttled_back_off`]), up to [`MAX_THROTTLED_RELEASES`] times: the
    /// node is still there, and the caller waits for its deletion.
    fn release_unthrottled(&self) -> Result<()> {
        let release = self.release_of_node();
        let mut throttled = 0;
        loop {
            match self
                .tracker
                .client
                .release_now(&release, self.tracker.session)
            {
                Err(Error::ThrottledOp) if throttled < MAX_THROTTLED_RELEASES => {
                    throttled += 1;
                    log::debug!(
                        "release of {} throttled; again after a back-off",
                        self.server_node
                    );
                    std::thread::sleep(throttled_back_off(throttled));
                }
                answer => return answer,
            }
        }
    }

    /// Deletes the node and waits for the server to confirm.
    pub(crate) fn release(mut self) -> Result<()> {
        self.released = true;
        let lost = self.known_state() == LockState::Lost;
        let client = &self.tracker.client;
        let result = match self.release_unthrottled() {
            // Already lost: whatever the delete says (NoNode, or the
            // session's own end: SessionExpired, Closed...), the lock was
            // not held up to this release.
            Ok(()) | Err(_) if lost => Err(Error::LockLost),
            Ok(()) => Ok(()),
            // The node went with the session, or someone deleted it.
            Err(Error::NoNode | Error::SessionExpired) => Err(Error::LockLost),
            Err(e) => {
                // Still guarantee the release if the session lives on: the
                // delete may not have happened, or may on another server
                // (a read-only one refuses it).
                if refused_for_now(&e) && !self.tracker.session_replaced() {
                    let _ =
                        client.delete_in_background(self.server_node.clone(), self.tracker.session);
                }
                Err(e)
            }
        };
        self.tracker.shared.set(LockState::Lost);
        result
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let client = &self.tracker.client;
        client.shared().remove_state_callback(self.callback);
        // A lost lock's node is gone already (deleted, or with its session).
        if !self.released && self.known_state() != LockState::Lost {
            // Sent without waiting (after the release linger, or with this
            // client's next request), retried through reconnects while the
            // session lives, and ordered before this client's next request.
            let released =
                client.release_in_background(self.release_of_node(), self.tracker.session);
            if let Err(e) = released {
                log::debug!("release of {} not needed: {e}", self.server_node);
            }
            self.tracker.shared.set(LockState::Lost);
        }
    }
}

/// Which threads hold a lock object, each hold tagged with its id, so that
/// the guard of a lost lock only ever forgets its own hold and never the
/// next holder's, and with its tracker, for its node's name.
#[derive(Debug, Default)]
pub(crate) struct Holders(Mutex<Vec<Holder>>);

#[derive(Debug)]
struct Holder {
    thread: ThreadId,
    id: u64,
    /// Shared with the hold, so that recording it allocates nothing.
    tracker: Arc<Tracker>,
}

impl Holder {
    /// The node's name under the lock path.
    fn node(&self) -> Arc<str> {
        last_segment(self.tracker.node()).into()
    }
}

impl Holders {
    /// True if the calling thread holds the lock.
    pub(crate) fn current_thread_holds(&self) -> bool {
        let me = std::thread::current().id();
        lock(&self.0).iter().any(|h| h.thread == me)
    }

    /// The name of the node of the calling thread's hold.
    pub(crate) fn current_thread_node(&self) -> Option<Arc<str>> {
        let me = std::thread::current().id();
        lock(&self.0)
            .iter()
            .find(|h| h.thread == me)
            .map(Holder::node)
    }

    /// The names of the nodes of the calling thread's holds.
    pub(crate) fn current_thread_nodes(&self) -> Vec<Arc<str>> {
        let me = std::thread::current().id();
        lock(&self.0)
            .iter()
            .filter(|h| h.thread == me)
            .map(Holder::node)
            .collect()
    }

    fn add(&self, held: &HeldLock, exclusive: bool) {
        // A new exclusive hold means any earlier one was lost: its record
        // goes. Unless this one is the lost one, recorded after a later
        // grant: granted, then its node deleted (by an operator, say) and
        // the next holder, a thread of this object, granted and recorded,
        // all before this thread got here. One round trip (the state's
        // first, which sets the node watch) tells them apart, asked only
        // while another hold's record is not known lost, which is rare.
        // Unanswered (disconnected), the other record stays as well.
        // Uncontested, the check and the update are made under one lock:
        // a record added between them would be cleared unasked.
        let mut holders = lock(&self.0);
        if exclusive {
            if holders.iter().any(|h| !h.tracker.is_known_lost()) {
                drop(holders);
                let this_one_holds = held.state() == LockState::Held;
                holders = lock(&self.0);
                if this_one_holds {
                    holders.clear();
                }
            } else {
                holders.clear();
            }
        }
        holders.push(Holder {
            thread: std::thread::current().id(),
            id: held.id(),
            tracker: held.tracker(),
        });
    }

    fn remove(&self, id: u64) {
        lock(&self.0).retain(|h| h.id != id);
    }
}

/// A held lock as a guard owns it: recorded in the lock object's
/// [`Holders`] while it lives, released in the background when dropped.
///
/// Not `Send`: the lock object knows its holds by thread (a thread that
/// locks again gets `WouldDeadlock`), so a guard moved to another thread
/// would leave that thread to queue behind its own node, and this one
/// refused. `Sync` stays: other threads may read a guard's token and state.
#[derive(Debug)]
pub(crate) struct Hold<'a> {
    held: Option<HeldLock>,
    holders: &'a Holders,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl<'a> Hold<'a> {
    /// Records `held` as the calling thread's; `exclusive` for a mutex or a
    /// write lock, whose new hold replaces any lost one.
    pub(crate) fn new(held: HeldLock, holders: &'a Holders, exclusive: bool) -> Hold<'a> {
        holders.add(&held, exclusive);
        Hold {
            held: Some(held),
            holders,
            _not_send: PhantomData,
        }
    }

    pub(crate) fn held(&self) -> &HeldLock {
        // Present from construction until `unlock` or drop consumes it.
        self.held
            .as_ref()
            .unwrap_or_else(|| unreachable!("guard used after release"))
    }

    /// Releases and waits for the server to confirm the delete.
    pub(crate) fn unlock(mut self) -> Result<()> {
        match self.held.take() {
            Some(held) => {
                self.holders.remove(held.id());
                held.release()
            }
            None => Ok(()),
        }
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            self.holders.remove(held.id());
        }
    }
}
