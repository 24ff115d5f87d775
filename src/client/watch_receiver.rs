//! The receiving end of a user's watch.

use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};

use super::core::{Core, Shared, Watcher};
use super::watch_ops::start_exists_at;
use crate::error::Error;
use crate::proto::{OpCode, RemoveWatchesRequest, Response, WatcherType};
use crate::session::{throttled_back_off, WatchKind, WatchedEvent};

/// Receives the events of one watch: exactly one event for a one-shot
/// watch, a stream for a persistent one. When the session ends, a last event
/// with `EventType::None` and the final state arrives, then the channel
/// disconnects. It dereferences to the channel's
/// [`Receiver`](crossbeam_channel::Receiver): `recv`, `recv_timeout`,
/// `try_recv`, `iter`, and `select!` on `&*receiver`.
///
/// Dropped, it is forgotten: the client stops sending to it, and drops its
/// sender when the next watch of the same kind is set on the same path.
/// So a loop that asks for a new watch each time round (say, `get_data_w`
/// then `recv_timeout`) on a node that rarely changes keeps one sender,
/// not one per round. No watch whose receivers are all dropped is set
/// again after a reconnect. A persistent watch ([`Client::add_watch`])
/// whose receivers are all dropped is removed from the server as the last
/// one is dropped: the drop sends the removal, on the dropping thread, as
/// a call would. If another watch of this session on its path shares the
/// server's watch, it is removed instead once no live watch shares it: as
/// the last receiver sharing it is dropped, or at the first event that
/// reaches it (the event that fires a one-shot watch sharing it, say). A
/// removal the server throttles is made again after a
/// back-off, unless a live watch was set on the path meanwhile.
///
/// [`Client::add_watch`]: crate::Client::add_watch
#[derive(Debug)]
pub struct WatchReceiver {
    events: Receiver<WatchedEvent>,
    /// Its only strong reference: the sender's weak one tells it is gone.
    /// Taken when it is dropped.
    alive: Option<Arc<()>>,
    /// The client that removes the server's watch once it is no longer
    /// listened to.
    remover: Weak<Shared>,
    /// Whether it is a persistent watch's.
    persistent: bool,
}

impl Drop for WatchReceiver {
    fn drop(&mut self) {
        // Its senders are abandoned from here on.
        drop(self.alive.take());
        let Some(shared) = self.remover.upgrade() else {
            return;
        };
        // A one-shot watch goes when it fires, and is looked at only if it
        // may have kept a dropped persistent one on the server.
        if self.persistent || shared.kept_abandoned.load(Ordering::SeqCst) {
            remove_abandoned(&shared);
        }
    }
}

impl Deref for WatchReceiver {
    type Target = Receiver<WatchedEvent>;

    fn deref(&self) -> &Receiver<WatchedEvent> {
        &self.events
    }
}

/// The sending end of a [`WatchReceiver`].
#[derive(Clone, Debug)]
pub(crate) struct WatchSender {
    events: Sender<WatchedEvent>,
    receiver: Weak<()>,
    /// Whether it is a persistent watch's, which the server goes on
    /// telling until it is removed.
    persistent: bool,
}

impl WatchSender {
    /// True once its receiver is dropped.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.receiver.strong_count() == 0
    }

    /// True for a persistent watch's sender whose receiver is dropped.
    pub(crate) fn is_abandoned_persistent(&self) -> bool {
        self.persistent && self.is_abandoned()
    }

    /// Sends `event`, unless the receiver is gone.
    pub(crate) fn send(&self, event: &WatchedEvent) {
        if !self.is_abandoned() {
            let _ = self.events.send(event.clone());
        }
    }
}

/// A new watch's two ends; `persistent` for an `addWatch` one. `remover`
/// is the client that removes a persistent watch from the server once its
/// receivers are dropped.
pub(crate) fn watch_channel(
    remover: Weak<Shared>,
    persistent: bool,
) -> (WatchSender, WatchReceiver) {
    let (tx, rx) = unbounded();
    let alive = Arc::new(());
    let sender = WatchSender {
        events: tx,
        receiver: Arc::downgrade(&alive),
        persistent,
    };
    (
        sender,
        WatchReceiver {
            events: rx,
            alive: Some(alive),
            remover,
            persistent,
        },
    )
}

