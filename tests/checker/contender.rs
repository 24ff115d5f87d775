//! A contender process: its own session, one lock path, a counter to
//! increment in each critical section, and a log of everything it saw.
//! On a read-write lock, half its attempts are reads, whose sections read
//! the counter twice instead of writing it.
//!
//! It stops when its stdin reaches end of file (the orchestrator closes it,
//! or dies), finishing the attempt or section in progress first. Every wait
//! is bounded: `try_lock_for(wait)`, and client calls that give up after a
//! session timeout.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::select;
use zklock::{AnyGuard, Client, Error, LockState, Mutex, Op, OpOutcome, RwLock, State};

use crate::events::{now_ns, Event, EventLog, LoggedError, Outcome};
use crate::rng::Rng;

/// The per-host connect timeout of contender clients.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);

/// The lock the contenders of a run share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    Mutex,
    RwLock,
}

impl LockKind {
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::RwLock => "rwlock",
        }
    }

    pub fn parse(name: &str) -> Option<LockKind> {
        [LockKind::Mutex, LockKind::RwLock]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// What the orchestrator passes on the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub name: String,
    pub kind: LockKind,
    pub connect: String,
    pub lock: String,
    pub counter: String,
    pub log: PathBuf,
    pub session: Duration,
    pub wait: Duration,
    pub seed: u64,
    /// Whether this contender's clients may go on with a new session after
    /// an expiry (`new_session_on_expiry`): each does with even odds.
    pub renew: bool,
}

impl Settings {
    /// The arguments after `contender` that [`Settings::parse`] reads back.
    pub fn to_args(&self) -> Vec<String> {
        let pairs = [
            ("--name", self.name.clone()),
            ("--kind", self.kind.name().to_owned()),
            ("--connect", self.connect.clone()),
            ("--lock", self.lock.clone()),
            ("--counter", self.counter.clone()),
            ("--log", self.log.display().to_string()),
            ("--session-ms", self.session.as_millis().to_string()),
            ("--wait-ms", self.wait.as_millis().to_string()),
            ("--seed", self.seed.to_string()),
            ("--renew", u8::from(self.renew).to_string()),
        ];
        pairs
            .into_iter()
            .flat_map(|(k, v)| [k.to_owned(), v])
            .collect()
    }

    pub fn parse(args: &[String]) -> Result<Settings, String> {
        let get = |key: &str| -> Result<String, String> {
            args.iter()
                .position(|a| a == key)
                .and_then(|i| args.get(i + 1))
                .cloned()
                .ok_or_else(|| format!("contender: missing {key}"))
        };
        let num = |key: &str| -> Result<u64, String> {
            get(key)?
                .parse()
                .map_err(|e| format!("contender: bad {key}: {e}"))
        };
        let kind = get("--kind")?;
        Ok(Settings {
            name: get("--name")?,
            kind: LockKind::parse(&kind).ok_or_else(|| format!("contender: bad --kind {kind}"))?,
            connect: get("--connect")?,
            lock: get("--lock")?,
            counter: get("--counter")?,
            log: PathBuf::from(get("--log")?),
            session: Duration::from_millis(num("--session-ms")?),
            wait: Duration::from_millis(num("--wait-ms")?),
            seed: num("--seed")?,
            renew: num("--renew")? != 0,
        })
    }
}

