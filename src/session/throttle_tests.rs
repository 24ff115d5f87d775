//! Background deletes the server throttles (ThrottledOp): nothing was
//! applied, and the connection stays up, so they go again on it after a
//! back-off, still ahead of any later request of the client.

use std::time::{Duration, Instant};

use super::tests::{
    connected, deleted_path, events, get_data, header, multi_ops, noted, reconnect, replies, reply,
    sent, TestSession,
};
use super::*;
use crate::proto::ErrorCode;

fn throttled() -> i32 {
    ErrorCode::ThrottledOp.code()
}

/// Answers the one delete `s` sent with `err` (and a ping sent with it, if
/// its time came too), and returns the delete's path.
fn answer_delete(s: &mut TestSession, now: Instant, err: i32) -> String {
    let mut frames = sent(s);
    let before = frames.len();
    frames.retain(|f| header(f).xid != PING_XID);
    assert_eq!(frames.len(), 1, "one request");
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 0, err, &()));
    if before > 1 {
        s.handle_bytes(now, &reply(PING_XID, 0, 0, &()));
    }
    deleted_path(&frames[0])
}

/// Sends the pings due before `until` and answers them, as a healthy
/// server keeps the connection up.
fn ping_until(s: &mut TestSession, until: Instant) {
    for _ in 0..4 {
        let Some(at) = s.poll_timeout().filter(|at| *at < until) else {
            return;
        };
        s.handle_timeout(at);
        let frames = sent(s);
        assert_eq!(frames.len(), 1);
        assert_eq!(header(&frames[0]).xid, PING_XID, "only a ping");
        s.handle_bytes(at, &reply(PING_XID, 0, 0, &()));
    }
    panic!("more pings than a back-off takes");
}

#[test]
fn a_throttled_background_delete_goes_again_after_a_growing_back_off() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    s.submit_background_delete(at(0), "/app/lock/n1".into(), -1)
        .unwrap();
    assert_eq!(answer_delete(&mut s, at(10), throttled()), "/app/lock/n1");
    assert!(sent(&mut s).is_empty(), "not at once");
    let mut due = 10;
    for back_off in [100, 200, 400, 800, 1600, 2000, 2000, 2000] {
        due += back_off;
        ping_until(&mut s, at(due));
        assert_eq!(s.poll_timeout(), Some(at(due)), "after {back_off} ms");
        s.handle_timeout(at(due - 1));
        assert!(sent(&mut s).is_empty(), "early, after {back_off} ms");
        s.handle_timeout(at(due));
        // Answered at once, as if throttled as it arrived.
        assert_eq!(answer_delete(&mut s, at(due), throttled()), "/app/lock/n1");
    }
    due += 2000;
    ping_until(&mut s, at(due));
    s.handle_timeout(at(due));
    assert_eq!(answer_delete(&mut s, at(due), 0), "/app/lock/n1");
    assert!(events(&mut s).is_empty());
    assert!(reconnect(&mut s, at(due)).is_empty(), "deleted for good");
}

#[test]
fn a_throttled_delete_goes_ahead_of_a_request_made_during_its_back_off() {
    let now = Instant::now();
    let mut s = with_a_throttled_delete(now);
    s.submit(now, OpCode::GetData, &get_data("/app/q"), 7, None)
        .unwrap();
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::Delete.code(), OpCode::GetData.code()]);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    // Sent: no timer for it any more (the ping is next).
    assert_eq!(s.poll_timeout(), Some(now + Duration::from_millis(1000)));
}

#[test]
fn a_throttled_noted_release_goes_again_as_a_plain_delete() {
    let start = Instant::now();
    let mut s = connected(start);
    s.defer_background_delete(start, noted("/app/lock/n1"), start)
        .unwrap();
    let frames = sent(&mut s);
    assert_eq!(multi_ops(&frames[0]).len(), 3);
    s.handle_bytes(start, &reply(header(&frames[0]).xid, 0, throttled(), &()));
    let due = start + Duration::from_millis(100);
    s.handle_timeout(due);
    assert_eq!(answer_delete(&mut s, due, 0), "/app/lock/n1");
    assert!(reconnect(&mut s, due).is_empty());
}

