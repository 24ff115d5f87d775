//! One run: servers, contenders behind their proxies, the fault schedule
//! for a while, then a clean stop and the checks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use zklock::{Acl, Client, CreateMode, Error};

use crate::checks::{self, ProcData, RunData};
use crate::contender::{parse_counter, LockKind};
use crate::events::{now_ns, read_log, Event};
use crate::faults::{count_by_kind, inject, lock_sequence, Fault, FaultKind, Schedule, Target};
use crate::liveness::recovery_ns;
use crate::procs::{Contenders, Spawner};
use crate::report::Figures;
use crate::rng::Rng;
use crate::topology::{Kind, Topology};

/// The lock every contender contends for.
pub const LOCK: &str = "/checker/lock";
/// The counter each critical section increments.
pub const COUNTER: &str = "/checker-counter";
/// The orchestrator's own session timeout: long, so that the faults it
/// injects do not expire it.
const ADMIN_SESSION: Duration = Duration::from_secs(15);

/// How to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub index: usize,
    pub kind: Kind,
    /// The lock the contenders share.
    pub lock: LockKind,
    pub seed: u64,
    pub duration: Duration,
    pub contenders: usize,
    pub session: Duration,
    pub wait: Duration,
    pub dir: PathBuf,
    pub exe: PathBuf,
    /// The fault kinds to inject.
    pub faults: Vec<FaultKind>,
    /// Whether contenders may go on with a new session after an expiry.
    pub renew: bool,
    /// See [`Spawner::split_lock`].
    pub split_lock: bool,
}

/// What a run found.
pub struct RunResult {
    pub figures: Figures,
    pub violations: Vec<String>,
}

/// The orchestrator's client, reconnected if its session ends.
struct Admin {
    connect: String,
    client: Option<Client>,
}

