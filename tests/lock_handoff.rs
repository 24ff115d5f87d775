//! How a released lock reaches the waiter behind it. A holder's release
//! note grants the lock to the next waiter with no listing. Anything else
//! that removes or changes the waiter's predecessor makes it list again:
//! a waiter that gave up, a write to the node (as Curator's `Revoker`
//! makes), a note whose name is taken. No note watch outlives its wait.

mod lock_common;

use std::sync::Arc;
use std::time::Duration;

use lock_common::*;
use zklock::proto::OpCode;
use zklock::testing::{ProxyMode, TestServer};
use zklock::{Acl, Client, CreateMode, Error, EventType, Mutex, RwLock};

/// The path of the release note of lock node `name` in `dir`.
fn note(dir: &str, name: &str) -> String {
    format!("{dir}/{name}.released")
}

/// The lock nodes of `dir` (its other children left out), in order.
fn lock_nodes(client: &Client, dir: &str) -> Vec<String> {
    let mut nodes: Vec<String> = client
        .get_children(dir)
        .unwrap_or_else(|e| panic!("get_children {dir}: {e}"))
        .into_iter()
        .filter(|n| !n.ends_with(".released"))
        .collect();
    nodes.sort_by_key(|n| sequence(n));
    nodes
}

/// Waits until `dir` holds `n` lock nodes, and returns them in order.
fn wait_lock_nodes(client: &Client, dir: &str, n: usize) -> Vec<String> {
    let mut last = Vec::new();
    wait_until(&format!("{n} lock nodes under {dir}"), WAIT, || {
        last = lock_nodes(client, dir);
        last.len() == n
    });
    last
}

fn watched_by(server: &TestServer, path: &str, session: i64) -> bool {
    watches_by_path(server)
        .get(path)
        .is_some_and(|sessions| sessions.contains(&session))
}

/// Hands the lock down a queue: `unlock_first` releases the holder, then
/// `middle` holds while `last` waits, then `last` holds.
fn hand_down(unlock_first: impl FnOnce(), middle: &Contender, last: &Contender) {
    unlock_first();
    middle.wait_held();
    last.expect_waiting();
    middle.release();
    last.wait_held();
}

/// A second writer, of its own session, queued on `dir` behind the write
/// lock held there; and the lock nodes, in order.
fn queue_second_writer(
    server: &TestServer,
    first: &Client,
    dir: &'static str,
) -> (Contender, Vec<String>) {
    let second_client = connect(&server.connect_string());
    let second = Contender::writer(&second_client, dir, "second writer");
    (second, wait_lock_nodes(first, dir, 2))
}

/// Waits until `client`'s session watches `path` on the server.
fn wait_watched(server: &TestServer, path: &str, client: &Client) {
    wait_until(&format!("a watch on {path}"), WAIT, || {
        watched_by(server, path, client.session_id())
    });
}

/// A waiter queued behind two nodes, the nearer of which is a holder's by
/// the time it lets go, takes the lock from that release alone: its client
/// sends no listing between queueing and holding. The note's watch is
/// consumed, and none is left on the server.
#[test]
fn a_released_mutex_reaches_the_waiter_behind_it_without_a_listing() {
    const DIR: &str = "/handoff/mutex";
    let server = server();
    let first = connect(&server.connect_string());
    let first_mutex = Mutex::new(&first, DIR).unwrap();
    let first_guard = first_mutex.lock().unwrap();

    let second_client = connect(&server.connect_string());
    let second = Contender::mutex(&second_client, DIR, "second");
    let nodes = wait_lock_nodes(&first, DIR, 2);

    let gate = proxy(&server);
    let third_client = connect(&gate.connect_string());
    let third = Contender::mutex(&third_client, DIR, "third");
    wait_lock_nodes(&first, DIR, 3);
    let second_note = note(DIR, &nodes[1]);
    wait_watched(&server, &second_note, &third_client);
    let listed = sent(&gate, OpCode::GetChildren);

    hand_down(|| first_guard.unlock().unwrap(), &second, &third);
    assert_eq!(
        sent(&gate, OpCode::GetChildren),
        listed,
        "the third listed the lock again"
    );
    assert!(
        !watches_by_path(&server)
            .keys()
            .any(|p| p.ends_with(".released")),
        "{:?}",
        watches_by_path(&server)
    );
    third.release();
    wait_lock_nodes(&first, DIR, 0);
}

