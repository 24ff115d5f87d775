//! The acquisition engine shared by every lock kind.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::held::{Grant, HeldLock, NodeWatch};
use super::naming::{
    announces_release, contenders, next_sequence, node_prefix, release_note, Contender, ALL_MARKERS,
};
use super::rwlock::{read_decision, read_decision_of_reader, read_decision_of_writer};
use crate::client::core::{lock, time_left, wait_on, NotifyFn, ReplyCallback};
use crate::client::path::{join, last_segment, parent, validate};
use crate::client::{AskAgain, CreatedListed, DataWatch, Found, NewLockNode, Unsent, WeakClient};
use crate::error::{Error, Result};
use crate::proto::{Acl, EventType, Response};
use crate::rand::Rng;
use crate::session::{throttled_back_off, Successor, WatchedEvent};
use crate::Client;

/// Creates are retried this often when a container parent is reaped
/// between creating it and creating the lock node, the connection drops,
/// or the server throttles them.
const MAX_CREATE_ATTEMPTS: usize = 10;

/// Where a lock lives and what its nodes carry.
#[derive(Debug, Clone)]
pub(crate) struct LockSpec {
    pub client: Client,
    /// The lock directory, as the user gave it.
    pub path: String,
    /// Node data; `None` means "host, pid and thread" at acquisition time.
    pub data: Option<Vec<u8>>,
    pub acl: Vec<Acl>,
}

impl LockSpec {
    pub(crate) fn new(client: &Client, path: &str) -> Result<LockSpec> {
        validate(path, false)?;
        // Under a chroot, `/` is the chroot node, a directory like any.
        if path == "/" && client.chroot().is_none() {
            return Err(Error::InvalidPath {
                path: path.to_owned(),
                reason: "a lock needs its own directory, not the root",
            });
        }
        Ok(LockSpec {
            client: client.clone(),
            path: path.to_owned(),
            data: None,
            acl: Acl::open_unsafe(),
        })
    }

    fn node_data(&self) -> Vec<u8> {
        self.data.clone().unwrap_or_else(default_node_data)
    }
}

/// The host's name as lock nodes' default data gives it (`host=<name>`):
/// the kernel's host name, else `$HOSTNAME`, else `unknown`. For tools that
/// write their own node data and want it to name the host the same way.
pub fn host_name() -> &'static str {
    // It does not change; read it once, not on every acquisition.
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".into())
    })
}

/// `host=<name> pid=<pid> thread=<name>`: who holds a lock, for tools.
fn default_node_data() -> Vec<u8> {
    // Host and pid do not change; format them once.
    static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let process =
        PROCESS.get_or_init(|| format!("host={} pid={}", host_name(), std::process::id()));
    let current = std::thread::current();
    // Sized up front (an unnamed thread's id fits in 24 characters).
    let name_len = current.name().map_or(24, str::len);
    let mut data = String::with_capacity(process.len() + " thread=".len() + name_len);
    data.push_str(process);
    data.push_str(" thread=");
    match current.name() {
        Some(name) => data.push_str(name),
        None => {
            let _ = write!(data, "{:?}", current.id());
        }
    }
    data.into_bytes()
}

/// What a contender should do, given the sorted contenders and its index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It holds the lock.
    Acquired,
    /// It may neither hold nor wait: what blocks it waits on this very
    /// thread.
    WouldDeadlock,
    /// Wait for a node to go.
    Wait(Blocker),
}

/// The node an attempt waits for: the highest node that blocks it, so that
/// once it and every node below it are gone, the lock is held (sequence
/// numbers only grow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blocker {
    pub node: String,
    /// Its deletion alone means the lock is held: it was the only node
    /// that blocked, so no re-listing is needed.
    pub acquired_on_delete: bool,
    /// Its holder may announce its release with a note (see
    /// [`release_note`]), which also means the lock is held.
    pub may_announce: bool,
}

impl Blocker {
    pub(crate) fn new(node: &Contender, acquired_on_delete: bool) -> Blocker {
        Blocker {
            node: node.name.to_owned(),
            acquired_on_delete,
            may_announce: announces_release(node.marker),
        }
    }
}

/// The blocking decision of a mutex or a write lock: the lowest node holds.
fn exclusive(contenders: &[Contender], ours: usize) -> Decision {
    match ours.checked_sub(1).and_then(|i| contenders.get(i)) {
        None => Decision::Acquired,
        Some(predecessor) => Decision::Wait(Blocker::new(predecessor, ours == 1)),
    }
}

/// Why a waiting attempt woke.
#[derive(Debug)]
enum Woken {
    /// A watch fired: the predecessor's, or our own node's (as `None`).
    Event(EventType),
    /// The predecessor was gone before its watch reached the server.
    PredecessorGone,
    /// The predecessor's watch could not be set (connection lost, say).
    WatchFailed(Error),
    /// The predecessor changed, and the I/O thread listed the directory
    /// again at once: the attempt wakes with the listing, not to ask for it.
    Listed(Result<Vec<String>>),
    /// The predecessor's release note: it was released by a holder that
    /// was the lowest contender, so the lock is ours.
    Released,
}

/// What became of an attempt's create and the listing behind it, decided
/// on the I/O thread when the listing's reply arrives.
#[derive(Debug, Default)]
enum Step {
    /// The replies are not in yet.
    #[default]
    Pending,
    /// The attempt must wait, and its watches are set already.
    Queued(OurNode, Waiting),
    /// Anything else (the lock is ours, an error, a deadline that passed):
    /// the calling thread takes it from here.
    Listed(CreatedListed),
}

/// The first step, once decided.
enum FirstStep {
    /// Queued, and what ended the wait (`Ok(None)`: the deadline passed).
    Queued(OurNode, Waiting, Result<Option<Woken>>),
    Listed(CreatedListed),
    /// Cancelled, or the deadline passed, before the first step was
    /// decided: the create and listing were taken back unsent (no
    /// connection took them), and nothing was created; or, sent already,
    /// they are left to the I/O thread, which deletes whatever node they
    /// made (see [`clean_up_abandoned`]).
    GaveUp,
}

/// Our created lock node.
#[derive(Debug)]
struct OurNode {
    name: String,
    /// Its czxid; unknown for a node created in a transaction.
    token: Option<i64>,
}

