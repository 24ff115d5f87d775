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
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use crossbeam_channel::{after, bounded, never, select, Receiver};
use zklock::LockState;

use crate::tied::spawn_tied;
use crate::Outcome;

/// The lock was lost while COMMAND ran; COMMAND was terminated.
const EXIT_LOST: u8 = 76;

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
    let pid = child.id();
    let (exit_tx, exit_rx) = bounded::<std::io::Result<ExitStatus>>(1);
    std::thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });
    let kill_grace = (timeout.saturating_sub(grace * 3) / 6).max(Duration::from_millis(100));
    let mut suspended_since = (initial == LockState::Suspended).then(Instant::now);
    if initial == LockState::Lost {
        return terminate(pid, &exit_rx, kill_grace);
    }
    loop {
        let deadline = suspended_since
            .map(|since| after((since + grace).saturating_duration_since(Instant::now())));
        select! {
            recv(exit_rx) -> status => {
                let lost = states.try_iter().any(|s| s == LockState::Lost);
                let status = status.ok().and_then(Result::ok);
                if lost {
                    return Outcome::Exit(EXIT_LOST);
                }
                return Outcome::Exit(status.map_or(1, exit_code));
            }
            recv(states) -> state => match state {
                Ok(LockState::Held) => suspended_since = None,
                Ok(LockState::Suspended) if grace.is_zero() => return terminate(pid, &exit_rx, kill_grace),
                Ok(LockState::Suspended) => suspended_since = suspended_since.or(Some(Instant::now())),
                Ok(LockState::Lost) | Err(_) => return terminate(pid, &exit_rx, kill_grace),
            },
            recv(signals) -> signal => {
                if let Ok(signal) = signal {
                    send_signal(pid, signal);
                }
            }
            recv(deadline.unwrap_or_else(never)) -> _ => return terminate(pid, &exit_rx, kill_grace),
        }
    }
}

fn terminate(
    pid: u32,
    exited: &Receiver<std::io::Result<ExitStatus>>,
    kill_grace: Duration,
) -> Outcome {
    eprintln!("zklock: lock no longer held; terminating the command (pid {pid})");
    send_signal(pid, signal_hook::consts::SIGTERM);
    if exited.recv_timeout(kill_grace).is_err() {
        send_signal(pid, signal_hook::consts::SIGKILL);
        let _ = exited.recv_timeout(Duration::from_secs(5));
    }
    Outcome::Exit(EXIT_LOST)
}

fn send_signal(pid: u32, signal: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}
