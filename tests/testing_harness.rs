//! Tests of `zklock::testing`: real servers, an ensemble, and the fault proxy.
//! Each test starts its own JVMs, so they run in parallel.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use zklock::proto::{
    read_reply_header, split_frame, write_frame, write_request, Acl, ConnectRequest,
    ConnectResponse, CreateMode, CreateRequest, ErrorCode, ExistsRequest, GetDataRequest, OpCode,
    Record, ReplyHeader, DEFAULT_MAX_FRAME, PASSWORD_LEN,
};
use zklock::testing::{FaultProxy, ProxyMode, ServerMode, TestCluster, TestServer};

const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
    stream
}

/// Reads one frame's payload (the stream's read timeout bounds the wait).
fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((payload, _)) = split_frame(&buf, DEFAULT_MAX_FRAME)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}")))?
        {
            return Ok(payload.to_vec());
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn send_connect(stream: &mut TcpStream, session_id: i64, passwd: Vec<u8>) {
    let mut buf = Vec::new();
    write_frame(
        &mut buf,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 10_000,
            session_id,
            passwd,
            read_only: false,
        },
    );
    stream.write_all(&buf).expect("send ConnectRequest");
}

/// A new session over `stream`.
fn handshake(stream: &mut TcpStream) -> ConnectResponse {
    resume(stream, 0, vec![0; PASSWORD_LEN])
}

fn resume(stream: &mut TcpStream, session_id: i64, passwd: Vec<u8>) -> ConnectResponse {
    send_connect(stream, session_id, passwd);
    let payload = read_frame(stream).expect("read ConnectResponse");
    ConnectResponse::from_bytes(&payload).expect("decode ConnectResponse")
}

fn send_request(stream: &mut TcpStream, xid: i32, op: OpCode, body: &impl Record) {
    let mut buf = Vec::new();
    write_request(&mut buf, xid, op, body);
    stream.write_all(&buf).expect("send request");
}

fn read_reply(stream: &mut TcpStream) -> ReplyHeader {
    let payload = read_frame(stream).expect("read reply");
    read_reply_header(&payload).expect("decode reply header").0
}

/// Whether a read ends the connection (EOF or reset) rather than timing out
/// or returning data.
fn is_closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
    }
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn standalone_server_lifecycle() {
    let started = Instant::now();
    let server = TestServer::builder()
        .extended_types(true)
        .container_check_interval_ms(1000)
        .start()
        .expect("start ZooKeeper");
    eprintln!("standalone server up in {:?}", started.elapsed());
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.port())
    );
    assert!(server.is_running());
    assert_eq!(server.four_letter("ruok").expect("ruok"), "imok");
    assert_eq!(server.min_session_timeout(), Duration::from_millis(400));

    // A raw handshake gets a session, with the timeout we asked for.
    let mut stream = connect(server.addr());
    let session = handshake(&mut stream);
    assert_ne!(session.session_id, 0);
    assert_eq!(session.timeout_ms, 10_000);
    assert_eq!(session.passwd.len(), PASSWORD_LEN);
    drop(stream);

    // Paused: connections are accepted but nothing answers.
    server.pause().expect("pause");
    assert!(server.is_paused());
    let mut stream = connect(server.addr());
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    send_connect(&mut stream, 0, vec![0; PASSWORD_LEN]);
    let err = read_frame(&mut stream).expect_err("a paused server answered");
    assert!(matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ));
    server.resume().expect("resume");
    assert!(!server.is_paused());
    // The request sent while paused is answered now.
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let late =
        ConnectResponse::from_bytes(&read_frame(&mut stream).expect("late reply")).expect("decode");
    assert_ne!(late.session_id, 0);
    drop(stream);

    // A graceful restart keeps the port and the data: the session lives on.
    let port = server.port();
    server.restart().expect("restart");
    assert_eq!(server.port(), port);
    let mut stream = connect(server.addr());
    let resumed = resume(&mut stream, session.session_id, session.passwd.clone());
    assert_eq!(resumed.session_id, session.session_id);
    assert!(!resumed.is_expired(), "session lost over a restart");
    drop(stream);

    // So does a crash.
    server.kill().expect("kill");
    assert!(!server.is_running());
    assert!(TcpStream::connect_timeout(&server.addr(), IO_TIMEOUT).is_err());
    server.start().expect("start again");
    let mut stream = connect(server.addr());
    let resumed = resume(&mut stream, session.session_id, session.passwd);
    assert!(!resumed.is_expired(), "session lost over a crash");

    let log = server.log_path().to_path_buf();
    assert!(log.is_file());
    drop(server);
    assert!(!log.exists(), "temp dir left behind");
}

