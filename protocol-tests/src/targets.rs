//! Fuzz target bodies, shared by `fuzz/` (libFuzzer) and the corpus replay test.
//!
//! Each target feeds arbitrary bytes to one entry point that a server's bytes
//! reach, and checks more than "no panic":
//!
//! - a decoded value re-encodes to bytes that decode to an equal value;
//! - where the encoding is canonical, re-encoding gives back the input bytes
//!   exactly. The input may legitimately differ from the re-encoding only by a
//!   non-0/1 boolean byte, a CESU-8 string (a surrogate pair in 6 bytes where
//!   UTF-8 takes 4), a missing readOnly byte in a ConnectResponse, and the
//!   MultiHeader fields the reader ignores (the `err` copy, the terminator);
//! - a decoded value never claims more bytes than the input had: the
//!   re-encoding is never longer than the input, a frame never extends past
//!   the buffer, and decoding is prefix-free (a strict prefix of a decodable
//!   input fails, and so does the input plus one trailing byte).
//!
//! Failed invariants panic, which libFuzzer reports as a crash.

use std::time::{Duration, Instant};

use zklock::proto::{
    read_notification, read_reply_header, split_frame, Acl, AddWatchMode, AddWatchRequest,
    AuthPacket, CheckVersionRequest, ConnectResponse, CreateMode, CreateRequest, DecodeError,
    DeleteRequest, EventType, ExistsRequest, GetChildrenRequest, GetDataRequest, KeeperState,
    MultiOp, MultiRequest, MultiResponse, OpCode, OpResult, PathRecord, Reader, Record,
    RemoveWatchesRequest, ReplyHeader, RequestHeader, Response, SetDataRequest, WatcherEvent,
    WatcherType, Writer, AUTH_XID, DEFAULT_MAX_FRAME, MULTI_TERMINATOR, NOTIFICATION_XID, PING_XID,
};
use zklock::session::{
    BatchRead, Event as SessionEvent, Probe, Release, Session, SessionConfig, State, Successor,
    WatchKind, WatchRequest,
};
use zklock::Error;

/// The signature of every target.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/<name>.rs` binary and
/// its `fuzz/corpus/<name>/` directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("frame_split", frame_split),
    ("connect_response", connect_response),
    ("reply", reply),
    ("watcher_event", watcher_event),
    ("multi_response", multi_response),
    ("stream", stream),
    ("session", session),
];

/// The frame limits `frame_split` chooses from with its first byte.
pub const MAX_FRAMES: [usize; 6] = [0, 1, 16, 4096, DEFAULT_MAX_FRAME, usize::MAX];

/// The ops a client sends, and so may receive a reply for; the first byte of a
/// `reply` input picks one (modulo the length).
pub const REPLY_OPS: &[OpCode] = &[
    OpCode::Create,
    OpCode::Delete,
    OpCode::Exists,
    OpCode::GetData,
    OpCode::SetData,
    OpCode::GetAcl,
    OpCode::SetAcl,
    OpCode::GetChildren,
    OpCode::Sync,
    OpCode::Ping,
    OpCode::GetChildren2,
    OpCode::Check,
    OpCode::Multi,
    OpCode::Create2,
    OpCode::Reconfig,
    OpCode::CheckWatches,
    OpCode::RemoveWatches,
    OpCode::CreateContainer,
    OpCode::CreateTtl,
    OpCode::MultiRead,
    OpCode::Auth,
    OpCode::SetWatches,
    OpCode::Sasl,
    OpCode::GetEphemerals,
    OpCode::GetAllChildrenNumber,
    OpCode::SetWatches2,
    OpCode::AddWatch,
    OpCode::WhoAmI,
    OpCode::CloseSession,
];

/// Server-internal opcodes: no reply body to them can ever be valid.
pub const SERVER_INTERNAL_OPS: &[OpCode] = &[
    OpCode::Notification,
    OpCode::DeleteContainer,
    OpCode::CreateSession,
    OpCode::Error,
];

/// Bytes appended after an input to check that decoding through a
/// [`Reader`] stops exactly at the end of the record.
const TAIL: &[u8] = b"\xff\x00\x7ftail";

// ---------------------------------------------------------------------------
// frame_split
// ---------------------------------------------------------------------------

/// `split_frame` over an arbitrary stream. The first byte picks the frame
/// limit from [`MAX_FRAMES`] (and the chunking of the simulated socket reads);
/// the rest is the stream.
///
/// Checks: one call agrees with a model of the framing rule; every prefix of
/// the stream gives "need more" until the first frame is complete and then
/// that same frame, while a bad length is refused as soon as the 4-byte
/// prefix is in; splitting the whole buffer into frames and re-framing the
/// payloads gives back exactly the bytes consumed; delivering the stream in
/// chunks yields the same frames and the same failure.
pub fn frame_split(data: &[u8]) {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let max = MAX_FRAMES[usize::from(sel) % MAX_FRAMES.len()];

    let first = split_frame(stream, max);
    check_split(stream, max, &first);
    for k in 0..=stream.len() {
        let got = split_frame(&stream[..k], max);
        match (&first, &got) {
            _ if k < 4 => assert_eq!(got, Ok(None), "a {k}-byte prefix is not a frame"),
            (Err(_), Err(_)) | (Ok(None), Ok(None)) => {}
            (Ok(Some((_, n))), Ok(None)) if k < *n => {}
            (Ok(Some(whole)), Ok(Some(part))) if k >= whole.1 => assert_eq!(whole, part),
            _ => {
                panic!("split_frame of a {k}-byte prefix gave {got:?}, the whole stream {first:?}")
            }
        }
    }

    let (frames, consumed, failed) = split_all(stream, max);
    let mut reframed = Vec::new();
    for payload in &frames {
        zklock::proto::write_frame(&mut reframed, &Raw(payload.to_vec()));
    }
    assert_eq!(reframed, &stream[..consumed], "re-framed payloads");
    let trailing = split_frame(&stream[consumed..], max);
    match trailing {
        Ok(None) => assert!(!failed),
        Err(_) => assert!(failed),
        Ok(Some(_)) => panic!("split_all stopped before a complete frame"),
    }

    // The same stream delivered in socket reads of varying sizes.
    let mut buf = Vec::new();
    let mut chunked = Vec::new();
    let mut chunked_failed = false;
    let mut pos = 0;
    let mut size = usize::from(sel >> 3) + 1;
    'feed: while pos < stream.len() {
        let n = size.min(stream.len() - pos);
        buf.extend_from_slice(&stream[pos..pos + n]);
        pos += n;
        size = (size * 7 + 3) % 97 + 1;
        loop {
            match split_frame(&buf, max) {
                Ok(Some((payload, used))) => {
                    assert_eq!(used, payload.len() + 4);
                    chunked.push(payload.to_vec());
                    buf.drain(..used);
                }
                Ok(None) => break,
                Err(_) => {
                    chunked_failed = true;
                    break 'feed;
                }
            }
        }
    }
    assert_eq!(chunked, frames, "frames from chunked delivery");
    assert_eq!(chunked_failed, failed, "failure from chunked delivery");
    if !failed {
        assert_eq!(
            buf,
            &stream[consumed..],
            "bytes left after chunked delivery"
        );
    }
}

