//! `zklock exec`: run a command while holding a lock.
//!
//! The lock is acquired here; `supervise` runs the command and terminates
//! it when the lock can no longer be relied on.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, select, Receiver};
use nix::sys::signal::Signal;
use zklock::{Client, Mutex, RwLock};

use crate::args::{self, Args, Usage};
use crate::group::Group;
use crate::supervise::{self, Watch};
use crate::{progress, signals};
use crate::{Common, Outcome};

/// The lock was not acquired; COMMAND did not run.
const EXIT_NOT_ACQUIRED: u8 = 75;

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
                let given = value()?;
                let secs: f64 = args::number(name, &given)?;
                // Also refuses NaN, infinities and negative numbers.
                let wait = Duration::try_from_secs_f64(secs).map_err(|_| {
                    Usage(format!(
                        "--wait must be from 0 to {} seconds, not {given}",
                        u64::MAX
                    ))
                })?;
                o.wait = Some(wait);
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
    // Checked again against the negotiated timeout once connected; this
    // catches what is wrong whatever the server says, before connecting.
    check_grace(o.grace, o.common.session_timeout, "")?;
    let path = args.positional("LOCK_PATH")?;
    let command = args.command()?;
    args.finish()?;
    Ok((o, path, command))
}

/// `--grace` G must be at most T/6 for COMMAND to be gone before the
/// session can expire (see `supervise`).
fn check_grace(grace: Duration, timeout: Duration, which: &str) -> Result<(), Usage> {
    if grace > timeout / 6 {
        return Err(Usage(format!(
            "--grace must be at most 1/6 of the {which}session timeout ({} ms)",
            timeout.as_millis() / 6
        )));
    }
    Ok(())
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
    let group = Arc::new(Group::default());
    let signals = match signals::install(group.clone()) {
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
    if let Err(e) = check_grace(options.grace, timeout, "negotiated ") {
        return e.into();
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
            let (client, path) = (&client, &path);
            let done = done_rx.clone();
            scope.spawn(move || progress::report(client, path, &done));
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
    let outcome = run_command(&guard, &command, signals, group, timeout, options.grace);
    if !client.state().is_connected() {
        // Cut off from the ensemble (or the session is gone): closing the
        // session would first wait up to the connect timeout for a server,
        // delaying the exit past the session's expiry. Exit without it; the
        // ensemble expires the session and deletes its nodes.
        std::mem::forget(client.clone());
    }
    outcome
}

/// Connects, unless a signal comes first (`Ok(None)`; the
/// connecting thread is abandoned, to end with the process).
fn connect(common: &Common, signals: &Receiver<Signal>) -> Result<Option<Client>, Outcome> {
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
        say!("zklock: {why}; not running the command");
    }
    Outcome::Exit(EXIT_NOT_ACQUIRED)
}

/// Runs COMMAND while `guard` holds, terminating it as soon as the lock can
/// no longer be relied on.
fn run_command(
    guard: &Guard<'_>,
    command: &[String],
    signals: Receiver<Signal>,
    group: Arc<Group>,
    timeout: Duration,
    grace: Duration,
) -> Outcome {
    let token = each!(guard, g => g.fencing_token());
    let node = each!(guard, g => g.node().to_owned());
    let states = each!(guard, g => g.state_changes());
    let initial = each!(guard, g => g.state());
    let token = token.to_string();
    let envs = [
        ("ZKLOCK_FENCING_TOKEN", OsStr::new(&token)),
        ("ZKLOCK_LOCK_NODE", OsStr::new(&node)),
    ];
    let watch = Watch {
        states,
        signals,
        group,
    };
    supervise::run(command, envs, initial, watch, timeout, grace)
}

fn host_info() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    format!("host={host} pid={}", std::process::id())
}
