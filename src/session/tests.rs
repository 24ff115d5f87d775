//! The session driven by bytes and a hand-advanced clock: no sockets, no sleeps.

use std::time::{Duration, Instant};

use super::*;
use crate::proto::{
    ConnectResponse, CreateMode, CreateResponse, DecodeError, ErrorCode, ErrorResponse, EventType,
    GetDataRequest, GetDataResponse, MultiOp, MultiRequest, MultiResponse, OpResult, ReplyHeader,
    RequestHeader, SetWatches, Stat, WatcherEvent, NOTIFICATION_XID,
};

pub(super) type TestSession = Session<u32, u32>;

pub(super) const TIMEOUT: Duration = Duration::from_millis(3000);

pub(super) fn config() -> SessionConfig {
    SessionConfig {
        session_timeout: TIMEOUT,
        connect_timeout: Duration::from_millis(1000),
        can_be_read_only: false,
        max_frame: crate::proto::DEFAULT_MAX_FRAME,
        max_request: crate::proto::JUTE_MAX_BUFFER,
        chroot: Some("/app".into()),
        request_timeout: None,
        batch_reads: true,
        batch_writes: true,
        new_session_on_expiry: false,
    }
}

pub(super) fn frame(record: &impl Record) -> Vec<u8> {
    let mut buf = Vec::new();
    write_frame(&mut buf, record);
    buf
}

pub(super) fn reply(xid: i32, zxid: i64, err: i32, body: &impl Record) -> Vec<u8> {
    let mut payload = Vec::new();
    let mut w = crate::proto::Writer::new(&mut payload);
    ReplyHeader { xid, zxid, err }.write(&mut w);
    body.write(&mut w);
    let mut buf = (payload.len() as i32).to_be_bytes().to_vec();
    buf.extend(payload);
    buf
}

/// A handshake response that says the session is gone.
pub(super) fn expired() -> Vec<u8> {
    frame(&ConnectResponse {
        passwd: vec![0; 16],
        ..Default::default()
    })
}

pub(super) fn accepted(session_id: i64, timeout_ms: i32) -> Vec<u8> {
    frame(&ConnectResponse {
        protocol_version: 0,
        timeout_ms,
        session_id,
        passwd: vec![7; 16],
        read_only: false,
    })
}

/// A digest auth packet for `u:p`.
pub(super) fn digest_auth() -> AuthPacket {
    AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: b"u:p".to_vec(),
    }
}

/// Splits the transmitted bytes into frames.
pub(super) fn sent(session: &mut TestSession) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    session.poll_transmit(&mut buf);
    let mut frames = Vec::new();
    let mut rest = &buf[..];
    while let Some((payload, len)) = split_frame(rest, usize::MAX).unwrap() {
        frames.push(payload.to_vec());
        rest = &rest[len..];
    }
    assert!(rest.is_empty());
    frames
}

pub(super) fn header(frame: &[u8]) -> RequestHeader {
    RequestHeader::read(&mut crate::proto::Reader::new(frame)).unwrap()
}

/// The state changes among `events`, in order.
pub(super) fn states_of(events: &[Event<u32, u32>]) -> Vec<State> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::State(s) => Some(*s),
            _ => None,
        })
        .collect()
}

pub(super) fn events(session: &mut TestSession) -> Vec<Event<u32, u32>> {
    std::iter::from_fn(|| session.poll_event()).collect()
}

pub(super) fn replies(session: &mut TestSession) -> Vec<(u32, Result<Response>)> {
    events(session)
        .into_iter()
        .filter_map(|e| match e {
            Event::Reply { token, result } => Some((token, result)),
            _ => None,
        })
        .collect()
}

pub(super) fn connected(now: Instant) -> TestSession {
    connected_with(config(), now)
}

pub(super) fn connected_with(config: SessionConfig, now: Instant) -> TestSession {
    let mut s = Session::new(config, vec!["127.0.0.1:1".into()], now);
    s.handle_connected(now);
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    let request = ConnectRequest::from_bytes(&frames[0]).unwrap();
    assert_eq!(request.session_id, 0);
    assert_eq!(request.passwd, [0; 16]);
    assert_eq!(request.timeout_ms, 3000);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    assert!(matches!(
        events(&mut s)[..],
        [Event::State(State::Connected)]
    ));
    assert_eq!(s.session_id(), 0x1234);
    s
}

/// A getData reply body: data `v`.
pub(super) fn data_v() -> GetDataResponse {
    GetDataResponse {
        data: Some(b"v".to_vec()),
        stat: Stat::default(),
    }
}

pub(super) fn get_data(path: &str) -> GetDataRequest {
    GetDataRequest {
        path: path.into(),
        watch: false,
    }
}

#[test]
fn pipelined_replies_reach_their_callers_in_order() {
    let now = Instant::now();
    let mut s = connected(now);
    for token in 0..3 {
        s.submit(now, OpCode::GetData, &get_data("/app/a"), token, None)
            .unwrap();
    }
    let frames = sent(&mut s);
    let xids: Vec<i32> = frames.iter().map(|f| header(f).xid).collect();
    assert_eq!(xids, [1, 2, 3]);
    let body = data_v();
    let mut bytes = Vec::new();
    for (xid, zxid) in [(1, 10), (2, 11), (3, 12)] {
        bytes.extend(reply(xid, zxid, 0, &body));
    }
    // Split the stream at an awkward place: frames may arrive in pieces.
    s.handle_bytes(now, &bytes[..7]);
    s.handle_bytes(now, &bytes[7..]);
    let got = replies(&mut s);
    assert_eq!(got.iter().map(|(t, _)| *t).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(got
        .iter()
        .all(|(_, r)| *r == Ok(Response::GetData(body.clone()))));
    assert_eq!(s.last_zxid(), 12);
}

#[test]
fn the_room_a_large_reply_took_is_given_back_once_it_is_read() {
    let now = Instant::now();
    let config = SessionConfig {
        max_frame: 8 << 20,
        ..config()
    };
    let mut s = connected_with(config, now);
    for token in [1, 2] {
        s.submit(now, OpCode::GetData, &get_data("/app/big"), token, None)
            .unwrap();
    }
    sent(&mut s);
    let big = GetDataResponse {
        data: Some(vec![7; 6 << 20]),
        stat: Stat::default(),
    };
    let first = reply(1, 10, 0, &big);
    let second = reply(2, 11, 0, &big);
    // The first, and the start of the second in the same read: the room
    // the second needs is kept while it arrives.
    s.handle_bytes(now, &[&first[..], &second[..1000]].concat());
    assert_eq!(replies(&mut s), [(1, Ok(Response::GetData(big.clone())))]);
    assert!(s.inbox.capacity() >= 6 << 20, "{}", s.inbox.capacity());
    s.handle_bytes(now, &second[1000..]);
    assert_eq!(replies(&mut s), [(2, Ok(Response::GetData(big)))]);
    assert!(s.inbox.is_empty());
    assert!(
        s.inbox.capacity() <= KEPT_BUFFER,
        "{} bytes kept",
        s.inbox.capacity()
    );
    // A large reply cut off by a disconnect leaves no room behind either.
    s.submit(now, OpCode::GetData, &get_data("/app/big"), 3, None)
        .unwrap();
    sent(&mut s);
    s.handle_bytes(now, &first[..first.len() - 1]);
    s.handle_disconnected(now);
    assert!(s.inbox.capacity() <= KEPT_BUFFER, "{}", s.inbox.capacity());
}

#[test]
fn an_out_of_order_xid_drops_the_connection_and_fails_the_calls() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit(
        now,
        OpCode::Delete,
        &DeleteRequest {
            path: "/app/x".into(),
            version: -1,
        },
        1,
        None,
    )
    .unwrap();
    s.submit(
        now,
        OpCode::Delete,
        &DeleteRequest {
            path: "/app/y".into(),
            version: -1,
        },
        2,
        None,
    )
    .unwrap();
    sent(&mut s);
    s.handle_bytes(now, &reply(2, 5, 0, &()));
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::UnexpectedReply {
            expected: Some(1),
            received: 2
        })
    );
    s.handle_disconnected(now);
    let got = replies(&mut s);
    assert_eq!(
        got,
        [
            (1, Err(Error::ConnectionLoss)),
            (2, Err(Error::ConnectionLoss))
        ]
    );
    assert_eq!(s.state(), State::Disconnected);
}

