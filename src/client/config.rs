//! Client configuration and its builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::proto::{DEFAULT_MAX_FRAME, JUTE_MAX_BUFFER};
use crate::session::State;

use super::Client;

/// A callback for session state changes, run on the client's event thread.
pub(crate) type StateHandler = Arc<dyn Fn(State) + Send + Sync>;

/// How a [`Client`] connects. Built with [`Client::builder`]; every setter on
/// [`ClientBuilder`] has a getter of the same name here. Two leave the
/// secrets out: [`digest`](Config::digest) gives the user names, and
/// [`session`](Config::session) the session id, without the passwords.
///
/// [`ClientBuilder::connect`] checks the settings and fails with
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument), before
/// connecting, on one out of range: a timeout under 1 ms or over
/// `i32::MAX` ms, a frame or request limit under 1024 bytes or over
/// `i32::MAX` bytes, a release linger over 1 s, a watch buffer of 0, a
/// session to take over with id 0 or a password that is not 16 bytes, or a
/// digest user name containing `:`.
#[derive(Clone)]
pub struct Config {
    pub(crate) session_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) can_be_read_only: bool,
    pub(crate) digest: Vec<(String, String)>,
    pub(crate) max_frame: usize,
    pub(crate) max_request: usize,
    pub(crate) state_handler: Option<StateHandler>,
    pub(crate) session: Option<(i64, Vec<u8>)>,
    pub(crate) release_linger: Duration,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) batch_reads: bool,
    pub(crate) batch_writes: bool,
    pub(crate) new_session_on_expiry: bool,
    pub(crate) watch_buffer: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            session_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            can_be_read_only: false,
            digest: Vec::new(),
            max_frame: DEFAULT_MAX_FRAME,
            max_request: JUTE_MAX_BUFFER,
            state_handler: None,
            session: None,
            release_linger: DEFAULT_RELEASE_LINGER,
            request_timeout: None,
            batch_reads: true,
            batch_writes: true,
            new_session_on_expiry: false,
            watch_buffer: DEFAULT_WATCH_BUFFER,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("can_be_read_only", &self.can_be_read_only)
            .field(
                "digest",
                &self.digest.iter().map(|(u, _)| u).collect::<Vec<_>>(),
            )
            .field("max_frame", &self.max_frame)
            .field("max_request", &self.max_request)
            .field("state_handler", &self.state_handler.is_some())
            .field("release_linger", &self.release_linger)
            .field("request_timeout", &self.request_timeout)
            .field("batch_reads", &self.batch_reads)
            .field("batch_writes", &self.batch_writes)
            .field("new_session_on_expiry", &self.new_session_on_expiry)
            .field("watch_buffer", &self.watch_buffer)
            .field(
                "session_id",
                &self.session.as_ref().map(|(id, _)| format!("{id:#x}")),
            )
            .finish()
    }
}

impl Config {
    /// The requested session timeout (default 30 s). The server clamps it
    /// to its own bounds (by default 2 to 20 ticks).
    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    /// How long one TCP connect plus handshake may take per host (default
    /// 5 s), and how long [`Client::close`](crate::Client::close) tries to
    /// have a server confirm the close. Resolving a host name is the system
    /// resolver's, on a thread of its own, so a resolver that does not
    /// answer delays neither the session's timers (request deadlines, its
    /// local expiry) nor a `close` or a `connect` past its own deadline.
    /// With several hosts, an attempt also waits for its lookup no longer
    /// than this (or a reconnect's share below) before the next host is
    /// tried; the lookup goes on for the host's next attempt. A name that resolves to several
    /// addresses (IPv4 and IPv6 ones included) gets an attempt at each in
    /// turn, and `connect` a timeout for each. Once a session is
    /// established, a reconnect attempt gets at
    /// most a third of the negotiated session timeout shared among the
    /// other hosts (T/6 with three hosts): a
    /// silent server is given up on only (at most) 2/3 of T after it was
    /// last heard,
    /// and a whole connect timeout spent on another silent one would let
    /// the session expire with a healthy server in reach.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Whether read-only servers are acceptable (default false). A
    /// ZooKeeper 3.8 read-only member serves only sessions it creates
    /// itself, with `localSessionsEnabled`; it refuses to resume one of the
    /// ensemble's. While on a read-only server, the client asks the other
    /// hosts in turn whether they are read-write (the `isro` four-letter
    /// word, which servers with read-only mode enabled answer), first after
    /// 100 ms, then at waits doubling up to a minute, and moves to the
    /// first that is, with a new session: one a read-only member created is
    /// not valid elsewhere.
    pub fn can_be_read_only(&self) -> bool {
        self.can_be_read_only
    }

