//! The checks run on the logs of a finished run.
//!
//! 1. Mutual exclusion: no two contenders hold at once, except two readers
//!    of a read-write lock. A contender holds from the moment its lock call
//!    returned to the earliest of: calling `unlock()`, its guard first
//!    leaving `Held`, its death. A write it sent after checking
//!    `state() == Held` extends that to the write. And no write lands
//!    inside a read hold: the counter's two reads of a reader that still
//!    held after both agree.
//! 2. Fencing: tokens strictly increase in acquisition order (a reader's
//!    only exceeds the writers' before it: readers created in one order may
//!    acquire in the other), and no holder reads, from the counter, a token
//!    newer than its own.
//! 3. Bounded: every lock attempt and connect returns within its bound
//!    (wait + 3 session timeouts + the fault time it overlaps), every
//!    contender exits by itself when told to stop, none panics or exits
//!    badly, every error is one of the expected kinds, every contender
//!    acquires at least once, the lock never stalls outside a fault's
//!    recovery time, and it grants again once every fault is healed. (Faults come so close together that their
//!    recovery times cover a whole run: only that last check shows that a
//!    lock that stopped granting did not pass for one recovering.)
//! 4. No lock node is left once every contender has exited, and none is
//!    orphaned while its session lives: right after an attempt that ended
//!    without the lock, the contender's session owns no lock node, and the
//!    lowest node, polled between faults (at least once a run), is never
//!    one its owner's session has since given up (see `liveness.rs`).
//! 5. The counter equals the acknowledged writes, give or take the writes
//!    whose reply was lost: `done <= counter <= done + maybe`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::events::{Event, LoggedError, Outcome};
use crate::faults::Fault;
use crate::report::Figures;

/// What names the node of a read lock (the library's and Curator's naming).
const READ_MARKER: &str = "__READ__";

/// The error kinds a contender may see under faults.
const EXPECTED_ERRORS: &[&str] = &[
    "ConnectionLoss",
    "SessionExpired",
    "SessionMoved",
    "LockLost",
    "Timeout",
    "Closed",
    "Io",
    "ConnectFailed",
    "OperationTimeout",
    "RequestTimeout",
    "ThrottledOp",
];

/// A contender process as the checks see it.
#[derive(Clone)]
pub struct ProcData {
    pub name: String,
    pub events: Vec<Event>,
    pub bad_lines: Vec<String>,
    pub killed_ns: Option<u64>,
    pub hung: bool,
    pub exit: Option<(String, bool, u64)>,
    /// The start of a panic message in its output, if any.
    pub panic: Option<String>,
}

impl ProcData {
    /// When it surely stopped acting.
    pub(crate) fn death(&self) -> Option<u64> {
        self.killed_ns.or(self.exit.as_ref().map(|e| e.2))
    }
}

/// Everything a run left for the checks.
#[derive(Clone)]
pub struct RunData {
    pub start_ns: u64,
    pub stop_ns: u64,
    /// When every fault had been healed, before the calm stretch that ends
    /// the run.
    pub healed_ns: u64,
    pub session: Duration,
    pub wait: Duration,
    pub procs: Vec<ProcData>,
    pub faults: Vec<Fault>,
    pub counter: Result<u64, String>,
    /// The lowest lock node (its path) and its owner, polled between faults.
    pub lowest: Vec<(u64, String, Option<i64>)>,
    /// Lock nodes left after every contender exited, with their owners.
    pub leftovers: Result<Vec<(String, Option<i64>)>, String>,
}

/// One critical section.
#[derive(Debug, Clone)]
pub(crate) struct Section<'a> {
    pub proc: &'a str,
    pub n: u64,
    pub acq: u64,
    pub token: i64,
    pub node: String,
    /// A read lock's (its node is a `__READ__` one): shared with readers.
    pub reader: bool,
    pub first_left: Option<(u64, String)>,
    pub release: Option<u64>,
    pub write: Option<(u64, Option<Outcome>)>,
    /// The counter's version an acknowledged write made.
    pub written_as: Option<u64>,
    /// The counter as read: (time, value, token of its writer).
    pub reads: Vec<(u64, u64, i64)>,
    /// When it stopped holding (see the module docs).
    pub end: u64,
}

pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(crate) fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

/// The checks' verdict.
pub struct Verdict {
    pub figures: Figures,
    pub violations: Vec<String>,
}

pub fn check(run: &RunData) -> Verdict {
    let mut v = Checker {
        run,
        figures: Figures::default(),
        violations: Vec::new(),
    };
    let sections = v.sections();
    v.mutual_exclusion(&sections);
    v.fencing(&sections);
    v.writes_in_token_order(&sections);
    v.bounded(&sections);
    v.leftovers();
    v.live_orphans();
    v.owned_after_failure();
    v.counter(&sections);
    Verdict {
        figures: v.figures,
        violations: v.violations,
    }
}

pub(crate) struct Checker<'a> {
    pub run: &'a RunData,
    pub figures: Figures,
    pub violations: Vec<String>,
}

impl<'a> Checker<'a> {
    pub(crate) fn violate(&mut self, check: u8, text: String) {
        *self.figures.violations.entry(check).or_insert(0) += 1;
        self.violations.push(format!("[check {check}] {text}"));
    }

    /// Milliseconds since the start of the run, for messages.
    pub(crate) fn at(&self, t: u64) -> String {
        let rel = t.saturating_sub(self.run.start_ns);
        format!("{}.{:03}s", rel / 1_000_000_000, (rel / 1_000_000) % 1000)
    }

    fn error_seen(&mut self, what: &str, err: &LoggedError, proc: &str, t: u64) {
        *self
            .figures
            .errors
            .entry(format!("{what}: {}", err.kind))
            .or_insert(0) += 1;
        if !EXPECTED_ERRORS.contains(&err.kind.as_str()) {
            let at = self.at(t);
            self.violate(
                3,
                format!(
                    "{proc} at {at}: unexpected {what} error {}: {}",
                    err.kind, err.msg
                ),
            );
        }
    }

