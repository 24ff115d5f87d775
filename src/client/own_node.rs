//! The search for a lock node whose create may or may not have happened
//! (its reply was lost with the connection, or could not be decoded). It
//! runs on the I/O thread, one request after another, so the attempt that
//! asked can give up at its deadline and leave the rest to it: a node found
//! after that is deleted, not orphaned.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::core::{ReplyConsumer, Shared};
use super::path::join;
use super::watch_ops::children_of;
use super::Client;
use crate::error::{malformed, Error, Result};
use crate::proto::{ExistsRequest, GetChildrenRequest, OpCode, PathRecord, Record, Response};
use crate::session::throttled_back_off;

/// What a search found: our node's name and czxid, or `None` if the create
/// certainly did not happen.
pub(crate) type Found = Option<(String, i64)>;

/// How many undecodable replies a question asked until it is answered (a
/// search, say) looks past. A server that keeps sending them is broken,
/// and the question then fails with that error rather than be asked for
/// the rest of the session.
pub(crate) const MAX_UNDECODABLE_REPLIES: u32 = 3;

/// How many failures in a row on one connection of a question that got no
/// answer (see [`AskAgain`]) are asked again at once. Past them, each
/// waits a back-off, so that a server answering every try with a timeout
/// of its own (or with `ConnectionLoss`, on a connection that stays up)
/// cannot keep a question asked in a loop. A failure on a new connection
/// starts the count again: a lost connection's next try waits for a
/// reconnect anyway.
const AT_ONCE: u32 = 3;

/// Whether, and when, a question that failed is asked again. It got no
/// answer if the connection was lost (the next try waits for a reconnect,
/// and the session's end stops them), or the reply could not be decoded
/// (which drops the connection while the session lives on), up to
/// [`MAX_UNDECODABLE_REPLIES`] of them, or the server throttled it or
/// timed it out; any other outcome is its answer.
pub(crate) struct AskAgain {
    undecodable: AtomicU32,
    throttled: AtomicU32,
    /// Other failures in a row on the connection counted in `connection`.
    failed: AtomicU32,
    connection: AtomicU64,
}

impl Default for AskAgain {
    fn default() -> AskAgain {
        AskAgain {
            undecodable: AtomicU32::new(0),
            throttled: AtomicU32::new(0),
            failed: AtomicU32::new(0),
            connection: AtomicU64::new(u64::MAX),
        }
    }
}

impl AskAgain {
    /// The pause before asking again after `e`, seen when `connection`
    /// connections had been up (zero: at once), or `None` if `e` is the
    /// answer.
    pub(crate) fn pause_after(&self, e: &Error, connection: u64) -> Option<Duration> {
        let again = |count: &AtomicU32| count.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        match e {
            Error::Protocol(_) => {
                (again(&self.undecodable) <= MAX_UNDECODABLE_REPLIES).then_some(Duration::ZERO)
            }
            // Refused unapplied, to shed load: asked again at once, it
            // would add to that load.
            Error::ThrottledOp => Some(throttled_back_off(again(&self.throttled))),
            _ if e.is_retryable() => {
                if self.connection.swap(connection, Ordering::Relaxed) != connection {
                    self.failed.store(0, Ordering::Relaxed);
                }
                Some(match again(&self.failed).checked_sub(AT_ONCE) {
                    None | Some(0) => Duration::ZERO,
                    Some(past) => throttled_back_off(past),
                })
            }
            _ => None,
        }
    }
}

struct Search {
    shared: Weak<Shared>,
    /// The session the create was made in (see
    /// [`Session::generation`](crate::session::Session::generation)): a
    /// look made in a new session would find nothing, the node having gone
    /// with the old one, and the create would be made again.
    session: u64,
    /// The lock directory, as the server names it.
    dir: String,
    /// The name our node starts with (its uuid is ours alone).
    prefix: String,
    ask_again: AskAgain,
    on_done: Box<dyn Fn(Result<Found>) + Send + Sync>,
}

impl Client {
    /// Looks for this session's node under `dir` whose name starts with
    /// `prefix`, and hands the answer to `on_done` (on the I/O thread, or
    /// at once if the search cannot start). A look cut off with its
    /// connection is no answer: it is made again once connected, until the
    /// session `session` ends. Each look syncs first: after a reconnect, the
    /// server may not have applied the create yet though the leader has
    /// (its zxid never reached us), and a listing that missed the node
    /// would have the create made again, below which the first node would
    /// sit unseen.
    pub(crate) fn start_own_node_search(
        &self,
        session: u64,
        dir: &str,
        prefix: &str,
        on_done: impl Fn(Result<Found>) + Send + Sync + 'static,
    ) {
        let dir = match self.server_path(dir) {
            Ok(dir) => dir,
            Err(e) => return on_done(Err(e)),
        };
        let search = Arc::new(Search {
            shared: Arc::downgrade(&self.inner.shared),
            session,
            dir,
            prefix: prefix.to_owned(),
            ask_again: AskAgain::default(),
            on_done: Box::new(on_done),
        });
        search.look(None);
    }
}

