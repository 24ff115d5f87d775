//! The `zklock` command's errors, usage and `bench` (feature `cli`): an
//! error is one line with status 1, bad usage one line with status 2,
//! `--help` shows the usage, and `bench` runs every mode and catches
//! overlaps.
//!
//! Built only with the `cli` feature, since it needs the binary. Every
//! test uses its own lock path on one shared server; every wait is bounded.

#![cfg(feature = "cli")]

mod cli_common;

use std::process::Command;
use std::time::Duration;

use cli_common::*;
use zklock::testing::FaultProxy;

#[test]
fn an_unreachable_ensemble_is_one_line_naming_the_host() {
    let port = zklock::testing::dead_port().expect("a free port");
    let host = format!("127.0.0.1:{port}");
    let out = holders(&host, "/cli/x", false);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
    let line = one_line(&out);
    assert!(line.starts_with("zklock: "), "{line}");
    assert!(line.contains(&host), "{line}");
    assert_eq!(out.stdout, "");
}

#[test]
fn a_bad_path_is_one_line_saying_what_is_wrong() {
    let connect = connect_string();
    let out = Run::spawn(&mut zklock(&["holders", "--connect", &connect, "no-slash"])).finish(WAIT);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
    assert_eq!(
        one_line(&out),
        "zklock: invalid path \"no-slash\": the path must start with '/'"
    );

    let out = Run::spawn(&mut exec(&[], "/cli//bad", "true")).finish(WAIT);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
    assert_eq!(
        one_line(&out),
        "zklock: invalid path \"/cli//bad\": the path contains an empty segment ('//')"
    );
}

/// Found missing before the lock is asked for: it does not wait for a
/// holder only to give the lock back. (Looked for once the lock was held,
/// it waited behind the holder.)
#[test]
fn a_command_that_cannot_run_is_one_line_with_status_1() {
    let connect = connect_string();
    let holder = client();
    let lock = holder.mutex("/cli/no-command").expect("mutex");
    let held = lock.lock().expect("lock");
    let out = Run::spawn(&mut zklock(&[
        "exec",
        "--connect",
        &connect,
        "/cli/no-command",
        "--",
        "/nonexistent/command",
    ]))
    .finish(WAIT);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
    let line = one_line(&out);
    assert!(
        line.starts_with("zklock: cannot run \"/nonexistent/command\": "),
        "{line}"
    );
    // Nothing was asked for: only the holder's node is there.
    assert_eq!(children(&client(), "/cli/no-command").len(), 1);
    held.unlock().expect("unlock");
}

/// A command that is an executable file but cannot be executed (here a
/// script whose interpreter is missing, as with a `#!/bin/sh\r` line) is
/// an error like any command that cannot be started: status 1 and one line,
/// not setpriv's failure status (127), which passes for the command's own.
#[test]
fn a_command_that_cannot_be_executed_is_status_1_not_setprivs() {
    const PATH: &str = "/cli/bad-interpreter";
    let dir = TempDir::new("bad-interpreter");
    let script = dir.join("script");
    std::fs::write(&script, "#!/nonexistent/interpreter\n").expect("write a script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make it executable");
    let connect = connect_string();
    let script = script.display().to_string();
    let out = Run::spawn(&mut zklock(&[
        "exec",
        "--connect",
        &connect,
        "--quiet",
        PATH,
        "--",
        &script,
    ]))
    .finish(WAIT);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
    let line = one_line(&out);
    assert!(line.contains(&script), "{line}");
    assert!(children(&client(), PATH).is_empty());
    // A command that ran and exited 127 or 126 keeps its status.
    for status in ["126", "127"] {
        let out = Run::spawn(&mut exec(&[], PATH, &format!("exit {status}"))).finish(WAIT);
        assert_eq!(
            code(&out).map(|c| c.to_string()).as_deref(),
            Some(status),
            "{}",
            out.stderr
        );
    }
}

