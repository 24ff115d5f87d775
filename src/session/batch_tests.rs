//! Reads sent together (see `batch.rs`), driven by bytes: no sockets.

use std::time::{Duration, Instant};

use super::tests::{
    config, connected, connected_with, data_v, get_data, header, reconnect, replies, reply, sent,
    TestSession,
};
use super::*;
use crate::proto::{
    DecodeError, ErrorCode, ErrorResponse, GetChildrenRequest, GetChildrenResponse,
    GetDataResponse, MultiOp, MultiRequest, MultiResponse, OpResult, RequestHeader, Stat,
};

fn read(path: &str) -> BatchRead {
    BatchRead::Data(get_data(path))
}

/// The header and, for a multiRead, the paths its ops read.
fn read_frame(frame: &[u8]) -> (RequestHeader, Vec<String>) {
    let mut r = crate::proto::Reader::new(frame);
    let header = RequestHeader::read(&mut r).unwrap();
    let paths = if header.op == OpCode::MultiRead.code() {
        let ops = MultiRequest::read(&mut r).unwrap().ops;
        ops.iter().map(|op| op.path().to_owned()).collect()
    } else {
        Vec::new()
    };
    (header, paths)
}

fn data(bytes: &[u8]) -> GetDataResponse {
    GetDataResponse {
        data: Some(bytes.to_vec()),
        stat: Stat::default(),
    }
}

/// Reads `/app/a` (token 1) and `/app/b` (token 2), submitted together
/// and sent as one multiRead with xid 1.
fn two_reads_sent(config: SessionConfig, now: Instant) -> TestSession {
    let mut s = connected_with(config, now);
    s.submit_read(now, read("/app/a"), 1).unwrap();
    s.submit_read(now, read("/app/b"), 2).unwrap();
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(read_frame(&frames[0]).1, ["/app/a", "/app/b"]);
    s
}

/// The opcodes of the frames sent.
fn sent_ops(s: &mut TestSession) -> Vec<i32> {
    sent(s).iter().map(|f| header(f).op).collect()
}

#[test]
fn reads_waiting_together_go_as_one_multi_read_and_each_gets_its_own_outcome() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_read(now, read("/app/a"), 1).unwrap();
    let children = GetChildrenRequest {
        path: "/app/dir".into(),
        watch: true,
    };
    s.submit_read(now, BatchRead::Children(children), 2)
        .unwrap();
    s.submit_read(now, read("/app/gone"), 3).unwrap();
    assert_eq!(s.in_flight(), 1);
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    let (h, paths) = read_frame(&frames[0]);
    assert_eq!((h.xid, h.op), (1, OpCode::MultiRead.code()));
    assert_eq!(paths, ["/app/a", "/app/dir", "/app/gone"]);
    // The watch flag was cleared: a batched read leaves no watch.
    let mut r = crate::proto::Reader::new(&frames[0]);
    RequestHeader::read(&mut r).unwrap();
    let ops = MultiRequest::read(&mut r).unwrap().ops;
    assert!(matches!(&ops[1], MultiOp::GetChildren(c) if !c.watch));

    let results = vec![
        OpResult::GetData(data(b"A")),
        OpResult::GetChildren(GetChildrenResponse {
            children: vec!["x".into()],
        }),
        OpResult::Error(ErrorResponse {
            err: ErrorCode::NoNode.code(),
        }),
    ];
    s.handle_bytes(now, &reply(1, 20, 0, &MultiResponse { results }));
    let got = replies(&mut s);
    assert_eq!(got.len(), 3);
    assert!(
        matches!(&got[0], (1, Ok(Response::GetData(d))) if d.data.as_deref() == Some(&b"A"[..]))
    );
    assert!(matches!(&got[1], (2, Ok(Response::GetChildren(c))) if c.children == ["x"]));
    assert!(matches!(&got[2], (3, Err(Error::NoNode))));
    assert_eq!(s.last_zxid(), 20);
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn a_lone_read_goes_as_itself() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_read(now, read("/app/a"), 1).unwrap();
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(header(&frames[0]).op, OpCode::GetData.code());
    s.handle_bytes(now, &reply(1, 5, 0, &data_v()));
    assert!(matches!(
        replies(&mut s)[..],
        [(1, Ok(Response::GetData(_)))]
    ));
}

