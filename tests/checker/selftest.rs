//! The checks run on made-up logs with planted violations, before every
//! real run: a checker that cannot fail proves nothing.

use std::time::Duration;

use crate::checks::{check, ProcData, RunData};
use crate::events::{Event, LoggedError, Outcome};
use crate::faults::{Fault, FaultKind};

const BASE: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

fn at(ms: u64) -> u64 {
    BASE + ms * MS
}

/// A contender log built section by section (times in ms from the start).
struct Log {
    name: &'static str,
    events: Vec<Event>,
    n: u64,
}

impl Log {
    /// Contender "a" has session 1, any other session 2.
    fn new(name: &'static str) -> Log {
        Log {
            name,
            events: vec![Event::Session {
                t: at(0),
                start: at(0),
                id: if name == "a" { 1 } else { 2 },
            }],
            n: 0,
        }
    }

    /// A whole section: acquired at `acq`, released at `rel`, writing
    /// `value` with `outcome` in between, after reading `read_token`. An
    /// acknowledged write makes the counter's version `token`.
    fn section(self, acq: u64, rel: u64, token: i64, read_token: i64, outcome: Outcome) -> Log {
        let mid = (acq + rel) / 2;
        self.hold(acq, rel, token, format!("/l/n{token}"), |n| {
            vec![
                Event::Read {
                    t: at(acq),
                    n,
                    value: 0,
                    token: read_token,
                },
                Event::Write {
                    t: at(mid),
                    n,
                    value: 1,
                },
                Event::Wrote {
                    t: at(mid),
                    n,
                    outcome,
                    version: match outcome {
                        Outcome::Ok => u64::try_from(token).ok(),
                        Outcome::Maybe | Outcome::Failed => None,
                    },
                    err: None,
                },
            ]
        })
    }

    /// A whole read-lock section: acquired at `acq`, released at `rel`,
    /// reading the counter as `first` then as `second`, both times
    /// written under token 10.
    fn read_section(self, acq: u64, rel: u64, token: i64, (first, second): (u64, u64)) -> Log {
        let node = format!("/l/_c_u-__READ__{token:010}");
        self.hold(acq, rel, token, node, |n| {
            let read = |t: u64, value: u64| Event::Read {
                t: at(t),
                n,
                value,
                token: 10,
            };
            vec![read(acq + 1, first), read(rel - 1, second)]
        })
    }

    /// Attempt `n` acquiring `node` at `acq`, doing what `inside(n)` lists,
    /// and releasing at `rel`.
    fn hold(
        mut self,
        acq: u64,
        rel: u64,
        token: i64,
        node: String,
        inside: impl FnOnce(u64) -> Vec<Event>,
    ) -> Log {
        self.n += 1;
        let n = self.n;
        self.events.extend([
            Event::Begin { t: at(acq), n },
            Event::Acq {
                t: at(acq),
                n,
                token,
                node,
            },
        ]);
        self.events.extend(inside(n));
        self.events.extend([
            Event::Release { t: at(rel), n },
            Event::End {
                t: at(rel),
                n,
                release_start: at(rel),
                how: "released".into(),
                err: None,
            },
        ]);
        self
    }

    fn push(mut self, e: Event) -> Log {
        self.events.push(e);
        self
    }

    fn done(self, exit: u64) -> ProcData {
        ProcData {
            name: self.name.into(),
            events: self.events,
            bad_lines: Vec::new(),
            killed_ns: None,
            hung: false,
            exit: Some(("exit status: 0".into(), true, at(exit))),
            panic: None,
        }
    }
}

fn data(procs: Vec<ProcData>, counter: u64) -> RunData {
    RunData {
        start_ns: at(0),
        stop_ns: at(4000),
        healed_ns: at(0),
        session: Duration::from_millis(1000),
        wait: Duration::from_millis(500),
        procs,
        faults: Vec::new(),
        counter: Ok(counter),
        // One reading, after every section, of b's last node.
        lowest: vec![(at(4050), "/l/b-0000000099".into(), Some(2))],
        leftovers: Ok(Vec::new()),
    }
}