/// A command looked up in `PATH` is the first file of that name this user
/// may execute, as with execvp: one with execute bits only for others is
/// passed over, not taken and then refused (status 1). As root, which may
/// execute any file with an execute bit, zklock runs as `nobody`
/// (`setpriv`) and the file passed over is its owner's alone.
#[test]
fn a_command_in_path_this_user_may_not_execute_is_passed_over() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    const PATH: &str = "/cli/passed-over";
    let dir = TempDir::new("passed-over");
    // Open to `nobody` whatever the umask.
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).expect("chmod");
    // Copied where `nobody` can reach it: the build's directory may not be.
    let zklock_copy = dir.join("zklock");
    std::fs::copy(ZKLOCK, &zklock_copy).expect("copy zklock");
    let root = std::fs::metadata("/proc/self").expect("/proc/self").uid() == 0;
    let unusable = if root { 0o744 } else { 0o055 };
    for (name, mode) in [("first", unusable), ("second", 0o755)] {
        let bin = dir.join(name);
        std::fs::create_dir(&bin).expect("a PATH directory");
        let script = bin.join("which-one");
        std::fs::write(&script, format!("#!/bin/sh\necho {name}\n")).expect("write");
        std::fs::set_permissions(&script, PermissionsExt::from_mode(mode)).expect("chmod");
    }
    let mut command = Command::new("env");
    command.arg("--default-signal=INT,QUIT,HUP,TERM,TSTP,TTIN,TTOU");
    if root {
        command.args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]);
    }
    command
        .arg(&zklock_copy)
        .args(["exec", "--connect", &connect_string(), "--quiet", PATH])
        .args(["--", "which-one"])
        .env_remove("ZK_CONNECT")
        .env(
            "PATH",
            format!(
                "{}:{}:/usr/bin:/bin",
                dir.join("first").display(),
                dir.join("second").display()
            ),
        );
    let out = Run::spawn(&mut command).finish(WAIT);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "second\n");
    assert!(children(&client(), PATH).is_empty());
}

#[test]
fn connect_defaults_to_zk_connect() {
    let out = Run::spawn(zklock(&["holders", "/cli/env"]).env("ZK_CONNECT", connect_string()))
        .finish(WAIT);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "/cli/env: free");
}

#[test]
fn bad_usage_is_one_line_with_status_2() {
    for (args, message) in [
        (
            &["exec", "/cli/x"][..],
            "zklock: missing -- COMMAND [ARGS...]",
        ),
        (
            &["exec", "/cli/x", "--"][..],
            "zklock: missing COMMAND after --",
        ),
        (
            &["exec", "--wait", "soon", "/cli/x", "--", "true"][..],
            "zklock: --wait: \"soon\" is not a valid number",
        ),
        (
            &["exec", "--no-wait", "--wait", "1", "/cli/x", "--", "true"][..],
            "zklock: --wait and --no-wait exclude each other",
        ),
        (
            &["exec", "--wait", "1e20", "/cli/x", "--", "true"][..],
            "zklock: --wait must be from 0 to 18446744073709551615 seconds, not 1e20",
        ),
        (
            &["exec", "--wait", "-1", "/cli/x", "--", "true"][..],
            "zklock: --wait must be from 0 to 18446744073709551615 seconds, not -1",
        ),
        (
            &["exec", "--read", "--write", "/cli/x", "--", "true"][..],
            "zklock: --read and --write exclude each other",
        ),
        (
            &["exec", "--no-wait=false", "/cli/x", "--", "true"][..],
            "zklock: --no-wait takes no value",
        ),
        (
            &["holders", "--json=yes", "/cli/x"][..],
            "zklock: --json takes no value",
        ),
        (
            &["holders", "--session-timeout", "2147483648", "/cli/x"][..],
            "zklock: --session-timeout must be from 1 to 2147483647 ms, not 2147483648",
        ),
        (
            &["exec", "--session-timeout", "0", "/cli/x", "--", "true"][..],
            "zklock: --session-timeout must be from 1 to 2147483647 ms, not 0",
        ),
        // Refused before connecting (nothing listens on port 1).
        (
            &[
                "exec",
                "--connect",
                "127.0.0.1:1",
                "--grace",
                "3000",
                "/cli/x",
                "--",
                "true",
            ][..],
            "zklock: --grace must be at most 1/6 of the session timeout (2500 ms)",
        ),
        (&["holders"][..], "zklock: missing LOCK_PATH"),
        (
            &["holders", "--frob", "/x"][..],
            "zklock: unknown option --frob",
        ),
        (
            &["bench", "--mode", "fast"][..],
            "zklock: --mode must be uncontended, contended, get or set, not \"fast\"",
        ),
        (
            &["bench", "--mode", "set", "--without-lock"][..],
            "zklock: --without-lock is for --mode contended only",
        ),
        (
            &["frobnicate"][..],
            "zklock: unknown command \"frobnicate\"",
        ),
        (&[][..], "zklock: missing command"),
    ] {
        let out = Run::spawn(&mut zklock(args)).finish(WAIT);
        assert_eq!(code(&out), Some(2), "{args:?}: {}", out.stderr);
        let line = one_line(&out);
        assert!(
            line.starts_with(message),
            "{args:?}: {line:?} does not start with {message:?}"
        );
    }
    // --help is not an error.
    let out = Run::spawn(&mut zklock(&["--help"])).finish(WAIT);
    assert_eq!(code(&out), Some(0));
    assert!(out.stdout.contains("zklock exec"), "{}", out.stdout);
    assert!(out.stdout.contains("75"), "{}", out.stdout);
    assert!(out.stdout.contains("76"), "{}", out.stdout);
}

