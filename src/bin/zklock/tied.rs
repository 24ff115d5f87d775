//! Starting `exec`'s command so that it cannot outlive `zklock`.
//!
//! `zklock exec` terminates its command before letting go of the lock, but
//! a SIGKILL gives it no chance to. The command would then run on, and once
//! the session expires another contender's command would run beside it. So
//! the command is started under `setpriv --pdeathsig KILL` (util-linux
//! 2.33+), which asks the kernel to kill it when this process's main thread
//! ends, then runs it in its place (same pid, same arguments). Only the
//! command itself gets that signal (its descendants in its group are left
//! to the `watchdog`), and the kernel clears it when the command execs a
//! setuid or setgid program.
//!
//! The command leads a process group of its own (setpriv execs in place,
//! so the group id is the command's pid): see `group`.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crossbeam_channel::{after, bounded, select, Receiver, Sender};
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::{eaccess, AccessFlags, Pid};
use zklock::LockState;

use crate::DIGEST_VAR;

/// The util-linux tool that sets the parent-death signal, then execs.
const SETPRIV: &str = "setpriv";

/// How long setpriv's check of itself may take. One that takes longer is
/// given up, as a setpriv that cannot set the signal is: the lock is held
/// meanwhile, and the wait should not depend on a tool's whims.
const CHECK_LIMIT: Duration = Duration::from_secs(10);

/// How long a check given up on may take to die once sent SIGKILL.
const KILLED_WAIT: Duration = Duration::from_secs(5);

/// Where `execvp` looks for a command when `PATH` is unset (glibc and musl
/// agree).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// How `program` is to be started, tied to this process's life where
/// `setpriv` can do it: found out before it is started, so that a signal
/// that comes meanwhile (setpriv's check takes a moment) can still keep it
/// from starting.
pub struct Launcher {
    command: Command,
    wrapper: Option<String>,
}

/// Why there is no [`Launcher`]: the command is not to start, and the
/// check of setpriv was ended for it.
pub enum Stopped {
    /// An ending signal came.
    Interrupted,
    /// The lock was lost: the command would only be started to be
    /// terminated at once.
    Lost,
    /// No thread could be started (the process limit reached): zklock's
    /// own failure, not setpriv's.
    NoThread(io::Error),
}

impl Launcher {
    /// For the program at `resolved` (see [`resolve`]): finds whether
    /// setpriv can tie it to this process, unless one of `signals` comes
    /// first, or `states` reports the lock lost.
    pub fn new(
        resolved: PathBuf,
        signals: &Receiver<Signal>,
        states: &Receiver<LockState>,
    ) -> Result<Launcher, Stopped> {
        Ok(match setpriv(signals, states)? {
            Some(setpriv) => {
                let wrapper = comm_of(&setpriv).filter(|w| comm_of(&resolved).as_ref() != Some(w));
                let mut command = Command::new(setpriv);
                command.args(["--pdeathsig", "KILL", "--"]).arg(&resolved);
                Launcher { command, wrapper }
            }
            None => Launcher {
                command: Command::new(&resolved),
                wrapper: None,
            },
        })
    }

    /// Spawns the program with `args` and `envs`, without `ZK_DIGEST`, as
    /// the leader of a new process group. Must be called on the main
    /// thread: the kernel sends the parent-death signal when the thread
    /// that spawned the child ends.
    pub fn spawn<'a>(
        mut self,
        args: &[String],
        envs: impl IntoIterator<Item = (&'a str, &'a OsStr)>,
    ) -> io::Result<(Child, Tied)> {
        let child = self
            .command
            .args(args)
            // zklock's password is not the command's business (a script
            // that logs its environment, say).
            .env_remove(DIGEST_VAR)
            .envs(envs)
            .process_group(0)
            .spawn()?;
        Ok((
            child,
            Tied {
                wrapper: self.wrapper,
            },
        ))
    }
}

/// How the command was started.
pub struct Tied {
    /// The name (`/proc/PID/comm`) the process has until setpriv has
    /// exec'd the command; `None` when started directly (or when the
    /// command's name is the same).
    wrapper: Option<String>,
}

/// setpriv's exit statuses when it cannot execute the command
/// (util-linux's `EX_EXEC_FAILED`, `EX_EXEC_ENOENT`).
const SETPRIV_EXEC_FAILED: [i32; 2] = [126, 127];

impl Tied {
    /// Whether setpriv is still what runs as the command's process, which
    /// has exited (unreaped, a zombie keeps its name): it never exec'd the
    /// command. Either it could not (a missing interpreter, say; it said
    /// why on stderr), or a signal ended it first.
    pub fn exec_failed(&self, pid: u32) -> bool {
        self.wrapper.as_ref().is_some_and(|wrapper| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim_end_matches('\n') == wrapper)
        })
    }

    /// Whether `status` is setpriv's for a command it could not execute.
    pub fn is_exec_failure(status: std::process::ExitStatus) -> bool {
        status
            .code()
            .is_some_and(|code| SETPRIV_EXEC_FAILED.contains(&code))
    }
}

/// The name the kernel gives a process running `path`: its file name, cut
/// to 15 bytes.
fn comm_of(path: &std::path::Path) -> Option<String> {
    let name = path.file_name()?.as_encoded_bytes();
    Some(String::from_utf8_lossy(name.get(..15).unwrap_or(name)).into_owned())
}

