//! Golden vectors: every fixture in `fixtures/` was written by the official
//! ZooKeeper jute classes (`java/GenerateGolden.java`, regenerated and checked
//! by `java/regenerate.sh`). Each case below names a fixture and says what it
//! must decode to:
//!
//! - `exact(value)`: `value.to_bytes()` is the fixture byte for byte, and the
//!   fixture decodes to `value`;
//! - `refused(decode, error)`: the fixture holds something the protocol never
//!   sends (a null string or vector, an unknown enum value) and decoding fails
//!   with exactly `error`;
//! - `legacy(value)`: a handshake record without its trailing readOnly byte,
//!   as pre-3.4 peers send it.
//!
//! Values mirror the Java generator case by case; the shared ones (`stat()`,
//! `mixed_acl()`, ...) have the same names there.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::path::PathBuf;

use zklock::proto::*;
use DecodeError::{UnexpectedNull, UnknownValue};

/// `error`, as decoding reports it in `field` (`Record.field`).
fn in_field(field: &'static str, error: DecodeError) -> DecodeError {
    error.in_field(field)
}

// ---- Harness ----

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn fixture(name: &str) -> Vec<u8> {
    let path = fixture_dir().join(format!("{name}.bin"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Our encoding is byte-identical to Java's, and Java's bytes decode to `value`.
fn exact<T: Record + PartialEq + Debug>(name: &str, value: T) {
    let java = fixture(name);
    assert_eq!(value.to_bytes(), java, "{name}: encoding differs from Java");
    assert_eq!(T::from_bytes(&java), Ok(value), "{name}: decoding differs");
}

/// Decoding Java's bytes fails with exactly `error`.
fn refused<T: PartialEq + Debug>(
    name: &str,
    decode: fn(&[u8]) -> Result<T, DecodeError>,
    error: DecodeError,
) {
    assert_eq!(decode(&fixture(name)), Err(error), "{name}");
}

/// A handshake record without the trailing readOnly byte decodes with
/// `read_only == false`; we always write the byte, so our encoding is the
/// fixture plus a 0.
fn legacy<T: Record + PartialEq + Debug>(name: &str, value: T) {
    let java = fixture(name);
    let mut with_flag = java.clone();
    with_flag.push(0);
    assert_eq!(value.to_bytes(), with_flag, "{name}");
    assert_eq!(T::from_bytes(&java), Ok(value), "{name}");
}

/// Declares one test per case, `<case>::golden`, and `CASES`, the list of
/// their names. (A module per case keeps the case names apart from the value
/// helpers, which often share them.)
macro_rules! golden {
    ($($name:ident => $check:ident($($args:tt)*);)*) => {
        $(
            mod $name {
                use super::*;

                #[test]
                fn golden() {
                    $check(stringify!($name), $($args)*);
                }
            }
        )*
        const CASES: &[&str] = &[$(stringify!($name)),*];
    };
}

#[test]
fn every_fixture_has_a_case_and_every_case_a_fixture() {
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(fixture_dir()).unwrap() {
        let file = entry.unwrap().file_name().into_string().unwrap();
        let stem = file.strip_suffix(".bin");
        on_disk.insert(
            stem.unwrap_or_else(|| panic!("not a fixture: {file}"))
                .to_owned(),
        );
    }
    let cases: BTreeSet<String> = CASES.iter().map(|c| c.to_string()).collect();
    let orphans: Vec<_> = on_disk.difference(&cases).collect();
    let missing: Vec<_> = cases.difference(&on_disk).collect();
    assert!(orphans.is_empty(), "fixtures without a case: {orphans:?}");
    assert!(missing.is_empty(), "cases without a fixture: {missing:?}");
}

// ---- Shared values (the same as in GenerateGolden.java) ----

const UNICODE_PATH: &str = "/ünï/路径/κλειδί";
const LOCK_PATH: &str = "/app/locks/lock-0000000042";
const SESSION_ID: i64 = 0x0010_00ab_cdef_0001;
const TTL_OWNER: i64 = 0xFF00_0000_0000_0000_u64 as i64 | 60_000;

fn stat() -> Stat {
    Stat {
        czxid: 0x1_0000_0002,
        mzxid: 0x1_0000_0005,
        ctime: 1_700_000_000_123,
        mtime: 1_700_000_005_456,
        version: 3,
        cversion: 7,
        aversion: 1,
        ephemeral_owner: 0,
        data_length: 11,
        num_children: 2,
        pzxid: 0x1_0000_0009,
    }
}

fn ephemeral_stat() -> Stat {
    Stat {
        czxid: 0x2_0000_0010,
        mzxid: 0x2_0000_0010,
        ctime: 1_700_000_100_000,
        mtime: 1_700_000_100_000,
        ephemeral_owner: SESSION_ID,
        pzxid: 0x2_0000_0010,
        ..Stat::default()
    }
}

/// Every field at an extreme; the owner `i64::MIN` marks a container.
fn extreme_stat() -> Stat {
    Stat {
        czxid: i64::MIN,
        mzxid: i64::MAX,
        ctime: -1,
        mtime: 0,
        version: i32::MIN,
        cversion: i32::MAX,
        aversion: -1,
        ephemeral_owner: i64::MIN,
        data_length: i32::MIN,
        num_children: i32::MAX,
        pzxid: -1,
    }
}

fn ttl_stat() -> Stat {
    Stat {
        czxid: 0x3_0000_0001,
        mzxid: 0x3_0000_0001,
        ctime: 1_700_000_200_000,
        mtime: 1_700_000_200_000,
        ephemeral_owner: TTL_OWNER,
        data_length: 5,
        pzxid: 0x3_0000_0001,
        ..Stat::default()
    }
}

fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id::new(scheme, id),
    }
}

fn open_acl() -> Vec<Acl> {
    Acl::open_unsafe()
}

fn creator_acl() -> Vec<Acl> {
    Acl::creator_all()
}

fn mixed_acl() -> Vec<Acl> {
    vec![
        acl(perms::READ, "world", "anyone"),
        acl(perms::ALL, "digest", "alice:tSkHf9vbvtxHKu8fJ3W1AGBpSL0="),
        acl(perms::READ | perms::WRITE, "ip", "10.0.0.0/8"),
        acl(0, "sasl", "bob@EXAMPLE.COM"),
    ]
}

fn s(v: &str) -> String {
    v.to_owned()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| s(x)).collect()
}

