//! Closing a session: closeSession goes to a read-write server, through as
//! many reconnects as it takes, until a server confirms the session is over
//! or the close's deadline (`connect_timeout` after `close`) passes. Until
//! then the servers keep the session's ephemeral nodes, and so its locks.

use std::time::Instant;

use super::{Conn, Error, Purpose, Response, Result, Session, State};
use crate::proto::OpCode;

impl<T, W: Clone> Session<T, W> {
    /// Closes the session: sends closeSession, after which the server
    /// deletes the session's ephemeral nodes. While disconnected, or on a
    /// read-only server (which refuses it), it goes out after the next
    /// handshake with a read-write server. The session ends when a server
    /// confirms it (its reply, or a resume refused as expired), or at the
    /// close's deadline; [`close_outcome`](Self::close_outcome) tells which.
    pub fn close(&mut self, now: Instant) {
        if self.fatal.is_some() || self.closing.is_some() {
            return;
        }
        self.closing = Some(now);
        for q in std::mem::take(&mut self.queued) {
            self.fail(q.purpose, Error::Closed);
        }
        if self.conn == Conn::Established {
            // The reply to closeSession ends the session; see `close_replied`.
            self.send_close(now);
        } else if !self.seen_rw_server {
            // Only a read-write server can have given the session ephemeral
            // nodes: there is nothing on the servers to close.
            self.end_close(Ok(()));
        }
        // Otherwise the servers hold the session until it times out: the next
        // handshake's `prime` sends closeSession.
    }

    /// How a [`close`](Self::close) ended: `Ok` once a server confirmed the
    /// session over, the error that ended it otherwise (a `Timeout` when no
    /// read-write server confirmed it in time, when its ephemeral nodes stay
    /// until the session times out). `None` while closing, and for a session
    /// that was not closed with `close` (expired before, say).
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
            .map(|since| since + self.config.connect_timeout)
    }

    pub(super) fn give_up_closing(&mut self) {
        log::warn!(
            "no read-write server confirmed closeSession within {:?}: the session's \
             ephemeral nodes stay until it times out",
            self.config.connect_timeout
        );
        self.end_close(Err(Error::Timeout {
            what: "a read-write server to confirm closeSession",
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
