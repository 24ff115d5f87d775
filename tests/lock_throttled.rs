//! Releases that a real ZooKeeper 3.8 server throttles (ZTHROTTLEDOP): the
//! server answers them without applying them, and the connection stays up,
//! so waiting for the next reconnect to send them again could leave the
//! node, and the lock, for the whole session. They are sent again on the
//! same connection after a back-off.
//!
//! How the server is made to throttle, without timing races: it takes one
//! request at a time (`zookeeper.request_throttle_max_requests=1`), and
//! throttles a request that waited longer than 200 ms for its turn
//! (`zookeeper.throttled_op_wait_time`). A write that arrives within 1 s of
//! the last flush of the transaction log waits until 1 s after it
//! (`zookeeper.flushDelay`, with `zookeeper.maxWriteQueuePollTime` as long),
//! and holds the turn meanwhile. So a write made right after another write
//! returned holds the turn for about 1 s, and the release the same
//! connection sends behind it waits that long: it is throttled.

mod lock_common;

use std::thread::JoinHandle;
use std::time::Duration;

use lock_common::*;
use zklock::proto::OpCode;
use zklock::testing::{FaultProxy, Pause, PausePoint, ProxyMode, ReleasedOnDrop, TestServer};
use zklock::{Acl, AddWatchMode, Client, CreateMode, EventType, LockState, Mutex, Stat};

const FLUSH_DELAY: &str = "1000";
const THROTTLED_AFTER: &str = "200";
/// Long enough that pings waiting out a flush delay or two keep the
/// connections up.
const SESSION_TIMEOUT: Duration = Duration::from_secs(15);

fn throttling_server() -> TestServer {
    abort_if_hung();
    TestServer::builder()
        .system_property("zookeeper.request_throttle_max_requests", "1")
        .system_property("zookeeper.throttled_op_wait_time", THROTTLED_AFTER)
        .system_property("zookeeper.flushDelay", FLUSH_DELAY)
        .system_property("zookeeper.maxWriteQueuePollTime", FLUSH_DELAY)
        .start()
        .expect("start a throttling ZooKeeper server")
}

/// The node the writes that hold the server's turn go to.
const SCRATCH: &str = "/throttled-scratch";

