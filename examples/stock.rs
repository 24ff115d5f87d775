//! Stock deduction without overselling: several workers, each with its own
//! ZooKeeper session (as separate processes would have), take orders against
//! a stock counter stored in a znode. Each order is a read-modify-write (read
//! the count, parse it, decrement if positive, write it back) done while
//! holding a zklock `Mutex`. The write goes through the guard
//! (`guard.multi`), which applies it only while the lock is held and only to
//! the version read. `--no-lock` writes back ignoring versions, to show the
//! overselling the lock prevents.
//!
//! It prints the final stock, how many orders were served and refused, and
//! the lock acquisitions per second, then checks that the final stock is
//! exactly the initial stock minus the sales, never negative, that no more
//! was sold than there was (with more demand than stock, every item is sold),
//! that no two workers were ever inside the critical section together, and
//! that the fencing tokens strictly increased from one holder to the next.
//!
//! ```sh
//! cargo run --example stock
//! cargo run --example stock -- --workers 8 --stock 20 --orders 5
//! cargo run --example stock -- --no-lock    # the same race, unprotected
//! ```
//!
//! `--workers N` (default 8), `--stock S` (default 20), `--orders K` orders
//! per worker (default 5). With `--no-lock` the read-modify-writes race:
//! concurrent workers read the same count and overwrite each other's
//! decrement, so more orders succeed than the stock went down by (an
//! oversell). That run reports what it saw and exits 0, since a race may
//! also happen not to show.
//!
//! Uses `$ZK_CONNECT` if set, else starts a throwaway local ZooKeeper (see
//! `examples/common/mod.rs`). Exits 0 if the checks pass, 1 if not, 2 for
//! a bad flag, 3 for any other error.

mod common;

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::{check, BadFlag, Flags, Outcome, Zk, WAIT};
use zklock::{Acl, Client, CreateMode, Op};

fn main() -> ExitCode {
    common::run("stock", parse, stock)
}

/// The flags.
struct Options {
    workers: usize,
    initial: u64,
    orders: usize,
    no_lock: bool,
}

fn parse(flags: &mut Flags) -> Result<Options, BadFlag> {
    let options = Options {
        workers: flags.value("--workers", 8)?,
        initial: flags.value("--stock", 20)?,
        orders: flags.value("--orders", 5)?,
        no_lock: flags.switch("--no-lock"),
    };
    if options.workers == 0 {
        return Err(BadFlag::new("--workers must be at least 1"));
    }
    Ok(options)
}

/// What the workers counted, together.
#[derive(Default)]
struct Tally {
    sold: AtomicUsize,
    refused: AtomicUsize,
    acquisitions: AtomicUsize,
    /// Workers inside the read-modify-write right now.
    inside: AtomicUsize,
    /// Times a worker entered while another was inside.
    overlaps: AtomicUsize,
    /// Times a holder's fencing token was not above the previous holder's.
    stale_tokens: AtomicUsize,
    last_token: std::sync::Mutex<i64>,
}

