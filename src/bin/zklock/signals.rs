//! The signals `exec` handles.
//!
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT end it: while connecting or waiting
//! they cancel (status 75, no node left behind); once the command runs,
//! they are passed on to its process group. Left to their default action,
//! they would kill zklock and leave its lock node until the session
//! expired, the command killed without warning by its parent-death signal.
//!
//! SIGTSTP (Ctrl-Z) and SIGCONT are handled here, on the signal thread: the
//! command, in a process group of its own, no longer stops with zklock's
//! group, and must not run on while zklock is stopped and its session
//! expires.

use std::sync::Arc;

use crossbeam_channel::{unbounded, Receiver};
use nix::sys::signal::{raise, Signal};

use crate::group::Group;

/// The signals that cancel a wait and are passed on to a running command.
const ENDING: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Installs the handlers; the ending signals arrive on the channel.
pub fn install(group: Arc<Group>) -> std::io::Result<Receiver<Signal>> {
    let handled = ENDING
        .iter()
        .chain(&[Signal::SIGTSTP, Signal::SIGCONT])
        .map(|s| *s as i32);
    let mut signals = signal_hook::iterator::Signals::new(handled)?;
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        for raw in signals.forever() {
            match Signal::try_from(raw) {
                Ok(Signal::SIGTSTP) => stop(&group),
                Ok(Signal::SIGCONT) => group.signal_or_say(Signal::SIGCONT),
                Ok(signal) => {
                    if tx.send(signal).is_err() {
                        return;
                    }
                }
                Err(_) => {}
            }
        }
    });
    Ok(rx)
}

/// Stops the command's group, then zklock, as the terminal would have
/// stopped both. SIGSTOP, which the command cannot ignore: running on while
/// zklock is stopped, it could outlive the session.
fn stop(group: &Group) {
    group.signal_or_say(Signal::SIGSTOP);
    if let Err(e) = raise(Signal::SIGSTOP) {
        say!("zklock: cannot stop: {e}");
    }
}