/// Two contenders taking turns every 500 ms, all writes acknowledged.
fn clean() -> RunData {
    let mut a = Log::new("a");
    let mut b = Log::new("b");
    for i in 0..8 {
        let t = i * 500;
        if i % 2 == 0 {
            a = a.section(t, t + 100, i as i64 + 10, i as i64 + 9, Outcome::Ok);
        } else {
            b = b.section(t, t + 100, i as i64 + 10, i as i64 + 9, Outcome::Ok);
        }
    }
    data(vec![a.done(4100), b.done(4100)], 8)
}

/// A writer, two readers sharing the lock (the one created second
/// acquiring first), then the writer again.
fn readers() -> RunData {
    let a = Log::new("a")
        .section(0, 100, 10, 0, Outcome::Ok)
        .section(500, 600, 30, 10, Outcome::Ok)
        .done(4100);
    let b = Log::new("b").read_section(200, 400, 20, (1, 1)).done(4100);
    let c = Log::new("c").read_section(250, 450, 15, (1, 1)).done(4100);
    data(vec![a, b, c], 2)
}

/// Runs the checks on `run` and returns the numbers of the failing checks.
fn failing(run: &RunData) -> Vec<u8> {
    check(run).figures.violations.keys().copied().collect()
}

pub fn run() -> Result<(), String> {
    let mut cases: Vec<(&str, RunData, Vec<u8>)> = vec![("a clean history", clean(), vec![])];

    let mut r = clean();
    r.procs[1] = Log::new("b")
        .section(50, 150, 11, 10, Outcome::Ok)
        .done(4100);
    r.counter = Ok(5);
    cases.push(("b acquires while a holds", r, vec![1]));

    // a's first write (token 10) lands after every later holder's.
    let mut r = clean();
    for e in &mut r.procs[0].events {
        if let Event::Wrote { n: 1, version, .. } = e {
            *version = Some(50);
        }
    }
    cases.push(("a write landing after a later holder's", r, vec![2]));

    let mut r = clean();
    r.procs.push(Log::new("c").done(4100));
    cases.push(("c never acquires", r, vec![3]));

    let mut r = clean();
    r.lowest.clear();
    cases.push(("the lowest node never read", r, vec![4]));

    let mut r = clean();
    r.procs[1] = Log::new("b")
        .section(500, 600, 5, 4, Outcome::Ok)
        .section(1500, 1600, 13, 12, Outcome::Ok)
        .section(2500, 2600, 15, 14, Outcome::Ok)
        .section(3500, 3600, 17, 16, Outcome::Ok)
        .done(4100);
    cases.push(("a token that goes down", r, vec![2]));

    let mut r = clean();
    r.procs[1] = Log::new("b")
        .section(500, 600, 11, 99, Outcome::Ok)
        .section(1500, 1600, 13, 12, Outcome::Ok)
        .section(2500, 2600, 15, 14, Outcome::Ok)
        .section(3500, 3600, 17, 16, Outcome::Ok)
        .done(4100);
    cases.push(("a read of a newer token", r, vec![2]));

    let mut r = clean();
    r.procs[0].events.extend([
        Event::Begin { t: at(200), n: 90 },
        Event::NoLock { t: at(9000), n: 90 },
    ]);
    cases.push(("an attempt far over its bound", r, vec![3]));

    let mut r = clean();
    r.procs[0].hung = true;
    cases.push(("a contender that does not stop", r, vec![3]));

    let mut r = clean();
    r.procs[0].events.push(Event::LockErr {
        t: at(3900),
        n: 99,
        err: LoggedError {
            kind: "Protocol".into(),
            msg: "bad frame".into(),
        },
    });
    cases.push(("an unexpected error", r, vec![3]));

    let mut r = clean();
    r.procs[0].panic = Some("thread 'main' panicked at ...".into());
    cases.push(("a panic", r, vec![3]));

    let mut r = clean();
    r.stop_ns = at(30_000);
    cases.push(("a stall with no fault", r, vec![3]));

    // Every stall is within a fault's recovery, but the lock never grants
    // after the last heal.
    let mut r = clean();
    r.faults = vec![Fault {
        kind: FaultKind::Cut,
        start_ns: at(3600),
        end_ns: at(3700),
        what: "a cut".into(),
        fired: true,
    }];
    r.healed_ns = at(3700);
    r.stop_ns = at(14_000);
    cases.push(("no acquisition after the last heal", r, vec![3]));

    let mut r = clean();
    r.leftovers = Ok(vec![("/l/n17".into(), Some(1))]);
    cases.push(("a node left behind", r, vec![4]));

    let mut r = clean();
    r.counter = Ok(7);
    cases.push(("a lost update", r, vec![5]));

    // a's session (1) owns /l/orphan, the lowest from 0 to 3900 ms, while
    // a completes later attempts: an orphan.
    let mut r = clean();
    r.lowest = (0..40)
        .map(|i| (at(100 * i), "/l/orphan".to_owned(), Some(1)))
        .collect();
    cases.push(("a node its owner gave up, blocking the lock", r, vec![4]));

    // The same node, while a's later attempts only time out: their
    // creates may have been taken back unsent during an outage, with the
    // node's release still waiting for a connection too. Not proof.
    let mut r = clean();
    let mut a = Log::new("a");
    for n in 1..4 {
        a.events.extend([
            Event::Begin { t: at(1000 * n), n },
            Event::NoLock {
                t: at(1000 * n + 500),
                n,
            },
        ]);
    }
    r.procs[0] = a.done(4100);
    r.procs[1] = Log::new("b").done(4100);
    r.counter = Ok(0);
    r.lowest = (0..40)
        .map(|i| (at(100 * i), "/l/waiting".to_owned(), Some(1)))
        .collect();
    // (Check 3 fails: nobody ever acquires, after the heal either.)
    cases.push((
        "a node lowest while its owner's attempts time out",
        r,
        vec![3],
    ));

    let mut r = clean();
    r.procs[0].events.extend([
        Event::Begin { t: at(3900), n: 9 },
        Event::NoLock { t: at(3950), n: 9 },
        Event::Owned {
            t: at(3951),
            n: 9,
            nodes: "/l/n20".into(),
        },
    ]);
    cases.push(("a node still owned after a failed attempt", r, vec![4]));

    // a's session 1 expires at 500 ms and a goes on with session 3; its
    // old node outlives the expiry a little: not an orphan of session 3.
    let mut r = clean();
    r.procs[0].events.insert(
        8,
        Event::Session {
            t: at(500),
            start: at(500),
            id: 3,
        },
    );
    r.lowest = (6..40)
        .map(|i| (at(100 * i), "/l/old".to_owned(), Some(1)))
        .collect();
    cases.push(("an expired session's node, lingering", r, vec![]));

    // A node a gave up, still seen for 500 ms after a's next acquisition:
    // its delete in flight (sent when its create's reply came). Fine; but
    // not for 1.5 s.
    for (until, violations) in [(15, vec![]), (25, vec![4])] {
        let mut r = clean();
        r.lowest = (9..until)
            .map(|i| (at(100 * i), "/l/going".to_owned(), Some(1)))
            .collect();
        let what = if violations.is_empty() {
            "a given-up node going just after its owner acquires another"
        } else {
            "a given-up node still there well after its owner acquires another"
        };
        cases.push((what, r, violations));
    }

    // The same node is lowest only until a's next attempt begins: fine.
    let mut r = clean();
    r.lowest = (0..10)
        .map(|i| (at(100 * i), "/l/n12".to_owned(), Some(1)))
        .collect();
    cases.push(("a node lowest until its owner acquires it", r, vec![]));

    let mut r = clean();
    r.procs[1] = Log::new("b")
        .section(500, 600, 11, 10, Outcome::Maybe)
        .section(1500, 1600, 13, 12, Outcome::Ok)
        .section(2500, 2600, 15, 14, Outcome::Ok)
        .section(3500, 3600, 17, 16, Outcome::Ok)
        .done(4100);
    r.counter = Ok(7);
    cases.push(("a lost reply, not applied", r, vec![]));

    // a turns Suspended at 150 and never writes again; b acquires at 300:
    // no overlap, although a only calls unlock() at 400.
    let mut r = clean();
    r.procs[0] = Log::new("a")
        .push(Event::Begin { t: at(0), n: 1 })
        .push(Event::Acq {
            t: at(100),
            n: 1,
            token: 9,
            node: "/l/n9".into(),
        })
        .push(Event::State {
            t: at(150),
            n: 1,
            state: "Suspended".into(),
        })
        .push(Event::Skip {
            t: at(160),
            n: 1,
            state: "Suspended".into(),
        })
        .push(Event::Release { t: at(400), n: 1 })
        .push(Event::End {
            t: at(400),
            n: 1,
            release_start: at(400),
            how: "released".into(),
            err: None,
        })
        .section(1000, 1100, 12, 11, Outcome::Ok)
        .section(2000, 2100, 14, 13, Outcome::Ok)
        .section(3000, 3100, 16, 15, Outcome::Ok)
        .done(4100);
    r.procs[1] = Log::new("b")
        .section(300, 350, 10, 9, Outcome::Ok)
        .section(1500, 1600, 13, 12, Outcome::Ok)
        .section(2500, 2600, 15, 14, Outcome::Ok)
        .section(3500, 3600, 17, 16, Outcome::Ok)
        .done(4100);
    r.counter = Ok(7);
    cases.push(("a Suspended holder, then another", r.clone(), vec![]));
    // The same, but a writes at 320 anyway: now they overlap.
    r.procs[0].events.insert(
        4,
        Event::Write {
            t: at(320),
            n: 1,
            value: 1,
        },
    );
    r.counter = Ok(8);
    cases.push(("a write after Suspended", r, vec![1]));

    cases.push(("readers sharing a read-write lock", readers(), vec![]));

    let mut r = readers();
    r.procs[0] = Log::new("a")
        .section(0, 100, 10, 0, Outcome::Ok)
        .section(300, 350, 30, 10, Outcome::Ok)
        .done(4100);
    cases.push(("a writer inside a read hold", r, vec![1]));

    let mut r = readers();
    r.procs[1] = Log::new("b").read_section(200, 400, 20, (1, 2)).done(4100);
    cases.push(("a write landing inside a read hold", r, vec![1]));

    // b turned Suspended at 300: its second read, at 399, is not covered.
    let mut r = readers();
    r.procs[1] = Log::new("b").read_section(200, 400, 20, (1, 2)).done(4100);
    r.procs[1].events.insert(
        4,
        Event::State {
            t: at(300),
            n: 1,
            state: "Suspended".into(),
        },
    );
    cases.push(("a changed read after the read hold ended", r, vec![]));

    let mut r = readers();
    r.procs[2] = Log::new("c").read_section(250, 450, 5, (1, 1)).done(4100);
    cases.push(("a reader's token below an earlier writer's", r, vec![2]));

    let mut failures = Vec::new();
    for (name, run, expected) in &cases {
        let got = failing(run);
        if &got != expected {
            failures.push(format!(
                "{name}: checks {got:?} failed, expected {expected:?}"
            ));
        }
    }
    if failures.is_empty() {
        println!(
            "checker self-test: {} made-up histories judged as expected",
            cases.len()
        );
        Ok(())
    } else {
        Err(format!(
            "the checks misjudge made-up histories: {}",
            failures.join("; ")
        ))
    }
}