impl Admin {
    fn client(&mut self) -> Result<Client, String> {
        if let Some(c) = self.client.as_ref().filter(|c| !c.state().is_terminal()) {
            return Ok(c.clone());
        }
        let client = Client::builder()
            .session_timeout(ADMIN_SESSION)
            .connect_timeout(Duration::from_secs(2))
            .connect(&self.connect)
            .map_err(|e| format!("connect the orchestrator to {}: {e}", self.connect))?;
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Polls until `LOCK` has no children (or is gone), for at most `limit`;
    /// then returns what is left with the owners' sessions.
    fn nodes_left(&mut self, limit: Duration) -> Result<Vec<(String, Option<i64>)>, String> {
        let deadline = Instant::now() + limit;
        let mut last_err = String::new();
        loop {
            let listed = self.client().and_then(|c| match c.get_children(LOCK) {
                Ok(children) => Ok((c, children)),
                Err(Error::NoNode) => Ok((c, Vec::new())),
                Err(e) => Err(format!("get_children {LOCK}: {e}")),
            });
            match listed {
                Ok((_, children)) if children.is_empty() => return Ok(Vec::new()),
                Ok((c, children)) if Instant::now() >= deadline => {
                    return Ok(children
                        .into_iter()
                        .map(|name| {
                            let path = format!("{LOCK}/{name}");
                            let owner = c.exists(&path).ok().flatten().map(|s| s.ephemeral_owner);
                            (path, owner)
                        })
                        .collect());
                }
                Ok(_) => {}
                Err(e) => last_err = e,
            }
            if Instant::now() >= deadline {
                return Err(last_err);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The counter's value, read after a sync so a lagging member cannot
    /// answer with an old one.
    fn counter(&mut self) -> Result<u64, String> {
        let c = self.client()?;
        c.sync(COUNTER)
            .map_err(|e| format!("sync {COUNTER}: {e}"))?;
        let (data, _) = c
            .get_data(COUNTER)
            .map_err(|e| format!("get_data {COUNTER}: {e}"))?;
        Ok(parse_counter(&data).0)
    }
}

/// Seconds since `start` as `"  12.3s"`, for the servers' start.
fn stamp(start: Instant) -> String {
    format!("{:>7.1}s", start.elapsed().as_secs_f64())
}

/// `t` in seconds since `start_ns` as `"  12.345s"`, as the checks print.
fn rel(start_ns: u64, t: u64) -> String {
    let ms = t.saturating_sub(start_ns) / 1_000_000;
    format!("{:>4}.{:03}s", ms / 1000, ms % 1000)
}

pub fn run(spec: &RunSpec) -> Result<RunResult, String> {
    std::fs::create_dir_all(&spec.dir)
        .map_err(|e| format!("create {}: {e}", spec.dir.display()))?;
    println!(
        "--- run {}: {}, {}, seed {}, {} s of faults, {} contenders, session timeout {} ms, logs in {}",
        spec.index,
        spec.kind.name(),
        spec.lock.name(),
        spec.seed,
        spec.duration.as_secs(),
        spec.contenders,
        spec.session.as_millis(),
        spec.dir.display()
    );
    let began = Instant::now();
    let topology = Topology::start(spec.kind)?;
    println!("{} servers up", stamp(began));
    let mut admin = Admin {
        connect: topology.connect_string(),
        client: None,
    };
    let client = admin.client()?;
    match client.create(
        COUNTER,
        b"0 0 init",
        &Acl::open_unsafe(),
        CreateMode::Persistent,
    ) {
        Ok(_) => {}
        Err(e) => return Err(format!("create {COUNTER}: {e}")),
    }
    let mut rng = Rng::new(spec.seed);
    let mut schedule = Schedule::new(rng.fork(), &spec.faults);
    let spawner = Spawner {
        exe: spec.exe.clone(),
        dir: spec.dir.clone(),
        kind: spec.lock,
        lock: LOCK.into(),
        counter: COUNTER.into(),
        session: spec.session,
        wait: spec.wait,
        renew: spec.renew,
        split_lock: spec.split_lock,
    };
    let mut contenders =
        Contenders::start(spawner, spec.contenders, &topology.addrs(), rng.fork())?;
    let start_ns = now_ns();
    let deadline = Instant::now() + spec.duration;
    let mut faults: Vec<Fault> = Vec::new();
    let mut fault_log = String::new();
    let mut lowest = Vec::new();
    println!("(times from now on are from the start of the contenders)");
    let mut failure = None;
    while Instant::now() < deadline {
        let gap = schedule
            .gap()
            .min(deadline.saturating_duration_since(Instant::now()));
        watch_lowest(&mut admin, Instant::now() + gap, &mut lowest);
        for name in contenders.replace_crashed() {
            println!(
                "{} contender {name} exited by itself; replaced",
                stamp(began)
            );
        }
        if Instant::now() >= deadline {
            break;
        }
        let kind = schedule.next_kind();
        let admin_client = match admin.client() {
            Ok(c) => c,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let mut target = Target {
            topology: &topology,
            contenders: &mut contenders,
            admin: &admin_client,
            lock: LOCK,
            session: spec.session,
        };
        match inject(kind, &mut target, schedule.rng()) {
            Ok(Some(fault)) => {
                let line = format!(
                    "{} to {} {:?}: {}",
                    rel(start_ns, fault.start_ns),
                    rel(start_ns, fault.end_ns),
                    fault.kind,
                    fault.what
                );
                println!("{line}");
                fault_log.push_str(&line);
                fault_log.push('\n');
                faults.push(fault);
            }
            Ok(None) => println!("{} {kind:?}: nothing to do", rel(start_ns, now_ns())),
            Err(e) => {
                failure = Some(format!("{kind:?}: {e}"));
                break;
            }
        }
    }
    contenders.heal_network();
    if let Err(e) = topology.heal() {
        failure.get_or_insert(format!("heal the servers: {e}"));
    }
    // A calm stretch, so the last fault's victims recover before the stop,
    // and the lock shows that it grants again: at least a second, then
    // until a contender acquires, for as long as a recovery may take.
    let healed_ns = now_ns();
    let calm = Instant::now();
    let recovery = Duration::from_nanos(recovery_ns(spec.session, spec.wait));
    loop {
        let until = (Instant::now() + Duration::from_millis(200)).min(calm + recovery);
        watch_lowest(&mut admin, until, &mut lowest);
        let elapsed = calm.elapsed();
        if elapsed >= recovery
            || (elapsed >= Duration::from_secs(1) && acquired_since(&contenders, healed_ns))
        {
            break;
        }
    }
    let stop_ns = now_ns();
    let exit_limit = spec.wait + 3 * spec.session + Duration::from_secs(10);
    let hung = contenders.stop_all(exit_limit);
    let _ = std::fs::write(spec.dir.join("faults.log"), &fault_log);
    println!(
        "{} contenders stopped{}",
        rel(start_ns, now_ns()),
        if hung.is_empty() {
            String::new()
        } else {
            format!("; HUNG (killed): {}", hung.join(", "))
        }
    );
    // Sessions of killed contenders expire within a session timeout (plus
    // the server's expiry tick); closed ones took their nodes at once.
    let leftovers = admin.nodes_left(3 * spec.session + Duration::from_secs(5));
    let counter = admin.counter();
    let procs = contenders.all().map(proc_data).collect();
    let data = RunData {
        start_ns,
        stop_ns,
        healed_ns,
        session: spec.session,
        wait: spec.wait,
        procs,
        faults,
        counter,
        lowest,
        leftovers,
    };
    let verdict = checks::check(&data);
    let mut figures = verdict.figures;
    figures.runs = 1;
    figures.seconds = spec.duration.as_secs();
    figures.faults = count_by_kind(&data.faults, |_| true);
    figures.cuts_fired = count_by_kind(&data.faults, |f| f.fired);
    drop(contenders);
    drop(topology);
    let mut violations = verdict.violations;
    if let Some(e) = failure {
        violations.push(format!("[infrastructure] the run could not go on: {e}"));
    }
    let mut listed: String = violations.iter().map(|v| format!("{v}\n")).collect();
    if violations.is_empty() {
        listed = "none\n".into();
    }
    let _ = std::fs::write(spec.dir.join("violations.txt"), listed);
    for v in violations.iter().take(30) {
        println!("VIOLATION {v}");
    }
    if violations.len() > 30 {
        println!("... and {} more", violations.len() - 30);
    }
    figures.print(&format!(
        "run {} ({}, seed {}) in {:.0} s",
        spec.index,
        spec.kind.name(),
        spec.seed,
        began.elapsed().as_secs_f64()
    ));
    Ok(RunResult {
        figures,
        violations,
    })
}

/// Until `until`, notes the lowest lock node and its owner every 200 ms.
fn watch_lowest(admin: &mut Admin, until: Instant, seen: &mut Vec<(u64, String, Option<i64>)>) {
    loop {
        // After a sync, a lagging member answers as up to date as the leader.
        if let Ok(client) = admin
            .client()
            .and_then(|c| c.sync(LOCK).map(|()| c).map_err(|e| e.to_string()))
        {
            let lowest = client.get_children(LOCK).ok().and_then(|children| {
                children
                    .into_iter()
                    .filter_map(|name| Some((lock_sequence(&name)?, name)))
                    .min()
            });
            if let Some((_, name)) = lowest {
                let path = format!("{LOCK}/{name}");
                let owner = client
                    .exists(&path)
                    .ok()
                    .flatten()
                    .map(|s| s.ephemeral_owner);
                seen.push((now_ns(), path, owner));
            }
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
}

/// Whether a contender has logged an acquisition after `since_ns`.
fn acquired_since(contenders: &Contenders, since_ns: u64) -> bool {
    contenders.all().any(|p| {
        read_log(&p.log)
            .0
            .iter()
            .any(|e| matches!(e, Event::Acq { t, .. } if *t > since_ns))
    })
}

/// What the checks need of a contender process.
fn proc_data(p: &crate::procs::Proc) -> ProcData {
    let (events, bad_lines) = read_log(&p.log);
    let output = std::fs::read_to_string(&p.output).unwrap_or_default();
    let panic = output.find("panicked").map(|at| {
        let start = output[..at].rfind('\n').map_or(0, |i| i + 1);
        output[start..].chars().take(600).collect()
    });
    ProcData {
        name: p.name.clone(),
        events,
        bad_lines,
        killed_ns: p.killed_ns,
        hung: p.hung,
        exit: p.exit.clone(),
        panic,
    }
}
