//! Looking for a read-write server while read-only, driven by hand: whom
//! the session asks and when, and what an answer does.

use std::time::{Duration, Instant};

use super::tests::{events, sent, states_of, TestSession};
use super::*;
use crate::proto::ConnectResponse;

const HOSTS: [&str; 3] = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"];

fn read_only_config() -> SessionConfig {
    SessionConfig {
        can_be_read_only: true,
        ..super::tests::config()
    }
}

/// The handshake's ConnectRequest, the only frame sent.
fn handshake(s: &mut TestSession) -> ConnectRequest {
    let frames = sent(s);
    assert_eq!(frames.len(), 1);
    ConnectRequest::from_bytes(&frames[0]).unwrap()
}

fn answer(s: &mut TestSession, now: Instant, session_id: i64, read_only: bool) {
    s.handle_bytes(
        now,
        &super::tests::frame(&ConnectResponse {
            protocol_version: 0,
            timeout_ms: 3000,
            session_id,
            passwd: vec![7; 16],
            read_only,
        }),
    );
}

/// A session connected to a read-only server: the host it is on.
fn on_read_only_server(hosts: &[&str], now: Instant) -> (TestSession, String) {
    let hosts_len = hosts.len();
    let hosts = hosts.iter().map(|h| h.to_string()).collect();
    let mut s = Session::new(read_only_config(), hosts, now);
    let host = s.next_host(now).unwrap().0.host;
    s.handle_connected(now);
    handshake(&mut s);
    answer(&mut s, now, 0x51, true);
    assert_eq!(states_of(&events(&mut s)), [State::ConnectedReadOnly]);
    assert_eq!(s.is_probing(), hosts_len > 1);
    (s, host)
}

/// The first probe of a session that became read-only at `now`: when it
/// is due, and the host it asks.
fn first_probe(s: &mut TestSession, now: Instant) -> (Instant, Target) {
    let due = now + FIRST_PROBE_INTERVAL;
    match s.poll_probe(due) {
        Probe::Ask(host) => (due, host),
        other => panic!("{other:?} when the first probe is due"),
    }
}

#[test]
fn a_read_only_session_asks_the_other_hosts_in_turn_at_doubling_waits() {
    let start = Instant::now();
    let (mut s, connected) = on_read_only_server(&HOSTS, start);
    let mut at = start;
    let mut asked = Vec::new();
    let mut wait = FIRST_PROBE_INTERVAL;
    for _ in 0..12 {
        assert_eq!(s.poll_probe(at), Probe::WaitUntil(at + wait));
        at += wait;
        match s.poll_probe(at) {
            Probe::Ask(target) => asked.push(target.host),
            other => panic!("{other:?} at a probe's due time"),
        }
        wait = (wait * 2).min(MAX_PROBE_INTERVAL);
        assert!(
            sent(&mut s).is_empty(),
            "a probe sends nothing on the session"
        );
    }
    assert_eq!(
        wait, MAX_PROBE_INTERVAL,
        "the waits stop doubling at the cap"
    );
    assert_eq!(s.poll_probe(at), Probe::WaitUntil(at + MAX_PROBE_INTERVAL));
    assert!(!asked.contains(&connected), "{asked:?}");
    assert_ne!(asked[0], asked[1]);
    for (i, host) in asked.iter().enumerate().skip(2) {
        assert_eq!(host, &asked[i % 2], "round-robin over the other two");
    }
    assert_eq!(s.poll_disconnect(), None);
    assert_eq!(s.state(), State::ConnectedReadOnly);
}

