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

/// The hosts of the connect string, shuffled once, tried round-robin. A
/// name that resolves to several addresses (a DNS round robin, a headless
/// service, a name with both IPv4 and IPv6 addresses) takes a turn for
/// each once looked up, each at the next of its addresses, so that a pass
/// tries every address once.
#[derive(Debug)]
pub(crate) struct HostList {
    hosts: Vec<Host>,
    /// The host given last, or to be given next after [`Self::prefer`].
    next: usize,
    /// Failed attempts since the last pause (or connection).
    failed_in_pass: usize,
    /// Passes over every address that failed in a row.
    failed_passes: usize,
    not_before: Option<Instant>,
    /// Draws the pauses after passes of failed attempts.
    rng: Rng,
    /// When the current connection completed its handshake.
    established: Option<Instant>,
    /// Connections lost right after their handshake, in a row.
    short_lives: u32,
    /// The host [`Self::next`] gave last, and the turn it gave: the
    /// address connected to, if any.
    current: Option<(usize, usize)>,
    /// Where [`Self::next_probe`] goes on from.
    probe_next: usize,
    /// Attempts given to the host at [`Self::next`] in a row.
    given: usize,
}

/// One host of the connect string.
#[derive(Debug)]
struct Host {
    name: String,
    /// How many addresses its last lookup gave (1 until looked up).
    addresses: usize,
    /// How many attempts it has been given, from a random start so that
    /// clients spread over its addresses.
    turns: usize,
}

/// Where to connect: a host of the connect string, and which of its
/// addresses, as a turn to be taken modulo the number its lookup gives
/// (sorted, so that the turns go round them all).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The `host:port` of the connect string.
    pub host: String,
    /// The attempt's turn among the host's addresses.
    pub turn: usize,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (address turn {})", self.host, self.turn)
    }
}

impl HostList {
    pub(crate) fn new(mut names: Vec<String>, mut rng: Rng) -> HostList {
        rng.shuffle(&mut names);
        let hosts = names
            .into_iter()
            .map(|name| Host {
                name,
                addresses: 1,
                turns: rng.below(usize::from(u16::MAX)),
            })
            .collect();
        HostList {
            hosts,
            next: 0,
            failed_in_pass: 0,
            failed_passes: 0,
            not_before: None,
            rng,
            established: None,
            short_lives: 0,
            current: None,
            probe_next: 0,
            given: 0,
        }
    }

    /// The number of hosts in the connect string: what the timeouts of
    /// reconnects and closes are shared among, as in the Java client, so
    /// that a name with many addresses does not shrink them.
    pub(crate) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// The number of addresses to try in a pass: each host's, as far as
    /// known (one for a host not looked up yet).
    pub(crate) fn addresses(&self) -> usize {
        self.hosts
            .iter()
            .fold(0usize, |sum, host| sum.saturating_add(host.addresses))
    }

    /// `host` was looked up and gave `addresses` addresses.
    pub(crate) fn resolved(&mut self, host: &str, addresses: usize) {
        for known in self.hosts.iter_mut().filter(|known| known.name == host) {
            known.addresses = addresses.max(1);
        }
    }

    /// Where to try next, and the earliest time to try it. A host is
    /// given again, at its next address, until each of its addresses (as
    /// far as its lookups tell) has had a turn; then the next host is.
    pub(crate) fn next(&mut self, now: Instant) -> Option<(Target, Instant)> {
        let count = self.hosts.len().max(1);
        let mut at = self.next % count;
        if self.given >= self.hosts.get(at)?.addresses {
            at = (at + 1) % count;
            self.given = 0;
        }
        let host = self.hosts.get_mut(at)?;
        let target = Target {
            host: host.name.clone(),
            turn: host.turns,
        };
        host.turns = host.turns.wrapping_add(1);
        self.given += 1;
        self.current = Some((at, target.turn));
        self.next = at;
        Some((target, self.not_before.unwrap_or(now).max(now)))
    }

    /// The next address to ask whether it is read-write, round-robin over
    /// every address of every host (as far as their lookups tell) but the
    /// one [`Self::next`] gave last; `None` with no other address.
    pub(crate) fn next_probe(&mut self) -> Option<Target> {
        let total = self.addresses();
        if total < 2 {
            return None;
        }
        for step in 0..total {
            let flat = (self.probe_next + step) % total;
            let Some((at, address)) = self.address_at(flat) else {
                continue;
            };
            if self.is_current((at, address)) {
                continue;
            }
            self.probe_next = (flat + 1) % total;
            let host = self.hosts.get(at)?;
            return Some(Target {
                host: host.name.clone(),
                turn: address,
            });
        }
        None
    }

    /// The host and address of the `flat`-th address, counting every
    /// address of every host in order.
    fn address_at(&self, mut flat: usize) -> Option<(usize, usize)> {
        for (at, host) in self.hosts.iter().enumerate() {
            if flat < host.addresses {
                return Some((at, flat));
            }
            flat -= host.addresses;
        }
        None
    }

    /// True if `(host, address)` is the one connected to.
    fn is_current(&self, (at, address): (usize, usize)) -> bool {
        self.current.is_some_and(|(current, turn)| {
            let count = self.hosts.get(current).map_or(1, |host| host.addresses);
            current == at && turn % count == address
        })
    }

