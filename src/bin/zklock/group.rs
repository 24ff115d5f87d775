//! The process group `exec` runs its command in.
//!
//! The command is the leader of a group of its own, so that its descendants
//! can be signalled with it: on a lost lock, `sh -c 'worker & wait'` must
//! not leave `worker` running. The group is only signalled while its leader
//! is not reaped: until then its pid (the group id) cannot be reused.

use std::sync::{Mutex, MutexGuard, PoisonError};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// The running command's process group, if any.
#[derive(Default)]
pub struct Group {
    /// Held while signalling, so that the leader is never reaped between
    /// the check and the signal.
    leader: Mutex<Option<Pid>>,
    /// How zklock's stops and continues stand.
    stops: Mutex<Stops>,
}

#[derive(Default)]
struct Stops {
    /// How many times zklock was stopped ([`Group::stop`]).
    count: u64,
    /// Set by [`Group::stop`], cleared by [`Group::resume`].
    stopped: bool,
}

impl Group {
    fn leader(&self) -> MutexGuard<'_, Option<Pid>> {
        self.leader.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stops(&self) -> MutexGuard<'_, Stops> {
        self.stops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The command with this pid has started, as the leader of its group.
    pub fn started(&self, pid: Pid) {
        *self.leader() = Some(pid);
        self.stops().stopped = false;
    }

    /// zklock is stopping: counts the stop, and stops the group (SIGSTOP,
    /// which it cannot ignore), if there is one. Counted before zklock
    /// stops, so that its threads, continued, see it at once, whichever
    /// runs first.
    pub fn stop(&self) {
        let mut stops = self.stops();
        stops.count += 1;
        if self.id().is_some() {
            stops.stopped = true;
            self.signal_or_say(Signal::SIGSTOP);
        }
    }

    /// How many times zklock was stopped so far (see [`Group::stop`]).
    pub fn stop_count(&self) -> u64 {
        self.stops().count
    }

    /// Continues the group after [`Group::stop`], unless zklock was stopped
    /// again since the stop count was `as_of`: the lock was confirmed
    /// before that stop, which may have outlasted the session. Made under
    /// the same lock as a stop, so that a stop and a resume racing leave
    /// the group as the later one says. False if not continued.
    pub fn resume(&self, as_of: u64) -> bool {
        let mut stops = self.stops();
        if stops.count != as_of {
            return false;
        }
        stops.stopped = false;
        self.signal_or_say(Signal::SIGCONT);
        true
    }

    /// True from [`Group::stop`] to [`Group::resume`]: the group cannot act
    /// on any other signal meanwhile.
    pub fn is_stopped(&self) -> bool {
        self.stops().stopped
    }

    /// The leader is about to be reaped: no more signals.
    pub fn reaping(&self) {
        *self.leader() = None;
    }

    /// The group's id while its leader is unreaped.
    pub fn id(&self) -> Option<Pid> {
        *self.leader()
    }

    /// Sends `signal` to the whole group. Nothing to do without a command,
    /// or once nothing is left in the group.
    pub fn signal(&self, signal: Signal) -> Result<(), Errno> {
        let leader = self.leader();
        match *leader {
            Some(group) => match killpg(group, signal) {
                Err(Errno::ESRCH) => Ok(()),
                sent => sent,
            },
            None => Ok(()),
        }
    }

    /// Sends `signal`, and says so on stderr if it could not be sent.
    pub fn signal_or_say(&self, signal: Signal) {
        if let Err(e) = self.signal(signal) {
            let group = self.id().map_or(0, Pid::as_raw);
            say!("zklock: cannot send {signal} to the command's process group {group}: {e}");
        }
    }
}

/// Whether a live process (not a zombie) is in process group `group`, from
/// /proc; `None` where /proc cannot be read. Zombies are dead: the leader
/// stays one until reaped, and an orphan stays one where nobody reaps.
pub fn has_live_members(group: Pid) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let wanted = group.as_raw().to_string();
    Some(entries.flatten().any(|entry| {
        let name = entry.file_name();
        let is_pid = name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // After the parenthesised command name: state, ppid, pgrp, ...
        let fields: Vec<&str> = stat
            .rsplit_once(") ")
            .map_or(Vec::new(), |(_, rest)| rest.split(' ').take(3).collect());
        matches!(fields.as_slice(), [state, _, pgrp] if *state != "Z" && *pgrp == wanted)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_group_has_a_live_member() {
        let own = nix::unistd::getpgrp();
        assert_eq!(has_live_members(own), Some(true));
        // No process group has a negative id.
        assert_eq!(has_live_members(Pid::from_raw(-7)), Some(false));
    }

    #[test]
    fn no_command_no_signal() {
        let group = Group::default();
        assert_eq!(group.signal(Signal::SIGTERM), Ok(()));
        assert_eq!(group.id(), None);
    }
}
