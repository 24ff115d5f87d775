//! Connection faults around the lock's own requests: a create whose reply
//! is lost (or cannot be decoded), and a release while the connection is
//! down. Neither may leave a node behind nor a waiter hanging.

mod lock_common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use lock_common::*;
use zklock::testing::{FaultProxy, Pause, PausePoint, ProxyMode, ReleasedOnDrop, TestServer};
use zklock::{Client, Error, LockState, Mutex};

/// The opcode of `create2`, which lock nodes are created with.
const CREATE2: i32 = 15;
/// The opcode of `sync`, which the search for an ambiguously created node
/// starts with.
const SYNC: i32 = 9;

/// The nodes under `dir` owned by `session`.
fn owned_by(client: &Client, dir: &str, session: i64) -> Vec<String> {
    children(client, dir)
        .into_iter()
        .filter(|n| owner(client, &format!("{dir}/{n}")) == Some(session))
        .collect()
}

/// Waits until `watcher`'s session watches a node under `dir` (per
/// `wchp`): the waiter it belongs to has settled on a predecessor.
fn wait_watching_under(server: &TestServer, dir: &str, watcher: i64) {
    let prefix = format!("{dir}/");
    wait_until(
        &format!("{watcher:#x} to watch a node in {dir}"),
        WAIT,
        || {
            watches_by_path(server)
                .iter()
                .any(|(path, sessions)| path.starts_with(&prefix) && sessions.contains(&watcher))
        },
    );
}

/// The reply to the lock's create2 never arrives (the connection is cut
/// right after the request reached the server). The client reconnects,
/// finds the node it did create by its protected name, and carries on with
/// exactly that one (searching after a sync): once while waiting behind a
/// holder, once on a free lock. No node is orphaned and the other contender
/// is never stuck.
#[test]
fn a_lost_create_reply_leaves_no_orphan_and_no_stuck_waiter() {
    const DIR: &str = "/cut/lock";
    let server = server();
    let proxy = proxy(&server);
    let a = connect(&proxy.connect_string());
    let b = connect(&server.connect_string());
    // A plain directory: the first create2 of a lock is then the one that
    // makes its node (with a missing directory it would fail with NoNode).
    mk(&b, "/cut", b"");
    mk(&b, DIR, b"");
    let a_session = a.session_id();

    // Round 1: b holds; a's create is cut while a queues behind it.
    let b_mutex = Mutex::new(&b, DIR).unwrap();
    let b_guard = b_mutex.lock().unwrap();
    proxy.cut_after_request(|opcode| opcode == CREATE2);
    let (a_acquired, a_thread) = {
        let a = a.clone();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (rx, handle) = spawn("a-round-1", move || {
            let mutex = Mutex::new(&a, DIR).unwrap();
            let guard = mutex.lock()?;
            let node = guard.node().to_owned();
            let _ = release_rx.recv_timeout(WAIT);
            guard.unlock()?;
            Ok::<_, zklock::Error>(node)
        });
        (rx, (handle, release_tx))
    };
    wait_until("the create2 to be cut", WAIT, || !proxy.is_cut_armed());
    wait_watching_under(&server, DIR, a_session);
    let a_nodes = owned_by(&b, DIR, a_session);
    assert_eq!(a_nodes.len(), 1, "a's session owns one node: {a_nodes:?}");
    assert_eq!(children(&b, DIR).len(), 2);
    expect_nothing(&a_acquired, "a acquires while b holds");

    b_guard.unlock().unwrap();
    let (handle, release) = a_thread;
    // a holds now; its node is the one it created before the cut.
    wait_until("a to hold the lock alone", WAIT, || {
        children(&b, DIR) == a_nodes
    });
    drop(release);
    let held = recv(&a_acquired, WAIT, "a to acquire and release").unwrap();
    handle.join().unwrap();
    assert_eq!(held, format!("{DIR}/{}", a_nodes[0]));
    assert!(children(&b, DIR).is_empty(), "nothing left after round 1");

    // Round 2: the lock is free; a's create is cut, a recovers its node and
    // holds; b waits and gets the lock once a releases.
    proxy.cut_after_request(|opcode| opcode == CREATE2);
    let a_mutex = Mutex::new(&a, DIR).unwrap();
    let a_guard = a_mutex.lock().unwrap();
    assert!(!proxy.is_cut_armed(), "the create2 was cut");
    let a_nodes = owned_by(&b, DIR, a_session);
    assert_eq!(a_nodes.len(), 1, "a's session owns one node: {a_nodes:?}");
    assert_eq!(a_guard.node(), format!("{DIR}/{}", a_nodes[0]));
    assert_eq!(children(&b, DIR), a_nodes);

    let (b_acquired, b_thread) = {
        let b = b.clone();
        spawn("b-round-2", move || {
            let mutex = Mutex::new(&b, DIR).unwrap();
            let guard = mutex.lock()?;
            let node = guard.node().to_owned();
            guard.unlock()?;
            Ok::<_, zklock::Error>(node)
        })
    };
    wait_children(&b, DIR, 2);
    expect_nothing(&b_acquired, "b acquires while a holds");
    a_guard.unlock().unwrap();
    recv(&b_acquired, WAIT, "b to acquire after a's release").unwrap();
    b_thread.join().unwrap();
    assert!(children(&b, DIR).is_empty(), "nothing left after round 2");
    assert_eq!(a.session_id(), a_session, "a kept its session throughout");
    // Each search for the node came after a sync, so that a server behind
    // the leader could not hide it.
    assert_eq!(sent(&proxy, zklock::proto::OpCode::Sync), 2);
}

