//! The receiving end of a user's watch.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};

use super::core::{lock, Core, Shared, Watcher};
use super::watch_ops::start_exists_at;
use crate::proto::{EventType, OpCode, RemoveWatchesRequest, Response, WatcherType};
use crate::session::{answered_for_now, throttled_back_off, WatchKind, WatchedEvent};

/// Receives the events of one watch: exactly one event for a one-shot
/// watch, a stream for a persistent one. When the session ends, a last event
/// with `EventType::None` and the final state arrives, then the channel
/// disconnects (a persistent watch that ended by overflowing, see below,
/// just disconnects). It dereferences to the channel's
/// [`Receiver`](crossbeam_channel::Receiver): `recv`, `recv_timeout`,
/// `try_recv`, `iter`, and `select!` on `&*receiver`.
///
/// The client never waits for a slow reader, and never drops an event
/// while the watch lasts: a persistent watch's receiver holds up to
/// [`watch_buffer`](crate::Config::watch_buffer) events unread, and at the
/// next node change its watch ends, as if the receiver had been dropped
/// (it is removed from the server, unless a live watch of the session
/// shares the server's watch on its path, and a warning is logged); the
/// receiver yields the events it holds, then reports the channel
/// disconnected, and [`overflowed`](Self::overflowed) says why. Drop it to
/// end the watch.
///
/// A clone is another receiver of the same watch, as a cloned channel
/// receiver is: each event goes to one of them, and the watch lives while
/// any does. (Without it, `.clone()` would reach through to the channel's
/// receiver, which does not keep the watch: the client would stop sending
/// once this one was dropped.)
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
/// removal the server throttles is made again after a back-off, or, if a
/// live watch was set on the path meanwhile, once none is.
///
/// [`Client::add_watch`]: crate::Client::add_watch
#[derive(Debug)]
pub struct WatchReceiver {
    events: Receiver<WatchedEvent>,
    /// Its strong references, one per clone: the sender's weak one tells
    /// that all are gone. Taken when it is dropped.
    alive: Option<Arc<()>>,
    /// The client that removes the server's watch once it is no longer
    /// listened to.
    remover: Weak<Shared>,
    /// Whether it is a persistent watch's.
    persistent: bool,
    /// Set when its watch ended for the events it held unread.
    overflowed: Arc<AtomicBool>,
}

impl Clone for WatchReceiver {
    fn clone(&self) -> Self {
        WatchReceiver {
            events: self.events.clone(),
            alive: self.alive.clone(),
            remover: self.remover.clone(),
            persistent: self.persistent,
            overflowed: self.overflowed.clone(),
        }
    }
}

impl WatchReceiver {
    /// True if the watch ended because this receiver held
    /// [`watch_buffer`](crate::Config::watch_buffer) events unread when
    /// another came: the channel then disconnects once those are read, and
    /// the nodes have to be read afresh (a new watch set first).
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::SeqCst)
    }
}

impl Drop for WatchReceiver {
    fn drop(&mut self) {
        // Its senders are abandoned from here on.
        drop(self.alive.take());
        let Some(shared) = self.remover.upgrade() else {
            return;
        };
        if self.persistent {
            remove_abandoned(&shared);
        } else {
            // A one-shot watch goes when it fires; this one may have kept a
            // dropped persistent one on the server. Looked at under the
            // session's lock: a removal deciding to owe its path, on
            // another thread, may have seen this receiver still live.
            settle_owed(&shared);
        }
    }
}

impl Deref for WatchReceiver {
    type Target = Receiver<WatchedEvent>;

    fn deref(&self) -> &Receiver<WatchedEvent> {
        &self.events
    }
}

/// How many bytes of paths a persistent watch's receiver may hold unread,
/// counted as the events it holds times the longest path it was sent: the
/// events' count alone would let a server's long paths (up to a frame
/// each) make `watch_buffer` events gigabytes.
pub(crate) const WATCH_BUFFER_PATH_BYTES: usize = 64 << 20;

