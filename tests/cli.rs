//! `zklock exec` (feature `cli`) against a real ZooKeeper server: it
//! serialises commands and keeps its exit-code promises (75 not acquired,
//! 76 lock lost, otherwise the command's status), terminates its command
//! before a cut-off session can expire, passes signals on, and cancels
//! cleanly. `holders` is in `cli_holders.rs`; errors, usage and `bench` in
//! `cli_usage.rs`.
//!
//! Built only with the `cli` feature (`cargo test --all-features`, as CI
//! runs), since it needs the binary. Every test uses its own lock path on one
//! shared server; every wait is bounded, and children are killed if a test
//! fails first.

#![cfg(feature = "cli")]

mod cli_common;

use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_common::child;
use cli_common::*;
use zklock::recipes::lock_queue;
use zklock::testing::{FaultProxy, ProxyMode};

/// SIGINT's number.
const SIGINT: i32 = 2;

#[test]
fn two_execs_serialise_their_commands() {
    let dir = TempDir::new("serialise");
    let log = dir.join("log");
    let log = log.display();
    // Each command logs its start and end with its fencing token, and
    // stays inside long enough for an overlap to show.
    let script = format!(
        "echo \"start $ZKLOCK_FENCING_TOKEN $ZKLOCK_LOCK_NODE\" >> '{log}'; sleep 0.2; \
         echo \"end $ZKLOCK_FENCING_TOKEN\" >> '{log}'"
    );
    let runs: Vec<Run> = (0..3)
        .map(|_| Run::spawn(&mut exec(&["--quiet"], "/cli/serialise", &script)))
        .collect();
    for run in runs {
        let out = run.finish(WAIT);
        assert_eq!(code(&out), Some(0), "{}", out.stderr);
    }
    let text = std::fs::read_to_string(dir.join("log")).expect("read the log");
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 6, "{text}");
    let mut last_token = 0;
    for pair in lines.chunks(2) {
        let (start, end) = (&pair[0], &pair[1]);
        assert_eq!(start[0], "start", "{text}");
        assert_eq!(end[0], "end", "commands interleaved:\n{text}");
        assert_eq!(start[1], end[1], "commands interleaved:\n{text}");
        let token: i64 = start[1].parse().expect("a numeric fencing token");
        assert!(token > last_token, "tokens not increasing:\n{text}");
        last_token = token;
        assert!(
            start[2].starts_with("/cli/serialise/_c_") && start[2].contains("-lock-"),
            "ZKLOCK_LOCK_NODE is {}",
            start[2]
        );
    }
    assert!(children(&client(), "/cli/serialise").is_empty());
}

/// With PATH unset, the command is looked for where execvp looks then
/// (/bin:/usr/bin), not in the current directory.
#[test]
fn with_path_unset_the_command_is_found_in_the_default_path() {
    let out = Run::spawn(exec(&[], "/cli/no-path", "exit 3").env_remove("PATH")).finish(WAIT);
    assert_eq!(code(&out), Some(3), "{}", out.stderr);
    assert_eq!(out.stderr, "");
}

/// The lock node, readable by anyone who can read the lock path, names
/// the host, zklock's pid and the command's program; the arguments, which
/// may carry secrets, only with --publish-args.
#[test]
fn the_lock_node_shows_the_arguments_only_if_asked() {
    const PATH: &str = "/cli/node-data";
    let observer = client();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
    for (options, shown) in [(&[][..], false), (&["--publish-args"][..], true)] {
        let dir = TempDir::new("node-data");
        let script = format!(
            "echo \"$ZKLOCK_LOCK_NODE\" > '{node}.new' && mv '{node}.new' '{node}'; \
             i=0; while [ ! -e '{release}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
            node = dir.join("node").display(),
            release = dir.join("release").display(),
        );
        let run = Run::spawn(&mut exec(options, PATH, &script));
        let node = wait_for_file(&dir.join("node"));
        let (data, _) = observer.get_data(node.trim()).expect("get_data");
        let command = if shown {
            format!("sh -c {script}")
        } else {
            "sh".to_owned()
        };
        assert_eq!(
            String::from_utf8_lossy(&data),
            format!("host={} pid={} cmd={command}", host.trim(), run.pid())
        );
        std::fs::write(dir.join("release"), "").expect("release the command");
        let out = run.finish(WAIT);
        assert_eq!(code(&out), Some(0), "{}", out.stderr);
    }
}

#[test]
fn exec_exits_with_the_status_of_its_command() {
    let out = Run::spawn(&mut exec(&[], "/cli/status", "exit 7")).finish(WAIT);
    assert_eq!(code(&out), Some(7), "{}", out.stderr);
    // Killed by a signal: 128 + the signal, as a shell reports it.
    let out = Run::spawn(&mut exec(&[], "/cli/status", "kill -9 $$")).finish(WAIT);
    assert_eq!(code(&out), Some(128 + 9), "{}", out.stderr);
    // A SIGINT to the command alone, no Ctrl-C: zklock exits 130, and does
    // not die of a SIGINT it never got (see the Ctrl-C tests).
    let out = Run::spawn(&mut exec(&[], "/cli/status", "kill -INT $$")).finish(WAIT);
    assert_eq!(code(&out), Some(128 + 2), "{}", out.stderr);
}

#[test]
fn no_wait_on_a_held_lock_exits_75_without_running_the_command() {
    let holder = client();
    let lock = holder.mutex("/cli/no-wait").expect("mutex");
    let guard = lock.lock().expect("lock");
    let dir = TempDir::new("no-wait");
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let out = Run::spawn(&mut exec(&["--no-wait"], "/cli/no-wait", &script)).finish(WAIT);
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    assert!(!mark.exists(), "the command ran");
    assert_eq!(
        one_line(&out),
        "zklock: /cli/no-wait is held by another process; not running the command"
    );
    // Its node is gone: only the holder's is left.
    assert_eq!(
        children(&holder, "/cli/no-wait"),
        vec![basename(guard.node()).to_owned()]
    );
}

/// A read refused because a writer waits ahead of it, while only readers
/// hold the lock, says so: not "held by another process", which would
/// suggest a holder it conflicts with.
#[test]
fn a_read_refused_for_a_waiting_writer_says_so() {
    const PATH: &str = "/cli/read-behind-writer";
    let holder = client();
    let lock = holder.rw_lock(PATH).expect("rw_lock");
    let read = lock.read().expect("read");
    let writer = client();
    let writer_lock = writer.rw_lock(PATH).expect("rw_lock");
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| writer_lock.try_write_for(WAIT).map(|g| g.is_some()));
        wait_until("the writer to queue", WAIT, || queued(&holder, PATH) == 2);
        let out = Run::spawn(&mut exec(&["--read", "--no-wait"], PATH, "true")).finish(WAIT);
        assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
        assert_eq!(
            one_line(&out),
            "zklock: /cli/read-behind-writer is held or waited for by a writer; \
             not running the command"
        );
        drop(read);
        assert_eq!(waiting.join().expect("the writer"), Ok(true));
    });
}

#[test]
fn wait_on_a_held_lock_exits_75_after_that_long() {
    let holder = client();
    let lock = holder.mutex("/cli/wait").expect("mutex");
    let guard = lock.lock().expect("lock");
    let dir = TempDir::new("wait");
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let started = Instant::now();
    let out = Run::spawn(&mut exec(&["--wait", "0.5"], "/cli/wait", &script)).finish(WAIT);
    let took = out.exited_at - started;
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    assert!(!mark.exists(), "the command ran");
    // The wait, plus starting the process and connecting.
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(10),
        "exited after {took:?}"
    );
    assert_eq!(
        children(&holder, "/cli/wait"),
        vec![basename(guard.node()).to_owned()]
    );
}

#[test]
fn read_execs_share_the_lock_and_keep_a_write_exec_out() {
    const PATH: &str = "/cli/rw";
    let dir = TempDir::new("rw");
    let release = dir.join("release");
    // Each reader marks that it is in, then waits (at most 10 s) to see the
    // other's mark: both succeed only if they held the read lock together.
    // Then they hold on until the test releases them (at most 20 s).
    let reader = |me: &str, other: &str| {
        let (me, other) = (dir.join(me), dir.join(other));
        let script = format!(
            "touch '{me}'; i=0; while [ ! -e '{other}' ] && [ $i -lt 200 ]; do sleep 0.05; \
             i=$((i+1)); done; [ -e '{other}' ] || exit 1; \
             i=0; while [ ! -e '{release}' ] && [ $i -lt 400 ]; do sleep 0.05; \
             i=$((i+1)); done",
            me = me.display(),
            other = other.display(),
            release = release.display(),
        );
        Run::spawn(&mut exec(&["--read", "--quiet"], PATH, &script))
    };
    let (a, b) = (reader("a", "b"), reader("b", "a"));
    let observer = client();
    wait_until("both readers to hold", WAIT, || {
        dir.join("a").exists() && dir.join("b").exists()
    });
    // A writer cannot get in while they hold.
    let writer = Run::spawn(&mut exec(&["--write", "--no-wait"], PATH, "true")).finish(WAIT);
    assert_eq!(code(&writer), Some(NOT_ACQUIRED), "{}", writer.stderr);
    std::fs::write(&release, "").expect("release the readers");
    for reader in [a, b] {
        let out = reader.finish(WAIT);
        assert_eq!(
            code(&out),
            Some(0),
            "the readers did not overlap: {}",
            out.stderr
        );
    }
    let writer = Run::spawn(&mut exec(&["--write", "--no-wait"], PATH, "true")).finish(WAIT);
    assert_eq!(code(&writer), Some(0), "{}", writer.stderr);
    assert!(children(&observer, PATH).is_empty());
}