/// Sets up a holder behind `proxy` (session timeout `timeout`) and a
/// contender queued behind it, runs `disconnect` and waits for the guard to
/// turn Suspended, drops the guard while the connection is down, checks that
/// the node stays and the contender waits, runs `heal`, and checks that the
/// delete reaches the server once the session reconnects.
fn release_while_disconnected(
    server: &TestServer,
    proxy: &FaultProxy,
    timeout: Duration,
    disconnect: impl FnOnce(),
    heal: impl FnOnce(),
) {
    const DIR: &str = "/dropped/lock";
    let holder = connect_with(&proxy.connect_string(), timeout);
    let session = holder.session_id();
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let changes = guard.state_changes();

    let other = connect(&server.connect_string());
    let (acquired, contender) = {
        let other = other.clone();
        spawn("contender", move || {
            let mutex = Mutex::new(&other, DIR).unwrap();
            let guard = mutex.lock()?;
            let token = guard.fencing_token();
            guard.unlock()?;
            Ok::<_, zklock::Error>(token)
        })
    };
    wait_children(&other, DIR, 2);

    disconnect();
    let state = changes
        .recv_timeout(WAIT)
        .expect("the guard to turn Suspended");
    assert_eq!(state, LockState::Suspended);
    let holder_token = guard.fencing_token();
    drop(guard);
    // The delete cannot have gone out: the node stays, the contender waits.
    expect_nothing(
        &acquired,
        "the contender acquires while the delete is stuck",
    );
    assert_eq!(
        owner(&other, &node),
        Some(session),
        "the node is still there"
    );

    heal();
    let token = recv(&acquired, WAIT, "the contender to acquire after the heal").unwrap();
    contender.join().unwrap();
    assert!(token > holder_token);
    assert_eq!(owner(&other, &node), None);
    holder
        .wait_connected(WAIT)
        .expect("the holder reconnects to its session");
    assert_eq!(holder.session_id(), session, "the session survived");
    assert!(children(&other, DIR).is_empty());
}

/// The connection is cut and reconnects are refused; the guard dropped
/// meanwhile has its delete sent after the reconnect.
#[test]
fn a_guard_dropped_while_the_connection_is_cut_is_released_after_reconnect() {
    let server = server();
    let proxy = proxy(&server);
    release_while_disconnected(
        &server,
        &proxy,
        Duration::from_millis(4000),
        || {
            proxy.refuse(true);
            proxy.cut();
        },
        || proxy.refuse(false),
    );
}

/// The same through a partition: the client notices the silence after two
/// thirds of the session timeout (8 s here, so that the guard turning
/// Suspended, the check and the reconnect all fit well inside it).
#[test]
fn a_guard_dropped_during_a_partition_is_released_after_it_heals() {
    let server = server();
    let proxy = proxy(&server);
    release_while_disconnected(
        &server,
        &proxy,
        Duration::from_millis(8000),
        || proxy.set_mode(ProxyMode::Blackhole),
        || proxy.set_mode(ProxyMode::Pass),
    );
}

/// The holder releases while a waiter's connection is down: the waiter's
/// watch event is never delivered on the old connection, but its watches
/// are re-registered on reconnect, the server reports the deletion it
/// missed, and the waiter acquires.
#[test]
fn a_waiter_disconnected_during_the_release_still_acquires() {
    const DIR: &str = "/missed/lock";
    let server = server();
    let proxy = proxy(&server);
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let waiter = connect_with(&proxy.connect_string(), Duration::from_millis(4000));
    let session = waiter.session_id();
    let (acquired, waiter_thread) = {
        let waiter = waiter.clone();
        spawn("waiter", move || {
            let mutex = Mutex::new(&waiter, DIR).unwrap();
            let guard = mutex.lock()?;
            let token = guard.fencing_token();
            guard.unlock()?;
            Ok::<_, zklock::Error>(token)
        })
    };
    wait_watching_under(&server, DIR, session);

    proxy.refuse(true);
    proxy.cut();
    wait_until("the waiter to notice the cut", WAIT, || {
        !waiter.state().is_connected()
    });
    let holder_token = guard.fencing_token();
    guard.unlock().unwrap();
    expect_nothing(&acquired, "the waiter acquires while disconnected");
    proxy.refuse(false);
    let token = recv(&acquired, WAIT, "the waiter to acquire after reconnecting").unwrap();
    waiter_thread.join().unwrap();
    assert!(token > holder_token);
    assert_eq!(waiter.session_id(), session);
    assert!(children(&holder, DIR).is_empty());
}

/// A waiter keeps retrying through connection losses until two session
/// timeouts pass without progress, counted from its latest progress: its
/// predecessor's release note is progress. Here the waiter's first watch
/// is lost with a cut, it then waits well past two session timeouts, a
/// blip makes it list again on the note (its watches having been set
/// again), and that listing is lost with a cut too: it is asked again, and
/// the waiter acquires. Before, the budget dated from the first loss, and
/// `lock()` failed with `ConnectionLoss` just as the waiter became the
/// lowest, its node deleted.
#[test]
fn a_release_note_renews_a_waiters_retry_budget() {
    const DIR: &str = "/budget/lock";
    const GET_DATA: i32 = 4;
    const GET_CHILDREN: [i32; 2] = [8, 12];
    let server = server();
    let proxy = proxy(&server);
    let first = connect(&server.connect_string());
    let first_mutex = Mutex::new(&first, DIR).unwrap();
    let first_guard = first_mutex.lock().unwrap();
    // The waiter's predecessor: it waits, so it announces its release.
    let second = Contender::mutex(&first, DIR, "second");
    wait_children(&first, DIR, 2);
    // Sessions of 4 s: a loaded machine's stalls of a third of one would
    // drop connections this test does not cut.
    let waiter = connect_with(&proxy.connect_string(), Duration::from_millis(4000));
    let session = waiter.session_id();
    let budget = waiter.negotiated_timeout().unwrap() * 2;
    let accepted = proxy.connections_accepted();
    proxy.cut_after_request(|opcode| opcode == GET_DATA);
    let (acquired, waiter_thread) = {
        let waiter = waiter.clone();
        spawn("waiter", move || {
            let mutex = Mutex::new(&waiter, DIR).unwrap();
            let guard = mutex.lock()?;
            let token = guard.fencing_token();
            guard.unlock()?;
            Ok::<_, Error>(token)
        })
    };
    wait_until("the predecessor's watch to be cut", WAIT, || {
        !proxy.is_cut_armed()
    });
    let first_loss = std::time::Instant::now();
    wait_until("the waiter to reconnect", WAIT, || {
        proxy.connections_accepted() > accepted && waiter.state().is_connected()
    });
    wait_watching_under(&server, DIR, session);
    drop(first_guard);
    second.wait_held();
    // A blip: the waiter's watches are set again on the reconnect, so the
    // note, when it comes, is checked by a listing.
    proxy.cut();
    wait_until("the waiter to reconnect after the blip", WAIT, || {
        proxy.connections_accepted() > accepted + 1 && waiter.state().is_connected()
    });
    // Well past the budget from the first loss (a condition of the scene,
    // not a wait for something to happen).
    std::thread::sleep(
        (first_loss + budget + QUIET).saturating_duration_since(std::time::Instant::now()),
    );
    proxy.cut_after_request(|opcode| GET_CHILDREN.contains(&opcode));
    second.release();
    let token = recv(&acquired, WAIT, "the waiter's attempt to end");
    waiter_thread.join().unwrap();
    assert!(token.is_ok(), "{token:?}");
    assert!(!proxy.is_cut_armed(), "the listing was not cut");
    assert_eq!(waiter.session_id(), session);
    assert!(children(&first, DIR).is_empty());
}

