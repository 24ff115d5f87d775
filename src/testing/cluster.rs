//! A ZooKeeper ensemble of child JVMs.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::process::{JvmProcess, Launch};
use super::proxy::{FaultProxy, ProxyMode};
use super::server::{
    option_setters, Options, ASKED_QUERY_TIMEOUT, QUERY_TIMEOUT, START_ATTEMPTS, STOP_GRACE,
};
use super::util::{
    create_dir_all, free_ports, is_port_clash, log_tail, ms, poll_pause, remaining, remove_all_but,
    server_mode, temp_dir, write_file, JavaSetup,
};
use super::{four_letter_word, Error, ServerMode};

/// The default ensemble size.
const DEFAULT_SIZE: usize = 3;

/// Configures and starts a [`TestCluster`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct TestClusterBuilder {
    options: Options,
    size: usize,
    init_limit: u32,
    sync_limit: u32,
    partitionable: bool,
}

impl Default for TestClusterBuilder {
    fn default() -> Self {
        TestClusterBuilder {
            options: Options::default(),
            size: DEFAULT_SIZE,
            init_limit: 25,
            sync_limit: 10,
            partitionable: false,
        }
    }
}

impl TestClusterBuilder {
    option_setters!();

    /// The number of members (default 3; 1 to 254).
    pub fn size(mut self, members: usize) -> Self {
        self.size = members;
        self
    }

    /// `initLimit` in ticks: how long a follower may take to connect and sync
    /// to a new leader (default 25 ticks, 5 s at the default tick).
    pub fn init_limit(mut self, ticks: u32) -> Self {
        self.init_limit = ticks;
        self
    }

    /// `syncLimit` in ticks: how far a follower may lag, and how soon a
    /// silent leader or follower is given up on (default 10 ticks, 2 s).
    pub fn sync_limit(mut self, ticks: u32) -> Self {
        self.sync_limit = ticks;
        self
    }

    /// Routes every connection between two members, to a quorum port or an
    /// election port, through a [`FaultProxy`] of its own (one per pair of
    /// members, direction and port), so that
    /// [`TestCluster::isolate`] can cut a member off from the others while
    /// its clients still reach it (default off).
    pub fn partitionable(mut self, enabled: bool) -> Self {
        self.partitionable = enabled;
        self
    }

    /// Starts every member and waits until a quorum serves with a leader.
    pub fn start(self) -> Result<TestCluster, Error> {
        self.options.validate()?;
        if !(1..=254).contains(&self.size) {
            return Err(Error::InvalidConfig(format!(
                "an ensemble needs 1 to 254 members, not {}",
                self.size
            )));
        }
        if self.init_limit == 0 || self.sync_limit == 0 {
            return Err(Error::InvalidConfig(
                "init_limit and sync_limit must be positive".into(),
            ));
        }
        let setup = JavaSetup::locate()?;
        let root = temp_dir("cluster")?;
        let members = (0..self.size)
            .map(|i| {
                let dir = root.join(format!("member-{}", i + 1));
                Member {
                    data_dir: dir.join("data"),
                    config_path: dir.join("zoo.cfg"),
                    log_path: dir.join("zookeeper.log"),
                    client_port: 0,
                    process: Mutex::new(None),
                }
            })
            .collect();
        let mut cluster = TestCluster {
            setup,
            root,
            options: self.options,
            members,
            partitionable: self.partitionable,
            links: Vec::new(),
            isolated: Mutex::new(vec![false; self.size]),
            keep_logs: false,
        };
        for member in &cluster.members {
            create_dir_all(&member.data_dir)?;
        }
        for (i, member) in cluster.members.iter().enumerate() {
            write_file(&member.data_dir.join("myid"), &format!("{}\n", i + 1))?;
        }
        for attempt in 1..=START_ATTEMPTS {
            let ports = free_ports(3 * self.size)?;
            // Each member's quorum and election ports.
            let peer_ports: Vec<(u16, u16)> = ports
                .chunks(3)
                .filter_map(|c| match c {
                    [_, peer, election] => Some((*peer, *election)),
                    _ => None,
                })
                .collect();
            cluster.links.clear();
            for (i, (member, client)) in cluster
                .members
                .iter_mut()
                .zip(ports.chunks(3).map(|c| c.first().copied()))
                .enumerate()
            {
                member.client_port = client.unwrap_or(0);
                let mut cfg = cluster
                    .options
                    .config_lines(&member.data_dir, member.client_port);
                let _ = writeln!(cfg, "initLimit={}", self.init_limit);
                let _ = writeln!(cfg, "syncLimit={}", self.sync_limit);
                for (n, &(peer, election)) in peer_ports.iter().enumerate() {
                    // A member binds its own ports; it reaches the others
                    // through its own links to them, if partitionable.
                    let (peer, election) = if self.partitionable && n != i {
                        let peer = PeerLink::start(i, n, peer)?;
                        let election = PeerLink::start(i, n, election)?;
                        let ports = (peer.port(), election.port());
                        cluster.links.extend([peer, election]);
                        ports
                    } else {
                        (peer, election)
                    };
                    let _ = writeln!(cfg, "server.{}=127.0.0.1:{peer}:{election}", n + 1);
                }
                write_file(&member.config_path, &cfg)?;
            }
            let result = (0..cluster.size())
                .try_for_each(|i| cluster.spawn(i))
                .and_then(|()| cluster.wait_serving(cluster.options.startup_timeout));
            match result {
                Ok(()) => return Ok(cluster),
                Err(e) if attempt < START_ATTEMPTS && cluster.any_port_clash(&e) => {
                    for i in 0..cluster.size() {
                        let _ = cluster.kill(i);
                    }
                }
                Err(e) => {
                    cluster.keep_logs = true;
                    return Err(e);
                }
            }
        }
        Err(Error::InvalidConfig("no start attempt made".into()))
    }
}

