//! Locks on a server whose replies cannot be decoded. Such a reply drops
//! the connection, as a lost connection does, and the session lives on: it
//! says nothing of the lock node. A hold neither turns `Lost` on it nor
//! takes the watch its request was setting for set. And a server that times
//! out every question does not have it asked in a loop.
//!
//! The client goes through a proxy that sends its connections to a fake
//! server (`hostile::Hostile`), which resumes the session and answers an
//! exists with a reply whose body is missing, and then back to the real
//! server.

mod hostile;
mod lock_common;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use hostile::{reply_frame, After, Hostile, Peer};
use lock_common::*;
use zklock::proto::Record as _;
use zklock::proto::{CreateResponse, MultiResponse, OpCode, OpResult};
use zklock::testing::{FaultProxy, TestServer};
use zklock::{Client, LockState, Mutex, Stat, State, StateChanges};

/// The session timeout the fake server grants: a read timeout far beyond
/// anything these tests wait for.
const HOSTILE_TIMEOUT_MS: i32 = 30_000;
/// The session timeout the real server grants: the session must outlive
/// the detour, whose reconnects come ever slower (a connection dropped
/// soon after its handshake, again and again, backs off up to 2 s).
const REAL_SESSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Resumes the session, then answers the first exists with a header that
/// says OK and no body.
fn answer_exists_undecodably(peer: &mut Peer) -> io::Result<After> {
    peer.handshake(HOSTILE_TIMEOUT_MS)?;
    let xid = peer.expect_request(OpCode::Exists)?;
    peer.send(&reply_frame(xid, 0, &[]))?;
    Ok(After::Hold)
}

/// A real server, a gate (proxy) to it, a client through the gate, its
/// release linger `linger`, and the client's state changes: what every
/// test here starts from.
fn gated(linger: Duration) -> (TestServer, FaultProxy, Client, StateChanges<State>) {
    let real = server();
    let gate = proxy(&real);
    let client = connect_through(&gate, linger);
    let states = client.state_changes();
    (real, gate, client, states)
}

