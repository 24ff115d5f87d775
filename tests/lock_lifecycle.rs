//! The life of lock nodes and directories: failed tries and cancelled
//! waits leave nothing behind, and empty lock directories are containers
//! that the server reaps and the next acquisition recreates.

mod lock_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_common::*;
use zklock::testing::TestServer;
use zklock::{Error, LockState, Mutex, ReentrantMutex, RwLock};

/// A wait that gives up leaves no watcher behind in its client: not when
/// the predecessor watch's reply came before the deadline, and not when it
/// comes after (it registers the watcher, which must then go at once).
/// Otherwise a loop of short tries against a long hold would pile them up,
/// and each would list the directory again when the holder lets go.
#[test]
fn given_up_waits_leave_no_watcher() {
    const DIR: &str = "/tries/watchers";
    const TRIES: usize = 20;
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, DIR).unwrap();
    for _ in 0..TRIES {
        assert!(mutex
            .try_lock_for(Duration::from_millis(20))
            .unwrap()
            .is_none());
    }
    // Replies are in order: once this one is in, so are the watches' and
    // the events of the abandoned nodes' deletion.
    c.exists(DIR).unwrap();
    assert_eq!(c.local_watcher_count(), 0, "after {TRIES} given-up tries");

    // Every chunk takes 100 ms each way, so an acquisition's create and
    // listing take about 200 ms, and its predecessor watch's reply comes
    // about 200 ms after that: past a 300 ms deadline.
    let gate = proxy(&server);
    let slow = connect(&gate.connect_string());
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(
        100,
    )));
    let slow_mutex = Mutex::new(&slow, DIR).unwrap();
    assert!(slow_mutex
        .try_lock_for(Duration::from_millis(300))
        .unwrap()
        .is_none());
    slow.exists(DIR).unwrap();
    assert_eq!(
        slow.local_watcher_count(),
        0,
        "after a reply past the deadline"
    );

    guard.unlock().unwrap();
    // The slow client's delete goes through the proxy; if the attempt gave
    // up before its create was answered, it was sent only once the answer
    // came.
    wait_children(&holder, DIR, 0);
}

/// An attempt whose deadline passes, or which is cancelled, before its
/// create's reply arrives gives up then, without waiting for that reply:
/// the I/O thread handles it, and deletes the node the create made. It
/// does not sleep on until the holder lets go, and it leaves no node (one
/// create and one delete in the directory) and no watcher.
#[test]
fn giving_up_before_the_first_reply_leaves_nothing() {
    const DIR: &str = "/tries/early";
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();
    let held = children(&holder, DIR);

    // Every chunk takes 100 ms each way: the create's reply comes about
    // 200 ms after it is sent, long past a 20 ms deadline.
    let gate = proxy(&server);
    let slow = connect(&gate.connect_string());
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(
        100,
    )));
    let mutex = Arc::new(Mutex::new(&slow, DIR).unwrap());
    let cversion = || holder.exists(DIR).unwrap().unwrap().cversion;
    let before = cversion();
    let started = Instant::now();
    let (rx, trier) = {
        let mutex = mutex.clone();
        spawn("trier", move || {
            mutex
                .try_lock_for(Duration::from_millis(20))
                .map(|g| g.is_some())
        })
    };
    assert_eq!(recv(&rx, WAIT, "the try to give up"), Ok(false));
    let took = started.elapsed();
    trier.join().unwrap();
    assert!(
        took >= Duration::from_millis(20),
        "gave up after {took:?}, before its deadline"
    );
    wait_until("the node to be created and deleted", WAIT, || {
        cversion() == before + 2
    });
    assert_eq!(children(&slow, DIR), held, "after the deadline");
    assert_eq!(slow.local_watcher_count(), 0, "after the deadline");

    // `cancel` reaches only attempts under way, so it is repeated until
    // this one, started meanwhile, returns.
    let (rx, waiter) = {
        let mutex = mutex.clone();
        spawn("waiter", move || mutex.lock().map(|_| ()))
    };
    let until = Instant::now() + WAIT;
    let result = loop {
        assert!(Instant::now() < until, "the cancelled lock did not return");
        mutex.cancel();
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(result) => break result,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("the waiter ended without a result: {e}"),
        }
    };
    assert_eq!(result, Err(Error::Cancelled));
    waiter.join().unwrap();
    wait_until("the node to be created and deleted", WAIT, || {
        cversion() == before + 4
    });
    assert_eq!(children(&slow, DIR), held, "after the cancel");
    assert_eq!(slow.local_watcher_count(), 0, "after the cancel");

    guard.unlock().unwrap();
    assert!(children(&holder, DIR).is_empty());
}

