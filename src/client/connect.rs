//! Making a connection: the host's name is looked up, and the TCP connect
//! made, on threads of their own, while the I/O thread goes on serving the
//! session's timers and `close`. A resolver with a dead name server can
//! take many seconds, and no request's deadline, local expiry, `close` or
//! `connect` budget may wait for it, nor may the other hosts' attempts.

use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use socket2::{Domain, Protocol, Socket, Type};

use super::core::{lock, ClientSession, Shared};
use super::io::{serve_timers, Waited};
use crate::session::Target;

/// What an attempt whose host's name was not looked up in time says.
const STILL_RESOLVING: &str = "its name was still being resolved";

/// What an attempt whose lookup thread died without answering says.
const LOOKUP_THREAD_ENDED: &str = "the lookup thread ended without an outcome";

/// How long a lookup's answer that no attempt was waiting for stays good
/// for the host's next attempt: a JVM's default cache of positive answers.
/// An older one is looked up again.
const ANSWER_KEPT: Duration = Duration::from_secs(30);

/// A lookup's answer, and when it came.
type Answer = (Instant, io::Result<Vec<SocketAddr>>);

/// A lookup under way on a thread of its own, which sends its answer once.
type Lookup = Receiver<Answer>;

/// The name lookups that outlived the attempts that started them, by host.
///
/// With several hosts, an attempt waits for its host's lookup no longer
/// than its own timeout, then fails, and the attempts go on to the other
/// hosts. The lookup goes on, and the host's next attempt waits for that
/// same lookup, or takes its answer if it came meanwhile (and not too long
/// ago): a resolver slower than the timeout still lets the host be
/// connected to, and a host has at most one such lookup under way, however
/// long its resolver hangs.
#[derive(Default)]
pub(super) struct Lookups {
    under_way: Vec<(String, Lookup)>,
}

/// Where [`Lookups::start`] left a host's lookup.
enum Started {
    /// An earlier attempt's lookup had answered.
    Answered(io::Result<Vec<SocketAddr>>),
    /// A lookup is under way.
    UnderWay(Lookup),
    /// No thread could be had for a lookup.
    NoThread,
}

impl Lookups {
    /// The lookup of `host` that an earlier attempt left, or a new one.
    fn start(&mut self, host: &str, now: Instant) -> Started {
        if let Some(at) = self.under_way.iter().position(|(name, _)| name == host) {
            let (_, lookup) = self.under_way.swap_remove(at);
            match lookup.try_recv() {
                Ok((answered, found)) if now.saturating_duration_since(answered) <= ANSWER_KEPT => {
                    return Started::Answered(found)
                }
                Err(crossbeam_channel::TryRecvError::Empty) => return Started::UnderWay(lookup),
                // Too old, or the thread ended without an answer.
                Ok(_) | Err(crossbeam_channel::TryRecvError::Disconnected) => {}
            }
        }
        let (answer, lookup) = crossbeam_channel::bounded(1);
        let name = host.to_owned();
        let spawned = std::thread::Builder::new()
            .name("zklock-lookup".into())
            .spawn(move || {
                let found = resolve(&name);
                let _ = answer.send((Instant::now(), found));
            });
        match spawned {
            Ok(_) => Started::UnderWay(lookup),
            Err(e) => {
                log::warn!("no thread to look up {host} on ({e}): looking it up here");
                Started::NoThread
            }
        }
    }

    /// Keeps `lookup`, still under way, for the host's next attempt.
    fn leave(&mut self, host: &str, lookup: Lookup) {
        self.under_way.push((host.to_owned(), lookup));
    }
}

/// Looks `target` up and connects to it, off this thread, which goes on
/// serving the session's timers and `close` (see the module's doc). The
/// lookup has `lookup_timeout` from now (`None`: as long as the resolver
/// takes, with nothing else to try), and the TCP connect `timeout` from the
/// lookup's answer, so that a slow resolver leaves the connect and the
/// handshake their whole time; during a close, either ends sooner at the
/// attempt's share of the close's time
/// ([`close_attempt_end`](crate::session::Session::close_attempt_end)).
/// `None` once the session is over, after saying in the last connect
/// error where the attempt was; a thread still
/// under way is then left to end on its own (a connection it makes is
/// dropped). A connection comes with the instant its host's name was
/// resolved, from which its handshake is timed.
pub(super) fn connect_aside(
    shared: &Arc<Shared>,
    wake: &Receiver<()>,
    lookups: &mut Lookups,
    target: &Target,
    lookup_timeout: Option<Duration>,
    timeout: Duration,
) -> Option<io::Result<(TcpStream, Instant)>> {
    let host = target.host();
    let found = match lookups.start(host, Instant::now()) {
        Started::Answered(found) => found,
        Started::NoThread => resolve(host),
        Started::UnderWay(lookup) => {
            let deadline = lookup_timeout.and_then(|t| Instant::now().checked_add(t));
            let until = |session: &ClientSession| {
                [deadline, session.close_attempt_end()]
                    .into_iter()
                    .flatten()
                    .min()
            };
            match serve_timers(shared, wake, until, &lookup) {
                Waited::Got(Some((_, found))) => found,
                Waited::Got(None) => Err(io::Error::other(LOOKUP_THREAD_ENDED)),
                Waited::Until => {
                    log::debug!("{host}: no answer from the resolver in the attempt's time");
                    lookups.leave(host, lookup);
                    return Some(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        STILL_RESOLVING,
                    )));
                }
                Waited::Over => {
                    // What the lookup said as the session ended still counts.
                    let step = match lookup.try_recv() {
                        Ok((_, Err(e))) => e.to_string(),
                        Ok((_, Ok(_))) => "its name had just been resolved".to_owned(),
                        Err(_) => STILL_RESOLVING.to_owned(),
                    };
                    note_failure(shared, host, &step);
                    return None;
                }
            }
        }
    };
    let addresses = match found {
        Ok(addresses) => addresses,
        Err(e) => return Some(Err(e)),
    };
    let (addr, distinct) = target.pick(&addresses);
    shared.core().session.handle_resolved(host, distinct);
    let resolved = Instant::now();
    let Some(addr) = addr else {
        return Some(Err(no_address()));
    };
    let (done, outcome) = crossbeam_channel::bounded(1);
    let named = host.to_owned();
    let spawned = std::thread::Builder::new()
        .name("zklock-connect".into())
        .spawn(move || {
            let _ = done.send(connect_to(&named, addr, timeout));
        });
    if let Err(e) = spawned {
        log::warn!("no thread to connect on ({e}): connecting on the I/O thread");
        return Some(connect_to(host, addr, timeout).map(|stream| (stream, resolved)));
    }
    // The connect's own timeout did not know of a close that came since,
    // which may leave it less: its share of the close's time.
    match serve_timers(shared, wake, ClientSession::close_attempt_end, &outcome) {
        Waited::Got(Some(connected)) => Some(connected.map(|stream| (stream, resolved))),
        Waited::Got(None) => Some(Err(io::Error::other(
            "the connecting thread ended without an outcome",
        ))),
        Waited::Until => Some(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the TCP connect was still under way at the end of its share of the close's time",
        ))),
        Waited::Over => {
            // What the connect said as the session ended still counts.
            match outcome.try_recv() {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => note_failure(shared, host, &e.to_string()),
                Err(_) => note_failure(shared, host, "the TCP connect was still under way"),
            }
            None
        }
    }
}

