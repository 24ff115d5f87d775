//! `new_session_on_expiry`: an expiry is reported as without it, then the
//! client goes on with a new session, through the same hosts and with the
//! same credentials; locks of the old session stay lost, and a close or the
//! first connect of a session taken over stays final.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{
    builder, connect, create_bobs_node, expect_silence, expect_spent, fails_fast, next_event, open,
    proxy, server, states_until, wait_until, WAIT,
};
use zklock::proto::OpCode;
use zklock::testing::{FaultProxy, Pause, PausePoint, ProxyMode, ReleasedOnDrop, TestServer};
use zklock::{
    Client, ClientBuilder, CreateMode, Error, EventType, KeeperState, LockState, Op,
    ReentrantMutex, RwLock, State, StateChanges,
};

/// The builder of a client that goes on with a new session after an expiry.
fn renewing() -> ClientBuilder {
    builder()
        .connect_timeout(Duration::from_millis(1000))
        .new_session_on_expiry(true)
}

/// Expires `client`'s session (connected through `gate` to `zk`) the way
/// an operator would: kept out by `gate`, its session is taken over by a
/// second connection and closed there. Let back in, the client hears that
/// its session is gone and starts a new one, which `states` (the client's)
/// follows to `Connected`.
fn expire_by_takeover(
    zk: &TestServer,
    gate: &FaultProxy,
    client: &Client,
    states: &StateChanges<State>,
) {
    gate.refuse(true);
    gate.cut();
    assert_eq!(
        states_until(states, State::Disconnected),
        [State::Disconnected]
    );
    let twin = builder()
        .session(client.session_id(), client.session_password())
        .connect(&zk.connect_string())
        .expect("take the session over on a second connection");
    twin.close().expect("close the session there");
    gate.refuse(false);
    assert_eq!(
        states_until(states, State::Connected),
        [State::Expired, State::Disconnected, State::Connected]
    );
}

/// Cuts the client off through `gate` until it declares its session
/// expired, and waits, through `states` (the client's), for the
/// `Disconnected` of the new session it then tries for.
fn expire_cut_off(gate: &FaultProxy, states: &StateChanges<State>) {
    gate.set_mode(ProxyMode::Blackhole);
    assert_eq!(
        states_until(states, State::Expired),
        [State::Disconnected, State::Expired]
    );
    assert_eq!(
        states_until(states, State::Disconnected),
        [State::Disconnected]
    );
}

/// Cut off past the session timeout, the client declares its session
/// expired and reports it as without the option (the watch's last event
/// included); then, still cut off, it tries for a new session, which a call
/// made meanwhile and `wait_connected` wait for. Healed, everything goes on
/// in the new session, whose id, password and timeout the getters give,
/// and the old session's ephemeral node is gone.
#[test]
fn an_expired_session_is_reported_then_a_new_one_goes_on() {
    let zk = server();
    let gate = proxy(&zk);
    let (handled_tx, handled) = crossbeam_channel::unbounded();
    let c = renewing()
        .state_handler(move |state| {
            let _ = handled_tx.send(state);
        })
        .connect(&gate.connect_string())
        .expect("connect");
    assert!(c.negotiated_timeout().is_some());
    let (old_id, old_password) = (c.session_id(), c.session_password());
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("an ephemeral of the first session");
    let (_, _, watch) = c.get_data_w("/eph").expect("get_data_w");
    let states = c.state_changes();
    let observer = connect(&zk.connect_string());

    expire_cut_off(&gate, &states);
    let last = next_event(&watch, "the end of the first session");
    assert_eq!(
        (last.event_type, last.state),
        (EventType::None, KeeperState::Expired)
    );
    expect_spent(&watch, "the first session's watch");
    assert_eq!(c.session_id(), 0, "no new session granted yet");

    // Made between the Expired and the new session: they wait for it.
    let (made_tx, made) = mpsc::channel();
    let maker = c.clone();
    let making = std::thread::spawn(move || {
        let _ =
            made_tx.send(maker.create("/made-meanwhile", b"x", &open(), CreateMode::Persistent));
    });
    let (waited_tx, waited) = mpsc::channel();
    let waiter = c.clone();
    let waiting = std::thread::spawn(move || {
        let _ = waited_tx.send(waiter.wait_connected(WAIT));
    });
    wait_until("the create to wait for the new session", WAIT, || {
        c.queued_request_count() == 1
    });
    gate.set_mode(ProxyMode::Pass);
    assert_eq!(states_until(&states, State::Connected), [State::Connected]);
    assert_eq!(
        made.recv_timeout(WAIT).expect("the create's outcome"),
        Ok("/made-meanwhile".to_owned())
    );
    assert_eq!(waited.recv_timeout(WAIT).expect("wait_connected"), Ok(()));
    making.join().unwrap();
    waiting.join().unwrap();

    let new_id = c.session_id();
    assert_ne!(new_id, 0);
    assert_ne!(new_id, old_id);
    assert_ne!(c.session_password(), old_password);
    assert!(c.negotiated_timeout().is_some());
    assert_eq!(c.state(), State::Connected);
    c.create("/eph2", b"", &open(), CreateMode::Ephemeral)
        .expect("an ephemeral of the new session");
    let stat = observer.exists("/eph2").expect("exists").expect("/eph2");
    assert_eq!(stat.ephemeral_owner, new_id);
    assert_eq!(
        observer.get_data("/made-meanwhile").expect("get_data").0,
        b"x"
    );
    wait_until("the first session's ephemeral to go", WAIT, || {
        observer.exists("/eph").expect("exists").is_none()
    });
    assert_eq!(c.get_ephemerals("/").expect("ephemerals"), ["/eph2"]);

    // The state handler saw the same, in order.
    assert_eq!(states_until(&handled, State::Connected), [State::Connected]);
    assert_eq!(
        states_until(&handled, State::Connected),
        [
            State::Disconnected,
            State::Expired,
            State::Disconnected,
            State::Connected
        ]
    );
    c.close().expect("close");
}