/// The framing rule, independently: a 4-byte big-endian signed length, then
/// that many bytes; negative or over-limit lengths fail from the prefix alone.
fn model_split(buf: &[u8], max: usize) -> Result<Option<(&[u8], usize)>, ()> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let len = usize::try_from(len).map_err(|_| ())?;
    if len > max {
        return Err(());
    }
    Ok(buf.get(4..4 + len).map(|p| (p, 4 + len)))
}

fn check_split(buf: &[u8], max: usize, got: &Result<Option<(&[u8], usize)>, DecodeError>) {
    let model = model_split(buf, max);
    match (got, &model) {
        (Err(e), Err(())) => assert!(
            matches!(
                e,
                DecodeError::NegativeFrameLength(_) | DecodeError::FrameTooLarge { .. }
            ),
            "unexpected framing error {e:?}"
        ),
        (Ok(g), Ok(m)) => assert_eq!(g, m, "split_frame disagrees with the model"),
        _ => panic!("split_frame gave {got:?}, the model {model:?}"),
    }
    if let Ok(Some((payload, used))) = got {
        assert!(
            *used <= buf.len(),
            "a frame claims more bytes than the buffer has"
        );
        assert!(payload.len() <= max, "a frame above the limit was accepted");
        assert_eq!(*used, payload.len() + 4);
        assert!(std::ptr::eq(payload.as_ptr(), buf[4..].as_ptr()));
    }
}

/// Splits `stream` into as many frames as it holds. Returns the payloads, the
/// bytes they occupied, and whether splitting stopped on an error.
fn split_all(stream: &[u8], max: usize) -> (Vec<Vec<u8>>, usize, bool) {
    let mut frames = Vec::new();
    let mut consumed = 0;
    loop {
        let rest = &stream[consumed..];
        let got = split_frame(rest, max);
        check_split(rest, max, &got);
        match got {
            Ok(Some((payload, used))) => {
                frames.push(payload.to_vec());
                consumed += used;
            }
            Ok(None) => return (frames, consumed, false),
            Err(_) => return (frames, consumed, true),
        }
    }
}

/// Raw payload bytes as a record, to frame them with `write_frame`.
struct Raw(Vec<u8>);

impl Record for Raw {
    const MIN_SIZE: usize = 0;
    fn write(&self, w: &mut Writer<'_>) {
        for &b in &self.0 {
            w.write_u8(b);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Raw(r.take(r.remaining())?.to_vec()))
    }
}

// ---------------------------------------------------------------------------
// connect_response
// ---------------------------------------------------------------------------

/// `ConnectResponse::from_bytes` over the raw record (no frame prefix).
pub fn connect_response(data: &[u8]) {
    check_connect_response(data);
}

fn check_connect_response(data: &[u8]) -> Option<ConnectResponse> {
    let decoded = ConnectResponse::from_bytes(data);
    // One trailing byte more: accepted as the readOnly byte only if the
    // input had none.
    let mut longer = data.to_vec();
    longer.push(2);
    let longer = ConnectResponse::from_bytes(&longer);

    let Ok(resp) = decoded else {
        if let Ok(l) = longer {
            // The byte can only have completed the password: a record
            // missing just its readOnly byte would have decoded.
            assert!(!l.read_only, "completed {l:?}");
            assert_eq!(l.passwd.last(), Some(&2), "completed {l:?}");
            assert_eq!(data.len() + 1, 20 + l.passwd.len(), "completed {l:?}");
        }
        return None;
    };
    assert_eq!(resp.is_expired(), resp.timeout_ms <= 0);

    let fixed = 4 + 4 + 8 + 4 + resp.passwd.len();
    assert!(
        data.len() == fixed || data.len() == fixed + 1,
        "{} input bytes for a record of {fixed} (+1) bytes",
        data.len()
    );
    let has_read_only = data.len() == fixed + 1;

    let enc = resp.to_bytes();
    assert_eq!(ConnectResponse::from_bytes(&enc).as_ref(), Ok(&resp));
    // Canonical up to the readOnly byte, which may be missing or any non-zero.
    let mut canonical = data[..fixed].to_vec();
    canonical.push(u8::from(has_read_only && data[fixed] != 0));
    assert_eq!(enc, canonical, "re-encoding of {resp:?}");

    if has_read_only {
        assert_eq!(resp.read_only, data[fixed] != 0);
        // Without the readOnly byte: the same record, read-write.
        let shorter = ConnectResponse::from_bytes(&data[..fixed]);
        let expected = ConnectResponse {
            read_only: false,
            ..resp.clone()
        };
        assert_eq!(shorter, Ok(expected));
        assert!(longer.is_err(), "two readOnly bytes accepted");
    } else {
        assert!(!resp.read_only);
        assert!(ConnectResponse::from_bytes(&data[..fixed - 1]).is_err());
        let with_ro = ConnectResponse {
            read_only: true,
            ..resp.clone()
        };
        assert_eq!(longer, Ok(with_ro));
    }
    Some(resp)
}

// ---------------------------------------------------------------------------
// reply
// ---------------------------------------------------------------------------

/// A reply payload (no frame prefix): the first byte picks the opcode of the
/// request being answered from [`REPLY_OPS`]; the rest is `ReplyHeader` plus
/// body, split by `read_reply_header` and decoded by `Response::decode`.
pub fn reply(data: &[u8]) {
    let Some((&sel, payload)) = data.split_first() else {
        return;
    };
    let op = REPLY_OPS[usize::from(sel) % REPLY_OPS.len()];
    let Some((_, body)) = check_reply_header(payload) else {
        return;
    };
    check_response(op, body);
    for &internal in SERVER_INTERNAL_OPS {
        assert!(
            Response::decode(internal, body).is_err(),
            "a reply body for server-internal op {internal:?} was accepted"
        );
    }
}

fn check_reply_header(payload: &[u8]) -> Option<(ReplyHeader, &[u8])> {
    match read_reply_header(payload) {
        Ok((header, body)) => {
            assert!(payload.len() >= 16, "a header from {} bytes", payload.len());
            assert_eq!(header.to_bytes(), &payload[..16]);
            assert_eq!(body, &payload[16..]);
            assert!(std::ptr::eq(body.as_ptr(), payload[16..].as_ptr()));
            Some((header, body))
        }
        Err(e) => {
            assert!(
                payload.len() < 16,
                "{e:?} for a {}-byte payload",
                payload.len()
            );
            None
        }
    }
}

/// Decodes `body` as the reply to `op` and checks the invariants; returns
/// whether it decoded.
fn check_response(op: OpCode, body: &[u8]) -> bool {
    let Ok(resp) = Response::decode(op, body) else {
        return false;
    };
    assert_eq!(
        variant_name(&resp),
        expected_variant(op),
        "reply to {op:?} decoded as {resp:?}"
    );
    let enc = encode_response(&resp);
    assert_eq!(
        Response::decode(op, &enc).as_ref(),
        Ok(&resp),
        "re-decoding the re-encoding of {resp:?}"
    );
    assert!(
        enc.len() <= body.len(),
        "{resp:?} re-encodes to {} bytes from {}",
        enc.len(),
        body.len()
    );
    match &resp {
        Response::Multi(m) => check_multi_layout(body, m, &enc),
        _ if !response_has_supplementary(&resp) => {
            assert_eq!(enc, body, "re-encoding of {resp:?}");
        }
        _ => {}
    }
    check_prefix_free(body, |b| Response::decode(op, b).is_ok());
    true
}

