//! A Jepsen-style fault-injection checker for the zklock `Mutex` and
//! `RwLock`: a lock is never held by two contenders at once while both
//! believe they hold it (for a read-write lock: a writer never holds with
//! anyone, and no write lands inside a read hold), and every failure ends as
//! a clear error, never a hang, a panic or an orphaned node.
//!
//! ```text
//! cargo test --test checker          # short: seed 1, 30 s of faults each on a mutex on
//!                                    # a standalone server, then on a 3-node ensemble,
//!                                    # then on a read-write lock on a standalone server
//! cargo test --release --test checker -- --duration 3600 --seed 7    # long
//! ```
//!
//! The long version does runs of `--run-secs` (default 300) until
//! `--duration` is used up, going round the topologies and, after each
//! round, to the next lock kind, with 5 contenders. Run `i` uses seed
//! `N + i`, so `--duration <its length> --seed <N + i> --topology <its
//! topology> --lock <its lock>` replays its fault schedule (not its
//! interleavings: the processes race for real). Other options:
//! `--topology standalone|cluster|both`, `--lock mutex|rwlock|both`
//! (default both), `--contenders K`, `--session-ms MS`
//! (default 2000), `--wait-ms MS` (the `try_lock_for` bound, default 1500),
//! `--without KIND,...` (leave fault kinds out, named as in `faults.rs`),
//! `--keep` (keep the logs of clean runs too), `--renew` (each contender's
//! client goes on with a new session after an expiry with even odds, see
//! `new_session_on_expiry`), `--self-test` (only run the
//! checks on made-up histories, which every run also does first). A test
//! name filter that does not match `checker` skips it, as libtest would.
//!
//! Before its runs, every invocation also runs the whole machinery for 10 s
//! on a lock split in two (half the contenders lock another path), which
//! must be judged violating mutual exclusion: the checker can see a lock
//! that grants twice, not only the made-up histories' violations.
//!
//! The same binary is every process of a run (a `harness = false` target):
//!
//! - the orchestrator starts the servers (`zklock::testing`), a
//!   [`FaultProxy`](zklock::testing::FaultProxy) per contender and server,
//!   and the contender processes; it deals a seeded schedule of faults
//!   (`faults.rs`), stops everything, and checks the logs (`checks.rs`,
//!   `liveness.rs`), printing the figures of each run and of all runs;
//! - `checker contender ...` is one contender (`contender.rs`): its own
//!   session, looping on one lock path with `try_lock_for`, incrementing a
//!   counter znode in each critical section, logging every step with its
//!   time (`events.rs`).
//!
//! The process exits non-zero if any check is violated; the logs of a run
//! with violations are kept, and their directory printed.

mod checks;
mod contender;
mod events;
mod faults;
mod liveness;
mod procs;
mod report;
mod rng;
mod run;
mod selftest;
mod topology;

use std::process::ExitCode;
use std::time::Duration;

use contender::LockKind;
use report::Figures;
use run::{run, RunSpec};
use topology::Kind;

/// The short version's seed and run length per topology.
const SHORT_SEED: u64 = 1;
const SHORT_RUN: Duration = Duration::from_secs(30);
/// A long run's runs are at most this long, and at least `MIN_RUN`.
const DEFAULT_RUN_SECS: u64 = 300;
const MIN_RUN: Duration = Duration::from_secs(20);

#[derive(Debug)]
struct Options {
    duration: Option<Duration>,
    seed: u64,
    topologies: Vec<Kind>,
    locks: Vec<LockKind>,
    contenders: usize,
    session: Duration,
    wait: Duration,
    run_secs: u64,
    keep: bool,
    faults: Vec<faults::FaultKind>,
    renew: bool,
}

/// libtest flags that take a value, accepted and ignored so that
/// `cargo test -- <flags>` does not break this target.
const LIBTEST_VALUE_FLAGS: &[&str] = &["--format", "--color", "--test-threads", "--skip", "-Z"];

