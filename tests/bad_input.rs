//! The bad-input catalogue: every public entry point that takes user input,
//! each bad value with the exact error it gets (the variant, and the exact
//! reason or message), and proof that nothing was sent: the server's own
//! count of requests received on the client's connection (`cons`,
//! `recved=`) moves by exactly the one round trip made afterwards.
//!
//! `tests/client_input.rs` checks one representative per path rule on every
//! operation; this file adds the boundaries of every refused character
//! class (and their accepted neighbours, created on a real server), the
//! lock constructors and `lock_queue`, connect strings and settings with
//! their exact reasons, request sizes to the byte, ACL, TTL and mode
//! checks, zero and past lock deadlines, and multis with one bad op.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::path_errors::*;
use zklock::recipes::lock_queue;
use zklock::testing::TestServer;
use zklock::{
    Acl, AddWatchMode, Client, CreateMode, Error, Mutex, Op, ReadOp, ReentrantMutex, RwLock,
    WatcherType,
};

const LOCK_ROOT: &str = "a lock needs its own directory, not the root";
const EMPTY_ACL: &str = "the ACL must not be empty";
const NO_HOST: &str = "no host (it must name at least one server)";

/// Bounds every wait.
const BOUND: Duration = Duration::from_secs(20);

/// One server (with TTL nodes enabled) for every test here; never dropped,
/// its watchdog kills it when this process exits.
fn server() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        common::abort_if_hung();
        TestServer::builder()
            .extended_types(true)
            .start()
            .expect("start a ZooKeeper server")
    })
}

/// A client with a long session timeout, so that a ping comes only after
/// 10 s without sending (see `Session::ping_interval`), outside any request
/// count here.
fn client() -> Client {
    client_with(|b| b)
}

fn client_with(configure: impl FnOnce(zklock::ClientBuilder) -> zklock::ClientBuilder) -> Client {
    configure(
        Client::builder()
            .session_timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(5)),
    )
    .connect(&server().connect_string())
    .expect("connect")
}

fn open() -> Vec<Acl> {
    Acl::open_unsafe()
}

/// Requests the server has received on `client`'s connection.
fn received(client: &Client) -> u64 {
    let cons = server().four_letter("cons").expect("cons");
    let needle = format!("sid=0x{:x},", client.session_id());
    let line = cons
        .lines()
        .find(|l| l.contains(&needle))
        .unwrap_or_else(|| panic!("no connection with {needle} in:\n{cons}"));
    let count = line
        .split_once("recved=")
        .and_then(|(_, rest)| rest.split(',').next())
        .unwrap_or_else(|| panic!("no recved= in {line}"));
    count.parse().expect("a count")
}

/// Runs `f`, then one round trip (which follows anything `f` might have
/// sent), and asserts that the server received that round trip and nothing
/// else meanwhile.
fn sends_nothing<T>(client: &Client, what: &str, f: impl FnOnce() -> T) -> T {
    let before = received(client);
    let out = f();
    client.exists("/").expect("a round trip");
    let after = received(client);
    assert_eq!(after - before, 1, "{what}: requests reached the server");
    out
}

fn expect_invalid_path(what: &str, path: &str, reason: &'static str, result: zklock::Result<()>) {
    assert_eq!(
        result,
        Err(Error::InvalidPath {
            path: path.to_owned(),
            reason,
        }),
        "{what}({path:?})"
    );
}

fn expect_invalid_argument<T: std::fmt::Debug>(
    what: &str,
    message: &str,
    result: zklock::Result<T>,
) {
    match result {
        Err(Error::InvalidArgument(m)) if m == message => {}
        other => panic!("{what}: expected InvalidArgument({message:?}), got {other:?}"),
    }
}

// ---- Connect strings and settings ----

