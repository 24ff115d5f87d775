//! Channels of state changes, registered with their source only as long as
//! their receiving end lives: [`Client::state_changes`](crate::Client::state_changes)
//! and the lock guards' and monitors' `state_changes`.
//!
//! A crossbeam sender cannot tell whether its receiver is gone until a send
//! fails, and a healthy session or a long hold may send nothing for hours:
//! pruning on a failed send kept one sender and one channel per call, for as
//! long as the source lived. So the receiving end is a [`StateChanges`],
//! whose drop takes its sender out of the list.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crossbeam_channel::{Receiver, Sender};

use crate::client::core::lock;

/// Receives every later state change of its source (a
/// [`Client`](crate::Client)'s [`State`](crate::State), or a held lock's
/// [`LockState`](crate::LockState)), in order, until it is dropped, which
/// unregisters it. Once the source is gone (the client's last handle, or
/// the hold's guard and monitors, dropped), the channel disconnects after
/// its last change.
///
/// It derefs to the channel's [`Receiver`]: `recv`, `recv_timeout`,
/// `try_iter` and the rest work on it directly, `for state in &changes`
/// iterates, and `crossbeam_channel::select!` takes it in `recv(changes)`.
/// A clone of the receiver gets nothing more once this is dropped.
pub struct StateChanges<S> {
    receiver: Receiver<S>,
    /// `None` for a channel that was complete when made (see
    /// [`StateChanges::ended`]).
    registration: Option<Registration<S>>,
}

/// Where a [`StateChanges`] is registered.
struct Registration<S> {
    /// Weak: a receiver kept after its source is gone must not keep the
    /// senders, or its channel would never disconnect.
    registry: Weak<Mutex<Registry<S>>>,
    id: u64,
}

impl<S> StateChanges<S> {
    /// A channel holding `last` alone, already disconnected: for a source
    /// whose changes are over (a lost lock).
    pub(crate) fn ended(last: S) -> StateChanges<S> {
        let (tx, receiver) = crossbeam_channel::unbounded();
        let _ = tx.send(last);
        StateChanges {
            receiver,
            registration: None,
        }
    }

    /// The channel's receiver, for APIs that want one by reference.
    pub fn receiver(&self) -> &Receiver<S> {
        &self.receiver
    }
}

impl<S> Deref for StateChanges<S> {
    type Target = Receiver<S>;

    fn deref(&self) -> &Receiver<S> {
        &self.receiver
    }
}

impl<'a, S> IntoIterator for &'a StateChanges<S> {
    type Item = S;
    type IntoIter = crossbeam_channel::Iter<'a, S>;

    fn into_iter(self) -> Self::IntoIter {
        self.receiver.iter()
    }
}

impl<S> Drop for StateChanges<S> {
    fn drop(&mut self) {
        let Some(registration) = &self.registration else {
            return;
        };
        if let Some(registry) = registration.registry.upgrade() {
            lock(&registry).remove(registration.id);
        }
    }
}

impl<S> fmt::Debug for StateChanges<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateChanges")
            .field("pending", &self.receiver.len())
            .field("registered", &self.registration.is_some())
            .finish()
    }
}

/// The senders of a source's [`StateChanges`].
pub(crate) struct Listeners<S> {
    /// Made by the first subscription: a hold nobody asks for its changes
    /// (most of them) allocates nothing for it.
    registry: OnceLock<Arc<Mutex<Registry<S>>>>,
}

#[derive(Debug)]
struct Registry<S> {
    next_id: u64,
    senders: Vec<(u64, Sender<S>)>,
}

impl<S> Registry<S> {
    fn remove(&mut self, id: u64) {
        // Registrations are few and end in any order.
        if let Some(at) = self.senders.iter().position(|(i, _)| *i == id) {
            self.senders.swap_remove(at);
        }
    }
}

/// The locked senders of a source: a change is published and a receiver
/// subscribed under one lock, so a receiver gets every change published
/// after it subscribed, and none from before.
pub(crate) struct ListenersGuard<'a, S> {
    registry: &'a Arc<Mutex<Registry<S>>>,
    locked: MutexGuard<'a, Registry<S>>,
}

