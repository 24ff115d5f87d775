//! Hostile and broken servers. A fake server (`hostile::Hostile`) completes
//! or corrupts the handshake and then misbehaves; the client must report
//! the protocol error (the exact error each call gets is asserted), drop
//! that connection, move on to a real server, never panic, never allocate
//! on the word of a length prefix, and never hang: every call here runs
//! under a time bound.
//!
//! Two set-ups:
//! - A fresh client whose connect string names the hostile server and a
//!   real one. The real one sits behind a proxy that refuses connections
//!   until the hostile server has been reached, so the hostile host is
//!   always tried (the client shuffles its hosts).
//! - A client with a session on the real server, behind a proxy: the proxy
//!   sends the next connection to the hostile server and the one after
//!   back to the real server. The session must survive the detour.

mod hostile;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hostile::{
    assert_logged, assert_logged_times, assert_no_client_panics, capture_log, frame, get_data_body,
    healthy_response, logged_times, reply_frame, watch_client_panics, within, After, Hostile, Peer,
    FAKE_SESSION,
};
use zklock::proto::{
    ConnectResponse, DecodeError, OpCode, Record, ReplyHeader, WatcherEvent, AUTH_XID,
    DEFAULT_MAX_FRAME, NOTIFICATION_XID,
};
use zklock::testing::{FaultProxy, TestServer};
use zklock::{
    Acl, AddWatchMode, Client, CreateMode, Error, EventType, KeeperState, State, StateChanges,
};

/// Every call and every wait for the client is bounded by this.
const BOUND: Duration = Duration::from_secs(20);
/// A drop "from the prefix alone" or "on a protocol error" happens well
/// within this; the alternatives (a handshake or read timeout) take longer.
const PROMPT: Duration = Duration::from_secs(2);
/// The session timeout of the clients with a session on the real server.
const SESSION_TIMEOUT: Duration = Duration::from_secs(8);
/// What hostile servers negotiate, unless a test says otherwise: a read
/// timeout of 20 s, far beyond [`PROMPT`].
const HOSTILE_TIMEOUT_MS: i32 = 30_000;

/// One real server for every test here; never dropped, its watchdog kills
/// it when this process exits.
fn server() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| TestServer::new().expect("start a ZooKeeper server"))
}

fn setup() {
    watch_client_panics();
    capture_log();
}

// ---- A fresh client: the hostile host first, then the real one ----

/// A handshake-breaking script, and how the client should take it.
struct HandshakeCase {
    name: &'static str,
    script: Arc<hostile::Script>,
    /// The reason the client gives for dropping the connection.
    reason: &'static str,
    /// Dropped as soon as the bad bytes are in (rather than on a timeout).
    prompt: bool,
    max_frame: Option<usize>,
}

fn case(
    name: &'static str,
    reason: &'static str,
    prompt: bool,
    script: impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static,
) -> HandshakeCase {
    HandshakeCase {
        name,
        script: Arc::new(script),
        reason,
        prompt,
        max_frame: None,
    }
}

/// Sends a ConnectResponse that is healthy but for `spoil`.
fn spoiled_response(
    spoil: impl Fn(&mut ConnectResponse) + Send + Sync + 'static,
) -> impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static {
    move |peer| {
        let request = peer.read_connect()?;
        let mut response = healthy_response(&request, HOSTILE_TIMEOUT_MS);
        spoil(&mut response);
        peer.send(&frame(&response.to_bytes()))?;
        Ok(After::Hold)
    }
}

/// Sends `bytes` after reading the ConnectRequest, then holds or closes.
fn raw_answer(
    bytes: Vec<u8>,
    after: After,
) -> impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static {
    move |peer| {
        peer.read_connect()?;
        peer.send(&bytes)?;
        Ok(after)
    }
}

fn handshake_cases() -> Vec<HandshakeCase> {
    let healthy = |id| {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: HOSTILE_TIMEOUT_MS,
            session_id: id,
            passwd: vec![7; 16],
            read_only: false,
        }
        .to_bytes()
    };
    let mut declared_only = Vec::new();
    for field in [
        0i32.to_be_bytes().to_vec(),
        30_000i32.to_be_bytes().to_vec(),
    ] {
        declared_only.extend(field);
    }
    declared_only.extend(FAKE_SESSION.to_be_bytes());
    declared_only.extend(100_000i32.to_be_bytes());
    let mut trailing = healthy(FAKE_SESSION);
    trailing.extend([1, 2]);
    let mut truncated = frame(&healthy(FAKE_SESSION));
    truncated.truncate(20);
    let mut over_max = case(
        "a frame length one over the client's max_frame",
        "protocol error: frame of 65537 bytes exceeds the 65536-byte limit",
        true,
        raw_answer(65_537i32.to_be_bytes().to_vec(), After::Hold),
    );
    over_max.max_frame = Some(65_536);
    vec![
        case(
            "accepts and never answers",
            "timed out after 600ms waiting for the server's handshake response",
            false,
            |peer| {
                peer.read_connect()?;
                Ok(After::Hold)
            },
        ),
        case(
            "closes without answering",
            "the server closed the connection",
            true,
            |peer| {
                peer.read_connect()?;
                Ok(After::Close)
            },
        ),
        case(
            "password length 0",
            "protocol error: malformed session password length",
            true,
            spoiled_response(|r| r.passwd = Vec::new()),
        ),
        case(
            "password length 15",
            "protocol error: malformed session password length",
            true,
            spoiled_response(|r| r.passwd = vec![7; 15]),
        ),
        case(
            "password length 100000, all sent",
            "protocol error: malformed session password length",
            true,
            spoiled_response(|r| r.passwd = vec![7; 100_000]),
        ),
        case(
            "password length 100000, none sent",
            "protocol error: ConnectResponse.passwd: length 100000 exceeds the 0 byte(s) left in the frame",
            true,
            raw_answer(frame(&declared_only), After::Hold),
        ),
        case(
            "a response shorter than the record",
            "protocol error: ConnectResponse.session_id: truncated input: needed 8 more byte(s) but only 2 remain",
            true,
            raw_answer(frame(&healthy(FAKE_SESSION)[..10]), After::Hold),
        ),
        case(
            "bytes after the record",
            "protocol error: ConnectResponse: 2 unexpected trailing byte(s) after the record",
            true,
            raw_answer(frame(&trailing), After::Hold),
        ),
        case(
            "a truncated frame, then close",
            "the server closed the connection",
            true,
            raw_answer(truncated, After::Close),
        ),
        case(
            "a frame length of 0x7fffffff",
            "protocol error: frame of 2147483647 bytes exceeds the 1114111-byte limit",
            true,
            raw_answer(i32::MAX.to_be_bytes().to_vec(), After::Hold),
        ),
        over_max,
        case(
            "a negative frame length",
            "protocol error: negative frame length -5",
            true,
            raw_answer((-5i32).to_be_bytes().to_vec(), After::Hold),
        ),
        case(
            "an HTTP error page",
            "protocol error: frame of 1213486160 bytes exceeds the 1114111-byte limit",
            true,
            raw_answer(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), After::Hold),
        ),
        case(
            "a read-only server, read-write required",
            "server is read-only",
            true,
            spoiled_response(|r| r.read_only = true),
        ),
    ]
}

