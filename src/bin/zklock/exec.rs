//! `zklock exec`: run a command while holding a lock.
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
use zklock::recipes::lock_queue;
use zklock::{Client, LockState, Mutex, RwLock};

use crate::args::{self, Args, Usage};
use crate::tied::spawn_tied;
use crate::{Common, Outcome};

/// The lock was not acquired; COMMAND did not run.
const EXIT_NOT_ACQUIRED: u8 = 75;
/// The lock was lost while COMMAND ran; COMMAND was terminated.
const EXIT_LOST: u8 = 76;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Exclusive,
    Read,
    Write,
}

struct Options {
    common: Common,
    wait: Option<Duration>,
    side: Side,
    grace: Duration,
    quiet: bool,
}

fn parse(args: &mut Args) -> Result<(Options, String, Vec<String>), Usage> {
    let mut o = Options {
        common: Common::new(),
        wait: None,
        side: Side::Exclusive,
        grace: Duration::ZERO,
        quiet: false,
    };
    let mut no_wait = false;
    args.options(|name, value| {
        if o.common.option(name, value)? {
            return Ok(());
        }
        match name {
            "wait" => {
                let secs: f64 = args::number(name, &value()?)?;
                if !secs.is_finite() || secs < 0.0 {
                    return Err(Usage(
                        "--wait must be a non-negative number of seconds".into(),
                    ));
                }
                o.wait = Some(Duration::from_secs_f64(secs));
            }
            "no-wait" => no_wait = true,
            "read" => o.side = Side::Read,
            "write" => o.side = Side::Write,
            "grace" => o.grace = Duration::from_millis(args::number(name, &value()?)?),
            "quiet" => o.quiet = true,
            _ => return Err(Usage(format!("unknown option --{name}"))),
        }
        Ok(())
    })?;
    if no_wait {
        if o.wait.is_some() {
            return Err(Usage("--wait and --no-wait exclude each other".into()));
        }
        o.wait = Some(Duration::ZERO);
    }
    let path = args.positional("LOCK_PATH")?;
    let command = args.command()?;
    args.finish()?;
    Ok((o, path, command))
}

/// Any of the three guards.
enum Guard<'a> {
    Mutex(zklock::MutexGuard<'a>),
    Read(zklock::RwLockReadGuard<'a>),
    Write(zklock::RwLockWriteGuard<'a>),
}

macro_rules! each {
    ($guard:expr, $g:ident => $body:expr) => {
        match $guard {
            Guard::Mutex($g) => $body,
            Guard::Read($g) => $body,
            Guard::Write($g) => $body,
        }
    };
}

enum Lock {
    Mutex(Mutex),
    Rw(RwLock),
}

impl Lock {
    fn acquire(&self, side: Side, wait: Option<Duration>) -> zklock::Result<Option<Guard<'_>>> {
        Ok(match (self, side, wait) {
            (Lock::Mutex(m), _, None) => Some(Guard::Mutex(m.lock()?)),
            (Lock::Mutex(m), _, Some(w)) => m.try_lock_for(w)?.map(Guard::Mutex),
            (Lock::Rw(l), Side::Read, None) => Some(Guard::Read(l.read()?)),
            (Lock::Rw(l), Side::Read, Some(w)) => l.try_read_for(w)?.map(Guard::Read),
            (Lock::Rw(l), _, None) => Some(Guard::Write(l.write()?)),
            (Lock::Rw(l), _, Some(w)) => l.try_write_for(w)?.map(Guard::Write),
        })
    }

    fn cancel(&self) {
        match self {
            Lock::Mutex(m) => m.cancel(),
            Lock::Rw(l) => l.cancel(),
        }
    }
}

pub fn run(mut args: Args) -> Outcome {
    let (options, path, command) = match parse(&mut args) {
        Ok(parsed) => parsed,
        Err(e) => return e.into(),
    };
    let signals = match signal_channel() {
        Ok(rx) => rx,
        Err(e) => return Outcome::Error(format!("cannot install signal handlers: {e}")),
    };
    let client = match connect(&options.common, &signals) {
        Ok(Some(c)) => c,
        Ok(None) => return not_acquired(&options, "interrupted while connecting"),
        Err(outcome) => return outcome,
    };
    let timeout = client
        .negotiated_timeout()
        .unwrap_or(options.common.session_timeout);
    if options.grace > timeout / 6 {
        return Outcome::Usage(format!(
            "--grace must be at most 1/6 of the negotiated session timeout ({} ms)",
            timeout.as_millis() / 6
        ));
    }
    let data = format!("{} cmd={}", host_info(), command.join(" "));
    let lock = match options.side {
        Side::Exclusive => {
            Mutex::new(&client, &path).map(|m| Lock::Mutex(m.with_data(data.clone())))
        }
        _ => RwLock::new(&client, &path).map(|l| Lock::Rw(l.with_data(data.clone()))),
    };
    let lock = match lock {
        Ok(l) => l,
        Err(e) => return e.into(),
    };

    let (done_tx, done_rx) = bounded::<()>(0);
    let (acquired, interrupted) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            select! {
                recv(signals) -> _ => {
                    // `cancel` wakes only a wait already under way: repeat
                    // it until the acquisition has returned.
                    while done_rx.recv_timeout(Duration::from_millis(20))
                        == Err(crossbeam_channel::RecvTimeoutError::Timeout)
                    {
                        lock.cancel();
                    }
                    true
                },
                recv(done_rx) -> _ => false,
            }
        });
        if !options.quiet && options.wait != Some(Duration::ZERO) {
            let client = &client;
            let path = &path;
            let done = done_rx.clone();
            let data = data.clone();
            scope.spawn(move || report_progress(client, path, &data, &done));
        }
        let result = lock.acquire(options.side, options.wait);
        drop(done_tx);
        (result, watcher.join().unwrap_or(true))
    });
    let guard = match acquired {
        Ok(Some(guard)) if interrupted => {
            // The signal came as the lock was acquired: release it unused.
            drop(guard);
            return not_acquired(&options, &format!("interrupted while waiting for {path}"));
        }
        Err(zklock::Error::Cancelled) => {
            return not_acquired(&options, &format!("interrupted while waiting for {path}"));
        }
        Ok(Some(guard)) => guard,
        Ok(None) => {
            return not_acquired(&options, &format!("{path} is held by another process"));
        }
        Err(e) => return e.into(),
    };
    let outcome = run_command(&guard, &command, &signals, timeout, options.grace);
    if !client.state().is_connected() {
        // Cut off from the ensemble (or the session is gone): closing the
        // session would first wait up to the connect timeout for a server,
        // delaying the exit past the session's expiry. Exit without it; the
        // ensemble expires the session and deletes its nodes.
        std::mem::forget(client.clone());
    }
    outcome
}