fn some(data: &[u8]) -> Option<Vec<u8>> {
    Some(data.to_vec())
}

/// Bytes 0, 1, ..., n-1, wrapping at 256.
fn counting(n: usize) -> Vec<u8> {
    (0..n).map(|i| i as u8).collect()
}

fn connect_request(
    last_zxid_seen: i64,
    timeout_ms: i32,
    session_id: i64,
    passwd: Vec<u8>,
    read_only: bool,
) -> ConnectRequest {
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen,
        timeout_ms,
        session_id,
        passwd,
        read_only,
    }
}

fn connect_response(
    timeout_ms: i32,
    session_id: i64,
    passwd: Vec<u8>,
    read_only: bool,
) -> ConnectResponse {
    ConnectResponse {
        protocol_version: 0,
        timeout_ms,
        session_id,
        passwd,
        read_only,
    }
}

fn create(path: &str, data: Option<Vec<u8>>, acl: Vec<Acl>, mode: CreateMode) -> CreateRequest {
    CreateRequest {
        path: s(path),
        data,
        acl,
        mode,
    }
}

fn create_ttl(
    path: &str,
    data: Option<Vec<u8>>,
    acl: Vec<Acl>,
    mode: CreateMode,
    ttl: i64,
) -> CreateTtlRequest {
    CreateTtlRequest {
        path: s(path),
        data,
        acl,
        mode,
        ttl,
    }
}

