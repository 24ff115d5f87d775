//! `RwLock`: many readers or one writer, across processes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::acquire::{Attempt, Blocker, Decision, LockSpec, Patience, Rule, Waiters};
use super::held::{HeldLock, Hold, Holders, LockState};
use super::mutex::guard_accessors;
use super::naming::{is_exclusive, Contender, READ_MARKER, WRITE_MARKER};
use crate::error::{Error, Result};
use crate::proto::Acl;
use crate::Client;

/// A fair distributed read-write lock, node-compatible with Curator's
/// `InterProcessReadWriteLock` (`__READ__` and `__WRIT__` nodes).
///
/// A reader waits only for earlier writers, watching the nearest one; a
/// writer waits for every earlier node, watching its immediate predecessor.
/// A [`Mutex`](crate::Mutex)'s nodes on the same path count as writers, so
/// the two kinds exclude each other there among zklock processes (Curator's
/// read and write locks ignore mutex nodes: see the README's
/// interoperability caveats).
/// The thread holding the write lock may also take the read lock, unless
/// another writer is already queued (`WouldDeadlock`: that writer would
/// take the lock from under the read lock once the write lock is released,
/// and waiting for it would wait on this thread); a thread holding a read
/// lock gets `WouldDeadlock` from `write` (no upgrades), and from `read`
/// once a writer is queued behind its read node (which that writer waits
/// for).
#[derive(Debug)]
pub struct RwLock {
    spec: LockSpec,
    waiters: Waiters,
    writer: Holders,
    /// Kept so that a reader asking for the write lock gets `WouldDeadlock`
    /// (it would wait for its own read node forever).
    readers: Holders,
}

impl RwLock {
    /// A read-write lock at `path`.
    pub fn new(client: &Client, path: &str) -> Result<RwLock> {
        Ok(RwLock {
            spec: LockSpec::new(client, path)?,
            waiters: Waiters::default(),
            writer: Holders::default(),
            readers: Holders::default(),
        })
    }

