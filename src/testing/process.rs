//! One ZooKeeper JVM: spawning, signals, stopping, and a watchdog that kills
//! it if the test process dies first.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::util::{log_tail, JavaSetup};
use super::Error;

/// JVM options that make a small server start fast.
const JVM_OPTIONS: &[&str] = &[
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:-UsePerfData",
    "-Djava.net.preferIPv4Stack=true",
    "-Djava.awt.headless=true",
];

/// How long pause and resume wait for the threads to change state.
const THREAD_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// System properties every server gets, before the user's (later ones win).
const BASE_PROPERTIES: &[(&str, &str)] = &[
    // slf4j-simple: timestamps, and INFO and above.
    ("org.slf4j.simpleLogger.showDateTime", "true"),
    ("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS"),
    ("org.slf4j.simpleLogger.defaultLogLevel", "info"),
    ("zookeeper.jmx.log4j.disable", "true"),
    // No fsync, and a small preallocated transaction log (in KiB).
    ("zookeeper.forceSync", "no"),
    ("zookeeper.preAllocSize", "1024"),
    // Election connections to a dead or paused peer give up sooner.
    ("zookeeper.cnxTimeout", "1000"),
];

/// The watchdog: waits for its stdin to close (the test process holds the
/// only write end, so this happens when it exits in any way), then kills the
/// JVM and removes the temp dir. A normal teardown kills the watchdog once
/// the JVM is reaped.
/// It ignores the signals a whole process group gets when a run is stopped
/// (Ctrl-C, a CI job's SIGTERM): a paused JVM would not act on its own.
const WATCHDOG_SCRIPT: &str = r#"trap '' INT HUP TERM QUIT
read _ignored
kill -9 "$1" 2>/dev/null
i=0
while kill -0 "$1" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.05; i=$((i+1)); done
rm -rf "$2"
"#;

/// How a JVM is launched.
pub(crate) struct Launch<'a> {
    /// java and the classpath.
    pub(crate) setup: &'a JavaSetup,
    /// `ZooKeeperServerMain` or `QuorumPeerMain`.
    pub(crate) main_class: &'a str,
    /// The zoo.cfg path.
    pub(crate) config: &'a Path,
    /// Where stdout and stderr go (appended to).
    pub(crate) log: &'a Path,
    /// `-D` system properties, after the built-in ones.
    pub(crate) properties: &'a [(String, String)],
    /// The temp dir the watchdog removes if the test process dies.
    pub(crate) cleanup_dir: &'a Path,
}

/// A running (or exited, not yet restarted) server JVM.
#[derive(Debug)]
pub(crate) struct JvmProcess {
    child: Child,
    /// The watchdog and the write end of its stdin.
    watchdog: Option<(Child, ChildStdin)>,
    paused: bool,
    log: PathBuf,
    /// Set once the child has been reaped.
    exited: Option<String>,
}

