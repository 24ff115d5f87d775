//! [`proptest`] strategies for every record in [`zklock::proto`].
//!
//! Values cover what the codec must carry, not only what a server sends:
//! strings over all of Unicode (NUL, controls, supplementary characters),
//! null and empty data buffers, empty vectors, the extremes of every integer,
//! every enum value, and multi records mixing any ops or results.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use zklock::proto::*;

// ---- Primitives ----

/// Any `i32`, with the edges (`MIN`, `MAX`, -1, 0, 1) drawn often.
pub fn int() -> impl Strategy<Value = i32> {
    prop_oneof![
        3 => any::<i32>(),
        1 => select(&[i32::MIN, i32::MAX, -1, 0, 1][..]),
    ]
}

/// Any `i64`, with the edges drawn often.
pub fn long() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => any::<i64>(),
        1 => select(&[i64::MIN, i64::MAX, -1, 0, 1][..]),
    ]
}

/// Any string: arbitrary characters (NUL, controls, non-BMP included), or a
/// path-like string over ASCII, Latin, CJK, Greek and emoji.
pub fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        vec(any::<char>(), 0..16).prop_map(|chars| chars.into_iter().collect()),
        "(/[a-z0-9üï路径κλειδί😀-]{1,6}){0,4}",
    ]
}

/// A vector of strings, possibly empty.
pub fn strings() -> impl Strategy<Value = Vec<String>> {
    vec(string(), 0..5)
}

/// A non-null buffer, possibly empty.
pub fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..48)
}

/// A buffer where null (`None`) is meaningful.
pub fn opt_bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    option::of(bytes())
}

// ---- Enumerations ----

/// Any create mode.
pub fn create_mode() -> impl Strategy<Value = CreateMode> {
    select(CreateMode::ALL)
}

/// Any event type.
pub fn event_type() -> impl Strategy<Value = EventType> {
    select(EventType::ALL)
}

/// Any keeper state.
pub fn keeper_state() -> impl Strategy<Value = KeeperState> {
    select(KeeperState::ALL)
}

/// Any watcher type.
pub fn watcher_type() -> impl Strategy<Value = WatcherType> {
    select(WatcherType::ALL)
}

/// Any addWatch mode.
pub fn add_watch_mode() -> impl Strategy<Value = AddWatchMode> {
    select(AddWatchMode::ALL)
}

/// Any opcode value.
pub fn op_code() -> impl Strategy<Value = OpCode> {
    select(OpCode::ALL)
}

/// Any error code value.
pub fn error_code() -> impl Strategy<Value = ErrorCode> {
    select(ErrorCode::ALL)
}

// ---- Handshake and headers ----

/// A ConnectRequest; the password is usually 16 bytes but may be any length.
pub fn connect_request() -> impl Strategy<Value = ConnectRequest> {
    (int(), long(), int(), long(), password(), any::<bool>()).prop_map(
        |(protocol_version, last_zxid_seen, timeout_ms, session_id, passwd, read_only)| {
            ConnectRequest {
                protocol_version,
                last_zxid_seen,
                timeout_ms,
                session_id,
                passwd,
                read_only,
            }
        },
    )
}

/// A ConnectResponse.
pub fn connect_response() -> impl Strategy<Value = ConnectResponse> {
    (int(), int(), long(), password(), any::<bool>()).prop_map(
        |(protocol_version, timeout_ms, session_id, passwd, read_only)| ConnectResponse {
            protocol_version,
            timeout_ms,
            session_id,
            passwd,
            read_only,
        },
    )
}

fn password() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), PASSWORD_LEN),
        Just(vec![0; PASSWORD_LEN]),
        bytes()
    ]
}

/// A RequestHeader with any xid and a known or arbitrary opcode.
pub fn request_header() -> impl Strategy<Value = RequestHeader> {
    (int(), prop_oneof![op_code().prop_map(OpCode::code), int()])
        .prop_map(|(xid, op)| RequestHeader { xid, op })
}

