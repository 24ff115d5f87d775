//! `zklock exec`: run a command while holding a lock.
//!
//! The lock is acquired here; `supervise` runs the command and terminates
//! it when the lock can no longer be relied on.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, select, Receiver};
use nix::sys::signal::Signal;
use zklock::{Acl, AnyGuard, Client, LockMonitor, LockState, Mutex, RwLock, StateChanges};

use crate::args::{self, Args, Usage};
use crate::group::Group;
use crate::supervise::{self, not_held, Ran, Settled, Settler, Watch};
use crate::{progress, signals, tied};
use crate::{Common, Outcome, DIGEST_VAR};

/// COMMAND did not run: the lock was not acquired, or no longer held when
/// COMMAND was to start.
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
    publish_args: bool,
    quiet: bool,
    /// The ACL of the nodes zklock creates: the lock node, and the lock
    /// directory and its parents where missing.
    acl: Vec<Acl>,
}

fn parse(args: &mut Args) -> Result<(Options, String, Vec<String>), Usage> {
    let mut o = Options {
        common: Common::from_env()?,
        wait: None,
        side: Side::Exclusive,
        grace: Duration::ZERO,
        publish_args: false,
        quiet: false,
        acl: Acl::open_unsafe(),
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
            "read" | "write" => {
                let side = if name == "read" {
                    Side::Read
                } else {
                    Side::Write
                };
                // `--read --write` taken as the last one would run a
                // writer for a user who also asked for a reader.
                if o.side != Side::Exclusive && o.side != side {
                    return Err(Usage("--read and --write exclude each other".into()));
                }
                o.side = side;
            }
            "grace" => o.grace = Duration::from_millis(args::number(name, &value()?)?),
            "publish-args" => o.publish_args = true,
            "quiet" => o.quiet = true,
            "acl" => {
                o.acl = match value()?.as_str() {
                    "open" => Acl::open_unsafe(),
                    "creator" => Acl::creator_all(),
                    other => {
                        return Err(Usage(format!(
                            "--acl must be open or creator, not {other:?}"
                        )))
                    }
                }
            }
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
    // The server would refuse it (InvalidACL) once connected: an `auth` ACL
    // needs credentials to name.
    if o.acl == Acl::creator_all() && !o.common.has_digest() {
        return Err(Usage(format!(
            "--acl creator needs ${DIGEST_VAR}: the credentials whose holders alone may use the lock"
        )));
    }
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

enum Lock {
    Mutex(Mutex),
    Rw(RwLock),
}

impl Lock {
    fn new(
        client: &Client,
        path: &str,
        side: Side,
        data: String,
        acl: Vec<Acl>,
    ) -> zklock::Result<Lock> {
        Ok(match side {
            Side::Exclusive => Lock::Mutex(Mutex::new(client, path)?.with_data(data).with_acl(acl)),
            _ => Lock::Rw(RwLock::new(client, path)?.with_data(data).with_acl(acl)),
        })
    }

    fn acquire(&self, side: Side, wait: Option<Duration>) -> zklock::Result<Option<AnyGuard<'_>>> {
        Ok(match (self, side, wait) {
            (Lock::Mutex(m), _, None) => Some(m.lock()?.into()),
            (Lock::Mutex(m), _, Some(w)) => m.try_lock_for(w)?.map(AnyGuard::from),
            (Lock::Rw(l), Side::Read, None) => Some(l.read()?.into()),
            (Lock::Rw(l), Side::Read, Some(w)) => l.try_read_for(w)?.map(AnyGuard::from),
            (Lock::Rw(l), _, None) => Some(l.write()?.into()),
            (Lock::Rw(l), _, Some(w)) => l.try_write_for(w)?.map(AnyGuard::from),
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
    // Found before the lock is asked for: a missing command would only
    // wait for the lock to give it back. Reported as missing, not as
    // setpriv's failure to run it.
    let Some(program) = command.first() else {
        return Outcome::Usage("missing COMMAND".into());
    };
    let resolved = match tied::resolve(program) {
        Ok(resolved) => resolved,
        Err(e) => return Outcome::Error(format!("cannot run {program:?}: {e}")),
    };
    let group = Arc::new(Group::default());
    let (signals, resumed) = match signals::install(group.clone()) {
        Ok(received) => (received.ending, received.resumed),
        Err(e) => return Outcome::Error(format!("cannot install signal handlers: {e}")),
    };
    let client = match connect(&options.common, &signals) {
        Ok(Some(c)) => c,
        Ok(None) => return not_acquired_on_signal(&options, "interrupted while connecting"),
        Err(outcome) => return outcome,
    };
    let _session = EndSession(client.clone());
    let timeout = client
        .negotiated_timeout()
        .unwrap_or(options.common.session_timeout);
    if let Err(e) = check_grace(options.grace, timeout, "negotiated ") {
        return e.into();
    }
    let lock = match Lock::new(
        &client,
        &path,
        options.side,
        node_data(&command, &options),
        options.acl.clone(),
    ) {
        Ok(l) => l,
        Err(e) => return e.into(),
    };
    let stops_before_grant = group.stop_count();
    let guard = match acquire(&lock, &client, &path, &options, &signals) {
        Ok(guard) => guard,
        Err(outcome) => return outcome,
    };
    // Subscribed before the state is read in `prepare`: no later change
    // goes unseen.
    let states = guard.state_changes();
    let monitor = guard.monitor();
    let mut settler = Settler::new(options.quiet);
    let token = match prepare(monitor.clone(), &states, &signals, &mut settler) {
        Ready::Held(token) => token,
        Ready::NotHeld(why) => {
            return not_acquired(&options, &format!("{why} before the command could start"))
        }
        Ready::Interrupted => {
            return not_acquired_on_signal(&options, "interrupted before the command could start")
        }
        Ready::NoThread(e) => return Outcome::no_thread(e),
    };
    let node = guard.node().to_owned();
    let token = token.to_string();
    let envs = [
        ("ZKLOCK_FENCING_TOKEN", OsStr::new(&token)),
        ("ZKLOCK_LOCK_NODE", OsStr::new(&node)),
    ];
    let watch = Watch {
        client: client.clone(),
        states,
        monitor,
        signals,
        resumed,
        group,
        stops_before_grant,
        settler,
    };
    match supervise::run(&command, resolved, envs, watch, timeout, options.grace) {
        Ran::Exit(outcome) => outcome,
        Ran::InterruptedBeforeStart => {
            not_acquired_on_signal(&options, "interrupted before the command could start")
        }
        Ran::NotHeldBeforeStart(why) => {
            not_acquired(&options, &format!("{why} before the command could start"))
        }
        Ran::NotHeldAfterStop => not_acquired(
            &options,
            "the lock could not be confirmed after zklock was stopped, before the command could start",
        ),
    }
}

/// Waits for the lock, with the progress lines, until a signal cancels.
fn acquire<'a>(
    lock: &'a Lock,
    client: &Client,
    path: &str,
    options: &Options,
    signals: &Receiver<Signal>,
) -> Result<AnyGuard<'a>, Outcome> {
    let (done_tx, done_rx) = bounded::<()>(0);
    let waited = std::thread::scope(|scope| {
        let watcher = std::thread::Builder::new().spawn_scoped(scope, || {
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
        let watcher = match watcher {
            Ok(watcher) => watcher,
            Err(e) => return Err(Outcome::no_thread(e)),
        };
        let reporting = progress::Reporting::new();
        if !options.quiet && options.wait != Some(Duration::ZERO) {
            progress::start(client.clone(), path.to_owned(), reporting.clone());
        }
        let result = lock.acquire(options.side, options.wait);
        reporting.end();
        drop(done_tx);
        Ok((result, watcher.join().unwrap_or(true)))
    });
    let (acquired, interrupted) = waited?;
    let interrupted_why = format!("interrupted while waiting for {path}");
    match acquired {
        Ok(Some(guard)) if interrupted => {
            // The signal came as the lock was acquired: release it unused.
            drop(guard);
            Err(not_acquired_on_signal(options, &interrupted_why))
        }
        Ok(Some(guard)) => Ok(guard),
        // Whatever ended the wait as the signal came (its `cancel`, or a
        // `--wait` running out), the signal is what zklock answers. Only
        // the signal watcher cancels, so `Cancelled` always lands here.
        _ if interrupted => Err(not_acquired_on_signal(options, &interrupted_why)),
        // A read waits only for writers: the readers holding it may be
        // behind a writer that is waiting.
        Ok(None) if options.side == Side::Read => Err(not_acquired(
            options,
            &format!("{path} is held or waited for by a writer"),
        )),
        Ok(None) => Err(not_acquired(
            options,
            &format!("{path} is held by another process"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Whether COMMAND may start.
enum Ready {
    /// The lock is held; its fencing token.
    Held(i64),
    /// Why not.
    NotHeld(&'static str),
    Interrupted,
    /// No thread could be started to ask (the process limit reached).
    NoThread(std::io::Error),
}

/// Checks that the lock is still held just before COMMAND starts (waiting
/// out a suspension: see [`Settler::settle`]), and gets its fencing
/// token. Either may need a round trip, and the token, through a lost
/// connection, waits for a reconnect until the session expires: so they
/// are asked on a thread of their own, through the guard's monitor, while
/// this one watches for signals. A signal leaves that thread behind; the
/// session ends with the process (`EndSession`).
fn prepare(
    monitor: LockMonitor,
    states: &StateChanges<LockState>,
    signals: &Receiver<Signal>,
    settler: &mut Settler,
) -> Ready {
    let (tx, rx) = bounded(1);
    let asked = std::thread::Builder::new().spawn(move || {
        let token = monitor.fencing_token();
        let _ = tx.send((token, monitor.state()));
    });
    if let Err(e) = asked {
        return Ready::NoThread(e);
    }
    select! {
        recv(rx) -> ready => match ready {
            Ok((token, state)) if token != 0 => match settler.settle(state, states, signals) {
                Settled::Held => Ready::Held(token),
                Settled::NotHeld(why) => Ready::NotHeld(why),
                Settled::Interrupted => Ready::Interrupted,
            },
            Ok((_, state)) => Ready::NotHeld(not_held(state).unwrap_or("the lock was lost")),
            Err(_) => Ready::NotHeld("the lock was lost"),
        },
        recv(signals) -> _ => Ready::Interrupted,
    }
}

/// Connects, unless a signal comes first (`Ok(None)`; the connecting
/// thread is abandoned, to end with the process).
fn connect(common: &Common, signals: &Receiver<Signal>) -> Result<Option<Client>, Outcome> {
    let (tx, connected) = bounded(1);
    let common = common.clone();
    std::thread::Builder::new()
        .spawn(move || {
            let _ = tx.send(common.client());
        })
        .map_err(Outcome::no_thread)?;
    select! {
        recv(connected) -> result => match result {
            Ok(Ok(client)) => Ok(Some(client)),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(Outcome::Error("the connecting thread failed".into())),
        },
        recv(signals) -> _ => Ok(None),
    }
}

/// Ends the session when `exec` ends, so that the lock node goes at once.
/// Not when cut off from the ensemble (or the session is gone): closing
/// would first wait up to the connect timeout for a server, delaying the
/// exit past the session's expiry. The ensemble expires the session and
/// deletes its nodes.
struct EndSession(Client);

impl Drop for EndSession {
    fn drop(&mut self) {
        if self.0.state().is_connected() {
            let _ = self.0.close();
        } else {
            // The last handle's drop would close it.
            std::mem::forget(self.0.clone());
        }
    }
}

/// [`not_acquired`] for a signal's cancel: after a SIGINT, zklock dies of
/// it instead of exiting 75 (see `Outcome::Signal`).
fn not_acquired_on_signal(options: &Options, why: &str) -> Outcome {
    let not_acquired = not_acquired(options, why);
    match signals::first_ending() {
        Some(Signal::SIGINT) => Outcome::Signal(Signal::SIGINT),
        _ => not_acquired,
    }
}

/// Exit status 75, saying why unless `--quiet`.
fn not_acquired(options: &Options, why: &str) -> Outcome {
    if !options.quiet {
        say!("zklock: {why}; not running the command");
    }
    Outcome::Exit(EXIT_NOT_ACQUIRED)
}

/// The lock node's data, for `holders` and the progress lines: the host,
/// zklock's pid and COMMAND's program. Not its arguments unless asked:
/// the node is readable by anyone who can read the lock path (the default
/// ACL is open), and arguments may carry secrets.
fn node_data(command: &[String], options: &Options) -> String {
    let host = zklock::recipes::host_name();
    let shown = if options.publish_args {
        command.join(" ")
    } else {
        command.first().cloned().unwrap_or_default()
    };
    format!("host={host} pid={} cmd={shown}", std::process::id())
}
