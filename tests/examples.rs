//! Runs every example in `examples/` as a process, with `ZK_CONNECT`
//! pointing at a server this test starts, and checks what it prints.
//!
//! The examples are built once with `cargo build --examples` (a no-op when
//! `cargo test` has just built them) and run from the target directory.
//! Every run is bounded, and a Drop guard kills the child if a test fails.

mod child;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use child::{Output, Run};

use zklock::testing::TestServer;
use zklock::Client;

/// How long an example may run.
const RUN_LIMIT: Duration = Duration::from_secs(60);
/// How long building the examples may take (a cold build on a slow machine).
const BUILD_LIMIT: Duration = Duration::from_secs(600);

/// One server for every test here: each example works under its own
/// `/zklock-examples/<name>-<host>-<pid>`. It is never dropped; its watchdog kills
/// it and removes its directory when this process exits.
fn server() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| TestServer::new().expect("start a ZooKeeper server"))
}

/// The directory holding the built examples: `cargo build --examples` into
/// the target directory and profile this test was built with.
fn examples_dir() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        // target/<profile>/deps/examples-<hash>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .ok_or("no profile directory above the test binary")?;
        let target_dir = profile_dir
            .parent()
            .ok_or("no target directory above the profile directory")?;
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev".to_owned(),
            Some(name) => name.to_owned(),
        };
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .args(["build", "--quiet", "--examples", "--profile", &profile])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("CARGO_TARGET_DIR", target_dir);
        // The same features as this test, so the library is not rebuilt.
        if cfg!(feature = "cli") {
            cargo.args(["--features", "cli"]);
        }
        let out = Run::spawn(&mut cargo).finish(BUILD_LIMIT);
        if !out.status.success() {
            return Err(format!("cargo build --examples failed:\n{}", out.stderr));
        }
        Ok(profile_dir.join("examples"))
    });
    match built {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    }
}

/// Runs an example against the shared server and returns its output; panics
/// (showing the output) unless it exits 0.
fn example(name: &str, args: &[&str]) -> Output {
    let out = run_example(name, args, Some(&server().connect_string()));
    assert!(
        out.status.success(),
        "example {name} {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    assert!(
        !out.stdout.contains("FAIL"),
        "example {name} reported a failed check:\n{}",
        out.stdout
    );
    // It cleaned up after itself.
    let client = Client::connect(&server().connect_string()).expect("connect");
    let prefix = format!(
        "/zklock-examples/{name}-{}-{}",
        zklock::recipes::host_name(),
        out.pid
    );
    assert_eq!(
        client.exists(&prefix).expect("exists"),
        None,
        "{name} left {prefix} behind"
    );
    out
}

fn run_example(name: &str, args: &[&str], zk_connect: Option<&str>) -> Output {
    let mut command = Command::new(examples_dir().join(name));
    command.args(args);
    match zk_connect {
        Some(connect) => command.env("ZK_CONNECT", connect),
        None => command.env_remove("ZK_CONNECT"),
    };
    Run::spawn(&mut command).finish(RUN_LIMIT)
}

/// True if `text` has a line equal to `line`.
fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l.trim_end() == line)
}