    /// The digest users whose credentials are added to every connection,
    /// in the order given (their passwords are not handed out).
    pub fn digest(&self) -> impl Iterator<Item = &str> {
        self.digest.iter().map(|(user, _)| user.as_str())
    }

    /// The largest frame accepted from a server (default 1,114,111 bytes:
    /// the default `jute.maxbuffer`, 1,048,575, plus 64 KiB for the header
    /// and Stat around a maximal payload). A reply over it drops the
    /// connection and fails its call with `Protocol(FrameTooLarge)`. A
    /// read that shared a request with others fails the same way if its
    /// reply alone would have been over it; a reply to such a request over
    /// this for each read (and 9 bytes for each result's header and the
    /// reply's end) is not read, and its reads fail with
    /// `ConnectionLoss`, the next connection sending reads one by one, so
    /// that each read asked again gets its own outcome.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// The largest request sent (default 1,048,575 bytes, the server's
    /// default `jute.maxbuffer`; a server drops a connection that sends
    /// more). Larger requests fail with `InvalidArgument` before sending.
    pub fn max_request(&self) -> usize {
        self.max_request
    }

    /// The id of an existing session to resume instead of creating one
    /// (its password is not handed out).
    pub fn session(&self) -> Option<i64> {
        self.session.as_ref().map(|(id, _)| *id)
    }

    /// The handler told of every session state change, if one was set.
    pub fn state_handler(&self) -> Option<&(dyn Fn(State) + Send + Sync)> {
        self.state_handler.as_deref()
    }

    /// How long the delete of a dropped lock guard waits before it is sent
    /// (default 200 µs). If this client acquires on the same lock path
    /// meanwhile, the delete and the new lock node's create go to the
    /// server as one transaction, which halves its disk writes for
    /// back-to-back acquisitions; any other request sends it at once, ahead
    /// of itself, and a timer sends it when the linger ends, so other
    /// contenders may see a release up to this much later. Zero sends it at
    /// once; an explicit `unlock()` always sends at once and waits for the
    /// server.
    pub fn release_linger(&self) -> Duration {
        self.release_linger
    }

    /// How long a call waits for its reply once sent (default `None`: the
    /// calls in flight fail once the server has answered none of them for
    /// twice the session timeout, counted from the oldest one's sending or
    /// the server's last answer to a call, whichever is later (an auth
    /// packet's answer counts for auth packets only); a real server answers
    /// pings after the calls sent before them, so a stuck reply is noticed
    /// sooner by the read timeout, 2/3 of the session timeout, and this
    /// bound is only for a server that answers pings but never a call).
    /// When it passes, the call fails with
    /// [`Error::Timeout`](crate::Error::Timeout) and the connection is
    /// dropped, since replies come in order and none can be skipped: calls
    /// sent after it fail with `ConnectionLoss`, and the client reconnects
    /// and resumes the session. It bounds credentials too:
    /// [`Client::add_auth`](crate::Client::add_auth), the builder's
    /// [`digest`](crate::ClientBuilder::digest) and their re-sending after a
    /// reconnect. The Java client's `zookeeper.request.timeout`.
    pub fn request_timeout(&self) -> Option<Duration> {
        self.request_timeout
    }