fn stock(zk: &Zk, options: Options) -> Outcome {
    let Options {
        workers,
        initial,
        orders,
        no_lock,
    } = options;

    let stock_path = zk.path("stock");
    let lock_path = zk.path("stock-lock");
    let setup = zk.client()?;
    setup.create(
        &stock_path,
        initial.to_string().as_bytes(),
        &Acl::open_unsafe(),
        CreateMode::Persistent,
    )?;
    let demand = workers * orders;
    println!(
        "{workers} workers, each with its own session, place {orders} orders each \
         ({demand} in all) against a stock of {initial}, {}",
        if no_lock {
            "WITHOUT the lock"
        } else {
            "under the zklock Mutex"
        }
    );

    let tally = Tally::default();
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<(), WorkerError> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let (tally, stock_path, lock_path) = (&tally, &stock_path, &lock_path);
                scope.spawn(move || -> Result<(), WorkerError> {
                    let client = zk.client()?;
                    let result = worker(&client, stock_path, lock_path, orders, no_lock, tally);
                    // The worker's own error first, if it has one.
                    let closed = client.close();
                    result.and(closed.map_err(Into::into))
                })
            })
            .collect();
        for handle in handles {
            handle
                .join()
                .unwrap_or_else(|_| Err("a worker panicked".into()))?;
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();

    let (data, _) = setup.get_data(&stock_path)?;
    let text = String::from_utf8_lossy(&data).into_owned();
    let left: i64 = text
        .parse()
        .map_err(|_| format!("the stock node holds {text:?}, not a number"))?;
    setup.close()?;
    let sold = tally.sold.load(Ordering::SeqCst);
    let refused = tally.refused.load(Ordering::SeqCst);
    let acquisitions = tally.acquisitions.load(Ordering::SeqCst);
    let overlaps = tally.overlaps.load(Ordering::SeqCst);
    let went_down_by = initial as i64 - left;

    println!("final stock: {left}");
    println!("sold: {sold}, refused: {refused} (of {demand} orders)");
    if no_lock {
        println!(
            "{} orders ran in {:.2} s; {overlaps} times a worker was inside while another was",
            demand,
            elapsed.as_secs_f64()
        );
    } else {
        println!(
            "lock acquisitions: {acquisitions} in {:.2} s ({:.1} per second)",
            elapsed.as_secs_f64(),
            acquisitions as f64 / elapsed.as_secs_f64().max(1e-9)
        );
    }

    if no_lock {
        if sold as i64 > went_down_by {
            println!(
                "OVERSOLD: {sold} orders succeeded but the stock only went down by \
                 {went_down_by}: {} decrements were lost to the race",
                sold as i64 - went_down_by
            );
        } else {
            println!("no oversell this time (the race did not show; try more --workers)");
        }
        return Ok(true);
    }

    let expected_sold = (initial as usize).min(demand);
    let mut ok = true;
    ok &= check(left >= 0, "the stock never went negative");
    ok &= check(
        went_down_by == sold as i64,
        &format!("final stock = initial - sales ({initial} - {sold} = {left})"),
    );
    ok &= check(
        sold == expected_sold && sold + refused == demand,
        &format!("no oversell: {sold} sold of {initial} for {demand} orders"),
    );
    ok &= check(overlaps == 0, "never two workers in the critical section");
    ok &= check(
        tally.stale_tokens.load(Ordering::SeqCst) == 0,
        "the fencing token increased at every acquisition",
    );
    Ok(ok)
}

/// Why a worker stopped: a client's error, or its own.
type WorkerError = Box<dyn std::error::Error + Send + Sync>;

/// Places `orders` orders, one read-modify-write each. Each lock waits at
/// most `WAIT`: a lock that never came would otherwise hang the example.
fn worker(
    client: &Client,
    stock_path: &str,
    lock_path: &str,
    orders: usize,
    no_lock: bool,
    tally: &Tally,
) -> Result<(), WorkerError> {
    let lock = client.mutex(lock_path)?;
    for _ in 0..orders {
        let guard = if no_lock {
            None
        } else {
            let acquired = lock.try_lock_for(WAIT)?;
            Some(acquired.ok_or_else(|| format!("no lock within {WAIT:?}"))?)
        };
        if let Some(guard) = &guard {
            tally.acquisitions.fetch_add(1, Ordering::SeqCst);
            let mut last = tally.last_token.lock().unwrap_or_else(|e| e.into_inner());
            if guard.fencing_token() <= *last {
                tally.stale_tokens.fetch_add(1, Ordering::SeqCst);
            }
            *last = guard.fencing_token();
        }
        if tally.inside.fetch_add(1, Ordering::SeqCst) > 0 {
            tally.overlaps.fetch_add(1, Ordering::SeqCst);
        }

        let (data, stat) = client.get_data(stock_path)?;
        let text = String::from_utf8_lossy(&data);
        let left: u64 = text
            .parse()
            .map_err(|_| format!("{stock_path} holds {text:?}, not a count"))?;
        if left > 0 {
            let now = (left - 1).to_string();
            match &guard {
                // Applied only if the lock is still held when the server
                // applies it, and only to the version read: a retry with
                // the same guard and version after an unknown outcome
                // (ConnectionLoss) cannot deduct twice, since a retry of a
                // write that was applied fails with `MultiFailed` of
                // `BadVersion`. A retry under a new lock (after `LockLost`)
                // reads a new version and would deduct again: record the
                // order in the same transaction (a create of
                // `orders/<id>`, as the payments example does) so that a
                // second try fails with `NodeExists`. (This example gives
                // up instead.)
                Some(guard) => {
                    guard.multi(&[Op::set_data(stock_path, now, Some(stat.version))])?;
                }
                None => {
                    client.set_data(stock_path, now.as_bytes(), None)?;
                }
            }
            tally.sold.fetch_add(1, Ordering::SeqCst);
        } else {
            tally.refused.fetch_add(1, Ordering::SeqCst);
        }

        tally.inside.fetch_sub(1, Ordering::SeqCst);
        if let Some(guard) = guard {
            // Releases and waits for the server's confirmation; dropping
            // the guard would release without waiting.
            guard.unlock()?;
        }
    }
    Ok(())
}
