//! Payments processed once: workers, each with its own ZooKeeper session,
//! take pending payments from a queue of znodes. A worker locks a payment
//! (`try_lock`: one that another worker holds is skipped, not waited for),
//! charges it, and records it with one guarded transaction,
//! `guard.multi(..)`, that creates `done/<id>` and deletes `pending/<id>`,
//! and that the server applies only while the worker still holds the
//! payment's lock.
//!
//! Worker 0 gets stuck on the first payment it takes on: an operator, tired of waiting,
//! deletes its lock node, and another worker processes the payment. When
//! worker 0 comes back, its guarded commit is refused with `LockLost`, and
//! nothing it would have written lands. (Its charge was made, though: an
//! external charge has to be idempotent, keyed by the payment id, for that
//! second charge to be harmless.)
//!
//! ```sh
//! cargo run --example payments
//! cargo run --example payments -- --workers 6 --payments 60
//! ```
//!
//! `--workers N` (default 4, at least 2: one to get stuck and one to take
//! over), `--payments P` (default 24). It checks that every payment was
//! recorded exactly once, that the queue is empty, and that the stuck
//! worker's commit was refused and its payment recorded by another worker.
//!
//! Uses `$ZK_CONNECT` if set, else starts a throwaway local ZooKeeper (see
//! `examples/common/mod.rs`). Exits 0 if the checks pass, 1 if not, 2 for
//! a bad flag, 3 for any other error.

mod common;

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{check, BadFlag, Flags, Outcome, Zk};
use zklock::{Acl, Client, CreateMode, Error, Op};

/// How long the stuck worker waits for another to record its payment.
const TAKE_OVER_WAIT: Duration = Duration::from_secs(30);
/// The most rounds of listing the queue a worker makes.
const MAX_ROUNDS: usize = 1000;
/// The pause after a round in which every payment was another worker's.
const IDLE_PAUSE: Duration = Duration::from_millis(10);

fn main() -> ExitCode {
    common::run("payments", parse, payments)
}

/// The flags.
struct Options {
    workers: usize,
    payments: usize,
}

fn parse(flags: &mut Flags) -> Result<Options, BadFlag> {
    let options = Options {
        workers: flags.value("--workers", 4)?,
        payments: flags.value("--payments", 24)?,
    };
    if options.workers < 2 {
        return Err(BadFlag::new("--workers must be at least 2"));
    }
    // Each worker starts at a payment of its own, so that worker-0, the
    // one that gets stuck, has one to get stuck on.
    if options.payments < options.workers {
        return Err(BadFlag::new("--payments must be at least --workers"));
    }
    Ok(options)
}

/// Where the payments are.
struct Paths {
    pending: String,
    done: String,
    locks: String,
}

impl Paths {
    fn pending(&self, id: &str) -> String {
        format!("{}/{id}", self.pending)
    }

    fn done(&self, id: &str) -> String {
        format!("{}/{id}", self.done)
    }

    fn lock(&self, id: &str) -> String {
        format!("{}/{id}", self.locks)
    }
}

/// What the workers counted, together.
#[derive(Default)]
struct Tally {
    charges: AtomicUsize,
    commits: AtomicUsize,
    refused: AtomicUsize,
    /// Commits whose outcome a lost connection left unknown: the worker
    /// looks again on its next round.
    unknown: AtomicUsize,
}

fn payments(zk: &Zk, options: Options) -> Outcome {
    let Options { workers, payments } = options;
    let paths = Paths {
        pending: zk.path("pending"),
        done: zk.path("done"),
        locks: zk.path("locks"),
    };
    let setup = zk.client()?;
    for dir in [&paths.pending, &paths.done, &paths.locks] {
        setup.create(dir, &[], &Acl::open_unsafe(), CreateMode::Persistent)?;
    }
    let ids: Vec<String> = (0..payments).map(|i| format!("payment-{i:04}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let amount = format!("{}.00 EUR", 10 + i);
        setup.create(
            &paths.pending(id),
            amount.as_bytes(),
            &Acl::open_unsafe(),
            CreateMode::Persistent,
        )?;
    }
    println!("{workers} workers, each with its own session, process {payments} payments");

    let tally = Tally::default();
    let stuck_on = std::thread::scope(|scope| -> zklock::Result<Option<String>> {
        let handles: Vec<_> = (0..workers)
            .map(|n| {
                let (paths, tally) = (&paths, &tally);
                scope.spawn(move || -> zklock::Result<Option<String>> {
                    let client = zk.client()?;
                    let worker = Worker {
                        name: format!("worker-{n}"),
                        client: &client,
                        paths,
                        tally,
                        // Workers start at different places in the queue.
                        offset: n * payments / workers,
                        gets_stuck: n == 0,
                    };
                    // The worker's own error first, if it has one.
                    let result = worker.run();
                    let closed = client.close();
                    result.and_then(|found| closed.map(|()| found))
                })
            })
            .collect();
        let mut stuck_on = None;
        for handle in handles {
            let result = handle
                .join()
                .unwrap_or(Err(Error::InvalidArgument("a worker panicked".into())))?;
            stuck_on = stuck_on.or(result);
        }
        Ok(stuck_on)
    })?;

    let pending_left = setup.get_children(&paths.pending)?;
    let mut recorded = setup.get_children(&paths.done)?;
    recorded.sort();
    let stuck_recorded_by = match &stuck_on {
        Some(id) => Some(setup.get_data(&paths.done(id))?.0),
        None => None,
    };
    setup.close()?;

    let charges = tally.charges.load(Ordering::SeqCst);
    let commits = tally.commits.load(Ordering::SeqCst);
    let refused = tally.refused.load(Ordering::SeqCst);
    let unknown = tally.unknown.load(Ordering::SeqCst);
    println!("charges made: {charges}; commits: {commits} recorded, {refused} refused, {unknown} unknown");
    if let (Some(id), Some(by)) = (&stuck_on, &stuck_recorded_by) {
        println!(
            "worker-0 got stuck on {id}, which {} recorded",
            String::from_utf8_lossy(by)
        );
    }

    let mut ok = true;
    ok &= check(
        recorded == ids,
        &format!(
            "every payment recorded once ({} of {payments})",
            recorded.len()
        ),
    );
    ok &= check(pending_left.is_empty(), "nothing left pending");
    ok &= check(
        commits == payments,
        &format!("{commits} commits went through for {payments} payments"),
    );
    ok &= check(
        refused == 1 && stuck_recorded_by.is_some_and(|by| by != b"worker-0"),
        "the stuck worker's late commit was refused, and another worker recorded its payment",
    );
    Ok(ok)
}

/// One worker's loop.
struct Worker<'a> {
    name: String,
    client: &'a Client,
    paths: &'a Paths,
    tally: &'a Tally,
    offset: usize,
    gets_stuck: bool,
}