fn connect_through(gate: &FaultProxy, linger: Duration) -> Client {
    Client::builder()
        .session_timeout(REAL_SESSION_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(linger)
        .connect(&gate.connect_string())
        .unwrap_or_else(|e| panic!("connect through the gate: {e}"))
}

/// Waits for the next `want` among the client's state changes.
fn wait_state(states: &Receiver<State>, want: State) {
    let mut seen = Vec::new();
    while seen.len() < 100 {
        match states.recv_timeout(WAIT) {
            Ok(state) if state == want => return,
            Ok(state) => seen.push(state),
            Err(e) => panic!("no {want:?} after {seen:?}: {e}"),
        }
    }
    panic!("no {want:?} after {seen:?}");
}

/// Sends the client's connections to `hostile`: cuts the current one and
/// waits until the client is connected again, there.
fn detour(gate: &FaultProxy, states: &Receiver<State>, hostile: &Hostile) {
    gate.set_upstream(hostile.addr());
    gate.cut();
    wait_state(states, State::Disconnected);
    wait_state(states, State::Connected);
}

/// `path`'s Stat, asked until the answer comes from a real server: calls
/// made while the client leaves the fake one fail.
fn stat_from_real_server(client: &Client, path: &str) -> Stat {
    let mut found = None;
    wait_until(&format!("{path} read from the real server"), WAIT, || {
        found = client.exists(path).ok().flatten();
        found.is_some()
    });
    found.unwrap_or_else(|| unreachable!("wait_until returned"))
}

/// A token that only undecodable replies could have brought is not learnt
/// (0, which a fenced resource refuses), and the hold stays `Held`: back
/// on the real server, its node is there, the token is learnt, and the
/// release deletes the node.
#[test]
fn undecodable_replies_to_the_token_leave_the_hold_held() {
    const DIR: &str = "/hostile/token";
    // A release lingers, so the next acquisition joins it in one
    // transaction, which leaves the new node's Stat, and token, unknown.
    let (real, gate, client, states) = gated(Duration::from_secs(1));
    let mutex = Mutex::new(&client, DIR).unwrap();
    drop(mutex.lock().unwrap());
    let guard = mutex.lock().unwrap();
    assert_eq!(
        sent(&gate, OpCode::Multi),
        1,
        "the create joined the release"
    );

    let hostile = Hostile::start(answer_exists_undecodably);
    detour(&gate, &states, &hostile);
    assert_eq!(guard.fencing_token(), 0, "a token from undecodable replies");
    gate.set_upstream(real.addr());
    gate.cut();

    let stat = stat_from_real_server(&client, guard.node());
    assert_eq!(stat.ephemeral_owner, client.session_id());
    assert_eq!(guard.state(), LockState::Held);
    assert_eq!(guard.fencing_token(), stat.czxid);
    let node = guard.node().to_owned();
    guard.unlock().unwrap();
    assert_eq!(client.exists(&node), Ok(None));
}

/// The watch on a held node is set by the first question about the lock's
/// state. When that exists gets an undecodable reply, the watch is not set
/// (the server's answer was not understood, so no watcher was kept for the
/// next connection's setWatches), and it is set again: on the reconnect,
/// as a watch once wanted is, or when next asked. An operator's deletion
/// of the node is then seen, and the hold turns `Lost`.
#[test]
fn a_node_watch_with_an_undecodable_reply_is_set_again() {
    const DIR: &str = "/hostile/watch";
    let (real, gate, client, states) = gated(Duration::ZERO);
    let mutex = Mutex::new(&client, DIR).unwrap();
    // Granted at once: its node is not watched until asked about.
    let guard = mutex.lock().unwrap();

    let hostile = Hostile::start(answer_exists_undecodably);
    detour(&gate, &states, &hostile);
    gate.set_upstream(real.addr());
    assert_ne!(guard.state(), LockState::Lost);

    stat_from_real_server(&client, guard.node());
    let operator = connect(&real.connect_string());
    operator.delete(guard.node(), None).unwrap();
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
}

/// A followed hold, back from `Suspended` on a reconnect, asks the server
/// whether its node is there. A server that answers that exists with a
/// timeout of its own (-7) on a connection that stays up has it asked
/// again after a back-off, and the hold turns `Held` on the answer. Before,
/// the hold stayed `Suspended` until some later reconnect.
#[test]
fn a_confirmation_answered_with_a_timeout_is_asked_again() {
    const DIR: &str = "/hostile/confirm";
    let (real, gate, client, states) = gated(Duration::ZERO);
    let mutex = Mutex::new(&client, DIR).unwrap();
    let guard = mutex.lock().unwrap();
    // Asked about: the hold follows its node, and checks it on reconnects.
    assert_eq!(guard.state(), LockState::Held);
    let stat = stat_from_real_server(&client, guard.node()).to_bytes();
    let exists_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = exists_seen.clone();
    let hostile = Hostile::start(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        // The node watch set again, then the exists, twice; bounded.
        for _ in 0..8 {
            let (header, _) = peer.next_request()?;
            if header.op == OpCode::Exists.code() {
                let first = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                if first {
                    peer.reply(header.xid, OPERATION_TIMEOUT, &[])?;
                } else {
                    peer.reply(header.xid, 0, &stat)?;
                    return Ok(After::Hold);
                }
            } else {
                peer.reply(header.xid, 0, &[])?;
            }
        }
        Ok(After::Close)
    });
    let changes = guard.state_changes();
    detour(&gate, &states, &hostile);
    assert_eq!(
        recv_lock_states(&changes),
        [LockState::Suspended, LockState::Held],
        "the hold's states after a confirmation answered with a timeout"
    );
    assert_eq!(
        exists_seen.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the exists asked again"
    );
    assert_eq!(hostile.connections(), 1, "no reconnect");
    gate.set_upstream(real.addr());
    gate.cut();
    stat_from_real_server(&client, guard.node());
    guard.unlock().unwrap();
}

