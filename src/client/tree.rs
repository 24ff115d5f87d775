//! Whole paths at once: a node made with its missing parents, and a node
//! deleted with everything below it.

use super::ops::check_acl;
use super::path::{join, parent, validate};
use super::Client;
use crate::error::{Error, Result};
use crate::proto::{Acl, CreateMode};
use crate::Op;

/// How many creates beyond twice a path's depth [`Client::ensure_path`]
/// makes before it gives up: a parent that someone else deletes between
/// its create and its child's costs two more (three or more if its own
/// parent went too).
const ENSURE_RETRIES: usize = 10;

/// How many times [`Client::delete_recursive`] lists one node before it
/// gives up: each listing follows a delete refused because children were
/// created meanwhile.
const MAX_LISTINGS: u32 = 10;

/// The most deletes of one `multi` in [`Client::delete_recursive`].
const DELETES_PER_MULTI: usize = 100;

/// The most bytes of one such `multi`, counted as its server paths and
/// [`DELETE_OVERHEAD`] for each op: well inside the server's default
/// 1 MiB request limit. A client whose `max_request` is smaller than a
/// batch deletes that batch's nodes one by one.
const MULTI_BYTES: usize = 64 * 1024;

/// What a delete adds to its path in a `multi`: the op's header, the
/// path's length and the version.
const DELETE_OVERHEAD: usize = 32;

impl Client {
    /// Makes sure `path` exists: if it is missing, creates it and each
    /// missing parent as an empty persistent node with `acl`, top down
    /// (kazoo's `ensure_path`, Curator's `ZKPaths.mkdirs`). Nodes already
    /// there, of any kind, are left as they are.
    ///
    /// The path is looked for first (one `exists`), so a path that is there
    /// needs no create, which a parent's ACL or a read-only server would
    /// refuse before the server looks for the node. A parent that another
    /// client deletes meanwhile is made again, for up to ten creates more
    /// than twice the path's depth, after which the call fails with
    /// `NoNode`. `/` is only looked for: under a chroot, a missing chroot
    /// node is `NoNode`. Other refusals end the call with theirs:
    /// `NoChildrenForEphemerals` under an ephemeral node, `NoAuth` where a
    /// parent's ACL forbids creating a missing node, `InvalidArgument` for
    /// an empty ACL.
    pub fn ensure_path(&self, path: &str, acl: &[Acl]) -> Result<()> {
        validate(path, false)?;
        check_acl(acl)?;
        if self.exists(path)?.is_some() {
            return Ok(());
        }
        if path == "/" {
            return Err(Error::NoNode);
        }
        let depth = path.matches('/').count();
        let mut creates_left = 2 * depth + ENSURE_RETRIES;
        // The paths still to make, the deepest first in, and so last out.
        let mut missing = vec![path];
        while let Some(&next) = missing.last() {
            if creates_left == 0 {
                return Err(Error::NoNode);
            }
            creates_left -= 1;
            match self.create(next, &[], acl, CreateMode::Persistent) {
                Ok(_) | Err(Error::NodeExists) => {
                    missing.pop();
                    #[cfg(feature = "testing")]
                    if !missing.is_empty() {
                        crate::testing::pause::reached(crate::testing::PausePoint::PathParentMade);
                    }
                }
                Err(Error::NoNode) => match parent(next) {
                    Some(up) if up != "/" => missing.push(up),
                    // Only the root is above: a chroot node that is gone.
                    _ => return Err(Error::NoNode),
                },
                // Refused before the server looked for the node: one that
                // another client made meanwhile is there all the same.
                Err(refused) => match self.exists(next) {
                    Ok(Some(_)) => {
                        missing.pop();
                    }
                    _ => return Err(refused),
                },
            }
        }
        Ok(())
    }