/// The watches of a node queued behind a predecessor.
#[derive(Debug)]
struct Waiting {
    own_watch: NodeWatch,
    /// The predecessor's watches; `None` if they could not be set, in
    /// which case the attempt is woken with the reason.
    watch: Option<PredecessorWatch>,
    acquired_on_delete: bool,
}

/// Wakes a waiting attempt: its first step is decided, a watch fired or
/// answered, or `cancel` was called.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    flags: Mutex<WakeFlags>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct WakeFlags {
    step: Step,
    woken: Option<Woken>,
    /// The answer to the calling thread's own listing (see
    /// [`Wakeup::wait_listing`]), kept apart from `woken`, which a later
    /// wake-up overwrites.
    listing: Option<Result<Vec<String>>>,
    /// The answer to the search for our node after an ambiguous create
    /// (see [`Wakeup::wait_search`]).
    found: Option<Result<Found>>,
    /// The answer to the create of the lock directory or an ancestor (see
    /// [`Attempt::ensure_dir`]): whether the node is there now (`false`:
    /// its parent is missing).
    dir_made: Option<Result<bool>>,
    /// The attempt gave up on that search: a node it finds is not ours to
    /// hand over, and is deleted.
    search_abandoned: bool,
    /// The attempt gave up before its first step was decided: the step is
    /// not ours to hand over either (see [`Wakeup::finish_step`]).
    step_abandoned: bool,
    cancelled: bool,
    /// True while the attempt sleeps: waking no one costs no system call.
    sleeping: bool,
}

impl Wakeup {
    fn notify(&self, woken: Woken) {
        let mut flags = lock(&self.flags);
        // The predecessor's going says less than its release note, which
        // comes first when the two race: kept, the note spares a listing.
        let says_less = matches!(
            woken,
            Woken::PredecessorGone | Woken::Event(EventType::NodeDeleted)
        );
        if !(says_less && matches!(flags.woken, Some(Woken::Released))) {
            flags.woken = Some(woken);
        }
        self.wake(flags);
    }

    /// Wakes the attempt if it sleeps, once its `flags` are set: waking
    /// no one costs no system call.
    fn wake(&self, flags: MutexGuard<'_, WakeFlags>) {
        if flags.sleeping {
            drop(flags);
            self.cv.notify_one();
        }
    }

    fn cancel(&self) {
        lock(&self.flags).cancelled = true;
        self.cv.notify_one();
    }

    fn is_cancelled(&self) -> bool {
        lock(&self.flags).cancelled
    }

    /// Sleeps until notified or `left` passes (`None`: until notified).
    fn sleep<'a>(
        &'a self,
        mut flags: MutexGuard<'a, WakeFlags>,
        left: Option<Duration>,
    ) -> MutexGuard<'a, WakeFlags> {
        flags.sleeping = true;
        flags = wait_on(&self.cv, flags, left);
        flags.sleeping = false;
        flags
    }

    /// Records the first step (on the I/O thread). A queued attempt keeps
    /// sleeping until its wait is over; it is woken only if that is so
    /// already (a wake-up came first, the deadline passed, or `cancel`).
    /// Handed back if the attempt gave up on it already.
    fn finish_step(&self, step: Step, deadline: Option<Instant>) -> Option<Step> {
        let mut flags = lock(&self.flags);
        if flags.step_abandoned {
            return Some(step);
        }
        let wake = !matches!(step, Step::Queued(..))
            || flags.woken.is_some()
            || flags.cancelled
            || time_left(deadline).is_none();
        flags.step = step;
        if wake {
            self.wake(flags);
        }
        None
    }

    /// Waits for the first step, and if the attempt was queued, for its
    /// wait to end too. On `cancel`, or once `withdraw_at` passes, the
    /// attempt gives up: the create and listing still `unsent` (waiting
    /// for a connection) are taken back, and nothing was created; sent
    /// ones are left to the I/O thread, which cleans up after them when
    /// their replies come (on a silent connection, not before the
    /// connection is given up on).
    fn wait_step(
        &self,
        deadline: Option<Instant>,
        unsent: Option<&Unsent>,
        withdraw_at: Option<Instant>,
    ) -> FirstStep {
        let mut flags = lock(&self.flags);
        let mut tried = false;
        loop {
            let left = time_left(deadline);
            let give_up = flags.cancelled || withdraw_at.is_some_and(|at| Instant::now() >= at);
            if give_up && matches!(flags.step, Step::Pending) {
                if let (Some(unsent), false) = (unsent, tried) {
                    // Answered on this thread, where `finish_step` takes
                    // the flags' lock: the step is decided then.
                    drop(flags);
                    tried = true;
                    let withdrawn = unsent.withdraw();
                    flags = lock(&self.flags);
                    if withdrawn {
                        flags.step = Step::Pending;
                        return FirstStep::GaveUp;
                    }
                    continue;
                }
                flags.step_abandoned = true;
                return FirstStep::GaveUp;
            }
            match std::mem::take(&mut flags.step) {
                Step::Pending => {}
                Step::Queued(node, waiting) => {
                    let woken = if flags.cancelled {
                        Err(Error::Cancelled)
                    } else if let Some(woken) = flags.woken.take() {
                        Ok(Some(woken))
                    } else if left.is_none() {
                        Ok(None)
                    } else {
                        flags.step = Step::Queued(node, waiting);
                        flags = self.sleep(flags, left.flatten());
                        continue;
                    };
                    return FirstStep::Queued(node, waiting, woken);
                }
                Step::Listed(listed) => return FirstStep::Listed(listed),
            }
            let left = withdraw_at.map(|at| at.saturating_duration_since(Instant::now()));
            flags = self.sleep(flags, left);
        }
    }

    /// The answer to the listing the calling thread asked for.
    fn listed(&self, listing: Result<Vec<String>>) {
        let mut flags = lock(&self.flags);
        flags.listing = Some(listing);
        self.wake(flags);
    }

    /// Waits for the answer to the calling thread's listing; `Ok(None)`
    /// when the deadline passes first, `Cancelled` on `cancel`. Without a
    /// connection, the answer waits for a reconnect: this is what keeps
    /// such a wait within its deadline.
    fn wait_listing(&self, deadline: Option<Instant>) -> Result<Option<Result<Vec<String>>>> {
        self.wait_for(deadline, |flags| flags.listing.take())
    }

    /// The answer to the create of a lock directory or an ancestor, on the
    /// I/O thread.
    fn dir_made(&self, made: Result<bool>) {
        let mut flags = lock(&self.flags);
        flags.dir_made = Some(made);
        self.wake(flags);
    }

    /// The answer to the search for our node, on the I/O thread. Handed
    /// back if the attempt gave up on it already.
    fn found(&self, found: Result<Found>) -> Option<Result<Found>> {
        let mut flags = lock(&self.flags);
        if flags.search_abandoned {
            return Some(found);
        }
        flags.found = Some(found);
        self.wake(flags);
        None
    }

    /// Waits for the answer to the search for our node; `Ok(None)` when the
    /// deadline passes first, `Cancelled` on `cancel`. Either way the
    /// search is then given up, atomically with [`Self::found`]: an answer
    /// that came in between is taken as in time, and one that comes later
    /// goes back to the search.
    fn wait_search(&self, deadline: Option<Instant>) -> Result<Option<Result<Found>>> {
        let waited = self.wait_for(deadline, |flags| flags.found.take());
        if matches!(waited, Ok(Some(_))) {
            return waited;
        }
        let mut flags = lock(&self.flags);
        flags.search_abandoned = true;
        match flags.found.take() {
            Some(late) => Ok(Some(late)),
            None => waited,
        }
    }

    /// After `e`, an error its attempt makes its request again for: if the
    /// server throttled it (`ThrottledOp`: refused unapplied, to shed
    /// load), waits out the back-off of the `throttled`-th throttling of
    /// the attempt (see [`throttled_back_off`]) before it is made again.
    /// `Ok(false)` if `give_up_at` passes first, `Cancelled` on `cancel`.
    fn back_off_if_throttled(
        &self,
        e: &Error,
        throttled: &mut u32,
        give_up_at: Option<Instant>,
    ) -> Result<bool> {
        if *e != Error::ThrottledOp {
            return Ok(true);
        }
        *throttled = throttled.saturating_add(1);
        let backed_off = Instant::now() + throttled_back_off(*throttled);
        let until = give_up_at.map_or(backed_off, |at| at.min(backed_off));
        self.wait_for(Some(until), |_| None::<()>)?;
        Ok(give_up_at.map_or(true, |at| Instant::now() < at))
    }

    /// Waits for a wake-up; `Ok(None)` when the deadline passes first.
    fn wait(&self, deadline: Option<Instant>) -> Result<Option<Woken>> {
        self.wait_for(deadline, |flags| flags.woken.take())
    }

    /// Waits until `take` finds what it looks for; `Ok(None)` when the
    /// deadline passes first, `Cancelled` on `cancel`.
    fn wait_for<R>(
        &self,
        deadline: Option<Instant>,
        take: impl Fn(&mut WakeFlags) -> Option<R>,
    ) -> Result<Option<R>> {
        let mut flags = lock(&self.flags);
        loop {
            if flags.cancelled {
                return Err(Error::Cancelled);
            }
            if let Some(found) = take(&mut flags) {
                return Ok(Some(found));
            }
            let Some(left) = time_left(deadline) else {
                return Ok(None);
            };
            flags = self.sleep(flags, left);
        }
    }
}

