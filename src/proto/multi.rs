//! `multi` and `multiRead`: a sequence of headed ops, closed by a terminator.

use super::{
    CheckVersionRequest, Create2Response, CreateRequest, CreateResponse, CreateTtlRequest,
    DecodeError, DeleteRequest, ErrorCode, ErrorResponse, GetChildrenRequest, GetChildrenResponse,
    GetDataRequest, GetDataResponse, OpCode, Reader, Record, SetDataRequest, SetDataResponse,
    Writer,
};

record! {
    /// Precedes each op of a multi request and each result of its response.
    pub struct MultiHeader {
        /// The op's [`OpCode`] value, or -1 for an error result and the terminator.
        pub op_type: i32,
        /// True only on the terminator.
        pub done: bool,
        /// The result code in a response; -1 in requests.
        pub err: i32,
    }
}

/// The header that ends every multi request and response.
pub const MULTI_TERMINATOR: MultiHeader = MultiHeader {
    op_type: -1,
    done: true,
    err: -1,
};

/// One op of a `multi` (writes) or `multiRead` (reads) request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    /// Create with opcode 1; the server takes the node kind from the flags.
    Create(CreateRequest),
    /// Create with opcode 15; the Java client never sends it inside a multi.
    Create2(CreateRequest),
    /// Create a container (opcode 19).
    CreateContainer(CreateRequest),
    /// Create a TTL node (opcode 21).
    CreateTtl(CreateTtlRequest),
    /// Delete.
    Delete(DeleteRequest),
    /// Set data.
    SetData(SetDataRequest),
    /// A version precondition.
    Check(CheckVersionRequest),
    /// List children (`multiRead` only; the watch flag is ignored).
    GetChildren(GetChildrenRequest),
    /// Read data (`multiRead` only; the watch flag is ignored).
    GetData(GetDataRequest),
}

impl MultiOp {
    /// The opcode written in this op's header.
    pub fn op_code(&self) -> OpCode {
        match self {
            MultiOp::Create(_) => OpCode::Create,
            MultiOp::Create2(_) => OpCode::Create2,
            MultiOp::CreateContainer(_) => OpCode::CreateContainer,
            MultiOp::CreateTtl(_) => OpCode::CreateTtl,
            MultiOp::Delete(_) => OpCode::Delete,
            MultiOp::SetData(_) => OpCode::SetData,
            MultiOp::Check(_) => OpCode::Check,
            MultiOp::GetChildren(_) => OpCode::GetChildren,
            MultiOp::GetData(_) => OpCode::GetData,
        }
    }

    /// True for the ops allowed in `multiRead`.
    pub fn is_read(&self) -> bool {
        matches!(self, MultiOp::GetChildren(_) | MultiOp::GetData(_))
    }

    /// The path the op addresses.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => &r.path,
            MultiOp::CreateTtl(r) => &r.path,
            MultiOp::Delete(r) => &r.path,
            MultiOp::SetData(r) => &r.path,
            MultiOp::Check(r) => &r.path,
            MultiOp::GetChildren(r) => &r.path,
            MultiOp::GetData(r) => &r.path,
        }
    }

    fn write_body(&self, w: &mut Writer<'_>) {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => r.write(w),
            MultiOp::CreateTtl(r) => r.write(w),
            MultiOp::Delete(r) => r.write(w),
            MultiOp::SetData(r) => r.write(w),
            MultiOp::Check(r) => r.write(w),
            MultiOp::GetChildren(r) => r.write(w),
            MultiOp::GetData(r) => r.write(w),
        }
    }

    fn read_body(op: OpCode, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match op {
            OpCode::Create => MultiOp::Create(Record::read(r)?),
            OpCode::Create2 => MultiOp::Create2(Record::read(r)?),
            OpCode::CreateContainer => MultiOp::CreateContainer(Record::read(r)?),
            OpCode::CreateTtl => MultiOp::CreateTtl(Record::read(r)?),
            OpCode::Delete => MultiOp::Delete(Record::read(r)?),
            OpCode::SetData => MultiOp::SetData(Record::read(r)?),
            OpCode::Check => MultiOp::Check(Record::read(r)?),
            OpCode::GetChildren => MultiOp::GetChildren(Record::read(r)?),
            OpCode::GetData => MultiOp::GetData(Record::read(r)?),
            other => {
                return Err(DecodeError::UnknownValue {
                    kind: "multi op type",
                    value: other.code(),
                }
                .in_field("MultiHeader.op_type"))
            }
        })
    }
}