/// `try_lock` on a held lock and `try_lock_for` running out both return
/// `None` and delete their node, for every lock kind. After `try_lock`,
/// their own client's next request already sees the node gone (the delete
/// is sent first); a timed try whose create is answered only after its
/// deadline leaves the delete to the I/O thread, so those are waited for.
#[test]
fn failed_tries_leave_no_node() {
    const DIR: &str = "/tries/mutex";
    const RW: &str = "/tries/rw";
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();
    let held = children(&holder, DIR);
    assert_eq!(held.len(), 1);

    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, DIR).unwrap();
    assert!(mutex.try_lock().unwrap().is_none());
    assert_eq!(children(&c, DIR), held, "try_lock left a node");

    let wait = Duration::from_millis(300);
    let started = Instant::now();
    assert!(mutex.try_lock_for(wait).unwrap().is_none());
    let waited = started.elapsed();
    assert!(waited >= wait, "gave up after {waited:?}");
    assert!(waited < WAIT, "gave up only after {waited:?}");
    assert_eq!(wait_children(&c, DIR, 1), held, "try_lock_for left a node");

    let deadline = Instant::now() + wait;
    assert!(mutex.try_lock_until(deadline).unwrap().is_none());
    assert!(Instant::now() >= deadline);
    assert_eq!(
        wait_children(&c, DIR, 1),
        held,
        "try_lock_until left a node"
    );

    let reentrant = ReentrantMutex::new(&c, DIR).unwrap();
    assert!(reentrant.try_lock().unwrap().is_none());
    assert!(reentrant.try_lock_for(wait).unwrap().is_none());
    assert_eq!(reentrant.hold_count(), 0);
    assert_eq!(
        wait_children(&c, DIR, 1),
        held,
        "ReentrantMutex tries left a node"
    );
    // Seen from the other sessions too.
    assert_eq!(children(&holder, DIR), held);

    // The read-write lock: a write try against a reader, read tries
    // against a writer.
    let holder_rw = RwLock::new(&holder, RW).unwrap();
    let rw = RwLock::new(&c, RW).unwrap();
    let read = holder_rw.read().unwrap();
    assert!(rw.try_write().unwrap().is_none());
    assert!(rw.try_write_for(wait).unwrap().is_none());
    assert_eq!(wait_children(&c, RW, 1).len(), 1, "write tries left a node");
    read.unlock().unwrap();
    let write = holder_rw.write().unwrap();
    assert!(rw.try_read().unwrap().is_none());
    assert!(rw.try_read_for(wait).unwrap().is_none());
    assert!(rw.try_write().unwrap().is_none());
    assert_eq!(wait_children(&c, RW, 1).len(), 1, "read tries left a node");
    write.unlock().unwrap();

    // Once free, a try succeeds at once.
    guard.unlock().unwrap();
    let mine = mutex.try_lock().unwrap().expect("a free lock");
    assert_eq!(children(&c, DIR).len(), 1);
    mine.unlock().unwrap();
    assert!(children(&c, DIR).is_empty());
    assert!(children(&c, RW).is_empty());
}

fn is_gone(server: &TestServer, path: &str) -> bool {
    let c = connect(&server.connect_string());
    c.exists(path).unwrap().is_none()
}

/// A lock path hundreds of levels deep gets its missing ancestors made
/// without a stack frame per level: on a thread with a 128 KiB stack,
/// 400 levels (a recursion of about a kilobyte per level would overflow
/// it and abort the process). Every ancestor exists afterwards, and the
/// lock works.
#[test]
fn a_deep_lock_path_is_made_on_a_small_stack() {
    const LEVELS: usize = 400;
    let server = server();
    let c = connect(&server.connect_string());
    let dir = format!("/deep{}", "/d".repeat(LEVELS - 1));
    let locked = std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn({
            let (c, dir) = (c.clone(), dir.clone());
            move || {
                let mutex = Mutex::new(&c, &dir).unwrap();
                let guard = mutex.lock().unwrap();
                let token = guard.fencing_token();
                guard.unlock().unwrap();
                token
            }
        })
        .unwrap()
        .join()
        .expect("the locking thread");
    assert!(locked > 0);
    let mut at = dir.as_str();
    let mut levels = 0;
    while let Some(up) = at.rfind('/').filter(|i| *i > 0).map(|i| &at[..i]) {
        assert!(c.exists(up).unwrap().is_some(), "{up} exists");
        at = up;
        levels += 1;
    }
    assert_eq!(levels, LEVELS - 1);
}

