//! A TCP proxy that injects network faults between a client and a server.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::SockRef;

use super::pump::{run_connection, Conn};
use super::util::loopback_listener;
use super::Error;

/// How often blocked proxy threads look at their stop flags.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// What a [`FaultProxy`] does with the bytes of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    /// Forward everything at once.
    #[default]
    Pass,
    /// A network partition: connections stay open but nothing is forwarded
    /// either way, and new connections are accepted but not connected
    /// upstream. Bytes sent meanwhile wait in the socket buffers (as TCP
    /// retransmits through a partition) and flow again on a return to
    /// [`Pass`](ProxyMode::Pass); [`FaultProxy::cut`] drops them instead.
    Blackhole,
    /// Forward each chunk of bytes this long after it was received.
    Delay(Duration),
}

/// The predicate of [`FaultProxy::cut_after_request`] and
/// [`FaultProxy::silence_from_request`].
pub(crate) type Trigger = Box<dyn Fn(i32) -> bool + Send>;

/// What an armed trigger does once a request matches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnRequest {
    /// Forward the request, then close the connection.
    Cut,
    /// Forward the request and keep the connection, but let no byte from
    /// the server reach the client any more.
    Silence,
}

/// The proxy settings the connection threads read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) mode: ProxyMode,
    pub(crate) upstream: SocketAddr,
    pub(crate) refuse: bool,
}

/// A live connection and its thread.
type ConnEntry = (Arc<Conn>, Option<JoinHandle<()>>);

/// State shared by the proxy handle and its threads.
pub(crate) struct Shared {
    settings: Mutex<Settings>,
    changed: Condvar,
    stop: AtomicBool,
    conns: Mutex<Vec<ConnEntry>>,
    open: AtomicUsize,
    /// Client connections accepted (not refused) since the start.
    accepted: AtomicUsize,
    /// Client connections refused since the start.
    refused: AtomicUsize,
    trigger: Mutex<Option<(Trigger, OnRequest)>>,
    /// How many client requests of each opcode went through, and when the
    /// last one did.
    requests: Mutex<HashMap<i32, (usize, Instant)>>,
    /// When the server answered with an error, and the error code: the
    /// first [`MAX_ERROR_REPLIES`].
    error_replies: Mutex<Vec<(Instant, i32)>>,
}

/// How many error replies a proxy keeps (see [`FaultProxy::error_replies`]).
pub const MAX_ERROR_REPLIES: usize = 1024;

