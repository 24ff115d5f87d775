//! Closing a session, driven by bytes and a hand-advanced clock.

use std::time::{Duration, Instant};

use super::tests::{
    accepted, config, connected, digest_auth, events, get_data, header, replies, reply, sent,
    states_of, TestSession,
};
use super::*;
use crate::proto::ErrorCode;

#[test]
fn closing_sends_the_deferred_deletes_first_and_refuses_new_ones() {
    let now = Instant::now();
    let mut s = connected(now);
    let due = now + Duration::from_millis(5);
    s.defer_background_delete(now, Release::plain("/app/lock/n1"), due)
        .unwrap();
    s.close(now);
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::Delete.code(), OpCode::CloseSession.code()]);
    assert_eq!(
        s.defer_background_delete(now, Release::plain("/app/lock/n2"), due),
        Err(Error::Closed)
    );
    assert_eq!(s.next_deferred_deadline(), None);
}

#[test]
fn close_sends_close_session_and_ends_on_its_reply() {
    let now = Instant::now();
    let mut s = connected(now);
    s.close(now);
    let frames = sent(&mut s);
    assert_eq!(header(&frames[0]).op, OpCode::CloseSession.code());
    assert_eq!(
        s.submit(now, OpCode::GetData, &get_data("/a"), 1, None),
        Err(Error::Closed)
    );
    assert_eq!(s.close_outcome(), None, "not over before the reply");
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 9, 0, &()));
    assert!(matches!(events(&mut s)[..], [Event::State(State::Closed)]));
    assert_eq!(s.poll_disconnect(), Some(Error::Closed));
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

#[test]
fn close_while_disconnected_reconnects_to_send_close_session() {
    let now = Instant::now();
    let mut s = connected(now);
    s.handle_disconnected(now);
    assert!(matches!(
        events(&mut s)[..],
        [Event::State(State::Disconnected)]
    ));
    s.close(now);
    // The servers still hold the session: not over yet.
    assert!(events(&mut s).is_empty());
    assert_eq!(s.fatal_error(), None);
    assert!(s.next_host(now).is_some());
    assert_eq!(
        s.submit(now, OpCode::GetData, &get_data("/a"), 1, None),
        Err(Error::Closed)
    );
    s.handle_connected(now);
    let frames = sent(&mut s);
    assert_eq!(
        ConnectRequest::from_bytes(&frames[0]).unwrap().session_id,
        0x1234
    );
    resume_and_close(&mut s, now);
    assert!(matches!(
        events(&mut s)[..],
        [Event::State(State::Connected), Event::State(State::Closed)]
    ));
    assert_eq!(s.close_outcome(), Some(Ok(())));

    // With no connection in time, it ends after connect_timeout.
    let mut s = connected(now);
    s.handle_disconnected(now);
    s.close(now);
    let deadline = now + config().connect_timeout;
    assert_eq!(s.poll_timeout(), Some(deadline));
    s.handle_connect_failed(now);
    s.handle_timeout(deadline - Duration::from_millis(1));
    assert_eq!(s.fatal_error(), None);
    s.handle_timeout(deadline);
    assert!(matches!(
        events(&mut s)[..],
        [
            Event::State(State::Disconnected),
            Event::State(State::Closed)
        ]
    ));
    assert_eq!(s.next_host(deadline), None);
    assert_eq!(s.close_outcome(), Some(Err(not_confirmed())));
    assert_eq!(s.fatal_error(), Some(&Error::Closed));

    // A session never established has nothing to close on the servers.
    let mut s = Session::<u32, u32>::new(config(), vec!["127.0.0.1:1".into()], now);
    s.close(now);
    assert!(matches!(events(&mut s)[..], [Event::State(State::Closed)]));
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

/// How a close that no read-write server confirmed in time ends.
fn not_confirmed() -> Error {
    Error::Timeout {
        deadline: Deadline::Close,
        after: config().connect_timeout,
    }
}

/// An established session on two hosts, cut off, then closed: closeSession
/// waits for a reconnect. Returns it with the host it was connected to.
fn closed_while_disconnected(now: Instant) -> (TestSession, String) {
    let hosts = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()];
    let mut s = Session::new(config(), hosts, now);
    let first = s.next_host(now).unwrap().0.host;
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    s.handle_disconnected(now);
    s.close(now);
    assert!(matches!(
        events(&mut s)[..],
        [
            Event::State(State::Connected),
            Event::State(State::Disconnected)
        ]
    ));
    (s, first)
}