#[test]
fn stock_sells_exactly_the_stock_under_the_lock() {
    let out = example("stock", &[]);
    assert!(has_line(&out.stdout, "final stock: 0"), "{}", out.stdout);
    assert!(
        has_line(&out.stdout, "sold: 20, refused: 20 (of 40 orders)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("per second"), "{}", out.stdout);

    // Less demand than stock: exactly the demand is sold.
    let out = example(
        "stock",
        &["--workers", "3", "--stock", "100", "--orders", "4"],
    );
    assert!(has_line(&out.stdout, "final stock: 88"), "{}", out.stdout);
    assert!(
        has_line(&out.stdout, "sold: 12, refused: 0 (of 12 orders)"),
        "{}",
        out.stdout
    );
}

#[test]
fn payments_are_recorded_once_and_a_stuck_workers_commit_is_refused() {
    let out = example("payments", &[]);
    assert!(
        has_line(
            &out.stdout,
            "charges made: 25; commits: 24 recorded, 1 refused, 0 unknown"
        ),
        "{}",
        out.stdout
    );
    // Worker 0 gets stuck on the first payment it takes on, usually its
    // first in line (payment-0000), unless another worker was quicker.
    let stuck: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| {
            l.trim_end()
                .strip_prefix("worker-0: lost the lock on ")?
                .strip_suffix("; commit refused")
        })
        .collect();
    let [id] = stuck[..] else {
        panic!("one refused commit of worker-0 expected:\n{}", out.stdout);
    };
    assert!(id.starts_with("payment-"), "{}", out.stdout);
    let recorded_by = out
        .stdout
        .lines()
        .find_map(|l| {
            l.trim_end()
                .strip_prefix(&format!("worker-0 got stuck on {id}, which "))
        })
        .and_then(|rest| rest.strip_suffix(" recorded"));
    assert!(
        recorded_by.is_some_and(|by| by.starts_with("worker-") && by != "worker-0"),
        "{}",
        out.stdout
    );
    let refused = run_example("payments", &["--workers", "1"], Some("127.0.0.1:1"));
    assert_eq!(refused.status.code(), Some(2), "{}", refused.stderr);
    assert_eq!(
        refused.stderr.trim_end(),
        "payments: --workers must be at least 2"
    );
}

#[test]
fn stock_without_the_lock_runs() {
    // Whether the race shows is up to the scheduler; only the run is checked.
    let out = example("stock", &["--no-lock"]);
    assert!(out.stdout.contains("WITHOUT the lock"), "{}", out.stdout);
    assert!(out.stdout.contains("final stock: "), "{}", out.stdout);
    assert!(
        out.stdout.contains("OVERSOLD") || out.stdout.contains("no oversell this time"),
        "{}",
        out.stdout
    );
}

#[test]
fn leader_fails_over_in_queue_order() {
    let out = example("leader", &[]);
    assert!(
        has_line(
            &out.stdout,
            "leaders in order: candidate-0 -> candidate-1 -> candidate-2 -> candidate-3"
        ),
        "{}",
        out.stdout
    );
    let failovers: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("failover: "))
        .collect();
    assert_eq!(failovers.len(), 3, "{}", out.stdout);
    for (i, line) in failovers.iter().enumerate() {
        assert!(
            line.starts_with(&format!("failover: candidate-{} is the new leader", i + 1)),
            "{line}"
        );
    }
}

#[test]
fn rwlock_readers_share_and_the_writer_excludes() {
    let out = example("rwlock", &[]);
    for line in [
        "3 readers hold the read lock at the same time",
        "writer asks for the write lock and waits behind 3 readers",
        "writer holds the write lock (readers inside: 0)",
        "reader-3 asks for the read lock and waits for the writer",
        "reader-3 holds the read lock (readers inside: 1)",
    ] {
        assert!(
            has_line(&out.stdout, line),
            "no {line:?} in:\n{}",
            out.stdout
        );
    }
    // The writer got in after the last reader left, and reader-3 after the
    // writer released.
    let at = |line: &str| out.stdout.find(line).expect(line);
    assert!(at("reader-2 released the read lock") < at("writer holds the write lock"));
    assert!(at("writer released the write lock") < at("reader-3 holds the read lock"));
}

#[test]
fn config_watch_reloads_every_change() {
    let out = example("config_watch", &["--changes", "5"]);
    let reloads: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("watcher: reload #"))
        .collect();
    assert_eq!(reloads.len(), 6, "{}", out.stdout);
    for (i, line) in reloads.iter().enumerate() {
        assert!(
            line.starts_with(&format!("watcher: reload #{}: version {i}: ", i + 1)),
            "{line}"
        );
    }
    assert!(
        has_line(
            &out.stdout,
            "watcher: the configuration was deleted; stopping"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn an_example_starts_its_own_server_without_zk_connect() {
    let out = run_example("config_watch", &["--changes", "1"], None);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("ZK_CONNECT is unset: starting a throwaway local ZooKeeper"),
        "{}",
        out.stdout
    );
    assert!(
        has_line(&out.stdout, "stopped the local ZooKeeper"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_bad_flag_exits_2_before_connecting() {
    let out = run_example("stock", &["--workers", "many"], Some("127.0.0.1:1"));
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert_eq!(
        out.stderr.trim_end(),
        "stock: --workers: \"many\" is not a valid value"
    );
    assert_eq!(out.stdout, "");
}
