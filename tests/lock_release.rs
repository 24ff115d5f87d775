//! Releases of dropped guards: the delete lingers briefly so that the same
//! client's next acquisition on the lock carries it in one transaction, and
//! otherwise goes out on its own when the linger ends, or ahead of any other
//! request of the client.

mod lock_common;

use std::time::Duration;

use lock_common::*;
use zklock::proto::OpCode;
use zklock::{Client, Error, LockState, Mutex, RwLock};

/// The longest linger: long enough that nothing in these tests outlasts it
/// by accident, so a node still there is there because of the linger.
const LONG_LINGER: Duration = Duration::from_secs(1);

fn connect_lingering(connect_string: &str, linger: Duration) -> Client {
    Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(linger)
        .connect(connect_string)
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}

/// A fencing token is the node's creation zxid, and nothing else writes on
/// this server: the release and the next create share one transaction
/// (one zxid) when they are joined, and take two when the linger is zero.
#[test]
fn back_to_back_acquisitions_join_release_and_create_in_one_transaction() {
    let server = server();
    for (linger, zxids_per_cycle) in [(LONG_LINGER, 1), (Duration::ZERO, 2)] {
        let client = connect_lingering(&server.connect_string(), linger);
        let dir = format!("/joined/{}", zxids_per_cycle);
        let mutex = Mutex::new(&client, &dir).unwrap();
        let first = mutex.lock().unwrap();
        let mut token = first.fencing_token();
        let mut node = first.node().to_owned();
        drop(first);
        for cycle in 0..5 {
            let guard = mutex.lock().unwrap();
            assert_eq!(
                guard.fencing_token(),
                token + zxids_per_cycle,
                "cycle {cycle} with linger {linger:?}"
            );
            assert_ne!(guard.node(), node);
            let stat = client.exists(guard.node()).unwrap().unwrap();
            assert_eq!(guard.fencing_token(), stat.czxid);
            // Only the new node: the old one went in the same transaction
            // (or before it).
            let name = leaf(guard.node()).to_owned();
            assert_eq!(children(&client, &dir), [name]);
            token = guard.fencing_token();
            node = guard.node().to_owned();
        }
        client.close().unwrap();
    }
}

/// Nobody takes the release up: the timer sends it when the linger ends.
#[test]
fn an_unclaimed_release_goes_out_when_the_linger_ends() {
    let server = server();
    let holder = connect_lingering(&server.connect_string(), LONG_LINGER);
    let observer = connect(&server.connect_string());
    let mutex = Mutex::new(&holder, "/unclaimed").unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let dropped = std::time::Instant::now();
    drop(guard);
    wait_until("the lingering release", WAIT, || {
        observer.exists(&node).unwrap().is_none()
    });
    // Not before the linger ended (give or take the observer's round
    // trips, which only make it later).
    let gone_after = dropped.elapsed();
    assert!(
        gone_after >= LONG_LINGER,
        "released {gone_after:?} after the drop, before the {LONG_LINGER:?} linger ended"
    );
    // The timer stays usable: a second release goes out too.
    let node = mutex.lock().unwrap().node().to_owned();
    wait_until("the second release", WAIT, || {
        observer.exists(&node).unwrap().is_none()
    });

    // Released while a reply is still due (each chunk takes 50 ms each way,
    // and the node watch that `state_changes` sets is answered about 100 ms
    // later): the I/O thread hands the release to the timer once that reply
    // is in.
    let gate = proxy(&server);
    let slow = connect_lingering(&gate.connect_string(), Duration::from_millis(10));
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(50)));
    let slow_mutex = Mutex::new(&slow, "/unclaimed").unwrap();
    let guard = slow_mutex.lock().unwrap();
    let _changes = guard.state_changes();
    let node = guard.node().to_owned();
    drop(guard);
    wait_until("the release made with a reply due", WAIT, || {
        observer.exists(&node).unwrap().is_none()
    });
}

/// Any other request of the client sends the lingering release first, so
/// the client never sees its own released node.
#[test]
fn any_later_request_sends_the_lingering_release_ahead_of_it() {
    let server = server();
    let client = connect_lingering(&server.connect_string(), LONG_LINGER);
    let mutex = Mutex::new(&client, "/ahead").unwrap();
    drop(mutex.lock().unwrap());
    assert_eq!(children(&client, "/ahead"), Vec::<String>::new());
}

