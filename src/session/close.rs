//! Closing a session: closeSession goes to a read-write server, through as
//! many reconnects as it takes, until a server confirms the session is over
//! or the close's deadline (`connect_timeout` after `close`) passes. Until
//! then the servers keep the session's ephemeral nodes, and so its locks.

use std::time::{Duration, Instant};

use super::hosts::share_among;
use super::receive::answered_for_now;
use super::{Conn, Deadline, Error, Purpose, Response, Result, Session, State};
use crate::proto::OpCode;

/// A close under way.
#[derive(Debug, Clone, Copy)]
pub(super) struct Closing {
    since: Instant,
    /// Connections and connection attempts that ended during the close
    /// without confirming it: the hosts that have had their turn.
    hosts_tried: usize,
    /// What the connection attempt under way (lookup, TCP connect and
    /// handshake) may take: from when it started, or from the close for
    /// one already under way then, its share of what was left of the
    /// close's deadline.
    attempt_share: Option<(Instant, Duration)>,
}

impl<T, W: Clone> Session<T, W> {
    /// Closes the session: sends closeSession, after which the server
    /// deletes the session's ephemeral nodes. While disconnected, or on a
    /// read-only server (which refuses it), it goes out after the next
    /// handshake with a read-write server. Unanswered on one connection for
    /// its share of what is left of the close's deadline, with other hosts
    /// still to try, it moves on to the next host. The session ends when a
    /// server confirms it (its reply, or a resume refused as expired), or
    /// at the close's deadline; [`close_outcome`](Self::close_outcome)
    /// tells which.
    pub fn close(&mut self, now: Instant) {
        if self.fatal.is_some() || self.closing.is_some() {
            return;
        }
        self.closing = Some(Closing {
            since: now,
            hosts_tried: 0,
            attempt_share: None,
        });
        for q in std::mem::take(&mut self.queued) {
            self.fail(q.purpose, Error::Closed);
        }
        self.fail_delayed(&Error::Closed);
        if self.conn == Conn::Established {
            // The reply to closeSession ends the session; see `close_replied`.
            self.send_close(now);
        } else if !self.seen_rw_server {
            // Only a read-write server can have given the session ephemeral
            // nodes: there is nothing on the servers to close.
            self.end_close(Ok(()));
        } else {
            // An attempt under way, or one whose host is chosen already,
            // was planned without the close: it gets its share from now.
            // One still waiting out a pause starts now: the pause spares
            // servers a reconnect loop, while each moment closeSession
            // waits keeps the session's locks from the others. A
            // handshake that completes sends closeSession (`prime`).
            if self.conn == Conn::None {
                self.attempt_starts = self.attempt_starts.map(|starts| starts.min(now));
                // Nor does the host after it, should that attempt fail.
                self.hosts.cut_pause();
            }
            self.plan_close_attempt(now);
        }
    }

    /// How a [`close`](Self::close) ended: `Ok` once a server confirmed the
    /// session over, the error that ended it otherwise (a `Timeout` when no
    /// read-write server confirmed it in time, when its ephemeral nodes stay
    /// until the session times out), or the [`abort`](Self::abort) that
    /// ended it. `None` while closing, and for a session that was not
    /// closed with `close` (expired before, say).
    pub fn close_outcome(&self) -> Option<Result<()>> {
        self.close_outcome.clone()
    }

    pub(super) fn send_close(&mut self, now: Instant) {
        let _ = self.send(now, OpCode::CloseSession, &(), Purpose::Close);
    }

    /// The reply to closeSession.
    pub(super) fn close_replied(&mut self, result: Result<Response>) {
        match result {
            Ok(_) => self.end_close(Ok(())),
            // A read-only server cannot close a session of the ensemble: on
            // to the next host, whose handshake asks for a read-write server.
            // A session another connection has taken over lives on there:
            // the next handshake takes it back, and closes it.
            Err(e @ (Error::NotReadOnly | Error::SessionMoved)) => self.request_disconnect(e),
            // Throttled, or timed out by the server itself (ClickHouse
            // Keeper's RequestTimeout): not closed, and asking again may
            // close it, through the next handshake, while the close's
            // time lasts. Ending here would leave the session's nodes, its
            // locks, for a whole session timeout.
            Err(e) if answered_for_now(&e) => self.request_disconnect(e),
            Err(e) => self.end_close(Err(e)),
        }
    }

    /// True once the close's deadline has passed: the caller then ends it
    /// with [`give_up_closing`](Self::give_up_closing).
    pub(super) fn close_overdue(&self, now: Instant) -> bool {
        self.close_deadline().is_some_and(|at| now >= at)
    }

    pub(super) fn close_deadline(&self) -> Option<Instant> {
        self.closing
            .filter(|_| self.fatal.is_none())
            .map(|closing| closing.since + self.config.connect_timeout)
    }

    /// The earliest of the close's timers: its deadline, and the moment
    /// closeSession, unanswered on this connection, gives way to the next
    /// host.
    pub(super) fn next_close_timer(&self) -> Option<Instant> {
        let reply = self.close_reply_timer().map(|(at, _)| at);
        [self.close_deadline(), reply].into_iter().flatten().min()
    }

