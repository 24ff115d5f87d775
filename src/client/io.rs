//! The I/O thread: connects, reads, and turns time and bytes into session
//! inputs. All protocol decisions are the session's.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select};
use socket2::{Domain, Protocol, Socket, Type};

use super::core::{drain_events, lock, Shared};
use super::probe;
use crate::session::Target;

/// Longest a blocking read or wait lasts before the loop looks around again.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Runs until the session is over (expired, auth failed or closed), or,
/// when a new session follows an expiry (which the session does within the
/// call that reports it), until that one is.
pub(crate) fn run(shared: Arc<Shared>, wake: Receiver<()>) {
    let mut read_buf = vec![0u8; 64 * 1024];
    loop {
        let Some((target, not_before)) = next_attempt(&shared) else {
            return;
        };
        if !wait_until(&shared, &wake, not_before) {
            return;
        }
        let attempt_timeout = shared.core().session.attempt_timeout();
        let Some(connected) = connect_aside(&shared, &wake, &target, attempt_timeout) else {
            return;
        };
        let host = target.host;
        match connected {
            // The handshake has what the TCP connect left of the timeout:
            // the name lookup is the resolver's, as in the Java client, or
            // a resolver slower than the timeout would fail every attempt.
            Ok((stream, resolved)) => {
                serve(&shared, &host, Arc::new(stream), &mut read_buf, resolved)
            }
            Err(e) => {
                log::debug!("connect to {host} failed: {e}");
                *lock(&shared.last_connect_error) = Some(format!("{host}: {e}"));
                shared.core().session.handle_connect_failed(Instant::now());
            }
        }
    }
}

/// Handles timers, then asks the session where to go next.
fn next_attempt(shared: &Shared) -> Option<(Target, Instant)> {
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

/// Sleeps until `until`, still serving timers (requests waiting for a
/// connection have deadlines) and waking for `close`. False if the session
/// ended meanwhile.
fn wait_until(shared: &Shared, wake: &Receiver<()>, until: Instant) -> bool {
    let never = crossbeam_channel::never::<()>();
    match serve_timers(shared, wake, Some(until), &never) {
        Waited::Over => false,
        Waited::Until | Waited::Got(_) => true,
    }
}

/// How [`serve_timers`] ended.
enum Waited<T> {
    /// The session ended.
    Over,
    /// The time asked for came.
    Until,
    /// What was waited for arrived: `None` if its sender is gone instead.
    Got(Option<T>),
}

/// Serves the session's timers and `close` until the session ends, `until`
/// comes, or `arrival` delivers.
fn serve_timers<T>(
    shared: &Shared,
    wake: &Receiver<()>,
    until: Option<Instant>,
    arrival: &Receiver<T>,
) -> Waited<T> {
    let mut events = Vec::new();
    let mut woken_by = Some(wake);
    loop {
        let now = Instant::now();
        let mut core = shared.core();
        core.session.handle_timeout(now);
        let over = core.session.fatal_error().is_some();
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
            return Waited::Until;
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

/// What the connecting thread reports.
enum Connecting {
    /// The host's name was resolved at this instant, to this many
    /// addresses; the TCP connect has begun.
    Resolved(Instant, usize),
    /// The attempt's outcome.
    Done(io::Result<TcpStream>),
}

/// Resolves `host` and connects to it on a thread of its own, while this
/// one goes on serving the session's timers and `close`: a resolver with a
/// dead name server can take many seconds, and no request's deadline, local
/// expiry, `close` or `connect` budget may wait for it. `None` once the
/// session is over; the thread is then left to end on its own (its
/// connection, if it makes one, is dropped), after saying in the last
/// connect error where it was. A connection comes with the instant its
/// name was resolved.
fn connect_aside(
    shared: &Shared,
    wake: &Receiver<()>,
    target: &Target,
    timeout: Duration,
) -> Option<io::Result<(TcpStream, Instant)>> {
    let host = target.host();
    let (report, reports) = crossbeam_channel::bounded(2);
    let spawned = {
        let target = target.clone();
        std::thread::Builder::new()
            .name("zklock-connect".into())
            .spawn(move || {
                let connected = connect_reporting(&target, timeout, |distinct| {
                    let _ = report.send(Connecting::Resolved(Instant::now(), distinct));
                });
                let _ = report.send(Connecting::Done(connected));
            })
    };
    if let Err(e) = spawned {
        log::warn!("no thread to connect on ({e}): connecting on the I/O thread");
        let mut resolved = None;
        let connected = connect_reporting(target, timeout, |distinct| {
            resolved = Some((Instant::now(), distinct));
        });
        if let Some((_, distinct)) = resolved {
            shared.core().session.handle_resolved(host, distinct);
        }
        let resolved_at = resolved.map_or_else(Instant::now, |(at, _)| at);
        return Some(connected.map(|stream| (stream, resolved_at)));
    }
    let mut resolved = None;
    loop {
        match serve_timers(shared, wake, None, &reports) {
            Waited::Got(Some(Connecting::Resolved(at, addresses))) => {
                shared.core().session.handle_resolved(host, addresses);
                resolved = Some(at);
            }
            Waited::Got(Some(Connecting::Done(connected))) => {
                // Reported in order: a connection's lookup came first.
                let resolved = resolved.unwrap_or_else(Instant::now);
                return Some(connected.map(|stream| (stream, resolved)));
            }
            Waited::Got(None) => {
                return Some(Err(io::Error::other(
                    "the connecting thread ended without an outcome",
                )))
            }
            Waited::Over | Waited::Until => {
                // What the connector said as the session ended still counts.
                let mut failed = None;
                for report in reports.try_iter() {
                    match report {
                        Connecting::Resolved(at, _) => resolved = Some(at),
                        Connecting::Done(Ok(_)) => return None,
                        Connecting::Done(Err(e)) => failed = Some(e.to_string()),
                    }
                }
                let step = failed.unwrap_or_else(|| {
                    let step = if resolved.is_some() {
                        "the TCP connect was still under way"
                    } else {
                        "its name was still being resolved"
                    };
                    step.to_owned()
                });
                *lock(&shared.last_connect_error) = Some(format!("{host}: {step}"));
                return None;
            }
        }
    }
}

/// A TCP connection to `target`'s address.
pub(super) fn connect(target: &Target, timeout: Duration) -> io::Result<TcpStream> {
    connect_reporting(target, timeout, |_| {})
}

/// [`connect`], telling `resolved` how many distinct addresses the host's
/// lookup gave, between resolving and connecting. A failed connect's error
/// names the address.
fn connect_reporting(
    target: &Target,
    timeout: Duration,
    resolved: impl FnOnce(usize),
) -> io::Result<TcpStream> {
    let addrs = resolve(target.host())?;
    let (addr, distinct) = target.pick(&addrs);
    resolved(distinct);
    let addr = addr.ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, "host name resolved to no address")
    })?;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nodelay(true)?;
    socket
        .connect_timeout(&addr.into(), timeout)
        .map_err(|e| io::Error::new(e.kind(), format!("{addr}: {e}")))?;
    socket.set_keepalive(true)?;
    Ok(socket.into())
}