/// Credentials given to the builder are sent again on the new session, as
/// after a reconnect: a node only they may read stays readable.
#[test]
fn the_new_session_has_the_old_ones_credentials() {
    let zk = server();
    let gate = proxy(&zk);
    let _bob = create_bobs_node(&zk, "/bobs", b"for bob");
    let c = renewing()
        .digest("bob", "secret")
        .connect(&gate.connect_string())
        .expect("connect as bob");
    assert_eq!(c.get_data("/bobs").expect("bob reads").0, b"for bob");
    let states = c.state_changes();
    let old_id = c.session_id();

    expire_by_takeover(&zk, &gate, &c, &states);
    assert_ne!(c.session_id(), old_id);
    assert_eq!(c.get_data("/bobs").expect("bob still reads").0, b"for bob");
    let stranger = connect(&zk.connect_string());
    assert_eq!(
        stranger.get_data("/bobs").map(|(d, _)| d),
        Err(Error::NoAuth)
    );
}

/// `close` after a new session closes that one (its ephemeral node goes at
/// once), and nothing follows it.
#[test]
fn close_closes_the_new_session_and_nothing_follows() {
    let zk = server();
    let gate = proxy(&zk);
    let c = renewing().connect(&gate.connect_string()).expect("connect");
    let states = c.state_changes();
    expire_by_takeover(&zk, &gate, &c, &states);
    c.create("/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("an ephemeral of the new session");
    let observer = connect(&zk.connect_string());
    assert!(observer.exists("/eph").expect("exists").is_some());

    c.close().expect("close the new session");
    assert_eq!(states_until(&states, State::Closed), [State::Closed]);
    assert_eq!(observer.exists("/eph").expect("exists"), None);
    assert_eq!(c.state(), State::Closed);
    fails_fast("get_data", &Error::Closed, || c.get_data("/"));
    fails_fast("wait_connected", &Error::Closed, || c.wait_connected(WAIT));
    expect_silence(&states, "states after Closed");
}

/// The first connect of a session taken over that turns out gone fails
/// with `SessionExpired`, as without the option: the caller asked for that
/// session, not for any.
#[test]
fn a_gone_session_to_take_over_still_fails_connect() {
    let zk = server();
    let gone = connect(&zk.connect_string());
    let (id, password) = (gone.session_id(), gone.session_password());
    gone.close().expect("close");
    match renewing()
        .session(id, password)
        .connect(&zk.connect_string())
    {
        Err(Error::SessionExpired) => {}
        other => panic!("taking over a closed session gave {other:?}"),
    }
}

/// The children of `dir`, sorted by name (every node of one lock path has
/// the same kind of name, so by sequence too).
fn children(client: &Client, dir: &str) -> Vec<String> {
    let mut names = client.get_children(dir).expect("get_children");
    names.sort_by_key(|name| name.rsplit('-').next().map(str::to_owned));
    names
}

/// The session owning the ephemeral node `path`, if it exists.
fn owner(client: &Client, path: &str) -> Option<i64> {
    client
        .exists(path)
        .expect("exists")
        .map(|stat| stat.ephemeral_owner)
}

/// Guards of every kind held across the expiry stay `Lost` once the client
/// is connected again in a new session, through every view of them (state,
/// monitor, changes, token, `multi`, `unlock`), and write nothing; the lock
/// objects acquire again in the new session, with new nodes and larger
/// tokens, and a reentrant mutex's lost hold refuses to be entered again.
#[test]
fn locks_held_across_the_expiry_stay_lost_in_the_new_session() {
    let zk = server();
    let gate = proxy(&zk);
    let h = renewing().connect(&gate.connect_string()).expect("connect");
    let observer = connect(&zk.connect_string());
    common::mk(&observer, "/stock", b"5");
    let states = h.state_changes();
    let mutex = h.mutex("/locks/mutex").expect("mutex");
    let guard = mutex.lock().expect("lock");
    let token = guard.fencing_token();
    assert!(token > 0);
    assert_eq!(guard.state(), LockState::Held);
    let monitor = guard.monitor();
    let changes = guard.state_changes();
    let rw = RwLock::new(&h, "/locks/rw").expect("rwlock");
    let read = rw.read().expect("read");
    assert_eq!(read.state(), LockState::Held);
    let reentrant = ReentrantMutex::new(&h, "/locks/reentrant").expect("reentrant");
    let outer = reentrant.lock().expect("reentrant lock");
    assert_eq!(outer.state(), LockState::Held);
    let old_session = h.session_id();

    expire_by_takeover(&zk, &gate, &h, &states);
    assert_eq!(h.state(), State::Connected);
    let write = || Op::set_data("/stock", b"written".to_vec(), None);

    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(guard.wait_while_held(Some(WAIT)), LockState::Lost);
    assert_eq!(monitor.state(), LockState::Lost);
    assert_eq!(monitor.wait_while_held(Some(WAIT)), LockState::Lost);
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Suspended));
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Lost));
    expect_silence(&changes, "lock states after Lost");
    assert_eq!(
        guard.state_changes().recv_timeout(WAIT),
        Ok(LockState::Lost)
    );
    assert_eq!(guard.fencing_token(), 0);
    assert_eq!(monitor.fencing_token(), 0);
    assert_eq!(guard.multi(&[write()]), Err(Error::LockLost));
    assert_eq!(monitor.multi(&[write()]), Err(Error::LockLost));
    assert_eq!(guard.multi(&[]), Err(Error::LockLost));

    assert_eq!(read.state(), LockState::Lost);
    assert_eq!(read.fencing_token(), 0);
    assert_eq!(read.multi(&[write()]), Err(Error::LockLost));

    assert_eq!(outer.state(), LockState::Lost);
    assert_eq!(outer.fencing_token(), 0);
    assert_eq!(outer.multi(&[write()]), Err(Error::LockLost));
    assert_eq!(
        reentrant.lock().map(|g| g.node().to_owned()),
        Err(Error::LockLost),
        "the lost hold is not entered again"
    );
    assert_eq!(observer.get_data("/stock").expect("get_data").0, b"5");

    // Another thread acquires the reentrant mutex in the new session.
    let taken = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let g = reentrant.lock().expect("lock on another thread");
                let seen = (g.node().to_owned(), g.state());
                g.unlock().expect("unlock");
                seen
            })
            .join()
            .expect("the other thread")
    });
    assert_eq!(taken.1, LockState::Held);
    assert_ne!(taken.0, outer.node());
    assert_eq!(outer.unlock(), Err(Error::LockLost));

    assert_eq!(read.unlock(), Err(Error::LockLost));
    let old_node = guard.node().to_owned();
    assert_eq!(guard.unlock(), Err(Error::LockLost));
    assert_eq!(monitor.state(), LockState::Lost);

    // The same mutex acquires in the new session.
    let again = mutex.lock().expect("lock in the new session");
    assert_ne!(again.node(), old_node);
    assert_eq!(owner(&observer, again.node()), Some(h.session_id()));
    assert_ne!(h.session_id(), old_session);
    assert!(again.fencing_token() > token);
    assert_eq!(again.state(), LockState::Held);
    assert_eq!(
        again.multi(&[write()]).map(|outcomes| outcomes.len()),
        Ok(1)
    );
    again.unlock().expect("unlock in the new session");
    assert_eq!(children(&observer, "/locks/mutex"), Vec::<String>::new());
}