/// The same for a read lock queued behind two writers: the nearer one's
/// release note grants it.
#[test]
fn a_released_write_lock_reaches_the_reader_behind_it_without_a_listing() {
    const DIR: &str = "/handoff/rw";
    let server = server();
    let first = connect(&server.connect_string());
    let first_rw = RwLock::new(&first, DIR).unwrap();
    let first_guard = first_rw.write().unwrap();
    let (second, nodes) = queue_second_writer(&server, &first, DIR);

    let gate = proxy(&server);
    let reader = connect(&gate.connect_string());
    let reader_rw = Arc::new(RwLock::new(&reader, DIR).unwrap());
    let (read, _reader) = {
        let rw = reader_rw.clone();
        spawn("reader", move || rw.read().map(|g| g.node().to_owned()))
    };
    wait_lock_nodes(&first, DIR, 3);
    let second_note = note(DIR, &nodes[1]);
    wait_watched(&server, &second_note, &reader);
    let listed = sent(&gate, OpCode::GetChildren);

    first_guard.unlock().unwrap();
    second.wait_held();
    expect_nothing(&read, "the reader while the second writer holds");
    second.release();
    let node = recv(&read, WAIT, "the reader to hold").unwrap();
    assert!(node.contains("__READ__"), "{node}");
    assert_eq!(
        sent(&gate, OpCode::GetChildren),
        listed,
        "the reader listed the lock again"
    );
    wait_lock_nodes(&first, DIR, 0);
}

/// A waiter whose predecessor gives up (its deletion looks like a release,
/// but no note comes) lists again and waits on for the holder. The watch on
/// the note that will never come goes from the server.
#[test]
fn a_waiter_whose_predecessor_gives_up_lists_again_and_keeps_waiting() {
    const DIR: &str = "/handoff/gave-up";
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let quitter = connect(&server.connect_string());
    let quitter_mutex = Arc::new(Mutex::new(&quitter, DIR).unwrap());
    let (quit, _quitter) = {
        let mutex = quitter_mutex.clone();
        spawn("quitter", move || mutex.lock().map(|_| ()))
    };
    let nodes = wait_lock_nodes(&holder, DIR, 2);

    let gate = proxy(&server);
    let waiter_client = connect(&gate.connect_string());
    let waiter_mutex = Arc::new(Mutex::new(&waiter_client, DIR).unwrap());
    let (acquired, _waiter) = {
        let mutex = waiter_mutex.clone();
        spawn("waiter", move || mutex.lock().map(|g| g.node().to_owned()))
    };
    let waiting = wait_lock_nodes(&holder, DIR, 3);
    let quitter_note = note(DIR, &nodes[1]);
    wait_watched(&server, &quitter_note, &waiter_client);
    let listed = sent(&gate, OpCode::GetChildren);

    quitter_mutex.cancel();
    assert_eq!(
        recv(&quit, WAIT, "the quitter to give up"),
        Err(Error::Cancelled)
    );
    wait_until("the waiter to list again", WAIT, || {
        sent(&gate, OpCode::GetChildren) == listed + 1
    });
    expect_nothing(&acquired, "the waiter while the holder holds");
    wait_until("the note's watch to go from the server", WAIT, || {
        !watched_by(&server, &quitter_note, waiter_client.session_id())
    });
    assert_eq!(
        lock_nodes(&holder, DIR),
        [nodes[0].clone(), waiting[2].clone()]
    );

    guard.unlock().unwrap();
    let node = recv(&acquired, WAIT, "the waiter to hold").unwrap();
    assert_eq!(node, format!("{DIR}/{}", waiting[2]));
}