#[test]
fn every_command_shows_the_usage_on_help_but_commands_keep_their_own() {
    for args in [
        &["exec", "--help"][..],
        &["exec", "--wait", "3", "-h", "/cli/x", "--", "true"][..],
        &["holders", "--help"][..],
        &["bench", "-h"][..],
    ] {
        let out = Run::spawn(&mut zklock(args)).finish(WAIT);
        assert_eq!(code(&out), Some(0), "{args:?}: {}", out.stderr);
        assert!(out.stdout.starts_with("usage:"), "{args:?}: {}", out.stdout);
        assert_eq!(out.stderr, "", "{args:?}");
    }
    // After `--`, `--help` is COMMAND's.
    let out = Run::spawn(&mut zklock(&[
        "exec",
        "--connect",
        &connect_string(),
        "/cli/help",
        "--",
        "printf",
        "%s\\n",
        "--help",
    ]))
    .finish(WAIT);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "--help\n");
}

#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error_not_a_panic() {
    use std::os::unix::ffi::OsStrExt as _;
    let bad = std::ffi::OsStr::from_bytes(b"/cli/\xff");
    let out = Run::spawn(zklock(&["holders"]).arg(bad)).finish(WAIT);
    assert_eq!(code(&out), Some(2), "{}", out.stderr);
    assert_eq!(
        one_line(&out),
        "zklock: argument \"/cli/\\xFF\" is not valid UTF-8 (zklock --help shows the usage)"
    );
}

/// A `ZK_CONNECT` that is not UTF-8 is a usage error, never taken for
/// unset: that would fall back to 127.0.0.1:2181, another ensemble.
#[test]
fn a_zk_connect_that_is_not_utf8_is_a_usage_error_not_the_default() {
    use std::os::unix::ffi::OsStrExt as _;
    let bad = std::ffi::OsStr::from_bytes(b"127.0.0.1:2181/\xff");
    let out = Run::spawn(zklock(&["holders", "/cli/env-bad"]).env("ZK_CONNECT", bad)).finish(WAIT);
    assert_eq!(code(&out), Some(2), "{}", out.stderr);
    assert_eq!(
        one_line(&out),
        "zklock: ZK_CONNECT is not valid UTF-8 (zklock --help shows the usage)"
    );
}

/// The opcodes of the writes a lock/unlock cycle may send: create, delete,
/// multi, create2.
const LOCK_WRITES: [i32; 4] = [1, 2, 14, 15];

/// `--ops` may be any number: nothing is reserved for that many up front.
#[test]
fn bench_takes_any_number_of_ops() {
    let proxy = FaultProxy::start(server().addr()).expect("start a proxy");
    let connect = proxy.connect_string();
    let ops = u64::MAX.to_string();
    let mut run = Run::spawn(&mut zklock(&[
        "bench",
        "--connect",
        &connect,
        "--mode",
        "uncontended",
        "--path",
        "/cli/bench-any-ops",
        "--ops",
        &ops,
    ]));
    wait_until("the bench to write 100 times", WAIT, || {
        if let Some((status, _)) = run.poll() {
            panic!("the bench exited: {status}");
        }
        LOCK_WRITES
            .iter()
            .map(|&op| proxy.requests_seen(op))
            .sum::<usize>()
            >= 100
    });
}