/// A hostile-only connect string (the host twice, so the budget covers two
/// attempts): connect fails with `ConnectFailed` naming the host and
/// saying what went wrong.
fn only_hostile(case: &HandshakeCase) -> Result<(), String> {
    let script = case.script.clone();
    let h = Hostile::start(move |peer| script(peer));
    let connect_string = format!("{0},{0}", h.connect_string());
    let timeout = Duration::from_millis(600);
    let mut builder = Client::builder().connect_timeout(timeout);
    if let Some(max) = case.max_frame {
        builder = builder.max_frame(max);
    }
    let started = Instant::now();
    let result = within(BOUND, "connect", move || builder.connect(&connect_string));
    let took = started.elapsed();
    let expected = Error::ConnectFailed {
        hosts: format!("{0},{0}", h.connect_string()),
        timeout: timeout * 2,
        last_error: format!("{}: {}", h.connect_string(), case.reason),
    };
    match result {
        Err(e) if e == expected => {}
        other => return Err(format!("expected {expected:?}, got {other:?}")),
    }
    if took > timeout * 2 + PROMPT {
        return Err(format!("connect took {took:?}"));
    }
    Ok(())
}

/// The hostile host, then the real one: the client ends up connected to
/// the real server.
fn hostile_then_real(case: &HandshakeCase) -> Result<(), String> {
    let gate = Arc::new(FaultProxy::start(server().addr()).map_err(|e| e.to_string())?);
    gate.refuse(true);
    let opener = gate.clone();
    let script = case.script.clone();
    let h = Hostile::start_with_hook(move |peer| script(peer), move |_| opener.refuse(false));
    let connect_string = format!("{},{}", h.connect_string(), gate.connect_string());
    let connect_timeout = if case.prompt {
        Duration::from_secs(6)
    } else {
        Duration::from_millis(1500)
    };
    let mut builder = Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(connect_timeout);
    if let Some(max) = case.max_frame {
        builder = builder.max_frame(max);
    }
    let client = within(BOUND, "connect", move || builder.connect(&connect_string))
        .map_err(|e| format!("connect: {e}"))?;
    if client.session_id() == FAKE_SESSION || client.state() != State::Connected {
        return Err(format!("not on the real server: {client:?}"));
    }
    // The session is the real server's: it holds an ephemeral node of it.
    let node = format!("/fresh-{}", client.session_id());
    let created = client.create(&node, b"", &Acl::open_unsafe(), CreateMode::Ephemeral);
    let stat = client.exists(&node).map_err(|e| e.to_string())?;
    if created.is_err() || stat.as_ref().map(|s| s.ephemeral_owner) != Some(client.session_id()) {
        return Err(format!("create {node}: {created:?}, stat {stat:?}"));
    }
    let report = h.next_report(BOUND);
    if report.index != 0 || report.script_error.is_some() {
        return Err(format!("hostile server: {report:?}"));
    }
    if case.prompt {
        // Held-open connections: dropped as soon as the bad bytes were in.
        if let Some(after) = report.closed_after.filter(|a| *a > PROMPT) {
            return Err(format!("dropped only after {after:?}"));
        }
    } else {
        let after = report.closed_after.ok_or("the client never dropped it")?;
        // Counted from the server's accept, later than the client's clock
        // starts by however long a loaded machine takes to hand the
        // connection over: half the timeout still tells it from a prompt
        // drop or a read timeout.
        if after < connect_timeout / 2 || after > connect_timeout + PROMPT {
            return Err(format!(
                "dropped after {after:?}, not the {connect_timeout:?} handshake timeout"
            ));
        }
    }
    client.close().map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn a_broken_handshake_is_reported_and_the_next_host_is_used() {
    setup();
    server();
    // The cases name the default limit in their expected messages.
    assert_eq!(DEFAULT_MAX_FRAME, 1_114_111);
    let cases = handshake_cases();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = cases
            .iter()
            .flat_map(|case| {
                [
                    ("hostile only", only_hostile as fn(&HandshakeCase) -> _),
                    ("hostile, then real", hostile_then_real),
                ]
                .map(|(setup, run)| (case.name, setup, scope.spawn(move || run(case))))
            })
            .collect();
        runs.into_iter()
            .filter_map(|(name, setup, run)| match run.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("{name} ({setup}): {e}")),
                Err(_) => Some(format!("{name} ({setup}): panicked")),
            })
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
    assert_no_client_panics();
}