/// A waiter granted the lock, then cut off before its guard is made while an
/// operator deletes its node, reconnects with the node gone: its guard is
/// not `Held` before the server has shown the node (a round trip after the
/// handshake, slowed here by a delay), but `Suspended`, then `Lost`. Before,
/// it was `Held` until the node watch set again by the handshake told of
/// the deletion: the guard's callback, registered after the reconnect, had
/// not seen it.
#[test]
fn a_guard_made_after_a_reconnect_is_not_held_before_its_node_is_shown() {
    const DIR: &str = "/granted-then-cut/lock";
    let server = server();
    let proxy = proxy(&server);
    let holder = connect(&server.connect_string());
    let operator = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();
    // A delay of 1 s each way below leaves the guard 2 s, a round trip
    // after the handshake, to be made and asked before the deletion is
    // told: within the connect timeout, and far from the session's.
    let waiter = Client::builder()
        .session_timeout(Duration::from_secs(20))
        .connect_timeout(Duration::from_secs(10))
        .connect(&proxy.connect_string())
        .expect("connect through the proxy");
    let mutex = Mutex::new(&waiter, DIR).unwrap();
    std::thread::scope(|scope| {
        let (paused_tx, paused) = mpsc::channel();
        let mutex = &mutex;
        let attempt = scope.spawn(move || {
            let _ = paused_tx.send(Pause::arm(PausePoint::LockGranted));
            let guard = mutex.lock().expect("granted");
            let first = guard.state();
            wait_until("the guard to be lost", WAIT, || {
                guard.state() == LockState::Lost
            });
            first
        });
        let pause = ReleasedOnDrop(paused.recv_timeout(WAIT).expect("armed"));
        let nodes = wait_children(&holder, DIR, 2);
        guard.unlock().unwrap();
        assert!(pause.0.wait_reached(WAIT), "the waiter was not granted");
        proxy.refuse(true);
        proxy.cut();
        wait_until("the waiter to notice the cut", WAIT, || {
            !waiter.state().is_connected()
        });
        operator
            .delete(&format!("{DIR}/{}", nodes[1]), None)
            .unwrap();
        proxy.set_mode(ProxyMode::Delay(Duration::from_secs(1)));
        proxy.refuse(false);
        wait_until("the waiter to reconnect", WAIT, || {
            waiter.state().is_connected()
        });
        drop(pause);
        assert_eq!(attempt.join().unwrap(), LockState::Suspended);
    });
    proxy.set_mode(ProxyMode::Pass);
    assert!(children(&holder, DIR).is_empty());
}

/// A waiter cut off while an operator deletes its node and the holder
/// releases: on the reconnect the server tells both deletions, in the
/// order the re-registration listed the watches. Told of its
/// predecessor's first, the waiter must not take the lock on it: its own
/// node is gone, and the attempt fails with `LockLost`. (Before, it was
/// granted, and `lock` returned a guard whose node was already deleted,
/// whenever the predecessor's path came first: about every other run, so
/// the scene is played four times.)
#[test]
fn a_waiter_whose_node_went_while_it_was_cut_off_is_not_granted_on_the_release() {
    let server = server();
    let proxy = proxy(&server);
    let holder = connect(&server.connect_string());
    let waiter = connect_with(&proxy.connect_string(), Duration::from_millis(6000));
    let session = waiter.session_id();
    for round in 0..4 {
        let dir = format!("/deleted-while-cut/{round}/lock");
        let holder_mutex = Mutex::new(&holder, &dir).unwrap();
        let guard = holder_mutex.lock().unwrap();
        let (attempt, attempt_thread) = {
            let (waiter, dir) = (waiter.clone(), dir.clone());
            spawn("waiter", move || {
                let mutex = Mutex::new(&waiter, &dir).unwrap();
                mutex.lock().map(|guard| guard.node().to_owned())
            })
        };
        wait_watching_under(&server, &dir, session);
        let ours = owned_by(&holder, &dir, session);
        assert_eq!(ours.len(), 1, "the waiter's nodes: {ours:?}");

        proxy.refuse(true);
        proxy.cut();
        wait_until("the waiter to notice the cut", WAIT, || {
            !waiter.state().is_connected()
        });
        holder.delete(&format!("{dir}/{}", ours[0]), None).unwrap();
        guard.unlock().unwrap();
        proxy.refuse(false);
        assert_eq!(
            recv(&attempt, WAIT, "the attempt to end"),
            Err(Error::LockLost),
            "round {round}"
        );
        attempt_thread.join().unwrap();
        assert!(children(&holder, &dir).is_empty());
    }
    assert_eq!(waiter.session_id(), session);
}

/// A disconnect shorter than the session timeout: the guard turns
/// `Suspended`, then `Held` again once the session reconnects; the node and
/// the lock were never lost and release normally.
#[test]
fn a_short_disconnect_suspends_the_guard_then_restores_it() {
    const DIR: &str = "/blip/lock";
    let server = server();
    let proxy = proxy(&server);
    let holder = connect_with(&proxy.connect_string(), Duration::from_millis(4000));
    let mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = mutex.lock().unwrap();
    let changes = guard.state_changes();

    proxy.refuse(true);
    proxy.cut();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Suspended));
    assert_eq!(
        guard.wait_while_held(Some(Duration::ZERO)),
        LockState::Suspended
    );
    let observer = connect(&server.connect_string());
    let other = Mutex::new(&observer, DIR).unwrap();
    assert!(other.try_lock().unwrap().is_none(), "the lock stays taken");
    proxy.refuse(false);
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Held));
    assert_eq!(guard.state(), LockState::Held);
    assert_eq!(owner(&observer, guard.node()), Some(holder.session_id()));
    guard.unlock().unwrap();
    assert!(children(&observer, DIR).is_empty());
}

