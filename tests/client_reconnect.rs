//! Reconnecting: the session moves to another ensemble member with its
//! ephemeral nodes; requests in flight when a connection drops fail with
//! ConnectionLoss and are never resent.

mod common;

use std::time::{Duration, Instant};

use common::{builder, mk, open, proxy, server, states_until, wait_connected, wait_until, WAIT};
use zklock::proto::OpCode;
use zklock::testing::{FakeName, FaultProxy, Pause, ProxyMode, ReleasedOnDrop};
use zklock::{CreateMode, Deadline, Error, Mutex, State};

#[test]
fn the_session_and_its_ephemerals_move_to_another_member() {
    let zk = common::cluster();
    let c = builder()
        .session_timeout(Duration::from_secs(10))
        .connect(&zk.connect_string())
        .expect("connect to the ensemble");
    let session = c.session_id();
    let password = c.session_password();
    c.create("/lock", b"mine", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let seq = c
        .create("/job-", b"", &open(), CreateMode::EphemeralSequential)
        .expect("ephemeral sequential");
    let states = c.state_changes();

    let member = common::member_with_session(&zk, session);
    zk.kill(member).expect("kill the client's member");
    assert_eq!(
        states_until(&states, State::Disconnected),
        [State::Disconnected]
    );
    // A call made while disconnected waits for the reconnect.
    let during = c
        .create("/during", b"", &open(), CreateMode::Ephemeral)
        .expect("a create made while disconnected");
    assert_eq!(during, "/during");
    assert_eq!(states_until(&states, State::Connected), [State::Connected]);

    // The same session, elsewhere.
    assert_eq!(c.session_id(), session);
    assert_eq!(c.session_password(), password);
    let now = common::member_with_session(&zk, session);
    assert_ne!(now, member);
    let mut mine = c.get_ephemerals("/").expect("getEphemerals");
    mine.sort();
    assert_eq!(mine, ["/during".to_owned(), seq.clone(), "/lock".into()]);

    // Seen from a survivor: still this session's nodes.
    let survivor = (0..zk.size()).find(|&i| i != member).expect("a survivor");
    let other = common::connect(&zk.member_connect_string(survivor).expect("address"));
    other.sync("/").expect("sync");
    for path in ["/lock", seq.as_str(), "/during"] {
        let stat = other
            .exists(path)
            .expect("exists")
            .expect("the ephemeral survived");
        assert_eq!(stat.ephemeral_owner, session, "{path}");
    }
    assert_eq!(other.get_data("/lock").expect("get_data").0, b"mine");

    // And they go when the session is closed.
    c.close().expect("close");
    other.sync("/").expect("sync");
    for path in ["/lock", seq.as_str(), "/during"] {
        assert_eq!(other.exists(path).expect("exists"), None, "{path}");
    }
}

#[test]
fn a_request_in_flight_at_a_cut_fails_and_is_not_resent() {
    let zk = server();
    let gate = proxy(&zk);
    // Long enough to stay alive while kept away below.
    let c = builder()
        .session_timeout(Duration::from_secs(30))
        .connect(&gate.connect_string())
        .expect("connect");
    let session = c.session_id();
    let observer = common::connect(&zk.connect_string());
    mk(&c, "/seq", b"");

    // The create reaches the server, the connection is cut before its reply,
    // and the client is kept away until the outcome is known.
    gate.refuse(true);
    gate.cut_after_request(|op| op == OpCode::Create.code());
    assert_eq!(
        c.create("/seq/n-", b"", &open(), CreateMode::PersistentSequential),
        Err(Error::ConnectionLoss)
    );
    assert!(!gate.is_cut_armed());
    // Normally the server applies it. (Rarely, on a loaded machine, the
    // proxy's close resets the connection before the server has read the
    // request, which is then lost: the check below holds either way.)
    let applied = common::poll_until(Duration::from_secs(10), || {
        !observer.get_children("/seq").expect("children").is_empty()
    });
    let expected: &[&str] = if applied { &["n-0000000000"] } else { &[] };

    // Back: nothing is resent (a sequential create is not idempotent, so a
    // resend would have made one more node).
    gate.refuse(false);
    wait_connected(&c);
    assert_eq!(c.session_id(), session);
    c.sync("/").expect("sync");
    assert_eq!(c.get_children("/seq").expect("children"), expected);
    // The connection works as before.
    let next = c
        .create("/seq/n-", b"", &open(), CreateMode::PersistentSequential)
        .expect("create");
    assert_eq!(next, format!("/seq/n-000000000{}", expected.len()));
}

#[test]
fn a_request_stuck_in_a_partition_fails_and_is_not_resent() {
    let zk = server();
    let gate = proxy(&zk);
    let c = builder()
        .session_timeout(Duration::from_secs(6))
        .connect(&gate.connect_string())
        .expect("connect");
    let session = c.session_id();
    let states = c.state_changes();

    gate.set_mode(ProxyMode::Blackhole);
    let started = Instant::now();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let caller = c.clone();
    let thread = std::thread::spawn(move || {
        let _ = tx.send(caller.create("/lost", b"", &open(), CreateMode::Persistent));
    });
    // No reply ever comes: the client gives up on the connection after its
    // read timeout (2/3 of the session timeout) and fails the request.
    let result = rx.recv_timeout(WAIT).expect("the call returned");
    assert_eq!(result, Err(Error::ConnectionLoss));
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    thread.join().expect("caller thread");
    assert_eq!(
        states_until(&states, State::Disconnected),
        [State::Disconnected]
    );

    // Drop the bytes the partition held, heal, and reconnect in time.
    gate.cut();
    gate.set_mode(ProxyMode::Pass);
    assert_eq!(states_until(&states, State::Connected), [State::Connected]);
    assert_eq!(c.session_id(), session);
    c.sync("/").expect("sync");
    assert_eq!(
        c.exists("/lost").expect("exists"),
        None,
        "the request was resent"
    );
    mk(&c, "/lost", b"");
}

#[test]
fn a_dead_host_in_the_connect_string_is_skipped() {
    let zk = server();
    let dead = format!("127.0.0.1:{}", common::dead_port());
    for connect_string in [
        format!("{dead},{}", zk.connect_string()),
        format!("{},{dead}", zk.connect_string()),
    ] {
        let started = Instant::now();
        let c = builder()
            .connect_timeout(Duration::from_secs(1))
            .connect(&connect_string)
            .expect("connect past a dead host");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        mk(&c, &format!("/n{}", c.session_id()), b"");
    }
}

/// With `request_timeout`, a call whose reply does not come in time fails
/// with `Timeout` naming that deadline, long before a silent connection
/// would be given up; the client then reconnects and resumes the session.
#[test]
fn a_call_past_its_request_timeout_fails_with_it_and_the_session_goes_on() {
    let zk = server();
    let gate = proxy(&zk);
    let after = Duration::from_millis(300);
    let c = builder()
        .session_timeout(Duration::from_secs(10))
        .request_timeout(Some(after))
        .connect(&gate.connect_string())
        .expect("connect through the proxy");
    let session = c.session_id();
    mk(&c, "/slow", b"v");
    gate.set_mode(ProxyMode::Blackhole);
    let (tx, rx) = std::sync::mpsc::channel();
    let caller = {
        let c = c.clone();
        std::thread::spawn(move || tx.send(c.get_data("/slow").map(|(d, _)| d)))
    };
    let result = rx.recv_timeout(WAIT).expect("the call to return");
    caller.join().unwrap().expect("the result was received");
    assert_eq!(
        result,
        Err(Error::Timeout {
            deadline: Deadline::Request,
            after
        })
    );
    gate.set_mode(ProxyMode::Pass);
    wait_connected(&c);
    assert_eq!(c.get_data("/slow").unwrap().0, b"v");
    assert_eq!(c.session_id(), session);
}

/// A close on a connection gone silent, with a short connect timeout (the
/// close's deadline), ends at that deadline. The I/O thread, blocked in a
/// read begun before the close (with up to a second's timeout, the
/// connection being idle), used to notice the deadline only when that read
/// ended: about a second after the last reply, five times the deadline.
#[test]
fn a_close_on_a_silent_connection_ends_at_a_short_connect_timeout() {
    let zk = server();
    // A fresh server's first session can take longer than the short
    // connect timeout on a loaded machine (a cold JVM): one first, with
    // the default.
    builder()
        .connect(&zk.connect_string())
        .expect("a first session")
        .close()
        .expect("close the first session");
    let gate = proxy(&zk);
    let connect_timeout = Duration::from_millis(200);
    let c = builder()
        .session_timeout(Duration::from_secs(10))
        .connect_timeout(connect_timeout)
        .connect(&gate.connect_string())
        .expect("connect through the proxy");
    // A reply: the I/O thread has just begun a new read.
    c.sync("/").unwrap();
    gate.set_mode(ProxyMode::Blackhole);
    let started = std::time::Instant::now();
    let closed = c.close();
    let took = started.elapsed();
    assert_eq!(
        closed,
        Err(Error::Timeout {
            deadline: Deadline::Close,
            after: connect_timeout
        })
    );
    assert!(took >= connect_timeout, "{took:?}");
    // The old code took about 1 s; this leaves a loaded machine room.
    assert!(took < Duration::from_millis(850), "the close took {took:?}");
    assert_eq!(c.state(), State::Closed);
}

/// closeSession sent on a connection gone silent (a partition, the TCP
/// connection still up) is never answered there, and that connection is
/// given up on only at the read timeout (2/3 of the session timeout),
/// after the close's own deadline (the connect timeout). With another host
/// in the connect string, the close moves on to it before then and is
/// confirmed there: the lock node goes at once, not when the session
/// times out.
#[test]
fn a_close_on_a_silent_connection_is_confirmed_through_another_host() {
    let zk = server();
    // Two routes to one server: what the close needs is another host in
    // reach, which another member would be too.
    let gates = [proxy(&zk), proxy(&zk)];
    let c = builder()
        .connect(&format!(
            "{},{}",
            gates[0].connect_string(),
            gates[1].connect_string()
        ))
        .expect("connect through the proxies");
    let read_timeout = c.negotiated_timeout().expect("negotiated") * 2 / 3;
    assert!(
        read_timeout > common::CONNECT_TIMEOUT,
        "the silent connection must outlive the close's deadline: {read_timeout:?}"
    );
    let session = c.session_id();
    let mutex = Mutex::new(&c, "/silent-close").expect("mutex");
    let guard = mutex.lock().expect("lock");
    let node = guard.node().to_owned();
    let observer = common::connect(&zk.connect_string());
    let owner = |path: &str| {
        observer.sync("/").expect("sync");
        observer
            .exists(path)
            .expect("exists")
            .map(|stat| stat.ephemeral_owner)
    };
    assert_eq!(owner(&node), Some(session));

    let silent = common::connected_proxy(&gates);
    let other = 1 - silent;
    gates[silent].set_mode(ProxyMode::Blackhole);
    let closed = c.close();
    // Read before anything else can time out: the session, unconfirmed,
    // keeps the node until the session timeout.
    let owner_after = owner(&node);
    assert_eq!(
        (closed, owner_after),
        (Ok(()), None),
        "the close is confirmed and the lock node goes with it"
    );
    assert_eq!(c.state(), State::Closed);
    let close = OpCode::CloseSession.code();
    assert_eq!(
        gates[other].requests_seen(close),
        1,
        "confirmed through the other host"
    );
    drop(guard);
}

/// A resolver that does not answer (a dead name server; here a pause point
/// holds the resolution) delays neither the session's own expiry nor a
/// `close`: the client resolves and connects on a thread of its own.
#[test]
fn a_resolver_that_does_not_answer_holds_up_neither_the_expiry_nor_close() {
    let zk = server();
    let host = zk.connect_string();
    let c = builder()
        .session_timeout(Duration::from_secs(4))
        .connect(&host)
        .expect("connect");
    let states = c.state_changes();
    let resolving = ReleasedOnDrop(Pause::arm_resolving(&host));
    zk.kill().expect("kill the server");
    assert!(
        resolving.0.wait_reached(WAIT),
        "the reconnect resolves the host"
    );
    // The client's own clock ends the session while the name is still
    // being resolved.
    assert_eq!(
        states_until(&states, State::Expired),
        [State::Disconnected, State::Expired]
    );
    let started = Instant::now();
    c.close().expect("a close after the session ended");
    assert!(started.elapsed() < WAIT, "close waits for no resolver");
    assert_eq!(c.exists("/").map(|_| ()), Err(Error::SessionExpired));
}

/// A close while the name is still being resolved ends at the close's own
/// deadline, saying no server confirmed it.
#[test]
fn a_close_during_a_resolution_ends_at_its_own_deadline() {
    let zk = server();
    let host = zk.connect_string();
    let c = builder()
        .session_timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(1))
        .connect(&host)
        .expect("connect");
    let resolving = ReleasedOnDrop(Pause::arm_resolving(&host));
    zk.kill().expect("kill the server");
    assert!(
        resolving.0.wait_reached(WAIT),
        "the reconnect resolves the host"
    );
    let started = Instant::now();
    assert_eq!(
        c.close(),
        Err(Error::Timeout {
            deadline: Deadline::Close,
            after: Duration::from_secs(1),
        })
    );
    assert!(started.elapsed() < WAIT, "close waits for no resolver");
}

