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
/// tries every address once; every name has its turn before any name's
/// second address (which may well be the same server, dual-stack).
#[derive(Debug)]
pub(crate) struct HostList {
    hosts: Vec<Host>,
    /// Where the round-robin goes on from.
    next: usize,
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
    /// How many attempts it has been given in this pass.
    given: usize,
}

/// Where to connect: a host of the connect string, and which of its
/// addresses, as a turn that the driver takes modulo the number of
/// addresses its lookup gives, sorted, so that the turns go round them
/// all. The turn is opaque: two targets equal only if they name the same
/// host at the same turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub(crate) host: String,
    pub(crate) turn: usize,
}

impl Target {
    /// The `host:port` of the connect string.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The address to use among `addresses` (as the host's lookup gave
    /// them, in any order), and how many distinct ones there are.
    pub fn pick(
        &self,
        addresses: &[std::net::SocketAddr],
    ) -> (Option<std::net::SocketAddr>, usize) {
        let mut sorted = addresses.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let addr = sorted.get(self.turn % sorted.len().max(1)).copied();
        (addr, sorted.len())
    }
}

/// The host alone: which of its addresses is the driver's to say.
impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.host)
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
                given: 0,
            })
            .collect();
        HostList {
            hosts,
            next: 0,
            failed_passes: 0,
            not_before: None,
            rng,
            established: None,
            short_lives: 0,
            current: None,
            probe_next: 0,
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

    /// Where to try next, and the earliest time to try it: the next host,
    /// round-robin, that has not had a turn for each of its addresses (as
    /// far as its lookups tell) in this pass, at its next address; a new
    /// pass once every host has.
    pub(crate) fn next(&mut self, now: Instant) -> Option<(Target, Instant)> {
        let count = self.hosts.len();
        let open = |hosts: &[Host], from: usize| {
            (0..count)
                .map(|step| (from + step) % count)
                .find(|at| hosts.get(*at).is_some_and(|h| h.given < h.addresses))
        };
        let at = match open(&self.hosts, self.next) {
            Some(at) => at,
            None => {
                self.start_pass();
                open(&self.hosts, self.next)?
            }
        };
        let host = self.hosts.get_mut(at)?;
        let target = Target {
            host: host.name.clone(),
            turn: host.turns,
        };
        host.turns = host.turns.wrapping_add(1);
        host.given += 1;
        self.current = Some((at, target.turn));
        self.next = (at + 1) % count;
        Some((target, self.not_before.unwrap_or(now).max(now)))
    }

    /// Every host may have its turns again.
    fn start_pass(&mut self) {
        for host in &mut self.hosts {
            host.given = 0;
        }
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
                host.given = 0;
            }
            self.next = at;
            self.not_before = None;
        }
    }

    /// A connection attempt (or handshake) failed.
    pub(crate) fn failed(&mut self, now: Instant) {
        // The pass is over once every host has had its turns, as many as
        // its latest lookup says: a lookup may change the count mid-pass.
        if self.hosts.iter().all(|host| host.given >= host.addresses) {
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

    /// The pause before the next attempt is waived (a close, whose every
    /// moment keeps the session's locks from the others).
    pub(crate) fn cut_pause(&mut self) {
        self.not_before = None;
    }

    /// A handshake succeeded: a full cycle of failures counts from here.
    pub(crate) fn connected(&mut self, now: Instant) {
        self.failed_passes = 0;
        self.start_pass();
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

    /// A name that resolves to three addresses takes three turns in a pass,
    /// one at each of them, the other name's coming before its second;
    /// the pause comes only once every address of every host has failed.
    #[test]
    fn a_name_with_several_addresses_takes_a_turn_for_each() {
        let start = Instant::now();
        let names = ["round-robin:1", "single:2"].map(String::from);
        let mut hosts = HostList::new(names.to_vec(), Rng::seeded(7));
        assert_eq!(hosts.addresses(), 2);
        hosts.resolved("round-robin:1", 3);
        assert_eq!((hosts.addresses(), hosts.len()), (4, 2));
        // Attempts made as soon as they are due: a pause starts a pass.
        let mut t = start;
        let mut passes: Vec<Vec<Target>> = vec![Vec::new()];
        for _ in 0..8 {
            let (target, at) = hosts.next(t).unwrap();
            if at > t {
                let last = passes.last().map_or(0, Vec::len);
                assert_eq!(last, 4, "a pause inside a pass: {passes:?}");
                passes.push(Vec::new());
                t = at;
            }
            if let Some(pass) = passes.last_mut() {
                pass.push(target);
            }
            hosts.failed(t);
        }
        assert_eq!(passes.len(), 2, "{passes:?}");
        let (first, second) = (&passes[0], &passes[1]);
        for given in [first, second] {
            let names: Vec<&str> = given.iter().map(|t| t.host.as_str()).collect();
            assert_ne!(names[0], names[1], "both names before a second address");
            let mut turns: Vec<usize> = given
                .iter()
                .filter(|t| t.host == "round-robin:1")
                .map(|t| t.turn % 3)
                .collect();
            turns.sort_unstable();
            assert_eq!(turns, [0, 1, 2], "every address once a pass: {given:?}");
        }
    }

    /// Turns go round the distinct addresses whatever order the resolver
    /// gives them in (a DNS round robin rotates it on every lookup).
    #[test]
    fn turns_go_round_the_addresses_in_a_fixed_order() {
        let a: std::net::SocketAddr = "127.0.0.1:2181".parse().unwrap();
        let b: std::net::SocketAddr = "127.0.0.2:2181".parse().unwrap();
        let c: std::net::SocketAddr = "[::1]:2181".parse().unwrap();
        let rotations = [vec![a, b, c, a], vec![b, c, a], vec![c, a, b, b]];
        let picked: Vec<_> = rotations
            .iter()
            .enumerate()
            .map(|(i, addresses)| {
                let target = Target {
                    host: "round-robin:2181".into(),
                    turn: 7 + i,
                };
                target.pick(addresses)
            })
            .collect();
        assert_eq!(picked, [(Some(b), 3), (Some(c), 3), (Some(a), 3)]);
        let any = Target {
            host: "none:2181".into(),
            turn: 0,
        };
        assert_eq!(any.pick(&[]), (None, 0));
    }

    /// After a connection to a name of two addresses (dual-stack: likely
    /// the same server) is lost, the next attempt goes to the other name.
    #[test]
    fn a_lost_connection_moves_on_to_the_next_name_first() {
        let now = Instant::now();
        let names = ["dual:1", "other:2"].map(String::from);
        let mut from_dual = 0;
        for seed in 0..8 {
            let mut hosts = HostList::new(names.to_vec(), Rng::seeded(seed));
            hosts.resolved("dual:1", 2);
            let (first, _) = hosts.next(now).unwrap();
            hosts.connected(now);
            hosts.lost(now + SHORT_LIFE);
            let (second, _) = hosts.next(now).unwrap();
            assert_ne!(second.host, first.host, "seed {seed}");
            from_dual += usize::from(first.host == "dual:1");
        }
        assert!(from_dual > 0, "no seed connected to the dual name first");
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
        // Attempts made when due, each failing; a pause starts a pass. In
        // the second pass, the name's lookups give two addresses.
        let mut t = now;
        let mut passes: Vec<Vec<String>> = vec![Vec::new()];
        for _ in 0..7 {
            let (target, at) = hosts.next(t).unwrap();
            if at > t {
                passes.push(Vec::new());
                t = at;
            }
            if passes.len() == 2 && target.host == "round-robin:1" {
                hosts.resolved(&target.host, 2);
            }
            if let Some(pass) = passes.last_mut() {
                pass.push(target.host);
            }
            hosts.failed(t);
        }
        assert_eq!(passes.len(), 2, "{passes:?}");
        assert_eq!(passes[0].len(), 4, "{passes:?}");
        let second = &passes[1];
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