#[test]
fn a_throttled_delete_cut_off_by_a_disconnect_goes_once_with_the_reconnect() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    answer_delete(&mut s, now, throttled());
    s.handle_disconnected(now);
    let later = now + Duration::from_millis(500);
    let frames = reconnect(&mut s, later);
    assert_eq!(frames.len(), 1);
    assert_eq!(deleted_path(&frames[0]), "/app/lock/n1");
    s.handle_timeout(later + Duration::from_millis(100));
    assert!(sent(&mut s).is_empty(), "sent once");
    assert!(replies(&mut s).is_empty());
}

#[test]
fn a_withdrawn_delete_whose_transaction_was_throttled_goes_again_after_a_back_off() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut s = connected(start);
    s.defer_background_delete(at(0), Release::plain("/app/lock/n1"), at(50))
        .unwrap();
    // The next acquisition's transaction carries it, and is throttled.
    assert!(s.withdraw_deferred_delete("/app/lock").is_some());
    s.retry_withdrawn_delete(at(10), "/app/lock/n1");
    assert_eq!(s.poll_timeout(), Some(at(110)));
    s.handle_timeout(at(110));
    assert_eq!(answer_delete(&mut s, at(110), 0), "/app/lock/n1");
    assert!(reconnect(&mut s, at(120)).is_empty());

    // One settled before its back-off ends is not sent again.
    s.defer_background_delete(at(200), Release::plain("/app/lock/n2"), at(250))
        .unwrap();
    assert!(s.withdraw_deferred_delete("/app/lock").is_some());
    s.retry_withdrawn_delete(at(210), "/app/lock/n2");
    s.settle_withdrawn_delete(at(220), "/app/lock/n2", true);
    s.handle_timeout(at(310));
    assert!(sent(&mut s).is_empty());
}

#[test]
fn a_delete_throttled_after_closesession_was_sent_is_left_to_the_close() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    s.close(now);
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::Delete.code(), OpCode::CloseSession.code()]);
    s.handle_bytes(now, &reply(header(&frames[0]).xid, 0, throttled(), &()));
    // Nothing may follow closeSession, which ends the session (and takes
    // the node with it).
    assert_eq!(s.poll_timeout(), Some(now + Duration::from_millis(1000)));
    s.handle_timeout(now + Duration::from_millis(100));
    assert!(sent(&mut s).is_empty());
}

fn set_data(path: &str) -> crate::proto::SetDataRequest {
    crate::proto::SetDataRequest {
        path: path.into(),
        data: Some(b"v".to_vec()),
        version: -1,
    }
}

/// A session whose background delete of `/app/lock/n1` (xid 1) the
/// server throttled.
fn with_a_throttled_delete(now: Instant) -> TestSession {
    let mut s = connected(now);
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    answer_delete(&mut s, now, throttled());
    s
}

/// The opcodes and xids of the frames sent, and the delete's path.
fn sent_ops_and_xids(s: &mut TestSession) -> (Vec<(i32, i32)>, Option<String>) {
    let frames = sent(s);
    let deleted = frames
        .iter()
        .find(|f| header(f).op == OpCode::Delete.code())
        .map(|f| deleted_path(f));
    let ops = frames
        .iter()
        .map(|f| (header(f).op, header(f).xid))
        .collect();
    (ops, deleted)
}

/// A throttled delete sent ahead of a read is not cut out of the outbox
/// when a second read joins the first: both requests go, in order, and
/// every request in flight has its frame.
#[test]
fn a_throttled_delete_stays_ahead_of_reads_that_share_a_request() {
    let now = Instant::now();
    let mut s = with_a_throttled_delete(now);
    s.submit_read(now, BatchRead::Data(get_data("/app/a")), 1)
        .unwrap();
    s.submit_read(now, BatchRead::Data(get_data("/app/b")), 2)
        .unwrap();
    let (ops, deleted) = sent_ops_and_xids(&mut s);
    assert_eq!(
        ops,
        [(OpCode::Delete.code(), 2), (OpCode::MultiRead.code(), 3)]
    );
    assert_eq!(deleted.as_deref(), Some("/app/lock/n1"));
    assert_eq!(s.in_flight(), 2);
}

