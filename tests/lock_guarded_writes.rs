//! Writes that land only while a lock is held: a guard's `multi` runs the
//! caller's ops in one transaction behind a check that the lock node still
//! exists, and `check_op` puts that check in a caller's own transaction.

mod lock_common;

use std::time::Duration;

use lock_common::*;
use zklock::testing::ProxyMode;
use zklock::{Client, Error, LockState, Mutex, Op, OpOutcome, ReentrantMutex, RwLock};

fn data(client: &Client, path: &str) -> Vec<u8> {
    client.get_data(path).unwrap().0
}

/// Held, a guard's `multi` applies every op and returns their outcomes
/// alone (not the check's); a failing op is reported at its own index and
/// nothing is applied; an empty list is a check alone.
#[test]
fn a_guarded_multi_applies_while_held_and_reports_the_callers_ops() {
    const LOCK: &str = "/guarded/applies/lock";
    let server = server();
    let c = connect(&server.connect_string());
    mk(&c, "/stock", b"5");
    let mutex = Mutex::new(&c, LOCK).unwrap();
    let guard = mutex.lock().unwrap();

    let outcomes = guard
        .multi(&[
            Op::set_data("/stock", b"4".to_vec(), Some(0)),
            Op::create(
                "/sold",
                b"1".to_vec(),
                open_acl(),
                zklock::CreateMode::Persistent,
            ),
        ])
        .unwrap();
    assert_eq!(outcomes.len(), 2);
    let OpOutcome::DataSet(stat) = &outcomes[0] else {
        panic!("first outcome {:?}", outcomes[0]);
    };
    assert_eq!(stat.version, 1);
    assert_eq!(
        outcomes[1],
        OpOutcome::Created {
            path: "/sold".into(),
            stat: None
        }
    );
    assert_eq!(data(&c, "/stock"), b"4");

    let err = guard
        .multi(&[
            Op::set_data("/stock", b"3".to_vec(), None),
            Op::set_data("/missing", b"x".to_vec(), None),
        ])
        .unwrap_err();
    assert_eq!(
        err,
        Error::MultiFailed {
            index: 1,
            error: Box::new(Error::NoNode)
        }
    );
    assert_eq!(data(&c, "/stock"), b"4", "a failed transaction applied");

    assert_eq!(guard.multi(&[]).unwrap(), vec![]);
    assert_eq!(guard.state(), LockState::Held);
    guard.unlock().unwrap();
}

/// A lock node deleted under its holder (by an operator) stops the
/// holder's guarded writes with `LockLost`, applies nothing, and turns the
/// guard `Lost`; the next holder's guarded writes go through. The same for
/// every kind of guard.
#[test]
fn every_guard_stops_writing_once_its_node_is_gone() {
    let server = server();
    let c = connect(&server.connect_string());
    let admin = connect(&server.connect_string());
    mk(&c, "/counter", b"0");
    let write = |n: &str| [Op::set_data("/counter", n.as_bytes().to_vec(), None)];

    let mutex = Mutex::new(&c, "/guarded/gone/mutex").unwrap();
    let guard = mutex.lock().unwrap();
    admin.delete(guard.node(), None).unwrap();
    assert_eq!(guard.multi(&write("1")).unwrap_err(), Error::LockLost);
    assert_eq!(guard.state(), LockState::Lost);
    drop(guard);
    let next = mutex.lock().unwrap();
    next.multi(&write("2")).unwrap();
    next.unlock().unwrap();

    let reentrant = ReentrantMutex::new(&c, "/guarded/gone/reentrant").unwrap();
    let outer = reentrant.lock().unwrap();
    let inner = reentrant.lock().unwrap();
    inner.multi(&write("3")).unwrap();
    admin.delete(outer.node(), None).unwrap();
    assert_eq!(inner.multi(&write("4")).unwrap_err(), Error::LockLost);
    assert_eq!(outer.multi(&write("4")).unwrap_err(), Error::LockLost);
    drop((inner, outer));

    let rw = RwLock::new(&c, "/guarded/gone/rw").unwrap();
    let writer = rw.write().unwrap();
    writer.multi(&write("5")).unwrap();
    admin.delete(writer.node(), None).unwrap();
    assert_eq!(writer.multi(&write("6")).unwrap_err(), Error::LockLost);
    drop(writer);
    let reader = rw.read().unwrap();
    let version = c.exists("/counter").unwrap().expect("/counter").version;
    let read = [Op::check("/counter", Some(version))];
    assert_eq!(reader.multi(&read).unwrap(), vec![OpOutcome::Checked]);
    admin.delete(reader.node(), None).unwrap();
    assert_eq!(reader.multi(&read).unwrap_err(), Error::LockLost);
    drop(reader);

    assert_eq!(
        data(&c, "/counter"),
        b"5",
        "a write landed after its lock was lost"
    );
}