/// A ReplyHeader with a known or arbitrary error code.
pub fn reply_header() -> impl Strategy<Value = ReplyHeader> {
    (
        int(),
        long(),
        prop_oneof![error_code().prop_map(ErrorCode::code), int()],
    )
        .prop_map(|(xid, zxid, err)| ReplyHeader { xid, zxid, err })
}

// ---- Data records ----

/// Any Stat.
pub fn stat() -> impl Strategy<Value = Stat> {
    (
        (long(), long(), long(), long()),
        (int(), int(), int()),
        long(),
        (int(), int()),
        long(),
    )
        .prop_map(
            |(
                (czxid, mzxid, ctime, mtime),
                (version, cversion, aversion),
                ephemeral_owner,
                (data_length, num_children),
                pzxid,
            )| Stat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner,
                data_length,
                num_children,
                pzxid,
            },
        )
}

/// Any Id.
pub fn id() -> impl Strategy<Value = Id> {
    (string(), string()).prop_map(|(scheme, id)| Id { scheme, id })
}

/// Any ACL entry.
pub fn acl() -> impl Strategy<Value = Acl> {
    (int(), id()).prop_map(|(perms, id)| Acl { perms, id })
}

/// An ACL list, possibly empty.
pub fn acls() -> impl Strategy<Value = Vec<Acl>> {
    vec(acl(), 0..4)
}

/// Any ClientInfo.
pub fn client_info() -> impl Strategy<Value = ClientInfo> {
    (string(), string()).prop_map(|(auth_scheme, user)| ClientInfo { auth_scheme, user })
}

// ---- Single-node operations ----

/// A CreateRequest with any mode.
pub fn create_request() -> impl Strategy<Value = CreateRequest> {
    (string(), opt_bytes(), acls(), create_mode()).prop_map(|(path, data, acl, mode)| {
        CreateRequest {
            path,
            data,
            acl,
            mode,
        }
    })
}

/// A CreateTtlRequest with any mode and TTL.
pub fn create_ttl_request() -> impl Strategy<Value = CreateTtlRequest> {
    (string(), opt_bytes(), acls(), create_mode(), long()).prop_map(
        |(path, data, acl, mode, ttl)| CreateTtlRequest {
            path,
            data,
            acl,
            mode,
            ttl,
        },
    )
}

/// A CreateResponse.
pub fn create_response() -> impl Strategy<Value = CreateResponse> {
    string().prop_map(|path| CreateResponse { path })
}

/// A Create2Response.
pub fn create2_response() -> impl Strategy<Value = Create2Response> {
    (string(), stat()).prop_map(|(path, stat)| Create2Response { path, stat })
}

/// A DeleteRequest.
pub fn delete_request() -> impl Strategy<Value = DeleteRequest> {
    (string(), int()).prop_map(|(path, version)| DeleteRequest { path, version })
}

/// An ExistsRequest.
pub fn exists_request() -> impl Strategy<Value = ExistsRequest> {
    (string(), any::<bool>()).prop_map(|(path, watch)| ExistsRequest { path, watch })
}

/// An ExistsResponse.
pub fn exists_response() -> impl Strategy<Value = ExistsResponse> {
    stat().prop_map(|stat| ExistsResponse { stat })
}

/// A GetDataRequest.
pub fn get_data_request() -> impl Strategy<Value = GetDataRequest> {
    (string(), any::<bool>()).prop_map(|(path, watch)| GetDataRequest { path, watch })
}

/// A GetDataResponse, with null, empty or other data.
pub fn get_data_response() -> impl Strategy<Value = GetDataResponse> {
    (opt_bytes(), stat()).prop_map(|(data, stat)| GetDataResponse { data, stat })
}

