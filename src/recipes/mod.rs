//! Distributed locks built on the client.
//!
//! Every lock kind follows one recipe: each contender creates an
//! EPHEMERAL_SEQUENTIAL node under the lock path; the lowest sequence (or,
//! for readers, every node before the first writer) holds; the others each
//! watch one node and sleep on a condvar until it is deleted. A crashed
//! holder's node disappears with its session.

mod acquire;
mod any_guard;
mod held;
mod monitor;
mod mutex;
mod naming;
mod queue;
mod rwlock;

pub use acquire::host_name;
pub use any_guard::AnyGuard;
pub use held::LockState;
pub use monitor::LockMonitor;
pub use mutex::{Mutex, MutexGuard, ReentrantMutex, ReentrantMutexGuard};
pub use queue::{holding, lock_queue, queue_order, ContenderKind, QueueEntry, QueuedNode};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
