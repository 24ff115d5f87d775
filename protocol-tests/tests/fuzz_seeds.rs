//! Seed corpora for the fuzz targets in `protocol_tests::targets`.
//!
//! Seeds come from two sources: records encoded with `zklock::proto` itself
//! (`seed-*` files), and the golden fixtures that the official Java classes
//! wrote into `protocol-tests/fixtures/` (`fixture-*` files). Each is wrapped
//! the way its target expects (reply header, opcode byte, frame prefix).
//!
//! Regenerate `fuzz/corpus/<target>/seed-*` and `fixture-*` with
//!
//! ```text
//! cargo test -p protocol-tests --test fuzz_seeds -- --ignored
//! ```
//!
//! Other files in the corpus directories (a minimized libFuzzer corpus) are
//! left alone. The non-ignored test checks that the seeds still exercise what
//! they were built for.

use std::fs;
use std::path::{Path, PathBuf};

use std::time::Instant;

use protocol_tests::targets::{
    self, session_new, settle_joint, submit_batched_reads, submit_batched_writes, submit_extras,
    FuzzSession, MAX_FRAMES, REPLY_OPS, SESSION_CAN_BE_READ_ONLY, SESSION_CHROOT, SESSION_CLOSE,
    SESSION_JOINT_TOKEN, SESSION_NEW_ON_EXPIRY, SESSION_RAW_CHUNKS, SESSION_REQUEST_TIMEOUT,
    SESSION_RESUME, SESSION_SMALL_LIMITS, SMALL_MAX_FRAME, TARGETS,
};
use zklock::proto::{
    perms, read_notification, read_reply_header, split_frame, write_frame, Acl, ClientInfo,
    ConnectResponse, Create2Response, CreateResponse, ErrorResponse, EventType, ExistsResponse,
    GetAclResponse, GetAllChildrenNumberResponse, GetChildren2Response, GetChildrenResponse,
    GetDataResponse, GetEphemeralsResponse, Id, KeeperState, MultiHeader, MultiOp, MultiRequest,
    MultiResponse, OpCode, OpResult, Record, ReplyHeader, RequestHeader, Response, SetAclResponse,
    SetDataResponse, Stat, SyncResponse, WatcherEvent, WhoAmIResponse, Writer, AUTH_XID,
    DEFAULT_MAX_FRAME, NOTIFICATION_XID, PING_XID,
};

/// One corpus file.
struct Seed {
    target: &'static str,
    name: String,
    bytes: Vec<u8>,
    /// Whether the seed must be accepted by the decoder its target exercises
    /// (the constructed seeds that model valid server output); seeds of
    /// malformed input and fixture-derived seeds are not checked.
    valid: bool,
}

