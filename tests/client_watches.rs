//! Watches against a real server: each one-shot kind fires exactly once with
//! the right type and path; persistent and recursive watches fire
//! repeatedly; remove_watches; re-registration after a server restart and
//! after a move to another ensemble member.

mod common;

use std::time::Duration;

use common::{
    builder, connect, drain_events, expect_event, expect_silence, expect_spent, mk, open, proxy,
    server, states_until, wait_connected, WAIT,
};
use zklock::proto::OpCode;
use zklock::{AddWatchMode, CreateMode, Error, EventType, State, WatcherType};

use EventType::{
    ChildWatchRemoved, DataWatchRemoved, NodeChildrenChanged, NodeCreated, NodeDataChanged,
    NodeDeleted, PersistentWatchRemoved,
};

#[test]
fn one_shot_watches_fire_exactly_once() {
    let zk = server();
    let c = connect(&zk.connect_string());
    let other = connect(&zk.connect_string());
    mk(&c, "/w", b"");
    mk(&c, "/w/data", b"0");
    mk(&c, "/w/gone", b"");
    mk(&c, "/w/kids", b"");

    // Data watch: NodeDataChanged once, then spent.
    let (data, _, data_w) = c.get_data_w("/w/data").expect("get_data_w");
    assert_eq!(data, b"0");
    let (_, _, data_w2) = c
        .get_data_w("/w/data")
        .expect("a second watcher, same path");
    other.set_data("/w/data", b"1", None).expect("set_data");
    expect_event(&data_w, NodeDataChanged, "/w/data");
    expect_event(&data_w2, NodeDataChanged, "/w/data");
    // A second change, then a round trip on the watching connection: any
    // event for it would have arrived before the sync reply.
    other.set_data("/w/data", b"2", None).expect("set_data");
    c.sync("/w/data").expect("sync");
    expect_spent(&data_w, "data watch");
    expect_spent(&data_w2, "second data watch");

    // Data watch on a deleted node: NodeDeleted.
    let (_, _, gone_w) = c.get_data_w("/w/gone").expect("get_data_w");
    other.delete("/w/gone", None).expect("delete");
    expect_event(&gone_w, NodeDeleted, "/w/gone");
    expect_spent(&gone_w, "data watch on a deleted node");

    // Exists on a missing node: NodeCreated once (not on the delete and the
    // re-create that follow).
    let (stat, created_w) = c.exists_w("/w/new").expect("exists_w");
    assert_eq!(stat, None);
    other
        .create("/w/new", b"", &open(), CreateMode::Persistent)
        .expect("create");
    expect_event(&created_w, NodeCreated, "/w/new");
    other.delete("/w/new", None).expect("delete");
    other
        .create("/w/new", b"", &open(), CreateMode::Persistent)
        .expect("create");
    c.sync("/").expect("sync");
    expect_spent(&created_w, "exists watch on a missing node");

    // Exists on an existing node: a data watch (NodeDataChanged or NodeDeleted).
    let (stat, changed_w) = c.exists_w("/w/new").expect("exists_w");
    assert!(stat.is_some());
    other.set_data("/w/new", b"x", None).expect("set_data");
    expect_event(&changed_w, NodeDataChanged, "/w/new");
    other.delete("/w/new", None).expect("delete");
    c.sync("/").expect("sync");
    expect_spent(&changed_w, "exists watch on an existing node");
    mk(&c, "/w/new", b"");
    let (_, deleted_w) = c.exists_w("/w/new").expect("exists_w");
    other.delete("/w/new", None).expect("delete");
    expect_event(&deleted_w, NodeDeleted, "/w/new");

    // Child watch: not for data changes or grandchildren; once for a child.
    let (kids, child_w) = c.get_children_w("/w/kids").expect("get_children_w");
    assert!(kids.is_empty());
    other.set_data("/w/kids", b"data", None).expect("set_data");
    c.sync("/").expect("sync");
    expect_silence(&child_w, "child watch after a data change");
    other
        .create("/w/kids/a", b"", &open(), CreateMode::Persistent)
        .expect("create");
    expect_event(&child_w, NodeChildrenChanged, "/w/kids");
    other
        .create("/w/kids/b", b"", &open(), CreateMode::Persistent)
        .expect("create");
    other.delete("/w/kids/a", None).expect("delete");
    c.sync("/").expect("sync");
    expect_spent(&child_w, "child watch");
    // A child watch on a node that is deleted: NodeDeleted.
    let (_, child_w) = c.get_children_w("/w/kids/b").expect("get_children_w");
    other.delete("/w/kids/b", None).expect("delete");
    expect_event(&child_w, NodeDeleted, "/w/kids/b");

    // A data watch does not fire for children.
    let (_, _, data_w) = c.get_data_w("/w/kids").expect("get_data_w");
    other
        .create("/w/kids/c", b"", &open(), CreateMode::Persistent)
        .expect("create");
    c.sync("/").expect("sync");
    expect_silence(&data_w, "data watch after a child create");

    // Watches on failed reads are not left behind.
    assert!(matches!(c.get_data_w("/w/missing"), Err(Error::NoNode)));
    assert!(matches!(c.get_children_w("/w/missing"), Err(Error::NoNode)));
}