/// `connect` gives up at its budget even while the resolver is silent,
/// and says where the attempt was.
#[test]
fn connect_gives_up_at_its_budget_while_the_name_is_still_being_resolved() {
    let zk = server();
    let host = zk.connect_string();
    let resolving = ReleasedOnDrop(Pause::arm_resolving(&host));
    let started = Instant::now();
    let error = builder()
        .connect_timeout(Duration::from_secs(1))
        .connect(&host)
        .expect_err("no address to connect to");
    assert!(started.elapsed() < WAIT, "connect waits for no resolver");
    assert!(resolving.0.wait_reached(WAIT), "the lookup was held");
    assert_eq!(
        error,
        Error::ConnectFailed {
            hosts: host.clone(),
            timeout: Duration::from_secs(1),
            last_error: format!("{host}: its name was still being resolved"),
        }
    );
}

/// A name lookup slower than the connect timeout (a first name server
/// that does not answer, before a second one that does) leaves the TCP
/// connect and the handshake their whole timeout: the reconnect succeeds
/// on its first connection. (Counting the lookup, every attempt's
/// handshake was given up on as it began.)
#[test]
fn a_slow_name_lookup_leaves_the_handshake_its_whole_timeout() {
    let zk = server();
    let gate = proxy(&zk);
    let host = gate.connect_string();
    let c = builder()
        .session_timeout(Duration::from_secs(6))
        .connect_timeout(Duration::from_secs(1))
        .connect(&host)
        .expect("connect");
    let states = c.state_changes();
    assert_eq!(gate.connections_accepted(), 1);
    let resolving = ReleasedOnDrop(Pause::arm_resolving(&host));
    gate.cut();
    assert!(
        resolving.0.wait_reached(WAIT),
        "the reconnect resolves the host"
    );
    // The resolver's slowness, not a synchronisation: longer than the
    // attempt's 1 s.
    std::thread::sleep(Duration::from_millis(1500));
    resolving.0.release();
    assert_eq!(
        states_until(&states, State::Connected),
        [State::Disconnected, State::Connected]
    );
    assert_eq!(
        gate.connections_accepted(),
        2,
        "the reconnect's first connection is kept"
    );
    c.exists("/").expect("the session goes on");
}

