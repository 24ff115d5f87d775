//! What each lock kind promises within a process: a Mutex refuses to be
//! locked twice by its holder, a ReentrantMutex counts holds, and a RwLock
//! shares between readers and orders writers fairly.

mod lock_common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use lock_common::*;
use zklock::{Acl, Client, CreateMode, Error, LockState, Mutex, ReentrantMutex, RwLock};

/// Locking a held Mutex again from the holding thread fails at once with
/// `WouldDeadlock` (any flavour of lock call) and creates no node; another
/// thread on the same object just finds it held.
#[test]
fn relocking_a_mutex_from_its_holder_would_deadlock() {
    const DIR: &str = "/deadlock/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, DIR).unwrap();
    let guard = mutex.lock().unwrap();
    assert!(mutex.is_held_by_current_thread());
    let held = children(&c, DIR);

    assert_eq!(mutex.lock().err(), Some(Error::WouldDeadlock));
    assert_eq!(mutex.try_lock().err(), Some(Error::WouldDeadlock));
    assert_eq!(
        mutex.try_lock_for(Duration::from_secs(5)).err(),
        Some(Error::WouldDeadlock)
    );
    assert_eq!(children(&c, DIR), held, "a refused relock created a node");

    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(!mutex.is_held_by_current_thread());
            assert!(
                mutex.try_lock().unwrap().is_none(),
                "held by the other thread"
            );
        })
        .join()
        .unwrap();
    });
    assert_eq!(children(&c, DIR), held);

    let token = guard.fencing_token();
    drop(guard);
    assert!(!mutex.is_held_by_current_thread());
    let again = mutex.lock().expect("free again after the drop");
    assert!(again.fencing_token() > token);
    again.unlock().unwrap();
    assert!(children(&c, DIR).is_empty());
}

/// A ReentrantMutex counts the holding thread's holds; its node is deleted
/// only when the count returns to zero. Other threads and sessions wait
/// meanwhile.
#[test]
fn a_reentrant_mutex_deletes_its_node_when_the_count_reaches_zero() {
    const DIR: &str = "/reentrant/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let other = connect(&server.connect_string());
    let mutex = ReentrantMutex::new(&c, DIR).unwrap();
    // The client's shorthand makes the same lock.
    let other_mutex = other.reentrant_mutex(DIR).unwrap();
    assert_eq!(other_mutex.path(), DIR);

    let first = mutex.lock().unwrap();
    let second = mutex.lock().unwrap();
    let third = mutex.try_lock().unwrap().expect("reentry never waits");
    assert_eq!(mutex.hold_count(), 3);
    let node = children(&c, DIR);
    assert_eq!(node.len(), 1, "one node for every hold");
    let token = first.fencing_token();
    assert_eq!(second.fencing_token(), token);
    assert_eq!(third.fencing_token(), token);
    let path = format!("{DIR}/{}", node[0]);
    for hold in [&first, &second, &third] {
        assert_eq!(hold.node(), path);
        assert_eq!(
            hold.wait_while_held(Some(Duration::from_millis(20))),
            LockState::Held
        );
    }

    assert!(other_mutex.try_lock().unwrap().is_none());
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(mutex.hold_count(), 0, "holds belong to a thread");
            assert!(mutex.try_lock().unwrap().is_none(), "another thread waits");
        })
        .join()
        .unwrap();
    });

    drop(third);
    assert_eq!(mutex.hold_count(), 2);
    // The other session's try deletes its node in the background, which
    // this client's listing may overtake.
    assert_eq!(wait_children(&c, DIR, 1), node);
    second.unlock().unwrap();
    assert_eq!(mutex.hold_count(), 1);
    assert_eq!(children(&c, DIR), node, "released before the last hold");
    assert!(other_mutex.try_lock().unwrap().is_none());

    let (acquired, waiter) = spawn("other", move || {
        let guard = other_mutex.lock().unwrap();
        let token = guard.fencing_token();
        guard.unlock().unwrap();
        token
    });
    wait_children(&c, DIR, 2);
    expect_nothing(
        &acquired,
        "the other session acquires before the last hold goes",
    );
    drop(first);
    assert_eq!(mutex.hold_count(), 0);
    assert!(
        !children(&c, DIR).contains(&node[0]),
        "the last hold deleted the node"
    );
    let other_token = recv(&acquired, WAIT, "the other session to acquire");
    waiter.join().unwrap();
    assert!(other_token > token);
    assert!(children(&c, DIR).is_empty());
}

