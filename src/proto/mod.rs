//! The ZooKeeper wire protocol (jute binary encoding), with no I/O.
//!
//! Every record implements [`Record`]: `write` appends to a reusable buffer
//! through a [`Writer`], and `read` consumes from a bounds-checked [`Reader`].
//! Decoding never panics, never reads past its frame, and checks every length
//! and element count against the bytes actually left before allocating.

#[macro_use]
mod record;

mod codes;
mod connect;
mod data;
mod error;
mod frame;
mod header;
mod multi;
mod node;
mod reader;
mod response;
mod session;
mod watch;
mod writer;

pub use codes::{
    perms, AddWatchMode, CreateMode, ErrorCode, EventType, KeeperState, OpCode, WatcherType,
};
pub use connect::{ConnectRequest, ConnectResponse, PASSWORD_LEN};
pub use data::{Acl, ClientInfo, Id, Stat};
pub use error::DecodeError;
pub use frame::{split_frame, DEFAULT_MAX_FRAME, JUTE_MAX_BUFFER};
pub use header::{
    ReplyHeader, RequestHeader, AUTH_XID, NOTIFICATION_XID, PING_XID, SET_WATCHES_XID,
};
pub use multi::{MultiHeader, MultiOp, MultiRequest, MultiResponse, OpResult, MULTI_TERMINATOR};
pub use node::{
    CheckVersionRequest, Create2Response, CreateRequest, CreateResponse, CreateTtlRequest,
    DeleteRequest, ExistsRequest, ExistsResponse, GetAclRequest, GetAclResponse,
    GetAllChildrenNumberRequest, GetAllChildrenNumberResponse, GetChildren2Response,
    GetChildrenRequest, GetChildrenResponse, GetDataRequest, GetDataResponse, GetEphemeralsRequest,
    GetEphemeralsResponse, PathRecord, SetAclRequest, SetAclResponse, SetDataRequest,
    SetDataResponse, SyncRequest, SyncResponse,
};
pub use reader::Reader;
pub use record::{Field, Record};
pub use response::{read_notification, read_reply_header, Response};
pub use session::{AuthPacket, WhoAmIResponse};
pub use watch::{
    AddWatchRequest, CheckWatchesRequest, ErrorResponse, RemoveWatchesRequest, SetWatches,
    SetWatches2, WatcherEvent,
};
pub use writer::{FrameStart, Writer};

/// The empty body of ping, closeSession, whoAmI and other bodiless messages.
impl Record for () {
    const MIN_SIZE: usize = 0;
    fn write(&self, _: &mut Writer<'_>) {}
    fn read(_: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(())
    }
}

/// Appends one complete request frame: length prefix, header, body.
/// Returns the payload length, so the caller can check it against the
/// server's limit.
pub fn write_request(buf: &mut Vec<u8>, xid: i32, op: OpCode, body: &impl Record) -> usize {
    let mut w = Writer::new(buf);
    let start = w.begin_frame();
    RequestHeader { xid, op: op.code() }.write(&mut w);
    body.write(&mut w);
    w.finish_frame(start)
}

/// Appends one complete frame holding just `record` (the handshake frames).
pub fn write_frame(buf: &mut Vec<u8>, record: &impl Record) -> usize {
    let mut w = Writer::new(buf);
    let start = w.begin_frame();
    record.write(&mut w);
    w.finish_frame(start)
}