#[test]
fn pings_follow_send_idleness_and_silence_drops_the_connection() {
    let start = Instant::now();
    let mut s = connected(start);
    assert_eq!(s.read_timeout(), Duration::from_millis(2000));
    assert_eq!(s.poll_timeout(), Some(start + Duration::from_millis(1000)));
    let t1 = start + Duration::from_millis(1000);
    s.handle_timeout(t1);
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        header(&frames[0]),
        RequestHeader {
            xid: PING_XID,
            op: OpCode::Ping.code()
        }
    );
    s.handle_bytes(t1, &reply(PING_XID, 3, 0, &()));
    assert!(events(&mut s).is_empty());
    // Nothing heard for the read timeout (2/3 of the session timeout).
    let t2 = t1 + Duration::from_millis(2000);
    s.handle_timeout(t2);
    assert!(matches!(s.poll_disconnect(), Some(Error::Timeout { .. })));
}

/// A long session's idle connection pings every 10 s, as the Java client's
/// does, not every third of the session timeout: a NAT or firewall may
/// forget an idle connection sooner than that.
#[test]
fn a_long_sessions_idle_connection_pings_every_ten_seconds() {
    let start = Instant::now();
    let config = SessionConfig {
        session_timeout: Duration::from_secs(120),
        ..config()
    };
    let mut s: TestSession = Session::new(config, vec!["127.0.0.1:1".into()], start);
    s.next_host(start).unwrap();
    s.handle_connected(start);
    sent(&mut s);
    s.handle_bytes(start, &accepted(0x1234, 120_000));
    events(&mut s);
    assert_eq!(s.read_timeout(), Duration::from_secs(80));
    assert_eq!(s.poll_timeout(), Some(start + Duration::from_secs(10)));
    s.handle_timeout(start + Duration::from_secs(10));
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(header(&frames[0]).xid, PING_XID);
}

/// A server may grant more than the session timeout asked for: its
/// `minSessionTimeout` is higher, which the client's timers honour, or it
/// is hostile and grants days, which they do not: past a minute (or the
/// timeout asked for, if longer), a silent connection is dropped, and a
/// call waits for its reply, or for a connection, as if the grant were
/// that. The session's expiry still goes by the grant.
#[test]
fn a_grant_above_the_requested_timeout_is_followed_up_to_a_minute() {
    let requested_2s = SessionConfig {
        session_timeout: Duration::from_secs(2),
        ..config()
    };
    let cases = [
        // A server whose minimum is 4 s.
        (requested_2s, 4_000, Duration::from_secs(4)),
        // A hostile grant of 24 days.
        (config(), i32::MAX, Duration::from_secs(60)),
    ];
    for (config, granted_ms, in_use) in cases {
        let start = Instant::now();
        let mut s: TestSession = Session::new(config, vec!["127.0.0.1:1".into()], start);
        s.next_host(start).unwrap();
        s.handle_connected(start);
        sent(&mut s);
        s.handle_bytes(start, &accepted(0x1234, granted_ms));
        events(&mut s);
        let granted = Duration::from_millis(granted_ms.unsigned_abs().into());
        assert_eq!(s.negotiated_timeout(), Some(granted));
        assert_eq!(s.read_timeout(), in_use * 2 / 3, "granted {granted_ms}");
        assert_eq!(s.request_timeout(), in_use * 2, "granted {granted_ms}");
        // Nothing heard: the connection goes at the read timeout.
        let read_timeout = s.read_timeout();
        s.handle_timeout(start + read_timeout - Duration::from_millis(1));
        assert_eq!(s.poll_disconnect(), None);
        s.handle_timeout(start + read_timeout);
        assert!(matches!(
            s.poll_disconnect(),
            Some(Error::Timeout { after, .. }) if after == read_timeout
        ));
        if granted_ms != i32::MAX {
            // The session expires locally (4/3 of the grant after it was
            // last heard) before a call made now would time out.
            continue;
        }
        // A call made while disconnected waits for a connection by the
        // same bound; the session, by the grant, has not expired.
        let cut = start + read_timeout;
        s.handle_disconnected(cut);
        events(&mut s);
        s.submit(cut, OpCode::GetData, &get_data("/app/q"), 9, None)
            .unwrap();
        s.handle_timeout(cut + in_use - Duration::from_millis(1));
        assert_eq!(replies(&mut s), [], "granted {granted_ms}");
        s.handle_timeout(cut + in_use);
        assert_eq!(replies(&mut s), [(9, Err(Error::ConnectionLoss))]);
        assert_eq!(s.state(), State::Disconnected, "granted {granted_ms}");
    }
}

/// A server that trickles a frame it never finishes (a byte a second, well
/// inside the read timeout) is as silent as one that sends nothing.
#[test]
fn a_frame_trickled_and_never_finished_is_silence() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    let ping_reply = reply(PING_XID, 3, 0, &());
    for (second, byte) in ping_reply.iter().take(3).enumerate() {
        let now = at(1 + 500 * second as u64);
        s.handle_timeout(now);
        sent(&mut s);
        s.handle_bytes(now, &[*byte]);
        assert_eq!(s.poll_disconnect(), None);
    }
    // The read timeout counts from the handshake, the last whole frame.
    s.handle_timeout(at(1999));
    assert_eq!(s.poll_disconnect(), None);
    s.handle_timeout(at(2000));
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Timeout {
            deadline: Deadline::Read,
            after: Duration::from_millis(2000),
        })
    );
}

#[test]
fn a_reply_overdue_by_the_request_timeout_fails_its_call_and_drops_the_connection() {
    let start = Instant::now();
    let after = Duration::from_millis(500);
    let config = SessionConfig {
        request_timeout: Some(after),
        ..config()
    };
    let mut s = connected_with(config, start);
    let at = |ms| start + Duration::from_millis(ms);
    assert_eq!(
        s.poll_timeout(),
        Some(at(1000)),
        "nothing in flight: the ping"
    );
    for (token, ms) in [(1, 0), (2, 100), (3, 200)] {
        s.submit(at(ms), OpCode::GetData, &get_data("/app/a"), token, None)
            .unwrap();
    }
    assert_eq!(sent(&mut s).len(), 3);
    assert_eq!(
        s.poll_timeout(),
        Some(at(500)),
        "the oldest call's deadline"
    );
    // Its reply comes in time: the next call's deadline is next.
    let body = data_v();
    s.handle_bytes(at(450), &reply(1, 7, 0, &body));
    assert_eq!(replies(&mut s), [(1, Ok(Response::GetData(body)))]);
    assert_eq!(s.poll_timeout(), Some(at(600)));
    s.handle_timeout(at(599));
    assert_eq!(s.poll_disconnect(), None);
    let timeout = Error::Timeout {
        deadline: Deadline::Request,
        after,
    };
    s.handle_timeout(at(600));
    assert_eq!(replies(&mut s), [(2, Err(timeout.clone()))]);
    assert_eq!(s.poll_disconnect(), Some(timeout));
    // Replies come in order, so the call behind it cannot be answered on
    // this connection either.
    s.handle_disconnected(at(600));
    assert_eq!(replies(&mut s), [(3, Err(Error::ConnectionLoss))]);
    assert_eq!(s.state(), State::Disconnected);
}

