//! `zklock holders` (feature `cli`) against a real ZooKeeper server: the
//! holders and waiters in queue order, in text and JSON, with node data
//! escaped.
//!
//! Built only with the `cli` feature, since it needs the binary. Every
//! test uses its own lock path on one shared server; every wait is bounded.

#![cfg(feature = "cli")]

mod cli_common;

use cli_common::*;
use zklock::Client;

/// Closes the waiters' clients and joins their threads, which end with an
/// error then. Bounded, so that a close that fails to wake a waiter fails
/// the test instead of hanging it.
fn close_and_join(waiters: &[Client], threads: Vec<std::thread::JoinHandle<()>>) {
    for waiter in waiters {
        waiter.close().expect("close");
    }
    wait_until("the waiters to end with their clients", WAIT, || {
        threads.iter().all(|t| t.is_finished())
    });
    for thread in threads {
        thread.join().expect("waiter thread");
    }
}

#[test]
fn holders_lists_the_holder_then_the_waiters_in_order() {
    const PATH: &str = "/cli/holders";
    let holder = client();
    let lock = holder.mutex(PATH).expect("mutex");
    let guard = lock.lock().expect("lock");
    let waiters: Vec<Client> = (0..2).map(|_| client()).collect();
    let mut threads = Vec::new();
    for (i, waiter) in waiters.iter().enumerate() {
        let waiter = waiter.clone();
        threads.push(std::thread::spawn(move || {
            let lock = waiter.mutex(PATH).expect("mutex");
            // Ends with an error when the test closes the client.
            let _ = lock.lock().map(drop);
        }));
        wait_until("the waiter to queue", WAIT, || {
            queued(&holder, PATH) == i + 2
        });
    }
    let sessions: Vec<i64> = std::iter::once(holder.session_id())
        .chain(waiters.iter().map(Client::session_id))
        .collect();

    // Text: one line per node, holder first.
    let connect = connect_string();
    let out = holders(&connect, PATH, false);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    let mut last_token = 0;
    for (i, line) in lines.iter().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            fields[0],
            if i == 0 { "holder" } else { "waiting" },
            "{line}"
        );
        let node = fields[1];
        assert_eq!(fields[2], format!("session={:#x}", sessions[i]), "{line}");
        let token: i64 = fields[3]
            .strip_prefix("token=")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no token in {line}"));
        // The token is the node's creation zxid.
        let stat = holder
            .exists(&format!("{PATH}/{node}"))
            .expect("exists")
            .unwrap_or_else(|| panic!("{node} does not exist"));
        assert_eq!(token, stat.czxid, "{line}");
        assert_eq!(stat.ephemeral_owner, sessions[i], "{line}");
        assert!(token > last_token, "{line}");
        last_token = token;
        if i == 0 {
            assert_eq!(node, basename(guard.node()));
            assert_eq!(token, guard.fencing_token());
        }
    }

    // JSON: the same, in the same order.
    let out = holders(&connect, PATH, true);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    let json = out.stdout.trim();
    assert!(
        json.starts_with(&format!("{{\"path\":\"{PATH}\",\"queue\":[")),
        "{json}"
    );
    assert_eq!(json_values(json, "position"), ["0", "1", "2"], "{json}");
    let expected_sessions: Vec<String> = sessions.iter().map(|s| format!("{s:#x}")).collect();
    assert_eq!(json_values(json, "session_id"), expected_sessions, "{json}");
    let nodes: Vec<String> = lines
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(json_values(json, "node"), nodes, "{json}");
    let tokens: Vec<String> = lines
        .iter()
        .map(|l| {
            let field = l.split_whitespace().nth(3).unwrap_or_default();
            field.trim_start_matches("token=").to_owned()
        })
        .collect();
    assert_eq!(json_values(json, "fencing_token"), tokens, "{json}");
    assert_eq!(
        json_values(json, "kind"),
        ["mutex", "mutex", "mutex"],
        "{json}"
    );

    close_and_join(&waiters, threads);
    drop(guard);

    // A free lock.
    let out = holders(&connect, "/cli/free", false);
    assert_eq!(out.stdout.trim(), "/cli/free: free");
    let out = holders(&connect, "/cli/free", true);
    assert_eq!(out.stdout.trim(), "{\"path\":\"/cli/free\",\"queue\":[]}");
}