/// Sends the client back to `real` through `gate`, and waits there for
/// `node`, a release the detour left unconfirmed, to be deleted: another
/// session then gets the lock at `dir` at once.
fn released_back_on(real: &TestServer, gate: &FaultProxy, node: &str, dir: &str) {
    gate.set_upstream(real.addr());
    gate.cut();
    let operator = connect(&real.connect_string());
    wait_until(&format!("{node} to be deleted"), WAIT, || {
        operator.exists(node) == Ok(None)
    });
    let other = Mutex::new(&operator, dir).unwrap();
    assert!(other.try_lock().unwrap().is_some());
}

/// Resumes the session, then answers the first delete with a reply that
/// has bytes after its header where a delete's has none.
fn answer_delete_undecodably(peer: &mut Peer) -> io::Result<After> {
    peer.handshake(HOSTILE_TIMEOUT_MS)?;
    let xid = peer.expect_request(OpCode::Delete)?;
    peer.send(&reply_frame(xid, 0, &[0xde, 0xad]))?;
    Ok(After::Hold)
}

/// An `unlock` whose delete is answered undecodably fails with `Protocol`,
/// and the server may or may not have deleted the node: the release is
/// still guaranteed, and goes again on the next connection. Left to the
/// session's end, the node would keep every other contender out.
#[test]
fn an_unlock_answered_undecodably_is_still_released() {
    const DIR: &str = "/hostile/unlock";
    let (real, gate, client, states) = gated(Duration::ZERO);
    let mutex = Mutex::new(&client, DIR).unwrap();
    // Granted at once: its release is a plain delete.
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();

    let hostile = Hostile::start(answer_delete_undecodably);
    detour(&gate, &states, &hostile);
    let unlocked = guard.unlock();
    assert!(
        matches!(unlocked, Err(zklock::Error::Protocol(_))),
        "{unlocked:?}"
    );
    released_back_on(&real, &gate, &node, DIR);
}

/// Resumes the session read-only, as a server before 3.8 could, and
/// answers the first delete as such a server does: `NotReadOnly`.
fn answer_delete_read_only(peer: &mut Peer) -> io::Result<After> {
    let request = peer.read_connect()?;
    let response = zklock::proto::ConnectResponse {
        read_only: true,
        ..hostile::healthy_response(&request, HOSTILE_TIMEOUT_MS)
    };
    peer.send(&hostile::frame(&response.to_bytes()))?;
    let xid = peer.expect_request(OpCode::Delete)?;
    peer.reply(xid, NOT_READ_ONLY, &[])?;
    Ok(After::Hold)
}

const NOT_READ_ONLY: i32 = -119;