/// Creates [`SCRATCH`] and the lock directory `dir`, with `client`.
fn make_dirs(client: &Client, dir: &str) {
    for path in [SCRATCH, dir] {
        client
            .create(path, b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap_or_else(|e| panic!("create {path}: {e}"));
    }
}

/// The server's count of requests it throttled, from `mntr`.
fn throttled_ops(server: &TestServer) -> u64 {
    let mntr = server.four_letter("mntr").expect("mntr");
    mntr.lines()
        .find_map(|line| line.strip_prefix("zk_throttled_ops\t"))
        .unwrap_or_else(|| panic!("no zk_throttled_ops in mntr:\n{mntr}"))
        .trim()
        .parse()
        .expect("a count")
}

/// A client of the throttling server, at `connect_string`. Creating its
/// session is a write, which may wait out a flush delay.
fn connect_slowly(connect_string: &str, linger: Duration) -> Client {
    Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(SESSION_TIMEOUT)
        .release_linger(linger)
        .connect(connect_string)
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}

const ZTHROTTLEDOP: i32 = -127;

/// Whether `server` holds a watch of `session` on `path` (`wchp`).
fn watched_by(server: &TestServer, session: i64, path: &str) -> bool {
    watches_by_path(server)
        .get(path)
        .is_some_and(|sessions| sessions.contains(&session))
}

/// How many throttled replies `gate` passed on.
fn throttled_replies(gate: &FaultProxy) -> usize {
    gate.error_replies()
        .iter()
        .filter(|(_, err)| *err == ZTHROTTLEDOP)
        .count()
}

/// The time from the first throttled reply `gate` passed on to the last
/// request with `op` it saw.
fn pause_after_throttling(gate: &FaultProxy, op: OpCode) -> Duration {
    let throttled_at = gate
        .error_replies()
        .into_iter()
        .find_map(|(at, err)| (err == ZTHROTTLEDOP).then_some(at))
        .expect("a throttled reply");
    let again_at = gate
        .last_request_at(op.code())
        .unwrap_or_else(|| panic!("no {op:?} request"));
    again_at.saturating_duration_since(throttled_at)
}

/// Makes the holder's connection hold the server's only turn for about the
/// flush delay: a write, and once it returned (the log just flushed), a
/// second one, started on a thread of its own. Returns once the second has
/// gone through `gate`, so that whatever the holder sends next queues
/// behind it.
fn hold_the_turn(holder: &Client, gate: &FaultProxy, scratch: &str) -> JoinHandle<Stat> {
    holder.set_data(scratch, b"flush", None).expect("set_data");
    let before = sent(gate, OpCode::SetData);
    let (client, path) = (holder.clone(), scratch.to_owned());
    let write = std::thread::spawn(move || client.set_data(&path, b"hold", None).expect("write"));
    wait_until("the second write through the proxy", WAIT, || {
        sent(gate, OpCode::SetData) > before
    });
    write
}

#[test]
fn a_throttled_release_is_sent_again_on_the_same_connection() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let states = holder.state_changes();
    let observer = connect_slowly(&server.connect_string(), Duration::ZERO);
    let scratch = SCRATCH;
    holder
        .create(scratch, b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let mutex = Mutex::new(&holder, "/throttled/plain").unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let (stat, deleted) = observer.exists_w(&node).unwrap();
    assert!(stat.is_some());
    let throttled_before = throttled_ops(&server);

    let write = hold_the_turn(&holder, &gate, scratch);
    // Sent at once (no linger), behind the write: throttled.
    drop(guard);
    write.join().expect("the write");
    let event = deleted
        .recv_timeout(WAIT)
        .unwrap_or_else(|e| panic!("{node} not deleted within {WAIT:?}: {e}"));
    assert_eq!(event.event_type, EventType::NodeDeleted);
    assert_eq!(throttled_ops(&server), throttled_before + 1);
    // The throttled delete, then the one that deleted the node, on the one
    // connection the holder ever had.
    assert_eq!(sent(&gate, OpCode::Delete), 2);
    assert_eq!(gate.connection_count(), 1);
    assert!(states.try_recv().is_err(), "the holder's state changed");
    holder.close().unwrap();
}

/// A release joined in one transaction with the next acquisition's create:
/// the throttled transaction applied neither. The acquisition creates its
/// node again, without searching for it first, and gets the lock once the
/// release, sent again on its own, deleted the old node; no node is left
/// behind.
#[test]
fn a_throttled_release_joined_to_the_next_acquisition_is_sent_again() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::from_secs(1));
    let states = holder.state_changes();
    let scratch = SCRATCH;
    holder
        .create(scratch, b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let dir = "/throttled/joined";
    let mutex = Mutex::new(&holder, dir).unwrap();
    let first = mutex.lock().unwrap();
    let old = leaf(first.node()).to_owned();
    let throttled_before = throttled_ops(&server);

    let write = hold_the_turn(&holder, &gate, scratch);
    // The release lingers, and the acquisition carries it.
    drop(first);
    let second = mutex
        .try_lock_for(WAIT)
        .unwrap()
        .unwrap_or_else(|| panic!("not acquired within {WAIT:?}: {:?}", children(&holder, dir)));
    write.join().expect("the write");
    assert_ne!(leaf(second.node()), old);
    assert_eq!(children(&holder, dir), [leaf(second.node()).to_owned()]);
    assert!(throttled_ops(&server) > throttled_before);
    // The joint transaction was refused: its delete went again alone.
    assert_eq!(sent(&gate, OpCode::Multi), 1);
    assert_eq!(sent(&gate, OpCode::Delete), 1);
    // Nothing of it was applied: no search for the node (it starts with a
    // sync) before the create goes again.
    assert_eq!(sent(&gate, OpCode::Sync), 0);
    assert_eq!(gate.connection_count(), 1);
    assert!(states.try_recv().is_err(), "the holder's state changed");
    second.unlock().unwrap();
    assert!(children(&holder, dir).is_empty());
    holder.close().unwrap();
}