fn seed(target: &'static str, name: &str, bytes: Vec<u8>, valid: bool) -> Seed {
    Seed {
        target,
        name: format!("seed-{name}"),
        bytes,
        valid,
    }
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------
// Representative records
// ---------------------------------------------------------------------------

const SESSION: i64 = 0x1000_0a2b_3c4d_0000;
const ZXID: i64 = 0x1_0000_0005;

fn stat() -> Stat {
    Stat {
        czxid: 0x1_0000_0002,
        mzxid: ZXID,
        ctime: 1_700_000_000_000,
        mtime: 1_700_000_123_456,
        version: 3,
        cversion: 7,
        aversion: 1,
        ephemeral_owner: SESSION,
        data_length: 5,
        num_children: 0,
        pzxid: 0x1_0000_0004,
    }
}

fn container_stat() -> Stat {
    Stat {
        ephemeral_owner: i64::MIN,
        num_children: 2,
        data_length: 0,
        ..stat()
    }
}

fn password() -> Vec<u8> {
    (0u8..16).map(|i| i.wrapping_mul(37) ^ 0x5a).collect()
}

fn connect(read_only: bool) -> ConnectResponse {
    ConnectResponse {
        protocol_version: 0,
        timeout_ms: 30_000,
        session_id: SESSION,
        passwd: password(),
        read_only,
    }
}

/// The handshake of the session `session_new` resumes with
/// `SESSION_RESUME`: a resume must be granted for that very session.
/// A handshake answer that says the session is gone.
fn expired() -> ConnectResponse {
    ConnectResponse {
        timeout_ms: 0,
        session_id: 0,
        passwd: vec![0; 16],
        ..connect(false)
    }
}

fn resumed(read_only: bool) -> ConnectResponse {
    ConnectResponse {
        passwd: (1..=16).collect(),
        ..connect(read_only)
    }
}

fn header(xid: i32, zxid: i64, err: i32) -> Vec<u8> {
    ReplyHeader { xid, zxid, err }.to_bytes()
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// The index byte that makes the `reply` target pick `op`.
fn op_byte(op: OpCode) -> u8 {
    let idx = REPLY_OPS
        .iter()
        .position(|&o| o == op)
        .expect("a client op");
    u8::try_from(idx).unwrap()
}

/// An xid that makes the `stream` target treat a reply as answering `op`.
fn xid_for(op: OpCode) -> i32 {
    let idx = REPLY_OPS
        .iter()
        .position(|&o| o == op)
        .expect("a client op");
    i32::try_from(idx + REPLY_OPS.len()).unwrap()
}

/// A `reply` input: opcode byte, reply header, body.
fn reply_input(op: OpCode, xid: i32, err: i32, body: &[u8]) -> Vec<u8> {
    let mut out = vec![op_byte(op)];
    out.extend(header(xid, ZXID, err));
    out.extend_from_slice(body);
    out
}

/// A jute string written as the Java client writes it: each UTF-16 unit on
/// its own, so supplementary characters take 6 bytes (CESU-8).
fn cesu8(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for unit in s.encode_utf16() {
        let c = u32::from(unit);
        match c {
            0..=0x7f => out.push(c as u8),
            0x80..=0x7ff => out.extend([0xc0 | (c >> 6) as u8, 0x80 | (c & 0x3f) as u8]),
            _ => out.extend([
                0xe0 | (c >> 12) as u8,
                0x80 | ((c >> 6) & 0x3f) as u8,
                0x80 | (c & 0x3f) as u8,
            ]),
        }
    }
    out
}

fn writes_ok() -> MultiResponse {
    MultiResponse {
        results: vec![
            OpResult::Create(CreateResponse {
                path: "/locks/lock-0000000007".into(),
            }),
            OpResult::Create2(Create2Response {
                path: "/app/container".into(),
                stat: container_stat(),
            }),
            OpResult::Delete,
            OpResult::SetData(SetDataResponse { stat: stat() }),
            OpResult::Check,
        ],
    }
}

fn failed_multi() -> MultiResponse {
    let error = |err| OpResult::Error(ErrorResponse { err });
    MultiResponse {
        results: vec![error(0), error(-101), error(-2)],
    }
}

fn multi_read() -> MultiResponse {
    MultiResponse {
        results: vec![
            OpResult::GetData(GetDataResponse {
                data: Some(b"config=1".to_vec()),
                stat: stat(),
            }),
            OpResult::GetChildren(GetChildrenResponse {
                children: vec!["lock-0000000001".into(), "lock-0000000002".into()],
            }),
            OpResult::Error(ErrorResponse { err: -101 }),
            OpResult::GetData(GetDataResponse {
                data: None,
                stat: Stat::default(),
            }),
        ],
    }
}

/// A multi body whose ignored header fields carry values the writer never
/// produces: an error header `err` that differs from the body, a terminator
/// with type 0, done byte 2 and err 0.
fn odd_multi_bytes() -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = Writer::new(&mut buf);
    MultiHeader {
        op_type: -1,
        done: false,
        err: 7,
    }
    .write(&mut w);
    ErrorResponse { err: -101 }.write(&mut w);
    MultiHeader {
        op_type: 2,
        done: false,
        err: -5,
    }
    .write(&mut w);
    w.write_i32(0);
    w.write_u8(2);
    w.write_i32(0);
    buf
}

fn event(event_type: EventType, path: &str) -> WatcherEvent {
    WatcherEvent {
        event_type,
        state: KeeperState::SyncConnected,
        path: path.into(),
    }
}

// ---------------------------------------------------------------------------
// Constructed seeds
// ---------------------------------------------------------------------------

fn constructed() -> Vec<Seed> {
    let mut seeds = Vec::new();

    // connect_response
    let t = "connect_response";
    seeds.push(seed(t, "new-session", connect(false).to_bytes(), true));
    seeds.push(seed(t, "read-only", connect(true).to_bytes(), true));
    let expired = ConnectResponse {
        timeout_ms: 0,
        session_id: 0,
        passwd: vec![0; 16],
        ..connect(false)
    };
    seeds.push(seed(t, "expired", expired.to_bytes(), true));
    let mut no_ro = connect(false).to_bytes();
    no_ro.pop();
    seeds.push(seed(t, "without-read-only", no_ro, true));
    let mut ro2 = connect(true).to_bytes();
    *ro2.last_mut().unwrap() = 2;
    seeds.push(seed(t, "read-only-byte-2", ro2, true));
    let empty_pw = ConnectResponse {
        passwd: Vec::new(),
        ..connect(false)
    };
    seeds.push(seed(t, "empty-passwd", empty_pw.to_bytes(), true));
    let mut truncated = connect(false).to_bytes();
    truncated.truncate(30);
    seeds.push(seed(t, "truncated", truncated, false));
    let mut trailing = connect(true).to_bytes();
    trailing.push(0);
    seeds.push(seed(t, "trailing-byte", trailing, false));

    // reply
    let t = "reply";
    let stat_body = stat().to_bytes();
    let mut replies: Vec<(&str, OpCode, Vec<u8>)> = vec![
        (
            "create",
            OpCode::Create,
            CreateResponse {
                path: "/locks/lock-0000000007".into(),
            }
            .to_bytes(),
        ),
        (
            "create2",
            OpCode::Create2,
            Create2Response {
                path: "/locks/lock-0000000008".into(),
                stat: stat(),
            }
            .to_bytes(),
        ),
        (
            "create-container",
            OpCode::CreateContainer,
            Create2Response {
                path: "/app/container".into(),
                stat: container_stat(),
            }
            .to_bytes(),
        ),
        (
            "create-ttl",
            OpCode::CreateTtl,
            Create2Response {
                path: "/app/ttl".into(),
                stat: Stat {
                    ephemeral_owner: 0xFF00_0000_0000_EA60_u64 as i64,
                    ..stat()
                },
            }
            .to_bytes(),
        ),
        ("delete", OpCode::Delete, Vec::new()),
        (
            "exists",
            OpCode::Exists,
            ExistsResponse { stat: stat() }.to_bytes(),
        ),
        (
            "get-data",
            OpCode::GetData,
            GetDataResponse {
                data: Some(b"hello".to_vec()),
                stat: stat(),
            }
            .to_bytes(),
        ),
        (
            "get-data-null",
            OpCode::GetData,
            GetDataResponse {
                data: None,
                stat: stat(),
            }
            .to_bytes(),
        ),
        (
            "get-data-empty",
            OpCode::GetData,
            GetDataResponse {
                data: Some(Vec::new()),
                stat: Stat::default(),
            }
            .to_bytes(),
        ),
        (
            "set-data",
            OpCode::SetData,
            SetDataResponse { stat: stat() }.to_bytes(),
        ),
        (
            "get-acl",
            OpCode::GetAcl,
            GetAclResponse {
                acl: vec![
                    Acl {
                        perms: perms::ALL,
                        id: Id::new("world", "anyone"),
                    },
                    Acl {
                        perms: perms::READ | perms::ADMIN,
                        id: Id::new("digest", "user:x1nq8J5GOJVPY6zgBh3f1UoaxVA="),
                    },
                    Acl {
                        perms: perms::READ,
                        id: Id::new("ip", "10.0.0.0/8"),
                    },
                ],
                stat: stat(),
            }
            .to_bytes(),
        ),
        (
            "set-acl",
            OpCode::SetAcl,
            SetAclResponse { stat: stat() }.to_bytes(),
        ),
        (
            "get-children",
            OpCode::GetChildren,
            GetChildrenResponse {
                children: vec!["lock-0000000001".into(), "lock-0000000002".into()],
            }
            .to_bytes(),
        ),
        (
            "get-children-empty",
            OpCode::GetChildren,
            GetChildrenResponse {
                children: Vec::new(),
            }
            .to_bytes(),
        ),
        (
            "get-children2",
            OpCode::GetChildren2,
            GetChildren2Response {
                children: vec!["a".into(), "zoo\u{e9}".into()],
                stat: container_stat(),
            }
            .to_bytes(),
        ),
        (
            "sync",
            OpCode::Sync,
            SyncResponse {
                path: "/app".into(),
            }
            .to_bytes(),
        ),
        ("check", OpCode::Check, Vec::new()),
        ("multi-ok", OpCode::Multi, writes_ok().to_bytes()),
        ("multi-failed", OpCode::Multi, failed_multi().to_bytes()),
        ("multi-read", OpCode::MultiRead, multi_read().to_bytes()),
        (
            "reconfig",
            OpCode::Reconfig,
            GetDataResponse {
                data: Some(b"server.1=zk1:2888:3888:participant;2181\nversion=100000000".to_vec()),
                stat: stat(),
            }
            .to_bytes(),
        ),
        ("check-watches", OpCode::CheckWatches, Vec::new()),
        ("remove-watches", OpCode::RemoveWatches, Vec::new()),
        ("set-watches", OpCode::SetWatches, Vec::new()),
        ("set-watches2", OpCode::SetWatches2, Vec::new()),
        (
            "get-ephemerals",
            OpCode::GetEphemerals,
            GetEphemeralsResponse {
                ephemerals: vec!["/locks/lock-0000000007".into(), "/app/leader".into()],
            }
            .to_bytes(),
        ),
        (
            "get-all-children-number",
            OpCode::GetAllChildrenNumber,
            GetAllChildrenNumberResponse { total_number: 42 }.to_bytes(),
        ),
        (
            "add-watch",
            OpCode::AddWatch,
            ErrorResponse { err: 0 }.to_bytes(),
        ),
        (
            "who-am-i",
            OpCode::WhoAmI,
            WhoAmIResponse {
                client_info: vec![
                    ClientInfo {
                        auth_scheme: "ip".into(),
                        user: "127.0.0.1".into(),
                    },
                    ClientInfo {
                        auth_scheme: "digest".into(),
                        user: "user".into(),
                    },
                ],
            }
            .to_bytes(),
        ),
        ("close-session", OpCode::CloseSession, Vec::new()),
    ];
    // getACL with an id the Java client wrote as CESU-8.
    let mut cesu_acl = Vec::new();
    {
        let mut w = Writer::new(&mut cesu_acl);
        w.write_i32(1);
        w.write_i32(perms::ALL);
        w.write_str("digest");
        w.write_buffer(&cesu8("us\u{1F600}r:hash"));
        stat().write(&mut w);
    }
    replies.push(("get-acl-cesu8", OpCode::GetAcl, cesu_acl));
    for (name, op, body) in replies {
        seeds.push(seed(t, name, reply_input(op, 7, 0, &body), true));
    }
    seeds.push(seed(
        t,
        "ping",
        reply_input(OpCode::Ping, PING_XID, 0, &[]),
        true,
    ));
    seeds.push(seed(
        t,
        "auth",
        reply_input(OpCode::Auth, AUTH_XID, 0, &[]),
        true,
    ));
    seeds.push(seed(
        t,
        "exists-no-node",
        reply_input(OpCode::Exists, 9, -101, &[]),
        true,
    ));
    seeds.push(seed(
        t,
        "sasl-token",
        reply_input(OpCode::Sasl, 3, 0, &[0, 0, 0, 4, 1, 2, 3, 4]),
        false,
    ));
    seeds.push(seed(
        t,
        "exists-truncated-stat",
        reply_input(OpCode::Exists, 7, 0, &stat_body[..60]),
        false,
    ));
    seeds.push(seed(
        t,
        "get-children-huge-count",
        reply_input(OpCode::GetChildren, 7, 0, &[0x7f, 0xff, 0xff, 0xff, 0, 0]),
        false,
    ));

    // watcher_event
    let t = "watcher_event";
    let notification = |zxid: i64, ev: &WatcherEvent| {
        let mut out = header(NOTIFICATION_XID, zxid, 0);
        out.extend(ev.to_bytes());
        out
    };
    let events = [
        ("node-created", event(EventType::NodeCreated, "/app/config")),
        (
            "node-deleted",
            event(EventType::NodeDeleted, "/locks/lock-0000000007"),
        ),
        (
            "node-data-changed",
            event(EventType::NodeDataChanged, "/app/z\u{e9}"),
        ),
        (
            "node-children-changed",
            event(EventType::NodeChildrenChanged, "/locks"),
        ),
        ("root", event(EventType::NodeDataChanged, "/")),
    ];
    for (name, ev) in &events {
        seeds.push(seed(t, name, notification(-1, ev), true));
    }
    seeds.push(seed(
        t,
        "zxid-3.9",
        notification(ZXID, &event(EventType::NodeCreated, "/app")),
        true,
    ));
    let mut cesu_event = header(NOTIFICATION_XID, -1, 0);
    {
        let mut w = Writer::new(&mut cesu_event);
        w.write_i32(EventType::NodeCreated.code());
        w.write_i32(KeeperState::SyncConnected.code());
        w.write_buffer(&cesu8("/\u{1F512}"));
    }
    seeds.push(seed(t, "cesu8-path", cesu_event, true));
    let mut not_notification = header(5, ZXID, 0);
    not_notification.extend(event(EventType::NodeCreated, "/a").to_bytes());
    seeds.push(seed(t, "wrong-xid", not_notification, false));
    let mut unknown_type = header(NOTIFICATION_XID, -1, 0);
    unknown_type.extend([0, 0, 0, 9, 0, 0, 0, 3, 0, 0, 0, 0]);
    seeds.push(seed(t, "unknown-type", unknown_type, false));

    // multi_response
    let t = "multi_response";
    seeds.push(seed(t, "writes-ok", writes_ok().to_bytes(), true));
    seeds.push(seed(t, "failed", failed_multi().to_bytes(), true));
    seeds.push(seed(t, "read", multi_read().to_bytes(), true));
    seeds.push(seed(t, "empty", MultiResponse::default().to_bytes(), true));
    seeds.push(seed(t, "ignored-header-fields", odd_multi_bytes(), true));
    let mut no_terminator = writes_ok().to_bytes();
    no_terminator.truncate(no_terminator.len() - 9);
    seeds.push(seed(t, "no-terminator", no_terminator, false));

    // frame_split and stream: a session's worth of server frames.
    let session_frames = [
        frame(&connect(false).to_bytes()),
        frame(&header(PING_XID, ZXID, 0)),
        frame(&notification(-1, &events[0].1)),
        frame(
            &[
                header(xid_for(OpCode::GetData), ZXID, 0),
                GetDataResponse {
                    data: Some(b"hello".to_vec()),
                    stat: stat(),
                }
                .to_bytes(),
            ]
            .concat(),
        ),
        frame(&header(xid_for(OpCode::Exists), ZXID, -101)),
        frame(
            &[
                header(xid_for(OpCode::Multi), ZXID, 0),
                writes_ok().to_bytes(),
            ]
            .concat(),
        ),
        frame(
            &[
                header(xid_for(OpCode::GetChildren), ZXID, 0),
                GetChildrenResponse {
                    children: vec!["lock-0000000001".into()],
                }
                .to_bytes(),
            ]
            .concat(),
        ),
        frame(&header(AUTH_XID, 0, 0)),
    ]
    .concat();
    let default_limit = max_frame_byte(DEFAULT_MAX_FRAME);
    let t = "frame_split";
    let with_limit = |limit: usize, stream: &[u8]| {
        let mut out = vec![max_frame_byte(limit)];
        out.extend_from_slice(stream);
        out
    };
    seeds.push(seed(
        t,
        "session",
        with_limit(DEFAULT_MAX_FRAME, &session_frames),
        true,
    ));
    seeds.push(seed(
        t,
        "session-limit-16",
        with_limit(16, &session_frames),
        true,
    ));
    // The same stream with other chunkings of the simulated socket reads.
    for k in 1..4u8 {
        let mut input = with_limit(DEFAULT_MAX_FRAME, &session_frames);
        input[0] = default_limit + k * 8 * MAX_FRAMES.len() as u8;
        seeds.push(seed(t, &format!("session-chunking-{k}"), input, true));
    }
    seeds.push(seed(
        t,
        "empty-frames",
        with_limit(0, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9]),
        true,
    ));
    seeds.push(seed(
        t,
        "partial",
        with_limit(4096, &[0, 0, 0, 10, 1, 2, 3]),
        false,
    ));
    seeds.push(seed(
        t,
        "negative-length",
        with_limit(4096, &[0, 0, 0, 1, 7, 0xff, 0xff, 0xff, 0xfe, 1]),
        true,
    ));
    seeds.push(seed(
        t,
        "too-large",
        with_limit(1, &[0, 0, 0, 1, 7, 0, 0, 0, 2, 1, 2]),
        true,
    ));
    seeds.push(seed(
        t,
        "max-length-unlimited",
        with_limit(usize::MAX, &[0x7f, 0xff, 0xff, 0xff, 1, 2, 3]),
        false,
    ));

    let t = "stream";
    seeds.push(seed(t, "session", session_frames.clone(), true));
    seeds.push(seed(
        t,
        "expired",
        frame(
            &ConnectResponse {
                timeout_ms: 0,
                session_id: 0,
                passwd: vec![0; 16],
                ..connect(false)
            }
            .to_bytes(),
        ),
        true,
    ));
    let mut ro_session = frame(&connect(true).to_bytes());
    ro_session.extend(frame(&header(PING_XID, ZXID, 0)));
    ro_session.extend(frame(&[header(7, ZXID, 0), vec![1, 2]].concat()));
    seeds.push(seed(t, "read-only-then-garbage", ro_session, false));

    seeds
}