impl JvmProcess {
    /// Spawns the JVM and its watchdog.
    pub(crate) fn spawn(launch: &Launch<'_>) -> Result<JvmProcess, Error> {
        let log = open_log(launch.log)?;
        let mut header = log
            .try_clone()
            .map_err(|e| Error::io("duplicate the log file handle", e))?;
        let _ = writeln!(
            header,
            "=== zklock::testing: starting {} {} ===",
            launch.main_class,
            launch.config.display()
        );
        let stderr = log
            .try_clone()
            .map_err(|e| Error::io("duplicate the log file handle", e))?;
        let mut command = Command::new(&launch.setup.java);
        command.args(JVM_OPTIONS);
        for (key, value) in BASE_PROPERTIES {
            command.arg(format!("-D{key}={value}"));
        }
        for (key, value) in launch.properties {
            command.arg(format!("-D{key}={value}"));
        }
        command
            .arg("-cp")
            .arg(&launch.setup.classpath)
            .arg(launch.main_class)
            .arg(launch.config)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(stderr));
        if let Some(dir) = launch.config.parent() {
            command.current_dir(dir);
        }
        let child = command.spawn().map_err(|e| {
            Error::io(
                format!(
                    "start {} ({})",
                    launch.main_class,
                    launch.setup.java.display()
                ),
                e,
            )
        })?;
        let mut process = JvmProcess {
            child,
            watchdog: None,
            paused: false,
            log: launch.log.to_path_buf(),
            exited: None,
        };
        // Without a watchdog, a server kept in a static (never dropped) or
        // left by a killed test process would outlive the tests: refused,
        // and the process dropped (killed) now.
        process.watchdog = Some(
            spawn_watchdog(process.child.id(), launch.cleanup_dir)
                .map_err(|e| Error::io("start the server's watchdog (sh)", e))?,
        );
        Ok(process)
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is stopped by [`JvmProcess::pause`].
    pub(crate) fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether the process has not exited (a paused process is running).
    pub(crate) fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// The exit status once the process has exited (reaping it).
    pub(crate) fn exit_status(&mut self) -> Option<String> {
        if self.exited.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status.to_string());
                self.disarm_watchdog();
            }
        }
        self.exited.clone()
    }

    /// The error for a process that exited unexpectedly, with its log tail.
    pub(crate) fn exited_error(&mut self) -> Option<Error> {
        let status = self.exit_status()?;
        Some(Error::Exited {
            status,
            log: self.log.clone(),
            tail: log_tail(&self.log, 30),
        })
    }

    /// Stops the process (SIGSTOP): it keeps its sockets but does nothing.
    /// Returns once every thread has stopped: kill(2) returns before the
    /// threads of a busy process have all stopped, and one that has not can
    /// still answer a request.
    pub(crate) fn pause(&mut self) -> Result<(), Error> {
        self.signal("STOP")?;
        self.paused = true;
        self.wait_threads(true)
    }

    /// Continues a paused process (SIGCONT), returning once no thread is
    /// stopped any more.
    pub(crate) fn resume(&mut self) -> Result<(), Error> {
        self.signal("CONT")?;
        self.paused = false;
        self.wait_threads(false)
    }

    /// Waits until all threads are stopped (or none is), from their states in
    /// `/proc/<pid>/task/*/stat`. Where there is no `/proc` (not Linux), it
    /// returns at once.
    fn wait_threads(&mut self, stopped: bool) -> Result<(), Error> {
        let deadline = Instant::now() + THREAD_STOP_TIMEOUT;
        let task_dir = PathBuf::from(format!("/proc/{}/task", self.pid()));
        loop {
            let Some(states) = thread_states(&task_dir) else {
                return Ok(());
            };
            let is_stopped = |state: &u8| matches!(state, b'T' | b't');
            let is_halted = |state: &u8| matches!(state, b'T' | b't' | b'Z' | b'X');
            let done = if stopped {
                states.iter().all(is_halted)
            } else {
                !states.iter().any(is_stopped)
            };
            if done {
                return Ok(());
            }
            if let Some(err) = self.exited_error() {
                return Err(err);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "the threads of pid {} to {}",
                        self.pid(),
                        if stopped { "stop" } else { "continue" }
                    ),
                    waited: THREAD_STOP_TIMEOUT,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Asks the JVM to exit (SIGTERM) and waits up to `grace`; kills it if it
    /// has not exited by then.
    pub(crate) fn terminate(&mut self, grace: Duration) -> Result<(), Error> {
        if !self.is_running() {
            return Ok(());
        }
        // The watchdog stays armed until the JVM is reaped: should the
        // test process die meanwhile, it still kills the JVM (unreaped, its
        // pid cannot have been reused).
        self.signal("TERM")?;
        if self.paused {
            // A stopped process only handles SIGTERM once continued.
            self.signal("CONT")?;
            self.paused = false;
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !self.is_running() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill()
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub(crate) fn kill(&mut self) -> Result<(), Error> {
        if self.exited.is_none() {
            // SIGKILL; an error means it already exited, which wait() reports.
            let _ = self.child.kill();
            let status = self
                .child
                .wait()
                .map_err(|e| Error::io("wait for the ZooKeeper process", e))?;
            self.exited = Some(status.to_string());
        }
        self.disarm_watchdog();
        self.paused = false;
        Ok(())
    }

    /// Sends a signal by name to the (unreaped, so still ours) process.
    fn signal(&mut self, name: &str) -> Result<(), Error> {
        if !self.is_running() {
            return Err(Error::NotRunning);
        }
        let pid = self.pid().to_string();
        let status = Command::new("kill")
            .arg("-s")
            .arg(name)
            .arg(&pid)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .or_else(|_| {
                // No kill(1): use the shell builtin.
                Command::new("sh")
                    .args(["-c", "kill -s \"$1\" \"$2\"", "sh", name, &pid])
                    .stdin(Stdio::null())
                    .status()
            })
            .map_err(|e| Error::io(format!("send SIG{name} to pid {pid}"), e))?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::io(
                format!("send SIG{name} to pid {pid}"),
                std::io::Error::other(format!("kill exited with {status}")),
            ))
        }
    }

    /// Stops the watchdog without letting it fire.
    fn disarm_watchdog(&mut self) {
        if let Some((mut watchdog, stdin)) = self.watchdog.take() {
            // Kill before closing its stdin, which would make it fire.
            let _ = watchdog.kill();
            let _ = watchdog.wait();
            drop(stdin);
        }
    }
}

impl Drop for JvmProcess {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// The state letter of every thread under `/proc/<pid>/task`; `None` if the
/// directory cannot be read.
fn thread_states(task_dir: &Path) -> Option<Vec<u8>> {
    let entries = std::fs::read_dir(task_dir).ok()?;
    let mut states = Vec::new();
    for entry in entries.flatten() {
        // A thread may exit between the listing and the read.
        let Ok(stat) = std::fs::read(entry.path().join("stat")) else {
            continue;
        };
        // "tid (comm) S ...": comm may hold anything, so look after the last ')'.
        let state = stat
            .iter()
            .rposition(|&b| b == b')')
            .and_then(|close| stat.get(close + 2))
            .copied();
        states.extend(state);
    }
    Some(states)
}

/// Opens (creating) a log file for appending.
fn open_log(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(format!("open log {}", path.display()), e))
}

/// Starts the watchdog of `pid`.
fn spawn_watchdog(pid: u32, cleanup_dir: &Path) -> std::io::Result<(Child, ChildStdin)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(WATCHDOG_SCRIPT)
        .arg("zklock-watchdog")
        .arg(pid.to_string())
        .arg(cleanup_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    match child.stdin.take() {
        Some(stdin) => Ok((child, stdin)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(std::io::Error::other("the watchdog has no stdin"))
        }
    }
}