/// Says, for `connect`'s error, where the last attempt failed.
pub(super) fn note_failure(shared: &Shared, host: &str, step: &str) {
    *lock(&shared.last_connect_error) = Some(format!("{host}: {step}"));
}

/// A TCP connection to `target`'s address, made within `timeout`, the
/// name's lookup included. The lookup runs on a thread of its own, so a
/// resolver that does not answer holds the caller no longer than the
/// timeout; a lookup still under way then is left in `lookups`, whose next
/// attempt at the host waits for it rather than start another. A failed
/// connect's error names the address the name gave (see [`connect_to`]).
pub(super) fn connect_within(
    lookups: &mut Lookups,
    target: &Target,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    let host = target.host();
    let found = match lookups.start(host, Instant::now()) {
        Started::Answered(found) => found,
        Started::NoThread => resolve(host),
        Started::UnderWay(lookup) => {
            match lookup.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok((_, found)) => found,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    lookups.leave(host, lookup);
                    return Err(io::Error::new(io::ErrorKind::TimedOut, STILL_RESOLVING));
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    Err(io::Error::other(LOOKUP_THREAD_ENDED))
                }
            }
        }
    };
    let addr = target.pick(&found?).0.ok_or_else(no_address)?;
    let left = deadline
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
        .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no time left to connect"))?;
    connect_to(host, addr, left)
}

fn no_address() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "host name resolved to no address")
}

/// A TCP connection to `addr`, one of `host`'s, with Nagle off and
/// keepalive on. The error names the address, unless `host` is written as
/// it (the caller names the host).
fn connect_to(host: &str, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nodelay(true)?;
    socket.connect_timeout(&addr.into(), timeout).map_err(|e| {
        let at = addr.to_string();
        if at == host {
            e
        } else {
            io::Error::new(e.kind(), format!("{at}: {e}"))
        }
    })?;
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
        crate::testing::pause::reached_for(crate::testing::PausePoint::Resolving, host);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits, bounded, until `lookup` has its answer, and leaves it.
    fn answered(lookups: &mut Lookups, host: &str, lookup: Lookup) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while lookup.is_empty() {
            assert!(Instant::now() < deadline, "no answer for {host}");
            std::thread::sleep(Duration::from_millis(1));
        }
        lookups.leave(host, lookup);
    }

    fn under_way(started: Started) -> Lookup {
        match started {
            Started::UnderWay(lookup) => lookup,
            Started::Answered(_) => panic!("answered"),
            Started::NoThread => panic!("no thread"),
        }
    }

    #[test]
    #[cfg(feature = "testing")]
    fn a_host_has_one_lookup_whose_answer_its_next_attempt_takes_while_fresh() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let name = crate::testing::FakeName::new("lookups-unit.zklock.test:9", vec![addr]);
        let host = name.host();
        let mut lookups = Lookups::default();
        let now = Instant::now();
        // Held until the next attempt has it: the fake name answers at once.
        let held = crate::testing::ReleasedOnDrop(crate::testing::Pause::arm_resolving(host));
        // Left under way, it is the one the next attempt waits for.
        let first = under_way(lookups.start(host, now));
        lookups.leave(host, first);
        let again = under_way(lookups.start(host, now));
        drop(held);
        answered(&mut lookups, host, again);
        let took = match lookups.start(host, Instant::now()) {
            Started::Answered(found) => found.map_err(|e| e.to_string()),
            Started::UnderWay(_) | Started::NoThread => panic!("the answer was not taken"),
        };
        assert_eq!(took, Ok(vec![addr]));
        assert!(lookups.under_way.is_empty(), "taken once");
        // An answer older than a JVM's cache keeps it is looked up again.
        let stale = under_way(lookups.start(host, now));
        answered(&mut lookups, host, stale);
        let later = Instant::now() + ANSWER_KEPT + Duration::from_secs(1);
        let fresh = under_way(lookups.start(host, later));
        assert_eq!(
            fresh
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
                .1
                .unwrap(),
            [addr]
        );
    }

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
