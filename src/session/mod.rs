//! The session state machine, with no I/O: time is an input and timers are
//! data.
//!
//! Inputs arrive through `handle_*(now, ..)` and `submit`; outputs leave
//! through `poll_transmit` (bytes to send), `poll_timeout` (the next
//! deadline), `poll_event` (replies, watch events, state changes),
//! `poll_disconnect` (drop this connection) and `next_host` (where to
//! connect). The client's I/O thread is a thin loop around it, and tests drive
//! it with bytes and a hand-advanced clock.

mod batch;
mod close;
mod delayed;
mod hosts;
mod probe;
mod receive;
mod release;
mod renew;
mod reregister;
mod watches;
mod write_batch;

#[cfg(test)]
mod auth_tests;
#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod close_tests;
#[cfg(test)]
mod deadline_tests;
#[cfg(test)]
mod delayed_tests;
#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod read_only_tests;
#[cfg(test)]
mod renew_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod throttle_tests;
#[cfg(test)]
mod write_batch_tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::{malformed, Deadline, Error, Result};
use crate::proto::{
    split_frame, write_frame, write_request, AuthPacket, ConnectRequest, DecodeError,
    DeleteRequest, KeeperState, MultiRequest, OpCode, Record, RemoveWatchesRequest, Response,
    WatcherType, AUTH_XID, PASSWORD_LEN, PING_XID,
};
use crate::rand::Rng;

pub use batch::{BatchRead, MAX_BATCHED_READS};
pub(crate) use hosts::HostList;
pub use hosts::Target;
pub use probe::{Probe, FIRST_PROBE_INTERVAL, MAX_PROBE_INTERVAL};
pub(crate) use receive::{answered_for_now, refused_for_now, strip_chroot, within_chroot};
pub(crate) use release::{throttled_back_off, ReleaseOutcome};
pub use release::{Release, Successor};
pub(crate) use watches::WatchRegistry;
pub use watches::{WatchKind, WatchedEvent};
pub use write_batch::MAX_BATCHED_WRITES;

/// What the session needs to know from the client's configuration.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The requested session timeout.
    pub session_timeout: Duration,
    /// How long a TCP connect plus handshake may take, per host.
    pub connect_timeout: Duration,
    /// Whether a read-only server is acceptable.
    pub can_be_read_only: bool,
    /// The largest frame accepted from a server.
    pub max_frame: usize,
    /// The largest request sent (frame payload, excluding the 4-byte length):
    /// the server's `jute.maxbuffer`, beyond which it drops the connection.
    pub max_request: usize,
    /// The chroot prefix (no trailing `/`), if any.
    pub chroot: Option<String>,
    /// How long a request (an auth packet included) may wait for its reply
    /// before it fails with [`Error::Timeout`] and the connection is dropped
    /// (replies come in order, so none can be skipped); `None`: twice the
    /// session timeout in use since the last answer (see
    /// [`Session::request_timeout`]).
    pub request_timeout: Option<Duration>,
    /// Whether reads submitted with [`Session::submit_read`] may share a
    /// `multiRead` (ZooKeeper 3.6+).
    pub batch_reads: bool,
    /// Whether setData calls submitted with [`Session::submit_write`] may
    /// share a `multi`.
    pub batch_writes: bool,
    /// Whether an expiry of an established session is followed at once by
    /// a new session (see [`Session::generation`]).
    pub new_session_on_expiry: bool,
}

/// The longest duration the protocol carries (`i32` milliseconds): longer
/// ones are taken as this, so that no deadline counted from an `Instant`
/// can overflow it.
const MAX_DURATION: Duration = Duration::from_millis(i32::MAX as u64);

/// The longest session timeout the client's timers go by when a server
/// grants more than asked for (see [`Session::timeout_in_use`]).
const MAX_UNASKED_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest a connection goes without sending anything (see
/// [`Session::ping_interval`]).
const MAX_PING_INTERVAL: Duration = Duration::from_secs(10);

impl SessionConfig {
    fn bounded(self) -> SessionConfig {
        SessionConfig {
            session_timeout: self.session_timeout.min(MAX_DURATION),
            connect_timeout: self.connect_timeout.min(MAX_DURATION),
            request_timeout: self.request_timeout.map(|t| t.min(MAX_DURATION)),
            ..self
        }
    }
}

/// The state of the session, as user code sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// No connection right now; the session may still be alive on the
    /// servers (Curator calls this SUSPENDED). Calls wait for a reconnect,
    /// up to the session timeout, then fail with `ConnectionLoss` unsent.
    Disconnected,
    /// Connected to a read-write server.
    Connected,
    /// Connected to a read-only server: writes fail with `NotReadOnly`.
    ConnectedReadOnly,
    /// The session expired: its ephemeral nodes, and so its locks, are
    /// gone. Terminal for that session. Unless the client was built with
    /// [`new_session_on_expiry`](crate::ClientBuilder::new_session_on_expiry),
    /// also for the client: make a new one. With it, `Disconnected` and
    /// then `Connected` follow, for a new session.
    Expired,
    /// Authentication failed. Terminal.
    AuthFailed,
    /// The client was closed. Terminal.
    Closed,
}

impl State {
    /// True for `Connected` and `ConnectedReadOnly`.
    pub fn is_connected(self) -> bool {
        matches!(self, State::Connected | State::ConnectedReadOnly)
    }

    /// True for the states a session never leaves. A client built with
    /// [`new_session_on_expiry`](crate::ClientBuilder::new_session_on_expiry)
    /// leaves `Expired` for a new session, which starts `Disconnected`.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Expired | State::AuthFailed | State::Closed)
    }

    fn keeper_state(self) -> KeeperState {
        match self {
            State::Disconnected => KeeperState::Disconnected,
            State::Connected => KeeperState::SyncConnected,
            State::ConnectedReadOnly => KeeperState::ConnectedReadOnly,
            State::Expired => KeeperState::Expired,
            State::AuthFailed => KeeperState::AuthFailed,
            State::Closed => KeeperState::Closed,
        }
    }
}

