//! Locks on a 3-member ensemble whose members fail under a holder or a
//! waiter: the session moves to another member in time, with its lock.

mod lock_common;

use std::time::Duration;

use lock_common::*;
use zklock::testing::{FaultProxy, ProxyMode, TestCluster};
use zklock::{Client, LockState, Mutex, State};

/// The session timeout: long enough that a loaded machine's stall of a
/// second or so changes nothing, since a move past a silent member has
/// only T/6 to spare (and an election of a new leader must fit in T).
const T: Duration = Duration::from_millis(12_000);

/// The library's default per-host connect timeout, longer than `T` leaves
/// for a move once a silent member is given up on (`T / 3`).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn cluster() -> TestCluster {
    abort_if_hung();
    TestCluster::new().expect("start a 3-member ensemble")
}

/// A fault proxy in front of each member, in member order.
fn proxies(zk: &TestCluster) -> Vec<FaultProxy> {
    (0..zk.size())
        .map(|i| {
            FaultProxy::start(zk.member_addr(i).expect("member address")).expect("start a proxy")
        })
        .collect()
}

fn through(proxies: &[FaultProxy]) -> String {
    let addrs: Vec<String> = proxies.iter().map(FaultProxy::connect_string).collect();
    addrs.join(",")
}

/// Which of `candidates` (indexes into `proxies`) carries a client
/// connection, once exactly one does.
fn the_one_connected(proxies: &[FaultProxy], candidates: &[usize]) -> usize {
    let mut found = None;
    wait_until(
        "the client to connect through exactly one proxy",
        WAIT,
        || {
            let open: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| proxies[i].connection_count() > 0)
                .collect();
            found = match open.as_slice() {
                [one] => Some(*one),
                [] => None,
                more => panic!("the client tried {more:?} at once"),
            };
            found.is_some()
        },
    );
    found.expect("a proxy")
}

/// The holder's member falls silent (a partition between them), and so
/// does the member the client tries next; the third is healthy. A silent
/// member is only given up on after the read timeout (2/3 of the session
/// timeout T), so a handshake that waited out a whole connect timeout on
/// the next one would leave the session to expire with a healthy member
/// in reach: each reconnect attempt gets a share of what is left of T
/// instead. The guard goes Suspended, then Held again, its node survives,
/// and the waiter does not acquire until the holder releases.
#[test]
fn a_holder_cut_off_from_its_member_moves_past_a_silent_one_in_time() {
    const LOCK: &str = "/moves/past-silent";
    let zk = cluster();
    let gates = proxies(&zk);
    let holder = Client::builder()
        .session_timeout(T)
        .connect_timeout(DEFAULT_CONNECT_TIMEOUT)
        .connect(&through(&gates))
        .expect("connect through the proxies");
    assert_eq!(holder.negotiated_timeout(), Some(T));
    let session = holder.session_id();
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let token = guard.fencing_token();
    assert_eq!(guard.state(), LockState::Held);
    let guard_states = guard.state_changes();
    let client_states = holder.state_changes();

    let observer = connect(&zk.connect_string());
    let waiter_client = connect(&zk.connect_string());
    let waiter = Contender::mutex(&waiter_client, LOCK, "waiter");
    wait_children(&observer, LOCK, 2);

    let current = the_one_connected(&gates, &[0, 1, 2]);
    let others: Vec<usize> = (0..gates.len()).filter(|&i| i != current).collect();
    for gate in &gates {
        gate.set_mode(ProxyMode::Blackhole);
    }
    // The member it tries next stays silent; the last one heals.
    let silent = the_one_connected(&gates, &others);
    let healthy = others
        .iter()
        .copied()
        .find(|&i| i != silent)
        .expect("a third member");
    gates[healthy].set_mode(ProxyMode::Pass);

    assert_eq!(
        recv_state(&client_states, "the holder's client to reconnect"),
        [State::Disconnected, State::Connected]
    );
    assert_eq!(holder.session_id(), session);
    assert!(gates[healthy].connection_count() > 0);
    assert_eq!(
        recv_lock_states(&guard_states),
        [LockState::Suspended, LockState::Held]
    );
    assert_eq!(guard.state(), LockState::Held);
    observer.sync("/").unwrap();
    assert_eq!(owner(&observer, &node), Some(session));
    waiter.expect_waiting();

    guard.unlock().unwrap();
    let waiter_node = waiter.wait_held();
    assert_ne!(waiter_node, node);
    let waiter_token = observer
        .exists(&waiter_node)
        .unwrap()
        .expect("the waiter's node")
        .czxid;
    assert!(waiter_token > token);
    waiter.release();
    for gate in &gates {
        gate.set_mode(ProxyMode::Pass);
    }
}

/// States received until `Connected` (or a terminal one), within `WAIT`.
fn recv_state(rx: &crossbeam_channel::Receiver<State>, what: &str) -> Vec<State> {
    let mut seen = Vec::new();
    while let Ok(state) = rx.recv_timeout(WAIT) {
        seen.push(state);
        if state == State::Connected || state.is_terminal() {
            return seen;
        }
    }
    panic!("{what}: saw only {seen:?} within {WAIT:?}");
}