/// A waiter queued when its session expires fails with `SessionExpired`,
/// and leaves no node in the new session; the holder is unaffected, and
/// the waiter's client acquires in the new session once the lock is free.
#[test]
fn a_waiter_across_the_expiry_fails_with_session_expired_and_leaves_no_node() {
    const LOCK: &str = "/locks/waited";
    let zk = server();
    let gate = proxy(&zk);
    let holder = connect(&zk.connect_string());
    let holder_mutex = holder.mutex(LOCK).expect("mutex");
    let held = holder_mutex.lock().expect("the holder locks");
    let w = renewing().connect(&gate.connect_string()).expect("connect");
    let states = w.state_changes();
    let waiter_client = w.clone();
    let (result_tx, result) = mpsc::channel();
    let waiting = std::thread::spawn(move || {
        let mutex = waiter_client.mutex(LOCK).expect("mutex");
        let _ = result_tx.send(mutex.lock().map(|g| g.node().to_owned()));
    });
    wait_until("the waiter to queue", WAIT, || {
        children(&holder, LOCK).len() == 2
    });
    let queued = children(&holder, LOCK);
    assert_eq!(
        owner(&holder, &format!("{LOCK}/{}", queued[1])),
        Some(w.session_id())
    );

    expire_by_takeover(&zk, &gate, &w, &states);
    assert_eq!(
        result.recv_timeout(WAIT).expect("the waiter's outcome"),
        Err(Error::SessionExpired)
    );
    waiting.join().unwrap();
    assert_eq!(children(&holder, LOCK), &queued[..1]);
    assert_eq!(
        w.get_ephemerals("/").expect("ephemerals"),
        Vec::<String>::new()
    );
    assert_eq!(held.state(), LockState::Held);

    held.unlock().expect("the holder unlocks");
    let mutex = w.mutex(LOCK).expect("mutex");
    let guard = mutex
        .try_lock_for(WAIT)
        .expect("lock in the new session")
        .expect("the lock is free");
    assert_eq!(owner(&holder, guard.node()), Some(w.session_id()));
    guard.unlock().expect("unlock");
}