fn max_frame_byte(limit: usize) -> u8 {
    let idx = MAX_FRAMES.iter().position(|&m| m == limit).unwrap();
    u8::try_from(idx).unwrap()
}

// ---------------------------------------------------------------------------
// Seeds from the golden fixtures
// ---------------------------------------------------------------------------

/// The op whose reply body a fixture holds.
fn fixture_reply_op(name: &str) -> Option<OpCode> {
    const TABLE: &[(&str, OpCode)] = &[
        ("create2_response_container", OpCode::CreateContainer),
        ("create2_response_ttl", OpCode::CreateTtl),
        ("create2_response", OpCode::Create2),
        ("create_response", OpCode::Create),
        ("exists_response", OpCode::Exists),
        ("get_data_response", OpCode::GetData),
        ("set_data_response", OpCode::SetData),
        ("get_acl_response", OpCode::GetAcl),
        ("set_acl_response", OpCode::SetAcl),
        ("get_children2_response", OpCode::GetChildren2),
        ("get_children_response", OpCode::GetChildren),
        ("sync_response", OpCode::Sync),
        ("get_ephemerals_response", OpCode::GetEphemerals),
        (
            "get_all_children_number_response",
            OpCode::GetAllChildrenNumber,
        ),
        ("who_am_i_response", OpCode::WhoAmI),
        ("error_response", OpCode::AddWatch),
        ("multi_response_read", OpCode::MultiRead),
        ("multi_response", OpCode::Multi),
    ];
    TABLE
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|&(_, op)| op)
}