/// `setpriv`, if it can set the parent-death signal. Otherwise says why
/// (once: each `zklock exec` starts one command) and returns `None`, and
/// the command is started directly. A setpriv older than 2.33 rejects
/// `--pdeathsig`: trusted blindly, it would run nothing, every time. One of
/// `signals`, or the lock's loss in `states`, ends the check, and the
/// command is not to start.
fn setpriv(
    signals: &Receiver<Signal>,
    states: &Receiver<LockState>,
) -> Result<Option<PathBuf>, Stopped> {
    let Ok(setpriv) = resolve(SETPRIV) else {
        warn(&format!("{SETPRIV} not found"));
        return Ok(None);
    };
    let cannot_run = |e: io::Error| {
        warn(&format!("{} cannot run: {e}", setpriv.display()));
        Ok(None)
    };
    let exit_watch = ExitWatch::start().map_err(Stopped::NoThread)?;
    // In a process group of its own, like the command: a Ctrl-C meant for
    // zklock would otherwise end the check too, and pass for its failure.
    let probe = Command::new(&setpriv)
        .args(["--pdeathsig", "KILL", "--"])
        .arg(resolve("true").unwrap_or_else(|_| "true".into()))
        .process_group(0)
        .env_remove(DIGEST_VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut probe = match probe {
        Ok(probe) => probe,
        Err(e) => return cannot_run(e),
    };
    let exited = match i32::try_from(probe.id()) {
        Ok(pid) => exit_watch.watch(Pid::from_raw(pid)),
        // Never so on Linux; waited for without a limit.
        Err(_) => bounded(0).1,
    };
    // Not reaped if SIGKILL does not end it in time (a process in an
    // uninterruptible sleep dies only when it wakes): left a zombie then,
    // but zklock goes on.
    let mut end_probe = || {
        let _ = probe.kill();
        if exited.recv_timeout(KILLED_WAIT).is_ok() {
            let _ = probe.wait();
        }
    };
    let limit = after(CHECK_LIMIT);
    loop {
        select! {
            recv(exited) -> _ => break,
            recv(signals) -> _ => {
                end_probe();
                return Err(Stopped::Interrupted);
            }
            // Held or suspended, the check goes on: a suspension may end in
            // a reconnect, and what it is when the command is to start is
            // looked at then.
            recv(states) -> state => if matches!(state, Ok(LockState::Lost) | Err(_)) {
                end_probe();
                return Err(Stopped::Lost);
            },
            // A check that has ended after all counts: when a stop of zklock
            // outlasts the limit, both are ready at once.
            recv(limit) -> _ => {
                if exited.try_recv().is_ok() {
                    break;
                }
                end_probe();
                warn(&format!(
                    "{} did not finish its check within {} s",
                    setpriv.display(),
                    CHECK_LIMIT.as_secs()
                ));
                return Ok(None);
            }
        }
    }
    match probe.wait() {
        Ok(status) if status.success() => Ok(Some(setpriv)),
        Ok(_) => {
            warn(&format!(
                "{} cannot set a parent-death signal (util-linux 2.33 or later can)",
                setpriv.display()
            ));
            Ok(None)
        }
        Err(e) => cannot_run(e),
    }
}

/// Tells when a child has exited, without reaping it: until it is reaped,
/// its pid cannot be reused, and it (or its group) may still be signalled
/// safely. Its thread is started before the command is (see
/// [`ExitWatch::start`]).
pub struct ExitWatch {
    pid: Sender<Pid>,
    exited: Receiver<()>,
}

impl ExitWatch {
    /// Starts the thread that will wait for the command: before the
    /// command starts, since one that reaches the process limit (a
    /// container's `pids.max`, `ulimit -u`) would leave no thread to start
    /// once it runs, and zklock could not tell when it exits.
    pub fn start() -> io::Result<ExitWatch> {
        let (pid, to_watch) = bounded::<Pid>(1);
        let (tx, exited) = bounded(1);
        std::thread::Builder::new()
            .name("zklock-exit".into())
            .spawn(move || {
                // No pid: the command did not start.
                let Ok(pid) = to_watch.recv() else {
                    return;
                };
                while let Err(Errno::EINTR) =
                    waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
                {
                }
                let _ = tx.send(());
            })?;
        Ok(ExitWatch { pid, exited })
    }

    /// Watches `pid`, a child: the receiver gets a message once it exits.
    pub fn watch(self, pid: Pid) -> Receiver<()> {
        let _ = self.pid.send(pid);
        self.exited
    }
}

fn warn(why: &str) {
    say!(
        "zklock: warning: {why}; if zklock is killed with SIGKILL, \
         only its watchdog stops the command"
    );
}

/// Where `program` is, looked up in `PATH` as `execvp` does when it has no
/// `/`: the first file of that name that this process may execute. A file
/// with execute bits only for others (or one an ACL denies) is passed over,
/// as execvp passes over what `execve` refuses with `EACCES`.
pub fn resolve(program: &str) -> io::Result<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if is_executable_file(&path)? {
            Ok(path)
        } else {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not an executable file",
            ))
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| OsString::from(DEFAULT_PATH));
    for dir in std::env::split_paths(&search) {
        let candidate = dir.join(program);
        if is_executable_file(&candidate).unwrap_or(false) {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "no executable of that name in PATH",
    ))
}

fn is_executable_file(path: &std::path::Path) -> io::Result<bool> {
    let meta = std::fs::metadata(path)?;
    // The kernel's check with the effective ids, as `execve` makes it: the
    // mode bits alone would take a file only others may execute for one
    // this process may.
    Ok(meta.is_file() && eaccess(path, AccessFlags::X_OK).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_execvp() {
        assert!(resolve("sh").unwrap().ends_with("sh"));
        assert_eq!(
            resolve("/nonexistent/command").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            resolve("no-such-command-zklock").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // A directory is no command.
        assert_eq!(
            resolve("/").unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
    }
}
