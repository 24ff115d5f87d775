//! A scripted fake ZooKeeper server for `tests/hostile_server.rs`, plus the
//! watchers those tests assert with: a panic counter for the client's own
//! threads, a capture of the client's log, and a bounded call runner.
//!
//! A [`Hostile`] server listens on `127.0.0.1:0` and runs its script on every
//! connection, each in a thread of its own. The script reads and writes
//! frames through a [`Peer`], then says whether to hold the connection open
//! (to time how long the client takes to drop it) or to close it. What
//! happened on each connection comes back as a [`Report`].

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use zklock::proto::{
    ConnectRequest, ConnectResponse, OpCode, Record, ReplyHeader, RequestHeader, Stat, PING_XID,
};

/// The longest a script waits for the client to send something.
const READ_LIMIT: Duration = Duration::from_secs(15);
/// The longest a held connection is watched for the client to close it.
const HOLD_LIMIT: Duration = Duration::from_secs(15);
/// How often held connections look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The session id a hostile server gives a client that asks for a new one.
pub const FAKE_SESSION: i64 = 0x4f57_4e45_4400_0001;

/// What a script wants done with its connection once it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Keep it open and time how long the client takes to close it.
    Hold,
    /// Close it now.
    Close,
}

/// What happened on one connection.
#[derive(Debug, Clone)]
pub struct Report {
    /// The connection's number, from 0, in accept order.
    pub index: usize,
    /// The I/O error that ended the script early, if any (for example the
    /// client closing before the script was done).
    pub script_error: Option<String>,
    /// For a held connection: how long after the script's last write the
    /// client closed it (`None`: still open after the hold limit, or the
    /// script closed it itself).
    pub closed_after: Option<Duration>,
    /// The requests (pings included) the client sent while the connection
    /// was held.
    pub later: Vec<RequestHeader>,
}

/// A script: what the fake server does on each connection.
pub type Script = dyn Fn(&mut Peer) -> io::Result<After> + Send + Sync;

/// A fake server running a [`Script`] on every connection.
pub struct Hostile {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    reports: Receiver<Report>,
    accept_thread: Option<JoinHandle<()>>,
}

impl Hostile {
    /// Starts a server running `script` on every connection.
    pub fn start(script: impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static) -> Self {
        Hostile::start_with_hook(script, |_| {})
    }

