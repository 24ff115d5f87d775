//! A standalone ZooKeeper server in a child JVM.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::process::{JvmProcess, Launch};
use super::util::{
    create_dir_all, free_ports, is_port_clash, log_tail, ms, poll_pause, remaining, remove_all_but,
    server_mode, serves_data_dir, temp_dir, write_file, JavaSetup,
};
use super::{
    four_letter_word, Error, ServerMode, DEFAULT_MAX_SESSION_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT,
    DEFAULT_TICK_TIME_MS,
};

/// How long a graceful stop waits before killing.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);
/// How many times a first start is retried on a port clash.
pub(crate) const START_ATTEMPTS: usize = 3;
/// The timeout of one four-letter-word query while polling.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(1);
/// The timeout of a four-letter word a test asks for: a JVM stalled for a
/// second on a loaded machine must not fail the test that asked.
pub(crate) const ASKED_QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Settings shared by [`TestServerBuilder`] and the ensemble builder.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) tick_time_ms: u32,
    pub(crate) min_session_timeout_ms: Option<u32>,
    pub(crate) max_session_timeout_ms: Option<u32>,
    pub(crate) extended_types: bool,
    pub(crate) container_check_interval_ms: Option<u32>,
    pub(crate) system_properties: Vec<(String, String)>,
    pub(crate) config: Vec<(String, String)>,
    pub(crate) startup_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tick_time_ms: DEFAULT_TICK_TIME_MS,
            min_session_timeout_ms: None,
            max_session_timeout_ms: None,
            extended_types: false,
            container_check_interval_ms: None,
            system_properties: Vec::new(),
            config: Vec::new(),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        }
    }
}

impl Options {
    /// The effective minimum session timeout: as set, or two ticks.
    pub(crate) fn min_session_timeout_ms(&self) -> u32 {
        self.min_session_timeout_ms
            .unwrap_or(self.tick_time_ms.saturating_mul(2))
    }

    /// The effective maximum session timeout: as set, or 60 s (at least 20
    /// ticks).
    pub(crate) fn max_session_timeout_ms(&self) -> u32 {
        self.max_session_timeout_ms
            .unwrap_or(DEFAULT_MAX_SESSION_TIMEOUT_MS.max(self.tick_time_ms.saturating_mul(20)))
    }

    /// Checks the settings before anything is started.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.tick_time_ms == 0 {
            return Err(Error::InvalidConfig("tick_time must be positive".into()));
        }
        let (min, max) = (self.min_session_timeout_ms(), self.max_session_timeout_ms());
        if min > max {
            return Err(Error::InvalidConfig(format!(
                "min_session_timeout ({min} ms) is above max_session_timeout ({max} ms)"
            )));
        }
        for (key, value) in self.config.iter().chain(&self.system_properties) {
            if key.is_empty() || key.contains(['=', '\n', '\r']) || value.contains(['\n', '\r']) {
                return Err(Error::InvalidConfig(format!(
                    "bad key or value: {key:?} = {value:?}"
                )));
            }
        }
        Ok(())
    }

    /// The zoo.cfg lines common to standalone servers and ensemble members.
    pub(crate) fn config_lines(&self, data_dir: &Path, client_port: u16) -> String {
        let mut cfg = String::new();
        let _ = writeln!(cfg, "tickTime={}", self.tick_time_ms);
        let _ = writeln!(cfg, "dataDir={}", data_dir.display());
        let _ = writeln!(cfg, "clientPort={client_port}");
        let _ = writeln!(cfg, "clientPortAddress=127.0.0.1");
        let _ = writeln!(cfg, "minSessionTimeout={}", self.min_session_timeout_ms());
        let _ = writeln!(cfg, "maxSessionTimeout={}", self.max_session_timeout_ms());
        cfg.push_str("admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n");
        for (key, value) in &self.config {
            let _ = writeln!(cfg, "{key}={value}");
        }
        cfg
    }

    /// The `-D` properties: the typed settings, then the user's own.
    pub(crate) fn properties(&self) -> Vec<(String, String)> {
        let mut props = Vec::new();
        if self.extended_types {
            props.push(("zookeeper.extendedTypesEnabled".into(), "true".into()));
        }
        if let Some(interval) = self.container_check_interval_ms {
            props.push((
                "znode.container.checkIntervalMs".into(),
                interval.to_string(),
            ));
        }
        props.extend(self.system_properties.iter().cloned());
        props
    }
}