/// An output of the session.
#[derive(Debug)]
pub enum Event<T, W> {
    /// The outcome of a submitted request.
    Reply {
        /// The token given to `submit`.
        token: T,
        /// The decoded reply body or the error.
        result: Result<Response>,
    },
    /// A watch fired (or, with `EventType::None`, the session ended and the
    /// watchers are released).
    Watch {
        /// Who to tell.
        watchers: Vec<W>,
        /// What happened.
        event: WatchedEvent,
    },
    /// The session state changed.
    State(State),
}

/// A watch to register when the reply to its request arrives.
#[derive(Debug)]
pub struct WatchRequest<W> {
    /// The kind of watch (`Exist` becomes `Data` when the node exists).
    pub kind: WatchKind,
    /// The server path (chroot included).
    pub path: String,
    /// Who to tell when it fires.
    pub watcher: W,
}

#[derive(Debug)]
enum Purpose<T, W> {
    User {
        token: T,
        watch: Option<WatchRequest<W>>,
    },
    /// The reads of a batch, in order, with their ops (see `batch.rs`).
    Reads {
        reads: Vec<(T, OpCode)>,
    },
    /// The setData calls of a batch, in order, with their ops, which are
    /// sent again if another op fails the batch (see `write_batch.rs`).
    Writes {
        tokens: Vec<T>,
        ops: MultiRequest,
    },
    /// A removeWatches whose success removes the local watchers it names
    /// (see [`Session::submit_remove_watches`]).
    RemoveWatches {
        token: T,
        path: String,
        watcher_type: WatcherType,
    },
    /// A re-registration record (see `reregister.rs`), kept to be sent
    /// again if the server throttles it.
    SetWatches {
        record: crate::proto::SetWatches2,
        /// How many times in a row this connection's server throttled it.
        throttled: u32,
    },
    Background {
        path: String,
        /// Sent as a transaction with a release note.
        noted: bool,
        /// How many times in a row this connection's server throttled it:
        /// its next back-off grows with it.
        throttled: u32,
    },
    Close,
}

#[derive(Debug)]
struct Pending<T, W> {
    xid: i32,
    op: OpCode,
    /// How many results its reply may hold (see [`Record::max_results`]).
    max_results: usize,
    purpose: Purpose<T, W>,
    /// When it was written to the outbox.
    sent: Instant,
}

/// An auth packet sent on this connection and not answered yet.
#[derive(Debug)]
struct AuthWaiter<T> {
    /// Who called `add_auth`; `None` for credentials a reconnect re-sent.
    token: Option<T>,
    /// When it was written to the outbox.
    sent: Instant,
}

/// A request made while disconnected: encoded with a placeholder xid, sent
/// after the next handshake unless its deadline passes first.
#[derive(Debug)]
struct Queued<T, W> {
    op: OpCode,
    /// As [`Pending::max_results`].
    max_results: usize,
    frame: Vec<u8>,
    purpose: Purpose<T, W>,
    deadline: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    None,
    Handshaking { since: Instant },
    Established,
}

/// How much room a buffer keeps between uses: a buffer grown past it for a
/// large frame gives the rest back.
pub(crate) const KEPT_BUFFER: usize = 1 << 20;

/// One ZooKeeper session across any number of TCP connections.
#[derive(Debug)]
pub struct Session<T, W> {
    config: SessionConfig,
    hosts: HostList,
    conn: Conn,
    state: State,
    fatal: Option<Error>,
    closing: Option<close::Closing>,
    /// When the last attempt [`next_host`](Session::next_host) planned
    /// starts: a close before then brings it forward.
    attempt_starts: Option<Instant>,
    /// How a `close` ended; see `close_outcome`.
    close_outcome: Option<Result<()>>,

    /// Which session this is: see [`Session::generation`].
    generation: u64,
    session_id: i64,
    passwd: Vec<u8>,
    last_zxid: i64,
    negotiated: Option<Duration>,
    /// What a read-only server that resumed the session granted when that
    /// is shorter than the session's timeout: see [`Session::read_timeout`].
    shorter_connection_grant: Option<Duration>,
    seen_rw_server: bool,
    /// How many TCP connections have been up (see
    /// [`Session::connection_count`]).
    connections: u64,
    next_xid: i32,

    inbox: Vec<u8>,
    outbox: Vec<u8>,
    last_recv: Instant,
    /// When the server last answered a request other than an auth packet
    /// (a ping or a notification is no answer), on any connection.
    last_reply: Instant,
    /// When the server last answered an auth packet: it does as it reads
    /// one, ahead of the requests before it, so its answers say nothing of
    /// theirs, nor theirs of its.
    last_auth_reply: Instant,
    /// When anything last arrived from any server; unlike `last_recv`, a
    /// new connection does not reset it.
    last_heard: Instant,
    last_send: Instant,

    pending: VecDeque<Pending<T, W>>,
    /// The batch at the tail of the outbox that a request may still join.
    open_batch: Option<batch::OpenBatch>,
    /// Set once a server refused a multiRead: reads then go one by one.
    batch_refused: bool,
    /// The connection whose reads go one by one: the one after a batch's
    /// reply too large to read (see [`Session::refuse_oversized_reply`]).
    reads_alone_on: Option<u64>,
    queued: VecDeque<Queued<T, W>>,
    /// Requests made to go later (see [`Session::submit_at`]), in the
    /// order they fall due.
    delayed: Vec<delayed::Delayed<T, W>>,
    background: Vec<(String, i32)>,
    /// Background deletes not sent yet, with when they are due.
    deferred: Vec<(Release, Instant)>,
    /// Background deletes the server throttled on this connection, waiting
    /// out their back-off.
    throttled: Vec<release::Throttled>,
    auths: Vec<AuthPacket>,
    auth_waiters: VecDeque<AuthWaiter<T>>,
    /// Callers of `add_auth` made while not connected: the index of their
    /// packet in `auths`, and when they get `ConnectionLoss` if no
    /// handshake sends it first (the packet stays, for the next one).
    deferred_auth_waiters: Vec<(usize, T, Instant)>,
    watches: WatchRegistry<W>,
    /// The zxid the watches were last known to be set as of on the
    /// servers, while a re-registration sent with it is unconfirmed; see
    /// `reregister.rs`.
    rewatch: Option<reregister::Unconfirmed>,
    /// Re-registration records refused in a row (other than throttled),
    /// each of which dropped its connection (see `reregister.rs`).
    rewatch_refusals: u32,

