//! Requests the lock recipes start without blocking: the watches a waiter
//! leaves on its own node and on its predecessor, and the listing a watch
//! callback starts on the I/O thread, so that a waiter wakes once, with
//! the answer, rather than once per step.

use std::sync::{Arc, Mutex, Weak};

use super::core::{lock, NotifyFn, ReplyCallback, ReplySlot, Shared, Watcher};
use super::Client;
use crate::error::{Error, Result};
use crate::proto::{ExistsRequest, GetChildrenRequest, GetDataRequest, OpCode, Response};
use crate::session::{WatchKind, WatchRequest};

impl Client {
    /// Queues an exists watch on `path`, sent with the next write; the reply
    /// lands in the returned slot. `on_missing` runs (on the I/O thread) if
    /// the reply says the node does not exist, in which case the watch
    /// waits for a creation.
    pub(crate) fn start_watch_exists(
        &self,
        path: &str,
        watcher: Watcher,
        on_missing: impl Fn() + Send + Sync + 'static,
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
        let on_reply = Box::new(move |result: &Result<Response>| {
            if matches!(result, Err(Error::NoNode)) {
                on_missing();
            }
        });
        self.shared()
            .start_with_callback(OpCode::Exists, &request, Some(watch), on_reply)
    }

    /// Sends a getData with a data watch on `path` (a user path) and queued
    /// requests with it, without waiting: `on_reply` runs on the I/O thread
    /// with the reply. The server sets the watch only if the node exists.
    pub(crate) fn start_watch_data(
        &self,
        path: &str,
        on_event: NotifyFn,
        on_reply: ReplyCallback,
    ) -> Result<DataWatch> {
        let path = self.server_path(path)?;
        let request = GetDataRequest {
            path: path.clone(),
            watch: true,
        };
        let watch = WatchRequest {
            kind: WatchKind::Data,
            path: path.clone(),
            watcher: Watcher::Notify(on_event.clone()),
        };
        let outcome = Arc::new(Mutex::new(WatchOutcome::default()));
        let forget = Forget {
            shared: Arc::downgrade(&self.inner.shared),
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
        let shared = self.shared();
        shared.start_with_callback(OpCode::GetData, &request, Some(watch), on_reply)?;
        shared.flush();
        Ok(DataWatch { outcome, forget })
    }

    /// A way to list `dir` (a user path) from a watch callback.
    pub(crate) fn lister(&self, dir: &str) -> Result<Lister> {
        Ok(Lister {
            shared: Arc::downgrade(&self.inner.shared),
            request: GetChildrenRequest {
                path: self.server_path(dir)?,
                watch: false,
            },
        })
    }
}

/// A data watch started by [`Client::start_watch_data`].
pub(crate) struct DataWatch {
    outcome: Arc<Mutex<WatchOutcome>>,
    forget: Forget,
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
}

/// Forgets one internal data watcher.
#[derive(Clone)]
struct Forget {
    shared: Weak<Shared>,
    /// The watched server path.
    path: String,
    on_event: NotifyFn,
}

impl Forget {
    fn run(&self) {
        if let Some(shared) = self.shared.upgrade() {
            let f = &self.on_event;
            shared
                .core()
                .session
                .forget_watchers(WatchKind::Data, &self.path, |w| w.is_notify(f));
        }
    }
}

/// Lists one directory without blocking, from any thread. It holds the
/// session weakly: a watcher that holds it must not keep a client alive
/// that all its users have dropped.
#[derive(Debug)]
pub(crate) struct Lister {
    shared: Weak<Shared>,
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
        let on_reply: ReplyCallback = Box::new(move |reply: &Result<Response>| {
            on_reply_listed(match reply {
                Ok(Response::GetChildren(r)) => Ok(r.children.clone()),
                Ok(_) => Err(super::core::unexpected("getChildren reply")),
                Err(e) => Err(e.clone()),
            })
        });
        match shared.start_with_callback(OpCode::GetChildren, &self.request, None, on_reply) {
            Ok(_) => shared.flush(),
            Err(e) => on_listed(Err(e)),
        }
    }
}
