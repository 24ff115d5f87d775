//! Mutual exclusion under contention: many sessions hammer one lock path
//! while doing a read-modify-write that only the lock makes safe.

mod lock_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use lock_common::*;
use zklock::{Client, Mutex};

const SESSIONS: usize = 8;
const ROUNDS: usize = 200;
const LOCK: &str = "/excl/lock";
const COUNTER: &str = "/excl/counter";

/// One critical section, as its holder saw it.
#[derive(Debug, Clone, Copy)]
struct Section {
    start: Instant,
    end: Instant,
    token: i64,
    /// The counter value read inside the section.
    read: u64,
    session: usize,
}

/// One contender: `ROUNDS` times lock, read the counter, write it plus one
/// with no version check (so only the lock prevents lost updates), unlock.
fn contend(
    index: usize,
    client: Client,
    inside: Arc<AtomicUsize>,
    max_inside: Arc<AtomicUsize>,
    sections: Arc<StdMutex<Vec<Section>>>,
) -> zklock::Result<()> {
    let mutex = Mutex::new(&client, LOCK)?;
    for round in 0..ROUNDS {
        let guard = mutex.lock()?;
        let start = Instant::now();
        let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
        max_inside.fetch_max(now_inside, Ordering::SeqCst);
        let (data, _) = client.get_data(COUNTER)?;
        let read: u64 = String::from_utf8_lossy(&data)
            .parse()
            .expect("the counter holds a number");
        client.set_data(COUNTER, (read + 1).to_string().as_bytes(), None)?;
        let token = guard.fencing_token();
        inside.fetch_sub(1, Ordering::SeqCst);
        let end = Instant::now();
        sections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Section {
                start,
                end,
                token,
                read,
                session: index,
            });
        // Both ways of releasing: waiting for the server, and dropping
        // (the delete goes out in the background, before the next lock).
        if round % 2 == 0 {
            guard.unlock()?;
        } else {
            drop(guard);
        }
    }
    Ok(())
}

#[test]
fn eight_sessions_take_turns_and_never_overlap() {
    let server = server();
    let admin = connect(&server.connect_string());
    mk(&admin, "/excl", b"");
    mk(&admin, COUNTER, b"0");

    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let sections = Arc::new(StdMutex::new(Vec::with_capacity(SESSIONS * ROUNDS)));
    let mut results = Vec::new();
    let began = Instant::now();
    for index in 0..SESSIONS {
        let client = connect(&server.connect_string());
        let (inside, max_inside, sections) = (inside.clone(), max_inside.clone(), sections.clone());
        results.push(spawn(&format!("contender-{index}"), move || {
            contend(index, client, inside, max_inside, sections)
        }));
    }
    // Generous: each section is a handful of round trips on loopback.
    let deadline = began + Duration::from_secs(120);
    for (index, (rx, handle)) in results.into_iter().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        let result = recv(&rx, left, &format!("contender {index} to finish"));
        result.unwrap_or_else(|e| panic!("contender {index}: {e}"));
        handle.join().expect("contender thread");
    }
    eprintln!(
        "{} critical sections in {:?}",
        SESSIONS * ROUNDS,
        began.elapsed()
    );

    let (data, _) = admin.get_data(COUNTER).expect("read the counter");
    assert_eq!(
        String::from_utf8_lossy(&data),
        (SESSIONS * ROUNDS).to_string(),
        "lost updates: the lock let two holders in"
    );
    assert_eq!(max_inside.load(Ordering::SeqCst), 1, "two holders at once");

    let mut sections = std::mem::take(&mut *sections.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(sections.len(), SESSIONS * ROUNDS);
    // In order of acquisition (the value each holder read is that order).
    sections.sort_by_key(|s| s.read);
    for (i, s) in sections.iter().enumerate() {
        assert_eq!(s.read, i as u64, "each value read exactly once");
    }
    for pair in sections.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.end <= b.start,
            "sections overlap: {a:?} still held when {b:?} started"
        );
        assert!(
            a.token < b.token,
            "fencing tokens must strictly increase: {a:?} then {b:?}"
        );
    }
    // And pairwise by start time: sorting by the clock gives the same order.
    let mut by_start = sections.clone();
    by_start.sort_by_key(|s| s.start);
    for pair in by_start.windows(2) {
        assert!(pair[0].end <= pair[1].start, "overlap: {pair:?}");
    }
    assert!(
        by_start
            .iter()
            .map(|s| s.read)
            .eq(0..(SESSIONS * ROUNDS) as u64),
        "clock order and counter order disagree"
    );
    // Every session got its turns.
    for index in 0..SESSIONS {
        let turns = sections.iter().filter(|s| s.session == index).count();
        assert_eq!(turns, ROUNDS, "session {index}");
    }
    // Nothing left behind.
    wait_until("the lock directory to empty", WAIT, || {
        children(&admin, LOCK).is_empty()
    });
}