/// One ensemble member.
#[derive(Debug)]
struct Member {
    data_dir: PathBuf,
    config_path: PathBuf,
    log_path: PathBuf,
    client_port: u16,
    process: Mutex<Option<JvmProcess>>,
}

impl Member {
    fn lock(&self) -> MutexGuard<'_, Option<JvmProcess>> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// Running and not paused: expected to answer.
    fn is_live(&self) -> bool {
        self.lock()
            .as_mut()
            .is_some_and(|p| p.is_running() && !p.is_paused())
    }
}

/// A ZooKeeper ensemble (`QuorumPeerMain`) of child JVMs on `127.0.0.1`.
///
/// Members are indexed from 0; member `i` has `myid` `i + 1`. Each has its
/// own client, quorum and election ports, data directory and log, all kept
/// across its restarts. Every method takes `&self`.
///
/// Dropping it kills every JVM and removes the temporary directory (keeping
/// the logs if the thread is panicking).
#[derive(Debug)]
pub struct TestCluster {
    setup: JavaSetup,
    root: PathBuf,
    options: Options,
    members: Vec<Member>,
    /// Whether members reach each other through `links`.
    partitionable: bool,
    /// Every member-to-member connection path, if partitionable.
    links: Vec<PeerLink>,
    /// Which members [`isolate`](Self::isolate) cut off.
    isolated: Mutex<Vec<bool>>,
    /// Keep the logs when dropped: the start failed, and the error names them.
    keep_logs: bool,
}

/// The path from one member to one port (quorum or election) of another,
/// through a proxy of its own.
#[derive(Debug)]
struct PeerLink {
    from: usize,
    to: usize,
    proxy: FaultProxy,
}

impl PeerLink {
    fn start(from: usize, to: usize, port: u16) -> Result<PeerLink, Error> {
        let proxy = FaultProxy::start(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
        Ok(PeerLink { from, to, proxy })
    }

    fn port(&self) -> u16 {
        self.proxy.addr().port()
    }
}

impl TestCluster {
    /// A builder with the defaults (3 members).
    pub fn builder() -> TestClusterBuilder {
        TestClusterBuilder::default()
    }

