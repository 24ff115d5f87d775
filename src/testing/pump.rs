//! The connection threads of [`FaultProxy`](super::FaultProxy): connecting
//! upstream, moving bytes each way, and spotting requests in the client's
//! stream.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::proxy::{is_timeout, OnRequest, ProxyMode, Shared, POLL};
use super::util::shutdown_quietly;

/// The most bytes queued in one direction before reading pauses.
const MAX_QUEUED: usize = 1 << 20;
/// The read buffer size.
const CHUNK: usize = 16 * 1024;
/// How long connecting upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// After a cut-after-request, how long the server's side is drained.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// One proxied connection.
#[derive(Debug)]
pub(crate) struct Conn {
    client: TcpStream,
    upstream: Mutex<Option<TcpStream>>,
    closed: AtomicBool,
    /// Set when a cut-after-request frame is about to be forwarded: nothing
    /// more goes to the client.
    frozen: AtomicBool,
}

impl Conn {
    pub(crate) fn new(client: TcpStream) -> Conn {
        Conn {
            client,
            upstream: Mutex::new(None),
            closed: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
        }
    }

    /// Closes both sides (blocked reads and writes return at once).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        shutdown_quietly(&self.client);
        if let Some(upstream) = self
            .upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            shutdown_quietly(upstream);
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Decrements the open-connection count however the thread ends.
struct EndGuard<'a>(&'a Shared, &'a Conn);

impl Drop for EndGuard<'_> {
    fn drop(&mut self) {
        self.1.close();
        self.0.connection_ended();
    }
}

/// The body of a connection thread.
pub(crate) fn run_connection(conn: &Conn, shared: &Shared) {
    let _end = EndGuard(shared, conn);
    // A blackhole holds new connections before they reach the server.
    let upstream_addr = loop {
        if conn.is_closed() || shared.stopping() {
            return;
        }
        let settings = shared.settings();
        if settings.mode != ProxyMode::Blackhole {
            break settings.upstream;
        }
        shared.wait_change();
    };
    let Ok(upstream) = TcpStream::connect_timeout(&upstream_addr, CONNECT_TIMEOUT) else {
        return;
    };
    let _ = upstream.set_nodelay(true);
    let _ = conn.client.set_nodelay(true);
    match upstream.try_clone() {
        Ok(clone) => *conn.upstream.lock().unwrap_or_else(|p| p.into_inner()) = Some(clone),
        Err(_) => return,
    }
    // A cut() that ran before the clone was stored missed the upstream side.
    if conn.is_closed() || shared.stopping() {
        return;
    }
    std::thread::scope(|scope| {
        let to_client = std::thread::Builder::new()
            .name("zklock-proxy-s2c".into())
            .spawn_scoped(scope, || {
                Pump::new(conn, shared, false).run(&upstream, &conn.client);
                // The server closed (or the connection failed): the client
                // sees its side close too, as it would without the proxy.
                conn.close();
            });
        if to_client.is_err() {
            conn.close();
            return;
        }
        Pump::new(conn, shared, true).run(&conn.client, &upstream);
        // Whichever side ends first ends the connection.
        conn.close();
    });
}

/// Bytes read, waiting to be written.
struct Chunk {
    due: Instant,
    data: Vec<u8>,
    /// Close the connection once this chunk is written.
    cut_after: bool,
}

/// One direction of a connection.
struct Pump<'a> {
    conn: &'a Conn,
    shared: &'a Shared,
    /// Client to server (parsed for requests), or server to client.
    to_server: bool,
    queue: VecDeque<Chunk>,
    queued: usize,
    /// No more reading: EOF seen or a cut is pending.
    draining: bool,
    parser: FrameParser,
}

impl<'a> Pump<'a> {
    fn new(conn: &'a Conn, shared: &'a Shared, to_server: bool) -> Self {
        Pump {
            conn,
            shared,
            to_server,
            queue: VecDeque::new(),
            queued: 0,
            draining: false,
            parser: if to_server {
                FrameParser::requests()
            } else {
                FrameParser::replies()
            },
        }
    }

