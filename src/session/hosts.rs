//! Which server to try next.

use std::time::{Duration, Instant};

use crate::rand::Rng;

/// Pause after every host in the list has failed in a row, so a dead
/// ensemble is not hammered, doubling with each such pass up to
/// `MAX_CYCLE_BACKOFF` (each drawn at random from its upper half, so that a
/// fleet of clients an election dropped at once does not retry in step);
/// also the first pause after connections that are lost right after their
/// handshake.
const CYCLE_BACKOFF: Duration = Duration::from_millis(250);

/// The longest pause after a pass of failed attempts: the Java client's
/// pause after trying every host.
const MAX_CYCLE_BACKOFF: Duration = Duration::from_secs(1);

/// The longest pause after connections lost right after their handshake:
/// short enough that requests waiting for a connection (for the session
/// timeout, at least 4 s with a default server) still get one.
const MAX_FLAP_BACKOFF: Duration = Duration::from_secs(2);

/// A connection lost sooner than this after its handshake did not live
/// normally: a server that takes the handshake and then closes at once
/// (a 3.5 server refusing setWatches2, say) would otherwise be reconnected
/// to in a tight loop.
const SHORT_LIFE: Duration = Duration::from_secs(1);

/// The hosts of the connect string, shuffled once, tried round-robin.
#[derive(Debug)]
pub(crate) struct HostList {
    hosts: Vec<String>,
    next: usize,
    failures_in_a_row: usize,
    not_before: Option<Instant>,
    /// Draws the pauses after passes of failed attempts.
    rng: Rng,
    /// When the current connection completed its handshake.
    established: Option<Instant>,
    /// Connections lost right after their handshake, in a row.
    short_lives: u32,
    /// The host [`Self::next`] gave last: the one connected to, if any.
    current: Option<usize>,
    /// Where [`Self::next_probe`] goes on from.
    probe_next: usize,
}