/// Deletes `node` as an operator would, once its holder's watch on it is
/// set on the server: the deletion can only be missed by a hold, not raced.
fn deleted_by_an_operator_once_watched(server: &TestServer, node: &str) {
    wait_until("the node to be watched", WAIT, || {
        watches_by_path(server).contains_key(node)
    });
    connect(&server.connect_string())
        .delete(node, None)
        .unwrap();
}

/// A hold granted at once watches its node only once asked about. Asked
/// for its changes while cut off, it cannot set that watch then: it sets
/// it as soon as it is connected again, on its own, so an operator's
/// deletion of the node still reaches the channel as `Lost`. The hold is
/// `Suspended` by the time the session's channel says `Disconnected`.
#[test]
fn changes_asked_for_while_cut_off_still_report_the_nodes_deletion() {
    const DIR: &str = "/blip/asked-while-cut-off";
    let server = server();
    let proxy = proxy(&server);
    let holder = connect_with(&proxy.connect_string(), Duration::from_millis(4000));
    let states = holder.state_changes();
    let mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = mutex.lock().unwrap();

    proxy.refuse(true);
    proxy.cut();
    assert_eq!(states.recv_timeout(WAIT), Ok(zklock::State::Disconnected));
    // The hold follows the session before the session's channel says so.
    let changes = guard.state_changes();
    assert_eq!(guard.state(), LockState::Suspended);
    proxy.refuse(false);
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Held));
    deleted_by_an_operator_once_watched(&server, guard.node());
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Lost));
}

/// A hold's watch request lost with its connection (the cut right after
/// the exists that `state_changes` sent) is set again once connected, on
/// its own: the node's deletion still reaches the channel.
#[test]
fn a_node_watch_lost_with_its_connection_is_set_again_on_reconnect() {
    const EXISTS: i32 = 3;
    const DIR: &str = "/blip/watch-lost";
    let server = server();
    let proxy = proxy(&server);
    let holder = connect_with(&proxy.connect_string(), Duration::from_millis(4000));
    let mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = mutex.lock().unwrap();

    proxy.cut_after_request(|op| op == EXISTS);
    let changes = guard.state_changes();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Suspended));
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Held));
    deleted_by_an_operator_once_watched(&server, guard.node());
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Lost));
}

/// The create is applied but its reply is lost (the cut lands right after
/// the listing sent behind it), and the listing that then looks for the node
/// is cut too. A lost listing is no answer: the contender looks again instead
/// of creating a second node, so its first node is never orphaned at the
/// head of the queue. (Found by the fault checker, `tests/checker`.)
#[test]
fn a_lost_create_reply_then_a_lost_search_still_leaves_no_orphan() {
    const DIR: &str = "/cut-twice/lock";
    const GET_CHILDREN: i32 = 8;
    let server = server();
    // Two proxies: after the first cut the client moves to its next host,
    // so the second cut is armed in advance instead of raced.
    let proxies = [proxy(&server), proxy(&server)];
    let cuts = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(0));
    for proxy in &proxies {
        let cuts = cuts.clone();
        proxy.cut_after_request(move |op| {
            use std::sync::atomic::Ordering::SeqCst;
            op == GET_CHILDREN
                && cuts
                    .fetch_update(SeqCst, SeqCst, |n| (n < 2).then_some(n + 1))
                    .is_ok()
        });
    }
    let hosts = format!(
        "{},{}",
        proxies[0].connect_string(),
        proxies[1].connect_string()
    );
    let admin = connect(&server.connect_string());
    // The directory exists, so the first create succeeds on the server.
    mk(&admin, "/cut-twice", b"");
    mk(&admin, DIR, b"");
    let client = connect(&hosts);
    let session = client.session_id();

    let mutex = Mutex::new(&client, DIR).unwrap();
    // Bounded: before the fix, the contender waited forever behind its own
    // orphaned first node.
    let guard = mutex
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("acquired after both cuts");
    assert_eq!(
        cuts.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "both cuts fired"
    );
    assert_eq!(client.session_id(), session, "same session throughout");
    let held = leaf(guard.node()).to_owned();
    assert_eq!(sequence(&held), 0, "the first create is the one held");
    assert_eq!(
        owned_by(&admin, DIR, session),
        [held],
        "exactly one node, the held one"
    );
    // Another contender gets the lock after the release: nothing is left
    // at the head of the queue.
    guard.unlock().unwrap();
    let other = Mutex::new(&admin, DIR).unwrap();
    let next = other
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .expect("nothing blocks the queue");
    next.unlock().unwrap();
    assert!(children(&admin, DIR).is_empty());
}

/// The connection drops just as a waiter sets its watches (the watch on its
/// own node among them), so their replies are lost. Once reconnected, the
/// waiter watches its own node again: when an operator deletes it, the
/// attempt fails with `LockLost` at once, instead of being granted the lock
/// on the predecessor's release with no node of its own.
#[test]
fn a_waiter_whose_own_watch_was_lost_with_a_connection_sets_it_again() {
    const DIR: &str = "/unwatched/lock";
    let server = server();
    let proxy = proxy(&server);
    let holder = connect(&server.connect_string());
    let waiter = connect(&proxy.connect_string());
    let waiter_session = waiter.session_id();
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let held = holder_mutex.lock().unwrap();

    // Node watches are set with `exists`.
    proxy.cut_after_request(|opcode| opcode == zklock::proto::OpCode::Exists.code());
    let (attempt, attempt_thread) = spawn("waiter", move || {
        let mutex = Mutex::new(&waiter, DIR).unwrap();
        mutex.try_lock_for(WAIT).map(|g| g.is_some())
    });
    wait_until("the watches to be cut", WAIT, || !proxy.is_cut_armed());
    let ours = owned_by(&holder, DIR, waiter_session);
    assert_eq!(ours.len(), 1, "the waiter's nodes: {ours:?}");
    let our_path = format!("{DIR}/{}", ours[0]);
    wait_until("the waiter to watch its own node again", WAIT, || {
        watches_by_path(&server)
            .get(&our_path)
            .is_some_and(|sessions| sessions.contains(&waiter_session))
    });

    holder.delete(&our_path, None).unwrap();
    assert_eq!(
        recv(&attempt, WAIT, "the attempt to end"),
        Err(zklock::Error::LockLost)
    );
    attempt_thread.join().unwrap();
    assert_eq!(held.state(), LockState::Held);
    held.unlock().unwrap();
    assert!(children(&holder, DIR).is_empty());
}