    /// Whether concurrent reads share a request (default true). A
    /// [`get_data`](crate::Client::get_data) or
    /// [`get_children`](crate::Client::get_children) (without a watch) that
    /// finds the read before it still waiting to be written joins it, and
    /// they go out as one `multiRead`, which the server handles as one
    /// request: with many threads reading through one client this multiplies
    /// read throughput. Nothing waits for company, order is kept, and each
    /// read keeps its own outcome. A batch's reply may be up to
    /// [`max_frame`](Config::max_frame) per read, for at most
    /// [`MAX_BATCHED_READS`](crate::session::MAX_BATCHED_READS) reads. Needs
    /// ZooKeeper 3.6+: a server before it answers the first batch with an
    /// error and drops the connection, its reads fail with `ConnectionLoss`,
    /// and the client sends reads one by one from then on. Set it to false
    /// for such servers.
    pub fn batch_reads(&self) -> bool {
        self.batch_reads
    }

    /// Whether concurrent [`set_data`](crate::Client::set_data) calls share
    /// a request (default true). A setData that finds the one before it
    /// still waiting to be written joins it, and they go out as one `multi`:
    /// the server handles one request and logs one transaction, which with
    /// many threads writing through one client multiplies write throughput.
    /// Nothing waits for company, and each call keeps its own outcome. What
    /// changes: the calls of a batch take effect together, at one zxid (the
    /// nodes they write share an `mzxid`). A `multi` is all or nothing, so
    /// when one call of a batch fails, its caller gets its error and the
    /// others are sent again; a call with an expected version never joins a
    /// batch that writes its node, so each failure is the one the call would
    /// have met alone. At most
    /// [`MAX_BATCHED_WRITES`](crate::session::MAX_BATCHED_WRITES) calls
    /// share a batch.
    pub fn batch_writes(&self) -> bool {
        self.batch_writes
    }

    /// Whether the client goes on with a new session when its session
    /// expires (default false: an expiry ends the client, as in the Java
    /// client; Curator and kazoo go on). With it, once a session has been
    /// established, its expiry is reported as without it (`Expired` to
    /// every state listener, `SessionExpired` to every waiting call, the
    /// last event to every watch, which is then gone, and every lock held
    /// or being acquired lost), and then the client starts a new session at
    /// once, through the same hosts, with the same credentials
    /// ([`digest`](ClientBuilder::digest), [`add_auth`](Client::add_auth)).
    /// Listeners then see `Disconnected` and, once a server grants it,
    /// `Connected`; [`Client::session_id`] and the other session getters
    /// give the new session's (the id is 0 until then). Calls made
    /// meanwhile wait for it as calls made while disconnected do, and
    /// [`Client::wait_connected`] waits through the expiry.
    ///
    /// Nothing of the old session carries over: its ephemeral nodes and
    /// watches are gone, and a lock guard of the old session stays `Lost`
    /// (its fencing token 0, its `multi` and `unlock` `LockLost`) however
    /// the new session fares; a lock attempt under way fails with
    /// `SessionExpired` and leaves no node. Lock objects go on: a new
    /// attempt acquires in the new session.
    ///
    /// It never applies to the first connect (a session to take over with
    /// [`session`](ClientBuilder::session) that turns out expired still
    /// fails `connect` with `SessionExpired`), nor to `AuthFailed` or a
    /// close, which stay final.
    pub fn new_session_on_expiry(&self) -> bool {
        self.new_session_on_expiry
    }

    /// How many events a persistent watch's receiver may hold unread
    /// (default 65 536). Their paths may take 64 MiB at most, too, counted
    /// as the events held times the longest path sent to the receiver, so
    /// that long paths cannot make the events gigabytes. The client never
    /// waits for a slow reader, and holds no more than this: at the next
    /// node change, the watch ends as if its receiver had
    /// been dropped (it is removed from the server, unless a live watch of
    /// the session shares the server's watch on its path, and a warning is
    /// logged), the receiver yields the events it holds and then reports
    /// the channel disconnected, and
    /// [`WatchReceiver::overflowed`](crate::WatchReceiver::overflowed) says
    /// why. A reader that falls this far behind has to read the nodes
    /// afresh anyway; set a new watch first, then read. A one-shot watch
    /// gets one event and never reaches the bound.
    pub fn watch_buffer(&self) -> usize {
        self.watch_buffer
    }
}

