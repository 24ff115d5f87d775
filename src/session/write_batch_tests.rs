//! setData calls sent together (see `write_batch.rs`), driven by bytes: no
//! sockets.

use std::time::Instant;

use super::tests::{config, connected, connected_with, get_data, header, replies, reply, sent};
use super::*;
use crate::proto::{
    ErrorCode, ErrorResponse, MultiOp, MultiResponse, OpResult, RequestHeader, SetDataRequest,
    SetDataResponse, Stat,
};

fn set(path: &str, version: i32) -> SetDataRequest {
    SetDataRequest {
        path: path.into(),
        data: Some(path.as_bytes().to_vec()),
        version,
    }
}

/// The (path, version) of a multi's setData ops.
type Writes = Vec<(String, i32)>;

/// Each frame's header, and for a multi the (path, version) of its ops.
fn frames(s: &mut Session<u32, u32>) -> Vec<(RequestHeader, Writes)> {
    sent(s)
        .iter()
        .map(|frame| {
            let mut r = crate::proto::Reader::new(frame);
            let header = RequestHeader::read(&mut r).unwrap();
            let ops = if header.op == OpCode::Multi.code() {
                MultiRequest::read(&mut r).unwrap().ops
            } else {
                Vec::new()
            };
            let ops = ops
                .into_iter()
                .map(|op| match op {
                    MultiOp::SetData(w) => (w.path, w.version),
                    other => panic!("not a setData: {other:?}"),
                })
                .collect();
            (header, ops)
        })
        .collect()
}

fn stat(version: i32) -> Stat {
    Stat {
        version,
        ..Stat::default()
    }
}

fn set_result(version: i32) -> OpResult {
    OpResult::SetData(SetDataResponse {
        stat: stat(version),
    })
}

fn error_result(code: ErrorCode) -> OpResult {
    OpResult::Error(ErrorResponse { err: code.code() })
}

/// The data version of each reply, or its error.
fn outcomes(s: &mut Session<u32, u32>) -> Vec<(u32, std::result::Result<i32, Error>)> {
    replies(s)
        .into_iter()
        .map(|(token, result)| {
            let outcome = match result {
                Ok(Response::SetData(r)) => Ok(r.stat.version),
                Ok(other) => panic!("not a setData reply: {other:?}"),
                Err(e) => Err(e),
            };
            (token, outcome)
        })
        .collect()
}

/// Writes to `/app/a`, `/app/b` and `/app/c` (tokens 1 to 3), submitted
/// together and sent as one multi with xid 1.
fn three_writes_sent(now: Instant) -> Session<u32, u32> {
    let mut s = connected(now);
    for (token, path) in [(1, "/app/a"), (2, "/app/b"), (3, "/app/c")] {
        s.submit_write(now, set(path, -1), token).unwrap();
    }
    assert_eq!(s.in_flight(), 1);
    let sent = frames(&mut s);
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].0.xid, sent[0].0.op), (1, OpCode::Multi.code()));
    let paths: Vec<&str> = sent[0].1.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/app/a", "/app/b", "/app/c"]);
    s
}

#[test]
fn writes_waiting_together_go_as_one_multi_and_each_gets_its_own_stat() {
    let now = Instant::now();
    let mut s = three_writes_sent(now);
    let results = vec![set_result(4), set_result(7), set_result(1)];
    s.handle_bytes(now, &reply(1, 30, 0, &MultiResponse { results }));
    assert_eq!(outcomes(&mut s), [(1, Ok(4)), (2, Ok(7)), (3, Ok(1))]);
    assert_eq!(s.last_zxid(), 30);
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn a_lone_write_goes_as_a_plain_set_data() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_write(now, set("/app/a", 3), 1).unwrap();
    let sent = frames(&mut s);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0.op, OpCode::SetData.code());
    s.handle_bytes(now, &reply(1, 8, 0, &SetDataResponse { stat: stat(4) }));
    assert_eq!(outcomes(&mut s), [(1, Ok(4))]);
    // Its own error reaches it as it is.
    s.submit_write(now, set("/app/a", 3), 2).unwrap();
    sent_and_answered(&mut s, 2, ErrorCode::BadVersion);
    assert_eq!(outcomes(&mut s), [(2, Err(Error::BadVersion))]);
}