/// The released node was deleted by someone else while its delete lingered:
/// the joint transaction fails as a whole, and the acquisition still
/// succeeds with a create of its own, leaving exactly one node.
#[test]
fn a_lingering_release_of_a_node_gone_meanwhile_does_not_fail_the_next_acquisition() {
    let server = server();
    let client = connect_lingering(&server.connect_string(), LONG_LINGER);
    let admin = connect(&server.connect_string());
    let mutex = Mutex::new(&client, "/gone").unwrap();
    let guard = mutex.lock().unwrap();
    let (node, token) = (guard.node().to_owned(), guard.fencing_token());
    drop(guard);
    admin.delete(&node, None).unwrap();
    let again = mutex.lock().unwrap();
    // admin's delete, the failed transaction (servers log those too), then
    // the create.
    assert_eq!(again.fencing_token(), token + 3);
    let name = leaf(again.node()).to_owned();
    assert_eq!(children(&admin, "/gone"), [name]);
}

/// A guard whose lock was already lost sends no release at all.
#[test]
fn dropping_a_lost_guard_sends_nothing() {
    let server = server();
    let client = connect_lingering(&server.connect_string(), Duration::ZERO);
    let admin = connect(&server.connect_string());
    let mutex = Mutex::new(&client, "/lost").unwrap();
    let guard = mutex.lock().unwrap();
    let token = guard.fencing_token();
    admin.delete(guard.node(), None).unwrap();
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
    drop(guard);
    // admin's delete, then the create: no failed delete in between.
    assert_eq!(mutex.lock().unwrap().fencing_token(), token + 2);
}

/// A waiter queued behind a lock stays ahead of the holder that releases
/// and acquires again at once: the joint transaction puts the holder's new
/// node last.
#[test]
fn a_holder_that_acquires_again_queues_behind_the_waiters() {
    let server = server();
    let holder = connect_lingering(&server.connect_string(), LONG_LINGER);
    let waiter = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, "/queue").unwrap();
    let first = holder_mutex.lock().unwrap();
    // Set by the waiter while it holds: before its release, so before any
    // acquisition that comes after it.
    let waiter_held = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let held = waiter_held.clone();
    let (waiting, handle) = spawn("waiter", move || {
        let mutex = Mutex::new(&waiter, "/queue").unwrap();
        let guard = mutex
            .try_lock_for(WAIT)
            .unwrap()
            .expect("the waiter acquires");
        held.store(true, std::sync::atomic::Ordering::SeqCst);
        let token = guard.fencing_token();
        guard.unlock().unwrap();
        token
    });
    wait_children(&holder, "/queue", 2);
    drop(first);
    let again = holder_mutex.try_lock_for(WAIT).unwrap().expect("again");
    // The holder's second acquisition came after the waiter's hold. (The
    // tokens alone cannot show it: each is its node's creation, and the
    // waiter's node was made first whatever the order of the holds.)
    assert!(
        waiter_held.load(std::sync::atomic::Ordering::SeqCst),
        "the holder acquired again ahead of the waiter"
    );
    recv(&waiting, WAIT, "the waiter's release");
    again.unlock().unwrap();
    handle.join().unwrap();
}

/// A lone holder's next acquisition is one transaction and nothing else:
/// the node it creates is numbered right after the released one, which
/// proves nothing was created in between, so it is the lowest with no
/// listing. Nothing watches the node until it is asked about. Asked, the
/// guard learns its token and watches its node like any other.
#[test]
fn a_lone_holders_next_acquisition_is_one_transaction_and_nothing_else() {
    const DIR: &str = "/successor/alone";
    let server = server();
    let gate = proxy(&server);
    let client = connect_lingering(&gate.connect_string(), LONG_LINGER);
    let admin = connect(&server.connect_string());
    let mutex = Mutex::new(&client, DIR).unwrap();
    let mut node = mutex.lock().unwrap().node().to_owned();
    // The first acquisition also made the directory.
    let before = [OpCode::Create2, OpCode::GetChildren].map(|op| sent(&gate, op));
    for cycle in 1..=4 {
        let guard = mutex.lock().unwrap();
        assert_eq!(sequence(guard.node()), sequence(&node) + 1, "cycle {cycle}");
        node = guard.node().to_owned();
    }
    let guard = mutex.lock().unwrap();
    // One transaction for each acquisition after the first, and nothing
    // else.
    let after = [OpCode::Create2, OpCode::GetChildren].map(|op| sent(&gate, op));
    assert_eq!(after, before);
    assert_eq!(sent(&gate, OpCode::Multi), 5);
    for op in [OpCode::Exists, OpCode::GetData, OpCode::Delete] {
        assert_eq!(sent(&gate, op), 0, "{op:?}");
    }
    let stat = admin.exists(guard.node()).unwrap().unwrap();
    assert_eq!(guard.fencing_token(), stat.czxid);
    assert_eq!(sent(&gate, OpCode::Exists), 1);
    admin.delete(guard.node(), None).unwrap();
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
    assert_eq!(guard.unlock(), Err(Error::LockLost));
}

