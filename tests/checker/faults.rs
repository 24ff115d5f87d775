//! The seeded fault schedule and the faults themselves.
//!
//! Faults are injected one at a time, each healed before the next, with a
//! short quiet gap between them. The kinds are dealt from a shuffled deck
//! (every kind once per round), so even a short run sees each kind.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::testing::{FaultProxy, ProxyMode};
use zklock::{Client, Error};

use crate::events::now_ns;
use crate::procs::Contenders;
use crate::rng::Rng;
use crate::topology::Topology;

/// The `create2` opcode, which lock nodes are created with.
const CREATE2: i32 = 15;
/// The `getChildren` and `getChildren2` opcodes.
const GET_CHILDREN: i32 = 8;
const GET_CHILDREN2: i32 = 12;

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// SIGKILL the server (standalone) or the leader (cluster), restart it.
    ServerKill,
    /// SIGSTOP a server past the session timeout, then SIGCONT.
    ServerPause,
    /// Partition one contender: its connections stall.
    Blackhole,
    /// Partition one contender for 4 to 6 session timeouts: its session
    /// expires while it cannot hear of it.
    LongPartition,
    /// Slow one contender's connections down.
    Delay,
    /// Close one contender's connections.
    Cut,
    /// Close one contender's connections and refuse new ones for a while.
    Refuse,
    /// Close one contender's connection right after a request reaches the
    /// server, so the reply is lost: a create2 half the time, else a
    /// delete, exists, getData, setData or getChildren.
    CutAfterRequest,
    /// The same, then a cut right after the next getChildren, which is
    /// likely the listing that looks for the node the lost create made.
    CutAfterCreateThenList,
    /// SIGKILL the contender that owns the lowest lock node (the holder),
    /// and start a replacement.
    HolderKill,
    /// Cut an ensemble member (the leader half the time) off from the
    /// others, while its clients still reach it, then heal the partition
    /// (nothing on a standalone server).
    MemberPartition,
}

impl FaultKind {
    pub const ALL: [FaultKind; 11] = [
        FaultKind::ServerKill,
        FaultKind::ServerPause,
        FaultKind::Blackhole,
        FaultKind::LongPartition,
        FaultKind::Delay,
        FaultKind::Cut,
        FaultKind::Refuse,
        FaultKind::CutAfterRequest,
        FaultKind::CutAfterCreateThenList,
        FaultKind::HolderKill,
        FaultKind::MemberPartition,
    ];

    /// The kind named `name` (its variant name, any case).
    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .find(|k| format!("{k:?}").eq_ignore_ascii_case(name))
    }

    pub fn label(self) -> &'static str {
        match self {
            FaultKind::ServerKill => "kill -9 + restart of the server / leader",
            FaultKind::ServerPause => "SIGSTOP/SIGCONT of a server past the session timeout",
            FaultKind::Blackhole => "blackhole of a contender's connections",
            FaultKind::LongPartition => "blackhole of a contender for 4-6 session timeouts",
            FaultKind::Delay => "delay of a contender's connections",
            FaultKind::Cut => "cut of a contender's connections",
            FaultKind::Refuse => "cut + refused reconnects of a contender",
            FaultKind::CutAfterRequest => {
                "cut right after a contender's request (create2 or other)"
            }
            FaultKind::CutAfterCreateThenList => {
                "cut right after a create2, then after the next getChildren"
            }
            FaultKind::HolderKill => "kill -9 of the lock holder + replacement",
            FaultKind::MemberPartition => "partition of an ensemble member from the others",
        }
    }
}

/// One injected fault, for the report and the checks.
#[derive(Debug, Clone)]
pub struct Fault {
    pub kind: FaultKind,
    pub start_ns: u64,
    /// When it was healed (equal to `start_ns` for instant faults).
    pub end_ns: u64,
    pub what: String,
    /// For the cuts after a request: whether the cut fired.
    pub fired: bool,
}

/// Deals fault kinds and draws their parameters.
pub struct Schedule {
    rng: Rng,
    kinds: Vec<FaultKind>,
    deck: Vec<FaultKind>,
}

impl Schedule {
    /// A schedule dealing `kinds` (all of them if empty).
    pub fn new(rng: Rng, kinds: &[FaultKind]) -> Schedule {
        let kinds = if kinds.is_empty() {
            FaultKind::ALL.to_vec()
        } else {
            kinds.to_vec()
        };
        Schedule {
            rng,
            kinds,
            deck: Vec::new(),
        }
    }

    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// The next kind: the top of the deck, reshuffled when empty.
    pub fn next_kind(&mut self) -> FaultKind {
        if self.deck.is_empty() {
            self.deck = self.kinds.clone();
            self.rng.shuffle(&mut self.deck);
        }
        self.deck.pop().unwrap_or(FaultKind::Cut)
    }

