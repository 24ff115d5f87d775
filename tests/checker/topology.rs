//! The servers of a run: one standalone server, or a 3-member ensemble,
//! with the server-side faults (kill -9 and restart, SIGSTOP and SIGCONT).

use std::net::SocketAddr;
use std::time::Duration;

use zklock::testing::{TestCluster, TestServer};

use crate::rng::Rng;

/// How long a (re)start may take before the run gives up.
const STARTUP: Duration = Duration::from_secs(60);

/// Which servers a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Standalone,
    Cluster,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Standalone => "standalone",
            Kind::Cluster => "3-node cluster",
        }
    }
}

/// The running servers; dropping this kills every JVM.
pub enum Topology {
    Standalone(TestServer),
    Cluster(TestCluster),
}

impl Topology {
    pub fn start(kind: Kind) -> Result<Topology, String> {
        let what = kind.name();
        match kind {
            Kind::Standalone => TestServer::builder()
                .startup_timeout(STARTUP)
                .start()
                .map(Topology::Standalone),
            Kind::Cluster => TestCluster::builder()
                .startup_timeout(STARTUP)
                .partitionable(true)
                .start()
                .map(Topology::Cluster),
        }
        .map_err(|e| format!("start the {what} servers: {e}"))
    }

    /// The client address of every member.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        match self {
            Topology::Standalone(s) => vec![s.addr()],
            Topology::Cluster(c) => (0..c.size())
                .filter_map(|i| c.member_addr(i).ok())
                .collect(),
        }
    }

    /// Direct connect string (not through any proxy), for the orchestrator.
    pub fn connect_string(&self) -> String {
        match self {
            Topology::Standalone(s) => s.connect_string(),
            Topology::Cluster(c) => c.connect_string(),
        }
    }

    /// Kills the server (or the cluster's leader) with SIGKILL, leaves it
    /// down for `down`, and starts it again, waiting until it serves.
    /// Returns what was killed.
    pub fn kill_and_restart(&self, down: Duration) -> Result<String, String> {
        match self {
            Topology::Standalone(s) => {
                s.kill().map_err(|e| format!("kill the server: {e}"))?;
                std::thread::sleep(down);
                s.start().map_err(|e| format!("restart the server: {e}"))?;
                Ok("server".into())
            }
            Topology::Cluster(c) => {
                let leader = c
                    .wait_leader(Duration::from_secs(20))
                    .map_err(|e| format!("find the leader: {e}"))?;
                c.kill(leader)
                    .map_err(|e| format!("kill member {leader}: {e}"))?;
                std::thread::sleep(down);
                c.start(leader)
                    .map_err(|e| format!("restart member {leader}: {e}"))?;
                Ok(format!("leader (member {leader})"))
            }
        }
    }

    /// Stops the server, or a member of the cluster (the leader half the
    /// time), with SIGSTOP for `paused`, then continues it. Returns what was
    /// paused.
    pub fn pause_and_resume(&self, paused: Duration, rng: &mut Rng) -> Result<String, String> {
        match self {
            Topology::Standalone(s) => {
                s.pause().map_err(|e| format!("pause the server: {e}"))?;
                std::thread::sleep(paused);
                s.resume().map_err(|e| format!("resume the server: {e}"))?;
                s.wait_serving(STARTUP)
                    .map_err(|e| format!("the resumed server to serve: {e}"))?;
                Ok("server".into())
            }
            Topology::Cluster(c) => {
                let (member, role) = pick_member(c, rng);
                c.pause(member)
                    .map_err(|e| format!("pause member {member}: {e}"))?;
                std::thread::sleep(paused);
                c.resume(member)
                    .map_err(|e| format!("resume member {member}: {e}"))?;
                c.wait_serving(STARTUP)
                    .map_err(|e| format!("the ensemble to serve after a resume: {e}"))?;
                Ok(format!("{role} (member {member})"))
            }
        }
    }

    /// Cuts a member of the cluster (the leader half the time) off from the
    /// other members for `held`, its clients still reaching it, then heals
    /// the partition and waits until the ensemble serves. Returns who was
    /// cut off; `None` on a standalone server, which has no peers.
    pub fn partition_member(
        &self,
        held: Duration,
        rng: &mut Rng,
    ) -> Result<Option<String>, String> {
        let Topology::Cluster(c) = self else {
            return Ok(None);
        };
        let (member, role) = pick_member(c, rng);
        c.isolate(member)
            .map_err(|e| format!("isolate member {member}: {e}"))?;
        std::thread::sleep(held);
        c.heal(member)
            .map_err(|e| format!("heal member {member}: {e}"))?;
        c.wait_serving(STARTUP)
            .map_err(|e| format!("the ensemble to serve after a partition: {e}"))?;
        Ok(Some(format!("{role} (member {member})")))
    }

    /// Brings every server back (after an interrupted fault): starts the
    /// stopped ones, continues the paused ones, heals partitions, and waits
    /// until they serve.
    pub fn heal(&self) -> Result<(), String> {
        match self {
            Topology::Standalone(s) => {
                if s.is_paused() {
                    s.resume().map_err(|e| e.to_string())?;
                }
                s.start().map_err(|e| e.to_string())
            }
            Topology::Cluster(c) => {
                for i in 0..c.size() {
                    c.heal(i).map_err(|e| e.to_string())?;
                    // SIGCONT is harmless to a running member.
                    let _ = c.resume(i);
                    if !c.is_running(i) {
                        c.start(i).map_err(|e| e.to_string())?;
                    }
                }
                c.wait_serving(STARTUP).map_err(|e| e.to_string())
            }
        }
    }
}

/// A member of `c` to fault: the leader half the time, else any member;
/// with its role.
fn pick_member(c: &TestCluster, rng: &mut Rng) -> (usize, &'static str) {
    let leader = c.wait_leader(Duration::from_secs(20)).ok();
    let member = match leader {
        Some(l) if rng.chance(1, 2) => l,
        _ => rng.index(c.size()),
    };
    match Some(member) == leader {
        true => (member, "leader"),
        false => (member, "follower"),
    }
}