/// Generates the setters shared by both builders.
macro_rules! option_setters {
    () => {
        /// Sets `tickTime` in ms (default 200). Session expiry is checked
        /// once per tick.
        pub fn tick_time(mut self, ms: u32) -> Self {
            self.options.tick_time_ms = ms;
            self
        }

        /// Sets `minSessionTimeout` in ms (default two ticks: 400 ms).
        pub fn min_session_timeout(mut self, ms: u32) -> Self {
            self.options.min_session_timeout_ms = Some(ms);
            self
        }

        /// Sets `maxSessionTimeout` in ms (default 60 000 ms).
        pub fn max_session_timeout(mut self, ms: u32) -> Self {
            self.options.max_session_timeout_ms = Some(ms);
            self
        }

        /// Enables TTL nodes (`-Dzookeeper.extendedTypesEnabled=true`).
        pub fn extended_types(mut self, enabled: bool) -> Self {
            self.options.extended_types = enabled;
            self
        }

        /// How often the server deletes empty containers and expired TTL
        /// nodes (`-Dznode.container.checkIntervalMs`, server default 60 s).
        pub fn container_check_interval_ms(mut self, ms: u32) -> Self {
            self.options.container_check_interval_ms = Some(ms);
            self
        }

        /// Adds a JVM system property (`-Dkey=value`), applied after the
        /// built-in ones so it can override them.
        pub fn system_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.options
                .system_properties
                .push((key.into(), value.into()));
            self
        }

        /// Adds a `key=value` line to zoo.cfg, after the built-in ones.
        pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.options.config.push((key.into(), value.into()));
            self
        }

        /// How long starting waits for the server to serve (default 60 s).
        pub fn startup_timeout(mut self, timeout: Duration) -> Self {
            self.options.startup_timeout = timeout;
            self
        }
    };
}
pub(crate) use option_setters;

/// Configures and starts a [`TestServer`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct TestServerBuilder {
    options: Options,
}

impl TestServerBuilder {
    option_setters!();

    /// Starts the server on a free loopback port and waits until it serves.
    pub fn start(self) -> Result<TestServer, Error> {
        self.options.validate()?;
        let setup = JavaSetup::locate()?;
        let root = temp_dir("server")?;
        let mut server = TestServer {
            setup,
            data_dir: root.join("data"),
            config_path: root.join("zoo.cfg"),
            log_path: root.join("zookeeper.log"),
            root,
            port: 0,
            options: self.options,
            process: Mutex::new(None),
            keep_log: false,
        };
        create_dir_all(&server.data_dir)?;
        for attempt in 1..=START_ATTEMPTS {
            let ports = free_ports(1)?;
            server.port = ports.first().copied().unwrap_or(0);
            let cfg = server.options.config_lines(&server.data_dir, server.port);
            write_file(&server.config_path, &cfg)?;
            let result = server.start();
            match result {
                Ok(()) => return Ok(server),
                Err(e) if attempt < START_ATTEMPTS && is_port_clash(&e) => {
                    let _ = server.kill();
                }
                Err(e) => {
                    server.keep_log = true;
                    return Err(e);
                }
            }
        }
        Err(Error::InvalidConfig("no start attempt made".into()))
    }
}

/// A standalone ZooKeeper server (`ZooKeeperServerMain`) in a child JVM, on
/// `127.0.0.1` with a temporary data directory; see the [module
/// docs](super) for the defaults.
///
/// Every method takes `&self`, so a server can be shared between threads.
/// The port and data directory stay the same across [`stop`](Self::stop),
/// [`kill`](Self::kill) and [`start`](Self::start), so sessions survive a
/// restart when it is quicker than their timeout.
///
/// Dropping it kills the JVM and removes the temporary directory (keeping the
/// log if the thread is panicking).
#[derive(Debug)]
pub struct TestServer {
    setup: JavaSetup,
    root: PathBuf,
    data_dir: PathBuf,
    config_path: PathBuf,
    log_path: PathBuf,
    port: u16,
    options: Options,
    process: Mutex<Option<JvmProcess>>,
    /// Keep the log when dropped: the start failed, and the error names it.
    keep_log: bool,
}