/// A write to the predecessor's node (Curator's `Revoker` writes
/// `__REVOKE__` to a holder's node) is no release: the waiter lists again
/// and keeps waiting.
#[test]
fn a_write_to_the_predecessor_is_no_release() {
    const DIR: &str = "/handoff/revoke";
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let middle_client = connect(&server.connect_string());
    let middle = Contender::mutex(&middle_client, DIR, "middle");
    let nodes = wait_lock_nodes(&holder, DIR, 2);

    let gate = proxy(&server);
    let waiter_client = connect(&gate.connect_string());
    let waiter = Contender::mutex(&waiter_client, DIR, "waiter");
    wait_lock_nodes(&holder, DIR, 3);
    let middle_node = format!("{DIR}/{}", nodes[1]);
    wait_watched(&server, &middle_node, &waiter_client);
    let listed = sent(&gate, OpCode::GetChildren);

    holder.set_data(&middle_node, b"__REVOKE__", None).unwrap();
    wait_until("the waiter to list again", WAIT, || {
        sent(&gate, OpCode::GetChildren) == listed + 1
    });
    waiter.expect_waiting();
    middle.expect_waiting();

    hand_down(|| guard.unlock().unwrap(), &middle, &waiter);
    waiter.release();
    wait_lock_nodes(&holder, DIR, 0);
}

/// A node that takes a release note's name makes the release's transaction
/// fail as a whole: the lock node is then deleted on its own, by `unlock`
/// and by a dropped guard alike, and the waiter behind it still gets the
/// lock (it lists again). The squatting nodes are left alone. (They are
/// made before anyone waits on them: a node made with a note's name while
/// a waiter watches for it is a forged release, like deleting another
/// client's lock node.)
#[test]
fn a_release_whose_note_name_is_taken_still_releases() {
    const DIR: &str = "/handoff/taken";
    let server = server();
    let holder = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder, DIR).unwrap();
    let guard = holder_mutex.lock().unwrap();

    let middle_client = connect(&server.connect_string());
    let middle = Contender::mutex(&middle_client, DIR, "middle");
    let nodes = wait_lock_nodes(&holder, DIR, 2);
    let squatter = connect(&server.connect_string());
    for name in &nodes {
        let path = note(DIR, name);
        squatter
            .create(&path, b"mine", &Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
    }

    let last_client = connect(&server.connect_string());
    let last = Contender::mutex(&last_client, DIR, "last");
    wait_lock_nodes(&holder, DIR, 3);
    let middle_note = note(DIR, &nodes[1]);
    wait_watched(&server, &middle_note, &last_client);

    hand_down(|| guard.unlock().unwrap(), &middle, &last);
    last.release();
    wait_lock_nodes(&holder, DIR, 0);
    for name in &nodes {
        let (data, _) = squatter.get_data(&note(DIR, name)).unwrap();
        assert_eq!(data, b"mine");
    }
}

