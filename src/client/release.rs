//! Lock releases in the background: a dropped guard's delete lingers for
//! [`Config::release_linger`](super::Config::release_linger), so that when
//! the same client acquires on the same lock path soon after, the delete of
//! the old node and the create of the new one reach the server as one
//! transaction: one log write (fsync) instead of two. A delete nobody takes
//! up is sent by a small timer thread when its linger ends. While replies
//! are due, the I/O thread wakes the timer only once the last one is in:
//! a release soon taken up then costs no timer wake-up at all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::core::{lock, wait_on, ReplyConsumer, ReplySlot, Shared};
use super::ops::Created;
use super::path::{last_segment, sequential_path};
use super::Client;
use crate::error::{malformed, Error, Result};
use crate::proto::{CreateRequest, MultiOp, MultiRequest, OpCode, OpResult, Response};
use crate::session::{answered_for_now, Release, ReleaseOutcome};

/// How often an idle release timer checks that its session still lives.
const IDLE_CHECK: Duration = Duration::from_secs(1);

impl Client {
    /// Deletes a lock node in the background: after the release linger,
    /// unless this client's next acquisition in the same directory, or any
    /// other request, carries it first. Retried through reconnects while
    /// the session lives. Nothing is sent if a new session has replaced
    /// `session`, the node's, which took the node with it.
    pub(crate) fn release_in_background(&self, release: Release, session: u64) -> Result<()> {
        let linger = self.inner.release_linger;
        let shared = &self.inner.shared;
        let now = Instant::now();
        let wake_timer = {
            let mut core = shared.core();
            core.session.check_generation(session)?;
            core.session
                .defer_background_delete(now, release, now + linger)?;
            core.timer_needed()
        };
        if linger.is_zero() {
            shared.flush();
            return Ok(());
        }
        // Notified outside the session lock, so the timer does not wake only
        // to block on it. An idle timer stays in its wait until notified (or
        // its idle check, after which it finds this delete by itself).
        if wake_timer {
            shared.release_timer.notify_one();
        }
        let mut timer = lock(&self.inner.release_timer);
        if timer.is_none() {
            let timer_shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("zklock-release".into())
                .spawn(move || run_timer(&timer_shared));
            match spawned {
                // Started after shutdown took the handle, it finds the
                // session over and ends by itself.
                Ok(handle) => *timer = Some(handle),
                Err(e) => {
                    drop(timer);
                    // Without a timer, a delete sent now beats one never sent.
                    log::warn!("release timer thread not started: {e}");
                    shared.with_session(|s| s.send_deferred_deletes(now));
                }
            }
        }
        Ok(())
    }

    /// Deletes a lock node of the session `session` (see
    /// [`Session::generation`](crate::session::Session::generation)) and
    /// waits for the answer: `SessionExpired`, unsent, once a new session
    /// has replaced it. A release whose note the server refuses (a node of
    /// that name exists) is deleted plainly.
    pub(crate) fn release_now(&self, release: &Release, session: u64) -> Result<()> {
        if release.note.is_none() {
            return self.delete_server_path(&release.path, -1, Some(session));
        }
        let request = MultiRequest { ops: release.ops() };
        let reply = self
            .shared()
            .call_in_session(Some(session), OpCode::Multi, &request)?;
        let Response::Multi(reply) = reply else {
            return Err(malformed("multi reply of another kind"));
        };
        match ReleaseOutcome::of(&reply.results) {
            ReleaseOutcome::Done => Ok(()),
            ReleaseOutcome::NodeGone => Err(Error::NoNode),
            ReleaseOutcome::Unlike => Err(malformed("multi reply unlike its release's ops")),
            ReleaseOutcome::Refused(code) => {
                log::debug!(
                    "release note of {} refused: {}",
                    release.path,
                    Error::from_code(code)
                );
                self.delete_server_path(&release.path, -1, Some(session))
            }
        }
    }

