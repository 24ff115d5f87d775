//! Child processes for the tests that run programs (`tests/cli*.rs`,
//! through `tests/cli_common`, and `tests/examples.rs`): output collected, every wait bounded, and the
//! process killed if the test fails first.

#![allow(dead_code)]

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A running child; killed (and reaped) if dropped unfinished.
pub struct Run {
    child: Child,
    /// Each pipe's text, sent when the pipe closes.
    readers: Vec<Receiver<String>>,
    exited: Option<(ExitStatus, Instant)>,
}

/// What a finished child did.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    /// When the exit was seen (within [`POLL`] of the exit).
    pub exited_at: Instant,
    pub pid: u32,
    pub stdout: String,
    pub stderr: String,
}

/// How often a child's status is polled.
pub const POLL: Duration = Duration::from_millis(5);

/// How long a child's pipes may stay open after it exits, at least.
const PIPES_AFTER_KILL: Duration = Duration::from_secs(5);

impl Run {
    /// Starts `command` with stdin closed and stdout and stderr collected.
    pub fn spawn(command: &mut Command) -> Run {
        Run::spawn_with_stderr(command, Stdio::piped())
    }

    /// Like [`Run::spawn`], with stderr going to `stderr` (collected only if
    /// piped).
    pub fn spawn_with_stderr(command: &mut Command, stderr: Stdio) -> Run {
        let program = command.get_program().to_string_lossy().into_owned();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child.stdout.take().map(|p| Box::new(p) as _),
            child.stderr.take().map(|p| Box::new(p) as _),
        ];
        let readers = pipes
            .into_iter()
            .flatten()
            .map(|mut pipe| {
                let (tx, rx) = channel();
                std::thread::spawn(move || {
                    let mut text = String::new();
                    let _ = pipe.read_to_string(&mut text);
                    let _ = tx.send(text);
                });
                rx
            })
            .collect();
        Run {
            child,
            readers,
            exited: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status and when it was seen, if the child has exited.
    pub fn poll(&mut self) -> Option<(ExitStatus, Instant)> {
        if self.exited.is_none() {
            match self.child.try_wait() {
                Ok(Some(status)) => self.exited = Some((status, Instant::now())),
                Ok(None) => {}
                Err(e) => panic!("wait for pid {}: {e}", self.child.id()),
            }
        }
        self.exited
    }

    /// Sends a signal by name (`TERM`, `INT`, `KILL`) with kill(1).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {} failed", self.child.id());
    }

    /// Waits for the child, at most `limit`; kills it and panics (showing
    /// its output) if it is still running then.
    pub fn finish(mut self, limit: Duration) -> Output {
        let deadline = Instant::now() + limit;
        let (status, exited_at) = loop {
            if let Some(exited) = self.poll() {
                break exited;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let (stdout, stderr) = self.collect(Instant::now() + PIPES_AFTER_KILL);
                panic!("still running after {limit:?}; stdout:\n{stdout}\nstderr:\n{stderr}");
            }
            std::thread::sleep(POLL);
        };
        let (stdout, stderr) = self.collect(deadline.max(exited_at + PIPES_AFTER_KILL));
        Output {
            status,
            exited_at,
            pid: self.child.id(),
            stdout,
            stderr,
        }
    }

    /// The output, once the pipes close, by `deadline`: a pipe still open
    /// then is held by a process the child left behind.
    fn collect(&mut self, deadline: Instant) -> (String, String) {
        let pid = self.child.id();
        let mut texts = self.readers.drain(..).map(|pipe| {
            let left = deadline.saturating_duration_since(Instant::now());
            pipe.recv_timeout(left).unwrap_or_else(|_| {
                format!("<pid {pid}'s pipe still open: a process it left behind holds it>")
            })
        });
        let stdout = texts.next().unwrap_or_default();
        let stderr = texts.next().unwrap_or_default();
        (stdout, stderr)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.poll().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `done` every 10 ms until it holds; panics after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("zklock-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