#[test]
fn a_batch_closes_when_its_bytes_leave_or_another_request_follows() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_read(now, read("/app/a"), 1).unwrap();
    s.submit_read(now, read("/app/b"), 2).unwrap();
    let first = sent(&mut s);
    // Sent: a read now starts a batch of its own.
    s.submit_read(now, read("/app/c"), 3).unwrap();
    // Another request after it: the next read may not jump ahead of it.
    s.submit(now, OpCode::Exists, &get_data("/app/e"), 4, None)
        .unwrap();
    s.submit_read(now, read("/app/d"), 5).unwrap();
    s.submit_read(now, read("/app/f"), 6).unwrap();
    let frames: Vec<_> = first
        .iter()
        .chain(&sent(&mut s))
        .map(|f| read_frame(f))
        .collect();
    let shape: Vec<(i32, i32, Vec<String>)> = frames
        .into_iter()
        .map(|(h, paths)| (h.xid, h.op, paths))
        .collect();
    let multi_read = OpCode::MultiRead.code();
    assert_eq!(
        shape,
        [
            (1, multi_read, vec!["/app/a".into(), "/app/b".into()]),
            (2, OpCode::GetData.code(), vec![]),
            (3, OpCode::Exists.code(), vec![]),
            (4, multi_read, vec!["/app/d".into(), "/app/f".into()]),
        ]
    );
}

#[test]
fn a_deferred_delete_goes_before_a_later_read_and_splits_the_batch() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_read(now, read("/app/a"), 1).unwrap();
    let due = now + Duration::from_millis(5);
    s.defer_background_delete(now, Release::plain("/app/lock/n1"), due)
        .unwrap();
    s.submit_read(now, read("/app/b"), 2).unwrap();
    assert_eq!(
        sent_ops(&mut s),
        [
            OpCode::GetData.code(),
            OpCode::Delete.code(),
            OpCode::GetData.code()
        ]
    );
}

#[test]
fn a_batch_holds_at_most_max_batched_reads() {
    let now = Instant::now();
    let mut s = connected(now);
    let count = MAX_BATCHED_READS as u32 + 1;
    for token in 0..count {
        s.submit_read(now, read("/app/a"), token).unwrap();
    }
    let frames: Vec<_> = sent(&mut s).iter().map(|f| read_frame(f)).collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].1.len(), MAX_BATCHED_READS);
    assert_eq!(frames[1].0.op, OpCode::GetData.code());
}

#[test]
fn with_batching_off_reads_go_one_by_one() {
    let now = Instant::now();
    let mut s = connected_with(
        SessionConfig {
            batch_reads: false,
            ..config()
        },
        now,
    );
    for token in 0..3 {
        s.submit_read(now, read("/app/a"), token).unwrap();
    }
    let xids: Vec<(i32, i32)> = sent(&mut s)
        .iter()
        .map(|f| (header(f).xid, header(f).op))
        .collect();
    let get = OpCode::GetData.code();
    assert_eq!(xids, [(1, get), (2, get), (3, get)]);
}

#[test]
fn a_server_without_multi_read_fails_the_batch_with_connection_loss_and_ends_batching() {
    let now = Instant::now();
    let mut s = two_reads_sent(config(), now);
    let unimplemented = ErrorCode::Unimplemented.code();
    s.handle_bytes(now, &reply(1, 0, unimplemented, &()));
    assert!(matches!(
        replies(&mut s)[..],
        [
            (1, Err(Error::ConnectionLoss)),
            (2, Err(Error::ConnectionLoss))
        ]
    ));
    // Such a server closes the connection; after the reconnect reads go
    // one by one.
    reconnect(&mut s, now);
    s.submit_read(now, read("/app/a"), 3).unwrap();
    s.submit_read(now, read("/app/b"), 4).unwrap();
    assert_eq!(
        sent_ops(&mut s),
        [OpCode::GetData.code(), OpCode::GetData.code()]
    );
}