#[test]
fn cluster_elects_a_new_leader() {
    let started = Instant::now();
    let cluster = TestCluster::new().expect("start ensemble");
    eprintln!("ensemble up in {:?}", started.elapsed());
    assert_eq!(cluster.size(), 3);
    assert_eq!(cluster.connect_string().split(',').count(), 3);

    let modes: Vec<Option<ServerMode>> = (0..3).map(|i| cluster.mode(i)).collect();
    let leaders = modes
        .iter()
        .filter(|m| **m == Some(ServerMode::Leader))
        .count();
    let followers = modes
        .iter()
        .filter(|m| **m == Some(ServerMode::Follower))
        .count();
    assert_eq!((leaders, followers), (1, 2), "modes: {modes:?}");
    let leader = cluster.leader().expect("a leader");
    // Members reach each other directly unless built partitionable.
    assert!(matches!(
        cluster.isolate(0),
        Err(zklock::testing::Error::InvalidConfig(_))
    ));

    // Every member hands out sessions.
    for i in 0..3 {
        let addr = cluster.member_addr(i).expect("member");
        let session = handshake(&mut connect(addr));
        assert_ne!(session.session_id, 0, "member {i}");
    }

    cluster.kill(leader).expect("kill the leader");
    assert!(!cluster.is_running(leader));
    let started = Instant::now();
    let new_leader = cluster
        .wait_leader(Duration::from_secs(30))
        .expect("a new leader");
    eprintln!("re-elected in {:?}", started.elapsed());
    assert_ne!(new_leader, leader);
    cluster
        .wait_serving(Duration::from_secs(30))
        .expect("two members serve");

    // The old leader rejoins as a follower.
    cluster.start(leader).expect("restart the old leader");
    assert_eq!(cluster.mode(leader), Some(ServerMode::Follower));
    assert!(cluster.member_connect_string(3).is_err());
}