#[test]
fn an_expired_handshake_ends_a_fresh_client_at_once() {
    setup();
    for timeout_ms in [0, -1] {
        let gate = Arc::new(FaultProxy::start(server().addr()).expect("proxy"));
        gate.refuse(true);
        let opener = gate.clone();
        let h = Hostile::start_with_hook(
            spoiled_response(move |r| {
                r.timeout_ms = timeout_ms;
                r.session_id = 0;
                r.passwd = vec![0; 16];
            }),
            move |_| opener.refuse(false),
        );
        let connect_string = format!("{},{}", h.connect_string(), gate.connect_string());
        let started = Instant::now();
        let result = within(BOUND, "connect", move || {
            Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .connect(&connect_string)
        });
        assert_eq!(result.map(drop), Err(Error::SessionExpired), "{timeout_ms}");
        assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
        assert_eq!(h.connections(), 1);
    }
    assert_no_client_panics();
}

// ---- A session on the real server, and one connection to a hostile one ----

/// A client with a session on the real server, through a proxy that can
/// send one connection elsewhere.
struct Detour {
    real: SocketAddr,
    proxy: Arc<FaultProxy>,
    client: Client,
    states: StateChanges<State>,
    session: i64,
    node: String,
}

fn detour(
    name: &str,
    configure: impl FnOnce(zklock::ClientBuilder) -> zklock::ClientBuilder,
) -> Detour {
    setup();
    let real = server().addr();
    let proxy = Arc::new(FaultProxy::start(real).expect("start a proxy"));
    let client = configure(
        Client::builder()
            .session_timeout(SESSION_TIMEOUT)
            .connect_timeout(Duration::from_secs(3)),
    )
    .connect(&proxy.connect_string())
    .expect("connect to the real server");
    let node = format!("/hostile-{name}");
    client
        .create(&node, b"real", &Acl::open_unsafe(), CreateMode::Persistent)
        .expect("create the test node");
    Detour {
        real,
        proxy,
        states: client.state_changes(),
        session: client.session_id(),
        client,
        node,
    }
}

impl Detour {
    /// Sends the client's next connection to a hostile server running
    /// `script` (and the one after back to the real server): cuts the
    /// current connection and waits for the client to notice.
    fn via(
        &self,
        script: impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static,
    ) -> Hostile {
        let (proxy, real) = (self.proxy.clone(), self.real);
        let h = Hostile::start_with_hook(script, move |_| proxy.set_upstream(real));
        self.proxy.set_upstream(h.addr());
        self.proxy.cut();
        self.expect_states(&[State::Disconnected]);
        h
    }

    /// The next state changes are exactly `want`.
    fn expect_states(&self, want: &[State]) {
        let mut seen = Vec::new();
        for _ in want {
            match self.states.recv_timeout(BOUND) {
                Ok(state) => seen.push(state),
                Err(e) => panic!("states: wanted {want:?}, saw {seen:?} and then {e}"),
            }
        }
        assert_eq!(seen, want, "state changes");
    }

    /// A getData of the test node, on its own thread, within [`BOUND`].
    fn get(&self) -> zklock::Result<Vec<u8>> {
        let (client, node) = (self.client.clone(), self.node.clone());
        within(BOUND, "get_data", move || {
            client.get_data(&node).map(|(d, _)| d)
        })
    }

    /// Back on the real server, with the same session.
    fn expect_back(&self) {
        self.expect_states(&[State::Connected]);
        assert_eq!(self.get().expect("get_data on the real server"), b"real");
        assert_eq!(
            self.client.session_id(),
            self.session,
            "the session changed"
        );
        assert_eq!(self.client.state(), State::Connected);
        assert_no_client_panics();
    }
}

/// Hostile scripts that accept the handshake, read one getData, and answer
/// it with `answer`.
fn answer_get_data(
    answer: impl Fn(i32) -> Vec<u8> + Send + Sync + 'static,
) -> impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static {
    move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::GetData)?;
        peer.send(&answer(xid))?;
        Ok(After::Hold)
    }
}

fn prompt_drop(h: &Hostile) {
    let report = h.next_report(BOUND);
    assert_eq!(report.script_error, None, "{report:?}");
    let after = report
        .closed_after
        .expect("the client dropped the connection");
    assert!(after < PROMPT, "dropped only after {after:?}");
}