/// Readers share; a writer waits for the readers before it and keeps later
/// readers out; a reader queued after a writer waits for that writer even
/// though readers hold.
#[test]
fn readers_share_and_writers_wait_their_turn() {
    const DIR: &str = "/rw/lock";
    let server = server();
    // Each contender in a session of its own.
    let rw = || RwLock::new(&connect(&server.connect_string()), DIR).unwrap();
    let (reader1, reader2) = (rw(), rw());
    let observer = connect(&server.connect_string());

    let r1 = reader1.read().unwrap();
    let r2 = reader2.try_read().unwrap().expect("readers share");
    assert_eq!(children(&observer, DIR).len(), 2);

    // A writer queues behind both readers.
    let writer = rw();
    let (writer_tx, writer_rx) = mpsc::channel();
    let (release_writer, writer_release) = mpsc::channel::<()>();
    let writer_thread = spawn("writer", move || {
        let guard = writer.write().unwrap();
        writer_tx.send(Instant::now()).unwrap();
        let _ = writer_release.recv_timeout(WAIT);
        guard.unlock().unwrap();
    });
    wait_children(&observer, DIR, 3);

    // A reader after the writer waits for it, though only readers hold.
    let reader3 = rw();
    let (reader3_tx, reader3_rx) = mpsc::channel();
    let reader3_thread = spawn("reader3", move || {
        let guard = reader3.read().unwrap();
        reader3_tx.send(Instant::now()).unwrap();
        guard.unlock().unwrap();
    });
    wait_children(&observer, DIR, 4);
    expect_nothing(&writer_rx, "the writer acquires while readers hold");
    expect_nothing(&reader3_rx, "a reader overtakes the queued writer");

    // The writer needs both readers gone.
    r1.unlock().unwrap();
    expect_nothing(&writer_rx, "the writer acquires while a reader holds");
    let last_reader_gone = Instant::now();
    r2.unlock().unwrap();
    let writer_at = recv(&writer_rx, WAIT, "the writer to acquire");
    assert!(writer_at > last_reader_gone);

    // While it writes, readers are out.
    expect_nothing(&reader3_rx, "a reader acquires while the writer holds");
    let late = rw();
    assert!(
        late.try_read().unwrap().is_none(),
        "a reader got in beside the writer"
    );
    let writer_gone = Instant::now();
    drop(release_writer);
    let reader3_at = recv(&reader3_rx, WAIT, "the queued reader to acquire");
    assert!(reader3_at > writer_gone);
    for (rx, handle) in [writer_thread, reader3_thread] {
        recv(&rx, WAIT, "a thread to finish");
        handle.join().unwrap();
    }
    assert!(children(&observer, DIR).is_empty());
}

/// The thread holding the write lock may take the read lock too (and the
/// read lock outlives the write lock if released first); taking the write
/// lock twice would deadlock.
#[test]
fn the_write_holder_may_also_read() {
    const DIR: &str = "/downgrade/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let other = RwLock::new(&connect(&server.connect_string()), DIR).unwrap();
    // The client's shorthand makes the same lock.
    let rw = c.rw_lock(DIR).unwrap();
    assert_eq!(rw.path(), DIR);

    let write = rw.write().unwrap();
    let read = rw
        .try_read()
        .unwrap()
        .expect("the write holder reads at once");
    assert_eq!(children(&c, DIR).len(), 2);
    assert_eq!(rw.write().err(), Some(Error::WouldDeadlock));
    assert_eq!(rw.try_write().err(), Some(Error::WouldDeadlock));
    assert!(other.try_read().unwrap().is_none());
    assert!(other.try_write().unwrap().is_none());

    // Dropping the write lock first leaves a plain reader: other readers
    // join, writers still wait.
    write.unlock().unwrap();
    assert_eq!(children(&c, DIR).len(), 1);
    let shared = other.try_read().unwrap().expect("readers share again");
    // This thread now reads through `other` too, so it may not ask to write;
    // a writer on another thread still waits.
    assert_eq!(other.try_write().err(), Some(Error::WouldDeadlock));
    std::thread::scope(|s| {
        let writer = s.spawn(|| other.try_write().map(|g| g.is_some()));
        assert_eq!(writer.join().unwrap(), Ok(false));
    });
    shared.unlock().unwrap();
    read.unlock().unwrap();
    assert!(children(&c, DIR).is_empty());
    let write = other.try_write().unwrap().expect("free");
    write.unlock().unwrap();
}