/// A name that resolves to several addresses, one of them silent (a member
/// blackholed behind a DNS round robin), still connects within `connect`'s
/// budget: the name gets a turn, and a connect timeout, for each of its
/// addresses. Before, it got one attempt at a random address, and a client
/// whose pick was the silent one failed.
#[test]
fn a_name_with_a_silent_address_connects_at_another_of_its_addresses() {
    const CLIENTS: usize = 6;
    const MAX_CLIENTS: usize = 24;
    let zk = server();
    let silent = proxy(&zk);
    silent.set_mode(ProxyMode::Blackhole);
    let name = FakeName::new(
        &format!("round-robin-{}.zklock.test:2181", std::process::id()),
        vec![silent.addr(), zk.addr()],
    );
    // Each client starts at a random address: all of them connecting means
    // that those which started at the silent one went on to the other (on
    // the old code, six connect one time in 64). More are made until one
    // has started there, so that the test cannot pass without it.
    let mut clients = 0;
    while clients < CLIENTS || silent.connections_accepted() == 0 {
        assert!(
            clients < MAX_CLIENTS,
            "no client started at the silent address"
        );
        let c = builder()
            .connect_timeout(Duration::from_secs(1))
            .connect(name.host())
            .unwrap_or_else(|e| panic!("client {clients}: {e}"));
        assert!(c.state().is_connected());
        c.close().unwrap();
        clients += 1;
    }
}