/// One name with two addresses (a headless service, say): the address not
/// connected to is asked, and is where the session goes on its `rw`.
#[test]
fn a_single_name_with_several_addresses_probes_its_other_address() {
    let now = Instant::now();
    let mut s: TestSession = Session::new(read_only_config(), vec!["headless:1".into()], now);
    let (connected, _) = s.next_host(now).unwrap();
    s.handle_resolved(&connected.host, 2);
    s.handle_connected(now);
    handshake(&mut s);
    answer(&mut s, now, 0x51, true);
    assert_eq!(states_of(&events(&mut s)), [State::ConnectedReadOnly]);
    assert!(s.is_probing());
    let (later, probed) = first_probe(&mut s, now);
    assert_eq!(probed.host, connected.host);
    assert_eq!(probed.turn, (connected.turn + 1) % 2, "the other address");
    assert!(s.handle_probe(&probed, true));
    assert_eq!(s.poll_disconnect(), Some(Error::ConnectionLoss));
    s.handle_disconnected(later);
    assert_eq!(s.next_host(later), Some((probed, later)), "at once, there");
}

#[test]
fn a_read_write_answer_moves_the_session_there_as_a_new_one() {
    let now = Instant::now();
    let (mut s, _) = on_read_only_server(&HOSTS, now);
    let (later, host) = first_probe(&mut s, now);
    assert!(s.handle_probe(&host, true));
    assert_eq!(s.poll_disconnect(), Some(Error::ConnectionLoss));
    assert_eq!(s.poll_probe(later), Probe::Stop);
    s.handle_disconnected(later);
    assert_eq!(states_of(&events(&mut s)), [State::Disconnected]);
    assert_eq!(s.next_host(later), Some((host, later)), "at once, there");
    s.handle_connected(later);
    let request = handshake(&mut s);
    assert_eq!(
        request.session_id, 0,
        "a read-only server's session is not valid elsewhere"
    );
    assert_eq!(request.passwd, [0; 16]);
    answer(&mut s, later, 0x77, false);
    assert_eq!(states_of(&events(&mut s)), [State::Connected]);
    assert_eq!(s.session_id(), 0x77);
    assert_eq!(s.poll_probe(later + MAX_PROBE_INTERVAL), Probe::Stop);
}

#[test]
fn a_read_only_answer_leaves_the_session_where_it_is() {
    let now = Instant::now();
    let (mut s, _) = on_read_only_server(&HOSTS, now);
    let (later, host) = first_probe(&mut s, now);
    assert!(!s.handle_probe(&host, false));
    assert_eq!(s.poll_disconnect(), None);
    assert_eq!(
        s.poll_probe(later),
        Probe::WaitUntil(later + FIRST_PROBE_INTERVAL * 2)
    );
}

#[test]
fn an_answer_that_lands_while_not_connected_read_only_is_ignored() {
    let now = Instant::now();
    let (mut s, _) = on_read_only_server(&HOSTS, now);
    let (later, host) = first_probe(&mut s, now);
    s.handle_disconnected(later);
    assert!(!s.handle_probe(&host, true));
    s.next_host(later).unwrap();
    s.handle_connected(later);
    handshake(&mut s);
    assert!(!s.handle_probe(&host, true));
    assert_eq!(s.poll_disconnect(), None, "the handshake goes on");
    answer(&mut s, later, 0x52, true);
    assert_eq!(
        s.poll_probe(later),
        Probe::WaitUntil(later + FIRST_PROBE_INTERVAL),
        "a new read-only connection probes from the start"
    );
}

#[test]
fn nothing_is_probed_when_read_write_or_with_no_other_host() {
    let now = Instant::now();
    let (mut alone, _) = on_read_only_server(&HOSTS[..1], now);
    assert_eq!(
        alone.poll_probe(now + Duration::from_secs(600)),
        Probe::Stop
    );
    let hosts = HOSTS.iter().map(|h| h.to_string()).collect();
    let mut s: TestSession = Session::new(read_only_config(), hosts, now);
    assert_eq!(s.poll_probe(now), Probe::Stop, "not connected");
    s.next_host(now).unwrap();
    s.handle_connected(now);
    handshake(&mut s);
    answer(&mut s, now, 0x53, false);
    assert_eq!(s.poll_probe(now + Duration::from_secs(600)), Probe::Stop);
    assert!(!s.is_probing());
}