    /// Sets the data stored in the lock nodes (default:
    /// `host=<name> pid=<pid> thread=<name>`).
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.spec.data = Some(data.into());
        self
    }

    /// Sets the ACL of the lock nodes and directories (default: open).
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.spec.acl = acl;
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.spec.path
    }

    /// Blocks until a read lock is held. Fails as [`Mutex::lock`](crate::Mutex::lock)
    /// does, and with `WouldDeadlock` if this thread holds the write lock
    /// and another writer is queued, or holds a read lock that a queued
    /// writer waits for.
    pub fn read(&self) -> Result<RwLockReadGuard<'_>> {
        self.acquire_read(Patience::FOREVER)?
            .ok_or_else(crate::error::ended_without_deadline)
    }

    /// One attempt at a read lock that does not wait for writers: `Ok(None)`
    /// if one holds it or is queued ahead. It still waits for the server's
    /// answers, through a reconnect if need be, and fails as
    /// [`RwLock::read`] does (`WouldDeadlock` included).
    pub fn try_read(&self) -> Result<Option<RwLockReadGuard<'_>>> {
        self.acquire_read(Patience::one_try())
    }

    /// Waits up to `timeout` for a read lock (without a deadline if too long
    /// to make one). Fails as [`RwLock::read`] does.
    pub fn try_read_for(&self, timeout: Duration) -> Result<Option<RwLockReadGuard<'_>>> {
        self.acquire_read(Patience::within(timeout))
    }

    /// Waits until `deadline` for a read lock. Fails as [`RwLock::read`]
    /// does.
    pub fn try_read_until(&self, deadline: Instant) -> Result<Option<RwLockReadGuard<'_>>> {
        self.acquire_read(Patience::until(deadline))
    }

    /// Blocks until the write lock is held. Fails as
    /// [`Mutex::lock`](crate::Mutex::lock) does, and with `WouldDeadlock` if
    /// this thread already holds the write lock or a read lock.
    pub fn write(&self) -> Result<RwLockWriteGuard<'_>> {
        self.acquire_write(Patience::FOREVER)?
            .ok_or_else(crate::error::ended_without_deadline)
    }

    /// One attempt at the write lock that does not wait for other holders:
    /// `Ok(None)` if another contender holds it. It still waits for the
    /// server's answers, through a reconnect if need be, and fails as
    /// [`RwLock::write`] does (`WouldDeadlock` included).
    pub fn try_write(&self) -> Result<Option<RwLockWriteGuard<'_>>> {
        self.acquire_write(Patience::one_try())
    }

    /// Waits up to `timeout` for the write lock (without a deadline if too
    /// long to make one). Fails as [`RwLock::write`] does.
    pub fn try_write_for(&self, timeout: Duration) -> Result<Option<RwLockWriteGuard<'_>>> {
        self.acquire_write(Patience::within(timeout))
    }

    /// Waits until `deadline` for the write lock. Fails as
    /// [`RwLock::write`] does.
    pub fn try_write_until(&self, deadline: Instant) -> Result<Option<RwLockWriteGuard<'_>>> {
        self.acquire_write(Patience::until(deadline))
    }

    /// Wakes every `read` and `write` attempt under way, timed ones
    /// included, with `Cancelled` (see [`Mutex::cancel`](crate::Mutex::cancel);
    /// calls that start later are not cancelled).
    pub fn cancel(&self) {
        self.waiters.cancel();
    }

    fn acquire_read(&self, patience: Patience) -> Result<Option<RwLockReadGuard<'_>>> {
        let rule = match self.writer.current_thread_node() {
            Some(write) => Rule::ReadUnderWrite(write, self.readers.current_thread_nodes().into()),
            None => {
                let reads = self.readers.current_thread_nodes();
                if reads.is_empty() {
                    Rule::Read
                } else {
                    Rule::ReadAgain(reads.into())
                }
            }
        };
        let held = Attempt {
            spec: &self.spec,
            marker: READ_MARKER,
            rule,
            waiters: &self.waiters,
        }
        .run(patience)?;
        Ok(held.map(|held| RwLockReadGuard {
            hold: Hold::new(held, &self.readers, false),
        }))
    }

    fn acquire_write(&self, patience: Patience) -> Result<Option<RwLockWriteGuard<'_>>> {
        if self.writer.current_thread_holds() || self.readers.current_thread_holds() {
            return Err(Error::WouldDeadlock);
        }
        let held = Attempt {
            spec: &self.spec,
            marker: WRITE_MARKER,
            rule: Rule::Exclusive,
            waiters: &self.waiters,
        }
        .run(patience)?;
        Ok(held.map(|held| RwLockWriteGuard {
            hold: Hold::new(held, &self.writer, true),
        }))
    }
}

/// A reader holds unless an exclusive node (a writer's, or a mutex's) comes
/// before it; it watches the nearest such node.
pub(super) fn read_decision(contenders: &[Contender], ours: usize) -> Decision {
    let earlier = contenders.get(..ours).unwrap_or_default();
    match earlier.iter().rev().find(|c| is_exclusive(c.marker)) {
        None => Decision::Acquired,
        Some(writer) => Decision::Wait(Blocker::new(
            writer,
            earlier.iter().filter(|c| is_exclusive(c.marker)).count() == 1,
        )),
    }
}

/// The read decision for the thread holding the write lock, whose node is
/// named `write`: with that node the lowest contender and no
/// other writer before the reader, it holds at once. A writer queued
/// between the two would take the lock as soon as the write lock is
/// released, while this read lock lives; and waiting for that writer would
/// wait on this very thread. So that read is refused.
///
/// With our write node gone (deleted by an operator, say), or not the
/// lowest, the reader is an ordinary one that may hold read locks already,
/// on the nodes named in `reads` (see [`read_decision_of_reader`]): it
/// waits for the writers before it, such as the one behind our node that
/// now holds the write lock, unless one of them waits for our read nodes.
pub(super) fn read_decision_of_writer(
    contenders: &[Contender],
    ours: usize,
    write: &str,
    reads: &[Arc<str>],
) -> Decision {
    let earlier = contenders.get(..ours).unwrap_or_default();
    let mut writers = earlier.iter().filter(|c| is_exclusive(c.marker));
    let lowest_is_ours = earlier
        .first()
        .is_some_and(|c| c.marker == WRITE_MARKER && c.name == write);
    match (lowest_is_ours, writers.nth(1)) {
        (true, None) => Decision::Acquired,
        (true, Some(_)) => Decision::WouldDeadlock,
        (false, _) => read_decision_of_reader(contenders, ours, reads),
    }
}