#[test]
fn connect_strings_get_their_exact_error_at_once() {
    let bad_port =
        |port: &str, entry: &str| format!("bad port {port:?} in {entry:?} (expected 1-65535)");
    let bad_chroot =
        |chroot: &str, reason: &str| format!("bad chroot: invalid path {chroot:?}: {reason}");
    for (input, reason) in [
        ("", NO_HOST.to_owned()),
        ("  ", NO_HOST.to_owned()),
        (",", NO_HOST.to_owned()),
        (" , /app", NO_HOST.to_owned()),
        ("127.0.0.1:port", bad_port("port", "127.0.0.1:port")),
        ("127.0.0.1:0", bad_port("0", "127.0.0.1:0")),
        ("127.0.0.1:70000", bad_port("70000", "127.0.0.1:70000")),
        ("127.0.0.1:-1", bad_port("-1", "127.0.0.1:-1")),
        // A chroot without its leading '/' runs into the port.
        (
            "127.0.0.1:2181app",
            bad_port("2181app", "127.0.0.1:2181app"),
        ),
        (":2181", "missing host name in \":2181\"".to_owned()),
        ("[]:2181", "missing host name in \"[]:2181\"".to_owned()),
        ("[::1", "unclosed '[' in \"[::1\"".to_owned()),
        (
            "[::1]2181",
            "unexpected text after ']' in \"[::1]2181\"".to_owned(),
        ),
        (
            "::1:2181",
            "IPv6 address \"::1:2181\" must be written as [addr]:port".to_owned(),
        ),
        // Hosts written after the chroot would otherwise join it.
        (
            "127.0.0.1:2181/app,127.0.0.2:2181",
            "the chroot \"/app,127.0.0.2:2181\" holds the host \"127.0.0.2:2181\": \
             the chroot goes after the last host, as in \"a:2181,b:2181/app\""
                .to_owned(),
        ),
        ("127.0.0.1:2181//app", bad_chroot("//app", DOUBLE)),
        ("127.0.0.1:2181//", bad_chroot("//", TRAILING)),
        ("127.0.0.1:2181/app/", bad_chroot("/app/", TRAILING)),
        ("127.0.0.1:2181/app/./x", bad_chroot("/app/./x", DOT)),
        ("127.0.0.1:2181/app/../x", bad_chroot("/app/../x", DOT_DOT)),
        ("127.0.0.1:2181/app\0", bad_chroot("/app\0", NUL)),
        (
            "127.0.0.1:2181/app\u{7f}",
            bad_chroot("/app\u{7f}", CONTROL),
        ),
        (
            "127.0.0.1:2181/app\u{1f512}",
            bad_chroot("/app\u{1f512}", SUPPLEMENTARY),
        ),
    ] {
        let started = Instant::now();
        let result = Client::builder().connect(input).map(drop);
        assert_eq!(
            result,
            Err(Error::InvalidConnectString {
                input: input.to_owned(),
                reason,
            }),
            "{input:?}"
        );
        // No server is asked: any wait for one would be seconds.
        assert!(started.elapsed() < Duration::from_secs(2), "{input:?}");
    }
}

/// A refused connect names the host once, and the address it was refused
/// at only when the host is a name. Before, `127.0.0.1:P: 127.0.0.1:P:
/// Connection refused`.
#[test]
fn a_refused_connect_names_the_host_once_and_a_names_address() {
    let port = zklock::testing::dead_port().expect("a dead port");
    let address = format!("127.0.0.1:{port}");
    let name = zklock::testing::FakeName::new(
        &format!("refused-{port}.test:{port}"),
        vec![address.parse().expect("an address")],
    );
    for (host, named) in [
        (address.as_str(), String::new()),
        (name.host(), format!("{address}: ")),
    ] {
        match Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .connect(host)
        {
            Err(Error::ConnectFailed { last_error, .. }) => {
                let prefix = format!("{host}: {named}");
                let rest = last_error
                    .strip_prefix(&prefix)
                    .unwrap_or_else(|| panic!("{last_error:?} does not start with {prefix:?}"));
                assert!(rest.starts_with("Connection refused"), "{last_error:?}");
            }
            other => panic!("{host}: {other:?}"),
        }
    }
}

#[test]
fn an_unresolvable_host_fails_naming_it_within_the_connect_timeout() {
    let timeout = Duration::from_secs(1);
    for (input, host) in [
        ("zklock-bad-input.invalid", "zklock-bad-input.invalid:2181"),
        (
            "zklock-bad-input.invalid:2181",
            "zklock-bad-input.invalid:2181",
        ),
    ] {
        let started = Instant::now();
        match Client::builder().connect_timeout(timeout).connect(input) {
            Err(Error::ConnectFailed {
                hosts,
                timeout: t,
                last_error,
            }) => {
                assert_eq!((hosts.as_str(), t), (host, timeout));
                assert!(last_error.starts_with(&format!("{host}: ")), "{last_error}");
            }
            other => panic!("{input}: {other:?}"),
        }
        let took = started.elapsed();
        assert!(
            took >= timeout && took < timeout + Duration::from_millis(1500),
            "{took:?}"
        );
    }
}

