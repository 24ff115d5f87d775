//! Holders that die or fall silent: the lock passes on once the holder's
//! session expires, and a partitioned holder is told to stop (Suspended)
//! before anyone else can acquire.

mod lock_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lock_common::*;
use zklock::testing::ProxyMode;
use zklock::{Client, Error, EventType, LockState, Mutex, WatcherType};

/// Tells the child test where to lock; without it the child does nothing.
const CHILD_CONNECT_ENV: &str = "ZKLOCK_TEST_CHILD_CONNECT";
const CHILD_PATH_ENV: &str = "ZKLOCK_TEST_CHILD_LOCK_PATH";
/// The session timeout of the child holder.
const CHILD_SESSION_TIMEOUT: Duration = Duration::from_millis(2000);

/// Not a test of its own: the holder process of
/// [`a_killed_holder_passes_the_lock_on_when_its_session_expires`], which
/// runs this test binary again with only this test selected. It locks,
/// prints `HELD <fencing token>`, and blocks until its stdin closes (or it
/// is killed, which is the point).
#[test]
#[ignore = "runs only as the child process of a_killed_holder_passes_the_lock_on_when_its_session_expires"]
fn child_holds_until_killed() {
    let (Ok(connect_string), Ok(path)) = (
        std::env::var(CHILD_CONNECT_ENV),
        std::env::var(CHILD_PATH_ENV),
    ) else {
        return;
    };
    let client = connect_with(&connect_string, CHILD_SESSION_TIMEOUT);
    let mutex = Mutex::new(&client, &path).unwrap();
    let guard = mutex.lock().unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "HELD {}", guard.fencing_token()).unwrap();
    out.flush().unwrap();
    drop(out);
    // Blocks until the parent closes our stdin or dies; the parent kills us
    // long before that.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// A holder process is killed with SIGKILL: its node stays until the
/// server expires its session, then the waiter acquires with a larger
/// fencing token.
#[test]
fn a_killed_holder_passes_the_lock_on_when_its_session_expires() {
    const LOCK: &str = "/killed/lock";
    let server = server();
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = KillOnDrop(
        Command::new(exe)
            .args([
                "--exact",
                "child_holds_until_killed",
                "--nocapture",
                "--ignored",
            ])
            .env(CHILD_CONNECT_ENV, server.connect_string())
            .env(CHILD_PATH_ENV, LOCK)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the child holder"),
    );
    let stdout = child.0.stdout.take().expect("the child's stdout");
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + WAIT;
    let child_token: i64 = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = recv(&lines_rx, left, "the child to print HELD");
        if let Some(token) = line.strip_prefix("HELD ") {
            break token.trim().parse().expect("a fencing token");
        }
    };

    let client = connect(&server.connect_string());
    let held = children(&client, LOCK);
    assert_eq!(held.len(), 1);
    let child_session = owner(&client, &format!("{LOCK}/{}", held[0])).unwrap();
    assert_ne!(child_session, client.session_id());

    let waiter_client = client.clone();
    let (acquired, waiter) = spawn("waiter", move || {
        let mutex = Mutex::new(&waiter_client, LOCK).unwrap();
        let guard = mutex.lock().unwrap();
        let at = Instant::now();
        let token = guard.fencing_token();
        guard.unlock().unwrap();
        (at, token)
    });
    wait_children(&client, LOCK, 2);
    expect_nothing(&acquired, "the waiter acquires while the child holds");

    let killed_at = Instant::now();
    child.0.kill().expect("SIGKILL the child");
    let status = child.0.wait().expect("reap the child");
    assert_eq!(status.signal(), Some(9), "the child died of SIGKILL");

    let (acquired_at, token) = recv(&acquired, WAIT, "the waiter to acquire after expiry");
    waiter.join().unwrap();
    let handover = acquired_at - killed_at;
    // The closed socket alone releases nothing: the node goes when the
    // session expires, at least a session timeout after the server last
    // heard from the child (which pings every third of it, later on a
    // loaded machine: hence a quarter, which a release on the socket's
    // close, at once, still fails).
    assert!(
        handover >= CHILD_SESSION_TIMEOUT / 4,
        "acquired {handover:?} after the kill: before the session could expire"
    );
    assert!(
        token > child_token,
        "fencing token {token} after {child_token}"
    );
    assert!(children(&client, LOCK).is_empty());
}

