//! Requests the lock recipes start without blocking: the create of a lock
//! node with the listing behind it, the watches a waiter leaves on its own
//! node and on its predecessor, and the listing a watch callback starts on
//! the I/O thread. Their outcomes are handled on the I/O thread, so that a
//! waiter wakes once, with the answer, rather than once per step.

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use super::core::{lock, NotifyFn, ReplyCallback, ReplyConsumer, ReplySlot, Shared, Watcher};
use super::ops::Created;
use super::path::last_segment;
use super::release::{Replaced, StartedCreate};
use super::{Client, WeakClient};
use crate::error::{malformed, Error, Result};
use crate::proto::{
    Acl, CreateMode, ExistsRequest, GetChildrenRequest, GetDataRequest, OpCode, Record,
    RemoveWatchesRequest, Response, WatcherType,
};
use crate::session::{answered_for_now, throttled_back_off, WatchKind, WatchRequest};

/// A lock node to create, and its lock directory to list behind it.
pub(crate) struct NewLockNode<'a> {
    /// The node's path, to which the server appends its sequence number.
    pub(crate) prefix: &'a str,
    pub(crate) data: &'a [u8],
    pub(crate) acl: &'a [Acl],
    /// The lock directory (a user path).
    pub(crate) dir: &'a str,
    /// The kind of lock node (see [`Successor`](crate::session::Successor)).
    pub(crate) kind: &'static str,
    /// The session the node is for (see
    /// [`Session::generation`](crate::session::Session::generation)): once
    /// replaced by a new one, the create fails with `SessionExpired` unsent.
    pub(crate) session: u64,
}

/// The replies to a create and to the listing sent right behind it.
#[derive(Debug)]
pub(crate) struct CreatedListed {
    /// `None` when the create joined a lingering release in one transaction
    /// that failed as a whole (the release is settled): create again.
    pub(crate) created: Option<Result<Created>>,
    /// `None` when no listing was made: for a create that failed, or one
    /// that could have been, but was not, a released node's successor.
    pub(crate) listed: Option<Result<Vec<String>>>,
}

impl CreatedListed {
    fn failed(e: Error) -> CreatedListed {
        CreatedListed {
            created: Some(Err(e)),
            listed: None,
        }
    }
}

/// What a successor's transaction made (see
/// [`Client::start_create_then_list`]): its node, the lowest contender, is
/// its own listing if it got the successor's name.
fn successor_created(
    owner: &WeakClient,
    reply: Result<Response>,
    replaced: Replaced,
    successor: String,
) -> CreatedListed {
    let created = match owner.upgrade() {
        Some(client) => client.finish_create_replacing(reply, Some(replaced)),
        None => Some(Err(Error::Closed)),
    };
    let listed = match &created {
        Some(Ok((path, _))) if last_segment(path) == successor => Some(Ok(vec![successor])),
        _ => None,
    };
    CreatedListed { created, listed }
}

/// Queues an exists on the server path `path`, with no watch, to go once
/// `due` has come, in the session `session` only: a question asked again
/// after a throttling, whose reply `on_reply` (on the I/O thread) acts on.
pub(super) fn start_exists_at(
    shared: &Shared,
    session: u64,
    path: String,
    due: Instant,
    on_reply: ReplyCallback,
) -> Result<Arc<ReplySlot>> {
    let request = ExistsRequest { path, watch: false };
    shared.start_with_callback(
        Some(session),
        Some(due),
        OpCode::Exists,
        &request,
        None,
        on_reply,
    )
}

/// The children in a getChildren reply handed to a callback.
pub(super) fn children_of(reply: Result<Response>) -> Result<Vec<String>> {
    match reply? {
        Response::GetChildren(r) => Ok(r.children),
        _ => Err(malformed("getChildren reply")),
    }
}

/// A lock node's create and the listing behind it, while they may still
/// wait for a connection: see [`Unsent::withdraw`].
pub(crate) struct Unsent {
    shared: Weak<Shared>,
    create: Arc<ReplySlot>,
    listing: Arc<ReplySlot>,
}

impl Unsent {
    /// Takes both requests back if they have not been sent (so nothing was
    /// created), and answers them with `Cancelled` at once, on this
    /// thread: `on_done` runs before this returns. False if they were
    /// sent: their replies will come.
    pub(crate) fn withdraw(&self) -> bool {
        self.shared.upgrade().is_some_and(|shared| {
            shared.withdraw_unsent(&self.create, &self.listing, &Error::Cancelled)
        })
    }
}