/// A relay to a real server that spoils the server's replies to the next
/// requests of the opcodes it is armed with, in order: it appends a byte to
/// each such reply's body, so the server has done what was asked, but the
/// client cannot decode the answer (and drops the connection). Every other
/// byte passes unchanged.
struct SpoilingRelay {
    addr: SocketAddr,
    shared: Arc<SpoilState>,
}

#[derive(Default)]
struct SpoilState {
    /// The opcodes whose next requests' replies are spoiled, in order.
    armed: std::sync::Mutex<std::collections::VecDeque<i32>>,
    /// The xid of that request, until its reply is spoiled.
    target: std::sync::Mutex<Option<i32>>,
    spoiled: AtomicUsize,
    stop: AtomicBool,
}

impl SpoilingRelay {
    fn start(upstream: SocketAddr) -> SpoilingRelay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("the relay's address");
        let shared = Arc::new(SpoilState::default());
        let state = shared.clone();
        std::thread::Builder::new()
            .name("spoiling-relay".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if state.stop.load(SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(upstream) else {
                        continue;
                    };
                    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                        continue;
                    };
                    let (up, down) = (state.clone(), state.clone());
                    std::thread::spawn(move || relay(client, server, &up, true));
                    std::thread::spawn(move || relay(s2, c2, &down, false));
                }
            })
            .expect("spawn the relay");
        SpoilingRelay { addr, shared }
    }

    fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Spoils the reply to the next request with the first of `opcodes`,
    /// then to the next one after it with the second, and so on.
    fn arm(&self, opcodes: &[i32]) {
        *self.shared.armed.lock().unwrap() = opcodes.iter().copied().collect();
    }

    /// How many replies were spoiled so far.
    fn spoiled(&self) -> usize {
        self.shared.spoiled.load(SeqCst)
    }
}