    /// Moves bytes from `src` to `dst` until the connection ends.
    fn run(mut self, src: &TcpStream, dst: &TcpStream) {
        if dst.set_write_timeout(Some(POLL)).is_err() {
            return;
        }
        let mut buf = vec![0u8; CHUNK];
        loop {
            if self.conn.is_closed() || self.shared.stopping() {
                return;
            }
            if self.held() {
                self.shared.wait_change();
                continue;
            }
            if !self.write_due(dst) {
                return;
            }
            if self.draining {
                if self.queue.is_empty() {
                    return;
                }
                self.sleep_until_due();
                continue;
            }
            if self.queued >= MAX_QUEUED {
                self.sleep_until_due();
                continue;
            }
            if !self.read_some(src, &mut buf) {
                return;
            }
        }
    }

    /// Whether this direction holds its bytes: a blackhole, or, towards
    /// the client, a silence or cut after a request.
    fn held(&self) -> bool {
        self.shared.settings().mode == ProxyMode::Blackhole
            || (!self.to_server && self.conn.frozen.load(Ordering::SeqCst))
    }

    /// Writes every chunk that is due, until a hold set meanwhile keeps
    /// the rest queued (the unwritten part of a chunk included). False
    /// when the connection is over.
    fn write_due(&mut self, dst: &TcpStream) -> bool {
        let now = Instant::now();
        while self.queue.front().is_some_and(|c| c.due <= now) {
            if self.held() {
                return true;
            }
            let Some(mut chunk) = self.queue.pop_front() else {
                break;
            };
            let Some(written) = self.write_unless_held(dst, &chunk.data) else {
                return false;
            };
            self.queued -= written;
            if written < chunk.data.len() {
                chunk.data.drain(..written);
                self.queue.push_front(chunk);
                return true;
            }
            if chunk.cut_after {
                self.cut_after_request(dst);
                return false;
            }
        }
        true
    }

    /// Ends the connection right after the matching request went to the
    /// server. The client's side closes at once, so it never sees a reply.
    /// The server's side gets a FIN after the request and is drained until
    /// the server closes: closing a socket with unread data sends a reset,
    /// which can make the server's kernel discard the request unread.
    fn cut_after_request(&self, upstream: &TcpStream) {
        shutdown_quietly(&self.conn.client);
        let _ = upstream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut buf = [0u8; CHUNK];
        let mut reader = upstream;
        while Instant::now() < deadline && !self.shared.stopping() {
            if reader.set_read_timeout(Some(POLL)).is_err() {
                return;
            }
            match reader.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(_) => return,
            }
        }
    }

    /// Writes `data`, retrying on write timeouts while the connection
    /// lives, until it is all written or a hold is set (a destination not
    /// reading can keep a write waiting past one): how many bytes went.
    /// None on failure.
    fn write_unless_held(&self, mut dst: &TcpStream, data: &[u8]) -> Option<usize> {
        let mut written = 0;
        while let Some(rest) = data.get(written..).filter(|rest| !rest.is_empty()) {
            if self.conn.is_closed() || self.shared.stopping() {
                return None;
            }
            if self.held() {
                break;
            }
            match dst.write(rest) {
                Ok(0) => return None,
                Ok(n) => written += n,
                Err(e) if is_timeout(&e) => {}
                Err(_) => return None,
            }
        }
        Some(written)
    }

    /// Reads once (waiting at most until the next chunk is due) and queues
    /// what came. False when the connection failed.
    fn read_some(&mut self, mut src: &TcpStream, buf: &mut [u8]) -> bool {
        let wait = self
            .queue
            .front()
            .map_or(POLL, |c| c.due.saturating_duration_since(Instant::now()))
            .clamp(Duration::from_millis(1), POLL);
        if src.set_read_timeout(Some(wait)).is_err() {
            return false;
        }
        match src.read(buf) {
            Ok(0) => {
                self.draining = true;
                true
            }
            Ok(n) => {
                let mut data = buf.get(..n).unwrap_or_default();
                let mut cut_after = false;
                let shared = self.shared;
                if !self.to_server {
                    self.parser.feed(data, |header| {
                        shared.on_reply(reply_err(header));
                        false
                    });
                } else {
                    let conn = self.conn;
                    let on_request = |header: &[u8]| match shared.on_request(opcode(header)) {
                        Some(OnRequest::Cut) => true,
                        Some(OnRequest::Silence) => {
                            conn.frozen.store(true, Ordering::SeqCst);
                            false
                        }
                        None => false,
                    };
                    if let Some(end) = self.parser.feed(data, on_request) {
                        // Forward up to the end of the request, then cut;
                        // from now on nothing reaches the client.
                        data = data.get(..end).unwrap_or_default();
                        cut_after = true;
                        self.draining = true;
                        self.conn.frozen.store(true, Ordering::SeqCst);
                    }
                }
                let delay = match self.shared.settings().mode {
                    ProxyMode::Delay(delay) => delay,
                    _ => Duration::ZERO,
                };
                self.queued += data.len();
                self.queue.push_back(Chunk {
                    due: Instant::now() + delay,
                    data: data.to_vec(),
                    cut_after,
                });
                true
            }
            Err(e) if is_timeout(&e) => true,
            Err(_) => false,
        }
    }

    /// Sleeps until the first queued chunk is due, at most [`POLL`].
    fn sleep_until_due(&self) {
        let wait = self
            .queue
            .front()
            .map_or(POLL, |c| c.due.saturating_duration_since(Instant::now()))
            .min(POLL);
        std::thread::sleep(wait);
    }
}

