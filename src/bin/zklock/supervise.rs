//! Running `exec`'s command while the lock holds, and terminating it when
//! the lock can no longer be relied on.
//!
//! The command must have stopped before any other contender can acquire.
//! With a negotiated session timeout T, the server expires the session (and
//! so frees the lock) no sooner than T after it last heard from us. The client
//! drops a silent connection, and the guard turns `Suspended`, at most 2T/3
//! after the last contact. From there zklock waits `--grace` G (at most T/6,
//! default 0) for a reconnect, then sends SIGTERM, then SIGKILL after
//! K = max(100 ms, (T/3 - G) / 2). The command is therefore gone by
//! 2T/3 + G + K <= 11T/12 < T.

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use crossbeam_channel::{after, bounded, never, select, Receiver};
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::Pid;
use zklock::LockState;

use crate::group::Group;
use crate::tied::spawn_tied;
use crate::Outcome;

/// The lock was lost while COMMAND ran; COMMAND was terminated.
const EXIT_LOST: u8 = 76;

/// How long the command may take to die once sent SIGKILL (it cannot
/// refuse, but a process in uninterruptible sleep dies only when it wakes).
const KILLED_WAIT: Duration = Duration::from_secs(5);

/// Runs `command` with `envs`, the lock held (in state `initial`, then as
/// `states` tell), until it exits or the lock can no longer be relied on.
pub fn run<'a>(
    command: &[String],
    envs: impl IntoIterator<Item = (&'a str, &'a OsStr)> + Clone,
    initial: LockState,
    states: &Receiver<LockState>,
    signals: &Receiver<i32>,
    timeout: Duration,
    grace: Duration,
) -> Outcome {
    let (program, rest) = match command.split_first() {
        Some(split) => split,
        None => return Outcome::Usage("missing COMMAND".into()),
    };
    let mut child = match spawn_tied(program, rest, envs) {
        Ok(child) => child,
        Err(e) => return Outcome::Error(format!("cannot run {program:?}: {e}")),
    };
    let Ok(pid) = i32::try_from(child.id()).map(Pid::from_raw) else {
        let _ = child.kill();
        let _ = child.wait();
        return Outcome::Error(format!("{program:?} got an unexpected pid {}", child.id()));
    };
    let group = Group::default();
    group.started(pid);
    let exited = watch_exit(pid);
    let kill_grace = (timeout.saturating_sub(grace * 3) / 6).max(Duration::from_millis(100));
    let lost_lock = |child: &mut Child| terminate(child, &group, &exited, kill_grace);
    let mut suspended_since = (initial == LockState::Suspended).then(Instant::now);
    if initial == LockState::Lost {
        return lost_lock(&mut child);
    }
    loop {
        let deadline = suspended_since
            .map(|since| after((since + grace).saturating_duration_since(Instant::now())));
        select! {
            recv(exited) -> _ => {
                let lost = states.try_iter().any(|s| s == LockState::Lost);
                group.reaping();
                let status = child.wait();
                return Outcome::Exit(if lost { EXIT_LOST } else { status.map_or(1, exit_code) });
            }
            recv(states) -> state => match state {
                Ok(LockState::Held) => suspended_since = None,
                Ok(LockState::Suspended) if grace.is_zero() => return lost_lock(&mut child),
                Ok(LockState::Suspended) => {
                    suspended_since = suspended_since.or(Some(Instant::now()));
                }
                Ok(LockState::Lost) | Err(_) => return lost_lock(&mut child),
            },
            recv(signals) -> signal => {
                if let Some(signal) = signal.ok().and_then(|raw| Signal::try_from(raw).ok()) {
                    group.signal_or_say(signal);
                }
            }
            recv(deadline.unwrap_or_else(never)) -> _ => return lost_lock(&mut child),
        }
    }
}

/// Tells when the command has exited, without reaping it: until the main
/// thread reaps it, its pid cannot be reused, and it may still be
/// signalled.
fn watch_exit(pid: Pid) -> Receiver<()> {
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        while let Err(Errno::EINTR) =
            waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
        {}
        let _ = tx.send(());
    });
    rx
}

/// SIGTERM to the command; SIGKILL if it has not exited after
/// `kill_grace`; returns once it has (or, should even SIGKILL not end it,
/// after `KILLED_WAIT`).
fn terminate(
    child: &mut Child,
    group: &Group,
    exited: &Receiver<()>,
    kill_grace: Duration,
) -> Outcome {
    let pid = group.id().unwrap_or(Pid::from_raw(0));
    eprintln!("zklock: lock no longer held; terminating the command (pid {pid})");
    group.signal_or_say(Signal::SIGTERM);
    if exited.recv_timeout(kill_grace).is_err() {
        group.signal_or_say(Signal::SIGKILL);
        let _ = exited.recv_timeout(KILLED_WAIT);
    }
    group.reaping();
    let _ = child.try_wait();
    Outcome::Exit(EXIT_LOST)
}

fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}