/// The holder's link is blackholed past the session timeout. Its guard turns
/// `Suspended` before the other contender acquires, and `Lost` once the
/// client hears that the session expired.
///
/// The arithmetic, with a negotiated timeout T = 5000 ms: the client pings
/// after T/3 without sending and drops a connection that has been silent
/// for 2T/3 (the guard turns `Suspended` then); the server expires a
/// session only after T without hearing from it (rounded up to its tick).
/// The last thing the server heard (a ping) and the last thing the client
/// received (its reply) are one round trip apart, so the client gives up
/// about T/3 (~1.7 s) before the server can hand the lock to anyone else:
/// room for a loaded machine's stalls, which a shorter T would not leave.
#[test]
fn a_partitioned_holder_is_suspended_before_another_acquires_then_lost() {
    const LOCK: &str = "/partition/lock";
    const T: Duration = Duration::from_millis(5000);
    let server = server();
    // A fresh server's first session can take longer than the short
    // connect timeout below on a loaded machine: one first.
    connect(&server.connect_string()).close().unwrap();
    let proxy = proxy(&server);
    let holder_client = Client::builder()
        .session_timeout(T)
        .connect_timeout(Duration::from_millis(500))
        .connect(&proxy.connect_string())
        .unwrap();
    assert_eq!(holder_client.negotiated_timeout(), Some(T));
    let holder_mutex = Mutex::new(&holder_client, LOCK).unwrap();
    let guard = holder_mutex.lock().unwrap();
    let holder_token = guard.fencing_token();

    let changes = guard.state_changes();
    let (states, observer) = {
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::spawn(move || {
            while let Ok(state) = changes.recv_timeout(WAIT) {
                let _ = tx.send((state, Instant::now()));
                if state == LockState::Lost {
                    break;
                }
            }
        });
        (rx, handle)
    };

    let other = connect(&server.connect_string());
    let (acquired, contender) = spawn("contender", move || {
        let mutex = Mutex::new(&other, LOCK).unwrap();
        let guard = mutex.lock().unwrap();
        let at = Instant::now();
        let token = guard.fencing_token();
        guard.unlock().unwrap();
        (at, token)
    });
    wait_children(&holder_client, LOCK, 2);
    expect_nothing(&acquired, "the contender acquires while the holder holds");

    let blackholed_at = Instant::now();
    proxy.set_mode(ProxyMode::Blackhole);
    let (state, suspended_at) = recv(&states, WAIT, "the guard to turn Suspended");
    assert_eq!(state, LockState::Suspended);
    let (acquired_at, token) = recv(&acquired, WAIT, "the contender to acquire");
    contender.join().unwrap();
    // Suspended before the other acquired (checked above); by now it may
    // have gone on to Lost.
    assert_ne!(
        guard.state(),
        LockState::Held,
        "the holder must not believe it holds once another does"
    );
    eprintln!(
        "suspended after {:?}, other acquired after {:?}",
        suspended_at - blackholed_at,
        acquired_at - blackholed_at
    );
    assert!(
        suspended_at < acquired_at,
        "Suspended at +{:?} but the other acquired at +{:?}",
        suspended_at - blackholed_at,
        acquired_at - blackholed_at
    );
    assert!(token > holder_token);

    // Still cut off: having heard from no server for 4/3 of the session
    // timeout, the client knows the session is over, without a reconnect.
    let (state, lost_at) = recv(&states, WAIT, "the guard to turn Lost while cut off");
    assert_eq!(state, LockState::Lost);
    assert!(lost_at > acquired_at);
    assert!(
        lost_at - blackholed_at <= T * 4 / 3 + Duration::from_secs(2),
        "Lost only at +{:?}",
        lost_at - blackholed_at
    );
    assert_eq!(holder_client.state(), zklock::State::Expired);
    observer.join().unwrap();
    proxy.set_mode(ProxyMode::Pass);
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(guard.wait_while_held(Some(Duration::ZERO)), LockState::Lost);
    assert_eq!(guard.unlock(), Err(Error::LockLost));
}

