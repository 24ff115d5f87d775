//! Reads sent together. A getData or getChildren without a watch that finds
//! the read submitted just before it still waiting in the outbox, with
//! nothing after it, joins it: both go out as one `multiRead` (ZooKeeper
//! 3.6+). The server then handles one request instead of several, which on
//! a busy client is most of what a read costs it. Nothing waits for company:
//! a batch grows only while the bytes before it are being written, and
//! leaves with the next write.
//!
//! Order is kept: a batch holds a run of reads that were adjacent anyway,
//! and the server answers them in order at one point of its history. Each
//! read keeps its own outcome (multiRead ops fail one by one).

use std::time::Instant;

use super::{malformed, Conn, Error, Event, Pending, Purpose, Result, Session};
use crate::proto::{
    write_request, DecodeError, GetChildrenRequest, GetDataRequest, MultiOp, MultiRequest, OpCode,
    OpResult, Response,
};

/// The most reads in one batch. A batch's reply may be this many times
/// `max_frame`, so this also bounds what a batch can make the client buffer.
pub const MAX_BATCHED_READS: usize = 16;

/// What one read of a batch adds to its frame at most: its op's header
/// (9 bytes), the path's length (4) and the watch flag (1), plus, when a
/// lone read becomes a multiRead, the terminator (9).
const READ_OVERHEAD: usize = 32;

/// A Stat's encoded length.
const STAT_LEN: usize = 68;

/// A multi result's header (type, done flag, error), as each result and the
/// end of a multi reply carry one.
const MULTI_HEADER_LEN: usize = 9;

/// The length of a lone reply frame (its reply header, 16 bytes, and
/// `body`), as its length prefix gives it.
fn reply_len(body: usize) -> usize {
    16usize.saturating_add(body)
}

/// A read that may share a `multiRead` with others. Its watch flag is
/// cleared: a batched read leaves no watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchRead {
    /// getData.
    Data(GetDataRequest),
    /// getChildren.
    Children(GetChildrenRequest),
}

impl BatchRead {
    fn op(&self) -> OpCode {
        match self {
            BatchRead::Data(_) => OpCode::GetData,
            BatchRead::Children(_) => OpCode::GetChildren,
        }
    }

    fn path_len(&self) -> usize {
        match self {
            BatchRead::Data(r) => r.path.len(),
            BatchRead::Children(r) => r.path.len(),
        }
    }

    fn into_op(self) -> MultiOp {
        match self {
            BatchRead::Data(r) => MultiOp::GetData(r),
            BatchRead::Children(r) => MultiOp::GetChildren(r),
        }
    }
}

/// The batch at the tail of the outbox, which another request of its kind
/// may still join (reads here, setData calls in `write_batch.rs`).
#[derive(Debug, Default)]
pub(super) struct OpenBatch {
    /// The xid of its frame (that of its first request).
    pub(super) xid: i32,
    /// Where its frame starts in the outbox, and where it ends.
    pub(super) start: usize,
    pub(super) end: usize,
    /// What it is sent as once several requests share it: `MultiRead` or
    /// `Multi`.
    pub(super) kind: Option<OpCode>,
    /// Its reads, in order: one is sent as itself, several as a multiRead.
    /// A batch of writes keeps its ops in its [`Purpose::Writes`] instead,
    /// for they may have to be sent again.
    reads: MultiRequest,
}

impl OpenBatch {
    /// Drops the reads of a batch whose frame has left, keeping their
    /// allocation for the next batch.
    pub(super) fn clear_reads(&mut self) {
        self.reads.ops.clear();
    }
}

impl<T, W: Clone> Session<T, W> {
    /// Queues a read like [`Session::submit`], joining it to the read just
    /// before it when that one has not been sent yet (see the module docs).
    pub fn submit_read(&mut self, now: Instant, mut read: BatchRead, token: T) -> Result<()> {
        self.check_open()?;
        match &mut read {
            BatchRead::Data(r) => r.watch = false,
            BatchRead::Children(r) => r.watch = false,
        }
        let Some((read, token)) = self.join_batch(now, read, token) else {
            return Ok(());
        };
        let purpose = Purpose::User { token, watch: None };
        let batchable = self.config.batch_reads
            && !self.batch_refused
            && self.reads_alone_on != Some(self.connections)
            && self.conn == Conn::Established;
        // Held-back deletes go first, so that a batch starts at the tail.
        if batchable {
            self.send_held_back(now);
        }
        let start = self.outbox.len();
        match &read {
            BatchRead::Data(r) => self.enqueue(now, OpCode::GetData, r, purpose)?,
            BatchRead::Children(r) => self.enqueue(now, OpCode::GetChildren, r, purpose)?,
        }
        if !batchable {
            return Ok(());
        }
        let mut batch = self.open_batch.take().unwrap_or_default();
        batch.clear_reads();
        batch.reads.ops.push(read.into_op());
        batch.xid = self.pending.back().map_or(0, |p| p.xid);
        batch.start = start;
        batch.end = self.outbox.len();
        batch.kind = Some(OpCode::MultiRead);
        self.open_batch = Some(batch);
        Ok(())
    }

    /// True if a request that adds at most `extra` bytes may join the open
    /// batch of kind `kind`: the batch's frame is still the last thing in
    /// the outbox and its request the last one sent, no deferred or
    /// throttled delete, nor throttled re-registration of watches, must go
    /// first, and the frame stays within `max_request`. (The caller checks
    /// the batch's count.)
    pub(super) fn can_join_batch(&self, kind: OpCode, extra: usize) -> bool {
        let Some(batch) = &self.open_batch else {
            return false;
        };
        batch.kind == Some(kind)
            && self.deferred.is_empty()
            && self.throttled.is_empty()
            && !self.has_delayed_set_watches()
            && batch.end == self.outbox.len()
            && self.pending.back().is_some_and(|p| p.xid == batch.xid)
            && (batch.end - batch.start).saturating_add(extra) <= self.config.max_request
    }

