//! Read-only servers: an ensemble member cut off from its quorum, with
//! `readonlymode.enabled`, serves the sessions it creates (reads only), and
//! refuses the ensemble's sessions, which it can neither resume nor close.

mod common;

use std::time::{Duration, Instant};

use common::{builder, connect, mk, open, wait_until, WAIT};
use zklock::testing::{FaultProxy, ServerMode, TestCluster, TestServer};
use zklock::{Client, CreateMode, Deadline, Error, State};

/// Long enough to outlive the quorum's absence and return.
const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

fn client(connect_string: &str, connect_timeout: Duration) -> Client {
    builder()
        .can_be_read_only(true)
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(connect_timeout)
        .connect(connect_string)
        .expect("connect to the first member")
}

/// An ensemble whose members turn read-only when cut off from its quorum;
/// `partitionable` for [`TestCluster::isolate`].
fn read_only_ensemble(partitionable: bool) -> TestCluster {
    common::abort_if_hung();
    TestCluster::builder()
        .partitionable(partitionable)
        .system_property("readonlymode.enabled", "true")
        // Without local sessions, a read-only member creates no session at
        // all: it answers the handshake with NOTREADONLY.
        .config("localSessionsEnabled", "true")
        // And the sessions that create ephemeral nodes become global ones.
        .config("localSessionsUpgradingEnabled", "true")
        .max_session_timeout(60_000)
        .start()
        .expect("start an ensemble that allows read-only members")
}

/// Stops the second and third members: the first is left read-only.
fn leave_the_first_member_alone(zk: &TestCluster) {
    zk.stop(1).expect("stop the second member");
    zk.stop(2).expect("stop the third member");
    wait_until("the first member to turn read-only", WAIT, || {
        zk.mode(0) == Some(ServerMode::ReadOnly)
    });
}