#[test]
fn settings_out_of_range_get_their_exact_error() {
    let at_most = "2147483.647s";
    let cases: Vec<(zklock::ClientBuilder, String)> = vec![
        (
            Client::builder().session_timeout(Duration::ZERO),
            "session_timeout must be at least 1 ms, not 0ns".into(),
        ),
        (
            Client::builder().session_timeout(Duration::from_micros(999)),
            "session_timeout must be at least 1 ms, not 999µs".into(),
        ),
        (
            Client::builder().session_timeout(Duration::from_millis(i32::MAX as u64 + 1)),
            format!("session_timeout must be at most {at_most}, not 2147483.648s"),
        ),
        (
            Client::builder().session_timeout(Duration::MAX),
            format!(
                "session_timeout must be at most {at_most}, not {:?}",
                Duration::MAX
            ),
        ),
        (
            Client::builder().connect_timeout(Duration::ZERO),
            "connect_timeout must be at least 1 ms, not 0ns".into(),
        ),
        (
            Client::builder().connect_timeout(Duration::MAX),
            format!(
                "connect_timeout must be at most {at_most}, not {:?}",
                Duration::MAX
            ),
        ),
        (
            Client::builder().request_timeout(Some(Duration::ZERO)),
            "request_timeout must be at least 1 ms, not 0ns".into(),
        ),
        (
            Client::builder().request_timeout(Some(Duration::MAX)),
            format!(
                "request_timeout must be at most {at_most}, not {:?}",
                Duration::MAX
            ),
        ),
        (
            Client::builder().max_frame(0),
            "max_frame must be at least 1024 bytes, not 0".into(),
        ),
        (
            Client::builder().max_frame(1023),
            "max_frame must be at least 1024 bytes, not 1023".into(),
        ),
        (
            Client::builder().max_request(1023),
            "max_request must be at least 1024 bytes, not 1023".into(),
        ),
        // A frame's length is an i32 on the wire.
        (
            Client::builder().max_request(1 << 31),
            "max_request must be at most 2147483647 bytes, not 2147483648".into(),
        ),
        (
            Client::builder().max_frame(usize::MAX),
            format!(
                "max_frame must be at most 2147483647 bytes, not {}",
                usize::MAX
            ),
        ),
        (
            Client::builder().release_linger(Duration::from_millis(1001)),
            "release_linger must be at most 1s, not 1.001s".into(),
        ),
        (
            Client::builder().watch_buffer(0),
            "watch_buffer must be at least 1 event".into(),
        ),
        (
            Client::builder().session(0, vec![0; 16]),
            "session id 0 names no session (see Client::session_id)".into(),
        ),
        (
            Client::builder().session(0x1234, vec![1; 15]),
            "a session password is 16 bytes, not 15".into(),
        ),
        (
            Client::builder().session(0x1234, Vec::new()),
            "a session password is 16 bytes, not 0".into(),
        ),
        // The server takes a digest credential's user as what precedes its
        // first ':': this one would authenticate as "bob".
        (
            Client::builder().digest("bob:x", "secret"),
            "a digest user name must not contain ':', as \"bob:x\" does".into(),
        ),
        // Credentials over the request limit would be refused by the
        // server on every connection: 28 bytes besides the password.
        (
            Client::builder().digest("u", "p".repeat(1_048_575 - 28 + 1)),
            "request of 1048576 bytes exceeds the server's 1048575-byte limit (jute.maxbuffer)"
                .into(),
        ),
    ];
    let connect_string = server().connect_string();
    for (builder, message) in cases {
        let what = format!("{:?}", builder.config());
        let started = Instant::now();
        expect_invalid_argument(&what, &message, builder.connect(&connect_string));
        // Refused before any request: a wait for the server would be
        // seconds.
        assert!(started.elapsed() < Duration::from_secs(2), "{what}");
    }

    // The boundaries themselves are accepted.
    let c = client_with(|b| {
        b.session_timeout(Duration::from_millis(1))
            .max_frame(1024)
            .max_request(1024)
    });
    // The server raises a 1 ms session timeout to its minimum (2 ticks).
    assert_eq!(c.negotiated_timeout(), Some(server().min_session_timeout()));
    c.close().expect("close");
    let c = client_with(|b| b.session_timeout(Duration::from_millis(i32::MAX as u64)));
    assert_eq!(c.negotiated_timeout(), Some(server().max_session_timeout()));
    c.close().expect("close");
}

// ---- Paths ----