    /// Like [`Hostile::start`], and runs `on_accept` (with the connection's
    /// number) as each connection is accepted, before its script.
    pub fn start_with_hook(
        script: impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static,
        on_accept: impl Fn(usize) + Send + Sync + 'static,
    ) -> Self {
        let listener = zklock::testing::loopback_listener().expect("bind a hostile server");
        let addr = listener.local_addr().expect("its address");
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (tx, reports) = crossbeam_channel::unbounded();
        let script: Arc<Script> = Arc::new(script);
        let thread_stop = stop.clone();
        let thread_accepted = accepted.clone();
        let accept_thread = std::thread::Builder::new()
            .name(format!("hostile-{}", addr.port()))
            .spawn(move || {
                for stream in listener.incoming() {
                    if thread_stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let index = thread_accepted.fetch_add(1, Ordering::SeqCst);
                    on_accept(index);
                    let (script, stop, tx) = (script.clone(), thread_stop.clone(), tx.clone());
                    let _ = std::thread::Builder::new()
                        .name(format!("hostile-{}-{index}", addr.port()))
                        .spawn(move || serve(index, stream, &*script, &stop, &tx));
                }
            })
            .expect("spawn the hostile server");
        Hostile {
            addr,
            stop,
            accepted,
            reports,
            accept_thread: Some(accept_thread),
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// The report of the next connection to finish, within `within`.
    pub fn next_report(&self, within: Duration) -> Report {
        self.reports.recv_timeout(within).unwrap_or_else(|e| {
            panic!(
                "no connection report from {} within {within:?}: {e}",
                self.addr
            )
        })
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.accept_thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(index: usize, stream: TcpStream, script: &Script, stop: &AtomicBool, tx: &Sender<Report>) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(READ_LIMIT));
    let mut peer = Peer {
        stream,
        last_write: Instant::now(),
    };
    let mut report = Report {
        index,
        script_error: None,
        closed_after: None,
        later: Vec::new(),
    };
    match script(&mut peer) {
        Ok(After::Hold) => hold(&mut peer, stop, &mut report),
        Ok(After::Close) => {}
        Err(e) => report.script_error = Some(e.to_string()),
    }
    let _ = peer.stream.shutdown(std::net::Shutdown::Both);
    let _ = tx.send(report);
}

/// Reads whatever the client sends until it closes the connection.
fn hold(peer: &mut Peer, stop: &AtomicBool, report: &mut Report) {
    let _ = peer.stream.set_read_timeout(Some(POLL));
    let mut pending = Vec::new();
    let mut chunk = [0u8; 4096];
    let until = Instant::now() + HOLD_LIMIT;
    while Instant::now() < until && !stop.load(Ordering::SeqCst) {
        match peer.stream.read(&mut chunk) {
            Ok(0) => {
                report.closed_after = Some(peer.last_write.elapsed());
                return;
            }
            Ok(n) => {
                pending.extend_from_slice(&chunk[..n]);
                while let Some((payload, used)) = split(&pending) {
                    if let Ok(header) =
                        RequestHeader::read(&mut zklock::proto::Reader::new(payload))
                    {
                        report.later.push(header);
                    }
                    pending.drain(..used);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                // A reset is a close too.
                report.closed_after = Some(peer.last_write.elapsed());
                return;
            }
        }
    }
}

fn split(buf: &[u8]) -> Option<(&[u8], usize)> {
    let len = i32::from_be_bytes(buf.get(..4)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    Some((buf.get(4..4 + len)?, 4 + len))
}

/// The fake server's side of one connection.
pub struct Peer {
    stream: TcpStream,
    last_write: Instant,
}

impl Peer {
    /// Reads one frame's payload.
    pub fn read_frame(&mut self) -> io::Result<Vec<u8>> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
        let len = usize::try_from(i32::from_be_bytes(prefix))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "negative frame length"))?;
        let mut payload = vec![0u8; len];
        self.stream.read_exact(&mut payload)?;
        Ok(payload)
    }

    /// Reads the client's ConnectRequest.
    pub fn read_connect(&mut self) -> io::Result<ConnectRequest> {
        let payload = self.read_frame()?;
        ConnectRequest::from_bytes(&payload)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// Answers `request` the way a healthy server would: the session asked
    /// for is resumed (same id and password), or a new one is made up.
    pub fn accept(&mut self, request: &ConnectRequest, timeout_ms: i32) -> io::Result<()> {
        self.send(&frame(&healthy_response(request, timeout_ms).to_bytes()))
    }

    /// Reads the ConnectRequest and accepts it.
    pub fn handshake(&mut self, timeout_ms: i32) -> io::Result<ConnectRequest> {
        let request = self.read_connect()?;
        self.accept(&request, timeout_ms)?;
        Ok(request)
    }

    /// The next request that is not a ping: its header and body.
    pub fn next_request(&mut self) -> io::Result<(RequestHeader, Vec<u8>)> {
        loop {
            let payload = self.read_frame()?;
            let mut reader = zklock::proto::Reader::new(&payload);
            let header = RequestHeader::read(&mut reader)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            if header.xid != PING_XID {
                return Ok((header, reader.rest().to_vec()));
            }
        }
    }

    /// The next request, which must have opcode `op`; returns its xid.
    pub fn expect_request(&mut self, op: OpCode) -> io::Result<i32> {
        let (header, _) = self.next_request()?;
        if header.op != op.code() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("expected a {op:?} request, got {header:?}"),
            ));
        }
        Ok(header.xid)
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()?;
        self.last_write = Instant::now();
        Ok(())
    }

    /// Writes a reply frame: a ReplyHeader then `body`.
    pub fn reply(&mut self, xid: i32, err: i32, body: &[u8]) -> io::Result<()> {
        self.send(&reply_frame(xid, err, body))
    }
}

/// What a healthy server answers to `request`.
pub fn healthy_response(request: &ConnectRequest, timeout_ms: i32) -> ConnectResponse {
    let resume = request.session_id != 0;
    ConnectResponse {
        protocol_version: 0,
        timeout_ms,
        session_id: if resume {
            request.session_id
        } else {
            FAKE_SESSION
        },
        passwd: if resume {
            request.passwd.clone()
        } else {
            vec![7; 16]
        },
        read_only: false,
    }
}

