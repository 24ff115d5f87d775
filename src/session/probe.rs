//! Looking for a read-write server while connected to a read-only one.
//!
//! A read-only server is a member cut off from its quorum: it serves reads
//! only, no lock can be had through it, and it may stay cut off for as long
//! as the partition lasts while the rest of the ensemble serves writes. So
//! while read-only, the session asks the other hosts in turn, each with the
//! `isro` four-letter word, whether they are read-write, at intervals that
//! start short and double up to a minute. The first to answer `rw` is where
//! it goes next: the read-only connection is dropped and that host is
//! connected to at once. A session the read-only server created (one that
//! never saw a read-write server) is not valid elsewhere, so that
//! handshake asks for a new session, as every such reconnect does.
//!
//! The asking itself is I/O, which the client does on a thread of its own:
//! [`Session::poll_probe`] says whom to ask and when, and
//! [`Session::handle_probe`] takes the answer.

use std::time::{Duration, Instant};

use super::{Conn, Error, Session, State, Target};

/// The wait before the first probe after a read-only handshake.
pub const FIRST_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// The longest wait between probes.
pub const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(60);

/// When the next probe is due, and the wait that led to it.
#[derive(Debug, Clone, Copy)]
pub(super) struct ProbeSchedule {
    due: Instant,
    wait: Duration,
}

/// What to do about probing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Ask this address of a host of the connect string whether it is
    /// read-write (see [`Target`]), then report with
    /// [`Session::handle_probe`].
    Ask(Target),
    /// Nothing is due before this moment.
    WaitUntil(Instant),
    /// Not read-only (or nobody else to ask): nothing to probe.
    Stop,
}

impl<T, W: Clone> Session<T, W> {
    /// Starts probing after a read-only handshake, unless there is no other
    /// address to ask.
    pub(super) fn start_probing(&mut self, now: Instant) {
        self.probe = (self.hosts.addresses() > 1).then_some(ProbeSchedule {
            due: now + FIRST_PROBE_INTERVAL,
            wait: FIRST_PROBE_INTERVAL,
        });
    }

    /// Whom to ask now whether they are read-write, or until when to wait;
    /// `Stop` unless connected to a read-only server that is staying.
    pub fn poll_probe(&mut self, now: Instant) -> Probe {
        let Some(schedule) = self.probe.filter(|_| self.is_probing()) else {
            return Probe::Stop;
        };
        if now < schedule.due {
            return Probe::WaitUntil(schedule.due);
        }
        let Some(host) = self.hosts.next_probe() else {
            return Probe::Stop;
        };
        let wait = schedule.wait.saturating_mul(2).min(MAX_PROBE_INTERVAL);
        self.probe = Some(ProbeSchedule {
            due: now + wait,
            wait,
        });
        Probe::Ask(host)
    }

    /// The answer of `target` to a probe: `read_write` if it said `rw`. A
    /// read-write address, while still connected read-only, is connected
    /// to next, at once: the current connection is to be dropped (see
    /// [`Session::poll_disconnect`]), and this returns true.
    pub fn handle_probe(&mut self, target: &Target, read_write: bool) -> bool {
        if !read_write || !self.is_probing() {
            return false;
        }
        log::info!("{target} is read-write: leaving the read-only server");
        self.probe = None;
        self.hosts.prefer(target);
        self.request_disconnect(Error::ConnectionLoss);
        true
    }

    /// True while a read-write server is being looked for: connected to a
    /// read-only server, with another host to ask and no reason to leave
    /// yet. Not while closing: the read-only server closes a session it
    /// created itself, and refuses the ensemble's, which sends the close on
    /// anyway.
    pub fn is_probing(&self) -> bool {
        self.probe.is_some()
            && self.state == State::ConnectedReadOnly
            && self.conn == Conn::Established
            && self.disconnect.is_none()
            && self.closing.is_none()
    }
}