#[test]
fn persistent_watches_fire_repeatedly() {
    let zk = server();
    let c = connect(&zk.connect_string());
    let other = connect(&zk.connect_string());
    mk(&c, "/pw", b"");
    let pers = c
        .add_watch("/pw/node", AddWatchMode::Persistent)
        .expect("add_watch on a missing node");
    let rec = c
        .add_watch("/pw/tree", AddWatchMode::PersistentRecursive)
        .expect("add_watch recursive");

    for (path, data) in [("/pw/node", b"0"), ("/pw/tree", b"0")] {
        other
            .create(path, data, &open(), CreateMode::Persistent)
            .expect("create");
    }
    other.set_data("/pw/node", b"1", None).expect("set_data");
    other.set_data("/pw/node", b"2", None).expect("set_data");
    mk(&other, "/pw/node/kid", b"");
    mk(&other, "/pw/node/kid/grandkid", b"");
    other
        .set_data("/pw/node/kid", b"k", None)
        .expect("set_data");
    other.delete("/pw/node/kid/grandkid", None).expect("delete");
    other.delete("/pw/node/kid", None).expect("delete");
    other.delete("/pw/node", None).expect("delete");
    mk(&other, "/pw/node", b"again");

    mk(&other, "/pw/tree/a", b"");
    mk(&other, "/pw/tree/a/b", b"");
    other
        .set_data("/pw/tree/a/b", b"x", None)
        .expect("set_data");
    other.set_data("/pw/tree", b"y", None).expect("set_data");
    other.delete("/pw/tree/a/b", None).expect("delete");
    mk(&other, "/pw/elsewhere", b"");
    c.sync("/").expect("sync");

    let s = |t: EventType, p: &str| (t, p.to_owned());
    // The node itself only: never its grandchildren or the children's data.
    assert_eq!(
        drain_events(&pers),
        [
            s(NodeCreated, "/pw/node"),
            s(NodeDataChanged, "/pw/node"),
            s(NodeDataChanged, "/pw/node"),
            s(NodeChildrenChanged, "/pw/node"),
            s(NodeChildrenChanged, "/pw/node"),
            s(NodeDeleted, "/pw/node"),
            s(NodeCreated, "/pw/node"),
        ]
    );
    // The whole subtree, and never NodeChildrenChanged.
    assert_eq!(
        drain_events(&rec),
        [
            s(NodeCreated, "/pw/tree"),
            s(NodeCreated, "/pw/tree/a"),
            s(NodeCreated, "/pw/tree/a/b"),
            s(NodeDataChanged, "/pw/tree/a/b"),
            s(NodeDataChanged, "/pw/tree"),
            s(NodeDeleted, "/pw/tree/a/b"),
        ]
    );
}