/// The callback of [`Client::start_create_then_list`], with the release the
/// create replaces; taken by whoever finishes first.
type OnDone<F> = Arc<Mutex<Option<(F, Option<Replaced>)>>>;

impl Client {
    /// Creates an EPHEMERAL_SEQUENTIAL lock node (`create2`) and lists its
    /// directory in one round trip: the server answers a session's requests
    /// in order, so the listing already includes the new node. A lock
    /// release in the directory still lingering joins the create in one
    /// transaction; the new node's Stat is then unknown.
    ///
    /// If the release proves that the new node, numbered as expected, is
    /// its [`Successor`](crate::session::Successor), the node is the lowest
    /// contender and there is nothing to list: no listing is sent, and the
    /// create's reply comes with the node alone as its listing. Numbered
    /// otherwise, it comes with no listing.
    ///
    /// `on_done` runs exactly once: on the I/O thread with the listing's
    /// reply (or the successor's transaction's), on this thread if the
    /// requests cannot be sent, or on the thread that takes both requests
    /// back unsent (see [`Unsent`]), which is possible only with the handle
    /// returned. Nothing of it waits for a reply on this thread, unless the
    /// create went out but its listing could not.
    pub(crate) fn start_create_then_list<F>(
        &self,
        node: NewLockNode<'_>,
        on_done: F,
    ) -> Option<Unsent>
    where
        F: FnOnce(CreatedListed) + Send + 'static,
    {
        let mode = CreateMode::EphemeralSequential;
        let create = match self.create_request(node.prefix, node.data, node.acl, mode) {
            Ok(create) => create,
            Err(e) => {
                on_done(CreatedListed::failed(e));
                return None;
            }
        };
        let list = match self.server_path(node.dir) {
            Ok(dir) => GetChildrenRequest {
                path: dir,
                watch: false,
            },
            Err(e) => {
                on_done(CreatedListed::failed(e));
                return None;
            }
        };
        // Moved into the consumer of a successor's transaction, if the
        // create is one.
        let mut on_done = Some(on_done);
        let owner = self.downgrade();
        let on_successor = |replaced: Replaced, successor: String| -> ReplyConsumer {
            let answer = Mutex::new(on_done.take().map(|f| (f, replaced, successor)));
            Box::new(move |reply: Result<Response>| {
                if let Some((on_done, replaced, successor)) = lock(&answer).take() {
                    on_done(successor_created(&owner, reply, replaced, successor));
                }
            })
        };
        let started =
            self.start_create_replacing(create, &list.path, node.kind, node.session, on_successor);
        let (create_slot, replaced) = match started {
            Ok(StartedCreate::Waiting { slot, replaced }) => (slot, replaced),
            // Sent on an established connection (a release lingers only
            // there), it cannot be taken back.
            Ok(StartedCreate::Consumed) => {
                self.shared().flush();
                return None;
            }
            // Refused before sending (over the size limit, say): there is
            // nothing to list for.
            Err(e) => {
                if let Some(on_done) = on_done {
                    on_done(CreatedListed::failed(e));
                }
                return None;
            }
        };
        // Still here: no consumer took it.
        let on_done = on_done?;
        let shared = self.shared();
        let on_done: OnDone<F> = Arc::new(Mutex::new(Some((on_done, replaced))));
        let client = self.downgrade();
        let (reply_slot, on_listed) = (create_slot.clone(), on_done.clone());
        let on_reply: ReplyConsumer = Box::new(move |reply: Result<Response>| {
            let Some((on_done, replaced)) = lock(&on_listed).take() else {
                return;
            };
            // Replies are handled in order: the create's is in. A listing
            // failed unsent (by a close on another thread) can come first,
            // while the I/O thread has yet to hand over the create's end.
            let create_reply = reply_slot.take_ready().unwrap_or_else(|| match &reply {
                Err(e) => Err(e.clone()),
                Ok(_) => Err(malformed("listing answered before its create")),
            });
            let created = match client.upgrade() {
                Some(client) => client.finish_create_replacing(create_reply, replaced),
                None => Some(Err(Error::Closed)),
            };
            let listed = Some(children_of(reply));
            on_done(CreatedListed { created, listed });
        });
        let listing = shared.start_consumed(
            Some(node.session),
            None,
            OpCode::GetChildren,
            &list,
            on_reply,
        );
        shared.flush();
        match listing {
            Ok(listing) => Some(Unsent {
                shared: Arc::downgrade(&self.inner.shared),
                create: create_slot,
                listing,
            }),
            Err(e) => {
                // The create went out alone: its reply still settles it.
                // Taken first, so that the wait below holds no lock.
                let pending = lock(&on_done).take();
                if let Some((on_done, replaced)) = pending {
                    let created = self.finish_create_replacing(shared.wait(&create_slot), replaced);
                    on_done(CreatedListed {
                        created,
                        listed: Some(Err(e)),
                    });
                }
                None
            }
        }
    }