    /// When closeSession, sent on this connection and not answered yet,
    /// gives way to the next host, and how long it was given: its share,
    /// from when it was sent, of what was left of the close's deadline
    /// among the hosts not tried yet during the close (this one included).
    /// A connection gone silent (a hung server, a partition with the TCP
    /// connection still up) is otherwise given up on only at the read
    /// timeout, 2/3 of the session timeout since it was last heard, which
    /// is often after the close's deadline: the close would fail, and the
    /// session keep its ephemeral nodes until it times out, with another
    /// host in reach that could have confirmed it at once. `None` for the
    /// last host not tried (and so with a single host), which has all that
    /// is left: there is nowhere else to go.
    fn close_reply_timer(&self) -> Option<(Instant, Duration)> {
        let untried = self.hosts_untried()?;
        let deadline = self.close_deadline()?;
        if untried <= 1 || self.conn != Conn::Established {
            return None;
        }
        let sent = self
            .pending
            .iter()
            .find(|p| matches!(p.purpose, Purpose::Close))?
            .sent;
        let share = share_among(deadline.saturating_duration_since(sent), untried);
        Some((sent + share, share))
    }

    /// How many hosts have not had their turn yet during the close, the
    /// one connected to or being tried included; `None` when not closing.
    fn hosts_untried(&self) -> Option<usize> {
        let closing = self.closing?;
        Some(self.hosts.len().saturating_sub(closing.hosts_tried).max(1))
    }

    /// A connection, or an attempt at one, ended during the close: its
    /// host has had its turn.
    pub(super) fn close_attempt_ended(&mut self) {
        if let Some(closing) = &mut self.closing {
            closing.hosts_tried = closing.hosts_tried.saturating_add(1);
        }
    }

    /// A connection attempt during the close is due to start at `starts`:
    /// it gets its share of what will be left of the close's deadline then,
    /// among the hosts not tried yet (the last gets all of it). Without
    /// it, a TCP connect to a host that drops the packets (which only the
    /// attempt's timeout ends) could run past the close's deadline, and a
    /// hung server's handshake could take the time the next host needed.
    pub(super) fn plan_close_attempt(&mut self, starts: Instant) {
        let (Some(untried), Some(deadline)) = (self.hosts_untried(), self.close_deadline()) else {
            return;
        };
        let share = share_among(deadline.saturating_duration_since(starts), untried);
        if let Some(closing) = &mut self.closing {
            closing.attempt_share = Some((starts, share));
        }
    }

    /// What the connection attempt under way may take of the close's
    /// deadline; see [`plan_close_attempt`](Self::plan_close_attempt).
    pub(super) fn close_attempt_share(&self) -> Option<Duration> {
        self.closing
            .and_then(|closing| closing.attempt_share)
            .map(|(_, share)| share)
    }

    /// When the connection attempt under way must give way to the next
    /// host, during a close: at the end of its share of what is left of
    /// the close's deadline among the hosts not tried yet, from its start,
    /// or from the close for one already under way then (see
    /// [`close`](Self::close)). The caller ends a
    /// lookup or TCP connect still under way then, which it started with
    /// timeouts of its own that did not know of the close, and reports it
    /// with [`handle_connect_failed`](Self::handle_connect_failed); the
    /// session ends a handshake itself. `None` when not closing.
    pub fn close_attempt_end(&self) -> Option<Instant> {
        self.closing
            .filter(|_| self.fatal.is_none())
            .and_then(|closing| closing.attempt_share)
            .map(|(starts, share)| starts + share)
    }

    /// The close's timers: at its deadline the close ends (with no
    /// connection) or the connection is dropped, and closeSession
    /// unanswered past its share on this connection moves on to the next
    /// host.
    pub(super) fn handle_close_timers(&mut self, now: Instant) {
        if self.close_overdue(now) {
            if self.conn == Conn::None {
                // No connection came up to carry closeSession in time.
                self.give_up_closing();
            } else {
                self.request_disconnect(Error::Closed);
            }
        } else if let Some((at, share)) = self.close_reply_timer() {
            if now >= at {
                self.request_disconnect(Error::Timeout {
                    deadline: Deadline::CloseReply,
                    after: share,
                });
            }
        }
    }

    pub(super) fn give_up_closing(&mut self) {
        log::warn!(
            "no read-write server confirmed closeSession within {:?}: the session's \
             ephemeral nodes stay until it times out",
            self.config.connect_timeout
        );
        self.end_close(Err(Error::Timeout {
            deadline: Deadline::Close,
            after: self.config.connect_timeout,
        }));
    }

    /// Ends the session as closed. Later calls fail with `Closed` whatever
    /// the outcome, which only `close_outcome` reports.
    pub(super) fn end_close(&mut self, outcome: Result<()>) {
        if self.fatal.is_none() {
            self.close_outcome = Some(outcome);
        }
        self.terminate(State::Closed, Error::Closed);
    }
}
