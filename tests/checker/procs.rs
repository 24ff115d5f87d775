//! The contender processes of a run and the fault proxies in front of each.
//!
//! Slot `i` is one contender at a time (`c<i>.<generation>`), with its own
//! proxy to every server (two to a standalone server): its connect string
//! lists only its proxies, so its network can be cut, partitioned or slowed
//! alone. A contender killed by
//! the fault schedule is replaced in its slot by a new process (a new
//! session) on the same proxies.
//!
//! Every process is killed and reaped when its `Proc` is dropped, so a
//! panicking orchestrator leaves none behind; a contender whose orchestrator
//! died anyway sees its stdin close and stops by itself.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use zklock::testing::{FaultProxy, ProxyMode};

use crate::contender::{LockKind, Settings};
use crate::events::now_ns;
use crate::rng::Rng;

/// One contender process.
pub struct Proc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    pub log: PathBuf,
    pub output: PathBuf,
    /// When the fault schedule SIGKILLed it (after it was reaped).
    pub killed_ns: Option<u64>,
    /// When it was told to stop.
    pub stop_ns: Option<u64>,
    /// How it exited and when that was seen.
    pub exit: Option<(String, bool, u64)>,
    /// It did not exit in time after being told to stop, and was killed.
    pub hung: bool,
}