/// The write holder may not read once another writer is queued: that writer
/// would take the lock as soon as the write lock is released, while the read
/// lock lives, and waiting for it would wait on this thread. The refused
/// read leaves no node, and the queued writer takes over in its turn.
#[test]
fn the_write_holder_may_not_read_past_a_queued_writer() {
    const DIR: &str = "/downgrade-queued/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let rw = RwLock::new(&c, DIR).unwrap();
    let write = rw.write().unwrap();

    let other = connect(&server.connect_string());
    let (acquired, queued) = spawn("queued-writer", move || {
        let other = RwLock::new(&other, DIR).unwrap();
        let guard = other.try_write_for(WAIT).map(|g| g.is_some());
        guard
    });
    let before = wait_children(&c, DIR, 2);

    assert_eq!(rw.read().err(), Some(Error::WouldDeadlock));
    assert_eq!(
        rw.try_read_for(Duration::from_secs(5)).err(),
        Some(Error::WouldDeadlock)
    );
    // The refused reads' nodes are deleted in the background.
    assert_eq!(wait_children(&c, DIR, 2), before);
    assert_eq!(acquired.try_recv().ok(), None, "the writer waits its turn");

    write.unlock().unwrap();
    assert_eq!(recv(&acquired, WAIT, "the queued writer"), Ok(true));
    queued.join().unwrap();
    assert!(children(&c, DIR).is_empty());
}

/// A write holder whose node an operator deleted, unnoticed (a hold granted
/// at once watches its node only once asked about), reads as an ordinary
/// reader: it waits for the writer that now holds, instead of taking a read
/// lock from under it.
#[test]
fn a_write_holder_whose_node_is_gone_does_not_read_past_the_next_writer() {
    const DIR: &str = "/downgrade-gone/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let rw = RwLock::new(&c, DIR).unwrap();
    let write = rw.write().unwrap();
    let ours = write.node().to_owned();

    let other = connect(&server.connect_string());
    let next = Contender::writer(&other, DIR, "next writer");
    wait_children(&c, DIR, 2);
    c.delete(&ours, None).unwrap();
    let next_node = next.wait_held();

    reads_only_after(&rw, &c, DIR, &next, &next_node);
    assert_eq!(write.state(), LockState::Lost);
}

/// A write holder whose node and then lock directory an operator deleted
/// (a stuck lock cleared by hand) reads as an ordinary reader, even though
/// the writer that now holds the recreated directory's lock has the very
/// sequence number its node had: the count restarts with the directory.
#[test]
fn a_write_holder_does_not_read_under_a_new_writer_with_its_old_sequence() {
    const DIR: &str = "/downgrade-recreated/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let rw = RwLock::new(&c, DIR).unwrap();
    let write = rw.write().unwrap();
    let ours = write.node().to_owned();

    let operator = connect(&server.connect_string());
    operator.delete(&ours, None).unwrap();
    operator.delete(DIR, None).unwrap();
    let other = connect(&server.connect_string());
    let next = Contender::writer(&other, DIR, "writer in the new directory");
    let next_node = next.wait_held();
    assert_eq!(sequence(leaf(&next_node)), sequence(leaf(&ours)));

    reads_only_after(&rw, &c, DIR, &next, &next_node);
    assert_eq!(write.state(), LockState::Lost);
}

/// A write holder that read under its write lock, and whose write node an
/// operator then deleted, still holds that read node, which a writer queued
/// behind it waits for. Reading again would wait for that writer, on this
/// very thread: `WouldDeadlock`, as for any reader reading past a writer
/// queued behind its read node, not a wait to the deadline (forever, with
/// `read`).
#[test]
fn a_write_holder_whose_node_is_gone_may_not_read_past_a_writer_behind_its_read() {
    const DIR: &str = "/downgrade-gone-reread/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let rw = RwLock::new(&c, DIR).unwrap();
    let write = rw.write().unwrap();
    let read = rw.try_read().unwrap().expect("the write holder reads");
    c.delete(write.node(), None).unwrap();

    let other = connect(&server.connect_string());
    let writer = Contender::writer(&other, DIR, "writer behind the read");
    let before = wait_children(&c, DIR, 2);
    assert_eq!(before[0], leaf(read.node()));
    writer.expect_waiting();

    let started = Instant::now();
    assert_eq!(
        rw.try_read_for(Duration::from_secs(3)).map(|g| g.is_some()),
        Err(Error::WouldDeadlock)
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "refused at once"
    );
    // The refused read's node is deleted in the background.
    assert_eq!(wait_children(&c, DIR, 2), before);
    writer.expect_waiting();

    read.unlock().unwrap();
    writer.wait_held();
    writer.release();
    assert_eq!(write.state(), LockState::Lost);
    drop(write);
    assert_eq!(wait_children(&c, DIR, 0), Vec::<String>::new());
}

