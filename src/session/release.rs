//! Deferred background deletes: a released lock node's delete waits a moment
//! in the session, so that the next acquisition on the same lock can carry it
//! in one transaction (one log write on the servers instead of two). A
//! release can also be announced: see [`Release::note`].

use std::time::{Duration, Instant};

use super::{Conn, Error, Purpose, Result, Session};
use crate::proto::{
    Acl, CreateMode, CreateRequest, DeleteRequest, MultiOp, MultiRequest, OpCode, OpResult,
};

/// The delete of a released lock node, as the session sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// The node (a server path).
    pub path: String,
    /// A path created and deleted in the delete's own transaction, so that a
    /// session watching that path for a creation learns the delete was this
    /// release (a deletion alone could also be a session's end). `None`:
    /// a plain delete.
    pub note: Option<String>,
    /// What a node created in the same transaction as this delete may
    /// conclude from its own name: see [`Successor`].
    pub successor: Option<Successor>,
}

/// The released node was held exclusively (as the lowest contender node of
/// its lock) and its release is plain. The server numbers a sequential node
/// with its parent's count of creates so far, so a node of the same `kind`
/// created in the delete's own transaction and numbered `sequence` (the
/// released node's number plus one) proves that nothing was created in the
/// directory since the released node was: no contender node can be below
/// it. The transaction's delete proves the directory is the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Successor {
    /// The kind of lock node: only a node of the same kind may conclude.
    pub kind: &'static str,
    /// The number a successor created with no other create before it gets.
    pub sequence: u32,
}

impl Release {
    /// The plain delete of `path`.
    pub fn plain(path: impl Into<String>) -> Release {
        Release {
            path: path.into(),
            note: None,
            successor: None,
        }
    }

    /// The transaction's ops: the note's create and delete, then the node's
    /// delete, which is always last.
    pub fn ops(&self) -> Vec<MultiOp> {
        let delete = |path: &str| {
            MultiOp::Delete(DeleteRequest {
                path: path.to_owned(),
                version: -1,
            })
        };
        let mut ops = Vec::with_capacity(3);
        if let Some(note) = &self.note {
            ops.push(MultiOp::Create(CreateRequest {
                path: note.clone(),
                data: None,
                acl: Acl::open_unsafe(),
                mode: CreateMode::Ephemeral,
            }));
            ops.push(delete(note));
        }
        ops.push(delete(&self.path));
        ops
    }
}

/// How a noted release's transaction (its [`Release::ops`]) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseOutcome {
    /// Applied: the node is deleted.
    Done,
    /// Nothing was applied, as the node was gone already.
    NodeGone,
    /// Nothing was applied, and the node is still there: an op before its
    /// delete (the note's) failed, with this error code.
    Refused(i32),
    /// The reply is not one a server gives to these ops (another count of
    /// results, or results of other kinds): nothing can be concluded about
    /// the node, which must be assumed still there.
    Unlike,
}

/// The ops of a noted release: the note's create and delete, and the node's
/// delete.
const NOTED_RELEASE_OPS: usize = 3;

impl ReleaseOutcome {
    /// The outcome told by a noted release's results, the node's delete
    /// last.
    pub(crate) fn of(results: &[OpResult]) -> ReleaseOutcome {
        if results.len() != NOTED_RELEASE_OPS {
            return ReleaseOutcome::Unlike;
        }
        let Some(first_failed) = results.iter().find(|r| r.err() != 0) else {
            return match results {
                [OpResult::Create(_) | OpResult::Create2(_), OpResult::Delete, OpResult::Delete] => {
                    ReleaseOutcome::Done
                }
                _ => ReleaseOutcome::Unlike,
            };
        };
        // A failed transaction answers every op with an error result.
        if !results.iter().all(|r| matches!(r, OpResult::Error(_))) {
            return ReleaseOutcome::Unlike;
        }
        let node_gone = results
            .last()
            .is_some_and(|r| matches!(Error::from_code(r.err()), Error::NoNode));
        if node_gone {
            ReleaseOutcome::NodeGone
        } else {
            ReleaseOutcome::Refused(first_failed.err())
        }
    }
}