/// A server before 3.6 refuses a multiRead as it reads it, ahead of the
/// replies of requests still in its pipeline: the refusal overtakes them,
/// the connection is dropped for the reply out of order, and reads go one
/// by one after the reconnect all the same. (Before, batching went on, and
/// every batch behind another request cost a connection.)
#[test]
fn a_multi_read_refusal_overtaking_an_earlier_reply_still_ends_batching() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit(now, OpCode::Exists, &get_data("/app/e"), 1, None)
        .unwrap();
    s.submit_read(now, read("/app/a"), 2).unwrap();
    s.submit_read(now, read("/app/b"), 3).unwrap();
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::Exists.code(), OpCode::MultiRead.code()]);
    let batch = header(&frames[1]).xid;
    let unimplemented = ErrorCode::Unimplemented.code();
    s.handle_bytes(now, &reply(batch, 0, unimplemented, &()));
    assert!(matches!(
        s.poll_disconnect(),
        Some(Error::UnexpectedReply { .. })
    ));
    reconnect(&mut s, now);
    s.submit_read(now, read("/app/a"), 4).unwrap();
    s.submit_read(now, read("/app/b"), 5).unwrap();
    assert_eq!(
        sent_ops(&mut s),
        [OpCode::GetData.code(), OpCode::GetData.code()]
    );
}

#[test]
fn a_multi_read_reply_with_the_wrong_count_fails_every_read_and_drops_the_connection() {
    let now = Instant::now();
    let mut s = two_reads_sent(config(), now);
    let short = MultiResponse {
        results: vec![OpResult::GetData(data_v())],
    };
    s.handle_bytes(now, &reply(1, 3, 0, &short));
    assert!(matches!(s.poll_disconnect(), Some(Error::Protocol(_))));
    assert!(matches!(
        replies(&mut s)[..],
        [(1, Err(Error::Protocol(_))), (2, Err(Error::Protocol(_)))]
    ));
}

#[test]
fn a_multi_read_reply_with_more_results_than_reads_is_refused_before_they_are_decoded() {
    let now = Instant::now();
    let mut s = two_reads_sent(config(), now);
    // Two results, then a third whose body is cut short: it is refused for
    // its count, not read.
    let two = MultiResponse {
        results: vec![OpResult::GetData(data_v()), OpResult::GetData(data_v())],
    };
    let mut body = reply(1, 3, 0, &two);
    let terminator = 9;
    body.truncate(body.len() - terminator);
    // A getData result's header, and the first byte of its body.
    body.extend_from_slice(&OpCode::GetData.code().to_be_bytes());
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0]);
    let len = u32::try_from(body.len() - 4).unwrap();
    body[..4].copy_from_slice(&len.to_be_bytes());
    s.handle_bytes(now, &body);
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Protocol(crate::proto::DecodeError::Malformed(
            "multi reply with more results than ops"
        )))
    );
    assert!(matches!(
        replies(&mut s)[..],
        [(1, Err(Error::Protocol(_))), (2, Err(Error::Protocol(_)))]
    ));
}

#[test]
fn a_disconnect_fails_every_read_of_a_batch() {
    let now = Instant::now();
    let mut s = two_reads_sent(config(), now);
    s.handle_disconnected(now);
    assert!(matches!(
        replies(&mut s)[..],
        [
            (1, Err(Error::ConnectionLoss)),
            (2, Err(Error::ConnectionLoss))
        ]
    ));
}