/// The read decision for a thread that holds read locks already, on the
/// nodes named in `reads`: an exclusive node queued behind one of them
/// waits for it, so a read that would wait for that node would wait on this
/// very thread. So that read is refused; any other is an ordinary one.
pub(super) fn read_decision_of_reader(
    contenders: &[Contender],
    ours: usize,
    reads: &[Arc<str>],
) -> Decision {
    let earlier = contenders.get(..ours).unwrap_or_default();
    let behind_ours = earlier
        .iter()
        .position(|c| reads.iter().any(|r| **r == *c.name))
        .and_then(|first| earlier.get(first..))
        .unwrap_or_default();
    if behind_ours.iter().any(|c| is_exclusive(c.marker)) {
        Decision::WouldDeadlock
    } else {
        read_decision(contenders, ours)
    }
}

/// A held read lock; dropping it releases it as dropping a
/// [`MutexGuard`](crate::MutexGuard) does. Not `Send` either: another
/// thread follows the lock through [`RwLockReadGuard::monitor`].
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct RwLockReadGuard<'a> {
    hold: Hold<'a>,
}

impl RwLockReadGuard<'_> {
    fn held(&self) -> &HeldLock {
        self.hold.held()
    }

    guard_accessors!();

    /// Releases the read lock and waits for the server's confirmation
    /// (see [`MutexGuard::unlock`](crate::MutexGuard::unlock)). `LockLost`
    /// if the lock had already been lost.
    pub fn unlock(self) -> Result<()> {
        self.hold.unlock()
    }
}

/// The held write lock; dropping it releases it as dropping a
/// [`MutexGuard`](crate::MutexGuard) does. Not `Send` either: another
/// thread follows the lock through [`RwLockWriteGuard::monitor`].
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct RwLockWriteGuard<'a> {
    hold: Hold<'a>,
}

impl RwLockWriteGuard<'_> {
    fn held(&self) -> &HeldLock {
        self.hold.held()
    }

    guard_accessors!();

    /// Releases the write lock and waits for the server's confirmation
    /// (see [`MutexGuard::unlock`](crate::MutexGuard::unlock)). `LockLost`
    /// if the lock had already been lost.
    pub fn unlock(self) -> Result<()> {
        self.hold.unlock()
    }
}