    events: VecDeque<Event<T, W>>,
    disconnect: Option<Error>,
    /// While read-only: when to look for a read-write server.
    probe: Option<probe::ProbeSchedule>,
}

impl<T, W: Clone> Session<T, W> {
    /// A session that will connect to `hosts` (`host:port` strings).
    /// Durations in `config` over `i32::MAX` ms, the protocol's longest,
    /// are taken as that.
    pub fn new(config: SessionConfig, hosts: Vec<String>, now: Instant) -> Self {
        Session {
            hosts: HostList::new(hosts, Rng::new()),
            config: config.bounded(),
            conn: Conn::None,
            state: State::Disconnected,
            fatal: None,
            closing: None,
            attempt_starts: None,
            close_outcome: None,
            generation: 0,
            session_id: 0,
            passwd: vec![0; PASSWORD_LEN],
            last_zxid: 0,
            negotiated: None,
            shorter_connection_grant: None,
            seen_rw_server: false,
            connections: 0,
            next_xid: 1,
            inbox: Vec::new(),
            outbox: Vec::new(),
            last_recv: now,
            last_reply: now,
            last_auth_reply: now,
            last_heard: now,
            last_send: now,
            pending: VecDeque::new(),
            open_batch: None,
            batch_refused: false,
            reads_alone_on: None,
            queued: VecDeque::new(),
            delayed: Vec::new(),
            background: Vec::new(),
            deferred: Vec::new(),
            throttled: Vec::new(),
            auths: Vec::new(),
            auth_waiters: VecDeque::new(),
            deferred_auth_waiters: Vec::new(),
            watches: WatchRegistry::new(),
            rewatch: None,
            rewatch_refusals: 0,
            events: VecDeque::new(),
            disconnect: None,
            probe: None,
        }
    }