    /// Adds `read` to the open batch, if it may join it (see
    /// [`Session::can_join_batch`]): the batch's frame is written again as a
    /// multiRead of all its reads. Otherwise hands `read` back.
    fn join_batch(&mut self, now: Instant, read: BatchRead, token: T) -> Option<(BatchRead, T)> {
        let full = self
            .open_batch
            .as_ref()
            .map_or(true, |b| b.reads.ops.len() >= MAX_BATCHED_READS);
        let extra = read.path_len().saturating_add(READ_OVERHEAD);
        if full || !self.can_join_batch(OpCode::MultiRead, extra) {
            return Some((read, token));
        }
        let (Some(batch), Some(pending)) = (self.open_batch.as_mut(), self.pending.back_mut())
        else {
            return Some((read, token));
        };
        let op = read.op();
        pending.purpose = match std::mem::replace(&mut pending.purpose, Purpose::Close) {
            Purpose::User {
                token: first,
                watch: None,
            } => Purpose::Reads {
                reads: vec![(first, pending.op), (token, op)],
            },
            Purpose::Reads { mut reads } => {
                reads.push((token, op));
                Purpose::Reads { reads }
            }
            other => {
                pending.purpose = other;
                return Some((read, token));
            }
        };
        pending.op = OpCode::MultiRead;
        batch.reads.ops.push(read.into_op());
        self.outbox.truncate(batch.start);
        write_request(&mut self.outbox, batch.xid, OpCode::MultiRead, &batch.reads);
        batch.end = self.outbox.len();
        self.last_send = now;
        None
    }

    /// The batch's frame is leaving (or being dropped): nothing may join it.
    pub(super) fn close_batch(&mut self) {
        if let Some(batch) = &mut self.open_batch {
            batch.end = usize::MAX;
        }
    }

    /// The largest frame the next reply may be: `max_frame` per read of a
    /// batch due first, and the multi headers of its results and its end,
    /// so that reads whose replies alone would each fit fit together.
    pub(super) fn reply_frame_limit(&self) -> usize {
        let reads = match self.pending.front() {
            Some(Pending {
                purpose: Purpose::Reads { reads },
                ..
            }) => reads.len(),
            _ => 1,
        };
        match reads {
            0 | 1 => self.config.max_frame,
            reads => self
                .config
                .max_frame
                .saturating_mul(reads)
                .saturating_add(MULTI_HEADER_LEN.saturating_mul(reads + 1)),
        }
    }

    /// The server refused a multiRead (a server before 3.6): reads go one
    /// by one from now on.
    pub(super) fn end_read_batching(&mut self) {
        log::warn!("the server does not know multiRead (before 3.6): reads go one by one");
        self.batch_refused = true;
        self.close_batch();
    }

    /// Hands each read of a batch its own outcome. A reply unlike the
    /// request (another count of results, or a result of another kind than
    /// its read) fails the reads it cannot answer and drops the connection.
    pub(super) fn complete_reads(&mut self, reads: Vec<(T, OpCode)>, result: Result<Response>) {
        let results = match result {
            Ok(Response::Multi(reply)) if reply.results.len() == reads.len() => reply.results,
            Ok(_) => {
                let error = malformed("multiRead reply with a result count unlike the request's");
                self.request_disconnect(error.clone());
                return self.fail_reads(reads, error);
            }
            Err(Error::Unimplemented) => {
                // A server before 3.6; it also closes the connection.
                self.end_read_batching();
                return self.fail_reads(reads, Error::ConnectionLoss);
            }
            Err(e) => return self.fail_reads(reads, e),
        };
        for ((token, op), result) in reads.into_iter().zip(results) {
            let result = match (op, result) {
                (OpCode::GetData, OpResult::GetData(r)) => self
                    .fits_alone(reply_len(
                        4 + r.data.as_ref().map_or(0, Vec::len) + STAT_LEN,
                    ))
                    .map(|()| Response::GetData(r)),
                (OpCode::GetChildren, OpResult::GetChildren(r)) => {
                    let names: usize = r.children.iter().map(|name| 4 + name.len()).sum();
                    self.fits_alone(reply_len(4 + names))
                        .map(|()| Response::GetChildren(r))
                }
                (_, OpResult::Error(e)) if e.err != 0 => Err(Error::from_code(e.err)),
                _ => {
                    let error = malformed("multiRead result unlike its read");
                    self.request_disconnect(error.clone());
                    Err(error)
                }
            };
            self.events.push_back(Event::Reply { token, result });
        }
    }

    /// A read's result fails as the read alone would have, its reply frame
    /// `len` bytes long, if that is over `max_frame`: whether another read
    /// shared its request changes no outcome. (The batch's frame, with room
    /// for `max_frame` per read, was read whole, so the connection stays.)
    fn fits_alone(&self, len: usize) -> Result<()> {
        let max = self.config.max_frame;
        match len > max {
            true => Err(Error::Protocol(DecodeError::FrameTooLarge { len, max })),
            false => Ok(()),
        }
    }

    pub(super) fn fail_reads(&mut self, reads: Vec<(T, OpCode)>, error: Error) {
        self.fail_tokens(reads.into_iter().map(|(token, _)| token), error);
    }

    /// Fails every call of a batch (reads or writes) with `error`.
    pub(super) fn fail_tokens(&mut self, tokens: impl IntoIterator<Item = T>, error: Error) {
        for token in tokens {
            self.events.push_back(Event::Reply {
                token,
                result: Err(error.clone()),
            });
        }
    }
}