/// The same for setData calls that share a `multi`.
#[test]
fn a_throttled_delete_stays_ahead_of_writes_that_share_a_request() {
    let now = Instant::now();
    let mut s = with_a_throttled_delete(now);
    s.submit_write(now, set_data("/app/a"), 1).unwrap();
    s.submit_write(now, set_data("/app/b"), 2).unwrap();
    let (ops, deleted) = sent_ops_and_xids(&mut s);
    assert_eq!(ops, [(OpCode::Delete.code(), 2), (OpCode::Multi.code(), 3)]);
    assert_eq!(deleted.as_deref(), Some("/app/lock/n1"));
    assert_eq!(s.in_flight(), 2);
}

/// A read made after a delete was throttled does not join a batch sent
/// before it: it goes behind the delete, as any later request does.
#[test]
fn a_read_after_a_throttled_delete_does_not_join_a_batch_ahead_of_it() {
    let now = Instant::now();
    let mut s = connected(now);
    s.submit_background_delete(now, "/app/lock/n1".into(), -1)
        .unwrap();
    let delete = sent(&mut s);
    assert_eq!(delete.len(), 1);
    // A read goes out behind the delete, and stays open to company.
    s.submit_read(now, BatchRead::Data(get_data("/app/a")), 1)
        .unwrap();
    s.handle_bytes(now, &reply(header(&delete[0]).xid, 0, throttled(), &()));
    s.submit_read(now, BatchRead::Data(get_data("/app/b")), 2)
        .unwrap();
    let (ops, deleted) = sent_ops_and_xids(&mut s);
    assert_eq!(
        ops,
        [
            (OpCode::GetData.code(), 2),
            (OpCode::Delete.code(), 3),
            (OpCode::GetData.code(), 4)
        ]
    );
    assert_eq!(deleted.as_deref(), Some("/app/lock/n1"));
}

/// Shared by background deletes and the lock recipes' retries.
#[test]
fn the_throttled_back_off_doubles_from_100_ms_up_to_2_s() {
    let times = [0, 1, 2, 3, 4, 5, 6, 17, u32::MAX];
    let millis = times.map(|t| throttled_back_off(t).as_millis());
    assert_eq!(millis, [100, 100, 200, 400, 800, 1600, 2000, 2000, 2000]);
}

/// A session with a data watch on `/app/w` set as of zxid 20, reconnected:
/// returns the re-registration record it sent (one frame).
fn rewatching(start: Instant) -> (TestSession, Vec<u8>) {
    rewatching_paths(start, &["/app/w"])
}

/// [`rewatching`] with a data watch on each of `paths`, all in one record.
fn rewatching_paths(start: Instant, paths: &[&str]) -> (TestSession, Vec<u8>) {
    let mut s = connected(start);
    for (token, path) in (1..).zip(paths) {
        watch_data(&mut s, start, token, path, 20);
    }
    let mut frames = reconnect(&mut s, start);
    events(&mut s);
    assert_eq!(frames.len(), 1, "one re-registration record");
    let frame = frames.remove(0);
    let (zxid, mut watched) = set_watches_of(&frame);
    watched.sort();
    assert_eq!(
        (zxid, watched),
        (20, paths.iter().map(|p| p.to_string()).collect())
    );
    (s, frame)
}

/// Sets a data watch on `path` with a getData (`token`) answered as of
/// `zxid`.
fn watch_data(s: &mut TestSession, now: Instant, token: u32, path: &str, zxid: i64) {
    let watch = WatchRequest {
        kind: WatchKind::Data,
        path: path.into(),
        watcher: 5,
    };
    let request = crate::proto::GetDataRequest {
        path: path.into(),
        watch: true,
    };
    s.submit(now, OpCode::GetData, &request, token, Some(watch))
        .unwrap();
    let xid = header(&sent(s)[0]).xid;
    s.handle_bytes(now, &reply(xid, zxid, 0, &super::tests::data_v()));
    events(s);
}

