//! The I/O thread: connects, reads, and turns time and bytes into session
//! inputs. All protocol decisions are the session's.

use std::io::{self, Read};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select};

use super::connect::{connect_aside, note_failure, Lookups};
use super::core::{drain_events, ClientSession, Shared, Watcher};
use super::probe;
use crate::session::{Target, WatchKind};

/// Longest a blocking read or wait lasts before the loop looks around again.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Runs until the session is over (expired, auth failed or closed), or,
/// when a new session follows an expiry (which the session does within the
/// call that reports it), until that one is.
pub(crate) fn run(shared: Arc<Shared>, wake: Receiver<()>) {
    let _ends = EndsSessionOnPanic(shared.clone());
    let mut read_buf = vec![0u8; 64 * 1024];
    let mut lookups = Lookups::default();
    loop {
        let Some((target, not_before)) = next_attempt(&shared) else {
            return;
        };
        if !wait_until(&shared, &wake, not_before) {
            return;
        }
        let (attempt_timeout, hosts) = {
            let core = shared.core();
            (core.session.attempt_timeout(), core.session.host_count())
        };
        // With one host, an attempt that gave up on its lookup would only
        // wait for the same lookup again, after a pause.
        let lookup_timeout = (hosts > 1).then_some(attempt_timeout);
        let connected = connect_aside(
            &shared,
            &wake,
            &mut lookups,
            &target,
            lookup_timeout,
            attempt_timeout,
        );
        let Some(connected) = connected else {
            return;
        };
        let host = target.host();
        match connected {
            // The handshake has what the TCP connect left of the timeout,
            // counted from the lookup's answer (see `connect_aside`).
            Ok((stream, resolved)) => {
                serve(&shared, host, Arc::new(stream), &mut read_buf, resolved)
            }
            Err(e) => {
                log::debug!("connect to {host} failed: {e}");
                note_failure(&shared, host, &e.to_string());
                shared.core().session.handle_connect_failed(Instant::now());
            }
        }
    }
}

/// Ends the session if the I/O thread panics (a bug), with every call
/// waiting for a reply failed: nobody would read the socket again, and
/// those calls would wait for ever.
struct EndsSessionOnPanic(Arc<Shared>);

impl Drop for EndsSessionOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut events = Vec::new();
        {
            let mut core = self.0.core();
            core.session.abort(crate::Error::Internal(
                "the client's I/O thread panicked".into(),
            ));
            // The connection goes too, with whatever was still to be
            // written: a request whose caller was just told of the end must
            // not reach the server by a later flush.
            if let Some(stream) = core.stream.clone() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
            core.set_stream(None);
            core.session.handle_disconnected(Instant::now());
            drain_events(&mut core.session, &mut events);
        }
        // A callback panicking again here would abort the process.
        let dispatch = std::panic::AssertUnwindSafe(|| self.0.dispatch(&mut events));
        let _ = std::panic::catch_unwind(dispatch);
    }
}

/// Handles timers, then asks the session where to go next.
fn next_attempt(shared: &Arc<Shared>) -> Option<(Target, Instant)> {
    let now = Instant::now();
    let mut core = shared.core();
    core.session.handle_timeout(now);
    let next = core.session.next_host(now);
    let mut events = Vec::new();
    drain_events(&mut core.session, &mut events);
    drop(core);
    shared.dispatch(&mut events);
    next
}

/// Waits out the pause before the next attempt, which starts at `until`
/// or sooner if a `close` brings it forward, still serving timers
/// (requests waiting for a connection have deadlines). False if the
/// session ended meanwhile.
fn wait_until(shared: &Arc<Shared>, wake: &Receiver<()>, until: Instant) -> bool {
    let never = crossbeam_channel::never::<()>();
    let starts = |session: &ClientSession| {
        Some(
            session
                .attempt_start()
                .map_or(until, |starts| starts.min(until)),
        )
    };
    match serve_timers(shared, wake, starts, &never) {
        Waited::Over => false,
        Waited::Until | Waited::Got(_) => true,
    }
}

/// How [`serve_timers`] ended.
pub(super) enum Waited<T> {
    /// The session ended.
    Over,
    /// The time asked for came.
    Until,
    /// What was waited for arrived: `None` if its sender is gone instead.
    Got(Option<T>),
}