/// A strict prefix of a decodable record, and the record plus a byte, must
/// both fail: decoding consumes exactly the bytes the record occupies.
fn check_prefix_free(input: &[u8], decodes: impl Fn(&[u8]) -> bool) {
    if !input.is_empty() {
        assert!(
            !decodes(&input[..input.len() - 1]),
            "a strict prefix decoded"
        );
        assert!(
            !decodes(&input[..input.len() / 2]),
            "half the input decoded"
        );
    }
    let mut longer = input.to_vec();
    longer.push(0);
    assert!(!decodes(&longer), "a trailing byte was accepted");
}

fn variant_name(r: &Response) -> &'static str {
    match r {
        Response::Empty => "Empty",
        Response::Create(_) => "Create",
        Response::Create2(_) => "Create2",
        Response::Exists(_) => "Exists",
        Response::GetData(_) => "GetData",
        Response::SetData(_) => "SetData",
        Response::GetAcl(_) => "GetAcl",
        Response::SetAcl(_) => "SetAcl",
        Response::GetChildren(_) => "GetChildren",
        Response::GetChildren2(_) => "GetChildren2",
        Response::Sync(_) => "Sync",
        Response::Multi(_) => "Multi",
        Response::AddWatch(_) => "AddWatch",
        Response::GetEphemerals(_) => "GetEphemerals",
        Response::GetAllChildrenNumber(_) => "GetAllChildrenNumber",
        Response::WhoAmI(_) => "WhoAmI",
    }
}

/// The response record of each op, from the protocol's table (§4 and §5.2).
fn expected_variant(op: OpCode) -> &'static str {
    match op {
        OpCode::Create => "Create",
        OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => "Create2",
        OpCode::Exists => "Exists",
        OpCode::GetData | OpCode::Reconfig => "GetData",
        OpCode::SetData => "SetData",
        OpCode::GetAcl => "GetAcl",
        OpCode::SetAcl => "SetAcl",
        OpCode::GetChildren => "GetChildren",
        OpCode::GetChildren2 => "GetChildren2",
        OpCode::Sync => "Sync",
        OpCode::Multi | OpCode::MultiRead => "Multi",
        OpCode::AddWatch => "AddWatch",
        OpCode::GetEphemerals => "GetEphemerals",
        OpCode::GetAllChildrenNumber => "GetAllChildrenNumber",
        OpCode::WhoAmI => "WhoAmI",
        OpCode::Sasl => "SetSASLResponse (not modelled by Response)",
        _ => "Empty",
    }
}

/// The body bytes of a decoded reply.
pub fn encode_response(r: &Response) -> Vec<u8> {
    match r {
        Response::Empty => Vec::new(),
        Response::Create(x) => x.to_bytes(),
        Response::Create2(x) => x.to_bytes(),
        Response::Exists(x) => x.to_bytes(),
        Response::GetData(x) => x.to_bytes(),
        Response::SetData(x) => x.to_bytes(),
        Response::GetAcl(x) => x.to_bytes(),
        Response::SetAcl(x) => x.to_bytes(),
        Response::GetChildren(x) => x.to_bytes(),
        Response::GetChildren2(x) => x.to_bytes(),
        Response::Sync(x) => x.to_bytes(),
        Response::Multi(x) => x.to_bytes(),
        Response::AddWatch(x) => x.to_bytes(),
        Response::GetEphemerals(x) => x.to_bytes(),
        Response::GetAllChildrenNumber(x) => x.to_bytes(),
        Response::WhoAmI(x) => x.to_bytes(),
    }
}

/// True if `s` has a character outside the BMP: only then can its input
/// bytes have been CESU-8 rather than the UTF-8 the writer produces.
fn supplementary(s: &str) -> bool {
    s.chars().any(|c| u32::from(c) > 0xFFFF)
}

fn any_supplementary<S: AsRef<str>>(strings: &[S]) -> bool {
    strings.iter().any(|s| supplementary(s.as_ref()))
}

fn response_has_supplementary(r: &Response) -> bool {
    match r {
        Response::Create(x) => supplementary(&x.path),
        Response::Create2(x) => supplementary(&x.path),
        Response::Sync(x) => supplementary(&x.path),
        Response::GetAcl(x) => x
            .acl
            .iter()
            .any(|a| supplementary(&a.id.scheme) || supplementary(&a.id.id)),
        Response::GetChildren(x) => any_supplementary(&x.children),
        Response::GetChildren2(x) => any_supplementary(&x.children),
        Response::GetEphemerals(x) => any_supplementary(&x.ephemerals),
        Response::WhoAmI(x) => x
            .client_info
            .iter()
            .any(|c| supplementary(&c.auth_scheme) || supplementary(&c.user)),
        Response::Multi(m) => multi_has_supplementary(m),
        Response::Empty
        | Response::Exists(_)
        | Response::GetData(_)
        | Response::SetData(_)
        | Response::SetAcl(_)
        | Response::AddWatch(_)
        | Response::GetAllChildrenNumber(_) => false,
    }
}

fn multi_has_supplementary(m: &MultiResponse) -> bool {
    m.results.iter().any(|r| match r {
        OpResult::Create(x) => supplementary(&x.path),
        OpResult::Create2(x) => supplementary(&x.path),
        OpResult::GetChildren(x) => any_supplementary(&x.children),
        OpResult::Delete
        | OpResult::Check
        | OpResult::SetData(_)
        | OpResult::GetData(_)
        | OpResult::Error(_) => false,
    })
}

// ---------------------------------------------------------------------------
// multi_response
// ---------------------------------------------------------------------------

/// `MultiResponse::from_bytes` over a raw multi reply body, also through
/// `Response::decode` for multi and multiRead and through a [`Reader`].
pub fn multi_response(data: &[u8]) {
    let decoded = MultiResponse::from_bytes(data);
    for op in [OpCode::Multi, OpCode::MultiRead] {
        assert_eq!(
            Response::decode(op, data),
            decoded.clone().map(Response::Multi),
            "Response::decode({op:?}) disagrees with MultiResponse::from_bytes"
        );
    }
    // Decoded for a request of `ops` ops: the same, or refused for having
    // more results than that.
    let ops = usize::from(data.first().copied().unwrap_or(0) % 20);
    match (&decoded, MultiResponse::from_bytes_for(data, ops)) {
        (Ok(m), Ok(bounded)) => assert_eq!(&bounded, m),
        (Ok(m), Err(e)) => assert_eq!(
            (m.results.len() > ops, e),
            (
                true,
                DecodeError::Malformed("multi reply with more results than ops")
            )
        ),
        (Err(_), Ok(bounded)) => {
            panic!("for {ops} ops, decoded {bounded:?} where the unbounded decode failed")
        }
        (Err(_), Err(_)) => {}
    }

    // Through a Reader with bytes after the record: the terminator ends it,
    // and what was read decodes on its own to the same value.
    let with_tail = [data, TAIL].concat();
    let mut r = Reader::new(&with_tail);
    let via_reader = MultiResponse::read(&mut r);
    if let Ok(m) = &via_reader {
        let used = with_tail.len() - r.remaining();
        assert_eq!(
            MultiResponse::from_bytes(&with_tail[..used]).as_ref(),
            Ok(m)
        );
        if used < data.len() {
            assert_eq!(
                decoded,
                Err(DecodeError::TrailingBytes(data.len() - used).in_field("MultiResponse")),
                "bytes after the terminator"
            );
        }
    }

    let Ok(m) = decoded else {
        return;
    };
    assert_eq!(via_reader.as_ref(), Ok(&m));
    assert_eq!(r.rest(), TAIL);
    assert!(
        9 * (m.results.len() + 1) <= data.len(),
        "{} results from {} bytes",
        m.results.len(),
        data.len()
    );
    let enc = m.to_bytes();
    assert_eq!(MultiResponse::from_bytes(&enc).as_ref(), Ok(&m));
    assert!(enc.len() <= data.len());
    check_multi_layout(data, &m, &enc);
    check_prefix_free(data, |b| MultiResponse::from_bytes(b).is_ok());
}