#[test]
fn a_holder_cut_off_is_terminated_before_another_contender_acquires() {
    let stderr = cut_off_holder_is_terminated_first("/cli/cut", Stdio::piped(), &[]);
    assert!(
        stderr.contains("lock no longer held; terminating the command"),
        "{stderr}"
    );
}

/// A stderr nobody reads (a full pipe, a terminal stopped with Ctrl-S)
/// holds up none of it: zklock's lines wait for stderr on a thread of
/// their own. (Written on the thread that signals, the first line blocked
/// zklock before SIGTERM: the command ran on past the session.)
#[test]
fn a_full_stderr_does_not_hold_up_the_termination() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    let mut filler = writer.try_clone().expect("a second writer");
    // Fills the pipe (64 KiB unless the system gives less, when this
    // thread stays blocked on the rest, keeping it full all the same),
    // until the reader goes at the end.
    let fill = std::thread::spawn(move || {
        use std::io::Write as _;
        let _ = filler.write_all(&[b'x'; 64 * 1024]);
    });
    // Quiet: the first line due is the one saying why the command is
    // terminated.
    cut_off_holder_is_terminated_first("/cli/full-stderr", Stdio::from(writer), &["--quiet"]);
    drop(reader);
    let _ = fill.join();
}

/// Runs a command under `zklock exec` on a connection through a proxy,
/// queues a contender on a direct one, blackholes the proxy, and checks
/// that zklock terminated the command (its TERM trap ran) and exited
/// before the contender acquired. Returns zklock's stderr, if piped.
fn cut_off_holder_is_terminated_first(path: &str, stderr: Stdio, args: &[&str]) -> String {
    let proxy = FaultProxy::start(server().addr()).expect("start a proxy");
    let dir = TempDir::new("cut");
    let (pidfile, log) = (dir.join("pid"), dir.join("log"));
    // Its own stderr elsewhere: a shell reports a job a signal ended
    // there, and would block on a full one before its trap ran.
    let script = format!(
        "exec 2>/dev/null; echo $$ > '{}'; trap 'echo TERM >> \"{}\"; exit 1' TERM; \
         i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
        pidfile.display(),
        log.display()
    );
    let proxy_connect = proxy.connect_string();
    // T = 6 s: zklock gives up on the silent connection at 2T/3 and its
    // SIGTERM has T/6 before SIGKILL, while the server expires the session
    // (and the contender acquires) only after T: a loaded machine's stalls
    // of a second or so change neither the signal nor the order.
    let mut exec_args = vec![
        "exec",
        "--connect",
        &proxy_connect,
        "--session-timeout",
        "6000",
    ];
    exec_args.extend_from_slice(args);
    exec_args.extend_from_slice(&[path, "--", "sh", "-c", &script]);
    let mut holder = Run::spawn_with_stderr(&mut zklock(&exec_args), stderr);
    let zklock_pid = holder.pid();
    let read_pid = || {
        std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
    };
    wait_until("the command to start", WAIT, || read_pid().is_some());
    let command_pid = read_pid().unwrap_or_default();

    // A contender on a direct connection queues behind it.
    let observer = client();
    let (acquired_tx, acquired) = crossbeam_channel::bounded(1);
    let contended = path.to_owned();
    let contender = std::thread::spawn(move || {
        let client = client();
        let lock = client.mutex(&contended).expect("mutex");
        let guard = lock.try_lock_for(WAIT).expect("try_lock_for");
        // Whether zklock and its command had ended (gone, or a zombie not
        // reaped yet) by the time the lock was granted and the call
        // returned: no clocks of two threads to compare.
        let ended = |pid| matches!(process_state(pid), None | Some('Z'));
        let both_ended = ended(zklock_pid) && ended(command_pid);
        let _ = acquired_tx.send((Instant::now(), guard.is_some(), both_ended));
    });
    wait_until("the contender to queue", WAIT, || {
        queued(&observer, path) == 2
    });

    proxy.set_mode(ProxyMode::Blackhole);
    let cut_at = Instant::now();
    let deadline = cut_at + WAIT;
    let mut holder_exit = None;
    let mut contender_got = None;
    while holder_exit.is_none() || contender_got.is_none() {
        assert!(
            Instant::now() < deadline,
            "nothing happened within {WAIT:?}: zklock exited {holder_exit:?}, \
             the contender acquired {contender_got:?}"
        );
        if holder_exit.is_none() {
            holder_exit = holder.poll();
        }
        if contender_got.is_none() {
            contender_got = acquired.try_recv().ok();
        }
        std::thread::sleep(child::POLL);
    }
    let _ = contender.join();
    let (status, exited_at) = holder_exit.unwrap_or_else(|| unreachable!());
    let (acquired_at, got_it, ended_first) = contender_got.unwrap_or_else(|| unreachable!());
    let out = holder.finish(WAIT);
    eprintln!(
        "after the cut: zklock exited at {:?}, the contender acquired at {:?}",
        exited_at - cut_at,
        acquired_at - cut_at
    );
    assert_eq!(status.code(), Some(LOST), "{}", out.stderr);
    assert!(got_it, "the contender did not get the lock");
    assert!(
        ended_first,
        "zklock exited {:?} after the cut, but the contender acquired {:?} after it, \
         zklock or its command still running",
        exited_at - cut_at,
        acquired_at - cut_at
    );
    // The command got SIGTERM (its trap ran) and is gone.
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(logged.trim(), "TERM");
    let proc_dir = format!("/proc/{command_pid}");
    wait_until("the command's process to be gone", WAIT, || {
        !std::path::Path::new(&proc_dir).exists()
    });
    out.stderr
}