/// A session replaced between a lock's grant and the making of its guard,
/// a moment no fault at the socket can hit (the calling thread is stopped
/// there by a pause point): the attempt fails with `SessionExpired`, as a
/// waiter across the expiry does, instead of handing out a guard of a lock
/// that went with the old session; nothing of the attempt is sent in the
/// new session, and the lock acquires there afterwards.
#[test]
fn a_lock_granted_as_its_session_is_replaced_fails_with_session_expired() {
    const LOCK: &str = "/locks/granted";
    let zk = server();
    let gate = proxy(&zk);
    let c = renewing().connect(&gate.connect_string()).expect("connect");
    let observer = connect(&zk.connect_string());
    let states = c.state_changes();
    let mutex = c.mutex(LOCK).expect("mutex");
    std::thread::scope(|scope| {
        let (attempt, pause) = lock_stopping_at(scope, &mutex, PausePoint::LockGranted);
        assert!(pause.0.wait_reached(WAIT), "the attempt reached its grant");
        let granted = children(&observer, LOCK);
        assert_eq!(granted.len(), 1);
        assert_eq!(
            owner(&observer, &format!("{LOCK}/{}", granted[0])),
            Some(c.session_id())
        );

        expire_by_takeover(&zk, &gate, &c, &states);
        let writes = || {
            let seen = |op: OpCode| gate.requests_seen(op.code());
            (seen(OpCode::Delete), seen(OpCode::Multi))
        };
        let before = writes();
        drop(pause);
        assert_eq!(
            attempt.join().expect("the attempt's thread"),
            (Err(Error::SessionExpired), false)
        );
        // A round trip: anything the attempt sent has arrived by its reply.
        c.exists("/").expect("exists");
        assert_eq!(
            writes(),
            before,
            "no delete or multi sent in the new session"
        );
    });
    assert_eq!(children(&observer, LOCK), Vec::<String>::new());
    let again = mutex.lock().expect("lock in the new session");
    assert_eq!(owner(&observer, again.node()), Some(c.session_id()));
    assert_eq!(again.state(), LockState::Held);
    again.unlock().expect("unlock");
}

