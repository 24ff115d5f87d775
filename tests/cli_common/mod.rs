//! Helpers shared by the `zklock` command's tests (`tests/cli*.rs`): one
//! server per test binary, the command run with the signals a terminal
//! gives it, and readings of its output and of the lock queue.

#![allow(dead_code)] // each test binary uses some of them

#[path = "../child/mod.rs"]
pub mod child;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub use child::{wait_until, Output, Run, TempDir};
use zklock::recipes::lock_queue;
use zklock::testing::TestServer;
use zklock::Client;

pub const ZKLOCK: &str = env!("CARGO_BIN_EXE_zklock");

/// The longest anything that should happen is waited for.
pub const WAIT: Duration = Duration::from_secs(20);

/// Exit statuses of `zklock exec`.
pub const NOT_ACQUIRED: i32 = 75;
pub const LOST: i32 = 76;

/// One server for every test here. It is never dropped; its watchdog kills
/// it and removes its directory when this process exits.
pub fn server() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| TestServer::new().expect("start a ZooKeeper server"))
}

pub fn connect_string() -> String {
    server().connect_string()
}

/// A client of the test itself (a session of its own).
pub fn client() -> Client {
    Client::builder()
        .session_timeout(Duration::from_secs(10))
        .connect(&connect_string())
        .expect("connect")
}

/// `zklock ARGS...`, with no ZK_CONNECT inherited, and the signals it
/// handles at their default, as a terminal starts it: a test run in the
/// background (`&`, `nohup`) inherits them ignored, and zklock leaves an
/// ignored signal ignored.
pub fn zklock(args: &[&str]) -> Command {
    let mut command = Command::new("env");
    command
        .arg("--default-signal=INT,QUIT,HUP,TERM,TSTP,TTIN,TTOU")
        .arg(ZKLOCK)
        .args(args)
        .env_remove("ZK_CONNECT")
        // A group of its own, whose parent (the test) is in another group
        // of the session, as a shell's job is: not orphaned, however the
        // test itself was started (a `setsid` leaves the test's own group
        // orphaned, where zklock, as the kernel does, ignores a Ctrl-Z).
        .process_group(0);
    command
}

/// `zklock holders` on `path`, in JSON if asked, run to its end.
pub fn holders(connect: &str, path: &str, json: bool) -> Output {
    let mut args = vec!["holders", "--connect", connect];
    if json {
        args.push("--json");
    }
    args.push(path);
    Run::spawn(&mut zklock(&args)).finish(WAIT)
}

/// `zklock exec --connect <server> OPTIONS... PATH -- sh -c SCRIPT`.
pub fn exec(options: &[&str], path: &str, script: &str) -> Command {
    let args = exec_args(options, path, script);
    zklock(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The arguments of [`exec`]'s zklock.
pub fn exec_args(options: &[&str], path: &str, script: &str) -> Vec<String> {
    let connect = connect_string();
    let mut args = vec!["exec", "--connect", connect.as_str()];
    args.extend_from_slice(options);
    args.extend_from_slice(&[path, "--", "sh", "-c", script]);
    args.into_iter().map(String::from).collect()
}

/// The number of contenders queued at `path`.
pub fn queued(client: &Client, path: &str) -> usize {
    lock_queue(client, path).expect("lock_queue").len()
}

/// The children of `path` (none if it is gone).
pub fn children(client: &Client, path: &str) -> Vec<String> {
    match client.get_children(path) {
        Ok(children) => children,
        Err(zklock::Error::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

/// The last segment of a node path.
pub fn basename(node: &str) -> &str {
    node.rsplit('/').next().unwrap_or(node)
}

pub fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// Asserts that stderr is exactly one line and returns it.
pub fn one_line(out: &Output) -> &str {
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr is not one line:\n{}", out.stderr);
    lines[0]
}

/// Every value of `"key":` in a flat JSON text, strings unquoted (enough
/// for the `holders --json` output, whose strings here have no escapes).
pub fn json_values(json: &str, key: &str) -> Vec<String> {
    let needle = format!("\"{key}\":");
    json.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &json[at + needle.len()..];
            match rest.strip_prefix('"') {
                Some(s) => s.split('"').next().unwrap_or_default().to_owned(),
                None => rest.split([',', '}']).next().unwrap_or_default().to_owned(),
            }
        })
        .collect()
}

/// The keys of a flat JSON object, in order (enough for the bench line,
/// whose strings have no escaped quotes).
pub fn json_keys(json: &str) -> Vec<&str> {
    let parts: Vec<&str> = json.split('"').collect();
    parts
        .iter()
        .enumerate()
        .skip(1)
        .step_by(2)
        .filter(|(i, _)| {
            parts
                .get(i + 1)
                .is_some_and(|after| after.trim_start().starts_with(':'))
        })
        .map(|(_, key)| *key)
        .collect()
}

/// Kills a process the test started indirectly, should the test fail.
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if is_running(self.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

/// True if process `pid` exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    process_state(pid).is_some_and(|state| state != 'Z')
}

/// The contents of `file` once it exists; write it whole (`mv` a
/// finished file into place).
pub fn wait_for_file(file: &std::path::Path) -> String {
    wait_until(&format!("{} to appear", file.display()), WAIT, || {
        file.exists()
    });
    std::fs::read_to_string(file).expect("read a file that exists")
}

/// A command script that writes its pid and lock node to `dir/started`,
/// logs `TERM` to `dir/log` when SIGTERM ends it, and otherwise waits up
/// to 60 s for a background `sleep` (killed with it). `first` runs before
/// it starts (to start a background process, say). It forks nothing once
/// started: a group stopped while the shell waits for a child between
/// `vfork` and `exec` (dash uses `vfork`) leaves the shell in state D, not
/// T, until continued.
pub fn until_terminated(dir: &TempDir, first: &str) -> String {
    format!(
        "{first} trap 'kill $! 2>/dev/null; echo TERM >> \"{log}\"; exit 1' TERM; \
         sleep 60 & \
         echo \"$$ $ZKLOCK_LOCK_NODE\" > '{started}.new' && mv '{started}.new' '{started}'; \
         wait $!",
        log = dir.join("log").display(),
        started = dir.join("started").display(),
    )
}

/// Waits for an `until_terminated` command to start: its pid (killed when
/// the test ends) and lock node.
pub fn started(dir: &TempDir) -> (KillOnDrop, String) {
    let text = wait_for_file(&dir.join("started"));
    let (pid, node) = text.trim().split_once(' ').expect("a pid and a node");
    (KillOnDrop(pid.parse().expect("a pid")), node.to_owned())
}

/// What an `until_terminated` command logged.
pub fn logged(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.join("log")).unwrap_or_default()
}

/// The state letter of process `pid` (`R`, `S`, `T`, `Z`...), if it exists.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}
