//! The blocking client: one cheap-to-clone handle over one session.

mod config;
mod connect;
mod connect_string;
pub(crate) mod core;
mod io;
mod multi;
mod ops;
mod own_node;
pub(crate) mod path;
mod probe;
mod release;
mod tree;
mod watch_ops;
mod watch_receiver;

use std::sync::{Arc, Mutex, Weak};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::changes::StateChanges;
use crate::error::{Deadline, Error, Result};
use crate::proto::{AuthPacket, PASSWORD_LEN};
use crate::session::{Session, SessionConfig, State};

pub use config::{ClientBuilder, Config};
pub use connect_string::DEFAULT_PORT;
pub use multi::{Op, OpOutcome, ReadOp, ReadOutcome};
pub(crate) use own_node::{AskAgain, Found};
pub(crate) use watch_ops::{CreatedListed, DataWatch, NewLockNode, Unsent};
pub use watch_receiver::WatchReceiver;

use self::connect_string::ConnectString;
use self::core::{drain_events, lock, ReplySlot, Shared};

/// The longest session or connect timeout: `i32::MAX` ms (about 24.8 days).
const MAX_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// The longest release linger: a release is a promise to other contenders.
const MAX_RELEASE_LINGER: Duration = Duration::from_secs(1);

/// The largest frame length the wire can carry (an i32).
const MAX_FRAME_LEN: usize = i32::MAX as usize;

/// A ZooKeeper client: `Send + Sync`, cheap to clone, and every clone shares
/// one session. Calls block the calling thread until their reply arrives;
/// calls from many threads are pipelined on one connection.
///
/// Dropping the last clone closes the session as [`Client::close`] does,
/// waiting on the dropping thread for the server's confirmation (at most
/// the connect timeout), but with no result to report.
/// Lock objects ([`Mutex`](crate::Mutex) and the others), their guards and
/// [`LockMonitor`](crate::LockMonitor)s hold a clone too, and so, for a
/// moment, may the client's own threads (while they handle a reply or a
/// state change for a lock): the drop that is last then happens there,
/// without waiting. A process that must know its session closed before it
/// exits calls [`Client::close`], which waits for the server.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    chroot: Option<String>,
    hosts: String,
    wake: Sender<()>,
    threads: Mutex<Threads>,
    /// The I/O and events threads' ids: a shutdown called on one of them
    /// (from a state handler or a watch callback) must not wait for itself,
    /// nor for the `threads` lock that a shutdown elsewhere holds while it
    /// joins them.
    own_threads: Vec<ThreadId>,
    release_linger: Duration,
    /// See [`Config::watch_buffer`].
    watch_buffer: usize,
    /// Started with the first lingering release; its own lock, so that no
    /// release waits on `threads` while shutdown joins the other threads.
    release_timer: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Threads {
    io: Option<JoinHandle<()>>,
    events: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("hosts", &self.inner.hosts)
            .field("chroot", &self.inner.chroot)
            .field("session_id", &format_args!("{:#x}", self.session_id()))
            .field("state", &self.state())
            .finish()
    }
}

impl Client {
    /// Connects with the default configuration and waits until the session
    /// is established. `connect_string` is `host[:port][,host[:port]...][/chroot]`;
    /// an IPv6 host goes in brackets, with its zone, if any, by number or
    /// by interface name (`[fe80::1%eth0]:2181`). The port defaults to 2181.
    pub fn connect(connect_string: &str) -> Result<Client> {
        Client::builder().connect(connect_string)
    }