/// `Ok(None)`: nothing to run (`--list`, or a test name filter that does not
/// match "checker").
fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut o = Options {
        duration: None,
        seed: SHORT_SEED,
        topologies: vec![Kind::Standalone, Kind::Cluster],
        locks: vec![LockKind::Mutex, LockKind::RwLock],
        contenders: 4,
        session: Duration::from_millis(2000),
        wait: Duration::from_millis(1500),
        run_secs: DEFAULT_RUN_SECS,
        keep: false,
        faults: faults::FaultKind::ALL.to_vec(),
        renew: false,
    };
    let mut contenders = None;
    let mut filters = Vec::new();
    let mut exact = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let number = |name: &str, v: String| -> Result<u64, String> {
            v.parse().map_err(|e| format!("{name} {v:?}: {e}"))
        };
        match flag {
            "--duration" => {
                o.duration = Some(Duration::from_secs(number(flag, value(flag)?)?));
            }
            "--seed" => o.seed = number(flag, value(flag)?)?,
            "--contenders" => contenders = Some(number(flag, value(flag)?)?),
            "--session-ms" => o.session = Duration::from_millis(number(flag, value(flag)?)?),
            "--wait-ms" => o.wait = Duration::from_millis(number(flag, value(flag)?)?),
            "--run-secs" => o.run_secs = number(flag, value(flag)?)?.max(MIN_RUN.as_secs()),
            "--topology" => {
                o.topologies = match value(flag)?.as_str() {
                    "standalone" => vec![Kind::Standalone],
                    "cluster" => vec![Kind::Cluster],
                    "both" => vec![Kind::Standalone, Kind::Cluster],
                    other => {
                        return Err(format!("--topology {other:?}: standalone, cluster or both"))
                    }
                }
            }
            "--lock" => {
                o.locks = match value(flag)?.as_str() {
                    "both" => vec![LockKind::Mutex, LockKind::RwLock],
                    other => vec![LockKind::parse(other)
                        .ok_or_else(|| format!("--lock {other:?}: mutex, rwlock or both"))?],
                }
            }
            "--keep" => o.keep = true,
            "--renew" => o.renew = true,
            "--without" => {
                for name in value(flag)?.split(',') {
                    let kind = faults::FaultKind::parse(name)
                        .ok_or_else(|| format!("--without: no fault kind {name:?}"))?;
                    o.faults.retain(|k| *k != kind);
                }
                if o.faults.is_empty() {
                    return Err("--without leaves no fault to inject".into());
                }
            }
            "--list" => {
                println!("checker: test");
                return Ok(None);
            }
            "--exact" => exact = true,
            f if LIBTEST_VALUE_FLAGS.contains(&f) => {
                value(f)?;
            }
            f if f.starts_with('-') => {} // --nocapture, --quiet, --ignored, ...
            filter => filters.push(filter.to_owned()),
        }
    }
    let selected = filters.iter().all(|f| {
        if exact {
            f == "checker"
        } else {
            "checker".contains(f.as_str())
        }
    });
    if !selected {
        println!("checker: filtered out");
        return Ok(None);
    }
    let default_k = if o.duration.is_some() { 5 } else { 4 };
    o.contenders = usize::try_from(contenders.unwrap_or(default_k))
        .map_err(|e| e.to_string())?
        .max(2);
    Ok(Some(o))
}

/// The runs to do: (topology, lock, length). The short version runs the
/// first lock on every topology, and any other lock on the first topology.
fn plan(o: &Options) -> Vec<(Kind, LockKind, Duration)> {
    let Some(total) = o.duration else {
        let (first, others) = o.locks.split_first().unwrap_or((&LockKind::Mutex, &[]));
        let mut runs: Vec<_> = o
            .topologies
            .iter()
            .map(|&k| (k, *first, SHORT_RUN))
            .collect();
        if let Some(&topology) = o.topologies.first() {
            runs.extend(others.iter().map(|&lock| (topology, lock, SHORT_RUN)));
        }
        return runs;
    };
    let mut runs = Vec::new();
    let mut left = total;
    let each = Duration::from_secs(o.run_secs);
    while left >= MIN_RUN || runs.is_empty() {
        let i = runs.len();
        let kind = o.topologies[i % o.topologies.len()];
        let lock = o.locks[(i / o.topologies.len()) % o.locks.len()];
        let len = each.min(left).max(MIN_RUN);
        runs.push((kind, lock, len));
        left = left.saturating_sub(len);
    }
    runs
}

