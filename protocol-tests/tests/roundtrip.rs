//! Property tests over generated records (strategies in `src/strategies.rs`):
//!
//! - `decode(encode(x)) == x` for every record type, and the encoding is
//!   self-delimiting: read from a longer buffer it consumes exactly itself,
//!   and `from_bytes` refuses the extra bytes;
//! - every truncation of a valid encoding fails to decode with a truncation
//!   error and never panics, except where the format allows a shorter record:
//!   a ConnectRequest/ConnectResponse without its trailing readOnly byte;
//! - reply bodies decode to the right `Response` variant for their opcode, and
//!   whole frames survive `write_request`/`write_frame` and `split_frame`.

use std::fmt::Debug;

use proptest::prelude::*;
use protocol_tests::strategies as st;
use zklock::proto::*;

/// Round trip, self-delimitation and truncation, for one value.
fn check<T: Record + PartialEq + Debug>(value: &T) -> Result<(), TestCaseError> {
    check_with_legacy(value, |_| None)
}

/// As [`check`]; `legacy(value)` is what a truncation one byte short decodes
/// to, for the records whose last byte is optional.
fn check_with_legacy<T: Record + PartialEq + Debug>(
    value: &T,
    legacy: impl Fn(&T) -> Option<T>,
) -> Result<(), TestCaseError> {
    let bytes = value.to_bytes();
    prop_assert!(bytes.len() >= T::MIN_SIZE, "shorter than MIN_SIZE");
    let decoded = T::from_bytes(&bytes);
    prop_assert_eq!(decoded.as_ref(), Ok(value));

    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0xAB, 0xCD, 0xEF]);
    let mut r = Reader::new(&longer);
    let decoded = T::read(&mut r);
    prop_assert_eq!(decoded.as_ref(), Ok(value));
    prop_assert_eq!(r.rest(), &[0xAB, 0xCD, 0xEF][..]);
    let trailing = T::from_bytes(&longer).expect_err("3 bytes more");
    prop_assert_eq!(trailing.reason(), &DecodeError::TrailingBytes(3));
    // Named by its record.
    prop_assert!(trailing.field().is_some(), "{}", trailing);

    for len in 0..bytes.len() {
        match T::from_bytes(&bytes[..len]) {
            // Every truncation is reported in a field.
            Err(e)
                if e.field().is_some()
                    && matches!(
                        e.reason(),
                        DecodeError::UnexpectedEof { .. } | DecodeError::LengthExceedsFrame { .. }
                    ) => {}
            Err(e) => prop_assert!(false, "{len}-byte prefix: unexpected error {e:?}"),
            Ok(shorter) => {
                let allowed = if len + 1 == bytes.len() {
                    legacy(value)
                } else {
                    None
                };
                prop_assert_eq!(Some(shorter), allowed, "{}-byte prefix decoded", len);
            }
        }
    }
    Ok(())
}

/// Declares one property per record type: `name` uses the strategy of the
/// same name, `name: strategy` another one.
macro_rules! roundtrip {
    ($($name:ident $(: $strategy:expr)?;)*) => {
        proptest! {
            $(
                #[test]
                fn $name(value in roundtrip!(@strategy $name $($strategy)?)) {
                    check(&value)?;
                }
            )*
        }
    };
    (@strategy $name:ident) => { st::$name() };
    (@strategy $name:ident $strategy:expr) => { $strategy };
}

roundtrip! {
    request_header;
    reply_header;
    stat;
    id;
    acl;
    client_info;
    create_request;
    create_ttl_request;
    create_response;
    create2_response;
    delete_request;
    exists_request;
    exists_response;
    get_data_request;
    get_data_response;
    set_data_request;
    set_data_response;
    get_acl_request;
    get_acl_response;
    set_acl_request;
    set_acl_response;
    get_children_request;
    get_children_response;
    get_children2_response;
    path_record;
    check_version_request;
    get_ephemerals_response;
    get_all_children_number_response;
    auth_packet;
    who_am_i_response;
    set_watches;
    set_watches2;
    add_watch_request;
    remove_watches_request;
    error_response;
    watcher_event;
    multi_header;
    multi_op: st::multi_op().prop_map(|op| MultiRequest { ops: vec![op] });
    multi_request;
    op_result: st::op_result().prop_map(|r| MultiResponse { results: vec![r] });
    multi_response;
    failed_multi_response;
}

