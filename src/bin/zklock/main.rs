//! `zklock`: run a command under a ZooKeeper lock, list a lock's holders,
//! and benchmark. Errors are one line on stderr with a non-zero exit.
//!
//! Exit statuses (also in the usage text, `zklock --help`):
//!
//! | Status | Meaning |
//! |---|---|
//! | COMMAND's | `exec`: COMMAND ran under the lock and exited with it (128+N if signal N killed it) |
//! | killed by SIGINT | `exec`: a Ctrl-C killed COMMAND, or cancelled the wait (no node left); zklock dies of SIGINT itself, so that a shell script running it stops too |
//! | 0 | `holders`, `bench`: done |
//! | 1 | an error, one line on stderr: unreachable ensemble, invalid path, COMMAND not runnable... |
//! | 2 | bad usage, one line on stderr |
//! | 75 | `exec`: COMMAND did not run: the lock was not acquired (`--no-wait`, `--wait` ran out, or SIGTERM/SIGHUP/SIGQUIT while connecting, waiting or starting COMMAND), or it was no longer held when COMMAND was to start |
//! | 76 | `exec`: the lock was lost while COMMAND ran; COMMAND's process group got SIGTERM, then SIGKILL if any of it was left, before the session could expire |
//! | killed by SIGABRT | `exec`: a bug in zklock (a panic on its main thread) while COMMAND ran: zklock died at once, as if killed with SIGKILL, rather than release the lock |
//!
//! COMMAND's own status can be any number, 1, 2, 75 and 76 included.

/// Writes one line to stderr, through a thread of its own (see [`stderr`]).
/// Unlike `eprintln!`, it can neither panic nor block: with stderr gone or
/// full the line is lost, but zklock carries on, and so does the lock's
/// promise to its command.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::stderr::say(format!($($arg)*))
    };
}

mod args;
mod bench;
mod exec;
mod group;
mod holders;
mod progress;
mod signals;
mod stderr;
mod supervise;
mod tied;
mod watchdog;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use args::{Args, Usage};

/// Exit status for errors (unreachable ensemble, bad path, auth failure...).
const EXIT_ERROR: u8 = 1;
/// Exit status for usage errors.
const EXIT_USAGE: u8 = 2;

const USAGE: &str = "usage:
  zklock exec [--connect HOSTS] [--session-timeout MS] [--wait SECS | --no-wait]
              [--read | --write] [--grace MS] [--acl open|creator]
              [--publish-args] [--quiet]
              LOCK_PATH -- COMMAND [ARGS...]
  zklock holders [--connect HOSTS] [--session-timeout MS] [--json] LOCK_PATH
  zklock bench [--connect HOSTS] [--session-timeout MS]
               --mode uncontended|contended|get|set
               [--clients C] [--ops N] [--path P] [--without-lock]

Every command takes --connect and --session-timeout. --connect defaults to
$ZK_CONNECT, then 127.0.0.1:2181; --session-timeout defaults to 15000 ms (at
most 2147483647): keep it above the servers' syncLimit x tickTime, 10 s in a
stock zoo.cfg. With $ZK_DIGEST set to USER:PASSWORD, the session
authenticates with those digest credentials (kept out of the process list
and of exec's COMMAND's environment), for lock paths whose ACL asks for
them. zklock SUBCOMMAND --help shows this text.

exec runs COMMAND while holding the lock at LOCK_PATH (a fair mutex, or with
--read/--write one side of a read-write lock), with ZKLOCK_FENCING_TOKEN and
ZKLOCK_LOCK_NODE in its environment, in a process group of its own. It waits
for the lock forever, up to --wait SECS, or not at all with --no-wait.
SIGINT, SIGTERM, SIGHUP or SIGQUIT cancels the wait; once COMMAND runs, they
are passed on to its process group (those ignored when zklock starts, as
under nohup, stay ignored), and SIGTSTP stops the group with zklock. The
group is in the terminal's background: a COMMAND that reads from the
terminal or changes its settings (an editor, a pager, a password prompt)
is stopped there, so give it its input by redirection. When COMMAND exits,
the lock is released; what it left running in the background runs on
without it, unless the lock is lost as it exits (then as below).
If the lock can no longer be relied on (the connection was lost for longer
than --grace MS, default 0, at most 1/6 of the session timeout; the session
expired; the lock node was deleted), the group gets SIGTERM, then SIGKILL,
and is gone before the session can expire. The lock node's data names the
host, zklock's pid and COMMAND's program; --publish-args adds its arguments
(readable by anyone who can read LOCK_PATH). The nodes exec creates (the
lock node, and LOCK_PATH and its parents where missing) are open to anyone
(--acl open, the default); with --acl creator, only sessions with the
$ZK_DIGEST credentials may read, use or delete them. --quiet silences the
waiting lines and the reason for status 75; warnings, and the lines of a lock
lost while COMMAND runs, are still printed.

