//! Reply frames: the header, and the body decoded by the request's opcode.

use super::{
    Create2Response, CreateResponse, DecodeError, ErrorResponse, ExistsResponse, GetAclResponse,
    GetAllChildrenNumberResponse, GetChildren2Response, GetChildrenResponse, GetDataResponse,
    GetEphemeralsResponse, KeeperState, MultiResponse, OpCode, Reader, Record, ReplyHeader,
    SetAclResponse, SetDataResponse, SyncResponse, WatcherEvent, WhoAmIResponse, NOTIFICATION_XID,
};

/// A decoded reply body. Which variant is expected depends on the opcode of
/// the request the reply answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Ops whose success has no body: delete, setWatches, setWatches2, auth,
    /// ping, closeSession, removeWatches, checkWatches, check.
    Empty,
    /// create.
    Create(CreateResponse),
    /// create2, createContainer, createTTL.
    Create2(Create2Response),
    /// exists.
    Exists(ExistsResponse),
    /// getData.
    GetData(GetDataResponse),
    /// setData.
    SetData(SetDataResponse),
    /// getACL.
    GetAcl(GetAclResponse),
    /// setACL.
    SetAcl(SetAclResponse),
    /// getChildren.
    GetChildren(GetChildrenResponse),
    /// getChildren2.
    GetChildren2(GetChildren2Response),
    /// sync.
    Sync(SyncResponse),
    /// multi and multiRead.
    Multi(MultiResponse),
    /// addWatch.
    AddWatch(ErrorResponse),
    /// getEphemerals.
    GetEphemerals(GetEphemeralsResponse),
    /// getAllChildrenNumber.
    GetAllChildrenNumber(GetAllChildrenNumberResponse),
    /// whoAmI.
    WhoAmI(WhoAmIResponse),
}

impl Response {
    /// Decodes the body of a successful (err == 0) reply to `op`. The body
    /// must be consumed exactly.
    pub fn decode(op: OpCode, body: &[u8]) -> Result<Response, DecodeError> {
        fn exact<T: Record>(body: &[u8]) -> Result<T, DecodeError> {
            T::from_bytes(body)
        }
        Ok(match op {
            OpCode::Create => Response::Create(exact(body)?),
            OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => {
                Response::Create2(exact(body)?)
            }
            OpCode::Exists => Response::Exists(exact(body)?),
            OpCode::GetData | OpCode::Reconfig => Response::GetData(exact(body)?),
            OpCode::SetData => Response::SetData(exact(body)?),
            OpCode::GetAcl => Response::GetAcl(exact(body)?),
            OpCode::SetAcl => Response::SetAcl(exact(body)?),
            OpCode::GetChildren => Response::GetChildren(exact(body)?),
            OpCode::GetChildren2 => Response::GetChildren2(exact(body)?),
            OpCode::Sync => Response::Sync(exact(body)?),
            OpCode::Multi | OpCode::MultiRead => Response::Multi(exact(body)?),
            OpCode::AddWatch => Response::AddWatch(exact(body)?),
            OpCode::GetEphemerals => Response::GetEphemerals(exact(body)?),
            OpCode::GetAllChildrenNumber => Response::GetAllChildrenNumber(exact(body)?),
            OpCode::WhoAmI => Response::WhoAmI(exact(body)?),
            OpCode::Delete
            | OpCode::Ping
            | OpCode::Check
            | OpCode::Auth
            | OpCode::SetWatches
            | OpCode::SetWatches2
            | OpCode::CheckWatches
            | OpCode::RemoveWatches
            | OpCode::CloseSession => {
                <()>::from_bytes(body)?;
                Response::Empty
            }
            OpCode::Notification
            | OpCode::Sasl
            | OpCode::DeleteContainer
            | OpCode::CreateSession
            | OpCode::Error => {
                return Err(DecodeError::Malformed(
                    "reply to an opcode zklock never sends (SASL and server-internal ops)",
                ))
            }
        })
    }
}

/// Splits a reply frame's payload into its header and the rest.
pub fn read_reply_header(payload: &[u8]) -> Result<(ReplyHeader, &[u8]), DecodeError> {
    let mut r = Reader::new(payload);
    let header = ReplyHeader::read(&mut r)?;
    Ok((header, r.rest()))
}

/// Decodes a notification frame's body, checking the header says it is one
/// and that it reports a change to a node in state `SyncConnected`: the
/// other event types (a state change, a watch removed) and states (an
/// expiry, a disconnect) are made by a client for its own watchers, and a
/// server never sends them. Passed on, a hostile server's `Expired` would
/// tell a watcher its session had ended while it lives.
pub fn read_notification(header: &ReplyHeader, body: &[u8]) -> Result<WatcherEvent, DecodeError> {
    if header.xid != NOTIFICATION_XID {
        return Err(DecodeError::Malformed("notification xid"));
    }
    let event = WatcherEvent::from_bytes(body)?;
    if !event.event_type.is_node_change() {
        return Err(
            DecodeError::Malformed("notification of an event type only a client makes")
                .in_field("WatcherEvent.event_type"),
        );
    }
    if event.state != KeeperState::SyncConnected {
        return Err(
            DecodeError::Malformed("notification of a state only a client makes")
                .in_field("WatcherEvent.state"),
        );
    }
    Ok(event)
}