/// The relative zxid and data watches of a setWatches frame.
fn set_watches_of(frame: &[u8]) -> (i64, Vec<String>) {
    assert_eq!(header(frame).op, OpCode::SetWatches.code());
    let record = crate::proto::SetWatches::from_bytes(&frame[8..]).unwrap();
    (record.relative_zxid, record.data_watches)
}

#[test]
fn a_throttled_set_watches_goes_again_on_the_same_connection_after_a_back_off() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let (mut s, first) = rewatching(start);
    s.handle_bytes(at(10), &reply(header(&first).xid, 0, throttled(), &()));
    assert!(sent(&mut s).is_empty(), "not at once");
    let mut due = 10;
    for back_off in [100, 200] {
        due += back_off;
        assert_eq!(s.poll_timeout(), Some(at(due)), "after {back_off} ms");
        s.handle_timeout(at(due - 1));
        assert!(sent(&mut s).is_empty(), "early, after {back_off} ms");
        s.handle_timeout(at(due));
        let frames = sent(&mut s);
        assert_eq!(frames.len(), 1);
        // The same record: the watches as of the zxid they were set at.
        assert_eq!(set_watches_of(&frames[0]), set_watches_of(&first));
        assert_ne!(header(&frames[0]).xid, header(&first).xid);
        let err = if back_off == 100 { throttled() } else { 0 };
        s.handle_bytes(at(due), &reply(header(&frames[0]).xid, 0, err, &()));
    }
    assert!(events(&mut s).is_empty());
    // Answered: nothing more to send, and the next reconnect sets the
    // watch as of the last zxid seen.
    s.handle_timeout(at(due + 500));
    assert!(sent(&mut s).is_empty());
    s.submit(at(due), OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    let xid = header(&sent(&mut s)[0]).xid;
    s.handle_bytes(at(due), &reply(xid, 30, 0, &super::tests::data_v()));
    let frames = reconnect(&mut s, at(due));
    assert_eq!(set_watches_of(&frames[0]), (30, vec!["/app/w".to_owned()]));
}

/// A request made while a throttled re-registration backs off goes after
/// it: its reply could otherwise show data newer than a change whose event
/// the re-registration is still to bring.
#[test]
fn a_request_made_during_a_set_watches_back_off_goes_after_it() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let (mut s, first) = rewatching(start);
    s.handle_bytes(at(10), &reply(header(&first).xid, 0, throttled(), &()));
    assert!(sent(&mut s).is_empty(), "backing off");
    s.submit(at(11), OpCode::GetData, &get_data("/app/w"), 2, None)
        .unwrap();
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(
        ops,
        [OpCode::SetWatches.code(), OpCode::GetData.code()],
        "the re-registration first, its back-off cut short"
    );
    assert_eq!(set_watches_of(&frames[0]), (20, vec!["/app/w".to_owned()]));
    // Sent once: its back-off's end sends nothing more.
    s.handle_timeout(at(500));
    assert!(sent(&mut s).iter().all(|f| header(f).xid == PING_XID));
}

/// A delayed request (a look again after a back-off, say) that falls due
/// a moment before a throttled re-registration, both handled in the same
/// tick, goes after it, as a request made during its back-off does.
/// Before, it went first, and its reply could show data newer than a
/// change whose event the re-registration was still to bring.
#[test]
fn a_delayed_request_due_in_the_same_tick_as_a_set_watches_goes_after_it() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let (mut s, first) = rewatching(start);
    s.handle_bytes(at(10), &reply(header(&first).xid, 0, throttled(), &()));
    assert!(sent(&mut s).is_empty(), "backing off");
    // The re-registration is due at 110 ms; the read a millisecond before.
    s.submit_at(
        at(11),
        at(109),
        OpCode::GetData,
        &get_data("/app/w"),
        2,
        None,
    )
    .unwrap();
    assert!(sent(&mut s).is_empty(), "neither due yet");
    s.handle_timeout(at(110));
    let ops: Vec<i32> = sent(&mut s).iter().map(|f| header(f).op).collect();
    assert_eq!(
        ops,
        [OpCode::SetWatches.code(), OpCode::GetData.code()],
        "the re-registration first"
    );
}

