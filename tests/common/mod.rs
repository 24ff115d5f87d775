//! Helpers shared by the client integration tests (`tests/client_*.rs`).
//!
//! Every test starts its own servers, so tests run in parallel; every wait
//! is bounded, and waits poll or block on channels, never a bare sleep.

#![allow(dead_code)]

pub mod path_errors;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use zklock::testing::{FaultProxy, TestCluster, TestServer};
use zklock::{Acl, Client, ClientBuilder, Error, EventType, Id, State, WatchedEvent};

/// The session timeout most tests ask for: short, so expiry tests are quick,
/// but well above a loaded machine's scheduling hiccups.
pub const SESSION_TIMEOUT: Duration = Duration::from_millis(4000);
/// The per-host connect timeout most tests use.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(2000);
/// The longest anything that should happen is waited for.
pub const WAIT: Duration = Duration::from_secs(20);
/// How long "nothing more arrives" is checked for, after a round trip has
/// already proved that anything sent earlier would have arrived.
pub const QUIET: Duration = Duration::from_millis(200);

/// Creates `path` with `data` as the digest user `bob`, readable and
/// writable by bob alone, and returns bob's client.
pub fn create_bobs_node(zk: &TestServer, path: &str, data: &[u8]) -> Client {
    let bob = builder()
        .digest("bob", "secret")
        .connect(&zk.connect_string())
        .expect("connect as bob");
    let bob_only = [Acl {
        perms: zklock::perms::ALL,
        id: Id::new("auth", ""),
    }];
    bob.create(path, data, &bob_only, zklock::CreateMode::Persistent)
        .expect("create bob's node");
    bob
}

/// A standalone server with the harness defaults.
pub fn server() -> TestServer {
    abort_if_hung();
    TestServer::new().expect("start a ZooKeeper server")
}

/// A 3-member ensemble.
pub fn cluster() -> TestCluster {
    abort_if_hung();
    TestCluster::new().expect("start a ZooKeeper ensemble")
}

/// How long a test binary may run before it is taken for hung. The tests'
/// own waits are bounded, but a `lock()` call (the API under test) is not,
/// and a library bug that hangs one should fail the suite with a message
/// rather than run into CI's time limit. Well above the slowest binary.
const HANG_LIMIT: Duration = Duration::from_secs(600);

/// Arms, once per test binary, the abort after [`HANG_LIMIT`]. The servers'
/// watchdogs then stop them and remove their directories. [`server`] and
/// [`cluster`] arm it; a binary that starts its servers otherwise calls it.
pub fn abort_if_hung() {
    static ARMED: std::sync::Once = std::sync::Once::new();
    ARMED.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("hang-limit".into())
            .spawn(|| {
                std::thread::sleep(HANG_LIMIT);
                // Not `eprintln!`, which the test harness captures for the
                // test that spawned this thread, and loses on the abort.
                let _ = writeln!(
                    std::io::stderr(),
                    "a test of this binary is still running after {HANG_LIMIT:?}: aborting"
                );
                std::process::abort();
            });
    });
}

/// A proxy in front of `server`.
pub fn proxy(server: &TestServer) -> FaultProxy {
    FaultProxy::start(server.addr()).expect("start a fault proxy")
}

/// The builder every test starts from.
pub fn builder() -> ClientBuilder {
    Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
}

/// A connected client.
pub fn connect(connect_string: &str) -> Client {
    builder()
        .connect(connect_string)
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}

/// `[ALL, world:anyone]`.
pub fn open() -> Vec<Acl> {
    Acl::open_unsafe()
}

/// Creates a persistent node with open ACLs.
pub fn mk(client: &Client, path: &str, data: &[u8]) {
    client
        .create(path, data, &open(), zklock::CreateMode::Persistent)
        .unwrap_or_else(|e| panic!("create {path}: {e}"));
}

/// Polls `done` until it holds (true) or `timeout` passes (false).
pub fn poll_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `done` until it holds; panics after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, done: impl FnMut() -> bool) {
    assert!(
        poll_until(timeout, done),
        "timed out after {timeout:?} waiting for {what}"
    );
}

/// The next event of a watch, within [`WAIT`].
pub fn next_event(rx: &Receiver<WatchedEvent>, what: &str) -> WatchedEvent {
    match rx.recv_timeout(WAIT) {
        Ok(event) => event,
        Err(e) => panic!("no watch event for {what} within {WAIT:?}: {e}"),
    }
}

/// Asserts that the next event of a watch is `event_type` on `path`.
pub fn expect_event(rx: &Receiver<WatchedEvent>, event_type: EventType, path: &str) {
    let event = next_event(rx, &format!("{event_type:?} on {path}"));
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (event_type, path),
        "unexpected event {event:?}"
    );
    assert_eq!(event.state, zklock::KeeperState::SyncConnected, "{event:?}");
}

/// Asserts that nothing (more) arrives on `rx` for [`QUIET`]. Call it after a
/// round trip on the same connection that follows the change, so any event
/// the change caused would already be queued.
pub fn expect_silence<T: std::fmt::Debug>(rx: &Receiver<T>, what: &str) {
    match rx.recv_timeout(QUIET) {
        Err(RecvTimeoutError::Timeout) => {}
        Ok(extra) => panic!("{what}: unexpected {extra:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what}: the channel disconnected"),
    }
}

