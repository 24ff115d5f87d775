//! `zklock bench`: the lock and raw-client workloads of `lock-compare`, as
//! one JSON line on stdout.
//!
//! - `uncontended`: one session, one lock path, N lock/unlock cycles.
//! - `contended`: C sessions, one thread each, started together, N
//!   acquisitions in all on one path; each critical section checks an
//!   in-process counter for overlap (`violations`: entries that found
//!   another client inside). `--without-lock` skips the lock and stays
//!   100 µs in the section, so that the check has overlaps to catch.
//! - `get` / `set`: C threads share one client; N calls in all on a 100-byte node.
//!
//! Latency is measured from the `lock()` call to acquisition (or per call).
//! As in the Curator and zookeeper-client benches, the clock covers the
//! workload alone: sessions are connected and the path's parents exist
//! before it starts, and the sessions are closed after it stops (kazoo's
//! closes its sessions inside its clock). A dropped guard's release goes out
//! with the next acquisition (see `release_linger`), which waits for it;
//! the last releases, which nothing would wait for, are waited for with
//! `unlock` inside the clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zklock::{Acl, Client, CreateMode, Error};

use crate::args::{self, Args, Usage};
use crate::holders::quote;
use crate::{print, Common, Outcome};

/// The most latencies reserved for up front: `--ops` may be any number, and
/// the vector grows past this as needed.
const MAX_RESERVED: usize = 1 << 20;

struct Options {
    common: Common,
    mode: String,
    clients: usize,
    ops: usize,
    path: String,
    /// Skips the lock in contended mode, to show the violation check works.
    without_lock: bool,
}

fn parse(args: &mut Args) -> Result<Options, Usage> {
    let mut o = Options {
        common: Common::from_env()?,
        mode: String::new(),
        clients: 1,
        ops: 1000,
        path: "/zklock-bench".into(),
        without_lock: false,
    };
    args.options(|name, value| {
        if o.common.option(name, value)? {
            return Ok(());
        }
        match name {
            "mode" => o.mode = value()?,
            "clients" => o.clients = args::number(name, &value()?)?,
            "ops" => o.ops = args::number(name, &value()?)?,
            "path" => o.path = value()?,
            "without-lock" => o.without_lock = true,
            _ => return Err(Usage(format!("unknown option --{name}"))),
        }
        Ok(())
    })?;
    args.finish()?;
    if !matches!(o.mode.as_str(), "uncontended" | "contended" | "get" | "set") {
        return Err(Usage(format!(
            "--mode must be uncontended, contended, get or set, not {:?}",
            o.mode
        )));
    }
    if o.clients == 0 || o.ops == 0 {
        return Err(Usage("--clients and --ops must be positive".into()));
    }
    if o.without_lock && o.mode != "contended" {
        return Err(Usage("--without-lock is for --mode contended only".into()));
    }
    Ok(o)
}

pub fn run(mut args: Args) -> Outcome {
    let options = match parse(&mut args) {
        Ok(o) => o,
        Err(e) => return e.into(),
    };
    let result = match options.mode.as_str() {
        "uncontended" => uncontended(&options),
        "contended" => contended(&options),
        _ => raw(&options),
    };
    match result {
        Ok(Measured {
            mut latencies,
            violations,
            elapsed,
        }) => {
            let secs = elapsed.as_secs_f64();
            latencies.sort_unstable();
            let ops = latencies.len();
            // Uncontended mode has one session, whatever `--clients` says
            // (lock-compare passes it to every mode).
            let clients = if options.mode == "uncontended" {
                1
            } else {
                options.clients
            };
            print(&format!(
                "{{\"impl\": \"zklock\", \"mode\": {}, \"clients\": {}, \"ops\": {ops}, \"secs\": {secs:.3}, \"ops_per_s\": {:.1}, \"p50_us\": {}, \"p99_us\": {}, \"violations\": {violations}}}\n",
                quote(&options.mode),
                clients,
                ops as f64 / secs.max(1e-9),
                percentile(&latencies, 50),
                percentile(&latencies, 99),
            ))
        }
        Err(e) => e.into(),
    }
}

