//! A session resumed by a read-only server (as servers before 3.8 do): what
//! its answers and its grant change, and what they do not.

use std::time::{Duration, Instant};

use super::tests::{config, connected_with, frame, header, reply, sent, TestSession, TIMEOUT};
use super::*;
use crate::proto::ConnectResponse;

/// A session that may be on a read-only server, connected to a read-write
/// one at `start` with a 3 s grant.
fn connected_read_only_allowed(start: Instant) -> TestSession {
    let config = SessionConfig {
        can_be_read_only: true,
        ..config()
    };
    connected_with(config, start)
}

/// Drops the connection at `lost` and connects to the next host at
/// `connected`, its ConnectRequest taken.
fn to_next_host(s: &mut TestSession, lost: Instant, connected: Instant) {
    s.handle_disconnected(lost);
    s.next_host(lost).unwrap();
    s.handle_connected(connected);
    sent(s);
}

/// A session a read-write server has seen, resumed by a read-only one (as
/// servers before 3.8 do): that server's answers do not count as hearing
/// from the ensemble, whose quorum hears nothing of the session, and the
/// session expires locally 4/3 of the timeout after a read-write server
/// was last heard from, the connection still up. Before, the read-only
/// server's pings kept it alive locally for as long as it answered.
#[test]
fn a_read_only_server_does_not_keep_a_quorum_session_alive() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected_read_only_allowed(start);
    s.handle_bytes(at(100), &reply(PING_XID, 3, 0, &()));
    to_next_host(&mut s, at(200), at(300));
    // Its own bounds grant another timeout, which the quorum knows nothing
    // of: the session's stays.
    let resumed_read_only = frame(&ConnectResponse {
        protocol_version: 0,
        timeout_ms: 6000,
        session_id: 0x1234,
        passwd: vec![7; 16],
        read_only: true,
    });
    s.handle_bytes(at(400), &resumed_read_only);
    assert_eq!(s.state(), State::ConnectedReadOnly);
    assert_eq!(s.negotiated_timeout(), Some(TIMEOUT));
    // Its pings are answered, within the read timeout, until the expiry:
    // 100 ms + 4/3 of 3 s.
    let expiry = at(100 + 4000);
    assert!(s.poll_timeout().is_some_and(|t| t <= expiry));
    let mut now = at(400);
    for _ in 0..8 {
        now += Duration::from_millis(450);
        s.handle_timeout(now);
        sent(&mut s);
        s.handle_bytes(now, &reply(PING_XID, 3, 0, &()));
        assert_eq!(s.last_heard(), at(100), "a read-only server's answer");
    }
    assert_eq!(now, at(4000));
    assert_eq!(s.state(), State::ConnectedReadOnly);
    s.handle_timeout(expiry - Duration::from_millis(1));
    assert_eq!(s.state(), State::ConnectedReadOnly);
    s.handle_timeout(expiry);
    assert_eq!(s.state(), State::Expired);
    assert_eq!(s.fatal_error(), Some(&Error::SessionExpired));
}

/// A read-only server that resumes a session (before 3.8) with a shorter
/// grant than the quorum's closes the connection after that grant's idle
/// time: the pings and the read timeout go by it while connected there,
/// the session's expiry still by the quorum's grant, and the next
/// read-write server's handshake sets them back. Before, the pings went by
/// the quorum's timeout, 1 s apart here against the server's 900 ms.
#[test]
fn a_read_only_servers_shorter_grant_sets_the_pings_of_its_connection() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected_read_only_allowed(start);
    assert_eq!(s.ping_interval(), Duration::from_millis(1000));
    to_next_host(&mut s, at(200), at(300));
    let resumed = |timeout_ms, read_only| {
        frame(&ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id: 0x1234,
            passwd: vec![7; 16],
            read_only,
        })
    };
    s.handle_bytes(at(400), &resumed(900, true));
    assert_eq!(s.state(), State::ConnectedReadOnly);
    assert_eq!(s.negotiated_timeout(), Some(TIMEOUT));
    assert_eq!(s.read_timeout(), Duration::from_millis(600));
    assert_eq!(s.ping_interval(), Duration::from_millis(300));
    assert_eq!(s.poll_timeout(), Some(at(400 + 300)));
    s.handle_timeout(at(700));
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(header(&frames[0]).xid, PING_XID);
    // A longer grant than the quorum's changes nothing.
    to_next_host(&mut s, at(800), at(900));
    s.handle_bytes(at(1000), &resumed(60_000, true));
    assert_eq!(s.read_timeout(), TIMEOUT * 2 / 3);
    // Nor does a read-write server's handshake keep the read-only one's.
    to_next_host(&mut s, at(1100), at(1200));
    s.handle_bytes(at(1300), &resumed(900, true));
    assert_eq!(s.read_timeout(), Duration::from_millis(600));
    to_next_host(&mut s, at(1400), at(1500));
    s.handle_bytes(at(1600), &resumed(3000, false));
    assert_eq!(s.state(), State::Connected);
    assert_eq!(s.read_timeout(), Duration::from_millis(2000));
    assert_eq!(s.ping_interval(), Duration::from_millis(1000));
}