#[test]
fn remove_watches_delivers_the_removal_event() {
    let zk = server();
    let c = connect(&zk.connect_string());
    let other = connect(&zk.connect_string());
    mk(&c, "/rm", b"");
    mk(&c, "/rm/both", b"");

    let (_, _, data_w) = c.get_data_w("/rm").expect("get_data_w");
    let (_, missing_w) = c.exists_w("/rm/missing").expect("exists_w");
    let (_, child_w) = c.get_children_w("/rm").expect("get_children_w");
    let pers = c
        .add_watch("/rm/p", AddWatchMode::Persistent)
        .expect("add_watch");
    let (_, _, both_data) = c.get_data_w("/rm/both").expect("get_data_w");
    let (_, both_child) = c.get_children_w("/rm/both").expect("get_children_w");

    c.remove_watches("/rm", WatcherType::Data)
        .expect("remove the data watch");
    expect_event(&data_w, DataWatchRemoved, "/rm");
    expect_spent(&data_w, "removed data watch");
    // The child watch on the same path is untouched...
    c.remove_watches("/rm/missing", WatcherType::Data)
        .expect("remove the exists watch");
    expect_event(&missing_w, DataWatchRemoved, "/rm/missing");
    c.remove_watches("/rm", WatcherType::Children)
        .expect("remove the child watch");
    expect_event(&child_w, ChildWatchRemoved, "/rm");
    expect_spent(&child_w, "removed child watch");
    // (3.8 servers only know Data, Children and Any: Any removes persistent ones.)
    c.remove_watches("/rm/p", WatcherType::Any)
        .expect("remove the persistent watch");
    expect_event(&pers, PersistentWatchRemoved, "/rm/p");
    expect_spent(&pers, "removed persistent watch");
    c.remove_watches("/rm/both", WatcherType::Any)
        .expect("remove both");
    expect_event(&both_data, DataWatchRemoved, "/rm/both");
    expect_event(&both_child, ChildWatchRemoved, "/rm/both");

    // Nothing left to remove.
    assert_eq!(
        c.remove_watches("/rm", WatcherType::Any),
        Err(Error::NoWatcher)
    );
    assert_eq!(
        c.remove_watches("/rm/none", WatcherType::Data),
        Err(Error::NoWatcher)
    );
    let (_, _, keep) = c.get_data_w("/rm").expect("get_data_w");
    assert_eq!(
        c.remove_watches("/rm", WatcherType::Children),
        Err(Error::NoWatcher)
    );

    // The server dropped them too: only the last data watch is listed.
    let listing = zk.four_letter("wchc").expect("wchc");
    assert!(
        !listing.contains("/rm/p") && !listing.contains("/rm/both"),
        "{listing}"
    );
    assert!(!listing.contains("/rm/missing"), "{listing}");
    other.set_data("/rm", b"x", None).expect("set_data");
    mk(&other, "/rm/p", b"");
    expect_event(&keep, NodeDataChanged, "/rm");
}

