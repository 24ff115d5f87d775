//! Observing the session state: transitions on a dropped connection, the
//! state handler, close(), and dropping the last clone.

mod common;

use std::time::Duration;

use common::{
    builder, connect, expect_silence, fails_fast, mk, open, proxy, server, states_until,
    wait_until, WAIT,
};
use zklock::{CreateMode, Error, EventType, KeeperState, State};

#[test]
fn a_cut_connection_reports_disconnected_then_connected() {
    let zk = server();
    let gate = proxy(&zk);
    let (tx, handler_states) = crossbeam_channel::unbounded();
    let c = builder()
        .state_handler(move |state| {
            let _ = tx.send(state);
        })
        .connect(&gate.connect_string())
        .expect("connect");
    let session = c.session_id();
    assert_eq!(c.state(), State::Connected);
    assert_eq!(c.negotiated_timeout(), Some(common::SESSION_TIMEOUT));
    // The handler saw the first connection.
    assert_eq!(handler_states.recv_timeout(WAIT), Ok(State::Connected));
    let states = c.state_changes();
    mk(&c, "/n", b"");
    let (_, _, watch) = c.get_data_w("/n").expect("get_data_w");

    // A cut: the client reconnects at once, to the same session.
    gate.cut();
    let expected = [State::Disconnected, State::Connected];
    assert_eq!(states_until(&states, State::Connected), expected);
    assert_eq!(states_until(&handler_states, State::Connected), expected);
    assert_eq!(c.session_id(), session);

    // Refused for a while: Disconnected until it can get through again.
    gate.refuse(true);
    gate.cut();
    assert_eq!(
        states_until(&states, State::Disconnected),
        [State::Disconnected]
    );
    match c.wait_connected(Duration::from_millis(300)) {
        Err(Error::Timeout { .. }) => {}
        other => panic!("wait_connected while refused gave {other:?}"),
    }
    assert_eq!(c.state(), State::Disconnected);
    gate.refuse(false);
    c.wait_connected(WAIT).expect("reconnect");
    assert_eq!(states_until(&states, State::Connected), [State::Connected]);
    assert_eq!(
        states_until(&handler_states, State::Connected),
        [State::Disconnected, State::Connected]
    );
    assert_eq!(c.session_id(), session);

    // The watch set before the cuts still works.
    c.set_data("/n", b"x", None).expect("set_data");
    common::expect_event(&watch, EventType::NodeDataChanged, "/n");
    expect_silence(&states, "states");

    c.close().expect("close");
    assert_eq!(
        states_until(&handler_states, State::Closed),
        [State::Closed]
    );
}

#[test]
fn close_ends_the_session_for_every_clone() {
    let zk = server();
    let observer = connect(&zk.connect_string());
    let c = connect(&zk.connect_string());
    let clone = c.clone();
    let states = c.state_changes();
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    // (A watch on the ephemeral node itself would fire NodeDeleted: the
    // server deletes it while closing.)
    let (_, watch) = c.exists_w("/never").expect("exists_w");

    clone.close().expect("close");
    assert_eq!(c.state(), State::Closed);
    assert_eq!(states_until(&states, State::Closed), [State::Closed]);
    // The server deleted the ephemeral node before close returned.
    assert_eq!(observer.exists("/eph").expect("exists"), None);
    // Unfired watches get a last event, then their channel closes.
    let last = common::next_event(&watch, "the end of the session");
    assert_eq!(
        (last.event_type, last.state),
        (EventType::None, KeeperState::Closed)
    );
    assert!(last.path.is_empty());
    common::expect_spent(&watch, "watch after close");

    // Every call on every clone fails at once with Closed.
    for client in [&c, &clone] {
        fails_fast("get_data", &Error::Closed, || client.get_data("/"));
        fails_fast("create", &Error::Closed, || {
            client.create("/x", b"", &open(), CreateMode::Persistent)
        });
        fails_fast("add_auth", &Error::Closed, || {
            client.add_auth("digest", b"u:p")
        });
        fails_fast("wait_connected", &Error::Closed, || {
            client.wait_connected(WAIT)
        });
    }
    // Closing again is harmless, and no further state is reported.
    c.close().expect("close again");
    expect_silence(&states, "states after Closed");
    assert_eq!(observer.exists("/x").expect("exists"), None);
}

#[test]
fn dropping_the_last_clone_closes_the_session() {
    let zk = server();
    let observer = connect(&zk.connect_string());
    let c = connect(&zk.connect_string());
    let clone = c.clone();
    let session = c.session_id();
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let states = c.state_changes();

    // Another clone remains: the session lives on.
    drop(c);
    assert!(observer.exists("/eph").expect("exists").is_some());
    assert_eq!(clone.state(), State::Connected);
    clone.sync("/").expect("the clone still works");

    // The last one: closed, and its ephemeral node is gone at once.
    let worker = std::thread::spawn(move || drop(clone));
    worker.join().expect("drop on another thread");
    assert_eq!(states_until(&states, State::Closed), [State::Closed]);
    assert_eq!(observer.exists("/eph").expect("exists"), None);
    assert_eq!(
        observer.get_ephemerals("/").expect("ephemerals"),
        Vec::<String>::new()
    );
    let cons = zk.four_letter("cons").expect("cons");
    assert!(!cons.contains(&format!("sid=0x{session:x},")), "{cons}");
}