/// A waiter is cut off from its member, the holder releases meanwhile, and
/// the waiter comes back on another member: the watch on its predecessor,
/// set again there (setWatches), reports the deletion it missed, and the
/// waiter acquires, with no listing of its own to prompt it.
#[test]
fn a_waiter_moved_to_another_member_acquires_on_a_release_it_missed() {
    const LOCK: &str = "/moves/waiter";
    let zk = cluster();
    let gates = proxies(&zk);
    let holder = connect(&zk.connect_string());
    let holder_mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = holder_mutex.lock().unwrap();
    let held_node = guard.node().to_owned();

    let waiter_client = Client::builder()
        .session_timeout(T)
        .connect_timeout(CONNECT_TIMEOUT)
        .connect(&through(&gates))
        .expect("connect through the proxies");
    let session = waiter_client.session_id();
    let states = waiter_client.state_changes();
    let waiter = Contender::mutex(&waiter_client, LOCK, "waiter");
    let queued = wait_children(&holder, LOCK, 2);
    waiter.expect_waiting();

    let current = the_one_connected(&gates, &[0, 1, 2]);
    for gate in &gates {
        gate.refuse(true);
    }
    gates[current].cut();
    assert_eq!(states.recv_timeout(WAIT), Ok(State::Disconnected));
    guard.unlock().unwrap();
    assert_eq!(children(&holder, LOCK), queued[1..]);

    let next = (current + 1) % gates.len();
    gates[next].refuse(false);
    let waiter_node = waiter.wait_held();
    assert_eq!(leaf(&waiter_node), queued[1]);
    assert_eq!(states.recv_timeout(WAIT), Ok(State::Connected));
    assert_eq!(waiter_client.session_id(), session);
    assert!(gates[next].connection_count() > 0);
    assert_ne!(leaf(&held_node), leaf(&waiter_node));

    // Cut off again, it drops its guard: the delete waits for the next
    // connection, on the third member, and goes out there.
    for gate in &gates {
        gate.refuse(true);
    }
    gates[next].cut();
    assert_eq!(states.recv_timeout(WAIT), Ok(State::Disconnected));
    waiter.release();
    assert_eq!(children(&holder, LOCK), queued[1..]);
    let third = (next + 1) % gates.len();
    gates[third].refuse(false);
    assert_eq!(states.recv_timeout(WAIT), Ok(State::Connected));
    assert_eq!(waiter_client.session_id(), session);
    wait_children(&holder, LOCK, 0);
}

/// A connect string that names, besides the members, a host no resolver
/// knows and a port nothing listens on: the holder's member is killed, and
/// the session moves past them to a live member, with its lock.
#[test]
fn a_holder_moves_past_unresolvable_and_dead_hosts() {
    const LOCK: &str = "/moves/bad-hosts";
    let zk = cluster();
    let connect_string = format!(
        "zklock-no-such-host.invalid:2181,127.0.0.1:{},{}",
        dead_port(),
        zk.connect_string()
    );
    let holder = Client::builder()
        .session_timeout(T)
        .connect_timeout(CONNECT_TIMEOUT)
        .connect(&connect_string)
        .expect("connect past the bad hosts");
    let session = holder.session_id();
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    assert_eq!(guard.state(), LockState::Held);
    let guard_states = guard.state_changes();

    let member = member_with_session(&zk, session);
    zk.kill(member).expect("kill the holder's member");
    assert_eq!(
        recv_lock_states(&guard_states),
        [LockState::Suspended, LockState::Held]
    );
    assert_eq!(holder.session_id(), session);
    assert_ne!(member_with_session(&zk, session), member);
    let observer = connect(&zk.connect_string());
    observer.sync("/").unwrap();
    assert_eq!(owner(&observer, guard.node()), Some(session));
    guard.unlock().unwrap();
    observer.sync("/").unwrap();
    assert_eq!(children(&observer, LOCK), Vec::<String>::new());
}

/// The opcode of `multi`, which joins a lingering release to the next
/// acquisition's create.
const MULTI: i32 = 14;

