//! The thread that looks for a read-write server while the session is on a
//! read-only one. The session decides whom to ask and when (see
//! [`Session::poll_probe`](crate::session::Session::poll_probe)); this
//! asks, each time on a short connection of its own, with the `isro`
//! four-letter word, which a server with read-only mode enabled answers
//! with `rw` or `ro` whatever its four-letter-word whitelist says.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use super::connect::{connect_within, Lookups};
use super::core::Shared;
use crate::session::{Probe, Target};

/// How long one question may take, connect included.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The answer that means read-write.
const READ_WRITE: &[u8; 2] = b"rw";

/// The probing thread of one read-only connection. Dropping this stops it:
/// at once if it is waiting, else once its question is answered or times
/// out, within [`PROBE_TIMEOUT`]. It ends on its own when the connection
/// does.
pub(crate) struct Prober {
    _stop: Sender<()>,
}

/// Starts probing on behalf of the connection `stream`; `None` if no thread
/// can be had (the client then stays where it is, as it would without
/// probing).
pub(crate) fn spawn(shared: Arc<Shared>, stream: Arc<TcpStream>) -> Option<Prober> {
    let (stop, stopped) = bounded(0);
    let spawned = std::thread::Builder::new()
        .name("zklock-probe".into())
        .spawn(move || run(&shared, &stream, &stopped));
    match spawned {
        Ok(_) => Some(Prober { _stop: stop }),
        Err(e) => {
            log::warn!("no thread to look for a read-write server: {e}");
            None
        }
    }
}

fn run(shared: &Shared, stream: &Arc<TcpStream>, stopped: &Receiver<()>) {
    let mut lookups = Lookups::default();
    loop {
        let probe = {
            let mut core = shared.core();
            if !core.is_current(stream) {
                return;
            }
            core.session.poll_probe(Instant::now())
        };
        match probe {
            Probe::Stop => return,
            Probe::WaitUntil(at) => {
                let wait = at.saturating_duration_since(Instant::now());
                if stopped.recv_timeout(wait) != Err(RecvTimeoutError::Timeout) {
                    return;
                }
            }
            Probe::Ask(target) => {
                let read_write = match ask_isro(&mut lookups, &target) {
                    Ok(answer) => answer == *READ_WRITE,
                    Err(e) => {
                        log::debug!("asking {target} whether it is read-write: {e}");
                        false
                    }
                };
                let mut core = shared.core();
                if !core.is_current(stream) {
                    return;
                }
                if core.session.handle_probe(&target, read_write) {
                    drop(core);
                    // Wakes the I/O thread, which drops the connection for
                    // the session's reason and connects to `host`.
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
    }
}

/// The first two bytes of `target`'s answer to `isro`, or fewer if it
/// closed first; all within [`PROBE_TIMEOUT`], the name's lookup included
/// (a lookup that outlives it is left in `lookups` for the next question).
fn ask_isro(lookups: &mut Lookups, target: &Target) -> io::Result<[u8; 2]> {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no answer in time"))
    };
    let stream = connect_within(lookups, target, left()?)?;
    stream.set_write_timeout(Some(left()?))?;
    (&stream).write_all(b"isro")?;
    let mut answer = [0u8; 2];
    let mut got = 0;
    // Each read that returns brings a byte at least: two suffice.
    while let Some(rest) = answer.get_mut(got..).filter(|r| !r.is_empty()) {
        stream.set_read_timeout(Some(left()?))?;
        match (&stream).read(rest)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread::JoinHandle;

    use super::*;

    /// The one address of `host`.
    fn at(host: &str) -> Target {
        Target {
            host: host.to_owned(),
            turn: 0,
        }
    }

    /// A peer on loopback that takes one connection, checks that it asks
    /// `isro`, and then writes each of `replies` after its pause.
    fn peer(replies: Vec<(Duration, &'static [u8])>) -> (String, JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut asked = [0u8; 4];
            conn.read_exact(&mut asked).unwrap();
            for (pause, reply) in replies {
                std::thread::sleep(pause);
                // The client may have given up and closed already.
                if conn.write_all(reply).is_err() {
                    break;
                }
            }
            asked.to_vec()
        });
        (host, handle)
    }

    #[test]
    fn a_read_write_server_is_told_by_its_answer() {
        let (host, peer) = peer(vec![(Duration::ZERO, b"rw")]);
        assert_eq!(
            ask_isro(&mut Lookups::default(), &at(&host)).unwrap(),
            *READ_WRITE
        );
        assert_eq!(peer.join().unwrap(), b"isro");
    }

    #[test]
    fn other_answers_are_not_read_write() {
        let refusal = b"isro is not executed because it is not in the whitelist.";
        for reply in [&b"ro"[..], &refusal[..], &b"r"[..], &b""[..]] {
            let (host, peer) = peer(vec![(Duration::ZERO, reply)]);
            let answer = ask_isro(&mut Lookups::default(), &at(&host)).unwrap();
            assert_ne!(answer, *READ_WRITE, "{reply:?}");
            peer.join().unwrap();
        }
    }

    #[test]
    fn a_silent_or_trickling_host_is_given_up_on_at_the_probe_timeout() {
        let silent = vec![(PROBE_TIMEOUT * 2, &b"rw"[..])];
        let trickling = vec![(PROBE_TIMEOUT / 4, &b"r"[..]), (PROBE_TIMEOUT, &b"w"[..])];
        for replies in [silent, trickling] {
            let (host, peer) = peer(replies);
            let error = ask_isro(&mut Lookups::default(), &at(&host)).unwrap_err();
            assert!(
                matches!(
                    error.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ),
                "{error}"
            );
            peer.join().unwrap();
        }
    }

    #[test]
    #[cfg(feature = "testing")]
    fn a_resolver_that_does_not_answer_holds_a_question_no_longer_than_the_probe_timeout() {
        let (addr, peer) = peer(vec![(Duration::ZERO, b"rw")]);
        let name = crate::testing::FakeName::new(
            "probe-unit.zklock.test:2181",
            vec![addr.parse().unwrap()],
        );
        let target = at(name.host());
        let held =
            crate::testing::ReleasedOnDrop(crate::testing::Pause::arm_resolving(name.host()));
        let mut lookups = Lookups::default();
        let error = ask_isro(&mut lookups, &target).unwrap_err();
        assert_eq!(
            (error.kind(), error.to_string()),
            (
                io::ErrorKind::TimedOut,
                "its name was still being resolved".to_owned()
            )
        );
        assert!(held.0.wait_reached(Duration::ZERO), "the lookup was made");
        // The next question waits for the lookup left under way, not a new
        // one (the pause was armed once: a second lookup would not stop).
        drop(held);
        assert_eq!(ask_isro(&mut lookups, &target).unwrap(), *READ_WRITE);
        assert_eq!(peer.join().unwrap(), b"isro");
    }

    #[test]
    fn a_closed_port_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        drop(listener);
        assert!(ask_isro(&mut Lookups::default(), &at(&host)).is_err());
    }
}