/// Runs `zklock bench` for `ops` acquisitions and returns its `violations`.
fn bench_violations(extra: &[&str], ops: &str, path: &str) -> u64 {
    let json = bench_json("contended", extra, ops, path);
    let clients = json_values(&json, "clients");
    assert_eq!(
        clients.iter().map(|v| v.trim()).collect::<Vec<_>>(),
        ["4"],
        "{json}"
    );
    json_values(&json, "violations")
        .first()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no violations in {json}"))
}

/// Runs `zklock bench` in `mode` for `ops` operations and returns its JSON
/// line, checked to have the peers' keys and to count every operation.
fn bench_json(mode: &str, extra: &[&str], ops: &str, path: &str) -> String {
    let connect = connect_string();
    let mut args = vec![
        "bench",
        "--connect",
        connect.as_str(),
        "--mode",
        mode,
        "--path",
        path,
        "--ops",
        ops,
    ];
    args.extend_from_slice(extra);
    let out = Run::spawn(&mut zklock(&args)).finish(Duration::from_secs(60));
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    // The format the peers' benches share, no more and no less.
    assert_eq!(
        json_keys(out.stdout.trim()),
        [
            "impl",
            "mode",
            "clients",
            "ops",
            "secs",
            "ops_per_s",
            "p50_us",
            "p99_us",
            "violations"
        ],
        "{}",
        out.stdout
    );
    let counted = json_values(out.stdout.trim(), "ops");
    assert_eq!(
        counted.iter().map(|v| v.trim()).collect::<Vec<_>>(),
        [ops],
        "every operation is counted: {}",
        out.stdout
    );
    out.stdout.trim().to_owned()
}

#[test]
fn bench_runs_every_mode_and_reports_its_sessions() {
    for (mode, clients) in [("uncontended", "1"), ("get", "4"), ("set", "4")] {
        let json = bench_json(
            mode,
            &["--clients", "4"],
            "200",
            &format!("/cli/bench-{mode}"),
        );
        let field = |key: &str| {
            json_values(&json, key)
                .first()
                .map(|v| v.trim().to_owned())
                .unwrap_or_else(|| panic!("no {key} in {json}"))
        };
        assert_eq!(field("mode"), format!("\"{mode}\""), "{json}");
        // Uncontended mode has one session, whatever --clients says.
        assert_eq!(field("clients"), clients, "{json}");
        assert_eq!(field("violations"), "0", "{json}");
    }
    // A node an earlier run left is taken up again.
    bench_json("get", &[], "10", "/cli/bench-get");
    // One with other data is someone's: refused, its data kept. (Before,
    // it was set to the bench's 100 bytes.)
    let client = client();
    client
        .set_data("/cli/bench-get", b"short", None)
        .expect("set_data");
    let connect = connect_string();
    for mode in ["get", "set"] {
        let out = Run::spawn(&mut zklock(&[
            "bench",
            "--connect",
            &connect,
            "--mode",
            mode,
            "--path",
            "/cli/bench-get",
        ]))
        .finish(WAIT);
        assert_eq!(code(&out), Some(1), "{}", out.stderr);
        assert_eq!(
            one_line(&out),
            "zklock: invalid argument: /cli/bench-get exists with data of its own (5 bytes), \
             not the bench's: give --path a node of the bench's own",
            "{mode}"
        );
    }
    let (kept, _) = client.get_data("/cli/bench-get").expect("get");
    assert_eq!(kept, b"short");
    // Nor is the root the raw modes' node.
    let out = Run::spawn(&mut zklock(&[
        "bench",
        "--connect",
        &connect,
        "--mode",
        "set",
        "--path",
        "/",
    ]))
    .finish(WAIT);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
    assert!(
        one_line(&out).contains("cannot be the root"),
        "{}",
        out.stderr
    );
}

#[test]
fn bench_catches_overlaps_without_the_lock_and_sees_none_with_it() {
    let without = bench_violations(
        &["--without-lock", "--clients", "4"],
        "400",
        "/cli/bench-unlocked",
    );
    eprintln!("violations without the lock: {without}");
    assert!(without > 0, "no overlap detected without the lock");
    let with = bench_violations(&["--clients", "4"], "100", "/cli/bench-locked");
    assert_eq!(with, 0);
}
