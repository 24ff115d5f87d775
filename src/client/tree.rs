//! Whole paths at once: a node made with its missing parents, and a node
//! deleted with everything below it.

use super::path::{parent, validate};
use super::Client;
use crate::error::{Error, Result};
use crate::proto::{Acl, CreateMode};
use crate::Op;

/// How many more creates than a path's depth twice [`Client::ensure_path`]
/// makes before it gives up: each is one more parent deleted by someone
/// else between its create and its child's.
const ENSURE_RETRIES: usize = 10;

/// How many times [`Client::delete_recursive`] lists one node before it
/// gives up: each listing follows a delete refused because children were
/// created meanwhile.
const MAX_LISTINGS: u32 = 10;

/// The most deletes of one `multi` in [`Client::delete_recursive`].
const DELETES_PER_MULTI: usize = 100;

/// The most bytes of paths in one such `multi`, well inside the server's
/// default 1 MiB request limit.
const PATH_BYTES_PER_MULTI: usize = 256 * 1024;

impl Client {
    /// Makes sure `path` exists: creates it and each missing parent as an
    /// empty persistent node with `acl`, top down (kazoo's `ensure_path`,
    /// Curator's `creatingParentsIfNeeded`). Nodes already there, of any
    /// kind, are left as they are.
    ///
    /// A parent that another client deletes meanwhile is made again, up to
    /// ten times in all before the call fails with `NoNode`. `/` is checked,
    /// not made: under a chroot, a missing chroot node is `NoNode`. Other
    /// refusals end the call with theirs: `NoChildrenForEphemerals` under an
    /// ephemeral node, `NoAuth` where a parent's ACL forbids creating,
    /// `InvalidArgument` for an empty ACL.
    pub fn ensure_path(&self, path: &str, acl: &[Acl]) -> Result<()> {
        validate(path, false)?;
        if acl.is_empty() {
            return Err(Error::InvalidArgument("the ACL must not be empty".into()));
        }
        if path == "/" {
            return self.exists(path)?.map(drop).ok_or(Error::NoNode);
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
                }
                Err(Error::NoNode) => match parent(next) {
                    Some(up) if up != "/" => missing.push(up),
                    // Only the root is above: a chroot node that is gone.
                    _ => return Err(Error::NoNode),
                },
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Deletes `path` and every node below it, whatever their versions and
    /// whichever sessions made them (Java's `ZKUtil.deleteRecursive`,
    /// kazoo's `delete(recursive=True)`). A node that is gone already,
    /// `path` included, is not an error: the call ends when the subtree is
    /// gone.
    ///
    /// Leaves go in `multi`s of up to 100 deletes, so a wide directory
    /// costs a round trip per hundred children; a `multi` that fails (a
    /// child with children of its own, or one deleted meanwhile) is done
    /// again one node at a time. Not atomic: other clients may see the
    /// subtree part deleted, and the call may fail part way (with
    /// `ConnectionLoss`, say), leaving the rest, so it is safe to call
    /// again. Nodes created meanwhile are deleted too, up to ten listings
    /// of one node, after which the call fails with `NotEmpty`.
    ///
    /// Deleting a lock's directory deletes its holders' and waiters' nodes:
    /// they lose the lock. `/` is refused with `InvalidPath`, as a delete of
    /// it is by the server.
    pub fn delete_recursive(&self, path: &str) -> Result<()> {
        validate(path, false)?;
        if path == "/" {
            return Err(Error::InvalidPath {
                path: path.to_owned(),
                reason: "the root cannot be deleted",
            });
        }
        // Nodes to delete, with how many times each was listed; a node's
        // children go above it.
        let mut pending = vec![(path.to_owned(), 0)];
        while let Some((node, listings)) = pending.pop() {
            match self.delete(&node, None) {
                Ok(()) | Err(Error::NoNode) => continue,
                Err(Error::NotEmpty) if listings < MAX_LISTINGS => {}
                Err(e) => return Err(e),
            }
            let children = match self.get_children(&node) {
                Ok(children) => children,
                Err(Error::NoNode) => continue,
                Err(e) => return Err(e),
            };
            pending.push((node.clone(), listings + 1));
            let paths: Vec<String> = children
                .iter()
                .map(|child| super::path::join(&node, child))
                .collect();
            for chunk in chunks(&paths) {
                let deletes: Vec<Op> = chunk.iter().map(|p| Op::delete(p.as_str(), None)).collect();
                match self.multi(&deletes) {
                    Ok(_) => {}
                    Err(Error::MultiFailed { .. }) => {
                        pending.extend(chunk.iter().map(|p| (p.clone(), 0)));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// `paths` in runs that fit one `multi` of deletes.
fn chunks(paths: &[String]) -> impl Iterator<Item = &[String]> {
    let mut rest = paths;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut len = 0;
        for path in rest.iter().take(DELETES_PER_MULTI) {
            bytes += path.len();
            // One path always goes, however long: the server judges it.
            if len > 0 && bytes > PATH_BYTES_PER_MULTI {
                break;
            }
            len += 1;
        }
        let (chunk, after) = rest.split_at(len);
        rest = after;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_go_in_runs_of_at_most_a_hundred_and_256_kib_of_paths() {
        let short: Vec<String> = (0..250).map(|i| format!("/d/{i}")).collect();
        let lens: Vec<usize> = chunks(&short).map(<[String]>::len).collect();
        assert_eq!(lens, [100, 100, 50]);
        let long: Vec<String> = (0..5)
            .map(|i| format!("/{i}{}", "x".repeat(100_000)))
            .collect();
        let lens: Vec<usize> = chunks(&long).map(<[String]>::len).collect();
        assert_eq!(lens, [2, 2, 1]);
        let huge = vec!["/".to_owned() + &"y".repeat(300_000)];
        assert_eq!(chunks(&huge).map(<[String]>::len).collect::<Vec<_>>(), [1]);
        assert_eq!(chunks(&[]).count(), 0);
    }
}