    /// Queues an exists watch on `path`, sent with the next write; the reply
    /// lands in the returned slot, after `on_reply` (on the I/O thread) has
    /// seen it. A reply that the node does not exist leaves the watch
    /// waiting for a creation. Like every watch a lock sets, it is set only
    /// in the lock's `session` (see
    /// [`Session::generation`](crate::session::Session::generation)), and
    /// fails with `SessionExpired` once a new one has replaced it.
    pub(crate) fn start_watch_exists(
        &self,
        session: u64,
        path: &str,
        watcher: Watcher,
        on_reply: impl Fn(&Result<Response>) + Send + Sync + 'static,
    ) -> Result<Arc<ReplySlot>> {
        let path = self.server_path(path)?;
        let request = ExistsRequest {
            path: path.clone(),
            watch: true,
        };
        let watch = WatchRequest {
            kind: WatchKind::Exist,
            path,
            watcher,
        };
        self.shared().start_with_callback(
            Some(session),
            None,
            OpCode::Exists,
            &request,
            Some(watch),
            Box::new(on_reply),
        )
    }

    /// Sends the create of a container `path` (a user path), a lock
    /// directory or one of its ancestors, in the lock's `session` only;
    /// `on_reply` runs on the I/O thread with the reply, so the caller can
    /// wait for it within a deadline and `cancel`.
    pub(crate) fn start_create_container(
        &self,
        session: u64,
        path: &str,
        acl: &[Acl],
        on_reply: impl Fn(&Result<Response>) + Send + Sync + 'static,
    ) -> Result<Arc<ReplySlot>> {
        let request = self.create_request(path, &[], acl, CreateMode::Container)?;
        let slot = self.shared().start_with_callback(
            Some(session),
            None,
            OpCode::CreateContainer,
            &request,
            None,
            Box::new(on_reply),
        )?;
        self.shared().flush();
        Ok(slot)
    }

    /// Queues an exists on `path` (a user path), with no watch, to go once
    /// `due` has come (for the I/O thread's reply handlers: see
    /// `start_with_callback`), in the lock's `session` only; `on_reply`
    /// runs on the I/O thread with the reply.
    pub(crate) fn start_exists_at(
        &self,
        session: u64,
        path: &str,
        due: Instant,
        on_reply: impl Fn(&Result<Response>) + Send + Sync + 'static,
    ) -> Result<Arc<ReplySlot>> {
        let path = self.server_path(path)?;
        start_exists_at(self.shared(), session, path, due, Box::new(on_reply))
    }

    /// Sends a getData with a data watch on `path` (a user path) and queued
    /// requests with it, without waiting: `on_reply` runs on the I/O thread
    /// with the reply. The server sets the watch only if the node exists.
    pub(crate) fn start_watch_data(
        &self,
        session: u64,
        path: &str,
        on_event: NotifyFn,
        on_reply: ReplyCallback,
    ) -> Result<DataWatch> {
        let path = self.server_path(path)?;
        let request = GetDataRequest {
            path: path.clone(),
            watch: true,
        };
        let watch =
            self.start_forgettable(session, OpCode::GetData, &request, path, on_event, on_reply)?;
        self.shared().flush();
        Ok(watch)
    }

    /// Queues an exists watch on `path` (a user path), which is expected
    /// not to exist: `on_event` runs when it is created. Sent with the
    /// next write.
    pub(crate) fn start_watch_creation(
        &self,
        session: u64,
        path: &str,
        on_event: NotifyFn,
    ) -> Result<DataWatch> {
        let path = self.server_path(path)?;
        let request = ExistsRequest {
            path: path.clone(),
            watch: true,
        };
        self.start_forgettable(
            session,
            OpCode::Exists,
            &request,
            path,
            on_event,
            Box::new(|_| {}),
        )
    }