/// What a workload measured: its latencies, its overlaps, and its time on
/// the clock.
struct Measured {
    latencies: Vec<u64>,
    violations: usize,
    elapsed: Duration,
}

/// A client as every subcommand makes one (`ZK_DIGEST` included).
fn client(options: &Options) -> Result<Client, Error> {
    options.common.client()
}

fn uncontended(options: &Options) -> Result<Measured, Error> {
    let client = client(options)?;
    create_parents(&client, &options.path)?;
    let lock = client.mutex(&options.path)?;
    let mut latencies = Vec::with_capacity(options.ops.min(MAX_RESERVED));
    let started = Instant::now();
    for cycle in 1..=options.ops {
        let start = Instant::now();
        let guard = lock.lock()?;
        latencies.push(micros(start.elapsed()));
        if cycle == options.ops {
            guard.unlock()?;
        } else {
            drop(guard);
        }
    }
    let elapsed = started.elapsed();
    close(client);
    Ok(Measured {
        latencies,
        violations: 0,
        elapsed,
    })
}

fn contended(options: &Options) -> Result<Measured, Error> {
    let remaining = AtomicUsize::new(options.ops);
    // Clients inside the critical section now.
    let inside = AtomicUsize::new(0);
    let violations = AtomicUsize::new(0);
    let clients = (0..options.clients)
        .map(|_| client(options))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(first) = clients.first() {
        create_parents(first, &options.path)?;
    }
    let locks = clients
        .iter()
        .map(|client| client.mutex(&options.path))
        .collect::<Result<Vec<_>, _>>()?;
    let (go, gate) = crossbeam_channel::bounded::<()>(0);
    let (results, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = locks
            .iter()
            .map(|lock| {
                let (remaining, inside, violations) = (&remaining, &inside, &violations);
                let gate = gate.clone();
                std::thread::Builder::new().spawn_scoped(scope, move || {
                    let _ = gate.recv();
                    let mut latencies = Vec::with_capacity(per_worker(options));
                    let mut more = take_one(remaining);
                    while more {
                        let start = Instant::now();
                        let guard = if options.without_lock {
                            None
                        } else {
                            Some(lock.lock()?)
                        };
                        latencies.push(micros(start.elapsed()));
                        if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        // Locked, the section is the reference benchmarks'
                        // (enter, check, leave). Unprotected, it stays long
                        // enough for another client to come in, even on one
                        // core.
                        if options.without_lock {
                            std::thread::sleep(Duration::from_micros(100));
                        }
                        inside.fetch_sub(1, Ordering::SeqCst);
                        // Claimed before the release: the last release of
                        // this session, which no acquisition of its own
                        // carries, is waited for.
                        more = take_one(remaining);
                        match guard {
                            Some(guard) if !more => guard.unlock()?,
                            guard => drop(guard),
                        }
                    }
                    Ok(latencies)
                })
            })
            .collect();
        timed(go, || merge(handles, options.ops))
    });
    let latencies = results?;
    drop(locks);
    clients.into_iter().for_each(close);
    Ok(Measured {
        latencies,
        violations: violations.load(Ordering::SeqCst),
        elapsed,
    })
}