impl HostList {
    pub(crate) fn new(mut hosts: Vec<String>, mut rng: Rng) -> HostList {
        rng.shuffle(&mut hosts);
        HostList {
            hosts,
            next: 0,
            failures_in_a_row: 0,
            not_before: None,
            rng,
            established: None,
            short_lives: 0,
            current: None,
            probe_next: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// The host to try next, and the earliest time to try it.
    pub(crate) fn next(&mut self, now: Instant) -> Option<(String, Instant)> {
        let at = self.next % self.hosts.len().max(1);
        let host = self.hosts.get(at)?.clone();
        self.current = Some(at);
        self.next = (at + 1) % self.hosts.len();
        Some((host, self.not_before.unwrap_or(now).max(now)))
    }

    /// The next host to ask whether it is read-write, round-robin over all
    /// but the one [`Self::next`] gave last; `None` with no other host.
    pub(crate) fn next_probe(&mut self) -> Option<String> {
        if self.hosts.len() < 2 {
            return None;
        }
        let others = (0..self.hosts.len())
            .map(|step| (self.probe_next + step) % self.hosts.len())
            .find(|at| Some(*at) != self.current)?;
        self.probe_next = (others + 1) % self.hosts.len();
        self.hosts.get(others).cloned()
    }

    /// Makes `host` (one of ours) the next to connect to, at once: a probe
    /// found it read-write.
    pub(crate) fn prefer(&mut self, host: &str) {
        if let Some(at) = self.hosts.iter().position(|h| h == host) {
            self.next = at;
            self.not_before = None;
        }
    }

    /// A connection attempt (or handshake) failed.
    pub(crate) fn failed(&mut self, now: Instant) {
        self.failures_in_a_row += 1;
        let hosts = self.hosts.len().max(1);
        if self.failures_in_a_row % hosts == 0 {
            let passes = self.failures_in_a_row / hosts;
            self.not_before = Some(now + self.cycle_pause(passes));
        }
    }

    /// The pause after `passes` failed passes in a row: from the upper half
    /// of 250 ms doubled each pass, up to 1 s.
    fn cycle_pause(&mut self, passes: usize) -> Duration {
        let doublings = u32::try_from(passes.saturating_sub(1)).unwrap_or(u32::MAX);
        let half = doubled(doublings, MAX_CYCLE_BACKOFF) / 2;
        let span = usize::try_from(half.as_micros()).unwrap_or(usize::MAX);
        let drawn = u64::try_from(self.rng.below(span.saturating_add(1))).unwrap_or(0);
        half + Duration::from_micros(drawn)
    }

    /// A handshake succeeded: a full cycle of failures counts from here.
    pub(crate) fn connected(&mut self, now: Instant) {
        self.failures_in_a_row = 0;
        self.not_before = None;
        self.established = Some(now);
    }

    /// An established connection was lost. The first loss in a row soon
    /// after the handshake reconnects at once like any other, since an
    /// ordinary cut may come early too and lock handoffs wait on the
    /// reconnect; only from the second on is there a pause, doubling up to
    /// `MAX_FLAP_BACKOFF`.
    pub(crate) fn lost(&mut self, now: Instant) {
        let lived = self
            .established
            .take()
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        if lived >= SHORT_LIFE {
            self.short_lives = 0;
            return;
        }
        self.short_lives = self.short_lives.saturating_add(1);
        if self.short_lives >= 2 {
            let pause = doubled(self.short_lives - 2, MAX_FLAP_BACKOFF);
            self.not_before = Some(now + pause);
        }
    }
}

/// `CYCLE_BACKOFF` doubled `doublings` times, up to `cap`.
fn doubled(doublings: u32, cap: Duration) -> Duration {
    CYCLE_BACKOFF
        .saturating_mul(1 << doublings.min(16))
        .min(cap)
}

/// An even share of `time` among `hosts` (at least one).
pub(super) fn share_among(time: Duration, hosts: usize) -> Duration {
    time / u32::try_from(hosts.max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_with_backoff_after_a_full_failed_cycle() {
        let now = Instant::now();
        let mut hosts = HostList::new(vec!["a:1".into(), "b:2".into()], Rng::seeded(3));
        let (first, at) = hosts.next(now).unwrap();
        assert_eq!(at, now);
        hosts.failed(now);
        let (second, at) = hosts.next(now).unwrap();
        assert_ne!(first, second);
        assert_eq!(at, now);
        hosts.failed(now);
        let (third, at) = hosts.next(now).unwrap();
        assert_eq!(third, first);
        let pause = at - now;
        assert!(
            pause >= CYCLE_BACKOFF / 2 && pause <= CYCLE_BACKOFF,
            "{pause:?}"
        );
        hosts.connected(now);
        assert_eq!(hosts.next(now).unwrap().1, now);
    }

    /// Each failed pass doubles the pause's ceiling up to 1 s, and the
    /// pause is drawn from the ceiling's upper half: clients dropped
    /// together do not retry in step. A connection starts over.
    #[test]
    fn pauses_after_failed_passes_grow_to_a_second_and_differ_between_clients() {
        let now = Instant::now();
        let pauses = |seed| {
            let names = ["a:1", "b:2", "c:3"].map(String::from);
            let mut hosts = HostList::new(names.to_vec(), Rng::seeded(seed));
            let mut pauses = Vec::new();
            for _ in 0..6 {
                for _ in 0..3 {
                    hosts.next(now).unwrap();
                    hosts.failed(now);
                }
                pauses.push(hosts.next(now).unwrap().1 - now);
            }
            hosts.connected(now);
            assert_eq!(hosts.next(now).unwrap().1, now);
            pauses
        };
        let (one, other) = (pauses(1), pauses(2));
        let ceilings = [250, 500, 1000, 1000, 1000, 1000].map(Duration::from_millis);
        for (pause, ceiling) in one.iter().chain(&other).zip(ceilings.iter().cycle()) {
            assert!(
                *pause >= *ceiling / 2 && pause <= ceiling,
                "{pause:?} of {ceiling:?}"
            );
        }
        assert_ne!(one, other, "two clients' pauses are drawn apart");
    }

    #[test]
    fn probes_go_round_the_other_hosts_and_a_preferred_one_is_next() {
        let now = Instant::now();
        let names = ["a:1", "b:2", "c:3"].map(String::from);
        let mut hosts = HostList::new(names.to_vec(), Rng::seeded(5));
        let (connected, _) = hosts.next(now).unwrap();
        hosts.failed(now);
        hosts.failed(now);
        hosts.failed(now);
        let probed: Vec<String> = (0..4).map(|_| hosts.next_probe().unwrap()).collect();
        assert!(!probed.contains(&connected), "{probed:?}");
        assert_ne!(probed[0], probed[1]);
        assert_eq!(probed[0], probed[2]);
        assert_eq!(probed[1], probed[3]);
        hosts.prefer(&probed[1]);
        assert_eq!(hosts.next(now).unwrap(), (probed[1].clone(), now));
    }

    #[test]
    fn a_single_host_has_nothing_to_probe() {
        let mut hosts = HostList::new(vec!["a:1".into()], Rng::seeded(1));
        assert_eq!(hosts.next_probe(), None);
        hosts.next(Instant::now()).unwrap();
        assert_eq!(hosts.next_probe(), None);
    }
}