impl Drop for SpoilingRelay {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        // Wakes the accept loop, which then ends.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Moves frames from `from` to `to` until either side closes: requests
/// (`upstream`) are looked at for the armed opcode, replies for its xid.
fn relay(mut from: TcpStream, mut to: TcpStream, state: &SpoilState, upstream: bool) {
    // The first frame each way is the handshake's.
    let mut first = true;
    loop {
        let mut len = [0u8; 4];
        if from.read_exact(&mut len).is_err() {
            break;
        }
        let mut payload = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
        if from.read_exact(&mut payload).is_err() {
            break;
        }
        if !first && payload.len() >= 8 {
            let word = |at: usize| i32::from_be_bytes([0, 1, 2, 3].map(|i| payload[at + i]));
            let xid = word(0);
            if upstream {
                let mut armed = state.armed.lock().unwrap();
                if armed.front() == Some(&word(4)) {
                    armed.pop_front();
                    *state.target.lock().unwrap() = Some(xid);
                }
            } else {
                let mut target = state.target.lock().unwrap();
                if *target == Some(xid) {
                    *target = None;
                    payload.push(0xab);
                    state.spoiled.fetch_add(1, SeqCst);
                }
            }
        }
        first = false;
        let frame = [&(payload.len() as i32).to_be_bytes()[..], &payload].concat();
        if to.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// The server creates the lock node, but its reply cannot be decoded (a
/// malformed reply, after which the client drops the connection): the
/// outcome is as unknown to the client as after a lost reply, so it looks
/// for the node rather than failing and leaving it behind at the head of
/// the queue for the rest of the session. A search answered so is no
/// answer either: it looks again. The create alone (`create2`, and then the
/// search's `sync`), then joined to the lingering release of the first hold
/// (`multi`).
#[test]
fn a_malformed_create_reply_leaves_no_orphan() {
    const DIR: &str = "/spoiled/lock";
    const MULTI: i32 = 14;
    let server = server();
    let relay = SpoilingRelay::start(server.addr());
    let admin = connect(&server.connect_string());
    // The directory exists, so the first create succeeds on the server.
    mk(&admin, "/spoiled", b"");
    mk(&admin, DIR, b"");
    let client = Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(Duration::from_secs(1))
        .connect(&relay.connect_string())
        .expect("connect through the relay");
    let session = client.session_id();
    let mutex = Mutex::new(&client, DIR).unwrap();
    let mut released: Option<String> = None;
    let rounds: [&[i32]; 2] = [&[CREATE2, SYNC], &[MULTI]];
    let mut spoiled = 0;
    for (round, opcodes) in rounds.into_iter().enumerate() {
        relay.arm(opcodes);
        let guard = match mutex.try_lock_for(WAIT) {
            Ok(guard) => guard.expect("the lock is free"),
            Err(e) => panic!(
                "round {round}: {e}; the session's nodes: {:?}",
                owned_by(&admin, DIR, session)
            ),
        };
        spoiled += opcodes.len();
        assert_eq!(relay.spoiled(), spoiled, "round {round}: not all spoiled");
        assert_eq!(client.session_id(), session, "the session lives on");
        let held = leaf(guard.node()).to_owned();
        assert_eq!(owned_by(&admin, DIR, session), [held], "round {round}");
        if let Some(released) = &released {
            assert_eq!(owner(&admin, released), None, "the released node is gone");
        }
        released = Some(guard.node().to_owned());
        // Lingers, to join the next round's create.
        drop(guard);
    }
    wait_until("the last release", WAIT, || {
        children(&admin, DIR).is_empty()
    });
}

/// A server whose replies to the search keep failing to decode is broken:
/// the search looks past a few such replies, then the attempt fails with
/// the protocol error instead of searching forever. The node it may have
/// left goes with the session.
#[test]
fn a_search_answered_undecodably_again_and_again_ends() {
    const DIR: &str = "/spoiled-always/lock";
    let server = server();
    let relay = SpoilingRelay::start(server.addr());
    let admin = connect(&server.connect_string());
    mk(&admin, "/spoiled-always", b"");
    mk(&admin, DIR, b"");
    let client = connect(&relay.connect_string());
    let session = client.session_id();
    let mutex = Mutex::new(&client, DIR).unwrap();
    // The create's reply, then four of the search's syncs: one more than
    // the search looks past.
    relay.arm(&[CREATE2, SYNC, SYNC, SYNC, SYNC]);
    match mutex.try_lock_for(WAIT) {
        Err(Error::Protocol(_)) => {}
        other => panic!("expected the protocol error, got {other:?}"),
    }
    assert_eq!(relay.spoiled(), 5);
    // The create happened: its node is the session's until it ends.
    assert_eq!(owned_by(&admin, DIR, session).len(), 1);
    // Back through its reconnect back-off, closing deletes it.
    client.wait_connected(WAIT).expect("reconnect");
    client.close().expect("close");
    assert_eq!(children(&admin, DIR), Vec::<String>::new());
}

/// The opcode of `getData`, which a waiter's predecessor watch is set with.
const GET_DATA: i32 = 4;

/// Runs `mutex.try_lock_for(deadline)` during an outage that `heal` ends
/// after `outage` at the latest (if the attempt has not returned by then).
/// With `cancelled`, the attempt waits as long as need be, and is
/// cancelled 200 ms after `ready` returns (cancel also ends a wait that
/// has not begun: no race either way). Checks that the attempt kept its
/// deadline: `Cancelled`, or not acquired and not before `deadline`, and
/// in either case long before the outage's end.
fn attempt_in_outage(
    mutex: &Mutex,
    deadline: Duration,
    cancelled: bool,
    outage: Duration,
    ready: impl Fn() + Sync,
    heal: impl Fn() + Sync,
) {
    let (done, finished) = crossbeam_channel::bounded::<()>(1);
    let over = std::sync::atomic::AtomicBool::new(false);
    let (result, took) = std::thread::scope(|scope| {
        scope.spawn(|| {
            if finished.recv_timeout(outage).is_err() {
                heal();
            }
        });
        if cancelled {
            scope.spawn(|| {
                ready();
                std::thread::sleep(Duration::from_millis(200));
                cancel_until_over(mutex, &over);
            });
        }
        let started = std::time::Instant::now();
        let result = mutex.try_lock_for(if cancelled { WAIT } else { deadline });
        let took = started.elapsed();
        over.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = done.send(());
        (result.map(|guard| guard.is_some()), took)
    });
    if cancelled {
        assert_eq!(result, Err(Error::Cancelled));
    } else {
        assert_eq!(result, Ok(false));
        assert!(
            took >= deadline,
            "returned after {took:?}, before its deadline"
        );
    }
    assert!(
        took < outage / 2,
        "returned after {took:?} (cancelled: {cancelled})"
    );
}

/// A timed wait whose predecessor watch is lost with its connection, and
/// which then cannot reconnect: the listing it needs waits for a reconnect,
/// but the attempt does not. `try_lock_for` gives up at its deadline, and
/// `cancel` ends such a wait at once, long before the outage ends. Neither
/// leaves its node behind once the connection is back.
#[test]
fn a_timed_wait_cut_off_while_waiting_ends_at_its_deadline_or_on_cancel() {
    const DIR: &str = "/cutwait/lock";
    const DEADLINE: Duration = Duration::from_millis(1000);
    /// How long reconnects are refused at most: the attempts must be over
    /// well before.
    const OUTAGE: Duration = Duration::from_secs(6);
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let proxy = proxy(&server);
    let waiter = connect_with(&proxy.connect_string(), Duration::from_secs(10));
    let mutex = Mutex::new(&waiter, DIR).unwrap();
    for cancelled in [false, true] {
        proxy.refuse(true);
        proxy.cut_after_request(|op| op == GET_DATA);
        attempt_in_outage(
            &mutex,
            DEADLINE,
            cancelled,
            OUTAGE,
            // Into the wait for the listing.
            || wait_until("the cut", WAIT, || !proxy.is_cut_armed()),
            || proxy.refuse(false),
        );
        proxy.refuse(false);
        assert!(!proxy.is_cut_armed(), "the watch's request was cut");
        wait_until("the waiter's node to go", WAIT, || {
            children(&holder, DIR).len() == 1
        });
    }
    assert_eq!(children(&holder, DIR), [leaf(guard.node()).to_owned()]);
}

/// A timed attempt's create reaches the server, but its reply is lost
/// with the connection, and no reconnect succeeds for a while. The
/// attempt cannot know yet whether it has a node, and it does not wait to
/// find out: it returns at its deadline (`Ok(None)`), or at once on
/// `cancel`, long before the outage ends. The search for the node goes on,
/// and once connected again it finds the node and deletes it, in the same
/// session: nothing is left behind.
#[test]
fn a_timed_attempt_whose_create_reply_is_lost_keeps_its_deadline() {
    const DIR: &str = "/lostcreate/lock";
    const DEADLINE: Duration = Duration::from_millis(1000);
    /// How long reconnects are refused at most: the attempts must be over
    /// well before.
    const OUTAGE: Duration = Duration::from_secs(6);
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let proxy = proxy(&server);
    let waiter = connect_with(&proxy.connect_string(), Duration::from_secs(10));
    let session = waiter.session_id();
    let mutex = Mutex::new(&waiter, DIR).unwrap();
    for cancelled in [false, true] {
        let syncs_before = proxy.requests_seen(SYNC);
        proxy.refuse(true);
        proxy.cut_after_request(|op| op == CREATE2);
        attempt_in_outage(
            &mutex,
            DEADLINE,
            cancelled,
            OUTAGE,
            // Into the wait for the search.
            || wait_until("the cut", WAIT, || !proxy.is_cut_armed()),
            || proxy.refuse(false),
        );
        // The create happened: the node is there, and nobody knows it yet.
        // The proxy cut the connection once it had passed the create on, so
        // the server may still be applying it.
        wait_until("the cut-off create to be applied", WAIT, || {
            owned_by(&holder, DIR, session).len() == 1
        });
        assert_eq!(proxy.requests_seen(SYNC), syncs_before, "no search yet");
        proxy.refuse(false);
        wait_until("the search to find the node and delete it", WAIT, || {
            owned_by(&holder, DIR, session).is_empty()
        });
        assert_eq!(proxy.requests_seen(SYNC), syncs_before + 1);
        assert_eq!(waiter.session_id(), session, "same session throughout");
    }
    assert_eq!(children(&holder, DIR), [leaf(guard.node()).to_owned()]);
    assert_eq!(waiter.state(), zklock::State::Connected);
}

/// A timed attempt whose create and listing went out on a connection gone
/// silent (a hung server, or a partition with the TCP connection up): no
/// reply comes before the connection is given up on, at the read timeout
/// (2/3 of the 10 s session timeout). The attempt does not wait for them:
/// it returns at its deadline (`Ok(None)`), or at once on `cancel`. When
/// the connection carries bytes again, the create is applied and its reply
/// handled by the I/O thread, which deletes the node: one create and one
/// delete in the lock directory, and nothing left.
#[test]
fn a_timed_attempt_on_a_silent_connection_keeps_its_deadline() {
    const DIR: &str = "/silentcreate/lock";
    const DEADLINE: Duration = Duration::from_millis(500);
    /// How long the connection stays silent at most: shorter than the
    /// read timeout, so the connection survives it.
    const SILENCE: Duration = Duration::from_secs(5);
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let proxy = proxy(&server);
    let waiter = connect_with(&proxy.connect_string(), Duration::from_secs(10));
    let session = waiter.session_id();
    let mutex = Mutex::new(&waiter, DIR).unwrap();
    let cversion = |client: &Client| client.exists(DIR).unwrap().unwrap().cversion;
    for cancelled in [false, true] {
        let before = cversion(&holder);
        proxy.set_mode(ProxyMode::Blackhole);
        attempt_in_outage(
            &mutex,
            DEADLINE,
            cancelled,
            SILENCE,
            || {},
            || proxy.set_mode(ProxyMode::Pass),
        );
        assert_eq!(cversion(&holder), before, "nothing reached the server yet");
        proxy.set_mode(ProxyMode::Pass);
        wait_until("the node to be created and deleted", WAIT, || {
            cversion(&holder) == before + 2
        });
        assert!(owned_by(&holder, DIR, session).is_empty());
        assert_eq!(waiter.session_id(), session, "same session throughout");
    }
    assert_eq!(children(&holder, DIR), [leaf(guard.node()).to_owned()]);
    assert_eq!(waiter.state(), zklock::State::Connected);
}

/// The same on the successor's path: a lock released a moment ago is still
/// lingering, so the next attempt's create joins its delete in one
/// transaction and expects no listing. Sent on a connection gone silent,
/// that transaction is not waited for either: the attempt returns at its
/// deadline, and once bytes flow again the transaction is applied (the old
/// node deleted, the new one created) and the I/O thread deletes the new
/// node: three changes in the directory, and nothing left.
#[test]
fn a_timed_successor_on_a_silent_connection_keeps_its_deadline() {
    const DIR: &str = "/silentsuccessor/lock";
    const MULTI: i32 = 14;
    const DEADLINE: Duration = Duration::from_millis(300);
    const SILENCE: Duration = Duration::from_secs(5);
    let server = server();
    let observer = connect(&server.connect_string());
    let proxy = proxy(&server);
    let client = Client::builder()
        .session_timeout(Duration::from_secs(10))
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(Duration::from_secs(1))
        .connect(&proxy.connect_string())
        .expect("connect through the proxy");
    let mutex = Mutex::new(&client, DIR).unwrap();
    let cversion = || observer.exists(DIR).unwrap().unwrap().cversion;
    drop(mutex.lock().unwrap());
    let (before, multis) = (cversion(), proxy.requests_seen(MULTI));
    proxy.set_mode(ProxyMode::Blackhole);
    attempt_in_outage(
        &mutex,
        DEADLINE,
        false,
        SILENCE,
        || {},
        || proxy.set_mode(ProxyMode::Pass),
    );
    proxy.set_mode(ProxyMode::Pass);
    wait_until("the transaction, then the new node's delete", WAIT, || {
        cversion() == before + 3
    });
    assert!(children(&observer, DIR).is_empty());
    assert_eq!(proxy.requests_seen(MULTI), multis + 1, "one transaction");
    assert_eq!(client.state(), zklock::State::Connected);
}

/// Attempts made while the connection is down and no reconnect succeeds:
/// their create waits for a connection, unsent. `try_lock_for` takes it
/// back at its deadline (`Ok(None)`), even a deadline that passes before
/// its create is made, and `cancel` at once (`Cancelled`), long before the
/// outage ends, and no create ever reaches the server.
/// `try_lock`, which does not wait for other holders, still waits for the
/// server's answer: once the outage ends, it gets the free lock.
#[test]
fn attempts_made_while_disconnected_take_back_their_unsent_create() {
    const DIR: &str = "/unsent/lock";
    const DEADLINE: Duration = Duration::from_millis(500);
    /// How long reconnects are refused at most.
    const OUTAGE: Duration = Duration::from_secs(6);
    let server = server();
    let proxy = proxy(&server);
    let client = connect_with(&proxy.connect_string(), Duration::from_secs(10));
    let mutex = Mutex::new(&client, DIR).unwrap();
    let observer = connect(&server.connect_string());
    // The lock's directory exists: each attempt is one create.
    mutex.lock().unwrap().unlock().unwrap();
    let creates_before = proxy.requests_seen(CREATE2);
    proxy.refuse(true);
    proxy.cut();
    wait_until("the client to notice the cut", WAIT, || {
        client.state() == zklock::State::Disconnected
    });

    let started = std::time::Instant::now();
    assert!(matches!(mutex.try_lock_for(DEADLINE), Ok(None)));
    let timed_out_after = started.elapsed();
    // A timeout so short that it passes before the attempt's first
    // request is still a timeout, not a try that waits for the server's
    // answer (before, it waited out the outage).
    let started = std::time::Instant::now();
    assert!(matches!(
        mutex.try_lock_for(Duration::from_nanos(1)),
        Ok(None)
    ));
    let tiny_timed_out_after = started.elapsed();

    let started = std::time::Instant::now();
    let over = std::sync::atomic::AtomicBool::new(false);
    let cancelled = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            cancel_until_over(&mutex, &over);
        });
        let result = mutex.lock().map(drop);
        over.store(true, std::sync::atomic::Ordering::SeqCst);
        result
    });
    let cancelled_after = started.elapsed();
    assert!(matches!(cancelled, Err(Error::Cancelled)), "{cancelled:?}");
    for (what, took) in [
        ("try_lock_for", timed_out_after),
        ("try_lock_for 1 ns", tiny_timed_out_after),
        ("cancel", cancelled_after),
    ] {
        assert!(took < OUTAGE / 2, "{what} returned after {took:?}");
    }

    let (held, healed_at) = std::thread::scope(|scope| {
        let healer = scope.spawn(|| {
            // Healed once try_lock's create waits, unsent, for a connection.
            wait_until("try_lock's create to be queued", WAIT, || {
                client.queued_request_count() > 0
            });
            proxy.refuse(false);
            std::time::Instant::now()
        });
        let held = mutex.try_lock().unwrap().map(|guard| guard.unlock());
        (held, healer.join().unwrap())
    });
    assert!(matches!(held, Some(Ok(()))), "{held:?}");
    assert!(healed_at.elapsed() < WAIT);
    // Only the try_lock's create reached the server.
    assert_eq!(proxy.requests_seen(CREATE2), creates_before + 1);
    assert!(children(&observer, DIR).is_empty());
}