/// Someone deletes the held node (an operator, say): the guard turns
/// `Lost`, `unlock` reports `LockLost`, and the next contender acquires.
/// A lock granted at once watches its node from the first time its state
/// is asked for, and not before.
#[test]
fn a_deleted_lock_node_makes_the_guard_lost() {
    const LOCK: &str = "/deleted/lock";
    let server = server();
    let holder = connect(&server.connect_string());
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let holder_watches = |server: &zklock::testing::TestServer| {
        watches_by_path(server)
            .get(&node)
            .is_some_and(|s| s.contains(&holder.session_id()))
    };
    // A round trip behind the acquisition: nothing of it is still on its way.
    holder.exists(LOCK).unwrap();
    assert!(!holder_watches(&server), "watched before anyone asked");
    // The first state call sets the watch, and returns with its reply.
    assert_eq!(guard.state(), LockState::Held);
    assert!(holder_watches(&server), "not watched after state()");
    let admin = connect(&server.connect_string());
    admin.delete(&node, None).unwrap();
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
    assert_eq!(guard.unlock(), Err(Error::LockLost));
    let next = Mutex::new(&admin, LOCK).unwrap();
    next.try_lock()
        .unwrap()
        .expect("free after the delete")
        .unlock()
        .unwrap();
}

/// A caller removes its own watch on a held node. The server keeps one
/// watch per session and path, and the client removes every watcher of
/// the removed kind there, so the guard's watch goes too: the guard sets
/// it again, and a later deletion of the node still turns it `Lost`.
#[test]
fn a_callers_removal_of_watches_on_the_held_node_leaves_the_guard_watching() {
    const LOCK: &str = "/watch-removed/lock";
    let server = server();
    let holder = connect(&server.connect_string());
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    // The first state call sets the guard's watch.
    assert_eq!(guard.state(), LockState::Held);
    let (_, mine) = holder.exists_w(guard.node()).unwrap();
    holder
        .remove_watches(guard.node(), WatcherType::Data)
        .unwrap();
    let removed = mine.recv_timeout(WAIT).unwrap();
    assert_eq!(removed.event_type, EventType::DataWatchRemoved);

    let admin = connect(&server.connect_string());
    admin.delete(guard.node(), None).unwrap();
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
    assert_eq!(guard.unlock(), Err(Error::LockLost));
}

/// A guard stays with its thread; a monitor carries the lock's node, token
/// and state to another ('static) thread, which sees the loss when someone
/// deletes the node, just as the guard does. Every lock kind gives one, and
/// a released hold's monitor says `Lost`.
#[test]
fn a_monitor_follows_the_lock_from_another_thread() {
    const LOCK: &str = "/monitored/lock";
    let server = server();
    let holder = connect(&server.connect_string());
    let admin = connect(&server.connect_string());
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let (node, token) = (guard.node().to_owned(), guard.fencing_token());
    let monitor = guard.monitor();
    let (seen_tx, seen) = mpsc::channel();
    let (lost_tx, lost) = mpsc::channel();
    let watcher = std::thread::spawn(move || {
        let _ = seen_tx.send((
            monitor.node().to_owned(),
            monitor.fencing_token(),
            monitor.state(),
        ));
        let _ = lost_tx.send(monitor.wait_while_held(Some(WAIT)));
    });
    assert_eq!(
        seen.recv_timeout(WAIT).unwrap(),
        (node.clone(), token, LockState::Held)
    );
    admin.delete(&node, None).unwrap();
    assert_eq!(lost.recv_timeout(WAIT).unwrap(), LockState::Lost);
    watcher.join().unwrap();
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(guard.unlock(), Err(Error::LockLost));

    let rwlock = zklock::RwLock::new(&holder, "/monitored/rw").unwrap();
    let write = rwlock.write().unwrap();
    let monitor = write.monitor();
    assert_eq!(
        (monitor.node(), monitor.fencing_token()),
        (write.node(), write.fencing_token())
    );
    write.unlock().unwrap();
    assert_eq!(monitor.state(), LockState::Lost, "after the release");
    let read = rwlock.read().unwrap();
    assert_eq!(read.monitor().node(), read.node());
    drop(read);

    let reentrant = zklock::ReentrantMutex::new(&holder, "/monitored/reentrant").unwrap();
    let outer = reentrant.lock().unwrap();
    let inner = reentrant.lock().unwrap();
    assert_eq!(inner.monitor().fencing_token(), outer.fencing_token());
    assert_eq!(inner.monitor().state(), LockState::Held);
}