/// Serves the session's timers and `close` until the session ends, the
/// instant `until` gives comes (asked again after each timer and wake-up:
/// a close can bring it forward), or `arrival` delivers.
pub(super) fn serve_timers<T>(
    shared: &Arc<Shared>,
    wake: &Receiver<()>,
    until: impl Fn(&ClientSession) -> Option<Instant>,
    arrival: &Receiver<T>,
) -> Waited<T> {
    let mut events = Vec::new();
    let mut woken_by = Some(wake);
    loop {
        let now = Instant::now();
        let mut core = shared.core();
        core.session.handle_timeout(now);
        let over = core.session.fatal_error().is_some();
        let until = until(&core.session);
        let deadline = [core.session.poll_timeout(), until]
            .into_iter()
            .flatten()
            .min();
        drain_events(&mut core.session, &mut events);
        drop(core);
        shared.dispatch(&mut events);
        if over {
            return Waited::Over;
        }
        if until.is_some_and(|until| now >= until) {
            // What arrived by then still counts.
            return match arrival.try_recv() {
                Ok(arrived) => Waited::Got(Some(arrived)),
                Err(_) => Waited::Until,
            };
        }
        let wait = deadline.map_or(MAX_WAIT, |at| {
            at.saturating_duration_since(now).min(MAX_WAIT)
        });
        let mut select = Select::new();
        let arrival_index = select.recv(arrival);
        let wake_index = woken_by.map(|wake| select.recv(wake));
        let Ok(ready) = select.select_timeout(wait) else {
            continue;
        };
        if ready.index() == arrival_index {
            return Waited::Got(ready.recv(arrival).ok());
        }
        if let Some(wake) = woken_by.filter(|_| Some(ready.index()) == wake_index) {
            // Every handle is gone (the last dropped on one of our own
            // threads): nothing can wake us early any more.
            if ready.recv(wake).is_err() {
                woken_by = None;
            }
        }
    }
}

/// One connection's life: handshake, then reads until it is lost. The
/// attempt's time counts from `resolved`, when its host's name was.
fn serve(
    shared: &Arc<Shared>,
    host: &str,
    stream: Arc<TcpStream>,
    buf: &mut [u8],
    resolved: Instant,
) {
    {
        let mut core = shared.core();
        if core.session.fatal_error().is_some() {
            // The session ended (closed, say) while this connection was
            // being made: the session ignores it, so nothing would ever
            // drop it.
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
        core.set_stream(Some(stream.clone()));
        // A watch whose receivers are all dropped is not set again: the lost
        // connection took the server's with it.
        for kind in WatchKind::ALL {
            core.session
                .forget_watchers_everywhere(kind, Watcher::is_abandoned);
        }
        // Nor is one whose removal was owed.
        core.owed_removals.clear();
        shared.removals_owed.store(false, Ordering::SeqCst);
        core.session.handle_connected(resolved);
        // Before anything of the connection is taken in.
        shared
            .connections
            .store(core.session.connection_count(), Ordering::SeqCst);
    }
    let mut socket_read_timeout = SocketTimeout::default();
    // Looks for a read-write server while this connection is read-only,
    // and stops when dropped, with the connection. Started once (`Some`),
    // if a thread could be had (`Some(Some(_))`).
    let mut prober: Option<Option<probe::Prober>> = None;
    shared.flush();
    let mut events = Vec::new();
    loop {
        let timeout = {
            let core = shared.core();
            let now = Instant::now();
            let wait = core
                .session
                .poll_timeout()
                .map_or(MAX_WAIT, |t| t.saturating_duration_since(now).min(MAX_WAIT));
            core.session
                .longest_blind_wait()
                .map_or(wait, |limit| wait.min(limit))
                .max(Duration::from_millis(1))
        };
        socket_read_timeout.update(timeout, |t| stream.set_read_timeout(t));
        let read = (&*stream).read(buf);
        let now = Instant::now();
        let mut core = shared.core();
        let lost = match read {
            Ok(0) => Some("the server closed the connection".to_owned()),
            Ok(n) => {
                core.session
                    .handle_bytes(now, buf.get(..n).unwrap_or_default());
                None
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                None
            }
            Err(e) => Some(e.to_string()),
        };
        core.session.handle_timeout(now);
        let dropped = core.session.poll_disconnect().map(|e| e.to_string());
        if let Some(reason) = lost.or(dropped) {
            log::debug!("connection lost: {reason}");
            // A handshake that failed (rather than a session that ended) is
            // what a failed connect reports.
            let handshake_failed =
                !core.session.state().is_connected() && core.session.fatal_error().is_none();
            let _ = stream.shutdown(std::net::Shutdown::Both);
            core.set_stream(None);
            core.session.handle_disconnected(now);
            drain_events(&mut core.session, &mut events);
            drop(core);
            if handshake_failed {
                note_failure(shared, host, &reason);
            }
            shared.dispatch(&mut events);
            return;
        }
        drain_events(&mut core.session, &mut events);
        // The session's new bytes, or the rest of a write its deadline cut
        // short, which the timers just handled have not dropped.
        let has_transmit = core.has_transmit();
        // A lingering release left to the reply just handled, if it was the
        // last one due.
        let wake_timer = core.timer_needed();
        let probe_wanted = core.session.is_probing();
        drop(core);
        if probe_wanted && prober.is_none() {
            prober = Some(probe::spawn(shared.clone(), stream.clone()));
        }
        if wake_timer {
            shared.release_timer.notify_one();
        }
        shared.dispatch(&mut events);
        if has_transmit {
            shared.flush();
        }
    }
}

/// A socket timeout as last set, so that an unchanged one costs no system
/// call.
#[derive(Default)]
struct SocketTimeout(Option<Duration>);

impl SocketTimeout {
    /// Sets `wanted` with `set` unless it is already the timeout; a failed
    /// set is tried again next time.
    fn update(&mut self, wanted: Duration, set: impl FnOnce(Option<Duration>) -> io::Result<()>) {
        if self.0 != Some(wanted) && set(Some(wanted)).is_ok() {
            self.0 = Some(wanted);
        }
    }
}