    // ---- Getters ----

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The session id (0 before the first handshake, and before the
    /// handshake of a new session after an expiry).
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// The session password.
    pub fn password(&self) -> &[u8] {
        &self.passwd
    }

    /// The timeout the server granted, once connected.
    pub fn negotiated_timeout(&self) -> Option<Duration> {
        self.negotiated
    }

    /// When a whole frame last arrived from any server on an established
    /// connection, or a handshake granted or resumed the session (the
    /// session's creation, before any did). Once a read-write server has
    /// seen the session, read-only servers do not count: the quorum hears
    /// nothing of it through them (see [`Session::handle_timeout`]).
    pub fn last_heard(&self) -> Instant {
        self.last_heard
    }

    /// The largest zxid seen in a reply.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// The error every call now fails with, once the session is over.
    pub fn fatal_error(&self) -> Option<&Error> {
        self.fatal.as_ref()
    }

    /// The error a new call fails with: the session's end, or `Closed`
    /// from the moment [`Session::close`] is called.
    pub fn open_error(&self) -> Option<Error> {
        self.check_open().err()
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// A connection stays up while something is heard at least this often:
    /// 2/3 of the session timeout in use, or of the connection's server's
    /// grant if that is shorter. A read-only server that resumes a session
    /// (before 3.8) grants it by its own bounds, which do not change the
    /// session's expiry but do close a connection left idle that long: the
    /// pings, at half the read timeout, go by the shorter.
    pub fn read_timeout(&self) -> Duration {
        let in_use = self.timeout_in_use();
        self.shorter_connection_grant
            .map_or(in_use, |grant| grant.min(in_use))
            * 2
            / 3
    }

    /// The session timeout the client's own timers go by: the one the
    /// server granted (or, before a grant, the one asked for), but no more
    /// than the longer of the one asked for and [`MAX_UNASKED_TIMEOUT`]. A
    /// server grants more than asked when its `minSessionTimeout` is
    /// higher, which is honoured; a hostile grant of days would otherwise
    /// leave a silent connection, or a call waiting for a connection, that
    /// long. The session's expiry still goes by the grant.
    fn timeout_in_use(&self) -> Duration {
        let requested = self.config.session_timeout;
        self.negotiated.map_or(requested, |granted| {
            granted.min(requested.max(MAX_UNASKED_TIMEOUT))
        })
    }

    /// How long the requests in flight may go unanswered: the configured
    /// `request_timeout`, counted from the oldest one's sending; or without
    /// one, twice the session timeout in use, counted from that or from the
    /// server's last answer to a request, whichever is later. A ZooKeeper
    /// server answers a session's pings after the requests sent before
    /// them, so on a real one the read timeout ends a connection with a
    /// stuck reply long before; the default is there for a server that
    /// answers pings but not the calls, which would otherwise hold them for
    /// as long as the connection lives. A server still answering is
    /// working through them (a reconnect's burst of re-registrations, a
    /// deep pipeline), and is given the time.
    pub fn request_timeout(&self) -> Duration {
        self.config
            .request_timeout
            .unwrap_or(self.timeout_in_use() * 2)
    }

    /// A ping goes out after this long without sending anything: half the
    /// read timeout, and at most 10 s, as in the Java client, so that a
    /// long session's idle connection is not dropped by a NAT or firewall
    /// that forgets idle connections sooner.
    pub fn ping_interval(&self) -> Duration {
        (self.read_timeout() / 2).min(MAX_PING_INTERVAL)
    }

    /// How long one connection attempt, TCP connect and handshake together,
    /// may take: the configured connect timeout, and once a session is
    /// established, at most a third of its timeout shared among the other
    /// hosts. A silent server is given up on only after the read timeout,
    /// 2/3 of the session timeout since it was last heard, which leaves
    /// that third for reaching another server before the session expires:
    /// a whole connect timeout spent on the next host, silent too, would
    /// lose the session with a healthy one in reach. During a close, also
    /// at most the attempt's share of what is left of the close's deadline
    /// (see [`Session::close`]).
    pub fn attempt_timeout(&self) -> Duration {
        self.attempt_timeout_outside_close()
            .min(self.close_attempt_share().unwrap_or(Duration::MAX))
            // Never zero, which a socket refuses as a timeout.
            .max(Duration::from_millis(1))
    }

    /// [`attempt_timeout`](Self::attempt_timeout) as if not closing.
    fn attempt_timeout_outside_close(&self) -> Duration {
        let configured = self.config.connect_timeout;
        let others = self.hosts.len().saturating_sub(1);
        let session_share = self
            .negotiated
            .map(|negotiated| hosts::share_among(negotiated / 3, others));
        session_share.map_or(configured, |share| share.min(configured))
    }

    /// Takes back the requests still waiting for a connection (never
    /// sent, so never applied) whose tokens `is_ours` picks, if the one
    /// `first` picks is among them; their tokens in order. Requests queue
    /// in the order they were made, so those made after `first` have not
    /// been sent either. Empty, with nothing taken, if `first` was sent.
    pub fn withdraw_queued(
        &mut self,
        first: impl Fn(&T) -> bool,
        is_ours: impl Fn(&T) -> bool,
    ) -> Vec<T> {
        let queued_first =
            |q: &Queued<T, W>| matches!(&q.purpose, Purpose::User { token, .. } if first(token));
        if !self.queued.iter().any(queued_first) {
            return Vec::new();
        }
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(self.queued.len());
        for q in std::mem::take(&mut self.queued) {
            match q.purpose {
                Purpose::User { token, .. } if first(&token) || is_ours(&token) => {
                    taken.push(token)
                }
                purpose => kept.push_back(Queued { purpose, ..q }),
            }
        }
        self.queued = kept;
        taken
    }

    /// Number of requests sent and awaiting replies.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Number of requests waiting for a connection to be sent on.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    // ---- Inputs ----

    /// Uses the identity of an existing session (for resuming it, or for
    /// tests that close another client's session).
    pub fn resume(&mut self, session_id: i64, password: Vec<u8>) {
        self.session_id = session_id;
        self.passwd = password;
        self.seen_rw_server = true;
    }

    /// Ends the session here without closing it on the servers, for a
    /// session taken over with [`resume`](Self::resume) that its taker
    /// gives up on (a connect that failed): it may still be another
    /// process's, whose ephemeral nodes (its locks) a close would delete.
    /// Later calls fail with `Closed`.
    pub fn abandon(&mut self) {
        self.terminate(State::Closed, Error::Closed);
    }

    /// A TCP connection is up: queues the handshake. `started`: when the
    /// attempt began (its TCP connect), so that connect and handshake
    /// together get the connect timeout.
    pub fn handle_connected(&mut self, started: Instant) {
        if self.fatal.is_some() {
            return;
        }
        self.conn = Conn::Handshaking { since: started };
        self.connections += 1;
        self.probe = None;
        self.inbox.clear();
        self.outbox.clear();
        self.close_batch();
        self.disconnect = None;
        self.last_recv = started;
        self.last_send = started;
        let resume = self.seen_rw_server;
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            timeout_ms: millis_i32(self.config.session_timeout),
            session_id: if resume { self.session_id } else { 0 },
            passwd: if resume {
                self.passwd.clone()
            } else {
                vec![0; PASSWORD_LEN]
            },
            // Only a read-write server can close the session.
            read_only: self.config.can_be_read_only && self.closing.is_none(),
        };
        write_frame(&mut self.outbox, &request);
    }

    /// How many TCP connections have been up so far: two failures of a
    /// request seen with one count came on one connection, which a lost
    /// connection's failure cannot have.
    pub fn connection_count(&self) -> u64 {
        self.connections
    }

    /// A connection attempt failed before the handshake.
    pub fn handle_connect_failed(&mut self, now: Instant) {
        self.hosts.failed(now);
        self.close_attempt_ended();
    }

    /// Bytes arrived on the connection. Only a whole frame counts as
    /// hearing from the server (as in the Java client): a connection that
    /// trickles a frame it never finishes is as silent as one that sends
    /// nothing, and its read timeout drops it.
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        if self.conn == Conn::None {
            return;
        }
        let mut inbox = std::mem::take(&mut self.inbox);
        inbox.extend_from_slice(bytes);
        let mut consumed = 0;
        while self.disconnect.is_none() {
            let rest = inbox.get(consumed..).unwrap_or_default();
            match split_frame(rest, self.reply_frame_limit()) {
                Ok(Some((payload, len))) => {
                    consumed += len;
                    self.last_recv = now;
                    // A handshake's answer counts only if it resumes the
                    // session (see `handle_handshake`): a refusal, or a
                    // "session expired", says nothing of the session's life.
                    if self.conn == Conn::Established && !self.kept_by_read_only() {
                        self.last_heard = now;
                    }
                    if let Err(e) = self.handle_frame(now, payload) {
                        self.request_disconnect(e);
                    }
                }
                Ok(None) => break,
                Err(e @ DecodeError::FrameTooLarge { .. }) if self.conn == Conn::Established => {
                    // Whose frame it is shows in its xid: 4 bytes more are
                    // waited for, not the frame.
                    let Some(xid) = rest.get(4..8).and_then(|b| <[u8; 4]>::try_from(b).ok()) else {
                        break;
                    };
                    self.refuse_oversized_reply(i32::from_be_bytes(xid), e);
                }
                Err(e) => self.request_disconnect(Error::Protocol(e)),
            }
        }
        inbox.drain(..consumed.min(inbox.len()));
        // The room a large reply took (a batch's may be many times
        // `max_frame`) is not kept for the client's life; while one is
        // still arriving, the room it needs is.
        let arriving = inbox
            .get(..4)
            .and_then(|prefix| <[u8; 4]>::try_from(prefix).ok())
            .map_or(0, |prefix| u32::from_be_bytes(prefix) as usize);
        if arriving <= KEPT_BUFFER {
            inbox.shrink_to(KEPT_BUFFER);
        }
        self.inbox = inbox;
    }