fn read_fixtures(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut fixtures: Vec<(String, Vec<u8>)> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
            (name, fs::read(&p).unwrap())
        })
        .collect();
    fixtures.sort();
    fixtures
}

fn from_fixtures() -> Vec<Seed> {
    let fixtures = read_fixtures(&manifest_dir().join("fixtures"));
    let get = |name: &str| {
        fixtures
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
    };
    let fixture = |target, name: &str, bytes| Seed {
        target,
        name: format!("fixture-{name}"),
        bytes,
        valid: false,
    };
    let notification_header =
        get("reply_header_notification").unwrap_or_else(|| header(NOTIFICATION_XID, -1, 0));
    let stat_bytes = get("stat").unwrap_or_else(|| stat().to_bytes());

    let mut seeds = Vec::new();
    for (name, bytes) in &fixtures {
        let name = name.as_str();
        if name.starts_with("connect_response") {
            seeds.push(fixture("connect_response", name, bytes.clone()));
        }
        if name.starts_with("multi_response") {
            seeds.push(fixture("multi_response", name, bytes.clone()));
        }
        if let Some(op) = fixture_reply_op(name) {
            seeds.push(fixture("reply", name, reply_input(op, 7, 0, bytes)));
        }
        if name.starts_with("watcher_event") {
            let input = [notification_header.as_slice(), bytes].concat();
            seeds.push(fixture("watcher_event", name, input));
        }
        if name.starts_with("stat") {
            // A Stat is the whole body of an exists reply.
            seeds.push(fixture(
                "reply",
                &format!("exists_{name}"),
                reply_input(OpCode::Exists, 7, 0, bytes),
            ));
        }
        if name.starts_with("acl_") {
            // One ACL entry as the whole list of a getACL reply.
            let body = [&[0, 0, 0, 1][..], bytes, &stat_bytes].concat();
            seeds.push(fixture(
                "reply",
                &format!("get_acl_{name}"),
                reply_input(OpCode::GetAcl, 7, 0, &body),
            ));
        }
        if name.starts_with("client_info") {
            let body = [&[0, 0, 0, 1][..], bytes].concat();
            seeds.push(fixture(
                "reply",
                &format!("who_am_i_{name}"),
                reply_input(OpCode::WhoAmI, 7, 0, &body),
            ));
        }
        if name.starts_with("reply_header") {
            let payload = bytes.as_slice();
            if name == "reply_header_notification" {
                seeds.push(fixture("watcher_event", name, payload.to_vec()));
            } else {
                let op = if name == "reply_header_ping" {
                    OpCode::Ping
                } else {
                    OpCode::Delete
                };
                let input = [&[op_byte(op)][..], payload].concat();
                seeds.push(fixture("reply", name, input));
            }
        }
    }

    // A session's worth of Java-written frames, for the stream targets.
    let mut session = Vec::new();
    let body = |name: &str| get(name).unwrap_or_default();
    if let Some(connect) = get("connect_response_new_session") {
        let header_for = |op| header(xid_for(op), ZXID, 0);
        let frames: [Vec<u8>; 7] = [
            connect,
            get("reply_header_ping").unwrap_or_default(),
            [
                notification_header.clone(),
                body("watcher_event_node_created"),
            ]
            .concat(),
            [header_for(OpCode::GetData), body("get_data_response")].concat(),
            [header_for(OpCode::Multi), body("multi_response_failed")].concat(),
            [
                header_for(OpCode::GetChildren2),
                body("get_children2_response"),
            ]
            .concat(),
            [header_for(OpCode::Create2), body("create2_response")].concat(),
        ];
        for f in &frames {
            write_frame(&mut session, &RawPayload(f.clone()));
        }
        seeds.push(fixture("stream", "session", session.clone()));
        let limit = max_frame_byte(DEFAULT_MAX_FRAME);
        seeds.push(fixture(
            "frame_split",
            "session",
            [&[limit][..], &session].concat(),
        ));
    }
    seeds
}

