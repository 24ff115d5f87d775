//! Deferred background deletes: a released lock node's delete waits a moment
//! in the session, so that the next acquisition on the same lock can carry it
//! in one transaction (one log write on the servers instead of two).

use std::time::Instant;

use super::{Conn, Purpose, Result, Session};
use crate::proto::{DeleteRequest, OpCode};

impl<T, W: Clone> Session<T, W> {
    /// Like [`Session::submit_background_delete`] (at any version), except
    /// that the delete waits until `until` before it is sent. It goes earlier
    /// if any other request is sent first, just before that request, so this
    /// client's order holds. [`Session::withdraw_deferred_delete`] can take
    /// it back meanwhile, to send it in a transaction of its own making.
    ///
    /// The session has no timer for this: whoever drives it calls
    /// [`Session::send_due_deletes`] at [`Session::next_deferred_deadline`].
    pub fn defer_background_delete(
        &mut self,
        now: Instant,
        path: String,
        until: Instant,
    ) -> Result<()> {
        if until <= now {
            return self.submit_background_delete(now, path, -1);
        }
        self.check_open()?;
        self.background.push((path.clone(), -1));
        // While disconnected, the reconnect sends every background delete.
        if self.conn == Conn::Established {
            self.deferred.push((path, until));
        }
        Ok(())
    }

    /// When the earliest deferred delete is due.
    pub fn next_deferred_deadline(&self) -> Option<Instant> {
        self.deferred.iter().map(|(_, until)| *until).min()
    }

    /// True if a deferred delete waits and no reply is due that would bring
    /// the driver back (to [`Session::handle_bytes`]) in time to look after
    /// it: only then does the driver need a timer armed for
    /// [`Session::next_deferred_deadline`]. With replies due, it can wait
    /// for the last of them, since the server would answer a delete sent
    /// earlier only after those requests anyway.
    pub fn deferred_deletes_need_timer(&self) -> bool {
        !self.deferred.is_empty() && (self.conn != Conn::Established || self.pending.is_empty())
    }

    /// Sends the deferred deletes if the earliest is due. All go, in the
    /// order they were deferred: a later one leaves at most a linger early.
    pub fn send_due_deletes(&mut self, now: Instant) {
        if self.next_deferred_deadline().is_some_and(|t| t <= now) {
            self.send_deferred_deletes(now);
        }
    }

    /// Sends every deferred delete now, in order.
    pub fn send_deferred_deletes(&mut self, now: Instant) {
        for (path, _) in std::mem::take(&mut self.deferred) {
            self.send_background(now, path);
        }
    }

    pub(super) fn send_background(&mut self, now: Instant, path: String) {
        let request = DeleteRequest {
            path: path.clone(),
            version: -1,
        };
        // A path that fits a create fits a delete: this cannot fail.
        let _ = self.send(now, OpCode::Delete, &request, Purpose::Background { path });
    }

    /// Takes back a deferred delete of a node directly under `dir`, if one
    /// has not been sent yet, and returns its path. The caller must then
    /// delete the node itself and report with
    /// [`Session::settle_withdrawn_delete`]. Until then it stays among the
    /// background deletes, which a reconnect re-sends.
    pub fn withdraw_deferred_delete(&mut self, dir: &str) -> Option<String> {
        let index = self
            .deferred
            .iter()
            .position(|(path, _)| parent_dir(path) == Some(dir))?;
        Some(self.deferred.remove(index).0)
    }

    /// Reports on a withdrawn delete: `deleted` if the server deleted the
    /// node or found it gone; otherwise the delete is sent now, as a
    /// background delete (or by the next reconnect).
    pub fn settle_withdrawn_delete(&mut self, now: Instant, path: &str, deleted: bool) {
        if deleted {
            if let Some(i) = self.background.iter().position(|(p, _)| p == path) {
                self.background.swap_remove(i);
            }
        } else if self.conn == Conn::Established && self.fatal.is_none() {
            self.send_background(now, path.to_owned());
        }
    }
}

/// The directory holding `path`: `/a` for `/a/b`, `/` for `/a`.
fn parent_dir(path: &str) -> Option<&str> {
    match path.rsplit_once('/') {
        Some(("", _)) if path.len() > 1 => Some("/"),
        Some((dir, _)) if !dir.is_empty() => Some(dir),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parent_dir;

    #[test]
    fn parent_dirs() {
        assert_eq!(parent_dir("/a/b"), Some("/a"));
        assert_eq!(parent_dir("/a"), Some("/"));
        assert_eq!(parent_dir("/"), None);
        assert_eq!(parent_dir("a"), None);
    }
}