/// A SetDataRequest.
pub fn set_data_request() -> impl Strategy<Value = SetDataRequest> {
    (string(), opt_bytes(), int()).prop_map(|(path, data, version)| SetDataRequest {
        path,
        data,
        version,
    })
}

/// A SetDataResponse.
pub fn set_data_response() -> impl Strategy<Value = SetDataResponse> {
    stat().prop_map(|stat| SetDataResponse { stat })
}

/// A GetAclRequest.
pub fn get_acl_request() -> impl Strategy<Value = GetAclRequest> {
    string().prop_map(|path| GetAclRequest { path })
}

/// A GetAclResponse.
pub fn get_acl_response() -> impl Strategy<Value = GetAclResponse> {
    (acls(), stat()).prop_map(|(acl, stat)| GetAclResponse { acl, stat })
}

/// A SetAclRequest.
pub fn set_acl_request() -> impl Strategy<Value = SetAclRequest> {
    (string(), acls(), int()).prop_map(|(path, acl, version)| SetAclRequest { path, acl, version })
}

/// A SetAclResponse.
pub fn set_acl_response() -> impl Strategy<Value = SetAclResponse> {
    stat().prop_map(|stat| SetAclResponse { stat })
}

/// A GetChildrenRequest (also the getChildren2 request).
pub fn get_children_request() -> impl Strategy<Value = GetChildrenRequest> {
    (string(), any::<bool>()).prop_map(|(path, watch)| GetChildrenRequest { path, watch })
}

/// A GetChildrenResponse.
pub fn get_children_response() -> impl Strategy<Value = GetChildrenResponse> {
    strings().prop_map(|children| GetChildrenResponse { children })
}

/// A GetChildren2Response.
pub fn get_children2_response() -> impl Strategy<Value = GetChildren2Response> {
    (strings(), stat()).prop_map(|(children, stat)| GetChildren2Response { children, stat })
}

/// A PathRecord (sync, getEphemerals and getAllChildrenNumber requests, and
/// the sync reply).
pub fn path_record() -> impl Strategy<Value = PathRecord> {
    string().prop_map(|path| PathRecord { path })
}

/// A CheckVersionRequest.
pub fn check_version_request() -> impl Strategy<Value = CheckVersionRequest> {
    (string(), int()).prop_map(|(path, version)| CheckVersionRequest { path, version })
}

/// A GetEphemeralsResponse.
pub fn get_ephemerals_response() -> impl Strategy<Value = GetEphemeralsResponse> {
    strings().prop_map(|ephemerals| GetEphemeralsResponse { ephemerals })
}

/// A GetAllChildrenNumberResponse.
pub fn get_all_children_number_response() -> impl Strategy<Value = GetAllChildrenNumberResponse> {
    int().prop_map(|total_number| GetAllChildrenNumberResponse { total_number })
}

// ---- Session and watches ----

/// An AuthPacket.
pub fn auth_packet() -> impl Strategy<Value = AuthPacket> {
    (int(), string(), bytes()).prop_map(|(auth_type, scheme, auth)| AuthPacket {
        auth_type,
        scheme,
        auth,
    })
}

/// A WhoAmIResponse.
pub fn who_am_i_response() -> impl Strategy<Value = WhoAmIResponse> {
    vec(client_info(), 0..4).prop_map(|client_info| WhoAmIResponse { client_info })
}

/// A SetWatches.
pub fn set_watches() -> impl Strategy<Value = SetWatches> {
    (long(), strings(), strings(), strings()).prop_map(
        |(relative_zxid, data_watches, exist_watches, child_watches)| SetWatches {
            relative_zxid,
            data_watches,
            exist_watches,
            child_watches,
        },
    )
}