    /// Deletes `path` and every node below it, whatever their versions and
    /// whichever sessions made them (Java's `ZKUtil.deleteRecursive`,
    /// kazoo's `delete(recursive=True)`). A node that is gone already,
    /// `path` included, is not an error: the call ends when the subtree is
    /// gone. (The server checks the parent's ACL first, so a node gone from
    /// under a parent that forbids this session to delete is `NoAuth`.)
    ///
    /// Leaves go in `multi`s of up to 100 deletes, so a wide directory
    /// costs a round trip per hundred children; a `multi` that fails (a
    /// child with children of its own, or one deleted meanwhile) is done
    /// again one node at a time. Not atomic: other clients may see the
    /// subtree part deleted, and the call may fail part way (with
    /// `ConnectionLoss`, say), leaving the rest, so it may be called again.
    /// Nodes created meanwhile are deleted too, up to ten listings of one
    /// node, after which the call fails with `NotEmpty`. A node whose
    /// listing is larger than [`max_frame`](crate::Config::max_frame) fails
    /// it with `Protocol(FrameTooLarge)` (and drops the connection): raise
    /// `max_frame` for it.
    ///
    /// Deleting a lock's directory deletes its holders' and waiters' nodes:
    /// they lose the lock. `/` is refused with `InvalidPath` (the server
    /// refuses to delete it too).
    pub fn delete_recursive(&self, path: &str) -> Result<()> {
        validate(path, false)?;
        if path == "/" {
            return Err(Error::InvalidPath {
                path: path.to_owned(),
                reason: "the root cannot be deleted",
            });
        }
        let chroot_len = self.chroot().map_or(0, str::len);
        // Nodes to delete; a node's children go above it, so that each
        // entry's parent is still below it when it is taken.
        let mut pending = vec![Pending {
            parent: None,
            name: path.to_owned(),
            listings: 0,
        }];
        while let Some(entry) = pending.pop() {
            let node = full_path(&pending, &entry);
            match self.delete(&node, None) {
                Ok(()) | Err(Error::NoNode) => continue,
                Err(Error::NotEmpty) if entry.listings < MAX_LISTINGS => {}
                Err(e) => return Err(e),
            }
            let children = match self.get_children(&node) {
                Ok(children) => children,
                Err(Error::NoNode) => continue,
                Err(e) => return Err(e),
            };
            #[cfg(feature = "testing")]
            crate::testing::pause::reached(crate::testing::PausePoint::SubtreeListed);
            let at = pending.len();
            pending.push(Pending {
                listings: entry.listings + 1,
                ..entry
            });
            for names in batches(&children, chroot_len + node.len()) {
                let deletes: Vec<Op> = names
                    .iter()
                    .map(|name| Op::delete(join(&node, name), None))
                    .collect();
                match self.multi(&deletes) {
                    Ok(_) => {}
                    // One has children or is gone; or the batch is over
                    // `max_request`, refused unsent: one by one, then.
                    Err(Error::MultiFailed { .. } | Error::InvalidArgument(_)) => {
                        pending.extend(names.iter().map(|name| Pending {
                            parent: Some(at),
                            name: name.clone(),
                            listings: 0,
                        }));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// A node [`Client::delete_recursive`] has still to delete: its name, and
/// where its parent is on the stack (the subtree's root holds its whole
/// path, and no parent). Each entry holds only its own name, so the stack
/// grows with the nodes it holds, not with their depth times their
/// number: a server that gives every node a child, level after level, up
/// to the longest path a request takes, would otherwise make it hold every
/// prefix of that path.
struct Pending {
    parent: Option<usize>,
    name: String,
    listings: u32,
}

/// `entry`'s full path, from its ancestors on `stack`.
fn full_path(stack: &[Pending], entry: &Pending) -> String {
    let mut names = vec![entry.name.as_str()];
    let mut parent = entry.parent;
    // Bounded by the stack: a parent is always below its children.
    while let Some(at) = parent {
        let Some(up) = stack.get(at) else {
            break;
        };
        names.push(up.name.as_str());
        parent = up.parent.filter(|p| *p < at);
    }
    let mut path = String::with_capacity(names.iter().map(|n| n.len() + 1).sum());
    for (i, name) in names.iter().rev().enumerate() {
        // As `join`: the root is never `/`, which is refused.
        if i > 0 {
            path.push('/');
        }
        path.push_str(name);
    }
    path
}

/// `names`, children of a node whose server path is `dir_len` bytes long,
/// in runs that each fit one `multi` of deletes.
fn batches(names: &[String], dir_len: usize) -> impl Iterator<Item = &[String]> {
    let mut rest = names;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut len = 0;
        for name in rest.iter().take(DELETES_PER_MULTI) {
            bytes += dir_len + 1 + name.len() + DELETE_OVERHEAD;
            // One always goes, however long.
            if len > 0 && bytes > MULTI_BYTES {
                break;
            }
            len += 1;
        }
        let (batch, after) = rest.split_at(len);
        rest = after;
        Some(batch)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_go_in_batches_of_at_most_a_hundred_and_64_kib() {
        let short: Vec<String> = (0..250).map(|i| format!("n{i}")).collect();
        let lens: Vec<usize> = batches(&short, 2).map(<[String]>::len).collect();
        assert_eq!(lens, [100, 100, 50]);
        // 20 000 bytes each with the directory and the overhead: three fit.
        let long: Vec<String> = (0..7).map(|_| "x".repeat(20_000 - 32 - 1 - 10)).collect();
        let lens: Vec<usize> = batches(&long, 10).map(<[String]>::len).collect();
        assert_eq!(lens, [3, 3, 1]);
        let huge = vec!["y".repeat(100_000)];
        assert_eq!(
            batches(&huge, 1).map(<[String]>::len).collect::<Vec<_>>(),
            [1]
        );
        assert_eq!(batches(&[], 1).count(), 0);
    }

    /// A pending node's path is made from its ancestors on the stack, each
    /// of which holds its own name only: a chain a thousand levels deep
    /// holds a thousand names, not a thousand paths.
    #[test]
    fn a_pending_nodes_path_is_made_from_its_ancestors() {
        let entry = |parent, name: &str| Pending {
            parent,
            name: name.into(),
            listings: 0,
        };
        let mut stack = vec![entry(None, "/app/tree")];
        for level in 0..1000 {
            stack.push(entry(Some(level), "n"));
        }
        let deepest = stack.pop().expect("the deepest");
        let path = full_path(&stack, &deepest);
        assert_eq!(path, format!("/app/tree{}", "/n".repeat(1000)));
        let held: usize = stack.iter().map(|e| e.name.len()).sum();
        assert_eq!(held, "/app/tree".len() + 999);
        let sibling = entry(Some(0), "other");
        assert_eq!(full_path(&stack, &sibling), "/app/tree/other");
        // A parent index at or above the entry's own (never made) ends the
        // walk there instead of looping.
        let looped = vec![entry(None, "/a"), entry(Some(1), "b")];
        assert_eq!(full_path(&looped, &entry(Some(1), "c")), "b/c");
    }
}