/// An `unlock` on a connection to a read-only server (one before 3.8 may
/// let a lock's session in) fails with `NotReadOnly`, and the release is
/// still guaranteed: it goes again once the client is on a read-write
/// server, as a dropped guard's does. Before, `unlock` gave up on it, and
/// the node stayed for the rest of the session, keeping every other
/// contender out.
#[test]
fn an_unlock_refused_by_a_read_only_server_is_still_released() {
    const DIR: &str = "/hostile/unlock-read-only";
    let real = server();
    let gate = proxy(&real);
    let client = Client::builder()
        .session_timeout(REAL_SESSION_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(Duration::ZERO)
        .can_be_read_only(true)
        .connect(&gate.connect_string())
        .unwrap_or_else(|e| panic!("connect through the gate: {e}"));
    let states = client.state_changes();
    let mutex = Mutex::new(&client, DIR).unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();

    let hostile = Hostile::start(answer_delete_read_only);
    gate.set_upstream(hostile.addr());
    gate.cut();
    wait_state(&states, State::Disconnected);
    wait_state(&states, State::ConnectedReadOnly);
    assert_eq!(guard.unlock(), Err(zklock::Error::NotReadOnly));
    released_back_on(&real, &gate, &node, DIR);
}

/// ZooKeeper's code for an operation the server timed out.
const OPERATION_TIMEOUT: i32 = -7;

/// A node watch whose exists the server answers with a timeout of its own
/// (as ClickHouse Keeper does) on a connection that stays up is set again
/// after a back-off, as a throttled one is: the node's deletion, told to
/// it, makes the hold `Lost`. Before, the watch stayed unset until some
/// reconnect, and a thread in `wait_while_held` was never told.
#[test]
fn a_node_watch_answered_with_a_timeout_is_set_again() {
    const DIR: &str = "/hostile/watch-timeout";
    let (_real, gate, client, states) = gated(Duration::ZERO);
    let mutex = Mutex::new(&client, DIR).unwrap();
    // Granted at once: its node is not watched until asked about.
    let guard = mutex.lock().unwrap();
    let stat = stat_from_real_server(&client, guard.node()).to_bytes();
    let deleted = hostile::reply_frame(
        zklock::proto::NOTIFICATION_XID,
        0,
        &zklock::proto::WatcherEvent {
            event_type: zklock::proto::EventType::NodeDeleted,
            state: zklock::proto::KeeperState::SyncConnected,
            path: guard.node().to_owned(),
        }
        .to_bytes(),
    );
    let exists_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = exists_seen.clone();
    let hostile = Hostile::start(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        // The watch's exists, timed out; then the plain exists and the
        // watch's again, answered; then the deletion. Bounded.
        for _ in 0..8 {
            let (header, _) = peer.next_request()?;
            if header.op != OpCode::Exists.code() {
                peer.reply(header.xid, 0, &[])?;
                continue;
            }
            match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => peer.reply(header.xid, OPERATION_TIMEOUT, &[])?,
                1 => peer.reply(header.xid, 0, &stat)?,
                _ => {
                    peer.reply(header.xid, 0, &stat)?;
                    peer.send(&deleted)?;
                    return Ok(After::Hold);
                }
            }
        }
        Ok(After::Close)
    });
    detour(&gate, &states, &hostile);
    // The first question about its state sets the watch.
    assert_ne!(guard.state(), LockState::Lost);
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
    assert_eq!(
        exists_seen.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "the watch set again"
    );
    assert_eq!(hostile.connections(), 1, "no reconnect");
}

/// A release whose delete the server answers with a timeout of its own on
/// a connection that stays up goes again after a back-off, on that
/// connection. Before, it waited for a reconnect, maybe the session's end,
/// and the node kept every other contender out.
#[test]
fn a_release_answered_with_a_timeout_is_sent_again() {
    const DIR: &str = "/hostile/release-timeout";
    let (_real, gate, client, states) = gated(Duration::ZERO);
    let mutex = Mutex::new(&client, DIR).unwrap();
    let guard = mutex.lock().unwrap();
    let deletes_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = deletes_seen.clone();
    let hostile = Hostile::start(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::Delete)?;
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        peer.reply(xid, OPERATION_TIMEOUT, &[])?;
        let xid = peer.expect_request(OpCode::Delete)?;
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        peer.reply(xid, 0, &[])?;
        Ok(After::Hold)
    });
    detour(&gate, &states, &hostile);
    drop(guard);
    wait_until("the release sent again", WAIT, || {
        deletes_seen.load(std::sync::atomic::Ordering::SeqCst) == 2
    });
    assert_eq!(hostile.connections(), 1, "no reconnect");
}