/// Only a hold that had to wait announces its release (contention is
/// likely to go on): a hold granted at once, and a read hold, release with
/// a plain delete. Counted at the holder's proxy, by opcode.
#[test]
fn only_an_exclusive_hold_that_waited_announces_its_release() {
    const DIR: &str = "/handoff/policy";
    let server = server();
    let gate = proxy(&server);
    let client = connect(&gate.connect_string());
    let other = connect(&server.connect_string());

    let mutex = Arc::new(Mutex::new(&client, DIR).unwrap());
    mutex.lock().unwrap().unlock().unwrap();
    assert_eq!(
        (sent(&gate, OpCode::Delete), sent(&gate, OpCode::Multi)),
        (1, 0),
        "at once"
    );

    let other_mutex = Mutex::new(&other, DIR).unwrap();
    let other_guard = other_mutex.lock().unwrap();
    let (held, _thread) = {
        let mutex = mutex.clone();
        spawn("waiter", move || mutex.lock().map(|g| g.unlock()))
    };
    wait_lock_nodes(&other, DIR, 2);
    other_guard.unlock().unwrap();
    assert_eq!(recv(&held, WAIT, "the waiter"), Ok(Ok(())));
    assert_eq!(
        (sent(&gate, OpCode::Delete), sent(&gate, OpCode::Multi)),
        (1, 1),
        "waited"
    );

    const RW: &str = "/handoff/policy-rw";
    let rw = Arc::new(RwLock::new(&client, RW).unwrap());
    let other_rw = RwLock::new(&other, RW).unwrap();
    let writer = other_rw.write().unwrap();
    let (read, _reader) = {
        let rw = rw.clone();
        spawn("reader", move || rw.read().map(|g| g.unlock()))
    };
    wait_lock_nodes(&other, RW, 2);
    writer.unlock().unwrap();
    assert_eq!(recv(&read, WAIT, "the reader"), Ok(Ok(())));
    assert_eq!(
        (sent(&gate, OpCode::Delete), sent(&gate, OpCode::Multi)),
        (2, 1),
        "read"
    );
}

/// Two readers of one client wait on the same writer's release note. The
/// one that gives up leaves the server's watch on the note to the other
/// (removing it would silence the other's watcher too), and the other
/// still takes the lock from the release alone.
#[test]
fn a_waiter_giving_up_leaves_a_shared_note_watch_to_the_other() {
    const DIR: &str = "/handoff/shared-note";
    let server = server();
    let first = connect(&server.connect_string());
    let first_rw = RwLock::new(&first, DIR).unwrap();
    let first_guard = first_rw.write().unwrap();
    let (second, nodes) = queue_second_writer(&server, &first, DIR);
    let second_note = note(DIR, &nodes[1]);

    let gate = proxy(&server);
    let readers = connect(&gate.connect_string());
    let staying_rw = Arc::new(RwLock::new(&readers, DIR).unwrap());
    let (stayed, _staying) = {
        let rw = staying_rw.clone();
        spawn("staying reader", move || {
            rw.read().map(|g| g.node().to_owned())
        })
    };
    wait_lock_nodes(&first, DIR, 3);
    wait_watched(&server, &second_note, &readers);

    let leaving_rw = RwLock::new(&readers, DIR).unwrap();
    let gave_up = leaving_rw
        .try_read_for(std::time::Duration::from_millis(300))
        .unwrap();
    assert!(gave_up.is_none(), "the second writer is still queued");
    // A round trip after the give-up: any removal it sent is done.
    readers.sync("/").unwrap();
    wait_lock_nodes(&first, DIR, 3);
    assert!(
        watched_by(&server, &second_note, readers.session_id()),
        "the note's watch went with the reader that gave up"
    );
    let listed = sent(&gate, OpCode::GetChildren);

    first_guard.unlock().unwrap();
    second.wait_held();
    second.release();
    let node = recv(&stayed, WAIT, "the staying reader to hold").unwrap();
    assert!(node.contains("__READ__"), "{node}");
    assert_eq!(
        sent(&gate, OpCode::GetChildren),
        listed,
        "the staying reader listed the lock again"
    );
    wait_lock_nodes(&first, DIR, 0);
}