/// A lock node's data is shown with its control characters escaped: one
/// line per node in `holders`, one progress line per change in a waiting
/// exec. The data is anyone's (`--publish-args` puts the arguments there,
/// newlines included): shown raw, it forged lines and sent escape
/// sequences to the terminal.
#[test]
fn node_data_is_shown_with_control_characters_escaped() {
    const PATH: &str = "/cli/holders-escaped";
    let dir = TempDir::new("holders-escaped");
    // A comment line after the script's, with an escape sequence.
    let script = format!("{}\n# \x1b[2J\nholder forged", until_terminated(&dir, ""));
    let run = Run::spawn(&mut exec(&["--publish-args"], PATH, &script));
    let (_command, _node) = started(&dir);
    let out = holders(&connect_string(), PATH, false);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].starts_with("holder "), "{}", lines[0]);
    assert!(
        lines[0].ends_with("\\n# \\u{1b}[2J\\nholder forged"),
        "{}",
        lines[0]
    );
    // A waiting exec's progress line shows the holder's data the same way.
    let waiter = Run::spawn(&mut exec(&["--wait", "3"], PATH, "true")).finish(WAIT);
    assert_eq!(code(&waiter), Some(NOT_ACQUIRED), "{}", waiter.stderr);
    let progress: Vec<&str> = waiter
        .stderr
        .lines()
        .filter(|l| l.starts_with("zklock: waiting for"))
        .collect();
    assert_eq!(progress.len(), 1, "{}", waiter.stderr);
    assert!(
        progress[0].contains("\\n# \\u{1b}[2J\\nholder forged (token "),
        "{}",
        progress[0]
    );
    assert!(
        waiter.stderr.lines().all(|l| l.starts_with("zklock: ")),
        "{}",
        waiter.stderr
    );
    run.signal("TERM");
    let out = run.finish(WAIT);
    assert_eq!(code(&out), Some(1), "{}", out.stderr);
}

/// Readers ahead of the first writer all hold a read-write lock, and
/// `holders` says so; a writer, and whoever queues behind it, waits.
#[test]
fn holders_shows_every_reader_ahead_of_a_writer_as_a_holder() {
    const PATH: &str = "/cli/holders-rw";
    let observer = client();
    let readers: Vec<Client> = (0..2).map(|_| client()).collect();
    let locks: Vec<zklock::RwLock> = readers
        .iter()
        .map(|c| zklock::RwLock::new(c, PATH).expect("rwlock"))
        .collect();
    let guards: Vec<_> = locks.iter().map(|l| l.read().expect("read")).collect();
    // A writer, then a reader behind it: both wait.
    let waiters: Vec<Client> = (0..2).map(|_| client()).collect();
    let mut threads = Vec::new();
    for (i, waiter) in waiters.iter().enumerate() {
        let waiter = waiter.clone();
        threads.push(std::thread::spawn(move || {
            let lock = zklock::RwLock::new(&waiter, PATH).expect("rwlock");
            // Ends with an error when the test closes the client.
            let _ = if i == 0 {
                lock.write().map(drop)
            } else {
                lock.read().map(drop)
            };
        }));
        wait_until("the waiter to queue", WAIT, || {
            queued(&observer, PATH) == i + 3
        });
    }
    let connect = connect_string();
    let out = holders(&connect, PATH, false);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    let labels: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(
        labels,
        ["holder", "holder", "waiting", "waiting"],
        "{}",
        out.stdout
    );
    let out = holders(&connect, PATH, true);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    let json = out.stdout.trim();
    assert_eq!(
        json_values(json, "holds"),
        ["true", "true", "false", "false"],
        "{json}"
    );
    assert_eq!(
        json_values(json, "kind"),
        ["read", "read", "write", "read"],
        "{json}"
    );

    close_and_join(&waiters, threads);
    drop(guards);
}
