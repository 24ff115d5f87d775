//! Auth packets under the request timeout: their replies are matched by
//! their own xid, outside the queue of other requests, and may overtake the
//! replies to requests sent before them, but an unanswered one must not
//! wait longer than any other request.

use std::time::{Duration, Instant};

use super::tests::{
    config, connected_with, data_v, digest_auth, get_data, header, reconnect, replies, reply, sent,
    TestSession, TIMEOUT,
};
use super::*;

const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

fn request_timed_out() -> Error {
    Error::Timeout {
        deadline: Deadline::Request,
        after: REQUEST_TIMEOUT,
    }
}

fn with_request_timeout(start: Instant) -> TestSession {
    connected_with(
        SessionConfig {
            request_timeout: Some(REQUEST_TIMEOUT),
            ..config()
        },
        start,
    )
}

#[test]
fn an_unanswered_auth_fails_at_the_request_timeout_and_drops_the_connection() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = with_request_timeout(start);
    s.add_auth(at(0), digest_auth(), 1).unwrap();
    s.submit(at(100), OpCode::GetData, &get_data("/app/a"), 2, None)
        .unwrap();
    let frames = sent(&mut s);
    assert_eq!(header(&frames[0]).xid, AUTH_XID);
    assert_eq!(frames.len(), 2);
    assert_eq!(s.poll_timeout(), Some(at(500)), "the auth's deadline");
    s.handle_timeout(at(499));
    assert_eq!(s.poll_disconnect(), None);
    s.handle_timeout(at(500));
    // The auth is the oldest unanswered request: it gets the timeout, and
    // the call sent after it the loss of the connection the timeout drops.
    assert_eq!(replies(&mut s), [(1, Err(request_timed_out()))]);
    assert_eq!(s.poll_disconnect(), Some(request_timed_out()));
    s.handle_disconnected(at(500));
    assert_eq!(replies(&mut s), [(2, Err(Error::ConnectionLoss))]);
    assert_eq!(s.state(), State::Disconnected);
}

#[test]
fn a_request_older_than_an_unanswered_auth_times_out_first() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = with_request_timeout(start);
    s.submit(at(0), OpCode::GetData, &get_data("/app/a"), 1, None)
        .unwrap();
    s.add_auth(at(100), digest_auth(), 2).unwrap();
    assert_eq!(sent(&mut s).len(), 2);
    assert_eq!(s.poll_timeout(), Some(at(500)), "the getData's deadline");
    s.handle_timeout(at(500));
    assert_eq!(replies(&mut s), [(1, Err(request_timed_out()))]);
    assert_eq!(s.poll_disconnect(), Some(request_timed_out()));
    s.handle_disconnected(at(500));
    assert_eq!(replies(&mut s), [(2, Err(Error::ConnectionLoss))]);
}

#[test]
fn an_auth_answered_ahead_of_an_earlier_request_leaves_that_requests_deadline() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = with_request_timeout(start);
    s.submit(at(0), OpCode::GetData, &get_data("/app/a"), 1, None)
        .unwrap();
    s.add_auth(at(100), digest_auth(), 2).unwrap();
    let frames = sent(&mut s);
    // The server handles an auth packet as it reads it, so its reply may
    // come first.
    s.handle_bytes(at(200), &reply(AUTH_XID, 0, 0, &()));
    assert_eq!(replies(&mut s), [(2, Ok(Response::Empty))]);
    assert_eq!(s.poll_timeout(), Some(at(500)));
    s.handle_bytes(at(300), &reply(header(&frames[0]).xid, 5, 0, &data_v()));
    assert_eq!(
        replies(&mut s),
        [(1, Ok(Response::GetData(data_v())))],
        "nothing else failed"
    );
    // Nothing in flight: the ping is next.
    assert_eq!(s.poll_timeout(), Some(at(100 + 1000)));
}

