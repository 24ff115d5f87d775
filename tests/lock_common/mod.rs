//! Helpers shared by the lock integration tests (`tests/lock_*.rs`).
//!
//! Every test starts its own server (or at least uses its own paths); every
//! wait is bounded and either polls a condition with a deadline or blocks on
//! a channel with a timeout, never a bare sleep.

#![allow(dead_code)]

// The client tests' helpers that lock tests need too.
#[path = "../common/mod.rs"]
mod common;

#[allow(unused_imports)] // each test binary uses some of them
pub use common::{
    abort_if_hung, dead_port, member_with_session, mk, poll_until as poll, proxy, server,
    wait_until, watches_by_path,
};

use std::fmt::Debug;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zklock::{Client, Error, LockState};

/// The session timeout of most clients: short enough for quick expiry
/// tests, long enough for a loaded two-core machine.
pub const SESSION_TIMEOUT: Duration = Duration::from_millis(3000);
/// The per-host connect timeout of most clients.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);
/// The longest anything that should happen is waited for.
pub const WAIT: Duration = Duration::from_secs(20);
/// How long "nothing happens" is watched for, after the state it checks has
/// been established by a round trip.
pub const QUIET: Duration = Duration::from_millis(300);
/// A connected client with [`SESSION_TIMEOUT`].
pub fn connect(connect_string: &str) -> Client {
    connect_with(connect_string, SESSION_TIMEOUT)
}

/// How many times [`connect_with`] tries to establish its session.
const CONNECT_ATTEMPTS: usize = 3;

/// A connected client asking for `session_timeout`. The short connect
/// timeout is for the reconnects under test: a first handshake that a
/// loaded machine (an ensemble member forwarding the new session to its
/// leader, say) does not answer within it is tried again, a few times.
pub fn connect_with(connect_string: &str, session_timeout: Duration) -> Client {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match Client::builder()
            .session_timeout(session_timeout)
            .connect_timeout(CONNECT_TIMEOUT)
            .connect(connect_string)
        {
            Ok(client) => return client,
            Err(e @ Error::ConnectFailed { .. }) if attempts < CONNECT_ATTEMPTS => {
                eprintln!("connect to {connect_string}, attempt {attempts}: {e}; trying again");
            }
            Err(e) => panic!("connect to {connect_string}: {e}"),
        }
    }
}

/// The last segment of a node path: a lock node's name.
pub fn leaf(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The sequence number of a lock node (`..-0000000042`).
pub fn sequence(name: &str) -> u32 {
    let digits = name.rsplit(['-', '_']).next().unwrap_or_default();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no sequence suffix in {name:?}"))
}

/// The children of `dir` in sequence order; empty if `dir` does not exist.
pub fn children(client: &Client, dir: &str) -> Vec<String> {
    match client.get_children(dir) {
        Ok(mut names) => {
            names.sort_by_key(|n| sequence(n));
            names
        }
        Err(Error::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {dir}: {e}"),
    }
}

/// The session owning the ephemeral node `path`, or `None` if it is gone.
pub fn owner(client: &Client, path: &str) -> Option<i64> {
    client
        .exists(path)
        .unwrap_or_else(|e| panic!("exists {path}: {e}"))
        .map(|stat| stat.ephemeral_owner)
}

/// Waits until `dir` has exactly `n` children and returns them in order.
pub fn wait_children(client: &Client, dir: &str, n: usize) -> Vec<String> {
    let mut last = Vec::new();
    wait_until(&format!("{n} children under {dir}"), WAIT, || {
        last = children(client, dir);
        last.len() == n
    });
    last
}

/// Runs `f` on a new thread; its result arrives on the returned channel.
/// The thread is named, so a hang shows up with its name in the output.
pub fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> (Receiver<T>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("spawn a thread");
    (rx, handle)
}

/// Receives within `timeout` or panics, naming `what`.
pub fn recv<T>(rx: &Receiver<T>, timeout: Duration, what: &str) -> T {
    match rx.recv_timeout(timeout) {
        Ok(value) => value,
        Err(RecvTimeoutError::Timeout) => panic!("timed out after {timeout:?}: {what}"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what}: the sender is gone (it panicked?)"),
    }
}

/// Checks that nothing arrives for [`QUIET`].
pub fn expect_nothing<T: Debug>(rx: &Receiver<T>, what: &str) {
    match rx.recv_timeout(QUIET) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("{what}: expected nothing, got {other:?}"),
    }
}

/// A contender on its own thread, which reports the node it holds and
/// releases when told to.
pub struct Contender {
    name: String,
    held: Receiver<String>,
    release: mpsc::Sender<()>,
}

impl Contender {
    /// Starts `run`, which acquires, then calls its argument with the held
    /// node (which reports the hold and returns when told to release), then
    /// drops its guard.
    pub fn start(name: &str, run: impl FnOnce(&dyn Fn(&str)) + Send + 'static) -> Contender {
        let (held_tx, held) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        spawn(name, move || {
            run(&|node: &str| {
                let _ = held_tx.send(node.to_owned());
                let _ = release_rx.recv_timeout(WAIT);
            })
        });
        Contender {
            name: name.to_owned(),
            held,
            release,
        }
    }

    /// A mutex contender on `client`.
    pub fn mutex(client: &Client, dir: &str, name: &str) -> Contender {
        let mutex = zklock::Mutex::new(client, dir).unwrap();
        Contender::start(name, move |hold| {
            let guard = mutex.lock().expect("lock");
            hold(guard.node());
        })
    }

    /// A contender for the write side of a read-write lock on `client`.
    pub fn writer(client: &Client, dir: &str, name: &str) -> Contender {
        let rw = zklock::RwLock::new(client, dir).unwrap();
        Contender::start(name, move |hold| {
            let guard = rw.write().expect("write");
            hold(guard.node());
        })
    }

    /// Waits until the contender holds, and returns its node.
    pub fn wait_held(&self) -> String {
        recv(&self.held, WAIT, &format!("the {} to hold", self.name))
    }

    pub fn expect_waiting(&self) {
        expect_nothing(&self.held, &format!("the {} (still waiting)", self.name));
    }

    pub fn release(&self) {
        self.release.send(()).unwrap();
    }
}

/// How many requests of kind `op` went through `gate`.
pub fn sent(gate: &zklock::testing::FaultProxy, op: zklock::proto::OpCode) -> usize {
    gate.requests_seen(op.code())
}

/// A child process that is killed (SIGKILL) and reaped when dropped, so a
/// failing test leaves nothing behind.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lock states received until `Held` or `Lost`, within `WAIT`.
pub fn recv_lock_states(rx: &crossbeam_channel::Receiver<LockState>) -> Vec<LockState> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while let Ok(state) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        seen.push(state);
        if state != LockState::Suspended {
            return seen;
        }
    }
    panic!("the guard's states: saw only {seen:?} within {WAIT:?}");
}
