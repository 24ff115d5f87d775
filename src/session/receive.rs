//! What arrives from a server: the handshake response, replies matched to
//! their requests, and notifications.

use std::time::{Duration, Instant};

use super::{
    malformed, AuthWaiter, Conn, Error, Event, Pending, Purpose, Release, ReleaseOutcome, Result,
    Session, State, WatchKind, WatchedEvent,
};
use crate::proto::{
    read_notification, read_reply_header, write_request, ConnectResponse, DecodeError, ErrorCode,
    EventType, KeeperState, MultiResponse, OpCode, Record, Response, WatcherType, AUTH_XID,
    NOTIFICATION_XID, PASSWORD_LEN, PING_XID,
};

impl<T, W: Clone> Session<T, W> {
    pub(super) fn handle_frame(&mut self, now: Instant, payload: &[u8]) -> Result<()> {
        match self.conn {
            Conn::Handshaking { .. } => self.handle_handshake(now, payload),
            Conn::Established => self.handle_reply(payload),
            Conn::None => Ok(()),
        }
    }

    fn handle_handshake(&mut self, now: Instant, payload: &[u8]) -> Result<()> {
        if let Some(code) = ConnectResponse::refusal(payload) {
            return Err(Error::from_code(code));
        }
        let response = ConnectResponse::from_bytes(payload)?;
        if response.is_expired() {
            if self.closing.is_some() {
                // Over on the servers, maybe by a closeSession whose reply
                // was lost: what closing was for.
                self.end_close(Ok(()));
            } else {
                self.terminate(State::Expired, Error::SessionExpired);
            }
            return Ok(());
        }
        if response.passwd.len() != PASSWORD_LEN {
            return Err(malformed("session password length"));
        }
        // Id 0 names no session: the next handshake would ask for a new
        // one, and the client would go on in it without an expiry.
        if response.session_id == 0 {
            return Err(malformed("handshake: session id 0"));
        }
        if response.read_only && !self.config.can_be_read_only {
            return Err(Error::NotReadOnly);
        }
        // A resume (see `handle_connected`) is granted for that very session
        // or refused as expired; a server that hands out another one is
        // broken, and believing it would lose the session on every other
        // server.
        if self.seen_rw_server
            && self.session_id != 0
            && (response.session_id != self.session_id || response.passwd != self.passwd)
        {
            return Err(malformed(
                "handshake: another session than the one being resumed",
            ));
        }
        self.session_id = response.session_id;
        self.passwd = response.passwd;
        // Resumed by a read-only server (before 3.8), the session is not
        // heard of by the quorum (see `Session::kept_by_read_only`), which
        // expires it by the timeout it granted, not by this server's.
        let resumed_read_only = response.read_only && self.seen_rw_server;
        let granted = Duration::from_millis(response.timeout_ms.unsigned_abs().into());
        self.shorter_connection_grant = None;
        match self.negotiated {
            Some(negotiated) if resumed_read_only => {
                self.shorter_connection_grant = (granted < negotiated).then_some(granted);
            }
            _ => self.negotiated = Some(granted),
        }
        if !resumed_read_only {
            self.last_heard = now;
        }
        self.seen_rw_server |= !response.read_only;
        self.conn = Conn::Established;
        self.hosts.connected(now);
        if response.read_only {
            self.set_state(State::ConnectedReadOnly);
            self.start_probing(now);
        } else {
            self.set_state(State::Connected);
        }
        self.prime(now);
        Ok(())
    }

    /// After a handshake: credentials, watches, guaranteed deletes, then the
    /// requests that waited for the connection, in that order.
    fn prime(&mut self, now: Instant) {
        let mut deferred = std::mem::take(&mut self.deferred_auth_waiters);
        for (i, auth) in self.auths.iter().enumerate() {
            // Once for each caller still waiting for these credentials, so
            // that each has a reply of its own; once with none waiting.
            let mut written = false;
            loop {
                let token = deferred
                    .iter()
                    .position(|(index, _, _)| *index == i)
                    .map(|at| deferred.swap_remove(at).1);
                if written && token.is_none() {
                    break;
                }
                write_request(&mut self.outbox, AUTH_XID, OpCode::Auth, auth);
                self.auth_waiters.push_back(AuthWaiter { token, sent: now });
                written = true;
            }
        }
        self.set_watches_again(now);
        for (path, version) in self.background.clone() {
            let _ = self.send_background_delete(now, path, version);
        }
        if self.closing.is_some() {
            self.send_close(now);
        }
        for q in std::mem::take(&mut self.queued) {
            self.send_encoded(now, q);
        }
        self.last_send = now;
    }

