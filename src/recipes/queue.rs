//! Who holds a lock and who waits, for tools.

use super::naming::{contenders, ALL_MARKERS, KAZOO_MARKER, MUTEX_MARKER, READ_MARKER};
use crate::client::path::join;
use crate::error::{Error, Result};
use crate::Client;

/// One node in a lock's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// The node's name under the lock path.
    pub name: String,
    /// What kind of contender: `mutex`, `kazoo`, `read` or `write`.
    pub kind: &'static str,
    /// The owning session.
    pub session_id: i64,
    /// The node's creation zxid: the fencing token its holder gets.
    pub fencing_token: i64,
    /// Creation time, in ms since the Unix epoch (server clock).
    pub created_ms: i64,
    /// The node's data (by default `host=.. pid=.. thread=..`).
    pub data: Vec<u8>,
}

/// The contenders at `path` in queue order: every reader before the first
/// exclusive node (mutex or write) holds; an exclusive node holds only if
/// it is first.
/// Nodes that vanish while being read are skipped. An absent path is an
/// empty queue.
pub fn lock_queue(client: &Client, path: &str) -> Result<Vec<QueueEntry>> {
    let children = match client.get_children(path) {
        Ok(children) => children,
        Err(Error::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for contender in contenders(&children, ALL_MARKERS) {
        let (data, stat) = match client.get_data(&join(path, contender.name)) {
            Ok(found) => found,
            Err(Error::NoNode) => continue,
            Err(e) => return Err(e),
        };
        out.push(QueueEntry {
            kind: match contender.marker {
                MUTEX_MARKER => "mutex",
                KAZOO_MARKER => "kazoo",
                READ_MARKER => "read",
                _ => "write",
            },
            name: contender.name.to_owned(),
            session_id: stat.ephemeral_owner,
            fencing_token: stat.czxid,
            created_ms: stat.ctime,
            data,
        });
    }
    Ok(out)
}