/// The first lock on a path makes its directory. A connection cut right
/// after that directory's create went out is retried as the node's own
/// create is: the attempt acquires, with one node and nothing left over.
/// Before, the attempt failed with `ConnectionLoss`.
#[test]
fn a_lock_directory_create_cut_off_is_made_again_and_the_lock_acquired() {
    let server = server();
    let gate = proxy(&server);
    let client = connect(&gate.connect_string());
    let dir = "/cut-dir/a/b";
    gate.cut_after_request(|op| op == zklock::proto::OpCode::CreateContainer.code());
    let mutex = Mutex::new(&client, dir).unwrap();
    let guard = mutex
        .try_lock_for(WAIT)
        .unwrap()
        .unwrap_or_else(|| panic!("not acquired within {WAIT:?}"));
    assert!(!gate.is_cut_armed(), "the cut fired");
    assert_eq!(children(&client, dir), [leaf(guard.node()).to_owned()]);
    guard.unlock().unwrap();
    assert!(children(&client, dir).is_empty());
}

/// The first lock on a path makes its directory. A server gone silent
/// (the connection up, no reply) while that directory's create is out does
/// not hold the attempt past its deadline, nor past `cancel`: each returns
/// long before the client gives up on the connection (2/3 of the session
/// timeout). Before, both blocked until then. No node is left, and the
/// lock is taken on the next connection.
#[test]
fn a_lock_directory_create_on_a_silent_connection_keeps_the_deadline_and_cancel() {
    const DEADLINE: Duration = Duration::from_secs(1);
    /// The client drops a silent connection after 6 s (2/3 of it).
    const SESSION: Duration = Duration::from_secs(9);
    const CREATE_CONTAINER: i32 = 19;
    let server = server();
    let gate = proxy(&server);
    let client = connect_with(&gate.connect_string(), SESSION);
    let observer = connect(&server.connect_string());
    let mut took = Vec::new();
    for (dir, cancelled) in [
        ("/silent-dir/timed/lock", false),
        ("/silent-dir/cancelled/lock", true),
    ] {
        let changes = client.state_changes();
        let mutex = Mutex::new(&client, dir).unwrap();
        gate.silence_from_request(|op| op == CREATE_CONTAINER);
        let started = std::time::Instant::now();
        let outcome = std::thread::scope(|scope| {
            if !cancelled {
                return mutex.try_lock_for(DEADLINE).map(|g| g.is_some());
            }
            scope.spawn(|| {
                wait_until("the directory's create to go out", WAIT, || {
                    !gate.is_cut_armed()
                });
                mutex.cancel();
            });
            mutex.try_lock_for(WAIT).map(|g| g.is_some())
        });
        took.push(started.elapsed());
        assert!(!gate.is_cut_armed(), "the directory's create went out");
        match cancelled {
            false => assert_eq!(outcome, Ok(false)),
            true => assert_eq!(outcome, Err(Error::Cancelled)),
        }
        // The client drops the silent connection in time, and gets the
        // lock on the next one, with no node left from the attempt.
        for state in [zklock::State::Disconnected, zklock::State::Connected] {
            assert_eq!(changes.recv_timeout(WAIT), Ok(state));
        }
        assert!(children(&observer, dir).is_empty());
        let guard = mutex
            .try_lock_for(WAIT)
            .unwrap()
            .unwrap_or_else(|| panic!("not acquired within {WAIT:?}"));
        assert_eq!(children(&observer, dir), [leaf(guard.node()).to_owned()]);
        guard.unlock().unwrap();
    }
    for took in took {
        assert!(
            took < SESSION / 3,
            "returned after {took:?}, not at its deadline or cancel"
        );
    }
}

