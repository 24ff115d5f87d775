//! Running `exec`'s command while the lock holds, and terminating it when
//! the lock can no longer be relied on.
//!
//! The command must have stopped before any other contender can acquire.
//! With a negotiated session timeout T, the server expires the session (and
//! so frees the lock) no sooner than T after it last heard from us. The client
//! drops a silent connection, and the guard turns `Suspended`, at most 2T/3
//! after the last contact. From there zklock waits `--grace` G (at most T/6,
//! default 0) for a reconnect, then sends SIGTERM to the command's process
//! group, then SIGKILL to whatever is left of it after K = (T/3 - G) / 2.
//! The group is therefore gone by 2T/3 + G + K <= 11T/12 < T (K >= T/12).
//!
//! That reckoning holds only while zklock runs. A stop (Ctrl-Z, or a
//! SIGSTOP) can outlast the session while the client hears nothing, so
//! when zklock is continued, the command's group is stopped (again) and
//! continued only once a transaction on the leader has confirmed the lock
//! node; if the lock is found lost, the stopped group is killed, with no
//! chance to run on while another contender holds the lock.

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{
    after, bounded, never, select, unbounded, Receiver, RecvTimeoutError, Sender,
};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use zklock::{Client, LockMonitor, LockState, StateChanges};

use crate::group::{has_live_members, Group};
use crate::tied::{ExitWatch, Launcher, Stopped, Tied};
use crate::watchdog::Watchdog;
use crate::{signals, Outcome, EXIT_ERROR};

/// The lock was lost while COMMAND ran; COMMAND was terminated.
const EXIT_LOST: u8 = 76;

/// How long the group may take to die once sent SIGKILL (it cannot refuse,
/// but a process in uninterruptible sleep dies only when it wakes).
const KILLED_WAIT: Duration = Duration::from_secs(5);

/// How often a dying group is looked at.
const POLL: Duration = Duration::from_millis(10);

/// The first pause before a confirmation that failed without an answer
/// (the connection lost, a timeout or a throttling) is asked again; it
/// doubles with each failure in a row, up to [`CONFIRM_AGAIN_AT_MOST`], so
/// that a server failing every try is not asked ten times a second.
const CONFIRM_AGAIN: Duration = Duration::from_millis(100);
const CONFIRM_AGAIN_AT_MOST: Duration = Duration::from_secs(2);

/// What the command runs under: the lock's state changes and monitor, the
/// signals to pass on, zklock's continuations, and the group it will lead.
pub struct Watch {
    /// The lock's client: when it last heard from a server.
    pub client: Client,
    pub states: StateChanges<LockState>,
    pub monitor: LockMonitor,
    pub signals: Receiver<Signal>,
    pub resumed: Receiver<()>,
    pub group: Arc<Group>,
    /// The group's stop count (see [`Group::stop_count`]) before the lock
    /// was asked for: a stop since may have come after the grant.
    pub stops_before_grant: u64,
    /// Settles the lock's state before the command starts, as `prepare`
    /// did first.
    pub settler: Settler,
}