impl Shared {
    pub(crate) fn settings(&self) -> Settings {
        *self.settings.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Waits for a settings change, or at most [`POLL`].
    pub(crate) fn wait_change(&self) {
        let guard = self.settings.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.changed.wait_timeout(guard, POLL);
    }

    /// Counts a client request with `opcode`, and takes the trigger if it
    /// is armed and matches it: what it does then.
    pub(crate) fn on_request(&self, opcode: i32) -> Option<OnRequest> {
        let now = Instant::now();
        let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        let (count, last) = requests.entry(opcode).or_insert((0, now));
        (*count, *last) = (*count + 1, now);
        drop(requests);
        let mut trigger = self.trigger.lock().unwrap_or_else(|p| p.into_inner());
        if trigger.as_ref().is_some_and(|(matches, _)| matches(opcode)) {
            trigger.take().map(|(_, then)| then)
        } else {
            None
        }
    }

    /// Notes a server reply's error code (`err` of its ReplyHeader).
    pub(crate) fn on_reply(&self, err: i32) {
        if err == 0 {
            return;
        }
        let mut replies = self.error_replies.lock().unwrap_or_else(|p| p.into_inner());
        if replies.len() < MAX_ERROR_REPLIES {
            replies.push((Instant::now(), err));
        }
    }

    /// Counts a connection closed.
    pub(crate) fn connection_ended(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }

    fn conns(&self) -> MutexGuard<'_, Vec<ConnEntry>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut Settings)) {
        change(&mut self.settings.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.notify_all();
    }
}

/// A TCP proxy on `127.0.0.1` (an ephemeral port) that forwards to an
/// upstream server and injects faults: partitions, delays, cut connections,
/// refused connections, and a cut right after a chosen request.
///
/// Each connection has a thread (plus one for the server-to-client
/// direction), at most 1 MiB queued per direction. Changes of mode and
/// upstream apply at once; a new upstream only to new connections. Dropping
/// the proxy closes every connection and joins every thread.
///
/// ```no_run
/// use zklock::testing::{FaultProxy, ProxyMode, TestServer};
///
/// let server = TestServer::new()?;
/// let proxy = FaultProxy::start(server.addr())?;
/// // connect the client under test to proxy.connect_string() ...
/// proxy.set_mode(ProxyMode::Blackhole); // partition it
/// proxy.cut(); // drop its connection
/// proxy.set_mode(ProxyMode::Pass); // heal
/// # Ok::<(), zklock::testing::Error>(())
/// ```
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("settings", &self.shared.settings())
            .field("connections", &self.connection_count())
            .finish()
    }
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream`, in
    /// [`ProxyMode::Pass`].
    pub fn start(upstream: SocketAddr) -> Result<FaultProxy, Error> {
        let listener = loopback_listener()?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("read the proxy's address", e))?;
        // accept() honours SO_RCVTIMEO on Linux, so the thread wakes to see
        // the stop flag; Drop also connects once to wake it.
        SockRef::from(&listener)
            .set_read_timeout(Some(POLL))
            .map_err(|e| Error::io("set the proxy's accept timeout", e))?;
        let shared = Arc::new(Shared {
            settings: Mutex::new(Settings {
                mode: ProxyMode::Pass,
                upstream,
                refuse: false,
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            trigger: Mutex::new(None),
            requests: Mutex::new(HashMap::new()),
            error_replies: Mutex::new(Vec::new()),
        });
        let thread_shared = Arc::clone(&shared);
        let accept_thread = std::thread::Builder::new()
            .name(format!("zklock-proxy-{}", addr.port()))
            .spawn(move || accept_loop(&listener, &thread_shared))
            .map_err(|e| Error::io("spawn the proxy thread", e))?;
        Ok(FaultProxy {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        })
    }

    /// The proxy's address, for clients.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `"127.0.0.1:PORT"` of the proxy.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// The server new connections are forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.settings().upstream
    }

    /// Forwards new connections to `upstream`; current ones keep theirs.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        self.shared.update(|s| s.upstream = upstream);
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        self.shared.settings().mode
    }

    /// Sets the mode for all connections, current and new.
    pub fn set_mode(&self, mode: ProxyMode) {
        self.shared.update(|s| s.mode = mode);
    }

    /// While `refuse` is true, new connections are reset as soon as they are
    /// accepted (the client sees a reset or an immediate close).
    pub fn refuse(&self, refuse: bool) {
        self.shared.update(|s| s.refuse = refuse);
    }

    /// Closes every current connection at once, on both sides; bytes not yet
    /// forwarded are dropped. New connections are still accepted.
    pub fn cut(&self) {
        for (conn, _) in self.shared.conns().iter() {
            conn.close();
        }
    }

    /// Arms a one-shot trigger: the first client request whose opcode (from
    /// its RequestHeader; the first frame of a connection is the
    /// ConnectRequest and is skipped) satisfies `predicate` is forwarded to
    /// the server whole, and its connection is closed right after. From the
    /// moment the proxy reads that request, no byte from the server reaches
    /// the client: neither the reply, nor replies to earlier requests the
    /// proxy had not forwarded yet. So the server executes the request but
    /// the client never sees the reply. Replaces any trigger still armed;
    /// `predicate` must not panic.
    pub fn cut_after_request(&self, predicate: impl Fn(i32) -> bool + Send + 'static) {
        self.arm(Box::new(predicate), OnRequest::Cut);
    }

    /// Arms a one-shot trigger like [`cut_after_request`](Self::cut_after_request),
    /// except that the connection stays open: the matching request and
    /// those after it reach the server, but from the moment the proxy
    /// reads it, no byte from the server reaches the client. A server gone
    /// silent (a hang, a partition with TCP up), as the client sees it,
    /// until the client gives up on the connection.
    pub fn silence_from_request(&self, predicate: impl Fn(i32) -> bool + Send + 'static) {
        self.arm(Box::new(predicate), OnRequest::Silence);
    }

    fn arm(&self, predicate: Trigger, then: OnRequest) {
        *self
            .shared
            .trigger
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some((predicate, then));
    }

    /// Whether a [`cut_after_request`](Self::cut_after_request) or
    /// [`silence_from_request`](Self::silence_from_request) trigger is
    /// armed and has not fired yet.
    pub fn is_cut_armed(&self) -> bool {
        self.shared
            .trigger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// How many client requests with `opcode` (from their RequestHeader)
    /// went through so far, over every connection.
    pub fn requests_seen(&self, opcode: i32) -> usize {
        self.request_stats(opcode).map_or(0, |(count, _)| count)
    }

    /// When the last client request with `opcode` reached the proxy, over
    /// every connection.
    pub fn last_request_at(&self, opcode: i32) -> Option<Instant> {
        self.request_stats(opcode).map(|(_, last)| last)
    }

    fn request_stats(&self, opcode: i32) -> Option<(usize, Instant)> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&opcode)
            .copied()
    }

    /// The replies the server sent with an error in their ReplyHeader, as
    /// the time they reached the proxy (before the client could read them)
    /// and the error code, in order, over every connection: the first
    /// [`MAX_ERROR_REPLIES`] of them.
    pub fn error_replies(&self) -> Vec<(Instant, i32)> {
        self.shared
            .error_replies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The number of client connections open through the proxy (including
    /// ones held in a [`Blackhole`](ProxyMode::Blackhole)).
    pub fn connection_count(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// The number of client connections accepted (not refused) since the
    /// proxy started, closed ones included.
    pub fn connections_accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// The number of client connections refused (see
    /// [`refuse`](Self::refuse)) since the proxy started: a client that
    /// tried to reconnect.
    pub fn connections_refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.changed.notify_all();
        self.cut();
        // Wake the accept thread in case its accept() has no timeout.
        let _ = TcpStream::connect_timeout(&self.addr, POLL);
        if let Some(thread) = self.accept_thread.take() {
            let _ = thread.join();
        }
        let conns = std::mem::take(&mut *self.shared.conns());
        for (conn, thread) in conns {
            conn.close();
            if let Some(thread) = thread {
                let _ = thread.join();
            }
        }
    }
}

/// Accepts connections until the proxy stops.
fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stopping() {
        match listener.accept() {
            Ok((stream, _)) => {
                if shared.stopping() {
                    break;
                }
                handle_accepted(stream, shared);
            }
            Err(e) if is_timeout(&e) => {}
            // EMFILE and the like: do not spin.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
        prune_finished(shared);
    }
}

/// Refuses, or registers and starts a connection thread.
fn handle_accepted(stream: TcpStream, shared: &Arc<Shared>) {
    if shared.settings().refuse {
        // Linger 0: close with a reset.
        let _ = SockRef::from(&stream).set_linger(Some(Duration::ZERO));
        shared.refused.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let conn = Arc::new(Conn::new(stream));
    shared.open.fetch_add(1, Ordering::SeqCst);
    shared.accepted.fetch_add(1, Ordering::SeqCst);
    let (thread_conn, thread_shared) = (Arc::clone(&conn), Arc::clone(shared));
    // Registered before its thread forwards a byte, so that a `cut` made
    // once the client is connected through it always finds it. (The
    // connection threads never take this lock.)
    let mut conns = shared.conns();
    let spawned = std::thread::Builder::new()
        .name("zklock-proxy-conn".into())
        .spawn(move || run_connection(&thread_conn, &thread_shared));
    match spawned {
        Ok(thread) => conns.push((conn, Some(thread))),
        Err(_) => {
            drop(conns);
            conn.close();
            shared.connection_ended();
        }
    }
}

/// Joins the threads of finished connections.
fn prune_finished(shared: &Shared) {
    let finished: Vec<JoinHandle<()>> = {
        let mut conns = shared.conns();
        let mut finished = Vec::new();
        conns.retain_mut(|(_, thread)| {
            if thread.as_ref().is_some_and(JoinHandle::is_finished) {
                finished.extend(thread.take());
                false
            } else {
                true
            }
        });
        finished
    };
    for thread in finished {
        let _ = thread.join();
    }
}

/// A socket timeout (SO_RCVTIMEO and SO_SNDTIMEO report either kind).
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
