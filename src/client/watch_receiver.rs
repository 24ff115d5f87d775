//! The receiving end of a user's watch.

use std::ops::Deref;
use std::sync::{Arc, Weak};

use crossbeam_channel::{unbounded, Receiver, Sender};

use crate::session::WatchedEvent;

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
/// not one per round.
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