/// An acquisition's create that the server throttled is made again, but
/// only after a back-off (100 ms at the first throttling): the server
/// refused it unapplied to shed load, and asking again at once would add
/// to that load. The acquisition succeeds, with nothing searched for and no
/// node left behind.
#[test]
fn a_throttled_create_is_made_again_after_a_back_off() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-create");
    make_dirs(&holder, dir);
    let mutex = Mutex::new(&holder, dir).unwrap();
    let throttled_before = throttled_ops(&server);

    // The create queues behind the write that holds the turn: throttled.
    let write = hold_the_turn(&holder, &gate, scratch);
    let guard = mutex
        .try_lock_for(WAIT)
        .unwrap()
        .unwrap_or_else(|| panic!("not acquired within {WAIT:?}: {:?}", children(&holder, dir)));
    write.join().expect("the write");
    assert!(throttled_ops(&server) > throttled_before);
    assert_eq!(sent(&gate, OpCode::Create2), 2, "a create, and one again");
    assert_eq!(sent(&gate, OpCode::Sync), 0, "nothing to search for");
    let pause = pause_after_throttling(&gate, OpCode::Create2);
    assert!(
        pause >= Duration::from_millis(100),
        "made again {pause:?} after the throttling"
    );
    assert_eq!(children(&holder, dir), [leaf(guard.node()).to_owned()]);
    guard.unlock().unwrap();
    assert!(children(&holder, dir).is_empty());
    holder.close().unwrap();
}

/// The search for a node whose create may have happened (its reply was lost
/// with the connection) starts with a sync. One that the server throttled
/// is asked again after a back-off, not at once: the search runs on the
/// I/O thread, and the session holds the question until it is due. The
/// search then finds the node, and the acquisition takes it: one create,
/// nothing made again, nothing left over. (A server may also drop a request
/// whose connection closed while it waited for its turn; then the search
/// finds no node, and the create is made again, once.)
#[test]
fn a_throttled_question_of_a_node_search_is_asked_again_after_a_back_off() {
    let server = throttling_server();
    let gate = proxy(&server);
    let blocker_gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let blocker = connect_slowly(&blocker_gate.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-search");
    make_dirs(&blocker, dir);
    let mutex = Mutex::new(&holder, dir).unwrap();
    let throttled_before = throttled_ops(&server);

    // The create reaches the server, its reply is lost with the
    // connection, and no new connection is let through yet.
    gate.refuse(true);
    gate.cut_after_request(|op| op == OpCode::Create2.code());
    let (guard, write) = std::thread::scope(|scope| {
        let choreography = scope.spawn(|| {
            wait_until("the create cut off", WAIT, || {
                !gate.is_cut_armed() && gate.connection_count() == 0
            });
            // The reconnect is held before the server while the blocker
            // takes the server's only turn: the search's first question, a
            // sync, queues behind it and is throttled.
            gate.set_mode(ProxyMode::Blackhole);
            gate.refuse(false);
            wait_until("the reconnect held", WAIT, || gate.connection_count() == 1);
            // The create holds the turn until its log flush, if the server
            // took it: a write sent before then would be throttled itself.
            // A read answered unthrottled says the turn is free.
            let mut listed = None;
            wait_until("the server idle", WAIT, || {
                listed = blocker.get_children(dir).ok();
                listed.is_some()
            });
            let applied = listed.is_some_and(|c| !c.is_empty());
            let write = hold_the_turn(&blocker, &blocker_gate, scratch);
            gate.set_mode(ProxyMode::Pass);
            (write, applied)
        });
        let guard = mutex.try_lock_for(WAIT);
        (guard, choreography.join().expect("the proxy's moves"))
    });
    let (write, applied) = write;
    let guard = guard.unwrap().unwrap_or_else(|| {
        panic!(
            "not acquired within {WAIT:?}: {:?}",
            children(&blocker, dir)
        )
    });
    write.join().expect("the write");
    assert!(throttled_ops(&server) > throttled_before);
    if applied {
        assert_eq!(sent(&gate, OpCode::Create2), 1, "found, not made again");
    } else {
        assert_eq!(sent(&gate, OpCode::Create2), 2, "not found, made again");
    }
    assert_eq!(sent(&gate, OpCode::Sync), 2, "a sync, and one again");
    let pause = pause_after_throttling(&gate, OpCode::Sync);
    assert!(
        pause >= Duration::from_millis(100),
        "asked again {pause:?} after the throttling"
    );
    assert_eq!(children(&blocker, dir), [leaf(guard.node()).to_owned()]);
    guard.unlock().unwrap();
    assert!(children(&blocker, dir).is_empty());
    holder.close().unwrap();
    blocker.close().unwrap();
}

/// A guard's watch on its node that the server throttled is asked for
/// again after a back-off. Nothing else would set it (the connection stays
/// up), and without it an operator's deletion of the node would go unseen:
/// the guard would say `Held` for the rest of the session.
#[test]
fn a_guards_throttled_node_watch_is_set_again_and_sees_its_node_deleted() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let operator = connect_slowly(&server.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-watch");
    make_dirs(&operator, dir);
    let mutex = Mutex::new(&holder, dir).unwrap();
    // Uncontended: the guard sets its watch when first asked.
    let guard = mutex.lock().unwrap();
    assert_eq!(sent(&gate, OpCode::Exists), 0);
    let throttled_before = throttled_ops(&server);

    // Asked behind the write that holds the turn, on the same connection:
    // throttled.
    let write = hold_the_turn(&holder, &gate, scratch);
    let changes = guard.state_changes();
    write.join().expect("the write");
    // Asked for again: whether the node is still there, then the watch.
    wait_until("the watch asked for again", WAIT, || {
        sent(&gate, OpCode::Exists) == 3
    });
    assert!(throttled_ops(&server) > throttled_before);
    let pause = pause_after_throttling(&gate, OpCode::Exists);
    assert!(
        pause >= Duration::from_millis(100),
        "asked for again {pause:?} after the throttling"
    );
    assert_eq!(guard.state(), LockState::Held);

    operator.delete(guard.node(), None).unwrap();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Lost));
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(gate.connection_count(), 1);
    drop(guard);
    assert!(children(&operator, dir).is_empty());
    holder.close().unwrap();
    operator.close().unwrap();
}