/// A write to a waiter's node fires the waiter's watch on it, which the
/// waiter then sets again. If its node is deleted meanwhile (an operator,
/// after a `Revoker`'s write) and its predecessor's release note arrives
/// before the new watch's reply (the waiter's link delays every byte by
/// 500 ms), the note proves nothing about the waiter's own node: the waiter
/// lists, finds its node gone and fails with `LockLost`, instead of holding
/// a lock whose node no longer exists.
#[test]
fn a_note_that_arrives_while_the_waiters_node_is_watched_again_is_no_grant() {
    const DIR: &str = "/handoff/rewatched";
    let server = server();
    let first = connect(&server.connect_string());
    let first_mutex = Mutex::new(&first, DIR).unwrap();
    let first_guard = first_mutex.lock().unwrap();

    let second_client = connect(&server.connect_string());
    let second = Contender::mutex(&second_client, DIR, "second");
    wait_lock_nodes(&first, DIR, 2);

    let gate = proxy(&server);
    let third_client = connect(&gate.connect_string());
    let third_session = third_client.session_id();
    let (result, third) = spawn("third", move || {
        let mutex = Mutex::new(&third_client, DIR).unwrap();
        mutex.lock().map(|g| g.node().to_owned())
    });
    let nodes = wait_lock_nodes(&first, DIR, 3);
    let third_node = format!("{DIR}/{}", nodes[2]);
    for watched in [note(DIR, &nodes[1]), third_node.clone()] {
        wait_until(&format!("a watch on {watched}"), WAIT, || {
            watched_by(&server, &watched, third_session)
        });
    }
    first_guard.unlock().unwrap();
    second.wait_held();

    gate.set_mode(ProxyMode::Delay(Duration::from_millis(500)));
    first.set_data(&third_node, b"__REVOKE__", None).unwrap();
    first.delete(&third_node, None).unwrap();
    // The second had to wait: its release sends a note.
    second.release();
    wait_lock_nodes(&first, DIR, 0);
    let outcome = recv(&result, WAIT, "the third to end its wait");
    third.join().unwrap();
    gate.set_mode(ProxyMode::Pass);
    assert_eq!(outcome, Err(Error::LockLost));
}

/// The session timeout of the clients of the tests that freeze the server
/// for a moment: long enough for none of their sessions to expire, and for
/// no connection to be dropped, while it is frozen.
const FROZEN_SESSION: Duration = Duration::from_secs(10);

/// A waiter queued behind two contenders, watching the nearer one's
/// release note. Its client goes through `gate`, which counts its requests.
struct NoteWaiter {
    /// A client of its own, for the tests' other requests.
    other: Client,
    /// The holder, then the contender the waiter waits on.
    _contenders: [Contender; 2],
    client: Client,
    mutex: Arc<Mutex>,
    /// The waiter's outcome.
    result: std::sync::mpsc::Receiver<Result<(), Error>>,
    /// The release note the waiter watches.
    note: String,
    gate: zklock::testing::FaultProxy,
    server: TestServer,
}

fn queue_note_waiter(dir: &'static str) -> NoteWaiter {
    let server = server();
    let other = connect_with(&server.connect_string(), FROZEN_SESSION);
    let first_client = connect_with(&server.connect_string(), FROZEN_SESSION);
    let first = Contender::mutex(&first_client, dir, "first");
    first.wait_held();
    let second_client = connect_with(&server.connect_string(), FROZEN_SESSION);
    let second = Contender::mutex(&second_client, dir, "second");
    let nodes = wait_lock_nodes(&other, dir, 2);
    let note = note(dir, &nodes[1]);

    let gate = proxy(&server);
    let client = connect_with(&gate.connect_string(), FROZEN_SESSION);
    let mutex = Arc::new(Mutex::new(&client, dir).unwrap());
    let (result, _waiter) = {
        let mutex = mutex.clone();
        spawn("waiter", move || mutex.lock().map(|_| ()))
    };
    wait_lock_nodes(&other, dir, 3);
    wait_watched(&server, &note, &client);
    NoteWaiter {
        other,
        _contenders: [first, second],
        client,
        mutex,
        result,
        note,
        gate,
        server,
    }
}

impl NoteWaiter {
    /// Cancels the wait, and waits for the waiter to give up.
    fn give_up(&self) {
        self.mutex.cancel();
        assert_eq!(
            recv(&self.result, WAIT, "the waiter to give up"),
            Err(Error::Cancelled)
        );
    }

