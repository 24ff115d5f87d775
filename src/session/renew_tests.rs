//! A new session after an expiry (`new_session_on_expiry`), driven by bytes
//! and a hand-advanced clock: the expiry is reported in full, then the next
//! handshake asks for a fresh session, and nothing of the old one but its
//! credentials reaches the new one.

use std::time::{Duration, Instant};

use super::tests::{
    accepted, config, connected_with, data_v, digest_auth, events, expired, get_data, header,
    replies, reply, sent, states_of, TestSession, TIMEOUT,
};
use super::*;

fn renewing() -> SessionConfig {
    SessionConfig {
        new_session_on_expiry: true,
        ..config()
    }
}

/// Connects a session that renews on expiry, with credentials answered and
/// a data watch on `/app/w` (token 1, watcher 77) set at zxid 5.
fn connected_with_auth_and_watch(now: Instant) -> TestSession {
    let mut s = connected_with(renewing(), now);
    s.add_auth(now, digest_auth(), 100).unwrap();
    let watch = WatchRequest {
        kind: WatchKind::Data,
        path: "/app/w".into(),
        watcher: 77,
    };
    s.submit(now, OpCode::GetData, &get_data("/app/w"), 1, Some(watch))
        .unwrap();
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 2);
    s.handle_bytes(now, &reply(AUTH_XID, 0, 0, &()));
    s.handle_bytes(now, &reply(header(&frames[1]).xid, 5, 0, &data_v()));
    assert_eq!(
        replies(&mut s),
        [
            (100, Ok(Response::Empty)),
            (1, Ok(Response::GetData(data_v())))
        ]
    );
    assert_eq!(s.last_zxid(), 5);
    s
}

/// The ConnectRequest among `frames`, which must be the only frame.
fn handshake(frames: &[Vec<u8>]) -> ConnectRequest {
    assert_eq!(frames.len(), 1, "the handshake alone");
    ConnectRequest::from_bytes(&frames[0]).unwrap()
}

/// Asserts that `request` asks for a new session: id 0, a zero password,
/// nothing seen.
fn asks_for_a_new_session(request: &ConnectRequest) {
    assert_eq!(
        (
            request.session_id,
            &request.passwd[..],
            request.last_zxid_seen
        ),
        (0, &[0u8; 16][..], 0)
    );
    assert_eq!(request.timeout_ms, 3000);
}

#[test]
fn a_resume_refused_as_expired_is_reported_then_a_new_session_goes_on_with_the_credentials_alone() {
    let now = Instant::now();
    let mut s = connected_with_auth_and_watch(now);
    // Background deletes, sent and still to send: their nodes go with the
    // session.
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    s.defer_background_delete(
        now,
        Release::plain("/app/lock/n2"),
        now + Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(sent(&mut s).len(), 1);
    s.handle_disconnected(now);
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    s.handle_connected(now);
    assert_eq!(handshake(&sent(&mut s)).session_id, 0x1234, "a resume");
    s.handle_bytes(now, &expired());

    let evs = events(&mut s);
    assert_eq!(
        states_of(&evs),
        [State::Disconnected, State::Expired, State::Disconnected]
    );
    assert!(evs.iter().any(|e| matches!(
        e,
        Event::Reply {
            token: 2,
            result: Err(Error::SessionExpired)
        }
    )));
    assert!(evs
        .iter()
        .any(|e| matches!(e, Event::Watch { watchers, event }
        if *watchers == [77] && event.state == KeeperState::Expired)));
    assert_eq!(s.watcher_count(), 0);
    assert_eq!(s.next_deferred_deadline(), None);
    // The connection that learnt it is dropped; the client goes on.
    assert_eq!(s.poll_disconnect(), Some(Error::SessionExpired));
    s.handle_disconnected(now);
    assert!(events(&mut s).is_empty());
    assert_eq!(s.fatal_error(), None);
    assert_eq!(s.open_error(), None);
    assert_eq!(s.state(), State::Disconnected);
    assert_eq!(
        (s.session_id(), s.password(), s.negotiated_timeout()),
        (0, &[0u8; 16][..], None)
    );
    assert_eq!(s.generation(), 1);
    assert_eq!(s.check_generation(0), Err(Error::SessionExpired));
    assert_eq!(s.check_generation(1), Ok(()));

    // A call made now waits for the new session.
    s.submit(now, OpCode::GetData, &get_data("/app/r"), 3, None)
        .unwrap();
    assert_eq!(s.queued(), 1);
    assert!(s.next_host(now).is_some());
    s.handle_connected(now);
    asks_for_a_new_session(&handshake(&sent(&mut s)));
    s.handle_bytes(now, &accepted(0x5678, 3000));
    assert_eq!(states_of(&events(&mut s)), [State::Connected]);
    assert_eq!(s.session_id(), 0x5678);
    assert_eq!(s.negotiated_timeout(), Some(Duration::from_millis(3000)));
    // The credentials, then the call: no watch to set again, no delete.
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::Auth.code(), OpCode::GetData.code()]);
    assert_eq!(header(&frames[0]).xid, AUTH_XID);
    s.handle_bytes(now, &reply(AUTH_XID, 0, 0, &()));
    s.handle_bytes(now, &reply(header(&frames[1]).xid, 3, 0, &data_v()));
    assert_eq!(replies(&mut s), [(3, Ok(Response::GetData(data_v())))]);

    // A reconnect of the new session resumes it, relative to what it saw.
    s.handle_disconnected(now);
    s.handle_connected(now);
    let request = handshake(&sent(&mut s));
    assert_eq!((request.session_id, request.last_zxid_seen), (0x5678, 3));
}

