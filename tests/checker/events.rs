//! The contenders' log: one event per line, appended and written with one
//! `write` call each (so a line reaches the kernel before the next step, and
//! survives a SIGKILL of the contender), parsed back by the checks.
//!
//! Times are nanoseconds since the Unix epoch from `SystemTime`. Every
//! process of a run is on one machine and reads the same clock, so the
//! times of different contenders compare directly; this assumes the clock is
//! not stepped during a run (slewing is harmless at the scale of a run).
//! `Instant` would be immune to steps, but its values cannot be compared
//! across processes.
//!
//! Line format: `KIND <t> <fields...>`, and where an error ends the line,
//! `<ErrorVariant> <its message...>`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in nanoseconds since the Unix epoch (see the module docs).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// An error as logged: the variant name and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedError {
    pub kind: String,
    pub msg: String,
}

impl LoggedError {
    pub fn of(e: &zklock::Error) -> LoggedError {
        let debug = format!("{e:?}");
        let kind: String = debug
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        LoggedError {
            kind,
            msg: e.to_string().replace('\n', " "),
        }
    }

    fn write(&self, out: &mut String) {
        out.push(' ');
        out.push_str(&self.kind);
        out.push(' ');
        out.push_str(&self.msg);
    }
}

/// How a write to the counter ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged by the server.
    Ok,
    /// The reply was lost: it may or may not have been applied.
    Maybe,
    /// Rejected by the server: not applied.
    Failed,
}

/// One line of a contender's log. `n` numbers the lock attempts of one
/// contender process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A session was established; `start` is when connecting began.
    Session { t: u64, start: u64, id: i64 },
    /// Connecting failed.
    ConnErr {
        t: u64,
        start: u64,
        err: LoggedError,
    },
    /// A lock attempt (`try_lock_for`) starts.
    Begin { t: u64, n: u64 },
    /// The attempt acquired the lock.
    Acq {
        t: u64,
        n: u64,
        token: i64,
        node: String,
    },
    /// The attempt timed out without the lock.
    NoLock { t: u64, n: u64 },
    /// The attempt failed.
    LockErr { t: u64, n: u64, err: LoggedError },
    /// After an attempt that ended without the lock, the session still
    /// owned these lock nodes (comma-separated paths).
    Owned { t: u64, n: u64, nodes: String },
    /// The guard's state changed (from `state_changes()`).
    State { t: u64, n: u64, state: String },
    /// The counter was read: its value and the token of its last writer.
    Read {
        t: u64,
        n: u64,
        value: u64,
        token: i64,
    },
    /// Reading the counter failed.
    ReadErr { t: u64, n: u64, err: LoggedError },
    /// The guard was not `Held` (now or at some point in the section), so
    /// the write was skipped.
    Skip { t: u64, n: u64, state: String },
    /// The guard was `Held` and the write of `value` is being sent.
    Write { t: u64, n: u64, value: u64 },
    /// The write ended; an acknowledged one with the counter's version
    /// it made, which tells where the server applied it among the others.
    Wrote {
        t: u64,
        n: u64,
        outcome: Outcome,
        version: Option<u64>,
        err: Option<LoggedError>,
    },
    /// `unlock()` is being called: from here on the contender no longer
    /// relies on holding the lock.
    Release { t: u64, n: u64 },
    /// The section ended: `release_start` is when `unlock()` was called,
    /// `how` is `released`, `lost` or `error`.
    End {
        t: u64,
        n: u64,
        release_start: u64,
        how: String,
        err: Option<LoggedError>,
    },
    /// The contender was told to stop.
    Stop { t: u64 },
    /// The contender is exiting normally.
    Exit { t: u64 },
}

impl Event {
    /// The event's time.
    pub fn t(&self) -> u64 {
        match self {
            Event::Session { t, .. }
            | Event::ConnErr { t, .. }
            | Event::Begin { t, .. }
            | Event::Acq { t, .. }
            | Event::NoLock { t, .. }
            | Event::LockErr { t, .. }
            | Event::Owned { t, .. }
            | Event::State { t, .. }
            | Event::Read { t, .. }
            | Event::ReadErr { t, .. }
            | Event::Skip { t, .. }
            | Event::Write { t, .. }
            | Event::Wrote { t, .. }
            | Event::Release { t, .. }
            | Event::End { t, .. }
            | Event::Stop { t }
            | Event::Exit { t } => *t,
        }
    }