impl Worker<'_> {
    /// Processes payments until none is pending. The payment it got stuck
    /// on, if it did.
    fn run(mut self) -> zklock::Result<Option<String>> {
        let mut stuck_on = None;
        for _ in 0..MAX_ROUNDS {
            let mut ids = self.client.get_children(&self.paths.pending)?;
            if ids.is_empty() {
                return Ok(stuck_on);
            }
            ids.sort();
            let start = self.offset % ids.len();
            ids.rotate_left(start);
            let mut took_any = false;
            for id in &ids {
                let took = self.process(id, self.gets_stuck)?;
                // Stuck on the first payment it took on: one another worker
                // held, or had recorded, was never its.
                if took && std::mem::take(&mut self.gets_stuck) {
                    stuck_on = Some(id.clone());
                }
                took_any |= took;
            }
            if !took_any {
                // Every payment left is another worker's right now.
                std::thread::sleep(IDLE_PAUSE);
            }
        }
        Err(Error::InvalidArgument(format!(
            "{}: payments still pending after {MAX_ROUNDS} rounds",
            self.name
        )))
    }

    /// Locks, charges and records one payment, unless another worker holds
    /// it or has recorded it. True if it took the payment on.
    fn process(&self, id: &str, get_stuck: bool) -> zklock::Result<bool> {
        let lock = self.client.mutex(&self.paths.lock(id))?;
        let Some(guard) = lock.try_lock()? else {
            return Ok(false); // another worker is on it
        };
        // Recorded (and so no longer pending) since it was listed?
        let amount = match self.client.get_data(&self.paths.pending(id)) {
            Ok((amount, _)) => amount,
            Err(Error::NoNode) => return Ok(false),
            Err(e) => return Err(e),
        };
        self.charge(id, &amount);
        if get_stuck {
            self.get_stuck(id, guard.node())?;
        }
        let commit = guard.multi(&[
            Op::create(
                self.paths.done(id),
                self.name.as_bytes().to_vec(),
                Acl::open_unsafe(),
                CreateMode::Persistent,
            ),
            Op::delete(self.paths.pending(id), None),
        ]);
        match commit {
            Ok(_) => {
                self.tally.commits.fetch_add(1, Ordering::SeqCst);
            }
            Err(Error::LockLost) => {
                println!("{}: lost the lock on {id}; commit refused", self.name);
                self.tally.refused.fetch_add(1, Ordering::SeqCst);
            }
            // The transaction may or may not have been applied: the next
            // round finds the payment pending, or not.
            Err(e) if e.is_retryable() => {
                self.tally.unknown.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => return Err(e),
        }
        Ok(true)
    }

    /// Charges the payment (made up here; a real one is idempotent, keyed
    /// by `id`).
    fn charge(&self, _id: &str, _amount: &[u8]) {
        self.tally.charges.fetch_add(1, Ordering::SeqCst);
    }

    /// Stays away while an operator deletes `lock_node` and another worker
    /// records the payment.
    fn get_stuck(&self, id: &str, lock_node: &str) -> zklock::Result<()> {
        println!(
            "{}: stuck on {id}; an operator deletes its lock node",
            self.name
        );
        let (recorded, event) = self.client.exists_w(&self.paths.done(id))?;
        self.client.delete(lock_node, None)?;
        if recorded.is_none() && event.recv_timeout(TAKE_OVER_WAIT).is_err() {
            return Err(Error::InvalidArgument(format!(
                "nobody recorded {id} within {TAKE_OVER_WAIT:?}"
            )));
        }
        Ok(())
    }
}
