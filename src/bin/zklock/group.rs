//! The process group `exec` runs its command in.
//!
//! The command is the leader of a group of its own, so that its descendants
//! can be signalled with it: on a lost lock, `sh -c 'worker & wait'` must
//! not leave `worker` running. The group is only signalled while its leader
//! is not reaped: until then its pid (the group id) cannot be reused.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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
    /// Tells a stop waiting for a spawn that it is over.
    spawned: Condvar,
}

#[derive(Default)]
struct Stops {
    /// How many times zklock was stopped ([`Group::stop`]).
    count: u64,
    /// Set by [`Group::stop`], cleared by [`Group::resume`].
    stopped: bool,
    /// The command is being spawned: its pid, and so its group, is not
    /// known yet.
    spawning: bool,
    /// zklock itself is being stopped (see [`Group::stop_with_zklock`]):
    /// a confirmation answered meanwhile predates that stop.
    zklock_stopping: bool,
}

/// The longest a stop waits for a spawn under way to end: a fork and an
/// exec.
const SPAWN_WAIT: Duration = Duration::from_secs(1);

impl Group {
    fn leader(&self) -> MutexGuard<'_, Option<Pid>> {
        self.leader.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stops(&self) -> MutexGuard<'_, Stops> {
        self.stops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The command is about to be spawned: a stop meanwhile waits for its
    /// pid, so as to stop it too (see [`Group::stop`]). Ended by
    /// [`Group::started`], or by [`Group::not_started`] if the spawn
    /// failed.
    pub fn spawning(&self) {
        self.stops().spawning = true;
    }

    /// The command with this pid has started, as the leader of its group.
    pub fn started(&self, pid: Pid) {
        *self.leader() = Some(pid);
        let mut stops = self.stops();
        stops.stopped = false;
        stops.spawning = false;
        self.spawned.notify_all();
    }

    /// The spawn announced by [`Group::spawning`] failed.
    pub fn not_started(&self) {
        self.stops().spawning = false;
        self.spawned.notify_all();
    }

    /// zklock is stopping: counts the stop, and stops the group (SIGSTOP,
    /// which it cannot ignore), if there is one, waiting for a spawn under
    /// way to give it one: the command, in a group of its own, would
    /// otherwise run on for the whole stop. Counted before zklock stops,
    /// so that its threads, continued, see it at once, whichever runs
    /// first.
    pub fn stop(&self) {
        drop(self.count_stop_and_stop_group());
    }