/// Lock directories (and their missing ancestors) are created as
/// containers; once the last lock node goes, the server reaps them, and the
/// next acquisition recreates them with a still larger fencing token.
#[test]
fn an_empty_lock_directory_is_reaped_and_recreated() {
    const DIR: &str = "/reap/a/b/lock";
    let server = TestServer::builder()
        .container_check_interval_ms(100)
        .start()
        .expect("start a ZooKeeper server");
    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, DIR).unwrap();

    let mut last_token = 0;
    for round in 0..3 {
        let guard = mutex.lock().unwrap();
        let token = guard.fencing_token();
        assert!(
            token > last_token,
            "round {round}: token {token} after {last_token}"
        );
        last_token = token;
        // (The server shows containers with an ephemeral owner of 0, like
        // persistent nodes; that they are reaped below is what shows them
        // to be containers.)
        for dir in ["/reap", "/reap/a", "/reap/a/b", DIR] {
            assert!(c.exists(dir).unwrap().is_some(), "{dir} exists");
        }
        guard.unlock().unwrap();
        wait_until("the lock directory to be reaped", WAIT, || {
            c.exists(DIR).unwrap().is_none()
        });
        // Its parents had a child once and are empty now: reaped in turn.
        wait_until("the ancestors to be reaped", WAIT, || {
            c.exists("/reap").unwrap().is_none()
        });
    }
    assert!(is_gone(&server, "/reap"));

    // Acquire right after release, over and over, while the reaper runs
    // every 100 ms: a directory reaped between the checks and the create
    // is simply made again.
    for _ in 0..30 {
        let guard = mutex.lock().unwrap();
        assert!(guard.fencing_token() > last_token);
        last_token = guard.fencing_token();
        guard.unlock().unwrap();
    }
}

/// `cancel` from another thread wakes every waiting `lock` of that object
/// with `Cancelled`, and their nodes are deleted; it does not stick: a later
/// `lock` waits and acquires normally.
#[test]
fn cancel_wakes_waiters_with_cancelled_and_deletes_their_nodes() {
    const DIR: &str = "/cancel/lock";
    const RW: &str = "/cancel/rw";
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();
    let held = children(&holder, DIR);

    let c = connect(&server.connect_string());
    let mutex = Arc::new(Mutex::new(&c, DIR).unwrap());
    mutex.cancel(); // Nothing to cancel yet: no effect on later calls.
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let mutex = mutex.clone();
            spawn(&format!("waiter-{i}"), move || {
                mutex.lock().map(|g| g.fencing_token())
            })
        })
        .collect();
    wait_children(&holder, DIR, 4);
    for (rx, _) in &waiters {
        expect_nothing(rx, "a waiter returns before the cancel");
    }

    let cancelled_at = Instant::now();
    mutex.cancel();
    for (i, (rx, handle)) in waiters.into_iter().enumerate() {
        let result = recv(&rx, WAIT, &format!("waiter {i} to wake"));
        assert_eq!(result, Err(Error::Cancelled), "waiter {i}");
        handle.join().unwrap();
    }
    // A condvar wakeup, not a watch or a timeout.
    let took = cancelled_at.elapsed();
    assert!(took < Duration::from_secs(2), "the cancel took {took:?}");
    // A waiter cancelled before its create was answered leaves the delete
    // to the I/O thread, which sends it when the answer comes.
    assert_eq!(
        wait_children(&c, DIR, 1),
        held,
        "cancelled waiters left nodes"
    );

    // Not sticky: the next lock waits for the holder, then acquires.
    let (acquired, waiter) = {
        let mutex = mutex.clone();
        spawn("after-cancel", move || {
            mutex.lock().map(|g| g.fencing_token())
        })
    };
    wait_children(&holder, DIR, 2);
    expect_nothing(&acquired, "the lock after a cancel returns early");
    let holder_token = guard.fencing_token();
    guard.unlock().unwrap();
    let token = recv(&acquired, WAIT, "the lock after the cancel").unwrap();
    waiter.join().unwrap();
    assert!(token > holder_token);
    assert!(children(&c, DIR).is_empty());

    // RwLock waits cancel the same way.
    let holder_rw = RwLock::new(&holder, RW).unwrap();
    let write = holder_rw.write().unwrap();
    let rw = Arc::new(RwLock::new(&c, RW).unwrap());
    let reader = {
        let rw = rw.clone();
        spawn("reader", move || rw.read().map(|_| ()))
    };
    let writer = {
        let rw = rw.clone();
        spawn("writer", move || rw.write().map(|_| ()))
    };
    wait_children(&holder, RW, 3);
    rw.cancel();
    for (name, (rx, handle)) in [("reader", reader), ("writer", writer)] {
        assert_eq!(recv(&rx, WAIT, name), Err(Error::Cancelled), "{name}");
        handle.join().unwrap();
    }
    wait_children(&c, RW, 1);
    write.unlock().unwrap();
    assert!(children(&c, RW).is_empty());
}