    /// A builder for the other settings.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    pub(crate) fn connect_with(connect_string: &str, config: Config) -> Result<Client> {
        let parsed = ConnectString::parse(connect_string)?;
        let timeouts = [
            ("session_timeout", Some(config.session_timeout)),
            ("connect_timeout", Some(config.connect_timeout)),
            ("request_timeout", config.request_timeout),
        ];
        for (name, value) in timeouts.into_iter().filter_map(|(n, v)| Some((n, v?))) {
            if value < Duration::from_millis(1) {
                return Err(Error::InvalidArgument(format!(
                    "{name} must be at least 1 ms, not {value:?}"
                )));
            }
            // The protocol's timeouts are i32 ms; beyond that, deadlines
            // computed from these would overflow.
            if value > MAX_TIMEOUT {
                return Err(Error::InvalidArgument(format!(
                    "{name} must be at most {MAX_TIMEOUT:?}, not {value:?}"
                )));
            }
        }
        if config.watch_buffer == 0 {
            return Err(Error::InvalidArgument(
                "watch_buffer must be at least 1 event".into(),
            ));
        }
        if config.release_linger > MAX_RELEASE_LINGER {
            return Err(Error::InvalidArgument(format!(
                "release_linger must be at most {MAX_RELEASE_LINGER:?}, not {:?}",
                config.release_linger
            )));
        }
        for (name, value) in [
            ("max_frame", config.max_frame),
            ("max_request", config.max_request),
        ] {
            if value < 1024 {
                return Err(Error::InvalidArgument(format!(
                    "{name} must be at least 1024 bytes, not {value}"
                )));
            }
            // A frame's length goes on the wire as an i32.
            if value > MAX_FRAME_LEN {
                return Err(Error::InvalidArgument(format!(
                    "{name} must be at most {MAX_FRAME_LEN} bytes, not {value}"
                )));
            }
        }
        if let Some((id, password)) = &config.session {
            // Resuming anything else would be refused as expired, or (id 0)
            // quietly become a new session.
            if *id == 0 {
                return Err(Error::InvalidArgument(
                    "session id 0 names no session (see Client::session_id)".into(),
                ));
            }
            if password.len() != PASSWORD_LEN {
                return Err(Error::InvalidArgument(format!(
                    "a session password is {PASSWORD_LEN} bytes, not {}",
                    password.len()
                )));
            }
        }
        // The server takes the user as what precedes the first ':': such a
        // user would authenticate as someone else.
        if let Some((user, _)) = config.digest.iter().find(|(user, _)| user.contains(':')) {
            return Err(Error::InvalidArgument(format!(
                "a digest user name must not contain ':', as {user:?} does"
            )));
        }
        let now = Instant::now();
        let mut session = Session::new(
            SessionConfig {
                session_timeout: config.session_timeout,
                connect_timeout: config.connect_timeout,
                can_be_read_only: config.can_be_read_only,
                max_frame: config.max_frame,
                max_request: config.max_request,
                chroot: parsed.chroot.clone(),
                request_timeout: config.request_timeout,
                batch_reads: config.batch_reads,
                batch_writes: config.batch_writes,
                new_session_on_expiry: config.new_session_on_expiry,
            },
            parsed.hosts.clone(),
            now,
        );
        if let Some((id, password)) = &config.session {
            session.resume(*id, password.clone());
        }
        let mut auth_slots = Vec::new();
        for (user, password) in &config.digest {
            let slot = Arc::new(ReplySlot::default());
            session.add_auth(now, digest_packet(user, password), slot.clone())?;
            auth_slots.push(slot);
        }
        let mut threads = Threads::default();
        let mut own_threads = Vec::with_capacity(2);
        let event_tx = match config.state_handler.clone() {
            None => None,
            Some(handler) => {
                let (tx, rx) = crossbeam_channel::unbounded::<State>();
                let spawned = std::thread::Builder::new()
                    .name("zklock-events".into())
                    .spawn(move || {
                        for state in rx {
                            // A handler that panics once is still told of every
                            // later change (an expiry, say), as the Java client's
                            // event thread goes on after a watcher's exception.
                            let call = std::panic::AssertUnwindSafe(|| handler(state));
                            if std::panic::catch_unwind(call).is_err() {
                                log::warn!("the state handler panicked on {state:?}");
                            }
                        }
                    });
                // A handler that would never be called is an error, as the
                // I/O thread's failure to start is.
                let handle = spawned?;
                own_threads.push(handle.thread().id());
                threads.events = Some(handle);
                Some(tx)
            }
        };
        let shared = Arc::new(Shared::new(session, event_tx, config.new_session_on_expiry));
        let (wake, wake_rx) = crossbeam_channel::bounded(1);
        let io_shared = shared.clone();
        let io = std::thread::Builder::new()
            .name("zklock-io".into())
            .spawn(move || io::run(io_shared, wake_rx))?;
        own_threads.push(io.thread().id());
        threads.io = Some(io);
        let client = Client {
            inner: Arc::new(Inner {
                shared,
                chroot: parsed.chroot,
                hosts: parsed.hosts.join(","),
                wake,
                threads: Mutex::new(threads),
                own_threads,
                release_linger: config.release_linger,
                watch_buffer: config.watch_buffer,
                release_timer: Mutex::new(None),
            }),
        };
        // A connect timeout for each address: a name that turns out to
        // have several (a DNS round robin) gets a turn for each of them,
        // so one silent address cannot use up the budget.
        let mut addresses = parsed.hosts.len();
        let (state, budget) = loop {
            let budget = config
                .connect_timeout
                .saturating_mul(u32::try_from(addresses).unwrap_or(u32::MAX));
            // No new session follows an expiry before the first handshake
            // (a session to take over that is gone): here it ends the
            // connect.
            let state = client
                .inner
                .shared
                .wait_state(now.checked_add(budget), |s| {
                    s.is_connected() || s.is_terminal()
                });
            let known = client.inner.shared.core().session.address_count();
            if state.is_connected() || state.is_terminal() || known <= addresses {
                break (state, budget);
            }
            addresses = known;
        };
        let taking_over = config.session.is_some();
        if !state.is_connected() {
            let fatal = client.inner.shared.core().session.fatal_error().cloned();
            client.inner.give_up(taking_over);
            return Err(fatal.unwrap_or_else(|| Error::ConnectFailed {
                hosts: client.inner.hosts.clone(),
                timeout: budget,
                last_error: lock(&client.inner.shared.last_connect_error)
                    .clone()
                    .unwrap_or_else(|| "no handshake response".into()),
            }));
        }
        // A server that never answers an auth packet must not hold connect
        // longer than its connect timeout, whatever the request timeout
        // (which may end the wait sooner).
        let auth_deadline = Instant::now()
            .checked_add(config.connect_timeout)
            .unwrap_or_else(Instant::now);
        for slot in auth_slots {
            match slot.wait_until(Some(auth_deadline)) {
                Some(Ok(_) | Err(Error::ConnectionLoss)) => {}
                Some(Err(e)) => {
                    client.inner.give_up(taking_over);
                    return Err(e);
                }
                None => {
                    client.inner.give_up(taking_over);
                    return Err(Error::Timeout {
                        deadline: Deadline::ConnectAuth,
                        after: config.connect_timeout,
                    });
                }
            }
        }
        Ok(client)
    }

    /// The current session state.
    pub fn state(&self) -> State {
        self.inner.shared.state()
    }

    /// A channel receiving every later state change, until it is dropped
    /// (see [`StateChanges`]). The client's locks follow a change before it
    /// is sent here: once `Disconnected` arrives, every hold's state is
    /// `Suspended` already.
    pub fn state_changes(&self) -> StateChanges<State> {
        self.inner.shared.subscribe()
    }

    /// Blocks until connected (to any server), the session ends, or
    /// `timeout` passes. With
    /// [`new_session_on_expiry`](ClientBuilder::new_session_on_expiry), an
    /// expiry is no end: it waits on for the new session. A session being
    /// closed ([`close`](Self::close) under way) is ending: `Closed`, as
    /// every call then says, though it may connect once more to send the
    /// close.
    pub fn wait_connected(&self, timeout: Duration) -> Result<()> {
        if let Some(ending) = self.open_error() {
            return Err(ending);
        }
        // A timeout too long to make a deadline of waits without one.
        let deadline = Instant::now().checked_add(timeout);
        let shared = &self.inner.shared;
        let state = shared.wait_state(deadline, |s| s.is_connected() || shared.is_final(s));
        // A close begun meanwhile, whose connection may be the one waited for.
        if let Some(ending) = self.open_error() {
            return Err(ending);
        }
        match state {
            s if s.is_connected() => Ok(()),
            _ => Err(self.fatal_error().unwrap_or(Error::Timeout {
                deadline: Deadline::WaitConnected,
                after: timeout,
            })),
        }
    }

    /// How many watchers this client has registered locally, one-shot ones
    /// until they fire or are removed: for tests that check that nothing
    /// piles up.
    #[cfg(feature = "testing")]
    pub fn local_watcher_count(&self) -> usize {
        self.shared().core().session.watcher_count()
    }

    /// How many [`state_changes`](Self::state_changes) receivers are
    /// registered: for tests that check none outlives its receiver.
    #[cfg(feature = "testing")]
    pub fn state_listener_count(&self) -> usize {
        self.shared().state_listener_count()
    }

    /// How many calls wait for a connection to be sent on (made while
    /// disconnected, or during a handshake): for tests that must know a call
    /// is waiting before the handshake it waits for completes.
    #[cfg(feature = "testing")]
    pub fn queued_request_count(&self) -> usize {
        self.shared().core().session.queued()
    }

    /// The session id (unique per ensemble). After an expiry that a new
    /// session follows (see
    /// [`new_session_on_expiry`](ClientBuilder::new_session_on_expiry)), the
    /// new session's: 0 until a server has granted it.
    pub fn session_id(&self) -> i64 {
        self.inner.shared.core().session.session_id()
    }

    /// The session password; with the id, another connection can resume
    /// (or close) this session. After an expiry that a new session follows,
    /// the new session's: zeros until a server has granted it.
    pub fn session_password(&self) -> Vec<u8> {
        self.inner.shared.core().session.password().to_vec()
    }

    /// The session timeout the server granted; after an expiry that a new
    /// session follows, `None` until a server has granted the new one.
    pub fn negotiated_timeout(&self) -> Option<Duration> {
        self.inner.shared.core().session.negotiated_timeout()
    }

    /// When the client last heard from a server that its session lives: a
    /// whole reply, ping answer or event, or a handshake that resumed it
    /// (when the client was built, before any), on this process's monotonic
    /// clock, taken as the client read it. The servers expire the session
    /// one negotiated timeout T after they last heard from the client,
    /// which was at most one network delay before this: a lock of this
    /// session cannot pass to another contender before about
    /// `last_heard() + T`, a bound that holds even when the caller itself
    /// was not running (stopped, or starved of CPU) to see the connection
    /// go. (A reply that arrived while the whole process was stopped is
    /// taken as heard when it was read.) Once a read-write server has seen
    /// the session, read-only servers do not count: the quorum hears
    /// nothing of the session through them.
    pub fn last_heard(&self) -> Instant {
        self.inner.shared.core().session.last_heard()
    }

    /// The chroot every path is relative to, if any.
    pub fn chroot(&self) -> Option<&str> {
        self.inner.chroot.as_deref()
    }

    /// Closes the session: the server deletes its ephemeral nodes (and so
    /// releases its locks) at once. Disconnected, or connected to a
    /// read-only server (which cannot close it), the client reconnects to a
    /// read-write server to close it, for up to
    /// [`connect_timeout`](Config::connect_timeout).
    ///
    /// `Ok` once a server confirmed the session over, or when it had already
    /// ended (expired, say). An error when no read-write server confirmed it
    /// in time (a `Timeout` naming that deadline): the servers then keep the
    /// session's ephemeral nodes, and its locks, until the session times
    /// out. Also an error when the session ended otherwise while closing
    /// (`AuthFailed` for credentials a reconnect re-sent, say), or a server
    /// answered closeSession with an error (but `NotReadOnly` and
    /// `SessionMoved`, which send it on through another connection), or
    /// the client's I/O thread panicked (an `Internal` error: a bug, after which
    /// the servers were not told, and keep the nodes until the session
    /// times out). Waits for the client's threads to finish, the state
    /// handler's call with the final state included (so a handler must not
    /// block on anything the closing thread holds), unless called on one
    /// of the client's own threads (from the state handler), which cannot
    /// wait for themselves and so return `Ok` at once.
    /// Later calls on any clone fail with `Closed`, or with the error that
    /// ended the session before (`SessionExpired`, say). With
    /// [`new_session_on_expiry`](ClientBuilder::new_session_on_expiry), it
    /// closes the session of the moment, the new one after an expiry
    /// (which has nothing to close before its handshake), and no session
    /// follows it.
    pub fn close(&self) -> Result<()> {
        self.inner.shutdown();
        let outcome = self.inner.shared.core().session.close_outcome();
        outcome.unwrap_or(Ok(()))
    }

    /// Which session of this client's the current one is (see
    /// [`Session::generation`]): it changes only when a new session
    /// follows an expiry.
    pub(crate) fn session_generation(&self) -> u64 {
        self.inner.shared.core().session.generation()
    }

    /// `SessionExpired` once the session `generation` has been replaced by
    /// a new one (see [`Self::session_generation`]).
    pub(crate) fn check_session(&self, generation: u64) -> Result<()> {
        self.inner
            .shared
            .core()
            .session
            .check_generation(generation)
    }

    /// The error that ended the session, if it has ended.
    pub(crate) fn fatal_error(&self) -> Option<Error> {
        self.inner.shared.core().session.fatal_error().cloned()
    }

    /// The error a new call fails with, if the session has ended or is
    /// closing.
    pub(crate) fn open_error(&self) -> Option<Error> {
        self.inner.shared.core().session.open_error()
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// A handle for callbacks the session itself holds, which must not keep
    /// open a client that all its users have dropped.
    pub(crate) fn downgrade(&self) -> WeakClient {
        WeakClient(Arc::downgrade(&self.inner))
    }
}

