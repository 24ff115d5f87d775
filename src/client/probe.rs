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

use super::core::Shared;
use super::io::connect;
use crate::rand::Rng;
use crate::session::Probe;

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
    let mut rng = Rng::new();
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
            Probe::Ask(host) => {
                let read_write = match ask_isro(&host, &mut rng) {
                    Ok(answer) => answer == *READ_WRITE,
                    Err(e) => {
                        log::debug!("asking {host} whether it is read-write: {e}");
                        false
                    }
                };
                let mut core = shared.core();
                if !core.is_current(stream) {
                    return;
                }
                if core.session.handle_probe(&host, read_write) {
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

/// The first two bytes of `host`'s answer to `isro`, or fewer if it closed
/// first; all within [`PROBE_TIMEOUT`].
fn ask_isro(host: &str, rng: &mut Rng) -> io::Result<[u8; 2]> {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no answer in time"))
    };
    let stream = connect(host, PROBE_TIMEOUT, rng)?;
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