/// The former write holder `rw` reads only as an ordinary reader: not while
/// `next` holds `next_node`, the only node in `dir`, and once it lets go.
fn reads_only_after(rw: &RwLock, c: &Client, dir: &str, next: &Contender, next_node: &str) {
    assert_eq!(rw.try_read().map(|g| g.is_some()), Ok(false));
    assert_eq!(children(c, dir), [leaf(next_node)]);
    next.release();
    let read = rw
        .try_read_for(WAIT)
        .unwrap()
        .expect("a read once the other writer is gone");
    drop(read);
}

/// A `Mutex` and an `RwLock` on one path exclude each other: a mutex node
/// is a writer to readers, and read nodes are contenders to a mutex.
#[test]
fn a_mutex_and_a_read_write_lock_on_one_path_exclude_each_other() {
    const DIR: &str = "/mixed/lock";
    let server = server();
    let a = connect(&server.connect_string());
    let b = connect(&server.connect_string());
    let mutex = Mutex::new(&a, DIR).unwrap();
    let rw = RwLock::new(&b, DIR).unwrap();

    let held = mutex.lock().unwrap();
    assert!(
        rw.try_read().unwrap().is_none(),
        "a reader waits for a mutex"
    );
    assert!(
        rw.try_write().unwrap().is_none(),
        "a writer waits for a mutex"
    );
    held.unlock().unwrap();

    let read = rw.read().unwrap();
    assert!(
        mutex.try_lock().unwrap().is_none(),
        "a mutex waits for a reader"
    );
    // Queued behind the reader, the mutex holds once the reader leaves.
    let (acquired, waiter) = spawn("mutex-waiter", move || {
        mutex
            .try_lock_for(WAIT)
            .map(|g| g.map(|g| g.node().to_owned()))
    });
    wait_children(&b, DIR, 2);
    expect_nothing(&acquired, "the mutex, behind a reader");
    drop(read);
    let node = recv(&acquired, WAIT, "the mutex after the reader").unwrap();
    assert!(node.is_some());
    waiter.join().unwrap();
    assert_eq!(wait_children(&b, DIR, 0), Vec::<String>::new());
}

/// No upgrades: a thread holding a read lock that asks for the write lock
/// would wait for its own read node forever, so it gets `WouldDeadlock` and
/// leaves no node; once the read lock is gone it may write.
#[test]
fn a_reader_asking_to_write_gets_would_deadlock() {
    const DIR: &str = "/upgrade/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let rw = RwLock::new(&c, DIR).unwrap();

    let read = rw.read().unwrap();
    assert_eq!(rw.write().err(), Some(Error::WouldDeadlock));
    assert_eq!(
        rw.try_write_for(Duration::from_millis(200)).err(),
        Some(Error::WouldDeadlock)
    );
    assert_eq!(children(&c, DIR).len(), 1, "no write node was created");
    // Another thread may still queue for the write lock.
    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            rw.try_write_for(Duration::from_millis(100))
                .map(|g| g.is_some())
        });
        assert_eq!(waiting.join().unwrap(), Ok(false));
    });
    read.unlock().unwrap();
    let write = rw
        .try_write()
        .unwrap()
        .expect("free once the read lock is gone");
    write.unlock().unwrap();
    assert!(children(&c, DIR).is_empty());
}

/// A reader may read again, but not past a writer queued behind its read
/// node: that writer waits for the read node, so a read queued behind the
/// writer would wait on this very thread (forever, with `read`). It gets
/// `WouldDeadlock` and leaves no node; the writer takes over in its turn.
#[test]
fn a_reader_may_not_read_again_past_a_queued_writer() {
    const DIR: &str = "/reread/lock";
    let server = server();
    let c = connect(&server.connect_string());
    let rw = RwLock::new(&c, DIR).unwrap();

    let read = rw.read().unwrap();
    let again = rw
        .try_read()
        .unwrap()
        .expect("no writer queued: reads again");
    assert_eq!(children(&c, DIR).len(), 2);
    drop(again);
    wait_children(&c, DIR, 1);

    let other = connect(&server.connect_string());
    let writer = Contender::writer(&other, DIR, "queued writer");
    let before = wait_children(&c, DIR, 2);
    assert_eq!(
        rw.try_read_for(Duration::from_secs(2)).map(|g| g.is_some()),
        Err(Error::WouldDeadlock)
    );
    assert_eq!(rw.read().err(), Some(Error::WouldDeadlock));
    // The refused reads' nodes are deleted in the background.
    assert_eq!(wait_children(&c, DIR, 2), before);
    writer.expect_waiting();

    read.unlock().unwrap();
    writer.wait_held();
    writer.release();
    assert_eq!(wait_children(&c, DIR, 0), Vec::<String>::new());
}