#[test]
fn a_malformed_reply_fails_its_call_with_the_decode_error() {
    let d = detour("malformed", |b| b);
    let stat = get_data_body(b"")[4..].to_vec();
    let mut with_trailing = get_data_body(b"hostile");
    with_trailing.push(0xab);
    let in_stat =
        |field, error: DecodeError| error.in_field(field).in_field("GetDataResponse.stat");
    let in_data = |error: DecodeError| error.in_field("GetDataResponse.data");
    let eof = DecodeError::UnexpectedEof {
        needed: 8,
        remaining: 0,
    };
    assert_eq!(
        Error::Protocol(in_stat("Stat.czxid", eof)).to_string(),
        "protocol error: Stat.czxid (in GetDataResponse.stat): \
         truncated input: needed 8 more byte(s) but only 0 remain",
        "the message says where the reply broke"
    );
    for (body, expected) in [
        // An empty data buffer and no Stat.
        (
            vec![0, 0, 0, 0],
            in_stat(
                "Stat.czxid",
                DecodeError::UnexpectedEof {
                    needed: 8,
                    remaining: 0,
                },
            ),
        ),
        // A data length of -7.
        (
            [&(-7i32).to_be_bytes()[..], &stat].concat(),
            in_data(DecodeError::NegativeLength(-7)),
        ),
        // A data length beyond the frame.
        (
            [&1000i32.to_be_bytes()[..], &[1, 2, 3]].concat(),
            in_data(DecodeError::LengthExceedsFrame {
                len: 1000,
                remaining: 3,
            }),
        ),
        // The wrong record: a children list where data and a Stat belong.
        (
            zklock::proto::GetChildrenResponse {
                children: vec!["a".into(), "b".into()],
            }
            .to_bytes(),
            in_stat(
                "Stat.mzxid",
                DecodeError::UnexpectedEof {
                    needed: 8,
                    remaining: 0,
                },
            ),
        ),
        (
            with_trailing,
            DecodeError::TrailingBytes(1).in_field("GetDataResponse"),
        ),
    ] {
        let h = d.via(answer_get_data(move |xid| reply_frame(xid, 0, &body)));
        d.expect_states(&[State::Connected]);
        assert_eq!(d.get(), Err(Error::Protocol(expected.clone())));
        d.expect_states(&[State::Disconnected]);
        prompt_drop(&h);
        d.expect_back();
    }
}

#[test]
fn replies_with_wrong_xids_fail_the_calls_in_flight_with_connection_loss() {
    // Two reads in flight at once must stay two requests, each with its own
    // xid: batched, they could share one multiRead.
    let d = detour("xids", |b| b.batch_reads(false));

    // An xid nobody asked for.
    let (tx, xids) = crossbeam_channel::unbounded();
    let h = d.via(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::GetData)?;
        let _ = tx.send(xid);
        peer.reply(xid + 1000, 0, &get_data_body(b"hostile"))?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected]);
    assert_eq!(d.get(), Err(Error::ConnectionLoss));
    let xid = xids.recv_timeout(BOUND).expect("the request's xid");
    assert_logged(
        &format!(
            "dropping connection: reply xid {} does not match the oldest outstanding request's xid Some({xid})",
            xid + 1000
        ),
        BOUND,
    );
    d.expect_states(&[State::Disconnected]);
    prompt_drop(&h);
    d.expect_back();

    // Two calls in flight, answered in the wrong order: both fail.
    let (tx, xids) = crossbeam_channel::unbounded();
    let h = d.via(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let first = peer.expect_request(OpCode::GetData)?;
        let second = peer.expect_request(OpCode::GetData)?;
        let _ = tx.send((first, second));
        peer.reply(second, 0, &get_data_body(b"second"))?;
        peer.reply(first, 0, &get_data_body(b"first"))?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected]);
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let (client, node) = (d.client.clone(), d.node.clone());
            std::thread::spawn(move || within(BOUND, "get_data", move || client.get_data(&node)))
        })
        .collect();
    for call in calls {
        assert_eq!(
            call.join().expect("no panic").map(drop),
            Err(Error::ConnectionLoss)
        );
    }
    let (first, second) = xids.recv_timeout(BOUND).expect("the xids");
    assert_logged(
        &format!(
            "dropping connection: reply xid {second} does not match the oldest outstanding request's xid Some({first})"
        ),
        BOUND,
    );
    d.expect_states(&[State::Disconnected]);
    prompt_drop(&h);
    d.expect_back();

    // A reply while nothing is in flight.
    let h = d.via(|peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        peer.reply(0x7777, 0, &[])?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected, State::Disconnected]);
    assert_logged(
        "dropping connection: reply xid 30583 does not match the oldest outstanding request's xid None",
        BOUND,
    );
    prompt_drop(&h);
    d.expect_back();

    // An error code the client does not know is the call's error, not a
    // protocol error: the connection stays.
    let h = d.via(|peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::GetData)?;
        peer.reply(xid, -999, &[])?;
        // The next call is answered with a wrong xid, to end the detour.
        let xid = peer.expect_request(OpCode::GetData)?;
        peer.reply(xid - 1, 0, &[])?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected]);
    assert_eq!(d.get(), Err(Error::UnknownServerError(-999)));
    assert_eq!(d.client.state(), State::Connected);
    assert_eq!(d.get(), Err(Error::ConnectionLoss));
    d.expect_states(&[State::Disconnected]);
    prompt_drop(&h);
    d.expect_back();
}