#[test]
fn close_moves_on_to_another_host_when_a_handshake_fails() {
    let now = Instant::now();
    let (mut s, first) = closed_while_disconnected(now);
    // A server behind the client's lastZxidSeen closes the socket without a
    // ConnectResponse.
    let t = now + Duration::from_millis(100);
    let (second, at) = s.next_host(t).unwrap();
    assert_eq!(at, t);
    s.handle_connected(t);
    assert_eq!(sent(&mut s).len(), 1, "the handshake");
    s.handle_disconnected(t);
    s.handle_timeout(t);
    assert_eq!(s.fatal_error(), None);
    assert_eq!(s.state(), State::Disconnected);
    assert!(events(&mut s).is_empty());
    let (third, _) = s.next_host(t).unwrap();
    assert_ne!(third.host, second.host, "another host");
    assert_eq!(third.host, first);
    // A failed connect moves on too.
    s.handle_connect_failed(t);
    s.handle_timeout(t);
    assert_eq!(s.fatal_error(), None);
    assert!(s.next_host(t).is_some());
    // A server that takes the handshake gets closeSession.
    s.handle_connected(t);
    sent(&mut s);
    resume_and_close(&mut s, t);
    assert!(matches!(
        events(&mut s)[..],
        [Event::State(State::Connected), Event::State(State::Closed)]
    ));
    assert_eq!(s.next_host(t), None);
}

#[test]
fn close_ends_the_session_when_no_handshake_completes_by_its_deadline() {
    let now = Instant::now();
    let hosts = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()];
    let mut s = Session::<u32, u32>::new(config(), hosts, now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    s.handle_disconnected(now);
    events(&mut s);
    // Callers waiting for the reconnect.
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 1, None)
        .unwrap();
    let auth = digest_auth();
    s.add_auth(now, auth, 2).unwrap();
    s.close(now);
    assert_eq!(replies(&mut s), [(1, Err(Error::Closed))]);
    let deadline = now + config().connect_timeout;
    assert_eq!(s.poll_timeout(), Some(deadline));
    // Handshakes keep failing, each moving on, up to the deadline.
    let mut t = now;
    let mut attempts = 0;
    while t < deadline - Duration::from_millis(1) {
        let (_, at) = s.next_host(t).unwrap();
        t = at.min(deadline - Duration::from_millis(1));
        s.handle_connected(t);
        sent(&mut s);
        s.handle_disconnected(t);
        s.handle_timeout(t);
        assert_eq!(s.fatal_error(), None);
        attempts += 1;
        assert!(attempts < 100, "reconnects without bound");
    }
    assert!(events(&mut s).is_empty());
    // A handshake still under way at the deadline is cut short.
    s.handle_connected(t);
    sent(&mut s);
    s.handle_timeout(deadline);
    assert_eq!(s.poll_disconnect(), Some(Error::Closed));
    s.handle_disconnected(deadline);
    let evs = events(&mut s);
    let states = states_of(&evs);
    assert_eq!(states, [State::Closed]);
    assert!(evs.iter().any(|e| matches!(
        e,
        Event::Reply {
            token: 2,
            result: Err(Error::Closed)
        }
    )));
    assert_eq!(s.fatal_error(), Some(&Error::Closed));
    assert_eq!(s.next_host(deadline), None);

    // A handshake failing after the deadline, with no timer run, ends it too.
    let (mut s, _) = closed_while_disconnected(now);
    s.handle_connected(deadline);
    s.handle_disconnected(deadline);
    assert!(matches!(events(&mut s)[..], [Event::State(State::Closed)]));
    assert_eq!(s.next_host(deadline), None);
}