holders lists the holders and the waiters in queue order, with session ids
and fencing tokens. bench prints one JSON line (--without-lock skips the lock
in contended mode, to show that its overlap check works).

exit status:
  COMMAND's  exec: COMMAND's status (128+N if signal N killed it; killed
             by a SIGINT zklock passed on, a Ctrl-C, zklock dies of SIGINT
             too, as after a Ctrl-C that cancels the wait, so that a shell
             script running it stops)
  0          holders, bench: done
  1          an error (unreachable ensemble, invalid path...), one line on stderr
  2          bad usage, one line on stderr
  75         exec: COMMAND did not run: the lock was not acquired (--no-wait,
             --wait ran out, or SIGTERM, SIGHUP or SIGQUIT while connecting,
             waiting or starting COMMAND), or it was no longer held when
             COMMAND was to start
  76         exec: the lock was lost while COMMAND ran; COMMAND was terminated
  SIGABRT    exec: a bug in zklock (a panic) while COMMAND ran: zklock died at
             once, as if killed with SIGKILL, rather than release the lock";

/// The environment variable with the digest credentials (`USER:PASSWORD`).
pub const DIGEST_VAR: &str = "ZK_DIGEST";

/// The longest session timeout the protocol carries: `i32::MAX` ms.
const MAX_SESSION_TIMEOUT_MS: u64 = i32::MAX as u64;

/// The session timeout asked for unless `--session-timeout` says: above a
/// stock `zoo.cfg`'s `syncLimit` × `tickTime` (10 s), under which a member
/// cut off from its leader may answer for a session the leader expires.
const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(15);

/// Settings shared by the subcommands.
#[derive(Clone)]
pub struct Common {
    pub connect: String,
    pub session_timeout: Duration,
    /// Digest credentials from `ZK_DIGEST` (`USER:PASSWORD`): an
    /// environment variable, not an option, so that the password stays out
    /// of the process list.
    digest: Option<(String, String)>,
}

impl Common {
    /// True with digest credentials from `ZK_DIGEST`.
    pub fn has_digest(&self) -> bool {
        self.digest.is_some()
    }

    /// The defaults, with `ZK_CONNECT` and `ZK_DIGEST` from the environment.
    fn from_env() -> Result<Common, Usage> {
        Ok(Common {
            connect: env_utf8("ZK_CONNECT")?.unwrap_or_else(|| "127.0.0.1:2181".into()),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            digest: digest_from_env()?,
        })
    }