#[test]
fn requests_made_while_disconnected_wait_for_the_reconnect_and_resume_the_session() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit(
        now,
        OpCode::Delete,
        &DeleteRequest {
            path: "/app/x".into(),
            version: -1,
        },
        1,
        None,
    )
    .unwrap();
    sent(&mut s);
    s.handle_bytes(now, &reply(1, 40, 0, &()));
    assert_eq!(replies(&mut s), [(1, Ok(Response::Empty))]);
    s.handle_disconnected(now);
    assert!(matches!(
        events(&mut s)[..],
        [Event::State(State::Disconnected)]
    ));
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    assert!(sent(&mut s).is_empty());
    s.handle_connected(now);
    let frames = sent(&mut s);
    let request = ConnectRequest::from_bytes(&frames[0]).unwrap();
    assert_eq!((request.session_id, request.last_zxid_seen), (0x1234, 40));
    assert_eq!(request.passwd, [7; 16]);
    assert_eq!(
        frames.len(),
        1,
        "nothing else before the handshake completes"
    );
    s.handle_bytes(now, &accepted(0x1234, 3000));
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        header(&frames[0]),
        RequestHeader {
            xid: 2,
            op: OpCode::GetData.code()
        }
    );
}

#[test]
fn a_request_waiting_for_a_connection_fails_after_the_session_timeout() {
    let now = Instant::now();
    let mut s = connected(now);
    s.handle_disconnected(now);
    events(&mut s);
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 9, None)
        .unwrap();
    assert_eq!(s.poll_timeout(), Some(now + TIMEOUT));
    s.handle_timeout(now + TIMEOUT);
    assert_eq!(replies(&mut s), [(9, Err(Error::ConnectionLoss))]);
}

#[test]
fn expiry_is_reported_once_and_later_calls_fail_fast() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit(
        now,
        OpCode::GetData,
        &get_data("/app/w"),
        1,
        Some(WatchRequest {
            kind: WatchKind::Data,
            path: "/app/w".into(),
            watcher: 77,
        }),
    )
    .unwrap();
    sent(&mut s);
    let body = GetDataResponse {
        data: None,
        stat: Stat::default(),
    };
    s.handle_bytes(now, &reply(1, 5, 0, &body));
    events(&mut s);
    s.handle_disconnected(now);
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &expired());
    let evs = events(&mut s);
    let states = states_of(&evs);
    assert_eq!(states, [State::Disconnected, State::Expired]);
    assert!(evs.iter().any(|e| matches!(
        e,
        Event::Reply {
            token: 2,
            result: Err(Error::SessionExpired)
        }
    )));
    assert!(evs.iter().any(|e| matches!(e, Event::Watch { watchers, event } if *watchers == [77] && event.state == KeeperState::Expired)));
    assert_eq!(s.poll_disconnect(), Some(Error::SessionExpired));
    s.handle_disconnected(now);
    assert!(events(&mut s).is_empty(), "expiry is reported exactly once");
    assert_eq!(
        s.submit(now, OpCode::GetData, &get_data("/app/q"), 3, None),
        Err(Error::SessionExpired)
    );
    assert_eq!(s.next_host(now), None);
}

#[test]
fn one_shot_watches_fire_once_with_the_chroot_stripped_and_are_reregistered() {
    let now = Instant::now();
    let mut s = connected(now);
    let watch = WatchRequest {
        kind: WatchKind::Data,
        path: "/app/w".into(),
        watcher: 5,
    };
    s.submit(
        now,
        OpCode::GetData,
        &GetDataRequest {
            path: "/app/w".into(),
            watch: true,
        },
        1,
        Some(watch),
    )
    .unwrap();
    sent(&mut s);
    s.handle_bytes(
        now,
        &reply(
            1,
            20,
            0,
            &GetDataResponse {
                data: Some(vec![]),
                stat: Stat::default(),
            },
        ),
    );
    events(&mut s);
    // Reconnect: the watch is re-registered relative to the last zxid seen.
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(header(&frames[0]).op, OpCode::SetWatches.code());
    let set = SetWatches::from_bytes(&frames[0][8..]).unwrap();
    assert_eq!(set.relative_zxid, 20);
    assert_eq!(set.data_watches, ["/app/w"]);
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 21, 0, &()));
    events(&mut s);
    let notification = WatcherEvent {
        event_type: EventType::NodeDataChanged,
        state: KeeperState::SyncConnected,
        path: "/app/w".into(),
    };
    s.handle_bytes(now, &reply(NOTIFICATION_XID, -1, 0, &notification));
    s.handle_bytes(now, &reply(NOTIFICATION_XID, -1, 0, &notification));
    let evs = events(&mut s);
    assert_eq!(evs.len(), 1, "a one-shot watch fires once");
    let Event::Watch { watchers, event } = &evs[0] else {
        panic!("{evs:?}")
    };
    assert_eq!(watchers, &[5]);
    assert_eq!(event.path, "/w");
}

/// A notification of an event type only a client makes (a state change,
/// a watch removed) is a broken server's: the connection is dropped with
/// an error naming the field, rather than the frame ignored.
#[test]
fn a_notification_of_a_client_only_event_type_drops_the_connection() {
    let now = Instant::now();
    for event_type in [
        EventType::None,
        EventType::DataWatchRemoved,
        EventType::ChildWatchRemoved,
        EventType::PersistentWatchRemoved,
    ] {
        let mut s = connected(now);
        let notification = WatcherEvent {
            event_type,
            state: KeeperState::SyncConnected,
            path: "/app/w".into(),
        };
        s.handle_bytes(now, &reply(NOTIFICATION_XID, -1, 0, &notification));
        let Some(Error::Protocol(error)) = s.poll_disconnect() else {
            panic!("{event_type:?}: the connection stays");
        };
        assert_eq!(error.field(), Some("WatcherEvent.event_type"), "{error}");
        assert!(
            matches!(error.reason(), DecodeError::Malformed(_)),
            "{error:?}"
        );
    }
}

#[test]
fn a_notification_in_a_state_other_than_sync_connected_drops_the_connection() {
    let now = Instant::now();
    for state in [
        KeeperState::Disconnected,
        KeeperState::Expired,
        KeeperState::AuthFailed,
        KeeperState::ConnectedReadOnly,
        KeeperState::Closed,
    ] {
        let mut s = connected(now);
        let watch = WatchRequest {
            kind: WatchKind::Data,
            path: "/app/w".into(),
            watcher: 5,
        };
        let request = GetDataRequest {
            path: "/app/w".into(),
            watch: true,
        };
        s.submit(now, OpCode::GetData, &request, 1, Some(watch))
            .unwrap();
        sent(&mut s);
        s.handle_bytes(now, &reply(1, 20, 0, &data_v()));
        assert_eq!(replies(&mut s).len(), 1);
        let notification = WatcherEvent {
            event_type: EventType::NodeDeleted,
            state,
            path: "/app/w".into(),
        };
        s.handle_bytes(now, &reply(NOTIFICATION_XID, -1, 0, &notification));
        let Some(Error::Protocol(error)) = s.poll_disconnect() else {
            panic!("{state:?}: the connection stays");
        };
        assert_eq!(error.field(), Some("WatcherEvent.state"), "{error}");
        s.handle_disconnected(now);
        let got = events(&mut s);
        assert!(
            !got.iter().any(|e| matches!(e, Event::Watch { .. })),
            "{state:?}: delivered as {got:?}"
        );
    }
}

/// A handshake that grants session id 0, which names no session, is a
/// broken server's: believed, the next handshake would ask for a new
/// session, and the client would move to it with no expiry told.
#[test]
fn a_handshake_granting_session_id_zero_drops_the_connection() {
    let now = Instant::now();
    let mut s = Session::new(config(), vec!["127.0.0.1:1".into()], now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0, 3000));
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Protocol(DecodeError::Malformed(
            "handshake: session id 0"
        )))
    );
    assert_eq!(s.state(), State::Disconnected);
    assert_eq!(s.session_id(), 0);
}

#[test]
fn background_deletes_are_retried_after_reconnect_before_other_requests() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    assert_eq!(sent(&mut s).len(), 1);
    s.handle_disconnected(now);
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::Delete.code(), OpCode::GetData.code()]);
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 30, 0, &()));
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    assert!(
        sent(&mut s).is_empty(),
        "a confirmed delete is not sent again"
    );
}

/// The path of a delete request frame.
pub(super) fn deleted_path(frame: &[u8]) -> String {
    let mut r = crate::proto::Reader::new(frame);
    assert_eq!(
        RequestHeader::read(&mut r).unwrap().op,
        OpCode::Delete.code()
    );
    DeleteRequest::read(&mut r).unwrap().path
}