/// Raw bytes as a record, for `write_frame`.
struct RawPayload(Vec<u8>);

impl Record for RawPayload {
    const MIN_SIZE: usize = 0;
    fn write(&self, w: &mut Writer<'_>) {
        for &b in &self.0 {
            w.write_u8(b);
        }
    }
    fn read(r: &mut zklock::proto::Reader<'_>) -> Result<Self, zklock::proto::DecodeError> {
        Ok(RawPayload(r.take(r.remaining())?.to_vec()))
    }
}

// ---------------------------------------------------------------------------
// Session seeds: a scripted server answering what the session sends
// ---------------------------------------------------------------------------

/// The body of a successful reply to `op`.
fn sample_body(op: OpCode) -> Vec<u8> {
    match op {
        OpCode::Create => CreateResponse {
            path: "/locks/lock-0000000007".into(),
        }
        .to_bytes(),
        OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => Create2Response {
            path: "/locks/lock-0000000008".into(),
            stat: stat(),
        }
        .to_bytes(),
        OpCode::Exists => ExistsResponse { stat: stat() }.to_bytes(),
        OpCode::GetData | OpCode::Reconfig => GetDataResponse {
            data: Some(b"hello".to_vec()),
            stat: stat(),
        }
        .to_bytes(),
        OpCode::SetData => SetDataResponse { stat: stat() }.to_bytes(),
        OpCode::GetAcl => GetAclResponse {
            acl: Acl::open_unsafe(),
            stat: stat(),
        }
        .to_bytes(),
        OpCode::SetAcl => SetAclResponse { stat: stat() }.to_bytes(),
        OpCode::GetChildren => GetChildrenResponse {
            children: vec!["a".into(), "b".into()],
        }
        .to_bytes(),
        OpCode::GetChildren2 => GetChildren2Response {
            children: vec!["d".into()],
            stat: container_stat(),
        }
        .to_bytes(),
        OpCode::Sync => SyncResponse { path: "/".into() }.to_bytes(),
        OpCode::Multi => MultiResponse {
            results: vec![
                OpResult::Create(CreateResponse { path: "/m".into() }),
                OpResult::Check,
                OpResult::Delete,
            ],
        }
        .to_bytes(),
        OpCode::MultiRead => MultiResponse {
            results: vec![
                OpResult::GetData(GetDataResponse {
                    data: None,
                    stat: stat(),
                }),
                OpResult::GetChildren(GetChildrenResponse {
                    children: vec!["a".into()],
                }),
            ],
        }
        .to_bytes(),
        OpCode::AddWatch => ErrorResponse { err: 0 }.to_bytes(),
        OpCode::GetEphemerals => GetEphemeralsResponse {
            ephemerals: vec!["/locks/lock-0000000007".into()],
        }
        .to_bytes(),
        OpCode::GetAllChildrenNumber => GetAllChildrenNumberResponse { total_number: 4 }.to_bytes(),
        OpCode::WhoAmI => WhoAmIResponse {
            client_info: vec![ClientInfo {
                auth_scheme: "digest".into(),
                user: "user".into(),
            }],
        }
        .to_bytes(),
        _ => Vec::new(),
    }
}

/// Builds a `session` input by playing the server: every frame is appended
/// to the stream and fed to a session driven exactly as the target drives
/// it frame by frame (no chunking, no clock), so the xids it sends back are
/// the ones the target's session will send.
struct Driver {
    flags: u8,
    now: Instant,
    session: FuzzSession,
    stream: Vec<u8>,
    closed: bool,
    batched: bool,
    zxid: i64,
    /// The ops of each multiRead sent, by xid, to answer it in kind.
    read_ops: Vec<(i32, Vec<OpCode>)>,
    /// The ops of each multi sent, by xid, to answer it in kind.
    write_ops: Vec<(i32, Vec<OpCode>)>,
}

impl Driver {
    fn new(flags: u8) -> Driver {
        assert_eq!(flags & SESSION_RAW_CHUNKS, 0);
        let now = Instant::now();
        let (mut session, _) = session_new(flags, now);
        session.poll_transmit(&mut Vec::new());
        Driver {
            flags,
            now,
            session,
            stream: Vec::new(),
            closed: false,
            batched: false,
            zxid: 0x1_0000_0000,
            read_ops: Vec::new(),
            write_ops: Vec::new(),
        }
    }

    /// Sends one frame, as the target delivers it.
    fn send(&mut self, payload: &[u8]) {
        let framed = frame(payload);
        self.stream.extend_from_slice(&framed);
        self.session.handle_bytes(self.now, &framed);
        self.drain();
        // As the target does: reads and writes batched, then the other
        // calls, once, after the first handshake.
        if !self.batched && self.session.state().is_connected() {
            self.batched = true;
            submit_batched_reads(&mut self.session, self.flags, self.now);
            submit_batched_writes(&mut self.session, self.flags, self.now);
            submit_extras(&mut self.session, self.flags, self.now);
        }
        self.session.handle_timeout(self.now);
        self.session.send_due_deletes(self.now);
        self.drain();
        if self.flags & SESSION_CLOSE != 0 && !self.closed && self.session.state().is_connected() {
            self.closed = true;
            self.session.close(self.now);
        }
        if self.session.poll_disconnect().is_some() {
            self.session.handle_disconnected(self.now);
            if !self.session.state().is_terminal() {
                self.session.handle_connected(self.now);
                // Drop the ConnectRequest: only requests are answered.
                self.session.poll_transmit(&mut Vec::new());
            }
        }
        self.drain();
    }