/// Asserts that a one-shot watch is spent: its channel disconnects (the
/// watcher was dropped after its one event) with no further event.
pub fn expect_spent(rx: &Receiver<WatchedEvent>, what: &str) {
    match rx.recv_timeout(WAIT) {
        Err(RecvTimeoutError::Disconnected) => {}
        Ok(extra) => panic!("{what}: a second event {extra:?}"),
        Err(RecvTimeoutError::Timeout) => panic!("{what}: the watch channel stayed open"),
    }
}

/// Every event that arrives within [`QUIET`] of the last one; a stream
/// that does not stop within [`WAIT`] fails the test.
pub fn drain_events(rx: &Receiver<WatchedEvent>) -> Vec<(EventType, String)> {
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while let Ok(event) = rx.recv_timeout(QUIET) {
        out.push((event.event_type, event.path));
        assert!(Instant::now() < deadline, "events still coming: {out:?}");
    }
    out
}

/// The cluster member whose `cons` lists `session_id`, once exactly one does.
pub fn member_with_session(cluster: &TestCluster, session_id: i64) -> usize {
    let needle = format!("sid=0x{session_id:x},");
    let mut found = None;
    wait_until("exactly one member to hold the session", WAIT, || {
        let holders: Vec<usize> = (0..cluster.size())
            .filter(|&i| {
                cluster
                    .four_letter(i, "cons")
                    .is_ok_and(|reply| reply.contains(&needle))
            })
            .collect();
        found = match holders.as_slice() {
            [one] => Some(*one),
            _ => None,
        };
        found.is_some()
    });
    found.expect("a member")
}

/// Receives states until `want` arrives (within [`WAIT`]); returns every
/// state received, `want` included.
pub fn states_until(rx: &Receiver<State>, want: State) -> Vec<State> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(state) => {
                seen.push(state);
                if state == want {
                    return seen;
                }
            }
            Err(e) => panic!("no {want:?} within {WAIT:?} (saw {seen:?}): {e}"),
        }
    }
}

/// Waits until the client is connected again, within [`WAIT`].
pub fn wait_connected(client: &Client) {
    client
        .wait_connected(WAIT)
        .unwrap_or_else(|e| panic!("client did not reconnect: {e}"));
}

/// Runs `f` and asserts that it fails with `expected` in well under a
/// round trip's worth of waiting (a "fast" failure needs no server).
pub fn fails_fast<T: std::fmt::Debug>(
    what: &str,
    expected: &Error,
    f: impl FnOnce() -> zklock::Result<T>,
) {
    let started = Instant::now();
    let result = f();
    let took = started.elapsed();
    match result {
        Err(e) if e == *expected => {}
        other => panic!("{what}: expected Err({expected:?}), got {other:?}"),
    }
    // Any wait for a server would be seconds (a timeout); a loaded
    // machine may take a while to run even a failure that needs none.
    assert!(
        took < Duration::from_secs(2),
        "{what} took {took:?} to fail"
    );
}

/// A loopback port nothing listens on (see [`zklock::testing::dead_port`]).
pub fn dead_port() -> u16 {
    zklock::testing::dead_port().expect("a free loopback port")
}

/// Which of `proxies` carries a client connection, once exactly one does.
pub fn connected_proxy(proxies: &[FaultProxy]) -> usize {
    let mut found = None;
    wait_until("exactly one proxy to carry the client", WAIT, || {
        let open: Vec<usize> = (0..proxies.len())
            .filter(|&i| proxies[i].connection_count() > 0)
            .collect();
        found = match open.as_slice() {
            [one] => Some(*one),
            _ => None,
        };
        found.is_some()
    });
    found.expect("a proxy")
}

/// The digest id ZooKeeper derives from `user` and `password`:
/// `user:base64(sha1("user:password"))`.
pub fn digest_id(user: &str, password: &str) -> Id {
    let hash = sha1(format!("{user}:{password}").as_bytes());
    Id::new("digest", format!("{user}:{}", base64(&hash)))
}

/// SHA-1 (FIPS 180-4), enough for digest ids.
pub fn sha1(message: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut padded = message.to_vec();
    padded.push(0x80);
    while padded.len() % 64 != 56 {
        padded.push(0);
    }
    padded.extend_from_slice(&((message.len() as u64) * 8).to_be_bytes());
    for block in padded.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, word) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*word);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Sessions watching each path, from the server's `wchp` four-letter word.
///
/// The reply lists each watched path on a line of its own, followed by one
/// indented `0x<session id>` line per session watching it.
pub fn watches_by_path(server: &TestServer) -> BTreeMap<String, Vec<i64>> {
    let reply = server.four_letter("wchp").expect("wchp");
    let mut map: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in reply.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            let hex = trimmed.trim_start_matches("0x");
            let id = u64::from_str_radix(hex, 16)
                .unwrap_or_else(|_| panic!("bad session id line {line:?} in wchp:\n{reply}"))
                as i64;
            let path = current
                .as_ref()
                .unwrap_or_else(|| panic!("session id before any path in wchp:\n{reply}"));
            map.entry(path.clone()).or_default().push(id);
        } else {
            assert!(
                trimmed.starts_with('/'),
                "unexpected wchp line {line:?}:\n{reply}"
            );
            current = Some(trimmed.to_owned());
            map.entry(trimmed.to_owned()).or_default();
        }
    }
    map
}