/// Reconnects, resuming the session, and returns what the handshake sends.
pub(super) fn reconnect(s: &mut TestSession, now: Instant) -> Vec<Vec<u8>> {
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    sent(s)
}

#[test]
fn a_deferred_delete_waits_for_its_deadline() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_micros(300);
    s.defer_background_delete(now, Release::plain("/app/lock/n1"), due)
        .unwrap();
    assert!(sent(&mut s).is_empty());
    assert_eq!(s.next_deferred_deadline(), Some(due));
    s.send_due_deletes(due - Duration::from_micros(1));
    assert!(sent(&mut s).is_empty());
    s.send_due_deletes(due);
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    assert_eq!(s.next_deferred_deadline(), None);
    // Confirmed: a reconnect does not send it again.
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 30, 0, &()));
    assert!(reconnect(&mut s, now).is_empty());
}

#[test]
fn a_deferred_delete_needs_a_timer_only_once_no_reply_is_due() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    assert!(!s.deferred_deletes_need_timer(), "nothing deferred");
    for token in 0..2 {
        s.submit(now, OpCode::GetData, &get_data("/app/a"), token, None)
            .unwrap();
    }
    let xids: Vec<i32> = sent(&mut s).iter().map(|f| header(f).xid).collect();
    s.defer_background_delete(now, Release::plain("/app/lock/n1"), due)
        .unwrap();
    let body = data_v();
    // Each reply brings the driver back: it can look after the delete then.
    assert!(!s.deferred_deletes_need_timer(), "two replies due");
    s.handle_bytes(now, &reply(xids[0], 10, 0, &body));
    assert!(!s.deferred_deletes_need_timer(), "one reply due");
    s.handle_bytes(now, &reply(xids[1], 11, 0, &body));
    assert!(s.deferred_deletes_need_timer(), "no reply due");
    // Taken up (or sent): nothing left to time.
    assert!(s.withdraw_deferred_delete("/app/lock").is_some());
    assert!(!s.deferred_deletes_need_timer(), "withdrawn");
}

#[test]
fn any_later_request_carries_the_deferred_deletes_ahead_of_it_in_order() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    for node in ["/app/a/n1", "/app/b/n2"] {
        s.defer_background_delete(now, Release::plain(node), due)
            .unwrap();
    }
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    let delete = OpCode::Delete.code();
    assert_eq!(ops, [delete, delete, OpCode::GetData.code()]);
    assert_eq!(deleted_path(&frames[0]), "/app/a/n1");
    assert_eq!(deleted_path(&frames[1]), "/app/b/n2");
    assert_eq!(s.next_deferred_deadline(), None);
}

#[test]
fn a_withdrawn_delete_is_the_callers_until_settled() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    s.defer_background_delete(now, Release::plain("/app/lock/n1"), due)
        .unwrap();
    assert_eq!(s.withdraw_deferred_delete("/app/other"), None);
    assert_eq!(s.withdraw_deferred_delete("/app"), None);
    assert_eq!(
        s.withdraw_deferred_delete("/app/lock"),
        Some(Release::plain("/app/lock/n1"))
    );
    assert_eq!(s.withdraw_deferred_delete("/app/lock"), None);
    s.send_due_deletes(due);
    assert!(sent(&mut s).is_empty());
    // Unsettled, it is still a background delete: a reconnect sends it.
    let frames = reconnect(&mut s, now);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    // Settled as done (the connection dropped before the reply): never again.
    s.settle_withdrawn_delete(now, "/app/lock/n1", true);
    assert!(reconnect(&mut s, now).is_empty());
}

#[test]
fn a_withdrawn_delete_that_did_not_happen_is_sent_at_once() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    s.defer_background_delete(now, Release::plain("/app/lock/n1"), due)
        .unwrap();
    let release = s.withdraw_deferred_delete("/app/lock").unwrap();
    s.settle_withdrawn_delete(now, &release.path, false);
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
}

#[test]
fn deferred_deletes_cut_off_by_a_disconnect_go_with_the_reconnect() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    s.defer_background_delete(now, Release::plain("/app/lock/n1"), due)
        .unwrap();
    s.handle_disconnected(now);
    assert_eq!(s.next_deferred_deadline(), None);
    // Deferred while disconnected: only the reconnect sends it.
    s.defer_background_delete(now, Release::plain("/app/lock/n2"), due)
        .unwrap();
    assert_eq!(s.next_deferred_deadline(), None);
    let frames = reconnect(&mut s, now);
    let paths: Vec<String> = frames.iter().map(|f| deleted_path(f)).collect();
    assert_eq!(paths, ["/app/lock/n1", "/app/lock/n2"]);
}

pub(super) fn noted(path: &str) -> Release {
    Release {
        path: path.into(),
        note: Some(format!("{path}.released")),
        successor: None,
    }
}

/// The ops of a multi request frame.
pub(super) fn multi_ops(frame: &[u8]) -> Vec<MultiOp> {
    let mut r = crate::proto::Reader::new(frame);
    assert_eq!(
        RequestHeader::read(&mut r).unwrap().op,
        OpCode::Multi.code()
    );
    MultiRequest::read(&mut r).unwrap().ops
}

fn failed_at(index: usize, err: i32, len: usize) -> MultiResponse {
    let code = |i: usize| match i.cmp(&index) {
        std::cmp::Ordering::Less => 0,
        std::cmp::Ordering::Equal => err,
        std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency.code(),
    };
    MultiResponse {
        results: (0..len)
            .map(|i| OpResult::Error(ErrorResponse { err: code(i) }))
            .collect(),
    }
}

#[test]
fn a_transaction_reply_with_more_results_than_ops_is_refused_before_they_are_decoded() {
    let now = Instant::now();
    let deletes = MultiRequest {
        ops: ["/app/a", "/app/b"]
            .map(|path| {
                MultiOp::Delete(DeleteRequest {
                    path: path.into(),
                    version: -1,
                })
            })
            .into(),
    };
    let one_too_many = |frame: &[u8], ops: usize| {
        let results = vec![OpResult::Delete; ops + 1];
        reply(header(frame).xid, 30, 0, &MultiResponse { results })
    };
    let refused = Some(Error::Protocol(DecodeError::Malformed(
        "multi reply with more results than ops",
    )));

    // A call sent at once.
    let mut s = connected(now);
    s.submit(now, OpCode::Multi, &deletes, 1, None).unwrap();
    let frames = sent(&mut s);
    s.handle_bytes(now, &one_too_many(&frames[0], 2));
    assert_eq!(s.poll_disconnect(), refused);
    assert!(matches!(
        replies(&mut s)[..],
        [(1, Err(Error::Protocol(_)))]
    ));

    // A call made while disconnected, sent after the handshake.
    s.handle_disconnected(now);
    s.submit(now, OpCode::Multi, &deletes, 2, None).unwrap();
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    let frames = sent(&mut s);
    assert_eq!(multi_ops(&frames[0]).len(), 2);
    s.handle_bytes(now, &one_too_many(&frames[0], 2));
    assert_eq!(s.poll_disconnect(), refused);
    assert!(matches!(
        replies(&mut s)[..],
        [(2, Err(Error::Protocol(_)))]
    ));

    // A noted release, sent by the session itself.
    let mut s = connected(now);
    s.defer_background_delete(now, noted("/app/lock/n1"), now)
        .unwrap();
    let frames = sent(&mut s);
    s.handle_bytes(now, &one_too_many(&frames[0], 3));
    assert_eq!(s.poll_disconnect(), refused);
}

