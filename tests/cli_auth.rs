//! `zklock` on lock paths whose ACL asks for digest credentials, which it
//! takes from `ZK_DIGEST` (`USER:PASSWORD`), never from its arguments.
//!
//! Built only with the `cli` feature, since it needs the binary.

#![cfg(feature = "cli")]

mod child;

use std::process::Command;
use std::time::Duration;

use child::{Output, Run, TempDir};
use zklock::testing::TestServer;
use zklock::{Acl, Client, CreateMode};

const ZKLOCK: &str = env!("CARGO_BIN_EXE_zklock");

/// The longest anything that should happen is waited for.
const WAIT: Duration = Duration::from_secs(20);

/// What `zklock` says when the lock path's ACL refuses its session.
const NOT_AUTHORIZED: &str = "zklock: not authorized by the lock path's ACL \
                              (ZK_DIGEST=USER:PASSWORD sets digest credentials)";

/// The lock directory, which only `alice` may use.
const LOCKED: &str = "/cli-auth/locked";

/// A server with `LOCKED` created by `alice` (password `secret`), readable
/// and writable by her alone.
fn server_with_a_locked_path() -> TestServer {
    let server = TestServer::new().expect("start a ZooKeeper server");
    let alice = Client::builder()
        .digest("alice", "secret")
        .connect(&server.connect_string())
        .expect("connect as alice");
    alice
        .create(
            "/cli-auth",
            b"",
            &Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .expect("create the parent");
    alice
        .create(LOCKED, b"", &Acl::creator_all(), CreateMode::Persistent)
        .expect("create the lock directory, alice's alone");
    alice.close().expect("close alice's session");
    server
}

/// `zklock ARGS...` against `server`, with `ZK_DIGEST` set to `digest`
/// (unset if `None`), run to its end.
fn zklock(server: &TestServer, digest: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(ZKLOCK);
    command
        .args(args)
        .env("ZK_CONNECT", server.connect_string())
        .env_remove("ZK_DIGEST");
    if let Some(digest) = digest {
        command.env("ZK_DIGEST", digest);
    }
    Run::spawn(&mut command).finish(WAIT)
}

/// Runs `zklock exec LOCKED -- touch <file>`; whether the command ran.
fn exec_touching(server: &TestServer, digest: Option<&str>) -> (Output, bool) {
    let dir = TempDir::new("cli-auth");
    let mark = dir.join("ran");
    let mark_arg = mark.display().to_string();
    let out = zklock(
        server,
        digest,
        &["exec", "--no-wait", LOCKED, "--", "touch", &mark_arg],
    );
    (out, mark.exists())
}

/// Asserts that stderr is exactly one line and returns it.
fn one_line(out: &Output) -> &str {
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr is not one line:\n{}", out.stderr);
    lines[0]
}

#[test]
fn exec_and_holders_use_the_digest_the_lock_path_asks_for() {
    let server = server_with_a_locked_path();
    for digest in [None, Some("mallory:secret"), Some("alice:wrong")] {
        let (out, ran) = exec_touching(&server, digest);
        assert_eq!(out.status.code(), Some(1), "{digest:?}: {}", out.stderr);
        assert!(!ran, "{digest:?}: the command ran");
        assert_eq!(one_line(&out), NOT_AUTHORIZED, "{digest:?}");
        let out = zklock(&server, digest, &["holders", LOCKED]);
        assert_eq!(out.status.code(), Some(1), "{digest:?}: {}", out.stderr);
    }

    let (out, ran) = exec_touching(&server, Some("alice:secret"));
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert!(ran, "the command did not run");
    let out = zklock(
        &server,
        Some("alice:secret"),
        &["holders", "--json", LOCKED],
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        r#"{"path":"/cli-auth/locked","queue":[]}"#,
        "no node left"
    );
}

/// The command does not get zklock's password: `ZK_DIGEST` is taken out
/// of its environment (its other variables stay).
#[test]
fn the_command_does_not_inherit_zk_digest() {
    let server = server_with_a_locked_path();
    let out = zklock(
        &server,
        Some("alice:secret"),
        &[
            "exec",
            "--no-wait",
            LOCKED,
            "--",
            "sh",
            "-c",
            "printf '%s %s' \"${ZK_DIGEST-unset}\" \"$ZK_CONNECT\"",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, format!("unset {}", server.connect_string()));
}

/// `bench` takes `ZK_DIGEST` as the other subcommands do: its lock cycles
/// on a path only `alice` may use run with her credentials, and fail
/// without them. Before, it ignored them.
#[test]
fn bench_uses_the_digest_too() {
    let server = server_with_a_locked_path();
    let path = format!("{LOCKED}/bench");
    let bench = [
        "bench",
        "--mode",
        "uncontended",
        "--ops",
        "3",
        "--path",
        &path,
    ];
    let out = zklock(&server, None, &bench);
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert_eq!(one_line(&out), NOT_AUTHORIZED);
    let out = zklock(&server, Some("alice:secret"), &bench);
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains(r#""ops": 3,"#) && out.stdout.contains(r#""violations": 0}"#),
        "{}",
        out.stdout
    );
}

#[test]
fn a_malformed_digest_is_bad_usage_and_never_shown() {
    let server = server_with_a_locked_path();
    for digest in ["alice", ":secret", "\u{1b}x"] {
        let (out, ran) = exec_touching(&server, Some(digest));
        assert_eq!(out.status.code(), Some(2), "{digest:?}: {}", out.stderr);
        assert!(!ran);
        assert_eq!(
            one_line(&out),
            "zklock: ZK_DIGEST must be USER:PASSWORD, with a user name before the \
             first ':' (zklock --help shows the usage)",
            "{digest:?}"
        );
    }
    // An empty one is no credentials at all.
    let (out, _) = exec_touching(&server, Some(""));
    assert_eq!(one_line(&out), NOT_AUTHORIZED);
}

/// With `--acl creator`, the nodes exec creates (its lock node, and the
/// lock directory and its parent, missing before) are its credentials'
/// alone: a session without them can neither list the queue nor delete
/// the holder's node.
#[test]
fn exec_with_acl_creator_keeps_its_nodes_to_its_credentials() {
    let server = TestServer::new().expect("start a ZooKeeper server");
    let dir = TempDir::new("cli-acl");
    let reported = dir.join("node");
    let done = dir.join("done");
    // Bounded: 400 rounds of 50 ms, should `done` never come.
    let script = format!(
        "printf '%s' \"$ZKLOCK_LOCK_NODE\" > '{}.tmp' && mv '{0}.tmp' '{0}'; i=0; \
         while [ ! -e '{}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        reported.display(),
        done.display()
    );
    let mut command = Command::new(ZKLOCK);
    command
        .args(["exec", "--acl", "creator", "/cli-acl/job", "--", "sh", "-c"])
        .arg(&script)
        .env("ZK_CONNECT", server.connect_string())
        .env("ZK_DIGEST", "alice:secret");
    let run = Run::spawn(&mut command);
    child::wait_until("the command reports its lock node", WAIT, || {
        reported.exists()
    });
    let node = std::fs::read_to_string(&reported).expect("read the lock node");

    let alice = Client::builder()
        .digest("alice", "secret")
        .connect(&server.connect_string())
        .expect("connect as alice");
    let alice_only = vec![Acl {
        perms: zklock::perms::ALL,
        id: zklock::Id::new("digest", "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="),
    }];
    for path in ["/cli-acl", "/cli-acl/job", node.as_str()] {
        let (acl, _) = alice.get_acl(path).expect("getACL as alice");
        assert_eq!(acl, alice_only, "{path}");
    }
    let anonymous = Client::connect(&server.connect_string()).expect("connect");
    assert_eq!(
        anonymous.get_children("/cli-acl/job"),
        Err(zklock::Error::NoAuth)
    );
    assert_eq!(anonymous.delete(&node, None), Err(zklock::Error::NoAuth));

    std::fs::write(&done, b"").expect("let the command end");
    let out = run.finish(WAIT);
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
}

/// `--acl creator` names the credentials' holders: without `ZK_DIGEST`
/// there are none, which is bad usage, as is an ACL other than the two.
#[test]
fn an_acl_without_credentials_or_unknown_is_bad_usage() {
    let server = TestServer::new().expect("start a ZooKeeper server");
    let out = zklock(
        &server,
        None,
        &["exec", "--acl", "creator", "/cli-acl/job", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert_eq!(
        one_line(&out),
        "zklock: --acl creator needs $ZK_DIGEST: the credentials whose holders alone \
         may use the lock (zklock --help shows the usage)"
    );
    let out = zklock(
        &server,
        Some("alice:secret"),
        &["exec", "--acl", "world", "/cli-acl/job", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert_eq!(
        one_line(&out),
        "zklock: --acl must be open or creator, not \"world\" (zklock --help shows the usage)"
    );
}