    /// Makes `target` (one of ours, as [`Self::next_probe`] gave it) the
    /// next to connect to, at once, at the same address: a probe found it
    /// read-write.
    pub(crate) fn prefer(&mut self, target: &Target) {
        if let Some(at) = self.hosts.iter().position(|h| h.name == target.host) {
            if let Some(host) = self.hosts.get_mut(at) {
                host.turns = target.turn;
            }
            self.next = at;
            self.given = 0;
            self.not_before = None;
        }
    }

    /// A connection attempt (or handshake) failed.
    pub(crate) fn failed(&mut self, now: Instant) {
        self.failed_in_pass += 1;
        // Counted afresh in each pass: a lookup may change the count.
        if self.failed_in_pass >= self.addresses() {
            self.failed_in_pass = 0;
            self.failed_passes += 1;
            self.not_before = Some(now + self.cycle_pause(self.failed_passes));
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
        self.failed_in_pass = 0;
        self.failed_passes = 0;
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
        assert_eq!(third.host, first.host);
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
        let probed: Vec<Target> = (0..4).map(|_| hosts.next_probe().unwrap()).collect();
        assert!(
            probed.iter().all(|p| p.host != connected.host),
            "{probed:?}"
        );
        assert_ne!(probed[0], probed[1]);
        assert_eq!(probed[0], probed[2]);
        assert_eq!(probed[1], probed[3]);
        hosts.prefer(&probed[1]);
        assert_eq!(hosts.next(now).unwrap(), (probed[1].clone(), now));
    }

    /// A name that resolves to three addresses takes three turns in a row,
    /// one for each of them, before the next host; the pause comes only
    /// once every address of every host has failed.
    #[test]
    fn a_name_with_several_addresses_takes_a_turn_for_each() {
        let now = Instant::now();
        let names = ["round-robin:1", "single:2"].map(String::from);
        let mut hosts = HostList::new(names.to_vec(), Rng::seeded(7));
        assert_eq!(hosts.addresses(), 2);
        hosts.resolved("round-robin:1", 3);
        assert_eq!((hosts.addresses(), hosts.len()), (4, 2));
        let mut given = Vec::new();
        for _ in 0..8 {
            let (target, at) = hosts.next(now).unwrap();
            given.push((target, at));
            hosts.failed(now);
        }
        let round_robin: Vec<usize> = given
            .iter()
            .filter(|(target, _)| target.host == "round-robin:1")
            .map(|(target, _)| target.turn % 3)
            .collect();
        assert_eq!(round_robin.len(), 6, "{given:?}");
        for pass in round_robin.chunks(3) {
            let mut turns = pass.to_vec();
            turns.sort_unstable();
            assert_eq!(turns, [0, 1, 2], "every address once a pass: {given:?}");
        }
        // Its turns come in a row; the single name's alone between passes.
        let hosts_in_order: Vec<&str> = given.iter().map(|(t, _)| t.host.as_str()).collect();
        let first_pass = &hosts_in_order[..4];
        assert_eq!(first_pass.iter().filter(|h| **h == "single:2").count(), 1);
        assert_eq!(hosts_in_order[..4], hosts_in_order[4..]);
        // No pause inside a pass, one after it.
        let paused: Vec<bool> = given.iter().map(|(_, at)| *at > now).collect();
        assert_eq!(paused, [false, false, false, false, true, true, true, true]);
    }

    /// A lookup that gives fewer addresses than the last one ends the
    /// name's turns early, and the pass still reaches the other host
    /// before its pause.
    #[test]
    fn a_count_lowered_mid_pass_still_tries_every_host_before_the_pause() {
        let now = Instant::now();
        let names = ["round-robin:1", "single:2"].map(String::from);
        let mut hosts = HostList::new(names.to_vec(), Rng::seeded(11));
        hosts.resolved("round-robin:1", 3);
        // A pass at `t`, after the last one's pause: up to the next pause.
        let mut pass = |t: Instant, lookup: Option<usize>| {
            let mut given = Vec::new();
            loop {
                let (target, at) = hosts.next(t).unwrap();
                if at > t {
                    return given;
                }
                if let (Some(count), "round-robin:1") = (lookup, target.host.as_str()) {
                    hosts.resolved(&target.host, count);
                }
                given.push(target.host);
                hosts.failed(t);
                assert!(given.len() <= 4, "{given:?}");
            }
        };
        assert_eq!(pass(now, None).len(), 4);
        let second = pass(now + Duration::from_secs(2), Some(2));
        assert_eq!(second.len(), 3, "{second:?}");
        assert!(second.contains(&"single:2".to_owned()), "{second:?}");
    }

    /// Probes go round every address but the one connected to, a single
    /// name's included, and the address that answered is connected to next.
    #[test]
    fn probes_ask_the_other_addresses_of_a_name_and_the_answering_one_is_next() {
        let now = Instant::now();
        let mut hosts = HostList::new(vec!["headless:1".into()], Rng::seeded(3));
        let (connected, _) = hosts.next(now).unwrap();
        assert_eq!(hosts.next_probe(), None, "one address known");
        hosts.resolved("headless:1", 3);
        let probed: Vec<Target> = (0..4).map(|_| hosts.next_probe().unwrap()).collect();
        assert!(probed.iter().all(|p| p.host == "headless:1"), "{probed:?}");
        let addresses: Vec<usize> = probed.iter().map(|p| p.turn).collect();
        assert!(!addresses.contains(&(connected.turn % 3)), "{addresses:?}");
        assert_ne!(addresses[0], addresses[1]);
        assert_eq!(addresses[..2], addresses[2..]);
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