    /// Starts `create`, joined in one transaction with the delete of a
    /// released node in `dir` (a server path) if one is still lingering.
    /// `kind` is the kind of lock node created (see [`Successor`](crate::session::Successor)).
    /// `session`: the session the node is for (see
    /// [`Session::generation`](crate::session::Session::generation)); once
    /// a new one has replaced it, nothing is sent and the create fails with
    /// `SessionExpired`, as a lock attempt must not create its node in a
    /// session other than its own.
    ///
    /// If the release proves the new node its
    /// [`Successor`](crate::session::Successor), the transaction's reply
    /// goes to the consumer `on_successor` makes from the release and the
    /// name the node gets if it is the successor; so does a refusal to send
    /// it. Nobody waits for it: an attempt keeps its deadline even on a
    /// connection gone silent.
    pub(super) fn start_create_replacing(
        &self,
        create: CreateRequest,
        dir: &str,
        kind: &'static str,
        session: u64,
        on_successor: impl FnOnce(Replaced, String) -> ReplyConsumer,
    ) -> Result<StartedCreate> {
        // One session lock for all: the session's check, taking the delete
        // back and sending the request that carries it.
        let mut core = self.shared().core();
        core.session.check_generation(session)?;
        let Some(old) = core.session.withdraw_deferred_delete(dir) else {
            return Ok(StartedCreate::Waiting {
                slot: Shared::start_locked(&mut core, OpCode::Create2, &create)?,
                replaced: None,
            });
        };
        let successor = old
            .successor
            .filter(|s| s.kind == kind && create.mode.is_sequential())
            .map(|s| sequential_path(last_segment(&create.path), s.sequence));
        let mut ops = old.ops();
        ops.push(MultiOp::Create2(create));
        let mut request = MultiRequest { ops };
        let replaced = Replaced {
            path: old.path,
            session,
            ops: request.ops.len(),
        };
        let Some(successor) = successor else {
            let started = Shared::start_locked(&mut core, OpCode::Multi, &request);
            drop(core);
            return match started {
                Ok(slot) => Ok(StartedCreate::Waiting {
                    slot,
                    replaced: Some(replaced),
                }),
                Err(e) => {
                    self.settle_release(&replaced, false);
                    // Too large with the delete (see `too_large_joined`):
                    // the create goes alone, after the delete.
                    match (too_large_joined(&e), request.ops.pop()) {
                        (true, Some(MultiOp::Create2(create))) => {
                            self.start_create_replacing(create, dir, kind, session, on_successor)
                        }
                        _ => Err(e),
                    }
                }
            };
        };
        let slot = Arc::new(ReplySlot::consumed(on_successor(replaced, successor)));
        let sent = core
            .session
            .submit(Instant::now(), OpCode::Multi, &request, slot.clone(), None);
        drop(core);
        // Unsent, and so unapplied: the consumer settles the release.
        if let Err(e) = sent {
            slot.complete(Err(e));
        }
        Ok(StartedCreate::Consumed)
    }