/// A host whose resolver does not answer holds up neither `connect` nor a
/// reconnect through another host: its attempt gives up on the lookup at
/// the attempt's timeout and the next host is tried, while the lookup goes
/// on, the only one for that host (before, the I/O thread waited for it:
/// `connect` failed, and a reconnect waited past the session's expiry).
#[test]
fn a_host_whose_resolver_does_not_answer_holds_up_no_other_host() {
    const MAX_CLIENTS: usize = 24;
    let zk = server();
    let gate = proxy(&zk);
    let hung = FakeName::new(
        &format!("resolver-hangs-{}.zklock.test:2181", std::process::id()),
        vec![zk.addr()],
    );
    let hosts = format!("{},{}", hung.host(), gate.connect_string());
    // Each client starts at a random host; more are made until one has
    // started at the hung one, so that the test cannot pass without it. A
    // client that started at the other never looks the hung name up, and
    // leaves the pause armed for the next.
    let resolving = ReleasedOnDrop(Pause::arm_resolving(hung.host()));
    let mut clients = 0;
    let c = loop {
        assert!(clients < MAX_CLIENTS, "no client started at the hung host");
        clients += 1;
        let c = builder()
            .session_timeout(Duration::from_secs(6))
            .connect_timeout(Duration::from_secs(1))
            .connect(&hosts)
            .unwrap_or_else(|e| panic!("client {clients}: {e}"));
        if resolving.0.wait_reached(Duration::ZERO) {
            break c;
        }
        c.close().expect("close");
    };
    let states = c.state_changes();
    let accepted = gate.connections_accepted();
    gate.cut();
    // A lost connection goes on to the other host first: the hung one,
    // whose lookup is still held.
    assert_eq!(
        states_until(&states, State::Connected),
        [State::Disconnected, State::Connected]
    );
    // A second lookup of the hung name would have answered, and the
    // session would be back through that name instead.
    assert_eq!(
        gate.connections_accepted(),
        accepted + 1,
        "back through the host that resolves"
    );
    c.exists("/").expect("the session goes on");
}

