//! A lock holder whose ensemble member is cut off from the quorum but not
//! from its clients (`TestCluster::isolate`). The member answers the
//! holder's pings until it gives up on its leader, after `syncLimit` ticks,
//! while the leader expires the holder's session after the session timeout
//! without word from it. So the session timeout must exceed `syncLimit` ×
//! `tickTime` for a guard's `Held` to mean what it says (see "Choosing a
//! session timeout" in the README): the first test shows that it then does,
//! and the second what happens otherwise, and that the fencing token still
//! tells the two holders apart.

mod lock_common;

use std::time::Duration;

use lock_common::*;
use zklock::testing::{FaultProxy, ServerMode, TestCluster};
use zklock::{Client, Error, LockState, Mutex, Op, State};

/// The harness's `tickTime`.
const TICK: Duration = Duration::from_millis(200);

/// A 3-member ensemble with the given `syncLimit`, whose members reach each
/// other through proxies, and one of its followers.
fn cluster(sync_limit_ticks: u32) -> (TestCluster, usize) {
    abort_if_hung();
    let zk = TestCluster::builder()
        .partitionable(true)
        .sync_limit(sync_limit_ticks)
        .start()
        .expect("start a 3-member ensemble");
    assert_eq!(zk.tick_time(), TICK);
    let leader = zk.wait_leader(WAIT).expect("a leader");
    (zk, (leader + 1) % 3)
}

/// The czxid of `node`, which must exist.
fn token_of(client: &Client, node: &str) -> i64 {
    client.exists(node).unwrap().expect("the node").czxid
}

/// Session timeout 4 s, above `syncLimit` × `tickTime` (1 s). The holder's
/// member, cut off, drops its clients after 1 s: the guard is `Suspended`
/// long before the session could expire. The holder then reaches the
/// leader (its only host now leads there) within the session, and holds
/// again; its node survives, and the waiter does not acquire until the
/// holder releases. Healed, the member serves again as a follower.
#[test]
fn a_holder_on_a_member_cut_off_from_the_quorum_is_suspended_before_its_session_can_expire() {
    const LOCK: &str = "/partition/safe";
    const T: Duration = Duration::from_millis(4000);
    let (zk, follower) = cluster(5);
    let leader = zk.leader().expect("the leader");
    let gate = FaultProxy::start(zk.member_addr(follower).unwrap()).unwrap();
    let holder = Client::builder()
        .session_timeout(T)
        .connect(&gate.connect_string())
        .expect("connect to the follower");
    let session = holder.session_id();
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node().to_owned();
    let token = guard.fencing_token();
    let guard_states = guard.state_changes();
    let client_states = holder.state_changes();

    let observer = connect(&zk.member_connect_string(leader).unwrap());
    let waiter_client = connect(&zk.member_connect_string(leader).unwrap());
    let waiter = Contender::mutex(&waiter_client, LOCK, "waiter");
    wait_children(&observer, LOCK, 2);

    gate.set_upstream(zk.member_addr(leader).unwrap());
    zk.isolate(follower).unwrap();

    assert_eq!(
        recv_lock_states(&guard_states),
        [LockState::Suspended, LockState::Held]
    );
    // The client's listeners hear of a change after its guards.
    let client_saw: Vec<State> = (0..2)
        .map_while(|_| client_states.recv_timeout(WAIT).ok())
        .collect();
    assert_eq!(client_saw, [State::Disconnected, State::Connected]);
    assert_eq!(holder.session_id(), session);
    observer.sync("/").unwrap();
    assert_eq!(owner(&observer, &node), Some(session));
    waiter.expect_waiting();

    guard.unlock().unwrap();
    let waiter_node = waiter.wait_held();
    assert!(token_of(&observer, &waiter_node) > token);
    waiter.release();

    zk.heal(follower).unwrap();
    zk.wait_serving(WAIT).expect("the healed member to serve");
    assert_eq!(zk.mode(follower), Some(ServerMode::Follower));
}

/// Session timeout 4 s, below `syncLimit` × `tickTime` (10 s): the caveat.
/// The leader expires the holder's session after 4 s and the waiter
/// acquires, while the holder's member, cut off but not yet giving up,
/// still answers its pings: the guard says `Held` with another holder in
/// place. The waiter's fencing token is the higher, so storage that checks
/// tokens refuses the old holder, and a guarded write (`guard.multi`) of the
/// old holder is never applied. Once the member gives up, the guard goes
/// `Suspended`, then `Lost` when no server has been heard for 4/3 of the
/// session timeout.
#[test]
fn a_holder_on_a_member_cut_off_from_the_quorum_reads_held_after_its_session_expired_if_the_timeout_is_too_short(
) {
    const LOCK: &str = "/partition/caveat";
    // Not shorter: the holder's pings are due every T/3, and a loaded
    // machine's stall of T/3 before the isolation would drop its
    // connection, and the caveat with it.
    const T: Duration = Duration::from_millis(4000);
    let (zk, follower) = cluster(50);
    let leader = zk.leader().expect("the leader");
    let holder = connect_with(&zk.member_connect_string(follower).unwrap(), T);
    assert_eq!(holder.negotiated_timeout(), Some(T));
    let mutex = Mutex::new(&holder, LOCK).unwrap();
    let guard = mutex.lock().unwrap();
    let token = guard.fencing_token();
    assert_eq!(guard.state(), LockState::Held);
    let guard_states = guard.state_changes();

    let observer = connect(&zk.member_connect_string(leader).unwrap());
    let waiter_client = connect(&zk.member_connect_string(leader).unwrap());
    let waiter = Contender::mutex(&waiter_client, LOCK, "waiter");
    wait_children(&observer, LOCK, 2);

    zk.isolate(follower).unwrap();

    let waiter_node = waiter.wait_held();
    assert_eq!(guard.state(), LockState::Held, "the caveat");
    assert!(guard_states.try_recv().is_err());
    assert!(token_of(&observer, &waiter_node) > token);
    // A guarded write goes through the leader, which the cut-off member
    // cannot reach: it waits until the member gives up and drops the
    // connection, and is never applied.
    let write = guard.multi(&[Op::set_data(LOCK, b"old holder".to_vec(), None)]);
    assert!(matches!(write, Err(Error::ConnectionLoss)), "{write:?}");
    observer.sync("/").unwrap();
    assert_eq!(observer.get_data(LOCK).unwrap().0, b"");

    assert_eq!(
        recv_lock_states(&guard_states),
        [LockState::Suspended, LockState::Lost]
    );
    assert_eq!(holder.state(), State::Expired);
    waiter.release();
}