/// How long the end-to-end self-test runs.
const SELF_TEST_RUN: Duration = Duration::from_secs(10);

/// The whole machinery (servers, faults, contender processes, logs,
/// checks) run on a lock split in two: half the contenders lock another
/// path, so two of them hold at once. The run must be judged violating
/// mutual exclusion (check 1), or the checker could not see a lock that
/// double-grants, whatever the made-up histories say.
fn end_to_end_self_test(
    options: &Options,
    exe: &std::path::Path,
    base: &std::path::Path,
) -> Result<(), String> {
    println!(
        "checker: end-to-end self-test, {} s on a lock split in two: its violations are expected",
        SELF_TEST_RUN.as_secs()
    );
    let spec = RunSpec {
        index: 0,
        kind: Kind::Standalone,
        lock: LockKind::Mutex,
        seed: options.seed,
        duration: SELF_TEST_RUN,
        contenders: 4,
        session: options.session,
        wait: options.wait,
        dir: base.join("self-test"),
        exe: exe.to_path_buf(),
        faults: options.faults.clone(),
        renew: false,
        split_lock: true,
    };
    let result = run(&spec).map_err(|e| format!("the end-to-end self-test could not run: {e}"))?;
    let caught = result
        .violations
        .iter()
        .filter(|v| v.starts_with("[check 1]"))
        .count();
    if caught == 0 {
        return Err(format!(
            "the end-to-end self-test saw no overlap on a lock split in two; logs kept in {}",
            spec.dir.display()
        ));
    }
    let _ = std::fs::remove_dir_all(&spec.dir);
    println!("checker: end-to-end self-test: the split lock was caught ({caught} overlaps)");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("contender") {
        return contender::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("--self-test") {
        return match selftest::run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("checker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let options = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("checker: {e}");
            return ExitCode::from(2);
        }
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("checker: cannot find its own executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = selftest::run() {
        eprintln!("checker: {e}");
        return ExitCode::FAILURE;
    }
    let base = std::env::temp_dir().join(format!("zklock-checker-{}", std::process::id()));
    if let Err(e) = end_to_end_self_test(&options, &exe, &base) {
        eprintln!("checker: {e}");
        return ExitCode::FAILURE;
    }
    let runs = plan(&options);
    if options.faults.len() < faults::FaultKind::ALL.len() {
        println!("checker: injecting only {:?}", options.faults);
    }
    if options.renew {
        println!("checker: each client goes on with a new session after an expiry with even odds");
    }
    println!(
        "checker: {} run(s), seed {}, {} contenders, session timeout {} ms, try_lock_for {} ms",
        runs.len(),
        options.seed,
        options.contenders,
        options.session.as_millis(),
        options.wait.as_millis()
    );
    let mut total = Figures::default();
    let mut failed = 0;
    for (i, (kind, lock, duration)) in runs.into_iter().enumerate() {
        let spec = RunSpec {
            index: i,
            kind,
            lock,
            seed: options.seed.wrapping_add(i as u64),
            duration,
            contenders: options.contenders,
            session: options.session,
            wait: options.wait,
            dir: base.join(format!("run-{i}")),
            exe: exe.clone(),
            faults: options.faults.clone(),
            renew: options.renew,
            split_lock: false,
        };
        match run(&spec) {
            Ok(result) => {
                total.add(&result.figures);
                if !result.violations.is_empty() {
                    failed += 1;
                } else if !options.keep {
                    let _ = std::fs::remove_dir_all(&spec.dir);
                }
            }
            Err(e) => {
                println!("run {i} could not run: {e}");
                failed += 1;
            }
        }
    }
    total.print("all runs");
    if failed > 0 || total.violation_count() > 0 {
        println!(
            "checker: FAILED ({} run(s) with violations or errors); logs kept in {}",
            failed,
            base.display()
        );
        return ExitCode::FAILURE;
    }
    if options.keep {
        println!(
            "checker: all checks passed; logs kept in {}",
            base.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&base);
        println!("checker: all checks passed");
    }
    ExitCode::SUCCESS
}
