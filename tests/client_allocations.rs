//! Allocations per call in the steady state, against a real server: a
//! bound on how many allocations a `get_data`, a `set_data` and a
//! lock/unlock cycle make, counted by an instrumented global allocator
//! over many calls (every thread of this process counts: the caller's, the
//! I/O thread's and the release timer's), and the bytes a client keeps
//! after a large request and reply. Counts, not timings.

mod common;

use std::alloc::System;
use std::sync::Mutex;
use std::time::Duration;

use common::{builder, connect, mk, server};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use zklock::testing::TestServer;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The tests of this file one at a time: each counts every allocation of
/// the process.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Calls each measured loop makes, after a warm-up that grows the buffers
/// the steady state reuses.
const CALLS: usize = 1000;

/// Allocations (reallocations included) per call of `call`, over `CALLS`
/// calls.
fn allocations_per_call(mut call: impl FnMut()) -> f64 {
    for _ in 0..CALLS / 5 {
        call();
    }
    let region = Region::new(GLOBAL);
    for _ in 0..CALLS {
        call();
    }
    let change = region.change();
    (change.allocations + change.reallocations) as f64 / CALLS as f64
}

#[test]
fn a_read_allocates_its_reply_slot_its_path_and_the_data_it_returns() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let zk = server();
    let client = connect(&zk.connect_string());
    mk(&client, "/node", &[7; 100]);
    let per_get = allocations_per_call(|| {
        let (data, _) = client.get_data("/node").expect("get_data");
        assert_eq!(data.len(), 100);
    });
    // 3 each, and a little room for a ping.
    assert!(per_get <= 3.05, "{per_get} allocations per get_data");
}

#[test]
fn a_write_allocates_its_slot_path_data_and_batch_lists() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let zk = server();
    let client = connect(&zk.connect_string());
    mk(&client, "/node", &[7; 100]);
    let data = [8; 100];
    let per_set = allocations_per_call(|| {
        client.set_data("/node", &data, None).expect("set_data");
    });
    // Slot, path, data, and the batch's token and op lists.
    assert!(per_set <= 5.05, "{per_set} allocations per set_data");
}

#[test]
fn a_lock_cycle_allocates_at_most_32_times() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let zk = server();
    // A linger no loop iteration outlasts, so that every release joins the
    // next acquisition (the steady state of a lock/unlock loop) however
    // slow the machine.
    let client = builder()
        .release_linger(Duration::from_secs(1))
        .connect(&zk.connect_string())
        .expect("connect");
    let lock = client.mutex("/locks/counted").expect("mutex");
    let per_cycle = allocations_per_call(|| drop(lock.lock().expect("lock")));
    // 56 before the allocation cuts of 2026-11-22, 32 after them.
    assert!(per_cycle <= 32.2, "{per_cycle} allocations per lock cycle");
}

#[test]
fn the_room_a_large_request_and_its_reply_took_is_given_back() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const LARGE: usize = 4 << 20;
    let zk = TestServer::builder()
        .system_property("jute.maxbuffer", (2 * LARGE).to_string())
        .start()
        .expect("start a server with a larger jute.maxbuffer");
    let client = builder()
        .max_request(2 * LARGE)
        .max_frame(2 * LARGE)
        .connect(&zk.connect_string())
        .expect("connect");
    mk(&client, "/large", &[1]);
    let data = vec![7; LARGE];
    let region = Region::new(GLOBAL);
    client.set_data("/large", &data, None).expect("set_data");
    let (read, _) = client.get_data("/large").expect("get_data");
    assert_eq!(read, data);
    drop(read);
    let change = region.change();
    // The write and read buffers the client keeps for its life, shrunk to
    // 1 MiB each once a large frame is through (before, the write side
    // kept over 8 MiB), and room for the small allocations of the calls
    // and pings.
    let kept = change
        .bytes_allocated
        .saturating_sub(change.bytes_deallocated);
    assert!(kept <= (2 << 20) + (64 << 10), "{kept} bytes kept");
}