fn raw(options: &Options) -> Result<Measured, Error> {
    if options.path == "/" {
        return Err(Error::InvalidArgument(
            "the bench's node cannot be the root: give --path a node of its own".into(),
        ));
    }
    let client = client(options)?;
    let data = vec![b'x'; 100];
    create_parents(&client, &options.path)?;
    match client.create(
        &options.path,
        &data,
        &Acl::open_unsafe(),
        CreateMode::Persistent,
    ) {
        Ok(_) => {}
        // Left by an earlier run, and so holding its 100 bytes. Any other
        // node is someone's data, which the bench must not overwrite.
        Err(Error::NodeExists) => {
            let (found, _) = client.get_data(&options.path)?;
            if found != data {
                return Err(Error::InvalidArgument(format!(
                    "{} exists with data of its own ({} bytes), not the bench's: \
                     give --path a node of the bench's own",
                    options.path,
                    found.len()
                )));
            }
        }
        Err(e) => return Err(e),
    }
    let remaining = AtomicUsize::new(options.ops);
    let set = options.mode == "set";
    let (go, gate) = crossbeam_channel::bounded::<()>(0);
    let (results, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..options.clients)
            .map(|_| {
                let (client, remaining, data) = (&client, &remaining, &data);
                let gate = gate.clone();
                std::thread::Builder::new().spawn_scoped(scope, move || {
                    let _ = gate.recv();
                    let mut latencies = Vec::with_capacity(per_worker(options));
                    while take_one(remaining) {
                        let start = Instant::now();
                        if set {
                            client.set_data(&options.path, data, None)?;
                        } else {
                            client.get_data(&options.path)?;
                        }
                        latencies.push(micros(start.elapsed()));
                    }
                    Ok(latencies)
                })
            })
            .collect();
        timed(go, || merge(handles, options.ops))
    });
    let latencies = results?;
    close(client);
    Ok(Measured {
        latencies,
        violations: 0,
        elapsed,
    })
}

/// Starts every worker at once, and the clock with them: the workers wait
/// on the gate until its sender `go` is dropped. A sender dropped early (a
/// worker failed to spawn) starts them too, so none waits forever.
fn timed<T>(go: crossbeam_channel::Sender<()>, work: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    drop(go);
    let result = work();
    (result, started.elapsed())
}

/// A worker thread, if it could be started (`--clients` is any number).
type Worker<'scope> =
    std::io::Result<std::thread::ScopedJoinHandle<'scope, Result<Vec<u64>, Error>>>;

/// Joins every worker and merges their latencies; the first error wins,
/// and a worker that could not start or that panicked is an error too.
fn merge(handles: Vec<Worker<'_>>, ops: usize) -> Result<Vec<u64>, Error> {
    let mut latencies = Vec::with_capacity(ops.min(MAX_RESERVED));
    let mut first_error = None;
    for handle in handles {
        let worker = match handle {
            Ok(handle) => handle.join().unwrap_or_else(|_| {
                Err(Error::Io {
                    kind: std::io::ErrorKind::Other,
                    message: "a bench worker thread panicked".into(),
                })
            }),
            Err(e) => Err(Error::Io {
                kind: e.kind(),
                message: format!("cannot start a bench worker thread: {e}"),
            }),
        };
        match worker {
            Ok(worker) => latencies.extend(worker),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(latencies), Err)
}

/// The latencies a worker reserves room for: its share of `--ops`.
fn per_worker(options: &Options) -> usize {
    (options.ops / options.clients + 1).min(MAX_RESERVED)
}

/// Closes a bench session once the clock has stopped: a close the servers
/// do not confirm is said, and the run's figures stand.
fn close(client: Client) {
    if let Err(e) = client.close() {
        say!("zklock: warning: closing a bench session: {e}");
    }
}

fn create_parents(client: &Client, path: &str) -> Result<(), Error> {
    let mut prefix = String::new();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    for segment in segments.iter().take(segments.len().saturating_sub(1)) {
        prefix.push('/');
        prefix.push_str(segment);
        match client.create(&prefix, &[], &Acl::open_unsafe(), CreateMode::Persistent) {
            Ok(_) | Err(Error::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn take_one(remaining: &AtomicUsize) -> bool {
    remaining
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The element at index ⌊n·p/100⌋ (the last for p = 100), as the peers'
/// benches take it, so that percentiles compare rank for rank.
fn percentile(sorted: &[u64], p: usize) -> u64 {
    let index = (sorted.len() * p / 100).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_take_the_peers_rank() {
        let sorted: Vec<u64> = (0..2000).collect();
        assert_eq!(
            [0, 50, 99, 100].map(|p| percentile(&sorted, p)),
            [0, 1000, 1980, 1999]
        );
        assert_eq!(percentile(&[7], 99), 7);
        assert_eq!(percentile(&[], 99), 0);
    }
}