#[test]
fn watches_survive_a_server_restart_and_catch_up_on_missed_changes() {
    let zk = server();
    let gate = proxy(&zk);
    let c = builder()
        .session_timeout(Duration::from_secs(8))
        .connect(&gate.connect_string())
        .expect("connect through the proxy");
    let session = c.session_id();
    for path in [
        "/r", "/r/data", "/r/kids", "/r/quiet", "/r/same", "/r/pers", "/r/tree",
    ] {
        mk(&c, path, b"");
    }
    let (_, _, data_w) = c.get_data_w("/r/data").expect("get_data_w");
    let (_, exist_w) = c.exists_w("/r/missing").expect("exists_w");
    let (_, child_w) = c.get_children_w("/r/kids").expect("get_children_w");
    let (_, quiet_w) = c.get_children_w("/r/quiet").expect("get_children_w");
    let (_, _, same_w) = c.get_data_w("/r/same").expect("get_data_w");
    let pers = c
        .add_watch("/r/pers", AddWatchMode::Persistent)
        .expect("add_watch");
    let rec = c
        .add_watch("/r/tree", AddWatchMode::PersistentRecursive)
        .expect("add_watch");
    c.sync("/").expect("sync");
    let states = c.state_changes();

    // Keep this client away while the server restarts and another client,
    // connected to the new server process, changes things.
    gate.refuse(true);
    zk.restart().expect("restart the server");
    gate.cut();
    assert_eq!(
        states_until(&states, State::Disconnected),
        [State::Disconnected]
    );
    let other = connect(&zk.connect_string());
    other
        .set_data("/r/data", b"changed", None)
        .expect("set_data");
    other
        .create("/r/missing", b"", &open(), CreateMode::Persistent)
        .expect("create");
    mk(&other, "/r/kids/k", b"");
    other
        .set_data("/r/pers", b"missed", None)
        .expect("set_data");
    mk(&other, "/r/tree/missed", b"");
    assert_eq!(c.state(), State::Disconnected);

    // Back: the same session, and the one-shot watches report what was
    // missed (SetWatches relative to the last zxid this client saw).
    gate.refuse(false);
    assert_eq!(states_until(&states, State::Connected), [State::Connected]);
    assert_eq!(c.session_id(), session);
    expect_event(&data_w, NodeDataChanged, "/r/data");
    expect_event(&exist_w, NodeCreated, "/r/missing");
    expect_event(&child_w, NodeChildrenChanged, "/r/kids");
    // Unchanged nodes do not fire: the zxid was not 0.
    c.sync("/").expect("sync");
    expect_silence(&quiet_w, "child watch on an unchanged node");
    expect_silence(&same_w, "data watch on an unchanged node");
    // Persistent watches get no catch-up events but are registered again.
    expect_silence(&pers, "persistent watch");
    expect_silence(&rec, "recursive watch");
    other.set_data("/r/pers", b"after", None).expect("set_data");
    mk(&other, "/r/tree/after", b"");
    other.set_data("/r/quiet", b"data", None).expect("set_data");
    mk(&other, "/r/quiet/k", b"");
    other.set_data("/r/same", b"now", None).expect("set_data");
    expect_event(&pers, NodeDataChanged, "/r/pers");
    expect_event(&rec, NodeCreated, "/r/tree/after");
    expect_event(&quiet_w, NodeChildrenChanged, "/r/quiet");
    expect_event(&same_w, NodeDataChanged, "/r/same");
    wait_connected(&c);
}

#[test]
fn watches_follow_the_session_to_another_ensemble_member() {
    let zk = common::cluster();
    let c = builder()
        .session_timeout(Duration::from_secs(10))
        .connect(&zk.connect_string())
        .expect("connect to the ensemble");
    let session = c.session_id();
    for path in ["/c", "/c/data", "/c/kids", "/c/pers"] {
        mk(&c, path, b"");
    }
    let (_, _, data_w) = c.get_data_w("/c/data").expect("get_data_w");
    let (_, exist_w) = c.exists_w("/c/new").expect("exists_w");
    let (_, child_w) = c.get_children_w("/c/kids").expect("get_children_w");
    let pers = c
        .add_watch("/c/pers", AddWatchMode::Persistent)
        .expect("add_watch");
    let states = c.state_changes();

    let member = common::member_with_session(&zk, session);
    zk.kill(member).expect("kill the client's member");
    assert_eq!(
        states_until(&states, State::Connected),
        [State::Disconnected, State::Connected]
    );
    assert_eq!(c.session_id(), session);
    let now = common::member_with_session(&zk, session);
    assert_ne!(now, member);

    let survivor = (0..zk.size()).find(|&i| i != member).expect("a survivor");
    let other = connect(&zk.member_connect_string(survivor).expect("address"));
    other.set_data("/c/data", b"x", None).expect("set_data");
    other
        .create("/c/new", b"", &open(), CreateMode::Persistent)
        .expect("create");
    mk(&other, "/c/kids/k", b"");
    other.set_data("/c/pers", b"1", None).expect("set_data");
    other.set_data("/c/pers", b"2", None).expect("set_data");
    expect_event(&data_w, NodeDataChanged, "/c/data");
    expect_event(&exist_w, NodeCreated, "/c/new");
    expect_event(&child_w, NodeChildrenChanged, "/c/kids");
    expect_event(&pers, NodeDataChanged, "/c/pers");
    expect_event(&pers, NodeDataChanged, "/c/pers");
}