    /// Handles `--connect` and `--session-timeout`; false for other options.
    fn option(
        &mut self,
        name: &str,
        value: &mut dyn FnMut() -> Result<String, Usage>,
    ) -> Result<bool, Usage> {
        match name {
            "connect" => self.connect = value()?,
            "session-timeout" => {
                let ms: u64 = args::number(name, &value()?)?;
                if !(1..=MAX_SESSION_TIMEOUT_MS).contains(&ms) {
                    return Err(Usage(format!(
                        "--session-timeout must be from 1 to {MAX_SESSION_TIMEOUT_MS} ms, not {ms}"
                    )));
                }
                self.session_timeout = Duration::from_millis(ms);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn client(&self) -> Result<zklock::Client, zklock::Error> {
        let mut builder = zklock::Client::builder()
            .session_timeout(self.session_timeout)
            .connect_timeout(Duration::from_secs(5));
        if let Some((user, password)) = &self.digest {
            builder = builder.digest(user.as_str(), password.as_str());
        }
        builder.connect(&self.connect)
    }
}

/// The variable `name`, `None` if unset or empty. One that is not UTF-8
/// is a usage error, never taken for unset: `ZK_CONNECT` would fall back
/// to a local ensemble that is not the one meant.
fn env_utf8(name: &str) -> Result<Option<String>, Usage> {
    match std::env::var(name) {
        Ok(value) if value.is_empty() => Ok(None),
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Usage(format!("{name} is not valid UTF-8"))),
    }
}

/// `ZK_DIGEST`, split at its first `:`; `None` if unset or empty. The
/// errors never show the value, which holds a password.
fn digest_from_env() -> Result<Option<(String, String)>, Usage> {
    let Some(value) = env_utf8(DIGEST_VAR)? else {
        return Ok(None);
    };
    match value.split_once(':') {
        Some((user, password)) if !user.is_empty() => {
            Ok(Some((user.to_owned(), password.to_owned())))
        }
        _ => Err(Usage(
            "ZK_DIGEST must be USER:PASSWORD, with a user name before the first ':'".into(),
        )),
    }
}

/// Why the process ends: a status, or an error line.
pub enum Outcome {
    Exit(u8),
    /// Dies of this signal, once everything else is done. After a Ctrl-C
    /// (a SIGINT that cancelled the wait, or killed the command), as GNU
    /// `timeout` does: a shell that ran zklock then stops too (bash, for
    /// one, goes on with a script whose child exited normally, taking it
    /// that the child handled the signal). The status a shell shows is the
    /// same 128+N.
    Signal(nix::sys::signal::Signal),
    Usage(String),
    Error(String),
}

impl Outcome {
    /// zklock could not start a thread it needs (the process limit
    /// reached): its own error, said as such.
    pub fn no_thread(e: std::io::Error) -> Outcome {
        Outcome::Error(format!("cannot start a thread: {e}"))
    }
}

impl From<Usage> for Outcome {
    fn from(u: Usage) -> Outcome {
        Outcome::Usage(u.0)
    }
}

impl From<zklock::Error> for Outcome {
    fn from(e: zklock::Error) -> Outcome {
        match e {
            // The likeliest fix, named where the user looks.
            zklock::Error::NoAuth => Outcome::Error(
                "not authorized by the lock path's ACL (ZK_DIGEST=USER:PASSWORD sets digest \
                 credentials)"
                    .into(),
            ),
            e => Outcome::Error(e.to_string()),
        }
    }
}

/// How long the lines still queued for stderr may hold up the exit.
const STDERR_FLUSH: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    die_at_once_on_panic_under_the_lock();
    // Started before anything can need it: a writer thread that could not
    // be started later (the command's threads having used up the user's
    // process limit) would leave lines to block the thread saying them.
    stderr::start();
    let outcome = match arguments() {
        Ok(argv) => dispatch(argv),
        Err(outcome) => outcome,
    };
    let code = match outcome {
        Outcome::Exit(code) => ExitCode::from(code),
        Outcome::Signal(signal) => {
            stderr::flush(STDERR_FLUSH);
            let _ = signal_hook::low_level::emulate_default_handler(signal as i32);
            // Still here: the signal did not end the process.
            ExitCode::from(u8::try_from(128 + signal as i32).unwrap_or(EXIT_ERROR))
        }
        Outcome::Usage(message) => {
            say!("zklock: {message} (zklock --help shows the usage)");
            ExitCode::from(EXIT_USAGE)
        }
        Outcome::Error(message) => {
            say!("zklock: {message}");
            ExitCode::from(EXIT_ERROR)
        }
    };
    stderr::flush(STDERR_FLUSH);
    code
}

/// A panic (a bug) on the main thread while the command runs aborts the
/// process: unwinding would drop the lock's guard, releasing the lock while
/// the command still runs, then wait to close the session. Dying at once
/// acts as a SIGKILL of zklock: the parent-death signal and the watchdog
/// kill the command's group, and the node goes with the session. Other
/// panics unwind as they did: another thread's is contained where it is
/// caught (the client's I/O thread's ends the session, and the command is
/// stopped as for any loss of the lock), and with no command running a
/// release harms no one.
fn die_at_once_on_panic_under_the_lock() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let main = std::thread::current().name() == Some("main");
        if !(main && supervise::command_runs()) {
            return report(info);
        }
        // Through the writer thread, for a moment at most: a stderr nobody
        // reads must not keep zklock from dying.
        let what = info.to_string().replace('\n', " ");
        say!("zklock: bug: {what}; dying at once, the lock not released");
        stderr::flush(PANIC_FLUSH);
        std::process::abort();
    }));
}

/// How long a panic's line may take to reach stderr before zklock dies.
const PANIC_FLUSH: Duration = Duration::from_millis(500);

/// The arguments after the program's name. `std::env::args` would panic
/// on one that is not UTF-8; this makes it a usage error.
fn arguments() -> Result<Vec<String>, Outcome> {
    std::env::args_os()
        .skip(1)
        .map(|arg| {
            arg.into_string()
                .map_err(|bad| Outcome::Usage(format!("argument {bad:?} is not valid UTF-8")))
        })
        .collect()
}

fn dispatch(argv: Vec<String>) -> Outcome {
    let mut argv = argv.into_iter();
    let command = argv.next();
    let rest: Vec<String> = argv.collect();
    match command.as_deref() {
        Some("exec" | "holders" | "bench") if asks_for_help(&rest) => print(&format!("{USAGE}\n")),
        Some("exec") => exec::run(Args::new(rest)),
        Some("holders") => holders::run(Args::new(rest)),
        Some("bench") => bench::run(Args::new(rest)),
        Some("-h" | "--help" | "help") => print(&format!("{USAGE}\n")),
        Some(other) => Outcome::Usage(format!("unknown command {other:?}")),
        None => Outcome::Usage("missing command".into()),
    }
}

/// True if a subcommand's options ask for the usage: `zklock exec --help`
/// should show it, not call `--help` an unknown option. What follows `--`
/// is COMMAND's, whose own `--help` is not ours.
fn asks_for_help(args: &[String]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h")
}

/// Writes `text` to stdout: done (status 0), or an error if stdout is gone
/// (where `println!` would panic).
pub fn print(text: &str) -> Outcome {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Outcome::Exit(0),
        Err(e) => Outcome::Error(format!("cannot write to stdout: {e}")),
    }
}