/// The same, but the node is deleted the moment `lock` returns, before the
/// guard was asked about (the holder's link delays every byte by 300 ms).
/// The watch that waiting on the guard sets is answered with "no such
/// node"; the guard must not go on claiming `Held`.
#[test]
fn a_lock_node_deleted_right_after_acquisition_makes_the_guard_lost() {
    const LOCK: &str = "/deleted-early/lock";
    let server = server();
    let proxy = proxy(&server);
    let holder = connect(&proxy.connect_string());
    let admin = connect(&server.connect_string());
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(300)));
    let guard = mutex.lock().unwrap();
    admin.delete(guard.node(), None).unwrap();
    // A contender can now acquire; the guard must say so.
    let other = Mutex::new(&admin, LOCK).unwrap();
    let other_guard = other.try_lock().unwrap().expect("the lock is free");
    assert_eq!(
        guard.wait_while_held(Some(Duration::from_secs(5))),
        LockState::Lost,
        "the guard still claims Held while {} holds",
        other_guard.node()
    );
    other_guard.unlock().unwrap();
}

/// A waiter whose client another thread closes fails with `Closed`, the
/// error every call of a closed client gets, not `LockLost`: the server's
/// deletion of the waiter's node, which the close causes, may reach the
/// waiter before the close's reply does. Several rounds, as the two race.
#[test]
fn a_waiter_whose_client_is_closed_gets_closed() {
    const LOCK: &str = "/waiter-closed/lock";
    const ROUNDS: usize = 5;
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = holder_mutex.lock().unwrap();
    for round in 0..ROUNDS {
        let waiter = connect(&server.connect_string());
        let closer = waiter.clone();
        let (result, waiter_thread) = spawn("waiter", move || {
            let mutex = Mutex::new(&waiter, LOCK).unwrap();
            mutex.lock().map(|g| g.fencing_token())
        });
        wait_children(&holder, LOCK, 2);
        closer.close().unwrap();
        let err = recv(&result, WAIT, "the waiter to fail").unwrap_err();
        waiter_thread.join().unwrap();
        assert_eq!(err, Error::Closed, "round {round}");
        assert_eq!(children(&holder, LOCK).len(), 1, "round {round}");
    }
    assert_eq!(guard.state(), LockState::Held);
    guard.unlock().unwrap();
}

/// A waiter's session expires while it waits (its link is blackholed past
/// the timeout, then healed): `lock` fails with `SessionExpired` instead of
/// waiting forever, and the holder keeps its lock. The client may learn of
/// the expiry while still cut off (it declares it itself 4/3 of the timeout
/// after it last heard from the server) or from the server once healed.
#[test]
fn a_waiter_whose_session_expires_gets_an_error() {
    const LOCK: &str = "/waiter-expiry/lock";
    const T: Duration = Duration::from_millis(2000);
    let server = server();
    let proxy = proxy(&server);
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let waiter = connect_with(&proxy.connect_string(), T);
    let waiter_session = waiter.session_id();
    let (result, waiter_thread) = spawn("waiter", move || {
        let mutex = Mutex::new(&waiter, LOCK).unwrap();
        mutex.lock().map(|g| g.fencing_token())
    });
    let nodes = wait_children(&holder, LOCK, 2);
    let waiter_node = format!("{LOCK}/{}", nodes[1]);
    assert_eq!(owner(&holder, &waiter_node), Some(waiter_session));

    proxy.set_mode(ProxyMode::Blackhole);
    // The server expires the session and deletes its node.
    wait_until("the waiter's session to expire", WAIT, || {
        owner(&holder, &waiter_node).is_none()
    });
    proxy.set_mode(ProxyMode::Pass);
    let err = recv(&result, WAIT, "the waiter to fail").unwrap_err();
    waiter_thread.join().unwrap();
    assert_eq!(err, Error::SessionExpired);
    assert_eq!(guard.state(), LockState::Held);
    assert_eq!(children(&holder, LOCK).len(), 1);
    guard.unlock().unwrap();
}

/// The path of the node among `queued` (names under `dir`) that is not
/// the holder's `held` node: the one waiter's.
fn waiters_node(dir: &str, queued: &[String], held: &str) -> String {
    queued
        .iter()
        .map(|name| format!("{dir}/{name}"))
        .find(|node| node != held)
        .expect("the waiter's node")
}