/// `payload` with its length prefix.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = i32::try_from(payload.len())
        .expect("a test frame fits an i32")
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(payload);
    out
}

/// A reply frame: ReplyHeader (zxid 1) then `body`.
pub fn reply_frame(xid: i32, err: i32, body: &[u8]) -> Vec<u8> {
    let mut payload = ReplyHeader { xid, zxid: 1, err }.to_bytes();
    payload.extend_from_slice(body);
    frame(&payload)
}

/// A getData reply body carrying `data`.
pub fn get_data_body(data: &[u8]) -> Vec<u8> {
    zklock::proto::GetDataResponse {
        data: Some(data.to_vec()),
        stat: Stat {
            data_length: i32::try_from(data.len()).unwrap_or(i32::MAX),
            ..Stat::default()
        },
    }
    .to_bytes()
}

// ---- Watching the client ----

static CLIENT_PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics on the client's own threads (`zklock-io`, `zklock-events`),
/// which would otherwise go unnoticed by the test; the default hook still
/// prints them.
pub fn watch_client_panics() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().map(str::to_owned);
            if name.is_some_and(|n| n == "zklock-io" || n == "zklock-events") {
                CLIENT_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

/// Panics if any client thread in this process has panicked.
pub fn assert_no_client_panics() {
    assert_eq!(
        CLIENT_PANICS.load(Ordering::SeqCst),
        0,
        "a client thread panicked (see the output above)"
    );
}

/// Keeps the client's log messages (the reasons it drops connections are
/// logged at debug level).
struct Capture {
    lines: Mutex<Vec<String>>,
    added: Condvar,
}

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("zklock")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
            if lines.len() < 100_000 {
                lines.push(record.args().to_string());
                self.added.notify_all();
            }
        }
    }

    fn flush(&self) {}
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture: &'static Capture = Box::leak(Box::new(Capture {
            lines: Mutex::new(Vec::new()),
            added: Condvar::new(),
        }));
        if log::set_logger(capture).is_ok() {
            log::set_max_level(log::LevelFilter::Debug);
        }
        capture
    })
}

/// Starts capturing the client's log (idempotent).
pub fn capture_log() {
    capture();
}

/// Waits (up to `within`) for a log line equal to `line`. Tests run in
/// parallel and share the log, so each test looks for lines that only its
/// own script can cause.
pub fn assert_logged(line: &str, within: Duration) {
    assert_logged_times(line, 1, within);
}

/// How many times `line` has been logged so far.
pub fn logged_times(line: &str) -> usize {
    let capture = capture();
    let lines = capture.lines.lock().unwrap_or_else(|e| e.into_inner());
    lines.iter().filter(|l| *l == line).count()
}

/// Waits (up to `within`) until `line` has been logged `times` times in
/// all: for a line a test causes more than once.
pub fn assert_logged_times(line: &str, times: usize, within: Duration) {
    let capture = capture();
    let deadline = Instant::now() + within;
    let mut lines = capture.lines.lock().unwrap_or_else(|e| e.into_inner());
    while lines.iter().filter(|l| *l == line).count() < times {
        let now = Instant::now();
        if now >= deadline {
            let drops: Vec<&String> = lines
                .iter()
                .filter(|l| l.starts_with("dropping connection"))
                .collect();
            panic!("log line {line:?} not seen {times} times within {within:?}; drops logged: {drops:#?}");
        }
        lines = capture
            .added
            .wait_timeout(lines, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}

/// A client of `hostile`, made within `bound` by a builder with a 1 s
/// connect timeout that `configure` sets further.
pub fn connect_to(
    hostile: &Hostile,
    bound: Duration,
    configure: impl FnOnce(zklock::ClientBuilder) -> zklock::ClientBuilder + Send + 'static,
) -> zklock::Client {
    let connect_string = hostile.connect_string();
    within(bound, "connect", move || {
        configure(zklock::Client::builder().connect_timeout(Duration::from_secs(1)))
            .connect(&connect_string)
    })
    .expect("connect to the fake server")
}

/// Runs `f` on a thread of its own and returns its result, or panics if it
/// does not return within `bound` (a hung call).
pub fn within<T: Send + 'static>(
    bound: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|e| panic!("{what} did not return within {bound:?}: {e}"))
}