/// A zklock frozen with its command past the session (a `docker pause`, a
/// frozen cgroup: no SIGCONT tells it) finds on thawing that the time to
/// end the command gently is over, counted from when its client last heard
/// from a server, and kills it at once: no SIGTERM, which a command can
/// trap and run on after. (Counted from the notice, SIGTERM went, and the
/// command ran on beside the next holder.) Skipped where no cgroup
/// freezer can be made.
#[test]
fn a_holder_frozen_past_its_session_is_killed_at_once_on_thawing() {
    const PATH: &str = "/cli/frozen";
    let Some(freezer) = Freezer::new("zklock-cli-frozen") else {
        skipped(
            "a_holder_frozen_past_its_session_is_killed_at_once_on_thawing",
            "no cgroup freezer can be made here",
        );
        return;
    };
    let dir = TempDir::new("frozen");
    let (pidfile, log) = (dir.join("pid"), dir.join("log"));
    let script = format!(
        "exec 2>/dev/null; echo $$ > '{}'; trap 'echo TERM >> \"{}\"' TERM; \
         i=0; while [ $i -lt 2000 ]; do sleep 0.05; i=$((i+1)); done",
        pidfile.display(),
        log.display()
    );
    let connect = connect_string();
    // zklock joins the cgroup before it starts, and its command with it.
    let joined = format!("echo $$ > '{}' && exec \"$@\"", freezer.procs().display());
    let mut in_cgroup = Command::new("sh");
    in_cgroup
        .args(["-c", &joined, "sh", ZKLOCK, "exec", "--connect", &connect])
        // 4 s: a stall of a second before the freeze must not look like
        // a lost connection, which would have the command terminated.
        .args(["--session-timeout", "4000", PATH, "--", "sh", "-c", &script])
        .env_remove("ZK_CONNECT");
    let holder = Run::spawn(&mut in_cgroup);
    // Dropped before `holder`, whose drop could not end a frozen zklock.
    let _thaw = Thaw(&freezer);
    wait_until("the command to start", WAIT, || pidfile.exists());

    let observer = client();
    let (acquired_tx, acquired) = crossbeam_channel::bounded(1);
    let contender = std::thread::spawn(move || {
        let client = client();
        let lock = client.mutex(PATH).expect("mutex");
        let guard = lock.try_lock_for(WAIT).expect("try_lock_for");
        let _ = acquired_tx.send(guard.is_some());
    });
    wait_until("the contender to queue", WAIT, || {
        queued(&observer, PATH) == 2
    });

    freezer.freeze(true);
    // Frozen, zklock's session expires and the contender acquires.
    assert_eq!(
        acquired.recv_timeout(WAIT),
        Ok(true),
        "the contender acquires"
    );
    freezer.freeze(false);
    let out = holder.finish(WAIT);
    let _ = contender.join();
    assert_eq!(out.status.code(), Some(LOST), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("no time left to end the command gently"),
        "{}",
        out.stderr
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(logged, "", "SIGTERM reached the command");
}

/// A cgroup whose processes can be frozen, removed (thawed) on drop: the
/// v1 freezer, or a v2 cgroup's `cgroup.freeze`.
struct Freezer {
    dir: std::path::PathBuf,
    v1: bool,
}

impl Freezer {
    /// `None` where no such cgroup can be made (no freezer, no root).
    fn new(name: &str) -> Option<Freezer> {
        let v1 = std::path::Path::new("/sys/fs/cgroup/freezer");
        let (base, is_v1) = if v1.is_dir() {
            (v1.to_path_buf(), true)
        } else {
            (std::path::PathBuf::from("/sys/fs/cgroup"), false)
        };
        let dir = base.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let freezer = Freezer { dir, v1: is_v1 };
        let control = if is_v1 {
            "freezer.state"
        } else {
            "cgroup.freeze"
        };
        freezer.dir.join(control).exists().then_some(freezer)
    }

    fn procs(&self) -> std::path::PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Thaws without waiting for it.
    fn thaw_now(&self) {
        let (control, thawed) = if self.v1 {
            ("freezer.state", "THAWED")
        } else {
            ("cgroup.freeze", "0")
        };
        let _ = std::fs::write(self.dir.join(control), thawed);
    }

    /// Freezes or thaws, and waits until it is done.
    fn freeze(&self, frozen: bool) {
        let (control, value, done) = match (self.v1, frozen) {
            (true, true) => ("freezer.state", "FROZEN", "FROZEN"),
            (true, false) => ("freezer.state", "THAWED", "THAWED"),
            (false, true) => ("cgroup.freeze", "1", "frozen 1"),
            (false, false) => ("cgroup.freeze", "0", "frozen 0"),
        };
        std::fs::write(self.dir.join(control), value).expect("write the freezer's state");
        let (file, want) = if self.v1 {
            (self.dir.join("freezer.state"), done.to_owned())
        } else {
            (self.dir.join("cgroup.events"), done.to_owned())
        };
        wait_until("the freezer to settle", WAIT, || {
            std::fs::read_to_string(&file).is_ok_and(|text| text.lines().any(|l| l.trim() == want))
        });
    }
}

/// Thaws its freezer when dropped, should a test fail while it is frozen.
struct Thaw<'a>(&'a Freezer);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.0.thaw_now();
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        self.thaw_now();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Under `nohup`, SIGHUP stays ignored, by zklock and by the command,
/// which inherits that as it would have without zklock. (Handling it,
/// zklock passed a logout's SIGHUP on to the command, which died of it.)
#[test]
fn a_signal_ignored_at_start_stays_ignored_by_zklock_and_the_command() {
    const PATH: &str = "/cli/nohup";
    let dir = TempDir::new("nohup");
    let (pidfile, go) = (dir.join("pid"), dir.join("go"));
    let script = format!(
        "echo $$ > '{0}.new' && mv '{0}.new' '{0}'; \
         i=0; while [ ! -e '{1}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; [ -e '{1}' ]",
        pidfile.display(),
        go.display()
    );
    let mut nohup = Command::new("nohup");
    nohup
        .arg(ZKLOCK)
        .args(exec_args(&[], PATH, &script))
        .env_remove("ZK_CONNECT");
    let zklock = Run::spawn(&mut nohup);
    let command_pid: u32 = wait_for_file(&pidfile).trim().parse().expect("a pid");
    let ignores_hup = |pid: u32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let mask = status
            .lines()
            .find_map(|line| line.strip_prefix("SigIgn:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        // Bit N-1 for signal N; SIGHUP is 1.
        mask & 1 != 0
    };
    assert!(
        ignores_hup(zklock.pid()),
        "zklock still ignores SIGHUP, as nohup left it"
    );
    assert!(
        ignores_hup(command_pid),
        "the command inherits the ignored SIGHUP"
    );
    // Discarded as it is sent: nothing is passed on.
    zklock.signal("HUP");
    std::fs::write(&go, b"").expect("write the go file");
    let out = zklock.finish(WAIT);
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
}

/// Started with SIGCHLD ignored (a parent's SIG_IGN, which exec keeps),
/// zklock still gets its command's status and checks setpriv, and the
/// command starts with SIGCHLD's default action, as under GNU `timeout`.
/// Before, the kernel reaped zklock's children: it exited 1 whatever the
/// command's status, and warned that setpriv could not run.
#[test]
fn an_ignored_sigchld_at_start_loses_neither_the_status_nor_setpriv() {
    // perl is an essential Debian package; its IGNORE is SIG_IGN.
    let mut perl = Command::new("perl");
    perl.args([
        "-e",
        "$SIG{CHLD} = 'IGNORE'; exec @ARGV or die \"exec: $!\"",
    ])
    .arg(ZKLOCK)
    .args(exec_args(
        &[],
        "/cli/sigchld",
        "grep '^SigIgn:' /proc/self/status; exit 3",
    ))
    .env_remove("ZK_CONNECT");
    let out = Run::spawn(&mut perl).finish(WAIT);
    assert_eq!(code(&out), Some(3), "{}", out.stderr);
    assert!(!out.stderr.contains("setpriv"), "{}", out.stderr);
    let mask = out
        .stdout
        .trim()
        .strip_prefix("SigIgn:")
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("the command's SigIgn line: {:?}", out.stdout));
    // Bit N-1 for signal N; SIGCHLD is 17.
    assert_eq!(mask & (1 << 16), 0, "the command ignores SIGCHLD: {mask:x}");
}

/// SIGTERM, SIGINT, SIGHUP or SIGQUIT while waiting: no node is left and
/// the command never runs. zklock exits 75, but for SIGINT (Ctrl-C), of
/// which it then dies itself, as GNU `timeout` does, so that a shell
/// running it stops too.
#[test]
fn an_ending_signal_while_waiting_ends_zklock_and_leaves_no_node() {
    const PATH: &str = "/cli/sigterm";
    let holder = client();
    let lock = holder.mutex(PATH).expect("mutex");
    let guard = lock.lock().expect("lock");
    let dir = TempDir::new("sigterm");
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    for signal in ["TERM", "INT", "HUP", "QUIT"] {
        let waiter = Run::spawn(&mut exec(&[], PATH, &script));
        wait_until("zklock exec to queue", WAIT, || queued(&holder, PATH) == 2);
        waiter.signal(signal);
        let out = waiter.finish(WAIT);
        let (status, died_of) = (code(&out), out.status.signal());
        if signal == "INT" {
            assert_eq!((status, died_of), (None, Some(SIGINT)), "{}", out.stderr);
        } else {
            assert_eq!(status, Some(NOT_ACQUIRED), "SIG{signal}: {}", out.stderr);
        }
        assert!(
            out.stderr.lines().any(|l| l
                == "zklock: interrupted while waiting for /cli/sigterm; not running the command"),
            "SIG{signal}: {}",
            out.stderr
        );
        assert!(!mark.exists(), "SIG{signal}: the command ran");
        assert_eq!(
            children(&holder, PATH),
            vec![basename(guard.node()).to_owned()],
            "SIG{signal}"
        );
    }
}

/// SIGHUP (a closed terminal) goes to the running command's process group,
/// as SIGTERM does: zklock exits with the command's status and releases
/// the lock at once, instead of dying and leaving its node until the
/// session expires.
#[test]
fn sighup_while_running_goes_to_the_commands_group() {
    const PATH: &str = "/cli/sighup";
    let dir = TempDir::new("sighup");
    let worker_file = dir.join("worker");
    let script = format!(
        "sleep 300 >/dev/null 2>&1 & echo $! > '{0}.new' && mv '{0}.new' '{0}'; wait",
        worker_file.display()
    );
    let run = Run::spawn(&mut exec(&[], PATH, &script));
    let worker: u32 = wait_for_file(&worker_file).trim().parse().expect("a pid");
    let _worker = KillOnDrop(worker);
    run.signal("HUP");
    let out = run.finish(WAIT);
    // The shell was killed by SIGHUP (1).
    assert_eq!(code(&out), Some(128 + 1), "{}", out.stderr);
    wait_until("the worker to be gone", WAIT, || !is_running(worker));
    assert!(children(&client(), PATH).is_empty());
}

/// The opcodes of the reads a waiting exec's progress lines may send:
/// getData, getChildren.
const GET_DATA: i32 = 4;
const GET_CHILDREN: i32 = 8;