/// See [`Config::release_linger`].
const DEFAULT_RELEASE_LINGER: Duration = Duration::from_micros(200);

/// See [`Config::watch_buffer`].
const DEFAULT_WATCH_BUFFER: usize = 65_536;

/// Builds a [`Client`].
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// use std::time::Duration;
/// let client = zklock::Client::builder()
///     .session_timeout(Duration::from_secs(10))
///     .digest("app", "secret")
///     .connect("zk1:2181,zk2:2181,zk3:2181/myapp")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ClientBuilder {
    config: Config,
}

impl ClientBuilder {
    /// Sets the requested session timeout (default 30 s; from 1 ms to
    /// `i32::MAX` ms). The server clamps it to its own bounds; a dead
    /// connection is detected after 2/3 of the negotiated timeout (a grant
    /// above this one is followed up to a minute, or this one if longer).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.config.session_timeout = timeout;
        self
    }

    /// Sets how long one TCP connect plus handshake may take per host
    /// (default 5 s; from 1 ms to `i32::MAX` ms). `connect` waits up to
    /// this times the number of hosts (a name counting once for each
    /// address it resolves to), and this once more for the answer to a
    /// [`digest`](Self::digest), and [`Client::close`] up to this for
    /// a server to confirm the close. Reconnects of an established session
    /// may get less: see [`Config::connect_timeout`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Allows connecting to read-only servers (writes then fail with
    /// `NotReadOnly`), and moving to a read-write one as soon as one is
    /// found (default false; see [`Config::can_be_read_only`]).
    pub fn can_be_read_only(mut self, allowed: bool) -> Self {
        self.config.can_be_read_only = allowed;
        self
    }

    /// Adds digest credentials, sent on every connection. The user name
    /// must not contain `:` (the server would take the part before it as
    /// the user). `connect` waits for the server's answer, at most
    /// [`connect_timeout`](Self::connect_timeout) (or a shorter
    /// [`request_timeout`](Self::request_timeout), whose default, twice the
    /// session timeout, may be), and fails with
    /// `Timeout` if it does not come in time; a connection lost before the answer
    /// lets `connect` return, and the credentials go again with the next
    /// handshake. The server's digest scheme takes any user and password:
    /// a wrong password shows as `NoAuth` on the nodes it should open, not
    /// as `AuthFailed`.
    pub fn digest(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.config.digest.push((user.into(), password.into()));
        self
    }

    /// Sets the largest frame accepted from a server (default 1,114,111
    /// bytes; at least 1024, at most 2,147,483,647; see
    /// [`Config::max_frame`]).
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.config.max_frame = bytes;
        self
    }

    /// Sets the largest request sent: match the servers' `jute.maxbuffer`
    /// (default 1,048,575 bytes; at least 1024, at most 2,147,483,647; see
    /// [`Config::max_request`]).
    pub fn max_request(mut self, bytes: usize) -> Self {
        self.config.max_request = bytes;
        self
    }

    /// Calls `handler` on every session state change, on the client's event
    /// thread (so a slow handler never delays replies). A panic in it is
    /// caught (and logged): the handler is still called on later changes.
    pub fn state_handler(mut self, handler: impl Fn(State) + Send + Sync + 'static) -> Self {
        self.config.state_handler = Some(Arc::new(handler));
        self
    }

    /// Takes over an existing session (from [`Client::session_id`] and
    /// [`Client::session_password`]) instead of creating a new one, e.g. to
    /// close it (which deletes its ephemeral nodes) or to continue it from
    /// another process. The server serves a session on one connection at a
    /// time: the previous client loses its connection, and if it reconnects
    /// the two keep taking the session from each other, so do not keep both
    /// in use. If the session is gone, `connect` fails with `SessionExpired`.
    /// A `connect` that fails otherwise (no server in time, a credential
    /// refused) leaves the session as it was: it is not closed.
    pub fn session(mut self, id: i64, password: Vec<u8>) -> Self {
        self.config.session = Some((id, password));
        self
    }

    /// Sets how long a dropped lock guard's delete waits for this client's
    /// next acquisition on the same lock path to carry it (default 200 µs,
    /// at most 1 s; zero: no wait). See [`Config::release_linger`].
    pub fn release_linger(mut self, linger: Duration) -> Self {
        self.config.release_linger = linger;
        self
    }

    /// Sets how long a call waits for its reply once sent (default `None`:
    /// twice the session timeout; otherwise from 1 ms to `i32::MAX` ms).
    /// See [`Config::request_timeout`].
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.request_timeout = timeout;
        self
    }

    /// Sets whether concurrent reads share a request (default true; see
    /// [`Config::batch_reads`]).
    pub fn batch_reads(mut self, enabled: bool) -> Self {
        self.config.batch_reads = enabled;
        self
    }

    /// Sets whether concurrent setData calls share a request (default true;
    /// see [`Config::batch_writes`]).
    pub fn batch_writes(mut self, enabled: bool) -> Self {
        self.config.batch_writes = enabled;
        self
    }

    /// Sets how many events a persistent watch's receiver may hold unread
    /// (default 65 536, at least 1; see [`Config::watch_buffer`]).
    pub fn watch_buffer(mut self, events: usize) -> Self {
        self.config.watch_buffer = events;
        self
    }

    /// Sets whether the client goes on with a new session when its session
    /// expires (default false; see [`Config::new_session_on_expiry`]).
    pub fn new_session_on_expiry(mut self, enabled: bool) -> Self {
        self.config.new_session_on_expiry = enabled;
        self
    }

    /// The configuration so far.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Connects and waits until the session is established, and, with a
    /// [`digest`](Self::digest), until a server has taken the credentials
    /// (at most [`connect_timeout`](Config::connect_timeout) more).
    pub fn connect(self, connect_string: &str) -> Result<Client> {
        Client::connect_with(connect_string, self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every setting reads back through the getter of the setter's name,
    /// secrets left out.
    #[test]
    fn each_setter_reads_back_through_the_getter_of_its_name() {
        let ms = Duration::from_millis;
        let builder = Client::builder()
            .session_timeout(ms(9_000))
            .connect_timeout(ms(700))
            .can_be_read_only(true)
            .digest("app", "secret")
            .digest("ops", "hidden")
            .max_frame(4_096)
            .max_request(2_048)
            .state_handler(|_| {})
            .session(0x2a, vec![7; 16])
            .release_linger(ms(1))
            .request_timeout(Some(ms(3_000)))
            .batch_reads(false)
            .batch_writes(false)
            .new_session_on_expiry(true)
            .watch_buffer(10);
        let config = builder.config();
        assert_eq!(config.session_timeout(), ms(9_000));
        assert_eq!(config.connect_timeout(), ms(700));
        assert!(config.can_be_read_only());
        assert_eq!(config.digest().collect::<Vec<_>>(), ["app", "ops"]);
        assert_eq!(config.max_frame(), 4_096);
        assert_eq!(config.max_request(), 2_048);
        assert!(config.state_handler().is_some());
        assert_eq!(config.session(), Some(0x2a));
        assert_eq!(config.release_linger(), ms(1));
        assert_eq!(config.request_timeout(), Some(ms(3_000)));
        assert!(!config.batch_reads());
        assert!(!config.batch_writes());
        assert!(config.new_session_on_expiry());
        assert_eq!(config.watch_buffer(), 10);
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("secret") && !shown.contains("hidden"),
            "{shown}"
        );
        assert!(Config::default().state_handler().is_none());
    }
}