/// Unless a string arrived as CESU-8, the input is the re-encoding except in
/// the fields the reader ignores: each header's `err` (re-encoded as the
/// result's own code) and the terminator (any header with `done` set).
fn check_multi_layout(input: &[u8], m: &MultiResponse, enc: &[u8]) {
    if multi_has_supplementary(m) {
        return;
    }
    assert_eq!(enc.len(), input.len(), "re-encoding length of {m:?}");
    let mut normalized = input.to_vec();
    let mut pos = 0;
    for result in &m.results {
        normalized[pos + 5..pos + 9].copy_from_slice(&result.err().to_be_bytes());
        let single = MultiResponse {
            results: vec![result.clone()],
        };
        pos += single.to_bytes().len() - MULTI_TERMINATOR.to_bytes().len();
    }
    assert_ne!(input[pos + 4], 0, "the terminator's done byte");
    normalized[pos..].copy_from_slice(&MULTI_TERMINATOR.to_bytes());
    assert_eq!(normalized, enc, "re-encoding of {m:?}");
}

// ---------------------------------------------------------------------------
// watcher_event
// ---------------------------------------------------------------------------

/// A notification payload (no frame prefix): `read_reply_header`, then
/// `read_notification`, which must refuse any xid but -1.
pub fn watcher_event(data: &[u8]) {
    let Some((header, body)) = check_reply_header(data) else {
        return;
    };
    check_watcher_event(&header, body);
}

fn check_watcher_event(header: &ReplyHeader, body: &[u8]) -> Option<WatcherEvent> {
    let got = read_notification(header, body);
    let direct = WatcherEvent::from_bytes(body);
    if header.xid == NOTIFICATION_XID {
        match &direct {
            // Only a node's change, in state SyncConnected, comes from a
            // server.
            Ok(event) if !event.event_type.is_node_change() => {
                let field = got.as_ref().err().and_then(DecodeError::field);
                assert_eq!(field, Some("WatcherEvent.event_type"), "{got:?}");
            }
            Ok(event) if event.state != KeeperState::SyncConnected => {
                let field = got.as_ref().err().and_then(DecodeError::field);
                assert_eq!(field, Some("WatcherEvent.state"), "{got:?}");
            }
            _ => assert_eq!(got, direct, "read_notification vs WatcherEvent::from_bytes"),
        }
    } else {
        assert!(got.is_err(), "a notification with xid {}", header.xid);
    }

    let with_tail = [body, TAIL].concat();
    let mut r = Reader::new(&with_tail);
    let via_reader = WatcherEvent::read(&mut r);

    if let Ok(e) = &via_reader {
        // What was read decodes on its own to the same event.
        let used = with_tail.len() - r.remaining();
        assert_eq!(WatcherEvent::from_bytes(&with_tail[..used]).as_ref(), Ok(e));
        if used < body.len() {
            assert_eq!(
                direct,
                Err(DecodeError::TrailingBytes(body.len() - used).in_field("WatcherEvent"))
            );
        }
    }
    let Ok(event) = direct else {
        return None;
    };
    assert_eq!(via_reader.as_ref(), Ok(&event));
    assert_eq!(r.rest(), TAIL);

    let enc = event.to_bytes();
    assert_eq!(WatcherEvent::from_bytes(&enc).as_ref(), Ok(&event));
    assert!(enc.len() <= body.len());
    if !supplementary(&event.path) {
        assert_eq!(enc, body, "re-encoding of {event:?}");
    }
    check_prefix_free(body, |b| WatcherEvent::from_bytes(b).is_ok());
    got.ok()
}

// ---------------------------------------------------------------------------
// stream
// ---------------------------------------------------------------------------