impl<T, W: Clone> Session<T, W> {
    /// Like [`Session::submit_background_delete`] (at any version), except
    /// that the delete waits until `until` before it is sent. It goes earlier
    /// if any other request is sent first, just before that request, so this
    /// client's order holds. [`Session::withdraw_deferred_delete`] can take
    /// it back meanwhile, to send it in a transaction of its own making.
    ///
    /// The session has no timer for this: whoever drives it calls
    /// [`Session::send_due_deletes`] at [`Session::next_deferred_deadline`].
    ///
    /// A reconnect sends every background delete as a plain delete: the
    /// note only speeds a waiter up, which then lists the lock again.
    pub fn defer_background_delete(
        &mut self,
        now: Instant,
        release: Release,
        until: Instant,
    ) -> Result<()> {
        self.check_open()?;
        self.background.push((release.path.clone(), -1));
        // While disconnected, the reconnect sends every background delete.
        if self.conn == Conn::Established {
            if until <= now {
                self.send_background(now, release);
            } else {
                self.deferred.push((release, until));
            }
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
        for (release, _) in std::mem::take(&mut self.deferred) {
            self.send_background(now, release);
        }
    }

    /// Sends a release that is among the background deletes already.
    pub(super) fn send_background(&mut self, now: Instant, release: Release) {
        // A path that fits a create fits a delete (and its note is a
        // little longer): these cannot fail.
        if release.note.is_some() {
            let request = MultiRequest { ops: release.ops() };
            let purpose = Purpose::Background {
                path: release.path,
                noted: true,
                throttled: 0,
            };
            let _ = self.send(now, OpCode::Multi, &request, purpose);
        } else {
            let _ = self.send_background_delete(now, release.path, -1);
        }
    }

    /// Takes back a deferred delete of a node directly under `dir`, if one
    /// has not been sent yet, and returns it. The caller must then
    /// delete the node itself and report with
    /// [`Session::settle_withdrawn_delete`]. Until then it stays among the
    /// background deletes, which a reconnect re-sends.
    pub fn withdraw_deferred_delete(&mut self, dir: &str) -> Option<Release> {
        let index = self
            .deferred
            .iter()
            .position(|(release, _)| parent_dir(&release.path) == Some(dir))?;
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
        } else if self.background_can_go() {
            self.send_background(now, Release::plain(path));
        }
    }

    /// True if a background delete found still to do may be sent now: on a
    /// live session's connection, and not after closeSession went out on it
    /// (as it has once a connected session is closing). The server ends the
    /// session at closeSession, taking the node with it, and nothing may
    /// follow it; if no server confirms the close on this connection, the
    /// next one's `prime` sends the delete ahead of closeSession.
    pub(super) fn background_can_go(&self) -> bool {
        self.conn == Conn::Established && self.fatal.is_none() && self.closing.is_none()
    }
}

/// The first back-off of a throttled request, doubled at each throttling
/// in a row up to [`MAX_THROTTLED_BACK_OFF`].
const FIRST_THROTTLED_BACK_OFF: Duration = Duration::from_millis(100);
/// The longest back-off of a throttled request.
const MAX_THROTTLED_BACK_OFF: Duration = Duration::from_secs(2);

/// How long a request the server throttled `times` in a row (ThrottledOp:
/// refused unapplied, to shed load), or timed out itself on a connection
/// that stays up, waits before it is made again: 100 ms, doubled each time
/// up to 2 s. Asked again at once, it would add to the load the server
/// sheds, or meet the same timeout.
pub(crate) fn throttled_back_off(times: u32) -> Duration {
    let doublings = times.saturating_sub(1).min(16);
    (FIRST_THROTTLED_BACK_OFF * 2u32.pow(doublings)).min(MAX_THROTTLED_BACK_OFF)
}

/// A background delete the server throttled (ThrottledOp: not applied)
/// or timed out itself (maybe applied: again, it is `NoNode`, which counts
/// as done), waiting out its back-off before it goes again on the same
/// connection.
#[derive(Debug)]
pub(super) struct Throttled {
    path: String,
    /// Throttled this many times in a row.
    times: u32,
    due: Instant,
}

impl<T, W: Clone> Session<T, W> {
    /// Reports that the transaction carrying a withdrawn delete (see
    /// [`Session::withdraw_deferred_delete`]) was throttled (nothing was
    /// applied) or timed out by the server (maybe applied): the delete
    /// goes again on its own after a back-off, as a throttled background
    /// delete does (or with the next reconnect).
    pub fn retry_withdrawn_delete(&mut self, now: Instant, path: &str) {
        if self.background_can_go() {
            self.retry_throttled(now, path.to_owned(), 1);
        }
    }

    /// Sends the background delete of `path`, throttled `times` in a row,
    /// again after its back-off, or earlier ahead of any other request.
    pub(super) fn retry_throttled(&mut self, now: Instant, path: String, times: u32) {
        self.throttled.push(Throttled {
            path,
            times,
            due: now + throttled_back_off(times),
        });
    }

    /// When the earliest throttled delete is due, while it can go: on a
    /// connection that stays, and not after closeSession, which the server
    /// answers last.
    pub(super) fn next_throttled_retry(&self) -> Option<Instant> {
        let can_go = self.background_can_go() && self.disconnect.is_none();
        self.throttled
            .iter()
            .map(|t| t.due)
            .min()
            .filter(|_| can_go)
    }

    /// Sends every throttled delete now, in order: one that is not due yet
    /// leaves at most its back-off early.
    pub(super) fn resend_throttled_deletes(&mut self, now: Instant) {
        for throttled in std::mem::take(&mut self.throttled) {
            // Settled meanwhile (a withdrawn delete's transaction), it is
            // among the background deletes no more.
            let Some(&(_, version)) = self.background.iter().find(|(p, _)| *p == throttled.path)
            else {
                continue;
            };
            let request = DeleteRequest {
                path: throttled.path.clone(),
                version,
            };
            let purpose = Purpose::Background {
                path: throttled.path,
                noted: false,
                throttled: throttled.times,
            };
            let _ = self.send(now, OpCode::Delete, &request, purpose);
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