proptest! {
    /// A ConnectRequest one byte short (no readOnly) is a pre-3.4 request.
    #[test]
    fn connect_request(value in st::connect_request()) {
        check_with_legacy(&value, |v| Some(ConnectRequest { read_only: false, ..v.clone() }))?;
    }

    /// A ConnectResponse one byte short is the reply to a pre-3.4 client.
    #[test]
    fn connect_response(value in st::connect_response()) {
        check_with_legacy(&value, |v| Some(ConnectResponse { read_only: false, ..v.clone() }))?;
    }

    /// Every reply body decodes, by its request's opcode, to what was encoded.
    #[test]
    fn responses_decode_by_opcode((op, response) in response()) {
        let body = encode_response(&response);
        prop_assert_eq!(Response::decode(op, &body), Ok(response));
    }

    /// A request frame splits back into its header and body.
    #[test]
    fn request_frames(xid in st::int(), op in st::op_code(), body in st::multi_request()) {
        let mut buf = vec![0x55];
        let len = write_request(&mut buf, xid, op, &body);
        let (payload, consumed) = split_frame(&buf[1..], usize::MAX).unwrap().unwrap();
        prop_assert_eq!(consumed, buf.len() - 1);
        prop_assert_eq!(payload.len(), len);
        let mut r = Reader::new(payload);
        prop_assert_eq!(RequestHeader::read(&mut r), Ok(RequestHeader { xid, op: op.code() }));
        prop_assert_eq!(MultiRequest::from_bytes(r.rest()), Ok(body));
    }

    /// A handshake frame holds exactly its record.
    #[test]
    fn handshake_frames(record in st::connect_request()) {
        let mut buf = Vec::new();
        let len = write_frame(&mut buf, &record);
        let (payload, consumed) = split_frame(&buf, usize::MAX).unwrap().unwrap();
        prop_assert_eq!((payload.len(), consumed), (len, buf.len()));
        prop_assert_eq!(ConnectRequest::from_bytes(payload), Ok(record));
    }
}

/// The opcodes whose successful reply has no body.
const EMPTY_REPLIES: &[OpCode] = &[
    OpCode::Delete,
    OpCode::Ping,
    OpCode::Check,
    OpCode::Auth,
    OpCode::SetWatches,
    OpCode::SetWatches2,
    OpCode::CheckWatches,
    OpCode::RemoveWatches,
    OpCode::CloseSession,
];

/// A reply body and the opcode of the request it answers.
fn response() -> impl Strategy<Value = (OpCode, Response)> {
    prop_oneof![
        prop::sample::select(EMPTY_REPLIES).prop_map(|op| (op, Response::Empty)),
        st::create_response().prop_map(|r| (OpCode::Create, Response::Create(r))),
        (
            st::create2_response(),
            prop::sample::select(
                &[OpCode::Create2, OpCode::CreateContainer, OpCode::CreateTtl][..]
            )
        )
            .prop_map(|(r, op)| (op, Response::Create2(r))),
        st::exists_response().prop_map(|r| (OpCode::Exists, Response::Exists(r))),
        (
            st::get_data_response(),
            prop::sample::select(&[OpCode::GetData, OpCode::Reconfig][..])
        )
            .prop_map(|(r, op)| (op, Response::GetData(r))),
        st::set_data_response().prop_map(|r| (OpCode::SetData, Response::SetData(r))),
        st::get_acl_response().prop_map(|r| (OpCode::GetAcl, Response::GetAcl(r))),
        st::set_acl_response().prop_map(|r| (OpCode::SetAcl, Response::SetAcl(r))),
        st::get_children_response().prop_map(|r| (OpCode::GetChildren, Response::GetChildren(r))),
        st::get_children2_response()
            .prop_map(|r| (OpCode::GetChildren2, Response::GetChildren2(r))),
        st::path_record().prop_map(|r| (OpCode::Sync, Response::Sync(r))),
        st::multi_response().prop_map(|r| (OpCode::Multi, Response::Multi(r))),
        st::multi_response().prop_map(|r| (OpCode::MultiRead, Response::Multi(r))),
        st::error_response().prop_map(|r| (OpCode::AddWatch, Response::AddWatch(r))),
        st::get_ephemerals_response()
            .prop_map(|r| (OpCode::GetEphemerals, Response::GetEphemerals(r))),
        st::get_all_children_number_response().prop_map(|r| (
            OpCode::GetAllChildrenNumber,
            Response::GetAllChildrenNumber(r)
        )),
        st::who_am_i_response().prop_map(|r| (OpCode::WhoAmI, Response::WhoAmI(r))),
    ]
}

fn encode_response(response: &Response) -> Vec<u8> {
    match response {
        Response::Empty => Vec::new(),
        Response::Create(r) => r.to_bytes(),
        Response::Create2(r) => r.to_bytes(),
        Response::Exists(r) => r.to_bytes(),
        Response::GetData(r) => r.to_bytes(),
        Response::SetData(r) => r.to_bytes(),
        Response::GetAcl(r) => r.to_bytes(),
        Response::SetAcl(r) => r.to_bytes(),
        Response::GetChildren(r) => r.to_bytes(),
        Response::GetChildren2(r) => r.to_bytes(),
        Response::Sync(r) => r.to_bytes(),
        Response::Multi(r) => r.to_bytes(),
        Response::AddWatch(r) => r.to_bytes(),
        Response::GetEphemerals(r) => r.to_bytes(),
        Response::GetAllChildrenNumber(r) => r.to_bytes(),
        Response::WhoAmI(r) => r.to_bytes(),
    }
}