#[test]
fn a_session_cut_off_for_four_thirds_of_its_timeout_is_replaced_by_a_new_one() {
    let start = Instant::now();
    let mut s = connected_with_auth_and_watch(start);
    s.handle_disconnected(start);
    events(&mut s);
    let expiry = start + Duration::from_millis(4000);
    assert_eq!(s.poll_timeout(), Some(expiry));
    s.handle_timeout(expiry);
    let evs = events(&mut s);
    assert_eq!(states_of(&evs), [State::Expired, State::Disconnected]);
    assert!(evs
        .iter()
        .any(|e| matches!(e, Event::Watch { watchers, event }
        if *watchers == [77] && event.state == KeeperState::Expired)));
    // The new session has no timeout of its own yet: it cannot expire
    // before its handshake, however long that takes.
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(expiry + Duration::from_secs(60));
    assert!(events(&mut s).is_empty(), "one expiry, one new session");
    assert_eq!(s.generation(), 1);
    let later = expiry + Duration::from_secs(60);
    assert!(s.next_host(later).is_some());
    s.handle_connected(later);
    asks_for_a_new_session(&handshake(&sent(&mut s)));
    s.handle_bytes(later, &accepted(0x5678, 3000));
    assert_eq!(states_of(&events(&mut s)), [State::Connected]);
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1, "the credentials alone");
    assert_eq!(header(&frames[0]).xid, AUTH_XID);
    // Established, the new session expires as the first one did.
    s.handle_bytes(later, &reply(AUTH_XID, 0, 0, &()));
    s.handle_disconnected(later);
    events(&mut s);
    s.handle_timeout(later + Duration::from_millis(4000));
    assert_eq!(
        states_of(&events(&mut s)),
        [State::Expired, State::Disconnected]
    );
    assert_eq!(s.generation(), 2);
}

#[test]
fn a_taken_over_session_found_expired_on_its_first_handshake_stays_expired() {
    let now = Instant::now();
    let mut s: TestSession = Session::new(renewing(), vec!["127.0.0.1:1".into()], now);
    s.resume(0x99, vec![5; 16]);
    s.handle_connected(now);
    assert_eq!(handshake(&sent(&mut s)).session_id, 0x99);
    s.handle_bytes(now, &expired());
    assert_eq!(states_of(&events(&mut s)), [State::Expired]);
    assert_eq!(s.fatal_error(), Some(&Error::SessionExpired));
    assert_eq!(s.generation(), 0);
    assert_eq!(s.next_host(now), None);
}

#[test]
fn auth_failure_and_close_stay_final() {
    let now = Instant::now();
    let mut s = connected_with(renewing(), now);
    s.add_auth(now, digest_auth(), 4).unwrap();
    sent(&mut s);
    s.handle_bytes(now, &reply(AUTH_XID, 0, -115, &()));
    assert_eq!(states_of(&events(&mut s)), [State::AuthFailed]);
    assert_eq!(s.next_host(now), None);
    assert_eq!(s.generation(), 0);

    let mut s = connected_with(renewing(), now);
    s.close(now);
    let frames = sent(&mut s);
    assert_eq!(header(&frames[0]).op, OpCode::CloseSession.code());
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 9, 0, &()));
    assert_eq!(states_of(&events(&mut s)), [State::Closed]);
    assert_eq!(s.next_host(now), None);

    // A close whose resume is refused as expired got what it asked for.
    let mut s = connected_with(renewing(), now);
    s.handle_disconnected(now);
    s.close(now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &expired());
    assert_eq!(
        states_of(&events(&mut s)),
        [State::Disconnected, State::Closed]
    );
    assert_eq!(s.close_outcome(), Some(Ok(())));
    assert_eq!(s.next_host(now), None);
    assert_eq!(s.generation(), 0);
}