/// A waiter's watches are set again after a reconnect by one setWatches.
/// One the server throttled goes again after a back-off, the same record:
/// before, it was logged and dropped, and the waiter, its predecessor watch
/// unset on the server, never heard of the release and waited out its
/// deadline.
#[test]
fn a_waiters_throttled_set_watches_goes_again_and_it_acquires_on_the_release() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder_gate = proxy(&server);
    let holder = connect_slowly(&holder_gate.connect_string(), Duration::ZERO);
    let waiter = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-rewatch");
    make_dirs(&holder, dir);
    let held = Mutex::new(&holder, dir).unwrap();
    let guard = held.lock().unwrap();
    let holder_node = guard.node().to_owned();
    let waiting = Mutex::new(&waiter, dir).unwrap();
    let waiter_session = waiter.session_id();
    let throttled_before = throttled_ops(&server);

    let acquired = std::thread::scope(|scope| {
        let attempt = scope.spawn(|| {
            let guard = waiting.try_lock_for(WAIT).unwrap();
            guard.map(|g| g.node().to_owned())
        });
        wait_until("the waiter watching the holder's node", WAIT, || {
            watched_by(&server, waiter_session, &holder_node)
        });
        // The waiter's connection is cut, and its reconnect held before the
        // server while the holder takes the server's only turn: the
        // setWatches that follows the handshake queues behind the write
        // and is throttled.
        gate.refuse(true);
        gate.cut();
        wait_until("the waiter cut off", WAIT, || gate.connection_count() == 0);
        gate.set_mode(ProxyMode::Blackhole);
        gate.refuse(false);
        wait_until("the reconnect held", WAIT, || gate.connection_count() == 1);
        let write = hold_the_turn(&holder, &holder_gate, scratch);
        gate.set_mode(ProxyMode::Pass);
        write.join().expect("the write");
        wait_until("the setWatches throttled", WAIT, || {
            throttled_ops(&server) > throttled_before
        });
        drop(guard);
        attempt.join().expect("the attempt")
    });
    let node = acquired.unwrap_or_else(|| panic!("the waiter did not acquire within {WAIT:?}"));
    // Sent again once for each time it was throttled (the release's delete
    // may hold the turn too, and the waiter's other requests may be
    // throttled as well), the first no sooner than 100 ms after.
    let set_watches = sent(&gate, OpCode::SetWatches);
    assert!(
        (2..=throttled_replies(&gate) + 1).contains(&set_watches),
        "{set_watches} setWatches, {} throttled replies",
        throttled_replies(&gate)
    );
    let pause = pause_after_throttling(&gate, OpCode::SetWatches);
    assert!(
        pause >= Duration::from_millis(100),
        "sent again {pause:?} after the throttling"
    );
    assert_ne!(node, holder_node);
    // The waiter's release may hold the turn in turn: a listing behind it
    // would be throttled.
    wait_until("both released", WAIT, || {
        holder.get_children(dir).is_ok_and(|c| c.is_empty())
    });
    holder.close().unwrap();
    waiter.close().unwrap();
}