#[test]
fn broken_frames_fail_the_calls_in_flight_and_are_refused_from_prefix_and_xid() {
    const MAX: usize = 100_000;
    let d = detour("frames", |b| b.max_frame(MAX));

    let too_large = |len| Error::Protocol(DecodeError::FrameTooLarge { len, max: MAX });
    // (what, the answer, whether the request's xid follows it, ...)
    for (what, answer, then_xid, log, error) in [
        (
            "a reply header shorter than its record",
            frame(&[0, 0, 0, 1, 0, 0, 0]),
            false,
            "dropping connection: protocol error: ReplyHeader.zxid: truncated input: needed 8 more byte(s) but only 3 remain",
            Error::ConnectionLoss,
        ),
        (
            "a negative frame length",
            (-2i32).to_be_bytes().to_vec(),
            false,
            "dropping connection: protocol error: negative frame length -2",
            Error::ConnectionLoss,
        ),
        // Refused from the 4-byte prefix and the xid alone: nothing more
        // is sent and the connection stays open, so waiting for the bytes
        // would hang until the read timeout (20 s). The call whose reply
        // was due fails with the limit; one ahead of a notification's
        // frame, with `ConnectionLoss`.
        (
            "a frame length of 0x7fffffff",
            i32::MAX.to_be_bytes().to_vec(),
            true,
            "dropping connection: protocol error: frame of 2147483647 bytes exceeds the 100000-byte limit",
            too_large(i32::MAX as usize),
        ),
        (
            "a frame length one over max_frame",
            (MAX as i32 + 1).to_be_bytes().to_vec(),
            true,
            "dropping connection: protocol error: frame of 100001 bytes exceeds the 100000-byte limit",
            too_large(MAX + 1),
        ),
        (
            "a notification's frame one over max_frame",
            [(MAX as i32 + 1).to_be_bytes(), (-1i32).to_be_bytes()].concat(),
            false,
            "dropping connection: protocol error: frame of 100001 bytes exceeds the 100000-byte limit",
            Error::ConnectionLoss,
        ),
    ] {
        let h = d.via(move |peer| {
            peer.handshake(HOSTILE_TIMEOUT_MS)?;
            let xid = peer.expect_request(OpCode::GetData)?;
            peer.send(&answer)?;
            if then_xid {
                peer.send(&xid.to_be_bytes())?;
            }
            Ok(After::Hold)
        });
        d.expect_states(&[State::Connected]);
        assert_eq!(d.get(), Err(error), "{what}");
        assert_logged(log, BOUND);
        d.expect_states(&[State::Disconnected]);
        prompt_drop(&h);
        d.expect_back();
    }

    // A truncated frame, then a close: the call fails at once.
    let h = d.via(|peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::GetData)?;
        let mut reply = reply_frame(xid, 0, &get_data_body(&[7; 500]));
        reply.truncate(100);
        peer.send(&reply)?;
        Ok(After::Close)
    });
    d.expect_states(&[State::Connected]);
    let started = Instant::now();
    assert_eq!(d.get(), Err(Error::ConnectionLoss), "a truncated frame");
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    d.expect_states(&[State::Disconnected]);
    assert_eq!(h.next_report(BOUND).script_error, None);
    d.expect_back();

    // A reply of exactly max_frame bytes is fine; one byte more is not.
    const ONE_OVER: &str =
        "dropping connection: protocol error: frame of 100001 bytes exceeds the 100000-byte limit";
    let one_over_before = logged_times(ONE_OVER);
    let overhead = 16 + 4 + 68;
    let h = d.via(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::GetData)?;
        let reply = reply_frame(xid, 0, &get_data_body(&vec![5; MAX - overhead]));
        if reply.len() != 4 + MAX {
            return Err(io::Error::other(format!(
                "a reply of {} bytes",
                reply.len()
            )));
        }
        peer.send(&reply)?;
        let xid = peer.expect_request(OpCode::GetData)?;
        let mut reply = reply_frame(xid, 0, &get_data_body(&vec![5; MAX - overhead + 1]));
        // Only the prefix and a few bytes: the client must not wait for more.
        reply.truncate(40);
        peer.send(&reply)?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected]);
    assert_eq!(
        d.get().expect("a reply of max_frame bytes").len(),
        MAX - overhead
    );
    assert_eq!(d.get(), Err(too_large(MAX + 1)));
    // Logged once already, by the bare length prefix above.
    assert_logged_times(ONE_OVER, one_over_before + 1, BOUND);
    d.expect_states(&[State::Disconnected]);
    prompt_drop(&h);
    d.expect_back();

    // Garbage right after the handshake, with nothing in flight.
    let h = d.via(|peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        peer.send(&[0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03])?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected, State::Disconnected]);
    assert_logged(
        "dropping connection: protocol error: negative frame length -559038737",
        BOUND,
    );
    prompt_drop(&h);
    d.expect_back();
}

#[test]
fn a_notification_that_cannot_be_decoded_drops_the_connection() {
    let d = detour("notifications", |b| b);
    let header = ReplyHeader {
        xid: NOTIFICATION_XID,
        zxid: -1,
        err: 0,
    }
    .to_bytes();
    let event = |event_type: i32, state: i32| {
        let mut body = header.clone();
        body.extend(event_type.to_be_bytes());
        body.extend(state.to_be_bytes());
        body.extend(
            zklock::proto::PathRecord {
                path: d.node.clone(),
            }
            .to_bytes(),
        );
        frame(&body)
    };
    // A well-formed one first, to show the decoding is not what is refused.
    let good = frame(
        &[
            header.clone(),
            WatcherEvent {
                event_type: EventType::NodeDataChanged,
                state: KeeperState::SyncConnected,
                path: d.node.clone(),
            }
            .to_bytes(),
        ]
        .concat(),
    );
    for (notification, line) in [
        (
            event(99, 3),
            "dropping connection: protocol error: WatcherEvent.event_type: unknown event type value 99",
        ),
        (
            event(3, 77),
            "dropping connection: protocol error: WatcherEvent.state: unknown keeper state value 77",
        ),
        (
            event(-1, 3),
            "dropping connection: protocol error: WatcherEvent.event_type: \
             malformed notification of an event type only a client makes",
        ),
        (
            frame(&[header.clone(), 4i32.to_be_bytes().to_vec()].concat()),
            "dropping connection: protocol error: WatcherEvent.state: truncated input: needed 4 more byte(s) but only 0 remain",
        ),
    ] {
        let good = good.clone();
        let h = d.via(move |peer| {
            peer.handshake(HOSTILE_TIMEOUT_MS)?;
            peer.expect_request(OpCode::GetData)?;
            peer.send(&good)?;
            peer.send(&notification)?;
            Ok(After::Hold)
        });
        d.expect_states(&[State::Connected]);
        assert_eq!(d.get(), Err(Error::ConnectionLoss));
        assert_logged(line, BOUND);
        d.expect_states(&[State::Disconnected]);
        prompt_drop(&h);
        d.expect_back();
    }
}