fn sent_and_answered(s: &mut Session<u32, u32>, xid: i32, code: ErrorCode) {
    assert_eq!(frames(s).len(), 1);
    s.handle_bytes(Instant::now(), &reply(xid, 9, code.code(), &()));
}

/// The batch of [`three_writes_sent`] fails on `/app/b`, which is gone:
/// the server applies nothing; the op before it comes back as error 0,
/// the one after as RUNTIMEINCONSISTENCY.
fn b_is_gone(s: &mut Session<u32, u32>, now: Instant) {
    let results = vec![
        error_result(ErrorCode::Ok),
        error_result(ErrorCode::NoNode),
        error_result(ErrorCode::RuntimeInconsistency),
    ];
    s.handle_bytes(now, &reply(1, 30, 0, &MultiResponse { results }));
}

#[test]
fn a_failing_write_gets_its_error_and_the_others_go_again_as_one_batch() {
    let now = Instant::now();
    let mut s = three_writes_sent(now);
    b_is_gone(&mut s, now);
    assert_eq!(outcomes(&mut s), [(2, Err(Error::NoNode))]);
    let again = frames(&mut s);
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].0.xid, again[0].0.op), (2, OpCode::Multi.code()));
    assert_eq!(
        again[0].1,
        [("/app/a".to_owned(), -1), ("/app/c".to_owned(), -1)]
    );
    let results = vec![set_result(5), set_result(2)];
    s.handle_bytes(now, &reply(2, 31, 0, &MultiResponse { results }));
    assert_eq!(outcomes(&mut s), [(1, Ok(5)), (3, Ok(2))]);
    assert_eq!(s.in_flight(), 0);
}

/// The writes sent again go among themselves: a call made before they are
/// written does not join them (it could fail them again, and so on for as
/// long as failing calls came), and goes as a request of its own.
#[test]
fn a_newcomer_does_not_join_the_writes_sent_again() {
    let now = Instant::now();
    let mut s = three_writes_sent(now);
    b_is_gone(&mut s, now);
    s.submit_write(now, set("/app/d", -1), 4).unwrap();
    let sent = frames(&mut s);
    let ops: Vec<i32> = sent.iter().map(|(h, _)| h.op).collect();
    assert_eq!(ops, [OpCode::Multi.code(), OpCode::SetData.code()]);
    assert_eq!(
        sent[0].1,
        [("/app/a".to_owned(), -1), ("/app/c".to_owned(), -1)]
    );
}

/// Nor do they join a batch newcomers opened before the failed one's reply
/// came.
#[test]
fn the_writes_sent_again_do_not_join_a_newcomers_batch() {
    let now = Instant::now();
    let mut s = three_writes_sent(now);
    s.submit_write(now, set("/app/d", -1), 4).unwrap();
    s.submit_write(now, set("/app/e", -1), 5).unwrap();
    b_is_gone(&mut s, now);
    let sent = frames(&mut s);
    let paths: Vec<Vec<&str>> = sent
        .iter()
        .map(|(_, w)| w.iter().map(|(p, _)| p.as_str()).collect())
        .collect();
    assert_eq!(paths, [vec!["/app/d", "/app/e"], vec!["/app/a", "/app/c"]]);
}

#[test]
fn a_write_sent_again_alone_goes_as_a_plain_set_data() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_write(now, set("/app/a", -1), 1).unwrap();
    s.submit_write(now, set("/app/b", -1), 2).unwrap();
    assert_eq!(frames(&mut s).len(), 1);
    let results = vec![
        error_result(ErrorCode::NoAuth),
        error_result(ErrorCode::RuntimeInconsistency),
    ];
    s.handle_bytes(now, &reply(1, 30, 0, &MultiResponse { results }));
    assert_eq!(outcomes(&mut s), [(1, Err(Error::NoAuth))]);
    let again = frames(&mut s);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].0.op, OpCode::SetData.code());
    s.handle_bytes(now, &reply(2, 31, 0, &SetDataResponse { stat: stat(1) }));
    assert_eq!(outcomes(&mut s), [(2, Ok(1))]);
}

