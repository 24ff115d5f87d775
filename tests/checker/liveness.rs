//! Checks 3 and 4: everything ends in bounded time (attempts, connects,
//! exits, no stall) with a clear error, and no lock node is orphaned, at
//! the end or while its owner's session lives.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::checks::{ms, ns, Checker, Section};
use crate::events::Event;

/// How long after its owner acquired a later node a node it gave up may
/// still be seen, its delete in flight (ns).
const DELETE_GRACE: u64 = 1_000_000_000;

/// How long after it ends a fault may disturb the lock (session expiry of
/// a victim, reconnects, a lock wait in progress), in ns.
pub(crate) fn recovery_ns(session: Duration, wait: Duration) -> u64 {
    4 * ns(session) + ns(wait) + 2_000_000_000
}

impl Checker<'_> {
    /// Fault time overlapping `[a, b]`.
    fn fault_overlap(&self, a: u64, b: u64) -> u64 {
        self.run
            .faults
            .iter()
            .map(|f| b.min(f.end_ns).saturating_sub(a.max(f.start_ns)))
            .sum()
    }

    pub(crate) fn bounded(&mut self, sections: &[Section<'_>]) {
        let run = self.run;
        let (t, w) = (ns(run.session), ns(run.wait));
        for p in &run.procs {
            let mut begun: Option<(u64, u64)> = None;
            let mut spans = Vec::new();
            for e in &p.events {
                match e {
                    Event::Begin { t, n } => begun = Some((*n, *t)),
                    Event::Acq { t: end, n, .. }
                    | Event::NoLock { t: end, n }
                    | Event::LockErr { t: end, n, .. } => {
                        if let Some((_, start)) = begun.take().filter(|(b, _)| b == n) {
                            spans.push(("lock attempt", start, *end, w));
                        }
                    }
                    Event::Session { t: end, start, .. } | Event::ConnErr { t: end, start, .. } => {
                        spans.push(("connect", *start, *end, 0));
                    }
                    _ => {}
                }
            }
            for (what, start, end, wait) in spans {
                let took = end.saturating_sub(start);
                let bound = wait + 3 * t + self.fault_overlap(start, end);
                self.figures.max_attempt_ms = self.figures.max_attempt_ms.max(ms(took));
                if took > wait + 3 * t {
                    self.figures.slow_attempts += 1;
                }
                if took > bound {
                    let text = format!(
                        "{}: {what} from {} took {} ms, over its bound of {} ms",
                        p.name,
                        self.at(start),
                        ms(took),
                        ms(bound)
                    );
                    self.violate(3, text);
                }
            }
            if p.hung {
                let open = begun.map_or("no lock attempt open".to_owned(), |(n, start)| {
                    format!("lock attempt {n} open since {}", self.at(start))
                });
                let last = p.events.last().map_or("none".into(), |e| {
                    format!("{} at {}", e.to_line(), self.at(e.t()))
                });
                let text = format!(
                    "{} did not exit when told to stop (a hang; killed; stacks in {}.stacks): \
                     {open}; last event: {last}",
                    p.name, p.name
                );
                self.violate(3, text);
            }
            if p.killed_ns.is_none() && !p.hung {
                match &p.exit {
                    Some((_, true, _)) => {}
                    Some((status, false, at)) => {
                        let text = format!(
                            "{} exited by itself with {status} at {}",
                            p.name,
                            self.at(*at)
                        );
                        self.violate(3, text);
                    }
                    None => self.violate(3, format!("{} never exited", p.name)),
                }
            }
            if let Some(panic) = &p.panic {
                self.violate(3, format!("{} panicked: {panic}", p.name));
            }
            if !p.bad_lines.is_empty() && (p.killed_ns.is_none() || p.bad_lines.len() > 1) {
                let text = format!("{} wrote unreadable log lines: {:?}", p.name, p.bad_lines);
                self.violate(3, text);
            }
        }
        self.stalls(sections);
        self.grants_after_the_heal(sections);
        self.grants_to_every_contender(sections);
    }

    /// Reports a contender (a process and the replacements of it that were
    /// killed, `c2.0`, `c2.1`...) that never acquired: a run in which one
    /// contender, or none, held the lock would pass the mutual-exclusion
    /// check without having tested it.
    fn grants_to_every_contender(&mut self, sections: &[Section<'_>]) {
        let contender = |name: &str| name.split('.').next().unwrap_or(name).to_owned();
        let granted: BTreeSet<String> = sections.iter().map(|s| contender(s.proc)).collect();
        let all: BTreeSet<String> = self.run.procs.iter().map(|p| contender(&p.name)).collect();
        for never in all.difference(&granted) {
            self.violate(3, format!("{never} never acquired in the whole run"));
        }
    }

    /// Reports a run whose lock did not grant again once every fault was
    /// healed (the run goes on for up to [`recovery_ns`] for it).
    fn grants_after_the_heal(&mut self, sections: &[Section<'_>]) {
        let healed = self.run.healed_ns;
        if !sections.iter().any(|s| s.acq > healed) {
            let text = format!(
                "no acquisition in the {} ms from the heal of every fault, at {}, to the stop",
                ms(self.run.stop_ns.saturating_sub(healed)),
                self.at(healed)
            );
            self.violate(3, text);
        }
    }

    /// Reports stretches without any acquisition that no fault explains.
    fn stalls(&mut self, sections: &[Section<'_>]) {
        let run = self.run;
        let (t, w) = (ns(run.session), ns(run.wait));
        let recovery = recovery_ns(run.session, run.wait);
        let longest_quiet = 2 * t + w + 2_000_000_000;
        let mut disturbed: Vec<(u64, u64)> = run
            .faults
            .iter()
            .map(|f| (f.start_ns, f.end_ns + recovery))
            .collect();
        disturbed.push((run.start_ns, run.start_ns + recovery));
        disturbed.sort_unstable();
        let mut points: Vec<u64> = sections.iter().map(|s| s.acq).collect();
        points.push(run.start_ns);
        points.push(run.stop_ns);
        points.sort_unstable();
        for pair in points.windows(2) {
            let (a, b) = (pair[0], pair[1].min(run.stop_ns));
            if b <= a {
                continue;
            }
            self.figures.longest_gap_ms = self.figures.longest_gap_ms.max(ms(b - a));
            // The undisturbed pieces of [a, b].
            let mut cursor = a;
            for &(ds, de) in &disturbed {
                if de <= cursor || ds >= b {
                    continue;
                }
                if ds > cursor && ds - cursor > longest_quiet {
                    let text = format!(
                        "no acquisition from {} to {} ({} ms) with no fault to explain it",
                        self.at(cursor),
                        self.at(ds),
                        ms(ds - cursor)
                    );
                    self.violate(3, text);
                }
                cursor = cursor.max(de);
            }
            if b > cursor && b - cursor > longest_quiet {
                let text = format!(
                    "no acquisition from {} to {} ({} ms) with no fault to explain it",
                    self.at(cursor),
                    self.at(b),
                    ms(b - cursor)
                );
                self.violate(3, text);
            }
        }
    }

    pub(crate) fn leftovers(&mut self) {
        match &self.run.leftovers {
            Ok(nodes) => {
                for (node, owner) in nodes {
                    let owner = owner.map_or("gone".into(), |o| format!("{o:#x}"));
                    let who = self.session_owner(owner.as_str());
                    let text = format!(
                        "lock node {node} left after every contender exited (session {owner}{who})"
                    );
                    self.violate(4, text);
                }
            }
            Err(e) => self.violate(4, format!("could not list the lock nodes at the end: {e}")),
        }
    }

    /// `", contender X"` if a contender logged session `hex`.
    fn session_owner(&self, hex: &str) -> String {
        for p in &self.run.procs {
            for e in &p.events {
                if let Event::Session { id, .. } = e {
                    if format!("{id:#x}") == hex {
                        return format!(", contender {}", p.name);
                    }
                }
            }
        }
        String::new()
    }

    /// A lock node orphaned while its owner's session lives. Every node a
    /// contender gives up is deleted by a request sent as soon as the node
    /// is known (at once, or when its create's reply comes if the attempt
    /// gave up before it), so once the owner has completed a later attempt
    /// whose create succeeded (it ended acquiring another node), the node
    /// must be gone, or going: its delete went out before the later
    /// attempt's replies were handled, though a read lock may be granted
    /// while an earlier read node's delete is in flight ([`DELETE_GRACE`]).
    /// A node seen (as the lowest, so blocking everyone) both before such
    /// an attempt began and past that grace after it ended is an orphan.
    /// An attempt that timed out proves nothing: its create may have been
    /// taken back unsent, with no connection to send it, and the release
    /// before it is then still waiting for one too.
    pub(crate) fn live_orphans(&mut self) {
        let run = self.run;
        // Polled every 200 ms between faults: none at all means this part
        // of the check looked at nothing.
        if run.lowest.is_empty() {
            let text = "no lowest lock node was found in the whole run: orphans while their \
                        sessions lived went unchecked";
            self.violate(4, text.to_owned());
        }
        let mut spans: BTreeMap<&str, (u64, u64, i64)> = BTreeMap::new();
        for (t, node, owner) in &run.lowest {
            if let Some(owner) = owner {
                spans.entry(node.as_str()).or_insert((*t, *t, *owner)).1 = *t;
            }
        }
        for (node, (first, last, owner)) in spans {
            let Some(proc) = run.procs.iter().find(|p| {
                p.events
                    .iter()
                    .any(|e| matches!(e, Event::Session { id, .. } if *id == owner))
            }) else {
                continue;
            };
            // Only the owning session's own attempts count: a node of an
            // expired session can outlive the expiry the client was told of
            // by a moment, while the process already works on a new one.
            let mut session = None;
            let mut begun = None;
            let mut later = None;
            for e in &proc.events {
                match e {
                    Event::Session { id, .. } => session = Some(*id),
                    Event::Begin { .. } if session != Some(owner) => begun = None,
                    Event::Begin { t, n } => begun = Some((*n, *t)),
                    Event::Acq {
                        t,
                        n,
                        node: acquired,
                        ..
                    } => {
                        if let Some((_, b)) = begun.filter(|(bn, b)| bn == n && *b > first) {
                            if *t + DELETE_GRACE < last && acquired != node {
                                later = Some((*n, b, *t));
                                break;
                            }
                        }
                    }
                    _ => {}
                }
            }
            if let Some((n, b, e)) = later {
                let text = format!(
                    "lock node {node} of {} (session {owner:#x}) was the lowest from {} to {}, \
                     although its owner's attempt {n} ({} to {}) created a later node: orphaned \
                     while its session lived, every contender queued behind it",
                    proc.name,
                    self.at(first),
                    self.at(last),
                    self.at(b),
                    self.at(e),
                );
                self.violate(4, text);
            }
        }
    }

    /// Nodes a contender found still owned by its session right after an
    /// attempt that ended without the lock (see `Contender::owned_nodes`).
    pub(crate) fn owned_after_failure(&mut self) {
        let run = self.run;
        for p in &run.procs {
            for e in &p.events {
                if let Event::Owned { t, n, nodes } = e {
                    let text = format!(
                        "{}: two session timeouts after its attempt {n} ended without the lock \
                         (at {}), its session, still live, owned {nodes}: a node it gave up but \
                         did not delete",
                        p.name,
                        self.at(*t)
                    );
                    self.violate(4, text);
                }
            }
        }
    }
}