/// How the command's run ended.
pub enum Ran {
    /// With this exit status for zklock.
    Exit(Outcome),
    /// A signal passed on to the command's group ended setpriv before it
    /// had started the command, or a signal came while the lock was being
    /// confirmed after a stop: the command never ran.
    InterruptedBeforeStart,
    /// zklock was stopped before the command started, and the lock could
    /// not be confirmed held when it was continued: the command never ran.
    NotHeldAfterStop,
    /// The lock was found lost as the command was about to start (why, as
    /// [`not_held`] says): the command never ran.
    NotHeldBeforeStart(&'static str),
}

impl From<Outcome> for Ran {
    fn from(outcome: Outcome) -> Ran {
        Ran::Exit(outcome)
    }
}

/// Runs `command`, its program found at `resolved`, with `envs`, the lock
/// held, until it exits or the lock can no longer be relied on.
pub fn run<'a>(
    command: &[String],
    resolved: PathBuf,
    envs: impl IntoIterator<Item = (&'a str, &'a OsStr)>,
    watch: Watch,
    timeout: Duration,
    grace: Duration,
) -> Ran {
    let (program, rest) = match command.split_first() {
        Some(split) => split,
        None => return Outcome::Usage("missing COMMAND".into()).into(),
    };
    let Watch {
        client,
        states,
        monitor,
        mut signals,
        mut resumed,
        group,
        stops_before_grant,
        mut settler,
    } = watch;
    let cannot_run = |e| Outcome::Error(format!("cannot run {program:?}: {e}")).into();
    // Its own channel: `states` keeps every change for the checks below.
    let check_states = monitor.state_changes();
    let launcher = match Launcher::new(resolved, &signals, check_states.receiver()) {
        Ok(launcher) => launcher,
        Err(Stopped::Interrupted) => return Ran::InterruptedBeforeStart,
        // Lost to a stop that outlasted the session, it says so.
        Err(Stopped::Lost) if group.stop_count() != stops_before_grant => {
            return Ran::NotHeldAfterStop
        }
        Err(Stopped::Lost) => return Ran::NotHeldBeforeStart("the lock was lost"),
        Err(Stopped::NoThread(e)) => return Outcome::no_thread(e).into(),
    };
    drop(check_states);
    // Every thread needed once the command runs is started before it does:
    // see `ExitWatch::start`. (Without one, zklock would panic, and die at
    // once, with the command killed.)
    let started = ExitWatch::start().and_then(|exit| Ok((exit, Confirmer::start(&monitor)?)));
    let (exit_watch, confirmer) = match started {
        Ok(started) => started,
        Err(e) => return Outcome::no_thread(e).into(),
    };
    // The lock's state is settled (a suspension waited out), then a stop
    // since the lock was granted (while it was checked, setpriv's check or
    // that wait included) is confirmed: it may have outlasted the session.
    // A Ctrl-Z is counted before zklock stops, so it is seen here at once;
    // a SIGSTOP of zklock alone, which cannot be caught, only once the
    // continuation's message is in. A stop during the confirmation calls
    // for another, and a state change meanwhile for another settling.
    let mut confirmed_as_of = stops_before_grant;
    loop {
        // A signal since the lock was granted ends zklock before the
        // command starts, not the command once started.
        if signals.try_recv().is_ok() {
            return Ran::InterruptedBeforeStart;
        }
        // So does a loss: the command would only start to be terminated
        // at once. The lock was held as of `prepare`, and every change
        // since is in `states`.
        match settler.settle(LockState::Held, &states, &signals) {
            Settled::Held => {}
            // Lost to a stop not confirmed, which may have outlasted the
            // session, it says so.
            Settled::NotHeld(_) if group.stop_count() != confirmed_as_of => {
                return Ran::NotHeldAfterStop
            }
            Settled::NotHeld(why) => return Ran::NotHeldBeforeStart(why),
            Settled::Interrupted => return Ran::InterruptedBeforeStart,
        }
        let as_of = group.stop_count();
        if resumed.try_recv().is_err() && as_of == confirmed_as_of {
            if states.is_empty() {
                break;
            }
            continue;
        }
        select! {
            recv(confirmer.ask()) -> held => if held != Ok(true) {
                return Ran::NotHeldAfterStop;
            },
            recv(signals) -> _ => return Ran::InterruptedBeforeStart,
        }
        confirmed_as_of = as_of;
    }
    group.spawning();
    let (mut child, tied) = match launcher.spawn(rest, envs) {
        Ok(started) => started,
        Err(e) => {
            group.not_started();
            return cannot_run(e);
        }
    };
    let Ok(pid) = i32::try_from(child.id()).map(Pid::from_raw) else {
        group.not_started();
        let _ = child.kill();
        let _ = child.wait();
        return Outcome::Error(format!("{program:?} got an unexpected pid {}", child.id())).into();
    };
    group.started(pid);
    let _runs = CommandRuns::start();
    // While zklock, continued, confirms the lock, the group stays stopped:
    // the confirmation, and the stop count it was asked at. One asked
    // before a later stop is stale, and does not continue the group.
    let mut confirming: Option<(Receiver<bool>, u64)> = None;
    // Stopped between the last confirmation and the start (a SIGSTOP of
    // zklock alone leaves only its continuation's message): the command
    // started unconfirmed, and stays stopped until confirmed. Before the
    // watchdog starts, so that it runs no longer than it must.
    if group.stop_count() != confirmed_as_of || resumed.try_recv().is_ok() {
        group.stop();
        confirming = Some(confirmer.ask_as_of(&group));
    }
    // Dropped, whatever way this returns, once zklock is done with the
    // group.
    let _watchdog = match Watchdog::start(pid) {
        Ok(watchdog) => Some(watchdog),
        Err(e) => {
            say!(
                "zklock: warning: no watchdog ({e}); if zklock is killed with SIGKILL, \
                 the command's descendants run on without the lock"
            );
            None
        }
    };
    let exited = exit_watch.watch(pid);
    let schedule = Schedule { timeout, grace };
    // The end of a suspension's grace, fixed when it is first noticed: a
    // later reading of when the client last heard could come after a
    // reconnect that found the session expired.
    let mut grace_ends: Option<Instant> = None;
    let lost_lock = |child: &mut Child, grace_ends: Option<Instant>, leader_exited: bool| {
        let now = Instant::now();
        let kill_at = match grace_ends {
            Some(end) => schedule.kill_at_after_grace(now, end),
            None => schedule.kill_at(now, client.last_heard()),
        };
        terminate(child, &group, &exited, kill_at, leader_exited).into()
    };
    loop {
        let deadline = grace_ends.map(|end| after(end.saturating_duration_since(Instant::now())));
        select! {
            recv(exited) -> _ => {
                // A loss that came with the exit, as the states arm below
                // would have taken it had it been picked first.
                let lost = schedule.lost_by(states.try_iter(), grace_ends, Instant::now());
                // Looked at before the reaping, while its name is there.
                let exec_failed = tied.exec_failed(child.id());
                if lost && !exec_failed {
                    // The leader's exit and the loss came together: what
                    // it left running in its group goes as on any loss.
                    return lost_lock(&mut child, grace_ends, true);
                }
                group.reaping();
                let status = child.wait();
                if exec_failed {
                    match &status {
                        // setpriv said why, in one line: COMMAND did not start.
                        Ok(s) if Tied::is_exec_failure(*s) => return Outcome::Exit(EXIT_ERROR).into(),
                        // A signal came while COMMAND was being started,
                        // and was passed on to setpriv.
                        Ok(s) if s.signal().is_some() => return Ran::InterruptedBeforeStart,
                        _ => {}
                    }
                }
                return match status {
                    _ if lost => Outcome::Exit(EXIT_LOST),
                    // Ctrl-C, passed on: see `Outcome::Signal`. (Not a
                    // SIGINT sent to the command alone.) It need not be
                    // the first signal: a command that trapped a SIGTERM
                    // may die of a later Ctrl-C.
                    Ok(s) if s.signal() == Some(Signal::SIGINT as i32) && signals::got_sigint() => {
                        Outcome::Signal(Signal::SIGINT)
                    }
                    Ok(status) => Outcome::Exit(exit_code(status)),
                    // Said as zklock's error, not passed off as the
                    // command's status: nothing says it failed.
                    Err(e) => Outcome::Error(format!("the command's exit status is unknown: {e}")),
                }
                .into();
            }
            recv(states) -> state => match state {
                Ok(LockState::Held) => grace_ends = None,
                Ok(LockState::Suspended) if grace.is_zero() => {
                    return lost_lock(&mut child, grace_ends, false);
                }
                Ok(LockState::Suspended) => {
                    let noticed = Instant::now();
                    grace_ends =
                        grace_ends.or(Some(schedule.grace_ends(noticed, client.last_heard())));
                }
                // Lost, or a state this zklock does not know of.
                Ok(_) | Err(_) => return lost_lock(&mut child, grace_ends, false),
            },
            recv(signals) -> signal => match signal {
                Ok(signal) => {
                    panic_if_asked(signal);
                    group.signal_or_say(signal);
                }
                Err(_) => signals = never(),
            },
            recv(resumed) -> resumed_now => match resumed_now {
                Ok(()) => {
                    // Stopped already if zklock was stopped by Ctrl-Z; not
                    // if by a SIGSTOP of its own, which cannot be caught.
                    group.stop();
                    // An earlier confirmation's answer may predate this stop.
                    confirming = Some(confirmer.ask_as_of(&group));
                }
                Err(_) => resumed = never(),
            },
            recv(confirming.as_ref().map_or_else(never, |(c, _)| c.clone())) -> held => {
                if held != Ok(true) {
                    return lost_lock(&mut child, grace_ends, false);
                }
                // Not continued if zklock was stopped again since it was
                // asked: that stop's continuation asks again. A SIGSTOP of
                // zklock alone leaves the count, but not its continuation's
                // message, which may not have been taken in yet.
                if resumed.try_recv().is_ok() {
                    group.stop();
                    confirming = Some(confirmer.ask_as_of(&group));
                } else if let Some((_, as_of)) = confirming.take() {
                    group.resume(as_of);
                }
            },
            recv(deadline.unwrap_or_else(never)) -> _ => {
                return lost_lock(&mut child, grace_ends, false);
            }
        }
    }
}