/// An attempt cancelled, or past its deadline, just as its create found the
/// lock directory missing makes no directory: the server reaps only
/// containers that once had a child, so a directory made for a node never
/// created would stay.
#[test]
fn an_attempt_given_up_as_it_finds_its_directory_missing_makes_none() {
    use zklock::testing::{Pause, PausePoint, ReleasedOnDrop};
    // Its parent (the root) exists: one create would make it.
    const DIR: &str = "/given-up";
    const DEADLINE: Duration = Duration::from_secs(2);
    let server = server();
    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, DIR).unwrap();
    for cancel in [true, false] {
        // One deadline for the attempt and for the wait below, whenever
        // the attempt's thread starts.
        let deadline = Instant::now() + DEADLINE;
        let result = std::thread::scope(|scope| {
            let (paused_tx, paused) = std::sync::mpsc::channel();
            let mutex = &mutex;
            let attempt = scope.spawn(move || {
                let _ = paused_tx.send(Pause::arm(PausePoint::LockDirMissing));
                if cancel {
                    mutex.lock().map(|_| true)
                } else {
                    mutex.try_lock_until(deadline).map(|g| g.is_some())
                }
            });
            let pause = ReleasedOnDrop(paused.recv_timeout(WAIT).expect("armed"));
            assert!(pause.0.wait_reached(WAIT), "the create found no directory");
            if cancel {
                mutex.cancel();
            } else {
                wait_until("the deadline to pass", WAIT, || Instant::now() > deadline);
            }
            drop(pause);
            attempt.join().expect("the attempt's thread")
        });
        let expected = if cancel {
            Err(Error::Cancelled)
        } else {
            Ok(false)
        };
        assert_eq!(result, expected, "cancel: {cancel}");
        c.sync("/").unwrap();
        assert_eq!(c.exists(DIR).unwrap(), None, "cancel: {cancel}");
    }
}

/// A monitor asked only after its hold was released (a watchdog thread that
/// starts late, after a short critical section) says `Lost` and sets no
/// watch: an exists on the deleted node would leave a watch for a creation
/// that never comes, on the server and in the client, for the rest of the
/// session: one more for every such lock cycle.
#[test]
fn a_monitor_asked_after_the_release_leaves_no_watch() {
    const LOCK: &str = "/late-monitor/lock";
    const CYCLES: usize = 3;
    let server = server();
    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, LOCK).unwrap();
    let rwlock = RwLock::new(&c, "/late-monitor/rw").unwrap();
    let mut nodes = Vec::new();
    for _ in 0..CYCLES {
        let guard = mutex.lock().unwrap();
        let monitor = guard.monitor();
        nodes.push(guard.node().to_owned());
        guard.unlock().unwrap();
        assert_eq!(monitor.state(), LockState::Lost);
        assert_eq!(monitor.wait_while_held(Some(WAIT)), LockState::Lost);

        let read = rwlock.read().unwrap();
        let monitor = read.monitor();
        nodes.push(read.node().to_owned());
        drop(read);
        assert_eq!(monitor.state(), LockState::Lost);
        assert_eq!(
            monitor.state_changes().recv_timeout(WAIT),
            Ok(LockState::Lost)
        );
    }
    // A round trip: anything the monitors sent has been answered.
    c.exists(LOCK).unwrap();
    assert_eq!(c.local_watcher_count(), 0, "after {CYCLES} cycles");
    let watched = watches_by_path(&server);
    for node in &nodes {
        assert!(!watched.contains_key(node), "{node} watched: {watched:?}");
    }
}