/// Every call that takes a path, as `(name, call, sequential)`.
type PathCall = (&'static str, fn(&Client, &str) -> zklock::Result<()>, bool);

fn path_calls() -> Vec<PathCall> {
    fn ttl() -> Duration {
        Duration::from_secs(60)
    }
    vec![
        (
            "create",
            |c, p| c.create(p, b"", &open(), CreateMode::Persistent).map(drop),
            false,
        ),
        (
            "create ephemeral",
            |c, p| c.create(p, b"", &open(), CreateMode::Ephemeral).map(drop),
            false,
        ),
        (
            "create container",
            |c, p| c.create(p, b"", &open(), CreateMode::Container).map(drop),
            false,
        ),
        (
            "create sequential",
            |c, p| {
                c.create(p, b"", &open(), CreateMode::PersistentSequential)
                    .map(drop)
            },
            true,
        ),
        (
            "create_with_stat ephemeral sequential",
            |c, p| {
                c.create_with_stat(p, b"", &open(), CreateMode::EphemeralSequential)
                    .map(drop)
            },
            true,
        ),
        (
            "create_with_stat",
            |c, p| {
                c.create_with_stat(p, b"", &open(), CreateMode::Persistent)
                    .map(drop)
            },
            false,
        ),
        (
            "create_ttl",
            |c, p| {
                c.create_ttl(p, b"", &open(), CreateMode::PersistentWithTtl, ttl())
                    .map(drop)
            },
            false,
        ),
        (
            "create_ttl sequential",
            |c, p| {
                c.create_ttl(
                    p,
                    b"",
                    &open(),
                    CreateMode::PersistentSequentialWithTtl,
                    ttl(),
                )
                .map(drop)
            },
            true,
        ),
        ("delete", |c, p| c.delete(p, None), false),
        ("exists", |c, p| c.exists(p).map(drop), false),
        ("exists_w", |c, p| c.exists_w(p).map(drop), false),
        ("get_data", |c, p| c.get_data(p).map(drop), false),
        ("get_data_w", |c, p| c.get_data_w(p).map(drop), false),
        (
            "set_data",
            |c, p| c.set_data(p, b"x", Some(3)).map(drop),
            false,
        ),
        ("get_children", |c, p| c.get_children(p).map(drop), false),
        (
            "get_children_w",
            |c, p| c.get_children_w(p).map(drop),
            false,
        ),
        (
            "get_children_with_stat",
            |c, p| c.get_children_with_stat(p).map(drop),
            false,
        ),
        ("get_acl", |c, p| c.get_acl(p).map(drop), false),
        (
            "set_acl",
            |c, p| c.set_acl(p, &open(), None).map(drop),
            false,
        ),
        ("sync", |c, p| c.sync(p), false),
        ("ensure_path", |c, p| c.ensure_path(p, &open()), false),
        ("delete_recursive", |c, p| c.delete_recursive(p), false),
        (
            "get_ephemerals",
            |c, p| c.get_ephemerals(p).map(drop),
            // A string prefix, which may end in '/' as a sequential path may.
            true,
        ),
        (
            "get_all_children_number",
            |c, p| c.get_all_children_number(p).map(drop),
            false,
        ),
        (
            "add_watch",
            |c, p| c.add_watch(p, AddWatchMode::Persistent).map(drop),
            false,
        ),
        (
            "add_watch recursive",
            |c, p| c.add_watch(p, AddWatchMode::PersistentRecursive).map(drop),
            false,
        ),
        (
            "remove_watches",
            |c, p| c.remove_watches(p, WatcherType::Data),
            false,
        ),
        (
            "multi create",
            |c, p| {
                c.multi(&[Op::create(p, Vec::new(), open(), CreateMode::Persistent)])
                    .map(drop)
            },
            false,
        ),
        (
            "multi create sequential, after a valid create",
            |c, p| {
                c.multi(&[
                    Op::create("/bi-multi-ok", Vec::new(), open(), CreateMode::Persistent),
                    Op::create(p, Vec::new(), open(), CreateMode::EphemeralSequential),
                ])
                .map(drop)
            },
            true,
        ),
        (
            "multi container",
            |c, p| {
                c.multi(&[Op::create(p, Vec::new(), open(), CreateMode::Container)])
                    .map(drop)
            },
            false,
        ),
        (
            "multi delete",
            |c, p| c.multi(&[Op::delete(p, Some(1))]).map(drop),
            false,
        ),
        (
            "multi set_data",
            |c, p| c.multi(&[Op::set_data(p, b"x".to_vec(), None)]).map(drop),
            false,
        ),
        (
            "multi check, between valid ops",
            |c, p| {
                c.multi(&[
                    Op::check("/", Some(0)),
                    Op::check(p, Some(0)),
                    Op::set_data("/bi-multi-ok", Vec::new(), None),
                ])
                .map(drop)
            },
            false,
        ),
        (
            "multi_read get_data",
            |c, p| c.multi_read(&[ReadOp::GetData(p.into())]).map(drop),
            false,
        ),
        (
            "multi_read get_children, after a valid read",
            |c, p| {
                c.multi_read(&[ReadOp::GetData("/".into()), ReadOp::GetChildren(p.into())])
                    .map(drop)
            },
            false,
        ),
        ("Mutex::new", |c, p| Mutex::new(c, p).map(drop), false),
        ("Client::mutex", |c, p| c.mutex(p).map(drop), false),
        (
            "ReentrantMutex::new",
            |c, p| ReentrantMutex::new(c, p).map(drop),
            false,
        ),
        ("RwLock::new", |c, p| RwLock::new(c, p).map(drop), false),
        ("lock_queue", |c, p| lock_queue(c, p).map(drop), false),
    ]
}

/// Every path rule, and every refused character class at both ends.
fn bad_paths() -> Vec<(String, &'static str)> {
    let mut paths: Vec<(String, &'static str)> = [
        ("", EMPTY),
        ("relative/x", RELATIVE),
        ("/trailing/", TRAILING),
        ("/a//b", DOUBLE),
        ("/.", DOT),
        ("/a/./b", DOT),
        ("/..", DOT_DOT),
        ("/a/../b", DOT_DOT),
        ("/nul\0x", NUL),
    ]
    .into_iter()
    .map(|(p, r)| (p.to_owned(), r))
    .collect();
    for c in [
        '\u{1}', '\u{1f}', '\u{7f}', '\u{9f}', '\u{e000}', '\u{f8ff}', '\u{fff0}', '\u{ffff}',
    ] {
        paths.push((format!("/c{c}x"), CONTROL));
    }
    for c in ['\u{10000}', '\u{1f512}', '\u{10ffff}'] {
        paths.push((format!("/c{c}x"), SUPPLEMENTARY));
    }
    paths
}

#[test]
fn every_path_rule_and_character_class_boundary_is_refused_by_every_call() {
    let c = client();
    let calls = path_calls();
    let paths = bad_paths();
    let mut checked = 0;
    sends_nothing(&c, "bad paths", || {
        for (path, reason) in &paths {
            for (name, call, sequential) in &calls {
                // A sequential create appends to its path, so a trailing
                // '/', '.' or '..' is fine there (the server's number makes
                // a name of it: `tests/client_input.rs` creates them).
                let last_is_named_by_the_number =
                    *reason == TRAILING || path.ends_with("/.") || path.ends_with("/..");
                if *sequential && last_is_named_by_the_number {
                    continue;
                }
                expect_invalid_path(name, path, reason, call(&c, path));
                checked += 1;
            }
        }
    });
    assert!(checked > 600, "{checked}");

    // A lock may not live at the root.
    sends_nothing(&c, "locks at the root", || {
        for (name, call, _) in calls.iter().filter(|(n, ..)| n.contains("::")) {
            expect_invalid_path(name, "/", LOCK_ROOT, call(&c, "/"));
        }
    });

    // The neighbours of each refused class are fine, here and on the server.
    let accepted = [
        '\u{20}', '\u{7e}', '\u{a0}', '\u{d7ff}', '\u{f900}', '\u{ffef}',
    ];
    c.create("/bi-chars", b"", &open(), CreateMode::Persistent)
        .expect("create /bi-chars");
    let mut want = Vec::new();
    for ch in accepted {
        let name = format!("c{ch}x");
        let path = format!("/bi-chars/{name}");
        assert_eq!(
            c.create(&path, b"", &open(), CreateMode::Persistent),
            Ok(path.clone()),
            "U+{:04X}",
            ch as u32
        );
        want.push(name);
    }
    for name in ["a.b", ".a", "..a", "a..", "..."] {
        let path = format!("/bi-chars/{name}");
        assert_eq!(
            c.create(&path, b"", &open(), CreateMode::Persistent),
            Ok(path)
        );
        want.push(name.to_owned());
    }
    let mut children = c.get_children("/bi-chars").expect("children");
    children.sort();
    want.sort();
    assert_eq!(children, want);
}

// ---- Sizes ----

#[test]
fn requests_over_the_limit_are_refused_to_the_byte() {
    const LIMIT: usize = 4096;
    let c = client_with(|b| b.max_request(LIMIT));
    c.create("/d", b"", &open(), CreateMode::Persistent)
        .expect("create /d");
    let over = |size: usize| {
        format!("request of {size} bytes exceeds the server's {LIMIT}-byte limit (jute.maxbuffer)")
    };
    // Bytes besides the data, for a 2-byte path: the request header (8),
    // the path (4 + 2), the data's length (4), and:
    let set_data = 8 + 6 + 4 + 4; // the version
    let create = 8 + 6 + 4 + 27 + 4; // the open ACL (4 + 4 + 9 + 10), the flags
    let ttl = create + 8; // the TTL
    let multi_create = 8 + 9 + (create - 8) + 9; // a header per op, and an end marker
    let multi_set_data = 8 + 9 + (set_data - 8) + 9;
    let auth = 8 + 4 + 10 + 4; // type, "digest", the credential's length
    type SizedCall = (
        &'static str,
        usize,
        fn(&Client, usize) -> zklock::Result<()>,
    );
    let calls: [SizedCall; 8] = [
        ("set_data", set_data, |c, n| {
            c.set_data("/d", &vec![1; n], None).map(drop)
        }),
        ("create", create, |c, n| {
            c.create("/c", &vec![2; n], &open(), CreateMode::Persistent)
                .and_then(|p| c.delete(&p, None))
        }),
        ("create_with_stat", create, |c, n| {
            c.create_with_stat("/c", &vec![3; n], &open(), CreateMode::Ephemeral)
                .and_then(|(p, _)| c.delete(&p, None))
        }),
        ("create_ttl", ttl, |c, n| {
            c.create_ttl(
                "/c",
                &vec![4; n],
                &open(),
                CreateMode::PersistentWithTtl,
                Duration::from_secs(60),
            )
            .and_then(|(p, _)| c.delete(&p, None))
        }),
        ("multi create", multi_create, |c, n| {
            c.multi(&[Op::create("/c", vec![5; n], open(), CreateMode::Persistent)])?;
            c.delete("/c", None)
        }),
        ("multi set_data", multi_set_data, |c, n| {
            c.multi(&[Op::set_data("/d", vec![6; n], None)]).map(drop)
        }),
        // The path is user input too: a getData carries a watch flag (1).
        ("get_data", 8 + 4 + 1, |c, n| {
            match c.get_data(&format!("/{}", "p".repeat(n - 1))) {
                Err(Error::NoNode) => Ok(()),
                other => other.map(drop),
            }
        }),
        ("add_auth", auth, |c, n| {
            c.add_auth("digest", format!("u:{}", "p".repeat(n - 2)).as_bytes())
        }),
    ];
    for (name, overhead, call) in calls {
        let n = LIMIT - overhead;
        assert_eq!(call(&c, n), Ok(()), "{name} of {LIMIT} bytes");
        sends_nothing(&c, name, || {
            expect_invalid_argument(name, &over(LIMIT + 1), call(&c, n + 1));
        });
    }
    // Many small ops: 19 bytes per check of "/d", 8 + 9 around them.
    let checks = |k: usize| vec![Op::check("/d", None); k];
    let k = (LIMIT - 17) / 19;
    assert_eq!(c.multi(&checks(k)).map(|r| r.len()), Ok(k));
    sends_nothing(&c, "many small ops", || {
        let k = (LIMIT - 17) / 19 + 1;
        expect_invalid_argument("multi", &over(17 + 19 * k), c.multi(&checks(k)));
    });
    // Lock node data over the limit: the lock is not tried at all.
    let big = vec![9u8; LIMIT];
    let mutex = Mutex::new(&c, "/bi-big")
        .expect("mutex")
        .with_data(big.clone());
    let reentrant = ReentrantMutex::new(&c, "/bi-big")
        .expect("reentrant")
        .with_data(big.clone());
    let rw = RwLock::new(&c, "/bi-big").expect("rwlock").with_data(big);
    let limit = format!(" bytes exceeds the server's {LIMIT}-byte limit (jute.maxbuffer)");
    sends_nothing(&c, "oversized lock data", || {
        for (what, result) in [
            ("Mutex::lock", mutex.lock().map(drop)),
            ("Mutex::try_lock", mutex.try_lock().map(drop)),
            ("ReentrantMutex::lock", reentrant.lock().map(drop)),
            ("RwLock::read", rw.read().map(drop)),
            ("RwLock::try_write_for", rw.try_write_for(BOUND).map(drop)),
        ] {
            match result {
                Err(Error::InvalidArgument(m))
                    if m.starts_with("request of ") && m.ends_with(&limit) => {}
                other => panic!("{what}: {other:?}"),
            }
        }
    });
    assert_eq!(c.exists("/bi-big"), Ok(None));
    assert_eq!(c.state(), zklock::State::Connected);
}

// ---- ACLs, TTLs, modes, credentials ----

#[test]
fn acls_ttls_modes_and_schemes_are_checked_before_sending() {
    let c = client();
    let max_ttl = Duration::from_millis(0xFF_FFFF_FFFF);
    let ttl_range =
        |ttl: Duration| format!("TTL must be between 1 ms and 1099511627775 ms, not {ttl:?}");
    sends_nothing(&c, "ACL, TTL and mode checks", || {
        for mode in [
            CreateMode::Persistent,
            CreateMode::PersistentSequential,
            CreateMode::Ephemeral,
            CreateMode::EphemeralSequential,
            CreateMode::Container,
        ] {
            expect_invalid_argument("create", EMPTY_ACL, c.create("/e", b"", &[], mode));
            expect_invalid_argument(
                "create_with_stat",
                EMPTY_ACL,
                c.create_with_stat("/e", b"", &[], mode),
            );
            expect_invalid_argument(
                "multi create, second op",
                EMPTY_ACL,
                c.multi(&[
                    Op::create("/e1", Vec::new(), open(), mode),
                    Op::create("/e2", Vec::new(), Vec::new(), mode),
                ]),
            );
            // A TTL needs a TTL mode.
            expect_invalid_argument(
                "create_ttl",
                &format!("{mode:?} is not a TTL mode"),
                c.create_ttl("/e", b"", &open(), mode, Duration::from_secs(1)),
            );
        }
        expect_invalid_argument("set_acl", EMPTY_ACL, c.set_acl("/", &[], None));
        expect_invalid_argument("ensure_path", EMPTY_ACL, c.ensure_path("/e/f", &[]));
        expect_invalid_argument("ensure_path of /", EMPTY_ACL, c.ensure_path("/", &[]));
        for mode in [
            CreateMode::PersistentWithTtl,
            CreateMode::PersistentSequentialWithTtl,
        ] {
            expect_invalid_argument(
                "create_ttl",
                EMPTY_ACL,
                c.create_ttl("/e", b"", &[], mode, Duration::from_secs(1)),
            );
            // A TTL mode needs a TTL.
            let needs = format!("{mode:?} needs a TTL: use create_ttl");
            expect_invalid_argument("create", &needs, c.create("/e", b"", &open(), mode));
            expect_invalid_argument(
                "create_with_stat",
                &needs,
                c.create_with_stat("/e", b"", &open(), mode),
            );
            expect_invalid_argument(
                "multi",
                "TTL creates are not supported in multi",
                c.multi(&[Op::create("/e", Vec::new(), open(), mode)]),
            );
            for ttl in [
                Duration::ZERO,
                Duration::from_micros(999),
                max_ttl + Duration::from_millis(1),
                Duration::MAX,
            ] {
                expect_invalid_argument(
                    "create_ttl",
                    &ttl_range(ttl),
                    c.create_ttl("/e", b"", &open(), mode, ttl),
                );
            }
        }
        let no_acl = Mutex::new(&c, "/bi-acl-lock")
            .expect("a mutex")
            .with_acl(Vec::new());
        expect_invalid_argument("Mutex::lock", EMPTY_ACL, no_acl.lock().map(drop));
        expect_invalid_argument("Mutex::try_lock", EMPTY_ACL, no_acl.try_lock().map(drop));
        // Every lock kind takes an ACL, and uses it.
        let no_acl = ReentrantMutex::new(&c, "/bi-acl-lock")
            .expect("a reentrant mutex")
            .with_acl(Vec::new());
        expect_invalid_argument("ReentrantMutex::lock", EMPTY_ACL, no_acl.lock().map(drop));
        let no_acl = RwLock::new(&c, "/bi-acl-lock")
            .expect("a read-write lock")
            .with_acl(Vec::new());
        expect_invalid_argument("RwLock::read", EMPTY_ACL, no_acl.read().map(drop));
        expect_invalid_argument("RwLock::try_write", EMPTY_ACL, no_acl.try_write().map(drop));
        expect_invalid_argument(
            "add_auth",
            "the auth scheme must not be empty",
            c.add_auth("", b"user:password"),
        );
    });
    // Nothing was created meanwhile.
    for path in ["/e", "/e1", "/e2", "/bi-acl-lock"] {
        assert_eq!(c.exists(path), Ok(None), "{path}");
    }
    // The TTL bounds themselves are accepted.
    for ttl in [Duration::from_millis(1), max_ttl] {
        let (path, _) = c
            .create_ttl(
                "/bi-ttl-",
                b"",
                &open(),
                CreateMode::PersistentSequentialWithTtl,
                ttl,
            )
            .unwrap_or_else(|e| panic!("TTL {ttl:?}: {e}"));
        c.delete(&path, None).expect("delete");
    }
}

// ---- Locks: deadlines ----

#[test]
fn a_zero_timeout_or_a_past_deadline_is_one_try_that_leaves_no_node() {
    let holder = client();
    let c = client();
    let past = Instant::now();
    let mutex = holder.mutex("/bi-deadline-mutex").expect("mutex");
    let held = mutex.lock().expect("the holder locks");
    let contender = c.mutex("/bi-deadline-mutex").expect("mutex");
    let rw = RwLock::new(&holder, "/bi-deadline-rw").expect("rwlock");
    let reading = rw.read().expect("the holder reads");
    let other_rw = RwLock::new(&c, "/bi-deadline-rw").expect("rwlock");
    let reentrant = ReentrantMutex::new(&holder, "/bi-deadline-reentrant").expect("reentrant");
    let reentrant_held = reentrant.lock().expect("the holder locks");
    let other_reentrant = ReentrantMutex::new(&c, "/bi-deadline-reentrant").expect("reentrant");

    type Try<'a> = (
        &'static str,
        &'a str,
        Box<dyn Fn() -> zklock::Result<bool> + 'a>,
    );
    let tries: Vec<Try<'_>> = vec![
        (
            "Mutex::try_lock_for(0)",
            "/bi-deadline-mutex",
            Box::new(|| contender.try_lock_for(Duration::ZERO).map(|g| g.is_some())),
        ),
        (
            "Mutex::try_lock_until(past)",
            "/bi-deadline-mutex",
            Box::new(|| contender.try_lock_until(past).map(|g| g.is_some())),
        ),
        (
            "RwLock::try_write_for(0)",
            "/bi-deadline-rw",
            Box::new(|| other_rw.try_write_for(Duration::ZERO).map(|g| g.is_some())),
        ),
        (
            "RwLock::try_write_until(past)",
            "/bi-deadline-rw",
            Box::new(|| other_rw.try_write_until(past).map(|g| g.is_some())),
        ),
        (
            "ReentrantMutex::try_lock_for(0)",
            "/bi-deadline-reentrant",
            Box::new(|| {
                other_reentrant
                    .try_lock_for(Duration::ZERO)
                    .map(|g| g.is_some())
            }),
        ),
        (
            "ReentrantMutex::try_lock_until(past)",
            "/bi-deadline-reentrant",
            Box::new(|| other_reentrant.try_lock_until(past).map(|g| g.is_some())),
        ),
    ];
    for (what, dir, attempt) in &tries {
        let before = received(&c);
        let started = Instant::now();
        assert_eq!(attempt(), Ok(false), "{what}");
        assert!(started.elapsed() < Duration::from_secs(2), "{what} waited");
        // Only the holder's node is left: the contender's went with a
        // delete that precedes any later request of its client.
        assert_eq!(c.get_children(dir).map(|c| c.len()), Ok(1), "{what}");
        // One try: a create and a listing, sent together, then the delete
        // of the node, and the listing just made; no watch was set.
        assert_eq!(received(&c) - before, 4, "{what}: requests");
    }

    // Free (released and confirmed), a single try acquires.
    held.unlock().unwrap();
    reading.unlock().unwrap();
    reentrant_held.unlock().unwrap();
    for (what, _, attempt) in &tries {
        let started = Instant::now();
        assert_eq!(attempt(), Ok(true), "{what}");
        assert!(started.elapsed() < Duration::from_secs(2), "{what} waited");
    }
    assert_eq!(other_rw.try_read_until(past).map(|g| g.is_some()), Ok(true));
}