#[test]
fn a_read_only_server_refusing_close_session_sends_it_to_a_read_write_one() {
    let now = Instant::now();
    let mut s = two_hosts(
        SessionConfig {
            can_be_read_only: true,
            ..config()
        },
        now,
    );
    // Partitioned: the only server reachable is read-only, and takes the
    // session over.
    s.handle_disconnected(now);
    s.next_host(now).unwrap();
    s.handle_connected(now);
    let frames = sent(&mut s);
    assert!(ConnectRequest::from_bytes(&frames[0]).unwrap().read_only);
    s.handle_bytes(now, &read_only_accepted(0x1234));
    assert_eq!(s.state(), State::ConnectedReadOnly);
    // The next handshake asks for a read-write server, so a read-only one
    // refuses it (it closes the socket) and the one after is tried.
    let (request, at) = close_refused(&mut s, now, ErrorCode::NotReadOnly, Error::NotReadOnly);
    assert!(!request.read_only);
    assert_eq!(request.session_id, 0x1234);
    resume_and_close(&mut s, at);
    assert_eq!(
        states_of(&events(&mut s)),
        [
            State::Connected,
            State::Disconnected,
            State::ConnectedReadOnly,
            State::Disconnected,
            State::Connected,
            State::Closed
        ]
    );
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

/// A server that answers closeSession with SESSIONMOVED (another connection
/// of the session took it over) has not closed it: the close goes on
/// through the next handshake, which takes the session back.
#[test]
fn a_moved_session_is_closed_through_the_next_connection() {
    let now = Instant::now();
    let mut s = two_hosts(config(), now);
    let (request, at) = close_refused(&mut s, now, ErrorCode::SessionMoved, Error::SessionMoved);
    assert_eq!(request.session_id, 0x1234);
    resume_and_close(&mut s, at);
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

/// A server that throttles closeSession, or times it out itself, has not
/// closed the session: the close goes on through the next handshake.
#[test]
fn a_close_session_answered_for_now_is_asked_again_through_the_next_connection() {
    for (code, error) in [
        (ErrorCode::ThrottledOp, Error::ThrottledOp),
        (ErrorCode::OperationTimeout, Error::OperationTimeout),
        (ErrorCode::RequestTimeout, Error::RequestTimeout),
    ] {
        let now = Instant::now();
        let mut s = two_hosts(config(), now);
        let (request, at) = close_refused(&mut s, now, code, error);
        assert_eq!(request.session_id, 0x1234, "{code:?}");
        resume_and_close(&mut s, at);
        assert_eq!(s.close_outcome(), Some(Ok(())), "{code:?}");
    }
}

/// A session with two hosts, connected to the first as 0x1234.
fn two_hosts(config: SessionConfig, now: Instant) -> TestSession {
    let hosts = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()];
    let mut s = Session::new(config, hosts, now);
    s.next_host(now).unwrap();
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    s
}

/// Closes `s`, and its server refuses closeSession with `code`. Not closed:
/// the servers still hold the session and its nodes, so the session drops
/// the connection with `error` and the close goes on through the next
/// host: its handshake, and when it starts.
fn close_refused(
    s: &mut TestSession,
    now: Instant,
    code: ErrorCode,
    error: Error,
) -> (ConnectRequest, Instant) {
    s.close(now);
    let frames = sent(s);
    assert_eq!(header(&frames[0]).op, OpCode::CloseSession.code());
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 0, code.code(), &()));
    assert_eq!(s.poll_disconnect(), Some(error));
    assert_eq!(s.fatal_error(), None);
    s.handle_disconnected(now);
    assert_eq!(s.close_outcome(), None);
    let (_, at) = s.next_host(now).unwrap();
    s.handle_connected(at);
    let frames = sent(s);
    (ConnectRequest::from_bytes(&frames[0]).unwrap(), at)
}

fn read_only_accepted(session_id: i64) -> Vec<u8> {
    super::tests::frame(&crate::proto::ConnectResponse {
        protocol_version: 0,
        timeout_ms: 3000,
        session_id,
        passwd: vec![7; 16],
        read_only: true,
    })
}