#[test]
fn a_silent_server_is_dropped_after_two_thirds_of_the_negotiated_timeout() {
    let d = detour("silent", |b| b);
    let h = d.via(|peer| {
        // 3000 ms: a read timeout of 2 s, a ping after 1 s of quiet; the
        // call below must be made before the read timeout, which a loaded
        // machine must not make hard.
        peer.handshake(3000)?;
        peer.expect_request(OpCode::GetData)?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected]);
    assert_eq!(
        d.client.negotiated_timeout(),
        Some(Duration::from_millis(3000))
    );
    let started = Instant::now();
    assert_eq!(d.get(), Err(Error::ConnectionLoss));
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2000) + PROMPT,
        "the call failed after {took:?}"
    );
    assert_logged(
        "dropping connection: timed out after 2s waiting for any reply or ping response from the server",
        BOUND,
    );
    d.expect_states(&[State::Disconnected]);
    let report = h.next_report(BOUND);
    let after = report.closed_after.expect("dropped");
    assert!(
        after >= Duration::from_millis(1950) && after < Duration::from_millis(2000) + PROMPT,
        "dropped {after:?} after the handshake"
    );
    assert!(
        report.later.iter().any(|r| r.op == OpCode::Ping.code()),
        "no ping before giving up: {report:?}"
    );
    d.expect_back();
    assert_eq!(d.client.negotiated_timeout(), Some(SESSION_TIMEOUT));
}

#[test]
fn a_server_that_never_answers_the_handshake_is_left_after_the_connect_timeout() {
    let d = detour("mute", |b| b.connect_timeout(Duration::from_millis(1000)));
    let h = d.via(|peer| {
        peer.read_connect()?;
        Ok(After::Hold)
    });
    // A call made meanwhile waits for the next connection and succeeds.
    assert_eq!(d.get().expect("get_data after the detour"), b"real");
    let report = h.next_report(BOUND);
    let after = report.closed_after.expect("dropped");
    // Counted from the server's accept, after the client's clock started
    // (the detour's hops in between): half the timeout still tells a
    // handshake timeout from a prompt drop.
    assert!(
        after >= Duration::from_millis(500) && after < Duration::from_millis(1000) + PROMPT,
        "dropped after {after:?}"
    );
    d.expect_back();
}

#[test]
fn a_broken_handshake_on_reconnect_moves_on_and_keeps_the_session() {
    let d = detour("rehandshake", |b| b);
    for (passwd_len, line) in [
        (
            15,
            "dropping connection: protocol error: malformed session password length",
        ),
        (
            0,
            "dropping connection: protocol error: malformed session password length",
        ),
        (
            100_000,
            "dropping connection: protocol error: malformed session password length",
        ),
    ] {
        let h = d.via(spoiled_response(move |r| r.passwd = vec![9; passwd_len]));
        assert_logged(line, BOUND);
        prompt_drop(&h);
        d.expect_back();
    }
}

#[test]
fn an_expired_handshake_on_reconnect_ends_the_session() {
    let d = detour("expired", |b| b);
    let h = d.via(|peer| {
        peer.read_connect()?;
        peer.send(&frame(
            &ConnectResponse {
                protocol_version: 0,
                timeout_ms: 0,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: false,
            }
            .to_bytes(),
        ))?;
        Ok(After::Close)
    });
    d.expect_states(&[State::Expired]);
    let started = Instant::now();
    assert_eq!(d.get(), Err(Error::SessionExpired));
    assert!(started.elapsed() < PROMPT);
    within(BOUND, "close", {
        let client = d.client.clone();
        move || client.close()
    })
    .expect("close");
    assert_eq!(h.connections(), 1);
    assert_no_client_panics();
}

#[test]
fn a_resume_answered_with_another_session_is_refused() {
    let d = detour("hijack", |b| b);
    for spoil in [
        (|r: &mut ConnectResponse| r.session_id = FAKE_SESSION) as fn(&mut ConnectResponse),
        |r: &mut ConnectResponse| r.passwd = vec![1; 16],
    ] {
        let h = d.via(spoiled_response(spoil));
        assert_logged(
            "dropping connection: protocol error: malformed handshake: another session than the one being resumed",
            BOUND,
        );
        prompt_drop(&h);
        d.expect_back();
    }
}

#[test]
fn an_unsolicited_auth_failure_is_a_protocol_error() {
    let d = detour("auth", |b| b);
    let h = d.via(|peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        peer.reply(AUTH_XID, zklock::proto::ErrorCode::AuthFailed.code(), &[])?;
        Ok(After::Hold)
    });
    d.expect_states(&[State::Connected, State::Disconnected]);
    assert_logged(
        "dropping connection: reply xid -4 does not match the oldest outstanding request's xid None",
        BOUND,
    );
    prompt_drop(&h);
    d.expect_back();
}