#[test]
fn reads_made_while_disconnected_wait_for_the_reconnect_one_by_one() {
    let now = Instant::now();
    let mut s = connected(now);
    s.handle_disconnected(now);
    s.submit_read(now, read("/app/a"), 1).unwrap();
    s.submit_read(now, read("/app/b"), 2).unwrap();
    let ops: Vec<i32> = reconnect(&mut s, now)
        .iter()
        .map(|f| header(f).op)
        .collect();
    assert_eq!(ops, [OpCode::GetData.code(), OpCode::GetData.code()]);
}

#[test]
fn a_batch_reply_may_be_max_frame_per_read_and_no_more() {
    let now = Instant::now();
    let config = SessionConfig {
        max_frame: 256,
        ..config()
    };
    let big = MultiResponse {
        results: vec![
            OpResult::GetData(data(&[b'x'; 150])),
            OpResult::GetData(data(&[b'y'; 150])),
        ],
    };
    // Over one read's max_frame, within two reads'.
    let mut s = two_reads_sent(config.clone(), now);
    s.handle_bytes(now, &reply(1, 3, 0, &big));
    assert!(s.poll_disconnect().is_none());
    assert_eq!(replies(&mut s).len(), 2);
    // Two reads whose replies alone are max_frame each (16 + 4 + 168 + 68)
    // fit together: 523 bytes with the multi headers, over two reads'
    // max_frame (512), within the limit that counts the headers (539).
    let at_limit = MultiResponse {
        results: vec![
            OpResult::GetData(data(&[b'x'; 168])),
            OpResult::GetData(data(&[b'y'; 168])),
        ],
    };
    let mut s = two_reads_sent(config.clone(), now);
    let frame = reply(1, 3, 0, &at_limit);
    assert_eq!(frame.len(), 4 + 523);
    s.handle_bytes(now, &frame);
    assert!(s.poll_disconnect().is_none());
    assert!(
        matches!(&replies(&mut s)[..], [(1, Ok(_)), (2, Ok(_))]),
        "each read's reply alone is within max_frame"
    );
    // A lone read's reply of that size is refused.
    let mut s = connected_with(config, now);
    s.submit_read(now, read("/app/a"), 1).unwrap();
    sent(&mut s);
    s.handle_bytes(now, &reply(1, 3, 0, &big));
    assert!(matches!(
        s.poll_disconnect(),
        Some(Error::Protocol(
            crate::proto::DecodeError::FrameTooLarge { .. }
        ))
    ));
}

/// A batch's read whose reply alone would have been over `max_frame` fails
/// as it would have alone, with `FrameTooLarge` and the length of that
/// frame; the other reads keep their results, and the connection stays.
#[test]
fn a_batched_read_over_max_frame_fails_as_it_would_alone() {
    let now = Instant::now();
    let config = SessionConfig {
        max_frame: 256,
        ..config()
    };
    let listing = GetChildrenResponse {
        children: vec!["c".repeat(100), "d".repeat(100)],
    };
    let mixed = MultiResponse {
        results: vec![
            // 16 + 4 + 169 + 68 = 257 bytes alone.
            OpResult::GetData(data(&[b'x'; 169])),
            OpResult::GetData(data(b"y")),
        ],
    };
    let mut s = two_reads_sent(config.clone(), now);
    s.handle_bytes(now, &reply(1, 3, 0, &mixed));
    assert!(s.poll_disconnect().is_none());
    let got = replies(&mut s);
    assert!(
        matches!(
            &got[..],
            [
                (
                    1,
                    Err(Error::Protocol(DecodeError::FrameTooLarge { len: 257, max: 256 }))
                ),
                (2, Ok(Response::GetData(r))),
            ] if r.data.as_deref() == Some(b"y")
        ),
        "{got:?}"
    );
    // A listing: 16 + 4 + 2 * (4 + 100) = 228 bytes alone fits; one more
    // name of 25 makes it 257.
    for (extra, fits) in [(None, true), (Some("e".repeat(25)), false)] {
        let mut listing = listing.clone();
        listing.children.extend(extra);
        let mut s = connected_with(config.clone(), now);
        s.submit_read(now, read("/app/a"), 1).unwrap();
        let children = GetChildrenRequest {
            path: "/app/dir".into(),
            watch: false,
        };
        s.submit_read(now, BatchRead::Children(children), 2)
            .unwrap();
        assert_eq!(sent_ops(&mut s), [OpCode::MultiRead.code()]);
        let results = vec![
            OpResult::GetData(data(b"a")),
            OpResult::GetChildren(listing),
        ];
        s.handle_bytes(now, &reply(1, 3, 0, &MultiResponse { results }));
        let got = replies(&mut s);
        match fits {
            true => assert!(matches!(got[1], (2, Ok(_))), "{got:?}"),
            false => assert!(
                matches!(
                    got[1],
                    (
                        2,
                        Err(Error::Protocol(DecodeError::FrameTooLarge {
                            len: 257,
                            max: 256
                        }))
                    )
                ),
                "{got:?}"
            ),
        }
    }
}