#[test]
fn a_close_whose_reply_was_lost_is_confirmed_by_the_next_server() {
    let now = Instant::now();
    let mut s = connected(now);
    s.close(now);
    assert_eq!(header(&sent(&mut s)[0]).op, OpCode::CloseSession.code());
    // The connection drops before the reply: the close may or may not have
    // happened.
    s.handle_disconnected(now);
    assert_eq!(s.fatal_error(), None);
    assert_eq!(s.close_outcome(), None);
    let (_, at) = s.next_host(now).unwrap();
    s.handle_connected(at);
    sent(&mut s);
    // It happened: the resume is refused as expired, which is what the
    // close was for.
    s.handle_bytes(at, &accepted(0, 0));
    assert_eq!(
        states_of(&events(&mut s)),
        [State::Disconnected, State::Closed]
    );
    assert_eq!(s.close_outcome(), Some(Ok(())));
    assert_eq!(s.fatal_error(), Some(&Error::Closed));

    // It did not happen: the resumed session gets closeSession again.
    let mut s = connected(now);
    s.close(now);
    sent(&mut s);
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(&mut s);
    resume_and_close(&mut s, now);
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

#[test]
fn close_session_waits_for_a_connection_longer_than_the_session_timeout() {
    // A connect timeout beyond the session timeout: closeSession must still
    // be sent by a connection that comes up after the session timeout.
    let now = Instant::now();
    let long_connect = SessionConfig {
        connect_timeout: config().session_timeout * 3,
        ..config()
    };
    let mut s = super::tests::connected_with(long_connect, now);
    s.handle_disconnected(now);
    s.close(now);
    // Past the session timeout, and past the 4/3 of it that would otherwise
    // end the session as expired.
    let late = now + config().session_timeout * 2;
    s.handle_timeout(late);
    assert_eq!(s.fatal_error(), None);
    s.handle_connected(late);
    sent(&mut s);
    resume_and_close(&mut s, late);
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

#[test]
fn an_auth_failure_while_closing_is_the_close_outcome() {
    let now = Instant::now();
    let mut s = connected(now);
    let auth = digest_auth();
    s.add_auth(now, auth, 4).unwrap();
    sent(&mut s);
    s.close(now);
    sent(&mut s);
    s.handle_bytes(now, &reply(AUTH_XID, 0, ErrorCode::AuthFailed.code(), &()));
    assert_eq!(s.fatal_error(), Some(&Error::AuthFailed));
    assert_eq!(s.close_outcome(), Some(Err(Error::AuthFailed)));
}

/// The session's resume is accepted, and the closeSession that comes next,
/// alone, is answered.
fn resume_and_close(s: &mut TestSession, at: Instant) {
    s.handle_bytes(at, &accepted(0x1234, 3000));
    let frames = sent(s);
    assert_eq!(frames.len(), 1);
    assert_eq!(header(&frames[0]).op, OpCode::CloseSession.code());
    s.handle_bytes(at, &reply(header(&frames[0]).xid, 9, 0, &()));
}

/// What `handle_close_timers` drops a connection with when closeSession
/// had its share of the close's deadline there.
fn gave_way(share: Duration) -> Error {
    Error::Timeout {
        deadline: Deadline::CloseReply,
        after: share,
    }
}

/// A session on `count` hosts, connected to the first it tries as 0x1234.
fn among_hosts(count: u16, now: Instant) -> TestSession {
    let hosts = (1..=count).map(|port| format!("127.0.0.1:{port}"));
    let mut s = Session::new(config(), hosts.collect(), now);
    s.next_host(now).unwrap();
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    events(&mut s);
    s
}

/// A connection gone silent under closeSession (the TCP connection still
/// up) is given up on only at the read timeout (2 s here), after the
/// close's deadline (1 s): closeSession gets half of that deadline there,
/// then the other host the rest, and confirms the close.
#[test]
fn an_unanswered_close_session_gives_way_to_the_other_host_at_its_share() {
    let now = Instant::now();
    let mut s = among_hosts(2, now);
    assert!(s.read_timeout() > config().connect_timeout);
    s.close(now);
    assert_eq!(header(&sent(&mut s)[0]).op, OpCode::CloseSession.code());
    let share = config().connect_timeout / 2;
    assert_eq!(s.poll_timeout(), Some(now + share));
    assert_eq!(s.write_deadline(), Some(now + share));
    s.handle_timeout(now + share - Duration::from_millis(1));
    assert_eq!(s.poll_disconnect(), None);
    s.handle_timeout(now + share);
    assert_eq!(s.poll_disconnect(), Some(gave_way(share)));
    s.handle_disconnected(now + share);
    assert_eq!(s.fatal_error(), None);
    assert_eq!(s.close_outcome(), None);

    let (_, at) = s.next_host(now + share).unwrap();
    assert_eq!(at, now + share, "at once");
    // Connect and handshake may take all that is left, no more.
    assert_eq!(s.attempt_timeout(), config().connect_timeout - share);
    s.handle_connected(at);
    sent(&mut s);
    s.handle_bytes(at, &accepted(0x1234, 3000));
    assert_eq!(header(&sent(&mut s)[0]).op, OpCode::CloseSession.code());
    // The last host not tried has all that is left: the close's deadline.
    let deadline = now + config().connect_timeout;
    assert_eq!(s.poll_timeout(), Some(deadline));
    assert_eq!(s.write_deadline(), Some(deadline));
    s.handle_timeout(deadline - Duration::from_millis(1));
    assert_eq!(s.poll_disconnect(), None);
    let pending = s.pending.front().map(|p| p.xid).unwrap();
    s.handle_bytes(
        deadline - Duration::from_millis(1),
        &reply(pending, 9, 0, &()),
    );
    assert_eq!(
        states_of(&events(&mut s)),
        [State::Disconnected, State::Connected, State::Closed]
    );
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

/// Each host not tried yet during the close gets a share of what is left
/// of its deadline, from when closeSession went out on it; a host that
/// could not even be reached counts as tried; the last gets all the rest.
#[test]
fn each_host_gets_its_share_of_what_is_left_of_the_close() {
    let now = Instant::now();
    let at = |ms| now + Duration::from_millis(ms);
    let mut s = among_hosts(4, now);
    s.close(at(0));
    sent(&mut s);
    assert_eq!(s.poll_timeout(), Some(at(250)), "1 s among 4 hosts");
    s.handle_timeout(at(250));
    assert_eq!(
        s.poll_disconnect(),
        Some(gave_way(Duration::from_millis(250)))
    );
    s.handle_disconnected(at(250));

    // The next one refuses the connection.
    s.next_host(at(250)).unwrap();
    assert_eq!(
        s.attempt_timeout(),
        Duration::from_millis(250),
        "750 ms among 3"
    );
    s.handle_connect_failed(at(250));
    // The one after takes 150 ms over its handshake: 600 ms are left,
    // shared with the last host.
    s.next_host(at(250)).unwrap();
    // 750 ms among 2 hosts, but no more than any reconnect of the session
    // may take: a third of its timeout among the 3 other hosts.
    assert_eq!(s.attempt_timeout(), Duration::from_millis(3000) / 3 / 3);
    s.handle_connected(at(250));
    sent(&mut s);
    s.handle_bytes(at(400), &accepted(0x1234, 3000));
    assert_eq!(header(&sent(&mut s)[0]).op, OpCode::CloseSession.code());
    assert_eq!(s.poll_timeout(), Some(at(700)));
    assert_eq!(s.write_deadline(), Some(at(700)));
    s.handle_timeout(at(700));
    assert_eq!(
        s.poll_disconnect(),
        Some(gave_way(Duration::from_millis(300)))
    );
    s.handle_disconnected(at(700));

    // (Maybe after a pause: two connections in a row lived less than a
    // second after their handshakes.)
    let (_, last) = s.next_host(at(700)).unwrap();
    assert!(last < at(1000));
    assert_eq!(s.attempt_timeout(), at(1000) - last, "all that is left");
    s.handle_connected(last);
    sent(&mut s);
    s.handle_bytes(last, &accepted(0x1234, 3000));
    sent(&mut s);
    assert_eq!(s.poll_timeout(), Some(at(1000)), "the close's deadline");
    s.handle_timeout(at(1000));
    assert_eq!(s.poll_disconnect(), Some(Error::Closed));
    s.handle_disconnected(at(1000));
    assert_eq!(s.close_outcome(), Some(Err(not_confirmed())));
}

/// With one host there is nowhere else to go: its connection keeps
/// closeSession until the close's deadline, as silent as it may be.
#[test]
fn a_single_host_keeps_close_session_until_the_close_deadline() {
    let now = Instant::now();
    let mut s = connected(now);
    events(&mut s);
    s.close(now);
    sent(&mut s);
    let deadline = now + config().connect_timeout;
    assert_eq!(s.write_deadline(), Some(deadline));
    s.handle_timeout(deadline - Duration::from_millis(1));
    assert_eq!(s.poll_disconnect(), None);
    s.handle_timeout(deadline);
    assert_eq!(s.poll_disconnect(), Some(Error::Closed));
    s.handle_disconnected(deadline);
    assert_eq!(states_of(&events(&mut s)), [State::Closed]);
    assert_eq!(s.close_outcome(), Some(Err(not_confirmed())));
}

/// A server that answers closeSession before its share is up ends the
/// close there and then; nothing else is tried.
#[test]
fn a_close_session_answered_within_its_share_ends_the_close_at_once() {
    let now = Instant::now();
    let mut s = among_hosts(3, now);
    s.close(now);
    let frames = sent(&mut s);
    let share = config().connect_timeout / 3;
    assert_eq!(s.poll_timeout(), Some(now + share));
    let answered = now + share - Duration::from_millis(1);
    s.handle_bytes(answered, &reply(header(&frames[0]).xid, 9, 0, &()));
    assert_eq!(states_of(&events(&mut s)), [State::Closed]);
    assert_eq!(s.close_outcome(), Some(Ok(())));
    assert_eq!(s.poll_disconnect(), Some(Error::Closed));
    assert_eq!(s.next_host(answered), None);
}

/// A host whose server takes the TCP connection but never answers the
/// handshake (hung) gets only its share of what is left of the close's
/// deadline, not a whole attempt timeout: the host after it still has time
/// to confirm the close.
#[test]
fn a_hung_handshake_during_a_close_gives_way_at_its_share() {
    let now = Instant::now();
    let at = |ms| now + Duration::from_millis(ms);
    let mut s = among_hosts(3, now);
    s.close(at(0));
    sent(&mut s);
    s.handle_timeout(at(400));
    assert_eq!(
        s.poll_disconnect(),
        Some(gave_way(config().connect_timeout / 3))
    );
    s.handle_disconnected(at(400));

    let (_, starts) = s.next_host(at(400)).unwrap();
    assert_eq!(starts, at(400));
    s.handle_connected(starts);
    assert_eq!(sent(&mut s).len(), 1, "the handshake, never answered");
    assert_eq!(s.poll_timeout(), Some(at(700)), "600 ms among 2 hosts");
    s.handle_timeout(at(700));
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Timeout {
            deadline: Deadline::Handshake,
            after: Duration::from_millis(300),
        })
    );
    s.handle_disconnected(at(700));

    let (_, starts) = s.next_host(at(700)).unwrap();
    assert_eq!(starts, at(700));
    s.handle_connected(starts);
    sent(&mut s);
    resume_and_close(&mut s, at(750));
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

/// A connection attempt made while closing (here with one host) may take
/// only what is left of the close's deadline: a TCP connect to a host that
/// drops its packets ends no later than the close.
#[test]
fn a_connection_attempt_during_a_close_ends_by_its_deadline() {
    let now = Instant::now();
    let at = |ms| now + Duration::from_millis(ms);
    let mut s = connected(now);
    s.handle_disconnected(now);
    s.close(now);
    let (_, starts) = s.next_host(at(700)).unwrap();
    assert_eq!(starts, at(700));
    assert_eq!(s.attempt_timeout(), Duration::from_millis(300));
    s.handle_connect_failed(at(1000));
    s.handle_timeout(at(1000));
    assert_eq!(s.close_outcome(), Some(Err(not_confirmed())));

    // An attempt whose host was chosen before the close gets its share
    // too, here among two hosts, counted from the close: a lookup or TCP
    // connect under way then ends there.
    let (s, _) = closed_while_disconnected(now);
    assert_eq!(s.attempt_timeout(), config().connect_timeout / 2);
    assert_eq!(
        s.close_attempt_end(),
        Some(now + config().connect_timeout / 2)
    );
}

/// A session among 2 hosts whose next attempt, after two connections lost
/// at once (at `now`), waits out a pause of 250 ms; and that attempt's
/// target.
fn in_a_pause_after_two_short_connections(now: Instant) -> (TestSession, Target) {
    let mut s = among_hosts(2, now);
    s.handle_disconnected(now);
    s.next_host(now).unwrap();
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &accepted(0x1234, 3000));
    s.handle_disconnected(now);
    let (target, starts) = s.next_host(now).unwrap();
    assert_eq!(
        starts,
        now + Duration::from_millis(250),
        "the pause after two short connections"
    );
    (s, target)
}

/// An attempt still waiting out a pause when the close comes (here after
/// two connections that lived less than a second) starts at the close,
/// with its share of the whole close: closeSession, which frees the
/// session's locks, does not wait for the pause.
#[test]
fn a_close_cuts_short_the_pause_before_the_next_attempt() {
    let now = Instant::now();
    let at = |ms| now + Duration::from_millis(ms);
    let (mut s, _) = in_a_pause_after_two_short_connections(now);
    assert_eq!(s.attempt_start(), Some(at(250)));
    s.close(at(100));
    assert_eq!(s.attempt_start(), Some(at(100)));
    // 1 s from the close, among 2 hosts.
    assert_eq!(s.close_attempt_end(), Some(at(100 + 500)));
    s.handle_connected(at(100));
    sent(&mut s);
    resume_and_close(&mut s, at(110));
    assert_eq!(s.close_outcome(), Some(Ok(())));
}

/// The pause a close cuts short is not waited out for the next host
/// either, should the attempt that started at the close fail: before, it
/// started at the end of that pause, which could leave it no share of the
/// close's deadline.
#[test]
fn a_close_cuts_short_the_pause_for_the_next_host_too() {
    let now = Instant::now();
    let at = |ms| now + Duration::from_millis(ms);
    let (mut s, first) = in_a_pause_after_two_short_connections(now);
    s.close(at(100));
    assert_eq!(s.attempt_start(), Some(at(100)));
    s.handle_connect_failed(at(110));
    s.handle_timeout(at(110));
    let (next, starts) = s.next_host(at(110)).unwrap();
    assert_ne!(next.host(), first.host());
    assert_eq!(starts, at(110), "the next host, at once");
}

/// A handshake under way when the close comes (a hung server's) gets its
/// share of the close's deadline from then, not the whole attempt timeout
/// it started with, which would leave the other host no time to confirm
/// the close.
#[test]
fn a_handshake_under_way_at_the_close_gives_way_at_its_share() {
    let now = Instant::now();
    let mut s = among_hosts(2, now);
    s.handle_disconnected(now);
    let (_, starts) = s.next_host(now).unwrap();
    s.handle_connected(starts);
    assert_eq!(sent(&mut s).len(), 1, "the handshake, never answered");
    let closed = starts + Duration::from_millis(100);
    s.close(closed);
    let share = config().connect_timeout / 2;
    assert_eq!(s.close_attempt_end(), Some(closed + share));
    assert_eq!(s.poll_timeout(), Some(closed + share));
    s.handle_timeout(closed + share - Duration::from_millis(1));
    assert_eq!(s.poll_disconnect(), None);
    s.handle_timeout(closed + share);
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Timeout {
            deadline: Deadline::Handshake,
            after: share,
        })
    );
    s.handle_disconnected(closed + share);

    let (_, starts) = s.next_host(closed + share).unwrap();
    assert!(starts < closed + config().connect_timeout);
    s.handle_connected(starts);
    sent(&mut s);
    resume_and_close(&mut s, starts);
    assert_eq!(s.close_outcome(), Some(Ok(())));
}