    fn handle_reply(&mut self, payload: &[u8]) -> Result<()> {
        let (header, body) = read_reply_header(payload)?;
        match header.xid {
            NOTIFICATION_XID => {
                let event = read_notification(&header, body)?;
                let watchers = self.watches.fire(event.event_type, &event.path);
                if !watchers.is_empty() {
                    let path = self.strip_chroot(event.path);
                    self.events.push_back(Event::Watch {
                        watchers,
                        event: WatchedEvent {
                            event_type: event.event_type,
                            state: event.state,
                            path,
                        },
                    });
                }
                Ok(())
            }
            PING_XID => Ok(no_body(body, "ping reply")?),
            AUTH_XID => {
                // Refused as a whole, before it answers anyone: the waiter
                // is then one of the connection's in flight.
                if header.err == 0 {
                    no_body(body, "auth reply")?;
                }
                // Only an auth packet sent on this connection is answered;
                // an unasked-for auth failure must not end the session.
                let Some(waiter) = self.auth_waiters.pop_front() else {
                    return Err(Error::UnexpectedReply {
                        expected: None,
                        received: AUTH_XID,
                    });
                };
                self.last_auth_reply = self.last_recv;
                let result = match header.err {
                    0 => Ok(Response::Empty),
                    code => Err(Error::from_code(code)),
                };
                let failed = result.is_err();
                if let Some(token) = waiter.token {
                    self.events.push_back(Event::Reply { token, result });
                }
                if failed {
                    self.terminate(State::AuthFailed, Error::AuthFailed);
                }
                Ok(())
            }
            xid => {
                let Some(pending) = self.pending.pop_front() else {
                    return Err(Error::UnexpectedReply {
                        expected: None,
                        received: xid,
                    });
                };
                self.last_reply = self.last_recv;
                if pending.xid != xid {
                    let expected = Some(pending.xid);
                    // A server refuses an operation it does not know (a
                    // multiRead before 3.6, whoAmI before 3.7...) as it
                    // reads it, ahead of the replies of requests still in
                    // its pipeline, and then closes the connection: the
                    // refused call is told so (not `ConnectionLoss`, which
                    // would have it asked again), and a refused batch ends
                    // read batching (see `complete_reads`).
                    let refused = (header.err == ErrorCode::Unimplemented.code())
                        .then(|| self.pending.iter().position(|p| p.xid == xid))
                        .flatten()
                        .and_then(|at| self.pending.remove(at));
                    if let Some(refused) = refused {
                        self.complete(refused.purpose, Err(Error::Unimplemented));
                    }
                    self.fail(pending.purpose, Error::ConnectionLoss);
                    return Err(Error::UnexpectedReply {
                        expected,
                        received: xid,
                    });
                }
                if header.zxid > 0 {
                    self.last_zxid = self.last_zxid.max(header.zxid);
                }
                let result = match header.err {
                    0 => decode_reply(&pending, body)
                        .map_err(Error::Protocol)
                        .and_then(error_in_body),
                    code => Err(Error::from_code(code)),
                };
                let protocol_error = match &result {
                    Err(e @ Error::Protocol(_)) => Some(e.clone()),
                    _ => None,
                };
                self.complete(pending.purpose, result);
                protocol_error.map_or(Ok(()), Err)
            }
        }
    }

    /// A frame over the limit fails the user's call whose reply is due
    /// with the limit's error, which asking again would not change (a
    /// listing of a huge directory, say), rather than with the
    /// `ConnectionLoss` of the others in flight. It is refused from its
    /// length and `xid`, not waited for: replies come in order, so it is
    /// the reply to the call at the front if it carries that call's xid (a
    /// notification over a limit lowered below a long path does not). The
    /// client's own requests go on as after any lost connection: a release,
    /// closeSession, and a batch of reads, one of them too large, but
    /// which is unknown, and the others may be small. Those reads fail
    /// with `ConnectionLoss`, and the next connection's reads go one by
    /// one: each read asked again then gets its own outcome, the large one
    /// this error, rather than be batched, and refused, again and again.
    /// The frame's bytes are not read, so the connection goes.
    pub(super) fn refuse_oversized_reply(&mut self, xid: i32, error: DecodeError) {
        let front = self.pending.front().filter(|p| p.xid == xid);
        if front.is_some_and(|p| matches!(p.purpose, Purpose::Reads { .. })) {
            self.reads_alone_on = Some(self.connections.saturating_add(1));
        }
        let blamed = front.is_some_and(|p| matches!(p.purpose, Purpose::User { .. }));
        if blamed {
            if let Some(pending) = self.pending.pop_front() {
                self.complete(pending.purpose, Err(Error::Protocol(error.clone())));
            }
        }
        self.request_disconnect(Error::Protocol(error));
    }