    /// Takes the session's events, settling the joint transaction as the
    /// target does.
    fn drain(&mut self) {
        while let Some(e) = self.session.poll_event() {
            if std::env::var_os("SEEDS_VERBOSE").is_some() {
                eprintln!("  {e:?}");
            }
            if let zklock::session::Event::Reply { token, result } = &e {
                if *token == SESSION_JOINT_TOKEN {
                    settle_joint(&mut self.session, self.flags, self.now, result);
                }
            }
        }
    }

    /// The requests the session has sent since the last call, as (xid, op).
    fn requests(&mut self) -> Vec<(i32, OpCode)> {
        let mut out = Vec::new();
        self.session.poll_transmit(&mut out);
        let mut rest = out.as_slice();
        let mut requests = Vec::new();
        while let Ok(Some((payload, used))) = split_frame(rest, usize::MAX) {
            rest = &rest[used..];
            let mut r = zklock::proto::Reader::new(payload);
            let h = RequestHeader::read(&mut r).unwrap();
            let op = OpCode::try_from(h.op).unwrap();
            if op == OpCode::MultiRead {
                let ops = MultiRequest::read(&mut r).unwrap().ops;
                self.read_ops
                    .push((h.xid, ops.iter().map(MultiOp::op_code).collect()));
            } else if op == OpCode::Multi {
                let ops = MultiRequest::read(&mut r).unwrap().ops;
                self.write_ops
                    .push((h.xid, ops.iter().map(MultiOp::op_code).collect()));
            }
            requests.push((h.xid, op));
        }
        requests
    }

    /// Answers every request sent so far, and those the replies make the
    /// session send: `err` for ops `fail` picks, a sample body otherwise.
    fn answer_all(&mut self, fail: impl Fn(OpCode) -> i32) {
        for _ in 0..8 {
            let requests = self.requests();
            if requests.is_empty() {
                return;
            }
            for (xid, op) in requests {
                let reply = self.reply(xid, op, fail(op));
                self.send(&reply);
            }
        }
    }

    /// The reply to request `xid`: `err`, or a sample body of its kind.
    fn reply(&mut self, xid: i32, op: OpCode, err: i32) -> Vec<u8> {
        self.zxid += 1;
        if xid == AUTH_XID {
            header(AUTH_XID, 0, err)
        } else if err != 0 {
            header(xid, self.zxid, err)
        } else if let Some((_, ops)) = self.read_ops.iter().find(|(x, _)| *x == xid) {
            [header(xid, self.zxid, 0), read_results(ops, b"read")].concat()
        } else if let Some((_, ops)) = self.write_ops.iter().find(|(x, _)| *x == xid) {
            [header(xid, self.zxid, 0), write_results(ops)].concat()
        } else {
            [header(xid, self.zxid, 0), sample_body(op)].concat()
        }
    }

    fn notify(&mut self, event_type: EventType, path: &str) {
        let mut payload = header(NOTIFICATION_XID, -1, 0);
        payload.extend(event(event_type, path).to_bytes());
        self.send(&payload);
    }

    fn input(&self, chunk_seed: u8, time_seed: u8) -> Vec<u8> {
        [&[self.flags, chunk_seed, time_seed][..], &self.stream].concat()
    }
}

/// A multiRead reply with one sample result per read op, each getData's
/// with `data`.
fn read_results(ops: &[OpCode], data: &[u8]) -> Vec<u8> {
    let results = ops
        .iter()
        .map(|op| match op {
            OpCode::GetChildren => OpResult::GetChildren(GetChildrenResponse {
                children: vec!["a".into()],
            }),
            _ => OpResult::GetData(GetDataResponse {
                data: Some(data.to_vec()),
                stat: stat(),
            }),
        })
        .collect();
    MultiResponse { results }.to_bytes()
}

/// A multi reply with each op applied: a batch of setData calls, a
/// release's transaction, or the script's own multi.
fn write_results(ops: &[OpCode]) -> Vec<u8> {
    let results = ops
        .iter()
        .map(|op| match op {
            OpCode::Create => OpResult::Create(CreateResponse { path: "/m".into() }),
            OpCode::Create2 => OpResult::Create2(Create2Response {
                path: "/rw/lock-0000000005".into(),
                stat: stat(),
            }),
            OpCode::Delete => OpResult::Delete,
            OpCode::Check => OpResult::Check,
            _ => OpResult::SetData(SetDataResponse { stat: stat() }),
        })
        .collect();
    MultiResponse { results }.to_bytes()
}

/// The results of a transaction whose first op, a release's note, met a
/// node of its name: nothing applied, the ops after it rolled back.
fn note_refused(count: usize) -> MultiResponse {
    let results = (0..count)
        .map(|i| {
            let err = if i == 0 { -110 } else { -2 };
            OpResult::Error(ErrorResponse { err })
        })
        .collect();
    MultiResponse { results }
}