/// The addresses of `host`, a `name:port` or `[IPv6 address]:port`. The
/// address goes to the resolver without its brackets, so that a zone named
/// after an interface (`[fe80::1%eth0]:2181`) is looked up, as the Java
/// client does; the standard library's own parser takes only a zone's
/// number.
///
/// A name under `.invalid` fails at once, without asking the system's
/// resolver, as RFC 6761 asks of resolvers: no query leaves the machine.
fn resolve(host: &str) -> io::Result<Vec<SocketAddr>> {
    #[cfg(feature = "testing")]
    {
        crate::testing::pause::resolving(host);
        if let Some(addresses) = crate::testing::names::lookup(host) {
            return Ok(addresses);
        }
    }
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    if is_reserved_invalid(name) {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "a name under .invalid never resolves (RFC 6761)",
        ));
    }
    let bracketed = host
        .strip_prefix('[')
        .and_then(|rest| rest.rsplit_once("]:"))
        .and_then(|(addr, port)| Some((addr, port.parse::<u16>().ok()?)));
    Ok(match bracketed {
        Some(addr_port) => addr_port.to_socket_addrs()?.collect(),
        None => host.to_socket_addrs()?.collect(),
    })
}

/// True for `invalid` and the names under it, in any case, with or without
/// the root's trailing dot.
fn is_reserved_invalid(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    let last_label = name.rsplit('.').next().unwrap_or(name);
    last_label.eq_ignore_ascii_case("invalid")
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
        core.session.handle_connected(resolved);
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
                *lock(&shared.last_connect_error) = Some(format!("{host}: {reason}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(host: &str) -> Vec<(String, u32)> {
        resolve(host)
            .unwrap_or_else(|e| panic!("resolve {host}: {e}"))
            .into_iter()
            .map(|a| match a {
                SocketAddr::V6(v6) => (v6.to_string(), v6.scope_id()),
                SocketAddr::V4(v4) => (v4.to_string(), 0),
            })
            .collect()
    }

    #[test]
    fn an_ipv6_zone_may_be_named_after_an_interface_or_numbered() {
        // `lo` is interface 1 on Linux; nothing is sent, only resolved.
        assert_eq!(
            scopes("[fe80::1%lo]:2181"),
            [("[fe80::1%1]:2181".to_owned(), 1)]
        );
        assert_eq!(
            scopes("[fe80::1%7]:2181"),
            [("[fe80::1%7]:2181".to_owned(), 7)]
        );
        assert_eq!(scopes("[::1]:3"), [("[::1]:3".to_owned(), 0)]);
        assert_eq!(scopes("127.0.0.1:9"), [("127.0.0.1:9".to_owned(), 0)]);
    }

    #[test]
    fn an_unknown_zone_is_an_error_not_a_guess() {
        assert!(resolve("[fe80::1%no-such-interface0]:2181").is_err());
    }

    #[test]
    fn names_under_invalid_fail_without_a_lookup() {
        for host in [
            "zk.invalid:2181",
            "a.b.INVALID:2181",
            "zk.Invalid.:2181",
            "invalid:2181",
        ] {
            let error = resolve(host).expect_err(host);
            assert_eq!(
                (error.kind(), error.to_string()),
                (
                    io::ErrorKind::NotFound,
                    "a name under .invalid never resolves (RFC 6761)".to_owned()
                ),
                "{host}"
            );
        }
        for name in ["invalid.example", "zk.invalidx", "zk.xinvalid", "[::1]"] {
            assert!(!is_reserved_invalid(name), "{name}");
        }
    }
}