/// The stale holder: its connection is cut off past the session timeout,
/// the servers expire its session and the next contender acquires and
/// writes. Healed, the stale holder's guarded write fails with `LockLost`
/// (its session's end, which the write's session shares, stops it whether
/// or not the client knew) and the new holder's value stays.
#[test]
fn a_holder_whose_session_expired_cannot_overwrite_the_next_holder() {
    const LOCK: &str = "/guarded/stale/lock";
    const T: Duration = Duration::from_millis(2000);
    let server = server();
    let proxy = proxy(&server);
    let next_client = connect(&server.connect_string());
    mk(&next_client, "/owner", b"nobody");

    let stale_client = connect_with(&proxy.connect_string(), T);
    let stale_mutex = Mutex::new(&stale_client, LOCK).unwrap();
    let stale = stale_mutex.lock().unwrap();
    stale
        .multi(&[Op::set_data("/owner", b"stale".to_vec(), None)])
        .unwrap();

    proxy.set_mode(ProxyMode::Blackhole);
    let next_mutex = Mutex::new(&next_client, LOCK).unwrap();
    let next = next_mutex
        .try_lock_for(WAIT)
        .unwrap()
        .expect("the lock once the stale holder's session expires");
    next.multi(&[Op::set_data("/owner", b"next".to_vec(), None)])
        .unwrap();
    proxy.set_mode(ProxyMode::Pass);

    let err = stale
        .multi(&[Op::set_data("/owner", b"stale again".to_vec(), None)])
        .unwrap_err();
    assert_eq!(err, Error::LockLost);
    assert_eq!(stale.state(), LockState::Lost);
    assert_eq!(data(&next_client, "/owner"), b"next");
    assert_eq!(next.state(), LockState::Held);
    next.unlock().unwrap();
}

/// A guarded write made while the holder is cut off (`Suspended`) waits
/// for the reconnect and is applied then: the session and its node lived
/// through the cut, so the lock was held all along.
#[test]
fn a_guarded_write_made_while_suspended_lands_once_the_session_resumes() {
    const LOCK: &str = "/guarded/suspended/lock";
    let server = server();
    let proxy = proxy(&server);
    let c = connect(&proxy.connect_string());
    mk(&c, "/resource", b"before");
    let mutex = Mutex::new(&c, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let changes = guard.state_changes();

    proxy.refuse(true);
    proxy.cut();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Suspended));
    let monitor = guard.monitor();
    let (written, writer) = spawn("writer", move || {
        monitor.multi(&[Op::set_data("/resource", b"after".to_vec(), None)])
    });
    wait_until("the write to wait for the reconnect", WAIT, || {
        c.queued_request_count() == 1
    });
    proxy.refuse(false);
    let outcome = recv(&written, WAIT, "the write after the reconnect");
    writer.join().unwrap();
    assert!(
        matches!(outcome.as_deref(), Ok([OpOutcome::DataSet(_)])),
        "{outcome:?}"
    );
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Held));
    assert_eq!(data(&c, "/resource"), b"after");
    guard.unlock().unwrap();
}

/// A worker thread writes under the holder's lock through its monitor;
/// once the guard is dropped, the monitor's writes fail with `LockLost`
/// and apply nothing, though the release may not have reached the server.
#[test]
fn a_monitor_writes_for_another_thread_until_the_guard_is_released() {
    const LOCK: &str = "/guarded/monitor/lock";
    let server = server();
    let c = connect(&server.connect_string());
    mk(&c, "/job", b"");
    let mutex = Mutex::new(&c, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let monitor = guard.monitor();
    let write = |n: &str| [Op::set_data("/job", n.as_bytes().to_vec(), None)];

    let worker = monitor.clone();
    let outcome = std::thread::spawn(move || worker.multi(&write("worked")))
        .join()
        .unwrap();
    assert!(
        matches!(outcome.as_deref(), Ok([OpOutcome::DataSet(_)])),
        "{outcome:?}"
    );
    assert_eq!(
        c.multi(&[monitor.check_op()]).unwrap(),
        vec![OpOutcome::Checked]
    );

    drop(guard);
    let late = std::thread::spawn(move || monitor.multi(&write("late")))
        .join()
        .unwrap();
    assert_eq!(late.unwrap_err(), Error::LockLost);
    assert_eq!(data(&c, "/job"), b"worked");
}

/// `check_op` puts a lock's check in the caller's own transaction: a write
/// under two locks goes through while both are held, and fails at the
/// check of the one that was lost, applying nothing. Paths are the
/// client's, under its chroot.
#[test]
fn check_ops_make_a_write_under_two_locks() {
    let server = server();
    let root = connect(&server.connect_string());
    mk(&root, "/app", b"");
    let c = connect(&format!("{}/app", server.connect_string()));
    mk(&c, "/pair", b"0");
    let first = Mutex::new(&c, "/guarded/two/a").unwrap();
    let second = Mutex::new(&c, "/guarded/two/b").unwrap();
    let a = first.lock().unwrap();
    let b = second.lock().unwrap();
    assert!(b.node().starts_with("/guarded/two/b/"), "{}", b.node());

    let write = |n: &[u8]| Op::set_data("/pair", n.to_vec(), None);
    let outcomes = c.multi(&[a.check_op(), b.check_op(), write(b"1")]).unwrap();
    assert_eq!(outcomes[..2], [OpOutcome::Checked, OpOutcome::Checked]);

    root.delete(&format!("/app{}", b.node()), None).unwrap();
    let err = c
        .multi(&[a.check_op(), b.check_op(), write(b"2")])
        .unwrap_err();
    assert_eq!(
        err,
        Error::MultiFailed {
            index: 1,
            error: Box::new(Error::NoNode)
        }
    );
    assert_eq!(data(&c, "/pair"), b"1");
    a.unlock().unwrap();
}

fn open_acl() -> Vec<zklock::Acl> {
    zklock::Acl::open_unsafe()
}