/// Answers a `multi` of two ops with both rolled back and none to blame,
/// then does `after`.
fn blame_no_op(after: After) -> impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static {
    use zklock::proto::{ErrorResponse, MultiResponse, OpResult};
    move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::Multi)?;
        let rolled_back = |err| OpResult::Error(ErrorResponse { err });
        let results = vec![rolled_back(0), rolled_back(-2)];
        peer.reply(xid, 0, &MultiResponse { results }.to_bytes())?;
        Ok(after)
    }
}

/// Every op rolled back and none to blame: the client cannot tell which
/// call failed, and sending them all again could go on forever.
#[test]
fn a_failed_write_batch_without_a_failing_op_fails_its_calls_and_drops_the_connection() {
    let d = detour("write-batch", |b| b);
    let h = d.via(blame_no_op(After::Hold));
    d.expect_states(&[State::Connected]);
    let (client, node) = (d.client.clone(), d.node.clone());
    let results = within(BOUND, "two setData calls sent together", move || {
        let writes: [(&str, &[u8], Option<i32>); 2] =
            [(&node, b"first", None), (&node, b"second", None)];
        zklock::testing::set_data_together(&client, &writes)
    });
    let malformed = Error::Protocol(DecodeError::Malformed(
        "failed multi reply without a failing op",
    ));
    assert_eq!(results, [Err(malformed.clone()), Err(malformed)]);
    d.expect_states(&[State::Disconnected]);
    prompt_drop(&h);
    // Nothing was written on the real server.
    d.expect_back();
}

/// The same reply to a `multi` call: no op to blame, so the call fails as
/// malformed (before, the op after the failure, at index 1, was blamed
/// with `RuntimeInconsistency`), and the connection stays, as for a
/// reply with the wrong count (the peer closes it here, and the session
/// goes on through the real server).
#[test]
fn a_failed_multi_without_a_failing_op_is_malformed() {
    let d = detour("multi", |b| b);
    let h = d.via(blame_no_op(After::Close));
    d.expect_states(&[State::Connected]);
    let (client, node) = (d.client.clone(), d.node.clone());
    let result = within(BOUND, "a multi", move || {
        client.multi(&[
            zklock::Op::check(node.as_str(), None),
            zklock::Op::set_data(node.as_str(), "x", None),
        ])
    });
    assert_eq!(
        result,
        Err(Error::Protocol(DecodeError::Malformed(
            "failed multi reply without a failing op"
        )))
    );
    assert_eq!(h.next_report(BOUND).script_error, None);
    d.expect_states(&[State::Disconnected]);
    d.expect_back();
}

/// Answers the first request of kind `op` with `results`, then closes.
fn answer_multi(
    op: OpCode,
    results: Vec<zklock::proto::OpResult>,
) -> impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static {
    move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(op)?;
        let reply = zklock::proto::MultiResponse {
            results: results.clone(),
        };
        peer.reply(xid, 0, &reply.to_bytes())?;
        Ok(After::Close)
    }
}

/// Results of another kind than their ops (a delete's for a setData, a
/// listing for a getData, an error that says "no error") fail the call as
/// malformed. Before, they came back as the outcomes of ops never asked
/// for (`Deleted` for a setData, `Children` for a getData).
#[test]
fn multi_results_unlike_their_ops_are_malformed() {
    use zklock::proto::{ErrorResponse, GetChildrenResponse, OpResult};
    use zklock::{Op, ReadOp};
    let d = detour("multi-kinds", |b| b);
    let h = d.via(answer_multi(
        OpCode::Multi,
        vec![OpResult::Check, OpResult::Delete],
    ));
    d.expect_states(&[State::Connected]);
    let (client, node) = (d.client.clone(), d.node.clone());
    let result = within(BOUND, "a multi", move || {
        client.multi(&[
            Op::check(node.as_str(), None),
            Op::set_data(node.as_str(), "x", None),
        ])
    });
    let unlike_op = Error::Protocol(DecodeError::Malformed("multi result unlike its op"));
    assert_eq!(result, Err(unlike_op));
    assert_eq!(h.next_report(BOUND).script_error, None);
    d.expect_states(&[State::Disconnected]);
    d.expect_back();

    let unlike_read = Error::Protocol(DecodeError::Malformed("multiRead result unlike its read"));
    let listing = OpResult::GetChildren(GetChildrenResponse {
        children: vec!["x".into()],
    });
    let no_error = OpResult::Error(ErrorResponse { err: 0 });
    for results in [vec![listing], vec![no_error]] {
        let h = d.via(answer_multi(OpCode::MultiRead, results.clone()));
        d.expect_states(&[State::Connected]);
        let (client, node) = (d.client.clone(), d.node.clone());
        let result = within(BOUND, "a multi_read", move || {
            client.multi_read(&[ReadOp::GetData(node)])
        });
        assert_eq!(result, Err(unlike_read.clone()), "{results:?}");
        assert_eq!(h.next_report(BOUND).script_error, None);
        d.expect_states(&[State::Disconnected]);
        d.expect_back();
    }
}

/// How many 1 MB writes the tests of a server that stops reading make:
/// some 12 MB, far more than the socket buffers take while nothing reads
/// them.
const UNREAD_CALLS: usize = 12;