    /// Queues a watching request (getData or exists) on `path` (a server
    /// path) whose watcher can be forgotten before its reply is in.
    fn start_forgettable(
        &self,
        session: u64,
        op: OpCode,
        request: &impl Record,
        path: String,
        on_event: NotifyFn,
        on_reply: ReplyCallback,
    ) -> Result<DataWatch> {
        let kind = match op {
            OpCode::Exists => WatchKind::Exist,
            _ => WatchKind::Data,
        };
        let watch = WatchRequest {
            kind,
            path: path.clone(),
            watcher: Watcher::Notify(on_event.clone()),
        };
        let outcome = Arc::new(Mutex::new(WatchOutcome::default()));
        let forget = Forget {
            shared: Arc::downgrade(&self.inner.shared),
            session,
            path,
            on_event,
        };
        let on_answer = outcome.clone();
        let forget_late = forget.clone();
        let on_reply: ReplyCallback = Box::new(move |reply: &Result<Response>| {
            let mut outcome = lock(&on_answer);
            outcome.answered = true;
            if outcome.abandoned {
                // Given up before the reply registered the watcher.
                drop(outcome);
                forget_late.run();
            } else {
                drop(outcome);
                on_reply(reply);
            }
        });
        self.shared().start_with_callback(
            Some(session),
            None,
            op,
            request,
            Some(watch),
            on_reply,
        )?;
        Ok(DataWatch { outcome, forget })
    }

    /// Takes the watcher `on_event` of an exists watch on `node` (a user
    /// path) whose reply said the node is gone: it waits for a creation
    /// that never comes (a lock node's name is unique), on the server too.
    /// From the client at once, and from the server unless another watcher
    /// of this session shares it (see [`Forget::remove_from_server`]). For
    /// the reply's callback, on the I/O thread: the reply has registered
    /// the watcher by then.
    pub(crate) fn drop_creation_watch(&self, session: u64, node: &str, on_event: NotifyFn) {
        let Ok(path) = self.server_path(node) else {
            return;
        };
        let forget = Forget {
            shared: Arc::downgrade(&self.inner.shared),
            session,
            path,
            on_event,
        };
        forget.run();
        forget.remove_from_server(0);
    }

    /// A way to list `dir` (a user path) from a watch callback, in the
    /// lock's `session` only.
    pub(crate) fn lister(&self, session: u64, dir: &str) -> Result<Lister> {
        Ok(Lister {
            shared: Arc::downgrade(&self.inner.shared),
            session,
            request: GetChildrenRequest {
                path: self.server_path(dir)?,
                watch: false,
            },
        })
    }
}

/// A one-shot watch started by [`Client::start_watch_data`] or
/// [`Client::start_watch_creation`].
pub(crate) struct DataWatch {
    outcome: Arc<Mutex<WatchOutcome>>,
    forget: Forget,
}

impl std::fmt::Debug for DataWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataWatch")
            .field("path", &self.forget.path)
            .field("outcome", &*lock(&self.outcome))
            .finish()
    }
}

#[derive(Debug, Default)]
struct WatchOutcome {
    answered: bool,
    abandoned: bool,
}

impl DataWatch {
    /// Removes the watcher, now if its reply is in (and so the watcher
    /// registered), or when the reply arrives: a waiter that gives up again
    /// and again must not pile watchers onto a node held for long.
    pub(crate) fn abandon(&self) {
        let mut outcome = lock(&self.outcome);
        outcome.abandoned = true;
        if outcome.answered {
            drop(outcome);
            self.forget.run();
        }
    }

    /// Abandons the watch, and removes it from the server too: for a watch
    /// that would otherwise stay there for the rest of the session, on a
    /// path that may never change.
    pub(crate) fn remove(&self) {
        self.abandon();
        self.forget.remove_from_server(0);
    }
}

/// Forgets one internal watcher (of a getData or an exists).
#[derive(Clone)]
struct Forget {
    shared: Weak<Shared>,
    /// The session the watch was set in.
    session: u64,
    /// The watched server path.
    path: String,
    on_event: NotifyFn,
}