/// The body of a `multi` or `multiRead` request (`MultiOperationRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiRequest {
    /// The ops, in order.
    pub ops: Vec<MultiOp>,
}

impl Record for MultiRequest {
    const MIN_SIZE: usize = MultiHeader::MIN_SIZE;

    fn max_results(&self) -> usize {
        self.ops.len()
    }

    fn write(&self, w: &mut Writer<'_>) {
        for op in &self.ops {
            MultiHeader {
                op_type: op.op_code().code(),
                done: false,
                err: -1,
            }
            .write(w);
            op.write_body(w);
        }
        MULTI_TERMINATOR.write(w);
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut ops = Vec::new();
        // Each pass consumes at least a 9-byte header, so the frame bounds the loop.
        loop {
            let header = MultiHeader::read(r)?;
            if header.done {
                return Ok(MultiRequest { ops });
            }
            let op =
                OpCode::try_from(header.op_type).map_err(|e| e.in_field("MultiHeader.op_type"))?;
            ops.push(MultiOp::read_body(op, r)?);
        }
    }
}

/// The result of one op in a multi response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// A create op (opcode 1): the path, without a Stat.
    Create(CreateResponse),
    /// A createContainer, createTTL or create2 op: the path and Stat.
    Create2(Create2Response),
    /// A delete op.
    Delete,
    /// A setData op.
    SetData(SetDataResponse),
    /// A check op.
    Check,
    /// A getChildren op (`multiRead`).
    GetChildren(GetChildrenResponse),
    /// A getData op (`multiRead`).
    GetData(GetDataResponse),
    /// A failed op, or (in a failed `multi`) an op rolled back: 0 for ops
    /// before the failing one, its own code for the failing op, and
    /// RuntimeInconsistency (-2) for the ops after it.
    Error(ErrorResponse),
}

impl OpResult {
    fn op_type(&self) -> i32 {
        match self {
            OpResult::Create(_) => OpCode::Create.code(),
            OpResult::Create2(_) => OpCode::Create2.code(),
            OpResult::Delete => OpCode::Delete.code(),
            OpResult::SetData(_) => OpCode::SetData.code(),
            OpResult::Check => OpCode::Check.code(),
            OpResult::GetChildren(_) => OpCode::GetChildren.code(),
            OpResult::GetData(_) => OpCode::GetData.code(),
            OpResult::Error(_) => OpCode::Error.code(),
        }
    }

    /// The error code of an error result, or 0.
    pub fn err(&self) -> i32 {
        match self {
            OpResult::Error(e) => e.err,
            _ => 0,
        }
    }

    /// True for the result of an op that a failed transaction rolled back
    /// without blaming it: error 0 (an op before the failing one) or
    /// RUNTIMEINCONSISTENCY (one after it).
    pub fn is_rolled_back(&self) -> bool {
        matches!(self, OpResult::Error(e) if e.err == 0 || e.err == ErrorCode::RuntimeInconsistency.code())
    }
}

/// The body of a `multi` or `multiRead` reply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiResponse {
    /// One result per op, in request order.
    pub results: Vec<OpResult>,
}

impl Record for MultiResponse {
    const MIN_SIZE: usize = MultiHeader::MIN_SIZE;

    fn write(&self, w: &mut Writer<'_>) {
        for result in &self.results {
            MultiHeader {
                op_type: result.op_type(),
                done: false,
                err: result.err(),
            }
            .write(w);
            match result {
                OpResult::Create(r) => r.write(w),
                OpResult::Create2(r) => r.write(w),
                OpResult::SetData(r) => r.write(w),
                OpResult::GetChildren(r) => r.write(w),
                OpResult::GetData(r) => r.write(w),
                OpResult::Error(r) => r.write(w),
                OpResult::Delete | OpResult::Check => {}
            }
        }
        MULTI_TERMINATOR.write(w);
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        MultiResponse::read_at_most(r, usize::MAX)
    }
}

