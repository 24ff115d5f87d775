//! Interoperability of zklock's locks with real Apache Curator and kazoo
//! processes contending on the same lock path.
//!
//! Every contender, whatever its implementation, runs the same critical
//! section against shared znodes under `/interop`:
//!
//! - `/interop/inside`: an EPHEMERAL node an exclusive holder (mutex or
//!   writer) creates on entry and deletes before releasing; `NodeExists` on
//!   entry is a violation. An exclusive holder also checks that
//!   `/interop/readers` is empty.
//! - `/interop/readers/<name>-<i>`: an EPHEMERAL node per reader inside; a
//!   reader checks on entry that `/interop/inside` does not exist.
//! - `/interop/counter`: read and rewritten unconditionally (+1) by each
//!   exclusive holder, so any overlap can lose an update.
//! - `/interop/log/entry-<seq>`: a PERSISTENT_SEQUENTIAL entry
//!   `"<name> <lock node>"` per acquisition, made while holding the lock: the
//!   order in which the lock was granted.
//!
//! The peers are `tests/interop/CuratorContender.java` and
//! `tests/interop/kazoo_contender.py`. Requirements, checked before a test
//! starts anything (a missing one fails the test with what to install):
//!
//! - Curator: a JDK and Debian's jars in `/usr/share/java` (`apt-get install
//!   default-jdk-headless libcurator-recipes-java libcurator-framework-java
//!   libcurator-client-java libzookeeper-java`). The peer is compiled once
//!   per source version into `$CARGO_TARGET_TMPDIR/interop-java-<hash>`.
//!   `ZKLOCK_JAVAC` and `ZKLOCK_JAVA` override `javac` and `java`.
//! - kazoo: `$ZKLOCK_KAZOO_PYTHON`, a python that has kazoo 2.11; otherwise
//!   a venv at `$CARGO_TARGET_TMPDIR/interop-venv`, created on first use with
//!   `python3 -m venv` and `pip install kazoo==2.11.0` (needs python3-venv
//!   and access to PyPI).
//!
//! Every peer process is killed when its handle drops, so a failing test
//! leaves none behind; a peer also exits by itself if the test process dies.

mod lock_common;

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use lock_common::{abort_if_hung, leaf, owner, wait_until};
use zklock::testing::TestServer;
use zklock::{Acl, AnyGuard, Client, CreateMode, Error, Mutex, RwLock};

/// The session timeout of every client, zklock's and the peers'.
const SESSION_TIMEOUT: Duration = Duration::from_millis(4000);
/// The longest anything that should happen is waited for (a JVM starting
/// on a loaded two-core machine included).
const WAIT: Duration = Duration::from_secs(40);
/// How long "a blocked contender stays blocked" is watched, once its node is
/// known to be queued.
const QUIET: Duration = Duration::from_millis(500);
/// Acquisitions per contender in the contention runs.
const ITERATIONS: usize = 25;

/// The lock path every test contends on (each test has its own server).
const LOCK: &str = "/locks/interop";
const BASE: &str = "/interop";
const INSIDE: &str = "/interop/inside";
const READERS: &str = "/interop/readers";
const COUNTER: &str = "/interop/counter";
const LOG: &str = "/interop/log";

/// The jars the Curator peer is compiled and run against.
const JAVA_DIR: &str = "/usr/share/java";
const CURATOR_JARS: [&str; 5] = [
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
];
const CURATOR_PACKAGES: &str = "default-jdk-headless libcurator-recipes-java \
     libcurator-framework-java libcurator-client-java libzookeeper-java";
/// The Curator the interop tests are written against: 5.4, any patch release.
const CURATOR_VERSION: &str = "5.4.";
/// The kazoo the interop tests are written against, and its pip requirement.
const KAZOO_VERSION: &str = "2.11.0";
const KAZOO: &str = "kazoo==2.11.0";

// ---------------------------------------------------------------------------
// Peer toolchains
// ---------------------------------------------------------------------------

fn tmp_dir() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Runs `cmd` to completion within `timeout`, its output going to `log`.
fn run_bounded(cmd: &mut Command, log: &Path, timeout: Duration) -> Result<ExitStatus, String> {
    let out = fs::File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("dup {}: {e}", log.display()))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?} did not finish within {timeout:?}"));
            }
            Err(e) => return Err(format!("waiting for {cmd:?}: {e}")),
        }
    }
}

fn log_text(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// FNV-1a, to name the class directory after the source it was built from.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The classpath that runs `CuratorContender`, compiling it on first use.
fn curator_classpath() -> &'static str {
    static CLASSPATH: OnceLock<Result<String, String>> = OnceLock::new();
    match CLASSPATH.get_or_init(build_curator_contender) {
        Ok(classpath) => classpath,
        Err(e) => panic!("{e}"),
    }
}

