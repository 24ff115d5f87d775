//! A watchdog outside the command's process group. Should zklock die
//! without a word (SIGKILL, the OOM killer), it kills what is left of the
//! group: the parent-death signal reaches the command alone, and its
//! descendants would otherwise run on without the lock.
//!
//! It is a shell waiting on a pipe from zklock: zklock writes `done` when
//! it is done with the group, however it ends; a pipe closed without it
//! means zklock died.

use std::io::{self, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};

use nix::unistd::Pid;
use std::os::unix::process::CommandExt;

/// Reads one word; anything but `done` (an end of file) kills the group.
const SCRIPT: &str = r#"IFS= read -r word; [ "$word" = done ] || kill -s KILL -- "-$1""#;

pub struct Watchdog {
    pipe: Option<ChildStdin>,
    child: Child,
}

impl Watchdog {
    /// Starts one for process group `group`, in a process group of its own
    /// (a terminal's Ctrl-C does not end it).
    pub fn start(group: Pid) -> io::Result<Watchdog> {
        let mut child = Command::new("/bin/sh")
            .args(["-c", SCRIPT, "zklock-exec-watchdog"])
            .arg(group.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take();
        Ok(Watchdog { pipe, child })
    }
}

impl Drop for Watchdog {
    /// zklock is done with the group: the watchdog leaves it alone and
    /// ends. Reaped if it has already; otherwise it is left to end on its
    /// own, not waited for. A panic says nothing: the pipe closes with the
    /// process, and the watchdog kills the group.
    fn drop(&mut self) {
        // Not while unwinding from a panic: zklock is then not done with
        // the group, but about to die.
        if std::thread::panicking() {
            return;
        }
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(b"done\n");
        }
        let _ = self.child.try_wait();
    }
}