    /// The connection is gone (closed by either side, or dropped after
    /// `poll_disconnect`). Requests in flight fail with `ConnectionLoss`;
    /// nothing is resent.
    pub fn handle_disconnected(&mut self, now: Instant) {
        let was = std::mem::replace(&mut self.conn, Conn::None);
        self.disconnect = None;
        self.inbox.clear();
        self.inbox.shrink_to(KEPT_BUFFER);
        self.outbox.clear();
        self.close_batch();
        // Still background deletes: the reconnect sends them.
        self.deferred.clear();
        self.throttled.clear();
        // The next handshake sets every watch again.
        self.drop_delayed_set_watches();
        if was == Conn::None {
            return;
        }
        self.close_attempt_ended();
        match was {
            Conn::Handshaking { .. } => self.hosts.failed(now),
            Conn::Established => self.hosts.lost(now),
            Conn::None => {}
        }
        let error = self.fatal.clone().unwrap_or(Error::ConnectionLoss);
        for pending in std::mem::take(&mut self.pending) {
            self.fail(pending.purpose, error.clone());
        }
        for waiter in std::mem::take(&mut self.auth_waiters) {
            self.fail_auth(waiter, error.clone());
        }
        if self.closing.is_some() && !self.seen_rw_server {
            // Only a read-write server can have given the session ephemeral
            // nodes, as `close` says: the read-only connection it was being
            // closed on gone, there is nothing left to close (a reconnect
            // would ask a read-write server for a new session, only to
            // close it).
            self.end_close(Ok(()));
            return;
        }
        // Closing goes on through refused handshakes and lost replies (the
        // next server confirms a close that happened by refusing the resume
        // as expired) until the close's deadline.
        if self.close_overdue(now) {
            self.give_up_closing();
        } else if self.state.is_connected() {
            self.set_state(State::Disconnected);
        }
    }