#[test]
fn a_versioned_write_never_joins_a_batch_that_writes_its_node() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_write(now, set("/app/a", -1), 1).unwrap();
    // Its version check could fail because of the write before it.
    s.submit_write(now, set("/app/a", 0), 2).unwrap();
    // Another node's versioned write joins; an unconditional one joins
    // whatever it writes.
    s.submit_write(now, set("/app/b", 0), 3).unwrap();
    s.submit_write(now, set("/app/a", -1), 4).unwrap();
    let shape: Vec<(i32, i32, Writes)> = frames(&mut s)
        .into_iter()
        .map(|(h, ops)| (h.xid, h.op, ops))
        .collect();
    assert_eq!(
        shape,
        [
            (1, OpCode::SetData.code(), vec![]),
            (
                2,
                OpCode::Multi.code(),
                vec![
                    ("/app/a".to_owned(), 0),
                    ("/app/b".to_owned(), 0),
                    ("/app/a".to_owned(), -1)
                ]
            ),
        ]
    );
}

#[test]
fn reads_and_writes_never_share_a_batch_and_order_is_kept() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_write(now, set("/app/a", -1), 1).unwrap();
    s.submit_read(now, BatchRead::Data(get_data("/app/a")), 2)
        .unwrap();
    s.submit_write(now, set("/app/b", -1), 3).unwrap();
    s.submit_write(now, set("/app/c", -1), 4).unwrap();
    s.submit_read(now, BatchRead::Data(get_data("/app/b")), 5)
        .unwrap();
    let ops: Vec<(i32, i32)> = sent(&mut s)
        .iter()
        .map(|f| (header(f).xid, header(f).op))
        .collect();
    assert_eq!(
        ops,
        [
            (1, OpCode::SetData.code()),
            (2, OpCode::GetData.code()),
            (3, OpCode::Multi.code()),
            (4, OpCode::GetData.code()),
        ]
    );
}

#[test]
fn a_batch_holds_at_most_max_batched_writes() {
    let now = Instant::now();
    let mut s = connected(now);
    let count = MAX_BATCHED_WRITES as u32 + 1;
    for token in 0..count {
        s.submit_write(now, set("/app/a", -1), token).unwrap();
    }
    let sent = frames(&mut s);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].1.len(), MAX_BATCHED_WRITES);
    assert_eq!(sent[1].0.op, OpCode::SetData.code());
}

#[test]
fn a_write_too_long_to_join_goes_as_its_own_request() {
    let now = Instant::now();
    let mut s = connected_with(
        SessionConfig {
            max_request: 200,
            ..config()
        },
        now,
    );
    let big = |path: &str| SetDataRequest {
        path: path.into(),
        data: Some(vec![b'x'; 100]),
        version: -1,
    };
    s.submit_write(now, big("/app/a"), 1).unwrap();
    s.submit_write(now, big("/app/b"), 2).unwrap();
    let ops: Vec<i32> = frames(&mut s).iter().map(|(h, _)| h.op).collect();
    assert_eq!(ops, [OpCode::SetData.code(), OpCode::SetData.code()]);
}

#[test]
fn a_batch_of_writes_never_exceeds_max_request() {
    // Two writes whose multi would be 3 bytes over the limit, by the sizes
    // alone: 8 bytes of request header, 9 of op header per op and 9 of
    // terminator, and each setData's path, data and version.
    let now = Instant::now();
    let max_request = 200;
    let mut s = connected_with(
        SessionConfig {
            max_request,
            ..config()
        },
        now,
    );
    let write = |path: &str| SetDataRequest {
        path: path.into(),
        data: Some(vec![b'x'; 66]),
        version: -1,
    };
    s.submit_write(now, write("/app/a"), 1).unwrap();
    s.submit_write(now, write("/app/b"), 2).unwrap();
    let frames = sent(&mut s);
    let sizes: Vec<usize> = frames.iter().map(Vec::len).collect();
    assert!(
        sizes.iter().all(|&len| len <= max_request),
        "frames of {sizes:?} bytes, over max_request ({max_request})"
    );
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::SetData.code(), OpCode::SetData.code()]);
}