// ---- Multi ----

#[test]
fn a_multi_with_one_bad_op_anywhere_sends_nothing_and_creates_nothing() {
    let c = client();
    let observer = client();
    let create = |p: &str| Op::create(p, Vec::new(), open(), CreateMode::Persistent);
    let cases: Vec<(Vec<Op>, Error)> = vec![
        (
            vec![create("/bi-m1"), create("/bi-m1/x/")],
            Error::InvalidPath {
                path: "/bi-m1/x/".into(),
                reason: TRAILING,
            },
        ),
        (
            vec![create("bi-m1"), create("/bi-m2")],
            Error::InvalidPath {
                path: "bi-m1".into(),
                reason: RELATIVE,
            },
        ),
        (
            vec![
                create("/bi-m1"),
                Op::set_data("/bi-m1", b"x".to_vec(), None),
                Op::check("/bi-m1/\u{1}", Some(0)),
                create("/bi-m2"),
            ],
            Error::InvalidPath {
                path: "/bi-m1/\u{1}".into(),
                reason: CONTROL,
            },
        ),
        (
            vec![create("/bi-m1"), Op::delete("/bi-m1/..", None)],
            Error::InvalidPath {
                path: "/bi-m1/..".into(),
                reason: DOT_DOT,
            },
        ),
        (
            vec![
                create("/bi-m1"),
                Op::create("/bi-m2", Vec::new(), Vec::new(), CreateMode::Persistent),
            ],
            Error::InvalidArgument(EMPTY_ACL.into()),
        ),
        (
            vec![
                create("/bi-m1"),
                Op::create("/bi-m2", Vec::new(), open(), CreateMode::PersistentWithTtl),
            ],
            Error::InvalidArgument("TTL creates are not supported in multi".into()),
        ),
    ];
    sends_nothing(&c, "multis", || {
        for (ops, error) in &cases {
            assert_eq!(c.multi(ops).map(drop), Err(error.clone()), "{ops:?}");
        }
        assert_eq!(
            c.multi_read(&[ReadOp::GetChildren("/".into()), ReadOp::GetData("".into())])
                .map(drop),
            Err(Error::InvalidPath {
                path: String::new(),
                reason: EMPTY,
            })
        );
    });
    for path in ["/bi-m1", "/bi-m2"] {
        assert_eq!(observer.exists(path), Ok(None), "{path}");
    }
    // An empty multi needs no round trip.
    sends_nothing(&c, "empty multi", || {
        assert_eq!(c.multi(&[]), Ok(Vec::new()));
        assert_eq!(c.multi_read(&[]), Ok(Vec::new()));
    });
}