impl<S> Listeners<S> {
    pub(crate) fn new() -> Listeners<S> {
        Listeners {
            registry: OnceLock::new(),
        }
    }

    pub(crate) fn lock(&self) -> ListenersGuard<'_, S> {
        let registry = self.registry.get_or_init(|| {
            Arc::new(Mutex::new(Registry {
                next_id: 0,
                senders: Vec::new(),
            }))
        });
        ListenersGuard {
            registry,
            locked: lock(registry),
        }
    }

    /// How many receivers are registered.
    pub(crate) fn len(&self) -> usize {
        self.registry
            .get()
            .map_or(0, |registry| lock(registry).senders.len())
    }
}

impl<S: Clone> Listeners<S> {
    /// Sends `state` to every registered receiver, with no allocation if
    /// none ever subscribed. Unlike [`ListenersGuard::publish`], it is not
    /// ordered with a subscription being made: the caller's own lock must
    /// cover both.
    pub(crate) fn publish(&self, state: S) {
        if let Some(registry) = self.registry.get() {
            for (_, tx) in &lock(registry).senders {
                let _ = tx.send(state.clone());
            }
        }
    }
}

impl<S: Clone> ListenersGuard<'_, S> {
    /// A new receiver of every change published from now on.
    pub(crate) fn subscribe(&mut self) -> StateChanges<S> {
        let (tx, receiver) = crossbeam_channel::unbounded();
        let id = self.locked.next_id;
        self.locked.next_id += 1;
        self.locked.senders.push((id, tx));
        StateChanges {
            receiver,
            registration: Some(Registration {
                registry: Arc::downgrade(self.registry),
                id,
            }),
        }
    }

    /// Sends `state` to every registered receiver. Sending on an unbounded
    /// channel never blocks.
    pub(crate) fn publish(&mut self, state: S) {
        for (_, tx) in &self.locked.senders {
            let _ = tx.send(state.clone());
        }
    }
}

impl<S> fmt::Debug for Listeners<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listeners")
            .field("registered", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_receiver_is_unregistered_at_once() {
        let listeners = Listeners::new();
        let first = listeners.lock().subscribe();
        let second = listeners.lock().subscribe();
        assert_eq!(listeners.len(), 2);
        listeners.lock().publish(1);
        drop(first);
        assert_eq!(listeners.len(), 1);
        listeners.lock().publish(2);
        assert_eq!(second.try_iter().collect::<Vec<_>>(), [1, 2]);
        drop(second);
        assert_eq!(listeners.len(), 0);
    }

    #[test]
    fn a_receiver_gets_only_the_changes_published_after_it_subscribed() {
        let listeners = Listeners::new();
        listeners.lock().publish(1);
        let changes = listeners.lock().subscribe();
        listeners.lock().publish(2);
        assert_eq!(changes.try_iter().collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn a_receiver_disconnects_once_its_source_is_gone() {
        let listeners = Listeners::new();
        let changes = listeners.lock().subscribe();
        listeners.lock().publish(7);
        drop(listeners);
        assert_eq!((&changes).into_iter().collect::<Vec<_>>(), [7]);
        // Dropped after its source: nothing to unregister from.
        drop(changes);
    }

    #[test]
    fn publishing_without_the_guard_reaches_the_receivers_too() {
        let listeners = Listeners::new();
        listeners.publish(1);
        assert_eq!(listeners.len(), 0);
        let changes = listeners.lock().subscribe();
        listeners.publish(2);
        assert_eq!(changes.try_iter().collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn an_ended_channel_holds_its_last_state_and_is_disconnected() {
        let changes = StateChanges::ended("lost");
        assert_eq!(changes.recv(), Ok("lost"));
        assert!(changes.recv().is_err());
    }

    #[test]
    fn select_takes_it_as_a_receiver() {
        let listeners = Listeners::new();
        let changes = listeners.lock().subscribe();
        listeners.lock().publish(3);
        crossbeam_channel::select! {
            recv(changes) -> state => assert_eq!(state, Ok(3)),
            default => panic!("nothing received"),
        }
    }
}
