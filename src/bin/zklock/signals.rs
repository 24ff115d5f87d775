//! The signals `exec` handles.
//!
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT end it: while connecting or waiting
//! they cancel (status 75, no node left behind; after a SIGINT, zklock
//! then dies of SIGINT itself, see `Outcome::Signal`); once the command
//! runs, they are passed on to its process group. Left to their default
//! action, they would kill zklock and leave its lock node until the
//! session expired, the command killed without warning by its
//! parent-death signal.
//!
//! SIGTSTP (Ctrl-Z) is handled here, on the signal thread: the command, in
//! a process group of its own, no longer stops with zklock's group, and
//! must not run on while zklock is stopped and its session expires. So are
//! SIGTTOU and SIGTTIN, which stop a background zklock that writes to its
//! terminal (with `stty tostop`: a line saying the lock was lost, say) or
//! reads from it. SIGCONT
//! does not continue the command from here: the stop may have outlasted the
//! session, so the command stays stopped until the lock is confirmed held
//! (see `supervise`).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use crossbeam_channel::{bounded, unbounded, Receiver};
use nix::sys::signal::{raise, Signal};

use crate::group::Group;

/// The signals that cancel a wait and are passed on to a running command.
const ENDING: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The signals that stop zklock, as a terminal's job control sends them:
/// the command's group is stopped with it.
const STOPPING: [Signal; 3] = [Signal::SIGTSTP, Signal::SIGTTOU, Signal::SIGTTIN];

/// The first ending signal received (0: none yet).
static FIRST_ENDING: AtomicI32 = AtomicI32::new(0);

/// The first ending signal zklock received, if any: the one that
/// interrupted it, when a signal did.
pub fn first_ending() -> Option<Signal> {
    Signal::try_from(FIRST_ENDING.load(Ordering::SeqCst)).ok()
}

/// Whether zklock has received a SIGINT, first or not.
static GOT_SIGINT: AtomicBool = AtomicBool::new(false);

/// Whether zklock has received a SIGINT (and so passed it on, if the
/// command runs), whichever ending signal came first.
pub fn got_sigint() -> bool {
    GOT_SIGINT.load(Ordering::SeqCst)
}

/// What the signal thread reports.
pub struct Received {
    /// The ending signals.
    pub ending: Receiver<Signal>,
    /// A message for each time zklock was continued (SIGCONT), however it
    /// was stopped; several while nobody looked are one.
    pub resumed: Receiver<()>,
}

/// Installs the handlers, except for the ending and stopping signals
/// zklock was started with ignored (`nohup`, or `&` in a script, ignores
/// SIGHUP, or SIGINT and SIGQUIT): those stay ignored, by zklock and by
/// the command, which inherits that, as it would have without zklock.
pub fn install(group: Arc<Group>) -> std::io::Result<Received> {
    // Started with SIGCHLD ignored (by a parent that set SIG_IGN, which
    // exec keeps), zklock would have its children reaped by the kernel:
    // every wait for one fails, the command's status is lost, and setpriv's
    // check fails too. Handled, doing nothing, SIGCHLD is no longer
    // ignored, and the command inherits its default action, as under GNU
    // timeout.
    signal_hook::flag::register(Signal::SIGCHLD as i32, Arc::new(AtomicBool::new(false)))?;
    let ignored = ignored_at_start();
    let handled = ENDING
        .iter()
        .chain(&STOPPING)
        .filter(|s| !ignored.contains(s))
        .chain(&[Signal::SIGCONT])
        .map(|s| *s as i32);
    let mut signals = signal_hook::iterator::Signals::new(handled)?;
    let (tx, ending) = unbounded();
    let (resumed_tx, resumed) = bounded(1);
    std::thread::Builder::new().spawn(move || {
        for raw in signals.forever() {
            match Signal::try_from(raw) {
                Ok(signal) if STOPPING.contains(&signal) => stop(&group),
                Ok(Signal::SIGCONT) => {
                    // Full: one is waiting already, and says the same.
                    let _ = resumed_tx.try_send(());
                }
                Ok(signal) => {
                    let _ =
                        FIRST_ENDING.compare_exchange(0, raw, Ordering::SeqCst, Ordering::SeqCst);
                    // Before it is passed on: set by the time it can kill
                    // the command.
                    if signal == Signal::SIGINT {
                        GOT_SIGINT.store(true, Ordering::SeqCst);
                    }
                    if tx.send(signal).is_err() {
                        return;
                    }
                }
                Err(_) => {}
            }
        }
    })?;
    Ok(Received { ending, resumed })
}

/// Stops the command's group, then zklock, as the terminal would have
/// stopped both. SIGSTOP, which the command cannot ignore: running on while
/// zklock is stopped, it could outlive the session. Not in an orphaned
/// process group (zklock under a daemon, or started with `setsid`), where
/// the kernel would have discarded the signal: a SIGSTOP would leave zklock
/// and the command stopped with nobody there to continue them.
fn stop(group: &Group) {
    if crate::group::own_group_is_orphaned() == Some(true) {
        return;
    }
    group.stop_with_zklock(|| {
        if let Err(e) = raise(Signal::SIGSTOP) {
            say!("zklock: cannot stop: {e}");
        }
    });
}

/// The signals this process ignores, from the kernel's account of it
/// (`SigIgn` in `/proc/self/status`, a hexadecimal mask with bit N-1 for
/// signal N); none where that cannot be read.
fn ignored_at_start() -> Vec<Signal> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    Signal::iterator()
        .filter(|signal| {
            let bit = (*signal as i32).saturating_sub(1);
            (0..64).contains(&bit) && mask & (1u64 << bit) != 0
        })
        .collect()
}