/// A waiter that gives up removes its watch on its predecessor's release
/// note from the server, also when a watch of the client's user on that
/// path, whose receiver was dropped, shares it: nobody reads that one's
/// event. (Before, the server kept the watch for the rest of the session,
/// on a path that is made only if that predecessor is granted and then
/// releases.)
#[test]
fn a_waiter_giving_up_removes_its_note_watch_that_a_dropped_user_watch_shared() {
    const LOCK: &str = "/note-shared/lock";
    let server = server();
    let holder = connect(&server.connect_string());
    let queued = connect(&server.connect_string());
    let waiter = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = holder_mutex.lock().unwrap();
    // Waits behind the holder: when granted, it announces its release, so
    // the waiter behind it watches its note too.
    let predecessor = Contender::mutex(&queued, LOCK, "predecessor");
    let nodes = wait_children(&holder, LOCK, 2);
    let note = format!("{LOCK}/{}.released", nodes[1]);
    let mutex = Mutex::new(&waiter, LOCK).unwrap();
    let attempt = {
        let waiter_session = waiter.session_id();
        let server_ref = &server;
        std::thread::scope(|scope| {
            let attempt = scope.spawn(|| {
                mutex
                    .try_lock_for(Duration::from_secs(2))
                    .map(|guard| guard.is_some())
            });
            wait_until("the waiter to watch the note", WAIT, || {
                watches_by_path(server_ref)
                    .get(&note)
                    .is_some_and(|sessions| sessions.contains(&waiter_session))
            });
            let (_, dropped) = waiter.exists_w(&note).unwrap();
            drop(dropped);
            attempt.join().unwrap()
        })
    };
    assert_eq!(attempt, Ok(false));
    // A round trip behind anything the attempt sent.
    waiter.exists(LOCK).unwrap();
    let watched = watches_by_path(&server);
    assert!(!watched.contains_key(&note), "{note} watched: {watched:?}");
    assert_eq!(waiter.local_watcher_count(), 0);
    drop(guard);
    predecessor.wait_held();
    predecessor.release();
}

/// A hold keeps a registration for each `state_changes` receiver of its
/// guard and monitors only while the receiver lives: a long hold whose
/// code asks for one per job keeps none of the dropped ones.
#[test]
fn dropped_state_change_receivers_of_a_hold_are_unregistered() {
    const CALLS: usize = 100;
    let server = server();
    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, "/listeners/mutex").unwrap();
    let guard = mutex.lock().unwrap();
    let monitor = guard.monitor();
    for _ in 0..CALLS {
        drop(guard.state_changes());
        drop(monitor.state_changes());
    }
    assert_eq!(monitor.state_listener_count(), 0, "after {CALLS} dropped");
    let kept = guard.state_changes();
    assert_eq!(monitor.state_listener_count(), 1);
    guard.unlock().unwrap();
    assert_eq!(kept.recv_timeout(WAIT), Ok(LockState::Lost));
    drop(kept);
    assert_eq!(monitor.state_listener_count(), 0);

    let reentrant = ReentrantMutex::new(&c, "/listeners/reentrant").unwrap();
    let guard = reentrant.lock().unwrap();
    let monitor = guard.monitor();
    for _ in 0..CALLS {
        drop(guard.state_changes());
    }
    assert_eq!(monitor.state_listener_count(), 0, "after {CALLS} dropped");
    guard.unlock().unwrap();
}

/// A lock granted at once whose node an operator deleted before its state
/// was first asked for: the exists that sets the node watch then finds the
/// node gone, and the hold is `Lost`. The server and the client keep such a
/// watch, waiting for a creation that never comes (the name is unique); it
/// is removed from both, so nothing is left per incident, and a watchdog's
/// `state_changes()` channel disconnects once the guard and its monitors
/// are dropped. Before, the watch stayed, and with it the hold's senders:
/// the channel never disconnected.
#[test]
fn a_node_deleted_before_its_watch_was_set_leaves_no_watch() {
    const LOCK: &str = "/deleted-unwatched/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let operator = connect(&server.connect_string());
    let mutex = Mutex::new(&c, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let monitor = guard.monitor();
    operator.delete(&node, None).unwrap();

    let changes = monitor.state_changes();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Lost));
    assert_eq!(guard.state(), LockState::Lost);
    drop(guard);
    drop(monitor);
    assert_eq!(
        changes.recv_timeout(WAIT),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected)
    );
    // A round trip behind anything the hold sent.
    c.exists(LOCK).unwrap();
    assert_eq!(c.local_watcher_count(), 0);
    let watched = watches_by_path(&server);
    assert!(!watched.contains_key(&node), "{node} watched: {watched:?}");
}

