//! Locks on a 3-member ensemble whose members fail under a holder or a
//! waiter: the session moves to another member in time, with its lock.

mod lock_common;

use std::time::Duration;

use lock_common::*;
use zklock::testing::{FaultProxy, ProxyMode, TestCluster};
use zklock::{Client, LockState, Mutex, State};

/// The longest session timeout the harness's servers grant (20 ticks).
const T: Duration = Duration::from_millis(4000);

/// The library's default per-host connect timeout, longer than `T` leaves
/// for a move once a silent member is given up on (`T / 3`).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn cluster() -> TestCluster {
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

/// Lock states received until `Held` or `Lost`, within `WAIT`.
fn recv_lock_states(rx: &crossbeam_channel::Receiver<LockState>) -> Vec<LockState> {
    let mut seen = Vec::new();
    while let Ok(state) = rx.recv_timeout(WAIT) {
        seen.push(state);
        if state != LockState::Suspended {
            return seen;
        }
    }
    panic!("the guard's states: saw only {seen:?} within {WAIT:?}");
}
