//! `AnyGuard`: the guard of every lock kind behind one type, each method
//! answering as the wrapped guard's does.

mod lock_common;

use std::time::Duration;

use lock_common::*;
use zklock::{
    Acl, AnyGuard, Client, CreateMode, Error, LockState, Mutex, Op, ReentrantMutex, RwLock,
};

const DATA: &str = "/any-data";

/// Checks one wrapped guard, the only hold of `dir`: its node, token and
/// state are the lock node's; a guarded write and a check op pass; `unlock`
/// deletes the node.
fn check_and_unlock(c: &Client, dir: &str, guard: AnyGuard<'_>, value: &str) {
    let held = children(c, dir);
    assert_eq!(held.len(), 1, "one node under {dir}: {held:?}");
    let node = format!("{dir}/{}", held[0]);
    assert_eq!(guard.node(), node);
    let stat = c.exists(&node).unwrap().expect("the lock node exists");
    assert_eq!(guard.fencing_token(), stat.czxid);
    assert_eq!(guard.state(), LockState::Held);
    assert_eq!(guard.monitor().state(), LockState::Held);
    assert_eq!(
        guard.wait_while_held(Some(Duration::from_millis(20))),
        LockState::Held
    );
    let changes = guard.state_changes();

    assert_eq!(
        guard
            .multi(&[Op::set_data(DATA, value, None)])
            .unwrap()
            .len(),
        1
    );
    assert_eq!(c.get_data(DATA).unwrap().0, value.as_bytes());
    let checked = format!("{value}, checked");
    c.multi(&[guard.check_op(), Op::set_data(DATA, checked.clone(), None)])
        .unwrap();
    assert_eq!(c.get_data(DATA).unwrap().0, checked.as_bytes());

    guard.unlock().unwrap();
    assert!(children(c, dir).is_empty(), "unlock deleted {node}");
    assert_eq!(
        changes.recv_timeout(WAIT).ok(),
        Some(LockState::Lost),
        "a released hold ends Lost"
    );
}

/// Each kind of guard, wrapped, answers as itself and unlocks.
#[test]
fn a_wrapped_guard_of_each_kind_answers_as_itself_and_unlocks() {
    let server = server();
    let c = connect(&server.connect_string());
    c.create(DATA, b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let mutex = Mutex::new(&c, "/any/mutex").unwrap();
    let reentrant = ReentrantMutex::new(&c, "/any/reentrant").unwrap();
    let rw = RwLock::new(&c, "/any/rw").unwrap();

    let guard = AnyGuard::from(mutex.lock().unwrap());
    assert!(matches!(guard, AnyGuard::Mutex(_)));
    check_and_unlock(&c, "/any/mutex", guard, "mutex");

    let guard: AnyGuard<'_> = reentrant.lock().unwrap().into();
    assert!(matches!(guard, AnyGuard::Reentrant(_)));
    check_and_unlock(&c, "/any/reentrant", guard, "reentrant");

    let guard: AnyGuard<'_> = rw.read().unwrap().into();
    assert!(matches!(guard, AnyGuard::Read(_)));
    check_and_unlock(&c, "/any/rw", guard, "read");

    let guard: AnyGuard<'_> = rw.write().unwrap().into();
    assert!(matches!(guard, AnyGuard::Write(_)));
    check_and_unlock(&c, "/any/rw", guard, "write");
}

/// Dropping a wrapped guard releases as dropping the guard does: a mutex's
/// node goes, and a reentrant hold only counts down until its last hold
/// goes.
#[test]
fn dropping_a_wrapped_guard_releases_as_the_guard_would() {
    let server = server();
    let c = connect(&server.connect_string());
    let mutex = Mutex::new(&c, "/any-drop/mutex").unwrap();
    let guard = AnyGuard::from(mutex.lock().unwrap());
    assert_eq!(children(&c, "/any-drop/mutex").len(), 1);
    drop(guard);
    wait_children(&c, "/any-drop/mutex", 0);
    assert!(!mutex.is_held_by_current_thread());

    let reentrant = ReentrantMutex::new(&c, "/any-drop/reentrant").unwrap();
    let outer = reentrant.lock().unwrap();
    let inner = AnyGuard::from(reentrant.lock().unwrap());
    assert_eq!(reentrant.hold_count(), 2);
    let node = children(&c, "/any-drop/reentrant");
    assert_eq!(node.len(), 1);
    inner.unlock().unwrap();
    assert_eq!(reentrant.hold_count(), 1);
    assert_eq!(children(&c, "/any-drop/reentrant"), node, "still held once");
    assert_eq!(outer.state(), LockState::Held);
    drop(AnyGuard::from(outer));
    wait_children(&c, "/any-drop/reentrant", 0);
    assert_eq!(reentrant.hold_count(), 0);
}

/// A wrapped guard whose lock was lost says so, as the guard would: an
/// operator's deletion of the node turns it `Lost`, and a guarded write
/// then fails with `LockLost` and writes nothing.
#[test]
fn a_wrapped_guard_reports_its_lost_lock() {
    let server = server();
    let c = connect(&server.connect_string());
    let operator = connect(&server.connect_string());
    c.create(DATA, b"before", &Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let rw = RwLock::new(&c, "/any-lost/rw").unwrap();
    let guard = AnyGuard::from(rw.write().unwrap());
    assert_eq!(guard.state(), LockState::Held);
    operator.delete(guard.node(), None).unwrap();
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
    assert_eq!(
        guard.multi(&[Op::set_data(DATA, "after", None)]).err(),
        Some(Error::LockLost)
    );
    assert_eq!(c.get_data(DATA).unwrap().0, b"before");
    assert_eq!(guard.unlock().err(), Some(Error::LockLost));
}