impl MultiResponse {
    /// The op a failed transaction blames, with its error code: the first
    /// error result not [rolled back](OpResult::is_rolled_back). `None` for
    /// a transaction that did not fail; an error for one that failed and
    /// blames no op, which a server never sends.
    pub fn failing_op(&self) -> Result<Option<(usize, i32)>, DecodeError> {
        if !self.results.iter().any(|r| matches!(r, OpResult::Error(_))) {
            return Ok(None);
        }
        self.results
            .iter()
            .enumerate()
            .find(|(_, r)| matches!(r, OpResult::Error(_)) && !r.is_rolled_back())
            .map(|(index, r)| Some((index, r.err())))
            .ok_or(DecodeError::Malformed(
                "failed multi reply without a failing op",
            ))
    }

    /// Decodes the reply to a request of `ops` ops, refusing any result past
    /// that count before it is decoded: a result can take over ten times its
    /// wire size in memory, and a batch of reads may have a reply frame many
    /// times the usual limit.
    pub fn from_bytes_for(bytes: &[u8], ops: usize) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let record = MultiResponse::read_at_most(&mut r, ops)?;
        r.finish()
            .map_err(|e| e.in_field(super::record::name_of::<Self>()))?;
        Ok(record)
    }

    /// The error code of an error result is taken from its body, as the Java
    /// client does; the copy in the header is ignored.
    fn read_at_most(r: &mut Reader<'_>, ops: usize) -> Result<Self, DecodeError> {
        let mut results = Vec::new();
        loop {
            let header = MultiHeader::read(r)?;
            if header.done {
                return Ok(MultiResponse { results });
            }
            if results.len() == ops {
                return Err(DecodeError::Malformed(
                    "multi reply with more results than ops",
                ));
            }
            let op =
                OpCode::try_from(header.op_type).map_err(|e| e.in_field("MultiHeader.op_type"))?;
            let result = match op {
                OpCode::Create => OpResult::Create(Record::read(r)?),
                OpCode::Create2 => OpResult::Create2(Record::read(r)?),
                OpCode::Delete => OpResult::Delete,
                OpCode::SetData => OpResult::SetData(Record::read(r)?),
                OpCode::Check => OpResult::Check,
                OpCode::GetChildren => OpResult::GetChildren(Record::read(r)?),
                OpCode::GetData => OpResult::GetData(Record::read(r)?),
                OpCode::Error => OpResult::Error(Record::read(r)?),
                other => {
                    return Err(DecodeError::UnknownValue {
                        kind: "multi result type",
                        value: other.code(),
                    }
                    .in_field("MultiHeader.op_type"))
                }
            };
            results.push(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{GetDataResponse, WatcherEvent};

    #[test]
    fn errors_name_the_record_and_the_value_that_broke_it() {
        // A setACL (7) result: a valid opcode, not a multi result type.
        let mut bytes = MultiHeader {
            op_type: OpCode::SetAcl.code(),
            done: false,
            err: 0,
        }
        .to_bytes();
        bytes.extend(MULTI_TERMINATOR.to_bytes());
        let error = MultiResponse::from_bytes(&bytes).unwrap_err();
        assert_eq!(
            error.to_string(),
            "MultiHeader.op_type: unknown multi result type value 7"
        );
        let error = MultiRequest::from_bytes(&bytes).unwrap_err();
        assert_eq!(
            error.to_string(),
            "MultiHeader.op_type: unknown multi op type value 7"
        );

        let mut data = GetDataResponse {
            data: None,
            stat: crate::proto::Stat::default(),
        }
        .to_bytes();
        data.push(0);
        assert_eq!(
            GetDataResponse::from_bytes(&data).unwrap_err().to_string(),
            "GetDataResponse: 1 unexpected trailing byte(s) after the record"
        );
        assert_eq!(
            <()>::from_bytes(&[0, 0]).unwrap_err().to_string(),
            "empty body: 2 unexpected trailing byte(s) after the record"
        );
        let mut reply = MultiResponse::default().to_bytes();
        reply.push(0);
        assert_eq!(
            MultiResponse::from_bytes_for(&reply, 1)
                .unwrap_err()
                .field(),
            Some("MultiResponse")
        );
        let mut event = WatcherEvent {
            event_type: crate::proto::EventType::NodeDeleted,
            state: crate::proto::KeeperState::SyncConnected,
            path: "/a".into(),
        }
        .to_bytes();
        event.push(0);
        assert_eq!(
            WatcherEvent::from_bytes(&event).unwrap_err().field(),
            Some("WatcherEvent")
        );
    }
}