/// Whether the command may start, once the lock's state is settled.
pub enum Settled {
    Held,
    /// Why not, as [`not_held`] says.
    NotHeld(&'static str),
    /// A signal came first.
    Interrupted,
}

/// Settles the lock's state before the command starts (see
/// [`Settler::settle`]), saying once that it waits, unless `--quiet`.
pub struct Settler {
    quiet: bool,
    said: bool,
}

impl Settler {
    pub fn new(quiet: bool) -> Settler {
        Settler { quiet, said: false }
    }

    /// The newest of `read` (read after `states` was subscribed) and the
    /// changes since. `Suspended` (cut off, or reconnected with the node
    /// not confirmed yet) is waited out: nothing runs unguarded meanwhile,
    /// and the wait ends with a reconnect's confirmation of the node, or by
    /// the loss that the session's expiry brings (the client gives the
    /// session up 4T/3 after it last heard from a server), or a signal.
    /// Refusing at once turned a brief outage (or the round trip of the
    /// confirmation) into exit 75, where the fencing token, asked just
    /// before, waits through one.
    pub fn settle(
        &mut self,
        read: LockState,
        states: &StateChanges<LockState>,
        signals: &Receiver<Signal>,
    ) -> Settled {
        let mut state = states.try_iter().last().unwrap_or(read);
        if state == LockState::Suspended && !self.quiet && !self.said {
            say!("zklock: the connection to the ensemble was lost; waiting to confirm the lock before starting the command");
            self.said = true;
        }
        while state == LockState::Suspended {
            select! {
                recv(states) -> next => {
                    state = match next {
                        Ok(next) => states.try_iter().last().unwrap_or(next),
                        // The hold is gone with its guard and monitors.
                        Err(_) => LockState::Lost,
                    };
                }
                recv(signals) -> _ => return Settled::Interrupted,
            }
        }
        match not_held(state) {
            None => Settled::Held,
            Some(why) => Settled::NotHeld(why),
        }
    }
}

/// Why the command may not start (or run on) in `state`, if it may not.
pub fn not_held(state: LockState) -> Option<&'static str> {
    match state {
        LockState::Held => None,
        LockState::Suspended => Some("the connection to the ensemble was lost"),
        // Lost, or a state this zklock does not know of.
        _ => Some("the lock was lost"),
    }
}

