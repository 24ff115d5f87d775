//! zklock's lines on stderr, written by a thread of their own. A stderr
//! that nobody reads (a full pipe, a terminal stopped with Ctrl-S) then
//! holds up that thread alone: never the signals that stop the command
//! before another contender can acquire, nor anything else zklock does.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, RecvTimeoutError, Sender};

/// Lines waiting for the writer beyond this many are dropped.
const BACKLOG: usize = 256;

/// A write to stderr that takes this long, in ms, is stuck, not slow.
const STALL_MS: u64 = 200;
const STALL: Duration = Duration::from_millis(STALL_MS);

/// When the write under way began, if one is: in ms since [`EPOCH`], plus
/// one (0: none under way).
static WRITING_SINCE: AtomicU64 = AtomicU64::new(0);

/// What [`WRITING_SINCE`] counts from.
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn millis_since_epoch() -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
}

/// The writer thread's `/proc` stat file, once it has started.
static WRITER_STAT: OnceLock<std::path::PathBuf> = OnceLock::new();

/// Whether a write to stderr has been under way for [`STALL`] or more,
/// blocked: a writer that is only waiting for a CPU (a loaded machine) is
/// not stuck, and its line would be lost.
fn is_stuck() -> bool {
    let long = match WRITING_SINCE.load(Ordering::Relaxed) {
        0 => false,
        since => millis_since_epoch().saturating_sub(since - 1) >= STALL_MS,
    };
    long && !writer_runnable()
}

/// True if the writer thread is running or waiting to run (state `R`);
/// false if blocked, or if that cannot be told.
fn writer_runnable() -> bool {
    WRITER_STAT
        .get()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .is_some_and(|stat| crate::group::after_name(&stat).is_some_and(|s| s.starts_with('R')))
}

enum Line {
    Text(String),
    /// Answered once every line before it is written.
    Written(Sender<()>),
}

/// The writer's queue; `None` if its thread could not be started.
static WRITER: OnceLock<Option<Sender<Line>>> = OnceLock::new();

fn writer() -> Option<&'static Sender<Line>> {
    WRITER
        .get_or_init(|| {
            let (lines, queue) = bounded::<Line>(BACKLOG);
            let spawned = std::thread::Builder::new()
                .name("zklock-stderr".into())
                .spawn(move || {
                    let tid = nix::unistd::gettid();
                    let _ = WRITER_STAT.set(format!("/proc/self/task/{tid}/stat").into());
                    for line in queue {
                        match line {
                            Line::Text(text) => {
                                WRITING_SINCE.store(millis_since_epoch() + 1, Ordering::Relaxed);
                                let _ = std::io::stderr().write_all(text.as_bytes());
                                WRITING_SINCE.store(0, Ordering::Relaxed);
                            }
                            Line::Written(done) => {
                                let _ = done.send(());
                            }
                        }
                    }
                });
            spawned.ok().map(|_| lines)
        })
        .as_ref()
}

/// Starts the writer thread, if it has not started yet.
pub fn start() {
    writer();
}

/// Queues `line` for stderr, without waiting: dropped if the writer is that
/// far behind. Written here only if no writer thread could be started.
pub fn say(mut line: String) {
    // One write with its newline: a command writing to the same stderr at
    // that moment cannot come between the two.
    line.push('\n');
    match writer() {
        Some(lines) => {
            let _ = lines.try_send(Line::Text(line));
        }
        None => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

/// Waits, at most `timeout`, for the lines queued so far to be written:
/// the process's exit would end the writer with them. Gives up early on a
/// writer stuck in one write (for [`STALL`]): its lines are lost anyway,
/// and the exit is not to wait for a reader that never comes.
pub fn flush(timeout: Duration) {
    let Some(lines) = WRITER.get().and_then(Option::as_ref) else {
        return;
    };
    let deadline = Instant::now() + timeout;
    let (done, written) = bounded(1);
    if lines.try_send(Line::Written(done)).is_err() {
        return;
    }
    loop {
        match written.recv_deadline((Instant::now() + STALL).min(deadline)) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                if is_stuck() || Instant::now() >= deadline {
                    return;
                }
            }
        }
    }
}