#[test]
fn a_throttled_set_watches_cut_off_goes_with_the_next_handshake_as_of_its_zxid() {
    let start = Instant::now();
    let (mut s, first) = rewatching(start);
    // A request sent before the throttle's answer came, answered after it,
    // raises the last zxid seen while the watch is unset on the server from
    // zxid 20 on.
    s.submit(start, OpCode::GetData, &get_data("/app/q"), 2, None)
        .unwrap();
    let xid = header(&sent(&mut s)[0]).xid;
    s.handle_bytes(start, &reply(header(&first).xid, 0, throttled(), &()));
    s.handle_bytes(start, &reply(xid, 30, 0, &super::tests::data_v()));
    events(&mut s);
    let frames = reconnect(&mut s, start);
    assert_eq!(frames.len(), 1, "one re-registration, not the old one too");
    assert_eq!(set_watches_of(&frames[0]), (20, vec!["/app/w".to_owned()]));
    // Dropped with its connection: the back-off sends nothing more.
    s.handle_timeout(start + Duration::from_millis(500));
    assert!(sent(&mut s).iter().all(|f| header(f).xid == PING_XID));
}

/// A throttled re-registration whose back-off ends in the tick that drops
/// the connection (its read timeout) goes with that connection: the next
/// handshake sets every watch again, as of the older zxid, and the old
/// record is not sent after it (it would count as one of the new
/// re-registration's records, and set watches since removed).
#[test]
fn a_throttled_set_watches_due_as_the_connection_times_out_is_not_sent_after_the_next() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let (mut s, first) = rewatching(start);
    s.handle_bytes(at(10), &reply(header(&first).xid, 0, throttled(), &()));
    // Due at 110 ms, handled only with the read timeout (2/3 of 3 s).
    s.handle_timeout(at(2010));
    assert!(s.poll_disconnect().is_some(), "the read timeout");
    assert!(sent(&mut s).iter().all(|f| header(f).xid == PING_XID));
    let frames = reconnect(&mut s, at(2100));
    assert_eq!(frames.len(), 1, "one re-registration, not the old one too");
    assert_eq!(set_watches_of(&frames[0]), (20, vec!["/app/w".to_owned()]));
    s.handle_timeout(at(2100));
    assert!(sent(&mut s).iter().all(|f| header(f).xid == PING_XID));
}

#[test]
fn a_set_watches_throttled_while_closing_is_not_sent_again() {
    let start = Instant::now();
    let (mut s, first) = rewatching(start);
    s.close(start);
    let frames = sent(&mut s);
    assert_eq!(header(&frames[0]).op, OpCode::CloseSession.code());
    s.handle_bytes(start, &reply(header(&first).xid, 0, throttled(), &()));
    s.handle_timeout(start + Duration::from_secs(3));
    assert!(
        sent(&mut s).iter().all(|f| header(f).xid == PING_XID),
        "nothing but pings after closeSession"
    );
}

#[test]
fn a_re_registration_is_confirmed_only_once_every_record_is() {
    let start = Instant::now();
    // Room for one watch per record: two records.
    let config = SessionConfig {
        max_request: 50,
        ..super::tests::config()
    };
    let mut s = super::tests::connected_with(config, start);
    for (token, path) in [(1, "/app/w1"), (2, "/app/w2")] {
        let watch = WatchRequest {
            kind: WatchKind::Data,
            path: path.into(),
            watcher: 5,
        };
        let request = crate::proto::GetDataRequest {
            path: path.into(),
            watch: true,
        };
        s.submit(start, OpCode::GetData, &request, token, Some(watch))
            .unwrap();
        let xid = header(&sent(&mut s)[0]).xid;
        s.handle_bytes(start, &reply(xid, 20, 0, &super::tests::data_v()));
    }
    events(&mut s);
    let records = reconnect(&mut s, start);
    assert_eq!(records.len(), 2);
    // One confirmed, one throttled; a reply to a request sent before the
    // throttle's answer came raises the last zxid.
    s.submit(start, OpCode::GetData, &get_data("/app/q"), 3, None)
        .unwrap();
    let xid = header(&sent(&mut s)[0]).xid;
    s.handle_bytes(start, &reply(header(&records[0]).xid, 0, 0, &()));
    s.handle_bytes(start, &reply(header(&records[1]).xid, 0, throttled(), &()));
    s.handle_bytes(start, &reply(xid, 30, 0, &super::tests::data_v()));
    events(&mut s);
    // Cut off before the throttled record went again: every watch is set
    // again as of zxid 20.
    let records = reconnect(&mut s, start);
    let zxids: Vec<i64> = records.iter().map(|f| set_watches_of(f).0).collect();
    assert_eq!(zxids, [20, 20]);
    for record in &records {
        s.handle_bytes(start, &reply(header(record).xid, 0, 0, &()));
    }
    // Both confirmed: the next reconnect goes by the last zxid seen.
    let records = reconnect(&mut s, start);
    let zxids: Vec<i64> = records.iter().map(|f| set_watches_of(f).0).collect();
    assert_eq!(zxids, [30, 30]);
}