#[test]
fn a_read_only_member_serves_its_own_sessions_and_cannot_close_the_ensembles() {
    let zk = read_only_ensemble(false);
    // On the first member alone, so that only a read-only server is left.
    let first = zk.member_connect_string(0).expect("first member");
    let given_up = client(&first, Duration::from_secs(2));
    let confirmed = client(&first, WAIT * 2);
    given_up
        .create("/given-up", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral of the session whose close is not confirmed");
    confirmed
        .create("/confirmed", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral of the session whose close is confirmed");
    confirmed
        .create("/data", b"x", &open(), CreateMode::Persistent)
        .expect("a node to read");
    let given_up_session = given_up.session_id();

    leave_the_first_member_alone(&zk);

    // A session it creates is read-only.
    let local = client(&first, WAIT);
    assert_eq!(local.state(), State::ConnectedReadOnly);
    assert_eq!(local.get_data("/data").expect("a read").0, b"x");
    assert_eq!(
        local.create("/w", b"", &open(), CreateMode::Persistent),
        Err(Error::NotReadOnly)
    );
    // A lock cannot be had there: every kind of attempt fails at once,
    // waiting for nothing and leaving no node.
    let mutex = zklock::Mutex::new(&local, "/lock").unwrap();
    assert!(matches!(mutex.lock(), Err(Error::NotReadOnly)));
    assert!(matches!(mutex.try_lock_for(WAIT), Err(Error::NotReadOnly)));
    let rw = zklock::RwLock::new(&local, "/lock").unwrap();
    assert!(matches!(rw.read(), Err(Error::NotReadOnly)));
    assert!(matches!(rw.write(), Err(Error::NotReadOnly)));
    assert_eq!(local.state(), State::ConnectedReadOnly);
    // It closes on the read-only member itself.
    assert_eq!(local.close(), Ok(()));

    // A session of the ensemble is refused: not taken for read-only.
    assert_eq!(given_up.state(), State::Disconnected);
    // No read-write server confirms its close in time: reported, not claimed.
    assert_eq!(
        given_up.close(),
        Err(Error::Timeout {
            deadline: Deadline::Close,
            after: Duration::from_secs(2),
        })
    );
    assert_eq!(given_up.state(), State::Closed);

    // With the quorum back, the other close reaches a read-write server.
    let closer = std::thread::spawn(move || confirmed.close());
    zk.start(1).expect("restart the second member");
    zk.start(2).expect("restart the third member");
    assert_eq!(closer.join().expect("the closing thread"), Ok(()));

    let check = builder()
        .connect(&zk.connect_string())
        .expect("connect after the quorum's return");
    assert_eq!(
        check.exists("/confirmed").expect("exists"),
        None,
        "a confirmed close deleted its ephemeral node"
    );
    assert_eq!(
        check.exists("/lock").expect("exists"),
        None,
        "no lock node or directory from the read-only attempts"
    );
    let left = check
        .exists("/given-up")
        .expect("exists")
        .expect("the unconfirmed close's node stays until its session times out");
    assert_eq!(left.ephemeral_owner, given_up_session);
}

/// A client on a read-only member asks the other hosts whether they are
/// read-write, and moves to the first that is, while the member stays
/// read-only, as on the far side of a partition. Here the first member is
/// left alone and read-only, then cut off (`TestCluster::isolate`), and the
/// other two restart as a quorum of their own; the client reaches one of
/// them through a proxy that refuses connections until the client is
/// read-only. The session the read-only member created is not valid
/// elsewhere: the client is given a new one there, and writes and locks
/// work again.
///
/// The read-write host is a member of the same ensemble, as in a real
/// partition, and has applied a write of the new quorum's: a server behind
/// the zxid the client has seen would rightly refuse it.
#[test]
fn a_read_only_client_moves_to_a_read_write_server_once_one_answers() {
    let zk = read_only_ensemble(true);
    // Rejoining, the first member syncs from the running leader and takes
    // its epoch's zxid, which a follower synced at the start by diff lacks:
    // the case where the write on the majority side below is needed.
    zk.stop(0).expect("stop the first member");
    zk.start(0).expect("restart the first member");
    leave_the_first_member_alone(&zk);
    zk.isolate(0).expect("cut the first member off");
    let first = zk.member_connect_string(0).expect("first member");
    let gate = FaultProxy::start(zk.member_addr(1).unwrap()).unwrap();
    gate.refuse(true);
    // The gate refuses connections: only the first member takes one.
    let client = client(&format!("{first},{}", gate.connect_string()), WAIT);
    assert_eq!(client.state(), State::ConnectedReadOnly);
    let read_only_since = Instant::now();
    let read_only_session = client.session_id();
    let states = client.state_changes();
    assert_eq!(
        client.create("/moved", b"", &open(), CreateMode::Persistent),
        Err(Error::NotReadOnly)
    );

    // Each start waits for a quorum, which takes both.
    std::thread::scope(|s| {
        let second = s.spawn(|| zk.start(1));
        zk.start(2).expect("restart the third member");
        second
            .join()
            .expect("the starting thread")
            .expect("restart the second member");
    });
    assert_eq!(zk.mode(0), Some(ServerMode::ReadOnly), "still apart");
    // The majority side is written to, as it would be in a partition. Until
    // then a follower's last zxid can be below the one the client saw on the
    // read-only member (a follower synced by diff keeps the zxid it loaded
    // from disk until its first transaction of the new epoch), and it would
    // rightly refuse the client. Written through the gated member itself, so
    // that it has applied the write.
    let majority = connect(&zk.member_connect_string(1).unwrap());
    mk(&majority, "/majority", b"");
    assert_eq!(majority.close(), Ok(()));
    gate.refuse(false);
    // Probes back off by doubling, so the next is due within the time spent
    // read-only so far.
    let next_probe_within = read_only_since.elapsed() + WAIT;
    assert_eq!(
        states.recv_timeout(next_probe_within),
        Ok(State::Disconnected)
    );
    assert_eq!(states.recv_timeout(WAIT), Ok(State::Connected));
    assert_ne!(client.session_id(), read_only_session);
    assert_eq!(zk.mode(0), Some(ServerMode::ReadOnly), "still read-only");
    client
        .create("/moved", b"x", &open(), CreateMode::Persistent)
        .expect("a write once read-write");
    let mutex = zklock::Mutex::new(&client, "/lock").unwrap();
    let guard = mutex.try_lock_for(WAIT).expect("a lock attempt");
    assert!(guard.is_some(), "the lock is free on the read-write side");
    drop(guard);
    let check = builder()
        .connect(&zk.member_connect_string(2).unwrap())
        .expect("connect to the other read-write member");
    assert_eq!(check.get_data("/moved").expect("the write").0, b"x");
    assert!(check
        .get_children("/lock")
        .expect("the lock directory")
        .is_empty());
    assert_eq!(client.close(), Ok(()));
}

/// A server that answers `rw` but is behind the zxid the client has seen
/// refuses its handshake, as ZooKeeper refuses any client that has seen more
/// than it has. The client goes back to the read-only member, still reads
/// there, and asks again. Here the read-write host is a standalone server,
/// which no write of the ensemble's reaches: it stays behind, and the
/// client keeps returning to read-only until it closes.
#[test]
fn a_read_write_server_behind_the_clients_zxid_is_left_for_the_read_only_member() {
    let zk = read_only_ensemble(false);
    let writer = connect(&zk.connect_string());
    mk(&writer, "/data", b"x");
    assert_eq!(writer.close(), Ok(()));
    leave_the_first_member_alone(&zk);
    let behind = TestServer::builder()
        // It answers `isro` (with `rw`) only with read-only mode enabled.
        .system_property("readonlymode.enabled", "true")
        .start()
        .expect("start a read-write server of its own");
    let gate = FaultProxy::start(behind.addr()).unwrap();
    gate.refuse(true);
    let first = zk.member_connect_string(0).expect("first member");
    let client = client(&format!("{first},{}", gate.connect_string()), WAIT);
    assert_eq!(client.state(), State::ConnectedReadOnly);
    // The reply carries the member's zxid, which the standalone server,
    // having written nothing, is behind.
    assert_eq!(client.get_data("/data").expect("a read").0, b"x");
    let states = client.state_changes();

    gate.refuse(false);
    for round in 1..=2 {
        assert_eq!(
            states.recv_timeout(WAIT),
            Ok(State::Disconnected),
            "move {round}"
        );
        assert_eq!(
            states.recv_timeout(WAIT),
            Ok(State::ConnectedReadOnly),
            "back on the read-only member after refusal {round}"
        );
    }
    let log = std::fs::read_to_string(behind.log_path()).expect("the server's log");
    assert!(
        log.contains("Refusing session request"),
        "the server refused the handshakes"
    );
    assert_eq!(client.get_data("/data").expect("a read").0, b"x");
    assert_eq!(
        client.create("/w", b"", &open(), CreateMode::Persistent),
        Err(Error::NotReadOnly)
    );
    assert_eq!(client.close(), Ok(()));
}
