//! Requests made to go later (`submit_at`): data until they fall due, then
//! sent like any other, or queued for the next connection.

use std::time::{Duration, Instant};

use super::tests::{
    connected, data_v, events, get_data, header, reconnect, replies, reply, sent, TestSession,
};
use super::*;
use crate::proto::{GetDataRequest, Reader, RequestHeader};

/// The xid and op of each request `s` sent.
fn sent_ops(s: &mut TestSession) -> Vec<(i32, i32)> {
    sent(s)
        .iter()
        .map(|f| {
            let h = header(f);
            (h.xid, h.op)
        })
        .collect()
}

/// Makes a getData of `path` go at `due`.
fn get_data_at(
    s: &mut TestSession,
    now: Instant,
    due: Instant,
    path: &str,
    token: u32,
) -> Result<()> {
    s.submit_at(now, due, OpCode::GetData, &get_data(path), token, None)
}

fn get_data_op() -> i32 {
    OpCode::GetData.code()
}

#[test]
fn a_delayed_request_goes_when_due_and_its_caller_gets_the_reply() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    get_data_at(&mut s, at(0), at(100), "/app/a", 7).unwrap();
    assert!(sent(&mut s).is_empty(), "not before it is due");
    assert_eq!(s.poll_timeout(), Some(at(100)));
    s.handle_timeout(at(99));
    assert!(sent(&mut s).is_empty(), "early");
    s.handle_timeout(at(100));
    assert_eq!(sent_ops(&mut s), [(1, get_data_op())]);
    // Sent: the next timer is the ping's, a send-idle interval later.
    assert_eq!(s.poll_timeout(), Some(at(1100)));
    s.handle_bytes(at(101), &reply(1, 5, 0, &data_v()));
    assert_eq!(replies(&mut s), [(7, Ok(Response::GetData(data_v())))]);
}

#[test]
fn delayed_requests_go_in_the_order_they_fall_due_behind_earlier_requests() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    get_data_at(&mut s, at(0), at(200), "/app/late", 1).unwrap();
    get_data_at(&mut s, at(0), at(100), "/app/early", 2).unwrap();
    s.submit(at(0), OpCode::GetData, &get_data("/app/now"), 3, None)
        .unwrap();
    assert_eq!(sent_ops(&mut s), [(1, get_data_op())]);
    s.handle_timeout(at(250));
    let paths: Vec<String> = sent(&mut s)
        .iter()
        .map(|f| {
            let mut r = Reader::new(f);
            RequestHeader::read(&mut r).unwrap();
            GetDataRequest::read(&mut r).unwrap().path
        })
        .collect();
    assert_eq!(paths, ["/app/early", "/app/late"]);
    for xid in 1..=3 {
        s.handle_bytes(at(260), &reply(xid, 5, 0, &data_v()));
    }
    let tokens: Vec<u32> = replies(&mut s).into_iter().map(|(t, _)| t).collect();
    assert_eq!(tokens, [3, 2, 1]);
}

#[test]
fn a_request_due_already_goes_at_once() {
    let now = Instant::now();
    let mut s = connected(now);
    get_data_at(&mut s, now, now, "/app/a", 7).unwrap();
    assert_eq!(sent_ops(&mut s), [(1, get_data_op())]);
}

#[test]
fn a_request_due_while_disconnected_goes_after_the_handshake() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    get_data_at(&mut s, at(0), at(100), "/app/a", 7).unwrap();
    s.handle_disconnected(at(50));
    events(&mut s);
    s.handle_timeout(at(100));
    assert_eq!(s.queued(), 1, "waiting for a connection");
    let frames = reconnect(&mut s, at(200));
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [get_data_op()]);
    assert!(replies(&mut s).is_empty());
}