/// A whole server-to-client byte stream, as a client consumes it: frames
/// split with the default limit; the first is a ConnectResponse, each later
/// one a reply header plus body. Notifications (xid -1), pings (-2) and auth
/// replies (-4) are decoded as such; any other xid answers the op
/// `REPLY_OPS[xid mod len]`, and its body is decoded only when `err` is 0.
/// The stream ends at the first frame a client would drop the connection on.
pub fn stream(data: &[u8]) {
    let mut rest = data;
    let mut connected = false;
    while let Ok(Some((payload, used))) = split_frame(rest, DEFAULT_MAX_FRAME) {
        assert!(used <= rest.len());
        rest = &rest[used..];
        if !connected {
            if check_connect_response(payload).is_none() {
                return;
            }
            connected = true;
            continue;
        }
        let Some((header, body)) = check_reply_header(payload) else {
            return;
        };
        let ok = match header.xid {
            NOTIFICATION_XID => check_watcher_event(&header, body).is_some(),
            PING_XID => check_response(OpCode::Ping, body),
            AUTH_XID => header.err != 0 || check_response(OpCode::Auth, body),
            xid if header.err == 0 => {
                let idx = usize::try_from(xid.rem_euclid(REPLY_OPS.len() as i32)).unwrap_or(0);
                check_response(REPLY_OPS[idx], body)
            }
            _ => true,
        };
        if !ok {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// session
// ---------------------------------------------------------------------------

/// The session under test: tokens and watchers are plain numbers.
pub type FuzzSession = Session<u32, u32>;

/// `session` flag: a read-only server is acceptable.
pub const SESSION_CAN_BE_READ_ONLY: u8 = 1;
/// `session` flag: paths carry the chroot `/app`.
pub const SESSION_CHROOT: u8 = 2;
/// `session` flag: close the session right after the first handshake.
pub const SESSION_CLOSE: u8 = 4;
/// `session` flag: resume an existing session id instead of asking for one.
pub const SESSION_RESUME: u8 = 8;
/// `session` flag: deliver the stream in arbitrary chunks, ignoring frame
/// boundaries (a dropped connection loses the rest of its chunk), instead of
/// frame by frame (the rest of the stream then belongs to the next connection).
pub const SESSION_RAW_CHUNKS: u8 = 16;
/// `session` flag: a request (an auth packet too) unanswered for 5 s fails
/// with a timeout and drops the connection (`request_timeout`).
pub const SESSION_REQUEST_TIMEOUT: u8 = 32;

/// `session` flag: an expiry of the established session is followed by a
/// new session (`new_session_on_expiry`).
pub const SESSION_NEW_ON_EXPIRY: u8 = 64;

/// `session` flag: frames and requests are limited to
/// [`SMALL_MAX_FRAME`] and [`SMALL_MAX_REQUEST`] bytes, so that inputs of
/// a few kilobytes reach the limits: a reply over the frame limit (alone or
/// in a batch) and watch re-registrations split into several records.
pub const SESSION_SMALL_LIMITS: u8 = 128;

/// `max_frame` under [`SESSION_SMALL_LIMITS`].
pub const SMALL_MAX_FRAME: usize = 256;

/// `max_request` under [`SESSION_SMALL_LIMITS`].
pub const SMALL_MAX_REQUEST: usize = 128;

/// Token of the credentials added before the first connection.
pub const SESSION_AUTH_TOKEN: u32 = 1000;

/// Encodes a request body for the given chroot prefix.
type BodyFn = Box<dyn Fn(&str) -> Vec<u8>>;

/// Requests submitted before the first connection, as (token, op, body,
/// watch): `(kind, server path, watcher)`.
type Submission = (u32, OpCode, BodyFn, Option<(WatchKind, &'static str, u32)>);

/// A recorded request body, for `Session::submit`.
struct Body(Vec<u8>);

impl Record for Body {
    const MIN_SIZE: usize = 0;
    fn write(&self, w: &mut Writer<'_>) {
        for &b in &self.0 {
            w.write_u8(b);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Body(r.take(r.remaining())?.to_vec()))
    }
}

fn submissions() -> Vec<Submission> {
    fn path(root: &str, p: &str) -> String {
        format!("{root}{p}")
    }
    fn get(p: &'static str) -> BodyFn {
        Box::new(move |root| {
            GetDataRequest {
                path: path(root, p),
                watch: true,
            }
            .to_bytes()
        })
    }
    let create = |mode| {
        Box::new(move |root: &str| {
            CreateRequest {
                path: path(root, "/locks/lock-"),
                data: Some(b"x".to_vec()),
                acl: Acl::open_unsafe(),
                mode,
            }
            .to_bytes()
        }) as BodyFn
    };
    let read_ops = |root: &str| {
        MultiRequest {
            ops: vec![
                MultiOp::GetData(GetDataRequest {
                    path: path(root, "/a"),
                    watch: false,
                }),
                MultiOp::GetChildren(GetChildrenRequest {
                    path: path(root, "/"),
                    watch: false,
                }),
            ],
        }
        .to_bytes()
    };
    let write_ops = |root: &str| {
        MultiRequest {
            ops: vec![
                MultiOp::Create(CreateRequest {
                    path: path(root, "/m"),
                    data: None,
                    acl: Acl::open_unsafe(),
                    mode: CreateMode::Persistent,
                }),
                MultiOp::Check(CheckVersionRequest {
                    path: path(root, "/a"),
                    version: 3,
                }),
                MultiOp::Delete(DeleteRequest {
                    path: path(root, "/m"),
                    version: -1,
                }),
            ],
        }
        .to_bytes()
    };
    let path_only = |p: &'static str| {
        Box::new(move |root: &str| {
            PathRecord {
                path: path(root, p),
            }
            .to_bytes()
        }) as BodyFn
    };
    vec![
        (
            1,
            OpCode::GetData,
            get("/a"),
            Some((WatchKind::Data, "/a", 100)),
        ),
        (
            2,
            OpCode::Exists,
            Box::new(|root| {
                ExistsRequest {
                    path: path(root, "/b"),
                    watch: true,
                }
                .to_bytes()
            }),
            Some((WatchKind::Exist, "/b", 101)),
        ),
        (
            3,
            OpCode::GetChildren,
            Box::new(|root| {
                GetChildrenRequest {
                    path: path(root, "/"),
                    watch: true,
                }
                .to_bytes()
            }),
            Some((WatchKind::Child, "/", 102)),
        ),
        (
            4,
            OpCode::AddWatch,
            Box::new(|root| {
                AddWatchRequest {
                    path: path(root, "/c"),
                    mode: AddWatchMode::PersistentRecursive,
                }
                .to_bytes()
            }),
            Some((WatchKind::PersistentRecursive, "/c", 103)),
        ),
        (
            5,
            OpCode::AddWatch,
            Box::new(|root| {
                AddWatchRequest {
                    path: path(root, "/a"),
                    mode: AddWatchMode::Persistent,
                }
                .to_bytes()
            }),
            Some((WatchKind::Persistent, "/a", 104)),
        ),
        (
            6,
            OpCode::Create,
            create(CreateMode::EphemeralSequential),
            None,
        ),
        (7, OpCode::Create2, create(CreateMode::Persistent), None),
        (
            8,
            OpCode::CreateContainer,
            create(CreateMode::Container),
            None,
        ),
        (
            9,
            OpCode::SetData,
            Box::new(|root| {
                SetDataRequest {
                    path: path(root, "/a"),
                    data: Some(b"v2".to_vec()),
                    version: -1,
                }
                .to_bytes()
            }),
            None,
        ),
        (
            10,
            OpCode::Delete,
            Box::new(|root| {
                DeleteRequest {
                    path: path(root, "/x"),
                    version: 2,
                }
                .to_bytes()
            }),
            None,
        ),
        (11, OpCode::Multi, Box::new(write_ops), None),
        (12, OpCode::MultiRead, Box::new(read_ops), None),
        (13, OpCode::GetAcl, path_only("/a"), None),
        (
            14,
            OpCode::GetChildren2,
            Box::new(|root| {
                GetChildrenRequest {
                    path: path(root, "/c"),
                    watch: true,
                }
                .to_bytes()
            }),
            Some((WatchKind::Child, "/c", 105)),
        ),
        (15, OpCode::Sync, path_only("/"), None),
        (16, OpCode::WhoAmI, Box::new(|_| Vec::new()), None),
        (17, OpCode::GetEphemerals, path_only("/"), None),
        (18, OpCode::GetAllChildrenNumber, path_only("/"), None),
        (
            19,
            OpCode::Exists,
            get("/d"),
            Some((WatchKind::Exist, "/d", 106)),
        ),
    ]
}

/// A session that has submitted every request of the script (queued, as no
/// connection is up yet), added credentials, asked for a guaranteed delete,
/// and then connected: its ConnectRequest is waiting in the outbox. Returns
/// the session and the op of each token.
pub fn session_new(flags: u8, now: Instant) -> (FuzzSession, Vec<(u32, OpCode)>) {
    let root = session_root(flags);
    let config = SessionConfig {
        session_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(10),
        can_be_read_only: flags & SESSION_CAN_BE_READ_ONLY != 0,
        max_frame: if flags & SESSION_SMALL_LIMITS != 0 {
            SMALL_MAX_FRAME
        } else {
            DEFAULT_MAX_FRAME
        },
        max_request: if flags & SESSION_SMALL_LIMITS != 0 {
            SMALL_MAX_REQUEST
        } else {
            zklock::proto::JUTE_MAX_BUFFER
        },
        chroot: (!root.is_empty()).then(|| root.to_owned()),
        request_timeout: (flags & SESSION_REQUEST_TIMEOUT != 0).then(|| Duration::from_secs(5)),
        batch_reads: true,
        batch_writes: true,
        new_session_on_expiry: flags & SESSION_NEW_ON_EXPIRY != 0,
    };
    // Read-only, a second host is one to look for a read-write server at.
    let hosts = if flags & SESSION_CAN_BE_READ_ONLY != 0 {
        vec!["127.0.0.1:2181".to_owned(), "127.0.0.1:2182".to_owned()]
    } else {
        vec!["127.0.0.1:2181".to_owned()]
    };
    let mut session = Session::new(config, hosts, now);
    if flags & SESSION_RESUME != 0 {
        session.resume(0x1000_0a2b_3c4d_0000, (1..=16).collect());
    }
    let mut ops = Vec::new();
    for (token, op, body, watch) in submissions() {
        let watch = watch.map(|(kind, path, watcher)| WatchRequest {
            kind,
            path: format!("{root}{path}"),
            watcher,
        });
        session
            .submit(now, op, &Body(body(root)), token, watch)
            .expect("submitting before the first connection");
        ops.push((token, op));
    }
    session
        .add_auth(
            now,
            AuthPacket {
                auth_type: 0,
                scheme: "digest".into(),
                auth: b"user:secret".to_vec(),
            },
            SESSION_AUTH_TOKEN,
        )
        .expect("adding credentials");
    ops.push((SESSION_AUTH_TOKEN, OpCode::Auth));
    session
        .submit_background_delete(now, format!("{root}/locks/lock-0000000001"), -1)
        .expect("a guaranteed delete");
    session.handle_connected(now);
    (session, ops)
}

/// The chroot the `session` target's session runs under (`""`: none).
fn session_root(flags: u8) -> &'static str {
    if flags & SESSION_CHROOT != 0 {
        "/app"
    } else {
        ""
    }
}

/// Submits reads that share one `multiRead` (see [`BatchRead`]), as the
/// `session` target does once the session is connected, so that the stream
/// may also answer a batch. Returns the reads submitted, as (token, op).
pub fn submit_batched_reads(
    session: &mut FuzzSession,
    flags: u8,
    now: Instant,
) -> Vec<(u32, OpCode)> {
    let root = session_root(flags);
    let reads = [
        (2000, OpCode::GetData),
        (2001, OpCode::GetChildren),
        (2002, OpCode::GetData),
    ];
    reads
        .into_iter()
        .filter(|&(token, op)| {
            let path = format!("{root}/b");
            let read = match op {
                OpCode::GetChildren => {
                    BatchRead::Children(GetChildrenRequest { path, watch: false })
                }
                _ => BatchRead::Data(GetDataRequest { path, watch: false }),
            };
            session.submit_read(now, read, token).is_ok()
        })
        .collect()
}

/// Submits setData calls as the `session` target does right after its
/// batched reads: two that share one `multi`, and a versioned one that may
/// not join them (it writes a node they write), so that the stream may
/// answer, or fail, a batch of writes. Returns the calls submitted, as
/// (token, op).
pub fn submit_batched_writes(
    session: &mut FuzzSession,
    flags: u8,
    now: Instant,
) -> Vec<(u32, OpCode)> {
    let root = session_root(flags);
    let writes = [(2100, "w0", -1), (2101, "w1", -1), (2102, "w1", 3)];
    writes
        .into_iter()
        .filter(|&(token, node, version)| {
            let write = SetDataRequest {
                path: format!("{root}/{node}"),
                data: Some(node.as_bytes().to_vec()),
                version,
            };
            session.submit_write(now, write, token).is_ok()
        })
        .map(|(token, _, _)| (token, OpCode::SetData))
        .collect()
}

/// Token of the credentials added once the session is connected.
pub const SESSION_LATE_AUTH_TOKEN: u32 = 2200;

/// Token of the transaction that carries a withdrawn release's ops and a
/// create, as a lock's next acquisition in the same directory sends it.
pub const SESSION_JOINT_TOKEN: u32 = 2203;

/// Token of a sync made to go 100 ms after the session connected (see
/// `Session::submit_at`).
pub const SESSION_DELAYED_TOKEN: u32 = 2204;

/// The directory of the release that [`SESSION_JOINT_TOKEN`] takes back.
fn joint_dir(root: &str) -> String {
    format!("{root}/rw")
}

/// The node the release that [`SESSION_JOINT_TOKEN`] takes back deletes.
fn joint_released(root: &str) -> String {
    format!("{}/lock-0000000004", joint_dir(root))
}

/// Makes the requests the `session` target makes once connected, after its
/// batched reads and writes, so that the stream may answer each kind of
/// pending request the client has: credentials added on a live connection,
/// removeWatches (whose success removes local watchers), a release taken
/// back to travel with a create in one transaction
/// ([`SESSION_JOINT_TOKEN`], settled by [`settle_joint`] when answered), a
/// sync made to go 100 ms later ([`SESSION_DELAYED_TOKEN`]), a
/// release announced with a note (a `multi` sent at once), and a plain one
/// left to linger until [`Session::send_due_deletes`] or a later request
/// sends it. Returns the calls made, as (token, op).
pub fn submit_extras(session: &mut FuzzSession, flags: u8, now: Instant) -> Vec<(u32, OpCode)> {
    let root = session_root(flags);
    let mut calls = Vec::new();
    let auth = AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: b"other:secret".to_vec(),
    };
    if session.add_auth(now, auth, SESSION_LATE_AUTH_TOKEN).is_ok() {
        calls.push((SESSION_LATE_AUTH_TOKEN, OpCode::Auth));
    }
    for (token, path, watcher_type) in [
        (2201, "/a", WatcherType::Data),
        (2202, "/c", WatcherType::Any),
    ] {
        let request = RemoveWatchesRequest {
            path: format!("{root}{path}"),
            watcher_type,
        };
        if session.submit_remove_watches(now, &request, token).is_ok() {
            calls.push((token, OpCode::RemoveWatches));
        }
    }

    let dir = joint_dir(root);
    let released = Release {
        path: joint_released(root),
        note: Some(format!("{dir}/released-0000000004")),
        successor: Some(Successor {
            kind: "lock",
            sequence: 5,
        }),
    };
    let later = now + Duration::from_secs(1);
    if session
        .defer_background_delete(now, released, later)
        .is_ok()
    {
        if let Some(old) = session.withdraw_deferred_delete(&dir) {
            let mut ops = old.ops();
            ops.push(MultiOp::Create2(CreateRequest {
                path: format!("{dir}/lock-"),
                data: None,
                acl: Acl::open_unsafe(),
                mode: CreateMode::EphemeralSequential,
            }));
            let request = MultiRequest { ops };
            match session.submit(now, OpCode::Multi, &request, SESSION_JOINT_TOKEN, None) {
                Ok(()) => calls.push((SESSION_JOINT_TOKEN, OpCode::Multi)),
                Err(_) => session.settle_withdrawn_delete(now, &old.path, false),
            }
        }
    }

    // A question asked again after a back-off, as the search for a lock
    // node does when the server throttled it.
    let sync = PathRecord {
        path: format!("{root}/locks"),
    };
    let due = now + Duration::from_millis(100);
    if session
        .submit_at(now, due, OpCode::Sync, &sync, SESSION_DELAYED_TOKEN, None)
        .is_ok()
    {
        calls.push((SESSION_DELAYED_TOKEN, OpCode::Sync));
    }

    let noted = Release {
        path: format!("{root}/locks/lock-0000000002"),
        note: Some(format!("{root}/locks/released-0000000002")),
        successor: None,
    };
    let _ = session.defer_background_delete(now, noted, now);
    let lingering = Release::plain(format!("{root}/locks/lock-0000000003"));
    let _ = session.defer_background_delete(now, lingering, now + Duration::from_millis(50));
    calls
}

/// What a client does with the reply to [`SESSION_JOINT_TOKEN`] (see
/// `Client::finish_create_replacing`): the withdrawn delete is settled as
/// done, sent on its own, retried after a back-off when throttled, or left
/// to the reconnect when the outcome is unknown.
pub fn settle_joint(
    session: &mut FuzzSession,
    flags: u8,
    now: Instant,
    result: &Result<Response, Error>,
) {
    let path = joint_released(session_root(flags));
    let results = match result {
        Ok(Response::Multi(reply)) => &reply.results,
        Ok(_) => return session.settle_withdrawn_delete(now, &path, false),
        Err(Error::ThrottledOp) => return session.retry_withdrawn_delete(now, &path),
        Err(_) => return,
    };
    let failed = results.iter().any(|r| r.err() != 0);
    let deleted = results.len().checked_sub(2).and_then(|i| results.get(i));
    let deleted = if failed {
        deleted.is_some_and(|d| matches!(Error::from_code(d.err()), Error::NoNode))
    } else {
        matches!(
            (deleted, results.last()),
            (
                Some(OpResult::Delete),
                Some(OpResult::Create2(_) | OpResult::Create(_))
            )
        )
    };
    session.settle_withdrawn_delete(now, &path, deleted);
}

/// What the `session` target tracks about a session while it runs.
struct SessionCheck {
    flags: u8,
    ops: Vec<(u32, OpCode)>,
    answered: Vec<u32>,
    /// The tokens that ask for a watch: (token, kind, watcher).
    watch_requests: Vec<(u32, WatchKind, u32)>,
    /// The watchers a reply has registered, with whether they are
    /// persistent: a one-shot one is gone once delivered.
    live: Vec<(u32, bool)>,
    last_state: State,
    last_zxid: i64,
    /// What the run reached (see [`SessionSummary`]).
    summary: SessionSummary,
    /// The next transmitted frame must be a ConnectRequest.
    expect_connect: bool,
    /// closeSession went out on this connection: the server ends the
    /// session on it, so nothing but pings may follow.
    close_sent: bool,
    /// The session's generation as last seen: a new one follows an expiry
    /// (with `SESSION_NEW_ON_EXPIRY`).
    generation: u64,
    /// A new session started since the last ConnectRequest: the next one
    /// must ask for a session of its own, having seen nothing.
    renewed: bool,
}

impl SessionCheck {
    /// Notes the watcher the reply to `token` registers, if any: on
    /// success, or, for an exists, on NoNode too.
    fn register(&mut self, token: u32, result: &Result<Response, Error>) {
        let Some(&(_, kind, watcher)) = self.watch_requests.iter().find(|(t, ..)| *t == token)
        else {
            return;
        };
        let registers = match result {
            Ok(_) => true,
            Err(Error::NoNode) => kind == WatchKind::Exist,
            Err(_) => false,
        };
        if registers && !self.live.iter().any(|(w, _)| *w == watcher) {
            let persistent = matches!(kind, WatchKind::Persistent | WatchKind::PersistentRecursive);
            self.live.push((watcher, persistent));
        }
    }

    fn drain(&mut self, session: &mut FuzzSession, now: Instant) {
        while let Some(event) = session.poll_event() {
            match event {
                SessionEvent::Reply { token, result } => {
                    let Some(&(_, op)) = self.ops.iter().find(|(t, _)| *t == token) else {
                        panic!("a reply for unknown token {token}");
                    };
                    assert!(
                        !self.answered.contains(&token),
                        "token {token} ({op:?}) answered twice, now with {result:?}"
                    );
                    self.answered.push(token);
                    self.summary.successes += usize::from(result.is_ok());
                    self.summary.too_large += usize::from(matches!(
                        result,
                        Err(zklock::Error::Protocol(DecodeError::FrameTooLarge { .. }))
                    ));
                    self.register(token, &result);
                    if let Ok(resp) = &result {
                        assert_eq!(
                            variant_name(resp),
                            expected_variant(op),
                            "reply to {op:?} delivered as {resp:?}"
                        );
                    }
                    if token == SESSION_JOINT_TOKEN {
                        settle_joint(session, self.flags, now, &result);
                    }
                }
                SessionEvent::Watch { watchers, event } => {
                    // A node change ends a one-shot watcher; a removal or
                    // the session's end (a state event) ends any.
                    let ends_all = !matches!(
                        event.event_type,
                        EventType::NodeCreated
                            | EventType::NodeDeleted
                            | EventType::NodeDataChanged
                            | EventType::NodeChildrenChanged
                    );
                    self.summary.watch_events += usize::from(!ends_all);
                    for w in &watchers {
                        let Some(i) = self.live.iter().position(|(l, _)| l == w) else {
                            panic!("watcher {w} is not registered (any more), for {event:?}");
                        };
                        if ends_all || !self.live[i].1 {
                            self.live.swap_remove(i);
                        }
                    }
                }
                SessionEvent::State(state) => {
                    assert_ne!(state, self.last_state, "a repeated state event");
                    let renewing = self.flags & SESSION_NEW_ON_EXPIRY != 0;
                    let new_session = renewing
                        && self.last_state == State::Expired
                        && state == State::Disconnected;
                    assert!(
                        !self.last_state.is_terminal() || new_session,
                        "{state:?} reported after terminal {:?}",
                        self.last_state
                    );
                    self.summary.connected |= state.is_connected();
                    self.summary.renewed |= self.generation > 0 && state.is_connected();
                    self.summary.expired_or_refused |=
                        matches!(state, State::Expired | State::AuthFailed);
                    self.last_state = state;
                }
            }
        }
        assert_eq!(session.state(), self.last_state, "state() vs the events");
        if session.generation() != self.generation {
            assert_eq!(
                session.generation(),
                self.generation + 1,
                "more than one new session in one step"
            );
            assert!(
                self.flags & SESSION_NEW_ON_EXPIRY != 0,
                "a new session unasked"
            );
            assert_eq!(
                session.session_id(),
                0,
                "a new session's id before its handshake"
            );
            self.generation = session.generation();
            self.renewed = true;
            // The new session has seen nothing yet.
            self.last_zxid = 0;
        }
        assert!(session.last_zxid() >= self.last_zxid, "last_zxid went back");
        self.last_zxid = session.last_zxid();
        if session.state().is_connected() {
            assert_eq!(session.password().len(), 16);
        }

        let mut out = Vec::new();
        session.poll_transmit(&mut out);
        let mut rest = out.as_slice();
        while !rest.is_empty() {
            let Ok(Some((payload, used))) = split_frame(rest, usize::MAX) else {
                panic!("the session sent a partial frame: {rest:02x?}");
            };
            rest = &rest[used..];
            if std::mem::take(&mut self.expect_connect) {
                let request = zklock::proto::ConnectRequest::from_bytes(payload)
                    .expect("a ConnectRequest first");
                assert_eq!(request.passwd.len(), 16);
                if std::mem::take(&mut self.renewed) {
                    assert_eq!(
                        (request.session_id, request.last_zxid_seen),
                        (0, 0),
                        "a new session's handshake"
                    );
                    assert!(request.passwd.iter().all(|b| *b == 0));
                }
                self.close_sent = false;
                continue;
            }
            let header = RequestHeader::read(&mut Reader::new(payload)).expect("a request header");
            assert!(
                header.xid > 0 || header.xid == PING_XID || header.xid == AUTH_XID,
                "a request with xid {}",
                header.xid
            );
            let op = OpCode::try_from(header.op).expect("a known opcode");
            assert!(
                !self.close_sent || op == OpCode::Ping,
                "{op:?} sent after closeSession on the same connection"
            );
            self.close_sent |= op == OpCode::CloseSession;
        }
    }
}

/// Small deterministic generator for chunk sizes and clock steps.
struct Xorshift(u32);

impl Xorshift {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

/// What the client's prober does: asks when the session says a probe is
/// due, with an answer from `answers`. A probe is only ever asked for, and
/// a move only ever made, on a read-only connection that is staying.
fn probe_read_write(session: &mut FuzzSession, answers: &mut Xorshift, now: Instant) {
    let Probe::Ask(host) = session.poll_probe(now) else {
        return;
    };
    assert_eq!(
        session.state(),
        State::ConnectedReadOnly,
        "a probe of {host}"
    );
    let read_write = answers.next() & 1 == 0;
    if session.handle_probe(&host, read_write) {
        assert!(read_write, "moved to {host}, which said it is read-only");
        assert_eq!(session.poll_probe(now), Probe::Stop, "moving on");
    }
}

/// The sans-I/O session (`zklock::session::Session`) fed a hostile server.
///
/// Input: `[flags, chunk_seed, time_seed, stream...]`. The session first
/// submits a batch of requests (see [`session_new`]) and connects; the stream
/// is what the server sends. Once connected, it also submits three reads
/// that go out as one `multiRead`, setData calls batched in a `multi`, and
/// the calls of [`submit_extras`] (credentials, removeWatches, a request
/// made to go later, releases with notes, a release taken back into a
/// transaction and settled by its reply, a lingering one). After each delivery the clock may advance
/// (`time_seed` non-zero) and timers run, the client's release timer and,
/// with `SESSION_CAN_BE_READ_ONLY`, its prober too; a connection the
/// session drops is replaced by a new one, which the rest of the stream then
/// answers.
///
/// Checks: every reply is for a submitted token, at most once, and of the
/// record type of its op; watch events only name watchers that a reply has
/// registered (a success, or an exists' NoNode), a one-shot one at most
/// once, and none after its removal or the session's end; state
/// events never repeat and stop after a terminal state (but for the new
/// session that follows an expiry with `SESSION_NEW_ON_EXPIRY`, whose
/// handshake asks for id 0 with a zero password and nothing seen);
/// probes and moves happen only on a read-only connection that is staying
/// (see `probe_read_write`); `last_zxid` never goes back within a
/// session; everything the session transmits is whole, well-formed frames,
/// and nothing but pings follows closeSession on its connection; and once
/// the connection is gone and the session closed, every submitted request
/// has been answered exactly once.
pub fn session(data: &[u8]) {
    session_run(data);
}

/// What a run of the [`session`] target reached, for the seeds' checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionSummary {
    /// The session was connected at some point.
    pub connected: bool,
    /// Requests answered with success.
    pub successes: usize,
    /// Node events delivered to watchers.
    pub watch_events: usize,
    /// The session was found expired, or its credentials refused.
    pub expired_or_refused: bool,
    /// A new session followed an expiry, and connected.
    pub renewed: bool,
    /// Calls failed with `FrameTooLarge`.
    pub too_large: usize,
}

/// The [`session`] target, saying what the run reached; `None` for an
/// input too short to run.
pub fn session_run(data: &[u8]) -> Option<SessionSummary> {
    let [flags, chunk_seed, time_seed, stream @ ..] = data else {
        return None;
    };
    let mut now = Instant::now();
    let (mut session, ops) = session_new(*flags, now);
    let mut check = SessionCheck {
        flags: *flags,
        ops,
        answered: Vec::new(),
        watch_requests: submissions()
            .into_iter()
            .filter_map(|(token, _, _, watch)| watch.map(|(kind, _, w)| (token, kind, w)))
            .collect(),
        live: Vec::new(),
        last_state: State::Disconnected,
        last_zxid: 0,
        summary: SessionSummary::default(),
        expect_connect: true,
        close_sent: false,
        generation: 0,
        renewed: false,
    };
    check.drain(&mut session, now);

    let mut chunks = Xorshift(u32::from(*chunk_seed) | 0x100);
    let mut clock = Xorshift(u32::from(*time_seed) | 0x100);
    let mut probe_answers = Xorshift(u32::from(*chunk_seed ^ *time_seed) | 0x200);
    let mut rest = stream;
    let mut closed = false;
    let mut batched = false;
    let mut connections = 1;
    while !rest.is_empty() && !session.state().is_terminal() {
        // The next delivery: one frame (or what is left) or a raw chunk.
        let size = if flags & SESSION_RAW_CHUNKS != 0 {
            match chunk_seed {
                0 => rest.len(),
                _ => 1 + chunks.next() as usize % 64,
            }
        } else {
            match split_frame(rest, usize::MAX) {
                Ok(Some((_, used))) => used,
                _ => rest.len(),
            }
        };
        let (delivery, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        // Frame by frame, a frame may still arrive in pieces.
        let mut piece = delivery;
        while !piece.is_empty() {
            let n = match chunk_seed {
                0 => piece.len(),
                _ if flags & SESSION_RAW_CHUNKS != 0 => piece.len(),
                _ => 1 + chunks.next() as usize % (piece.len() + 8),
            };
            let (now_piece, later) = piece.split_at(n.min(piece.len()));
            piece = later;
            session.handle_bytes(now, now_piece);
        }
        check.drain(&mut session, now);
        if !batched && session.state().is_connected() {
            batched = true;
            let reads = submit_batched_reads(&mut session, *flags, now);
            check.ops.extend(reads);
            let writes = submit_batched_writes(&mut session, *flags, now);
            check.ops.extend(writes);
            let extras = submit_extras(&mut session, *flags, now);
            check.ops.extend(extras);
            check.drain(&mut session, now);
        }

        if *time_seed != 0 {
            let step = match clock.next() % 8 {
                0 => Duration::from_secs(11),
                1 => Duration::from_secs(25),
                2 => Duration::from_millis(1),
                3 => Duration::from_secs(1),
                _ => Duration::ZERO,
            };
            now += step;
        }
        session.handle_timeout(now);
        // The client's release timer.
        session.send_due_deletes(now);
        check.drain(&mut session, now);
        // The client's prober.
        probe_read_write(&mut session, &mut probe_answers, now);

        if flags & SESSION_CLOSE != 0 && !closed && session.state().is_connected() {
            closed = true;
            session.close(now);
            check.drain(&mut session, now);
        }

        if session.poll_disconnect().is_some() {
            session.handle_disconnected(now);
            check.drain(&mut session, now);
            if session.state().is_terminal() || connections >= 16 {
                break;
            }
            connections += 1;
            // As the client's I/O thread does: where to, the lookup's
            // address count, then the connection.
            if let Some((target, _)) = session.next_host(now) {
                session.handle_resolved(target.host(), connections % 4);
            }
            session.handle_connected(now);
            check.expect_connect = true;
            check.drain(&mut session, now);
        }
    }

    // The connection goes away and the session is closed: every request
    // must have been answered by now, exactly once.
    session.handle_disconnected(now);
    check.drain(&mut session, now);
    session.close(now);
    check.drain(&mut session, now);
    let end = now + Duration::from_secs(3600);
    session.handle_timeout(end);
    check.drain(&mut session, end);
    assert!(
        session.state().is_terminal(),
        "{:?} after closing",
        session.state()
    );
    for (token, op) in &check.ops {
        assert!(
            check.answered.contains(token),
            "token {token} ({op:?}) was never answered"
        );
    }
    Some(check.summary)
}