/// A waiting exec shows its place and the holder, and finds them out
/// cheaply, since every waiter does: a listing each second, and the
/// holder's data only when the holder changes, not every node's every time.
#[test]
fn progress_lines_cost_a_listing_a_second() {
    const PATH: &str = "/cli/progress";
    let holder = client();
    let lock = holder.mutex(PATH).expect("mutex");
    let guard = lock.lock().expect("lock");
    // Ten more contenders ahead of the exec.
    for i in 0..10 {
        holder
            .create(
                &format!("{PATH}/_c_other{i}-lock-"),
                b"other",
                &zklock::Acl::open_unsafe(),
                zklock::CreateMode::EphemeralSequential,
            )
            .expect("create a contender");
    }
    let proxy = FaultProxy::start(server().addr()).expect("start a proxy");
    let proxy_connect = proxy.connect_string();
    let waiter = Run::spawn(&mut zklock(&[
        "exec",
        "--connect",
        &proxy_connect,
        PATH,
        "--",
        "true",
    ]));
    wait_until("zklock exec to queue", WAIT, || queued(&holder, PATH) == 12);
    let listed = proxy.requests_seen(GET_CHILDREN);
    // Two progress lines at least, so the first one's read is done.
    wait_until("three listings", WAIT, || {
        proxy.requests_seen(GET_CHILDREN) >= listed + 3
    });
    // Counted from zklock's start, so that no snapshot races a read: the
    // predecessor's watch, and the holder's data once.
    assert_eq!(proxy.requests_seen(GET_DATA), 2);
    waiter.signal("TERM");
    let out = waiter.finish(WAIT);
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    let first = lock_queue(&holder, PATH).expect("lock_queue").remove(0);
    let line = format!(
        "zklock: waiting for {PATH}: 11 ahead; held by {} (token {})",
        String::from_utf8_lossy(&first.data),
        guard.fencing_token()
    );
    assert_eq!(
        out.stderr.lines().filter(|l| *l == line).count(),
        1,
        "{}",
        out.stderr
    );
}

/// A signal while waiting, with the server gone silent (the connection up,
/// nothing answered) while a progress line's request is out: zklock exits
/// 75 without waiting for that request, which would hold it until the
/// client gave up on the connection (2/3 of the session timeout, 20 s
/// here: about 13 s). What is left is the close, which tries for its 5 s
/// to have the server delete the queued node at once.
#[test]
fn a_signal_while_waiting_on_a_silent_server_does_not_wait_for_a_progress_request() {
    const PATH: &str = "/cli/silent-wait";
    let holder = client();
    let lock = holder.mutex(PATH).expect("mutex");
    let _guard = lock.lock().expect("lock");
    let proxy = FaultProxy::start(server().addr()).expect("start a proxy");
    let proxy_connect = proxy.connect_string();
    let waiter = Run::spawn(&mut zklock(&[
        "exec",
        "--connect",
        &proxy_connect,
        "--session-timeout",
        "20000",
        PATH,
        "--",
        "true",
    ]));
    wait_until("zklock exec to queue", WAIT, || queued(&holder, PATH) == 2);
    // Its next listing goes through, and nothing comes back from then on.
    proxy.silence_from_request(|op| op == GET_CHILDREN);
    wait_until("a progress listing to go unanswered", WAIT, || {
        !proxy.is_cut_armed()
    });
    let signalled = std::time::Instant::now();
    waiter.signal("TERM");
    let out = waiter.finish(WAIT * 2);
    let took = out.exited_at.duration_since(signalled);
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    assert_eq!(
        out.stderr.lines().last(),
        Some(
            format!("zklock: interrupted while waiting for {PATH}; not running the command")
                .as_str()
        ),
        "{}",
        out.stderr
    );
    assert!(
        took < Duration::from_secs(9),
        "exited {took:?} after the signal"
    );
}

/// A `zklock exec` killed with SIGKILL (no chance to terminate anything)
/// takes its command with it. Otherwise the command would run on without
/// the lock: once the session expired, another exec's command would run
/// beside it.
#[test]
fn a_killed_exec_takes_its_command_with_it() {
    const PATH: &str = "/cli/sigkill";
    let dir = TempDir::new("sigkill");
    let pid_file = dir.join("pid");
    // `exec` keeps the shell's pid for the sleep; the pid file appears whole.
    let script = format!(
        "echo $$ > '{0}.new' && mv '{0}.new' '{0}' && exec sleep 60",
        pid_file.display()
    );
    let mut run = Run::spawn(&mut exec(&[], PATH, &script));
    let pid: u32 = wait_for_file(&pid_file).trim().parse().expect("a pid");
    let _cleanup = KillOnDrop(pid);
    assert!(is_running(pid), "the command is not running");
    run.signal("KILL");
    wait_until("zklock to die", WAIT, || run.poll().is_some());
    wait_until("the command to die with it", WAIT, || !is_running(pid));
}

/// A panic on zklock's main thread while its command runs (a bug) kills
/// zklock at once, as a SIGKILL would: the command goes with it, and the
/// lock is not released while the command may still run, its node staying
/// until the session expires. Unwinding would have released it first. A
/// debug build's fault point makes the panic (the variable set, the signal
/// it names is not passed on but panicked at).
#[test]
fn a_panic_while_the_command_runs_dies_at_once_without_releasing() {
    const PATH: &str = "/cli/panic";
    const SIGABRT: i32 = 6;
    if !cfg!(debug_assertions) {
        skipped(
            "a_panic_while_the_command_runs_dies_at_once_without_releasing",
            "the fault point is in debug builds only",
        );
        return;
    }
    let dir = TempDir::new("panic");
    let pid_file = dir.join("pid");
    let script = format!(
        "echo $$ > '{0}.new' && mv '{0}.new' '{0}' && exec sleep 60",
        pid_file.display()
    );
    let mut command = exec(&["--session-timeout", "4000"], PATH, &script);
    command.env("ZKLOCK_DEBUG_PANIC_ON_SIGNAL", "SIGHUP");
    let run = Run::spawn(&mut command);
    let pid: u32 = wait_for_file(&pid_file).trim().parse().expect("a pid");
    let _cleanup = KillOnDrop(pid);
    let client = client();
    let held = children(&client, PATH);
    assert_eq!(held.len(), 1, "{held:?}");
    run.signal("HUP");
    let out = run.finish(WAIT);
    assert_eq!(out.status.signal(), Some(SIGABRT), "{}", out.stderr);
    let line = one_line(&out);
    let said = line
        .strip_prefix("zklock: bug: panicked at src/bin/zklock/supervise.rs:")
        .and_then(|rest| rest.split_once(": "))
        .map(|(_, said)| said);
    assert_eq!(
        said,
        Some(
            "ZKLOCK_DEBUG_PANIC_ON_SIGNAL asked for a panic on SIGHUP; \
             dying at once, the lock not released"
        ),
        "{line}"
    );
    assert_eq!(children(&client, PATH), held, "released");
    wait_until("the command to die with zklock", WAIT, || !is_running(pid));
    wait_until("the node to go with the session", WAIT, || {
        children(&client, PATH).is_empty()
    });
}

/// The command's descendants go too: a watchdog outside its process group
/// kills what is left of the group when zklock dies without a word. (The
/// parent-death signal reaches the command alone: a descendant ran on
/// without the lock.)
#[test]
fn a_killed_exec_takes_its_commands_descendants_with_it() {
    const PATH: &str = "/cli/sigkill-descendants";
    let dir = TempDir::new("sigkill-descendants");
    let (pid_file, child_file) = (dir.join("pid"), dir.join("child"));
    let script = format!(
        "sleep 60 & echo $! > '{1}.new' && mv '{1}.new' '{1}' && \
         echo $$ > '{0}.new' && mv '{0}.new' '{0}' && wait",
        pid_file.display(),
        child_file.display()
    );
    let mut run = Run::spawn(&mut exec(&[], PATH, &script));
    let pid: u32 = wait_for_file(&pid_file).trim().parse().expect("a pid");
    let descendant: u32 = wait_for_file(&child_file).trim().parse().expect("a pid");
    let _cleanup = (KillOnDrop(pid), KillOnDrop(descendant));
    assert!(is_running(descendant), "the descendant is not running");
    wait_until("a watchdog to watch the group", WAIT, || {
        watchdog_runs_for(pid)
    });
    run.signal("KILL");
    wait_until("zklock to die", WAIT, || run.poll().is_some());
    wait_until("the command to die with it", WAIT, || !is_running(pid));
    wait_until("its descendant to die with it", WAIT, || {
        !is_running(descendant)
    });
}

/// A command that exits on its own leaves its descendants alone, as it
/// would have without zklock: the watchdog is told zklock is done.
#[test]
fn a_command_exiting_on_its_own_leaves_its_descendants_alone() {
    const PATH: &str = "/cli/descendants-alone";
    let dir = TempDir::new("descendants-alone");
    let (pid_file, child_file) = (dir.join("pid"), dir.join("child"));
    let script = format!(
        "sleep 60 > /dev/null 2>&1 & echo $! > '{1}.new' && mv '{1}.new' '{1}' && \
         echo $$ > '{0}.new' && mv '{0}.new' '{0}'",
        pid_file.display(),
        child_file.display()
    );
    let out = Run::spawn(&mut exec(&[], PATH, &script)).finish(WAIT);
    let descendant: u32 = wait_for_file(&child_file).trim().parse().expect("a pid");
    let _cleanup = KillOnDrop(descendant);
    let group: u32 = wait_for_file(&pid_file).trim().parse().expect("a pid");
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    // Once the watchdog has ended, it has not killed, and will not.
    wait_until("the watchdog to end", WAIT, || !watchdog_runs_for(group));
    assert!(is_running(descendant), "the descendant was killed");
}

/// Whether the watchdog of `exec`'s process group `group` runs.
fn watchdog_runs_for(group: u32) -> bool {
    let wanted = format!("zklock-exec-watchdog\0{group}\0");
    std::fs::read_dir("/proc").is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&wanted))
        })
    })
}