/// K, the time from SIGTERM to SIGKILL: (T/3 - G) / 2, at least T/12 since
/// G <= T/6, and at most T/4 - G, so that 2T/3 + G + K <= 11T/12. No floor:
/// one above T/4 - G (100 ms once did) breaks that for short timeouts.
fn kill_delay(timeout: Duration, grace: Duration) -> Duration {
    timeout.saturating_sub(grace.saturating_mul(3)) / 6
}

/// When the grace ends and when SIGKILL goes: counted from when zklock
/// notices, but never later than the bound counted from when its client
/// last heard from a server. The client drops a silent connection 2T/3
/// after that, the grace G follows, and K after it the group is killed,
/// by 11T/12. A zklock that did not run meanwhile (stopped, frozen with
/// its command, starved of CPU) notices late, and the bound stands.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    timeout: Duration,
    grace: Duration,
}

impl Schedule {
    /// The end of the grace of a suspension noticed `now`, the client
    /// having last heard from a server at `heard`.
    fn grace_ends(self, now: Instant, heard: Instant) -> Instant {
        let dropped = heard + self.timeout * 2 / 3;
        (now + self.grace).min(dropped + self.grace)
    }

    /// Whether the lock states told since the last looked at (`told`), or
    /// a suspension's grace ending by `now`, make the lock lost: `Lost`,
    /// or `Suspended` with no grace. What the command's exit, picked
    /// first, must not pass over.
    fn lost_by(
        self,
        mut told: impl Iterator<Item = LockState>,
        grace_ends: Option<Instant>,
        now: Instant,
    ) -> bool {
        told.any(|s| s == LockState::Lost || (s == LockState::Suspended && self.grace.is_zero()))
            || grace_ends.is_some_and(|end| now >= end)
    }