/// The sending end of a [`WatchReceiver`].
#[derive(Clone, Debug)]
pub(crate) struct WatchSender {
    events: Sender<WatchedEvent>,
    receiver: Weak<()>,
    /// How many events its receiver may hold unread: a persistent watch's,
    /// which the server goes on telling until it is removed; `None` for a
    /// one-shot watch, which gets one event, and the session's end.
    capacity: Option<usize>,
    /// Shared with the receiver: set when the watch ended at `capacity`.
    overflowed: Arc<AtomicBool>,
    /// The longest path sent to the receiver so far: with the count of
    /// events it holds, a bound on their paths' bytes.
    longest_path: Arc<AtomicUsize>,
    /// Set once the session's end is sent, under its lock: two threads may
    /// deliver (the I/O thread, a caller closing the session), and an
    /// event the I/O thread took in before the end must not follow it.
    ended: Arc<Mutex<bool>>,
}

impl WatchSender {
    /// True once its receiver is dropped, or no longer sent to for the
    /// events it held unread.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.receiver.strong_count() == 0 || self.is_overflowed()
    }

    /// True once its receiver held `capacity` events unread when another
    /// came.
    pub(crate) fn is_overflowed(&self) -> bool {
        self.overflowed.load(Ordering::SeqCst)
    }

    /// True for a persistent watch's sender whose receiver is dropped.
    pub(crate) fn is_abandoned_persistent(&self) -> bool {
        self.capacity.is_some() && self.is_abandoned()
    }

    /// Sends `event`, unless the receiver is gone or the session's end
    /// was sent. A receiver already holding `capacity` events unread gets
    /// no more node changes: the watch is abandoned (the caller, seeing
    /// it, has it removed, and forgetting the sender disconnects the
    /// channel). The events the client makes itself, the session's end and
    /// the watch's removal, still go: each is the watch's last.
    pub(crate) fn send(&self, event: &WatchedEvent) {
        if self.is_abandoned() {
            return;
        }
        let mut ended = lock(&self.ended);
        if *ended {
            return;
        }
        let held = self.events.len();
        let longest = self
            .longest_path
            .fetch_max(event.path.len(), Ordering::SeqCst)
            .max(event.path.len());
        let full = self.capacity.is_some_and(|most| {
            held >= most || held.saturating_mul(longest) >= WATCH_BUFFER_PATH_BYTES
        });
        if full && event.event_type.is_node_change() {
            self.overflowed.store(true, Ordering::SeqCst);
            log::warn!(
                "a persistent watch ended at an event on {}: its receiver held {held} events \
                 unread, of paths up to {longest} bytes long (see Config::watch_buffer)",
                event.path,
            );
            return;
        }
        // A watch channel hears of a state only at the session's end.
        *ended = event.event_type == EventType::None;
        let _ = self.events.send(event.clone());
    }
}

/// A new watch's two ends: an `addWatch` one with `capacity`, the events
/// its receiver may hold unread, a one-shot one with `None`. `remover` is
/// the client that removes a persistent watch from the server once its
/// receivers are dropped.
pub(crate) fn watch_channel(
    remover: Weak<Shared>,
    capacity: Option<usize>,
) -> (WatchSender, WatchReceiver) {
    // Unbounded, so that no slot is allocated ahead: the capacity is kept
    // by `WatchSender::send`.
    let (tx, rx) = unbounded();
    let alive = Arc::new(());
    let overflowed = Arc::new(AtomicBool::new(false));
    let persistent = capacity.is_some();
    let sender = WatchSender {
        events: tx,
        receiver: Arc::downgrade(&alive),
        capacity,
        overflowed: overflowed.clone(),
        longest_path: Arc::default(),
        ended: Arc::default(),
    };
    (
        sender,
        WatchReceiver {
            events: rx,
            alive: Some(alive),
            remover,
            persistent,
            overflowed,
        },
    )
}

/// Removes from the server each persistent watch whose receivers are all
/// dropped: unlike a one-shot watch, it would go on sending events for as
/// long as the connection lasts. Its watchers, and the dropped ones of any
/// kind on its path, are forgotten with it. A path that a live watcher of
/// the session shares is owed its removal until none does (see
/// [`settle_owed`]): the server keeps one watch per session and path,
/// whoever set it, so the removal would take that watcher's too. Called as
/// such a receiver is dropped, and once an event has reached one.
pub(crate) fn remove_abandoned(shared: &Arc<Shared>) {
    settle(shared, true);
}