/// A PATH with a fake `program` running `script` ahead of the real ones.
fn path_with_fake(dir: &TempDir, program: &str, script: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("create a bin dir");
    let fake = bin.join(program);
    std::fs::write(&fake, format!("#!/bin/sh\n{script}\n")).expect("write a fake program");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make it executable");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A setpriv without --pdeathsig (util-linux before 2.33) is found out:
/// the command runs, started directly, after one warning. Trusted, it
/// would run nothing and fail every time.
#[test]
fn a_setpriv_without_pdeathsig_is_warned_about_and_not_used() {
    let dir = TempDir::new("old-setpriv");
    let search = path_with_fake(
        &dir,
        "setpriv",
        "echo \"setpriv: unrecognized option '$1'\" >&2; exit 1",
    );
    runs_without_setpriv(
        &dir,
        search,
        "/cli/old-setpriv",
        "cannot set a parent-death signal (util-linux 2.33 or later can)",
    );
}

/// Runs `exec` with the fake setpriv that `search` finds in `dir`, and
/// asserts that the command ran, started directly, after one warning that
/// setpriv `why`.
fn runs_without_setpriv(dir: &TempDir, search: String, path: &str, why: &str) {
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let out = Run::spawn(exec(&["--quiet"], path, &script).env("PATH", search)).finish(WAIT);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    assert!(mark.exists(), "the command did not run");
    assert_eq!(
        one_line(&out),
        format!(
            "zklock: warning: {} {why}; if zklock is killed with SIGKILL, only its watchdog \
             stops the command",
            dir.join("bin").join("setpriv").display()
        )
    );
}

/// A signal that comes while the command is being started, before setpriv
/// has exec'd it, ends setpriv: the command never ran, so `exec` exits 75
/// (not 128+N, as for a command the signal killed) and leaves no node. A
/// setpriv that waits before exec'ing holds that moment open.
#[test]
fn a_signal_while_the_command_starts_exits_75() {
    const PATH: &str = "/cli/sigterm-starting";
    let dir = TempDir::new("starting");
    let starting = dir.join("starting");
    let search = path_with_fake(
        &dir,
        "setpriv",
        &format!(
            "case \"$4\" in */true) exec \"$4\";; esac\n\
             touch '{}'\n\
             i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
             shift 3; exec \"$@\"",
            starting.display()
        ),
    );
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let run = Run::spawn(exec(&[], PATH, &script).env("PATH", search));
    wait_for_file(&starting);
    run.signal("TERM");
    interrupted_before_start(run, &mark, PATH);
}

/// Asserts that `run` exits 75 saying it was interrupted before its
/// command could start, that the command (which makes `mark`) never ran,
/// and that no node is left at `path`.
fn interrupted_before_start(run: Run, mark: &std::path::Path, path: &str) {
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    interrupted_before_start_without_running(&out, mark, path);
}

/// The rest of [`interrupted_before_start`], for a run that ends otherwise
/// (killed by SIGINT).
fn interrupted_before_start_without_running(out: &Output, mark: &std::path::Path, path: &str) {
    assert_eq!(
        one_line(out),
        "zklock: interrupted before the command could start; not running the command"
    );
    assert!(!mark.exists(), "the command ran");
    assert!(children(&client(), path).is_empty());
}

/// A fake `setpriv` in `dir`'s PATH (returned) whose check of itself
/// (`setpriv --pdeathsig KILL -- true`) says it started, then waits for
/// the test to let it end, at most 20 s; it runs commands as setpriv does.
fn setpriv_holding_its_check(dir: &TempDir) -> (String, HeldCheck) {
    let check = HeldCheck {
        started: dir.join("check-started"),
        end: dir.join("check-end"),
    };
    let search = path_with_fake(
        dir,
        "setpriv",
        &format!(
            "case \"$4\" in */true)\n\
               touch '{}'\n\
               i=0; while [ ! -e '{}' ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done\n\
               exec \"$4\";;\n\
             esac\n\
             shift 3; exec \"$@\"",
            check.started.display(),
            check.end.display()
        ),
    );
    (search, check)
}

/// The check a fake setpriv holds open (see [`setpriv_holding_its_check`]).
struct HeldCheck {
    started: std::path::PathBuf,
    end: std::path::PathBuf,
}

impl HeldCheck {
    fn wait_started(&self) {
        wait_for_file(&self.started);
    }

    /// Lets the check end.
    fn end(&self) {
        std::fs::write(&self.end, b"").expect("end the check");
    }
}

/// A Ctrl-C (SIGINT to zklock's process group, as a terminal sends it)
/// while zklock checks that setpriv can set a parent-death signal, once
/// the lock is held: the check, in a group of its own, does not die of it
/// (and pass for an old setpriv); zklock ends the check itself, at once,
/// and dies of the SIGINT itself (see
/// `an_ending_signal_while_waiting_ends_zklock_and_leaves_no_node`) with the
/// command never started. Before, the check died
/// with zklock's group, a false warning followed, and the command started
/// without setpriv, the signal then passed on to it; later, zklock waited
/// for the check to end before it acted on the signal.
#[test]
fn a_ctrl_c_while_setpriv_is_checked_keeps_the_command_from_starting() {
    const PATH: &str = "/cli/sigint-checking";
    let dir = TempDir::new("checking");
    let (search, check) = setpriv_holding_its_check(&dir);
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let run = Run::spawn(
        exec(&[], PATH, &script)
            .env("PATH", search)
            .process_group(0),
    );
    check.wait_started();
    let status = Command::new("kill")
        .arg("-INT")
        .arg("--")
        .arg(format!("-{}", run.pid()))
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -INT the group of {}", run.pid());
    // Not ended: the signal ends the check, which would otherwise hold
    // zklock up past WAIT.
    let out = run.finish(WAIT);
    assert_eq!(out.status.signal(), Some(SIGINT), "{}", out.stderr);
    interrupted_before_start_without_running(&out, &mark, PATH);
}

/// A setpriv whose check of itself does not end is given up after 10 s,
/// with a warning, as one that cannot set the signal is: the command runs,
/// started directly. Before, zklock waited for the check without a limit.
#[test]
fn a_setpriv_check_that_does_not_end_is_given_up_with_a_warning() {
    let dir = TempDir::new("hung-setpriv");
    let (search, _check) = setpriv_holding_its_check(&dir);
    runs_without_setpriv(
        &dir,
        search,
        "/cli/hung-setpriv",
        "did not finish its check within 10 s",
    );
}

/// The lock lost while setpriv is checked (held open by a fake one), once
/// the lock was granted: zklock ends the check at once and exits 75 saying
/// so, and the command never runs. The check is never let end here: a
/// zklock that waited for it would give it up after 10 s with a warning,
/// a second line. Before, zklock waited for the check, the command
/// started, only to be terminated at once, and zklock exited 76; later, it
/// waited for the check, and this test slept a second for the loss to be
/// taken in.
#[test]
fn a_lock_lost_just_before_the_command_starts_keeps_it_from_starting() {
    const PATH: &str = "/cli/lost-before-start";
    let dir = TempDir::new("lost-before-start");
    let (search, check) = setpriv_holding_its_check(&dir);
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let run = Run::spawn(exec(&[], PATH, &script).env("PATH", search));
    check.wait_started();
    let other = client();
    let node = children(&other, PATH);
    assert_eq!(node.len(), 1, "{node:?}");
    other
        .delete(&format!("{PATH}/{}", node[0]), None)
        .expect("delete the lock node");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    assert_eq!(
        one_line(&out),
        "zklock: the lock was lost before the command could start; not running the command"
    );
    assert!(!mark.exists(), "the command ran");
}

/// The connection lost just before the command starts (while setpriv is
/// checked, held open by a fake one, with the server refusing reconnects):
/// zklock says once that it waits, and runs the command once a reconnect
/// has confirmed the lock node. Before, it exited 75 ("the connection to
/// the ensemble was lost before the command could start"), although the
/// fencing token, asked just before, waits through such an outage; a start
/// that fell in the round trip of a reconnect's confirmation of the node
/// was refused the same way.
#[test]
fn a_connection_lost_just_before_the_command_starts_is_waited_out() {
    const PATH: &str = "/cli/cut-before-start";
    let cut = CutBeforeStart::start(PATH, &[]);
    cut.proxy.refuse(false);
    let out = cut.run.finish(WAIT);
    assert_eq!(code(&out), Some(0));
    assert!(cut.mark.exists(), "the command did not run");
    assert_eq!(lines_of(&cut.stderr), [WAITING]);
    assert!(children(&client(), PATH).is_empty());
}

/// A Ctrl-Z while zklock waits out a connection lost before the command
/// starts (as above), which outlasts the session: continued, zklock finds
/// the lock lost and exits 75, saying it could not be confirmed after the
/// stop, the command never started. The stop is taken in once the wait
/// ends, before the command starts: a wait ended by a reconnect that
/// predates the stop would otherwise start it unconfirmed.
#[test]
fn a_stop_while_a_lost_connection_is_waited_out_that_outlasts_the_session_keeps_the_command_from_starting(
) {
    const PATH: &str = "/cli/stop-while-cut-before-start";
    // 4 s: the client, cut off, gives the session up 4T/3 after it last
    // heard from a server, and the stop must come first, even on a loaded
    // machine.
    let cut = CutBeforeStart::start(PATH, &["--session-timeout", "4000"]);
    let zklock = cut.run.pid();
    let other = client();
    let node = children(&other, PATH);
    assert_eq!(node.len(), 1, "{node:?}");
    cut.run.signal("TSTP");
    wait_until("zklock to stop", WAIT, || {
        process_state(zklock) == Some('T')
    });
    wait_until("the stopped session to expire", WAIT, || {
        !children(&other, PATH).contains(&node[0])
    });
    cut.proxy.refuse(false);
    cut.run.signal("CONT");
    let out = cut.run.finish(WAIT);
    assert_eq!(code(&out), Some(NOT_ACQUIRED));
    assert!(!cut.mark.exists(), "the command ran");
    assert_eq!(
        lines_of(&cut.stderr),
        [
            WAITING,
            "zklock: the lock could not be confirmed after zklock was stopped, before the \
             command could start; not running the command"
        ]
    );
}

/// What zklock says while it waits out a lost connection before the
/// command starts.
const WAITING: &str = "zklock: the connection to the ensemble was lost; \
                       waiting to confirm the lock before starting the command";

/// An exec through a proxy whose connection was cut, with reconnects
/// refused, while setpriv was checked (held open by a fake one), once
/// zklock has said that it waits for a reconnect. Its command touches
/// `mark`; its stderr goes to a file.
struct CutBeforeStart {
    proxy: FaultProxy,
    run: Run,
    mark: std::path::PathBuf,
    stderr: std::path::PathBuf,
    _dir: TempDir,
}

impl CutBeforeStart {
    fn start(path: &str, options: &[&str]) -> CutBeforeStart {
        let proxy = FaultProxy::start(server().addr()).expect("start a proxy");
        let dir = TempDir::new("cut-before-start");
        let (search, check) = setpriv_holding_its_check(&dir);
        let mark = dir.join("ran");
        let stderr = dir.join("stderr");
        let script = format!("touch '{}'", mark.display());
        let proxy_connect = proxy.connect_string();
        let mut args = vec!["exec", "--connect", &proxy_connect];
        args.extend_from_slice(options);
        args.extend_from_slice(&[path, "--", "sh", "-c", &script]);
        let mut command = zklock(&args);
        command.env("PATH", search);
        let file = std::fs::File::create(&stderr).expect("create the stderr file");
        let run = Run::spawn_with_stderr(&mut command, Stdio::from(file));
        check.wait_started();
        proxy.refuse(true);
        proxy.cut();
        // A reconnect refused: the client has taken in the loss, and the
        // lock is `Suspended`, before the check ends.
        wait_until("a reconnect refused", WAIT, || {
            proxy.connections_refused() > 0
        });
        check.end();
        let cut = CutBeforeStart {
            proxy,
            run,
            mark,
            stderr,
            _dir: dir,
        };
        wait_until("zklock to wait for a reconnect", WAIT, || {
            lines_of(&cut.stderr).contains(&WAITING.to_owned())
        });
        assert!(!cut.mark.exists(), "the command ran cut off");
        cut
    }
}

/// The lines of `file` so far (none if it cannot be read).
fn lines_of(file: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

/// Signals reach the command from zklock itself, not from whatever `kill`
/// comes first in PATH.
#[test]
fn a_lost_lock_terminates_the_command_whatever_kill_is_in_path() {
    const PATH: &str = "/cli/fake-kill";
    let dir = TempDir::new("fake-kill");
    let search = path_with_fake(&dir, "kill", "exit 0");
    let script = until_terminated(&dir, "");
    let run = Run::spawn(exec(&[], PATH, &script).env("PATH", search));
    let (_command, node) = started(&dir);
    client().delete(&node, None).expect("delete the lock node");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(LOST), "{}", out.stderr);
    assert_eq!(logged(&dir), "TERM\n", "{}", out.stderr);
}

/// A lost lock takes the command's descendants too: its whole process
/// group is signalled. Otherwise `sh -c 'worker & wait'` would leave the
/// worker running without the lock, beside the next holder's command.
#[test]
fn a_lost_lock_terminates_the_commands_descendants_too() {
    const PATH: &str = "/cli/descendants";
    let dir = TempDir::new("descendants");
    let worker_file = dir.join("worker");
    let start_worker = format!(
        // Its output elsewhere, or the test would wait for it to collect
        // zklock's.
        "sleep 300 >/dev/null 2>&1 & echo $! > '{0}.new' && mv '{0}.new' '{0}';",
        worker_file.display()
    );
    let script = until_terminated(&dir, &start_worker);
    let run = Run::spawn(&mut exec(&[], PATH, &script));
    let (_command, node) = started(&dir);
    let worker: u32 = wait_for_file(&worker_file).trim().parse().expect("a pid");
    let _worker = KillOnDrop(worker);
    assert!(is_running(worker), "the worker is not running");
    client().delete(&node, None).expect("delete the lock node");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(LOST), "{}", out.stderr);
    assert_eq!(logged(&dir), "TERM\n", "{}", out.stderr);
    // The next holder's command must not find the worker alive (a zombie
    // is dead: an orphan stays one where nobody reaps it).
    let check = format!(
        "s=$(sed 's/.*) //' /proc/{worker}/stat 2>/dev/null | cut -c1); \
         [ -z \"$s\" ] || [ \"$s\" = Z ]"
    );
    let next = Run::spawn(&mut exec(&["--no-wait"], PATH, &check)).finish(WAIT);
    assert_eq!(
        code(&next),
        Some(0),
        "the worker ran beside the next holder's command: {}",
        next.stderr
    );
    wait_until("the worker to be gone", WAIT, || !is_running(worker));
}