fn session_seeds() -> Vec<Seed> {
    if std::env::var_os("SEEDS_VERBOSE").is_some() {
        eprintln!("session seeds:");
    }
    let t = "session";
    let mut seeds = Vec::new();
    let ok = |_| 0;

    // A whole session: connect, every reply, watches firing, pings.
    let mut d = Driver::new(0);
    d.send(&connect(false).to_bytes());
    d.answer_all(ok);
    d.notify(EventType::NodeDataChanged, "/a");
    d.notify(EventType::NodeCreated, "/c/d/e");
    d.notify(EventType::NodeChildrenChanged, "/");
    d.notify(EventType::NodeDeleted, "/b");
    d.send(&header(PING_XID, ZXID, 0));
    seeds.push(seed(t, "happy", d.input(0, 0), true));
    seeds.push(seed(t, "happy-chunked", d.input(77, 0), true));
    seeds.push(seed(t, "happy-clock", d.input(0, 5), true));
    let mut raw = d.input(13, 0);
    raw[0] |= SESSION_RAW_CHUNKS;
    seeds.push(seed(t, "happy-raw-chunks", raw, true));

    // The same, with a request timeout and a clock that runs: replies are
    // overdue from the first step of 11 s.
    let mut d = Driver::new(SESSION_REQUEST_TIMEOUT);
    d.send(&connect(false).to_bytes());
    d.answer_all(ok);
    seeds.push(seed(t, "request-timeout-clock", d.input(0, 7), true));

    // A batch of writes refused for its first op: the other goes again,
    // alone, and is answered.
    let mut d = Driver::new(0);
    d.send(&connect(false).to_bytes());
    for (xid, op) in d.requests() {
        let batch = d
            .write_ops
            .iter()
            .find(|(x, ops)| *x == xid && ops.iter().all(|&op| op == OpCode::SetData));
        let reply = match batch {
            Some((_, ops)) => {
                let results = (0..ops.len())
                    .map(|i| {
                        let err = if i == 0 { -101 } else { -2 };
                        OpResult::Error(ErrorResponse { err })
                    })
                    .collect();
                [header(xid, ZXID, 0), MultiResponse { results }.to_bytes()].concat()
            }
            None => d.reply(xid, op, 0),
        };
        d.send(&reply);
    }
    d.answer_all(ok);
    seeds.push(seed(t, "write-batch-refused", d.input(0, 0), true));

    // Every op fails the way a server fails it.
    let mut d = Driver::new(SESSION_CHROOT);
    d.send(&connect(false).to_bytes());
    d.answer_all(|op| match op {
        OpCode::Create | OpCode::Create2 | OpCode::CreateContainer => -110,
        OpCode::Auth => 0,
        OpCode::SetData | OpCode::Delete => -103,
        OpCode::WhoAmI => -6,
        _ => -101,
    });
    d.notify(EventType::NodeCreated, "/app/d");
    d.notify(EventType::NodeDataChanged, "/app/c");
    seeds.push(seed(t, "errors-chroot", d.input(0, 0), true));

    // A read-only server, then a mismatched xid drops the connection; the
    // next connection re-registers the watches.
    let flags = SESSION_CAN_BE_READ_ONLY | SESSION_RESUME;
    let mut d = Driver::new(flags);
    d.send(&resumed(true).to_bytes());
    let first = d.requests();
    for &(xid, op) in first.iter().take(8) {
        let reply = d.reply(xid, op, 0);
        d.send(&reply);
    }
    d.send(&header(9999, ZXID, 0));
    d.send(&resumed(false).to_bytes());
    d.answer_all(ok);
    d.notify(EventType::NodeDataChanged, "/a");
    seeds.push(seed(t, "read-only-then-reconnect", d.input(0, 0), true));
    // A new session on a read-only server, with a clock that runs: the
    // prober asks the other host at its due times, and moves there on a
    // read-write answer (the rest of the stream then goes to the next
    // connection).
    let mut d = Driver::new(SESSION_CAN_BE_READ_ONLY);
    d.send(&connect(true).to_bytes());
    d.answer_all(ok);
    for _ in 0..4 {
        d.send(&header(PING_XID, ZXID, 0));
    }
    seeds.push(seed(t, "read-only-probing-clock", d.input(0, 2), true));

    // Expired at the handshake; auth failure; close.
    let mut d = Driver::new(0);
    d.send(&expired().to_bytes());
    seeds.push(seed(t, "expired", d.input(0, 0), true));
    // With a new session after an expiry: the established session's
    // resume is refused as expired, and a new session goes on with the
    // credentials alone.
    let mut d = Driver::new(SESSION_NEW_ON_EXPIRY);
    d.send(&connect(false).to_bytes());
    d.answer_all(ok);
    d.send(&header(9999, ZXID, 0));
    d.send(&expired().to_bytes());
    assert_eq!(d.session.generation(), 1, "a new session");
    d.send(&connect(false).to_bytes());
    d.answer_all(ok);
    d.notify(EventType::NodeDataChanged, "/a");
    seeds.push(seed(t, "new-session-after-expiry", d.input(0, 0), true));
    seeds.push(seed(
        t,
        "new-session-after-expiry-clock",
        // A clock seed under which the run still reaches the expiry.
        d.input(0, 11),
        true,
    ));
    let mut d = Driver::new(0);
    d.send(&connect(false).to_bytes());
    d.answer_all(|op| if op == OpCode::Auth { -115 } else { 0 });
    seeds.push(seed(t, "auth-failed", d.input(0, 0), true));
    let mut d = Driver::new(SESSION_CLOSE);
    d.send(&connect(false).to_bytes());
    d.answer_all(ok);
    seeds.push(seed(t, "close", d.input(0, 0), true));

    // Closing, with the transactions of two releases refused for their
    // notes: each node is still there, but closeSession went out after
    // them, and nothing may follow it.
    let release = [OpCode::Create, OpCode::Delete, OpCode::Delete];
    let joint = [
        OpCode::Create,
        OpCode::Delete,
        OpCode::Delete,
        OpCode::Create2,
    ];
    for (name, refused) in [
        ("close-note-refused", &release[..]),
        ("close-joint-refused", &joint[..]),
    ] {
        let mut d = Driver::new(SESSION_CLOSE);
        d.send(&connect(false).to_bytes());
        for (xid, op) in d.requests() {
            let ops = d.write_ops.iter().find(|(x, _)| *x == xid);
            let reply = match ops {
                Some((_, ops)) if ops == refused => {
                    let body = note_refused(ops.len()).to_bytes();
                    [header(xid, ZXID, 0), body].concat()
                }
                _ => d.reply(xid, op, 0),
            };
            d.send(&reply);
        }
        d.answer_all(ok);
        seeds.push(seed(t, name, d.input(0, 0), true));
    }

    // Small limits: a batched read whose reply alone would be over the
    // frame limit fails alone, the others of its batch answered; a
    // notification over the limit drops the connection, and the next one
    // sets the watches again in records under the request limit.
    let mut d = Driver::new(SESSION_SMALL_LIMITS);
    // Replies the limit would refuse, but the one planted, are errors.
    let fits = |op| {
        if 16 + sample_body(op).len() > SMALL_MAX_FRAME {
            -101
        } else {
            0
        }
    };
    d.send(&connect(false).to_bytes());
    for (xid, op) in d.requests() {
        // The batch of the target's three reads (its own multiRead has two).
        let batch = d
            .read_ops
            .iter()
            .find(|(x, ops)| *x == xid && ops.len() == 3);
        let reply = match batch {
            Some((_, ops)) => {
                let over = read_results(ops, &[b'x'; SMALL_MAX_FRAME]);
                [header(xid, ZXID, 0), over].concat()
            }
            None => d.reply(xid, op, fits(op)),
        };
        d.send(&reply);
    }
    d.answer_all(fits);
    d.notify(
        EventType::NodeDataChanged,
        &"/long".repeat(SMALL_MAX_FRAME / 4),
    );
    d.send(&resumed(false).to_bytes());
    d.answer_all(fits);
    d.notify(EventType::NodeDataChanged, "/a");
    seeds.push(seed(t, "small-limits", d.input(0, 0), true));

    // Garbage after the handshake.
    let mut d = Driver::new(0);
    d.send(&connect(false).to_bytes());
    d.send(&[header(1, ZXID, 0), vec![0xff; 3]].concat());
    seeds.push(seed(t, "garbage-reply", d.input(0, 0), false));
    seeds
}