    /// The quiet time before the next fault.
    pub fn gap(&mut self) -> Duration {
        self.rng.ms(300, 1500)
    }
}

/// What a fault acts on.
pub struct Target<'a> {
    pub topology: &'a Topology,
    pub contenders: &'a mut Contenders,
    pub admin: &'a Client,
    pub lock: &'a str,
    pub session: Duration,
}

/// Injects one fault of `kind` and heals it. `Ok(None)` when it does not
/// apply right now (no holder to kill); `Err` when the servers could not be
/// brought back, which ends the run.
pub fn inject(
    kind: FaultKind,
    target: &mut Target<'_>,
    rng: &mut Rng,
) -> Result<Option<Fault>, String> {
    let t_ms = u64::try_from(target.session.as_millis()).unwrap_or(u64::MAX);
    let start_ns = now_ns();
    // Network faults hit the holder half the time (a fault in the middle
    // of a critical section is the interesting case), anyone otherwise.
    // (Both draws are always made, so the schedule does not depend on
    // whether a holder was found.)
    let (want_holder, any) = (rng.chance(1, 2), rng.index(target.contenders.slots.len()));
    let network_fault = !matches!(
        kind,
        FaultKind::ServerKill
            | FaultKind::ServerPause
            | FaultKind::HolderKill
            | FaultKind::MemberPartition
    );
    let holder = if want_holder && network_fault {
        holder_pid(target.admin, target.lock).and_then(|pid| target.contenders.slot_of_pid(pid))
    } else {
        None
    };
    let slot = holder.unwrap_or(any);
    let slot_name = target.contenders.slots[slot]
        .current
        .as_ref()
        .map_or_else(|| format!("slot {slot}"), |p| p.name.clone())
        + if holder.is_some() {
            " (the holder)"
        } else {
            ""
        };
    let proxies = &target.contenders.slots[slot].proxies;
    let mut fired = false;
    let what = match kind {
        FaultKind::ServerKill => {
            let down = rng.ms(0, t_ms * 3 / 2);
            let killed = target.topology.kill_and_restart(down)?;
            format!("{killed}, down {down:?} before the restart")
        }
        FaultKind::ServerPause => {
            let paused = rng.ms(t_ms + t_ms / 5, 2 * t_ms);
            let who = target.topology.pause_and_resume(paused, rng)?;
            format!("{who} stopped for {paused:?}")
        }
        FaultKind::Blackhole | FaultKind::LongPartition => {
            let held = if kind == FaultKind::Blackhole {
                rng.ms(t_ms * 3 / 10, t_ms * 9 / 5)
            } else {
                rng.ms(4 * t_ms, 6 * t_ms)
            };
            proxies
                .iter()
                .for_each(|p| p.set_mode(ProxyMode::Blackhole));
            std::thread::sleep(held);
            proxies.iter().for_each(|p| p.set_mode(ProxyMode::Pass));
            format!("{slot_name} partitioned for {held:?}")
        }
        FaultKind::Delay => {
            let delay = rng.ms(10, t_ms / 4);
            let held = rng.ms(1000, 3000);
            proxies
                .iter()
                .for_each(|p| p.set_mode(ProxyMode::Delay(delay)));
            std::thread::sleep(held);
            proxies.iter().for_each(|p| p.set_mode(ProxyMode::Pass));
            format!("{slot_name} delayed by {delay:?} for {held:?}")
        }
        FaultKind::Cut => {
            let times = rng.range(1, 4);
            for i in 0..times {
                if i > 0 {
                    std::thread::sleep(rng.ms(50, 400));
                }
                proxies.iter().for_each(|p| p.cut());
            }
            format!("{slot_name} cut {times}x")
        }
        FaultKind::Refuse => {
            let held = rng.ms(t_ms / 5, t_ms * 6 / 5);
            proxies.iter().for_each(|p| p.refuse(true));
            proxies.iter().for_each(|p| p.cut());
            std::thread::sleep(held);
            proxies.iter().for_each(|p| p.refuse(false));
            format!("{slot_name} cut, reconnects refused for {held:?}")
        }
        FaultKind::CutAfterRequest => {
            let others = [
                ("delete", 2),
                ("exists", 3),
                ("getData", 4),
                ("setData", 5),
                ("getChildren", GET_CHILDREN),
            ];
            let (name, op) = if rng.chance(1, 2) {
                ("create2", CREATE2)
            } else {
                others[rng.index(others.len())]
            };
            fired = cut_after(proxies, move |opcode| opcode == op);
            format!("{slot_name}: cut after {name} {}", fired_text(fired))
        }
        FaultKind::CutAfterCreateThenList => {
            // One predicate shared by all the contender's proxies: the first
            // create2 is cut (stage 1), then the first getChildren after it,
            // which goes through another proxy since the client reconnects
            // to its next host. So the second cut is not raced.
            let stage = Arc::new(AtomicU8::new(0));
            let shared = stage.clone();
            let advance = move |from: u8| {
                shared
                    .compare_exchange(from, from + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            };
            cut_after(proxies, move |opcode| match opcode {
                CREATE2 => advance(0),
                GET_CHILDREN | GET_CHILDREN2 => advance(1),
                _ => false,
            });
            let reached = stage.load(Ordering::SeqCst);
            fired = reached == 2;
            let result = match reached {
                0 => "did not fire",
                1 => "fired after create2 only",
                _ => "fired after create2, then after getChildren",
            };
            format!("{slot_name}: cut {result}")
        }
        FaultKind::HolderKill => {
            let Some(pid) = holder_pid(target.admin, target.lock) else {
                return Ok(None);
            };
            let Some(slot) = target.contenders.slot_of_pid(pid) else {
                return Ok(None);
            };
            let (old, new) = target.contenders.kill_and_replace(slot)?;
            format!("{old} (pid {pid}) killed, {new} started")
        }
        FaultKind::MemberPartition => {
            let held = rng.ms(t_ms / 2, 2 * t_ms);
            let Some(who) = target.topology.partition_member(held, rng)? else {
                return Ok(None);
            };
            format!("{who} cut off from the other members for {held:?}")
        }
    };
    Ok(Some(Fault {
        kind,
        start_ns,
        end_ns: now_ns(),
        what,
        fired,
    }))
}

/// Arms a cut after the first request matching `predicate` on every proxy
/// of a contender (sharing one predicate), waits up to 3 s for one to fire
/// (and for a stateful predicate to settle), then disarms the rest.
fn cut_after(
    proxies: &[FaultProxy],
    predicate: impl Fn(i32) -> bool + Send + Sync + 'static,
) -> bool {
    let predicate = Arc::new(predicate);
    for p in proxies {
        let predicate = predicate.clone();
        p.cut_after_request(move |opcode| predicate(opcode));
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut fired = false;
    while Instant::now() < deadline && !fired {
        std::thread::sleep(Duration::from_millis(5));
        fired = proxies.iter().any(|p| !p.is_cut_armed());
    }
    if fired && proxies.len() > 1 {
        // Give a second stage the time to fire on another proxy.
        std::thread::sleep(Duration::from_secs(1));
    }
    for p in proxies.iter().filter(|p| p.is_cut_armed()) {
        p.cut_after_request(|_| false);
    }
    fired
}

fn fired_text(fired: bool) -> &'static str {
    if fired {
        "fired"
    } else {
        "did not fire"
    }
}

/// The pid in the data of the lowest lock node, if it can be read now.
fn holder_pid(admin: &Client, lock: &str) -> Option<u32> {
    let children = admin.get_children(lock).ok()?;
    let lowest = children
        .iter()
        .filter_map(|name| Some((lock_sequence(name)?, name)))
        .min()?
        .1;
    let (data, _) = match admin.get_data(&format!("{lock}/{lowest}")) {
        Ok(found) => found,
        Err(Error::NoNode) => return None,
        Err(_) => return None,
    };
    let text = String::from_utf8_lossy(&data);
    text.split_whitespace()
        .find_map(|field| field.strip_prefix("pid="))
        .and_then(|pid| pid.parse().ok())
}

/// The sequence number of a lock node (`..-lock-0000000042`,
/// `..-__READ__0000000042`): the digits it ends with.
pub fn lock_sequence(name: &str) -> Option<u32> {
    name.rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Counts the faults that match `which`, per kind.
pub fn count_by_kind(
    faults: &[Fault],
    which: impl Fn(&Fault) -> bool,
) -> BTreeMap<FaultKind, usize> {
    let mut counts = BTreeMap::new();
    for f in faults.iter().filter(|f| which(f)) {
        *counts.entry(f.kind).or_insert(0) += 1;
    }
    counts
}
