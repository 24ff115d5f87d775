//! Requests made to go later: a question the server throttled, or a watch
//! it refused to set, asked again once its back-off is over. Until then
//! the request is only data here, so the I/O thread needs no timer of its
//! own for it.

use std::time::Instant;

use super::{reregister, Conn, Pending, Purpose, Queued, Session, WatchRequest};
use crate::error::{Error, Result};
use crate::proto::{OpCode, Record};

/// A request held back until `due`, encoded with a placeholder xid.
#[derive(Debug)]
pub(super) struct Delayed<T, W> {
    due: Instant,
    request: Queued<T, W>,
}

impl<T, W> Delayed<T, W> {
    /// Whether it is a throttled re-registration of watches.
    fn is_rewatch(&self) -> bool {
        matches!(self.request.purpose, Purpose::SetWatches { .. })
    }
}

impl<T, W: Clone> Session<T, W> {
    /// Queues a request that goes only once `due` has come
    /// ([`Session::submit`] is this with `due` now): then at once if
    /// connected, otherwise after the next handshake, failing with
    /// `ConnectionLoss` if none completes within the session timeout from
    /// `due`. A close or the session's end fails it as it fails requests
    /// waiting for a connection. Until `due`, it is in
    /// [`Session::poll_timeout`], and it is not among the requests
    /// [`Session::withdraw_queued`] can take back.
    pub fn submit_at(
        &mut self,
        now: Instant,
        due: Instant,
        op: OpCode,
        body: &impl Record,
        token: T,
        watch: Option<WatchRequest<W>>,
    ) -> Result<()> {
        self.check_open()?;
        if let Some(watch) = &watch {
            reregister::check_fits(&watch.path, self.config.max_request)?;
        }
        let purpose = Purpose::User { token, watch };
        if due <= now {
            return self.enqueue(now, op, body, purpose);
        }
        let request = Queued {
            op,
            max_results: body.max_results(),
            frame: self.encode_unsent(op, body)?,
            purpose,
            // Set when it is due.
            deadline: due,
        };
        self.insert_delayed(due, request);
        Ok(())
    }

    /// Holds `request`, encoded already, until `due`.
    pub(super) fn insert_delayed(&mut self, due: Instant, request: Queued<T, W>) {
        let at = self.delayed.partition_point(|d| d.due <= due);
        self.delayed.insert(at, Delayed { due, request });
    }

    /// Drops re-registrations of watches waiting out a back-off: the next
    /// handshake sets every watch again.
    pub(super) fn drop_delayed_set_watches(&mut self) {
        self.delayed.retain(|d| !d.is_rewatch());
    }

    /// Sends at once the re-registrations of watches waiting out a
    /// throttle's back-off, their back-off cut short: a request sent after
    /// them must not overtake them, or its reply could show data newer
    /// than a change whose event the re-registration is still to bring.
    /// Not on a connection being dropped, which takes them with it (the
    /// next handshake sets every watch again), nor after closeSession.
    pub(super) fn send_delayed_set_watches(&mut self, now: Instant) {
        if self.disconnect.is_some() || !self.background_can_go() {
            return;
        }
        if !self.has_delayed_set_watches() {
            return;
        }
        let (rewatch, rest) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition::<Vec<_>, _>(Delayed::is_rewatch);
        self.delayed = rest;
        for delayed in rewatch {
            if let Some(request) = self.still_wanted(delayed.request) {
                self.send_encoded(now, request);
            }
        }
    }

    /// True while a throttled re-registration of watches waits out its
    /// back-off: no later request may overtake it.
    pub(super) fn has_delayed_set_watches(&self) -> bool {
        self.delayed.iter().any(Delayed::is_rewatch)
    }

    /// What the delayed requests are for.
    pub(super) fn delayed_purposes(&self) -> impl Iterator<Item = &Purpose<T, W>> {
        self.delayed.iter().map(|d| &d.request.purpose)
    }

    /// When the first delayed request is due.
    pub(super) fn next_delayed(&self) -> Option<Instant> {
        self.delayed.first().map(|d| d.due)
    }

    /// Sends, or queues for the next connection, the delayed requests due
    /// by `now`, in the order they fall due, except that re-registrations
    /// of watches due now go first, as they go ahead of any request made
    /// meanwhile (see [`Session::send_delayed_set_watches`]): a request
    /// due a moment earlier would otherwise overtake one due in the same
    /// tick. None while this connection is
    /// being dropped (a timeout in this same tick): written into it, they
    /// would fail with `ConnectionLoss`, unsent. They wait for the drop,
    /// which takes the re-registrations of watches (the next handshake
    /// makes its own) and leaves the others due, to be queued then.
    pub(super) fn release_due_delayed(&mut self, now: Instant) {
        if self.conn == Conn::Established && self.disconnect.is_some() {
            return;
        }
        let due = self.delayed.partition_point(|d| d.due <= now);
        let timeout = self.timeout_in_use();
        let mut due_now: Vec<Delayed<T, W>> = self.delayed.drain(..due).collect();
        // Stable: otherwise in the order they fell due.
        due_now.sort_by_key(|d| !d.is_rewatch());
        for Delayed { request, .. } in due_now {
            if self.conn == Conn::Established {
                self.send_held_back(now);
                if let Some(request) = self.still_wanted(request) {
                    self.send_encoded(now, request);
                }
            } else {
                self.queued.push_back(Queued {
                    deadline: now + timeout,
                    ..request
                });
            }
        }
    }

    /// Fails every delayed request with `error`.
    pub(super) fn fail_delayed(&mut self, error: &Error) {
        for Delayed { request, .. } in std::mem::take(&mut self.delayed) {
            self.fail(request.purpose, error.clone());
        }
    }

    /// Writes a request encoded earlier (with a placeholder xid) to the
    /// outbox under the next xid.
    pub(super) fn send_encoded(&mut self, now: Instant, request: Queued<T, W>) {
        let xid = self.next_xid();
        let mut frame = request.frame;
        if let Some(slot) = frame.get_mut(4..8) {
            slot.copy_from_slice(&xid.to_be_bytes());
        }
        self.outbox.extend_from_slice(&frame);
        self.pending.push_back(Pending {
            xid,
            op: request.op,
            max_results: request.max_results,
            purpose: request.purpose,
            sent: now,
        });
        self.last_send = now;
    }
}