impl Search {
    /// Starts a look, now or once `due` comes.
    fn look(self: &Arc<Self>, due: Option<Instant>) {
        let search = self.clone();
        let synced = move |reply: Result<Response>| match reply {
            Ok(Response::Sync(_)) | Err(Error::NoNode) => search.list(),
            Ok(_) => search.failed(malformed("sync reply")),
            Err(e) => search.failed(e),
        };
        let request = PathRecord {
            path: self.dir.clone(),
        };
        self.send(OpCode::Sync, &request, due, Box::new(synced));
    }

    fn list(self: &Arc<Self>) {
        let search = self.clone();
        let listed = move |reply: Result<Response>| match children_of(reply) {
            Ok(children) => {
                let ours = children
                    .into_iter()
                    .filter(|n| n.starts_with(&search.prefix));
                search.check_owners(ours.collect());
            }
            // No directory, so no node.
            Err(Error::NoNode) => search.done(Ok(None)),
            Err(e) => search.failed(e),
        };
        let request = GetChildrenRequest {
            path: self.dir.clone(),
            watch: false,
        };
        self.send(OpCode::GetChildren, &request, None, Box::new(listed));
    }

    /// Checks that the first of `names` belongs to this session, then the
    /// next: a name with our uuid is ours in all likelihood, and this makes
    /// it certain.
    fn check_owners(self: &Arc<Self>, mut names: Vec<String>) {
        let Some(name) = names.pop() else {
            return self.done(Ok(None));
        };
        let request = ExistsRequest {
            path: join(&self.dir, &name),
            watch: false,
        };
        let search = self.clone();
        let checked = move |reply: Result<Response>| match reply {
            Ok(Response::Exists(r)) if search.is_ours(r.stat.ephemeral_owner) => {
                search.done(Ok(Some((name.clone(), r.stat.czxid))))
            }
            Ok(Response::Exists(_)) | Err(Error::NoNode) => search.check_owners(names.clone()),
            Ok(_) => search.failed(malformed("exists reply")),
            Err(e) => search.failed(e),
        };
        self.send(OpCode::Exists, &request, None, Box::new(checked));
    }

    fn is_ours(&self, owner: i64) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|shared| shared.core().session.session_id() == owner)
    }

    /// A look that got no answer starts over (see [`AskAgain`]); anything
    /// else ends the search.
    fn failed(self: &Arc<Self>, e: Error) {
        let Some(connection) = self.shared.upgrade().map(|s| s.connection_count()) else {
            return self.done(Err(Error::Closed));
        };
        match self.ask_again.pause_after(&e, connection) {
            None => self.done(Err(e)),
            Some(pause) => {
                log::debug!(
                    "looking again for lock node {}* in {pause:?}: {e}",
                    self.prefix
                );
                self.look((!pause.is_zero()).then(|| Instant::now() + pause));
            }
        }
    }

    fn done(&self, found: Result<Found>) {
        (self.on_done)(found);
    }

    /// Sends one request of the search, in its session, now or once `due`
    /// comes. One that cannot even be queued (the session is over) ends the
    /// search: trying again would fail the same way at once.
    fn send(&self, op: OpCode, body: &impl Record, due: Option<Instant>, on_reply: ReplyConsumer) {
        let Some(shared) = self.shared.upgrade() else {
            return self.done(Err(Error::Closed));
        };
        match shared.start_consumed(Some(self.session), due, op, body, on_reply) {
            Ok(_) => shared.flush(),
            Err(e) => self.done(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZERO: Duration = Duration::ZERO;

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    /// The first few failures on one connection are asked again at once,
    /// the rest after a growing back-off: a server answering every try
    /// with a timeout, or a `ConnectionLoss` on a live connection, does not
    /// keep a question asked in a loop. A failure on a new connection (a
    /// flapping one) starts the count again. Throttling has a back-off of
    /// its own from the first; undecodable replies are looked past a few
    /// times, then taken for the answer; any other error is the answer.
    #[test]
    fn questions_are_asked_again_at_once_a_few_times_a_connection_then_after_a_back_off() {
        let ask_again = AskAgain::default();
        let lost = [
            Error::ConnectionLoss,
            Error::OperationTimeout,
            Error::RequestTimeout,
        ];
        for e in &lost {
            assert_eq!(ask_again.pause_after(e, 1), Some(ZERO), "{e}");
        }
        assert_eq!(ask_again.pause_after(&Error::ConnectionLoss, 1), ms(100));
        assert_eq!(ask_again.pause_after(&Error::OperationTimeout, 1), ms(200));
        assert_eq!(ask_again.pause_after(&Error::ThrottledOp, 1), ms(100));
        assert_eq!(ask_again.pause_after(&Error::ThrottledOp, 1), ms(200));
        assert_eq!(ask_again.pause_after(&Error::RequestTimeout, 1), ms(400));
        // A connection lost again and again: each failure on a new one.
        for connection in 2..10 {
            assert_eq!(
                ask_again.pause_after(&Error::ConnectionLoss, connection),
                Some(ZERO)
            );
        }
        for _ in 0..MAX_UNDECODABLE_REPLIES {
            assert_eq!(ask_again.pause_after(&malformed("reply"), 10), Some(ZERO));
        }
        assert_eq!(ask_again.pause_after(&malformed("reply"), 10), None);
        assert_eq!(ask_again.pause_after(&Error::NoNode, 10), None);
        assert_eq!(ask_again.pause_after(&Error::SessionExpired, 10), None);
    }
}
