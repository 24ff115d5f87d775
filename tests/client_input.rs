//! Bad input is refused before anything is sent: invalid paths (with the
//! specific reason), empty ACLs, requests over the frame limit, bad connect
//! strings and settings. The client under test sits behind a blackholed
//! proxy, so anything it did send would hang instead of failing.

mod common;

use std::time::Duration;

use common::path_errors::*;
use common::{builder, expect_silence, fails_fast, open, proxy, server};
use zklock::testing::ProxyMode;
use zklock::{AddWatchMode, Client, CreateMode, Error, Op, ReadOp, WatcherType};

fn bad_paths() -> Vec<(&'static str, &'static str)> {
    vec![
        ("", EMPTY),
        ("relative", RELATIVE),
        ("a/b", RELATIVE),
        ("/a/", TRAILING),
        ("/a//b", DOUBLE),
        ("//", TRAILING),
        ("//b", DOUBLE),
        ("/.", DOT),
        ("/a/./b", DOT),
        ("/..", DOT_DOT),
        ("/a/../b", DOT_DOT),
        ("/a\0b", NUL),
        ("/a\u{1}b", CONTROL),
        ("/tab\there", CONTROL),
        ("/new\nline", CONTROL),
        ("/del\u{7f}", CONTROL),
        ("/c1\u{85}", CONTROL),
        ("/private\u{e000}", CONTROL),
        ("/special\u{fff0}", CONTROL),
    ]
}

fn assert_invalid<T: std::fmt::Debug>(
    op: &str,
    path: &str,
    reason: &str,
    result: zklock::Result<T>,
) {
    match result {
        Err(Error::InvalidPath { path: p, reason: r }) => {
            assert_eq!((p.as_str(), r), (path, reason), "{op}({path:?})");
        }
        other => panic!("{op}({path:?}) gave {other:?}, expected InvalidPath: {reason}"),
    }
}

/// A sequential path ending in '.' or '..' is a name once numbered: the
/// server takes it, as the Java client's check (with a digit appended)
/// does.
#[test]
fn a_sequential_path_ending_in_dots_is_created() {
    let zk = server();
    let c = builder().connect(&zk.connect_string()).expect("connect");
    let made = |path: &str| {
        c.create(path, b"", &open(), CreateMode::EphemeralSequential)
            .unwrap_or_else(|e| panic!("sequential create {path}: {e}"))
    };
    let made = [made("/."), made("/..")];
    assert_eq!(made, ["/.0000000000", "/..0000000001"]);
    for path in made {
        c.delete(&path, None).unwrap();
    }
}