/// A lock lost while held (its node deleted by someone else) and then
/// acquired by another thread of the same object: dropping the stale guard
/// must not touch the new holder's lock. For a Mutex, the new holder still
/// gets `WouldDeadlock` when it locks again.
#[test]
fn a_stale_mutex_guard_does_not_disturb_the_next_holder() {
    const DIR: &str = "/stale/mutex";
    let server = server();
    let c = connect(&server.connect_string());
    let admin = connect(&server.connect_string());
    let mutex = &Mutex::new(&c, DIR).unwrap();
    std::thread::scope(|s| {
        let stale = mutex.lock().unwrap();
        let (to_b, from_main) = mpsc::channel::<()>();
        let (to_main, from_b) = mpsc::channel();
        let b = s.spawn(move || {
            // Bounded: a b that never acquires must not hold up the scope.
            let guard = mutex.try_lock_for(WAIT).unwrap().expect("b acquires");
            to_main.send(guard.node().to_owned()).unwrap();
            from_main.recv_timeout(WAIT).unwrap();
            // Still ours after the stale guard went.
            assert!(mutex.is_held_by_current_thread());
            assert_eq!(mutex.try_lock().err(), Some(Error::WouldDeadlock));
            guard.unlock().unwrap();
        });
        wait_children(&admin, DIR, 2);
        admin.delete(stale.node(), None).unwrap();
        assert_eq!(stale.wait_while_held(Some(WAIT)), zklock::LockState::Lost);
        let b_node = recv(&from_b, WAIT, "b to acquire");
        drop(stale);
        assert_eq!(children(&admin, DIR), [leaf(&b_node)]);
        to_b.send(()).unwrap();
        b.join().unwrap();
    });
    assert!(children(&c, DIR).is_empty());
}

/// The same for a ReentrantMutex: the stale holds must not count down (and
/// so release) the new holder's lock, nor report its state.
#[test]
fn a_stale_reentrant_guard_does_not_release_the_next_holder() {
    const DIR: &str = "/stale/reentrant";
    let server = server();
    let c = connect(&server.connect_string());
    let admin = connect(&server.connect_string());
    let mutex = &ReentrantMutex::new(&c, DIR).unwrap();
    let (to_a, from_main) = mpsc::channel::<()>();
    let (to_main, from_a) = mpsc::channel();
    std::thread::scope(|s| {
        let a = s.spawn(move || {
            let stale = mutex.try_lock_for(WAIT).unwrap().expect("a acquires");
            to_main.send(stale.fencing_token()).unwrap();
            // Woken by the deletion below, which needs b queued: b's `lock`
            // must not wait for this wait.
            assert_eq!(stale.wait_while_held(Some(WAIT)), LockState::Lost);
            from_main.recv_timeout(WAIT).unwrap();
            assert_eq!(stale.state(), LockState::Lost, "a's lock was lost");
            drop(stale);
        });
        let a_token = recv(&from_a, WAIT, "a to acquire");
        let (b_tx, b_rx) = mpsc::channel();
        let (b_release_tx, b_release) = mpsc::channel::<()>();
        let b = s.spawn(move || {
            let guard = mutex.try_lock_for(WAIT).unwrap().expect("b acquires");
            b_tx.send(guard.fencing_token()).unwrap();
            b_release.recv_timeout(WAIT).unwrap();
            assert_eq!(mutex.hold_count(), 1);
            assert_eq!(guard.state(), LockState::Held);
            guard.unlock().unwrap();
        });
        let nodes = wait_children(&admin, DIR, 2);
        admin.delete(&format!("{DIR}/{}", nodes[0]), None).unwrap();
        let b_token = recv(&b_rx, WAIT, "b to acquire");
        assert!(b_token > a_token);
        to_a.send(()).unwrap();
        a.join().unwrap();
        assert_eq!(
            children(&admin, DIR),
            nodes[1..],
            "a's stale guard released b's lock"
        );
        b_release_tx.send(()).unwrap();
        b.join().unwrap();
    });
    assert!(children(&c, DIR).is_empty());
}

