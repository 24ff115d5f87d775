//! The command `exec` runs, as the target of signals: sent directly, and
//! only while the command is not reaped. Until then its pid cannot be
//! reused, so no signal can reach another process.

use std::sync::{Mutex, MutexGuard, PoisonError};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The running command, if any.
#[derive(Default)]
pub struct Group {
    /// Held while signalling, so that the command is never reaped between
    /// the check and the signal.
    leader: Mutex<Option<Pid>>,
}

impl Group {
    fn leader(&self) -> MutexGuard<'_, Option<Pid>> {
        self.leader.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The command with this pid has started.
    pub fn started(&self, pid: Pid) {
        *self.leader() = Some(pid);
    }

    /// The command is about to be reaped: no more signals.
    pub fn reaping(&self) {
        *self.leader() = None;
    }

    /// The command's pid while it is unreaped.
    pub fn id(&self) -> Option<Pid> {
        *self.leader()
    }

    /// Sends `signal` to the command. Nothing to do without a command, or
    /// once it has exited.
    pub fn signal(&self, signal: Signal) -> Result<(), Errno> {
        let leader = self.leader();
        match *leader {
            Some(pid) => match kill(pid, signal) {
                Err(Errno::ESRCH) => Ok(()),
                sent => sent,
            },
            None => Ok(()),
        }
    }

    /// Sends `signal`, and says so on stderr if it could not be sent.
    pub fn signal_or_say(&self, signal: Signal) {
        if let Err(e) = self.signal(signal) {
            let pid = self.id().map_or(0, Pid::as_raw);
            eprintln!("zklock: cannot send {signal} to the command (pid {pid}): {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_command_no_signal() {
        let group = Group::default();
        assert_eq!(group.signal(Signal::SIGTERM), Ok(()));
        assert_eq!(group.id(), None);
    }
}