/// Sends the removals owed (see [`remove_abandoned`]) whose paths no live
/// watcher shares any more. Called as a one-shot receiver is dropped, and
/// after a watch event, when some are owed: the watch that kept one may
/// have been that one.
pub(crate) fn settle_owed(shared: &Arc<Shared>) {
    settle(shared, false);
}

/// Looks at the removals owed and, with `look_for_dropped`, at the paths
/// of dropped persistent watchers too.
fn settle(shared: &Arc<Shared>, look_for_dropped: bool) {
    let mut core = shared.core();
    let mut paths = std::mem::take(&mut core.owed_removals);
    if look_for_dropped {
        for kind in [WatchKind::Persistent, WatchKind::PersistentRecursive] {
            for path in core
                .session
                .watched_paths_where(kind, Watcher::is_abandoned)
            {
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
    }
    if paths.is_empty() {
        return;
    }
    let sent = remove_or_owe(&mut core, shared, paths, 0);
    drop(core);
    if sent {
        shared.flush();
    }
}

/// For each server path of `paths`: unless a live watcher of the session
/// is registered there, or a request setting one is pending, forgets the
/// dropped watchers there and sends the removal of the server's watch
/// (throttled `throttled` times in a row so far); otherwise owes it, and
/// forgets only the overflowed ones. True
/// if a removal was sent.
fn remove_or_owe(
    core: &mut Core,
    shared: &Arc<Shared>,
    paths: Vec<String>,
    throttled: u32,
) -> bool {
    let mut sent = false;
    for path in paths {
        let live = |w: &Watcher| !w.is_abandoned();
        if core
            .session
            .is_watched_or_pending(&WatchKind::ALL, &path, live)
        {
            // The sender of a receiver that held too many events unread
            // goes now, so that its channel disconnects.
            for any in WatchKind::ALL {
                core.session
                    .forget_watchers(any, &path, Watcher::is_overflowed);
            }
            core.owed_removals.push(path);
            continue;
        }
        for any in WatchKind::ALL {
            core.session
                .forget_watchers(any, &path, Watcher::is_abandoned);
        }
        sent |= send_removal(core, Arc::downgrade(shared), path, throttled);
    }
    // Under the session's lock, which every change of the list takes.
    shared
        .removals_owed
        .store(!core.owed_removals.is_empty(), Ordering::SeqCst);
    sent
}

/// Sends the removal of the session's watches on server path `path`; true
/// if it was sent. `Any`: a 3.6-3.8 server has no type of its own for
/// persistent watches. `NoWatcher` (a reconnect's setWatches left it
/// unset) or a lost connection (which takes the server's watches) leave
/// nothing to do; a new session has no such watch. One the server
/// throttles, or times out itself on a connection that stays up, is
/// looked at again after a back-off.
fn send_removal(core: &mut Core, shared: Weak<Shared>, path: String, throttled: u32) -> bool {
    let generation = core.session.generation();
    let request = RemoveWatchesRequest {
        path: path.clone(),
        watcher_type: WatcherType::Any,
    };
    Shared::start_with_callback_locked(
        core,
        Some(generation),
        OpCode::RemoveWatches,
        &request,
        Box::new(move |reply| {
            if reply.as_ref().is_err_and(answered_for_now) {
                remove_after_back_off(&shared, generation, &path, throttled.saturating_add(1));
            }
        }),
    )
    .is_ok()
}

/// After the back-off of a removal the server throttled (refused
/// unapplied) or timed out, on a connection that stays up, `times` in a
/// row, a plain
/// exists on `path` whose reply looks again: the watch would otherwise stay
/// on the server, unheard, for the connection's life. A live watch set
/// there meanwhile has it owed, as it would have the first removal.
fn remove_after_back_off(shared: &Weak<Shared>, generation: u64, path: &str, times: u32) {
    #[cfg(feature = "testing")]
    crate::testing::pause::reached_for(crate::testing::PausePoint::RemovalThrottled, path);
    let Some(strong) = shared.upgrade() else {
        return;
    };
    let due = Instant::now() + throttled_back_off(times);
    let (weak, again) = (shared.clone(), path.to_owned());
    let look_again = Box::new(move |reply: &crate::Result<Response>| {
        // Lost with its connection (or its session), the watch went with
        // it. Any answer (a missing node's `NoNode` included: a persistent
        // watch needs no node; a look throttled or timed out by the server
        // on a connection that stays up) still looks.
        let lost =
            |e: &crate::Error| (e.outcome_unknown() && !answered_for_now(e)) || e.is_session_lost();
        if reply.as_ref().is_err_and(lost) {
            return;
        }
        let Some(strong) = weak.upgrade() else {
            return;
        };
        let mut core = strong.core();
        core.owed_removals.retain(|owed| *owed != again);
        let sent = remove_or_owe(&mut core, &strong, vec![again.clone()], times);
        drop(core);
        if sent {
            strong.flush();
        }
    });
    let _ = start_exists_at(&strong, generation, path.to_owned(), due, look_again);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::KeeperState;

    fn node_event(path: &str) -> WatchedEvent {
        WatchedEvent {
            event_type: EventType::NodeDataChanged,
            state: KeeperState::SyncConnected,
            path: path.to_owned(),
        }
    }

    /// An event a thread delivers after another delivered the session's
    /// end (the I/O thread's, taken in before a caller closed the session)
    /// is not sent: the end stays the last event, through every clone of
    /// the sender.
    #[test]
    fn nothing_follows_the_sessions_end() {
        let (sender, receiver) = watch_channel(Weak::new(), Some(10));
        let other = sender.clone();
        sender.send(&node_event("/a"));
        let end = WatchedEvent {
            event_type: EventType::None,
            state: KeeperState::Closed,
            path: String::new(),
        };
        other.send(&end);
        sender.send(&node_event("/b"));
        other.send(&end);
        drop((sender, other));
        let got: Vec<WatchedEvent> = receiver.iter().collect();
        assert_eq!(got, [node_event("/a"), end]);
    }

    /// Long paths fill a receiver before its count does: held events times
    /// the longest path sent may not pass the byte bound.
    #[test]
    fn long_paths_fill_a_receiver_before_its_count_does() {
        let (sender, receiver) = watch_channel(Weak::new(), Some(1000));
        let long = format!("/{}", "x".repeat(WATCH_BUFFER_PATH_BYTES / 2));
        sender.send(&node_event(&long));
        // One held, of half the bound: room for one more, however short.
        sender.send(&node_event("/b"));
        assert!(!receiver.overflowed());
        sender.send(&node_event("/c"));
        assert!(receiver.overflowed() && sender.is_abandoned_persistent());
        drop(sender);
        let got: Vec<String> = receiver.iter().map(|e| e.path).collect();
        assert_eq!(got, [long, "/b".to_owned()]);
    }

    /// A receiver holding its capacity unread is sent no more node
    /// changes, and is abandoned; the session's end and a removal's event,
    /// which the client makes and which end the watch, still go, and do
    /// not count as an overflow. A one-shot watch has no capacity.
    #[test]
    fn a_full_receiver_gets_no_more_changes_but_still_its_end() {
        let end = WatchedEvent {
            event_type: EventType::None,
            state: KeeperState::Expired,
            path: String::new(),
        };
        let removed = WatchedEvent {
            event_type: EventType::PersistentWatchRemoved,
            state: KeeperState::SyncConnected,
            path: "/a".into(),
        };
        for last in [end, removed] {
            let (sender, receiver) = watch_channel(Weak::new(), Some(2));
            sender.send(&node_event("/a"));
            sender.send(&node_event("/b"));
            assert!(!receiver.overflowed() && !sender.is_abandoned());
            sender.send(&last);
            assert!(!receiver.overflowed(), "{last:?}");
            let (sender, receiver) = watch_channel(Weak::new(), Some(2));
            for path in ["/a", "/b", "/c"] {
                sender.send(&node_event(path));
            }
            assert!(receiver.overflowed() && sender.is_abandoned_persistent());
            sender.send(&last);
            drop(sender);
            let got: Vec<WatchedEvent> = receiver.iter().collect();
            assert_eq!(got, [node_event("/a"), node_event("/b")]);
        }
        let (sender, receiver) = watch_channel(Weak::new(), None);
        for path in ["/a", "/b", "/c"] {
            sender.send(&node_event(path));
        }
        assert!(!receiver.overflowed());
        assert_eq!(receiver.len(), 3);
    }
}