impl Client {
    /// An [`RwLock`] at `path` on this client's session.
    pub fn rw_lock(&self, path: &str) -> Result<RwLock> {
        RwLock::new(self, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipes::naming::{contenders, ALL_MARKERS};

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn readers_wait_only_for_earlier_writers_and_watch_the_nearest() {
        let names = owned(&[
            "_c_a-__READ__0000000001",
            "_c_b-__WRIT__0000000002",
            "_c_c-__READ__0000000003",
            "_c_d-__WRIT__0000000004",
            "_c_e-__READ__0000000005",
        ]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(read_decision(&c, 0), Decision::Acquired);
        assert_eq!(
            read_decision(&c, 2),
            Decision::Wait(Blocker {
                node: "_c_b-__WRIT__0000000002".into(),
                acquired_on_delete: true,
                may_announce: true,
            })
        );
        assert_eq!(
            read_decision(&c, 4),
            Decision::Wait(Blocker {
                node: "_c_d-__WRIT__0000000004".into(),
                acquired_on_delete: false,
                may_announce: true,
            })
        );
        assert_eq!(
            Rule::Exclusive.decide(&c, 3),
            Decision::Wait(Blocker {
                node: "_c_c-__READ__0000000003".into(),
                acquired_on_delete: false,
                may_announce: false,
            })
        );
        assert_eq!(Rule::Exclusive.decide(&c, 0), Decision::Acquired);
    }

    #[test]
    fn mutex_nodes_are_writers_to_readers_and_read_nodes_block_a_mutex() {
        let names = owned(&[
            "_c_a-__READ__0000000001",
            "_c_b-lock-0000000002",
            "_c_c-__READ__0000000003",
            "0af3__lock__0000000004",
            "_c_d-__READ__0000000005",
        ]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(read_decision(&c, 0), Decision::Acquired);
        assert_eq!(
            read_decision(&c, 2),
            Decision::Wait(Blocker {
                node: "_c_b-lock-0000000002".into(),
                acquired_on_delete: true,
                may_announce: true,
            })
        );
        assert_eq!(
            read_decision(&c, 4),
            Decision::Wait(Blocker {
                node: "0af3__lock__0000000004".into(),
                acquired_on_delete: false,
                may_announce: false,
            })
        );
        assert_eq!(
            Rule::Exclusive.decide(&c, 1),
            Decision::Wait(Blocker {
                node: "_c_a-__READ__0000000001".into(),
                acquired_on_delete: true,
                may_announce: false,
            })
        );
    }

    #[test]
    fn the_write_holder_reads_at_once_unless_a_writer_is_queued_between() {
        // Ours is the write node, the lowest; readers of others between.
        const OURS: &str = "_c_a-__WRIT__0000000001";
        let names = owned(&[
            "_c_a-__WRIT__0000000001",
            "_c_b-__READ__0000000002",
            "_c_c-__READ__0000000003",
        ]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(
            read_decision_of_writer(&c, 2, OURS, &[]),
            Decision::Acquired
        );

        let names = owned(&[
            "_c_a-__WRIT__0000000001",
            "_c_b-__WRIT__0000000002",
            "_c_c-__READ__0000000003",
        ]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(
            read_decision_of_writer(&c, 2, OURS, &[]),
            Decision::WouldDeadlock
        );

        // Our write node (1) is gone: an ordinary reader, which waits for
        // the writer queued behind it, now the holder.
        let names = owned(&["_c_b-__WRIT__0000000002", "_c_c-__READ__0000000003"]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(
            read_decision_of_writer(&c, 1, OURS, &[]),
            Decision::Wait(Blocker {
                node: "_c_b-__WRIT__0000000002".into(),
                acquired_on_delete: true,
                may_announce: true,
            })
        );
        let names = owned(&[
            "_c_b-__READ__0000000002",
            "_c_c-__WRIT__0000000003",
            "_c_d-__READ__0000000004",
        ]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(
            read_decision_of_writer(&c, 2, OURS, &[]),
            read_decision(&c, 2)
        );
        assert_eq!(
            read_decision_of_writer(&c[..1], 0, OURS, &[]),
            Decision::Acquired
        );

        // Our write node is gone, but our read under it (2) holds, and a
        // writer (3) waits for it: reading past that writer would wait on
        // this very thread.
        let reads: Vec<Arc<str>> = vec!["_c_a-__READ__0000000002".into()];
        let names = owned(&[
            "_c_a-__READ__0000000002",
            "_c_b-__WRIT__0000000003",
            "_c_a-__READ__0000000004",
        ]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(
            read_decision_of_writer(&c, 2, OURS, &reads),
            Decision::WouldDeadlock
        );

        // Another's write node with our node's number, in a directory
        // recreated since: it holds, and we wait for it.
        let names = owned(&["_c_x-__WRIT__0000000001", "_c_c-__READ__0000000003"]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(
            read_decision_of_writer(&c, 1, OURS, &[]),
            Decision::Wait(Blocker {
                node: "_c_x-__WRIT__0000000001".into(),
                acquired_on_delete: true,
                may_announce: true,
            })
        );
    }

    #[test]
    fn a_reader_reads_again_unless_an_exclusive_node_is_queued_behind_its_read() {
        let reads: Vec<Arc<str>> = vec!["_c_a-__READ__0000000002".into()];
        let names = owned(&[
            "_c_z-__READ__0000000001",
            "_c_a-__READ__0000000002",
            "_c_b-__READ__0000000003",
            "_c_c-__READ__0000000004",
        ]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(read_decision_of_reader(&c, 3, &reads), Decision::Acquired);

        for queued in ["_c_b-__WRIT__0000000003", "_c_b-lock-0000000003"] {
            let names = owned(&["_c_a-__READ__0000000002", queued, "_c_c-__READ__0000000004"]);
            let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
            assert_eq!(
                read_decision_of_reader(&c, 2, &reads),
                Decision::WouldDeadlock
            );
        }

        // Our read node is gone: an ordinary reader.
        let names = owned(&["_c_b-__WRIT__0000000003", "_c_c-__READ__0000000004"]);
        let c: Vec<Contender> = contenders(&names, ALL_MARKERS);
        assert_eq!(read_decision_of_reader(&c, 1, &reads), read_decision(&c, 1));
    }
}