/// Removes from the server each persistent watch whose receivers are all
/// dropped: unlike a one-shot watch, it would go on sending events for as
/// long as the connection lasts. Its watchers, and the dropped ones of any
/// kind on its path, are forgotten with it. A path that another watcher of
/// the session shares is left alone, for a later event to look at again:
/// the server keeps one watch per session and path, whoever set it, so
/// the removal would take that watcher's too. Called as such a receiver is
/// dropped, and once an event has reached one.
pub(crate) fn remove_abandoned(shared: &Arc<Shared>) {
    let mut core = shared.core();
    let (mut sent, mut kept) = (false, false);
    for kind in [WatchKind::Persistent, WatchKind::PersistentRecursive] {
        for path in core
            .session
            .watched_paths_where(kind, Watcher::is_abandoned)
        {
            match remove_unless_shared(&mut core, Arc::downgrade(shared), path, 0) {
                Some(removal_sent) => sent |= removal_sent,
                None => kept = true,
            }
        }
    }
    // Under the session's lock, so that two callers agree.
    shared.kept_abandoned.store(kept, Ordering::SeqCst);
    drop(core);
    if sent {
        shared.flush();
    }
}

/// Unless a live watcher of the session is registered on server path
/// `path`, or a request setting one is pending, forgets the dropped
/// watchers there and sends the removal of the server's watch, one the
/// server has throttled `throttled` times in a row so far. `None` if left
/// for a live watch; otherwise whether the removal was sent.
fn remove_unless_shared(
    core: &mut Core,
    shared: Weak<Shared>,
    path: String,
    throttled: u32,
) -> Option<bool> {
    let live = |w: &Watcher| !w.is_abandoned();
    if core
        .session
        .is_watched_or_pending(&WatchKind::ALL, &path, live)
    {
        return None;
    }
    for any in WatchKind::ALL {
        core.session
            .forget_watchers(any, &path, Watcher::is_abandoned);
    }
    // `Any`: a 3.6-3.8 server has no type of its own for persistent
    // watches. `NoWatcher` (a reconnect's setWatches left it unset) or a
    // lost connection (which takes the server's watches) leave nothing to
    // do; a new session has no such watch.
    let generation = core.session.generation();
    let request = RemoveWatchesRequest {
        path: path.clone(),
        watcher_type: WatcherType::Any,
    };
    let sent = Shared::start_with_callback_locked(
        core,
        Some(generation),
        OpCode::RemoveWatches,
        &request,
        Box::new(move |reply| {
            if matches!(reply, Err(Error::ThrottledOp)) {
                remove_after_back_off(&shared, generation, &path, throttled.saturating_add(1));
            }
        }),
    );
    Some(sent.is_ok())
}

/// After the back-off of a removal the server throttled (refused
/// unapplied, on a connection that stays up) `times` in a row, a plain
/// exists on `path` whose reply looks again: the watch would otherwise stay
/// on the server, unheard, for the connection's life. A live watch set
/// there meanwhile keeps it, as it would have kept the first removal.
fn remove_after_back_off(shared: &Weak<Shared>, generation: u64, path: &str, times: u32) {
    let Some(strong) = shared.upgrade() else {
        return;
    };
    let due = Instant::now() + throttled_back_off(times);
    let (weak, again) = (shared.clone(), path.to_owned());
    let look_again = Box::new(move |_: &crate::Result<Response>| {
        let Some(strong) = weak.upgrade() else {
            return;
        };
        let mut core = strong.core();
        let sent = remove_unless_shared(&mut core, weak.clone(), again.clone(), times);
        drop(core);
        if sent == Some(true) {
            strong.flush();
        }
    });
    let _ = start_exists_at(&strong, generation, path.to_owned(), due, look_again);
}