fn build_curator_contender() -> Result<String, String> {
    let hint = |what: String| {
        format!(
            "{what}. The Curator interop tests need a JDK (javac) and Debian's Curator and \
             ZooKeeper jars in {JAVA_DIR}: apt-get install {CURATOR_PACKAGES}"
        )
    };
    let mut jars = Vec::new();
    for jar in CURATOR_JARS {
        let path = Path::new(JAVA_DIR).join(jar);
        if !path.is_file() {
            return Err(hint(format!("{} is missing", path.display())));
        }
        jars.push(path);
    }
    // Optional: an slf4j binding that keeps slf4j's "no binding" warning out.
    if let Some(binding) = ["slf4j-nop.jar", "slf4j-simple.jar"]
        .iter()
        .map(|jar| Path::new(JAVA_DIR).join(jar))
        .find(|path| path.is_file())
    {
        jars.push(binding);
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/CuratorContender.java");
    let text = fs::read(&source).map_err(|e| format!("read {}: {e}", source.display()))?;
    let classes = tmp_dir().join(format!("interop-java-{:016x}", fnv1a(&text)));
    let class_file = classes.join("CuratorContender.class");
    let jar_path = std::env::join_paths(&jars).map_err(|e| e.to_string())?;
    if !class_file.is_file() {
        let staging = tmp_dir().join(format!("interop-java-staging-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir_all(&staging).map_err(|e| format!("create {}: {e}", staging.display()))?;
        let log = staging.with_extension("log");
        let javac = std::env::var_os("ZKLOCK_JAVAC").unwrap_or_else(|| "javac".into());
        let status = run_bounded(
            Command::new(&javac)
                .arg("-nowarn")
                .arg("-d")
                .arg(&staging)
                .arg("-cp")
                .arg(&jar_path)
                .arg(&source),
            &log,
            Duration::from_secs(180),
        )
        .map_err(|e| {
            let _ = fs::remove_dir_all(&staging);
            hint(format!("javac failed to run ({e})"))
        })?;
        if !status.success() {
            let _ = fs::remove_dir_all(&staging);
            return Err(format!(
                "javac {} failed ({status}):\n{}",
                source.display(),
                log_text(&log)
            ));
        }
        let _ = fs::remove_file(&log);
        if let Err(e) = fs::rename(&staging, &classes) {
            // Another test process may have finished the same build first.
            let _ = fs::remove_dir_all(&staging);
            if !class_file.is_file() {
                return Err(format!("rename to {}: {e}", classes.display()));
            }
        }
    }
    let mut classpath = OsString::from(&classes);
    classpath.push(":");
    classpath.push(&jar_path);
    let classpath = classpath
        .into_string()
        .map_err(|p| format!("classpath is not UTF-8: {p:?}"))?;
    let version = curator_version(&classpath)?;
    if !version.starts_with(CURATOR_VERSION) {
        return Err(hint(format!(
            "{JAVA_DIR} has Curator {version}, not {CURATOR_VERSION}x"
        )));
    }
    Ok(classpath)
}

/// The version of the Curator recipes on `classpath`, as the compiled
/// contender reports it.
fn curator_version(classpath: &str) -> Result<String, String> {
    let log = tmp_dir().join(format!("curator-version-{}.log", std::process::id()));
    let java = std::env::var_os("ZKLOCK_JAVA").unwrap_or_else(|| "java".into());
    let status = run_bounded(
        Command::new(java)
            .arg("-cp")
            .arg(classpath)
            .arg("CuratorContender")
            .arg("--version"),
        &log,
        Duration::from_secs(60),
    )?;
    let out = log_text(&log);
    let _ = fs::remove_file(&log);
    if !status.success() {
        return Err(format!(
            "CuratorContender --version failed ({status}):\n{out}"
        ));
    }
    Ok(out.trim().to_owned())
}

/// A python that has kazoo, found or set up on first use.
fn kazoo_python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(find_kazoo_python) {
        Ok(python) => python,
        Err(e) => panic!("{e}"),
    }
}

/// `Ok(version)` if `python` imports kazoo.
fn kazoo_version(python: &Path) -> Result<String, String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import kazoo.version; print(kazoo.version.__version__)",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{} cannot import kazoo: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn find_kazoo_python() -> Result<PathBuf, String> {
    let hint = |what: String| {
        format!(
            "{what}. The kazoo interop tests need python3 with venv and pip (Debian: apt-get \
             install python3-venv python3-pip) and network access to PyPI for `pip install \
             {KAZOO}`, or ZKLOCK_KAZOO_PYTHON set to a python that has kazoo 2.11"
        )
    };
    if let Some(python) = std::env::var_os("ZKLOCK_KAZOO_PYTHON") {
        let python = PathBuf::from(python);
        return match kazoo_version(&python) {
            Ok(v) if v == KAZOO_VERSION => Ok(python),
            Ok(v) => Err(hint(format!(
                "ZKLOCK_KAZOO_PYTHON: {} has kazoo {v}, not {KAZOO_VERSION}",
                python.display()
            ))),
            Err(e) => Err(hint(format!("ZKLOCK_KAZOO_PYTHON: {e}"))),
        };
    }
    // Where `.ci/setup` puts it.
    let set_up = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop-venv/bin/python");
    if kazoo_version(&set_up).is_ok_and(|v| v == KAZOO_VERSION) {
        return Ok(set_up);
    }
    let venv = tmp_dir().join("interop-venv");
    let python = venv.join("bin/python");
    if kazoo_version(&python).is_ok_and(|v| v == KAZOO_VERSION) {
        return Ok(python);
    }
    // Built aside and renamed into place, so a half-made venv is never used.
    let staging = tmp_dir().join(format!("interop-venv-staging-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let log = staging.with_extension("log");
    let status = run_bounded(
        Command::new("python3").arg("-m").arg("venv").arg(&staging),
        &log,
        Duration::from_secs(120),
    )
    .map_err(hint)?;
    if !status.success() {
        return Err(hint(format!(
            "python3 -m venv failed ({status}):\n{}",
            log_text(&log)
        )));
    }
    let status = run_bounded(
        Command::new(staging.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(KAZOO),
        &log,
        Duration::from_secs(300),
    )
    .map_err(hint)?;
    if !status.success() {
        return Err(hint(format!(
            "pip install {KAZOO} failed ({status}):\n{}",
            log_text(&log)
        )));
    }
    let _ = fs::remove_file(&log);
    let _ = fs::remove_dir_all(&venv);
    if let Err(e) = fs::rename(&staging, &venv) {
        let _ = fs::remove_dir_all(&staging);
        if kazoo_version(&python).is_err() {
            return Err(format!("rename to {}: {e}", venv.display()));
        }
    }
    kazoo_version(&python).map_err(hint)?;
    Ok(python)
}

// ---------------------------------------------------------------------------
// Peer processes
// ---------------------------------------------------------------------------

/// One Curator or kazoo contender process, killed when dropped.
struct Peer {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: PathBuf,
}

/// What a peer does with each acquisition (see the peers' usage text).
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Acquire, run the critical section, release, `n` times, each
    /// acquisition once [`Peer::go`] says so.
    Step,
    /// Acquire, run the critical section, then hold until [`Peer::go`].
    Hold,
}

impl Behaviour {
    fn arg(self) -> &'static str {
        match self {
            Behaviour::Step => "step",
            Behaviour::Hold => "hold",
        }
    }
}

impl Peer {
    /// A Curator contender: `mode` is `mutex` (`InterProcessMutex`), `read`
    /// or `write` (`InterProcessReadWriteLock`).
    fn curator(
        server: &TestServer,
        mode: &str,
        iterations: usize,
        behaviour: Behaviour,
        name: &str,
    ) -> Peer {
        let classpath = curator_classpath();
        let java = std::env::var_os("ZKLOCK_JAVA").unwrap_or_else(|| "java".into());
        let mut cmd = Command::new(java);
        cmd.args([
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Xshare:auto",
            "-Xmx128m",
            "-cp",
            classpath,
            "CuratorContender",
        ]);
        Peer::spawn(cmd, server, mode, iterations, behaviour, name)
    }

    /// A kazoo `Lock(path, name, extra_lock_patterns=["-lock-"])` contender.
    fn kazoo(server: &TestServer, iterations: usize, behaviour: Behaviour, name: &str) -> Peer {
        Peer::kazoo_as(server, "mutex", iterations, behaviour, name)
    }

    /// A kazoo contender: `mode` is `mutex` (`Lock`), `read` (`ReadLock`)
    /// or `write` (`WriteLock`), each with the `extra_lock_patterns` of
    /// `tests/interop/kazoo_contender.py`.
    fn kazoo_as(
        server: &TestServer,
        mode: &str,
        iterations: usize,
        behaviour: Behaviour,
        name: &str,
    ) -> Peer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/kazoo_contender.py");
        let mut cmd = Command::new(kazoo_python());
        cmd.arg("-u").arg(script);
        Peer::spawn(cmd, server, mode, iterations, behaviour, name)
    }

    fn spawn(
        mut cmd: Command,
        server: &TestServer,
        mode: &str,
        iterations: usize,
        behaviour: Behaviour,
        name: &str,
    ) -> Peer {
        static SERIAL: AtomicUsize = AtomicUsize::new(0);
        let logs = tmp_dir().join("interop-logs");
        fs::create_dir_all(&logs).expect("create the peer log directory");
        let stderr = logs.join(format!(
            "{}-{}-{name}.stderr",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let stderr_file = fs::File::create(&stderr).expect("create a peer log");
        cmd.arg(server.connect_string())
            .arg(LOCK)
            .arg(mode)
            .arg(iterations.to_string())
            .arg(behaviour.arg())
            .arg(BASE)
            .arg(name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr_file);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start peer {name} ({cmd:?}): {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Peer {
            name: name.to_owned(),
            child,
            stdin,
            lines,
            stderr,
        }
    }

    fn stderr_tail(&self) -> String {
        let text = log_text(&self.stderr);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The next line that starts with `kind`, as its fields; any other line
    /// is skipped, except a `VIOLATION`, which fails the test.
    fn expect(&mut self, kind: &str) -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let line = match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "peer {} printed no {kind} within {WAIT:?}; stderr:\n{}",
                    self.name,
                    self.stderr_tail()
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "peer {} ended before printing {kind} ({:?}); stderr:\n{}",
                    self.name,
                    self.child.wait(),
                    self.stderr_tail()
                ),
            };
            let fields: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            match fields.first().map(String::as_str) {
                Some("VIOLATION") => panic!("peer {}: {line}", self.name),
                Some(k) if k == kind => return fields,
                _ => {}
            }
        }
    }

    /// Checks that the peer prints nothing for [`QUIET`] (it is blocked).
    fn assert_quiet(&mut self, why: &str) {
        match self.lines.recv_timeout(QUIET) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(line) => panic!("peer {} printed {line:?}, but {why}", self.name),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "peer {} ended ({:?}), but {why}; stderr:\n{}",
                self.name,
                self.child.wait(),
                self.stderr_tail()
            ),
        }
    }

    /// Lets a `Step` peer acquire, or a `Hold` peer release.
    fn go(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "go")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("write to peer {}: {e}", self.name));
    }

    /// Waits for `DONE` and a successful exit.
    fn finish(mut self) {
        self.expect("DONE");
        self.stdin = None;
        let deadline = Instant::now() + WAIT;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => panic!("peer {} did not exit within {WAIT:?}", self.name),
                Err(e) => panic!("wait for peer {}: {e}", self.name),
            }
        };
        assert!(
            status.success(),
            "peer {} exited with {status}; stderr:\n{}",
            self.name,
            self.stderr_tail()
        );
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "peer {} log kept at {}:\n{}",
                self.name,
                self.stderr.display(),
                self.stderr_tail()
            );
        } else {
            let _ = fs::remove_file(&self.stderr);
        }
    }
}