/// `unlock` waits for the server to confirm the delete: one the server
/// throttled is asked for again after a back-off, and `unlock` returns
/// `Ok` once the node is deleted. Before, it returned `ThrottledOp`, the
/// delete left to the background.
#[test]
fn a_throttled_unlock_is_asked_for_again_and_confirms_the_release() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-unlock");
    make_dirs(&holder, dir);
    let mutex = Mutex::new(&holder, dir).unwrap();
    let guard = mutex.lock().unwrap();
    let throttled_before = throttled_ops(&server);

    // The delete queues behind the write that holds the turn: throttled.
    let write = hold_the_turn(&holder, &gate, scratch);
    assert_eq!(guard.unlock(), Ok(()));
    write.join().expect("the write");
    assert!(throttled_ops(&server) > throttled_before);
    assert_eq!(sent(&gate, OpCode::Delete), 2, "a delete, and one again");
    let pause = pause_after_throttling(&gate, OpCode::Delete);
    assert!(
        pause >= Duration::from_millis(100),
        "asked for again {pause:?} after the throttling"
    );
    assert!(children(&holder, dir).is_empty());
    assert_eq!(gate.connection_count(), 1);
    holder.close().unwrap();
}

/// A guard's node watch throttled, and its node deleted (by an operator)
/// during the back-off: the guard turns `Lost`, and no watch is left
/// behind. The watch is set again only after a plain exists finds the node
/// still there; set straight away, it would have found the node gone and
/// stayed on the server, waiting for a creation that never comes, for the
/// rest of the session.
#[test]
fn a_guards_throttled_node_watch_leaves_no_watch_when_its_node_goes_meanwhile() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let operator = connect_slowly(&server.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-watch-gone");
    make_dirs(&operator, dir);
    let mutex = Mutex::new(&holder, dir).unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let throttled_before = throttled_ops(&server);

    let write = hold_the_turn(&holder, &gate, scratch);
    let changes = guard.state_changes();
    write.join().expect("the write");
    wait_until("the watch throttled", WAIT, || {
        throttled_ops(&server) > throttled_before
    });
    operator.delete(&node, None).unwrap();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Lost));
    let watched: Vec<i64> = watches_by_path(&server)
        .get(&node)
        .cloned()
        .unwrap_or_default();
    assert!(
        !watched.contains(&holder.session_id()),
        "a watch left on {node}"
    );
    drop(guard);
    holder.close().unwrap();
    operator.close().unwrap();
}

/// A waiter that gives up removes its watch on its predecessor's release
/// note from the server: the note may never come. A removal the server
/// throttled is looked at again after a back-off, and made. Before, it
/// was dropped, and the watch stayed on the server for the session.
#[test]
fn a_given_up_waiters_throttled_note_watch_removal_is_made_again() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&server.connect_string(), Duration::ZERO);
    let middle = connect_slowly(&server.connect_string(), Duration::ZERO);
    let waiter = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-note");
    make_dirs(&holder, dir);
    let held = Mutex::new(&holder, dir).unwrap();
    let guard = held.lock().unwrap();
    let middle_mutex = Mutex::new(&middle, dir).unwrap();
    let waiting = Mutex::new(&waiter, dir).unwrap();
    let session = waiter.session_id();
    let watched_by_waiter = |path: &str| watched_by(&server, session, path);
    let throttled_before = throttled_ops(&server);

    std::thread::scope(|scope| {
        // A waiter between the holder and ours, whose release ours would
        // learn of from its note.
        let between = scope.spawn(|| middle_mutex.try_lock_for(WAIT).map(|g| g.is_some()));
        wait_until("the middle waiter queued", WAIT, || {
            holder.get_children(dir).is_ok_and(|c| c.len() == 2)
        });
        let attempt = scope.spawn(|| waiting.try_lock_for(WAIT).map(|g| g.is_some()));
        wait_until("our waiter queued", WAIT, || {
            holder.get_children(dir).is_ok_and(|c| c.len() == 3)
        });
        let note = format!("{dir}/{}.released", children(&holder, dir)[1]);
        wait_until("the waiter watching the note", WAIT, || {
            watched_by_waiter(&note)
        });
        // Given up behind a write that holds the turn: the removal (and
        // the waiter's delete) are throttled.
        let write = hold_the_turn(&waiter, &gate, scratch);
        waiting.cancel();
        assert_eq!(
            attempt.join().expect("the attempt"),
            Err(zklock::Error::Cancelled)
        );
        write.join().expect("the write");
        wait_until("the removal throttled", WAIT, || {
            throttled_ops(&server) > throttled_before
        });
        wait_until("the note watch removed", WAIT, || !watched_by_waiter(&note));
        assert!(sent(&gate, OpCode::RemoveWatches) >= 2, "removed again");
        drop(guard);
        assert_eq!(between.join().expect("the middle waiter"), Ok(true));
    });
    wait_until("every node gone", WAIT, || {
        holder.get_children(dir).is_ok_and(|c| c.is_empty())
    });
    for client in [holder, middle, waiter] {
        client.close().unwrap();
    }
}