#[test]
fn bad_input_fails_locally_without_reaching_the_server() {
    let zk = server();
    let gate = proxy(&zk);
    let c = builder()
        .session_timeout(Duration::from_secs(20))
        .max_request(4096)
        .connect(&gate.connect_string())
        .expect("connect");
    let states = c.state_changes();
    // From here on, a request that went out would never be answered.
    gate.set_mode(ProxyMode::Blackhole);
    let started = std::time::Instant::now();

    for (path, reason) in bad_paths() {
        let acl = open();
        assert_invalid(
            "create",
            path,
            reason,
            c.create(path, b"", &acl, CreateMode::Persistent),
        );
        assert_invalid(
            "create2",
            path,
            reason,
            c.create_with_stat(path, b"", &acl, CreateMode::Ephemeral),
        );
        assert_invalid(
            "container",
            path,
            reason,
            c.create(path, b"", &acl, CreateMode::Container),
        );
        assert_invalid(
            "createTTL",
            path,
            reason,
            c.create_ttl(
                path,
                b"",
                &acl,
                CreateMode::PersistentWithTtl,
                Duration::from_secs(1),
            ),
        );
        assert_invalid("delete", path, reason, c.delete(path, None));
        assert_invalid("exists", path, reason, c.exists(path));
        assert_invalid("exists_w", path, reason, c.exists_w(path));
        assert_invalid("get_data", path, reason, c.get_data(path));
        assert_invalid("get_data_w", path, reason, c.get_data_w(path));
        assert_invalid("set_data", path, reason, c.set_data(path, b"", None));
        assert_invalid("get_children", path, reason, c.get_children(path));
        assert_invalid("get_children_w", path, reason, c.get_children_w(path));
        assert_invalid("getChildren2", path, reason, c.get_children_with_stat(path));
        assert_invalid("get_acl", path, reason, c.get_acl(path));
        assert_invalid("set_acl", path, reason, c.set_acl(path, &acl, None));
        assert_invalid("sync", path, reason, c.sync(path));
        // A string prefix may end in '/' (it then keeps to the subtree).
        if !path.ends_with('/') {
            assert_invalid("get_ephemerals", path, reason, c.get_ephemerals(path));
        }
        assert_invalid(
            "getAllChildrenNumber",
            path,
            reason,
            c.get_all_children_number(path),
        );
        assert_invalid(
            "add_watch",
            path,
            reason,
            c.add_watch(path, AddWatchMode::PersistentRecursive),
        );
        assert_invalid(
            "remove_watches",
            path,
            reason,
            c.remove_watches(path, WatcherType::Any),
        );
        assert_invalid(
            "multi check",
            path,
            reason,
            c.multi(&[Op::check("/ok", Some(0)), Op::check(path, Some(0))]),
        );
        assert_invalid(
            "multi setData",
            path,
            reason,
            c.multi(&[Op::set_data(path, Vec::new(), None)]),
        );
        assert_invalid(
            "multi delete",
            path,
            reason,
            c.multi(&[Op::delete(path, None)]),
        );
        assert_invalid(
            "multiRead",
            path,
            reason,
            c.multi_read(&[ReadOp::GetChildren(path.into())]),
        );
    }
    // A sequential create may end in '/' (and be `/` itself, see
    // `client_ops.rs`), but the rest of the rules hold.
    assert_invalid(
        "sequential create",
        "/a//",
        DOUBLE,
        c.create("/a//", b"", &open(), CreateMode::EphemeralSequential),
    );
    // A trailing '/' is only for sequential modes.
    assert_invalid(
        "create",
        "/a/",
        TRAILING,
        c.create("/a/", b"", &open(), CreateMode::Persistent),
    );

    // Empty ACLs.
    for result in [
        c.create("/a", b"", &[], CreateMode::Persistent).map(drop),
        c.create_with_stat("/a", b"", &[], CreateMode::Persistent)
            .map(drop),
        c.set_acl("/a", &[], None).map(drop),
        c.multi(&[Op::create(
            "/a",
            Vec::new(),
            Vec::new(),
            CreateMode::Persistent,
        )])
        .map(drop),
    ] {
        assert!(
            matches!(result, Err(Error::InvalidArgument(ref m)) if m.contains("ACL")),
            "{result:?}"
        );
    }

    // Requests over the request limit (4096 bytes here).
    let big = vec![7u8; 5000];
    for result in [
        c.set_data("/a", &big, None).map(drop),
        c.create("/a", &big, &open(), CreateMode::Persistent)
            .map(drop),
        c.multi(&[Op::set_data("/a", big.clone(), None)]).map(drop),
    ] {
        assert!(
            matches!(result, Err(Error::InvalidArgument(ref m)) if m.contains("4096-byte limit")),
            "{result:?}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "local checks took {:?}",
        started.elapsed()
    );

    // Nothing was sent: once the path is clear again the session is as it
    // was, with no reconnect, and none of the nodes exists.
    gate.set_mode(ProxyMode::Pass);
    assert_eq!(c.get_children("/").expect("children"), ["zookeeper"]);
    // Just under the limit is fine.
    c.create("/a", &vec![1u8; 3900], &open(), CreateMode::Persistent)
        .expect("a request under the request limit");
    expect_silence(&states, "state changes");
    assert_eq!(c.state(), zklock::State::Connected);

    // The default limit is exactly the server's jute.maxbuffer (1,048,575
    // bytes of frame payload): a setData of "/a" carries 22 bytes besides
    // its data (header 8, path 4 + 2, data length 4, version 4).
    let plain = common::connect(&zk.connect_string());
    let over = vec![0u8; 1_048_575 - 22 + 1];
    assert!(matches!(
        plain.set_data("/a", &over, None),
        Err(Error::InvalidArgument(ref m)) if m.contains("1048575-byte limit")
    ));
    assert_eq!(plain.get_data("/a").expect("get_data").1.data_length, 3900);
    let at_limit = vec![5u8; 1_048_575 - 22];
    let stat = plain
        .set_data("/a", &at_limit, None)
        .expect("the server accepts a request of exactly jute.maxbuffer");
    assert_eq!(stat.data_length, 1_048_553);
    assert_eq!(plain.get_data("/a").expect("read back").0, at_limit);
    assert_eq!(plain.state(), zklock::State::Connected);
}

/// Empty entries in a host list (a trailing comma from a templated list)
/// are skipped, as the Java client skips them.
#[test]
fn empty_entries_in_a_host_list_are_skipped() {
    let zk = server();
    let dead = format!("127.0.0.1:{}", common::dead_port());
    for input in [
        format!("{},", zk.connect_string()),
        format!(" ,{}, ,", zk.connect_string()),
        format!("{},,{dead}/", zk.connect_string()),
    ] {
        let c = builder()
            .connect(&input)
            .unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert!(c.exists("/").expect("exists").is_some(), "{input:?}");
    }
}

#[test]
fn bad_connect_strings_and_settings_are_refused() {
    for (input, needle) in [
        ("", "no host"),
        (",,", "no host"),
        ("127.0.0.1:port", "bad port"),
        ("127.0.0.1:0", "bad port"),
        ("127.0.0.1:65536", "bad port"),
        (":2181", "missing host"),
        ("::1:2181", "IPv6"),
        ("[::1:2181", "unclosed"),
        ("127.0.0.1:2181/app/", "bad chroot"),
        ("127.0.0.1:2181/app//x", "bad chroot"),
        ("127.0.0.1:2181/app/../x", "bad chroot"),
    ] {
        fails_fast_with(input, needle);
    }
    let dead = format!("127.0.0.1:{}", common::dead_port());
    for (builder, needle) in [
        (
            Client::builder().session_timeout(Duration::ZERO),
            "session_timeout",
        ),
        (
            Client::builder().connect_timeout(Duration::ZERO),
            "connect_timeout",
        ),
        (Client::builder().max_frame(100), "max_frame"),
    ] {
        match builder.connect(&dead) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
            other => panic!("{needle}: {other:?}"),
        }
    }
    fails_fast(
        "connect with an empty string",
        &Error::InvalidConnectString {
            input: String::new(),
            reason: "no host (it must name at least one server)".into(),
        },
        || Client::connect(""),
    );
}

fn fails_fast_with(input: &str, needle: &str) {
    let started = std::time::Instant::now();
    match Client::connect(input) {
        Err(Error::InvalidConnectString { input: i, reason }) => {
            assert_eq!(i, input);
            assert!(reason.contains(needle), "{input:?}: {reason}");
        }
        other => panic!("{input:?} gave {other:?}"),
    }
    // No server is asked: any wait for one would be seconds.
    assert!(started.elapsed() < Duration::from_secs(2));
}