#[test]
fn a_noted_release_is_one_transaction_that_creates_and_deletes_its_note_then_the_node() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    s.defer_background_delete(now, noted("/app/lock/n1"), due)
        .unwrap();
    assert!(sent(&mut s).is_empty());
    s.send_due_deletes(due);
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    let ops = multi_ops(&frames[0]);
    assert_eq!(ops, noted("/app/lock/n1").ops());
    let paths: Vec<(i32, &str)> = ops
        .iter()
        .map(|op| match op {
            MultiOp::Create(c) => (1, c.path.as_str()),
            MultiOp::Delete(d) => (2, d.path.as_str()),
            other => panic!("unexpected op {other:?}"),
        })
        .collect();
    assert_eq!(
        paths,
        [
            (1, "/app/lock/n1.released"),
            (2, "/app/lock/n1.released"),
            (2, "/app/lock/n1")
        ]
    );
    assert!(
        matches!(&ops[0], MultiOp::Create(c) if c.mode == CreateMode::Ephemeral),
        "a note never outlives its session"
    );
    let applied = MultiResponse {
        results: vec![
            OpResult::Create(CreateResponse {
                path: "/app/lock/n1.released".into(),
            }),
            OpResult::Delete,
            OpResult::Delete,
        ],
    };
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 30, 0, &applied));
    assert!(sent(&mut s).is_empty());
    assert!(reconnect(&mut s, now).is_empty(), "done: never sent again");
}

#[test]
fn a_noted_release_whose_note_is_refused_is_deleted_plainly() {
    let now = Instant::now();
    let mut s = connected(now);
    s.defer_background_delete(now, noted("/app/lock/n1"), now)
        .unwrap();
    let frames = sent(&mut s);
    assert_eq!(multi_ops(&frames[0]).len(), 3);
    // Someone made a node of the note's name: nothing was applied.
    let node_exists = ErrorCode::NodeExists.code();
    s.handle_bytes(
        now,
        &reply(header(&frames[0]).xid, 30, 0, &failed_at(0, node_exists, 3)),
    );
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    // Still a background delete until answered.
    let frames = reconnect(&mut s, now);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 31, 0, &()));
    assert!(reconnect(&mut s, now).is_empty());
}

#[test]
fn a_noted_release_of_a_node_already_gone_is_done() {
    let now = Instant::now();
    let mut s = connected(now);
    s.defer_background_delete(now, noted("/app/lock/n1"), now)
        .unwrap();
    let frames = sent(&mut s);
    let no_node = ErrorCode::NoNode.code();
    s.handle_bytes(
        now,
        &reply(header(&frames[0]).xid, 30, 0, &failed_at(2, no_node, 3)),
    );
    assert!(sent(&mut s).is_empty());
    assert!(reconnect(&mut s, now).is_empty());
}

#[test]
fn a_noted_release_answered_unlike_its_ops_drops_the_connection_and_is_sent_again() {
    let now = Instant::now();
    let created = || {
        OpResult::Create(CreateResponse {
            path: "/app/lock/n1.released".into(),
        })
    };
    let unlike = [
        vec![],
        vec![created(), OpResult::Delete],
        vec![OpResult::Delete, OpResult::Delete, OpResult::Delete],
        vec![
            created(),
            OpResult::Delete,
            OpResult::Delete,
            OpResult::Delete,
        ],
        // Failed, yet with a result of an applied op.
        vec![
            created(),
            OpResult::Error(ErrorResponse {
                err: ErrorCode::NoNode.code(),
            }),
            OpResult::Delete,
        ],
    ];
    for results in unlike {
        let mut s = connected(now);
        s.defer_background_delete(now, noted("/app/lock/n1"), now)
            .unwrap();
        let frames = sent(&mut s);
        let answer = MultiResponse { results };
        s.handle_bytes(now, &reply(header(&frames[0]).xid, 30, 0, &answer));
        assert!(sent(&mut s).is_empty(), "{answer:?}");
        assert!(
            matches!(s.poll_disconnect(), Some(Error::Protocol(_))),
            "{answer:?}"
        );
        // The node may still be there: the next connection deletes it.
        s.handle_disconnected(now);
        let frames = reconnect(&mut s, now);
        let paths: Vec<String> = frames.iter().map(|f| deleted_path(f)).collect();
        assert_eq!(paths, ["/app/lock/n1"], "{answer:?}");
    }
}

#[test]
fn a_release_found_undone_after_closesession_was_sent_is_left_to_the_close() {
    let now = Instant::now();
    let mut s = connected(now);
    s.defer_background_delete(now, noted("/app/lock/n1"), now)
        .unwrap();
    let later = now + Duration::from_secs(1);
    s.defer_background_delete(now, Release::plain("/app/other/n2"), later)
        .unwrap();
    let withdrawn = s.withdraw_deferred_delete("/app/other").unwrap();
    let frames = sent(&mut s);
    s.close(now);
    let close = sent(&mut s);
    assert_eq!(header(&close[0]).op, OpCode::CloseSession.code());
    // The note met a node of its name, and the withdrawn delete's
    // transaction failed: both nodes are still there, but nothing may
    // follow closeSession, which takes them with the session.
    let node_exists = ErrorCode::NodeExists.code();
    s.handle_bytes(
        now,
        &reply(header(&frames[0]).xid, 30, 0, &failed_at(0, node_exists, 3)),
    );
    s.settle_withdrawn_delete(now, &withdrawn.path, false);
    assert!(sent(&mut s).is_empty());
    // Unconfirmed there, the close goes on with the next connection, which
    // sends the deletes first.
    let ops: Vec<i32> = reconnect(&mut s, now)
        .iter()
        .map(|f| header(f).op)
        .collect();
    let delete = OpCode::Delete.code();
    assert_eq!(ops, [delete, delete, OpCode::CloseSession.code()]);
}

#[test]
fn a_reconnect_sends_a_noted_release_as_a_plain_delete() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    s.defer_background_delete(now, noted("/app/lock/n1"), due)
        .unwrap();
    s.handle_disconnected(now);
    let frames = reconnect(&mut s, now);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
}

#[test]
fn auth_failure_is_terminal() {
    let now = Instant::now();
    let mut s = connected(now);
    let auth = digest_auth();
    s.add_auth(now, auth, 4).unwrap();
    let frames = sent(&mut s);
    assert_eq!(header(&frames[0]).xid, AUTH_XID);
    s.handle_bytes(now, &reply(AUTH_XID, 0, -115, &()));
    let evs = events(&mut s);
    assert!(matches!(
        evs[0],
        Event::Reply {
            token: 4,
            result: Err(Error::AuthFailed)
        }
    ));
    assert!(matches!(evs[1], Event::State(State::AuthFailed)));
    assert_eq!(
        s.submit(now, OpCode::GetData, &get_data("/a"), 1, None),
        Err(Error::AuthFailed)
    );
}