/// Re-entering a ReentrantMutex whose lock is known to be lost fails with
/// `LockLost` and adds no hold; once the lost holds are dropped, the thread
/// may lock again, with a new node.
#[test]
fn re_entering_a_lost_reentrant_lock_fails() {
    const DIR: &str = "/lost/reentrant";
    let server = server();
    let c = connect(&server.connect_string());
    let admin = connect(&server.connect_string());
    let mutex = ReentrantMutex::new(&c, DIR).unwrap();
    let outer = mutex.lock().unwrap();
    let inner = mutex.lock().unwrap();
    assert_eq!(mutex.hold_count(), 2);
    let node = wait_children(&admin, DIR, 1);
    assert_eq!(outer.state(), LockState::Held);
    admin.delete(&format!("{DIR}/{}", node[0]), None).unwrap();
    assert_eq!(outer.wait_while_held(Some(WAIT)), LockState::Lost);

    assert_eq!(mutex.lock().err(), Some(Error::LockLost));
    assert_eq!(mutex.try_lock().err(), Some(Error::LockLost));
    assert_eq!(mutex.hold_count(), 2);
    drop(inner);
    drop(outer);
    assert_eq!(mutex.hold_count(), 0);

    let again = mutex.lock().unwrap();
    assert_eq!(again.state(), LockState::Held);
    assert_ne!(wait_children(&admin, DIR, 1), node);
    again.unlock().unwrap();
    assert!(children(&admin, DIR).is_empty());
}

/// The same for a RwLock's write side: after a lost write lock is taken by
/// another thread, dropping the stale guard leaves the new writer its
/// privileges (reading at once, `WouldDeadlock` on writing again).
#[test]
fn a_stale_write_guard_does_not_disturb_the_next_writer() {
    const DIR: &str = "/stale/rw";
    let server = server();
    let c = connect(&server.connect_string());
    let admin = connect(&server.connect_string());
    let rw = &RwLock::new(&c, DIR).unwrap();
    std::thread::scope(|s| {
        let stale = rw.write().unwrap();
        let (to_b, from_main) = mpsc::channel::<()>();
        let (to_main, from_b) = mpsc::channel();
        let b = s.spawn(move || {
            let write = rw.try_write_for(WAIT).unwrap().expect("b writes");
            to_main.send(()).unwrap();
            from_main.recv_timeout(WAIT).unwrap();
            assert_eq!(rw.try_write().err(), Some(Error::WouldDeadlock));
            let read = rw.try_read().unwrap().expect("the writer reads at once");
            read.unlock().unwrap();
            write.unlock().unwrap();
        });
        wait_children(&admin, DIR, 2);
        admin.delete(stale.node(), None).unwrap();
        recv(&from_b, WAIT, "b to acquire");
        drop(stale);
        to_b.send(()).unwrap();
        b.join().unwrap();
    });
    assert!(children(&c, DIR).is_empty());
}

/// Learning a reentrant hold's fencing token may wait for a reply (for a
/// node created in one transaction with the previous release, which is not
/// that release's successor); other threads' calls on the mutex do not
/// wait with it.
#[test]
fn a_reentrant_hold_learning_its_token_holds_up_no_other_thread() {
    const DIR: &str = "/kinds/token";
    let server = server();
    let gate = std::sync::Arc::new(proxy(&server));
    // The release lingers while another session writes in the directory.
    let slow = Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(Duration::from_secs(1))
        .connect(&gate.connect_string())
        .unwrap();
    let bystander = connect(&server.connect_string());
    let mutex = std::sync::Arc::new(ReentrantMutex::new(&slow, DIR).unwrap());
    // Every chunk takes 100 ms each way: the node watch's reply, which
    // brings the token, is still on its way when the second lock returns.
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(
        100,
    )));
    let (learning_tx, learning) = mpsc::channel();
    let (token, holder) = {
        let (mutex, gate) = (mutex.clone(), gate.clone());
        spawn("holder", move || {
            drop(mutex.lock().unwrap());
            // A node created (and deleted) meanwhile: the next lock node is
            // numbered past the released node's successor.
            let other = format!("{DIR}/bystander");
            let open = Acl::open_unsafe();
            bystander
                .create(&other, b"", &open, CreateMode::Persistent)
                .unwrap();
            bystander.delete(&other, None).unwrap();
            // Joined with the lingering release: the token is not known.
            let guard = mutex.lock().unwrap();
            // Held back until the test lets it through.
            gate.set_mode(zklock::testing::ProxyMode::Blackhole);
            learning_tx.send(()).unwrap();
            let token = guard.fencing_token();
            drop(guard);
            token
        })
    };
    recv(&learning, WAIT, "the holder to start learning its token");
    let (count, other) = {
        let mutex = mutex.clone();
        spawn("other", move || mutex.hold_count())
    };
    assert_eq!(recv(&count, WAIT, "hold_count on another thread"), 0);
    other.join().unwrap();
    // It returned while the token's reply was still held back: the
    // holder is still learning, over the same connection.
    assert!(slow.state().is_connected());
    expect_nothing(&token, "the token before its reply");
    let root = connect(&server.connect_string());
    let nodes = children(&root, DIR);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let czxid = root.exists(&format!("{DIR}/{}", nodes[0])).unwrap();
    gate.set_mode(zklock::testing::ProxyMode::Pass);
    let token = recv(&token, WAIT, "the token");
    holder.join().unwrap();
    assert_eq!(Some(token), czxid.map(|stat| stat.czxid));
}