/// A request that falls due in the tick that drops the connection (its
/// read timeout) is not written into it, to be failed with
/// `ConnectionLoss` unsent: it waits for the next handshake.
#[test]
fn a_request_due_as_the_connection_times_out_goes_after_the_next_handshake() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    // 2/3 of the negotiated 3 s without a byte from the server.
    get_data_at(&mut s, at(0), at(2000), "/app/a", 7).unwrap();
    s.handle_timeout(at(2000));
    assert!(s.poll_disconnect().is_some(), "the read timeout");
    assert!(sent(&mut s)
        .iter()
        .all(|f| header(f).op == OpCode::Ping.code()));
    s.handle_disconnected(at(2000));
    s.handle_timeout(at(2000));
    assert_eq!(s.queued(), 1, "waiting for a connection");
    let frames = reconnect(&mut s, at(2100));
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [get_data_op()]);
    assert!(
        replies(&mut s).is_empty(),
        "nothing failed: {:?}",
        events(&mut s)
    );
}

#[test]
fn a_reconnect_before_it_is_due_keeps_a_request_waiting() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    get_data_at(&mut s, at(0), at(500), "/app/a", 7).unwrap();
    assert!(reconnect(&mut s, at(100)).is_empty());
    events(&mut s);
    s.handle_timeout(at(499));
    assert!(sent(&mut s).is_empty());
    s.handle_timeout(at(500));
    assert_eq!(sent_ops(&mut s).len(), 1);
}

#[test]
fn a_close_or_the_sessions_end_fails_a_delayed_request() {
    let now = Instant::now();
    let later = now + Duration::from_millis(100);
    let mut s = connected(now);
    get_data_at(&mut s, now, later, "/app/a", 7).unwrap();
    s.close(now);
    assert_eq!(replies(&mut s), [(7, Err(Error::Closed))]);

    let mut s = connected(now);
    get_data_at(&mut s, now, later, "/app/a", 8).unwrap();
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &super::tests::expired());
    assert_eq!(replies(&mut s), [(8, Err(Error::SessionExpired))]);
    s.handle_timeout(later);
    assert!(sent(&mut s).is_empty(), "not sent after all");
    assert!(replies(&mut s).is_empty(), "failed once");
    assert_eq!(
        get_data_at(&mut s, now, later, "/app/a", 9),
        Err(Error::SessionExpired)
    );
}

#[test]
fn a_request_too_large_is_refused_when_made() {
    let now = Instant::now();
    let mut s = connected(now);
    let long = format!("/app/{}", "x".repeat(crate::proto::JUTE_MAX_BUFFER));
    let refused = get_data_at(&mut s, now, now + Duration::from_secs(1), &long, 7);
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    assert_eq!(
        s.poll_timeout(),
        Some(now + Duration::from_millis(1000)),
        "the ping only"
    );
}

#[test]
fn a_delayed_watch_is_pending_until_due_and_registered_by_its_reply() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    let path = "/app/lock/n1";
    let watch = WatchRequest {
        kind: WatchKind::Exist,
        path: path.into(),
        watcher: 42,
    };
    let request = crate::proto::ExistsRequest {
        path: path.into(),
        watch: true,
    };
    s.submit_at(at(0), at(100), OpCode::Exists, &request, 7, Some(watch))
        .unwrap();
    let kinds = [WatchKind::Exist];
    assert!(
        s.is_watched_or_pending(&kinds, path, |w| *w == 42),
        "delayed"
    );
    assert_eq!(s.watcher_count(), 0);
    s.handle_timeout(at(100));
    assert_eq!(sent_ops(&mut s), [(1, OpCode::Exists.code())]);
    let stat = crate::proto::ExistsResponse {
        stat: crate::proto::Stat::default(),
    };
    s.handle_bytes(at(101), &reply(1, 5, 0, &stat));
    assert_eq!(replies(&mut s).len(), 1);
    // The node exists: the server keeps it as a data watch.
    assert_eq!(s.watcher_count(), 1, "registered");
    assert!(s.is_watched_or_pending(&[WatchKind::Data], path, |w| *w == 42));
}

#[test]
fn a_lingering_delete_goes_ahead_of_a_delayed_request_released_after_it() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    s.defer_background_delete(at(0), Release::plain("/app/lock/n1"), at(200))
        .unwrap();
    get_data_at(&mut s, at(0), at(100), "/app/a", 7).unwrap();
    assert!(sent(&mut s).is_empty());
    s.handle_timeout(at(100));
    let ops: Vec<i32> = sent(&mut s).iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::Delete.code(), get_data_op()]);
}