    /// When SIGKILL goes, for a termination begun `now`.
    fn kill_at(self, now: Instant, heard: Instant) -> Instant {
        self.kill_at_after_grace(now, self.grace_ends(now, heard))
    }

    /// When SIGKILL goes, for a termination begun `now`, after a grace
    /// that ended (or ends) at `grace_ends`.
    fn kill_at_after_grace(self, now: Instant, grace_ends: Instant) -> Instant {
        let kill_after = kill_delay(self.timeout, self.grace);
        (now + kill_after).min(grace_ends + kill_after)
    }
}

/// Answers whether the lock is held, confirmed by a transaction on the
/// leader (a follower behind it could still serve an expired session), on
/// a thread started before the command (see [`ExitWatch::start`]). A
/// transaction is asked again while no answer comes and the lock is not
/// known lost. Each question is answered by a transaction sent after it
/// was asked: one asked while an earlier one is still trying shares its
/// next try.
struct Confirmer {
    asks: Sender<Sender<bool>>,
}

impl Confirmer {
    fn start(monitor: &LockMonitor) -> std::io::Result<Confirmer> {
        let (asks, asked) = unbounded::<Sender<bool>>();
        let monitor = monitor.clone();
        std::thread::Builder::new()
            .name("zklock-confirm".into())
            .spawn(move || {
                for first in asked.iter() {
                    let mut waiting = vec![first];
                    let mut pause = CONFIRM_AGAIN;
                    let held = loop {
                        waiting.extend(asked.try_iter());
                        match monitor.multi(&[]) {
                            Ok(_) => break true,
                            Err(e) if e.is_retryable() && monitor.state() != LockState::Lost => {
                                // A new question, after a new stop, is
                                // asked at once, as the first was.
                                match asked.recv_timeout(pause) {
                                    Ok(question) => {
                                        waiting.push(question);
                                        pause = CONFIRM_AGAIN;
                                    }
                                    Err(RecvTimeoutError::Timeout) => {
                                        pause = (pause * 2).min(CONFIRM_AGAIN_AT_MOST);
                                    }
                                    // The supervision is over: nobody asks.
                                    Err(RecvTimeoutError::Disconnected) => break false,
                                }
                            }
                            Err(_) => break false,
                        }
                    };
                    for answer in waiting {
                        let _ = answer.send(held);
                    }
                }
            })?;
        Ok(Confirmer { asks })
    }

    /// Asks whether the lock is held.
    fn ask(&self) -> Receiver<bool> {
        let (answer, answered) = bounded(1);
        let _ = self.asks.send(answer);
        answered
    }