/// The last clone dropped by the state handler (on the event thread, when
/// the connection comes back): the session is closed, its ephemeral node
/// goes at once, and the handler still hears `Closed`, which the I/O
/// thread publishes once the close is answered.
#[test]
fn a_state_handler_dropping_the_last_clone_closes_the_session() {
    let zk = server();
    let gate = proxy(&zk);
    let observer = connect(&zk.connect_string());
    let slot: std::sync::Arc<std::sync::Mutex<Option<zklock::Client>>> = Default::default();
    let handler_slot = slot.clone();
    let (seen_tx, seen) = crossbeam_channel::unbounded();
    let c = builder()
        .state_handler(move |state| {
            if state == State::Connected {
                let last = handler_slot.lock().ok().and_then(|mut s| s.take());
                drop(last);
            }
            let _ = seen_tx.send(state);
        })
        .connect(&gate.connect_string())
        .expect("connect");
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    assert_eq!(states_until(&seen, State::Connected), [State::Connected]);
    *slot.lock().expect("slot") = Some(c);

    gate.cut();
    assert_eq!(
        states_until(&seen, State::Closed),
        [State::Disconnected, State::Connected, State::Closed]
    );
    assert_eq!(observer.exists("/eph").expect("exists"), None);
}

#[test]
fn closing_while_disconnected_still_ends_the_session() {
    let zk = server();
    let gate = proxy(&zk);
    let observer = connect(&zk.connect_string());
    // The close has a connect timeout for its handshake and closeSession,
    // about 0.8 s through the delay below: 5 s leaves a loaded machine room.
    const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
    let c = builder()
        .connect_timeout(CLOSE_TIMEOUT)
        .connect(&gate.connect_string())
        .expect("connect through the proxy");
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let states = c.state_changes();

    // A slow link: after the cut, the next handshake takes a while, and the
    // client is closed while it is disconnected.
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(
        200,
    )));
    gate.cut();
    assert_eq!(
        states_until(&states, State::Disconnected),
        [State::Disconnected]
    );
    let started = std::time::Instant::now();
    c.close().expect("close");
    assert!(started.elapsed() < CLOSE_TIMEOUT + Duration::from_secs(1));
    assert_eq!(c.state(), State::Closed);
    // It reconnected to send closeSession: the server ended the session
    // now, not a session timeout later.
    assert_eq!(observer.exists("/eph").expect("exists"), None);
    let states: Vec<State> = states.try_iter().collect();
    assert_eq!(states.last(), Some(&State::Closed), "{states:?}");
}

/// A close under way ends the session for `wait_connected` too, though
/// the close connects once more to send closeSession: it says `Closed`, as
/// every call then does, rather than `Ok` for the close's connection (or
/// a `Timeout`).
#[test]
fn wait_connected_during_a_close_says_closed() {
    let zk = server();
    let gate = proxy(&zk);
    let c = builder()
        .connect_timeout(Duration::from_secs(10))
        .connect(&gate.connect_string())
        .expect("connect through the proxy");
    let states = c.state_changes();
    gate.refuse(true);
    gate.cut();
    assert_eq!(
        states_until(&states, State::Disconnected),
        [State::Disconnected]
    );
    let closing = {
        let c = c.clone();
        std::thread::spawn(move || c.close())
    };
    wait_until("the close to begin", WAIT, || {
        c.exists("/") == Err(Error::Closed)
    });
    let waiting = {
        let c = c.clone();
        std::thread::spawn(move || c.wait_connected(WAIT))
    };
    gate.refuse(false);
    assert_eq!(waiting.join().expect("wait_connected"), Err(Error::Closed));
    assert_eq!(closing.join().expect("close"), Ok(()));
    assert_eq!(c.wait_connected(WAIT), Err(Error::Closed));
}

#[test]
fn a_state_handler_may_close_while_another_thread_closes() {
    let zk = server();
    // The handler closes the client (through a clone of its own) when the
    // session ends, while the test's thread is inside close() itself.
    let handle: std::sync::Arc<std::sync::Mutex<Option<zklock::Client>>> = Default::default();
    let handler_handle = handle.clone();
    let (closed_tx, closed_rx) = crossbeam_channel::unbounded();
    let c = builder()
        .state_handler(move |state| {
            if state.is_terminal() {
                let client = handler_handle.lock().ok().and_then(|mut h| h.take());
                if let Some(client) = client {
                    let _ = closed_tx.send(client.close());
                }
            }
        })
        .connect(&zk.connect_string())
        .expect("connect");
    *handle.lock().expect("handle") = Some(c.clone());

    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = done_tx.send(c.close());
    });
    // A deadlock would leave both waits unanswered.
    assert_eq!(
        done_rx.recv_timeout(WAIT).map_err(|_| "close hung"),
        Ok(Ok(()))
    );
    assert_eq!(
        closed_rx
            .recv_timeout(WAIT)
            .map_err(|_| "handler's close hung"),
        Ok(Ok(()))
    );
}

