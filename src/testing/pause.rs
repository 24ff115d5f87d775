//! Pause points: a test stops a thread of its own at a named point inside
//! a library call, acts while the thread waits there, then lets it go on.
//! For races that no fault at a socket can time, such as a session
//! replaced between two steps of one call.
//!
//! A point is armed on one thread, the one about to make the call, so tests
//! running in parallel never stop each other's threads. The exceptions are
//! the points a client reaches on threads of its own (a host's resolution,
//! the I/O thread's work): each is armed for one key, a host or a path, and
//! a test gives it a key of its own.

use std::cell::RefCell;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a thread stays stopped: a test that never releases it fails
/// instead of hanging.
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// Where the library can stop a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PausePoint {
    /// A lock attempt found its node the holder, in the session it was
    /// created in, and is about to make the guard that follows the
    /// session's state changes.
    LockGranted,
    /// A waiting lock attempt has listed its directory again (its
    /// predecessor changed) and is about to watch the node it now waits
    /// for.
    LockWatching,
    /// A lock attempt's create found the lock directory missing, and the
    /// attempt is about to make it.
    LockDirMissing,
    /// `ensure_path` has just made a missing parent of its path, and is
    /// about to make the node below it.
    PathParentMade,
    /// `delete_recursive` has listed a node's children, and is about to
    /// delete them.
    SubtreeListed,
    /// A client is about to resolve a host of its connect string (armed
    /// with [`Pause::arm_resolving`]): a resolver that does not answer.
    Resolving,
    /// The I/O thread has taken in the server's throttling of a dropped
    /// persistent watch's removal, and is about to look at the path again
    /// after the back-off (armed with [`Pause::arm_for`] and the server
    /// path).
    RemovalThrottled,
}

/// One armed point. Cloned to hand it to the thread that releases it.
#[derive(Clone, Debug)]
pub struct Pause {
    point: PausePoint,
    gate: Arc<Gate>,
}

#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    reached: bool,
    released: bool,
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `done` holds or `timeout` passes; says whether it holds.
    fn wait(&self, timeout: Duration, done: impl Fn(&GateState) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state();
        while !done(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match self.changed.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(e) => e.into_inner().0,
            };
        }
        true
    }
}

thread_local! {
    static ARMED: RefCell<Vec<Pause>> = const { RefCell::new(Vec::new()) };
}

/// Points armed by key: they are reached on the client's own threads,
/// which a test cannot arm.
static KEYED: Mutex<Vec<(String, Pause)>> = Mutex::new(Vec::new());

impl Pause {
    /// Arms `point` on the calling thread, once: the next time this thread
    /// reaches it, it stops there until [`Pause::release`].
    pub fn arm(point: PausePoint) -> Pause {
        let pause = Pause {
            point,
            gate: Arc::default(),
        };
        ARMED.with(|armed| armed.borrow_mut().push(pause.clone()));
        pause
    }

    /// Arms the next resolution of `host` (`name:port`, as in a connect
    /// string), once, on whichever thread makes it: that thread stops
    /// there until [`Pause::release`].
    pub fn arm_resolving(host: &str) -> Pause {
        Pause::arm_for(PausePoint::Resolving, host)
    }

    /// Arms `point` for `key` (see the point's documentation), once, on
    /// whichever thread reaches it with that key: that thread stops there
    /// until [`Pause::release`].
    pub fn arm_for(point: PausePoint, key: &str) -> Pause {
        let pause = Pause {
            point,
            gate: Arc::default(),
        };
        KEYED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key.to_owned(), pause.clone()));
        pause
    }

    /// Waits until the armed thread has stopped at the point; false if
    /// `timeout` passed first.
    pub fn wait_reached(&self, timeout: Duration) -> bool {
        self.gate.wait(timeout, |state| state.reached)
    }

    /// Lets the stopped thread go on; a thread that has not reached the
    /// point yet will pass it without stopping.
    pub fn release(&self) {
        self.gate.state().released = true;
        self.gate.changed.notify_all();
    }
}

/// Releases its pause when dropped, a failed assertion included, so that a
/// scope joining the paused thread does not wait out the pause.
#[derive(Debug)]
pub struct ReleasedOnDrop(pub Pause);

impl Drop for ReleasedOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Called by the library at `point`: stops the calling thread there if a
/// test armed the point on it, until released (or for at most a minute).
pub(crate) fn reached(point: PausePoint) {
    let armed = ARMED.with(|armed| {
        let mut armed = armed.borrow_mut();
        let index = armed.iter().position(|pause| pause.point == point)?;
        Some(armed.remove(index))
    });
    if let Some(pause) = armed {
        pause.stop_here();
    }
}

/// Called by the library at `point`, keyed by `key`, on a thread of the
/// client's own: stops the calling thread there if a test armed that point
/// for that key.
pub(crate) fn reached_for(point: PausePoint, key: &str) {
    let armed = {
        let mut armed = KEYED.lock().unwrap_or_else(|e| e.into_inner());
        armed
            .iter()
            .position(|(armed_key, pause)| pause.point == point && armed_key == key)
            .map(|index| armed.remove(index).1)
    };
    if let Some(pause) = armed {
        pause.stop_here();
    }
}

impl Pause {
    /// Says the point is reached, then waits for the release (for at
    /// most [`MAX_PAUSE`]).
    fn stop_here(&self) {
        self.gate.state().reached = true;
        self.gate.changed.notify_all();
        if !self.gate.wait(MAX_PAUSE, |state| state.released) {
            log::warn!(
                "{:?}: not released within {MAX_PAUSE:?}, going on",
                self.point
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn an_armed_thread_stops_at_its_point_until_released() {
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            let pause = Pause::arm(PausePoint::LockGranted);
            tx.send(pause).unwrap();
            reached(PausePoint::LockGranted);
            // Armed once: the next pass does not stop.
            reached(PausePoint::LockGranted);
        });
        let pause = rx.recv_timeout(WAIT).unwrap();
        assert!(pause.wait_reached(WAIT));
        assert!(!worker.is_finished(), "stopped until released");
        pause.release();
        worker.join().unwrap();
    }

    #[test]
    fn a_keyed_point_stops_whichever_thread_reaches_it_with_its_key_once() {
        let pause = Pause::arm_resolving("pause-test.invalid:1");
        // Another key, or another point with that key, passes.
        std::thread::spawn(|| {
            reached_for(PausePoint::Resolving, "pause-test.invalid:2");
            reached_for(PausePoint::RemovalThrottled, "pause-test.invalid:1");
        })
        .join()
        .unwrap();
        assert!(!pause.wait_reached(Duration::from_millis(50)));
        let worker = std::thread::spawn(|| {
            reached_for(PausePoint::Resolving, "pause-test.invalid:1");
            // Armed once: the next pass does not stop.
            reached_for(PausePoint::Resolving, "pause-test.invalid:1");
        });
        assert!(pause.wait_reached(WAIT));
        assert!(!worker.is_finished(), "stopped until released");
        pause.release();
        worker.join().unwrap();
    }

    #[test]
    fn a_point_armed_on_one_thread_never_stops_another() {
        let pause = Pause::arm(PausePoint::LockGranted);
        std::thread::spawn(|| reached(PausePoint::LockGranted))
            .join()
            .unwrap();
        assert!(!pause.wait_reached(Duration::from_millis(50)));
        // Released before it is reached: the armed thread passes.
        pause.release();
        reached(PausePoint::LockGranted);
        assert!(pause.wait_reached(WAIT));
    }
}
