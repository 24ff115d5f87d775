//! Lock node names, and which children of a lock path contend in what order.
//!
//! Names follow Curator's protected form, `_c_<uuid>-<marker><sequence>`:
//! `lock-` for a mutex (Curator `InterProcessMutex`), `__READ__` and
//! `__WRIT__` for the two sides of a read-write lock (Curator
//! `InterProcessReadWriteLock`). kazoo's `Lock` and `WriteLock` name their
//! nodes `<hex uuid>__lock__<sequence>`, its `ReadLock`
//! `<hex uuid>__rlock__<sequence>`. Every lock kind counts every one of these
//! as a contender, so a `Mutex` and an `RwLock` on one path exclude each
//! other: a mutex node is a writer to readers, and a read node (zklock's,
//! Curator's or kazoo's) is a contender to a mutex. Curator and kazoo do not
//! read every kind this way: which mixes are safe is set out in the README's
//! "Interoperability with Curator and kazoo".

use crate::rand::{Rng, UUID_LEN};

/// The marker of a mutex node written by zklock and Curator.
pub(crate) const MUTEX_MARKER: &str = "lock-";
/// The marker of a mutex node written by kazoo (`Lock`, `WriteLock`).
pub(crate) const KAZOO_MARKER: &str = "__lock__";
/// The marker of a read node written by kazoo (`ReadLock`).
pub(crate) const KAZOO_READ_MARKER: &str = "__rlock__";
/// The marker of a read node (Curator `InterProcessReadWriteLock`).
pub(crate) const READ_MARKER: &str = "__READ__";
/// The marker of a write node.
pub(crate) const WRITE_MARKER: &str = "__WRIT__";

/// Every marker of a contender, whatever the lock kind.
pub(crate) const ALL_MARKERS: &[&str] = &[
    MUTEX_MARKER,
    KAZOO_MARKER,
    READ_MARKER,
    WRITE_MARKER,
    KAZOO_READ_MARKER,
];

/// True for the nodes of exclusive holders (mutex and write nodes), which
/// readers wait for; only read nodes share.
pub(crate) fn is_exclusive(marker: &str) -> bool {
    marker != READ_MARKER && marker != KAZOO_READ_MARKER
}

/// One contender: a child of the lock path that matches a lock naming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender<'a> {
    /// The child's name (not its full path).
    pub name: &'a str,
    /// The sequence suffix, ordered as an unsigned 32-bit number.
    pub sequence: u32,
    /// Which marker matched.
    pub marker: &'static str,
}

/// The release note of the lock node at `node`: a sibling path that the
/// node's holder creates and deletes in the transaction that deletes the
/// node, but only a holder that knew it was the lowest contender. A waiter
/// that sees the note created knows its predecessor and every node below
/// it are gone, with no listing. A deletion alone does not say as much: a
/// waiter that gave up, or whose session ended, leaves the same way. No
/// listing ever shows a note, and no lock naming matches it.
pub(crate) fn release_note(node: &str) -> String {
    [node, ".released"].concat()
}

/// True if a holder of a node with `marker` may announce its release with
/// a note: zklock's mutex and write nodes do (Curator's mutex and write
/// nodes share their markers and never do: their waiters see the deletion
/// and list again); read nodes and kazoo's never do.
pub(crate) fn announces_release(marker: &str) -> bool {
    marker == MUTEX_MARKER || marker == WRITE_MARKER
}

/// The name prefix of a new contender node: `_c_<uuid>-<marker>`.
pub(crate) fn node_prefix(rng: &mut Rng, marker: &str) -> String {
    // One allocation, sized up front: it is made on every acquisition.
    let mut prefix = String::with_capacity("_c_".len() + UUID_LEN + "-".len() + marker.len());
    prefix.push_str("_c_");
    rng.write_uuid(&mut prefix);
    prefix.push('-');
    prefix.push_str(marker);
    prefix
}

/// The children that match one of `markers`, in sequence order.
///
/// The server appends the parent's child version as a signed 32-bit number
/// (`%010d`), so after 2^31 creations under one parent the suffix turns
/// negative (`-2147483648`, then `-000000005`...). Ordering the suffix as an
/// unsigned number keeps the order right across that wrap; it breaks only
/// after 2^32 creations under a parent the server never reaped (it deletes
/// an empty container parent when its periodic check finds it empty, which
/// restarts the count).
/// Curator and kazoo order suffixes as text, so past the wrap they disagree
/// with zklock, and two of them can hold at once: a caveat in the README.
pub(crate) fn contenders<'a>(
    children: &'a [String],
    markers: &[&'static str],
) -> Vec<Contender<'a>> {
    let mut out: Vec<Contender<'a>> = children
        .iter()
        .filter_map(|name| {
            markers.iter().find_map(|marker| {
                let sequence = sequence_after(name, marker)?;
                Some(Contender {
                    name,
                    sequence,
                    marker,
                })
            })
        })
        .collect();
    out.sort_by(|a, b| a.sequence.cmp(&b.sequence).then_with(|| a.name.cmp(b.name)));
    out
}

