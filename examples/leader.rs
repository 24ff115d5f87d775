//! Leader election on a zklock `Mutex`: whoever holds the lock is the
//! leader. Several candidates (threads, each with its own ZooKeeper session,
//! as separate processes would have) queue on one lock path; the holder
//! leads and does its work while `guard.wait_while_held` says it still holds.
//! The example then ends the leader by closing its client (its session, and
//! with it its lock node, is gone at once, as when a process exits cleanly;
//! a crashed leader's node stays until its session times out, so failover
//! after a crash takes up to the session timeout) and the next candidate in
//! queue order takes over. It prints each failover and the
//! sequence of leaders, and checks that leadership passed in queue order,
//! one leader at a time, with strictly increasing fencing tokens.
//!
//! ```sh
//! cargo run --example leader
//! cargo run --example leader -- --candidates 5
//! ```
//!
//! `--candidates N` (default 4, at least 2). Uses `$ZK_CONNECT` if set, else
//! starts a throwaway local ZooKeeper (see `examples/common/mod.rs`). Exits 0
//! if the checks pass, 1 if not, 2 for a bad flag, 3 for any other error.

mod common;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use common::{check, wait_for, BadFlag, CloseAll, Flags, Outcome, Zk, WAIT};
use crossbeam_channel::{Receiver, Sender};
use zklock::recipes::lock_queue;
use zklock::{Client, LockState};

/// Rounds of work a leader reports before the example kills it.
const ROUNDS: u32 = 3;

fn main() -> ExitCode {
    common::run("leader", parse, leader)
}

/// `--candidates N`.
fn parse(flags: &mut Flags) -> Result<usize, BadFlag> {
    let count = flags.value("--candidates", 4)?;
    if count < 2 {
        return Err(BadFlag::new("--candidates must be at least 2"));
    }
    Ok(count)
}

enum Event {
    Elected { id: usize, token: i64 },
    Worked { id: usize },
    SteppedDown { id: usize, state: LockState },
    Failed { id: usize, error: zklock::Error },
}

fn leader(zk: &Zk, count: usize) -> Outcome {
    let election = zk.path("election");
    let observer = zk.client()?;
    let (tx, rx) = crossbeam_channel::unbounded();

    let mut leaders = Vec::new();
    let mut tokens = Vec::new();
    // Leaders elected while their predecessor had not been killed yet.
    let mut overlaps = 0;
    std::thread::scope(|scope| -> Outcome {
        // Candidates join one by one, so the queue order is known. Every
        // session is closed when this closure returns, even on an error, so
        // that no candidate thread is left waiting.
        let mut clients = CloseAll(Vec::new());
        // Closed once every candidate has joined: the leader works from then.
        let (go_tx, go) = crossbeam_channel::bounded::<()>(0);
        for id in 0..count {
            let client = zk.client()?;
            clients.0.push(client.clone());
            let (tx, go, election) = (tx.clone(), go.clone(), &election);
            scope.spawn(move || candidate(id, &client, election, &go, &tx));
            wait_for("the candidate to join the queue", WAIT, || {
                Ok(lock_queue(&observer, election)?.len() == id + 1)
            })?;
            println!(
                "candidate-{id} joined the election (session {:#x})",
                client_id(&clients, id)
            );
        }

        drop(go_tx);

        let mut killed_at: Option<Instant> = None;
        let mut kills = 0;
        let mut stepped_down = 0;
        while stepped_down < count {
            match next(&rx)? {
                Event::Elected { id, token } => {
                    if leaders.len() > kills {
                        overlaps += 1;
                    }
                    match killed_at {
                        None => println!("candidate-{id} is the leader (fencing token {token})"),
                        Some(at) => println!(
                            "failover: candidate-{id} is the new leader {} ms after the kill \
                             (fencing token {token})",
                            at.elapsed().as_millis()
                        ),
                    }
                    leaders.push(id);
                    tokens.push(token);
                }
                Event::Worked { id } => {
                    println!("killing the leader candidate-{id}: closing its session");
                    killed_at = Some(Instant::now());
                    clients.0[id].close()?;
                    kills += 1;
                }
                Event::SteppedDown { id, state } => {
                    stepped_down += 1;
                    println!("candidate-{id} sees its lock {state:?} and stops working");
                }
                Event::Failed { id, error } => {
                    return Err(format!("candidate-{id} failed: {error}").into());
                }
            }
        }
        Ok(true)
    })?;
    observer.close()?;

    let names: Vec<String> = leaders.iter().map(|id| format!("candidate-{id}")).collect();
    println!("leaders in order: {}", names.join(" -> "));
    let mut ok = true;
    ok &= check(
        leaders == (0..count).collect::<Vec<_>>(),
        "leadership passed to the next candidate in queue order",
    );
    ok &= check(
        overlaps == 0,
        "each new leader was elected only after its predecessor was killed",
    );
    ok &= check(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "each leader's fencing token is above its predecessor's",
    );
    Ok(ok)
}

fn client_id(clients: &CloseAll, id: usize) -> i64 {
    clients.0.get(id).map_or(0, Client::session_id)
}

fn next(rx: &Receiver<Event>) -> Result<Event, String> {
    rx.recv_timeout(WAIT)
        .map_err(|_| format!("nothing happened within {WAIT:?}"))
}

/// Waits to lead, then works until the lock is no longer held.
fn candidate(id: usize, client: &Client, election: &str, go: &Receiver<()>, tx: &Sender<Event>) {
    let result = (|| -> zklock::Result<()> {
        let lock = client.mutex(election)?.with_data(format!("candidate-{id}"));
        let guard = lock.lock()?;
        let _ = tx.send(Event::Elected {
            id,
            token: guard.fencing_token(),
        });
        // Returns (disconnected) once every candidate has joined.
        let _ = go.recv();
        let mut round = 0;
        // The work: one round every 50 ms for as long as we hold the lock.
        // `Held` is a check made before the act: a pause right after it (a
        // stopped process, swapping) can let a round run after the lock is
        // lost. Work with effects outside this process must carry the
        // fencing token, or go through `guard.multi`, so that whatever it
        // writes to can refuse a leader that has been replaced.
        let state = loop {
            match guard.wait_while_held(Some(Duration::from_millis(50))) {
                LockState::Held => {
                    round += 1;
                    println!("  candidate-{id} leads: work round {round}");
                    if round == ROUNDS {
                        let _ = tx.send(Event::Worked { id });
                    }
                }
                // Cut off from the ensemble: the lock may be lost, so the
                // work pauses until a reconnect confirms it (`Held`) or the
                // session is gone (`Lost`).
                LockState::Suspended => {
                    println!("  candidate-{id}: cut off; pausing the work");
                    let changes = guard.state_changes();
                    while guard.state() == LockState::Suspended {
                        if changes.recv().is_err() {
                            break;
                        }
                    }
                }
                state => break state,
            }
        };
        // A long-running service would call `lock()` again here, to stand
        // again (with a new client if its session expired).
        let _ = tx.send(Event::SteppedDown { id, state });
        Ok(())
    })();
    if let Err(error) = result {
        let _ = tx.send(Event::Failed { id, error });
    }
}