#[test]
fn a_close_before_the_new_sessions_handshake_ends_it_at_once() {
    let start = Instant::now();
    let mut s = connected_with(renewing(), start);
    s.handle_disconnected(start);
    let expiry = start + Duration::from_millis(4000);
    s.handle_timeout(expiry);
    events(&mut s);
    assert_eq!(s.generation(), 1);
    // Nothing of the new session is on any server: no connection is needed
    // to close it, as the old session's servers would have been.
    s.close(expiry);
    assert_eq!(states_of(&events(&mut s)), [State::Closed]);
    assert_eq!(s.close_outcome(), Some(Ok(())));
    assert_eq!(s.next_host(expiry), None);
    assert_eq!(
        s.submit(expiry, OpCode::GetData, &get_data("/app/q"), 1, None),
        Err(Error::Closed)
    );
}

#[test]
fn without_the_option_an_expiry_ends_the_session() {
    let now = Instant::now();
    let mut s = connected_with(config(), now);
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &expired());
    assert_eq!(
        states_of(&events(&mut s)),
        [State::Disconnected, State::Expired]
    );
    assert_eq!(s.generation(), 0);
    assert_eq!(s.next_host(now), None);
    assert_eq!(
        s.submit(now, OpCode::GetData, &get_data("/app/q"), 1, None),
        Err(Error::SessionExpired)
    );
}

/// After an expiry replaced the session, the new one has no timeout of its
/// own until its handshake, so it cannot expire while no server answers;
/// credentials added meanwhile still fail their caller with
/// `ConnectionLoss` after the configured session timeout, as other calls
/// do, rather than wait for a handshake that may never come.
#[test]
fn an_auth_added_before_a_new_sessions_handshake_fails_after_the_session_timeout() {
    let start = Instant::now();
    let mut s = connected_with_auth_and_watch(start);
    s.handle_disconnected(start);
    let expiry = start + Duration::from_millis(4000);
    s.handle_timeout(expiry);
    events(&mut s);
    assert_eq!(s.generation(), 1);
    s.add_auth(expiry, digest_auth(), 8).unwrap();
    let deadline = expiry + TIMEOUT;
    assert_eq!(s.poll_timeout(), Some(deadline));
    s.handle_timeout(deadline);
    assert_eq!(replies(&mut s), [(8, Err(Error::ConnectionLoss))]);
    assert_eq!(s.poll_timeout(), None);
}

/// Drops the connection and resumes session `id` on a new one; the frames
/// the handshake's answer released (credentials, re-registrations...).
fn resume(s: &mut TestSession, now: Instant, id: i64) -> Vec<Vec<u8>> {
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(s);
    s.handle_bytes(now, &accepted(id, 3000));
    sent(s)
}

/// Refuses the re-registration among `frames` (a server that does not
/// know the request, as a 3.5 server would a persistent watch's).
fn refuse_set_watches(s: &mut TestSession, now: Instant, frames: &[Vec<u8>]) {
    let set_watches = frames
        .iter()
        .find(|f| header(f).op == OpCode::SetWatches.code())
        .expect("a re-registration");
    s.handle_bytes(now, &reply(header(set_watches).xid, 9, -6, &()));
}

/// A re-registration the servers keep refusing makes the client reconnect
/// three times, then leaves the watches unset. A new session after an
/// expiry starts counting afresh: its first refused re-registration makes
/// the client reconnect again. Before, the old session's refusals counted
/// against it, and its watches were left unset at the first refusal.
#[test]
fn a_new_sessions_refused_re_registration_is_not_counted_with_the_old_sessions() {
    let now = Instant::now();
    let mut s = connected_with_auth_and_watch(now);
    for refusal in 1..=4 {
        let frames = resume(&mut s, now, 0x1234);
        refuse_set_watches(&mut s, now, &frames);
        let reconnects = s.poll_disconnect().is_some();
        assert_eq!(reconnects, refusal <= 3, "refusal {refusal}");
    }
    s.handle_disconnected(now);
    s.handle_connected(now);
    sent(&mut s);
    s.handle_bytes(now, &expired());
    assert_eq!(s.poll_disconnect(), Some(Error::SessionExpired));
    s.handle_disconnected(now);
    assert!(s.next_host(now).is_some());
    s.handle_connected(now);
    asks_for_a_new_session(&handshake(&sent(&mut s)));
    s.handle_bytes(now, &accepted(0x5678, 3000));
    let watch = WatchRequest {
        kind: WatchKind::Data,
        path: "/app/v".into(),
        watcher: 78,
    };
    s.submit(now, OpCode::GetData, &get_data("/app/v"), 2, Some(watch))
        .unwrap();
    let frames = sent(&mut s);
    let get = frames.last().expect("the getData");
    s.handle_bytes(now, &reply(header(get).xid, 5, 0, &data_v()));
    events(&mut s);
    let frames = resume(&mut s, now, 0x5678);
    refuse_set_watches(&mut s, now, &frames);
    assert_eq!(
        s.poll_disconnect(),
        Some(Error::Unimplemented),
        "the new session's first refusal reconnects"
    );
}