/// The number the server gives the next sequential node created beside
/// the node `name` (of kind `marker`) if no other create comes between;
/// `None` past the last number, where the order breaks anyway.
pub(crate) fn next_sequence(name: &str, marker: &str) -> Option<u32> {
    sequence_after(name, marker)?.checked_add(1)
}

/// The sequence number of the node `name` with `marker`, if it has both.
fn sequence_after(name: &str, marker: &str) -> Option<u32> {
    let at = name.rfind(marker)?;
    parse_sequence(name.get(at + marker.len()..)?)
}

/// A server sequence suffix: ten digits, or a minus sign and digits to a
/// width of ten after the wrap.
fn parse_sequence(suffix: &str) -> Option<u32> {
    let well_formed = suffix.len() >= 10
        && suffix.len() <= 11
        && suffix
            .char_indices()
            .all(|(i, c)| c.is_ascii_digit() || (i == 0 && c == '-'));
    if !well_formed {
        return None;
    }
    suffix.parse::<i32>().ok().map(|n| n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(children: &[&str], markers: &[&'static str]) -> Vec<String> {
        let children: Vec<String> = children.iter().map(|s| s.to_string()).collect();
        contenders(&children, markers)
            .into_iter()
            .map(|c| c.name.to_owned())
            .collect()
    }

    #[test]
    fn sorts_by_sequence_across_namings_and_ignores_other_children() {
        let got = names(
            &[
                "_c_b-lock-0000000003",
                "deadbeef__lock__0000000001",
                "config",
                "_c_a-lock-0000000002",
                "_c_x-lock-12",
                "leader",
            ],
            &[MUTEX_MARKER, KAZOO_MARKER],
        );
        assert_eq!(
            got,
            [
                "deadbeef__lock__0000000001",
                "_c_a-lock-0000000002",
                "_c_b-lock-0000000003"
            ]
        );
    }

    #[test]
    fn read_write_markers() {
        let got = names(
            &[
                "_c_a-__WRIT__0000000005",
                "_c_b-__READ__0000000004",
                "_c_c-lock-0000000001",
            ],
            &[READ_MARKER, WRITE_MARKER],
        );
        assert_eq!(got, ["_c_b-__READ__0000000004", "_c_a-__WRIT__0000000005"]);
    }

    #[test]
    fn kazoo_read_nodes_are_shared_contenders() {
        let children: Vec<String> = [
            "_c_a-lock-0000000003",
            "0af3__rlock__0000000001",
            "0af3__rlock__12",
            "_c_b-__READ__0000000002",
        ]
        .map(String::from)
        .to_vec();
        let got: Vec<(&str, bool)> = contenders(&children, ALL_MARKERS)
            .iter()
            .map(|c| (c.name, is_exclusive(c.marker)))
            .collect();
        assert_eq!(
            got,
            [
                ("0af3__rlock__0000000001", false),
                ("_c_b-__READ__0000000002", false),
                ("_c_a-lock-0000000003", true),
            ]
        );
    }

    #[test]
    fn order_survives_the_signed_wrap_of_the_sequence() {
        let got = names(
            &[
                "_c_c-lock--000000005",
                "_c_a-lock-2147483647",
                "_c_b-lock--2147483648",
            ],
            &[MUTEX_MARKER],
        );
        assert_eq!(
            got,
            [
                "_c_a-lock-2147483647",
                "_c_b-lock--2147483648",
                "_c_c-lock--000000005"
            ]
        );
    }

    #[test]
    fn the_next_sequence_follows_the_signed_wrap() {
        assert_eq!(
            next_sequence("_c_u-lock-0000000041", MUTEX_MARKER),
            Some(42)
        );
        assert_eq!(
            next_sequence("_c_u-__WRIT__2147483647", WRITE_MARKER),
            Some(2_147_483_648)
        );
        assert_eq!(next_sequence("_c_u-lock--000000001", MUTEX_MARKER), None);
        assert_eq!(next_sequence("_c_u-lock-12", MUTEX_MARKER), None);
        assert_eq!(next_sequence("_c_u-__READ__0000000001", MUTEX_MARKER), None);
    }

    #[test]
    fn prefixes_are_curator_shaped() {
        let mut rng = Rng::seeded(7);
        for marker in [MUTEX_MARKER, READ_MARKER] {
            let prefix = node_prefix(&mut rng, marker);
            let uuid = prefix
                .strip_prefix("_c_")
                .and_then(|p| p.strip_suffix(&format!("-{marker}")))
                .unwrap_or_else(|| panic!("{prefix}"));
            assert_eq!(uuid.len(), UUID_LEN, "{prefix}");
            let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{prefix}");
            assert_eq!(prefix.len(), prefix.capacity(), "sized up front");
        }
    }
}