/// A SIGTERM the command traps and lives through, then a Ctrl-C that
/// kills it: zklock dies of SIGINT, as when the Ctrl-C comes first. Before,
/// only a first signal counted, and zklock exited 130, so a script
/// running it went on.
#[test]
fn a_ctrl_c_after_a_trapped_sigterm_still_ends_zklock_by_sigint() {
    const PATH: &str = "/cli/ctrl-c-after-term";
    let dir = TempDir::new("ctrl-c-after-term");
    let (started, trapped) = (dir.join("started"), dir.join("trapped"));
    let script = format!(
        "trap \"touch '{trapped}'\" TERM; \
         echo $$ > '{started}.new' && mv '{started}.new' '{started}'; \
         while :; do sleep 0.1; done",
        trapped = trapped.display(),
        started = started.display(),
    );
    let run = Run::spawn(&mut exec(&[], PATH, &script));
    let command: u32 = wait_for_file(&started).trim().parse().expect("a pid");
    let _command_group = KillGroupOnDrop(command);
    run.signal("TERM");
    wait_until("the command to trap SIGTERM", WAIT, || trapped.exists());
    run.signal("INT");
    let out = run.finish(WAIT);
    assert_eq!(out.status.signal(), Some(SIGINT), "{}", out.stderr);
    assert!(
        children(&client(), PATH).is_empty(),
        "the lock was released"
    );
}

/// A Ctrl-C (SIGINT to the terminal's foreground group: a bash script and
/// the zklock it runs) while the command runs: zklock passes it on, the
/// command dies of it, and zklock, once the lock is released, dies of
/// SIGINT too, so the script stops, as it would with the command run
/// alone: its `echo after` never runs. Before, zklock exited 130, and bash,
/// taking it that zklock had handled the signal, went on.
#[test]
fn a_ctrl_c_while_the_command_runs_stops_the_script_that_ran_zklock() {
    const PATH: &str = "/cli/ctrl-c-script";
    let dir = TempDir::new("ctrl-c-script");
    let started = dir.join("started");
    let command = format!(
        "echo $$ > '{0}.new' && mv '{0}.new' '{0}'; sleep 30",
        started.display()
    );
    let quoted: Vec<String> = std::iter::once(ZKLOCK.to_owned())
        .chain(exec_args(&[], PATH, &command))
        .map(|arg| format!("'{}'", arg.replace('\'', "'\\''")))
        .collect();
    let script = dir.join("script.sh");
    std::fs::write(&script, format!("{}\necho after\n", quoted.join(" ")))
        .expect("write the script");
    let run = Run::spawn(
        Command::new("env")
            .args(["--default-signal=INT", "bash"])
            .arg(&script)
            .process_group(0),
    );
    // zklock and the command's group, should the test fail before they end.
    let _script_group = KillGroupOnDrop(run.pid());
    let command: u32 = wait_for_file(&started).trim().parse().expect("a pid");
    let _command_group = KillGroupOnDrop(command);
    let status = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", run.pid())])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -INT the group of {}", run.pid());
    let out = run.finish(WAIT);
    assert_eq!(out.status.signal(), Some(SIGINT), "{}", out.stderr);
    assert!(!out.stdout.contains("after"), "the script went on");
    assert!(
        children(&client(), PATH).is_empty(),
        "the lock was released"
    );
}

