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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use zklock::recipes::{holding, queue_order};
use zklock::Client;

use crate::holders::printable_cut;

/// How many characters of the holder's node data a waiting line shows.
const HOLDER_DATA_SHOWN: usize = 1000;

/// How often the queue is looked at.
const PERIOD: Duration = Duration::from_secs(1);

/// Whether progress lines may still be written: the waiting thread ends
/// them, under this lock, before it says anything of its own, so that no
/// line comes after. The reporter is not waited for: a request of its
/// own, on a server gone silent, could hold it for 2/3 of the session
/// timeout (twice it, on a broken one that answers pings only).
pub struct Reporting(Mutex<bool>);

impl Reporting {
    pub fn new() -> Arc<Reporting> {
        Arc::new(Reporting(Mutex::new(true)))
    }

    /// No line from now on.
    pub fn end(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = false;
    }

    fn is_open(&self) -> bool {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `line` unless reporting has ended; false if it has.
    fn say(&self, line: &str) -> bool {
        let open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if *open {
            say!("{line}");
        }
        *open
    }
}

/// Reports, on a thread of its own, until `reporting` ends. Without one
/// (the process limit reached), zklock waits without progress lines.
pub fn start(client: Client, path: String, reporting: Arc<Reporting>) {
    let spawned = std::thread::Builder::new().spawn(move || report(&client, &path, &reporting));
    if let Err(e) = spawned {
        say!("zklock: warning: no progress lines: cannot start a thread: {e}");
    }
}

fn report(client: &Client, path: &str, reporting: &Reporting) {
    let mut progress = Progress {
        client,
        path,
        ours: None,
        not_ours: HashSet::new(),
        holder: None,
    };
    let mut last = String::new();
    // A lock acquired within the first period is reported on by nobody.
    loop {
        std::thread::sleep(PERIOD);
        if !reporting.is_open() {
            return;
        }
        if let Some(line) = progress.line().filter(|line| *line != last) {
            if !reporting.say(&line) {
                return;
            }
            last = line;
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
                let data = printable_cut(&data, HOLDER_DATA_SHOWN);
                let said = format!("{data} (token {})", stat.czxid);
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