    /// [`Group::stop`], returning with its lock still held.
    fn count_stop_and_stop_group(&self) -> MutexGuard<'_, Stops> {
        let mut stops = self.stops();
        stops.count += 1;
        if stops.spawning {
            stops = match self
                .spawned
                .wait_timeout_while(stops, SPAWN_WAIT, |s| s.spawning)
            {
                Ok((stops, _)) => stops,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        if self.id().is_some() {
            stops.stopped = true;
            self.signal_or_say(Signal::SIGSTOP);
        }
        stops
    }

    /// Stops the group as [`Group::stop`] does, then zklock with
    /// `stop_zklock`, which returns once zklock is continued. Until then
    /// the group is not continued: a confirmation answered between the
    /// count and zklock's stop would otherwise continue it just before
    /// zklock stops, and it would run for the whole stop. Marked under the
    /// stop's own lock: a resume between the two would slip through.
    pub fn stop_with_zklock(&self, stop_zklock: impl FnOnce()) {
        self.count_stop_and_stop_group().zklock_stopping = true;
        stop_zklock();
        self.stops().zklock_stopping = false;
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
        if stops.count != as_of || stops.zklock_stopping {
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

/// The fields of a `/proc/.../stat` line after the command name, from the
/// state on: the name is in parentheses and may hold anything, spaces and
/// parentheses included, so the fields start after the last `) `.
pub fn after_name(stat: &str) -> Option<&str> {
    stat.rsplit_once(") ").map(|(_, rest)| rest)
}

/// Whether this process's group is orphaned: no member of it has a parent
/// in another group of the same session, so nobody (no shell's job
/// control) is there to continue it once stopped. The kernel discards a
/// SIGTSTP, SIGTTIN or SIGTTOU that would stop such a group. `None` where
/// /proc cannot be read.
pub fn own_group_is_orphaned() -> Option<bool> {
    // ppid, pgrp and session, from a /proc/PID/stat line.
    let ids = |stat: &str| -> Option<(i64, i64, i64)> {
        let mut fields = after_name(stat)?.split(' ').skip(1);
        let mut next = || fields.next()?.parse::<i64>().ok();
        Some((next()?, next()?, next()?))
    };
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, group, session) = ids(&own)?;
    let mut processes = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i64>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok();
        if let Some(found) = stat.as_deref().and_then(ids) {
            processes.insert(pid, found);
        }
    }
    let continued_from_outside = processes.values().any(|&(ppid, pgrp, _)| {
        pgrp == group
            && processes
                .get(&ppid)
                .is_some_and(|&(_, parent_group, parent_session)| {
                    parent_group != group && parent_session == session
                })
    });
    Some(!continued_from_outside)
}

/// Whether a live process (not a zombie) is in process group `group`, from
/// /proc; `None` where /proc cannot be read, or where the scan is still
/// under way at `deadline` (on a host of many processes, one scan can take
/// long enough to hold a SIGKILL past its time). Zombies are dead: the
/// leader stays one until reaped, and an orphan stays one where nobody
/// reaps. But a process whose main thread has exited while its other
/// threads run on also reads as a zombie, and it lives.
pub fn has_live_members(group: Pid, deadline: Option<Instant>) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let wanted = group.as_raw().to_string();
    let mut late = false;
    let found = entries.flatten().any(|entry| {
        if deadline.is_some_and(|at| Instant::now() >= at) {
            late = true;
            return true;
        }
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
        is_live_member(&stat, &wanted)
    });
    (!late).then_some(found)
}

/// Whether the process a `/proc/PID/stat` line describes is in process
/// group `group` and alive: not a zombie, or one whose main thread alone
/// has exited (a zombie still counts itself among its threads, so more
/// than one thread means others run on).
fn is_live_member(stat: &str, group: &str) -> bool {
    // After the parenthesised command name: state, ppid, pgrp, and 14
    // fields later, the number of threads.
    let fields: Vec<&str> =
        after_name(stat).map_or(Vec::new(), |rest| rest.split(' ').take(18).collect());
    let threads = |t: &str| t.parse::<u64>().unwrap_or(1);
    match fields.as_slice() {
        [state, _, pgrp, .., num_threads] if fields.len() == 18 && *pgrp == group => {
            *state != "Z" || threads(num_threads) > 1
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_group_has_a_live_member() {
        let own = nix::unistd::getpgrp();
        assert_eq!(has_live_members(own, None), Some(true));
        // No process group has a negative id.
        assert_eq!(has_live_members(Pid::from_raw(-7), None), Some(false));
    }

    /// A scan still under way at its deadline is no answer (the caller's
    /// deadline then decides), rather than one that holds it up.
    #[test]
    fn a_scan_past_its_deadline_is_no_answer() {
        let past = Instant::now();
        assert_eq!(has_live_members(Pid::from_raw(-7), Some(past)), None);
        let later = Instant::now() + Duration::from_secs(60);
        assert_eq!(
            has_live_members(Pid::from_raw(-7), Some(later)),
            Some(false)
        );
    }

    #[test]
    fn a_zombie_is_dead_unless_threads_of_it_run_on() {
        let stat = |state: &str, threads: u32| {
            format!("4242 (a (b) c) {state} 1 4000 4000 0 -1 4194304 124 0 1 0 0 0 0 0 20 0 {threads} 0 6028248")
        };
        assert!(is_live_member(&stat("S", 1), "4000"));
        assert!(!is_live_member(&stat("S", 1), "4001"));
        assert!(!is_live_member(&stat("Z", 1), "4000"));
        // Its main thread exited (pthread_exit), two others run.
        assert!(is_live_member(&stat("Z", 3), "4000"));
        assert!(!is_live_member("4242 (cut short) S 1 4000", "4000"));
    }

    /// A stop that comes while the command is being spawned waits for its
    /// pid, and stops it: in a group of its own, the command would
    /// otherwise run on while zklock is stopped.
    #[test]
    fn a_stop_during_the_spawn_stops_the_command_once_started() {
        use std::os::unix::process::CommandExt;
        let group = std::sync::Arc::new(Group::default());
        group.spawning();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
        let stopping = group.clone();
        let stopper = std::thread::spawn(move || stopping.stop());
        // The stop waits for the spawn (counted already: zklock's threads
        // see it once continued).
        let deadline = std::time::Instant::now() + SPAWN_WAIT;
        while group.stop_count() == 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(group.stop_count(), 1);
        group.started(pid);
        stopper.join().expect("the stop");
        assert!(group.is_stopped());
        let state = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| after_name(&stat)?.chars().next())
        };
        // A signal takes effect once its target runs: looked at until then.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while state() != Some('T') && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let state = state();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(state, Some('T'), "the command was not stopped");
    }

    /// A confirmation answered while zklock is being stopped does not
    /// continue the group: it predates that stop.
    #[test]
    fn no_resume_while_zklock_is_being_stopped() {
        let group = std::sync::Arc::new(Group::default());
        let resumed = std::sync::Mutex::new(None);
        group.stop_with_zklock(|| {
            let as_of = group.stop_count();
            *resumed.lock().unwrap() = Some(group.resume(as_of));
        });
        assert_eq!(*resumed.lock().unwrap(), Some(false));
        assert!(group.resume(group.stop_count()), "once zklock is continued");
    }

    #[test]
    fn no_command_no_signal() {
        let group = Group::default();
        assert_eq!(group.signal(Signal::SIGTERM), Ok(()));
        assert_eq!(group.id(), None);
    }
}