/// Kills a process group with SIGKILL when dropped, should the test fail
/// before the group ends by itself.
struct KillGroupOnDrop(u32);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0)])
            .stderr(Stdio::null())
            .status();
    }
}

/// The command's exit and the lock's loss reaching zklock together: zklock
/// is stopped (SIGSTOP) while the lock node is deleted and the command
/// exits, leaving a background worker in its group, then continued. Told
/// of the loss (76), zklock must have ended the worker, whichever it
/// handled first: before, when it took the exit first with the loss
/// already in, it exited 76 and left the worker running beside the next
/// holder. Taking the exit before the loss arrived, it exits with the
/// command's status, which the loss came too late to change. Raced, so
/// several rounds.
#[test]
fn a_loss_told_with_the_commands_exit_ends_what_the_command_left_running() {
    loss_told_with_the_commands_exit("exit-and-loss", Loss::NodeDeleted);
}

/// The same with the connection cut (reconnects refused) instead: the lock
/// is `Suspended`, which with `--grace` 0 is a loss, and it reaches zklock
/// with the command's exit. (Raced like the above, this shows no worker
/// outlives a 76; the unit test `an_exit_picked_first_sees_the_loss_told_with_it`
/// shows an exit picked first takes the suspension in.)
#[test]
fn a_suspension_told_with_the_commands_exit_ends_what_the_command_left_running() {
    loss_told_with_the_commands_exit("exit-and-suspension", Loss::ConnectionCut);
}

/// How the lock is lost while zklock is stopped.
#[derive(Clone, Copy)]
enum Loss {
    /// Its node is deleted by another client.
    NodeDeleted,
    /// Its connection, through a proxy, is cut and reconnects refused.
    ConnectionCut,
}

fn loss_told_with_the_commands_exit(name: &str, loss: Loss) {
    const ROUNDS: usize = 6;
    let proxy = FaultProxy::start(server().addr()).expect("start a proxy");
    let proxy_connect = proxy.connect_string();
    let mut outcomes = Vec::new();
    for round in 0..ROUNDS {
        let path = format!("/cli/{name}-{round}");
        let dir = TempDir::new(name);
        let (worker_file, go) = (dir.join("worker"), dir.join("go"));
        let script = format!(
            "sleep 300 >/dev/null 2>&1 & echo $! > '{w}.new' && mv '{w}.new' '{w}'; \
             echo \"$$ $ZKLOCK_LOCK_NODE\" > '{s}.new' && mv '{s}.new' '{s}'; \
             i=0; while [ ! -e '{go}' ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done",
            w = worker_file.display(),
            s = dir.join("started").display(),
            go = go.display(),
        );
        let mut args = exec_args(&[], &path, &script);
        if let Loss::ConnectionCut = loss {
            args[2] = proxy_connect.clone();
            proxy.refuse(false);
        }
        let run = Run::spawn(&mut zklock(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        let (command, node) = started(&dir);
        let worker: u32 = wait_for_file(&worker_file).trim().parse().expect("a pid");
        let _worker = KillOnDrop(worker);
        run.signal("STOP");
        wait_until("zklock to stop", WAIT, || {
            process_state(run.pid()) == Some('T')
        });
        match loss {
            Loss::NodeDeleted => client().delete(&node, None).expect("delete the lock node"),
            Loss::ConnectionCut => {
                proxy.refuse(true);
                proxy.cut();
            }
        }
        std::fs::write(&go, "").expect("write the go file");
        wait_until("the command to exit", WAIT, || {
            process_state(command.0) == Some('Z')
        });
        run.signal("CONT");
        let out = run.finish(WAIT);
        match code(&out) {
            // zklock exits once no live process is left in the group.
            Some(LOST) => assert!(!is_running(worker), "the worker outlived zklock's 76"),
            Some(0) => {}
            other => panic!("exit {other:?}: {}", out.stderr),
        }
        outcomes.push(code(&out));
    }
    // Most rounds take the loss (in trials, 3 to 5 of 6): none would mean
    // the case this test is for never came.
    assert!(
        outcomes.contains(&Some(LOST)),
        "no round saw the loss: {outcomes:?}"
    );
}

/// Ctrl-Z (SIGTSTP) stops the command's process group with zklock, and
/// SIGCONT continues both: the command, in a group of its own, must not run
/// on while zklock is stopped and its session expires. So do SIGTTOU and
/// SIGTTIN, which stop a background zklock that writes to its terminal
/// (with `stty tostop`) or reads from it; before, they stopped zklock alone.
#[test]
fn job_control_stops_stop_the_command_with_zklock_and_sigcont_continues_both() {
    const PATH: &str = "/cli/sigtstp";
    let dir = TempDir::new("sigtstp");
    let run = Run::spawn(&mut exec(&[], PATH, &until_terminated(&dir, "")));
    let (command, _node) = started(&dir);
    for stop in ["TSTP", "TTOU", "TTIN"] {
        stop_then_continue(&run, command.0, stop);
    }
    ends_on_sigterm(run, &dir);
}

/// Sends `stop` to zklock, waits for zklock and the command to stop, then
/// SIGCONT, and waits for both to run again.
fn stop_then_continue(run: &Run, command: u32, stop: &str) {
    let zklock = run.pid();
    run.signal(stop);
    wait_until(
        &format!("zklock and its command to stop on {stop}"),
        WAIT,
        || process_state(zklock) == Some('T') && process_state(command) == Some('T'),
    );
    run.signal("CONT");
    wait_until("zklock and its command to continue", WAIT, || {
        process_state(zklock) != Some('T') && process_state(command) != Some('T')
    });
}

/// A SIGTERM to zklock reaches the `until_terminated` command, which logs
/// it and exits 1, and zklock exits with it.
fn ends_on_sigterm(run: Run, dir: &TempDir) {
    run.signal("TERM");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
    assert_eq!(logged(dir), "TERM\n", "{}", out.stderr);
}

/// Says, past the test harness's capture so that the run's log (and
/// `.ci/test`'s summary) shows it, that `test` checked nothing here.
fn skipped(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "warning: {test} skipped: {why}");
}

/// In an orphaned process group (zklock under a daemon, here started with
/// `setsid`), a SIGTSTP stops neither zklock nor its command, as the kernel
/// discards it for any process there: nobody would continue them. Before,
/// zklock stopped both with SIGSTOP, for good. SIGTERM still ends both.
#[test]
fn a_ctrl_z_in_an_orphaned_process_group_stops_nothing() {
    const PATH: &str = "/cli/orphaned";
    let dir = TempDir::new("orphaned");
    // setsid(1) makes zklock a session leader of its own (the test's child
    // is no group leader, so it does not fork): its group's only member has
    // its parent in another session.
    let mut setsid = Command::new("setsid");
    setsid
        .arg(ZKLOCK)
        .args(exec_args(&[], PATH, &until_terminated(&dir, "")))
        .env_remove("ZK_CONNECT");
    let run = Run::spawn(&mut setsid);
    let (command, _node) = started(&dir);
    let zklock = run.pid();
    run.signal("TSTP");
    // Nothing to wait for but time: zklock stops the group at once when
    // it does (the job-control test waits for that).
    let quiet = Instant::now() + Duration::from_millis(500);
    while Instant::now() < quiet {
        assert_ne!(process_state(zklock), Some('T'), "zklock stopped");
        assert_ne!(process_state(command.0), Some('T'), "the command stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
    ends_on_sigterm(run, &dir);
}

/// With the process limit reached once the command runs (a container's
/// `pids.max`, `ulimit -u`), a Ctrl-Z and SIGCONT still confirm the lock
/// and continue the command, and a SIGTERM still ends it: every thread the
/// supervision needs is started before the command. Before, the
/// confirmation's thread could not start, and zklock panicked and died of
/// SIGABRT, its command killed with it.
#[test]
fn a_process_limit_reached_while_the_command_runs_leaves_the_supervision_working() {
    const PATH: &str = "/cli/pids-limit";
    let Some(limit) = PidsLimit::new("zklock-cli-pids") else {
        skipped(
            "a_process_limit_reached_while_the_command_runs_leaves_the_supervision_working",
            "no cgroup with a pids limit can be made here",
        );
        return;
    };
    let dir = TempDir::new("pids-limit");
    let run = Run::spawn(&mut exec(&[], PATH, &until_terminated(&dir, "")));
    let (command, _node) = started(&dir);
    // zklock alone: no thread of its can start from here on.
    limit.hold_at_current(run.pid());
    stop_then_continue(&run, command.0, "TSTP");
    assert!(is_running(command.0), "the command was ended");
    ends_on_sigterm(run, &dir);
}

/// A cgroup with a limit on its tasks (a v1 `pids` cgroup, or a v2 one
/// with the controller), removed on drop, its processes moved back first.
struct PidsLimit {
    dir: std::path::PathBuf,
}

impl PidsLimit {
    /// `None` where no such cgroup can be made (no controller, no root).
    fn new(name: &str) -> Option<PidsLimit> {
        let base = ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]
            .into_iter()
            .map(std::path::Path::new)
            .find(|base| base.join("cgroup.procs").exists())?;
        let dir = base.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let limit = PidsLimit { dir };
        limit.dir.join("pids.max").exists().then_some(limit)
    }

    /// Moves process `pid` in, with every thread of it, and limits the
    /// cgroup to the tasks it has.
    fn hold_at_current(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .expect("move zklock into the cgroup");
        // The lower of two readings: a task that ended in between would
        // leave a slot free.
        let current = || {
            std::fs::read_to_string(self.dir.join("pids.current"))
                .expect("read pids.current")
                .trim()
                .parse::<u64>()
                .expect("a count")
        };
        let first = current();
        std::thread::sleep(Duration::from_millis(50));
        let lowest = first.min(current());
        std::fs::write(self.dir.join("pids.max"), lowest.to_string()).expect("write pids.max");
    }
}

impl Drop for PidsLimit {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("pids.max"), "max");
        let parent = self.dir.parent().map(|p| p.join("cgroup.procs"));
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            if let Some(parent) = &parent {
                let _ = std::fs::write(parent, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A Ctrl-Z that outlasts the session: the server frees the lock, another
/// contender takes it, and when zklock is continued, its command is not.
/// zklock finds the lock lost and kills the still-stopped command, which
/// never runs again (its SIGTERM trap, which would log, does not run), and
/// exits 76 while the other contender still holds the lock.
#[test]
fn a_stop_that_outlasts_the_session_kills_the_command_without_continuing_it() {
    const PATH: &str = "/cli/long-stop";
    let dir = TempDir::new("long-stop");
    // 4 s: a stall of a second before the stop must not look like a lost
    // connection, which would have the command terminated.
    let options = ["--session-timeout", "4000"];
    let run = Run::spawn(&mut exec(&options, PATH, &until_terminated(&dir, "")));
    let (command, node) = started(&dir);
    let zklock = run.pid();
    run.signal("TSTP");
    wait_until("zklock and its command to stop", WAIT, || {
        process_state(zklock) == Some('T') && process_state(command.0) == Some('T')
    });
    let other = client();
    wait_until("the stopped session to expire", WAIT, || {
        !children(&other, PATH).contains(&basename(&node).to_owned())
    });
    let lock = other.mutex(PATH).expect("mutex");
    let guard = lock
        .try_lock_for(WAIT)
        .expect("try_lock_for")
        .expect("the lock, freed by the expiry");
    run.signal("CONT");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(LOST), "{}", out.stderr);
    assert!(
        out.stderr.contains("killing the stopped command"),
        "{}",
        out.stderr
    );
    assert_eq!(logged(&dir), "", "the command ran again: {}", out.stderr);
    wait_until("the command to be gone", WAIT, || !is_running(command.0));
    assert_eq!(guard.state(), zklock::LockState::Held);
    assert_eq!(children(&other, PATH), [basename(guard.node()).to_owned()]);
}

/// A Ctrl-Z after the lock was granted, before the command starts (while
/// zklock checks setpriv, held open by a fake one), that outlasts the
/// session: another contender takes the lock, and when zklock is
/// continued, it finds the lock lost and exits 75 with the command never
/// started. The stop is counted before zklock stops, so it is seen at once
/// when continued. Before, the command started unconfirmed (it ran, beside
/// the other holder, until the continuation's message stopped it).
#[test]
fn a_stop_before_the_command_starts_that_outlasts_the_session_keeps_it_from_starting() {
    const PATH: &str = "/cli/stop-before-start";
    let dir = TempDir::new("stop-before-start");
    let (search, check) = setpriv_holding_its_check(&dir);
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let options = ["--session-timeout", "2000"];
    let run = Run::spawn(exec(&options, PATH, &script).env("PATH", search));
    check.wait_started();
    let zklock = run.pid();
    let other = client();
    let node = children(&other, PATH);
    assert_eq!(node.len(), 1, "{node:?}");
    run.signal("TSTP");
    wait_until("zklock to stop", WAIT, || {
        process_state(zklock) == Some('T')
    });
    wait_until("the stopped session to expire", WAIT, || {
        !children(&other, PATH).contains(&node[0])
    });
    let lock = other.mutex(PATH).expect("mutex");
    let guard = lock
        .try_lock_for(WAIT)
        .expect("try_lock_for")
        .expect("the lock, freed by the expiry");
    check.end();
    run.signal("CONT");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    // Continued, the client may find its connection silent too long (its
    // read timeout passed while it was stopped) before the confirmation
    // fails, and say so first.
    let lines: Vec<&str> = out.stderr.lines().collect();
    let (last, before) = lines.split_last().expect("a line on stderr");
    assert_eq!(
        *last,
        "zklock: the lock could not be confirmed after zklock was stopped, before the command \
         could start; not running the command"
    );
    assert!(
        before.iter().all(|line| *line
            == "zklock: the connection to the ensemble was lost; waiting to confirm the lock \
                before starting the command"),
        "{}",
        out.stderr
    );
    assert!(!mark.exists(), "the command ran");
    assert_eq!(guard.state(), zklock::LockState::Held);
}

/// A Ctrl-Z while waiting for the lock, shorter than the session: once
/// continued, zklock acquires, finds the lock still held when it checks
/// again because of the stop, and runs the command.
#[test]
fn a_stop_while_waiting_for_the_lock_still_runs_the_command_once_it_is_held() {
    const PATH: &str = "/cli/stop-waiting";
    let other = client();
    let lock = other.mutex(PATH).expect("mutex");
    let guard = lock.lock().expect("lock");
    let run = Run::spawn(&mut exec(&[], PATH, "echo ran"));
    wait_until("zklock to queue", WAIT, || queued(&other, PATH) == 2);
    let zklock = run.pid();
    run.signal("TSTP");
    wait_until("zklock to stop", WAIT, || {
        process_state(zklock) == Some('T')
    });
    drop(guard);
    run.signal("CONT");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "ran\n");
    wait_until("the lock to be free", WAIT, || {
        children(&other, PATH).is_empty()
    });
}

/// A child whose stderr is a socket with its other end closed, so that
/// every write to it fails (EPIPE, as for a pipe nobody reads any more).
/// Killed if dropped unfinished.
struct StderrBroken(std::process::Child);

impl StderrBroken {
    fn spawn(command: &mut Command) -> StderrBroken {
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        drop(ours);
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(OwnedFd::from(theirs)))
            .spawn()
            .expect("run zklock");
        StderrBroken(child)
    }

    /// The exit status code, within `WAIT`.
    fn finish(mut self) -> Option<i32> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(Instant::now() < deadline, "still running after {WAIT:?}");
            std::thread::sleep(child::POLL);
        }
    }
}

