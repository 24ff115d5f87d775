//! Session expiry: reported exactly once, then every call fails fast with
//! SessionExpired and the ephemeral nodes are gone; and connect failures.

mod common;

use std::time::{Duration, Instant};

use common::{
    builder, connect, expect_silence, fails_fast, open, proxy, server, states_until, wait_until,
    WAIT,
};
use zklock::testing::ProxyMode;
use zklock::{Client, CreateMode, Error, EventType, KeeperState, State};

/// What every call on an expired client must do.
fn assert_expired(c: &Client) {
    assert_eq!(c.state(), State::Expired);
    let expired = Error::SessionExpired;
    fails_fast("get_data", &expired, || c.get_data("/"));
    fails_fast("create", &expired, || {
        c.create("/x", b"", &open(), CreateMode::Persistent)
    });
    fails_fast("exists_w", &expired, || c.exists_w("/x").map(|(s, _)| s));
    fails_fast("multi", &expired, || {
        c.multi(&[zklock::Op::check("/", Some(0))])
    });
    fails_fast("wait_connected", &expired, || c.wait_connected(WAIT));
}

#[test]
fn a_partition_longer_than_the_session_timeout_expires_the_session() {
    let zk = server();
    let gate = proxy(&zk);
    let c = builder()
        .session_timeout(Duration::from_millis(2000))
        .connect_timeout(Duration::from_millis(1000))
        .connect(&gate.connect_string())
        .expect("connect");
    let (id, password) = (c.session_id(), c.session_password());
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let (_, _, watch) = c.get_data_w("/eph").expect("get_data_w");
    let states = c.state_changes();
    let observer = connect(&zk.connect_string());

    // Partitioned: the server hears nothing and expires the session.
    gate.set_mode(ProxyMode::Blackhole);
    wait_until("the server to expire the session", WAIT, || {
        observer.exists("/eph").expect("exists").is_none()
    });
    // Healed: the client learns of the expiry on its next handshake.
    gate.cut();
    gate.set_mode(ProxyMode::Pass);
    assert_eq!(
        states_until(&states, State::Expired),
        [State::Disconnected, State::Expired]
    );
    let last = common::next_event(&watch, "the end of the session");
    assert_eq!(
        (last.event_type, last.state),
        (EventType::None, KeeperState::Expired)
    );
    assert_expired(&c);
    // Reported once: no state after Expired, whatever else happens.
    c.close().expect("close after expiry");
    expect_silence(&states, "states after Expired");
    assert_eq!(c.state(), State::Expired);

    // The session is gone for everyone.
    match builder()
        .session(id, password)
        .connect(&zk.connect_string())
    {
        Err(Error::SessionExpired) => {}
        other => panic!("resuming an expired session gave {other:?}"),
    }
    assert_eq!(
        observer.get_ephemerals("/").expect("ephemerals"),
        Vec::<String>::new()
    );
}

#[test]
fn closing_the_session_from_another_connection_expires_it() {
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let states = c.state_changes();
    let observer = connect(&zk.connect_string());

    // The server gives a session to its newest connection and drops the
    // older one, so two live clients of one session keep taking it from
    // each other. Keep the first one out while the second does its work.
    gate.refuse(true);
    gate.cut();
    assert_eq!(
        states_until(&states, State::Disconnected),
        [State::Disconnected]
    );
    let twin = builder()
        .session(c.session_id(), c.session_password())
        .connect(&zk.connect_string())
        .expect("resume the session on a second connection");
    assert_eq!(twin.session_id(), c.session_id());
    assert_eq!(
        twin.get_ephemerals("/").expect("the same session's nodes"),
        ["/eph"]
    );
    twin.close().expect("close the twin");
    assert_eq!(twin.state(), State::Closed);
    assert_eq!(observer.exists("/eph").expect("exists"), None);

    gate.refuse(false);
    assert_eq!(states_until(&states, State::Expired), [State::Expired]);
    assert_expired(&c);
    expect_silence(&states, "states after Expired");
}

/// A connect that takes over a session and fails (no server in time)
/// leaves the session to its owner: a server that answers just after the
/// connect gave up gets no closeSession, and the owner's ephemeral node
/// (a lock, say) stays.
#[test]
fn a_failed_connect_taking_over_a_session_leaves_it_to_its_owner() {
    let zk = server();
    let owner = connect(&zk.connect_string());
    owner
        .create("/owned", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let gate = proxy(&zk);
    gate.refuse(true);
    let timeout = Duration::from_millis(1000);
    let (id, password) = (owner.session_id(), owner.session_password());
    let connect_string = gate.connect_string();
    let started = Instant::now();
    let (began_tx, began) = crossbeam_channel::bounded(1);
    let taker = std::thread::spawn(move || {
        let _ = began_tx.send(Instant::now());
        builder()
            .connect_timeout(timeout)
            .session(id, password)
            .connect(&connect_string)
    });
    // Well past the connect's budget (which starts a moment after its
    // thread does), connections go through: a client still closing the
    // session, for up to another connect timeout, would reach the server.
    let began = began
        .recv_timeout(WAIT)
        .expect("the taker's thread to start");
    wait_until("the connect's budget to pass", WAIT, || {
        began.elapsed() >= timeout + Duration::from_millis(500)
    });
    gate.refuse(false);
    let result = taker.join().expect("the taker's thread");
    let took = started.elapsed();
    assert!(
        matches!(result, Err(Error::ConnectFailed { .. })),
        "{result:?}"
    );
    assert!(took < timeout + Duration::from_millis(1500), "{took:?}");
    assert_eq!(
        owner
            .get_ephemerals("/")
            .expect("the owner's session lives"),
        ["/owned"]
    );
    assert_eq!(owner.session_id(), id);
    assert_eq!(owner.state(), State::Connected);
}

#[test]
fn connecting_to_dead_hosts_fails_within_the_bound() {
    let dead = format!("127.0.0.1:{}", common::dead_port());
    let timeout = Duration::from_millis(1000);
    let started = Instant::now();
    match builder().connect_timeout(timeout).connect(&dead) {
        Err(Error::ConnectFailed {
            hosts,
            timeout: t,
            last_error,
        }) => {
            assert_eq!(hosts, dead);
            assert_eq!(t, timeout);
            assert!(last_error.contains(&dead), "{last_error}");
        }
        other => panic!("{other:?}"),
    }
    let took = started.elapsed();
    assert!(
        took >= timeout && took < timeout + Duration::from_millis(1500),
        "{took:?}"
    );

    // Two hosts: one connect timeout each, and both are named.
    let dead2 = format!("127.0.0.1:{}", common::dead_port());
    let started = Instant::now();
    match builder()
        .connect_timeout(timeout)
        .connect(&format!("{dead},{dead2}"))
    {
        Err(Error::ConnectFailed {
            hosts, timeout: t, ..
        }) => {
            assert!(hosts.contains(&dead) && hosts.contains(&dead2), "{hosts}");
            assert_eq!(t, timeout * 2);
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < timeout * 2 + Duration::from_millis(1500));

    // A server that accepts but never answers the handshake.
    let zk = server();
    let gate = proxy(&zk);
    gate.set_mode(ProxyMode::Blackhole);
    let started = Instant::now();
    match builder()
        .connect_timeout(timeout)
        .connect(&gate.connect_string())
    {
        Err(Error::ConnectFailed { hosts, .. }) => assert_eq!(hosts, gate.connect_string()),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < timeout + Duration::from_millis(1500));
}