#[test]
fn oversized_and_malformed_frames_drop_the_connection() {
    let now = Instant::now();
    let mut s = connected(now);
    s.handle_bytes(now, &[0x7f, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    assert!(matches!(
        s.poll_disconnect(),
        Some(Error::Protocol(
            crate::proto::DecodeError::FrameTooLarge { .. }
        ))
    ));
    let mut s = connected(now);
    s.submit(now, OpCode::GetData, &get_data("/app/a"), 1, None)
        .unwrap();
    sent(&mut s);
    s.handle_bytes(now, &reply(1, 1, 0, &()));
    assert!(matches!(s.poll_disconnect(), Some(Error::Protocol(_))));
    assert!(matches!(
        replies(&mut s)[..],
        [(1, Err(Error::Protocol(_)))]
    ));
}

/// A refused request leaves the send buffer no larger than a request the
/// server takes would: the buffer lives as long as the client.
#[test]
fn a_refused_request_leaves_no_room_taken_behind() {
    let now = Instant::now();
    let mut s = connected(now);
    let huge = 8 * crate::proto::JUTE_MAX_BUFFER;
    let request = crate::proto::SetDataRequest {
        path: "/app/big".into(),
        data: Some(vec![0; huge]),
        version: -1,
    };
    assert!(matches!(
        s.submit(now, OpCode::SetData, &request, 1, None),
        Err(Error::InvalidArgument(_))
    ));
    let room = s.outbox.capacity();
    assert!(
        room <= 2 * crate::proto::JUTE_MAX_BUFFER,
        "{room} bytes kept"
    );
    assert!(sent(&mut s).is_empty());
}

#[test]
fn oversized_requests_are_refused_before_sending() {
    let now = Instant::now();
    let mut s = connected(now);
    let request = crate::proto::SetDataRequest {
        path: "/app/big".into(),
        data: Some(vec![0; crate::proto::DEFAULT_MAX_FRAME]),
        version: -1,
    };
    assert!(matches!(
        s.submit(now, OpCode::SetData, &request, 1, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(sent(&mut s).is_empty());
    // Credentials too: they would be re-sent, and refused, on every reconnect.
    let auth = AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: vec![b'a'; crate::proto::JUTE_MAX_BUFFER],
    };
    assert!(matches!(
        s.add_auth(now, auth, 2),
        Err(Error::InvalidArgument(_))
    ));
    assert!(sent(&mut s).is_empty());
    s.handle_disconnected(now);
    s.handle_connected(now);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1, "only the handshake, no auth packet");
}

#[test]
fn with_no_server_heard_from_for_four_thirds_of_the_timeout_the_session_expires_locally() {
    let start = Instant::now();
    let mut s = connected(start);
    let watch = WatchRequest {
        kind: WatchKind::Data,
        path: "/app/w".into(),
        watcher: 8,
    };
    s.submit(start, OpCode::GetData, &get_data("/app/w"), 1, Some(watch))
        .unwrap();
    sent(&mut s);
    s.handle_bytes(
        start,
        &reply(
            1,
            5,
            0,
            &GetDataResponse {
                data: None,
                stat: Stat::default(),
            },
        ),
    );
    events(&mut s);
    // Cut off: the connection drops and every reconnect attempt fails.
    let cut = start + Duration::from_millis(500);
    s.handle_disconnected(cut);
    events(&mut s);
    // Waiting for a connection until start + 4500 ms: the expiry comes first.
    let later = start + Duration::from_millis(1500);
    s.submit(later, OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    for attempt in 1..=3u32 {
        let t = cut + Duration::from_millis(300) * attempt;
        s.handle_connected(t);
        s.handle_disconnected(t);
        s.handle_timeout(t);
    }
    assert_eq!(s.state(), State::Disconnected);
    // Heard last at `start`: expired at start + 4/3 * 3000 ms, not before.
    let expiry = start + Duration::from_millis(4000);
    assert_eq!(s.poll_timeout(), Some(expiry));
    s.handle_timeout(expiry - Duration::from_millis(1));
    assert!(replies(&mut s).is_empty());
    assert_eq!(s.state(), State::Disconnected);
    s.handle_timeout(expiry);
    let evs = events(&mut s);
    let states = states_of(&evs);
    assert_eq!(states, [State::Expired]);
    assert!(evs.iter().any(|e| matches!(
        e,
        Event::Reply {
            token: 2,
            result: Err(Error::SessionExpired)
        }
    )));
    assert!(evs.iter().any(|e| matches!(e, Event::Watch { watchers, event } if *watchers == [8] && event.state == KeeperState::Expired)));
    assert_eq!(s.next_host(expiry), None);
    s.handle_timeout(expiry + TIMEOUT);
    assert!(events(&mut s).is_empty(), "reported once");
}

#[test]
fn a_connected_session_never_expires_locally() {
    let start = Instant::now();
    let mut s = connected(start);
    let mut now = start;
    for _ in 0..10 {
        now += Duration::from_millis(900);
        s.handle_timeout(now);
        sent(&mut s);
        s.handle_bytes(now, &reply(PING_XID, 1, 0, &()));
    }
    assert_eq!(s.state(), State::Connected);
    assert!(events(&mut s).is_empty());
}

#[test]
fn a_background_delete_a_read_only_server_refused_is_sent_again_on_the_next_connection() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    let frames = sent(&mut s);
    // A read-only server refuses every write.
    let not_read_only = ErrorCode::NotReadOnly.code();
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 0, not_read_only, &()));
    assert!(sent(&mut s).is_empty(), "not again on this connection");
    let frames = reconnect(&mut s, now);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 31, 0, &()));
    assert!(reconnect(&mut s, now).is_empty());
}

#[test]
fn a_background_delete_answered_for_good_is_not_sent_again() {
    let now = Instant::now();
    for err in [
        0,
        ErrorCode::NoNode.code(),
        ErrorCode::NotEmpty.code(),
        ErrorCode::NoAuth.code(),
    ] {
        let mut s = connected(now);
        s.submit_background_delete(now, "/app/lock/n1".into(), -1)
            .unwrap();
        let frames = sent(&mut s);
        s.handle_bytes(now, &reply(header(&frames[0]).xid, 30, err, &()));
        assert!(sent(&mut s).is_empty());
        assert!(reconnect(&mut s, now).is_empty(), "error code {err}");
    }
}

#[test]
fn connections_lost_right_after_their_handshake_back_off_growing() {
    let start = Instant::now();
    let mut s = connected(start);
    // An ordinary cut of a long-lived connection: reconnect at once.
    let mut t = start + Duration::from_secs(60);
    s.handle_disconnected(t);
    assert_eq!(s.next_host(t).map(|(_, at)| at), Some(t));
    // A server that takes the handshake and closes at once, again and again.
    let mut delays = Vec::new();
    for _ in 0..7 {
        s.handle_connected(t);
        sent(&mut s);
        s.handle_bytes(t, &accepted(0x1234, 3000));
        t += Duration::from_millis(5);
        s.handle_disconnected(t);
        let (_, at) = s.next_host(t).unwrap();
        delays.push((at - t).as_millis());
        t = at;
    }
    assert_eq!(delays, [0, 250, 500, 1000, 2000, 2000, 2000]);
    // A connection that lives normally resets it, and so does its cut.
    s.handle_connected(t);
    sent(&mut s);
    s.handle_bytes(t, &accepted(0x1234, 3000));
    t += Duration::from_secs(60);
    s.handle_disconnected(t);
    assert_eq!(s.next_host(t).map(|(_, at)| at), Some(t));
    s.handle_connected(t);
    sent(&mut s);
    s.handle_bytes(t, &accepted(0x1234, 3000));
    t += Duration::from_millis(5);
    s.handle_disconnected(t);
    assert_eq!(
        s.next_host(t).map(|(_, at)| at),
        Some(t),
        "a first quick loss after a normal life"
    );
}

#[test]
fn a_handshake_refused_with_an_error_header_moves_on_with_that_error() {
    // A read-only member without local sessions answers a new session's
    // ConnectRequest with a bare reply header: NOTREADONLY.
    let now = Instant::now();
    let config = SessionConfig {
        can_be_read_only: true,
        ..config()
    };
    let hosts = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()];
    let mut s = Session::<u32, u32>::new(config, hosts, now);
    let (first, _) = s.next_host(now).unwrap();
    s.handle_connected(now);
    sent(&mut s);
    let refusal = ReplyHeader {
        xid: 0,
        zxid: 0x1_0000_0005,
        err: ErrorCode::NotReadOnly.code(),
    };
    s.handle_bytes(now, &frame(&refusal));
    assert_eq!(s.poll_disconnect(), Some(Error::NotReadOnly));
    s.handle_disconnected(now);
    assert_eq!(s.fatal_error(), None);
    assert!(events(&mut s).is_empty());
    let (second, _) = s.next_host(now).unwrap();
    assert_ne!(second, first);
}

/// `payload` behind its length.
fn raw_frame(payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    [&len.to_be_bytes()[..], payload].concat()
}

#[test]
fn a_refusal_header_with_bytes_after_it_is_no_refusal() {
    let now = Instant::now();
    let mut s = Session::<u32, u32>::new(config(), vec!["127.0.0.1:1".into()], now);
    s.handle_connected(now);
    sent(&mut s);
    let mut refusal = ReplyHeader {
        xid: 0,
        zxid: 0,
        err: ErrorCode::NotReadOnly.code(),
    }
    .to_bytes();
    refusal.push(0);
    s.handle_bytes(now, &raw_frame(&refusal));
    let Some(Error::Protocol(error)) = s.poll_disconnect() else {
        panic!("taken as a refusal");
    };
    assert_eq!(error.field(), Some("ConnectResponse.passwd"), "{error}");
}

