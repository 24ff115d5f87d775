//! setData calls sent together. A setData that finds the one submitted just
//! before it still waiting in the outbox, with nothing after it, joins it:
//! both go out as one `multi`. The server then handles one request and logs
//! one transaction instead of several. As with reads (`batch.rs`), nothing
//! waits for company: a batch grows only while the bytes before it are
//! being written.
//!
//! A `multi` is atomic, where the calls it carries were independent: when
//! one op fails, the server applies none. The failing op's caller gets its
//! error, and the others are sent again. So that each failure is the one
//! the call would have met on its own, a call whose outcome an earlier op of
//! the batch could change never joins it: a setData with an expected
//! version does not join a batch that writes the same path. (A setData
//! with none fails only for reasons of its own node, which no setData
//! changes.) The calls sent again go among themselves, no newcomer joining
//! them, and every round gives at least one of them its outcome, so the
//! sending again ends for each call.

use std::time::Instant;

use super::{malformed, Conn, Error, Event, Purpose, Result, Session};
use crate::proto::{
    write_request, MultiOp, MultiRequest, OpCode, OpResult, Response, SetDataRequest,
};

/// The most setData calls in one batch.
pub const MAX_BATCHED_WRITES: usize = 16;

/// What one setData adds to a batch's frame at most, besides its path and
/// data: its op's header (9 bytes), the path's and the data's lengths (4
/// each) and the version (4), plus, when a lone setData becomes a multi,
/// the first op's header (9) and the terminator (9).
const WRITE_OVERHEAD: usize = 39;

impl<T, W: Clone> Session<T, W> {
    /// Queues a setData like [`Session::submit`], joining it to the setData
    /// just before it when that one has not been sent yet (see the module
    /// docs). The reply is a `SetData` response either way.
    pub fn submit_write(&mut self, now: Instant, write: SetDataRequest, token: T) -> Result<()> {
        self.check_open()?;
        if !(self.config.batch_writes && self.conn == Conn::Established) {
            let purpose = Purpose::User { token, watch: None };
            return self.enqueue(now, OpCode::SetData, &write, purpose);
        }
        let Some((write, token)) = self.join_write_batch(now, write, token) else {
            return Ok(());
        };
        // Held-back deletes go first, so that a batch starts at the tail.
        self.send_held_back(now);
        let start = self.outbox.len();
        let purpose = Purpose::Writes {
            tokens: vec![token],
            ops: MultiRequest::default(),
        };
        self.send(now, OpCode::SetData, &write, purpose)?;
        let Some(pending) = self.pending.back_mut() else {
            return Ok(());
        };
        if let Purpose::Writes { ops, .. } = &mut pending.purpose {
            ops.ops.push(MultiOp::SetData(write));
        }
        let mut batch = self.open_batch.take().unwrap_or_default();
        batch.clear_reads();
        batch.xid = pending.xid;
        batch.start = start;
        batch.end = self.outbox.len();
        batch.kind = Some(OpCode::Multi);
        self.open_batch = Some(batch);
        Ok(())
    }

    /// Adds `write` to the open batch of writes if it may join it (see
    /// [`Session::can_join_batch`] and the module docs): the batch's frame
    /// is written again as a multi of all its ops. Otherwise hands `write`
    /// back.
    fn join_write_batch(
        &mut self,
        now: Instant,
        write: SetDataRequest,
        token: T,
    ) -> Option<(SetDataRequest, T)> {
        let data_len = write.data.as_ref().map_or(0, Vec::len);
        let extra = write
            .path
            .len()
            .saturating_add(data_len)
            .saturating_add(WRITE_OVERHEAD);
        if !self.can_join_batch(OpCode::Multi, extra) {
            return Some((write, token));
        }
        let (Some(batch), Some(pending)) = (self.open_batch.as_mut(), self.pending.back_mut())
        else {
            return Some((write, token));
        };
        let Purpose::Writes { tokens, ops } = &mut pending.purpose else {
            return Some((write, token));
        };
        let conflicts = write.version != -1 && ops.ops.iter().any(|op| op.path() == write.path);
        if conflicts || ops.ops.len() >= MAX_BATCHED_WRITES {
            return Some((write, token));
        }
        tokens.push(token);
        ops.ops.push(MultiOp::SetData(write));
        pending.op = OpCode::Multi;
        self.outbox.truncate(batch.start);
        write_request(&mut self.outbox, batch.xid, OpCode::Multi, ops);
        batch.end = self.outbox.len();
        self.last_send = now;
        None
    }

    /// Hands each setData of a batch its own outcome, and sends again those
    /// that failed only because another op of the batch did. A reply unlike
    /// the request fails the calls it cannot answer and drops the
    /// connection.
    pub(super) fn complete_writes(
        &mut self,
        tokens: Vec<T>,
        ops: MultiRequest,
        result: Result<Response>,
    ) {
        if tokens.len() == 1 {
            // A lone setData, sent as itself.
            if let Some(token) = tokens.into_iter().next() {
                self.events.push_back(Event::Reply { token, result });
            }
            return;
        }
        let reply = match result {
            Ok(Response::Multi(reply)) if reply.results.len() == tokens.len() => reply,
            Ok(_) => {
                let error = malformed("multi reply with a result count unlike the request's");
                self.request_disconnect(error.clone());
                return self.fail_tokens(tokens, error);
            }
            Err(e) => return self.fail_tokens(tokens, e),
        };
        let failed = match reply.failing_op() {
            Ok(failing) => failing.is_some(),
            Err(e) => {
                let error = Error::Protocol(e);
                self.request_disconnect(error.clone());
                return self.fail_tokens(tokens, error);
            }
        };
        let now = self.last_recv;
        if failed {
            // The calls sent again go among themselves, not into a batch a
            // newcomer opened meanwhile (see below).
            self.close_batch();
        }
        let mut resent = false;
        for ((token, op), result) in tokens.into_iter().zip(ops.ops).zip(reply.results) {
            let rolled_back = result.is_rolled_back();
            let result = match result {
                OpResult::SetData(r) if !failed => Ok(Response::SetData(r)),
                OpResult::Error(e) if !rolled_back => Err(Error::from_code(e.err)),
                OpResult::Error(_) => match (op, self.check_open()) {
                    (MultiOp::SetData(write), Ok(())) => {
                        // Open, and alone the op is smaller than the batch's
                        // frame, which fitted: sending cannot fail and lose
                        // the caller's token.
                        if let Err(e) = self.submit_write(now, write, token) {
                            log::warn!("a batched setData could not be sent again: {e}");
                        }
                        resent = true;
                        continue;
                    }
                    (_, Err(e)) => Err(e),
                    _ => Err(malformed(
                        "a batch of writes holds an op other than setData",
                    )),
                },
                _ => {
                    let error = malformed("multi result unlike its setData");
                    self.request_disconnect(error.clone());
                    Err(error)
                }
            };
            self.events.push_back(Event::Reply { token, result });
        }
        if resent {
            // Sent again among themselves only: a newcomer joining them
            // could fail them again, and so on for as long as failing
            // calls kept coming. Each round now gives at least one of them
            // its outcome.
            self.close_batch();
        }
    }
}