/// The bytes of a RequestHeader `{xid: i32, opcode: i32}`.
const REQUEST_HEADER: usize = 8;
/// The bytes of a ReplyHeader `{xid: i32, zxid: i64, err: i32}`.
const REPLY_HEADER: usize = 16;

/// Follows one direction's frames: a 4-byte big-endian length, then the
/// payload; every frame after the first (the ConnectRequest, or the
/// ConnectResponse) starts with a RequestHeader (or a ReplyHeader).
#[derive(Debug)]
pub(crate) struct FrameParser {
    frames_done: u64,
    len_buf: [u8; 4],
    len_have: usize,
    in_payload: bool,
    payload_left: usize,
    header: [u8; REPLY_HEADER],
    header_len: usize,
    header_have: usize,
    cut_this: bool,
    /// A negative length was seen: the stream is not ZooKeeper's; give up.
    lost: bool,
}

impl FrameParser {
    /// A parser of the client's frames.
    pub(crate) fn requests() -> FrameParser {
        FrameParser {
            frames_done: 0,
            len_buf: [0; 4],
            len_have: 0,
            in_payload: false,
            payload_left: 0,
            header: [0; REPLY_HEADER],
            header_len: REQUEST_HEADER,
            header_have: 0,
            cut_this: false,
            lost: false,
        }
    }

    /// A parser of the server's frames.
    pub(crate) fn replies() -> FrameParser {
        FrameParser {
            header_len: REPLY_HEADER,
            ..FrameParser::requests()
        }
    }

    /// Consumes `data`. When `matches` accepts the header of a frame (see
    /// [`opcode`] and [`reply_err`]), the return value is the offset in
    /// `data` just past that frame's last byte (the parser then stops at
    /// that point).
    pub(crate) fn feed(
        &mut self,
        data: &[u8],
        mut matches: impl FnMut(&[u8]) -> bool,
    ) -> Option<usize> {
        let mut i = 0;
        while i < data.len() && !self.lost {
            if !self.in_payload {
                let Some(&byte) = data.get(i) else { break };
                if let Some(slot) = self.len_buf.get_mut(self.len_have) {
                    *slot = byte;
                }
                self.len_have += 1;
                i += 1;
                if self.len_have == 4 {
                    let Ok(len) = usize::try_from(i32::from_be_bytes(self.len_buf)) else {
                        self.lost = true;
                        break;
                    };
                    self.len_have = 0;
                    self.payload_left = len;
                    self.header_have = 0;
                    self.cut_this = false;
                    self.in_payload = len > 0;
                    if len == 0 {
                        self.frames_done += 1;
                    }
                }
                continue;
            }
            let take = self.payload_left.min(data.len() - i);
            if self.frames_done > 0 && self.header_have < self.header_len {
                let n = take.min(self.header_len - self.header_have);
                if let (Some(to), Some(from)) = (
                    self.header.get_mut(self.header_have..self.header_have + n),
                    data.get(i..i + n),
                ) {
                    to.copy_from_slice(from);
                }
                self.header_have += n;
                if self.header_have == self.header_len {
                    self.cut_this = matches(self.header.get(..self.header_len).unwrap_or_default());
                }
            }
            i += take;
            self.payload_left -= take;
            if self.payload_left == 0 {
                self.in_payload = false;
                self.frames_done += 1;
                if self.cut_this {
                    self.lost = true;
                    return Some(i);
                }
            }
        }
        None
    }
}