#[test]
fn fault_proxy() {
    let server = TestServer::new().expect("start ZooKeeper");
    let proxy = FaultProxy::start(server.addr()).expect("start proxy");
    assert_eq!(
        proxy.connect_string(),
        format!("127.0.0.1:{}", proxy.addr().port())
    );

    // Pass: a handshake goes through.
    let mut stream = connect(proxy.addr());
    assert_ne!(handshake(&mut stream).session_id, 0);
    wait_until("one connection", IO_TIMEOUT, || {
        proxy.connection_count() == 1
    });

    // cut: the connection is closed at once.
    proxy.cut();
    assert!(is_closed(&mut stream), "cut left the connection open");
    wait_until("no connection", IO_TIMEOUT, || {
        proxy.connection_count() == 0
    });

    // Blackhole: the connection is accepted but the server never answers...
    proxy.set_mode(ProxyMode::Blackhole);
    let mut stream = connect(proxy.addr());
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    send_connect(&mut stream, 0, vec![0; PASSWORD_LEN]);
    let err = read_frame(&mut stream).expect_err("answered through a blackhole");
    assert!(matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ));
    // Counted by the proxy's accept thread, which may not have run yet.
    wait_until("the blackholed connection counted", IO_TIMEOUT, || {
        proxy.connection_count() == 1
    });
    // ... until the partition heals.
    proxy.set_mode(ProxyMode::Pass);
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let session =
        ConnectResponse::from_bytes(&read_frame(&mut stream).expect("healed")).expect("decode");
    assert_ne!(session.session_id, 0);

    // A blackhole also stalls an established connection.
    proxy.set_mode(ProxyMode::Blackhole);
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let exists = ExistsRequest {
        path: "/".into(),
        watch: false,
    };
    send_request(&mut stream, 1, OpCode::Exists, &exists);
    let err = read_frame(&mut stream).expect_err("answered through a blackhole");
    // Silence, not a closed or reset connection.
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
        "{err:?}"
    );
    proxy.cut();
    assert!(is_closed(&mut stream));
    proxy.set_mode(ProxyMode::Pass);

    // Delay: replies come, late.
    let delay = Duration::from_millis(200);
    proxy.set_mode(ProxyMode::Delay(delay));
    let mut stream = connect(proxy.addr());
    let sent = Instant::now();
    assert_ne!(handshake(&mut stream).session_id, 0);
    assert!(sent.elapsed() >= 2 * delay, "took {:?}", sent.elapsed());
    proxy.set_mode(ProxyMode::Pass);
    drop(stream);

    // Refused: closed right after the accept.
    proxy.refuse(true);
    // The reset can even beat the connect's completion.
    if let Ok(mut stream) = TcpStream::connect_timeout(&proxy.addr(), IO_TIMEOUT) {
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        assert!(is_closed(&mut stream), "a refused connection stayed open");
    }
    // Counted once the proxy has reset it.
    wait_until("the refusal counted", IO_TIMEOUT, || {
        proxy.connections_refused() == 1
    });
    proxy.refuse(false);

    // cut_after_request: the create reaches the server, the reply does not
    // reach the client.
    let path = "/zklock-cut-after-create";
    proxy.cut_after_request(|op| op == OpCode::Create.code());
    assert!(proxy.is_cut_armed());
    let mut stream = connect(proxy.addr());
    handshake(&mut stream);
    send_request(&mut stream, 1, OpCode::Exists, &exists);
    assert_eq!(read_reply(&mut stream).err, 0, "exists / before the cut");
    let create = CreateRequest {
        path: path.into(),
        data: Some(b"x".to_vec()),
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
    };
    send_request(&mut stream, 2, OpCode::Create, &create);
    assert!(is_closed(&mut stream), "the create's reply came through");
    assert!(!proxy.is_cut_armed());

    // The client's side closes before the server has read the request, so
    // a check of another session can overtake the create: wait for it.
    let mut direct = connect(server.addr());
    handshake(&mut direct);
    let check = ExistsRequest {
        path: path.into(),
        watch: false,
    };
    let mut xid = 0;
    wait_until("the cut create to reach the server", IO_TIMEOUT, || {
        xid += 1;
        send_request(&mut direct, xid, OpCode::Exists, &check);
        let reply = read_reply(&mut direct);
        assert_eq!(reply.xid, xid);
        assert!(
            reply.err == 0 || reply.err == ErrorCode::NoNode.code(),
            "exists of the cut create: error {}",
            reply.err
        );
        reply.err == 0
    });

    // The trigger was one-shot: a second create passes.
    let mut stream = connect(proxy.addr());
    handshake(&mut stream);
    let second = CreateRequest {
        path: format!("{path}-2"),
        ..create
    };
    send_request(&mut stream, 1, OpCode::Create, &second);
    assert_eq!(read_reply(&mut stream).err, 0);

    // set_upstream: new connections go to the new upstream.
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let other_addr = other.local_addr().expect("addr");
    proxy.set_upstream(other_addr);
    assert_eq!(proxy.upstream(), other_addr);
    let mut stream = connect(proxy.addr());
    other.set_nonblocking(true).expect("nonblocking");
    let mut accepted = None;
    wait_until("a connection to the new upstream", IO_TIMEOUT, || {
        accepted = other.accept().ok();
        accepted.is_some()
    });
    let (mut upstream_side, _) = accepted.expect("accepted");
    upstream_side.set_nonblocking(false).expect("blocking");
    upstream_side.write_all(b"hello").expect("write");
    let mut hello = [0u8; 5];
    stream.read_exact(&mut hello).expect("forwarded");
    assert_eq!(&hello, b"hello");

    let started = Instant::now();
    drop(proxy);
    assert!(started.elapsed() < Duration::from_secs(3), "slow drop");
    assert!(is_closed(&mut stream));
}