/// The attempts in progress on one lock object, so `cancel` can reach them.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    list: Mutex<Vec<Arc<Wakeup>>>,
}

impl Waiters {
    fn register(&self) -> Arc<Wakeup> {
        let wakeup = Arc::new(Wakeup::default());
        lock(&self.list).push(wakeup.clone());
        wakeup
    }

    fn unregister(&self, wakeup: &Arc<Wakeup>) {
        lock(&self.list).retain(|w| !Arc::ptr_eq(w, wakeup));
    }

    /// Wakes every attempt in progress with `Cancelled`.
    pub(crate) fn cancel(&self) {
        for w in lock(&self.list).iter() {
            w.cancel();
        }
    }
}

/// The decision rule of a lock kind; it runs on the I/O thread too.
#[derive(Debug, Clone)]
pub(crate) enum Rule {
    /// A mutex or a write lock: the lowest node holds.
    Exclusive,
    /// A read lock: see [`read_decision`].
    Read,
    /// A read lock taken by the holder of the write lock, whose node has this
    /// name, and who holds read locks on the nodes with these names (if
    /// any): see [`read_decision_of_writer`]. The name, not the sequence
    /// number: a lock directory deleted and recreated numbers its nodes from
    /// 0 again, and only the name's uuid is ours alone.
    ReadUnderWrite(Arc<str>, Arc<[Arc<str>]>),
    /// A read lock taken by a thread that holds read locks already, on the
    /// nodes with these names: see [`read_decision_of_reader`].
    ReadAgain(Arc<[Arc<str>]>),
}

impl Rule {
    /// Holding means being the lowest contender (a mutex, a write lock), so
    /// the release may be announced with a note.
    fn is_exclusive(&self) -> bool {
        matches!(self, Rule::Exclusive)
    }

    pub(crate) fn decide(&self, contenders: &[Contender], ours: usize) -> Decision {
        match self {
            Rule::Exclusive => exclusive(contenders, ours),
            Rule::Read => read_decision(contenders, ours),
            Rule::ReadUnderWrite(write, reads) => {
                read_decision_of_writer(contenders, ours, write, reads)
            }
            Rule::ReadAgain(reads) => read_decision_of_reader(contenders, ours, reads),
        }
    }
}

/// One acquisition: which marker our node gets, and the decision rule.
/// Every lock naming contends (see [`ALL_MARKERS`]).
pub(crate) struct Attempt<'a> {
    pub spec: &'a LockSpec,
    pub marker: &'static str,
    pub rule: Rule,
    pub waiters: &'a Waiters,
}

/// How long an acquisition may wait, fixed when its call starts: a
/// deadline that had passed by then makes one try, which still waits for
/// the server's answers ("not acquired" must mean that another holds the
/// lock); one that passes later is given up at, whatever the connection
/// does, even by a call that reached its first request only after it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Patience {
    /// When waiting for other holders ends (`None`: never).
    deadline: Option<Instant>,
    /// When waiting for the server's answers ends (`None`: never).
    give_up_at: Option<Instant>,
}