/// A fake server that answers the handshake, granting `timeout_ms`, once
/// `waiting` has [`UNREAD_CALLS`] calls waiting for it, so that the I/O
/// thread, handling the answer, writes them all; then it reads nothing
/// until `release` says so, or `hold` has passed.
fn stops_reading_after_the_handshake(
    waiting: Client,
    timeout_ms: i32,
    release: crossbeam_channel::Receiver<()>,
    hold: Duration,
) -> impl Fn(&mut Peer) -> io::Result<After> + Send + Sync + 'static {
    move |peer| {
        let request = peer.read_connect()?;
        let started = Instant::now();
        while waiting.queued_request_count() < UNREAD_CALLS && started.elapsed() < BOUND {
            std::thread::sleep(Duration::from_millis(10));
        }
        peer.accept(&request, timeout_ms)?;
        let _ = release.recv_timeout(hold);
        Ok(After::Close)
    }
}

#[test]
fn a_server_that_stops_reading_cannot_stall_the_io_thread() {
    let d = detour("unread", |b| b);
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
    // 3 s: a read timeout of 2 s.
    let h = d.via(stops_reading_after_the_handshake(
        d.client.clone(),
        3000,
        release_rx,
        BOUND,
    ));
    let calls: Vec<_> = (0..UNREAD_CALLS)
        .map(|_| {
            let (client, node) = (d.client.clone(), d.node.clone());
            std::thread::spawn(move || {
                let data = vec![7u8; 1_000_000];
                let started = Instant::now();
                (
                    client.set_data(&node, &data, None).map(|_| ()),
                    started.elapsed(),
                )
            })
        })
        .collect();
    for call in calls {
        let (result, took) = within(BOUND, "set_data", move || call.join().expect("caller"));
        assert_eq!(result, Err(Error::ConnectionLoss));
        // The handshake waited for the last caller. After it, a write gave
        // up within twice the read timeout (a blocked write, then a
        // trickle of partial ones).
        let limit = Duration::from_millis(2 * 2000);
        assert!(took < limit + PROMPT, "failed after {took:?}");
    }
    let _ = release_tx.send(());
    drop(h);
    d.expect_states(&[State::Connected, State::Disconnected]);
    d.expect_back();
}

/// A close while the I/O thread is blocked writing to a server that stopped
/// reading ends at the close's deadline: the write gives way at the
/// session's longest blind wait, the connect timeout, as a read does, and
/// the timers then see the close. Before, the write kept to the read
/// timeout, 20 s for the 30 s session granted here, and `close()` waited
/// for it.
#[test]
fn a_close_is_not_held_up_by_the_io_threads_blocked_write() {
    let connect_timeout = Duration::from_secs(2);
    let d = detour("unread-close", |b| b.connect_timeout(connect_timeout));
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
    let h = d.via(stops_reading_after_the_handshake(
        d.client.clone(),
        30_000,
        release_rx,
        2 * BOUND,
    ));
    let calls: Vec<_> = (0..UNREAD_CALLS)
        .map(|_| {
            let (client, node) = (d.client.clone(), d.node.clone());
            std::thread::spawn(move || client.set_data(&node, &[7u8; 1_000_000], None))
        })
        .collect();
    d.expect_states(&[State::Connected]);
    let closing = d.client.clone();
    let (closed, took) = within(2 * BOUND, "close", move || {
        let started = Instant::now();
        (closing.close(), started.elapsed())
    });
    assert!(
        took < 2 * connect_timeout + PROMPT,
        "close took {took:?}: {closed:?}"
    );
    assert!(
        matches!(closed, Err(Error::Timeout { .. })),
        "{closed:?}: closeSession was never read"
    );
    let _ = release_tx.send(());
    for call in calls {
        let result = within(BOUND, "set_data", move || call.join().expect("caller"));
        assert!(result.is_err(), "{result:?}");
    }
    drop(h);
}

/// ZooKeeper's code for an operation the server timed out itself.
const OPERATION_TIMEOUT: i32 = -7;

/// A dropped persistent watch's receiver has its watch removed from the
/// server. A removal the server times out itself (`OperationTimeout`, as ClickHouse
/// Keeper may) on a connection that stays up is looked at again after a
/// back-off, with an exists whose answer, whatever it is, has the removal
/// sent again; a look the server times out too still does, and the removal
/// is made on the same connection. Before, a timed out look was taken as a
/// lost connection, and the watch stayed on the server, unheard, for the
/// connection's life.
#[test]
fn a_removal_whose_look_again_the_server_times_out_looks_again() {
    setup();
    let (removed_tx, removed) = crossbeam_channel::bounded::<()>(1);
    let h = Hostile::start(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::AddWatch)?;
        // An addWatch's reply body is an error code, 0.
        peer.reply(xid, 0, &[0; 4])?;
        let xid = peer.expect_request(OpCode::RemoveWatches)?;
        peer.reply(xid, OPERATION_TIMEOUT, &[])?;
        let xid = peer.expect_request(OpCode::Exists)?;
        peer.reply(xid, OPERATION_TIMEOUT, &[])?;
        let xid = peer.expect_request(OpCode::RemoveWatches)?;
        peer.reply(xid, 0, &[])?;
        let _ = removed_tx.try_send(());
        Ok(After::Hold)
    });
    let client = hostile::connect_to(&h, BOUND, |builder| builder);
    let caller = client.clone();
    let watch = within(BOUND, "add_watch", move || {
        caller.add_watch("/watched", AddWatchMode::Persistent)
    })
    .expect("the watch set");
    drop(watch);
    let made_again = removed.recv_timeout(BOUND);
    drop(client);
    let report = h.next_report(BOUND);
    assert_eq!(made_again, Ok(()), "the removal made again: {report:?}");
    assert_eq!(report.script_error, None, "{report:?}");
    assert_eq!(h.connections(), 1, "no reconnect");
    assert_no_client_panics();
}