/// Runs a contender until told to stop.
pub fn main(args: &[String]) -> ExitCode {
    let settings = match Settings::parse(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let log = match EventLog::create(&settings.log) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("contender: open {}: {e}", settings.log.display());
            return ExitCode::from(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // End of file on stdin (or any read error) means stop.
        std::thread::spawn(move || {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            stop.store(true, Ordering::SeqCst);
        });
    }
    Contender {
        settings,
        log,
        stop,
        rng: Rng::new(0),
        attempts: 0,
    }
    .run();
    ExitCode::SUCCESS
}

struct Contender {
    settings: Settings,
    log: EventLog,
    stop: Arc<AtomicBool>,
    rng: Rng,
    attempts: u64,
}

impl Contender {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn run(mut self) {
        self.rng = Rng::new(self.settings.seed);
        while !self.stopping() {
            let Some((client, renewing)) = self.connect() else {
                break;
            };
            self.use_session(&client, renewing);
            // Closing may wait for the I/O thread; it ends the session, so
            // the server deletes any node of ours at once.
            let _ = client.close();
        }
        self.log.put(&Event::Stop { t: now_ns() });
        self.log.put(&Event::Exit { t: now_ns() });
    }

    /// Connects, retrying until it works or the contender is told to stop;
    /// the client, and whether it goes on with a new session after an
    /// expiry.
    fn connect(&mut self) -> Option<(Client, bool)> {
        while !self.stopping() {
            let start = now_ns();
            // Drawn only when asked for, so that runs without `--renew`
            // replay as before.
            let renewing = self.settings.renew && self.rng.chance(1, 2);
            let result = Client::builder()
                .session_timeout(self.settings.session)
                .connect_timeout(CONNECT_TIMEOUT)
                .new_session_on_expiry(renewing)
                .connect(&self.settings.connect);
            let t = now_ns();
            match result {
                Ok(client) => {
                    let id = client.session_id();
                    self.log.put(&Event::Session { t, start, id });
                    return Some((client, renewing));
                }
                Err(e) => {
                    let err = LoggedError::of(&e);
                    self.log.put(&Event::ConnErr { t, start, err });
                    std::thread::sleep(self.rng.ms(50, 200));
                }
            }
        }
        None
    }

    /// Contends with one client until its session is lost (for good, when
    /// `renewing`: a new session then follows an expiry) or the contender
    /// stops.
    fn use_session(&mut self, client: &Client, renewing: bool) {
        let data = format!(
            "contender={} pid={}",
            self.settings.name,
            std::process::id()
        );
        let lock = match self.settings.kind {
            LockKind::Mutex => client
                .mutex(&self.settings.lock)
                .map(|m| Lock::Mutex(m.with_data(data))),
            LockKind::RwLock => {
                RwLock::new(client, &self.settings.lock).map(|l| Lock::Rw(l.with_data(data)))
            }
        };
        let lock = match lock {
            Ok(lock) => lock,
            Err(e) => {
                let err = LoggedError::of(&e);
                let (t, n) = (now_ns(), self.attempts);
                self.log.put(&Event::LockErr { t, n, err });
                return;
            }
        };
        let mut logged_session = client.session_id();
        while !self.stopping() && !session_over(client.state(), renewing) {
            // A new session after an expiry: its attempts are its own (0
            // until a server grants it, which ends the old one's too).
            let id = client.session_id();
            if id != logged_session {
                let t = now_ns();
                self.log.put(&Event::Session { t, start: t, id });
                logged_session = id;
            }
            self.attempts += 1;
            let n = self.attempts;
            let read = matches!(lock, Lock::Rw(_)) && self.rng.chance(1, 2);
            self.log.put(&Event::Begin { t: now_ns(), n });
            match lock.try_acquire_for(read, self.settings.wait) {
                Ok(Some(guard)) => self.section(client, guard, n),
                Ok(None) => {
                    self.log.put(&Event::NoLock { t: now_ns(), n });
                    self.owned_nodes(client, n);
                }
                Err(e) => {
                    let err = LoggedError::of(&e);
                    self.log.put(&Event::LockErr {
                        t: now_ns(),
                        n,
                        err,
                    });
                    if e.is_session_lost() || !e.is_retryable() {
                        std::thread::sleep(self.rng.ms(10, 50));
                    } else {
                        self.owned_nodes(client, n);
                    }
                }
            }
            // Think time between sections.
            std::thread::sleep(self.rng.ms(0, 8));
        }
    }

    /// After an attempt that ended without the lock, logs the lock nodes
    /// this session still owns once it has had time to delete them. An
    /// attempt that gave up before its create's reply came leaves the node
    /// to the I/O thread, which deletes it when that reply comes (or once
    /// a search after a lost reply finds it, after a reconnect): so a node
    /// may be seen for a moment, but not two session timeouts on, in a
    /// session that still lives. Logs nothing if a listing fails.
    fn owned_nodes(&self, client: &Client, n: u64) {
        let session = client.session_id();
        let until = Instant::now() + self.settings.session * 2;
        let owned = loop {
            let Some(owned) = self.nodes_owned_by(client, session) else {
                return;
            };
            if owned.is_empty() || client.session_id() != session || client.state().is_terminal() {
                return;
            }
            if Instant::now() >= until {
                break owned;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let (t, nodes) = (now_ns(), owned.join(","));
        self.log.put(&Event::Owned { t, n, nodes });
    }

    /// The lock nodes `session` owns; `None` if they cannot be listed.
    fn nodes_owned_by(&self, client: &Client, session: i64) -> Option<Vec<String>> {
        let children = client.get_children(&self.settings.lock).ok()?;
        let mut owned = Vec::new();
        for name in children {
            let path = format!("{}/{name}", self.settings.lock);
            match client.exists(&path).ok()? {
                Some(stat) if stat.ephemeral_owner == session => owned.push(path),
                _ => {}
            }
        }
        Some(owned)
    }

    /// The critical section: read the counter, write it plus one if the
    /// guard is still Held (or read it again, holding a read lock), release.
    fn section(&mut self, client: &Client, guard: AnyGuard<'_>, n: u64) {
        let token = guard.fencing_token();
        let node = guard.node().to_owned();
        self.log.put(&Event::Acq {
            t: now_ns(),
            n,
            token,
            node,
        });
        let changes = guard.state_changes();
        let left_held = AtomicBool::new(false);
        // A guard can start out Suspended (the connection dropped right at
        // the acquisition); that is no change, so note it here.
        let initial = guard.state();
        if initial != LockState::Held {
            left_held.store(true, Ordering::SeqCst);
            let state = format!("{initial:?}");
            self.log.put(&Event::State {
                t: now_ns(),
                n,
                state,
            });
        }
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
        let log = &self.log;
        std::thread::scope(|scope| {
            // Records every state change as soon as it arrives.
            scope.spawn(|| loop {
                select! {
                    recv(changes) -> state => match state {
                        Ok(state) => {
                            if state != LockState::Held {
                                left_held.store(true, Ordering::SeqCst);
                            }
                            let state = format!("{state:?}");
                            log.put(&Event::State { t: now_ns(), n, state });
                        }
                        Err(_) => break,
                    },
                    recv(done_rx) -> _ => break,
                }
            });
            let rng = &mut self.rng;
            body(
                log,
                rng,
                &self.settings,
                client,
                &guard,
                (n, token),
                &left_held,
            );
            drop(done_tx);
        });
        let release_start = now_ns();
        self.log.put(&Event::Release {
            t: release_start,
            n,
        });
        let (how, err) = match guard.unlock() {
            Ok(()) => ("released", None),
            Err(Error::LockLost) => ("lost", None),
            Err(e) => ("error", Some(LoggedError::of(&e))),
        };
        self.log.put(&Event::End {
            t: now_ns(),
            n,
            release_start,
            how: how.to_owned(),
            err,
        });
    }
}

/// The lock of a contender's session.
enum Lock {
    Mutex(Mutex),
    Rw(RwLock),
}

impl Lock {
    /// `try_lock_for`, or on a read-write lock `try_read_for` if `read`
    /// and `try_write_for` if not.
    fn try_acquire_for(&self, read: bool, wait: Duration) -> Result<Option<AnyGuard<'_>>, Error> {
        Ok(match self {
            Lock::Mutex(m) => m.try_lock_for(wait)?.map(AnyGuard::from),
            Lock::Rw(l) if read => l.try_read_for(wait)?.map(AnyGuard::from),
            Lock::Rw(l) => l.try_write_for(wait)?.map(AnyGuard::from),
        })
    }
}

/// What a section does while holding: read, work, then write if still
/// Held, or holding a read lock, read again.
fn body(
    log: &EventLog,
    rng: &mut Rng,
    settings: &Settings,
    client: &Client,
    guard: &AnyGuard<'_>,
    (n, token): (u64, i64),
    left_held: &AtomicBool,
) {
    std::thread::sleep(rng.ms(1, 4));
    let Some(value) = read_counter(log, settings, client, n) else {
        return;
    };
    // "Work" on the protected resource; now and then a longer piece, so
    // that more faults land in the middle of a section.
    let work = if rng.chance(1, 10) {
        rng.ms(20, 100)
    } else {
        rng.ms(1, 5)
    };
    std::thread::sleep(work);
    if matches!(guard, AnyGuard::Read(_)) {
        // No write may land between the two reads while this holds.
        read_counter(log, settings, client, n);
        std::thread::sleep(rng.ms(0, 3));
        return;
    }
    let state = guard.state();
    if state != LockState::Held || left_held.load(Ordering::SeqCst) {
        let state = format!("{state:?}");
        log.put(&Event::Skip {
            t: now_ns(),
            n,
            state,
        });
        return;
    }
    let value = value + 1;
    log.put(&Event::Write {
        t: now_ns(),
        n,
        value,
    });
    let data = format!("{value} {token} {}", settings.name);
    // Half the writes go through the guard, behind its check that the lock
    // node still exists.
    let result = if rng.chance(1, 2) {
        guard
            .multi(&[Op::set_data(&settings.counter, data, None)])
            .map(|outcomes| match outcomes.first() {
                Some(OpOutcome::DataSet(stat)) => Some(stat.version),
                _ => None,
            })
    } else {
        client
            .set_data(&settings.counter, data.as_bytes(), None)
            .map(|stat| Some(stat.version))
    };
    let (outcome, version, err) = match result {
        Ok(version) => (
            Outcome::Ok,
            version.and_then(|v| u64::try_from(v).ok()),
            None,
        ),
        Err(e) => (write_outcome(&e), None, Some(LoggedError::of(&e))),
    };
    log.put(&Event::Wrote {
        t: now_ns(),
        n,
        outcome,
        version,
        err,
    });
    std::thread::sleep(rng.ms(0, 3));
}

/// True once a client's session is over for good: closed, refused its
/// credentials, or expired with no new session to follow.
fn session_over(state: State, renewing: bool) -> bool {
    match state {
        State::Expired => !renewing,
        other => other.is_terminal(),
    }
}

/// Reads the counter and logs what it read (or the error): its value.
fn read_counter(log: &EventLog, settings: &Settings, client: &Client, n: u64) -> Option<u64> {
    match client.get_data(&settings.counter) {
        Ok((data, _)) => {
            let (value, token) = parse_counter(&data);
            log.put(&Event::Read {
                t: now_ns(),
                n,
                value,
                token,
            });
            Some(value)
        }
        Err(e) => {
            let err = LoggedError::of(&e);
            log.put(&Event::ReadErr {
                t: now_ns(),
                n,
                err,
            });
            None
        }
    }
}

/// `"<value> <token of its writer> <writer>"`; a bad value reads as 0.
pub fn parse_counter(data: &[u8]) -> (u64, i64) {
    let text = String::from_utf8_lossy(data);
    let mut fields = text.split_whitespace();
    let value = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let token = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    (value, token)
}

/// Whether a failed write may have been applied. Only answers the server
/// gives after deciding not to apply it count as `Failed`; anything else
/// (the reply lost with the connection, a local timeout) is ambiguous.
fn write_outcome(e: &Error) -> Outcome {
    match e {
        Error::SessionExpired
        | Error::SessionMoved
        | Error::NoNode
        | Error::NoAuth
        | Error::BadVersion
        | Error::ThrottledOp
        | Error::NotReadOnly
        | Error::LockLost
        | Error::MultiFailed { .. } => Outcome::Failed,
        _ => Outcome::Maybe,
    }
}