/// A SetWatches2.
pub fn set_watches2() -> impl Strategy<Value = SetWatches2> {
    (
        long(),
        strings(),
        strings(),
        strings(),
        strings(),
        strings(),
    )
        .prop_map(
            |(
                relative_zxid,
                data_watches,
                exist_watches,
                child_watches,
                persistent_watches,
                persistent_recursive_watches,
            )| SetWatches2 {
                relative_zxid,
                data_watches,
                exist_watches,
                child_watches,
                persistent_watches,
                persistent_recursive_watches,
            },
        )
}

/// An AddWatchRequest.
pub fn add_watch_request() -> impl Strategy<Value = AddWatchRequest> {
    (string(), add_watch_mode()).prop_map(|(path, mode)| AddWatchRequest { path, mode })
}

/// A RemoveWatchesRequest (also the checkWatches request).
pub fn remove_watches_request() -> impl Strategy<Value = RemoveWatchesRequest> {
    (string(), watcher_type())
        .prop_map(|(path, watcher_type)| RemoveWatchesRequest { path, watcher_type })
}

/// An ErrorResponse with a known or arbitrary code.
pub fn error_response() -> impl Strategy<Value = ErrorResponse> {
    prop_oneof![error_code().prop_map(ErrorCode::code), int()].prop_map(|err| ErrorResponse { err })
}

/// A WatcherEvent.
pub fn watcher_event() -> impl Strategy<Value = WatcherEvent> {
    (event_type(), keeper_state(), string()).prop_map(|(event_type, state, path)| WatcherEvent {
        event_type,
        state,
        path,
    })
}

// ---- Multi ----

/// A MultiHeader with any field values.
pub fn multi_header() -> impl Strategy<Value = MultiHeader> {
    (int(), any::<bool>(), int()).prop_map(|(op_type, done, err)| MultiHeader {
        op_type,
        done,
        err,
    })
}

/// Any op of a multi or multiRead request.
pub fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        create_request().prop_map(MultiOp::Create),
        create_request().prop_map(MultiOp::Create2),
        create_request().prop_map(MultiOp::CreateContainer),
        create_ttl_request().prop_map(MultiOp::CreateTtl),
        delete_request().prop_map(MultiOp::Delete),
        set_data_request().prop_map(MultiOp::SetData),
        check_version_request().prop_map(MultiOp::Check),
        get_children_request().prop_map(MultiOp::GetChildren),
        get_data_request().prop_map(MultiOp::GetData),
    ]
}

/// A multi request with a random mix of ops (reads and writes may mix: the
/// codec does not enforce the server's rule against it), possibly empty.
pub fn multi_request() -> impl Strategy<Value = MultiRequest> {
    vec(multi_op(), 0..8).prop_map(|ops| MultiRequest { ops })
}

/// Any result of a multi response.
pub fn op_result() -> impl Strategy<Value = OpResult> {
    prop_oneof![
        create_response().prop_map(OpResult::Create),
        create2_response().prop_map(OpResult::Create2),
        Just(OpResult::Delete),
        set_data_response().prop_map(OpResult::SetData),
        Just(OpResult::Check),
        get_children_response().prop_map(OpResult::GetChildren),
        get_data_response().prop_map(OpResult::GetData),
        error_response().prop_map(OpResult::Error),
    ]
}

/// A multi response with a random mix of results, possibly empty.
pub fn multi_response() -> impl Strategy<Value = MultiResponse> {
    prop_oneof![
        vec(op_result(), 0..8).prop_map(|results| MultiResponse { results }),
        failed_multi_response(),
    ]
}

/// The response to a failed multi: 0 for the ops before the failing one, its
/// code for the failing op, RuntimeInconsistency for the ops after it.
pub fn failed_multi_response() -> impl Strategy<Value = MultiResponse> {
    (0..6usize, 0..6usize, error_code()).prop_map(|(before, after, code)| {
        let err = |err| OpResult::Error(ErrorResponse { err });
        let mut results = vec![err(0); before];
        results.push(err(code.code()));
        results.extend(vec![err(ErrorCode::RuntimeInconsistency.code()); after]);
        MultiResponse { results }
    })
}