/// A throttled re-registration goes again without the watches whose
/// watchers were all forgotten during its back-off (a dropped persistent
/// watch, whose removal was sent meanwhile, would otherwise be set again);
/// one left with none goes no more, neither ahead of a request nor when
/// due.
#[test]
fn a_throttled_set_watches_goes_again_without_the_watches_forgotten_meanwhile() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let (mut s, first) = rewatching_paths(start, &["/app/w", "/app/x"]);
    s.handle_bytes(at(10), &reply(header(&first).xid, 0, throttled(), &()));
    assert_eq!(s.forget_watchers(WatchKind::Data, "/app/x", |_| true), 1);
    s.handle_timeout(at(110));
    let frames = sent(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!(set_watches_of(&frames[0]), (20, vec!["/app/w".to_owned()]));

    s.handle_bytes(at(120), &reply(header(&frames[0]).xid, 0, throttled(), &()));
    assert_eq!(s.forget_watchers(WatchKind::Data, "/app/w", |_| true), 1);
    s.submit(at(130), OpCode::GetData, &get_data("/app/q"), 9, None)
        .unwrap();
    let frames = sent(&mut s);
    let ops: Vec<i32> = frames.iter().map(|f| header(f).op).collect();
    assert_eq!(ops, [OpCode::GetData.code()], "no empty re-registration");
    s.handle_bytes(
        at(140),
        &reply(header(&frames[0]).xid, 25, 0, &super::tests::data_v()),
    );
    s.handle_timeout(at(1000));
    assert!(sent(&mut s).iter().all(|f| header(f).xid == PING_XID));
    // Nothing left to confirm: the next reconnect sets a new watch as of
    // the last zxid seen, not as of the old record's.
    watch_data(&mut s, at(1000), 10, "/app/y", 30);
    let frames = reconnect(&mut s, at(1000));
    assert_eq!(set_watches_of(&frames[0]), (30, vec!["/app/y".to_owned()]));
}

/// A read that would join a batch sent before a re-registration was
/// throttled goes after the re-registration instead, its back-off cut
/// short: joined to the earlier frame, it would overtake it.
#[test]
fn a_read_during_a_set_watches_back_off_does_not_join_a_batch_ahead_of_it() {
    let start = Instant::now();
    let (mut s, first) = rewatching(start);
    let read = |path: &str| BatchRead::Data(get_data(path));
    s.submit_read(start, read("/app/a"), 2).unwrap();
    s.handle_bytes(start, &reply(header(&first).xid, 0, throttled(), &()));
    s.submit_read(start, read("/app/b"), 3).unwrap();
    let ops: Vec<i32> = sent(&mut s).iter().map(|f| header(f).op).collect();
    assert_eq!(
        ops,
        [
            OpCode::GetData.code(),
            OpCode::SetWatches.code(),
            OpCode::GetData.code()
        ]
    );
}