// ---------------------------------------------------------------------------
// zklock contenders and the shared critical section
// ---------------------------------------------------------------------------

fn server() -> TestServer {
    abort_if_hung();
    TestServer::new().expect("start a ZooKeeper server")
}

fn connect(server: &TestServer) -> Client {
    Client::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect_timeout(Duration::from_secs(2))
        .connect(&server.connect_string())
        .unwrap_or_else(|e| panic!("connect to {}: {e}", server.connect_string()))
}

fn open() -> Vec<Acl> {
    Acl::open_unsafe()
}

/// A server of the test's own, and an admin session on it with the shared
/// state set up.
fn server_with_state() -> (TestServer, Client) {
    let server = server();
    let admin = connect(&server);
    setup(&admin);
    (server, admin)
}

/// A server with the shared state and the lock directory made persistent,
/// as the README asks where kazoo shares a path: a kazoo `Lock` object
/// checks its path once, and zklock's container, empty for a moment,
/// could be swept between two of its acquisitions.
fn server_for_kazoo() -> (TestServer, Client) {
    let (server, admin) = server_with_state();
    admin
        .ensure_path(LOCK, &open())
        .expect("the lock directory");
    (server, admin)
}

/// Creates the shared state: counter 0, empty readers and log.
fn setup(client: &Client) {
    for (path, data) in [(BASE, ""), (COUNTER, "0"), (READERS, ""), (LOG, "")] {
        client
            .create(path, data.as_bytes(), &open(), CreateMode::Persistent)
            .unwrap_or_else(|e| panic!("create {path}: {e}"));
    }
}

fn counter(client: &Client) -> u64 {
    let (data, _) = client.get_data(COUNTER).expect("read the counter");
    String::from_utf8_lossy(&data)
        .trim()
        .parse()
        .expect("a numeric counter")
}

fn log_entry(client: &Client, name: &str, node: &str) {
    client
        .create(
            &format!("{LOG}/entry-"),
            format!("{name} {node}").as_bytes(),
            &open(),
            CreateMode::PersistentSequential,
        )
        .expect("append to the log");
}

/// The acquisitions in order: (contender name, lock node).
fn read_log(client: &Client) -> Vec<(String, String)> {
    let mut entries = client.get_children(LOG).expect("list the log");
    entries.sort();
    entries
        .iter()
        .map(|entry| {
            let (data, _) = client
                .get_data(&format!("{LOG}/{entry}"))
                .expect("read a log entry");
            let text = String::from_utf8(data).expect("UTF-8 log entry");
            let (name, node) = text.split_once(' ').expect("`name node` log entry");
            (name.to_owned(), node.to_owned())
        })
        .collect()
}

/// The critical section of a mutex holder or writer: mark inside, check
/// that no other holder and no reader is, read-modify-write the counter,
/// log the acquisition.
fn enter_exclusive(client: &Client, name: &str, node: &str) {
    match client.create(INSIDE, name.as_bytes(), &open(), CreateMode::Ephemeral) {
        Ok(_) => {}
        Err(Error::NodeExists) => {
            let holder = client.get_data(INSIDE).map(|(d, _)| d).unwrap_or_default();
            panic!(
                "VIOLATION {name} entered while {} is inside",
                String::from_utf8_lossy(&holder)
            );
        }
        Err(e) => panic!("{name}: create {INSIDE}: {e}"),
    }
    let readers = client.get_children(READERS).expect("list readers");
    assert!(
        readers.is_empty(),
        "VIOLATION {name} entered while readers {readers:?} are inside"
    );
    let value = counter(client);
    client
        .set_data(COUNTER, (value + 1).to_string().as_bytes(), None)
        .expect("write the counter");
    log_entry(client, name, node);
}

/// Leaves, checking again that no reader came in: an overlap in which the
/// reader entered after the check on the way in would otherwise go unseen.
fn exit_exclusive(client: &Client) {
    let readers = client.get_children(READERS).expect("list readers");
    assert!(
        readers.is_empty(),
        "VIOLATION readers {readers:?} entered while an exclusive holder was inside"
    );
    client
        .delete(INSIDE, None)
        .expect("leave the critical section");
}

