//! A zklock `RwLock`: readers share it, a writer excludes them. Each
//! reader and the writer is a thread with its own ZooKeeper session (as
//! separate processes would have).
//!
//! 1. Three readers take the read lock and all hold it at the same time.
//! 2. A writer asks for the write lock and queues behind them.
//! 3. The readers leave one by one; the writer gets the lock only after the
//!    last one has left.
//! 4. A late reader asks while the writer holds the lock: it waits, and
//!    reads only after the writer has released.
//!
//! The example checks that the readers overlapped, that no reader ever held
//! the lock together with the writer, and that the writer and the late
//! reader got the lock only when they should have.
//!
//! ```sh
//! cargo run --example rwlock
//! cargo run --example rwlock -- --readers 5
//! ```
//!
//! `--readers N` (default 3, at least 2). Uses `$ZK_CONNECT` if set, else
//! starts a throwaway local ZooKeeper (see `examples/common/mod.rs`). Exits 0
//! if the checks pass, 1 if not, 2 for a bad flag, 3 for any other error.

mod common;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{check, wait_for, BadFlag, CloseAll, Flags, Outcome, Zk, WAIT};
use crossbeam_channel::{Receiver, Sender};
use zklock::recipes::lock_queue;
use zklock::{Client, RwLock};

fn main() -> ExitCode {
    common::run("rwlock", parse, rwlock)
}

/// `--readers N`.
fn parse(flags: &mut Flags) -> Result<usize, BadFlag> {
    let count = flags.value("--readers", 3)?;
    if count < 2 {
        return Err(BadFlag::new("--readers must be at least 2"));
    }
    Ok(count)
}

/// Who is inside, updated by the holders themselves.
#[derive(Default)]
struct Inside {
    readers: AtomicUsize,
    most_readers: AtomicUsize,
    writer: AtomicBool,
    /// A reader inside with the writer, or the writer with readers.
    violations: AtomicUsize,
    /// Holders that failed to lock or unlock (each printed).
    failures: AtomicUsize,
}

impl Inside {
    fn reader_enters(&self) -> usize {
        let now = self.readers.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_readers.fetch_max(now, Ordering::SeqCst);
        if self.writer.load(Ordering::SeqCst) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        now
    }

