//! The write deadline: the moment a write blocked in a full send buffer
//! must give way, because `handle_timeout` then drops the connection.

use std::time::{Duration, Instant};

use super::tests::{accepted, config, connected_with, get_data, sent};
use super::*;

#[test]
fn the_write_deadline_is_the_earliest_deadline_that_drops_the_connection() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let config = SessionConfig {
        request_timeout: Some(Duration::from_millis(500)),
        ..config()
    };
    let mut s = Session::<u32, u32>::new(config, vec!["127.0.0.1:1".into()], start);
    assert_eq!(s.write_deadline(), None, "no connection");
    s.handle_connected(at(0));
    assert_eq!(s.write_deadline(), Some(at(1000)), "the handshake's");
    sent(&mut s);
    s.handle_bytes(at(100), &accepted(0x1234, 3000));
    // The read timeout's (2/3 of the session timeout), not the ping's.
    assert_eq!(s.write_deadline(), Some(at(2100)));
    assert_eq!(s.poll_timeout(), Some(at(1100)), "the ping is sooner");
    s.submit(at(200), OpCode::GetData, &get_data("/app/a"), 1, None)
        .unwrap();
    assert_eq!(s.write_deadline(), Some(at(700)), "the request's");
    s.handle_timeout(at(700));
    assert!(matches!(s.poll_disconnect(), Some(Error::Timeout { .. })));
    s.handle_disconnected(at(700));
    assert_eq!(s.write_deadline(), None);
}

#[test]
fn a_close_bounds_the_write_of_closesession() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected_with(config(), start);
    s.close(at(10));
    // The connect timeout (1 s) after the close, before the read timeout.
    assert_eq!(s.write_deadline(), Some(at(1010)));
}

/// A driver blocked in a read wakes only at the timeout it set: no longer
/// than a deadline that another thread's call could bring meanwhile. With
/// a short connect timeout, a close on a silent connection would otherwise
/// end up to the driver's longest wait late.
#[test]
fn a_blind_wait_is_no_longer_than_a_deadline_a_call_could_bring() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let ms = Duration::from_millis;
    let hosts = |n: usize| (1..=n).map(|i| format!("127.0.0.1:{i}")).collect();
    let connect = |config: SessionConfig, n: usize| {
        let mut s = Session::<u32, u32>::new(config, hosts(n), start);
        s.handle_connected(at(0));
        sent(&mut s);
        s.handle_bytes(at(0), &accepted(0x1234, 3000));
        s
    };
    // A close gives closeSession the whole connect timeout with one host,
    // its share of it with more.
    assert_eq!(connect(config(), 1).longest_blind_wait(), Some(ms(1000)));
    let mut s = connect(config(), 4);
    assert_eq!(s.longest_blind_wait(), Some(ms(250)));
    s.close(at(10));
    assert_eq!(s.poll_timeout(), Some(at(260)), "closeSession's share");
    assert_eq!(
        s.longest_blind_wait(),
        None,
        "closing: its timers are known"
    );
    // A request timeout, when sooner.
    let config = SessionConfig {
        request_timeout: Some(ms(100)),
        ..config()
    };
    assert_eq!(
        connect(config.clone(), 4).longest_blind_wait(),
        Some(ms(100))
    );
    let mut s = connect(config, 1);
    s.close(at(10));
    assert_eq!(s.longest_blind_wait(), Some(ms(100)));
}