/// The big-endian i32 at `at` in `header`; 0 if it is too short.
fn be_i32(header: &[u8], at: usize) -> i32 {
    header
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, i32::from_be_bytes)
}

/// The opcode of a RequestHeader.
pub(crate) fn opcode(header: &[u8]) -> i32 {
    be_i32(header, 4)
}

/// The error code of a ReplyHeader.
pub(crate) fn reply_err(header: &[u8]) -> i32 {
    be_i32(header, 12)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        out
    }

    fn request(xid: i32, op: i32, body: &[u8]) -> Vec<u8> {
        let mut payload = xid.to_be_bytes().to_vec();
        payload.extend_from_slice(&op.to_be_bytes());
        payload.extend_from_slice(body);
        frame(&payload)
    }

    #[test]
    fn finds_the_end_of_the_matching_request() {
        let mut stream = frame(&[0u8; 45]); // ConnectRequest, whose bytes could look like op 1
        stream.extend(request(1, 4, b"getdata"));
        let create = request(2, 1, b"create-body");
        let create_end = stream.len() + create.len();
        stream.extend(create);
        stream.extend(request(3, 1, b"second create"));
        // Byte by byte and in one go.
        for step in [1, 3, 7, stream.len()] {
            let mut parser = FrameParser::requests();
            let mut seen = Vec::new();
            let mut found = None;
            for (n, piece) in stream.chunks(step).enumerate() {
                if let Some(end) = parser.feed(piece, |header| {
                    seen.push(opcode(header));
                    opcode(header) == 1
                }) {
                    found = Some(n * step + end);
                    break;
                }
            }
            assert_eq!(found, Some(create_end), "step {step}");
            assert_eq!(seen, vec![4, 1], "step {step}");
        }
    }

    #[test]
    fn reads_the_error_code_of_each_reply_after_the_connect_response() {
        let reply = |xid: i32, err: i32| {
            let mut payload = xid.to_be_bytes().to_vec();
            payload.extend_from_slice(&7i64.to_be_bytes());
            payload.extend_from_slice(&err.to_be_bytes());
            payload.extend_from_slice(b"body");
            frame(&payload)
        };
        // A ConnectResponse whose bytes could look like an error.
        let mut stream = frame(&[0xff; 36]);
        stream.extend(reply(1, 0));
        stream.extend(reply(2, -127));
        stream.extend(reply(-1, 0));
        stream.extend(reply(3, -101));
        for step in [1, 5, stream.len()] {
            let mut parser = FrameParser::replies();
            let mut errs = Vec::new();
            for piece in stream.chunks(step) {
                let found = parser.feed(piece, |header| {
                    errs.push(reply_err(header));
                    false
                });
                assert_eq!(found, None);
            }
            assert_eq!(errs, [0, -127, 0, -101], "step {step}");
        }
    }

    #[test]
    fn ignores_pings_and_short_frames() {
        let mut parser = FrameParser::requests();
        let mut stream = frame(&[0u8; 45]);
        stream.extend(frame(&[]));
        stream.extend(frame(&[0, 0, 0, 1]));
        stream.extend(request(-2, 11, &[]));
        assert_eq!(parser.feed(&stream, |h| opcode(h) != 11), None);
    }
}