/// Two first asks of a hold's state at once (the guard's thread and a
/// watchdog's monitor) both wait for the one exists that sets the node
/// watch: with the node deleted before either asked, both say `Lost`.
/// (Before, the one that did not send the exists said `Held` at once.)
#[test]
fn concurrent_first_asks_of_the_state_both_wait_for_the_server() {
    const LOCK: &str = "/deleted-asked-twice/lock";
    let server = server();
    let gate = proxy(&server);
    let c = connect(&gate.connect_string());
    let operator = connect(&server.connect_string());
    let mutex = Mutex::new(&c, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let monitor = guard.monitor();
    operator.delete(guard.node(), None).unwrap();
    // The exists is answered late: the other ask comes while it is out.
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(
        500,
    )));
    let exists = sent(&gate, zklock::proto::OpCode::Exists);
    let watchdog = std::thread::spawn(move || monitor.state());
    wait_until("the watchdog's exists", WAIT, || {
        sent(&gate, zklock::proto::OpCode::Exists) > exists
    });
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(watchdog.join().unwrap(), LockState::Lost);
    assert_eq!(sent(&gate, zklock::proto::OpCode::Exists), exists + 1);
    gate.set_mode(zklock::testing::ProxyMode::Pass);
}

/// Under a chroot, `/` is the chroot node, and a lock may live there: the
/// chroot node is made on demand like any lock directory, the nodes are
/// its children, a mutex and a read-write lock of another session exclude
/// each other there, and nothing is left. Without a chroot, `/` stays
/// refused (`tests/bad_input.rs`).
#[test]
fn a_lock_at_the_root_of_a_chroot_lives_in_the_chroot_node() {
    const CHROOT: &str = "/locked-app";
    let server = server();
    let root = connect(&server.connect_string());
    let chrooted = || connect(&format!("{}{CHROOT}", server.connect_string()));
    let (a, b) = (chrooted(), chrooted());
    let mutex = Mutex::new(&a, "/").expect("a mutex at the chroot node");
    let guard = mutex
        .try_lock_for(WAIT)
        .expect("try_lock_for")
        .expect("the uncontended lock");
    let node = leaf(guard.node()).to_owned();
    assert_eq!(guard.node(), format!("/{node}"));
    assert_eq!(children(&root, CHROOT), [node]);
    let other = RwLock::new(&b, "/").expect("a read-write lock at the chroot node");
    assert!(other.try_read().expect("try_read").is_none());
    guard.unlock().expect("unlock");
    let read = other
        .try_read_for(WAIT)
        .expect("try_read_for")
        .expect("the read lock, once free");
    assert_eq!(children(&root, CHROOT), [leaf(read.node()).to_owned()]);
    assert!(mutex.try_lock().expect("try_lock").is_none());
    read.unlock().expect("unlock");
    // The try's node is deleted in the background by its own client, which
    // another client's listing may overtake.
    wait_until("the chroot node to be empty", WAIT, || {
        children(&root, CHROOT).is_empty()
    });
}

/// A timeout shorter than a round trip is kept like any other: the attempt
/// gives up before the server's answer, even on a free lock, and the node
/// its create made is deleted behind it (when the create's reply comes).
/// A zero timeout is one try, which waits for the answer and gets the
/// free lock.
#[test]
fn a_timeout_shorter_than_a_round_trip_acquires_nothing_and_leaves_no_node() {
    const DIR: &str = "/lifecycle/tiny-timeout";
    let server = server();
    let client = connect(&server.connect_string());
    let observer = connect(&server.connect_string());
    let mutex = Mutex::new(&client, DIR).unwrap();
    mutex.lock().unwrap().unlock().unwrap();
    assert!(mutex
        .try_lock_for(Duration::from_nanos(1))
        .unwrap()
        .is_none());
    // Listed in the client's own session, after its create: another
    // session's listing could come before the node was even made.
    wait_until("the abandoned node to go", WAIT, || {
        children(&client, DIR).is_empty()
    });
    let guard = mutex
        .try_lock_for(Duration::ZERO)
        .unwrap()
        .expect("one try gets the free lock");
    assert_eq!(children(&observer, DIR), [leaf(guard.node()).to_owned()]);
    guard.unlock().unwrap();
}
