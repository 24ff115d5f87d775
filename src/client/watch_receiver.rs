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
/// not one per round. A persistent watch whose receivers are all dropped
/// is removed from the server at its next event (unless another watch of
/// this session on its path shares the server's), and no watch whose
/// receivers are all dropped is set again after a reconnect.
#[derive(Debug)]
pub struct WatchReceiver {
    events: Receiver<WatchedEvent>,
    /// Its only strong reference: the sender's weak one tells it is gone.
    _alive: Arc<()>,
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
}

impl WatchSender {
    /// True once its receiver is dropped.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.receiver.strong_count() == 0
    }

    /// Sends `event`, unless the receiver is gone.
    pub(crate) fn send(&self, event: &WatchedEvent) {
        if !self.is_abandoned() {
            let _ = self.events.send(event.clone());
        }
    }
}

/// A new watch's two ends.
pub(crate) fn watch_channel() -> (WatchSender, WatchReceiver) {
    let (tx, rx) = unbounded();
    let alive = Arc::new(());
    let sender = WatchSender {
        events: tx,
        receiver: Arc::downgrade(&alive),
    };
    (
        sender,
        WatchReceiver {
            events: rx,
            _alive: alive,
        },
    )
}

/// Forgets the persistent watches whose receivers are all dropped, and
/// removes each from the server: unlike a one-shot watch, it would go on
/// sending events for as long as the connection lasts. Called once an
/// event has reached such a receiver.
pub(crate) fn remove_abandoned(shared: &Shared) {
    let mut core = shared.core();
    let mut sent = false;
    for kind in [WatchKind::Persistent, WatchKind::PersistentRecursive] {
        for path in core
            .session
            .forget_watchers_everywhere(kind, Watcher::is_abandoned)
        {
            for other in WatchKind::ALL {
                core.session
                    .forget_watchers(other, &path, Watcher::is_abandoned);
            }
            // The server keeps one watch per session and path, whoever set
            // it: another watcher there, or a request setting one, shares it.
            if core
                .session
                .is_watched_or_pending(&WatchKind::ALL, &path, |_| true)
            {
                continue;
            }
            // `Any`: a 3.6-3.8 server has no type of its own for persistent
            // watches. `NoWatcher`, a lost connection (which takes the
            // server's watches with it) or a throttled removal (the watch
            // goes with the connection then) leave nothing to do.
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