#[test]
fn a_panicking_state_handler_is_still_called_for_later_changes() {
    let zk = server();
    let gate = proxy(&zk);
    let (tx, handler_states) = crossbeam_channel::unbounded();
    let c = builder()
        .state_handler(move |state| {
            let _ = tx.send(state);
            assert_ne!(state, State::Disconnected, "the handler panics");
        })
        .connect(&gate.connect_string())
        .expect("connect");
    assert_eq!(handler_states.recv_timeout(WAIT), Ok(State::Connected));

    // The handler panics on Disconnected; it is still told of the reconnect,
    // and of the end of the session.
    gate.cut();
    assert_eq!(
        states_until(&handler_states, State::Connected),
        [State::Disconnected, State::Connected]
    );
    c.close().expect("close");
    assert_eq!(
        states_until(&handler_states, State::Closed),
        [State::Closed]
    );
}

/// A receiver of state changes is registered only while it lives: a
/// program that asks for one per job, on a healthy session that never
/// changes state, keeps no sender and no channel per call.
#[test]
fn dropped_state_change_receivers_are_unregistered() {
    const CALLS: usize = 100;
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    let before = c.state_listener_count();
    for _ in 0..CALLS {
        let changes = c.state_changes();
        assert!(changes.try_recv().is_err());
    }
    assert_eq!(c.state_listener_count(), before, "after {CALLS} dropped");
    let kept = c.state_changes();
    assert_eq!(c.state_listener_count(), before + 1);
    gate.cut();
    assert_eq!(
        states_until(&kept, State::Connected),
        [State::Disconnected, State::Connected]
    );
    drop(kept);
    assert_eq!(c.state_listener_count(), before);
}

/// A bug that panics the client's I/O thread (injected: an internal
/// callback that panics) ends the session: calls fail with an `Internal`
/// error that says so, rather than wait for ever for replies nobody reads
/// any more, and `close` reports it, since the servers were not told and
/// keep the session's nodes until it times out. The error is not
/// retryable, and the session counts as lost, so that no retry loop (the
/// client's own included) asks again for ever.
#[test]
fn a_panic_on_the_io_thread_fails_calls_instead_of_hanging_them() {
    // A session longer than the waits below: the server would shut its
    // connection at its expiry anyway.
    let zk = zklock::testing::TestServer::builder()
        .max_session_timeout(60_000)
        .start()
        .expect("start a ZooKeeper server");
    let c = builder()
        .session_timeout(Duration::from_secs(40))
        .connect(&zk.connect_string())
        .expect("connect");
    let other = connect(&zk.connect_string());
    zklock::testing::panic_io_thread_on_creation(&c, "/boom").expect("the hook");
    c.sync("/").expect("the hook's watch is set");
    other
        .create("/boom", b"", &open(), CreateMode::Persistent)
        .expect("create");
    let panicked = Error::Internal("the client's I/O thread panicked".into());
    let (tx, rx) = crossbeam_channel::bounded(1);
    let calls = c.clone();
    std::thread::spawn(move || {
        for _ in 0..500 {
            if let Err(e) = calls.exists("/") {
                let _ = tx.send(e);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let failed = rx
        .recv_timeout(WAIT)
        .expect("a call failed within the wait, none hung");
    assert_eq!(failed, panicked);
    assert!(!failed.is_retryable() && failed.is_session_lost());
    assert_eq!(c.state(), State::Closed);
    // The client's own retry loops stop at it too: before, a lock queue's
    // listing (as a fencing token's lookup) was asked again for ever.
    let (tx, rx) = crossbeam_channel::bounded(1);
    let lister = c.clone();
    std::thread::spawn(move || {
        let _ = tx.send(zklock::recipes::lock_queue(&lister, "/locks").map(|q| q.len()));
    });
    let listed = rx.recv_timeout(WAIT).expect("lock_queue returned");
    assert_eq!(listed, Err(panicked.clone()));
    // Its connection is shut, so that nothing still to be written reaches
    // the server later (before, it stayed open until the client was
    // dropped, and a close's flush could write requests already failed).
    let connection = format!("sid=0x{:x}", c.session_id());
    wait_until("the connection to be shut", WAIT, || {
        zk.four_letter("cons")
            .is_ok_and(|cons| !cons.contains(&connection))
    });
    assert_eq!(c.close(), Err(panicked));
}