#[test]
fn a_ping_or_auth_reply_with_a_body_drops_the_connection() {
    let now = Instant::now();
    let with_body = |xid| {
        let mut payload = ReplyHeader {
            xid,
            zxid: 5,
            err: 0,
        }
        .to_bytes();
        payload.extend([0xde, 0xad]);
        raw_frame(&payload)
    };
    let mut s = connected(now);
    s.handle_bytes(now, &with_body(PING_XID));
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Protocol(
            DecodeError::TrailingBytes(2).in_field("ping reply")
        ))
    );
    let mut s = connected(now);
    s.add_auth(now, digest_auth(), 1).unwrap();
    sent(&mut s);
    s.handle_bytes(now, &with_body(AUTH_XID));
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Protocol(
            DecodeError::TrailingBytes(2).in_field("auth reply")
        ))
    );
    // Its caller is answered as any whose auth was in flight on a lost
    // connection.
    s.handle_disconnected(now);
    assert_eq!(replies(&mut s), [(1, Err(Error::ConnectionLoss))]);
}

#[test]
fn watches_are_reregistered_in_records_that_fit_max_request() {
    // A client whose servers take requests of 4 KiB at most (jute.maxbuffer
    // lowered, max_request set to match) watches 12 paths of 1 KB each: a
    // getData with a watch fits, and so must their re-registration.
    let now = Instant::now();
    let max_request = 4096;
    let mut s = connected_with(
        SessionConfig {
            max_request,
            ..config()
        },
        now,
    );
    let long = "x".repeat(1000);
    let paths: Vec<String> = (0..12).map(|i| format!("/app/{long}/{i:02}")).collect();
    for (token, path) in (0..).zip(&paths) {
        let watch = WatchRequest {
            kind: WatchKind::Data,
            path: path.clone(),
            watcher: token,
        };
        let request = GetDataRequest {
            path: path.clone(),
            watch: true,
        };
        s.submit(now, OpCode::GetData, &request, token, Some(watch))
            .unwrap();
    }
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 12);
    for f in &frames {
        s.handle_bytes(now, &reply(header(f).xid, 20, 0, &data_v()));
    }
    assert_eq!(replies(&mut s).len(), 12);
    assert_eq!(s.watcher_count(), 12);

    let frames = reconnect(&mut s, now);
    let mut reregistered = Vec::new();
    for f in &frames {
        assert_eq!(header(f).op, OpCode::SetWatches.code());
        assert!(
            f.len() <= max_request,
            "a setWatches of {} bytes, over max_request",
            f.len()
        );
        let set = SetWatches::from_bytes(&f[8..]).unwrap();
        assert_eq!(set.relative_zxid, 20);
        reregistered.extend(set.data_watches);
    }
    reregistered.sort();
    assert_eq!(
        reregistered.len(),
        paths.len(),
        "every watch is re-registered"
    );
    assert_eq!(reregistered, paths);
}

/// A watch on a path too long for any re-registration record is refused
/// when asked for, with nothing sent: set, it would have been lost, its
/// watcher never told, at the first reconnect. The longest path that fits
/// is taken, and its watch goes again after a reconnect.
#[test]
fn a_watch_that_could_not_be_set_again_after_a_reconnect_is_refused() {
    let now = Instant::now();
    let mut s = connected_with(
        SessionConfig {
            max_request: 1024,
            ..config()
        },
        now,
    );
    let watch_on = |path: &str| {
        let path = path.to_owned();
        let request = get_data(&path);
        let watch = WatchRequest {
            kind: WatchKind::Data,
            path,
            watcher: 5,
        };
        (request, watch)
    };
    // The record: header 8, zxid 8, five vector lengths 20, the path's 4.
    let longest = format!("/{}", "x".repeat(1024 - 40 - 1));
    let too_long = format!("{longest}y");
    let (request, watch) = watch_on(&too_long);
    let refused = s.submit(now, OpCode::GetData, &request, 1, Some(watch));
    let Err(Error::InvalidArgument(why)) = refused else {
        panic!("not refused: {refused:?}");
    };
    assert!(
        why.contains("1025 bytes") && why.contains("after a reconnect"),
        "{why}"
    );
    assert!(sent(&mut s).is_empty());

    let (request, watch) = watch_on(&longest);
    s.submit(now, OpCode::GetData, &request, 2, Some(watch))
        .unwrap();
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    let body = GetDataResponse {
        data: None,
        stat: Stat::default(),
    };
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 1, 0, &body));
    assert_eq!(replies(&mut s).len(), 1);
    s.handle_disconnected(now);
    let frames = reconnect(&mut s, now);
    assert_eq!(frames.len(), 1);
    assert_eq!(header(&frames[0]).op, OpCode::SetWatches.code());
    // A setWatches (three lists) is 8 bytes shorter than the setWatches2
    // (five) the check allows for.
    assert_eq!(frames[0].len(), 1024 - 8);
}

/// Requests waiting for a connection are taken back by token, in order,
/// only if the first one asked for is still waiting: never sent, they are
/// never sent after the reconnect either, nor failed at the session
/// timeout. Once sent, nothing is taken back.
#[test]
fn queued_requests_are_withdrawn_only_while_unsent() {
    let now = Instant::now();
    let mut s = connected(now);
    s.handle_disconnected(now);
    for token in [1, 2, 3, 4] {
        s.submit(now, OpCode::GetData, &get_data("/app/q"), token, None)
            .unwrap();
    }
    // Not taken: the first one asked for is not waiting.
    assert!(s.withdraw_queued(|t| *t == 9, |t| *t == 3).is_empty());
    assert_eq!(s.withdraw_queued(|t| *t == 2, |t| *t == 4), [2, 4]);
    let frames = reconnect(&mut s, now);
    assert_eq!(frames.len(), 2);
    for (frame, token) in frames.iter().zip([1, 3]) {
        let body = GetDataResponse {
            data: None,
            stat: Stat::default(),
        };
        s.handle_bytes(now, &reply(header(frame).xid, 1, 0, &body));
        let got: Vec<_> = replies(&mut s).into_iter().map(|(t, _)| t).collect();
        assert_eq!(got, [token]);
    }
    // Sent: nothing left to take back.
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 5, None)
        .unwrap();
    assert!(s.withdraw_queued(|t| *t == 5, |_| true).is_empty());
    assert_eq!(sent(&mut s).len(), 1);
    s.handle_timeout(now + TIMEOUT * 2);
    assert!(replies(&mut s).iter().all(|(t, _)| *t == 5));
}

/// Only what says the session lives counts as hearing from a server: a
/// frame on an established connection, or a handshake that resumes it;
/// not a refusal, nor a "session expired".
#[test]
fn last_heard_moves_only_for_answers_that_say_the_session_lives() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    assert_eq!(s.last_heard(), start);
    s.handle_bytes(at(100), &reply(PING_XID, 3, 0, &()));
    assert_eq!(s.last_heard(), at(100), "a ping's answer");
    // Resumed elsewhere: the handshake counts.
    s.handle_disconnected(at(200));
    s.next_host(at(200)).unwrap();
    s.handle_connected(at(300));
    sent(&mut s);
    s.handle_bytes(at(400), &accepted(0x1234, 3000));
    assert_eq!(s.last_heard(), at(400), "a resume");
    // A refusal, then a "session expired": neither counts.
    s.handle_disconnected(at(500));
    s.next_host(at(500)).unwrap();
    s.handle_connected(at(600));
    sent(&mut s);
    let refusal = ReplyHeader {
        xid: 0,
        zxid: 0,
        err: ErrorCode::NotReadOnly.code(),
    };
    s.handle_bytes(at(700), &frame(&refusal));
    assert_eq!(s.poll_disconnect(), Some(Error::NotReadOnly));
    s.handle_disconnected(at(700));
    s.next_host(at(800)).unwrap();
    s.handle_connected(at(900));
    sent(&mut s);
    s.handle_bytes(at(1000), &expired());
    assert_eq!(s.state(), State::Expired);
    assert_eq!(s.last_heard(), at(400));
}