    /// Builds every section from the logs, and counts what happened.
    fn sections(&mut self) -> Vec<Section<'a>> {
        let run = self.run;
        let mut all = Vec::new();
        for p in &run.procs {
            self.figures.processes += 1;
            let mut open: Option<Section<'a>> = None;
            for e in &p.events {
                match e {
                    Event::Session { .. } => self.figures.sessions += 1,
                    Event::ConnErr { t, err, .. } => self.error_seen("connect", err, &p.name, *t),
                    Event::Begin { .. } => self.figures.attempts += 1,
                    Event::Acq { t, n, token, node } => {
                        self.figures.acquisitions += 1;
                        if let Some(s) = open.take() {
                            all.push(finish(s, None));
                        }
                        open = Some(Section {
                            proc: &p.name,
                            n: *n,
                            acq: *t,
                            token: *token,
                            node: node.clone(),
                            reader: node.contains(READ_MARKER),
                            first_left: None,
                            release: None,
                            write: None,
                            written_as: None,
                            reads: Vec::new(),
                            end: *t,
                        });
                    }
                    Event::NoLock { .. } => self.figures.lock_timeouts += 1,
                    Event::LockErr { t, err, .. } => self.error_seen("lock", err, &p.name, *t),
                    Event::State { t, state, .. } => {
                        if let Some(s) = open.as_mut() {
                            if state != "Held" && s.first_left.is_none() {
                                s.first_left = Some((*t, state.clone()));
                                self.figures.left_held += 1;
                            }
                        }
                    }
                    Event::Read {
                        t, value, token, ..
                    } => {
                        if let Some(s) = open.as_mut() {
                            s.reads.push((*t, *value, *token));
                        }
                    }
                    Event::ReadErr { t, err, .. } => self.error_seen("read", err, &p.name, *t),
                    Event::Skip { .. } => self.figures.skipped += 1,
                    Event::Write { t, .. } => {
                        if let Some(s) = open.as_mut() {
                            s.write = Some((*t, None));
                        }
                    }
                    Event::Wrote {
                        t,
                        outcome,
                        version,
                        err,
                        ..
                    } => {
                        match outcome {
                            Outcome::Ok => self.figures.writes_ok += 1,
                            Outcome::Maybe => self.figures.writes_maybe += 1,
                            Outcome::Failed => self.figures.writes_failed += 1,
                        }
                        if let Some(err) = err {
                            self.error_seen("write", err, &p.name, *t);
                        }
                        if let Some(s) = open.as_mut() {
                            if let Some((_, o)) = s.write.as_mut() {
                                *o = Some(*outcome);
                            }
                            s.written_as = *version;
                        }
                    }
                    Event::Release { t, .. } => {
                        if let Some(s) = open.as_mut() {
                            s.release = Some(*t);
                        }
                    }
                    Event::End { t, how, err, .. } => {
                        *self.figures.ends.entry(how.clone()).or_insert(0) += 1;
                        if let Some(err) = err {
                            self.error_seen("unlock", err, &p.name, *t);
                        }
                        if let Some(s) = open.take() {
                            all.push(finish(s, None));
                        }
                    }
                    Event::Owned { .. } | Event::Stop { .. } | Event::Exit { .. } => {}
                }
            }
            if let Some(s) = open.take() {
                // Died holding (killed, hung or crashed): it held until then.
                all.push(finish(s, p.death()));
            }
        }
        all.sort_by_key(|s| (s.acq, s.token));
        all
    }

    fn mutual_exclusion(&mut self, sections: &[Section<'_>]) {
        // Sweep in acquisition order, remembering the section that holds
        // the longest so far, and the writer that does: a writer may
        // overlap no earlier section, a reader no earlier writer.
        let mut longest: Option<&Section<'_>> = None;
        let mut longest_writer: Option<&Section<'_>> = None;
        let mut longest_reader: Option<&Section<'_>> = None;
        for s in sections {
            if s.reader {
                self.figures.read_holds += 1;
                if longest_reader.is_some_and(|l| s.acq < l.end && s.proc != l.proc) {
                    self.figures.read_holds_shared += 1;
                }
                keep_greatest(&mut longest_reader, s, |s| s.end);
            }
            let witness = if s.reader { longest_writer } else { longest };
            if let Some(l) = witness {
                if s.acq < l.end && s.proc != l.proc {
                    let text = format!(
                        "{} held (token {}, {}) from {} to {} while {} acquired (token {}, {}) at {}; \
                         {} stopped holding by {}",
                        l.proc,
                        l.token,
                        l.node,
                        self.at(l.acq),
                        self.at(l.end),
                        s.proc,
                        s.token,
                        s.node,
                        self.at(s.acq),
                        l.proc,
                        how_ended(l),
                    );
                    self.violate(1, text);
                }
            }
            keep_greatest(&mut longest, s, |s| s.end);
            if !s.reader {
                keep_greatest(&mut longest_writer, s, |s| s.end);
            }
        }
        for s in sections.iter().filter(|s| s.reader) {
            let held: Vec<_> = s.reads.iter().filter(|r| r.0 <= s.end).collect();
            if let [first, .., last] = held.as_slice() {
                self.figures.read_holds_compared += 1;
                if first.1 != last.1 {
                    let text = format!(
                        "{} holding a read lock (token {}, {}) read the counter as {} at {}, \
                         then as {} at {}: a write landed inside the read hold",
                        s.proc,
                        s.token,
                        s.node,
                        first.1,
                        self.at(first.0),
                        last.1,
                        self.at(last.0)
                    );
                    self.violate(1, text);
                }
            }
        }
    }

    fn fencing(&mut self, sections: &[Section<'_>]) {
        // The earlier section with the highest token, and the earlier
        // writer with the highest token.
        let mut highest: Option<&Section<'_>> = None;
        let mut highest_writer: Option<&Section<'_>> = None;
        for b in sections {
            let above = if b.reader { highest_writer } else { highest };
            if let Some(a) = above.filter(|a| b.token <= a.token) {
                let text = format!(
                    "token {} of {} (acquired at {}) does not exceed token {} of {} (acquired at {})",
                    b.token,
                    b.proc,
                    self.at(b.acq),
                    a.token,
                    a.proc,
                    self.at(a.acq)
                );
                self.violate(2, text);
            }
            keep_greatest(&mut highest, b, |s| s.token);
            if !b.reader {
                keep_greatest(&mut highest_writer, b, |s| s.token);
            }
        }
        for s in sections {
            let newest = s.reads.iter().map(|r| r.2).max();
            if let Some(read) = newest.filter(|&r| r > s.token) {
                let text = format!(
                    "{} holding token {} (acquired at {}) read a counter written under the newer token {read}",
                    s.proc,
                    s.token,
                    self.at(s.acq)
                );
                self.violate(2, text);
            }
        }
    }

    /// The counter's acknowledged writes, in the order the server applied
    /// them (the versions they made), carry increasing tokens: none landed
    /// after a later holder's. The sections' own logs order the holds; this
    /// orders the writes as they landed.
    fn writes_in_token_order(&mut self, sections: &[Section<'_>]) {
        let mut written: Vec<(u64, &Section<'_>)> = sections
            .iter()
            .filter_map(|s| Some((s.written_as?, s)))
            .collect();
        written.sort_by_key(|&(version, _)| version);
        let mut newest: Option<(u64, &Section<'_>)> = None;
        for &(version, s) in &written {
            if let Some((newer_version, newer)) = newest.filter(|(_, n)| s.token <= n.token) {
                let text = format!(
                    "the counter's write of {} under token {} (acquired at {}) landed as version \
                     {version}, after the write of {} under token {} (acquired at {}) made version \
                     {newer_version}",
                    s.proc,
                    s.token,
                    self.at(s.acq),
                    newer.proc,
                    newer.token,
                    self.at(newer.acq)
                );
                self.violate(2, text);
            }
            if newest.map_or(true, |(_, n)| s.token > n.token) {
                newest = Some((version, s));
            }
        }
    }

    fn counter(&mut self, sections: &[Section<'_>]) {
        let done = sections
            .iter()
            .filter(|s| matches!(s.write, Some((_, Some(Outcome::Ok)))))
            .count() as u64;
        let maybe = sections
            .iter()
            .filter(|s| matches!(s.write, Some((_, Some(Outcome::Maybe) | None))))
            .count() as u64;
        self.figures.counter_done += done;
        self.figures.counter_maybe += maybe;
        match &self.run.counter {
            Ok(value) => {
                self.figures.counter_final += value;
                if *value < done || *value > done + maybe {
                    let text = format!(
                        "the counter is {value}, but {done} writes were acknowledged and {maybe} \
                         more may have been applied (expected {done}..={})",
                        done + maybe
                    );
                    self.violate(5, text);
                }
            }
            Err(e) => self.violate(5, format!("could not read the counter at the end: {e}")),
        }
    }
}

/// Keeps in `best` whichever of it and `s` is greater by `key`; the one
/// already kept on a tie.
fn keep_greatest<'s, 'a, K: Ord>(
    best: &mut Option<&'s Section<'a>>,
    s: &'s Section<'a>,
    key: impl Fn(&Section<'a>) -> K,
) {
    if best.map_or(true, |b| key(b) < key(s)) {
        *best = Some(s);
    }
}

/// Fixes when a section stopped holding. `death` is when its process died,
/// for a section that never ended.
fn finish(mut s: Section<'_>, death: Option<u64>) -> Section<'_> {
    let mut end = [s.release, s.first_left.as_ref().map(|l| l.0), death]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(s.acq);
    if let Some((w, _)) = s.write {
        end = end.max(w);
    }
    s.end = end.max(s.acq);
    s
}

fn how_ended(s: &Section<'_>) -> String {
    match (&s.first_left, s.release) {
        (Some((t, state)), Some(r)) if *t < r => format!("turning {state} (attempt {})", s.n),
        (_, Some(_)) => format!("calling unlock() (attempt {})", s.n),
        (Some((_, state)), None) => format!("turning {state} (attempt {})", s.n),
        (None, None) => format!("dying (attempt {})", s.n),
    }
}

/// Per-kind counts, sorted, as `kind ×n` text.
pub fn counts_text(counts: &BTreeMap<String, usize>) -> String {
    if counts.is_empty() {
        return "none".into();
    }
    counts
        .iter()
        .map(|(k, n)| format!("{k} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
