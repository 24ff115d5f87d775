//! Configuration reloaded on change, with a one-shot data watch. A watcher
//! (its own session) reads a configuration znode with `get_data_w`, which
//! also leaves a watch; when the watch fires it reloads, which re-arms the
//! watch for the next change. An updater (another session) changes the
//! configuration several times, then deletes it, which stops the watcher.
//!
//! A one-shot watch says that the node changed, not how many times: changes
//! made before the watcher re-arms are seen together, as one reload of the
//! latest data. So that the output shows one reload per change, the updater
//! here waits until the watcher has loaded each version before it writes the
//! next one.
//!
//! The example checks that the watcher loaded every version in order, once
//! each, and that its last reload saw the last data written.
//!
//! ```sh
//! cargo run --example config_watch
//! cargo run --example config_watch -- --changes 10
//! ```
//!
//! `--changes N` (default 5, at least 1). Uses `$ZK_CONNECT` if set, else
//! starts a throwaway local ZooKeeper (see `examples/common/mod.rs`). Exits
//! 0 if the checks pass, 1 if not, 2 for a bad flag, 3 for any other error.

mod common;

use std::process::ExitCode;
use std::time::Duration;

use common::{check, BadFlag, Flags, Outcome, Zk, WAIT};
use crossbeam_channel::{Receiver, Sender};
use zklock::{Acl, Client, CreateMode, EventType};

fn main() -> ExitCode {
    common::run("config_watch", parse, config_watch)
}

/// `--changes N`.
fn parse(flags: &mut Flags) -> Result<i32, BadFlag> {
    let changes = flags.value("--changes", 5)?;
    if changes < 1 {
        return Err(BadFlag::new("--changes must be at least 1"));
    }
    Ok(changes)
}

/// One reload: the data version and the data.
type Reload = (i32, String);

fn config_watch(zk: &Zk, changes: i32) -> Outcome {
    let path = zk.path("config");
    let updater = zk.client()?;
    updater.create(
        &path,
        config(0).as_bytes(),
        &Acl::open_unsafe(),
        CreateMode::Persistent,
    )?;

    let (reload_tx, reloads) = crossbeam_channel::unbounded::<Reload>();
    let watcher_client = zk.client()?;
    let (ended_tx, ended) = crossbeam_channel::bounded::<()>(1);
    let (loaded, watcher_end) = std::thread::scope(|scope| -> Result<_, String> {
        let watcher = scope.spawn(|| {
            let end = watch(&watcher_client, &path, &reload_tx);
            let _ = ended_tx.send(());
            end
        });
        let mut loaded = Vec::new();
        let outcome = update(&updater, &path, changes, &reloads, &mut loaded);
        println!("updater: deleting the configuration");
        let deleted = updater.delete(&path, None);
        // The watcher waits for a change for as long as its session lasts:
        // closing it ends the wait, with an error, when the deletion failed
        // or is not heard of in time (which the checks below then report).
        if outcome.is_err() || deleted.is_err() || ended.recv_timeout(WAIT).is_err() {
            let _ = watcher_client.close();
        }
        let end = watcher
            .join()
            .unwrap_or_else(|_| Err("the watcher panicked".into()));
        outcome.map(|()| (loaded, end))
    })?;
    updater.close()?;
    watcher_client.close()?;

    let versions: Vec<i32> = loaded.iter().map(|(v, _)| *v).collect();
    let mut ok = true;
    ok &= check(
        versions == (0..=changes).collect::<Vec<_>>(),
        &format!(
            "the watcher loaded every version once, in order ({} reloads for {changes} changes)",
            loaded.len()
        ),
    );
    ok &= check(
        loaded.last().map(|(_, data)| data.as_str()) == Some(config(changes).as_str()),
        "the last reload saw the last data written",
    );
    ok &= check(
        watcher_end == Ok(EventType::NodeDeleted),
        "the watcher stopped when the configuration was deleted",
    );
    Ok(ok)
}

/// Writes versions 1..=`changes`, each once the watcher has loaded the
/// previous one, and waits for the last reload.
fn update(
    updater: &Client,
    path: &str,
    changes: i32,
    reloads: &Receiver<Reload>,
    loaded: &mut Vec<Reload>,
) -> Result<(), String> {
    for version in 0..=changes {
        let reload = reloads
            .recv_timeout(WAIT)
            .map_err(|_| format!("no reload of version {version} within {WAIT:?}"))?;
        loaded.push(reload.clone());
        if reload.0 != version {
            return Err(format!(
                "expected version {version} to load, not {}",
                reload.0
            ));
        }
        if version < changes {
            println!("updater: writing version {}", version + 1);
            updater
                .set_data(path, config(version + 1).as_bytes(), None)
                .map_err(|e| format!("set_data: {e}"))?;
        }
    }
    Ok(())
}

/// The configuration text for a version.
fn config(version: i32) -> String {
    let level = ["info", "debug", "warn"][version as usize % 3];
    format!("max_connections={} log_level={level}", 100 + 10 * version)
}

/// How many reads in a row may fail with an error that may pass before the
/// watcher gives up (at 200 ms apart: 10 s).
const MAX_READ_FAILURES: u32 = 50;

/// Loads the configuration, and reloads it whenever its watch fires, until
/// the node is deleted. Returns the event that ended the loop.
fn watch(client: &Client, path: &str, reloads: &Sender<Reload>) -> Result<EventType, String> {
    let mut count = 0;
    // Read failures in a row that may pass (a lost connection, say):
    // bounded, so that an ensemble gone for good ends the watcher.
    let mut failures = 0;
    loop {
        // Reading the data arms the watch for the next change.
        let (data, stat, events) = match client.get_data_w(path) {
            Ok(found) => found,
            Err(zklock::Error::NoNode) => return Ok(EventType::NodeDeleted),
            Err(e) if e.is_retryable() && failures < MAX_READ_FAILURES => {
                failures += 1;
                println!("watcher: reading failed ({e}); trying again");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Err(e) => return Err(format!("get_data_w: {e}")),
        };
        failures = 0;
        count += 1;
        let text = String::from_utf8_lossy(&data).into_owned();
        println!("watcher: reload #{count}: version {}: {text}", stat.version);
        let _ = reloads.send((stat.version, text));
        // A configuration may stay quiet for days: wait as long as it
        // takes. The session's end ends the wait too (an event of type
        // None, with the final state); to watch on after an expiry, build
        // the client with `new_session_on_expiry(true)` and read again.
        let event = events
            .recv()
            .map_err(|_| "the watch's channel ended".to_owned())?;
        match event.event_type {
            EventType::NodeDataChanged => println!("watcher: the configuration changed"),
            EventType::NodeDeleted => {
                println!("watcher: the configuration was deleted; stopping");
                return Ok(EventType::NodeDeleted);
            }
            EventType::None => return Err(format!("the session ended ({:?})", event.state)),
            other => return Err(format!("watch ended with {other:?} ({:?})", event.state)),
        }
    }
}