/// After a create whose reply was cut off, the search for the node, on a
/// server that answers every sync with a timeout of its own on a
/// connection that stays up, asks again at once three times, then after a
/// back-off of 100 ms doubling: the fake server sees the fifth, sixth and
/// seventh syncs at least 100, 200 and 400 ms after the one before (a stall
/// only widens the gaps). Before, it asked again as fast as the replies
/// came. Back on the real server the search finds the node, and the lock
/// is held with one create.
#[test]
fn a_search_answered_with_timeouts_asks_again_after_a_back_off() {
    const DIR: &str = "/hostile/search";
    const SYNCS: usize = 7;
    let real = server();
    let gate = proxy(&real);
    let client = connect_through(&gate, Duration::ZERO);
    let mutex = Mutex::new(&client, DIR).unwrap();
    // The lock directory made, and the release done, so that the
    // attempt's create is the only write.
    mutex.lock().unwrap().unlock().unwrap();
    let arrivals = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = arrivals.clone();
    let hostile = Hostile::start(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        loop {
            let (header, _) = peer.next_request()?;
            if header.op != OpCode::Sync.code() {
                return Ok(After::Close);
            }
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.push(Instant::now());
            if seen.len() == SYNCS {
                return Ok(After::Close);
            }
            drop(seen);
            peer.reply(header.xid, OPERATION_TIMEOUT, &[])?;
        }
    });
    let creates = sent(&gate, OpCode::Create2);
    gate.set_upstream(hostile.addr());
    gate.cut_after_request(|op| op == OpCode::Create2.code());
    let guard = std::thread::scope(|scope| {
        // Back to the real server for the next connection, once the client
        // is on the fake one.
        scope.spawn(|| {
            wait_until("the client on the fake server", WAIT, || {
                hostile.connections() > 0
            });
            gate.set_upstream(real.addr());
        });
        mutex.try_lock_for(WAIT)
    });
    let guard = guard.expect("try_lock_for").expect("the lock");
    let arrivals = arrivals.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(arrivals.len(), SYNCS, "syncs seen by the fake server");
    let gaps: Vec<Duration> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, least) in gaps[3..].iter().zip([100, 200, 400]) {
        assert!(
            *gap >= Duration::from_millis(least),
            "gaps between syncs {gaps:?}: one under {least} ms"
        );
    }
    assert_eq!(sent(&gate, OpCode::Create2), creates + 1, "one create");
    let stat = stat_from_real_server(&client, guard.node());
    assert_eq!(stat.ephemeral_owner, client.session_id());
    guard.unlock().unwrap();
}

/// An acquisition joined to a lingering release goes as one transaction of
/// two ops, the delete and the create. A reply with a result more (a
/// create the request never asked for ahead of them) is refused before
/// its results are decoded, and the connection dropped: it is not taken
/// as the lock. The attempt searches for its node,
/// back on the real server, finds none (the fake server applied nothing)
/// and creates it there; the release is still made. Before, the last two
/// results were taken as the delete and the create, and the attempt went
/// on with a node that existed nowhere: `lock` failed with `LockLost`.
#[test]
fn a_joined_create_answered_with_a_result_more_than_asked_is_not_the_lock() {
    const DIR: &str = "/hostile/joined-count";
    let (real, gate, client, states) = gated(Duration::from_secs(1));
    let mutex = Mutex::new(&client, DIR).unwrap();
    let first = mutex.lock().unwrap();
    let released = first.node().to_owned();
    // Where the fake server says the new node went: a lock node's name,
    // though not one the new attempt (with a prefix of its own) could get.
    let made_up = format!("{}9", &released[..released.len() - 1]);
    let fake_path = made_up.clone();
    let hostile = Hostile::start(move |peer| {
        peer.handshake(HOSTILE_TIMEOUT_MS)?;
        let xid = peer.expect_request(OpCode::Multi)?;
        let create = || {
            OpResult::Create(CreateResponse {
                path: fake_path.clone(),
            })
        };
        let results = vec![create(), OpResult::Delete, create()];
        peer.reply(xid, 0, &MultiResponse { results }.to_bytes())?;
        Ok(After::Close)
    });
    detour(&gate, &states, &hostile);
    gate.set_upstream(real.addr());
    let multis = sent(&gate, OpCode::Multi);
    // Released, its delete lingers for the next acquisition to carry.
    drop(first);
    let guard = mutex.lock().unwrap();
    let report = hostile.next_report(WAIT);
    assert_eq!(report.script_error, None, "{report:?}");
    assert_eq!(sent(&gate, OpCode::Multi), multis + 1, "the joined create");
    assert_ne!(guard.node(), made_up, "the made-up node taken as the lock");
    let stat = stat_from_real_server(&client, guard.node());
    assert_eq!(stat.ephemeral_owner, client.session_id());
    assert_eq!(guard.state(), LockState::Held);
    wait_until("the released node deleted", WAIT, || {
        client.exists(&released) == Ok(None)
    });
    guard.unlock().unwrap();
}