    /// Sends an exists watch on the note from another thread of the
    /// waiter's client, and waits until it has gone through the gate.
    fn send_caller_watch(&self) -> std::sync::mpsc::Receiver<zklock::Result<WatchedNote>> {
        let exists = sent(&self.gate, OpCode::Exists);
        let (client, note) = (self.client.clone(), self.note.clone());
        let (caller, _thread) = spawn("caller", move || client.exists_w(&note));
        wait_until("the caller's exists to be sent", WAIT, || {
            sent(&self.gate, OpCode::Exists) == exists + 1
        });
        caller
    }

    /// Waits for the caller's exists (see [`Self::send_caller_watch`]),
    /// which finds no note, then asserts its watch is told of the note.
    fn expect_callers_watch_told(
        &self,
        caller: &std::sync::mpsc::Receiver<zklock::Result<WatchedNote>>,
    ) {
        let (stat, events) = recv(caller, WAIT, "the caller's exists").unwrap();
        assert_eq!(stat, None);
        self.expect_note_seen(&events);
    }

    /// Creates the note, as a release would, and asserts that `events`
    /// (the caller's watch) is told.
    fn expect_note_seen(&self, events: &zklock::WatchReceiver) {
        // A round trip of the waiter's client: whatever it sent before,
        // the server has handled.
        self.client.sync("/").unwrap();
        assert!(
            watched_by(&self.server, &self.note, self.client.session_id()),
            "the caller's watch on {} is gone from the server",
            self.note
        );
        self.other
            .create(&self.note, b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        let event = events
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("the caller's watch was not told: {e}"));
        assert_eq!(
            (event.event_type, event.path.as_str()),
            (EventType::NodeCreated, self.note.as_str())
        );
    }
}

type WatchedNote = (Option<zklock::Stat>, zklock::WatchReceiver);

/// A caller's own watch on a release note, still unanswered (the server is
/// frozen) when a waiter of the same client that watches the note gives
/// up, is left on the server: it is the same watch (one per session and
/// path), and a removal sent behind the caller's request would take it
/// away after the server had set it for the caller.
#[test]
fn a_waiter_giving_up_leaves_a_note_watch_a_caller_is_setting() {
    let w = queue_note_waiter("/handoff/caller-setting");
    w.server.pause().unwrap();
    let caller = w.send_caller_watch();
    w.give_up();
    w.server.resume().unwrap();
    w.expect_callers_watch_told(&caller);
}

/// The other order: the waiter gives up first, and its removal of the
/// note's watch is on its way (the server is frozen) when a caller sets
/// its own. The server handles the removal first, so the caller's watch
/// stays, and the caller's watcher is kept when the removal's reply comes.
#[test]
fn a_caller_watching_a_note_after_a_waiter_gave_up_keeps_its_watch() {
    let w = queue_note_waiter("/handoff/caller-after");
    let removals = sent(&w.gate, OpCode::RemoveWatches);
    w.server.pause().unwrap();
    w.give_up();
    wait_until("the waiter's removal to be sent", WAIT, || {
        sent(&w.gate, OpCode::RemoveWatches) == removals + 1
    });
    let caller = w.send_caller_watch();
    w.server.resume().unwrap();
    w.expect_callers_watch_told(&caller);
}

/// A caller's persistent watch on a release note is not taken by the
/// removal of a waiter's note watch: a 3.8 server keeps a persistent watch
/// in its table of data watches too, and a removal of the session's data
/// watches on the path strips it from there, after which it no longer
/// hears of the note's creation.
#[test]
fn a_waiter_giving_up_leaves_a_callers_persistent_watch_on_the_note() {
    let w = queue_note_waiter("/handoff/caller-persistent");
    let events = w
        .client
        .add_watch(&w.note, zklock::AddWatchMode::Persistent)
        .unwrap();
    w.give_up();
    w.expect_note_seen(&events);
}