    /// Asks, with the stop count it is asked at: read first, so that a
    /// stop while it is asked makes it stale.
    fn ask_as_of(&self, group: &Group) -> (Receiver<bool>, u64) {
        let as_of = group.stop_count();
        (self.ask(), as_of)
    }
}

/// SIGTERM to the command's group; SIGKILL to what is left of it at
/// `kill_at`; returns once it is gone (or, should even SIGKILL not end it,
/// after `KILLED_WAIT`). A group stopped with zklock gets SIGKILL at once:
/// it could act on SIGTERM only once continued, by when another contender
/// may hold the lock. So does one whose `kill_at` has passed. With
/// `leader_exited`, the leader is gone already (a zombie, not reaped):
/// only what it left in its group is waited for, and a group with nothing
/// left gets no signal.
fn terminate(
    child: &mut Child,
    group: &Group,
    exited: &Receiver<()>,
    kill_at: Instant,
    mut leader_exited: bool,
) -> Outcome {
    let id = group.id().unwrap_or(Pid::from_raw(0));
    let left = kill_at.saturating_duration_since(Instant::now());
    // Bounded by the kill's time: past it, no scan holds up the SIGKILL.
    let gone = if leader_exited && has_live_members(id, Some(kill_at)) == Some(false) {
        true
    } else if group.is_stopped() {
        say!("zklock: lock no longer held; killing the stopped command (process group {id})");
        false
    } else if left.is_zero() {
        say!(
            "zklock: lock no longer held, and no time left to end the command gently; \
             killing it (process group {id})"
        );
        false
    } else {
        say!("zklock: lock no longer held; terminating the command (process group {id})");
        group.signal_or_say(Signal::SIGTERM);
        wait_gone(id, exited, &mut leader_exited, left)
    };
    if !gone {
        group.signal_or_say(Signal::SIGKILL);
        wait_gone(id, exited, &mut leader_exited, KILLED_WAIT);
    }
    group.reaping();
    let _ = child.try_wait();
    Outcome::Exit(EXIT_LOST)
}

/// Waits up to `limit` for the group to be gone: its leader exited, and no
/// other live process in it. Polled: nothing tells of the exit of a process
/// that is not our child.
fn wait_gone(group: Pid, exited: &Receiver<()>, leader_exited: &mut bool, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        // Unknown (no /proc) is not gone: the deadline decides.
        // A scan still under way at the deadline is not waited for.
        if *leader_exited && has_live_members(group, Some(deadline)) == Some(false) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        if *leader_exited {
            std::thread::sleep(left.min(POLL));
        } else if exited.recv_timeout(left.min(POLL)).is_ok() {
            *leader_exited = true;
        }
    }
}

fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}

/// The environment variable that makes a debug build panic, on the main
/// thread, instead of passing on the signal it names while a command
/// runs: how the tests reach the panic hook of `main`, which no release
/// build has a way to.
#[cfg(debug_assertions)]
const PANIC_ON_SIGNAL: &str = "ZKLOCK_DEBUG_PANIC_ON_SIGNAL";

#[cfg(debug_assertions)]
fn panic_if_asked(signal: Signal) {
    if std::env::var_os(PANIC_ON_SIGNAL).is_some_and(|asked| asked == signal.as_str()) {
        panic!("{PANIC_ON_SIGNAL} asked for a panic on {signal}");
    }
}

#[cfg(not(debug_assertions))]
fn panic_if_asked(_: Signal) {}

/// Set while a command runs under the lock (see [`command_runs`]).
static COMMAND_RUNS: AtomicBool = AtomicBool::new(false);

/// Whether a command runs under the lock: from its start until `run`
/// returns, having reaped it or given up on it.
pub fn command_runs() -> bool {
    COMMAND_RUNS.load(Ordering::SeqCst)
}

/// Marks a command running for as long as it lives.
struct CommandRuns;

impl CommandRuns {
    fn start() -> CommandRuns {
        COMMAND_RUNS.store(true, Ordering::SeqCst);
        CommandRuns
    }
}