    /// The log line, without the newline.
    pub fn to_line(&self) -> String {
        let (mut s, err) = match self {
            Event::Session { t, start, id } => (format!("SESSION {t} {start} {id}"), None),
            Event::ConnErr { t, start, err } => (format!("CONNERR {t} {start}"), Some(err)),
            Event::Begin { t, n } => (format!("BEGIN {t} {n}"), None),
            Event::Acq { t, n, token, node } => (format!("ACQ {t} {n} {token} {node}"), None),
            Event::NoLock { t, n } => (format!("NOLOCK {t} {n}"), None),
            Event::LockErr { t, n, err } => (format!("LOCKERR {t} {n}"), Some(err)),
            Event::Owned { t, n, nodes } => (format!("OWNED {t} {n} {nodes}"), None),
            Event::State { t, n, state } => (format!("STATE {t} {n} {state}"), None),
            Event::Read { t, n, value, token } => (format!("READ {t} {n} {value} {token}"), None),
            Event::ReadErr { t, n, err } => (format!("READERR {t} {n}"), Some(err)),
            Event::Skip { t, n, state } => (format!("SKIP {t} {n} {state}"), None),
            Event::Write { t, n, value } => (format!("WRITE {t} {n} {value}"), None),
            Event::Wrote {
                t,
                n,
                outcome,
                version,
                err,
            } => {
                let o = match (outcome, version) {
                    (Outcome::Ok, Some(v)) => format!("ok {v}"),
                    (Outcome::Ok, None) => "ok -".to_owned(),
                    (Outcome::Maybe, _) => "maybe".to_owned(),
                    (Outcome::Failed, _) => "failed".to_owned(),
                };
                (format!("WROTE {t} {n} {o}"), err.as_ref())
            }
            Event::Release { t, n } => (format!("RELEASE {t} {n}"), None),
            Event::End {
                t,
                n,
                release_start,
                how,
                err,
            } => (format!("END {t} {n} {release_start} {how}"), err.as_ref()),
            Event::Stop { t } => (format!("STOP {t}"), None),
            Event::Exit { t } => (format!("EXIT {t}"), None),
        };
        if let Some(err) = err {
            err.write(&mut s);
        }
        s
    }

    /// Parses a line written by [`Event::to_line`].
    pub fn parse(line: &str) -> Option<Event> {
        let mut f = Fields(line);
        let kind = f.word()?;
        let t = f.num()?;
        Some(match kind {
            "SESSION" => Event::Session {
                t,
                start: f.num()?,
                id: f.num()?,
            },
            "CONNERR" => Event::ConnErr {
                t,
                start: f.num()?,
                err: f.err()?,
            },
            "BEGIN" => Event::Begin { t, n: f.num()? },
            "ACQ" => Event::Acq {
                t,
                n: f.num()?,
                token: f.num()?,
                node: f.word()?.to_owned(),
            },
            "NOLOCK" => Event::NoLock { t, n: f.num()? },
            "LOCKERR" => Event::LockErr {
                t,
                n: f.num()?,
                err: f.err()?,
            },
            "OWNED" => Event::Owned {
                t,
                n: f.num()?,
                nodes: f.word()?.to_owned(),
            },
            "STATE" => Event::State {
                t,
                n: f.num()?,
                state: f.word()?.to_owned(),
            },
            "READ" => Event::Read {
                t,
                n: f.num()?,
                value: f.num()?,
                token: f.num()?,
            },
            "READERR" => Event::ReadErr {
                t,
                n: f.num()?,
                err: f.err()?,
            },
            "SKIP" => Event::Skip {
                t,
                n: f.num()?,
                state: f.word()?.to_owned(),
            },
            "WRITE" => Event::Write {
                t,
                n: f.num()?,
                value: f.num()?,
            },
            "WROTE" => {
                let n = f.num()?;
                let (outcome, version) = match f.word()? {
                    "ok" => (Outcome::Ok, f.word()?.parse().ok()),
                    "maybe" => (Outcome::Maybe, None),
                    "failed" => (Outcome::Failed, None),
                    _ => return None,
                };
                Event::Wrote {
                    t,
                    n,
                    outcome,
                    version,
                    err: f.err(),
                }
            }
            "RELEASE" => Event::Release { t, n: f.num()? },
            "END" => Event::End {
                t,
                n: f.num()?,
                release_start: f.num()?,
                how: f.word()?.to_owned(),
                err: f.err(),
            },
            "STOP" => Event::Stop { t },
            "EXIT" => Event::Exit { t },
            _ => return None,
        })
    }
}

/// A cursor over the space-separated fields of a line.
struct Fields<'a>(&'a str);

impl<'a> Fields<'a> {
    fn word(&mut self) -> Option<&'a str> {
        let rest = self.0.trim_start_matches(' ');
        if rest.is_empty() {
            return None;
        }
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        self.0 = tail;
        Some(word)
    }

    fn num<T: std::str::FromStr>(&mut self) -> Option<T> {
        self.word()?.parse().ok()
    }

    /// The error that ends a line: a variant name, then the message.
    fn err(&mut self) -> Option<LoggedError> {
        let kind = self.word()?.to_owned();
        let msg = std::mem::take(&mut self.0).to_owned();
        Some(LoggedError { kind, msg })
    }
}

/// An append-only log file shared by a contender's threads.
pub struct EventLog {
    file: Mutex<File>,
}

impl EventLog {
    pub fn create(path: &Path) -> std::io::Result<EventLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(EventLog {
            file: Mutex::new(file),
        })
    }

    /// Appends one event with a single write. A failed write is fatal: a
    /// log with holes would make the checks meaningless.
    pub fn put(&self, event: &Event) {
        let mut line = event.to_line();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(line.as_bytes()) {
            eprintln!("contender: cannot write its log: {e}");
            std::process::exit(3);
        }
    }
}

/// Reads a log; unparsable lines are returned apart (a line cut short by a
/// SIGKILL can only be the last one).
pub fn read_log(path: &Path) -> (Vec<Event>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut events = Vec::new();
    let mut bad = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        match Event::parse(line) {
            Some(event) => events.push(event),
            None => bad.push(line.to_owned()),
        }
    }
    (events, bad)
}