fn path(p: &str) -> PathRecord {
    PathRecord { path: s(p) }
}

fn create2_response(path: &str, stat: Stat) -> Create2Response {
    Create2Response {
        path: s(path),
        stat,
    }
}

fn get_data(path: &str, watch: bool) -> GetDataRequest {
    GetDataRequest {
        path: s(path),
        watch,
    }
}

fn get_children(path: &str, watch: bool) -> GetChildrenRequest {
    GetChildrenRequest {
        path: s(path),
        watch,
    }
}

fn set_data(path: &str, data: Option<Vec<u8>>, version: i32) -> SetDataRequest {
    SetDataRequest {
        path: s(path),
        data,
        version,
    }
}

fn get_data_response(data: Option<Vec<u8>>, stat: Stat) -> GetDataResponse {
    GetDataResponse { data, stat }
}

fn children(names: &[&str]) -> GetChildrenResponse {
    GetChildrenResponse {
        children: strings(names),
    }
}

fn remove_watches(path: &str, watcher_type: WatcherType) -> RemoveWatchesRequest {
    RemoveWatchesRequest {
        path: s(path),
        watcher_type,
    }
}

fn event(event_type: EventType, state: KeeperState, path: &str) -> WatcherEvent {
    WatcherEvent {
        event_type,
        state,
        path: s(path),
    }
}

fn error(err: i32) -> OpResult {
    OpResult::Error(ErrorResponse { err })
}

fn client_info(auth_scheme: &str, user: &str) -> ClientInfo {
    ClientInfo {
        auth_scheme: s(auth_scheme),
        user: s(user),
    }
}

// ---- The CESU-8 case ----

/// U+1F600 lies outside the BMP. The Java writer encodes each UTF-16 unit on
/// its own, so the fixture holds the 6-byte CESU-8 form `ED A0 BD ED B8 80`.
/// We decode it to the right character.
///
/// Our encoder deliberately writes standard UTF-8 (`F0 9F 98 80`) instead:
/// the Java *reader* decodes ustrings with a standard UTF-8 decoder, which
/// turns CESU-8 surrogates into U+FFFD (checked against Debian's 3.8.0
/// BinaryInputArchive) but reads standard UTF-8 correctly. Standard UTF-8 is
/// therefore the only form every peer decodes to the same string, so this is
/// the one case where our bytes differ from Java's on purpose.
fn cesu8_acl(name: &str) {
    let value = acl(perms::READ, "digest", "smile\u{1F600}:x");
    let ustring = |bytes: &[u8]| [&(bytes.len() as i32).to_be_bytes()[..], bytes].concat();
    let head = [&[0, 0, 0, 1][..], &ustring(b"digest")].concat();
    let java_form = [&head[..], &ustring(b"smile\xED\xA0\xBD\xED\xB8\x80:x")].concat();
    let utf8_form = [&head[..], &ustring(b"smile\xF0\x9F\x98\x80:x")].concat();

    let java = fixture(name);
    assert_eq!(java, java_form, "the Java writer produces CESU-8");
    assert_eq!(Acl::from_bytes(&java), Ok(value.clone()));
    assert_eq!(value.to_bytes(), utf8_form, "we write standard UTF-8");
    assert_eq!(Acl::from_bytes(&utf8_form), Ok(value));
}

// ---- Cases ----