#[test]
fn an_auth_resent_after_a_reconnect_is_bounded_by_the_request_timeout_too() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = with_request_timeout(start);
    s.add_auth(at(0), digest_auth(), 1).unwrap();
    sent(&mut s);
    s.handle_bytes(at(10), &reply(AUTH_XID, 0, 0, &()));
    assert_eq!(replies(&mut s), [(1, Ok(Response::Empty))]);
    // The reconnect sends the credentials again, with nobody waiting.
    let frames = reconnect(&mut s, at(1000));
    assert_eq!(frames.len(), 1);
    assert_eq!(header(&frames[0]).xid, AUTH_XID);
    assert_eq!(s.poll_timeout(), Some(at(1500)));
    s.handle_timeout(at(1500));
    assert_eq!(replies(&mut s), []);
    assert_eq!(s.poll_disconnect(), Some(request_timed_out()));
}

/// The error of calls left unanswered, with no request timeout set.
fn unanswered() -> Error {
    Error::Timeout {
        deadline: Deadline::Unanswered,
        after: TIMEOUT * 2,
    }
}

/// Without a request timeout, a call waits twice the session timeout for
/// its reply, however the server keeps the connection up: a real server
/// answers a session's pings after the requests sent before them, so only
/// a broken one answers pings but never the call, and it must not hold the
/// call for as long as it keeps doing so. An auth packet is bounded the
/// same way.
#[test]
fn without_a_request_timeout_a_call_waits_twice_the_session_timeout() {
    for auth in [false, true] {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut s = connected_with(config(), start);
        if auth {
            s.add_auth(at(0), digest_auth(), 1).unwrap();
        } else {
            s.submit(at(0), OpCode::GetData, &get_data("/app/a"), 1, None)
                .unwrap();
        }
        sent(&mut s);
        // Pings keep the connection up, well inside the read timeout.
        for ms in (1000..6000).step_by(1000) {
            s.handle_timeout(at(ms));
            assert_eq!(s.poll_disconnect(), None, "at {ms} ms");
            sent(&mut s);
            s.handle_bytes(at(ms), &reply(PING_XID, 0, 0, &()));
        }
        assert_eq!(replies(&mut s), []);
        assert_eq!(s.poll_timeout(), Some(at(6000)), "the call's deadline");
        s.handle_timeout(at(6000));
        assert_eq!(replies(&mut s), [(1, Err(unanswered()))], "auth: {auth}");
        assert_eq!(s.poll_disconnect(), Some(unanswered()));
    }
}

/// Without a request timeout, the bound counts from the server's last
/// answer to a request: a server still answering (a reconnect's burst of
/// re-registrations, a deep pipeline) is working through the calls, and a
/// call sent long ago is not failed while the ones ahead of it are
/// answered.
#[test]
fn without_a_request_timeout_the_bound_counts_from_the_last_answer() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected_with(config(), start);
    for token in [1, 2] {
        s.submit(at(0), OpCode::GetData, &get_data("/app/a"), token, None)
            .unwrap();
    }
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 2);
    let answer_first = 5000;
    for ms in (1000..11_000).step_by(1000) {
        s.handle_timeout(at(ms));
        assert_eq!(s.poll_disconnect(), None, "at {ms} ms");
        sent(&mut s);
        s.handle_bytes(at(ms), &reply(PING_XID, 0, 0, &()));
        if ms == answer_first {
            s.handle_bytes(at(ms), &reply(header(&frames[0]).xid, 5, 0, &data_v()));
            assert_eq!(replies(&mut s), [(1, Ok(Response::GetData(data_v())))]);
        }
    }
    s.handle_timeout(at(answer_first + 5999));
    assert_eq!(s.poll_disconnect(), None);
    s.handle_timeout(at(answer_first + 6000));
    assert_eq!(replies(&mut s), [(2, Err(unanswered()))]);
    assert_eq!(s.poll_disconnect(), Some(unanswered()));
}