/// A watch set by a call the server handles after a `remove_watches` is not
/// one the removal took: it stays, locally as on the server, however soon
/// its reply follows the removal's. The local watchers were removed when the
/// removing caller woke, by then maybe after the next call's reply had
/// registered its watcher: that watcher got `DataWatchRemoved` and was gone,
/// while the server kept the watch.
#[test]
fn a_watch_set_right_after_a_removal_is_not_removed_with_it() {
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    mk(&c, "/race", b"");
    // Replies that follow each other closely arrive together.
    gate.set_mode(zklock::testing::ProxyMode::Delay(Duration::from_millis(20)));
    let mut wrongly_removed = 0;
    let rounds = 30;
    for _ in 0..rounds {
        let (_, _, first) = c.get_data_w("/race").expect("get_data_w");
        let (_, _, second) = std::thread::scope(|s| {
            let second = s.spawn(|| c.get_data_w("/race").expect("second get_data_w"));
            assert_eq!(c.remove_watches("/race", WatcherType::Data), Ok(()));
            second.join().expect("second watcher")
        });
        expect_event(&first, DataWatchRemoved, "/race");
        // The second watch was removed if the server took the removal after
        // it; otherwise the server still has it, and so must the client.
        let removed = second.try_recv().ok().map(|e| e.event_type);
        let on_server = match c.remove_watches("/race", WatcherType::Data) {
            Ok(()) => true,
            Err(Error::NoWatcher) => false,
            Err(e) => panic!("remove_watches: {e}"),
        };
        match (removed, on_server) {
            (Some(DataWatchRemoved), false) => {}
            (None, true) => expect_event(&second, DataWatchRemoved, "/race"),
            (Some(DataWatchRemoved), true) => wrongly_removed += 1,
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(
        wrongly_removed, 0,
        "watches removed locally but kept by the server in {wrongly_removed} of {rounds} rounds"
    );
}

/// A loop asking for a new watch each round on a node that stays quiet,
/// dropping each receiver, keeps one watcher per kind and path, not one per
/// round; a receiver that is kept still gets its event, and the node's
/// next event takes the dropped ones.
#[test]
fn dropped_watch_receivers_do_not_pile_up() {
    const ROUNDS: usize = 50;
    let zk = server();
    let c = connect(&zk.connect_string());
    mk(&c, "/quiet", b"");
    assert_eq!(c.local_watcher_count(), 0);
    for _ in 0..ROUNDS {
        drop(c.get_data_w("/quiet").expect("get_data_w"));
    }
    // The last round's sender stays until the path's next watch.
    assert_eq!(c.local_watcher_count(), 1);
    let (_, _, kept) = c.get_data_w("/quiet").expect("get_data_w");
    assert_eq!(c.local_watcher_count(), 1, "the dropped one forgotten");
    for _ in 0..ROUNDS {
        drop(c.get_children_w("/quiet").expect("get_children_w"));
        drop(c.exists_w("/quiet").expect("exists_w"));
        drop(
            c.add_watch("/quiet", AddWatchMode::Persistent)
                .expect("add_watch"),
        );
    }
    // The kept data watcher, and one of each other kind.
    assert_eq!(c.local_watcher_count(), 4);

    c.set_data("/quiet", b"changed", None).expect("set_data");
    expect_event(&kept, NodeDataChanged, "/quiet");
    expect_spent(&kept, "the kept one-shot watch");
    // The one-shot data and exists watchers fired, and the persistent one,
    // its receiver gone, is forgotten with it (and removed from the
    // server), with the child watcher on its path, whose receiver is gone
    // too. That happens on the I/O thread once the events are delivered.
    common::wait_until("the dropped watchers forgotten", WAIT, || {
        c.local_watcher_count() == 0
    });
}

/// The paths the server holds watches on, from `wchp`.
fn watched_paths(zk: &zklock::testing::TestServer) -> Vec<String> {
    common::watches_by_path(zk).into_keys().collect()
}

/// A persistent watch whose receivers are all dropped goes from the server
/// as the last is dropped (before, it went on sending events for as long as
/// the connection lasted), unless a live watch of the session shares the
/// server's watch on that path: then as the last such receiver is
/// dropped, or at the first event that reaches it once none is live.
#[test]
fn a_persistent_watch_whose_receivers_are_dropped_goes_from_the_server() {
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    let other = connect(&zk.connect_string());
    for path in ["/pw", "/rw", "/shared", "/mixed", "/oneshot"] {
        mk(&c, path, b"");
    }
    let persistent = AddWatchMode::Persistent;
    let dropped = c.add_watch("/pw", persistent).expect("add_watch");
    let recursive = c
        .add_watch("/rw", AddWatchMode::PersistentRecursive)
        .expect("add_watch recursive");
    let shared_dropped = c.add_watch("/shared", persistent).expect("add_watch");
    let shared_kept = c.add_watch("/shared", persistent).expect("add_watch");
    let mixed_dropped = c.add_watch("/mixed", persistent).expect("add_watch");
    let (_, children_kept) = c.get_children_w("/mixed").expect("get_children_w");
    let oneshot_dropped = c.add_watch("/oneshot", persistent).expect("add_watch");
    let (_, _, data_kept) = c.get_data_w("/oneshot").expect("get_data_w");
    assert_eq!(
        watched_paths(&zk),
        ["/mixed", "/oneshot", "/pw", "/rw", "/shared"].map(String::from)
    );
    let removals = gate.requests_seen(OpCode::RemoveWatches.code());
    drop((
        dropped,
        recursive,
        shared_dropped,
        mixed_dropped,
        oneshot_dropped,
    ));
    // Sent as they were dropped, with no event: /pw's and /rw's.
    common::wait_until("the server to drop two watches", WAIT, || {
        watched_paths(&zk) == ["/mixed", "/oneshot", "/shared"]
    });
    assert_eq!(
        gate.requests_seen(OpCode::RemoveWatches.code()) - removals,
        2
    );
    // The data watch on /oneshot, dropped unfired, was the last live one
    // there: its drop takes the persistent watch, with no event.
    drop(data_kept);
    common::wait_until("the server to drop /oneshot's watch", WAIT, || {
        watched_paths(&zk) == ["/mixed", "/shared"]
    });
    assert_eq!(
        gate.requests_seen(OpCode::RemoveWatches.code()) - removals,
        3
    );
    other.set_data("/pw", b"1", None).expect("set_data");
    other
        .create("/rw/child", b"", &open(), CreateMode::Persistent)
        .expect("create under the recursive watch");
    // The watches kept still work.
    other.set_data("/shared", b"1", None).expect("set_data");
    expect_event(&shared_kept, NodeDataChanged, "/shared");
    // The event that fires the child watch on /mixed reaches the dropped
    // persistent watch too, and, with the child watch spent, takes it.
    other
        .create("/mixed/c", b"", &open(), CreateMode::Persistent)
        .expect("create");
    expect_event(&children_kept, NodeChildrenChanged, "/mixed");
    common::wait_until("the server to drop /mixed's watch", WAIT, || {
        watched_paths(&zk) == ["/shared"]
    });
    assert_eq!(
        gate.requests_seen(OpCode::RemoveWatches.code()) - removals,
        4,
        "one removal a path"
    );
}

/// A clone of a watch's receiver keeps the watch: with the first dropped,
/// the clone still gets the events, and the server keeps the watch until
/// the clone is dropped too. (Before, `.clone()` reached through to the
/// channel's receiver: the drop of the original ended the watch, and the
/// clone got nothing.)
#[test]
fn a_cloned_watch_receiver_keeps_the_watch() {
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    let other = connect(&zk.connect_string());
    mk(&c, "/cloned", b"");
    let original = c
        .add_watch("/cloned", AddWatchMode::Persistent)
        .expect("add_watch");
    let clone = original.clone();
    let removals = gate.requests_seen(OpCode::RemoveWatches.code());
    drop(original);
    for data in [b"1", b"2"] {
        other.set_data("/cloned", data, None).expect("set_data");
        expect_event(&clone, NodeDataChanged, "/cloned");
    }
    assert_eq!(gate.requests_seen(OpCode::RemoveWatches.code()), removals);
    assert_eq!(watched_paths(&zk), ["/cloned"]);
    drop(clone);
    common::wait_until("the server to drop the watch", WAIT, || {
        watched_paths(&zk).is_empty()
    });
    assert_eq!(
        gate.requests_seen(OpCode::RemoveWatches.code()) - removals,
        1
    );
}

/// A watch whose receivers are all dropped is not set again after a
/// reconnect: the lost connection took the server's watch with it.
#[test]
fn a_watch_whose_receivers_are_dropped_is_not_set_again_after_a_reconnect() {
    let zk = server();
    let gate = proxy(&zk);
    let c = builder()
        .session_timeout(Duration::from_secs(10))
        .connect(&gate.connect_string())
        .expect("connect");
    let states = c.state_changes();
    for path in ["/quiet", "/quiet-data", "/alive"] {
        mk(&c, path, b"");
    }
    let dropped = c
        .add_watch("/quiet", AddWatchMode::Persistent)
        .expect("add_watch");
    let (_, _, dropped_data) = c.get_data_w("/quiet-data").expect("get_data_w");
    let alive = c
        .add_watch("/alive", AddWatchMode::Persistent)
        .expect("add_watch");
    drop((dropped, dropped_data));
    gate.cut();
    assert_eq!(
        states_until(&states, State::Connected),
        [State::Disconnected, State::Connected]
    );
    // The watches are set again ahead of any later request.
    c.exists("/").expect("a round trip");
    assert_eq!(watched_paths(&zk), ["/alive"]);
    let other = connect(&zk.connect_string());
    other.set_data("/alive", b"1", None).expect("set_data");
    expect_event(&alive, NodeDataChanged, "/alive");
}

/// A persistent watch's receiver holds at most `watch_buffer` events
/// unread. At the next event, the watch ends as if the receiver had been
/// dropped: the receiver yields the events it holds, in order, then reports
/// the channel disconnected, `overflowed` saying why; and the server's
/// watch goes, unless another persistent watch of the session shares it,
/// which is untouched (read as it goes, it gets every event). Before, the
/// channel grew with every event for as long as the receiver was kept
/// unread.
#[test]
fn a_persistent_watch_held_unread_past_its_buffer_ends() {
    let zk = server();
    let c = builder()
        .watch_buffer(3)
        .connect(&zk.connect_string())
        .expect("connect");
    let other = connect(&zk.connect_string());
    for path in ["/alone", "/shared"] {
        mk(&c, path, b"");
    }
    let persistent = AddWatchMode::Persistent;
    let alone = c.add_watch("/alone", persistent).expect("add_watch");
    let shared = c.add_watch("/shared", persistent).expect("add_watch");
    let read = c.add_watch("/shared", persistent).expect("add_watch");
    for round in 0..5 {
        let data = format!("{round}");
        for path in ["/alone", "/shared"] {
            other
                .set_data(path, data.as_bytes(), None)
                .expect("set_data");
        }
        expect_event(&read, NodeDataChanged, "/shared");
    }
    common::wait_until("the server to drop the unshared watch", WAIT, || {
        watched_paths(&zk) == ["/shared"]
    });
    for (receiver, path) in [(&alone, "/alone"), (&shared, "/shared")] {
        assert!(receiver.overflowed(), "{path}");
        for _ in 0..3 {
            expect_event(receiver, NodeDataChanged, path);
        }
        assert_eq!(
            receiver.recv_timeout(WAIT),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected),
            "{path}"
        );
    }
    assert!(!read.overflowed());
    other.set_data("/shared", b"last", None).expect("set_data");
    expect_event(&read, NodeDataChanged, "/shared");
    drop(read);
    common::wait_until("the server to drop the shared watch", WAIT, || {
        watched_paths(&zk).is_empty()
    });
    drop((alone, shared));
    assert_eq!(c.local_watcher_count(), 0);
}