impl Forget {
    /// Removes the watch from the server, unless another watcher of this
    /// session on the path shares it. One the server throttled (refused
    /// unapplied) is looked at again after a back-off (the
    /// `throttled`-th in a row): a plain exists made then has its reply
    /// make the same check again, for a watch set meanwhile by another
    /// caller must not be taken with it.
    fn remove_from_server(&self, throttled: u32) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let own = &self.on_event;
        // What a removal of data watches takes on the server: getData and
        // exists watches, and persistent ones, which a 3.6-3.8 server keeps
        // among its data watches too.
        let removed_kinds = [
            WatchKind::Data,
            WatchKind::Exist,
            WatchKind::Persistent,
            WatchKind::PersistentRecursive,
        ];
        // Looked at and sent under one lock: a watch another caller sets in
        // between would be taken too.
        let mut core = shared.core();
        // A user's one-shot watch whose receiver was dropped shares nothing:
        // forgotten, rather than keep the server's watch for an event
        // nobody reads (for the rest of the session, on a path never made).
        for kind in [WatchKind::Data, WatchKind::Exist] {
            core.session
                .forget_watchers(kind, &self.path, Watcher::is_abandoned);
        }
        let shared_watch = core
            .session
            .is_watched_or_pending(&removed_kinds, &self.path, |w| !w.is_notify(own));
        if shared_watch {
            // Another watcher of this session on the path (a second waiter,
            // a caller's own watch) shares the server's watch: removing it
            // would silence that one. So would a removal sent behind a
            // request that sets it, still unanswered: the server sets it,
            // then takes it away, and its watcher never hears again.
            return;
        }
        let request = RemoveWatchesRequest {
            path: self.path.clone(),
            watcher_type: WatcherType::Data,
        };
        let again = self.clone();
        // NoWatcher (it fired meanwhile) or a lost connection (which takes
        // the server's watches with it) leave nothing to do.
        // A new session has no such watch to remove.
        let sent = Shared::start_with_callback_locked(
            &mut core,
            Some(self.session),
            OpCode::RemoveWatches,
            &request,
            Box::new(move |reply| {
                if reply.as_ref().is_err_and(answered_for_now) {
                    again.remove_after_back_off(throttled.saturating_add(1));
                }
            }),
        );
        drop(core);
        if sent.is_ok() {
            shared.flush();
        }
    }

    /// Tries [`Forget::remove_from_server`] again once the back-off of a
    /// removal throttled `times` in a row is over.
    fn remove_after_back_off(&self, times: u32) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let due = Instant::now() + throttled_back_off(times);
        let again = self.clone();
        let look_again = Box::new(move |_: &Result<Response>| again.remove_from_server(times));
        let _ = start_exists_at(&shared, self.session, self.path.clone(), due, look_again);
    }

    fn run(&self) {
        if let Some(shared) = self.shared.upgrade() {
            let f = &self.on_event;
            let mut core = shared.core();
            // An exists watch is a data watch once the node exists.
            for kind in [WatchKind::Data, WatchKind::Exist] {
                core.session
                    .forget_watchers(kind, &self.path, |w| w.is_notify(f));
            }
        }
    }
}

/// Lists one directory without blocking, from any thread. It holds the
/// session weakly: a watcher that holds it must not keep a client alive
/// that all its users have dropped.
#[derive(Debug)]
pub(crate) struct Lister {
    shared: Weak<Shared>,
    /// The session the listing belongs to.
    session: u64,
    request: GetChildrenRequest,
}

impl Lister {
    /// Sends the listing; `on_listed` runs on the I/O thread with the
    /// children, or at once with the error if it cannot be sent.
    pub(crate) fn start(&self, on_listed: impl Fn(Result<Vec<String>>) + Send + Sync + 'static) {
        let Some(shared) = self.shared.upgrade() else {
            return on_listed(Err(Error::Closed));
        };
        let on_listed = Arc::new(on_listed);
        let on_reply_listed = on_listed.clone();
        let on_reply: ReplyConsumer =
            Box::new(move |reply: Result<Response>| on_reply_listed(children_of(reply)));
        match shared.start_consumed(
            Some(self.session),
            None,
            OpCode::GetChildren,
            &self.request,
            on_reply,
        ) {
            Ok(_) => shared.flush(),
            Err(e) => on_listed(Err(e)),
        }
    }
}