/// When the server behind a proxy stops, the client's side of the proxied
/// connection closes too, as it would without the proxy.
#[test]
fn fault_proxy_passes_a_server_close_on_to_the_client() {
    let server = TestServer::new().expect("start server");
    let proxy = FaultProxy::start(server.addr()).expect("start proxy");
    let mut stream = connect(proxy.addr());
    let response = handshake(&mut stream);
    assert!(response.session_id != 0);
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("read timeout");
    let stopped = Instant::now();
    server.kill().expect("kill the server");
    wait_until(
        "the proxied connection to close",
        Duration::from_secs(10),
        || is_closed(&mut stream),
    );
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "closed only after {:?}",
        stopped.elapsed()
    );
}

/// A silence holds the replies the proxy had read but not yet forwarded
/// (here, one still waiting out a delay), as its documentation says: they
/// answer requests the server may have handled, but the client must not
/// hear of them. The silence must start while the reply still waits out
/// its delay: on a machine too slow for that, the round goes again with a
/// delay twice as long, three rounds at most.
#[test]
fn a_silence_holds_replies_already_queued() {
    let server = TestServer::new().expect("start ZooKeeper");
    for delay in [2, 4, 8].map(Duration::from_secs) {
        let Some(err) = silence_behind_a_delay(&server, delay) else {
            continue;
        };
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        return;
    }
    panic!("the machine was too slow for the test: the reply was due before the silence, with delays up to 8 s");
}

/// One round of [`a_silence_holds_replies_already_queued`] through a new
/// proxy delaying replies by `delay`: the error of reading a reply after
/// the silence, or `None` if the delayed reply was due before the silence
/// began.
fn silence_behind_a_delay(server: &TestServer, delay: Duration) -> Option<io::Error> {
    let proxy = FaultProxy::start(server.addr()).expect("start proxy");
    let mut stream = connect(proxy.addr());
    assert_ne!(handshake(&mut stream).session_id, 0);
    proxy.set_mode(ProxyMode::Delay(delay));
    let missing = ExistsRequest {
        path: "/missing".into(),
        watch: false,
    };
    send_request(&mut stream, 1, OpCode::Exists, &missing);
    // Its NoNode reply has reached the proxy, which holds it for `delay`.
    wait_until("the reply at the proxy", IO_TIMEOUT + 2 * delay, || {
        !proxy.error_replies().is_empty()
    });
    let queued_at = proxy.error_replies()[0].0;
    proxy.silence_from_request(|op| op == OpCode::GetData as i32);
    let get = GetDataRequest {
        path: "/".into(),
        watch: false,
    };
    send_request(&mut stream, 2, OpCode::GetData, &get);
    wait_until("the silencing request", IO_TIMEOUT, || {
        proxy.requests_seen(OpCode::GetData as i32) == 1
    });
    // The proxy counts the request a moment before it freezes: a margin
    // of a quarter of the delay keeps the reply queued past that moment.
    if queued_at.elapsed() >= delay * 3 / 4 {
        return None;
    }
    stream
        .set_read_timeout(Some(delay + Duration::from_secs(1)))
        .expect("timeout");
    Some(read_frame(&mut stream).expect_err("a reply queued before the silence came"))
}

/// A server that fails to start says why, and keeps its log for a look.
#[test]
fn a_failed_start_keeps_the_log_it_names() {
    let err = TestServer::builder()
        .config("tickTime", "not-a-number")
        .start()
        .expect_err("a server with a broken config");
    let zklock::testing::Error::Exited { log, tail, .. } = &err else {
        panic!("not an exit: {err:?}");
    };
    assert!(log.is_file(), "{} is gone", log.display());
    assert!(tail.contains("Invalid config"), "{tail}");
    let _ = std::fs::remove_dir_all(log.parent().expect("the server's directory"));
}