#[test]
fn a_closing_session_stays_to_close_where_it_is() {
    let now = Instant::now();
    let (mut s, _) = on_read_only_server(&HOSTS, now);
    let (later, host) = first_probe(&mut s, now);
    s.close(later);
    assert!(!s.is_probing());
    assert!(!s.handle_probe(&host, true), "the answer comes too late");
    assert_eq!(s.poll_disconnect(), None);
    assert_eq!(s.poll_probe(later + MAX_PROBE_INTERVAL), Probe::Stop);
}

/// A session only a read-only server saw, whose close loses that
/// connection, is closed: nothing of it is on the ensemble. Before, the
/// close reconnected, asking a read-write server for a new session only to
/// close it (or, none in reach, ended in a `Timeout`).
#[test]
fn a_close_of_a_session_no_read_write_server_saw_ends_with_its_connection() {
    let now = Instant::now();
    let (mut s, _) = on_read_only_server(&HOSTS, now);
    let later = now + Duration::from_millis(10);
    s.close(later);
    assert_eq!(s.close_outcome(), None, "closeSession sent to the server");
    s.handle_disconnected(later);
    assert_eq!(s.close_outcome(), Some(Ok(())));
    assert_eq!(s.state(), State::Closed);
    assert_eq!(s.next_host(later), None, "no reconnect");
}

/// A read-write host behind the zxid the client has seen closes the
/// connection on its handshake. The session goes back to the read-only
/// member at once, and asks again; from the second move in a row on, the
/// move waits, the pause doubling up to two seconds, so the two servers are
/// not hammered in a loop.
#[test]
fn a_read_write_host_that_refuses_the_handshake_is_moved_to_at_growing_pauses() {
    let start = Instant::now();
    let (mut s, read_only) = on_read_only_server(&HOSTS[..2], start);
    let mut handshake_at = start;
    let mut pauses = Vec::new();
    for round in 0..6 {
        let (due, read_write) = first_probe(&mut s, handshake_at);
        assert!(s.handle_probe(&read_write, true), "move {round}");
        assert_eq!(s.poll_disconnect(), Some(Error::ConnectionLoss));
        s.handle_disconnected(due);
        let (to, at) = s.next_host(due).expect("a host");
        assert_eq!(to, read_write, "the address that answered");
        pauses.push((at - due).as_millis());
        s.handle_connected(at);
        assert_eq!(handshake(&mut s).session_id, 0, "a new session asked");
        // Refused: closed with no answer.
        s.handle_disconnected(at);
        assert_eq!(
            s.next_host(at).map(|(to, at)| (to.host, at)),
            Some((read_only.clone(), at)),
            "back to the read-only member at once"
        );
        s.handle_connected(at);
        assert_eq!(handshake(&mut s).session_id, 0);
        answer(&mut s, at, 0x60 + round, true);
        assert_eq!(
            states_of(&events(&mut s)),
            [State::Disconnected, State::ConnectedReadOnly]
        );
        handshake_at = at;
    }
    assert_eq!(pauses, [0, 250, 500, 1000, 2000, 2000]);
}

#[test]
fn a_session_only_read_only_servers_saw_does_not_expire_locally_and_a_new_one_follows() {
    let start = Instant::now();
    let (mut s, _) = on_read_only_server(&HOSTS, start);
    s.handle_disconnected(start);
    assert_eq!(states_of(&events(&mut s)), [State::Disconnected]);
    // Far past 4/3 of the negotiated 3000 ms without a server.
    let later = start + Duration::from_secs(60);
    s.handle_timeout(later);
    assert_eq!(s.state(), State::Disconnected);
    assert!(states_of(&events(&mut s)).is_empty());
    assert!(s.next_host(later).is_some());
    // The next handshake asks for a new session, which a read-write server
    // grants.
    s.handle_connected(later);
    let request = handshake(&mut s);
    assert_eq!(request.session_id, 0);
    answer(&mut s, later, 0x52, false);
    assert_eq!(states_of(&events(&mut s)), [State::Connected]);
    assert_eq!(s.session_id(), 0x52);
}
