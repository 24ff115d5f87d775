//! Fairness and the absence of a herd: waiters acquire in the order of their
//! nodes, and each waiter watches only its predecessor, so a release wakes
//! exactly one of them.

mod lock_common;

use std::sync::mpsc;

use lock_common::*;
use zklock::testing::FaultProxy;
use zklock::{Client, Mutex};

/// Every opcode a client sends but ping's (11): the closeSession and
/// createSession codes (-11, -10), the operations (1 to 22) and the
/// watch and session ones (100 to 106).
fn counted_ops() -> impl Iterator<Item = i32> {
    (-11..=-10)
        .chain(1..=22)
        .chain(100..=106)
        .filter(|&op| op != 11)
}

/// Waiters queue one after the other (each starts once the previous one's
/// node exists), and acquire in that order, each holding the node it queued.
#[test]
fn waiters_acquire_in_node_order() {
    const WAITERS: usize = 6;
    const LOCK: &str = "/fifo/lock";
    let server = server();
    let holder_client = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder_client, LOCK).unwrap();
    let holder = holder_mutex
        .try_lock_for(WAIT)
        .unwrap()
        .expect("the uncontended lock");

    let (acquired_tx, acquired_rx) = mpsc::channel();
    let mut queued_nodes = Vec::new();
    let mut threads = Vec::new();
    for i in 0..WAITERS {
        let client = connect(&server.connect_string());
        let acquired_tx = acquired_tx.clone();
        threads.push(spawn(&format!("waiter-{i}"), move || {
            let mutex = Mutex::new(&client, LOCK).unwrap();
            let guard = mutex.lock().unwrap();
            // Sent while holding: sends are in acquisition order.
            acquired_tx.send((i, guard.node().to_owned())).unwrap();
            guard.unlock().unwrap();
        }));
        // The node waiter `i` created is the one new child.
        let now = wait_children(&holder_client, LOCK, i + 2);
        queued_nodes.push(now.last().cloned().unwrap());
    }
    expect_nothing(&acquired_rx, "no waiter acquires while the lock is held");
    holder.unlock().unwrap();

    let mut order = Vec::new();
    for _ in 0..WAITERS {
        order.push(recv(&acquired_rx, WAIT, "the next waiter to acquire"));
    }
    let expected: Vec<(usize, String)> = queued_nodes
        .iter()
        .enumerate()
        .map(|(i, node)| (i, format!("{LOCK}/{node}")))
        .collect();
    assert_eq!(order, expected, "acquired out of queue order");
    for (rx, handle) in threads {
        recv(&rx, WAIT, "a waiter to finish");
        handle.join().unwrap();
    }
    assert!(children(&holder_client, LOCK).is_empty());
}