/// A release lingers and joins the next acquisition's create in one
/// transaction, whose reply is lost with the connection; the member is
/// gone for good. On another member the client finds the node the
/// transaction created (or creates one, if the member never read it), and
/// the released node is deleted either way.
#[test]
fn a_joined_release_and_create_cut_off_is_settled_on_another_member() {
    const LOCK: &str = "/moves/joined";
    let zk = cluster();
    let gates = proxies(&zk);
    let client = Client::builder()
        .session_timeout(T)
        .connect_timeout(CONNECT_TIMEOUT)
        .release_linger(Duration::from_secs(1))
        .connect(&through(&gates))
        .expect("connect through the proxies");
    let session = client.session_id();
    let observer = connect(&zk.connect_string());
    let mutex = Mutex::new(&client, LOCK).unwrap();
    // Armed first, so that nothing but the drop comes between the release
    // and the next acquisition: the release lingers only 1 s. The first
    // acquisition sends no multi.
    let current = the_one_connected(&gates, &[0, 1, 2]);
    gates[current].refuse(true);
    gates[current].cut_after_request(|opcode| opcode == MULTI);
    let first = mutex.lock().unwrap();
    let released = first.node().to_owned();
    drop(first);
    let guard = mutex.lock().unwrap();
    assert!(!gates[current].is_cut_armed(), "the multi was not cut");
    assert_eq!(client.session_id(), session);
    assert_eq!(guard.state(), LockState::Held);
    observer.sync("/").unwrap();
    assert_eq!(
        owner(&observer, &released),
        None,
        "the released node is gone"
    );
    assert_eq!(children(&observer, LOCK), [leaf(guard.node())]);
    assert_eq!(owner(&observer, guard.node()), Some(session));
    assert_eq!(
        gates.iter().map(|g| g.requests_seen(MULTI)).sum::<usize>(),
        1
    );
    let moved_to: Vec<usize> = (0..gates.len())
        .filter(|&i| i != current && gates[i].connection_count() > 0)
        .collect();
    assert_eq!(moved_to.len(), 1, "{moved_to:?}");
    guard.unlock().unwrap();
    observer.sync("/").unwrap();
    assert_eq!(children(&observer, LOCK), Vec::<String>::new());
}

/// The opcode of `create2`, which a lock node is created with.
const CREATE2: i32 = 15;
/// The opcode of `sync`, which the search for a lost create starts with.
const SYNC: i32 = 9;

/// The leader freezes while a lock node's create waits for it, then is
/// killed: the other two elect a new leader, the create fails with
/// ConnectionLoss, and the search for it on the new epoch finds it or
/// creates it again. Waiters queued before the election keep their places:
/// each acquires in turn, one at a time, and no node is left behind.
#[test]
fn contenders_keep_their_places_across_a_leader_killed_under_a_create() {
    const LOCK: &str = "/election/lock";
    // Sessions long enough to outlive the election by far.
    const LONG: Duration = Duration::from_secs(10);
    abort_if_hung();
    let zk = TestCluster::builder()
        .max_session_timeout(20_000)
        .start()
        .expect("start a 3-member ensemble");
    let leader = zk.wait_leader(WAIT).expect("a leader");
    let follower = (0..zk.size()).find(|&i| i != leader).expect("a follower");
    let gate = FaultProxy::start(zk.member_addr(follower).unwrap()).expect("start a proxy");

    let holder = connect_with(&zk.member_connect_string(follower).unwrap(), LONG);
    let holder_mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = holder_mutex.lock().unwrap();
    let first_waiter_client = connect_with(&zk.member_connect_string(follower).unwrap(), LONG);
    let first_waiter = Contender::mutex(&first_waiter_client, LOCK, "first waiter");
    wait_children(&holder, LOCK, 2);

    // Its only member is the follower, which stays in the quorum.
    let late_client = connect_with(&gate.connect_string(), LONG);
    let late_session = late_client.session_id();
    zk.pause(leader).expect("freeze the leader");
    let late = Contender::mutex(&late_client, LOCK, "late");
    wait_until("the late create to reach the follower", WAIT, || {
        gate.requests_seen(CREATE2) > 0
    });
    zk.kill(leader).expect("kill the frozen leader");
    let new_leader = zk.wait_leader(WAIT).expect("a new leader");
    assert_ne!(new_leader, leader);
    // The follower may still be syncing with the new leader, and refusing
    // clients, once that one says it leads.
    zk.wait_serving(WAIT).expect("the two members to serve");

    let observer = connect_with(&zk.member_connect_string(follower).unwrap(), LONG);
    let mut queue = Vec::new();
    wait_until("the late contender to queue", WAIT, || {
        queue = children(&observer, LOCK);
        queue.len() == 3
    });
    let late_nodes: Vec<&String> = queue
        .iter()
        .filter(|n| owner(&observer, &format!("{LOCK}/{n}")) == Some(late_session))
        .collect();
    assert_eq!(late_nodes.len(), 1, "{queue:?}");
    assert_eq!(*late_nodes[0], queue[2]);
    // The first create, cut off, was searched for (starting with a sync)
    // and then made again.
    assert_eq!(gate.requests_seen(CREATE2), 2);
    assert_eq!(gate.requests_seen(SYNC), 1);
    first_waiter.expect_waiting();
    late.expect_waiting();

    guard.unlock().unwrap();
    assert_eq!(leaf(&first_waiter.wait_held()), queue[1]);
    late.expect_waiting();
    first_waiter.release();
    assert_eq!(leaf(&late.wait_held()), queue[2]);
    late.release();
    wait_children(&observer, LOCK, 0);
}