    /// The created node (and its Stat, unless it was created in a
    /// transaction) from the reply to `start_create_replacing`, or
    /// `None` if the transaction failed and the create must be sent alone
    /// (the delete has then been settled: sent now, or found done).
    pub(super) fn finish_create_replacing(
        &self,
        reply: Result<Response>,
        replaced: Option<Replaced>,
    ) -> Option<Result<Created>> {
        let Some(old) = replaced else {
            return Some(reply.and_then(|reply| match reply {
                Response::Create2(r) => Ok((self.client_path(r.path), Some(r.stat))),
                _ => Err(malformed("create2 reply")),
            }));
        };
        let mut results = match reply {
            Ok(Response::Multi(r)) if r.results.len() == old.ops => r.results,
            Ok(_) => {
                self.settle_release(&old, false);
                return Some(Err(malformed("multi reply unlike its request")));
            }
            // Throttled (nothing applied) or timed out by the server (maybe
            // applied), and the connection stays up, so that no reconnect
            // sends the delete: it goes again on its own after a back-off
            // (done already, it is `NoNode`, which counts as done). The
            // create's caller learns of the refusal.
            Err(e) if answered_for_now(&e) => {
                self.shared().with_session(|s| {
                    if s.check_generation(old.session).is_ok() {
                        s.retry_withdrawn_delete(Instant::now(), &old.path);
                    }
                });
                return Some(Err(e));
            }
            // Unknown outcome (connection lost, say): the delete stays a
            // background delete, which the reconnect sends again.
            Err(e) if e.outcome_unknown() => return Some(Err(e)),
            // Not applied (refused unsent, say): the delete goes alone, and
            // a create refused only for the delete's bytes goes again.
            Err(e) => {
                self.settle_release(&old, false);
                return (!too_large_joined(&e)).then_some(Err(e));
            }
        };
        let failed = results.iter().any(|r| r.err() != 0);
        // The release's ops (its delete last), then the create.
        let (created, deleted) = (results.pop(), results.pop());
        if failed {
            // Nothing was applied. A delete that failed for want of the node
            // is done; otherwise it is sent on its own now.
            let gone = deleted
                .as_ref()
                .is_some_and(|d| matches!(Error::from_code(d.err()), Error::NoNode));
            self.settle_release(&old, gone);
            return None;
        }
        match (deleted, created) {
            (Some(OpResult::Delete), Some(OpResult::Create2(created))) => {
                self.settle_release(&old, true);
                Some(Ok((self.client_path(created.path), Some(created.stat))))
            }
            // Servers answer a create inside a multi with its path only, so
            // the caller learns the new node's Stat some other way.
            (Some(OpResult::Delete), Some(OpResult::Create(created))) => {
                self.settle_release(&old, true);
                Some(Ok((self.client_path(created.path), None)))
            }
            _ => {
                self.settle_release(&old, false);
                Some(Err(malformed("multi reply unlike its request")))
            }
        }
    }

    /// Settles a withdrawn delete in the session it was withdrawn from. A
    /// session replaced since took the node with it, and the new session
    /// must not send the delete of a node it never had.
    fn settle_release(&self, replaced: &Replaced, deleted: bool) {
        self.shared().with_session(|s| {
            if s.check_generation(replaced.session).is_ok() {
                s.settle_withdrawn_delete(Instant::now(), &replaced.path, deleted);
            }
        });
    }
}

/// True if a create joined to a release's delete was refused unsent for
/// its size (over [`Config::max_request`](super::Config::max_request)):
/// alone, it may fit.
fn too_large_joined(refusal: &Error) -> bool {
    matches!(refusal, Error::InvalidArgument(_))
}

/// A released node (a server path) whose delete was withdrawn to join a
/// create in one transaction, and the session it was withdrawn from.
pub(super) struct Replaced {
    path: String,
    session: u64,
    /// How many ops the transaction has: the release's, and the create.
    ops: usize,
}

/// A create started by [`Client::start_create_replacing`].
pub(super) enum StartedCreate {
    /// The create, alone or joined to a release: its reply lands in `slot`.
    Waiting {
        slot: Arc<ReplySlot>,
        /// The released node whose delete joined the create.
        replaced: Option<Replaced>,
    },
    /// A released node's successor: the reply goes to the consumer made
    /// for it.
    Consumed,
}

/// The release timer: sleeps until the earliest lingering delete is due,
/// sends it, and ends with the session.
fn run_timer(shared: &Arc<Shared>) {
    let mut core = shared.core();
    loop {
        if core.session.fatal_error().is_some() {
            return;
        }
        let now = Instant::now();
        match core.session.next_deferred_deadline() {
            None => {
                core.release_timer_idle = true;
                // Bounded, so the end of a session nobody shuts down (its
                // last handle dropped on one of its own threads) is noticed.
                core = wait_on(&shared.release_timer, core, Some(IDLE_CHECK));
                core.release_timer_idle = false;
            }
            Some(due) if due > now => {
                core = wait_on(&shared.release_timer, core, Some(due - now));
            }
            Some(_) => {
                core.session.send_due_deletes(now);
                drop(core);
                shared.flush();
                core = shared.core();
            }
        }
    }
}