    /// Timers: the close's, handshake and read timeouts, pings, deadlines
    /// of requests waiting for a connection, and delayed requests.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.conn != Conn::Established || self.kept_by_read_only() {
            if let Some(at) = self.local_expiry() {
                if now >= at {
                    log::warn!(
                        "no read-write server heard from for {:?}: the session is expired",
                        now - self.last_heard
                    );
                    self.terminate(State::Expired, Error::SessionExpired);
                    return;
                }
            }
        }
        // First, so that a connection the close's deadline ends is dropped
        // for that reason, not for an attempt's share of it ending then too.
        self.handle_close_timers(now);
        let connection_over = self.connection_deadline().is_some_and(|at| now >= at);
        match self.conn {
            Conn::Handshaking { .. } if connection_over => {
                self.request_disconnect(Error::Timeout {
                    deadline: Deadline::Handshake,
                    after: self.attempt_timeout(),
                });
            }
            Conn::Established if connection_over => {
                self.request_disconnect(Error::Timeout {
                    deadline: Deadline::Read,
                    after: self.read_timeout(),
                });
            }
            Conn::Established if self.request_deadline().is_some_and(|at| now >= at) => {
                let deadline = match self.config.request_timeout {
                    Some(_) => Deadline::Request,
                    None => Deadline::Unanswered,
                };
                let error = Error::Timeout {
                    deadline,
                    after: self.request_timeout(),
                };
                // The oldest request fails with the timeout; the others,
                // sent later, with the connection it takes down.
                if self.oldest_unanswered_is_auth() {
                    if let Some(waiter) = self.auth_waiters.pop_front() {
                        self.fail_auth(waiter, error.clone());
                    }
                } else if let Some(oldest) = self.pending.pop_front() {
                    self.fail(oldest.purpose, error.clone());
                }
                self.request_disconnect(error);
            }
            Conn::Established if now >= self.last_send + self.ping_interval() => {
                write_request(&mut self.outbox, PING_XID, OpCode::Ping, &());
                self.last_send = now;
            }
            _ => {}
        }
        if self.next_throttled_retry().is_some_and(|due| now >= due) {
            self.resend_throttled_deletes(now);
        }
        if self.next_delayed().is_some_and(|due| now >= due) {
            self.release_due_delayed(now);
        }
        while self.queued.front().is_some_and(|q| now >= q.deadline) {
            if let Some(q) = self.queued.pop_front() {
                self.fail(q.purpose, Error::ConnectionLoss);
            }
        }
        // Looked at in place: on every tick, and empty but while disconnected.
        while let Some(at) = self
            .deferred_auth_waiters
            .iter()
            .position(|(_, _, deadline)| now >= *deadline)
        {
            let (_, token, _) = self.deferred_auth_waiters.remove(at);
            self.events.push_back(Event::Reply {
                token,
                result: Err(Error::ConnectionLoss),
            });
        }
    }

    /// Queues a request. Sent at once when connected; otherwise sent after
    /// the next handshake, or failed with `ConnectionLoss` if no handshake
    /// completes within the session timeout.
    pub fn submit(
        &mut self,
        now: Instant,
        op: OpCode,
        body: &impl Record,
        token: T,
        watch: Option<WatchRequest<W>>,
    ) -> Result<()> {
        self.submit_at(now, now, op, body, token, watch)
    }

    /// Deletes `path` at `version` for sure: the delete is retried after
    /// every reconnect until the server answers it or the session ends, and
    /// on the same connection after a back-off (100 ms, doubling up to 2 s)
    /// when the server throttles it. It is ordered before any request
    /// submitted after it.
    pub fn submit_background_delete(
        &mut self,
        now: Instant,
        path: String,
        version: i32,
    ) -> Result<()> {
        self.check_open()?;
        self.background.push((path.clone(), version));
        if self.conn == Conn::Established {
            self.send_background_delete(now, path, version)?;
        }
        Ok(())
    }

    /// Sends the plain delete of a node that is among the background
    /// deletes already.
    pub(super) fn send_background_delete(
        &mut self,
        now: Instant,
        path: String,
        version: i32,
    ) -> Result<()> {
        let request = DeleteRequest {
            path: path.clone(),
            version,
        };
        let purpose = Purpose::Background {
            path,
            noted: false,
            throttled: 0,
        };
        self.send(now, OpCode::Delete, &request, purpose)
    }

    /// Adds credentials. They are also re-sent after every reconnect, once
    /// however often they were added (an application adding them on every
    /// `Connected` must not make each handshake longer). Made while not
    /// connected, the caller waits for the next handshake up to the session
    /// timeout, then gets `ConnectionLoss` (the packet stays).
    pub fn add_auth(&mut self, now: Instant, auth: AuthPacket, token: T) -> Result<()> {
        self.check_open()?;
        // The packet is re-sent after every reconnect: one over the server's
        // limit would make it drop every connection, for good.
        let mut frame = Vec::new();
        let len = write_request(&mut frame, AUTH_XID, OpCode::Auth, &auth);
        self.check_frame_len(len)?;
        let known = self.auths.iter().position(|known| *known == auth);
        if self.conn == Conn::Established {
            self.outbox.extend_from_slice(&frame);
            self.auth_waiters.push_back(AuthWaiter {
                token: Some(token),
                sent: now,
            });
            self.last_send = now;
        } else {
            let deadline = now + self.timeout_in_use();
            let index = known.unwrap_or(self.auths.len());
            self.deferred_auth_waiters.push((index, token, deadline));
        }
        if known.is_none() {
            self.auths.push(auth);
        }
        Ok(())
    }

    /// Queues a removeWatches. When the server confirms it, the local
    /// watchers of that type on its path are removed too, as the reply is
    /// handled, so that a watch set by a later request (which the server
    /// keeps) is not taken with them: each gets a last `DataWatchRemoved`,
    /// `ChildWatchRemoved` or `PersistentWatchRemoved` event, delivered
    /// before the reply.
    pub fn submit_remove_watches(
        &mut self,
        now: Instant,
        request: &RemoveWatchesRequest,
        token: T,
    ) -> Result<()> {
        self.check_open()?;
        let purpose = Purpose::RemoveWatches {
            token,
            path: request.path.clone(),
            watcher_type: request.watcher_type,
        };
        self.enqueue(now, OpCode::RemoveWatches, request, purpose)
    }

    /// True if a watcher of one of `kinds` on `path` that `matches` picks
    /// is registered, or will be when the reply to a request sent, queued
    /// or delayed arrives. The server keeps one watch per session and path,
    /// whoever set it, and handles requests in order: a removeWatches sent
    /// now would also take the watch that such a request sets.
    pub fn is_watched_or_pending(
        &self,
        kinds: &[WatchKind],
        path: &str,
        matches: impl Fn(&W) -> bool,
    ) -> bool {
        let registered = kinds
            .iter()
            .any(|&kind| self.watches.any_where(kind, path, &matches));
        let sent = self.pending.iter().map(|p| &p.purpose);
        let queued = self.queued.iter().map(|q| &q.purpose);
        let delayed = self.delayed_purposes();
        registered
            || sent.chain(queued).chain(delayed).any(|purpose| {
                matches!(purpose, Purpose::User { watch: Some(w), .. }
                    if w.path == path && kinds.contains(&w.kind) && matches(&w.watcher))
            })
    }

    /// Forgets the watchers of `kind` on `path` that `matches` picks, e.g.
    /// one whose waiter gave up. The server's watch stays (it fires once,
    /// then nobody is told); returns how many were forgotten.
    pub fn forget_watchers(
        &mut self,
        kind: WatchKind,
        path: &str,
        matches: impl Fn(&W) -> bool,
    ) -> usize {
        self.watches.remove_where(kind, path, matches)
    }

    /// Forgets the watchers of `kind` that `matches` picks, on every path.
    /// The server's watches stay.
    pub fn forget_watchers_everywhere(&mut self, kind: WatchKind, matches: impl Fn(&W) -> bool) {
        self.watches.remove_everywhere(kind, matches);
    }

    /// The paths (server paths) with a watcher of `kind` that `matches`
    /// picks.
    pub fn watched_paths_where(
        &self,
        kind: WatchKind,
        matches: impl Fn(&W) -> bool,
    ) -> Vec<String> {
        self.watches.paths_where(kind, matches)
    }

    /// How many watchers are registered (one-shot ones until they fire).
    pub fn watcher_count(&self) -> usize {
        self.watches.len()
    }

    // ---- Outputs ----

    /// Moves the bytes waiting to be sent into `buf` (appending).
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) {
        self.close_batch();
        if buf.is_empty() {
            std::mem::swap(buf, &mut self.outbox);
        } else {
            buf.append(&mut self.outbox);
        }
    }

    /// True when bytes are waiting to be sent.
    pub fn has_transmit(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// The next replies, watch events and state changes.
    pub fn poll_event(&mut self) -> Option<Event<T, W>> {
        self.events.pop_front()
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conn = self.connection_deadline();
        let ping = (self.conn == Conn::Established).then(|| self.last_send + self.ping_interval());
        let closing = self.next_close_timer();
        let queued = self.queued.iter().map(|q| q.deadline).min();
        let auths = self
            .deferred_auth_waiters
            .iter()
            .map(|(_, _, at)| *at)
            .min();
        let expiry = self
            .local_expiry()
            .filter(|_| self.conn != Conn::Established || self.kept_by_read_only());
        let request = self
            .request_deadline()
            .filter(|_| self.conn == Conn::Established && self.disconnect.is_none());
        let throttled = self.next_throttled_retry();
        let delayed = self.next_delayed();
        [
            conn, ping, closing, queued, auths, expiry, request, throttled, delayed,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The longest the driver may wait on this connection without handing
    /// the session the time, even with no deadline due. A call another
    /// thread makes meanwhile may bring a deadline sooner than the one the
    /// driver waits for, and nothing wakes a driver blocked in a read: a
    /// request times out a configured `request_timeout` after it is made
    /// (the default bound, twice the session timeout, is always later than
    /// the read timeout's or the ping's deadline, which the driver waits
    /// for anyway), and a close
    /// gives closeSession on this connection its share of `connect_timeout`
    /// (all of it with a single host). Once closing, the close's timers are
    /// in [`poll_timeout`](Self::poll_timeout).
    pub fn longest_blind_wait(&self) -> Option<Duration> {
        let close = self
            .closing
            .is_none()
            .then(|| hosts::share_among(self.config.connect_timeout, self.hosts.len()));
        [self.config.request_timeout, close]
            .into_iter()
            .flatten()
            .min()
    }

    /// When this connection is dropped unless a reply comes first: the
    /// handshake's, the read timeout's, the oldest request's, the close's
    /// deadline or closeSession's share of it on this
    /// connection, whichever is earliest; `None` without a connection. A
    /// write blocked in a full send buffer gives way at this moment, so
    /// that [`Session::handle_timeout`], called then, drops the connection
    /// with the error of the deadline that passed.
    pub fn write_deadline(&self) -> Option<Instant> {
        let conn = self.connection_deadline()?;
        let request = self
            .request_deadline()
            .filter(|_| self.conn == Conn::Established);
        [Some(conn), request, self.next_close_timer()]
            .into_iter()
            .flatten()
            .min()
    }

    /// When this connection is given up on unless the server is heard
    /// first: its handshake's timeout, or the read timeout since the server
    /// was last heard; `None` without a connection.
    fn connection_deadline(&self) -> Option<Instant> {
        match self.conn {
            Conn::None => None,
            Conn::Handshaking { since } => {
                let own = since + self.attempt_timeout_outside_close();
                Some(self.close_attempt_end().map_or(own, |end| end.min(own)))
            }
            Conn::Established => Some(self.last_recv + self.read_timeout()),
        }
    }

    /// When the oldest request in flight times out (see
    /// [`request_timeout`](Self::request_timeout)): the earlier of the
    /// first auth packet's deadline and the first other request's. Replies
    /// come in order, so those are the first to, except that an auth
    /// packet's reply may overtake those of requests sent before it (the
    /// server answers it as it reads it). `closeSession` is left to the
    /// close's own deadline.
    fn request_deadline(&self) -> Option<Instant> {
        let (request, auth) = self.request_deadlines();
        request.into_iter().chain(auth).min()
    }

    /// The first request's deadline (other than an auth packet's), and the
    /// first auth packet's. With a request timeout set, each counts from
    /// its sending; without, from that or from the server's last answer to
    /// the same kind of request, whichever is later.
    fn request_deadlines(&self) -> (Option<Instant>, Option<Instant>) {
        let bound = self.request_timeout();
        let deadline = |sent: Instant, last_answer: Instant| match self.config.request_timeout {
            Some(_) => sent + bound,
            None => sent.max(last_answer) + bound,
        };
        let request = self
            .oldest_request_sent()
            .map(|sent| deadline(sent, self.last_reply));
        let auth = self
            .auth_waiters
            .front()
            .map(|a| deadline(a.sent, self.last_auth_reply));
        (request, auth)
    }

    /// When the first request in flight that the request timeout applies to
    /// was sent.
    fn oldest_request_sent(&self) -> Option<Instant> {
        self.pending
            .front()
            .filter(|p| !matches!(p.purpose, Purpose::Close))
            .map(|p| p.sent)
    }

    /// True if the request that [`Self::request_deadline`] is for is an
    /// auth packet (on a tie too: the packets a reconnect re-sends go
    /// first).
    fn oldest_unanswered_is_auth(&self) -> bool {
        match self.request_deadlines() {
            (Some(request), Some(auth)) => auth <= request,
            (_, auth) => auth.is_some(),
        }
    }

    /// True while a session that a read-write server has seen is on a
    /// read-only one, cut off from the quorum. Servers before 3.8 resume a
    /// session there; answering its pings, they keep the connection up
    /// while the quorum, hearing nothing, expires the session. So it
    /// expires locally as if disconnected.
    fn kept_by_read_only(&self) -> bool {
        self.seen_rw_server && self.state == State::ConnectedReadOnly
    }

    /// When the session is certainly over on the servers, judged locally:
    /// 4/3 of the negotiated timeout after the session was last heard of
    /// ([`Session::last_heard`]; the rule of the 3.9.3+ Java client). Only once a session was
    /// established, and not while closing.
    ///
    /// It is no exact bound either way. The servers expire the session a
    /// timeout after they last heard from it: after a clean cut, about T
    /// after its last reply, so this comes up to T/3 late; if our pings
    /// went on reaching a server until the read timeout (2/3) dropped the
    /// connection, as late as 5T/3, so this comes early. What a lock holder
    /// relies on comes first: the read timeout drops the connection, and
    /// its guard turns `Suspended`, before the servers can have expired the
    /// session. Without this rule a client cut off from every server would
    /// never learn of the expiry.
    /// A session only read-only servers have seen is never resumed (the
    /// next handshake asks for a new one) and holds no ephemeral nodes:
    /// there is nothing to expire.
    fn local_expiry(&self) -> Option<Instant> {
        if self.fatal.is_some() || self.closing.is_some() || !self.seen_rw_server {
            return None;
        }
        self.negotiated.map(|t| self.last_heard + t * 4 / 3)
    }

    /// Set when the current connection must be dropped (a protocol error, a
    /// timeout, expiry); the caller closes the socket and then calls
    /// `handle_disconnected`.
    pub fn poll_disconnect(&mut self) -> Option<Error> {
        self.disconnect.take()
    }

    /// Where to connect next and when, or `None` once the session is over.
    pub fn next_host(&mut self, now: Instant) -> Option<(Target, Instant)> {
        if self.fatal.is_some() {
            return None;
        }
        let next = self.hosts.next(now);
        if let Some((_, starts)) = next {
            self.attempt_starts = Some(starts);
            self.plan_close_attempt(starts);
        }
        next
    }

    /// Ends the session with `error`, which every call waiting, and every
    /// later one, fails with: for a driver that can no longer drive it.
    /// Nothing tells the servers, which keep the session's ephemeral nodes
    /// until it times out: [`close_outcome`](Self::close_outcome) says so
    /// with `error`.
    pub fn abort(&mut self, error: Error) {
        if self.fatal.is_none() {
            self.close_outcome = Some(Err(error.clone()));
        }
        self.terminate(State::Closed, error);
    }

    /// When the attempt [`next_host`](Self::next_host) planned last
    /// starts: as it said, or at the [`close`](Self::close) if one came
    /// while the attempt waited out a pause. `None` before the first.
    pub fn attempt_start(&self) -> Option<Instant> {
        self.attempt_starts
    }

    /// The number of hosts in the connect string.
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// The number of addresses a pass over the hosts tries: a host counts
    /// once for each address its last lookup gave (see
    /// [`handle_resolved`](Self::handle_resolved)), or once if not looked up
    /// yet.
    pub fn address_count(&self) -> usize {
        self.hosts.addresses()
    }

    /// `host`, one of the connect string's, was looked up and gave
    /// `addresses` addresses: it takes that many turns in a pass.
    pub fn handle_resolved(&mut self, host: &str, addresses: usize) {
        self.hosts.resolved(host, addresses);
    }

    // ---- Internals ----

    fn check_open(&self) -> Result<()> {
        match (&self.fatal, self.closing) {
            (Some(e), _) => Err(e.clone()),
            (None, Some(_)) => Err(Error::Closed),
            (None, None) => Ok(()),
        }
    }

    fn next_xid(&mut self) -> i32 {
        let xid = self.next_xid;
        // Never i32::MAX and never negative: negative xids are special.
        self.next_xid = if xid >= i32::MAX - 1 { 1 } else { xid + 1 };
        xid
    }

    fn enqueue(
        &mut self,
        now: Instant,
        op: OpCode,
        body: &impl Record,
        purpose: Purpose<T, W>,
    ) -> Result<()> {
        if self.conn == Conn::Established {
            return self.send(now, op, body, purpose);
        }
        let frame = self.encode_unsent(op, body)?;
        let deadline = now + self.timeout_in_use();
        self.queued.push_back(Queued {
            op,
            max_results: body.max_results(),
            frame,
            purpose,
            deadline,
        });
        Ok(())
    }

    /// A request's frame for later, with a placeholder xid that
    /// [`Session::send_encoded`] fills in; refused if over `max_request`.
    fn encode_unsent(&self, op: OpCode, body: &impl Record) -> Result<Vec<u8>> {
        let mut frame = Vec::new();
        let len = write_request(&mut frame, 0, op, body);
        self.check_frame_len(len)?;
        Ok(frame)
    }

    fn send(
        &mut self,
        now: Instant,
        op: OpCode,
        body: &impl Record,
        purpose: Purpose<T, W>,
    ) -> Result<()> {
        self.send_held_back(now);
        let start = self.outbox.len();
        let xid = self.next_xid();
        let len = write_request(&mut self.outbox, xid, op, body);
        if let Err(e) = self.check_frame_len(len) {
            self.outbox.truncate(start);
            // Nor is the room it took kept: the buffer lives as long as
            // the client, and the refused request may be any size.
            self.outbox
                .shrink_to(start.saturating_add(self.config.max_request));
            return Err(e);
        }
        self.pending.push_back(Pending {
            xid,
            op,
            max_results: body.max_results(),
            purpose,
            sent: now,
        });
        self.last_send = now;
        Ok(())
    }

    /// Sends what is held back but keeps its place ahead of any later
    /// request: re-registrations of watches backing off after a throttle,
    /// and deletes (deferred, or throttled and backing off).
    fn send_held_back(&mut self, now: Instant) {
        if !self.delayed.is_empty() {
            self.send_delayed_set_watches(now);
        }
        if !self.deferred.is_empty() {
            self.send_deferred_deletes(now);
        }
        if !self.throttled.is_empty() {
            // Their back-off cut short.
            self.resend_throttled_deletes(now);
        }
    }

    fn check_frame_len(&self, len: usize) -> Result<()> {
        if len > self.config.max_request {
            return Err(Error::InvalidArgument(format!(
                "request of {len} bytes exceeds the server's {}-byte limit (jute.maxbuffer)",
                self.config.max_request
            )));
        }
        Ok(())
    }

    fn request_disconnect(&mut self, reason: Error) {
        if self.conn != Conn::None && self.disconnect.is_none() {
            log::debug!("dropping connection: {reason}");
            self.disconnect = Some(reason);
        }
    }

    fn set_state(&mut self, state: State) {
        if self.state != state {
            self.state = state;
            self.events.push_back(Event::State(state));
        }
    }

    /// Ends the session for good. Reported once; every waiting call fails
    /// with `error`, every watcher gets a final state event, and so does
    /// every later call, unless an expiry is followed by a new session (see
    /// [`Session::generation`]), which later calls then wait for.
    fn terminate(&mut self, state: State, error: Error) {
        if self.fatal.is_some() {
            return;
        }
        if self.closing.is_some() && self.close_outcome.is_none() {
            // Ended some other way while closing (an auth failure, say).
            self.close_outcome = Some(Err(error.clone()));
        }
        self.fatal = Some(error.clone());
        self.set_state(state);
        for p in std::mem::take(&mut self.pending) {
            self.fail(p.purpose, error.clone());
        }
        for q in std::mem::take(&mut self.queued) {
            self.fail(q.purpose, error.clone());
        }
        self.fail_delayed(&error);
        for waiter in std::mem::take(&mut self.auth_waiters) {
            self.fail_auth(waiter, error.clone());
        }
        for (_, waiter, _) in std::mem::take(&mut self.deferred_auth_waiters) {
            self.events.push_back(Event::Reply {
                token: waiter,
                result: Err(error.clone()),
            });
        }
        self.background.clear();
        self.deferred.clear();
        self.throttled.clear();
        self.rewatch = None;
        let watchers = self.watches.drain();
        if !watchers.is_empty() {
            self.events.push_back(Event::Watch {
                watchers,
                event: WatchedEvent::state(state.keeper_state()),
            });
        }
        self.request_disconnect(error);
        if state == State::Expired && self.renews_after_expiry() {
            self.start_new_session();
        }
    }

    fn fail_auth(&mut self, waiter: AuthWaiter<T>, error: Error) {
        if let Some(token) = waiter.token {
            self.events.push_back(Event::Reply {
                token,
                result: Err(error),
            });
        }
    }

    fn fail(&mut self, purpose: Purpose<T, W>, error: Error) {
        match purpose {
            Purpose::User { token, .. } => self.events.push_back(Event::Reply {
                token,
                result: Err(error),
            }),
            Purpose::RemoveWatches { token, .. } => self.events.push_back(Event::Reply {
                token,
                result: Err(error),
            }),
            Purpose::Reads { reads } => self.fail_reads(reads, error),
            Purpose::Writes { tokens, .. } => self.fail_tokens(tokens, error),
            Purpose::SetWatches { .. } | Purpose::Background { .. } | Purpose::Close => {}
        }
    }
}

fn millis_i32(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
