//! Releases of dropped guards: the delete lingers briefly so that the same
//! client's next acquisition on the lock carries it in one transaction, and
//! otherwise goes out on its own when the linger ends, or ahead of any other
//! request of the client.

mod lock_common;

use std::time::Duration;

use lock_common::*;
use zklock::{Client, LockState, Mutex};

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
            let name = guard.node().rsplit('/').next().unwrap().to_owned();
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
    drop(guard);
    assert!(
        observer.exists(&node).unwrap().is_some(),
        "released before the linger ended"
    );
    wait_until("the lingering release", WAIT, || {
        observer.exists(&node).unwrap().is_none()
    });
    // The timer stays usable: a second release goes out too.
    let node = mutex.lock().unwrap().node().to_owned();
    wait_until("the second release", WAIT, || {
        observer.exists(&node).unwrap().is_none()
    });

    // Released while a reply is still due (each chunk takes 50 ms each way,
    // and the node watch's reply comes about 100 ms after the acquisition):
    // the I/O thread hands the release to the timer once that reply is in.
    let gate = proxy(&server);
    let slow = connect_lingering(&gate.connect_string(), Duration::from_millis(10));
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(50)));
    let slow_mutex = Mutex::new(&slow, "/unclaimed").unwrap();
    let node = slow_mutex.lock().unwrap().node().to_owned();
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
    let name = again.node().rsplit('/').next().unwrap().to_owned();
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
    let first_token = first.fencing_token();
    let (waiting, handle) = spawn("waiter", move || {
        let mutex = Mutex::new(&waiter, "/queue").unwrap();
        let guard = mutex.lock().unwrap();
        let token = guard.fencing_token();
        guard.unlock().unwrap();
        token
    });
    wait_children(&holder, "/queue", 2);
    drop(first);
    let again = holder_mutex.lock().unwrap();
    // The holder's second acquisition waited for the waiter's release.
    let waiter_token = recv(&waiting, WAIT, "the waiter's acquisition");
    assert!(
        first_token < waiter_token && waiter_token < again.fencing_token(),
        "{first_token} {waiter_token} {}",
        again.fencing_token()
    );
    handle.join().unwrap();
}