/// `unlock` of a reentrant hold, inner or last, keeps nothing of the
/// client: once every handle is dropped, the session closes (its ephemeral
/// node goes at once), as with no lock at all. An unlocked guard used to be
/// forgotten whole, and the client handle its lock's tracker holds with it,
/// so the session stayed open for the life of the process, and every
/// `unlock` leaked that memory.
#[test]
fn a_reentrant_unlock_keeps_no_handle_on_the_client() {
    const LOCK: &str = "/reentrant-unlock/lock";
    let server = server();
    let observer = connect(&server.connect_string());
    let c = connect(&server.connect_string());
    c.create("/eph", b"", &Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let states = c.state_changes();
    let mutex = ReentrantMutex::new(&c, LOCK).unwrap();
    let outer = mutex.lock().unwrap();
    let inner = mutex.lock().unwrap();
    inner.unlock().unwrap();
    outer.unlock().unwrap();
    assert_eq!(children(&observer, LOCK), Vec::<String>::new());
    drop(mutex);
    drop(c);
    assert_eq!(states.recv_timeout(WAIT), Ok(zklock::State::Closed));
    assert_eq!(observer.exists("/eph").unwrap(), None);
}

/// Holds recorded out of grant order. Thread A's attempt is granted, and
/// before A records its hold (held at a pause point), an operator deletes
/// A's node, and thread B, on the same lock object, acquires and records
/// its own hold. Then A records. B stays the recorded holder: locking again
/// from B gives `WouldDeadlock`, and B's node stays. A's `Mutex` guard is
/// `Lost`; A's `ReentrantMutex` attempt fails with `LockLost`. Before, A's
/// record replaced B's: B's thread queued behind its own node, and a
/// `ReentrantMutex` dropped B's hold, deleting B's node under it.
#[test]
fn a_hold_recorded_after_a_later_grant_leaves_that_grants_record() {
    use zklock::testing::{Pause, PausePoint, ReleasedOnDrop};
    let server = server();
    let c = connect(&server.connect_string());
    let operator = connect(&server.connect_string());
    let mutex = Mutex::new(&c, "/late-record/mutex").unwrap();
    let reentrant = ReentrantMutex::new(&c, "/late-record/reentrant").unwrap();

    // What A ends with, and what B finds once A has recorded.
    struct A {
        lost: bool,
    }
    struct B {
        node: String,
        still_recorded: bool,
        state: LockState,
        /// The lock's nodes, looked at while B holds.
        nodes: Vec<String>,
    }
    let run =
        |dir: &str,
         a_attempt: &(dyn Fn() -> A + Sync),
         b_attempt: &(dyn Fn(&mpsc::Sender<()>, &mpsc::Receiver<()>) -> B + Sync)| {
            std::thread::scope(|scope| {
                let (paused_tx, paused) = mpsc::channel();
                let a = scope.spawn(move || {
                    let _ = paused_tx.send(Pause::arm(PausePoint::LockGranted));
                    a_attempt()
                });
                let pause = ReleasedOnDrop(paused.recv_timeout(WAIT).expect("armed"));
                assert!(pause.0.wait_reached(WAIT), "A not granted");
                let a_node = children(&operator, dir);
                assert_eq!(a_node.len(), 1, "{a_node:?}");
                operator
                    .delete(&format!("{dir}/{}", a_node[0]), None)
                    .unwrap();
                let (granted_tx, granted) = mpsc::channel();
                let (recorded_tx, recorded) = mpsc::channel();
                let b = scope.spawn(move || b_attempt(&granted_tx, &recorded));
                granted.recv_timeout(WAIT).expect("B granted");
                drop(pause);
                let a = a.join().expect("A");
                let _ = recorded_tx.send(());
                let b = b.join().expect("B");
                assert!(a.lost, "A's hold is not lost");
                assert!(b.still_recorded, "B's record is gone");
                assert_eq!(b.state, LockState::Held);
                assert_eq!(b.nodes, [leaf(&b.node).to_owned()]);
            });
        };

    run(
        "/late-record/mutex",
        &|| {
            let guard = mutex.try_lock_for(WAIT).unwrap().expect("A granted");
            A {
                lost: guard.state() == LockState::Lost,
            }
        },
        &|granted, recorded| {
            let guard = mutex.try_lock_for(WAIT).unwrap().expect("B granted");
            let _ = granted.send(());
            recorded.recv_timeout(WAIT).expect("A recorded");
            B {
                node: guard.node().to_owned(),
                still_recorded: mutex.try_lock().err() == Some(Error::WouldDeadlock),
                state: guard.state(),
                nodes: children(&operator, "/late-record/mutex"),
            }
        },
    );
    run(
        "/late-record/reentrant",
        &|| A {
            lost: reentrant.try_lock_for(WAIT).err() == Some(Error::LockLost),
        },
        &|granted, recorded| {
            let guard = reentrant.try_lock_for(WAIT).unwrap().expect("B granted");
            let _ = granted.send(());
            recorded.recv_timeout(WAIT).expect("A recorded");
            B {
                node: guard.node().to_owned(),
                still_recorded: reentrant.hold_count() == 1,
                state: guard.state(),
                nodes: children(&operator, "/late-record/reentrant"),
            }
        },
    );
}

/// The same race, with the connection lost before A records its hold: the
/// server cannot say which hold is lost, so the recorded one stays. A's
/// `ReentrantMutex` attempt fails with `ConnectionLoss` (its node, gone
/// anyway, is not relied on), and B keeps its hold and its node through
/// the reconnect. Before this was looked at, A's record replaced B's and
/// B's node was deleted once the client reconnected.
#[test]
fn a_hold_recorded_late_while_disconnected_leaves_the_recorded_one() {
    use zklock::testing::{Pause, PausePoint, ReleasedOnDrop};
    const DIR: &str = "/late-record-disconnected/reentrant";
    let server = server();
    let gate = proxy(&server);
    let c = connect_with(&gate.connect_string(), Duration::from_secs(10));
    let operator = connect(&server.connect_string());
    let reentrant = ReentrantMutex::new(&c, DIR).unwrap();
    let reentrant = &reentrant;
    let operator = &operator;
    let states = c.state_changes();
    std::thread::scope(|scope| {
        let (paused_tx, paused) = mpsc::channel();
        let a = scope.spawn(move || {
            let _ = paused_tx.send(Pause::arm(PausePoint::LockGranted));
            reentrant.try_lock_for(WAIT).err()
        });
        let pause = ReleasedOnDrop(paused.recv_timeout(WAIT).expect("armed"));
        assert!(pause.0.wait_reached(WAIT), "A not granted");
        let a_node = children(operator, DIR);
        assert_eq!(a_node.len(), 1, "{a_node:?}");
        operator
            .delete(&format!("{DIR}/{}", a_node[0]), None)
            .unwrap();
        let (granted_tx, granted) = mpsc::channel();
        let (reconnected_tx, reconnected) = mpsc::channel::<()>();
        let b = scope.spawn(move || {
            let guard = reentrant.try_lock_for(WAIT).unwrap().expect("B granted");
            let _ = granted_tx.send(guard.node().to_owned());
            reconnected.recv_timeout(WAIT).expect("reconnected");
            let nodes = children(operator, DIR);
            (reentrant.hold_count(), guard.state(), nodes)
        });
        let b_node = granted.recv_timeout(WAIT).expect("B granted");
        gate.refuse(true);
        gate.cut();
        assert_eq!(states.recv_timeout(WAIT), Ok(zklock::State::Disconnected));
        drop(pause);
        assert_eq!(a.join().expect("A"), Some(Error::ConnectionLoss));
        gate.refuse(false);
        assert_eq!(states.recv_timeout(WAIT), Ok(zklock::State::Connected));
        // A round trip behind anything the reconnect sent.
        c.sync(DIR).unwrap();
        let _ = reconnected_tx.send(());
        let (count, state, nodes) = b.join().expect("B");
        assert_eq!(count, 1, "B's hold is not recorded");
        assert_eq!(state, LockState::Held);
        assert_eq!(nodes, [leaf(&b_node).to_owned()]);
    });
}