/// Durations over the protocol's `i32::MAX` ms, which the public
/// `SessionConfig` allows, are taken as that: no deadline counted from an
/// `Instant` overflows it (`Duration::MAX` used to panic at the first
/// read timeout or request deadline).
#[test]
fn durations_over_the_protocols_longest_are_taken_as_it() {
    let now = Instant::now();
    let longest = Duration::from_millis(i32::MAX as u64);
    let config = SessionConfig {
        session_timeout: Duration::MAX,
        connect_timeout: Duration::MAX,
        request_timeout: Some(Duration::MAX),
        ..config()
    };
    let mut s: TestSession = Session::new(config, vec!["127.0.0.1:1".into()], now);
    assert_eq!(s.config().session_timeout, longest);
    assert_eq!(s.config().connect_timeout, longest);
    assert_eq!(s.config().request_timeout, Some(longest));
    assert_eq!(s.read_timeout(), longest * 2 / 3);
    s.handle_connected(now);
    let request = ConnectRequest::from_bytes(&sent(&mut s)[0]).unwrap();
    assert_eq!(request.timeout_ms, i32::MAX);
    s.submit(now, OpCode::GetData, &get_data("/app/x"), 1, None)
        .unwrap();
    assert!(s.poll_timeout().is_some_and(|at| at > now));
    s.handle_timeout(now + Duration::from_secs(1));
}

/// A refusal of an operation the server does not know (whoAmI before 3.7)
/// overtakes the reply of a request still in its pipeline: the refused
/// call is told `Unimplemented`, which no caller asks again, and only the
/// call it overtook fails with `ConnectionLoss`. (Before, both did.)
#[test]
fn an_overtaking_refusal_goes_to_the_refused_call() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit(now, OpCode::Exists, &get_data("/app/e"), 1, None)
        .unwrap();
    s.submit(now, OpCode::WhoAmI, &(), 2, None).unwrap();
    let frames = sent(&mut s);
    assert_eq!(header(&frames[1]).op, OpCode::WhoAmI.code());
    let who_am_i = header(&frames[1]).xid;
    s.handle_bytes(
        now,
        &reply(who_am_i, 0, ErrorCode::Unimplemented.code(), &()),
    );
    assert!(matches!(
        s.poll_disconnect(),
        Some(Error::UnexpectedReply { .. })
    ));
    s.handle_disconnected(now);
    assert_eq!(
        replies(&mut s),
        [
            (2, Err(Error::Unimplemented)),
            (1, Err(Error::ConnectionLoss))
        ]
    );
}

/// A reply over the frame limit fails its call with the limit, from the
/// length prefix and xid alone, and drops the connection; the other call
/// in flight fails with `ConnectionLoss`. The length alone does not say
/// whose frame it is: the xid is waited for.
#[test]
fn a_reply_over_the_frame_limit_fails_its_call_with_the_limit() {
    let now = Instant::now();
    let config = SessionConfig {
        max_frame: 1024,
        ..config()
    };
    let mut s = connected_with(config, now);
    s.submit(now, OpCode::GetChildren, &get_data("/app/big"), 1, None)
        .unwrap();
    s.submit(now, OpCode::Exists, &get_data("/app/e"), 2, None)
        .unwrap();
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 2);
    s.handle_bytes(now, &2000i32.to_be_bytes());
    assert_eq!(
        s.poll_disconnect(),
        None,
        "whose frame it is is not known yet"
    );
    s.handle_bytes(now, &header(&frames[0]).xid.to_be_bytes());
    let too_large = DecodeError::FrameTooLarge {
        len: 2000,
        max: 1024,
    };
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Protocol(too_large.clone()))
    );
    s.handle_disconnected(now);
    assert_eq!(
        replies(&mut s),
        [
            (1, Err(Error::Protocol(too_large))),
            (2, Err(Error::ConnectionLoss))
        ]
    );
}

/// A frame over the limit is not blamed on a request it cannot be the
/// reply of: a batch of reads (any of them may be the large one, the
/// others small), a release, or a call whose xid the frame does not carry
/// (a notification for a long path, over a lowered limit, its xid read
/// with its length or after it). Those go on as after any lost connection:
/// the reads fail with `ConnectionLoss`, to be asked again, and the
/// release goes out on the next connection.
#[test]
fn a_frame_over_the_limit_blames_only_the_users_call_whose_reply_it_is() {
    let now = Instant::now();
    let config = SessionConfig {
        max_frame: 1024,
        ..config()
    };
    let too_large = |len, max| Error::Protocol(DecodeError::FrameTooLarge { len, max });
    // Two reads batched: the batch may be 2 × max_frame and three multi
    // headers of 9 bytes (2075); this is over.
    let mut s = connected_with(config.clone(), now);
    s.submit_read(now, BatchRead::Data(get_data("/app/a")), 1)
        .unwrap();
    s.submit_read(now, BatchRead::Data(get_data("/app/b")), 2)
        .unwrap();
    let frames = sent(&mut s);
    assert_eq!(header(&frames[0]).op, OpCode::MultiRead.code());
    s.handle_bytes(now, &3000i32.to_be_bytes());
    s.handle_bytes(now, &header(&frames[0]).xid.to_be_bytes());
    assert_eq!(s.poll_disconnect(), Some(too_large(3000, 2075)));
    s.handle_disconnected(now);
    assert_eq!(
        replies(&mut s),
        [
            (1, Err(Error::ConnectionLoss)),
            (2, Err(Error::ConnectionLoss))
        ]
    );
    // A release: kept for the next connection.
    let mut s = connected_with(config.clone(), now);
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    let frames = sent(&mut s);
    s.handle_bytes(now, &2000i32.to_be_bytes());
    s.handle_bytes(now, &header(&frames[0]).xid.to_be_bytes());
    assert_eq!(s.poll_disconnect(), Some(too_large(2000, 1024)));
    s.handle_disconnected(now);
    let frames = reconnect(&mut s, now);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    // A frame whose xid is a notification's, ahead of a user's call, its
    // xid in the same read as its length or in the next (before, that one
    // was blamed on the call).
    for split in [false, true] {
        let mut s = connected_with(config.clone(), now);
        s.submit(now, OpCode::Exists, &get_data("/app/e"), 3, None)
            .unwrap();
        sent(&mut s);
        let mut notification = 2000i32.to_be_bytes().to_vec();
        notification.extend_from_slice(&(-1i32).to_be_bytes());
        let (length, xid) = notification.split_at(if split { 4 } else { 8 });
        s.handle_bytes(now, length);
        s.handle_bytes(now, xid);
        assert_eq!(s.poll_disconnect(), Some(too_large(2000, 1024)));
        s.handle_disconnected(now);
        assert_eq!(replies(&mut s), [(3, Err(Error::ConnectionLoss))]);
    }
}

/// Sends an addWatch of a persistent watch on `path` (`token`, told to
/// `watcher`), and returns its xid.
pub(super) fn add_persistent_watch(
    s: &mut TestSession,
    now: Instant,
    path: &str,
    token: u32,
    watcher: u32,
) -> i32 {
    let request = crate::proto::AddWatchRequest {
        path: path.into(),
        mode: crate::proto::AddWatchMode::Persistent,
    };
    let watch = WatchRequest {
        kind: WatchKind::Persistent,
        path: path.into(),
        watcher,
    };
    s.submit(now, OpCode::AddWatch, &request, token, Some(watch))
        .unwrap();
    header(&sent(s)[0]).xid
}

/// An addWatch reply whose body carries an error (a server sends 0 there,
/// and a failure in the header) fails the call, and its watcher is not
/// registered: before, the watcher was kept, set again on every reconnect,
/// while the caller was told the call had failed.
#[test]
fn an_add_watch_refused_in_its_reply_body_registers_no_watcher() {
    let now = Instant::now();
    let mut s = connected(now);
    let xid = add_persistent_watch(&mut s, now, "/app/w", 1, 7);
    let refused = ErrorResponse {
        err: ErrorCode::NoAuth.code(),
    };
    s.handle_bytes(now, &reply(xid, 5, 0, &refused));
    assert_eq!(replies(&mut s), [(1, Err(Error::NoAuth))]);
    assert_eq!(s.watcher_count(), 0);
    assert_eq!(s.poll_disconnect(), None);
}