/// Credentials added while no server is connected wait for a handshake,
/// like any call, up to the session timeout: then the caller gets
/// `ConnectionLoss`. The packet is kept, and goes with the next handshake.
#[test]
fn an_auth_added_while_disconnected_fails_after_the_session_timeout_and_goes_later() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected_with(config(), start);
    s.handle_disconnected(at(0));
    replies(&mut s);
    s.add_auth(at(100), digest_auth(), 7).unwrap();
    // The negotiated 3 s from the call.
    assert_eq!(s.poll_timeout(), Some(at(3100)));
    s.handle_timeout(at(3099));
    assert!(replies(&mut s).is_empty());
    s.handle_timeout(at(3100));
    assert_eq!(replies(&mut s), [(7, Err(Error::ConnectionLoss))]);
    let frames = reconnect(&mut s, at(3200));
    let xids: Vec<i32> = frames.iter().map(|f| header(f).xid).collect();
    assert_eq!(xids, [AUTH_XID], "the credentials, with no one waiting");
    s.handle_bytes(at(3201), &reply(AUTH_XID, 0, 0, &()));
    assert!(replies(&mut s).is_empty());
}

/// Credentials added again (an application adding them on every
/// `Connected`, say) go at once each time, with a reply for each caller,
/// but each later handshake carries them once.
#[test]
fn credentials_added_again_go_once_with_each_later_handshake() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected_with(config(), start);
    for token in [1, 2, 3] {
        s.add_auth(at(u64::from(token)), digest_auth(), token)
            .unwrap();
    }
    assert_eq!(sent(&mut s).len(), 3);
    for _ in 0..3 {
        s.handle_bytes(at(10), &reply(AUTH_XID, 0, 0, &()));
    }
    assert_eq!(
        replies(&mut s),
        [
            (1, Ok(Response::Empty)),
            (2, Ok(Response::Empty)),
            (3, Ok(Response::Empty))
        ]
    );
    let frames = reconnect(&mut s, at(1000));
    let xids: Vec<i32> = frames.iter().map(|f| header(f).xid).collect();
    assert_eq!(xids, [AUTH_XID], "the credentials, once");

    // Added again while disconnected: each caller waits for a reply of
    // its own on the next handshake, and the one after sends them once.
    s.handle_disconnected(at(2000));
    for token in [4, 5] {
        s.add_auth(at(2000), digest_auth(), token).unwrap();
    }
    let frames = reconnect(&mut s, at(2100));
    let xids: Vec<i32> = frames.iter().map(|f| header(f).xid).collect();
    assert_eq!(xids, [AUTH_XID, AUTH_XID]);
    for _ in 0..2 {
        s.handle_bytes(at(2101), &reply(AUTH_XID, 0, 0, &()));
    }
    let mut answered = replies(&mut s);
    answered.sort_by_key(|(token, _)| *token);
    assert_eq!(
        answered,
        [(4, Ok(Response::Empty)), (5, Ok(Response::Empty))]
    );
    let frames = reconnect(&mut s, at(3000));
    assert_eq!(frames.len(), 1, "the credentials, once");
}

/// Without a request timeout, an auth packet's answer does not extend the
/// bound of a call sent before it, nor a call's answer that of an auth
/// packet: the server answers an auth packet as it reads it, ahead of the
/// calls before it, so neither says anything of the other. A server that
/// answers pings and credentials but never the call still fails it at
/// twice the session timeout.
#[test]
fn without_a_request_timeout_an_auths_answer_does_not_extend_a_calls_bound() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected_with(config(), start);
    s.submit(at(0), OpCode::GetData, &get_data("/app/a"), 1, None)
        .unwrap();
    s.add_auth(at(100), digest_auth(), 2).unwrap();
    assert_eq!(sent(&mut s).len(), 2);
    for ms in (1000..6000).step_by(1000) {
        s.handle_timeout(at(ms));
        sent(&mut s);
        s.handle_bytes(at(ms), &reply(PING_XID, 0, 0, &()));
        if ms == 5000 {
            s.handle_bytes(at(ms), &reply(AUTH_XID, 0, 0, &()));
            assert_eq!(replies(&mut s), [(2, Ok(Response::Empty))]);
        }
    }
    s.handle_timeout(at(5999));
    assert_eq!(s.poll_disconnect(), None);
    s.handle_timeout(at(6000));
    assert_eq!(replies(&mut s), [(1, Err(unanswered()))]);
    assert_eq!(s.poll_disconnect(), Some(unanswered()));
}
