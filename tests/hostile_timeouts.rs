//! The request timeout against fake servers (`hostile::Hostile`) that stop
//! answering or reading while the connection stays up: a call must fail
//! with the `Timeout` that names `request_timeout`, whatever the request
//! (an auth packet too) and whichever thread is stuck writing it, not with
//! the `ConnectionLoss` of the much later read timeout, and never hang.
//! Without one set, a call waits at most twice the session timeout, and
//! `connect` waits for a digest's answer no longer than `connect_timeout`.
//! Every call runs under a time bound.

mod hostile;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hostile::{
    assert_logged, assert_no_client_panics, capture_log, connect_to, watch_client_panics, within,
    After, Hostile, Peer,
};
use zklock::proto::{OpCode, PING_XID};
use zklock::{Client, Deadline, Error, Stat, State};

/// Every call and every wait for the client is bounded by this.
const BOUND: Duration = Duration::from_secs(20);
/// What the fake servers negotiate: a read timeout of 20 s, so that only
/// the request timeout can fail a call within [`BOUND`].
const HOSTILE_TIMEOUT_MS: i32 = 30_000;

fn setup() {
    watch_client_panics();
    capture_log();
}

/// The error of a call whose reply did not come within `after`. Tests run
/// in parallel and share the log, so each uses a request timeout of its
/// own, to find its own line there.
fn request_timed_out(after: Duration) -> Error {
    Error::Timeout {
        deadline: Deadline::Request,
        after,
    }
}

fn logged_drop(after: Duration) -> String {
    format!("dropping connection: {}", request_timed_out(after))
}

/// Accepts the handshake and reads an auth packet, which it never answers;
/// it keeps reading (and answers nothing) until the client leaves.
fn mute_on_auth(peer: &mut Peer) -> io::Result<After> {
    peer.handshake(HOSTILE_TIMEOUT_MS)?;
    peer.expect_request(OpCode::Auth)?;
    Ok(After::Hold)
}

#[test]
fn an_unanswered_add_auth_fails_at_the_request_timeout() {
    setup();
    let after = Duration::from_millis(310);
    let h = Hostile::start(mute_on_auth);
    let client = connect(&h, after);
    let caller = client.clone();
    let result = within(BOUND, "add_auth", move || {
        caller.add_auth("digest", b"user:password")
    });
    assert_eq!(result, Err(request_timed_out(after)));
    assert_logged(&logged_drop(after), BOUND);
    let report = h.next_report(BOUND);
    assert_eq!(report.script_error, None, "{report:?}");
    assert!(
        report.closed_after.is_some(),
        "the client kept the connection: {report:?}"
    );
    // The fake server answers no closeSession either.
    drop(client);
    assert_no_client_panics();
}

#[test]
fn an_unanswered_digest_of_the_builder_fails_the_connect_at_the_request_timeout() {
    setup();
    let after = Duration::from_millis(320);
    let h = Hostile::start(mute_on_auth);
    let connect_string = h.connect_string();
    let result = within(BOUND, "connect", move || {
        Client::builder()
            .digest("user", "password")
            .request_timeout(Some(after))
            .connect_timeout(Duration::from_secs(1))
            .connect(&connect_string)
    });
    assert_eq!(result.map(drop), Err(request_timed_out(after)));
    assert_logged(&logged_drop(after), BOUND);
    assert_no_client_panics();
}

/// With no request timeout set, a builder's digest that a server never
/// answers fails the connect at `connect_timeout`, counted from the
/// handshake, long before the default request timeout. Before, `connect` waited
/// for ever.
#[test]
fn an_unanswered_digest_of_the_builder_fails_the_connect_at_the_connect_timeout() {
    setup();
    let connect_timeout = Duration::from_millis(700);
    let h = Hostile::start(mute_on_auth);
    let connect_string = h.connect_string();
    let started = Instant::now();
    let result = within(BOUND, "connect", move || {
        Client::builder()
            .digest("user", "password")
            .connect_timeout(connect_timeout)
            .connect(&connect_string)
    });
    assert_eq!(
        result.map(drop),
        Err(Error::Timeout {
            deadline: Deadline::ConnectAuth,
            after: connect_timeout,
        })
    );
    assert!(started.elapsed() >= connect_timeout);
    let report = h.next_report(BOUND);
    assert_eq!(report.script_error, None, "{report:?}");
    assert_no_client_panics();
}

/// What the fake servers of the write tests negotiate: a read timeout of
/// 6 s, after which the connection counts as dead and a call in flight
/// fails with `ConnectionLoss`, well within [`BOUND`].
const WRITE_TESTS_TIMEOUT_MS: i32 = 9_000;

