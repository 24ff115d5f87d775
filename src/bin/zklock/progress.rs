//! While `exec` waits: its place in the queue and who holds the lock, on
//! stderr, each time that changes.
//!
//! Checked once a second, cheaply, since every waiter does it: one listing
//! of the lock's children; the holder's data only when the holder changes;
//! and, until our own node is found, one `exists` per node not looked at
//! before (newest first: ours is usually the newest). A full `lock_queue`
//! instead reads every node each time: with 30 waiters, ~900 requests a
//! second.

use std::collections::HashSet;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use zklock::recipes::{holding, queue_order};
use zklock::Client;

use crate::holders::printable;

/// How often the queue is looked at.
const PERIOD: Duration = Duration::from_secs(1);

/// Reports until `done` is dropped or sent on.
pub fn report(client: &Client, path: &str, done: &Receiver<()>) {
    let mut progress = Progress {
        client,
        path,
        ours: None,
        not_ours: HashSet::new(),
        holder: None,
    };
    let mut last = String::new();
    // A lock acquired within the first period is reported on by nobody.
    while done.recv_timeout(PERIOD) == Err(RecvTimeoutError::Timeout) {
        match progress.line() {
            Some(line) if line != last => {
                say!("{line}");
                last = line;
            }
            _ => {}
        }
    }
}

struct Progress<'a> {
    client: &'a Client,
    path: &'a str,
    /// Our node's name, once found.
    ours: Option<String>,
    /// Nodes found to be another session's.
    not_ours: HashSet<String>,
    /// The holder's node name, and what the line says of it.
    holder: Option<(String, String)>,
}

impl Progress<'_> {
    /// The line to show now, if any: none while our node is not found, nor
    /// once it holds.
    fn line(&mut self) -> Option<String> {
        let children = self.client.get_children(self.path).ok()?;
        let queue = queue_order(&children);
        let names: Vec<&str> = queue.iter().map(|c| c.name).collect();
        let ahead = self.find_ours(&names)?;
        if ahead < holding(queue.iter().map(|c| c.kind)) {
            return None;
        }
        let first = names.first()?;
        let holder = match &self.holder {
            Some((name, said)) if name == first => said.clone(),
            _ => {
                let (data, stat) = self.client.get_data(&self.node(first)).ok()?;
                let said = format!("{} (token {})", printable(&data), stat.czxid);
                self.holder = Some(((*first).to_owned(), said.clone()));
                said
            }
        };
        Some(format!(
            "zklock: waiting for {}: {ahead} ahead; held by {holder}",
            self.path
        ))
    }

    /// Our node's place in `queue`, looking at each unknown node once.
    fn find_ours(&mut self, queue: &[&str]) -> Option<usize> {
        if let Some(ours) = &self.ours {
            return queue.iter().position(|n| n == ours);
        }
        // Forget nodes that are gone, so that the set stays small.
        self.not_ours.retain(|n| queue.contains(&n.as_str()));
        let session = self.client.session_id();
        for (at, name) in queue.iter().enumerate().rev() {
            if self.not_ours.contains(*name) {
                continue;
            }
            match self.client.exists(&self.node(name)) {
                Ok(Some(stat)) if stat.ephemeral_owner == session => {
                    self.ours = Some((*name).to_owned());
                    return Some(at);
                }
                Ok(_) => {
                    self.not_ours.insert((*name).to_owned());
                }
                Err(_) => return None,
            }
        }
        None
    }

    fn node(&self, name: &str) -> String {
        format!("{}/{name}", self.path.trim_end_matches('/'))
    }
}