/// Cancels `mutex`'s attempts every 50 ms until `over` (for at most WAIT):
/// a cancel made before the attempt waits is not kept, and a loaded
/// machine may start the attempt late.
fn cancel_until_over(mutex: &Mutex, over: &std::sync::atomic::AtomicBool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !over.load(std::sync::atomic::Ordering::SeqCst) && std::time::Instant::now() < deadline {
        mutex.cancel();
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A guard cut off while another client deletes its node goes from
/// `Suspended` straight to `Lost` on the reconnect; one whose node is still
/// there is `Held` again. Before, the deleted node's guard was `Held` for a
/// round trip after the handshake, until the re-registered watch fired.
#[test]
fn a_guard_whose_node_went_while_cut_off_is_not_held_again() {
    const DIR: &str = "/gone-while-cut-off";
    let server = server();
    let gate = proxy(&server);
    let c = connect_with(&gate.connect_string(), Duration::from_secs(10));
    let other = connect(&server.connect_string());
    let mutex = Mutex::new(&c, DIR).unwrap();
    for deleted in [false, true] {
        let guard = mutex.lock().unwrap();
        let changes = guard.state_changes();
        assert_eq!(guard.state(), LockState::Held);
        gate.refuse(true);
        gate.cut();
        assert_eq!(
            changes.recv_timeout(WAIT),
            Ok(LockState::Suspended),
            "deleted: {deleted}"
        );
        if deleted {
            other
                .delete(guard.node(), None)
                .expect("delete the lock node");
        }
        gate.refuse(false);
        let expected = if deleted {
            LockState::Lost
        } else {
            LockState::Held
        };
        assert_eq!(recv_lock_states(&changes), [expected], "deleted: {deleted}");
        assert_eq!(guard.state(), expected);
        drop(guard);
    }
    wait_until("every node gone", WAIT, || children(&other, DIR).is_empty());
}