    fn complete(&mut self, purpose: Purpose<T, W>, result: Result<Response>) {
        match purpose {
            Purpose::User { token, watch } => {
                if let Some(w) = watch {
                    let kind = match (&result, w.kind) {
                        (Ok(_), WatchKind::Exist) => Some(WatchKind::Data),
                        (Err(Error::NoNode), WatchKind::Exist) => Some(WatchKind::Exist),
                        (Ok(_), kind) => Some(kind),
                        (Err(_), _) => None,
                    };
                    if let Some(kind) = kind {
                        self.watches.add(kind, w.path, w.watcher);
                    }
                }
                self.events.push_back(Event::Reply { token, result });
            }
            Purpose::RemoveWatches {
                token,
                path,
                watcher_type,
            } => {
                if result.is_ok() {
                    self.remove_local_watchers(path, watcher_type);
                }
                self.events.push_back(Event::Reply { token, result });
            }
            Purpose::Reads { reads } => self.complete_reads(reads, result),
            Purpose::Writes { tokens, ops } => self.complete_writes(tokens, ops, result),
            Purpose::SetWatches { record, throttled } => {
                self.set_watches_answered(record, throttled, result)
            }
            Purpose::Background {
                path,
                noted,
                throttled,
            } => {
                match noted_outcome(noted, &result) {
                    Some(ReleaseOutcome::Refused(_)) => {
                        // Nothing was applied, and the node is still there:
                        // it goes again as a plain delete (still a
                        // background one), unless closeSession went out
                        // after the transaction.
                        if !self.background_can_go() {
                            return;
                        }
                        log::debug!("release note of {path} refused; deleting it plainly");
                        let now = self.last_recv;
                        return self.send_background(now, Release::plain(path));
                    }
                    Some(ReleaseOutcome::Unlike) => {
                        // The node may still be there: it stays among the
                        // background deletes, which the next connection
                        // sends again.
                        log::warn!("release of {path} answered unlike its ops; reconnecting");
                        return self
                            .request_disconnect(malformed("multi reply unlike its release's ops"));
                    }
                    _ => {}
                }
                if let Err(e) = &result {
                    if answered_for_now(e) {
                        // The connection stays up, and no reconnect would
                        // send it again: again on it, but not at once, when
                        // the server would most likely refuse it again. (One
                        // the server timed out may yet be applied: a delete
                        // done already is `NoNode`, which counts as done.)
                        let now = self.last_recv;
                        log::debug!(
                            "background delete of {path} refused for now ({e}); again after a back-off"
                        );
                        return self.retry_throttled(now, path, throttled.saturating_add(1));
                    }
                    if refused_for_now(e) {
                        // Left among the background deletes for the next
                        // connection's `prime`: sending it again here could
                        // only meet the same refusal, in a loop.
                        log::debug!("background delete of {path} refused for now ({e}); kept for the next connection");
                        return;
                    }
                }
                if let Some(i) = self.background.iter().position(|(p, _)| *p == path) {
                    self.background.swap_remove(i);
                }
                match result {
                    Ok(_) | Err(Error::NoNode) => {}
                    Err(e) => log::warn!("background delete of {path} failed: {e}"),
                }
            }
            Purpose::Close => self.close_replied(result),
        }
    }

    /// After a removeWatches succeeded: removes the local watchers it took
    /// and tells each.
    pub(super) fn remove_local_watchers(&mut self, path: String, watcher_type: WatcherType) {
        let kinds: &[WatchKind] = match watcher_type {
            WatcherType::Children => &[WatchKind::Child],
            WatcherType::Data => &[WatchKind::Data, WatchKind::Exist],
            WatcherType::Persistent => &[WatchKind::Persistent],
            WatcherType::PersistentRecursive => &[WatchKind::PersistentRecursive],
            WatcherType::Any => &[
                WatchKind::Data,
                WatchKind::Exist,
                WatchKind::Child,
                WatchKind::Persistent,
                WatchKind::PersistentRecursive,
            ],
        };
        let removed = self.watches.remove(&path, kinds);
        if removed.is_empty() {
            return;
        }
        let path = self.strip_chroot(path);
        for (kind, watcher) in removed {
            let event_type = match kind {
                WatchKind::Data | WatchKind::Exist => EventType::DataWatchRemoved,
                WatchKind::Child => EventType::ChildWatchRemoved,
                WatchKind::Persistent | WatchKind::PersistentRecursive => {
                    EventType::PersistentWatchRemoved
                }
            };
            self.events.push_back(Event::Watch {
                watchers: vec![watcher],
                event: WatchedEvent {
                    event_type,
                    state: KeeperState::SyncConnected,
                    path: path.clone(),
                },
            });
        }
    }