/// `lock_queue`, for tools such as `zklock holders`, asks again for a read
/// the server throttled, after a back-off, and lists the queue. Before, it
/// returned `ThrottledOp`.
#[test]
fn a_throttled_read_of_a_lock_queue_is_asked_again_and_the_queue_listed() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-queue");
    make_dirs(&holder, dir);
    let mutex = Mutex::new(&holder, dir).unwrap();
    let guard = mutex.lock().unwrap();
    let throttled_before = throttled_ops(&server);
    let listed_before = sent(&gate, OpCode::GetChildren);

    // The listing queues behind the write that holds the turn: throttled.
    let write = hold_the_turn(&holder, &gate, scratch);
    let queue = zklock::recipes::lock_queue(&holder, dir);
    write.join().expect("the write");
    let queue = queue.expect("the queue");
    assert!(throttled_ops(&server) > throttled_before);
    assert!(throttled_replies(&gate) >= 1);
    assert!(
        sent(&gate, OpCode::GetChildren) - listed_before >= 2,
        "a listing, and again"
    );
    let pause = pause_after_throttling(&gate, OpCode::GetChildren);
    assert!(
        pause >= Duration::from_millis(100),
        "asked again {pause:?} after the throttling"
    );
    let listed: Vec<(&str, bool, i64)> = queue
        .iter()
        .map(|e| (e.name.as_str(), e.holds, e.session_id))
        .collect();
    assert_eq!(listed, [(leaf(guard.node()), true, holder.session_id())]);
    assert_eq!(gate.connection_count(), 1);
    guard.unlock().unwrap();
    holder.close().unwrap();
}

/// The listing sent right behind an acquisition's create waits in the
/// throttler while the create holds the turn, and is throttled; the create
/// itself is applied. The listing is asked again after a back-off, not at
/// once, and the lock is taken: one node, one create.
#[test]
fn a_throttled_listing_behind_a_create_is_asked_again_after_a_back_off() {
    let server = throttling_server();
    let gate = proxy(&server);
    let holder = connect_slowly(&gate.connect_string(), Duration::ZERO);
    let (scratch, dir) = (SCRATCH, "/throttled-listing");
    make_dirs(&holder, dir);
    let mutex = Mutex::new(&holder, dir).unwrap();
    let throttled_before = throttled_ops(&server);
    let listed_before = sent(&gate, OpCode::GetChildren);

    // Right after a flush, the create holds the turn for the flush delay.
    holder.set_data(scratch, b"flush", None).expect("set_data");
    let guard = mutex
        .try_lock_for(WAIT)
        .unwrap()
        .unwrap_or_else(|| panic!("not acquired within {WAIT:?}"));
    assert!(throttled_ops(&server) > throttled_before);
    assert_eq!(sent(&gate, OpCode::Create2), 1, "the create went once");
    assert_eq!(
        sent(&gate, OpCode::GetChildren) - listed_before,
        2,
        "a listing, and one again"
    );
    let pause = pause_after_throttling(&gate, OpCode::GetChildren);
    assert!(
        pause >= Duration::from_millis(100),
        "listed again {pause:?} after the throttling"
    );
    assert_eq!(children(&holder, dir), [leaf(guard.node()).to_owned()]);
    guard.unlock().unwrap();
    holder.close().unwrap();
}