#[test]
fn with_batching_off_writes_go_one_by_one() {
    let now = Instant::now();
    let mut s = connected_with(
        SessionConfig {
            batch_writes: false,
            ..config()
        },
        now,
    );
    for token in 0..3 {
        s.submit_write(now, set("/app/a", -1), token).unwrap();
    }
    let ops: Vec<(i32, i32)> = frames(&mut s).iter().map(|(h, _)| (h.xid, h.op)).collect();
    let set_data = OpCode::SetData.code();
    assert_eq!(ops, [(1, set_data), (2, set_data), (3, set_data)]);
}

#[test]
fn an_error_for_the_whole_request_fails_every_write() {
    let now = Instant::now();
    let mut s = three_writes_sent(now);
    s.handle_bytes(now, &reply(1, 0, ErrorCode::NotReadOnly.code(), &()));
    assert_eq!(
        outcomes(&mut s),
        [
            (1, Err(Error::NotReadOnly)),
            (2, Err(Error::NotReadOnly)),
            (3, Err(Error::NotReadOnly))
        ]
    );
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn a_disconnect_fails_every_write_of_a_batch() {
    let now = Instant::now();
    let mut s = three_writes_sent(now);
    s.handle_disconnected(now);
    assert_eq!(
        outcomes(&mut s),
        [
            (1, Err(Error::ConnectionLoss)),
            (2, Err(Error::ConnectionLoss)),
            (3, Err(Error::ConnectionLoss))
        ]
    );
}

#[test]
fn writes_made_while_disconnected_wait_for_the_reconnect_one_by_one() {
    let now = Instant::now();
    let mut s = connected(now);
    s.handle_disconnected(now);
    s.submit_write(now, set("/app/a", -1), 1).unwrap();
    s.submit_write(now, set("/app/b", -1), 2).unwrap();
    let ops: Vec<i32> = super::tests::reconnect(&mut s, now)
        .iter()
        .map(|f| header(f).op)
        .collect();
    assert_eq!(ops, [OpCode::SetData.code(), OpCode::SetData.code()]);
}

#[test]
fn a_multi_reply_unlike_the_batch_fails_every_write_and_drops_the_connection() {
    let now = Instant::now();
    for results in [
        // Too few results.
        vec![set_result(1), set_result(1)],
        // A failure without a failing op: sending again could go on forever.
        vec![
            error_result(ErrorCode::Ok),
            error_result(ErrorCode::RuntimeInconsistency),
            error_result(ErrorCode::RuntimeInconsistency),
        ],
    ] {
        let mut s = three_writes_sent(now);
        s.handle_bytes(now, &reply(1, 3, 0, &MultiResponse { results }));
        assert!(matches!(s.poll_disconnect(), Some(Error::Protocol(_))));
        let got = outcomes(&mut s);
        assert_eq!(got.len(), 3);
        assert!(got
            .iter()
            .all(|(_, outcome)| matches!(outcome, Err(Error::Protocol(_)))));
    }
}

#[test]
fn a_multi_result_unlike_a_set_data_fails_that_write_and_drops_the_connection() {
    let now = Instant::now();
    let mut s = three_writes_sent(now);
    let results = vec![set_result(1), OpResult::Delete, set_result(2)];
    s.handle_bytes(now, &reply(1, 3, 0, &MultiResponse { results }));
    assert!(matches!(s.poll_disconnect(), Some(Error::Protocol(_))));
    let got = outcomes(&mut s);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], (1, Ok(1)));
    assert!(matches!(got[1], (2, Err(Error::Protocol(_)))));
    assert_eq!(got[2], (3, Ok(2)));
}