/// A client on two proxies to one server, holding an ephemeral node, with
/// a 4 s connect timeout (so the close's deadline) and a session long
/// enough that an attempt may take all of it. `stall` gets the proxy the
/// client is connected through, to cut it and leave the reconnect stalled
/// on that host, and returns once it is, with what keeps it stalled;
/// meanwhile the other host refuses connections. Then the other host is
/// opened again and the client closed: the stalled attempt gives way at
/// its share of the close's time (2 s), and the other host confirms the
/// close, which deletes the node at once. (Before, the stalled attempt
/// kept the whole timeout it started with, 4 s, and the close gave up
/// unconfirmed, the node left until the session timed out.)
fn a_close_gives_way_at_a_stalled_attempt(
    stall: impl FnOnce(FaultProxy) -> Box<dyn std::any::Any>,
) {
    let zk = server();
    let mut gates = vec![proxy(&zk), proxy(&zk)];
    let c = builder()
        .session_timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(4))
        .connect(&format!(
            "{},{}",
            gates[0].connect_string(),
            gates[1].connect_string()
        ))
        .expect("connect through the proxies");
    let node = c
        .create("/stalled-close", b"", &open(), CreateMode::Ephemeral)
        .expect("an ephemeral node");
    let on = common::connected_proxy(&gates);
    let stalled = gates.swap_remove(on);
    let other = gates.pop().expect("the other proxy");
    other.refuse(true);
    let _stalling = stall(stalled);
    other.refuse(false);
    let closed = c.close();
    let observer = common::connect(&zk.connect_string());
    observer.sync("/").expect("sync");
    let left = observer.exists(&node).expect("exists").is_some();
    assert_eq!(
        (closed, left),
        (Ok(()), false),
        "the close is confirmed through the other host and the node goes"
    );
    assert_eq!(other.requests_seen(OpCode::CloseSession.code()), 1);
}