impl Patience {
    /// Waits for as long as it takes.
    pub(crate) const FOREVER: Patience = Patience {
        deadline: None,
        give_up_at: None,
    };

    /// One try: see [`Patience`].
    pub(crate) fn one_try() -> Patience {
        Patience::until(Instant::now())
    }

    /// Waits up to `timeout` from now; a zero one is one try, and one too
    /// long to make a deadline of waits forever.
    pub(crate) fn within(timeout: Duration) -> Patience {
        let now = Instant::now();
        match now.checked_add(timeout) {
            None => Patience::FOREVER,
            Some(deadline) => Patience {
                deadline: Some(deadline),
                give_up_at: (!timeout.is_zero()).then_some(deadline),
            },
        }
    }

    /// Waits until `deadline`; one already passed is one try.
    pub(crate) fn until(deadline: Instant) -> Patience {
        Patience {
            deadline: Some(deadline),
            give_up_at: (Instant::now() < deadline).then_some(deadline),
        }
    }
}

impl Attempt<'_> {
    /// Acquires, waiting as `patience` says. `Ok(None)` when its deadline
    /// passed. Whenever the attempt does not end holding the lock, its node
    /// is deleted.
    ///
    /// The attempt belongs to the session it began in (see
    /// [`Session::generation`](crate::session::Session::generation)): once
    /// a new session replaces it, it fails with `SessionExpired`, as it
    /// would without a new session. Its create is never sent in another
    /// session, and each later step checks the session first, and again
    /// after its answer, which a new session could have given: a search
    /// for a node whose create's reply was lost, made there, would find
    /// nothing and create a second node, or a listing would grant a lock
    /// whose node went with the old session.
    pub(crate) fn run(&self, patience: Patience) -> Result<Option<HeldLock>> {
        let wakeup = self.waiters.register();
        let mut node = None;
        let session = self.spec.client.session_generation();
        let result = self.acquire(patience, &wakeup, &mut node, session);
        self.waiters.unregister(&wakeup);
        match (&result, node) {
            (Ok(Some(_)), _) | (_, None) => {}
            // Not sent if a new session has replaced the node's, which took
            // the node with it (checked under the session's lock).
            (_, Some(name)) => delete_abandoned(&self.spec.client, session, &self.spec.path, &name),
        }
        result
    }

    fn acquire(
        &self,
        patience: Patience,
        wakeup: &Arc<Wakeup>,
        node: &mut Option<String>,
        session: u64,
    ) -> Result<Option<HeldLock>> {
        let client = &self.spec.client;
        let Patience {
            deadline,
            give_up_at,
        } = patience;
        // The connection the last listing (here, the one behind the
        // create) went out on; see `own_watched` below.
        let mut listed_on = client.shared().connection_count();
        let Some((OurNode { name, token }, then)) =
            self.create_protected(deadline, give_up_at, wakeup, session)?
        else {
            return Ok(None);
        };
        *node = Some(name.clone());
        let mut retry_budget = RetryBudget::new(client);
        let mut throttled = 0;
        let (mut own_watch, mut listed_early, mut waited) = match then {
            Then::Listed(listed) => (None, listed, None),
            Then::Queued(waiting, woken) => (
                Some(waiting.own_watch),
                None,
                Some((waiting.watch, waiting.acquired_on_delete, woken)),
            ),
        };
        loop {
            // Whatever woke the attempt, or answered its last request, may
            // have come after its session was replaced.
            client.check_session(session)?;
            let (watch, acquired_on_delete, woken) = match waited.take() {
                Some(waited) => waited,
                None => {
                    if wakeup.is_cancelled() {
                        return Err(Error::Cancelled);
                    }
                    let listed = match listed_early.take() {
                        Some(listed) => listed,
                        None => {
                            listed_on = client.shared().connection_count();
                            match self.list(wakeup, session, give_up_at)? {
                                Some(listed) => listed,
                                None => return Ok(None),
                            }
                        }
                    };
                    client.check_session(session)?;
                    let children = match listed {
                        Ok(children) => children,
                        Err(Error::NoNode) => return Err(node_gone(client, session)),
                        Err(e) if e.is_retryable() && retry_budget.allows() => {
                            if !wakeup.back_off_if_throttled(&e, &mut throttled, give_up_at)? {
                                return Ok(None);
                            }
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    let blocker = match decide_for(&self.rule, &children, &name) {
                        None => return Err(node_gone(client, session)),
                        Some(Decision::Acquired) => {
                            return Ok(Some(
                                self.held(&name, token, own_watch, session, listed_on)?,
                            ))
                        }
                        Some(Decision::WouldDeadlock) => return Err(Error::WouldDeadlock),
                        Some(Decision::Wait(blocker)) => blocker,
                    };
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(None);
                    }
                    if own_watch.as_ref().map_or(true, NodeWatch::is_unset) {
                        // Queued now, so it shares the predecessor watch's
                        // write; set again if its request failed.
                        own_watch = Some(watch_own_node(
                            client,
                            session,
                            &self.spec.path,
                            &name,
                            wakeup,
                        ));
                    }
                    #[cfg(feature = "testing")]
                    crate::testing::pause::reached(crate::testing::PausePoint::LockWatching);
                    let watched =
                        watch_predecessor(client, session, &self.spec.path, &blocker, wakeup);
                    let watch = match watched {
                        Ok(watch) => watch,
                        Err(e) if e.is_retryable() && retry_budget.allows() => {
                            if !wakeup.back_off_if_throttled(&e, &mut throttled, give_up_at)? {
                                return Ok(None);
                            }
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    let woken = wakeup.wait(deadline);
                    (Some(watch), blocker.acquired_on_delete, woken)
                }
            };
            if let Some(watch) = &watch {
                watch.finish(&woken);
            }
            if own_watch.as_ref().is_some_and(NodeWatch::is_lost) {
                // Our own node went while we waited: this attempt can never
                // be granted.
                return Err(node_gone(client, session));
            }
            // A grant on a deletion or a note alone relies on the watch on
            // our own node: if its request failed (lost with a connection,
            // say), or a write to our node fired it and it is being set
            // again, an operator's deletion of our node could have gone
            // unseen, so the lock is listed again instead. So too after a
            // reconnect since the last listing: the watches are set again
            // in one go, and the predecessor's deletion may be told before
            // our own node's; a listing sent now is answered after both.
            let own_watched = own_watch.as_ref().is_some_and(NodeWatch::is_armed)
                && client.shared().connection_count() == listed_on;
            match woken? {
                None => return Ok(None),
                Some(Woken::Event(EventType::NodeDeleted) | Woken::PredecessorGone)
                    if acquired_on_delete && own_watched =>
                {
                    return Ok(Some(
                        self.held(&name, token, own_watch, session, listed_on)?,
                    ))
                }
                Some(Woken::Released) if own_watched => {
                    return Ok(Some(
                        self.held(&name, token, own_watch, session, listed_on)?,
                    ))
                }
                Some(Woken::Listed(listed)) => {
                    retry_budget.reset();
                    listed_early = Some(listed);
                }
                Some(Woken::WatchFailed(e)) => {
                    if !(e.is_retryable() && retry_budget.allows()) {
                        return Err(e);
                    }
                    if !wakeup.back_off_if_throttled(&e, &mut throttled, give_up_at)? {
                        return Ok(None);
                    }
                }
                // The queue moved, or the server told of a change: progress,
                // from which the budget counts again.
                Some(Woken::Event(_) | Woken::Released | Woken::PredecessorGone) => {
                    retry_budget.reset()
                }
            }
        }
    }

    /// Lists the lock directory, in `session`; `Ok(None)` if `deadline`
    /// passes first (the answer, when it comes, goes to no one).
    fn list(
        &self,
        wakeup: &Arc<Wakeup>,
        session: u64,
        deadline: Option<Instant>,
    ) -> Result<Option<Result<Vec<String>>>> {
        let lister = self.spec.client.lister(session, &self.spec.path)?;
        let answer = wakeup.clone();
        lister.start(move |children| answer.listed(children));
        wakeup.wait_listing(deadline)
    }

    /// The lock, granted to our node `name`, unless the node was deleted
    /// meanwhile (an operator, or the end of the session). A node created in
    /// a transaction has no known token yet: it is learnt when asked for.
    /// `watch` is the own-node watch of an attempt that queued; a lock
    /// granted at once sets it only when first asked about (see
    /// [`Tracker`](super::held::Tracker)).
    ///
    /// An exclusive hold that had to wait announces its release with a
    /// note, as contention is likely to go on. One granted at once does
    /// not: a lone lock/unlock loop would pay for the note's two extra ops
    /// on every cycle, and a waiter behind it lists the lock again instead.
    /// Its plain release passes on a [`Successor`] instead: the next node
    /// of this kind created in the release's transaction may find itself
    /// the lowest without a listing.
    ///
    /// Granted only in the node's `session`: what granted it may have come
    /// just before that session was replaced. What granted it was heard on
    /// connection `granted_on` (see [`HeldLock::new`]).
    fn held(
        &self,
        name: &str,
        token: Option<i64>,
        watch: Option<NodeWatch>,
        session: u64,
        granted_on: u64,
    ) -> Result<HeldLock> {
        let client = &self.spec.client;
        let node = client.server_path(&join(&self.spec.path, name))?;
        let exclusive = self.rule.is_exclusive();
        let announce = exclusive && watch.is_some();
        // Passed on by a plain release only (see `HeldLock::new`).
        let successor = next_sequence(name, self.marker)
            .filter(|_| exclusive)
            .map(|sequence| Successor {
                kind: self.marker,
                sequence,
            });
        if watch.as_ref().is_some_and(NodeWatch::is_lost) {
            return Err(node_gone(client, session));
        }
        #[cfg(feature = "testing")]
        crate::testing::pause::reached(crate::testing::PausePoint::LockGranted);
        let grant = Grant {
            session,
            connection: granted_on,
        };
        let held = HeldLock::new(client, node, token, watch, announce, successor, grant);
        // Asked once the hold follows the session's changes, which
        // leaves no gap: a new session that replaced the node's before
        // this fails the attempt (the lost hold sends nothing when
        // dropped), and one that replaces it later turns the guard `Lost`.
        client.check_session(session)?;
        Ok(held)
    }

    /// Creates our EPHEMERAL_SEQUENTIAL node, named with a fresh uuid so that
    /// after a connection loss during the create it can be found again (and
    /// checked to belong to this session) instead of being orphaned.
    /// The listing of the lock path made right after the create comes back
    /// too, when it succeeded: that saves a round trip. When the node must
    /// wait, the I/O thread sets its watches with that reply, and this
    /// returns once the wait is over.
    ///
    /// A create and listing still waiting for a connection when the attempt
    /// is cancelled, or `withdraw_at` passes, are taken back: `Ok(None)`
    /// at the deadline, `Cancelled` on `cancel`.
    fn create_protected(
        &self,
        deadline: Option<Instant>,
        withdraw_at: Option<Instant>,
        wakeup: &Arc<Wakeup>,
        session: u64,
    ) -> Result<Option<(OurNode, Then)>> {
        let client = &self.spec.client;
        let prefix = node_prefix(&mut Rng::new(), self.marker);
        let full_prefix = join(&self.spec.path, &prefix);
        let data = self.spec.node_data();
        let mut last_error = Error::ConnectionLoss;
        let mut throttled = 0;
        for attempt in 0..MAX_CREATE_ATTEMPTS {
            // Made again (see below) only while the attempt still waits.
            if attempt > 0 {
                if wakeup.is_cancelled() {
                    return Err(Error::Cancelled);
                }
                if withdraw_at.is_some_and(|at| Instant::now() >= at) {
                    return Ok(None);
                }
            }
            let node = NewLockNode {
                prefix: &full_prefix,
                data: &data,
                acl: &self.spec.acl,
                dir: &self.spec.path,
                kind: self.marker,
                session,
            };
            let unsent = client
                .start_create_then_list(node, self.queue_step(deadline, wakeup, session, &prefix));
            let listed = match wakeup.wait_step(deadline, unsent.as_ref(), withdraw_at) {
                FirstStep::Queued(node, waiting, woken) => {
                    return Ok(Some((node, Then::Queued(waiting, woken))))
                }
                FirstStep::Listed(listed) => listed,
                FirstStep::GaveUp if wakeup.is_cancelled() => return Err(Error::Cancelled),
                FirstStep::GaveUp => return Ok(None),
            };
            match listed.created {
                // A joint transaction with a lingering release failed as a
                // whole: the create goes again, alone.
                None => {}
                Some(Ok((path, stat))) => {
                    let node = OurNode {
                        name: last_segment(&path).to_owned(),
                        token: stat.map(|s| s.czxid),
                    };
                    return Ok(Some((
                        node,
                        // A listing the server throttled is asked again
                        // after the back-off; one that failed otherwise
                        // (lost with the connection, say) at once.
                        Then::Listed(
                            listed
                                .listed
                                .filter(|l| matches!(l, Ok(_) | Err(Error::ThrottledOp))),
                        ),
                    )));
                }
                Some(Err(Error::NoNode)) => {
                    // The lock directory is missing, or was reaped since.
                    #[cfg(feature = "testing")]
                    crate::testing::pause::reached(crate::testing::PausePoint::LockDirMissing);
                    client.check_session(session)?;
                    last_error = match self.ensure_dir(session, wakeup, withdraw_at) {
                        Ok(Some(())) => Error::NoNode,
                        Ok(None) => return Ok(None),
                        // Making a container again is harmless: the next
                        // create finds the directory, or makes it again.
                        Err(e) if e.is_retryable() => {
                            if !wakeup.back_off_if_throttled(&e, &mut throttled, withdraw_at)? {
                                return Ok(None);
                            }
                            e
                        }
                        Err(e) => return Err(e),
                    };
                }
                // Refused unapplied (load shedding, after the server held
                // it a while): create again, with nothing to look for.
                Some(Err(Error::ThrottledOp)) => {
                    if !wakeup.back_off_if_throttled(
                        &Error::ThrottledOp,
                        &mut throttled,
                        withdraw_at,
                    )? {
                        return Ok(None);
                    }
                    last_error = Error::ThrottledOp;
                }
                Some(Err(e)) if e.outcome_unknown() => {
                    // The create may have happened: find out for sure before
                    // creating again, or the first node would be orphaned.
                    let Some(found) = self.find_own_node(&prefix, session, withdraw_at, wakeup)?
                    else {
                        return Ok(None);
                    };
                    if let Some((name, token)) = found {
                        let node = OurNode {
                            name,
                            token: Some(token),
                        };
                        return Ok(Some((node, Then::Listed(None))));
                    }
                    // Not created.
                    last_error = e;
                }
                Some(Err(e)) => return Err(e),
            }
        }
        Err(last_error)
    }

    /// What the I/O thread does with the create's and the listing's
    /// replies: if the node must wait, it sets the watches of the wait at
    /// once, so the calling thread, asleep, wakes only when the wait ends.
    /// If the attempt gave up on them meanwhile, it deletes the node they
    /// made, if any: our node's name starts with `prefix`.
    fn queue_step(
        &self,
        deadline: Option<Instant>,
        wakeup: &Arc<Wakeup>,
        session: u64,
        prefix: &str,
    ) -> impl FnOnce(CreatedListed) + Send + 'static {
        let owner = self.spec.client.downgrade();
        let dir = self.spec.path.clone();
        let rule = self.rule.clone();
        let wakeup = wakeup.clone();
        let prefix = prefix.to_owned();
        move |listed: CreatedListed| {
            let client = owner.upgrade();
            let step = match &client {
                Some(client) if client.check_session(session).is_ok() => {
                    queue(client, session, &dir, &rule, deadline, &wakeup, listed)
                }
                // Gone, or its session replaced: the calling thread finds
                // out, and no watch is set in a new session.
                _ => Step::Listed(listed),
            };
            if let (Some(abandoned), Some(client)) = (wakeup.finish_step(step, deadline), client) {
                clean_up_abandoned(&client, session, &dir, &prefix, abandoned);
            }
        }
    }

    /// After an ambiguous create: `Some` with our node if the create
    /// happened, `Some(None)` if it certainly did not; `Ok(None)` when
    /// `give_up_at` passes first, `Cancelled` on `cancel`. The search (see
    /// [`Client::start_own_node_search`]) goes on after the attempt gives
    /// up on it, and deletes the node if it finds one: an attempt keeps
    /// its deadline through an outage without leaving a node behind.
    ///
    /// A connection loss (or a reply that cannot be decoded) while looking
    /// is no answer, so it looks again once connected; only the end of the
    /// session, which takes the node with it, stops it, or a server whose
    /// replies cannot be decoded again and again (see
    /// [`AskAgain`]: a node left behind then goes with the session).
    fn find_own_node(
        &self,
        prefix: &str,
        session: u64,
        give_up_at: Option<Instant>,
        wakeup: &Arc<Wakeup>,
    ) -> Result<Option<Found>> {
        let client = &self.spec.client;
        let answer = wakeup.clone();
        let owner = client.downgrade();
        let dir = self.spec.path.clone();
        client.start_own_node_search(session, &self.spec.path, prefix, move |found| {
            if let Some(late) = answer.found(found) {
                delete_found(&owner, session, &dir, late);
            }
        });
        let found = wakeup.wait_search(give_up_at)?.transpose()?;
        // Answered in the create's session, or not at all.
        client.check_session(session)?;
        Ok(found)
    }

    /// Creates the lock directory and its missing ancestors as containers,
    /// which the server deletes once they are empty: up to the deepest
    /// ancestor that exists, then down again. A loop, not a recursion, so a
    /// path as deep as the server takes needs no stack for it. An ancestor
    /// reaped while the way down is under way (an empty container) is made
    /// again. Each create is waited for within `give_up_at` (`Ok(None)`
    /// once it passes) and `cancel` (`Cancelled`), whatever the connection
    /// does, and none is sent once the attempt has given up: the server
    /// reaps only containers that have had a child, so a directory made for
    /// an attempt that never creates its node would stay. (One given up on
    /// while in flight may still be applied.)
    fn ensure_dir(
        &self,
        session: u64,
        wakeup: &Arc<Wakeup>,
        give_up_at: Option<Instant>,
    ) -> Result<Option<()>> {
        let client = &self.spec.client;
        // Whether `path` is there now (false if its parent is missing);
        // `None` when the attempt gives up first.
        let made = |path: &str| -> Result<Option<bool>> {
            if wakeup.is_cancelled() {
                return Err(Error::Cancelled);
            }
            if time_left(give_up_at).is_none() {
                return Ok(None);
            }
            let answer = wakeup.clone();
            client.start_create_container(session, path, &self.spec.acl, move |reply| {
                answer.dir_made(match reply {
                    Ok(_) | Err(Error::NodeExists) => Ok(true),
                    Err(Error::NoNode) => Ok(false),
                    Err(e) => Err(e.clone()),
                });
            })?;
            wakeup
                .wait_for(give_up_at, |flags| flags.dir_made.take())?
                .transpose()
        };
        let dir = self.spec.path.as_str();
        for _ in 0..MAX_CREATE_ATTEMPTS {
            let mut missing = Vec::new();
            let mut at = dir;
            loop {
                match made(at)? {
                    None => return Ok(None),
                    Some(true) => break,
                    Some(false) => missing.push(at),
                }
                // The root (or the chroot) is missing: nothing to make.
                at = parent(at).filter(|p| *p != "/").ok_or(Error::NoNode)?;
            }
            let mut complete = true;
            for path in missing.iter().rev() {
                match made(path)? {
                    None => return Ok(None),
                    Some(true) => {}
                    Some(false) => {
                        complete = false;
                        break;
                    }
                }
            }
            if complete {
                return Ok(Some(()));
            }
        }
        Err(Error::NoNode)
    }
}

/// What a created node's first step is (on the I/O thread): queued, with
/// its watches set, if it must wait and may; otherwise the replies go to
/// the calling thread as they are.
fn queue(
    client: &Client,
    session: u64,
    dir: &str,
    rule: &Rule,
    deadline: Option<Instant>,
    wakeup: &Arc<Wakeup>,
    listed: CreatedListed,
) -> Step {
    let (Some(Ok((path, stat))), Some(Ok(children))) = (&listed.created, &listed.listed) else {
        return Step::Listed(listed);
    };
    let name = last_segment(path);
    let Some(Decision::Wait(blocker)) = decide_for(rule, children, name) else {
        return Step::Listed(listed);
    };
    if wakeup.is_cancelled() || time_left(deadline).is_none() {
        return Step::Listed(listed);
    }
    let own_watch = watch_own_node(client, session, dir, name, wakeup);
    let watch = match watch_predecessor(client, session, dir, &blocker, wakeup) {
        Ok(watch) => Some(watch),
        Err(e) => {
            wakeup.notify(Woken::WatchFailed(e));
            None
        }
    };
    let node = OurNode {
        name: name.to_owned(),
        token: stat.as_ref().map(|s| s.czxid),
    };
    Step::Queued(
        node,
        Waiting {
            own_watch,
            watch,
            acquired_on_delete: blocker.acquired_on_delete,
        },
    )
}

/// Cleans up, on the I/O thread, after the first step of an attempt that
/// gave up before it was decided: deletes the node it made, looking for it
/// first if the create's outcome is unknown (its name starts with
/// `prefix`), and drops the watches of a wait. Nothing of the node's
/// `session` is sent in a session that replaced it: the node went with it.
fn clean_up_abandoned(client: &Client, session: u64, dir: &str, prefix: &str, step: Step) {
    if client.check_session(session).is_err() {
        return;
    }
    let created = match step {
        Step::Pending => return,
        Step::Queued(node, waiting) => {
            if let Some(watch) = &waiting.watch {
                watch.finish(&Ok(None));
            }
            return delete_abandoned(client, session, dir, &node.name);
        }
        Step::Listed(listed) => listed.created,
    };
    match created {
        Some(Ok((path, _))) => delete_abandoned(client, session, dir, last_segment(&path)),
        Some(Err(e)) if e.outcome_unknown() => {
            let owner = client.downgrade();
            let dir_of_node = dir.to_owned();
            client.start_own_node_search(session, dir, prefix, move |found| {
                delete_found(&owner, session, &dir_of_node, found)
            });
        }
        // Not created.
        _ => {}
    }
}

/// Deletes the node of an attempt that gave up, if the search for it
/// found one.
fn delete_found(owner: &WeakClient, session: u64, dir: &str, found: Result<Found>) {
    if let (Ok(Some((name, _))), Some(client)) = (found, owner.upgrade()) {
        delete_abandoned(&client, session, dir, &name);
    }
}

/// Deletes the node `name` in `dir` that an attempt gave up, in the
/// background: it goes with the session if that cannot be done, and went
/// with it if a new session has replaced `session`, the node's.
fn delete_abandoned(client: &Client, session: u64, dir: &str, name: &str) {
    let Ok(server_path) = client.server_path(&join(dir, name)) else {
        return;
    };
    if let Err(e) = client.delete_in_background(server_path, session) {
        log::debug!("abandoned lock node {name} goes with the session: {e}");
    }
}

/// Asks `ask` about `what`, through `client`, until it is answered (see
/// [`AskAgain`]).
pub(super) fn ask_until_answered<R>(
    client: &Client,
    what: &dyn std::fmt::Display,
    mut ask: impl FnMut() -> Result<R>,
) -> Result<R> {
    let ask_again = AskAgain::default();
    loop {
        match ask() {
            Err(e) => match ask_again.pause_after(&e, client.shared().connection_count()) {
                None => return Err(e),
                Some(pause) => {
                    log::debug!("asking again for {what} in {pause:?}: {e}");
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
            },
            answer => return answer,
        }
    }
}

/// Why our node, created in `session`, is gone: the end of the session
/// (`SessionExpired`, say, also when a new session has replaced it) or its
/// close (`Closed`: the close deletes it, and the deletion may reach the
/// attempt before the close's reply), whichever of their effects the
/// attempt saw first; or else `LockLost` (an operator deleted it).
fn node_gone(client: &Client, session: u64) -> Error {
    match client.check_session(session) {
        Err(replaced) => replaced,
        Ok(()) => client.open_error().unwrap_or(Error::LockLost),
    }
}

/// The decision for our node `name` among `children`; `None` if our node
/// is not among them.
fn decide_for(rule: &Rule, children: &[String], name: &str) -> Option<Decision> {
    let sorted = contenders(children, ALL_MARKERS);
    let ours = sorted.iter().position(|c| c.name == name)?;
    Some(rule.decide(&sorted, ours))
}

/// Watches our own node while it waits (and then holds): its deletion
/// wakes the attempt.
fn watch_own_node(
    client: &Client,
    session: u64,
    dir: &str,
    name: &str,
    wakeup: &Arc<Wakeup>,
) -> NodeWatch {
    let wake = wakeup.clone();
    NodeWatch::start(client, session, &join(dir, name), move || {
        wake.notify(Woken::Event(EventType::None))
    })
}

/// The watches on the node an attempt waits for: on the node itself, and
/// on its release note if its holder may announce the release.
#[derive(Debug)]
struct PredecessorWatch {
    node: DataWatch,
    note: Option<DataWatch>,
}

impl PredecessorWatch {
    /// Cleans up after the wait, however it ended.
    fn finish(&self, woken: &Result<Option<Woken>>) {
        let (node_fired, released) = match woken {
            Ok(Some(Woken::Released)) => (true, true),
            Ok(Some(Woken::Event(EventType::NodeDeleted) | Woken::Listed(_))) => (true, false),
            _ => (false, false),
        };
        if !node_fired {
            // Giving up (deadline, cancel, our own node gone): our watcher
            // would otherwise stay registered until the watched node changes.
            self.node.abandon();
        }
        if !released {
            // The note never comes once the node is gone (or the wait is
            // given up), and the server would keep its watch on the note's
            // path for the rest of the session.
            if let Some(note) = &self.note {
                note.remove();
            }
        }
    }
}

/// Watches the node that `blocker` names, in `dir`: a deletion that alone
/// grants the lock, or the node's release note, wakes the attempt; any
/// other change lists the directory again first (on the I/O thread), so
/// the attempt wakes once.
fn watch_predecessor(
    client: &Client,
    session: u64,
    dir: &str,
    blocker: &Blocker,
    wakeup: &Arc<Wakeup>,
) -> Result<PredecessorWatch> {
    let path = join(dir, &blocker.node);
    let acquired_on_delete = blocker.acquired_on_delete;
    // Set by the note, which arrives before the node's deletion (both are
    // in one transaction): that deletion then has nothing left to say.
    let released = Arc::new(AtomicBool::new(false));
    let note = if blocker.may_announce && !acquired_on_delete {
        let (wake, released) = (wakeup.clone(), released.clone());
        let on_note: NotifyFn = Arc::new(move |event: &WatchedEvent| {
            if event.event_type == EventType::NodeCreated {
                released.store(true, Ordering::Release);
                wake.notify(Woken::Released);
            }
        });
        Some(client.start_watch_creation(session, &release_note(&path), on_note)?)
    } else {
        None
    };
    let lister = client.lister(session, dir)?;
    let wake = wakeup.clone();
    let on_event: NotifyFn = Arc::new(move |event: &WatchedEvent| {
        if released.load(Ordering::Acquire) {
            return;
        }
        if event.event_type == EventType::NodeDeleted && acquired_on_delete {
            wake.notify(Woken::Event(EventType::NodeDeleted));
        } else if event.event_type == EventType::None {
            // The session ended: a listing now could only fail, or be
            // answered by a new session that has nothing of this attempt.
            wake.notify(Woken::Event(EventType::None));
        } else {
            let listed = wake.clone();
            lister.start(move |children| listed.notify(Woken::Listed(children)));
        }
    });
    let node = match client.start_watch_data(session, &path, on_event, on_reply(wakeup)) {
        Ok(node) => node,
        Err(e) => {
            if let Some(note) = &note {
                note.remove();
            }
            return Err(e);
        }
    };
    Ok(PredecessorWatch { node, note })
}

/// What the predecessor watch's reply does (on the I/O thread): wakes the
/// attempt if the watch was not set. A set watch wakes it when it fires.
fn on_reply(wakeup: &Arc<Wakeup>) -> ReplyCallback {
    let wakeup = wakeup.clone();
    Box::new(move |reply: &Result<Response>| match reply {
        Ok(_) => {}
        Err(Error::NoNode) => wakeup.notify(Woken::PredecessorGone),
        Err(e) => wakeup.notify(Woken::WatchFailed(e.clone())),
    })
}

/// How a created node's first step went.
enum Then {
    /// The calling thread decides, with this listing if there is one.
    Listed(Option<Result<Vec<String>>>),
    /// The I/O thread queued the node, and its wait is over: with what
    /// ended it.
    Queued(Waiting, Result<Option<Woken>>),
}

/// Bounds how long a waiter keeps retrying through connection losses: two
/// session timeouts without progress, after which the error is returned.
struct RetryBudget {
    since: Option<Instant>,
    limit: Duration,
}

impl RetryBudget {
    fn new(client: &Client) -> RetryBudget {
        let timeout = client
            .negotiated_timeout()
            .unwrap_or(Duration::from_secs(30));
        RetryBudget {
            since: None,
            limit: timeout * 2,
        }
    }

    fn allows(&mut self) -> bool {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        now < since + self.limit
    }

    fn reset(&mut self) {
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release note followed by its predecessor's deletion (the note's
    /// event, then a watch's `NoNode` or the deletion's event) leaves the
    /// note: the lock is the waiter's without a listing. Anything else
    /// still replaces what came before.
    #[test]
    fn a_release_note_is_not_overwritten_by_its_predecessors_going() {
        let wakeup = Wakeup::default();
        let woken = || lock(&wakeup.flags).woken.take();
        for after in [Woken::PredecessorGone, Woken::Event(EventType::NodeDeleted)] {
            wakeup.notify(Woken::Released);
            wakeup.notify(after);
            assert!(matches!(woken(), Some(Woken::Released)));
        }
        wakeup.notify(Woken::Released);
        wakeup.notify(Woken::Event(EventType::None));
        assert!(matches!(woken(), Some(Woken::Event(EventType::None))));
        wakeup.notify(Woken::PredecessorGone);
        assert!(matches!(woken(), Some(Woken::PredecessorGone)));
    }
}