fn all_seeds() -> Vec<Seed> {
    let mut seeds = constructed();
    seeds.extend(session_seeds());
    seeds.extend(from_fixtures());
    seeds
}

// ---------------------------------------------------------------------------
// Checks and the writer
// ---------------------------------------------------------------------------

/// Whether the decoder the target exercises accepts the seed.
fn accepted(target: &str, data: &[u8]) -> bool {
    match target {
        "connect_response" => ConnectResponse::from_bytes(data).is_ok(),
        "multi_response" => MultiResponse::from_bytes(data).is_ok(),
        "reply" => {
            let op = REPLY_OPS[usize::from(data[0]) % REPLY_OPS.len()];
            match read_reply_header(&data[1..]) {
                Ok((h, body)) if h.err == 0 => Response::decode(op, body).is_ok(),
                Ok((_, body)) => body.is_empty(),
                Err(_) => false,
            }
        }
        "watcher_event" => read_reply_header(data)
            .and_then(|(h, body)| read_notification(&h, body))
            .is_ok(),
        "frame_split" => {
            let max = MAX_FRAMES[usize::from(data[0]) % MAX_FRAMES.len()];
            // A frame, or a refused length: anything but "need more".
            split_frame(&data[1..], max) != Ok(None)
        }
        // Past the handshake, to a request answered with success, or to
        // an expiry or refusal (each seed's own goal: `session_goal`).
        "session" => targets::session_run(data)
            .is_some_and(|s| (s.connected && s.successes > 0) || s.expired_or_refused),
        "stream" => {
            // Every frame splits, and the stream ends on a frame boundary.
            let mut rest = data;
            while let Ok(Some((_, used))) = split_frame(rest, DEFAULT_MAX_FRAME) {
                rest = &rest[used..];
            }
            rest.is_empty()
        }
        other => panic!("no target {other}"),
    }
}

/// Whether a valid session seed's run reached what the seed is named for:
/// reads failed for the frame limit, a new session after an expiry, an
/// expiry or refusal, or otherwise requests answered with success.
fn session_goal(name: &str, summary: &targets::SessionSummary) -> bool {
    if name.contains("small-limits") {
        // The two reads of its batch over the frame limit, the other read
        // answered.
        summary.too_large == 2 && summary.successes > 0
    } else if name.contains("new-session") {
        summary.renewed
    } else if name.contains("expired") || name.contains("auth-failed") {
        summary.expired_or_refused
    } else {
        summary.connected && summary.successes > 0
    }
}

#[test]
fn seeds_exercise_their_decoders() {
    let seeds = all_seeds();
    for (name, _) in TARGETS {
        let count = seeds.iter().filter(|s| s.target == *name).count();
        assert!(count >= 3, "only {count} seeds for {name}");
    }
    for s in &seeds {
        if std::env::var_os("SEEDS_VERBOSE").is_some() {
            eprintln!("{}/{}: {}", s.target, s.name, accepted(s.target, &s.bytes));
        }
        let (_, run) = TARGETS
            .iter()
            .find(|(n, _)| *n == s.target)
            .unwrap_or_else(|| panic!("no target {}", s.target));
        run(&s.bytes);
        if s.valid {
            assert!(
                accepted(s.target, &s.bytes),
                "{}/{} is not accepted",
                s.target,
                s.name
            );
            if s.target == "session" {
                let summary = targets::session_run(&s.bytes);
                assert!(
                    summary.is_some_and(|summary| session_goal(&s.name, &summary)),
                    "session/{} does not reach its goal: {summary:?}",
                    s.name
                );
            }
        }
    }
    // The fixture-derived session splits into its frames and connects.
    if let Some(s) = seeds.iter().find(|s| s.name == "fixture-session") {
        assert!(accepted("stream", &s.bytes));
        targets::stream(&s.bytes);
    }
}

/// The seeds stored under `fuzz/corpus/` are the generator's, byte for
/// byte, and none is left over from an older generator: a change to the
/// encoders or the session's order that left them stale would otherwise go
/// unnoticed, the fuzzer starting from seeds that no longer reach past the
/// handshake.
#[test]
fn stored_seeds_are_the_generators() {
    let corpus = manifest_dir().join("../fuzz/corpus");
    let seeds = all_seeds();
    let regenerate =
        "run `cargo test -p protocol-tests --test fuzz_seeds -- --ignored write_seeds`";
    for s in &seeds {
        let path = corpus.join(s.target).join(&s.name);
        let stored =
            fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; {regenerate}", path.display()));
        assert!(
            stored == s.bytes,
            "{} is stale; {regenerate}",
            path.display()
        );
    }
    for (target, _) in TARGETS {
        for entry in fs::read_dir(corpus.join(target)).expect("a corpus directory") {
            let name = entry.expect("a corpus entry").file_name();
            let name = name.to_string_lossy();
            let generated = seeds.iter().any(|s| s.target == *target && s.name == name);
            assert!(
                generated || !(name.starts_with("seed-") || name.starts_with("fixture-")),
                "{target}/{name} is no longer generated; {regenerate}"
            );
        }
    }
}

#[test]
#[ignore = "writes fuzz/corpus/; run by hand to regenerate the seeds"]
fn write_seeds() {
    let corpus = manifest_dir().join("../fuzz/corpus");
    let seeds = all_seeds();
    for (target, _) in TARGETS {
        let dir = corpus.join(target);
        fs::create_dir_all(&dir).unwrap();
        // Replace this generator's own files; leave any others alone.
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("seed-") || name.starts_with("fixture-") {
                fs::remove_file(&path).unwrap();
            }
        }
    }
    for s in &seeds {
        fs::write(corpus.join(s.target).join(&s.name), &s.bytes).unwrap();
    }
    eprintln!("wrote {} seeds under {}", seeds.len(), corpus.display());
}
