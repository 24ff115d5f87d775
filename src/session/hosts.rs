//! Which server to try next.

use std::time::{Duration, Instant};

use crate::rand::Rng;

/// Pause after every host in the list has failed in a row, so a dead
/// ensemble is not hammered.
const CYCLE_BACKOFF: Duration = Duration::from_millis(250);

/// The hosts of the connect string, shuffled once, tried round-robin.
#[derive(Debug)]
pub(crate) struct HostList {
    hosts: Vec<String>,
    next: usize,
    failures_in_a_row: usize,
    not_before: Option<Instant>,
}

impl HostList {
    pub(crate) fn new(mut hosts: Vec<String>, rng: &mut Rng) -> HostList {
        rng.shuffle(&mut hosts);
        HostList {
            hosts,
            next: 0,
            failures_in_a_row: 0,
            not_before: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// The host to try next, and the earliest time to try it.
    pub(crate) fn next(&mut self, now: Instant) -> Option<(String, Instant)> {
        let host = self.hosts.get(self.next % self.hosts.len().max(1))?.clone();
        self.next = (self.next + 1) % self.hosts.len();
        Some((host, self.not_before.unwrap_or(now).max(now)))
    }

    /// A connection attempt (or handshake) failed.
    pub(crate) fn failed(&mut self, now: Instant) {
        self.failures_in_a_row += 1;
        if self.failures_in_a_row % self.hosts.len().max(1) == 0 {
            self.not_before = Some(now + CYCLE_BACKOFF);
        }
    }

    /// A handshake succeeded: a full cycle of failures counts from here.
    pub(crate) fn connected(&mut self) {
        self.failures_in_a_row = 0;
        self.not_before = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_with_backoff_after_a_full_failed_cycle() {
        let now = Instant::now();
        let mut hosts = HostList::new(vec!["a:1".into(), "b:2".into()], &mut Rng::seeded(3));
        let (first, at) = hosts.next(now).unwrap();
        assert_eq!(at, now);
        hosts.failed(now);
        let (second, at) = hosts.next(now).unwrap();
        assert_ne!(first, second);
        assert_eq!(at, now);
        hosts.failed(now);
        let (third, at) = hosts.next(now).unwrap();
        assert_eq!(third, first);
        assert_eq!(at, now + CYCLE_BACKOFF);
        hosts.connected();
        assert_eq!(hosts.next(now).unwrap().1, now);
    }
}