impl TestServer {
    /// A builder with the defaults.
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }

    /// Starts a server with the defaults.
    pub fn new() -> Result<TestServer, Error> {
        Self::builder().start()
    }

    /// `"127.0.0.1:PORT"`.
    pub fn connect_string(&self) -> String {
        self.addr().to_string()
    }

    /// The client address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server log (stdout and stderr of every run, appended).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The data directory (snapshots and transaction logs).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The configured `tickTime`.
    pub fn tick_time(&self) -> Duration {
        ms(self.options.tick_time_ms)
    }

    /// The configured `minSessionTimeout`.
    pub fn min_session_timeout(&self) -> Duration {
        ms(self.options.min_session_timeout_ms())
    }

    /// The configured `maxSessionTimeout`.
    pub fn max_session_timeout(&self) -> Duration {
        ms(self.options.max_session_timeout_ms())
    }

    /// The JVM's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        let mut guard = self.lock();
        let process = guard.as_mut()?;
        process.is_running().then(|| process.pid())
    }

    /// Whether the JVM is running (a paused one is).
    pub fn is_running(&self) -> bool {
        self.lock().as_mut().is_some_and(JvmProcess::is_running)
    }

    /// Whether the JVM is paused by [`pause`](Self::pause).
    pub fn is_paused(&self) -> bool {
        self.lock()
            .as_mut()
            .is_some_and(|p| p.is_running() && p.is_paused())
    }

    /// Starts the server again after [`stop`](Self::stop) or
    /// [`kill`](Self::kill), on the same port and data directory, and waits
    /// until it serves. Does nothing if it is running.
    pub fn start(&self) -> Result<(), Error> {
        {
            let mut guard = self.lock();
            if guard.as_mut().is_some_and(JvmProcess::is_running) {
                return Ok(());
            }
            let properties = self.options.properties();
            *guard = Some(JvmProcess::spawn(&Launch {
                setup: &self.setup,
                main_class: "org.apache.zookeeper.server.ZooKeeperServerMain",
                config: &self.config_path,
                log: &self.log_path,
                properties: &properties,
                cleanup_dir: &self.root,
            })?);
        }
        self.wait_serving(self.options.startup_timeout)
    }

    /// Stops the server gracefully (SIGTERM; SIGKILL after 10 s). Open client
    /// connections are closed. Does nothing if it is not running.
    pub fn stop(&self) -> Result<(), Error> {
        // Taken out only once it has exited, under the lock all along: a
        // `start` meanwhile waits, rather than spawn a second JVM on the
        // same port and data.
        let mut process = self.lock();
        let stopped = process
            .as_mut()
            .map_or(Ok(()), |process| process.terminate(STOP_GRACE));
        *process = None;
        stopped
    }

    /// Kills the server (SIGKILL), like a crash. Does nothing if it is not
    /// running.
    pub fn kill(&self) -> Result<(), Error> {
        let mut process = self.lock();
        let killed = process.as_mut().map_or(Ok(()), JvmProcess::kill);
        *process = None;
        killed
    }

    /// [`stop`](Self::stop), then [`start`](Self::start).
    pub fn restart(&self) -> Result<(), Error> {
        self.stop()?;
        self.start()
    }

    /// Freezes the JVM (SIGSTOP): connections stay open (the kernel even
    /// accepts new ones) but nothing is answered, like a long GC pause. On
    /// Linux it returns once every JVM thread has stopped.
    pub fn pause(&self) -> Result<(), Error> {
        self.lock().as_mut().ok_or(Error::NotRunning)?.pause()
    }

    /// Continues a paused JVM (SIGCONT).
    pub fn resume(&self) -> Result<(), Error> {
        self.lock().as_mut().ok_or(Error::NotRunning)?.resume()
    }

    /// Sends a four-letter word and returns the reply (5 s timeout).
    pub fn four_letter(&self, command: &str) -> Result<String, Error> {
        four_letter_word(self.addr(), command, ASKED_QUERY_TIMEOUT)
    }

    /// Waits until the server serves requests (`srvr` reports a mode, and
    /// `conf` this server's data directory), for at most `timeout`. Fails
    /// at once if the JVM has exited or is stopped; a paused one is waited
    /// for until `timeout`.
    pub fn wait_serving(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.lock().as_mut() {
                None => return Err(Error::NotRunning),
                Some(process) => {
                    if let Some(err) = process.exited_error() {
                        return Err(err);
                    }
                }
            }
            // Another process's server on this port answers too, while
            // this JVM is still on its way to failing to bind it: only one
            // serving this data directory is this one.
            let query = remaining(deadline).min(QUERY_TIMEOUT);
            if server_mode(self.addr(), query) == Some(ServerMode::Standalone)
                && serves_data_dir(self.addr(), &self.data_dir, query)
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "ZooKeeper on {} to serve; log {}, ending:\n{}",
                        self.addr(),
                        self.log_path.display(),
                        log_tail(&self.log_path, 20)
                    ),
                    waited: timeout,
                });
            }
            poll_pause(deadline);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<JvmProcess>> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let process = self.lock().take();
        drop(process); // kills and waits
        if std::thread::panicking() || self.keep_log {
            eprintln!(
                "zklock::testing: keeping the ZooKeeper log {}",
                self.log_path.display()
            );
            remove_all_but(&self.root, std::slice::from_ref(&self.log_path));
        } else {
            remove_all_but(&self.root, &[]);
        }
    }
}