/// Connects, unless SIGINT or SIGTERM comes first (`Ok(None)`; the
/// connecting thread is abandoned, to end with the process).
fn connect(common: &Common, signals: &Receiver<i32>) -> Result<Option<Client>, Outcome> {
    let (tx, connected) = bounded(1);
    let common = common.clone();
    std::thread::spawn(move || {
        let _ = tx.send(common.client());
    });
    select! {
        recv(connected) -> result => match result {
            Ok(Ok(client)) => Ok(Some(client)),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(Outcome::Error("the connecting thread failed".into())),
        },
        recv(signals) -> _ => Ok(None),
    }
}

/// Exit status 75, saying why unless `--quiet`.
fn not_acquired(options: &Options, why: &str) -> Outcome {
    if !options.quiet {
        eprintln!("zklock: {why}; not running the command");
    }
    Outcome::Exit(EXIT_NOT_ACQUIRED)
}

/// Runs COMMAND while `guard` holds, terminating it as soon as the lock can
/// no longer be relied on.
fn run_command(
    guard: &Guard<'_>,
    command: &[String],
    signals: &Receiver<i32>,
    timeout: Duration,
    grace: Duration,
) -> Outcome {
    let (program, rest) = match command.split_first() {
        Some(split) => split,
        None => return Outcome::Usage("missing COMMAND".into()),
    };
    let token = each!(guard, g => g.fencing_token());
    let node = each!(guard, g => g.node().to_owned());
    let states = each!(guard, g => g.state_changes());
    let initial = each!(guard, g => g.state());
    let token = token.to_string();
    let envs = [
        ("ZKLOCK_FENCING_TOKEN", OsStr::new(&token)),
        ("ZKLOCK_LOCK_NODE", OsStr::new(&node)),
    ];
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
                let release = each!(guard, g => g.state());
                let status = status.ok().and_then(Result::ok);
                if release == LockState::Lost {
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

fn signal_channel() -> std::io::Result<Receiver<i32>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if tx.send(signal).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

fn host_info() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    format!("host={host} pid={}", std::process::id())
}

/// While waiting: our place in the queue and who holds the lock, on stderr,
/// each time it changes (checked once a second).
fn report_progress(client: &Client, path: &str, our_data: &str, done: &Receiver<()>) {
    let mut last = String::new();
    loop {
        if let Ok(queue) = lock_queue(client, path) {
            let ours = queue.iter().position(|e| e.data == our_data.as_bytes());
            let line = match (ours, queue.first()) {
                (Some(0), _) | (_, None) => String::new(),
                (position, Some(holder)) => format!(
                    "zklock: waiting for {path}: {} ahead; held by {} (token {})",
                    position.unwrap_or(queue.len()),
                    String::from_utf8_lossy(&holder.data),
                    holder.fencing_token
                ),
            };
            if !line.is_empty() && line != last {
                eprintln!("{line}");
                last = line;
            }
        }
        if done.recv_timeout(Duration::from_secs(1))
            != Err(crossbeam_channel::RecvTimeoutError::Timeout)
        {
            return;
        }
    }
}