impl Proc {
    fn spawn(exe: &Path, settings: &Settings, output: PathBuf) -> Result<Proc, String> {
        let out = File::create(&output).map_err(|e| format!("create {}: {e}", output.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("dup {}: {e}", output.display()))?;
        let mut child = Command::new(exe)
            .arg("contender")
            .args(settings.to_args())
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("spawn contender {}: {e}", settings.name))?;
        Ok(Proc {
            name: settings.name.clone(),
            stdin: child.stdin.take(),
            child,
            log: settings.log.clone(),
            output,
            killed_ns: None,
            stop_ns: None,
            exit: None,
            hung: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (recording how, once).
    pub fn poll(&mut self) -> bool {
        if self.exit.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some((status.to_string(), status.success(), now_ns()));
            }
        }
        self.exit.is_some()
    }

    /// SIGKILL, then reap: afterwards it surely does nothing more.
    fn kill(&mut self) -> u64 {
        let _ = self.child.kill();
        if let Ok(status) = self.child.wait() {
            let t = now_ns();
            self.exit.get_or_insert((status.to_string(), false, t));
        }
        now_ns()
    }

    /// Closes its stdin: it finishes what it is doing and exits.
    fn ask_stop(&mut self) {
        self.stop_ns.get_or_insert_with(now_ns);
        self.stdin = None;
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A contender slot: its proxies and its current process.
pub struct Slot {
    pub proxies: Vec<FaultProxy>,
    pub current: Option<Proc>,
    generation: u32,
}

/// Everything a run needs to start contenders.
pub struct Spawner {
    pub exe: PathBuf,
    pub dir: PathBuf,
    pub kind: LockKind,
    pub lock: String,
    pub counter: String,
    pub session: Duration,
    pub wait: Duration,
    /// See [`Settings::renew`].
    pub renew: bool,
    /// The end-to-end self-test's broken lock: the odd slots' contenders
    /// lock another path, so that two of them hold "the" lock at once.
    pub split_lock: bool,
}

/// Every contender of a run, current and past.
pub struct Contenders {
    pub slots: Vec<Slot>,
    pub retired: Vec<Proc>,
    spawner: Spawner,
    rng: Rng,
}

impl Contenders {
    /// Starts `count` slots, each with a proxy to every server in `addrs`.
    pub fn start(
        spawner: Spawner,
        count: usize,
        addrs: &[SocketAddr],
        rng: Rng,
    ) -> Result<Contenders, String> {
        let mut all = Contenders {
            slots: Vec::new(),
            retired: Vec::new(),
            spawner,
            rng,
        };
        // A standalone server gets two proxies per contender all the same,
        // so that a reconnect goes through the other one (see the chained
        // cut in faults.rs).
        let addrs: Vec<SocketAddr> = match addrs {
            [one] => vec![*one, *one],
            many => many.to_vec(),
        };
        for _ in 0..count {
            let proxies = addrs
                .iter()
                .map(|&a| FaultProxy::start(a).map_err(|e| format!("start a proxy: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            all.slots.push(Slot {
                proxies,
                current: None,
                generation: 0,
            });
        }
        for i in 0..count {
            all.spawn(i)?;
        }
        Ok(all)
    }

    /// Starts the next process of slot `i`.
    fn spawn(&mut self, i: usize) -> Result<String, String> {
        let seed = self.rng.next_u64();
        let s = &self.spawner;
        let slot = &mut self.slots[i];
        let name = format!("c{i}.{}", slot.generation);
        slot.generation += 1;
        let connect: Vec<String> = slot.proxies.iter().map(|p| p.connect_string()).collect();
        let settings = Settings {
            name: name.clone(),
            kind: s.kind,
            connect: connect.join(","),
            lock: match s.split_lock && i % 2 == 1 {
                true => format!("{}-split", s.lock),
                false => s.lock.clone(),
            },
            counter: s.counter.clone(),
            log: s.dir.join(format!("{name}.log")),
            session: s.session,
            wait: s.wait,
            seed,
            renew: s.renew,
        };
        let output = s.dir.join(format!("{name}.out"));
        slot.current = Some(Proc::spawn(&s.exe, &settings, output)?);
        Ok(name)
    }

    /// The slot whose current process has `pid`.
    pub fn slot_of_pid(&self, pid: u32) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.current.as_ref().is_some_and(|p| p.pid() == pid))
    }

    /// SIGKILLs slot `i`'s process and starts its replacement. Returns the
    /// names of both.
    pub fn kill_and_replace(&mut self, i: usize) -> Result<(String, String), String> {
        let mut old = self.slots[i].current.take().ok_or("empty slot")?;
        old.killed_ns = Some(old.kill());
        let old_name = old.name.clone();
        self.retired.push(old);
        let new_name = self.spawn(i)?;
        Ok((old_name, new_name))
    }

    /// Retires processes that exited on their own (a crash: the checks
    /// report it) and starts replacements, so the slot keeps contending.
    pub fn replace_crashed(&mut self) -> Vec<String> {
        let mut crashed = Vec::new();
        for i in 0..self.slots.len() {
            let exited = self.slots[i].current.as_mut().is_some_and(Proc::poll);
            if exited {
                if let Some(old) = self.slots[i].current.take() {
                    crashed.push(old.name.clone());
                    self.retired.push(old);
                }
                if let Err(e) = self.spawn(i) {
                    crashed.push(format!("(no replacement: {e})"));
                }
            }
        }
        crashed
    }

    /// Every proxy back to forwarding, accepting, and with no cut armed.
    pub fn heal_network(&self) {
        for proxy in self.slots.iter().flat_map(|s| &s.proxies) {
            proxy.set_mode(ProxyMode::Pass);
            proxy.refuse(false);
            if proxy.is_cut_armed() {
                proxy.cut_after_request(|_| false);
            }
        }
    }

    /// Tells every contender to stop and waits up to `limit` for them to
    /// exit; the ones still running then are killed and marked hung.
    /// Returns the names of those.
    pub fn stop_all(&mut self, limit: Duration) -> Vec<String> {
        for proc in self.slots.iter_mut().filter_map(|s| s.current.as_mut()) {
            proc.ask_stop();
        }
        let deadline = Instant::now() + limit;
        loop {
            let running = self
                .slots
                .iter_mut()
                .filter_map(|s| s.current.as_mut())
                .map(|p| usize::from(!p.poll()))
                .sum::<usize>();
            if running == 0 || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut hung = Vec::new();
        for slot in &mut self.slots {
            if let Some(mut proc) = slot.current.take() {
                if !proc.poll() {
                    proc.hung = true;
                    dump_stacks(proc.pid(), &proc.output.with_extension("stacks"));
                    proc.kill();
                    hung.push(proc.name.clone());
                }
                self.retired.push(proc);
            }
        }
        hung
    }

    /// Every process of the run, in start order per slot.
    pub fn all(&self) -> impl Iterator<Item = &Proc> {
        self.retired
            .iter()
            .chain(self.slots.iter().filter_map(|s| s.current.as_ref()))
    }
}

/// Writes the stacks of every thread of a hung process to `path`, with gdb
/// if it is installed and may attach; waits for it at most 30 s.
fn dump_stacks(pid: u32, path: &Path) {
    let Ok(out) = File::create(path) else {
        return;
    };
    let Ok(err) = out.try_clone() else {
        return;
    };
    let spawned = Command::new("gdb")
        .args(["-p", &pid.to_string(), "-batch", "-nx"])
        .args(["-ex", "thread apply all bt"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn();
    let Ok(mut gdb) = spawned else {
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = gdb.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = gdb.kill();
    let _ = gdb.wait();
}