/// A node created behind the released one while its release lingers (a
/// contender's, queued behind it) numbers the holder's next node past the
/// successor's number: that acquisition lists the lock, and waits.
#[test]
fn a_node_created_while_the_release_lingers_makes_the_next_acquisition_list() {
    const DIR: &str = "/successor/raced";
    let server = server();
    let gate = proxy(&server);
    let holder = connect_lingering(&gate.connect_string(), LONG_LINGER);
    // Connected before the release starts to linger, so that only the
    // rival's create falls inside the linger.
    let rival_client = connect(&server.connect_string());
    let observer = connect(&server.connect_string());
    let mutex = Mutex::new(&holder, DIR).unwrap();
    let released = mutex.lock().unwrap().node().to_owned();
    let listings = sent(&gate, OpCode::GetChildren);
    let rival = Contender::mutex(&rival_client, DIR, "rival");
    wait_children(&observer, DIR, 2);
    let (holder_held, holder_thread) = spawn("holder", move || {
        let guard = mutex.lock().unwrap();
        let held = guard.node().to_owned();
        drop(guard);
        held
    });
    let rival_node = rival.wait_held();
    assert_eq!(sequence(&rival_node), sequence(&released) + 1);
    expect_nothing(&holder_held, "the holder, queued behind the rival");
    rival.release();
    let node = recv(&holder_held, WAIT, "the holder to hold");
    assert_eq!(sequence(&node), sequence(&released) + 2);
    // The second acquisition took the release along, and listed.
    assert_eq!(sent(&gate, OpCode::Multi), 1);
    assert_eq!(sent(&gate, OpCode::GetChildren), listings + 1);
    holder_thread.join().unwrap();
}

/// Only a node of the same kind concludes from its number: a write lock
/// taken on the release of a mutex hold still lists the lock (and, alone in
/// it, holds), in the transaction that carries the release.
#[test]
fn a_successor_of_another_kind_lists_the_lock() {
    const DIR: &str = "/successor/kinds";
    let server = server();
    let gate = proxy(&server);
    let holder = connect_lingering(&gate.connect_string(), LONG_LINGER);
    let mutex = Mutex::new(&holder, DIR).unwrap();
    let released = mutex.lock().unwrap().node().to_owned();
    let rwlock = RwLock::new(&holder, DIR).unwrap();
    let listings = sent(&gate, OpCode::GetChildren);
    let write = rwlock.try_write_for(WAIT).unwrap().expect("the write lock");
    assert_eq!(sent(&gate, OpCode::Multi), 1);
    assert_eq!(sent(&gate, OpCode::GetChildren), listings + 1);
    assert_eq!(sequence(write.node()), sequence(&released) + 1);
    assert_eq!(children(&holder, DIR).len(), 1);
    write.unlock().unwrap();
}

/// Lock data so large that a node's create fits the request limit alone,
/// but not joined to a lingering release's delete: the release then goes
/// alone and the create after it, so every acquisition succeeds, in two
/// transactions (two zxids) instead of one. Both ways of joining are
/// refused: a mutex's next node is its release's successor, whose
/// transaction nobody waits for; a read lock after a write lock is not.
#[test]
fn a_create_too_large_to_join_a_release_goes_after_it_alone() {
    const LIMIT: usize = 4096;
    const DIR: &str = "/toolarge/lock";
    let server = server();
    let client = Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(LONG_LINGER)
        .max_request(LIMIT)
        .connect(&server.connect_string())
        .expect("connect");
    // A create's bytes besides its data: the request header (8), the path
    // (4 + its length), the data's length (4), the open ACL (27), the
    // flags (4). Joining a delete adds more than 64 (two op headers and an
    // end marker, 27, and the delete: 8 + its path).
    let path_len = |marker: &str| DIR.len() + "/_c_".len() + 36 + 1 + marker.len() + 10;
    let data = |marker: &str| vec![7; LIMIT - (8 + 4 + path_len(marker) + 4 + 27 + 4) - 32];

    let mutex = Mutex::new(&client, DIR).unwrap().with_data(data("lock-"));
    let first = mutex.lock().expect("the first acquisition: a create alone");
    assert_eq!(first.node().len(), path_len("lock-"));
    let mut token = first.fencing_token();
    drop(first);
    for cycle in 1..=3 {
        let guard = mutex
            .lock()
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        assert_eq!(
            children(&client, DIR),
            [leaf(guard.node())],
            "cycle {cycle}"
        );
        assert_eq!(guard.fencing_token(), token + 2, "cycle {cycle}");
        token = guard.fencing_token();
    }

    let rwlock = RwLock::new(&client, "/toolarge/rw")
        .unwrap()
        .with_data(data("__WRIT__"));
    let writing = rwlock.write().expect("write: a create alone");
    let token = writing.fencing_token();
    drop(writing);
    let reading = rwlock.read().expect("read, after the write's release");
    assert_eq!(children(&client, "/toolarge/rw"), [leaf(reading.node())]);
    assert_eq!(reading.fencing_token(), token + 2);
}
