//! `zklock exec` ends its session as it exits (`EndSession`), so that its
//! lock node goes at once rather than when the session times out: also
//! when the connection it is on has gone silent, as long as another host
//! of the ensemble is in reach.
//!
//! Built only with the `cli` feature, since it needs the binary.

#![cfg(feature = "cli")]

mod child;
mod common;

use std::time::Duration;

use child::{wait_until, Run, TempDir};
use zklock::proto::OpCode;
use zklock::testing::{FaultProxy, ProxyMode, TestServer};
use zklock::Client;

const ZKLOCK: &str = env!("CARGO_BIN_EXE_zklock");

/// The longest anything that should happen is waited for.
const WAIT: Duration = Duration::from_secs(20);

/// The CLI's session timeout, and its connect timeout, the close's
/// deadline: shorter than the read timeout (2/3 of the session timeout)
/// after which a silent connection is given up on.
const CLI_SESSION_TIMEOUT: Duration = Duration::from_secs(15);
const CLI_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The command ends while the connection `exec` holds its lock through has
/// gone silent (a partition, the TCP connection still up). `exec`'s close
/// moves on to the other host and is confirmed there: by the time `exec`
/// has exited, its lock node is gone.
#[test]
fn a_command_ending_on_a_silent_connection_leaves_no_node_at_exit() {
    const PATH: &str = "/cli/silent-exit";
    assert!(CLI_SESSION_TIMEOUT * 2 / 3 > CLI_CONNECT_TIMEOUT);
    let zk = TestServer::new().expect("start a ZooKeeper server");
    // Two routes to one server: what the close needs is another host in
    // reach, which another member would be too.
    let gates = [
        FaultProxy::start(zk.addr()).expect("start a proxy"),
        FaultProxy::start(zk.addr()).expect("start a proxy"),
    ];
    let connect = format!(
        "{},{}",
        gates[0].connect_string(),
        gates[1].connect_string()
    );
    let dir = TempDir::new("silent-exit");
    let (started, go) = (dir.join("started"), dir.join("go"));
    // The command's own wait for `go` is bounded (400 × 50 ms).
    let script = format!(
        "touch '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        started.display(),
        go.display()
    );
    let mut command = std::process::Command::new(ZKLOCK);
    command
        .args([
            "exec",
            "--connect",
            &connect,
            PATH,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env_remove("ZK_CONNECT");
    let holder = Run::spawn(&mut command);
    wait_until("the command to start", WAIT, || started.exists());

    let observer = Client::builder()
        .session_timeout(CLI_SESSION_TIMEOUT)
        .connect(&zk.connect_string())
        .expect("connect");
    let nodes = observer.get_children(PATH).expect("the lock's nodes");
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let silent = common::connected_proxy(&gates);
    gates[silent].set_mode(ProxyMode::Blackhole);
    std::fs::write(&go, b"").expect("tell the command to end");

    let out = holder.finish(WAIT);
    // Read at once: unconfirmed, the close would leave the node to the
    // session timeout.
    observer.sync(PATH).expect("sync");
    let left = match observer.get_children(PATH) {
        Err(zklock::Error::NoNode) => Vec::new(),
        children => children.expect("the lock's nodes"),
    };
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        left,
        Vec::<String>::new(),
        "exec's lock node outlived it; stderr:\n{}",
        out.stderr
    );
    let close = OpCode::CloseSession.code();
    assert_eq!(gates[1 - silent].requests_seen(close), 1);
}