/// A [`Client`] that does not keep its session open.
#[derive(Clone)]
pub(crate) struct WeakClient(Weak<Inner>);

impl WeakClient {
    /// The client, unless every handle to it is gone.
    pub(crate) fn upgrade(&self) -> Option<Client> {
        self.0.upgrade().map(|inner| Client { inner })
    }
}

impl Inner {
    /// Ends a client whose connect failed. A session it took over (see
    /// [`ClientBuilder::session`]) is left to its owner, not closed: a
    /// close that a server answered late would delete that owner's
    /// ephemeral nodes, its locks among them.
    fn give_up(&self, taking_over: bool) {
        if taking_over {
            // Its events (the end, the watchers told) go out with the
            // shutdown's, or with the I/O thread's, whichever drains first.
            self.shared.core().session.abandon();
        }
        self.shutdown();
    }

    fn shutdown(&self) {
        // Called from our own thread (a state handler dropping the last
        // clone, say, or the I/O thread dropping a lock's last handle in a
        // state callback, under the lock that orders state changes), the
        // close's events are left to the I/O thread, which dispatches them
        // once that is over: dispatched here, `Closed` would be published
        // under that lock again, by the thread holding it. Nor can such a
        // thread join itself: the threads end on their own.
        let on_own_thread = self.own_threads.contains(&std::thread::current().id());
        let mut events = Vec::new();
        {
            let mut core = self.shared.core();
            core.session.close(Instant::now());
            if !on_own_thread {
                drain_events(&mut core.session, &mut events);
            }
        }
        self.shared.dispatch(&mut events);
        self.shared.flush();
        let _ = self.wake.try_send(());
        if on_own_thread {
            return;
        }
        let mut threads = lock(&self.threads);
        if let Some(io) = threads.io.take() {
            let _ = io.join();
        }
        let timer = lock(&self.release_timer).take();
        if let Some(timer) = timer {
            // The session is over: woken, the timer sees that and ends.
            drop(self.shared.core());
            self.shared.release_timer.notify_all();
            let _ = timer.join();
        }
        self.shared.drop_event_sender();
        if let Some(events) = threads.events.take() {
            let _ = events.join();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn digest_packet(user: &str, password: &str) -> AuthPacket {
    AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: format!("{user}:{password}").into_bytes(),
    }
}
