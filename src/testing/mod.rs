//! Real ZooKeeper servers and a TCP fault proxy, for tests (feature `testing`).
//!
//! This is the counterpart of Curator's `TestingServer` and `TestingCluster`:
//!
//! - [`TestServer`] runs a standalone ZooKeeper (`ZooKeeperServerMain`) in a
//!   child JVM, on a free loopback port with a temporary data directory.
//! - [`TestCluster`] runs an ensemble of `N` members (`QuorumPeerMain`), all
//!   on loopback. Built
//!   [`partitionable`](TestClusterBuilder::partitionable), it can cut a
//!   member off from the others while its clients still reach it
//!   ([`TestCluster::isolate`]).
//! - [`FaultProxy`] is a TCP proxy that sits between a client and a server
//!   and can stall, delay, cut or refuse connections, or cut a connection
//!   right after a chosen request reached the server.
//! - [`Pause`] stops a thread of the test at a [`PausePoint`] inside a
//!   library call, for races no fault at a socket can time.
//!
//! # Requirements
//!
//! The servers need a Java runtime and the ZooKeeper jars. On Debian and
//! Ubuntu: `apt-get install zookeeper default-jre-headless`. The jar is looked
//! up at `/usr/share/java/zookeeper.jar` and `java` on the `PATH`; two
//! environment variables override this:
//!
//! - `ZKLOCK_JAVA`: the `java` executable to run.
//! - `ZKLOCK_ZOOKEEPER_CLASSPATH`: the whole classpath (for example the
//!   `lib/*` directory of an Apache ZooKeeper tarball plus its jar).
//!
//! With the Debian packages the classpath is `zookeeper.jar`, whose manifest
//! lists its runtime dependencies (jute, netty, jackson, metrics, slf4j-api,
//! ...), plus `slf4j-simple.jar` when present so that the server's log is
//! written (to stderr, which goes to [`TestServer::log_path`]).
//!
//! # Defaults
//!
//! Tuned for fast tests, all configurable on the builders:
//!
//! | Setting | Default |
//! |---|---|
//! | `tickTime` | [`DEFAULT_TICK_TIME_MS`] (200 ms) |
//! | `minSessionTimeout` | [`DEFAULT_MIN_SESSION_TIMEOUT_MS`] (400 ms, 2 ticks) |
//! | `maxSessionTimeout` | [`DEFAULT_MAX_SESSION_TIMEOUT_MS`] (60 s) |
//! | ensemble `initLimit` / `syncLimit` | 25 / 10 ticks (5 s / 2 s) |
//! | startup timeout | [`DEFAULT_STARTUP_TIMEOUT`] (60 s) |
//! | JVM | `-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto` |
//! | transaction log | `forceSync=no`, 1 MiB preallocation |
//! | admin server | off (`admin.enableServer=false`) |
//! | four-letter words | all allowed (`4lw.commands.whitelist=*`) |
//!
//! `forceSync=no` means the server does not fsync its transaction log; data
//! still reaches the operating system before a write is acknowledged, so it
//! survives [`TestServer::kill`] (but not a machine crash).
//!
//! # Cleanup
//!
//! Dropping a server or cluster kills its JVMs (SIGKILL, then waits for them)
//! and removes its temporary directory. When the drop happens while the
//! thread is panicking (a failing test), the server logs are kept and their
//! paths printed to stderr. Each JVM is also watched by a small `sh` process
//! that kills it if the test process dies without running its destructors
//! (an abort, or a SIGKILL from a test runner).

mod cluster;
pub(crate) mod names;
pub(crate) mod pause;
mod process;
mod proxy;
mod pump;
mod server;
mod util;

use std::path::PathBuf;
use std::time::Duration;

pub use cluster::{TestCluster, TestClusterBuilder};
pub use names::FakeName;
pub use pause::{Pause, PausePoint, ReleasedOnDrop};
pub use proxy::{FaultProxy, ProxyMode, MAX_ERROR_REPLIES};
pub use server::{TestServer, TestServerBuilder};
pub use util::{dead_port, four_letter_word, loopback_listener, ServerMode};

/// Reads the data of each of `paths` through `client`, with every read
/// submitted before any is written, as the reads of many threads at once
/// may be: they share requests as such reads do (see
/// [`Config::batch_reads`](crate::Config::batch_reads)), but every time.
pub fn get_data_together(
    client: &crate::Client,
    paths: &[&str],
) -> Vec<crate::Result<(Vec<u8>, crate::Stat)>> {
    client.get_data_together(paths)
}

/// Sets the data of each `(path, data, version)` through `client`, with
/// every setData submitted before any is written, as the calls of many
/// threads at once may be: they share requests as such calls do (see
/// [`Config::batch_writes`](crate::Config::batch_writes)), but every time.
pub fn set_data_together(
    client: &crate::Client,
    writes: &[(&str, &[u8], Option<i32>)],
) -> Vec<crate::Result<crate::Stat>> {
    client.set_data_together(writes)
}

/// Makes `client`'s I/O thread panic when `path` is created, as a bug in
/// one of its callbacks would: for tests of what the client does then.
pub fn panic_io_thread_on_creation(client: &crate::Client, path: &str) -> crate::Result<()> {
    let on_event: crate::client::core::NotifyFn =
        std::sync::Arc::new(|_| panic!("a panic injected on the I/O thread"));
    client.start_watch_creation(client.session_generation(), path, on_event)?;
    client.shared().flush();
    Ok(())
}

/// The default `tickTime`, in ms.
pub const DEFAULT_TICK_TIME_MS: u32 = 200;
/// The default `minSessionTimeout`, in ms (two ticks).
pub const DEFAULT_MIN_SESSION_TIMEOUT_MS: u32 = 400;
/// The default `maxSessionTimeout`, in ms.
pub const DEFAULT_MAX_SESSION_TIMEOUT_MS: u32 = 60_000;
/// How long `start` waits for a server or ensemble to serve, by default.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// What to tell the user when java or the ZooKeeper jars are missing.
const INSTALL_HINT: &str = "install the Debian packages `zookeeper` and `default-jre-headless` \
     (apt-get install zookeeper default-jre-headless)";

/// Everything that can go wrong in this module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No `java` executable was found.
    #[error("java not found (looked for {looked_for}); {hint}", hint = INSTALL_HINT)]
    JavaNotFound {
        /// What was looked for: `java` on the PATH or `$ZKLOCK_JAVA`.
        looked_for: String,
    },
    /// The ZooKeeper jar was not found.
    #[error("ZooKeeper jar not found at {}; {hint}", path.display(), hint = INSTALL_HINT)]
    ZooKeeperNotFound {
        /// The path that was checked.
        path: PathBuf,
    },
    /// An I/O operation (files, processes, sockets) failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A server process exited while it was expected to run.
    #[error("ZooKeeper process exited ({status}); log {}:\n{tail}", log.display())]
    Exited {
        /// The exit status, as text.
        status: String,
        /// The server log.
        log: PathBuf,
        /// The last lines of the server log.
        tail: String,
    },
    /// Something did not happen within its time limit.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        waited: Duration,
    },
    /// A cluster member index was out of range.
    #[error("no member {index} in an ensemble of {size}")]
    NoSuchMember {
        /// The index given.
        index: usize,
        /// The ensemble size.
        size: usize,
    },
    /// The operation needs a running server, and it is stopped.
    #[error("the server is not running")]
    NotRunning,
    /// A builder setting is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