    fn writer_enters(&self) -> usize {
        self.writer.store(true, Ordering::SeqCst);
        let readers = self.readers.load(Ordering::SeqCst);
        if readers > 0 {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        readers
    }
}

/// A holder's report to the main thread.
enum Entered {
    Reader { name: String, inside: usize },
    Writer { readers_inside: usize },
}

fn rwlock(zk: &Zk, count: usize) -> Outcome {
    let path = zk.path("rwlock");
    let observer = zk.client()?;
    let inside = Inside::default();
    let (entered_tx, entered) = crossbeam_channel::unbounded::<Entered>();
    let queued = |n: usize| {
        wait_for("a contender to queue", WAIT, || {
            Ok(lock_queue(&observer, &path)?.len() == n)
        })
    };
    let mut ok = true;

    std::thread::scope(|scope| -> Outcome {
        // Should this return early, a holder still waiting for the lock
        // fails with `Closed` rather than wait for ever.
        let mut clients = CloseAll::default();
        // Each holder keeps its lock until its `release` sender is dropped.
        let mut readers = Vec::new();
        for i in 0..count {
            let (release_tx, release) = crossbeam_channel::bounded::<()>(0);
            readers.push(release_tx);
            let (client, name) = (zk.client()?, format!("reader-{i}"));
            clients.0.push(client.clone());
            let (path, inside, tx) = (&path, &inside, entered_tx.clone());
            scope.spawn(move || hold_read(&client, path, &name, inside, &tx, &release));
        }
        for _ in 0..count {
            match next(&entered)? {
                Entered::Reader { name, inside } => {
                    println!("{name} holds the read lock (readers inside: {inside})")
                }
                Entered::Writer { .. } => return Err("unexpected writer".into()),
            }
        }
        let together = inside.readers.load(Ordering::SeqCst);
        println!("{together} readers hold the read lock at the same time");
        ok &= check(together == count, "the readers share the lock");

        let (writer_release, release) = crossbeam_channel::bounded::<()>(0);
        {
            let client = zk.client()?;
            clients.0.push(client.clone());
            let (path, inside, tx) = (&path, &inside, entered_tx.clone());
            scope.spawn(move || hold_write(&client, path, inside, &tx, &release));
        }
        queued(count + 1)?;
        println!("writer asks for the write lock and waits behind {count} readers");
        for (i, release) in readers.drain(..).enumerate() {
            ok &= check(
                entered.try_recv().is_err(),
                &format!("the writer still waits (readers holding: {})", count - i),
            );
            drop(release);
            // The reader deletes its node before the writer can get in; the
            // queue shrinking shows that it has.
            queued(count - i)?;
            println!("reader-{i} released the read lock");
        }
        match next(&entered)? {
            Entered::Writer { readers_inside } => {
                println!("writer holds the write lock (readers inside: {readers_inside})");
                ok &= check(readers_inside == 0, "the writer excludes every reader");
            }
            Entered::Reader { name, .. } => return Err(format!("unexpected {name}").into()),
        }

        let late_release = {
            let (release_tx, release) = crossbeam_channel::bounded::<()>(0);
            let (client, name) = (zk.client()?, format!("reader-{count}"));
            clients.0.push(client.clone());
            let (path, inside, tx) = (&path, &inside, entered_tx.clone());
            scope.spawn(move || hold_read(&client, path, &name, inside, &tx, &release));
            release_tx
        };
        queued(2)?;
        println!("reader-{count} asks for the read lock and waits for the writer");
        ok &= check(
            entered.try_recv().is_err(),
            "a reader waits while the writer holds",
        );
        drop(writer_release);
        println!("writer released the write lock");
        match next(&entered)? {
            Entered::Reader { name, inside } => {
                println!("{name} holds the read lock (readers inside: {inside})");
            }
            Entered::Writer { .. } => return Err("unexpected writer".into()),
        }
        drop(late_release);
        // Each holder closes its own once it has unlocked.
        clients.0.clear();
        Ok(true)
    })?;
    observer.close()?;

    ok &= check(
        inside.most_readers.load(Ordering::SeqCst) == count,
        &format!("at most {count} readers inside at once, all of them together"),
    );
    ok &= check(
        inside.violations.load(Ordering::SeqCst) == 0,
        "no reader ever held the lock together with the writer",
    );
    ok &= check(
        inside.failures.load(Ordering::SeqCst) == 0,
        "every holder locked and unlocked without an error",
    );
    Ok(ok)
}

fn next(entered: &Receiver<Entered>) -> Result<Entered, String> {
    entered
        .recv_timeout(WAIT)
        .map_err(|_| format!("nobody got the lock within {WAIT:?}"))
}

/// Takes the read lock, reports, and holds it until `release` disconnects.
fn hold_read(
    client: &Client,
    path: &str,
    name: &str,
    inside: &Inside,
    tx: &Sender<Entered>,
    release: &Receiver<()>,
) {
    let result = (|| -> zklock::Result<()> {
        let lock = RwLock::new(client, path)?.with_data(name);
        let guard = lock.read()?;
        let now = inside.reader_enters();
        let _ = tx.send(Entered::Reader {
            name: name.to_owned(),
            inside: now,
        });
        let _ = release.recv();
        inside.readers.fetch_sub(1, Ordering::SeqCst);
        guard.unlock()
    })();
    if let Err(e) = result {
        eprintln!("{name}: {e}");
        inside.failures.fetch_add(1, Ordering::SeqCst);
    }
    let _ = client.close();
}

/// Takes the write lock, reports, and holds it until `release` disconnects.
fn hold_write(
    client: &Client,
    path: &str,
    inside: &Inside,
    tx: &Sender<Entered>,
    release: &Receiver<()>,
) {
    let result = (|| -> zklock::Result<()> {
        let lock = RwLock::new(client, path)?.with_data("writer");
        let guard = lock.write()?;
        let readers_inside = inside.writer_enters();
        let _ = tx.send(Entered::Writer { readers_inside });
        let _ = release.recv();
        inside.writer.store(false, Ordering::SeqCst);
        guard.unlock()
    })();
    if let Err(e) = result {
        eprintln!("writer: {e}");
        inside.failures.fetch_add(1, Ordering::SeqCst);
    }
    let _ = client.close();
}