/// A waiter whose own node is deleted by someone else (an operator) wakes at
/// once with `LockLost`, instead of waiting for its predecessor to go and
/// then holding a lock whose node no longer exists.
#[test]
fn a_waiter_whose_own_node_is_deleted_fails_at_once_with_lock_lost() {
    const LOCK: &str = "/own-node-deleted/lock";
    let server = server();
    let holder_client = connect(&server.connect_string());
    let holder = Mutex::new(&holder_client, LOCK).unwrap();
    let guard = holder.lock().unwrap();
    let admin = connect(&server.connect_string());

    let waiter_client = connect(&server.connect_string());
    let waiter_session = waiter_client.clone();
    let (result, waiter) = spawn("waiter", move || {
        let mutex = Mutex::new(&waiter_client, LOCK).unwrap();
        let outcome = mutex.lock().map(|g| g.fencing_token());
        (outcome, Instant::now())
    });
    let queued = wait_children(&admin, LOCK, 2);
    expect_nothing(&result, "the waiter acquires while the lock is held");
    let theirs = waiters_node(LOCK, &queued, guard.node());
    let deleted_at = Instant::now();
    admin.delete(&theirs, None).unwrap();

    let (outcome, failed_at) = recv(&result, WAIT, "the waiter to give up");
    waiter.join().unwrap();
    assert_eq!(outcome, Err(Error::LockLost));
    assert!(
        failed_at - deleted_at < Duration::from_secs(2),
        "woke at once"
    );
    assert_eq!(guard.state(), LockState::Held, "the holder is unaffected");
    assert_eq!(children(&admin, LOCK).len(), 1);
    // Its watch on the holder's node went with the attempt.
    waiter_session.exists(LOCK).unwrap();
    assert_eq!(waiter_session.local_watcher_count(), 0);
    guard.unlock().unwrap();
}

/// A write to the held node (Curator's `Revoker` writes one to ask the
/// holder to let go) fires the node's watch as a data change, and a one-shot
/// watch that fired is gone: the guard must watch the node again, or its
/// later deletion goes unseen and the guard claims `Held` beside the next
/// holder.
#[test]
fn a_write_to_the_held_node_does_not_hide_its_later_deletion() {
    const LOCK: &str = "/written-then-deleted/lock";
    let server = server();
    let holder = connect(&server.connect_string());
    let admin = connect(&server.connect_string());
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let monitor = guard.monitor();
    assert_eq!(guard.state(), LockState::Held, "the watch is set");
    let changes = guard.state_changes();
    admin.set_data(guard.node(), b"__REVOKE__", None).unwrap();
    // A round trip of the holder's behind the write's event.
    holder.exists(LOCK).unwrap();
    assert_eq!(guard.state(), LockState::Held, "a write is no loss");
    admin.delete(guard.node(), None).unwrap();
    let other = Mutex::new(&admin, LOCK).unwrap();
    let other_guard = other.try_lock().unwrap().expect("the lock is free");
    assert_eq!(
        monitor.wait_while_held(Some(Duration::from_secs(5))),
        LockState::Lost,
        "the monitor still claims Held while {} holds",
        other_guard.node()
    );
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Lost));
    assert_eq!(guard.unlock(), Err(Error::LockLost));
    other_guard.unlock().unwrap();
}

/// The same for a waiter: a write to its node, then the node's deletion,
/// fail the wait with `LockLost` at once. Without a watch set again after
/// the write, the waiter went on waiting and, once its predecessor went,
/// held a lock whose node no longer existed, beside the next contender.
#[test]
fn a_waiter_whose_node_is_written_then_deleted_fails_with_lock_lost() {
    const LOCK: &str = "/waiter-written-then-deleted/lock";
    let server = server();
    let holder_client = connect(&server.connect_string());
    let holder = Mutex::new(&holder_client, LOCK).unwrap();
    let guard = holder.lock().unwrap();
    let admin = connect(&server.connect_string());

    let waiter_client = connect(&server.connect_string());
    let (result, waiter) = spawn("waiter", move || {
        let mutex = Mutex::new(&waiter_client, LOCK).unwrap();
        mutex.lock().map(|g| g.fencing_token())
    });
    let queued = wait_children(&admin, LOCK, 2);
    expect_nothing(&result, "the waiter acquires while the lock is held");
    let theirs = waiters_node(LOCK, &queued, guard.node());
    admin.set_data(&theirs, b"__REVOKE__", None).unwrap();
    expect_nothing(&result, "the waiter wakes on a write to its node");
    admin.delete(&theirs, None).unwrap();

    let outcome = recv(&result, WAIT, "the waiter to give up");
    waiter.join().unwrap();
    assert_eq!(outcome, Err(Error::LockLost));
    assert_eq!(guard.state(), LockState::Held, "the holder is unaffected");
    assert_eq!(children(&admin, LOCK).len(), 1);
    guard.unlock().unwrap();
}