impl Drop for CommandRuns {
    fn drop(&mut self) {
        COMMAND_RUNS.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command is gone before the session can expire, for any session
    /// timeout and grace.
    #[test]
    fn the_kill_comes_within_eleven_twelfths_of_the_timeout() {
        for timeout_ms in [12, 120, 600, 1_000, 1_199, 1_200, 4_000, 10_000, 60_000] {
            let timeout = Duration::from_millis(timeout_ms);
            for grace in [Duration::ZERO, timeout / 12, timeout / 6] {
                let kill_at = timeout * 2 / 3 + grace + kill_delay(timeout, grace);
                assert!(
                    kill_at <= timeout * 11 / 12,
                    "T {timeout:?}, G {grace:?}: SIGKILL at {kill_at:?}"
                );
                assert!(kill_delay(timeout, grace) >= timeout / 12 - Duration::from_nanos(1));
            }
        }
    }

    /// A command's exit picked before a loss told with it still ends as a
    /// loss: a `Lost`, a `Suspended` without grace (even if a reconnect
    /// followed: the command was being ended), or a grace run out. A
    /// suspension within its grace does not, nor one a reconnect ended
    /// within it.
    #[test]
    fn an_exit_picked_first_sees_the_loss_told_with_it() {
        use LockState::{Held, Lost, Suspended};
        let ms = Duration::from_millis;
        let now = Instant::now();
        let no_grace = Schedule {
            timeout: ms(12_000),
            grace: Duration::ZERO,
        };
        let grace = Schedule {
            grace: ms(1_000),
            ..no_grace
        };
        let lost = |schedule: Schedule, told: &[LockState], grace_ends| {
            schedule.lost_by(told.iter().copied(), grace_ends, now)
        };
        assert!(lost(no_grace, &[Suspended], None));
        assert!(lost(no_grace, &[Held, Suspended, Held], None));
        assert!(lost(no_grace, &[Lost], None));
        assert!(lost(grace, &[Lost], None));
        assert!(!lost(no_grace, &[], None));
        assert!(!lost(no_grace, &[Held], None));
        assert!(!lost(grace, &[Suspended], Some(now + ms(1))));
        assert!(!lost(grace, &[Suspended, Held], None));
        assert!(lost(grace, &[], Some(now)));
    }

    /// Noticed on time, the grace and the kill count from the notice; a
    /// connection closed early changes nothing; noticed late (zklock
    /// stopped or frozen), they keep to the bound counted from when the
    /// client last heard from a server, and once it has passed, SIGKILL
    /// goes at once.
    #[test]
    fn the_schedule_keeps_to_the_bound_from_the_last_contact() {
        let ms = Duration::from_millis;
        let heard = Instant::now();
        let schedule = Schedule {
            timeout: ms(12_000),
            grace: ms(1_200),
        };
        // K = (12 000 - 3 600) / 6 = 1 400 ms.
        assert_eq!(kill_delay(schedule.timeout, schedule.grace), ms(1_400));
        // The read timeout dropped the connection at 8 s: on time.
        let on_time = heard + ms(8_000);
        assert_eq!(schedule.grace_ends(on_time, heard), heard + ms(9_200));
        assert_eq!(
            schedule.kill_at(heard + ms(9_200), heard),
            heard + ms(10_600)
        );
        assert!(heard + ms(10_600) <= heard + ms(11_000), "within 11T/12");
        // A server closed the connection at 1 s: from the notice.
        let early = heard + ms(1_000);
        assert_eq!(schedule.grace_ends(early, heard), heard + ms(2_200));
        assert_eq!(schedule.kill_at(early, heard), heard + ms(2_400));
        // Noticed at 10 s: the grace is over, SIGKILL due at 10.6 s.
        let late = heard + ms(10_000);
        assert_eq!(schedule.grace_ends(late, heard), heard + ms(9_200));
        assert_eq!(schedule.kill_at(late, heard), heard + ms(10_600));
        // Noticed at 14 s, after the session: SIGKILL already due.
        let too_late = heard + ms(14_000);
        assert!(schedule.kill_at(too_late, heard) < too_late);
    }
}