/// A re-registration refused with an error other than a throttle leaves
/// its watches unset on the server: the connection is dropped, so that the
/// next handshake sets them again, as of the zxid it was sent with. Three
/// refusals in a row are all: the fourth leaves the connection up (and the
/// watches unset), rather than reconnect for ever.
#[test]
fn a_set_watches_refused_otherwise_drops_the_connection_and_goes_again() {
    let start = Instant::now();
    let (mut s, mut record) = rewatching(start);
    let marshalling = ErrorCode::MarshallingError.code();
    for refusal in 1..=4 {
        s.handle_bytes(start, &reply(header(&record).xid, 0, marshalling, &()));
        if refusal == 4 {
            assert_eq!(s.poll_disconnect(), None, "refusal {refusal}");
            break;
        }
        assert!(s.poll_disconnect().is_some(), "refusal {refusal}");
        let mut frames = reconnect(&mut s, start);
        assert_eq!(set_watches_of(&frames[0]), (20, vec!["/app/w".to_owned()]));
        record = frames.remove(0);
    }
    assert_eq!(s.state(), State::Connected);
}

/// A server that does not know setWatches2 (3.5, during a downgrade or a
/// rolling upgrade) refuses a re-registration holding a persistent watch,
/// and closes the connection. The persistent watch ends, told as a
/// removal, and the next handshake sets the one-shot watch alone, in a
/// setWatches the server takes. Before, every handshake sent the same
/// setWatches2, refused and cut off again, for ever: the three refusals'
/// cap stopped only the client's own disconnects.
#[test]
fn persistent_watches_a_server_cannot_set_end_and_the_one_shot_ones_go_on() {
    let start = Instant::now();
    let mut s = connected(start);
    watch_data(&mut s, start, 1, "/app/w", 20);
    let xid = super::tests::add_persistent_watch(&mut s, start, "/app/p", 2, 7);
    s.handle_bytes(
        start,
        &reply(xid, 21, 0, &crate::proto::ErrorResponse { err: 0 }),
    );
    events(&mut s);
    for connection in 1..=5 {
        let frames = reconnect(&mut s, start);
        assert_eq!(frames.len(), 1, "connection {connection}");
        if header(&frames[0]).op == OpCode::SetWatches.code() {
            assert_eq!(set_watches_of(&frames[0]), (21, vec!["/app/w".to_owned()]));
            assert!(connection > 1);
            return;
        }
        assert_eq!(header(&frames[0]).op, OpCode::SetWatches2.code());
        let unimplemented = ErrorCode::Unimplemented.code();
        s.handle_bytes(start, &reply(header(&frames[0]).xid, 0, unimplemented, &()));
        let ended: Vec<(crate::proto::EventType, String)> = events(&mut s)
            .into_iter()
            .filter_map(|e| match e {
                Event::Watch { watchers, event } if watchers == [7] => {
                    Some((event.event_type, event.path))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            ended,
            [(
                crate::proto::EventType::PersistentWatchRemoved,
                "/p".to_owned()
            )]
        );
        assert_eq!(s.poll_disconnect(), Some(Error::Unimplemented));
    }
    panic!("setWatches2 sent on every connection");
}

/// The refusals' cap counts re-registrations, not records: one record
/// taken while another is refused is no end to the refusals. Before, the
/// record taken reset the count, and a server that took one record and
/// refused the other was reconnected to for ever.
#[test]
fn a_record_taken_beside_one_refused_does_not_reset_the_refusals() {
    let start = Instant::now();
    let mut s = connected(start);
    // Over 128 KiB of paths: two records.
    let long = "x".repeat(1000);
    for token in 1..=140 {
        watch_data(&mut s, start, token, &format!("/app/{long}/{token}"), 20);
    }
    let marshalling = ErrorCode::MarshallingError.code();
    for refusal in 1..=4 {
        let frames = reconnect(&mut s, start);
        assert_eq!(frames.len(), 2, "two records, refusal {refusal}");
        s.handle_bytes(start, &reply(header(&frames[0]).xid, 30, 0, &()));
        s.handle_bytes(start, &reply(header(&frames[1]).xid, 0, marshalling, &()));
        if refusal == 4 {
            assert_eq!(s.poll_disconnect(), None, "refusal {refusal}");
            return;
        }
        assert!(s.poll_disconnect().is_some(), "refusal {refusal}");
    }
}