/// The critical section of a reader: mark inside, check that no exclusive
/// holder is, read the counter, log the acquisition.
fn enter_reader(client: &Client, name: &str, node: &str) -> String {
    let mark = format!("{READERS}/{name}-{}", leaf(node));
    client
        .create(&mark, &[], &open(), CreateMode::Ephemeral)
        .unwrap_or_else(|e| panic!("{name}: create {mark}: {e}"));
    if let Some(stat) = client.exists(INSIDE).expect("check inside") {
        let holder = client.get_data(INSIDE).map(|(d, _)| d).unwrap_or_default();
        panic!(
            "VIOLATION reader {name} entered while {} is inside ({stat:?})",
            String::from_utf8_lossy(&holder)
        );
    }
    counter(client);
    log_entry(client, name, leaf(node));
    mark
}

/// Leaves, checking again that no exclusive holder came in (see
/// [`exit_exclusive`]).
fn exit_reader(client: &Client, mark: &str) {
    if let Some(stat) = client.exists(INSIDE).expect("check inside") {
        panic!("VIOLATION an exclusive holder entered while reader {mark} was inside ({stat:?})");
    }
    client.delete(mark, None).expect("leave the read section");
}

/// `iterations` acquisitions of a zklock `Mutex` on its own session.
fn zk_mutex_contender(client: Client, name: &str, iterations: usize) {
    let mutex = Mutex::new(&client, LOCK).expect("mutex");
    for _ in 0..iterations {
        let guard = mutex
            .try_lock_for(WAIT)
            .unwrap_or_else(|e| panic!("{name}: lock: {e}"))
            .unwrap_or_else(|| panic!("{name}: not acquired within {WAIT:?}"));
        enter_exclusive(&client, name, leaf(guard.node()));
        exit_exclusive(&client);
        guard.unlock().expect("unlock");
    }
    client.close().expect("close");
}

/// `iterations` acquisitions of one side of a zklock `RwLock`.
fn zk_rw_contender(client: Client, name: &str, write: bool, iterations: usize) {
    let lock = RwLock::new(&client, LOCK).expect("rwlock");
    for _ in 0..iterations {
        if write {
            let guard = lock
                .try_write_for(WAIT)
                .unwrap_or_else(|e| panic!("{name}: write: {e}"))
                .unwrap_or_else(|| panic!("{name}: no write lock within {WAIT:?}"));
            enter_exclusive(&client, name, leaf(guard.node()));
            exit_exclusive(&client);
            guard.unlock().expect("unlock");
        } else {
            let guard = lock
                .try_read_for(WAIT)
                .unwrap_or_else(|e| panic!("{name}: read: {e}"))
                .unwrap_or_else(|| panic!("{name}: no read lock within {WAIT:?}"));
            let mark = enter_reader(&client, name, guard.node());
            exit_reader(&client, &mark);
            guard.unlock().expect("unlock");
        }
    }
    client.close().expect("close");
}

/// The children of the lock path (none if it is gone).
fn lock_children(client: &Client) -> Vec<String> {
    match client.get_children(LOCK) {
        Ok(children) => children,
        Err(Error::NoNode) => Vec::new(),
        Err(e) => panic!("list {LOCK}: {e}"),
    }
}