golden! {
    // Handshake.
    connect_request_new_session => exact(connect_request(0, 30_000, 0, vec![0; 16], false));
    connect_request_resume_read_only =>
        exact(connect_request(0x1_0000_002a, 40_000, SESSION_ID, counting(16), true));
    connect_request_extremes => exact(ConnectRequest {
        protocol_version: i32::MIN,
        last_zxid_seen: i64::MIN,
        timeout_ms: i32::MIN,
        session_id: -1,
        passwd: vec![],
        read_only: false,
    });
    connect_request_without_read_only => legacy(connect_request(5, 10_000, 0, vec![0; 16], false));
    connect_request_null_passwd =>
        refused(ConnectRequest::from_bytes, in_field("ConnectRequest.passwd", UnexpectedNull));
    connect_response_new_session =>
        exact(connect_response(30_000, SESSION_ID, counting(16), false));
    connect_response_read_only => exact(connect_response(4_000, SESSION_ID, counting(16), true));
    connect_response_expired => exact(connect_response(0, 0, vec![0; 16], false));
    connect_response_extremes => exact(ConnectResponse {
        protocol_version: i32::MAX,
        timeout_ms: i32::MIN,
        session_id: i64::MIN,
        passwd: vec![],
        read_only: false,
    });
    connect_response_without_read_only =>
        legacy(connect_response(30_000, SESSION_ID, counting(16), false));
    connect_response_null_passwd =>
        refused(ConnectResponse::from_bytes, in_field("ConnectResponse.passwd", UnexpectedNull));

    // Headers, including the header-only ping, closeSession and whoAmI frames.
    request_header => exact(RequestHeader { xid: 1, op: OpCode::GetData.code() });
    request_header_ping => exact(RequestHeader { xid: PING_XID, op: OpCode::Ping.code() });
    request_header_close_session =>
        exact(RequestHeader { xid: 7, op: OpCode::CloseSession.code() });
    request_header_who_am_i => exact(RequestHeader { xid: 9, op: OpCode::WhoAmI.code() });
    request_header_auth => exact(RequestHeader { xid: AUTH_XID, op: OpCode::Auth.code() });
    request_header_set_watches =>
        exact(RequestHeader { xid: SET_WATCHES_XID, op: OpCode::SetWatches.code() });
    request_header_extremes => exact(RequestHeader { xid: i32::MIN, op: i32::MAX });
    reply_header => exact(ReplyHeader { xid: 1, zxid: 0x1_0000_0005, err: 0 });
    reply_header_notification => exact(ReplyHeader { xid: NOTIFICATION_XID, zxid: -1, err: 0 });
    reply_header_ping => exact(ReplyHeader { xid: PING_XID, zxid: 0x1_0000_0009, err: 0 });
    reply_header_no_node => exact(ReplyHeader {
        xid: 5,
        zxid: 0x1_0000_0009,
        err: ErrorCode::NoNode.code(),
    });
    reply_header_extremes => exact(ReplyHeader { xid: i32::MAX, zxid: i64::MIN, err: i32::MIN });

    // Data records.
    stat => exact(stat());
    stat_zero => exact(Stat::default());
    stat_ephemeral => exact(ephemeral_stat());
    stat_extremes => exact(extreme_stat());
    stat_ttl => exact(ttl_stat());
    id_world_anyone => exact(Id::new("world", "anyone"));
    id_empty => exact(Id::new("", ""));
    id_non_ascii => exact(Id::new("digest", "ünï:路径κλειδί"));
    id_null_scheme => refused(Id::from_bytes, in_field("Id.scheme", UnexpectedNull));
    id_null_id => refused(Id::from_bytes, in_field("Id.id", UnexpectedNull));
    acl_open => exact(acl(perms::ALL, "world", "anyone"));
    acl_digest => exact(acl(3, "digest", "alice:tSkHf9vbvtxHKu8fJ3W1AGBpSL0="));
    acl_extreme_perms => exact(acl(i32::MIN, "ip", "127.0.0.1"));
    acl_negative_perms => exact(acl(-1, "auth", ""));
    acl_supplementary_cesu8 => cesu8_acl();
    client_info => exact(client_info("digest", "alice"));
    client_info_empty => exact(client_info("", ""));
    client_info_non_ascii => exact(client_info("sasl", "ünï@路径"));
    client_info_null_user => refused(ClientInfo::from_bytes, in_field("ClientInfo.user", UnexpectedNull));

    // create, create2, createContainer (CreateRequest) and createTTL.
    create_request_persistent =>
        exact(create("/app/config", some(b"hello"), open_acl(), CreateMode::Persistent));
    create_request_ephemeral =>
        exact(create("/app/nodes/n1", some(b"{}"), open_acl(), CreateMode::Ephemeral));
    create_request_persistent_sequential => exact(create(
        "/app/queue/item-", some(b""), creator_acl(), CreateMode::PersistentSequential));
    create_request_ephemeral_sequential => exact(create(
        "/app/locks/lock-", some(b""), open_acl(), CreateMode::EphemeralSequential));
    create_request_container =>
        exact(create("/app/locks", None, open_acl(), CreateMode::Container));
    create_request_null_data =>
        exact(create("/app/empty", None, open_acl(), CreateMode::Persistent));
    create_request_binary_data =>
        exact(create("/app/bin", Some(counting(300)), open_acl(), CreateMode::Persistent));
    create_request_empty_acl => exact(create("/app/x", some(b""), vec![], CreateMode::Persistent));
    create_request_unicode => exact(create(
        UNICODE_PATH, some("значение".as_bytes()), mixed_acl(), CreateMode::Persistent));
    create_request_null_path =>
        refused(CreateRequest::from_bytes, in_field("CreateRequest.path", UnexpectedNull));
    create_request_null_acl =>
        refused(CreateRequest::from_bytes, in_field("CreateRequest.acl", UnexpectedNull));
    create_request_unknown_flags => refused(
        CreateRequest::from_bytes, in_field("CreateRequest.mode", UnknownValue { kind: "create mode", value: 7 }));
    create_ttl_request => exact(create_ttl(
        "/app/ttl", some(b"t"), open_acl(), CreateMode::PersistentWithTtl, 60_000));
    create_ttl_request_sequential_max_ttl => exact(create_ttl(
        "/app/ttl-", None, creator_acl(), CreateMode::PersistentSequentialWithTtl, 0xFF_FFFF_FFFF));
    create_ttl_request_extreme_ttl => exact(create_ttl(
        UNICODE_PATH, some(b""), vec![], CreateMode::PersistentWithTtl, i64::MIN));
    create_response => exact(CreateResponse { path: s(LOCK_PATH) });
    create_response_unicode => exact(CreateResponse { path: s(UNICODE_PATH) });
    create_response_empty_path => exact(CreateResponse { path: s("") });
    create_response_null_path =>
        refused(CreateResponse::from_bytes, in_field("CreateResponse.path", UnexpectedNull));
    create2_response => exact(create2_response(LOCK_PATH, ephemeral_stat()));
    create2_response_container => exact(create2_response("/app/locks", extreme_stat()));
    create2_response_ttl => exact(create2_response("/app/ttl", ttl_stat()));

    // Single-node operations.
    delete_request => exact(DeleteRequest { path: s("/app/config"), version: 3 });
    delete_request_any_version => exact(DeleteRequest { path: s(UNICODE_PATH), version: -1 });
    delete_request_min_version => exact(DeleteRequest { path: s("/a"), version: i32::MIN });
    exists_request => exact(ExistsRequest { path: s("/app/config"), watch: false });
    exists_request_watch => exact(ExistsRequest { path: s(UNICODE_PATH), watch: true });
    exists_response => exact(ExistsResponse { stat: stat() });
    get_data_request => exact(get_data("/app/config", false));
    get_data_request_watch => exact(get_data(UNICODE_PATH, true));
    get_data_response => exact(get_data_response(some(b"hello world"), stat()));
    get_data_response_null_data => exact(get_data_response(None, stat()));
    get_data_response_empty_data => exact(get_data_response(some(b""), stat()));
    get_data_response_binary => exact(get_data_response(Some(counting(256)), extreme_stat()));
    set_data_request => exact(set_data("/app/config", some(b"v2"), 3));
    set_data_request_null_data => exact(set_data("/app/config", None, -1));
    set_data_request_empty_data => exact(set_data(UNICODE_PATH, some(b""), i32::MAX));
    set_data_response => exact(SetDataResponse { stat: stat() });
    get_acl_request => exact(GetAclRequest { path: s("/app/config") });
    get_acl_response => exact(GetAclResponse { acl: mixed_acl(), stat: stat() });
    get_acl_response_empty => exact(GetAclResponse { acl: vec![], stat: stat() });
    get_acl_response_null_acl =>
        refused(GetAclResponse::from_bytes, in_field("GetAclResponse.acl", UnexpectedNull));
    set_acl_request =>
        exact(SetAclRequest { path: s(UNICODE_PATH), acl: mixed_acl(), version: 1 });
    set_acl_request_null_acl =>
        refused(SetAclRequest::from_bytes, in_field("SetAclRequest.acl", UnexpectedNull));
    set_acl_response => exact(SetAclResponse { stat: stat() });
    get_children_request => exact(get_children("/app/locks", true));
    // Java's GetChildren2Request has the same layout as GetChildrenRequest.
    get_children2_request => exact(get_children(UNICODE_PATH, false));
    get_children_response => exact(children(&["lock-0000000001", "κλειδί", "路径", ""]));
    get_children_response_empty => exact(children(&[]));
    get_children_response_null =>
        refused(GetChildrenResponse::from_bytes, in_field("GetChildrenResponse.children", UnexpectedNull));
    get_children_response_null_element =>
        refused(GetChildrenResponse::from_bytes, in_field("GetChildrenResponse.children", UnexpectedNull));
    get_children2_response => exact(GetChildren2Response {
        children: strings(&["lock-0000000001", "lock-0000000002"]),
        stat: stat(),
    });
    get_children2_response_empty =>
        exact(GetChildren2Response { children: vec![], stat: extreme_stat() });
    get_children2_response_null =>
        refused(GetChildren2Response::from_bytes, in_field("GetChildren2Response.children", UnexpectedNull));
    sync_request => exact(path("/app"));
    sync_response => exact(path(UNICODE_PATH));
    check_version_request => exact(CheckVersionRequest { path: s("/app/config"), version: 3 });
    check_version_request_min_version =>
        exact(CheckVersionRequest { path: s(UNICODE_PATH), version: i32::MIN });
    get_ephemerals_request => exact(path("/app/locks/"));
    get_ephemerals_request_empty_prefix => exact(path(""));
    get_ephemerals_response =>
        exact(GetEphemeralsResponse { ephemerals: strings(&[LOCK_PATH, UNICODE_PATH]) });
    get_ephemerals_response_empty => exact(GetEphemeralsResponse { ephemerals: vec![] });
    get_all_children_number_request => exact(path("/"));
    get_all_children_number_response => exact(GetAllChildrenNumberResponse { total_number: 12345 });
    get_all_children_number_response_min =>
        exact(GetAllChildrenNumberResponse { total_number: i32::MIN });

    // Session and watch management.
    auth_packet =>
        exact(AuthPacket { auth_type: 0, scheme: s("digest"), auth: b"alice:secret".to_vec() });
    auth_packet_empty => exact(AuthPacket { auth_type: -1, scheme: s(""), auth: vec![] });
    auth_packet_null_auth => refused(AuthPacket::from_bytes, in_field("AuthPacket.auth", UnexpectedNull));
    auth_packet_null_scheme =>
        refused(AuthPacket::from_bytes, in_field("AuthPacket.scheme", UnexpectedNull));
    who_am_i_response => exact(WhoAmIResponse {
        client_info: vec![client_info("ip", "127.0.0.1"), client_info("digest", "alice")],
    });
    who_am_i_response_empty => exact(WhoAmIResponse { client_info: vec![] });
    who_am_i_response_null =>
        refused(WhoAmIResponse::from_bytes, in_field("WhoAmIResponse.client_info", UnexpectedNull));
    set_watches => exact(SetWatches {
        relative_zxid: 0x1_0000_0009,
        data_watches: strings(&["/app/config", UNICODE_PATH]),
        exist_watches: strings(&["/app/missing"]),
        child_watches: strings(&["/app/locks"]),
    });
    set_watches_empty => exact(SetWatches {
        relative_zxid: i64::MIN,
        data_watches: vec![],
        exist_watches: vec![],
        child_watches: vec![],
    });
    set_watches_null_list =>
        refused(SetWatches::from_bytes, in_field("SetWatches.exist_watches", UnexpectedNull));
    set_watches2 => exact(SetWatches2 {
        relative_zxid: 0x1_0000_0009,
        data_watches: strings(&["/d"]),
        exist_watches: strings(&["/e1", "/e2"]),
        child_watches: strings(&["/c"]),
        persistent_watches: strings(&["/p"]),
        persistent_recursive_watches: strings(&[UNICODE_PATH, "/r"]),
    });
    set_watches2_empty => exact(SetWatches2 {
        relative_zxid: -1,
        data_watches: vec![],
        exist_watches: vec![],
        child_watches: vec![],
        persistent_watches: vec![],
        persistent_recursive_watches: vec![],
    });
    set_watches2_null_list => refused(
        SetWatches2::from_bytes, in_field("SetWatches2.persistent_recursive_watches", UnexpectedNull));
    add_watch_request_persistent =>
        exact(AddWatchRequest { path: s("/app/config"), mode: AddWatchMode::Persistent });
    add_watch_request_persistent_recursive =>
        exact(AddWatchRequest { path: s(UNICODE_PATH), mode: AddWatchMode::PersistentRecursive });
    add_watch_request_unknown_mode => refused(
        AddWatchRequest::from_bytes, in_field("AddWatchRequest.mode", UnknownValue { kind: "add-watch mode", value: 2 }));
    remove_watches_request_children => exact(remove_watches("/app/config", WatcherType::Children));
    remove_watches_request_data => exact(remove_watches("/app/config", WatcherType::Data));
    remove_watches_request_any => exact(remove_watches("/app/config", WatcherType::Any));
    remove_watches_request_persistent =>
        exact(remove_watches("/app/config", WatcherType::Persistent));
    remove_watches_request_persistent_recursive =>
        exact(remove_watches("/app/config", WatcherType::PersistentRecursive));
    // Java's CheckWatchesRequest has the same layout as RemoveWatchesRequest.
    check_watches_request_children => exact(remove_watches(UNICODE_PATH, WatcherType::Children));
    check_watches_request_data => exact(remove_watches("/app/config", WatcherType::Data));
    check_watches_request_any => exact(remove_watches("/app/config", WatcherType::Any));
    error_response_ok => exact(ErrorResponse { err: 0 });
    error_response_no_node => exact(ErrorResponse { err: ErrorCode::NoNode.code() });
    error_response_min => exact(ErrorResponse { err: i32::MIN });

    // Notifications.
    watcher_event_node_created =>
        exact(event(EventType::NodeCreated, KeeperState::SyncConnected, "/app/config"));
    watcher_event_node_deleted =>
        exact(event(EventType::NodeDeleted, KeeperState::SyncConnected, LOCK_PATH));
    watcher_event_node_data_changed =>
        exact(event(EventType::NodeDataChanged, KeeperState::SyncConnected, UNICODE_PATH));
    watcher_event_node_children_changed =>
        exact(event(EventType::NodeChildrenChanged, KeeperState::SyncConnected, "/app/locks"));
    watcher_event_none_expired => exact(event(EventType::None, KeeperState::Expired, ""));
    watcher_event_persistent_watch_removed_closed =>
        exact(event(EventType::PersistentWatchRemoved, KeeperState::Closed, "/p"));
    watcher_event_null_path =>
        refused(WatcherEvent::from_bytes, in_field("WatcherEvent.path", UnexpectedNull));
    watcher_event_unknown_state => refused(
        WatcherEvent::from_bytes, in_field("WatcherEvent.state", UnknownValue { kind: "keeper state", value: 2 }));

    // Multi: headers, requests built with Java's Op API, responses from OpResult.
    multi_header => exact(MultiHeader { op_type: 1, done: false, err: -1 });
    multi_header_terminator => exact(MULTI_TERMINATOR);
    multi_header_error => exact(MultiHeader { op_type: -1, done: false, err: -101 });
    multi_request_every_write_op => exact(MultiRequest {
        ops: vec![
            MultiOp::Create(create(
                "/app/config", some(b"hello"), open_acl(), CreateMode::Persistent)),
            MultiOp::Create(create(
                "/app/locks/lock-", None, creator_acl(), CreateMode::EphemeralSequential)),
            MultiOp::CreateContainer(create(
                "/app/locks", some(b""), open_acl(), CreateMode::Container)),
            MultiOp::CreateTtl(create_ttl(
                "/app/ttl", some(b"t"), mixed_acl(), CreateMode::PersistentWithTtl, 60_000)),
            MultiOp::Delete(DeleteRequest { path: s(UNICODE_PATH), version: -1 }),
            MultiOp::SetData(set_data("/app/config", some(b"v2"), 3)),
            MultiOp::SetData(set_data("/app/empty", None, -1)),
            MultiOp::Check(CheckVersionRequest { path: s("/app"), version: i32::MIN }),
        ],
    });
    multi_request_read => exact(MultiRequest {
        ops: vec![
            MultiOp::GetData(get_data("/app/config", false)),
            MultiOp::GetChildren(get_children(UNICODE_PATH, false)),
            MultiOp::GetData(get_data("/app/missing", false)),
        ],
    });
    multi_request_empty => exact(MultiRequest { ops: vec![] });
    multi_request_single_check => exact(MultiRequest {
        ops: vec![MultiOp::Check(CheckVersionRequest { path: s(UNICODE_PATH), version: 0 })],
    });
    multi_request_create2_by_hand => exact(MultiRequest {
        ops: vec![MultiOp::Create2(create(
            "/app/c2", some(b"x"), open_acl(), CreateMode::Persistent))],
    });
    multi_response_every_result => exact(MultiResponse {
        results: vec![
            OpResult::Create(CreateResponse { path: s("/app/config") }),
            OpResult::Create2(create2_response("/app/locks", extreme_stat())),
            OpResult::Delete,
            OpResult::SetData(SetDataResponse { stat: stat() }),
            OpResult::Check,
            OpResult::GetData(get_data_response(some(b"hello"), stat())),
            OpResult::GetChildren(children(&["a", "κλειδί"])),
            error(ErrorCode::NoNode.code()),
        ],
    });
    multi_response_writes_ok => exact(MultiResponse {
        results: vec![
            OpResult::Create(CreateResponse { path: s("/app/config") }),
            OpResult::Create(CreateResponse { path: s(LOCK_PATH) }),
            OpResult::Create2(create2_response("/app/locks", extreme_stat())),
            OpResult::Create2(create2_response("/app/ttl", ttl_stat())),
            OpResult::Delete,
            OpResult::SetData(SetDataResponse { stat: stat() }),
            OpResult::SetData(SetDataResponse { stat: ephemeral_stat() }),
            OpResult::Check,
        ],
    });
    // Ops before the failing one report 0, the failing op its own code, and
    // the ops after it RuntimeInconsistency.
    multi_response_failed => exact(MultiResponse {
        results: vec![
            error(0),
            error(0),
            error(ErrorCode::NoNode.code()),
            error(ErrorCode::RuntimeInconsistency.code()),
            error(ErrorCode::RuntimeInconsistency.code()),
        ],
    });
    multi_response_read => exact(MultiResponse {
        results: vec![
            OpResult::GetData(get_data_response(None, stat())),
            OpResult::GetChildren(children(&[])),
            error(ErrorCode::NoNode.code()),
        ],
    });
    multi_response_empty => exact(MultiResponse { results: vec![] });
}
