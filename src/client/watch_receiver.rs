//! The receiving end of a user's watch.

use std::ops::Deref;
use std::sync::{Arc, Weak};

use crossbeam_channel::{unbounded, Receiver, Sender};

use super::core::{Shared, Watcher};
use crate::proto::{OpCode, RemoveWatchesRequest, WatcherType};
use crate::session::{WatchKind, WatchedEvent};

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
/// server's watch, it is removed instead at the first event that reaches
/// it once no live watch shares it (the event that fires a one-shot watch
/// sharing it, say).
///
/// [`Client::add_watch`]: crate::Client::add_watch
#[derive(Debug)]
pub struct WatchReceiver {
    events: Receiver<WatchedEvent>,
    /// Its only strong reference: the sender's weak one tells it is gone.
    /// Taken when it is dropped.
    alive: Option<Arc<()>>,
    /// For a persistent watch, the client that removes it from the server
    /// once this is dropped.
    remover: Option<Weak<Shared>>,
}

impl Drop for WatchReceiver {
    fn drop(&mut self) {
        // Its senders are abandoned from here on.
        drop(self.alive.take());
        if let Some(shared) = self.remover.as_ref().and_then(Weak::upgrade) {
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

/// A new watch's two ends. `remover` is for a persistent (`addWatch`)
/// watch: the client that removes it from the server once its receiver is
/// dropped.
pub(crate) fn watch_channel(remover: Option<Weak<Shared>>) -> (WatchSender, WatchReceiver) {
    let (tx, rx) = unbounded();
    let alive = Arc::new(());
    let sender = WatchSender {
        events: tx,
        receiver: Arc::downgrade(&alive),
        persistent: remover.is_some(),
    };
    (
        sender,
        WatchReceiver {
            events: rx,
            alive: Some(alive),
            remover,
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
pub(crate) fn remove_abandoned(shared: &Shared) {
    let mut core = shared.core();
    let mut sent = false;
    for kind in [WatchKind::Persistent, WatchKind::PersistentRecursive] {
        for path in core
            .session
            .watched_paths_where(kind, Watcher::is_abandoned)
        {
            // Live watchers registered there, or requests setting one.
            let live = |w: &Watcher| !w.is_abandoned();
            if core
                .session
                .is_watched_or_pending(&WatchKind::ALL, &path, live)
            {
                continue;
            }
            for any in WatchKind::ALL {
                core.session
                    .forget_watchers(any, &path, Watcher::is_abandoned);
            }
            // `Any`: a 3.6-3.8 server has no type of its own for persistent
            // watches. `NoWatcher` (a reconnect's setWatches left it unset)
            // or a throttled removal (the watch goes with the connection
            // then) leave nothing to do.
            let request = RemoveWatchesRequest {
                path,
                watcher_type: WatcherType::Any,
            };
            sent |= Shared::start_with_callback_locked(
                &mut core,
                None,
                OpCode::RemoveWatches,
                &request,
                Box::new(|_| {}),
            )
            .is_ok();
        }
    }
    drop(core);
    if sent {
        shared.flush();
    }
}