/// The setData calls of the write tests: 8 MB together, far more than the
/// socket buffers take (about 3 MB on loopback) while nothing reads them.
const CALLS: usize = 8;
const CALL_BYTES: usize = 1_000_000;

/// Submits the [`CALLS`] setData calls at once (one lock of the session),
/// writes them from this thread if connected, and waits for their replies.
fn big_writes(client: &Client) -> Vec<zklock::Result<Stat>> {
    let data = vec![7u8; CALL_BYTES];
    let paths: Vec<String> = (0..CALLS).map(|i| format!("/big-{i}")).collect();
    let writes: Vec<(&str, &[u8], Option<i32>)> = paths
        .iter()
        .map(|p| (p.as_str(), &data[..], None))
        .collect();
    zklock::testing::set_data_together(client, &writes)
}

/// What the calls get when the first times out: the timeout, and the
/// others, sent after it, the loss of the connection it drops.
fn first_timed_out(after: Duration) -> Vec<zklock::Result<Stat>> {
    let mut results = vec![Err(request_timed_out(after))];
    results.resize(CALLS, Err(Error::ConnectionLoss));
    results
}

/// A client of `hostile`, with `after` as its request timeout and calls
/// that each go as a request of their own.
fn connect(hostile: &Hostile, after: Duration) -> Client {
    connect_to(hostile, BOUND, move |builder| {
        builder.request_timeout(Some(after)).batch_writes(false)
    })
}

#[test]
fn the_request_timeout_fires_while_the_io_thread_is_stuck_writing() {
    setup();
    let after = Duration::from_millis(330);
    let (close_first_tx, close_first_rx) = crossbeam_channel::bounded::<()>(1);
    let (answer_tx, answer_rx) = crossbeam_channel::bounded::<()>(1);
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
    let connections = AtomicUsize::new(0);
    let h = Hostile::start(move |peer| {
        match connections.fetch_add(1, Ordering::SeqCst) {
            // The first connection makes the session, then closes when told.
            0 => {
                peer.handshake(WRITE_TESTS_TIMEOUT_MS)?;
                let _ = close_first_rx.recv_timeout(BOUND);
                Ok(After::Close)
            }
            // The second answers the handshake once the calls wait for it,
            // so that the I/O thread, handling the answer, writes them; then
            // it reads nothing.
            1 => {
                let request = peer.read_connect()?;
                let _ = answer_rx.recv_timeout(BOUND);
                peer.accept(&request, WRITE_TESTS_TIMEOUT_MS)?;
                let _ = release_rx.recv_timeout(BOUND);
                Ok(After::Close)
            }
            _ => {
                peer.handshake(WRITE_TESTS_TIMEOUT_MS)?;
                Ok(After::Hold)
            }
        }
    });
    let client = connect(&h, after);
    let states = client.state_changes();
    close_first_tx.send(()).expect("the first connection waits");
    assert_eq!(states.recv_timeout(BOUND), Ok(State::Disconnected));
    let caller = client.clone();
    let calls = std::thread::spawn(move || big_writes(&caller));
    let waited = Instant::now();
    while client.queued_request_count() < CALLS {
        assert!(waited.elapsed() < BOUND, "the calls were never made");
        std::thread::sleep(Duration::from_millis(5));
    }
    answer_tx.send(()).expect("the second connection waits");
    let results = within(BOUND, "the calls", move || calls.join().expect("caller"));
    assert_eq!(results, first_timed_out(after));
    assert_logged(&logged_drop(after), BOUND);
    let _ = release_tx.send(());
    drop(client);
    assert_no_client_panics();
}

#[test]
fn the_request_timeout_fires_while_a_calling_thread_is_stuck_writing() {
    setup();
    let after = Duration::from_millis(340);
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
    let connections = AtomicUsize::new(0);
    let h = Hostile::start(move |peer| {
        peer.handshake(WRITE_TESTS_TIMEOUT_MS)?;
        // The first connection reads nothing after the handshake.
        if connections.fetch_add(1, Ordering::SeqCst) == 0 {
            let _ = release_rx.recv_timeout(BOUND);
            return Ok(After::Close);
        }
        Ok(After::Hold)
    });
    let client = connect(&h, after);
    let caller = client.clone();
    let results = within(BOUND, "the calls", move || big_writes(&caller));
    assert_eq!(results, first_timed_out(after));
    assert_logged(&logged_drop(after), BOUND);
    let _ = release_tx.send(());
    drop(client);
    assert_no_client_panics();
}