/// 50 waiters queued on one path: each node, and each waiter's release
/// note, is watched by the next waiter's session only (no one watches the
/// lock directory), so the release of the holder notifies exactly one
/// waiter; that one acquires, the waiters' sessions send not one request
/// (counted at a proxy: a waiter woken would list the lock or watch again),
/// and the other 49 keep waiting with their watches untouched.
#[test]
fn a_release_wakes_exactly_one_of_fifty_waiters() {
    const WAITERS: usize = 50;
    const CLIENTS: usize = 5;
    const LOCK: &str = "/herd/lock";
    let server = server();
    let holder_client = connect(&server.connect_string());
    let holder_mutex = Mutex::new(&holder_client, LOCK).unwrap();
    let holder = holder_mutex
        .try_lock_for(WAIT)
        .unwrap()
        .expect("the uncontended lock");
    // The waiters' sessions go through a proxy, which counts what they ask.
    let proxy = FaultProxy::start(server.addr()).expect("start a proxy");
    let clients: Vec<Client> = (0..CLIENTS)
        .map(|_| connect(&proxy.connect_string()))
        .collect();

    // Waiter i uses client i % CLIENTS, so neighbours in the queue are in
    // different sessions and every predecessor watch crosses sessions.
    let (acquired_tx, acquired_rx) = mpsc::channel();
    let mut releases = Vec::new();
    let mut threads = Vec::new();
    for i in 0..WAITERS {
        let client = clients[i % CLIENTS].clone();
        let acquired_tx = acquired_tx.clone();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        releases.push(release_tx);
        threads.push(spawn(&format!("waiter-{i}"), move || {
            let mutex = Mutex::new(&client, LOCK).unwrap();
            let guard = mutex.lock().unwrap();
            acquired_tx.send(i).unwrap();
            // Hold until told (a dropped sender also releases).
            let _ = release_rx.recv_timeout(WAIT);
            guard.unlock().unwrap();
        }));
        wait_children(&holder_client, LOCK, i + 2);
    }
    let nodes = children(&holder_client, LOCK);
    let session_of = |node: &str| owner(&holder_client, &format!("{LOCK}/{node}")).unwrap();
    let owners: Vec<i64> = nodes.iter().map(|n| session_of(n)).collect();
    assert_eq!(owners[0], holder_client.session_id());
    for i in 0..WAITERS {
        assert_eq!(
            owners[i + 1],
            clients[i % CLIENTS].session_id(),
            "node of waiter {i}"
        );
    }

    // Every waiter registers its watch right after seeing its node queued;
    // wait until all of them have, then look at the whole picture.
    let node_path = |i: usize| format!("{LOCK}/{}", nodes[i]);
    let foreign_watchers = |watches: &std::collections::BTreeMap<String, Vec<i64>>, i: usize| {
        let mut w: Vec<i64> = watches
            .get(&node_path(i))
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| *s != owners[i])
            .collect();
        w.sort_unstable();
        w
    };
    let mut watches = Default::default();
    let all_watching = poll(WAIT, || {
        watches = watches_by_path(&server);
        (0..WAITERS).all(|i| foreign_watchers(&watches, i).len() == 1)
    });
    assert!(
        all_watching,
        "each of nodes 0..{WAITERS} should be watched by one other session: {watches:#?}"
    );
    assert!(
        watches.get(LOCK).map_or(true, Vec::is_empty),
        "nobody may watch the lock directory: {watches:?}"
    );
    // Everything watched under the lock, release notes included: each
    // waiter's node by its owner and by the next waiter's session alone,
    // and its note (a waiter announces its release) by the next waiter's
    // session alone. The holder, granted at once, announces nothing and
    // watches its own node only once asked about it: waiter 0 alone
    // watches the holder's node, and no note.
    let under_lock = |watches: &std::collections::BTreeMap<String, Vec<i64>>| {
        watches
            .iter()
            .filter(|(path, _)| path.starts_with(&format!("{LOCK}/")))
            .map(|(path, sessions)| {
                let mut sessions = sessions.clone();
                sessions.sort_unstable();
                (path.clone(), sessions)
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let expected = |first: usize| {
        let mut map = std::collections::BTreeMap::new();
        for i in first..=WAITERS {
            let mut on_node = if i > 0 { vec![owners[i]] } else { vec![] };
            if i < WAITERS {
                on_node.push(owners[i + 1]);
                if i > 0 {
                    map.insert(format!("{}.released", node_path(i)), vec![owners[i + 1]]);
                }
            }
            on_node.sort_unstable();
            map.insert(node_path(i), on_node);
        }
        map
    };
    assert_eq!(
        under_lock(&watches),
        expected(0),
        "the watches under {LOCK}"
    );

    // The release: exactly waiter 0 acquires; the rest stay queued.
    expect_nothing(&acquired_rx, "no waiter acquires while the lock is held");
    let asked = |proxy: &FaultProxy| {
        counted_ops()
            .map(|op| (op, proxy.requests_seen(op)))
            .collect::<Vec<_>>()
    };
    let before = asked(&proxy);
    holder.unlock().unwrap();
    assert_eq!(recv(&acquired_rx, WAIT, "the first waiter to acquire"), 0);
    expect_nothing(&acquired_rx, "only one waiter acquires per release");
    // Not one request from the waiters' sessions: waiter 0 holds the lock
    // on its predecessor's deletion alone, and nobody else woke.
    assert_eq!(
        asked(&proxy),
        before,
        "requests (opcode, count) by the waiters' sessions during the handoff"
    );
    for (i, (_, handle)) in threads.iter().enumerate().skip(1) {
        assert!(!handle.is_finished(), "waiter {i} stopped waiting");
    }
    let after = watches_by_path(&server);
    assert_eq!(children(&holder_client, LOCK), nodes[1..].to_vec());
    assert_eq!(
        under_lock(&after),
        expected(1),
        "the watches under {LOCK} after the release"
    );

    // Then the rest in queue order.
    drop(releases.remove(0));
    for i in 1..WAITERS {
        assert_eq!(recv(&acquired_rx, WAIT, "the next waiter"), i);
        drop(releases.remove(0));
    }
    for (i, (rx, handle)) in threads.into_iter().enumerate() {
        recv(&rx, WAIT, &format!("waiter {i} to finish"));
        handle.join().unwrap();
    }
    assert!(children(&holder_client, LOCK).is_empty());
}