/// A batch's reply over `max_frame` per read is not read: its reads fail
/// with `ConnectionLoss` with the connection, and the next connection's
/// reads go one by one, so that each, asked again, gets its own outcome;
/// the connection after that batches again.
#[test]
fn after_a_batch_reply_too_large_to_read_the_next_connections_reads_go_alone() {
    let now = Instant::now();
    let config = SessionConfig {
        max_frame: 256,
        ..config()
    };
    let mut s = two_reads_sent(config, now);
    // Two reads' max_frame, and three multi headers: 539.
    let mut too_large = 540i32.to_be_bytes().to_vec();
    too_large.extend(1i32.to_be_bytes());
    s.handle_bytes(now, &too_large);
    assert!(matches!(
        s.poll_disconnect(),
        Some(Error::Protocol(DecodeError::FrameTooLarge {
            len: 540,
            max: 539
        }))
    ));
    let two_reads = |s: &mut TestSession| {
        reconnect(s, now);
        s.submit_read(now, read("/app/a"), 3).unwrap();
        s.submit_read(now, read("/app/b"), 4).unwrap();
        sent_ops(s)
    };
    assert_eq!(
        two_reads(&mut s),
        [OpCode::GetData.code(), OpCode::GetData.code()]
    );
    assert_eq!(two_reads(&mut s), [OpCode::MultiRead.code()]);
    assert!(matches!(
        replies(&mut s)[..],
        [
            (1, Err(Error::ConnectionLoss)),
            (2, Err(Error::ConnectionLoss)),
            (3, Err(Error::ConnectionLoss)),
            (4, Err(Error::ConnectionLoss)),
        ]
    ));
}

#[test]
fn a_read_too_long_to_join_goes_as_its_own_request() {
    let now = Instant::now();
    let mut s = connected_with(
        SessionConfig {
            max_request: 200,
            ..config()
        },
        now,
    );
    let long = format!("/app/{}", "x".repeat(150));
    s.submit_read(now, read("/app/a"), 1).unwrap();
    s.submit_read(now, read(&long), 2).unwrap();
    assert_eq!(
        sent_ops(&mut s),
        [OpCode::GetData.code(), OpCode::GetData.code()]
    );
}

#[test]
fn a_multi_read_result_unlike_its_read_fails_that_read_and_drops_the_connection() {
    let now = Instant::now();
    let mut s = two_reads_sent(config(), now);
    let mixed = MultiResponse {
        results: vec![
            OpResult::GetData(data_v()),
            OpResult::GetChildren(GetChildrenResponse { children: vec![] }),
        ],
    };
    s.handle_bytes(now, &reply(1, 3, 0, &mixed));
    assert!(matches!(s.poll_disconnect(), Some(Error::Protocol(_))));
    assert!(matches!(
        replies(&mut s)[..],
        [(1, Ok(Response::GetData(_))), (2, Err(Error::Protocol(_)))]
    ));
}