/// How long the slow server below takes to answer: far past the request
/// timeout of its test, and within the I/O thread's longest idle wait
/// (1 s).
const SLOW_REPLY: Duration = Duration::from_millis(900);

/// Accepts the handshake, then answers one exists with `NoNode`, late.
fn slow_exists(peer: &mut Peer) -> io::Result<After> {
    peer.handshake(HOSTILE_TIMEOUT_MS)?;
    let xid = peer.expect_request(OpCode::Exists)?;
    std::thread::sleep(SLOW_REPLY);
    // The client has usually left by now.
    let _ = peer.send(&hostile::reply_frame(xid, -101, &[]));
    Ok(After::Hold)
}

/// A call made while the I/O thread waits for the idle connection's next
/// bytes (up to 1 s) still fails at its request timeout: the late reply,
/// which would wake that wait, comes after it. Made right after each
/// reconnect, when that wait has just begun.
#[test]
fn the_request_timeout_fires_while_the_io_thread_waits_on_an_idle_connection() {
    setup();
    // 650 ms before the late reply: room for a loaded machine.
    let after = Duration::from_millis(250);
    let h = Hostile::start(slow_exists);
    let client = connect(&h, after);
    let states = client.state_changes();
    for round in 0..4 {
        let caller = client.clone();
        let result = within(BOUND, "exists", move || caller.exists("/slow"));
        assert_eq!(result, Err(request_timed_out(after)), "round {round}");
        let mut seen = Vec::new();
        while seen.last() != Some(&State::Connected) {
            assert!(seen.len() < 10, "round {round}: {seen:?}");
            seen.push(states.recv_timeout(BOUND).expect("a state change"));
        }
    }
    drop(client);
    assert_no_client_panics();
}

/// Accepts the handshake with a 3 s session timeout (a 2 s read timeout),
/// then trickles a reply frame it never finishes: a byte every 200 ms, for
/// a minute at most.
fn trickle(peer: &mut Peer) -> io::Result<After> {
    peer.handshake(3_000)?;
    let frame = hostile::reply_frame(-2, 0, &[0; 1000]);
    for byte in frame.iter().take(300) {
        peer.send(&[*byte])?;
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(After::Close)
}

/// Bytes that never make a whole frame are no sign of life: the read
/// timeout drops the connection, and a call on it fails with
/// `ConnectionLoss` instead of waiting as long as the trickle lasts.
#[test]
fn a_frame_trickled_and_never_finished_does_not_keep_the_connection() {
    setup();
    let h = Hostile::start(trickle);
    let client = connect_to(&h, BOUND, |builder| builder);
    let caller = client.clone();
    let result = within(BOUND, "exists", move || caller.exists("/trickled"));
    assert_eq!(result, Err(Error::ConnectionLoss));
    drop(client);
    assert_no_client_panics();
}

/// Accepts the handshake with a 1.5 s session timeout and from then on
/// answers pings only, never a call: a real server answers a session's
/// pings after the calls sent before them, so this cannot happen there.
/// Stops after 200 frames or when the client leaves.
fn pings_only(peer: &mut Peer) -> io::Result<After> {
    peer.handshake(1_500)?;
    for _ in 0..200 {
        let payload = match peer.read_frame() {
            Ok(payload) => payload,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(After::Close),
            Err(e) => return Err(e),
        };
        let xid = payload
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_be_bytes);
        if xid == Some(PING_XID) {
            peer.reply(PING_XID, 0, &[])?;
        }
    }
    Ok(After::Close)
}

/// Without a request timeout, a call on a server that answers pings but
/// not the call fails at twice the session timeout asked for, with the
/// `Timeout` saying so, and the connection is dropped.
/// Before, it waited for as long as the server kept answering pings.
#[test]
fn without_a_request_timeout_a_server_answering_only_pings_fails_a_call_at_twice_the_session_timeout(
) {
    setup();
    let session_timeout = Duration::from_millis(1_500);
    let h = Hostile::start(pings_only);
    let client = connect_to(&h, BOUND, move |builder| {
        builder.session_timeout(session_timeout)
    });
    let caller = client.clone();
    let started = Instant::now();
    let result = within(BOUND, "exists", move || caller.exists("/never-answered"));
    assert_eq!(
        result,
        Err(Error::Timeout {
            deadline: Deadline::Unanswered,
            after: session_timeout * 2,
        })
    );
    assert!(started.elapsed() >= session_timeout * 2);
    let report = h.next_report(BOUND);
    assert_eq!(report.script_error, None, "{report:?}");
    drop(client);
    assert_no_client_panics();
}
