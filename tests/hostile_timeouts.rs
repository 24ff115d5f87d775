//! The request timeout against fake servers (`hostile::Hostile`) that stop
//! answering or reading while the connection stays up: a call must fail
//! with the `Timeout` that names `request_timeout`, whatever the request
//! (an auth packet too) and whichever thread is stuck writing it, not with
//! the `ConnectionLoss` of the much later read timeout, and never hang.
//! Every call runs under a time bound.

mod hostile;

use std::io;
use std::time::Duration;

use hostile::{
    assert_logged, assert_no_client_panics, capture_log, watch_client_panics, within, After,
    Hostile, Peer,
};
use zklock::proto::OpCode;
use zklock::{Client, Error};

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
        what: "the reply to a request (request_timeout)",
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
    let connect_string = h.connect_string();
    let client = within(BOUND, "connect", move || {
        Client::builder()
            .request_timeout(Some(after))
            .connect_timeout(Duration::from_secs(1))
            .connect(&connect_string)
    })
    .expect("connect to the fake server");
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