    /// Starts a 3-member ensemble with the defaults.
    pub fn new() -> Result<TestCluster, Error> {
        Self::builder().start()
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Every member's client address, comma-separated.
    pub fn connect_string(&self) -> String {
        let addrs: Vec<String> = self.members.iter().map(|m| m.addr().to_string()).collect();
        addrs.join(",")
    }

    /// Member `i`'s client address.
    pub fn member_addr(&self, i: usize) -> Result<SocketAddr, Error> {
        Ok(self.member(i)?.addr())
    }

    /// Member `i`'s client address as a connect string, `"127.0.0.1:PORT"`.
    pub fn member_connect_string(&self, i: usize) -> Result<String, Error> {
        Ok(self.member(i)?.addr().to_string())
    }

    /// Member `i`'s log.
    pub fn member_log_path(&self, i: usize) -> Result<&Path, Error> {
        Ok(&self.member(i)?.log_path)
    }

    /// The configured `tickTime`.
    pub fn tick_time(&self) -> Duration {
        ms(self.options.tick_time_ms)
    }

    /// Whether member `i`'s JVM is running (a paused one is).
    pub fn is_running(&self, i: usize) -> bool {
        self.members
            .get(i)
            .is_some_and(|m| m.lock().as_mut().is_some_and(JvmProcess::is_running))
    }

    /// Starts member `i` again after a stop or kill (same ports and data) and
    /// waits until the ensemble serves (see [`wait_serving`](Self::wait_serving)).
    /// Does nothing to a running member.
    pub fn start(&self, i: usize) -> Result<(), Error> {
        self.spawn(i)?;
        self.wait_serving(self.options.startup_timeout)
    }

    /// Stops member `i` gracefully (SIGTERM; SIGKILL after 10 s).
    pub fn stop(&self, i: usize) -> Result<(), Error> {
        // Taken out only once it has exited, under the lock all along: a
        // `start` meanwhile waits, rather than spawn a second JVM on the
        // same ports and data.
        let mut process = self.member(i)?.lock();
        let stopped = process
            .as_mut()
            .map_or(Ok(()), |process| process.terminate(STOP_GRACE));
        *process = None;
        stopped
    }

    /// Kills member `i` (SIGKILL), like a crash.
    pub fn kill(&self, i: usize) -> Result<(), Error> {
        let mut process = self.member(i)?.lock();
        let killed = process.as_mut().map_or(Ok(()), JvmProcess::kill);
        *process = None;
        killed
    }

    /// [`stop`](Self::stop), then [`start`](Self::start) member `i`.
    pub fn restart(&self, i: usize) -> Result<(), Error> {
        self.stop(i)?;
        self.start(i)
    }

    /// Freezes member `i` (SIGSTOP), like [`TestServer::pause`](super::TestServer::pause).
    pub fn pause(&self, i: usize) -> Result<(), Error> {
        self.member(i)?
            .lock()
            .as_mut()
            .ok_or(Error::NotRunning)?
            .pause()
    }

    /// Continues member `i` (SIGCONT).
    pub fn resume(&self, i: usize) -> Result<(), Error> {
        self.member(i)?
            .lock()
            .as_mut()
            .ok_or(Error::NotRunning)?
            .resume()
    }

    /// Cuts member `i` off from every other member, as a network partition
    /// would: its connections to them and theirs to it stay open but carry
    /// nothing ([`ProxyMode::Blackhole`]), and new ones get no answer, while
    /// its clients still reach it. So it goes on serving them until it
    /// gives up on the quorum (a follower after `syncLimit` ticks without
    /// hearing from its leader). Needs a cluster built
    /// [`partitionable`](TestClusterBuilder::partitionable).
    ///
    /// Election connections made before the cut may still carry votes: a
    /// member answers an election connection from a lower `myid` by
    /// connecting back to the address that member advertises, its own port
    /// rather than a proxy. So a member isolated while the others run keeps
    /// rejoining the leader it cannot sync with, and never stays looking
    /// long enough to turn read-only. To keep a member apart for good,
    /// isolate it while the others are stopped: no connection is made
    /// through the cut, so none is made back around it.
    pub fn isolate(&self, i: usize) -> Result<(), Error> {
        self.set_isolated(i, true)
    }

    /// Ends [`isolate`](Self::isolate) for member `i`: the connections held
    /// through the partition are closed (as TCP would give them up), and new
    /// ones go through, except to or from a member still isolated.
    pub fn heal(&self, i: usize) -> Result<(), Error> {
        self.set_isolated(i, false)
    }

    fn set_isolated(&self, i: usize, cut_off: bool) -> Result<(), Error> {
        self.member(i)?;
        if !self.partitionable {
            return Err(Error::InvalidConfig(
                "isolate and heal need a cluster built partitionable".into(),
            ));
        }
        let mut isolated = self.isolated.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(flag) = isolated.get_mut(i) {
            *flag = cut_off;
        }
        for link in &self.links {
            let blocked = [link.from, link.to]
                .iter()
                .any(|&m| isolated.get(m).copied().unwrap_or(false));
            match (blocked, link.proxy.mode()) {
                (true, _) => link.proxy.set_mode(ProxyMode::Blackhole),
                (false, ProxyMode::Blackhole) => {
                    link.proxy.cut();
                    link.proxy.set_mode(ProxyMode::Pass);
                }
                (false, _) => {}
            }
        }
        Ok(())
    }

    /// Sends a four-letter word to member `i` (5 s timeout).
    pub fn four_letter(&self, i: usize, command: &str) -> Result<String, Error> {
        four_letter_word(self.member(i)?.addr(), command, ASKED_QUERY_TIMEOUT)
    }

    /// What member `i` says it is (`srvr`); `None` if it is stopped, paused,
    /// unreachable or not serving.
    pub fn mode(&self, i: usize) -> Option<ServerMode> {
        let member = self.members.get(i)?;
        if !member.is_live() {
            return None;
        }
        server_mode(member.addr(), QUERY_TIMEOUT)
    }

    /// The member that says it leads, if exactly one running, unpaused member
    /// does (the only member of a one-member ensemble runs standalone and
    /// counts as leading).
    pub fn leader(&self) -> Option<usize> {
        let standalone = self.size() == 1;
        let leaders: Vec<usize> = (0..self.size())
            .filter(|&i| match self.mode(i) {
                Some(ServerMode::Leader) => true,
                Some(ServerMode::Standalone) => standalone,
                _ => false,
            })
            .collect();
        match leaders.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Waits until [`leader`](Self::leader) reports one, for at most
    /// `timeout`.
    pub fn wait_leader(&self, timeout: Duration) -> Result<usize, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(leader) = self.leader() {
                return Ok(leader);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "a leader".into(),
                    waited: timeout,
                });
            }
            poll_pause(deadline);
        }
    }

    /// Waits until the ensemble serves, for at most `timeout`: every running,
    /// unpaused member not [isolated](Self::isolate) serves as leader,
    /// follower or observer, exactly one of them leads, and they are a
    /// majority of the ensemble (a one-member ensemble runs standalone).
    /// Fails at once if a member exited on its own.
    pub fn wait_serving(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut serving = 0;
            let mut leaders = 0;
            let mut all_live_serve = true;
            let isolated = self
                .isolated
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            for (member, isolated) in self.members.iter().zip(isolated) {
                if let Some(err) = member.lock().as_mut().and_then(JvmProcess::exited_error) {
                    return Err(err);
                }
                if !member.is_live() || isolated {
                    continue;
                }
                match server_mode(member.addr(), remaining(deadline).min(QUERY_TIMEOUT)) {
                    Some(ServerMode::Leader) => {
                        leaders += 1;
                        serving += 1;
                    }
                    Some(ServerMode::Follower | ServerMode::Observer) => serving += 1,
                    Some(ServerMode::Standalone) if self.size() == 1 => {
                        leaders += 1;
                        serving += 1;
                    }
                    _ => all_live_serve = false,
                }
            }
            if all_live_serve && leaders == 1 && serving > self.size() / 2 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "the ensemble to serve ({serving} serving, {leaders} leaders); {}",
                        self.log_tails()
                    ),
                    waited: timeout,
                });
            }
            poll_pause(deadline);
        }
    }

    fn member(&self, i: usize) -> Result<&Member, Error> {
        self.members.get(i).ok_or(Error::NoSuchMember {
            index: i,
            size: self.members.len(),
        })
    }

    /// Starts member `i`'s JVM unless it runs.
    fn spawn(&self, i: usize) -> Result<(), Error> {
        let member = self.member(i)?;
        let mut guard = member.lock();
        if guard.as_mut().is_some_and(JvmProcess::is_running) {
            return Ok(());
        }
        let properties = self.options.properties();
        *guard = Some(JvmProcess::spawn(&Launch {
            setup: &self.setup,
            main_class: "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            config: &member.config_path,
            log: &member.log_path,
            properties: &properties,
            cleanup_dir: &self.root,
        })?);
        Ok(())
    }

    /// Whether `err`, or any member's exit, is a port clash.
    fn any_port_clash(&self, err: &Error) -> bool {
        is_port_clash(err)
            || self.members.iter().any(|m| {
                m.lock()
                    .as_mut()
                    .and_then(JvmProcess::exited_error)
                    .is_some_and(|e| is_port_clash(&e))
            })
    }

    /// The last log lines of every member, for timeout errors.
    fn log_tails(&self) -> String {
        let mut out = String::new();
        for (i, member) in self.members.iter().enumerate() {
            let _ = write!(
                out,
                "\n--- member {i} log {}:\n{}",
                member.log_path.display(),
                log_tail(&member.log_path, 8)
            );
        }
        out
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for member in &self.members {
            let process = member.lock().take();
            drop(process); // kills and waits
        }
        if std::thread::panicking() || self.keep_logs {
            let logs: Vec<PathBuf> = self.members.iter().map(|m| m.log_path.clone()).collect();
            for log in &logs {
                eprintln!(
                    "zklock::testing: keeping the ZooKeeper log {}",
                    log.display()
                );
            }
            remove_all_but(&self.root, &logs);
        } else {
            remove_all_but(&self.root, &[]);
        }
    }
}
