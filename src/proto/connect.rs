//! The handshake: the first frame each way, with no header.

use super::{DecodeError, Reader, Record, ReplyHeader, Writer};

/// The password length of a session.
pub const PASSWORD_LEN: usize = 16;

/// The client's first frame.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    /// Always 0.
    pub protocol_version: i32,
    /// The largest zxid seen in a reply, so the server refuses to serve from
    /// an older view of the data.
    pub last_zxid_seen: i64,
    /// The requested session timeout, in ms.
    pub timeout_ms: i32,
    /// 0 for a new session, or the id of the session to resume.
    pub session_id: i64,
    /// 16 zero bytes for a new session, or the session's password.
    pub passwd: Vec<u8>,
    /// Whether a read-only server is acceptable.
    pub read_only: bool,
}

impl Record for ConnectRequest {
    const MIN_SIZE: usize = 4 + 8 + 4 + 8 + 4;

    fn write(&self, w: &mut Writer<'_>) {
        w.write_i32(self.protocol_version);
        w.write_i64(self.last_zxid_seen);
        w.write_i32(self.timeout_ms);
        w.write_i64(self.session_id);
        w.write_buffer(&self.passwd);
        w.write_bool(self.read_only);
    }

    /// A missing trailing readOnly byte (pre-3.4 clients) reads as false.
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: named("ConnectRequest.protocol_version", r.read_i32())?,
            last_zxid_seen: named("ConnectRequest.last_zxid_seen", r.read_i64())?,
            timeout_ms: named("ConnectRequest.timeout_ms", r.read_i32())?,
            session_id: named("ConnectRequest.session_id", r.read_i64())?,
            passwd: named("ConnectRequest.passwd", r.read_buffer())?.to_vec(),
            read_only: named("ConnectRequest.read_only", read_trailing_bool(r))?,
        })
    }
}

/// The server's first frame.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectResponse {
    /// Always 0.
    pub protocol_version: i32,
    /// The negotiated timeout in ms; 0 or less means the session is expired
    /// or the password was wrong.
    pub timeout_ms: i32,
    /// The session id (0 when invalid).
    pub session_id: i64,
    /// The session password.
    pub passwd: Vec<u8>,
    /// True when the server is in read-only mode.
    pub read_only: bool,
}

impl Record for ConnectResponse {
    const MIN_SIZE: usize = 4 + 4 + 8 + 4;

    fn write(&self, w: &mut Writer<'_>) {
        w.write_i32(self.protocol_version);
        w.write_i32(self.timeout_ms);
        w.write_i64(self.session_id);
        w.write_buffer(&self.passwd);
        w.write_bool(self.read_only);
    }

    /// The readOnly byte is only sent to clients that sent one; its absence
    /// reads as false.
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: named("ConnectResponse.protocol_version", r.read_i32())?,
            timeout_ms: named("ConnectResponse.timeout_ms", r.read_i32())?,
            session_id: named("ConnectResponse.session_id", r.read_i64())?,
            passwd: named("ConnectResponse.passwd", r.read_buffer())?.to_vec(),
            read_only: named("ConnectResponse.read_only", read_trailing_bool(r))?,
        })
    }
}

impl ConnectResponse {
    /// True when the server refused to resume the session.
    pub fn is_expired(&self) -> bool {
        self.timeout_ms <= 0
    }

    /// The error code of a handshake the server refused with a bare reply
    /// header instead of a ConnectResponse, as a read-only member without
    /// local sessions refuses to create one (NOTREADONLY). No
    /// ConnectResponse is that short, so the two cannot be confused.
    pub fn refusal(payload: &[u8]) -> Option<i32> {
        if payload.len() >= Self::MIN_SIZE {
            return None;
        }
        let header = ReplyHeader::from_bytes(payload).ok()?;
        (header.err != 0).then_some(header.err)
    }
}

/// `result`, its error named as one in `field`, as records name theirs.
fn named<T>(field: &'static str, result: Result<T, DecodeError>) -> Result<T, DecodeError> {
    result.map_err(|e| e.in_field(field))
}

fn read_trailing_bool(r: &mut Reader<'_>) -> Result<bool, DecodeError> {
    if r.remaining() == 0 {
        Ok(false)
    } else {
        r.read_bool()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_handshake_is_told_from_a_response() {
        // What a read-only ZooKeeper 3.8 member without local sessions sends
        // to a new session: xid 0, its last zxid, NOTREADONLY.
        let refused = [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0x89];
        assert_eq!(ConnectResponse::refusal(&refused), Some(-119));
        assert_eq!(ConnectResponse::refusal(&refused[..15]), None);
        let mut ok = refused;
        ok[12..].copy_from_slice(&[0; 4]);
        assert_eq!(ConnectResponse::refusal(&ok), None);
        let response = ConnectResponse {
            protocol_version: 0,
            timeout_ms: 30_000,
            session_id: 7,
            passwd: vec![1; PASSWORD_LEN],
            read_only: true,
        };
        let mut bytes = Vec::new();
        response.write(&mut Writer::new(&mut bytes));
        assert_eq!(ConnectResponse::refusal(&bytes), None);
        assert_eq!(ConnectResponse::refusal(&[]), None);
    }
}