impl Drop for StderrBroken {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// With stderr gone, zklock's own lines are lost and nothing else changes:
/// not its exit statuses, nor the SIGTERM of a command whose lock is lost.
#[test]
fn a_broken_stderr_changes_nothing_but_the_lines() {
    const PATH: &str = "/cli/broken-stderr";
    let out = StderrBroken::spawn(&mut zklock(&["exec", "--frob"])).finish();
    assert_eq!(out, Some(2));

    let holder = client();
    let lock = holder.mutex(PATH).expect("mutex");
    let guard = lock.lock().expect("lock");
    let out = StderrBroken::spawn(&mut exec(&["--no-wait"], PATH, "true")).finish();
    assert_eq!(out, Some(NOT_ACQUIRED));
    drop(guard);

    let dir = TempDir::new("broken-stderr");
    // The command's own stderr elsewhere: its shell reports the sleep that
    // SIGTERM ends, and would die of the broken pipe before its trap ran.
    let script = until_terminated(&dir, "exec 2>/dev/null;");
    let run = StderrBroken::spawn(&mut exec(&[], PATH, &script));
    let (_command, node) = started(&dir);
    holder.delete(&node, None).expect("delete the lock node");
    assert_eq!(run.finish(), Some(LOST));
    assert_eq!(logged(&dir), "TERM\n");
}

#[test]
fn sigterm_while_connecting_exits_75_at_once() {
    // The ensemble does not answer: the connect would take its whole 5 s.
    let proxy = FaultProxy::start(server().addr()).expect("start a proxy");
    proxy.set_mode(ProxyMode::Blackhole);
    let proxy_connect = proxy.connect_string();
    let dir = TempDir::new("sigterm-connect");
    let mark = dir.join("ran");
    let script = format!("touch '{}'", mark.display());
    let mut command = zklock(&[
        "exec",
        "--connect",
        &proxy_connect,
        "/cli/sigterm-connect",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let waiter = Run::spawn(&mut command);
    wait_until("zklock exec to connect to the proxy", WAIT, || {
        proxy.connection_count() > 0
    });
    let signalled = Instant::now();
    waiter.signal("TERM");
    let out = waiter.finish(WAIT);
    assert_eq!(code(&out), Some(NOT_ACQUIRED), "{}", out.stderr);
    assert!(
        out.exited_at - signalled < Duration::from_secs(4),
        "exited {:?} after SIGTERM",
        out.exited_at - signalled
    );
    assert_eq!(
        one_line(&out),
        "zklock: interrupted while connecting; not running the command"
    );
    assert!(!mark.exists(), "the command ran");
}