/// Waits for a new node under the lock path, adds it to `seen`, returns it.
fn next_node(client: &Client, seen: &mut Vec<String>, whose: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let fresh: Vec<String> = lock_children(client)
            .into_iter()
            .filter(|child| !seen.contains(child))
            .collect();
        match fresh.as_slice() {
            [] => {}
            [node] => {
                seen.push(node.clone());
                return node.clone();
            }
            more => panic!("expected one new node for {whose}, got {more:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "no lock node for {whose} within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until no node under the lock path is `client`'s: an attempt that
/// gave up before its create was answered leaves the delete to the I/O
/// thread, which sends it only when the answer comes, so one round trip
/// is not enough. Call it when `client` holds nothing there.
fn settle(client: &Client) {
    let session = client.session_id();
    wait_until("the client's abandoned lock nodes to go", WAIT, || {
        lock_children(client)
            .iter()
            .all(|child| owner(client, &format!("{LOCK}/{child}")) != Some(session))
    });
}

/// Checks the end state of a run: nobody inside, no lock node left.
fn assert_clean(client: &Client) {
    assert_eq!(client.exists(INSIDE).expect("exists"), None, "left inside");
    assert_eq!(
        client.get_children(READERS).expect("readers"),
        Vec::<String>::new()
    );
    assert_eq!(
        lock_children(client),
        Vec::<String>::new(),
        "lock nodes left"
    );
}

/// How often the log switches from one implementation to another.
fn switches(log: &[(String, String)]) -> usize {
    let kind = |name: &str| name.split('-').next().unwrap_or_default().to_owned();
    log.windows(2)
        .filter(|w| kind(&w[0].0) != kind(&w[1].0))
        .count()
}

/// Runs `contender` on a thread of its own while `peer` holds the lock: its
/// node (`name`'s) queues, it stays out while the peer holds, and it gets in
/// once the peer releases. `contender` acquires, calls its argument once
/// inside, then leaves and releases.
fn wait_behind_peer(
    admin: &Client,
    client: &Client,
    peer: &mut Peer,
    name: &str,
    contender: impl FnOnce(&dyn Fn()) + Send,
) {
    settle(client);
    let mut seen = lock_children(admin);
    std::thread::scope(|s| {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let waiter = s.spawn(move || contender(&|| tx.send(()).expect("report")));
        next_node(admin, &mut seen, name);
        assert!(
            rx.recv_timeout(QUIET).is_err(),
            "the queued {name} got in while the peer holds"
        );
        peer.go();
        peer.expect("REL");
        rx.recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{name} gets in after the peer releases"));
        waiter.join().expect(name);
    });
}

/// The names in the acquisition log, in order.
fn logged_names(client: &Client) -> Vec<String> {
    read_log(client).into_iter().map(|(name, _)| name).collect()
}

/// While `writer`, a peer's write lock (its node named with `marker`),
/// holds: zklock's write and read attempts stay out, and so does a zklock
/// mutex's with `mutex` (kazoo; Curator's write lock and a zklock mutex do
/// not see each other); a zklock reader queued behind it gets in once it
/// releases.
fn peer_writer_keeps_zklock_out(
    server: &TestServer,
    admin: &Client,
    mut writer: Peer,
    marker: &str,
    mutex: bool,
) {
    let writer_node = writer.expect("ACQ")[2].clone();
    assert!(writer_node.contains(marker), "{writer_node}");
    let client = connect(server);
    if mutex {
        let mutex = Mutex::new(&client, LOCK).expect("mutex");
        assert!(
            mutex.try_lock_for(QUIET).expect("try_lock").is_none(),
            "zklock locked a mutex while {} writes",
            writer.name
        );
    }
    // Each probe only after the one before has left no node, which the
    // next would otherwise wait behind whatever it made of the peer's.
    settle(&client);
    let lock = RwLock::new(&client, LOCK).expect("rwlock");
    assert!(
        lock.try_write_for(QUIET).expect("try_write").is_none(),
        "zklock wrote the lock while {} writes",
        writer.name
    );
    settle(&client);
    assert!(
        lock.try_read_for(QUIET).expect("try_read").is_none(),
        "zklock read the lock while {} writes",
        writer.name
    );
    wait_behind_peer(admin, &client, &mut writer, "zklock-r", |inside| {
        let guard = lock
            .try_read_for(WAIT)
            .expect("read")
            .expect("read lock after the writer left");
        let mark = enter_reader(&client, "zklock-r", guard.node());
        inside();
        exit_reader(&client, &mark);
        guard.unlock().expect("unlock");
    });
    let name = writer.name.clone();
    writer.finish();
    assert_eq!(logged_names(admin), [name.as_str(), "zklock-r"]);
    assert_clean(admin);
}

/// Blocks until a zklock `Mutex` is held by this thread, within [`WAIT`].
fn lock_within<'a>(mutex: &'a Mutex, what: &str) -> zklock::MutexGuard<'a> {
    mutex
        .try_lock_for(WAIT)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .unwrap_or_else(|| panic!("{what}: not acquired within {WAIT:?}"))
}

// ---------------------------------------------------------------------------
// (a) zklock Mutex with Curator InterProcessMutex
// ---------------------------------------------------------------------------

/// Three zklock sessions and two Curator processes take turns on one
/// mutex: never two inside, no lost update, and the turns interleave.
#[test]
fn curator_mutex_and_zklock_mutex_exclude_each_other() {
    curator_classpath();
    let (server, admin) = server_with_state();
    let peers: Vec<Peer> = (1..=2)
        .map(|i| {
            Peer::curator(
                &server,
                "mutex",
                ITERATIONS,
                Behaviour::Step,
                &format!("curator-{i}"),
            )
        })
        .collect();
    contend_with_peers(&server, &admin, peers, 3, "Curator");
}

/// Runs `zklock_contenders` zklock mutex sessions beside the started
/// `peers`, every one doing `ITERATIONS` read-modify-writes, then checks that
/// no update was lost, every section was logged, `peer_kind` and zklock took
/// turns, and nothing is left behind.
fn contend_with_peers(
    server: &TestServer,
    admin: &Client,
    mut peers: Vec<Peer>,
    zklock_contenders: usize,
    peer_kind: &str,
) {
    let total = (peers.len() + zklock_contenders) * ITERATIONS;
    let zklock: Vec<_> = (1..=zklock_contenders)
        .map(|i| (format!("zklock-{i}"), None))
        .collect();
    run_together(server, &mut peers, &zklock);
    for peer in peers {
        peer.finish();
    }
    assert_eq!(counter(admin), total as u64, "lost updates");
    let log = read_log(admin);
    assert_eq!(log.len(), total);
    assert!(
        switches(&log) >= 2,
        "{peer_kind} and zklock never took turns: {log:?}"
    );
    assert_clean(admin);
}

/// Contenders queued in a known order behind a held lock, alternating
/// Curator and zklock, acquire in exactly that (node) order.
#[test]
fn curator_and_zklock_mutex_contenders_acquire_in_node_order() {
    curator_classpath();
    let server = server();
    acquire_in_node_order(&server, true, Exclusive::Mutex, |i| {
        Peer::curator(
            &server,
            "mutex",
            1,
            Behaviour::Step,
            &format!("curator-{i}"),
        )
    });
}

/// The same with the write sides of Curator's and zklock's read-write
/// locks: the writers of both take turns in node order.
#[test]
fn curator_and_zklock_writers_acquire_in_node_order() {
    curator_classpath();
    let server = server();
    acquire_in_node_order(&server, false, Exclusive::Write, |i| {
        Peer::curator(
            &server,
            "write",
            1,
            Behaviour::Step,
            &format!("curator-w{i}"),
        )
    });
}

/// Which exclusive zklock lock a node-order test queues.
#[derive(Clone, Copy)]
enum Exclusive {
    Mutex,
    /// An `RwLock`'s write side.
    Write,
}

impl Exclusive {
    /// Takes this kind of lock at [`LOCK`] through `client`, within
    /// [`WAIT`], and runs `inside` holding it.
    fn hold(self, client: &Client, what: &str, inside: impl FnOnce(&AnyGuard<'_>)) {
        let (mutex, rwlock);
        let guard: AnyGuard<'_> = match self {
            Exclusive::Mutex => {
                mutex = Mutex::new(client, LOCK).expect("mutex");
                lock_within(&mutex, what).into()
            }
            Exclusive::Write => {
                rwlock = RwLock::new(client, LOCK).expect("rwlock");
                rwlock
                    .try_write_for(WAIT)
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .unwrap_or_else(|| panic!("{what}: not acquired within {WAIT:?}"))
                    .into()
            }
        };
        inside(&guard);
        guard.unlock().expect("unlock");
    }
}

/// Lets a stepping `peer` queue one acquisition and records its node.
fn queue_peer(
    peer: &mut Peer,
    admin: &Client,
    seen: &mut Vec<String>,
    expected: &mut Vec<(String, String)>,
) {
    peer.go();
    let node = next_node(admin, seen, &peer.name);
    expected.push((peer.name.clone(), node));
}

/// Queues two peers (named by `make_peer(1..=2)`) and two zklock sessions
/// taking `kind` alternately behind a lock of that kind held, the peer of
/// each pair first if `peer_first`, then opens the lock and checks that
/// they acquired in node order, each exactly once, leaving nothing behind.
fn acquire_in_node_order(
    server: &TestServer,
    peer_first: bool,
    kind: Exclusive,
    make_peer: impl Fn(usize) -> Peer,
) {
    let admin = connect(server);
    setup(&admin);
    let gate_client = connect(server);
    let (opened, open) = crossbeam_channel::bounded::<()>(1);
    let (gated, gate_node) = crossbeam_channel::bounded(1);
    let mut seen = Vec::new();

    let mut peers: Vec<Peer> = (1..=2).map(make_peer).collect();
    for peer in &mut peers {
        peer.expect("READY");
    }
    let zk_clients: Vec<Client> = (0..2).map(|_| connect(server)).collect();
    let mut expected = Vec::new();
    std::thread::scope(|s| {
        let gate = s.spawn(|| {
            kind.hold(&gate_client, "gate", |held| {
                gated.send(leaf(held.node()).to_owned()).expect("report");
                open.recv_timeout(WAIT).expect("told to open the gate");
            })
        });
        seen.push(gate_node.recv_timeout(WAIT).expect("the gate held"));
        let mut handles = Vec::new();
        for (i, (peer, client)) in peers.iter_mut().zip(&zk_clients).enumerate() {
            if peer_first {
                queue_peer(peer, &admin, &mut seen, &mut expected);
            }
            let name = format!("zklock-{}", i + 1);
            let thread_name = name.clone();
            handles.push(s.spawn(move || {
                kind.hold(client, &thread_name, |guard| {
                    enter_exclusive(client, &thread_name, leaf(guard.node()));
                    exit_exclusive(client);
                })
            }));
            expected.push((name.clone(), next_node(&admin, &mut seen, &name)));
            if !peer_first {
                queue_peer(peer, &admin, &mut seen, &mut expected);
            }
        }
        // Everyone is queued; nobody got past the gate.
        assert_eq!(read_log(&admin), Vec::new());
        opened.send(()).expect("open the gate");
        gate.join().expect("gate");
        for handle in handles {
            handle.join().expect("zklock contender");
        }
    });
    for peer in peers {
        peer.finish();
    }
    assert_eq!(
        read_log(&admin),
        expected,
        "acquisition order != node order"
    );
    assert_eq!(counter(&admin), 4);
    assert_clean(&admin);
}

// ---------------------------------------------------------------------------
// (b) zklock RwLock with Curator InterProcessReadWriteLock
// ---------------------------------------------------------------------------

/// A Curator writer keeps zklock readers and writers out; a zklock reader
/// that queued behind it gets in once it releases.
#[test]
fn curator_writer_excludes_zklock_readers_and_writers() {
    curator_classpath();
    let (server, admin) = server_with_state();
    let writer = Peer::curator(&server, "write", 1, Behaviour::Hold, "curator-w");
    peer_writer_keeps_zklock_out(&server, &admin, writer, "__WRIT__", false);
}

/// A zklock writer keeps a Curator reader out; the Curator reader, once in,
/// keeps a zklock writer out.
#[test]
fn zklock_writer_excludes_curator_readers_and_vice_versa() {
    curator_classpath();
    let (server, admin) = server_with_state();
    let client = connect(&server);
    let lock = RwLock::new(&client, LOCK).expect("rwlock");
    let guard = lock
        .try_write_for(WAIT)
        .expect("write")
        .expect("uncontended write lock");
    let mut seen = vec![leaf(guard.node()).to_owned()];
    enter_exclusive(&client, "zklock-w", leaf(guard.node()));

    let mut reader = Peer::curator(&server, "read", 1, Behaviour::Hold, "curator-r");
    reader.expect("READY");
    let reader_node = next_node(&admin, &mut seen, "curator-r");
    assert!(reader_node.contains("__READ__"), "{reader_node}");
    reader.assert_quiet("a zklock writer holds the lock");
    exit_exclusive(&client);
    guard.unlock().expect("unlock");
    reader.expect("ACQ");

    // The Curator reader now holds: a zklock writer must wait.
    assert!(
        lock.try_write_for(QUIET).expect("try_write").is_none(),
        "zklock wrote the lock while a Curator reader reads"
    );
    reader.go();
    reader.finish();
    let guard = lock
        .try_write_for(WAIT)
        .expect("write")
        .expect("write lock after the reader left");
    enter_exclusive(&client, "zklock-w2", leaf(guard.node()));
    exit_exclusive(&client);
    guard.unlock().expect("unlock");
    assert_eq!(logged_names(&admin), ["zklock-w", "curator-r", "zklock-w2"]);
    assert_clean(&admin);
}

/// Curator and zklock readers hold the read lock together; a reader that
/// comes after a queued Curator writer waits for it (no writer starvation).
#[test]
fn curator_and_zklock_readers_share_and_queue_behind_writers() {
    curator_classpath();
    let (server, admin) = server_with_state();
    let mut r1 = Peer::curator(&server, "read", 1, Behaviour::Hold, "curator-r1");
    let r1_node = r1.expect("ACQ")[2].clone();
    let mut seen = vec![r1_node];

    // A zklock reader gets in at once beside the Curator reader.
    let client = connect(&server);
    let lock = RwLock::new(&client, LOCK).expect("rwlock");
    let guard = lock
        .try_read()
        .expect("try_read")
        .expect("zklock reads beside a Curator reader");
    seen.push(leaf(guard.node()).to_owned());
    let mark = enter_reader(&client, "zklock-r", guard.node());

    // And a second Curator reader beside both.
    let mut r2 = Peer::curator(&server, "read", 1, Behaviour::Hold, "curator-r2");
    let r2_node = r2.expect("ACQ")[2].clone();
    seen.push(r2_node);
    assert_eq!(admin.get_children(READERS).expect("readers").len(), 3);

    // A Curator writer queues behind the three readers...
    let mut w = Peer::curator(&server, "write", 1, Behaviour::Hold, "curator-w");
    w.expect("READY");
    next_node(&admin, &mut seen, "curator-w");
    w.assert_quiet("three readers hold the lock");
    // ...and a zklock reader that comes after it waits for it.
    let late_client = connect(&server);
    let late = RwLock::new(&late_client, LOCK).expect("rwlock");
    assert!(
        late.try_read_for(QUIET).expect("try_read").is_none(),
        "a reader overtook a queued writer"
    );

    r1.go();
    r1.finish();
    r2.go();
    r2.finish();
    w.assert_quiet("a zklock reader still holds the lock");
    exit_reader(&client, &mark);
    guard.unlock().expect("unlock");
    w.expect("ACQ");
    assert!(
        late.try_read_for(QUIET).expect("try_read").is_none(),
        "zklock read the lock while Curator writes"
    );
    w.go();
    w.finish();
    let guard = late
        .try_read_for(WAIT)
        .expect("read")
        .expect("read lock after the writer left");
    guard.unlock().expect("unlock");
    assert_eq!(
        logged_names(&admin),
        ["curator-r1", "zklock-r", "curator-r2", "curator-w"]
    );
    assert_clean(&admin);
}

/// A Curator reader that comes after a queued zklock writer waits for it,
/// though another Curator reader holds the read lock: the writer's
/// `__WRIT__` node bars the readers behind it as a Curator writer's would
/// (no writer starvation across the two libraries).
#[test]
fn curator_reader_queues_behind_a_waiting_zklock_writer() {
    curator_classpath();
    let (server, admin) = server_with_state();
    let mut r1 = Peer::curator(&server, "read", 1, Behaviour::Hold, "curator-r1");
    let mut seen = vec![r1.expect("ACQ")[2].clone()];
    let client = connect(&server);
    let lock = RwLock::new(&client, LOCK).expect("rwlock");
    std::thread::scope(|s| {
        let (inside_tx, inside) = crossbeam_channel::bounded(1);
        let (leave, leave_rx) = crossbeam_channel::bounded(1);
        let (lock, client) = (&lock, &client);
        let writer = s.spawn(move || {
            let guard = lock
                .try_write_for(WAIT)
                .expect("write")
                .expect("write lock once the first reader leaves");
            enter_exclusive(client, "zklock-w", leaf(guard.node()));
            inside_tx.send(()).expect("report");
            leave_rx.recv_timeout(WAIT).expect("told to leave");
            exit_exclusive(client);
            guard.unlock().expect("unlock");
        });
        let writer_node = next_node(&admin, &mut seen, "zklock-w");
        assert!(writer_node.contains("__WRIT__"), "{writer_node}");
        let mut r2 = Peer::curator(&server, "read", 1, Behaviour::Hold, "curator-r2");
        r2.expect("READY");
        let r2_node = next_node(&admin, &mut seen, "curator-r2");
        assert!(r2_node.contains("__READ__"), "{r2_node}");
        r2.assert_quiet("a zklock writer is queued ahead of it");
        assert!(
            inside.try_recv().is_err(),
            "the zklock writer got in beside a reader"
        );
        r1.go();
        r1.finish();
        inside
            .recv_timeout(WAIT)
            .expect("the zklock writer gets in once the first reader leaves");
        r2.assert_quiet("the zklock writer holds the lock");
        leave.send(()).expect("release");
        writer.join().expect("zklock writer");
        r2.expect("ACQ");
        r2.go();
        r2.finish();
    });
    assert_eq!(
        logged_names(&admin),
        ["curator-r1", "zklock-w", "curator-r2"]
    );
    assert_clean(&admin);
}

/// Curator and zklock readers and writers all contend: writers never
/// overlap anyone, and no writer's update is lost.
#[test]
fn curator_and_zklock_rwlock_mixed_contention() {
    curator_classpath();
    let (server, admin) = server_with_state();
    let peers = vec![
        Peer::curator(&server, "write", ITERATIONS, Behaviour::Step, "curator-w"),
        Peer::curator(&server, "read", ITERATIONS, Behaviour::Step, "curator-r"),
    ];
    let zklock = [
        ("zklock-w1", Some(true)),
        ("zklock-w2", Some(true)),
        ("zklock-r1", Some(false)),
        ("zklock-r2", Some(false)),
    ];
    mixed_contention(&server, &admin, peers, &zklock, 3);
}

/// Runs `peers` (one writer, then one reader) against zklock contenders
/// (`Some(write)` on the `RwLock`, `None` on the `Mutex`), each for
/// `ITERATIONS`, and checks that the `exclusive` ones among them all
/// incremented the counter and every critical section was logged.
fn mixed_contention(
    server: &TestServer,
    admin: &Client,
    mut peers: Vec<Peer>,
    zklock: &[(&'static str, Option<bool>)],
    exclusive: usize,
) {
    let entries = peers.len() + zklock.len();
    let zklock: Vec<_> = zklock
        .iter()
        .map(|&(name, kind)| (name.to_owned(), kind))
        .collect();
    run_together(server, &mut peers, &zklock);
    for peer in peers {
        peer.finish();
    }
    // The exclusive contenders incremented; readers only read.
    let exclusive = (exclusive * ITERATIONS) as u64;
    assert_eq!(counter(admin), exclusive, "lost updates");
    let log = read_log(admin);
    assert_eq!(log.len(), entries * ITERATIONS);
    assert!(
        switches(&log) >= 2,
        "the peers and zklock never took turns: {log:?}"
    );
    assert_clean(admin);
}

/// Starts `peers` (created with [`Behaviour::Step`]) and the `zklock`
/// contenders (`Some(write)` on the `RwLock`, `None` on the `Mutex`)
/// together, each for `ITERATIONS`, and returns once the zklock ones are
/// done. Every session is up first: a side that started alone could be
/// done before the other queued, and the two would never contend.
fn run_together(server: &TestServer, peers: &mut [Peer], zklock: &[(String, Option<bool>)]) {
    for peer in peers.iter_mut() {
        peer.expect("READY");
    }
    let clients: Vec<Client> = zklock.iter().map(|_| connect(server)).collect();
    std::thread::scope(|s| {
        for ((name, kind), client) in zklock.iter().zip(clients) {
            s.spawn(move || match *kind {
                Some(write) => zk_rw_contender(client, name, write, ITERATIONS),
                None => zk_mutex_contender(client, name, ITERATIONS),
            });
        }
        for peer in peers.iter_mut() {
            for _ in 0..ITERATIONS {
                peer.go();
            }
        }
    });
}

// ---------------------------------------------------------------------------
// (c) zklock Mutex with kazoo Lock(extra_lock_patterns=["-lock-"])
// ---------------------------------------------------------------------------

/// A zklock holder blocks a kazoo contender, and a kazoo holder blocks a
/// zklock contender.
#[test]
fn kazoo_lock_and_zklock_mutex_block_each_other() {
    kazoo_python();
    let (server, admin) = server_for_kazoo();
    let client = connect(&server);
    let mutex = Mutex::new(&client, LOCK).expect("mutex");
    let guard = lock_within(&mutex, "zklock-1");
    let mut seen = vec![leaf(guard.node()).to_owned()];
    enter_exclusive(&client, "zklock-1", leaf(guard.node()));

    // zklock holds: kazoo queues and stays out.
    let mut kazoo = Peer::kazoo(&server, 1, Behaviour::Hold, "kazoo-1");
    kazoo.expect("READY");
    let kazoo_node = next_node(&admin, &mut seen, "kazoo-1");
    assert!(kazoo_node.contains("__lock__"), "{kazoo_node}");
    kazoo.assert_quiet("zklock holds the lock");
    exit_exclusive(&client);
    guard.unlock().expect("unlock");
    assert_eq!(kazoo.expect("ACQ")[2], kazoo_node);

    // kazoo holds: zklock stays out, and gets in once kazoo releases.
    assert!(
        mutex.try_lock_for(QUIET).expect("try_lock").is_none(),
        "zklock locked while kazoo holds"
    );
    wait_behind_peer(&admin, &client, &mut kazoo, "zklock-2", |inside| {
        let guard = lock_within(&mutex, "zklock-2");
        enter_exclusive(&client, "zklock-2", leaf(guard.node()));
        inside();
        exit_exclusive(&client);
        guard.unlock().expect("unlock");
    });
    kazoo.finish();
    assert_eq!(logged_names(&admin), ["zklock-1", "kazoo-1", "zklock-2"]);
    assert_clean(&admin);
}

/// Two kazoo processes and two zklock sessions take turns: never two
/// inside, no lost update, and the turns interleave.
#[test]
fn kazoo_lock_and_zklock_mutex_mixed_contention() {
    kazoo_python();
    let (server, admin) = server_for_kazoo();
    let peers: Vec<Peer> = (1..=2)
        .map(|i| Peer::kazoo(&server, ITERATIONS, Behaviour::Step, &format!("kazoo-{i}")))
        .collect();
    contend_with_peers(&server, &admin, peers, 2, "kazoo");
}

/// kazoo and zklock contenders queued alternately behind a held lock
/// acquire in node order.
#[test]
fn kazoo_and_zklock_contenders_acquire_in_node_order() {
    kazoo_python();
    let server = server();
    acquire_in_node_order(&server, false, Exclusive::Mutex, |i| {
        Peer::kazoo(&server, 1, Behaviour::Step, &format!("kazoo-{i}"))
    });
}

// ---------------------------------------------------------------------------
// (d) kazoo ReadLock and WriteLock with zklock Mutex and RwLock
// ---------------------------------------------------------------------------

/// A kazoo `ReadLock` holder (a `__rlock__` node) keeps a zklock mutex and
/// a zklock writer out, shares with a zklock reader, and shows in the
/// queue as a reader that holds; the mutex gets in once it releases.
#[test]
fn kazoo_read_lock_excludes_zklock_mutex_and_writer() {
    kazoo_python();
    let (server, admin) = server_for_kazoo();
    let mut reader = Peer::kazoo_as(&server, "read", 1, Behaviour::Hold, "kazoo-r");
    let reader_node = reader.expect("ACQ")[2].clone();
    assert!(reader_node.contains("__rlock__"), "{reader_node}");

    let client = connect(&server);
    let mutex = Mutex::new(&client, LOCK).expect("mutex");
    assert!(
        mutex.try_lock_for(QUIET).expect("try_lock").is_none(),
        "zklock locked a mutex while a kazoo reader reads"
    );
    // The given-up mutex node must be gone, or the write queues behind it.
    settle(&client);
    let rwlock = RwLock::new(&client, LOCK).expect("rwlock");
    assert!(
        rwlock.try_write_for(QUIET).expect("try_write").is_none(),
        "zklock wrote the lock while a kazoo reader reads"
    );
    // The given-up write node must be gone, or the read queues behind it.
    settle(&client);
    let read = rwlock
        .try_read()
        .expect("try_read")
        .expect("zklock reads beside a kazoo reader");
    let queue: Vec<(String, &str, bool)> = zklock::recipes::lock_queue(&admin, LOCK)
        .expect("lock_queue")
        .into_iter()
        .map(|e| (e.name, e.kind.as_str(), e.holds))
        .collect();
    assert_eq!(
        queue,
        [
            (reader_node.clone(), "read", true),
            (leaf(read.node()).to_owned(), "read", true),
        ]
    );
    read.unlock().expect("unlock");

    wait_behind_peer(&admin, &client, &mut reader, "zklock-m", |inside| {
        let guard = lock_within(&mutex, "zklock-m");
        enter_exclusive(&client, "zklock-m", leaf(guard.node()));
        inside();
        exit_exclusive(&client);
        guard.unlock().expect("unlock");
    });
    reader.finish();
    assert_eq!(logged_names(&admin), ["kazoo-r", "zklock-m"]);
    assert_clean(&admin);
}

/// A kazoo `WriteLock` holder keeps every zklock kind out (its
/// `__lock__` node is exclusive to zklock), and a zklock reader queued
/// behind it gets in once it releases.
#[test]
fn kazoo_writer_excludes_zklock_mutex_readers_and_writers() {
    kazoo_python();
    let (server, admin) = server_for_kazoo();
    let writer = Peer::kazoo_as(&server, "write", 1, Behaviour::Hold, "kazoo-w");
    peer_writer_keeps_zklock_out(&server, &admin, writer, "__lock__", true);
}

/// kazoo's `ReadLock` and `WriteLock` queue behind zklock holders, seeing
/// their nodes through each pattern the README gives: a kazoo reader waits
/// for a zklock mutex (`-lock-`) and a zklock writer (`__WRIT__`), and a
/// kazoo writer for all three (`-lock-`, `__WRIT__`, `__READ__`); each gets
/// in once the zklock holder releases. A kazoo reader shares with a zklock
/// reader at once.
#[test]
fn kazoo_readers_and_writers_queue_behind_zklock_holders() {
    kazoo_python();
    let (server, admin) = server_for_kazoo();
    let client = connect(&server);
    let mutex = Mutex::new(&client, LOCK).expect("mutex");
    let rwlock = RwLock::new(&client, LOCK).expect("rwlock");
    // (zklock holder, its kind, the kazoo side queued behind it)
    for (holder, kind, peer_mode) in [
        ("zklock-m", "mutex", "read"),
        ("zklock-w", "write", "read"),
        ("zklock-r", "read", "write"),
        ("zklock-m", "mutex", "write"),
        ("zklock-w", "write", "write"),
    ] {
        let peer_name = format!("kazoo-{peer_mode}-behind-{kind}");
        let (node, release): (String, Box<dyn FnOnce() + '_>) = match kind {
            "mutex" => {
                let guard = lock_within(&mutex, holder);
                (
                    guard.node().to_owned(),
                    Box::new(move || guard.unlock().expect("unlock")),
                )
            }
            "write" => {
                let guard = rwlock.try_write_for(WAIT).expect("write").expect(holder);
                (
                    guard.node().to_owned(),
                    Box::new(move || guard.unlock().expect("unlock")),
                )
            }
            _ => {
                let guard = rwlock.try_read_for(WAIT).expect("read").expect(holder);
                (
                    guard.node().to_owned(),
                    Box::new(move || guard.unlock().expect("unlock")),
                )
            }
        };
        let mark = if kind == "read" {
            Some(enter_reader(&client, holder, &node))
        } else {
            enter_exclusive(&client, holder, leaf(&node));
            None
        };
        let mut seen = lock_children(&admin);
        let mut peer = Peer::kazoo_as(&server, peer_mode, 1, Behaviour::Hold, &peer_name);
        peer.expect("READY");
        next_node(&admin, &mut seen, &peer_name);
        peer.assert_quiet(&format!("a zklock {kind} holder is inside"));
        match &mark {
            Some(mark) => exit_reader(&client, mark),
            None => exit_exclusive(&client),
        }
        release();
        peer.expect("ACQ");
        peer.go();
        peer.finish();
    }
    // Sharing: a kazoo reader gets in beside a zklock reader inside.
    let guard = rwlock.try_read_for(WAIT).expect("read").expect("zklock-r");
    let mark = enter_reader(&client, "zklock-r", guard.node());
    let mut peer = Peer::kazoo_as(
        &server,
        "read",
        1,
        Behaviour::Hold,
        "kazoo-read-beside-read",
    );
    peer.expect("READY");
    peer.expect("ACQ");
    peer.go();
    peer.finish();
    exit_reader(&client, &mark);
    guard.unlock().expect("unlock");
    assert_eq!(
        logged_names(&admin),
        [
            "zklock-m",
            "kazoo-read-behind-mutex",
            "zklock-w",
            "kazoo-read-behind-write",
            "zklock-r",
            "kazoo-write-behind-read",
            "zklock-m",
            "kazoo-write-behind-mutex",
            "zklock-w",
            "kazoo-write-behind-write",
            "zklock-r",
            "kazoo-read-beside-read"
        ]
    );
    assert_clean(&admin);
}

/// kazoo readers and writers contend with zklock mutexes, readers and
/// writers: no exclusive holder overlaps anyone, and no update is lost.
#[test]
fn kazoo_rwlock_and_zklock_mixed_contention() {
    kazoo_python();
    let (server, admin) = server_for_kazoo();
    let peers = vec![
        Peer::kazoo_as(&server, "write", ITERATIONS, Behaviour::Step, "kazoo-w"),
        Peer::kazoo_as(&server, "read", ITERATIONS, Behaviour::Step, "kazoo-r"),
    ];
    let zklock = [
        ("zklock-m", None),
        ("zklock-w", Some(true)),
        ("zklock-r", Some(false)),
    ];
    mixed_contention(&server, &admin, peers, &zklock, 3);
}