/// The stalled attempt is a name lookup that does not answer.
#[test]
fn a_close_during_a_lookup_that_does_not_answer_is_confirmed_through_another_host() {
    a_close_gives_way_at_a_stalled_attempt(|gate| {
        let resolving = ReleasedOnDrop(Pause::arm_resolving(&gate.connect_string()));
        gate.cut();
        assert!(
            resolving.0.wait_reached(WAIT),
            "the reconnect looks the host up"
        );
        Box::new((resolving, gate))
    });
}

/// The stalled attempt is a handshake that a hung server never answers.
#[test]
fn a_close_during_a_handshake_that_hangs_is_confirmed_through_another_host() {
    a_close_gives_way_at_a_stalled_attempt(|gate| {
        gate.set_mode(ProxyMode::Blackhole);
        let before = gate.connections_accepted();
        gate.cut();
        wait_until("a handshake hanging on the host", WAIT, || {
            gate.connections_accepted() > before
        });
        Box::new(gate)
    });
}

/// The stalled attempt is a TCP connect to a host that drops it (its
/// SYNs): the proxy is stopped, and a listener whose accept queue is full
/// takes its port.
#[test]
fn a_close_during_a_tcp_connect_that_hangs_is_confirmed_through_another_host() {
    use socket2::{Domain, Socket, Type};
    a_close_gives_way_at_a_stalled_attempt(|gate| {
        let addr = gate.addr();
        // The port is free only between this drop and the bind below: an
        // outgoing connection of another process landing on it then is
        // the one (unlikely) way this fails, at the bind, saying so.
        drop(gate);
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
        listener.set_reuse_address(true).expect("SO_REUSEADDR");
        listener.bind(&addr.into()).expect("the proxy's port");
        // A backlog of 0 holds one connection: the next SYNs are dropped.
        listener.listen(0).expect("listen");
        // The client's reconnect may take the place first: it is then
        // accepted and dropped (a failed handshake), and the test's
        // connection tries again.
        let mut filler = None;
        for _ in 0..5 {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(stream) => {
                    filler = Some(stream);
                    break;
                }
                Err(_) => drop(listener.accept()),
            }
        }
        let filler = filler.expect("the accept queue filled");
        wait_until("a TCP connect hanging on the host", WAIT, || {
            connecting_to(addr.port())
        });
        Box::new((listener, filler))
    });
}

/// Whether a TCP connect to `port` on loopback is under way (SYN sent, no
/// answer yet), from `/proc/net/tcp`.
fn connecting_to(port: u16) -> bool {
    const SYN_SENT: &str = "02";
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let remote = format!(":{port:04X}");
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        matches!(fields.get(2..4), Some([rem, st]) if rem.ends_with(&remote) && *st == SYN_SENT)
    })
}