/// A persistent watch whose receivers are all dropped is removed from the
/// server. A removal the server throttled is looked at again after a
/// back-off, and made. Before, it was dropped, and the watch stayed on the
/// server, unheard, for the connection's life.
#[test]
fn a_dropped_persistent_watchs_throttled_removal_is_made_again() {
    throttled_removal_is_made_again("/throttled-watch", true);
}

/// The same on a path with no node (a persistent watch needs none): the
/// look after the back-off, an `exists`, is answered `NoNode`, and the
/// removal is made all the same. Before, that answer was taken for a lost
/// connection, and the watch stayed.
#[test]
fn a_dropped_persistent_watchs_throttled_removal_is_made_again_without_its_node() {
    throttled_removal_is_made_again("/throttled-watch-nowhere", false);
}

fn throttled_removal_is_made_again(path: &str, with_node: bool) {
    let server = throttling_server();
    let gate = proxy(&server);
    let client = connect_slowly(&gate.connect_string(), Duration::ZERO);
    if with_node {
        make_dirs(&client, path);
    } else {
        mk(&client, SCRATCH, b"");
    }
    let receiver = client
        .add_watch(path, AddWatchMode::Persistent)
        .expect("add_watch");
    let session = client.session_id();
    let watched = || watched_by(&server, session, path);
    assert!(watched(), "the watch set");
    let throttled_before = throttled_ops(&server);
    // Dropped behind a write that holds the turn: the removal is throttled.
    let write = hold_the_turn(&client, &gate, SCRATCH);
    drop(receiver);
    write.join().expect("the write");
    wait_until("the removal throttled", WAIT, || {
        throttled_ops(&server) > throttled_before
    });
    wait_until("the watch removed", WAIT, || !watched());
    assert_eq!(sent(&gate, OpCode::RemoveWatches), 2, "removed again, once");
    client.close().unwrap();
}

/// A dropped persistent watch whose throttled removal finds, after the
/// back-off, a live watch set on its path meanwhile is owed its removal,
/// which goes as that watch's receiver is dropped. Before, the path was
/// forgotten, and the watch stayed on the server for the connection's life.
/// The I/O thread is held where it takes in the throttling until the live
/// watch's request has passed the proxy, so the look comes after it.
#[test]
fn a_throttled_removal_left_for_a_watch_set_during_its_back_off_goes_with_it() {
    const PATH: &str = "/throttled-owed";
    let server = throttling_server();
    let gate = proxy(&server);
    let client = connect_slowly(&gate.connect_string(), Duration::ZERO);
    make_dirs(&client, PATH);
    let session = client.session_id();
    let watched = || watched_by(&server, session, PATH);
    let receiver = client
        .add_watch(PATH, AddWatchMode::Persistent)
        .expect("add_watch");
    let (removals, asked, reads) = (
        sent(&gate, OpCode::RemoveWatches),
        sent(&gate, OpCode::Exists),
        sent(&gate, OpCode::GetData),
    );
    let throttled = ReleasedOnDrop(Pause::arm_for(PausePoint::RemovalThrottled, PATH));
    let write = hold_the_turn(&client, &gate, SCRATCH);
    drop(receiver);
    write.join().expect("the write");
    assert!(throttled.0.wait_reached(WAIT), "the removal throttled");
    // Answered once the I/O thread goes on.
    let reader = client.clone();
    let data = std::thread::spawn(move || reader.get_data_w(PATH).expect("get_data_w").2);
    wait_until("the data watch's request through the proxy", WAIT, || {
        sent(&gate, OpCode::GetData) > reads
    });
    assert_eq!(sent(&gate, OpCode::Exists), asked, "looked while held");
    drop(throttled);
    let data = data.join().expect("the data watch");
    wait_until("the look after the back-off", WAIT, || {
        sent(&gate, OpCode::Exists) > asked
    });
    // The first round trip ends after the look's reply was acted on, the
    // second passes the proxy after whatever that sent.
    for _ in 0..2 {
        client.exists("/").expect("a round trip");
    }
    assert_eq!(sent(&gate, OpCode::RemoveWatches), removals + 1, "owed");
    assert!(watched(), "kept for the live data watch");
    drop(data);
    wait_until("the owed removal", WAIT, || !watched());
    assert_eq!(sent(&gate, OpCode::RemoveWatches), removals + 2);
    client.close().unwrap();
}
