//! Who holds a lock and who waits, for tools.

use super::acquire::ask_until_answered;
use super::naming::{
    contenders, ALL_MARKERS, KAZOO_MARKER, KAZOO_READ_MARKER, MUTEX_MARKER, READ_MARKER,
};
use crate::client::path::join;
use crate::error::{Error, Result};
use crate::Client;

/// One node in a lock's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// The node's name under the lock path.
    pub name: String,
    /// What kind of contender it is.
    pub kind: ContenderKind,
    /// Whether it holds the lock (see [`holding`]).
    pub holds: bool,
    /// The owning session.
    pub session_id: i64,
    /// The node's creation zxid: the fencing token its holder gets.
    pub fencing_token: i64,
    /// Creation time, in ms since the Unix epoch (server clock).
    pub created_ms: i64,
    /// The node's data (by default `host=.. pid=.. thread=..`).
    pub data: Vec<u8>,
}

/// A contender among a lock path's children: its name and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedNode<'a> {
    /// The node's name under the lock path.
    pub name: &'a str,
    /// What kind of contender it is.
    pub kind: ContenderKind,
}

/// What kind of contender a lock node is, told by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ContenderKind {
    /// A mutex's node: zklock's [`Mutex`](crate::Mutex) or
    /// [`ReentrantMutex`](crate::ReentrantMutex), or Curator's
    /// `InterProcessMutex`.
    Mutex,
    /// A kazoo `Lock`'s or `WriteLock`'s node: exclusive.
    Kazoo,
    /// A reader's node: zklock's, Curator's or a kazoo `ReadLock`'s.
    Read,
    /// A writer's node: zklock's or Curator's.
    Write,
}

impl ContenderKind {
    /// Whether it holds together with the readers next to it (see
    /// [`holding`]).
    pub fn is_read(self) -> bool {
        self == ContenderKind::Read
    }

    /// Its name as `zklock holders` shows it: `mutex`, `kazoo`, `read` or
    /// `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            ContenderKind::Mutex => "mutex",
            ContenderKind::Kazoo => "kazoo",
            ContenderKind::Read => "read",
            ContenderKind::Write => "write",
        }
    }
}

impl std::fmt::Display for ContenderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The contenders among `children` (names under a lock path) in queue
/// order, as every lock kind orders them; other children are left out. No
/// request: for tools that list a lock often, where [`lock_queue`] would
/// read every node.
pub fn queue_order(children: &[String]) -> Vec<QueuedNode<'_>> {
    contenders(children, ALL_MARKERS)
        .into_iter()
        .map(|c| QueuedNode {
            name: c.name,
            kind: kind_of(c.marker),
        })
        .collect()
}

/// How many contenders at the head of a queue whose kinds are `kinds` (in
/// queue order) hold the lock: every reader ahead of the first exclusive
/// node (any other kind), or else the first node alone.
///
/// A read that the write lock's holder took for itself (see
/// [`RwLock`](crate::RwLock)) holds behind its own write node, but names
/// alone cannot tell it from a waiting read: it is counted as waiting.
pub fn holding(kinds: impl IntoIterator<Item = ContenderKind>) -> usize {
    let mut kinds = kinds.into_iter();
    match kinds.next() {
        None => 0,
        Some(first) if first.is_read() => 1 + kinds.take_while(|k| k.is_read()).count(),
        Some(_) => 1,
    }
}

fn kind_of(marker: &str) -> ContenderKind {
    match marker {
        MUTEX_MARKER => ContenderKind::Mutex,
        KAZOO_MARKER => ContenderKind::Kazoo,
        READ_MARKER | KAZOO_READ_MARKER => ContenderKind::Read,
        _ => ContenderKind::Write,
    }
}

/// The contenders at `path` in queue order, each saying whether it holds
/// (see [`holding`]).
/// Nodes that vanish while being read are skipped. An absent path is an
/// empty queue. Every read is idempotent, so one that got no answer (a
/// lost connection, a timeout or a throttling) is asked again, until the
/// session ends: at once three times in a row on one connection, then
/// after a back-off of 100 ms doubling to 2 s.
pub fn lock_queue(client: &Client, path: &str) -> Result<Vec<QueueEntry>> {
    let children = match ask_until_answered(client, &path, || client.get_children(path)) {
        Ok(children) => children,
        Err(Error::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for node in queue_order(&children) {
        let node_path = join(path, node.name);
        let (data, stat) =
            match ask_until_answered(client, &node_path, || client.get_data(&node_path)) {
                Ok(found) => found,
                Err(Error::NoNode) => continue,
                Err(e) => return Err(e),
            };
        out.push(QueueEntry {
            kind: node.kind,
            holds: false,
            name: node.name.to_owned(),
            session_id: stat.ephemeral_owner,
            fencing_token: stat.czxid,
            created_ms: stat.ctime,
            data,
        });
    }
    let holders = holding(out.iter().map(|e| e.kind));
    for entry in out.iter_mut().take(holders) {
        entry.holds = true;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_every_kind_by_sequence_and_skips_other_children() {
        let children: Vec<String> = [
            "_c_b-__WRIT__0000000003",
            "0af3__rlock__0000000004",
            "config",
            "deadbeef__lock__0000000001",
            "_c_a-__READ__0000000002",
            "_c_c-lock--000000005",
            "_c_d-lock-2147483647",
            "_c_e-lock-12",
        ]
        .map(String::from)
        .to_vec();
        let got: Vec<(&str, &str)> = queue_order(&children)
            .iter()
            .map(|c| (c.name, c.kind.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("deadbeef__lock__0000000001", "kazoo"),
                ("_c_a-__READ__0000000002", "read"),
                ("_c_b-__WRIT__0000000003", "write"),
                ("0af3__rlock__0000000004", "read"),
                ("_c_d-lock-2147483647", "mutex"),
                ("_c_c-lock--000000005", "mutex"),
            ]
        );
    }

    #[test]
    fn readers_ahead_of_any_exclusive_node_hold_together() {
        use ContenderKind::{Kazoo, Mutex, Read, Write};
        assert_eq!(holding([]), 0);
        assert_eq!(holding([Mutex, Mutex]), 1);
        assert_eq!(holding([Write, Read]), 1);
        assert_eq!(holding([Read, Read, Write, Read]), 2);
        assert_eq!(holding([Read, Mutex, Read]), 1);
        assert_eq!(holding([Read, Read]), 2);
        assert_eq!(holding([Kazoo, Read]), 1);
    }
}