/// A waiter whose session is replaced just as it sets its watches again
/// (its predecessor changed, and the calling thread is stopped by a pause
/// point before it watches the node it waits for): the attempt fails with
/// `SessionExpired`, and none of its watches is set in the new session,
/// where it would outlive the attempt.
#[test]
fn a_waiter_replaced_as_it_watches_again_sets_no_watch_in_the_new_session() {
    const LOCK: &str = "/locks/rewatched";
    let zk = server();
    let gate = proxy(&zk);
    let holder = connect(&zk.connect_string());
    let holder_mutex = holder.mutex(LOCK).expect("mutex");
    let held = holder_mutex.lock().expect("the holder locks");
    let w = renewing().connect(&gate.connect_string()).expect("connect");
    let states = w.state_changes();
    let mutex = w.mutex(LOCK).expect("mutex");
    std::thread::scope(|scope| {
        let (attempt, pause) = lock_stopping_at(scope, &mutex, PausePoint::LockWatching);
        wait_until("the waiter to queue", WAIT, || {
            children(&holder, LOCK).len() == 2
        });
        // Once the server has set the waiter's watch on the holder's node
        // (its getData went through the proxy, and a later request of the
        // session is answered), a write to that node fires it: the waiter
        // lists again and is about to watch the node again.
        wait_until("the waiter's watch on the holder", WAIT, || {
            gate.requests_seen(OpCode::GetData.code()) >= 1
        });
        w.exists("/").expect("a round trip behind the watch");
        holder
            .set_data(held.node(), b"revoke?", None)
            .expect("write the holder's node");
        assert!(pause.0.wait_reached(WAIT), "the waiter watches again");

        expire_by_takeover(&zk, &gate, &w, &states);
        let sent = || {
            let seen = |op: OpCode| gate.requests_seen(op.code());
            (
                seen(OpCode::GetData),
                seen(OpCode::Exists),
                seen(OpCode::GetChildren),
            )
        };
        let before = sent();
        drop(pause);
        assert_eq!(
            attempt.join().expect("the attempt's thread"),
            (Err(Error::SessionExpired), false)
        );
        // A round trip: anything the attempt sent has arrived by its reply.
        w.sync("/").expect("sync");
        assert_eq!(
            sent(),
            before,
            "no watch or listing sent in the new session"
        );
    });
    assert_eq!(children(&holder, LOCK).len(), 1, "the waiter left no node");
    assert_eq!(held.state(), LockState::Held);
    held.unlock().expect("the holder unlocks");
}

/// What a stopped lock attempt's thread gives: the lock's node (or error),
/// and whether the thread holds the mutex afterwards.
type Attempt<'scope> = std::thread::ScopedJoinHandle<'scope, (Result<String, Error>, bool)>;

/// Runs a lock attempt on a thread of `scope` that stops at `point`. The
/// pause lets it go on when dropped. The attempt has a deadline, though
/// far beyond any test's waits, so that a failing test ends rather than
/// joins a thread queued for good behind a holder that outlives the scope.
fn lock_stopping_at<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    mutex: &'scope zklock::Mutex,
    point: PausePoint,
) -> (Attempt<'scope>, ReleasedOnDrop) {
    let (paused_tx, paused) = mpsc::channel();
    let attempt = scope.spawn(move || {
        let _ = paused_tx.send(Pause::arm(point));
        let outcome = match mutex.try_lock_for(3 * WAIT) {
            Ok(Some(guard)) => Ok(guard.node().to_owned()),
            Ok(None) => Err(Error::InvalidArgument("not acquired in time".into())),
            Err(e) => Err(e),
        };
        (outcome, mutex.is_held_by_current_thread())
    });
    let pause = paused.recv_timeout(WAIT).expect("the pause armed");
    (attempt, ReleasedOnDrop(pause))
}

/// Credentials added between an expiry and the new session's handshake,
/// while no server answers: the new session has no timeout of its own yet,
/// so it cannot expire, but the call still fails with `ConnectionLoss`
/// after the session timeout, as other calls do. The credentials go with
/// the handshake once a server answers: a node only they may read is
/// readable. Before, `add_auth` blocked until a handshake came.
#[test]
fn credentials_added_before_the_new_sessions_handshake_fail_in_time_and_go_with_it() {
    let zk = server();
    let gate = proxy(&zk);
    let _bob = create_bobs_node(&zk, "/bobs", b"for bob");
    let c = renewing().connect(&gate.connect_string()).expect("connect");
    let states = c.state_changes();
    expire_cut_off(&gate, &states);

    let (added_tx, added) = mpsc::channel();
    let adder = c.clone();
    let adding = std::thread::spawn(move || {
        let _ = added_tx.send(adder.add_auth("digest", b"bob:secret"));
    });
    assert_eq!(
        added.recv_timeout(WAIT).expect("add_auth's outcome"),
        Err(Error::ConnectionLoss)
    );
    adding.join().unwrap();
    assert_eq!(c.session_id(), 0, "no new session granted yet");
    gate.set_mode(ProxyMode::Pass);
    assert_eq!(states_until(&states, State::Connected), [State::Connected]);
    assert_eq!(c.get_data("/bobs").expect("bob reads").0, b"for bob");
    c.close().expect("close");
}