    fn strip_chroot(&self, path: String) -> String {
        strip_chroot(self.config.chroot.as_deref(), path)
    }
}

/// A server path as seen under `chroot`: the chroot itself becomes `/`, a
/// path below it loses the prefix, and any other path is left as it is.
pub(crate) fn strip_chroot(chroot: Option<&str>, path: String) -> String {
    let Some(chroot) = chroot else {
        return path;
    };
    match rest_below(chroot, &path) {
        Some("") => "/".to_owned(),
        Some(rest) => rest.to_owned(),
        None => path,
    }
}

/// True if `path` (a server path) is `chroot` or below it: what
/// [`strip_chroot`] turns into a path of the client's.
pub(crate) fn within_chroot(chroot: Option<&str>, path: &str) -> bool {
    chroot.map_or(true, |chroot| rest_below(chroot, path).is_some())
}

/// What follows `chroot` in `path` (empty for the chroot itself), if `path`
/// is at or below it: `/apple` is not below `/app`.
fn rest_below<'p>(chroot: &str, path: &'p str) -> Option<&'p str> {
    path.strip_prefix(chroot)
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// True if a delete (a background one, or `unlock`'s) was refused in a way
/// another server, or the same one later, may not repeat (a read-only server, a timeout), or its
/// reply made no sense, which drops the connection and so leaves the
/// outcome as open as a disconnect does. (Throttling is retried on the same
/// connection first.) Every other error means
/// the delete can never succeed (NoAuth, NotEmpty, BadVersion at a version
/// other than -1).
pub(crate) fn refused_for_now(error: &Error) -> bool {
    error.is_retryable() || matches!(error, Error::NotReadOnly | Error::Protocol(_))
}

/// True for a refusal a server makes on a connection that stays up and
/// may not repeat: it throttled the request (`ThrottledOp`: not applied),
/// or timed it out itself (`OperationTimeout`, `RequestTimeout`, which
/// ClickHouse Keeper sends for a write not committed in time). Nothing
/// but the requester asks again.
pub(crate) fn answered_for_now(error: &Error) -> bool {
    matches!(
        error,
        Error::ThrottledOp | Error::OperationTimeout | Error::RequestTimeout
    )
}

/// Checks that a reply that carries no body (a ping's, or an auth
/// packet's success) has none.
fn no_body(body: &[u8], reply: &'static str) -> Result<(), DecodeError> {
    match body.len() {
        0 => Ok(()),
        extra => Err(DecodeError::TrailingBytes(extra).in_field(reply)),
    }
}

/// Decodes a successful reply's body. A transaction's reply may hold no
/// more results than it has ops, and a batch's than it has requests: a
/// result past them is refused before it is decoded.
fn decode_reply<T, W>(pending: &Pending<T, W>, body: &[u8]) -> Result<Response, DecodeError> {
    let results = match &pending.purpose {
        Purpose::Reads { reads } => reads.len(),
        Purpose::Writes { tokens, .. } if tokens.len() > 1 => tokens.len(),
        _ if matches!(pending.op, OpCode::Multi | OpCode::MultiRead) => pending.max_results,
        _ => return Response::decode(pending.op, body),
    };
    MultiResponse::from_bytes_for(body, results).map(Response::Multi)
}

/// An addWatch reply carries an error code in its body too (servers send
/// 0 there, and a failure in the header): one there is the call's error,
/// so that its watcher is not registered while the call fails.
fn error_in_body(response: Response) -> Result<Response> {
    match response {
        Response::AddWatch(body) if body.err != 0 => Err(Error::from_code(body.err)),
        response => Ok(response),
    }
}

/// How a noted release's transaction ended, if `noted` and it was answered.
fn noted_outcome(noted: bool, result: &Result<Response>) -> Option<ReleaseOutcome> {
    match result {
        Ok(Response::Multi(reply)) if noted => Some(ReleaseOutcome::of(&reply.results)),
        _ => None,
    }
}
