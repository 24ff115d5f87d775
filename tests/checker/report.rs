//! The figures of a run (and of all runs), printed at the end of each.

use std::collections::BTreeMap;

use crate::checks::counts_text;
use crate::faults::FaultKind;

/// What happened in one run, or summed over several.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    pub runs: usize,
    pub seconds: u64,
    pub faults: BTreeMap<FaultKind, usize>,
    /// Cuts after a request that did fire (for the two kinds of them).
    pub cuts_fired: BTreeMap<FaultKind, usize>,
    pub processes: usize,
    pub sessions: usize,
    pub attempts: usize,
    pub acquisitions: usize,
    pub lock_timeouts: usize,
    /// Sections whose guard left `Held` before `unlock()`.
    pub left_held: usize,
    pub skipped: usize,
    pub writes_ok: usize,
    pub writes_maybe: usize,
    pub writes_failed: usize,
    /// Read-lock sections; those that overlapped another reader's; those
    /// whose two reads of the counter both fell inside the hold.
    pub read_holds: usize,
    pub read_holds_shared: usize,
    pub read_holds_compared: usize,
    /// How sections ended: released, lost, error.
    pub ends: BTreeMap<String, usize>,
    /// Errors by where and kind, e.g. `lock: SessionExpired`.
    pub errors: BTreeMap<String, usize>,
    pub max_attempt_ms: u64,
    /// Lock attempts and connects longer than wait + 3 session timeouts
    /// (within their bound only thanks to the faults they overlapped).
    pub slow_attempts: usize,
    pub longest_gap_ms: u64,
    pub counter_final: u64,
    pub counter_done: u64,
    pub counter_maybe: u64,
    /// Violations by check number.
    pub violations: BTreeMap<u8, usize>,
}

fn add_map<K: Ord + Clone>(into: &mut BTreeMap<K, usize>, from: &BTreeMap<K, usize>) {
    for (k, n) in from {
        *into.entry(k.clone()).or_insert(0) += n;
    }
}

impl Figures {
    pub fn add(&mut self, o: &Figures) {
        self.runs += o.runs;
        self.seconds += o.seconds;
        add_map(&mut self.faults, &o.faults);
        add_map(&mut self.cuts_fired, &o.cuts_fired);
        self.processes += o.processes;
        self.sessions += o.sessions;
        self.attempts += o.attempts;
        self.acquisitions += o.acquisitions;
        self.lock_timeouts += o.lock_timeouts;
        self.left_held += o.left_held;
        self.skipped += o.skipped;
        self.writes_ok += o.writes_ok;
        self.writes_maybe += o.writes_maybe;
        self.writes_failed += o.writes_failed;
        self.read_holds += o.read_holds;
        self.read_holds_shared += o.read_holds_shared;
        self.read_holds_compared += o.read_holds_compared;
        add_map(&mut self.ends, &o.ends);
        add_map(&mut self.errors, &o.errors);
        self.max_attempt_ms = self.max_attempt_ms.max(o.max_attempt_ms);
        self.slow_attempts += o.slow_attempts;
        self.longest_gap_ms = self.longest_gap_ms.max(o.longest_gap_ms);
        self.counter_final += o.counter_final;
        self.counter_done += o.counter_done;
        self.counter_maybe += o.counter_maybe;
        add_map(&mut self.violations, &o.violations);
    }

    pub fn violation_count(&self) -> usize {
        self.violations.values().sum()
    }

    pub fn print(&self, title: &str) {
        let faults: usize = self.faults.values().sum();
        println!("==== {title} ====");
        println!(
            "runs: {}, {} s of faults, {} contender processes, {} sessions",
            self.runs, self.seconds, self.processes, self.sessions
        );
        println!("faults injected: {faults}");
        for kind in FaultKind::ALL {
            let n = self.faults.get(&kind).copied().unwrap_or(0);
            let extra = if matches!(
                kind,
                FaultKind::CutAfterRequest | FaultKind::CutAfterCreateThenList
            ) {
                let fired = self.cuts_fired.get(&kind).copied().unwrap_or(0);
                format!(" ({fired} fired)")
            } else {
                String::new()
            };
            println!("  {n:>5}  {}{extra}", kind.label());
        }
        println!(
            "lock attempts: {}, acquisitions: {}, timed out (try_lock_for): {}",
            self.attempts, self.acquisitions, self.lock_timeouts
        );
        println!(
            "sections: guard left Held in {}, write skipped (not Held) in {}; writes acknowledged {}, \
             ambiguous {}, rejected {}",
            self.left_held, self.skipped, self.writes_ok, self.writes_maybe, self.writes_failed
        );
        if self.read_holds > 0 {
            println!(
                "read holds: {} ({} overlapping another reader's, {} with both reads inside the hold)",
                self.read_holds, self.read_holds_shared, self.read_holds_compared
            );
        }
        println!("sections ended: {}", counts_text(&self.ends));
        println!("errors: {}", counts_text(&self.errors));
        println!(
            "longest lock attempt or connect: {} ms ({} of them over wait + 3 session \
             timeouts); longest time without an acquisition: {} ms",
            self.max_attempt_ms, self.slow_attempts, self.longest_gap_ms
        );
        println!(
            "counter: {} (acknowledged {}, ambiguous {})",
            self.counter_final, self.counter_done, self.counter_maybe
        );
        let names = [
            (1u8, "mutual exclusion"),
            (2, "fencing tokens"),
            (3, "bounded, clean failures"),
            (4, "no orphaned nodes"),
            (5, "counter"),
        ];
        let verdicts: Vec<String> = names
            .iter()
            .map(|(n, name)| {
                let v = self.violations.get(n).copied().unwrap_or(0);
                format!(
                    "{n}. {name}: {}",
                    if v == 0 {
                        "ok".into()
                    } else {
                        format!("{v} VIOLATIONS")
                    }
                )
            })
            .collect();
        println!("checks: {}", verdicts.join("; "));
    }
}
