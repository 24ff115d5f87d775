//! Helpers shared by the servers: temp dirs, free ports, locating java and
//! the jars, four-letter words, log tails.

use std::collections::HashSet;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::Error;

/// The Debian location of the ZooKeeper server jar.
const DEBIAN_ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// An slf4j binding that logs to stderr; without one the server logs nothing.
const DEBIAN_SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// The largest four-letter-word reply read.
const MAX_4LW_REPLY: u64 = 1 << 20;

/// What a server says it is, from the `Mode:` line of `srvr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMode {
    /// A standalone server.
    Standalone,
    /// The ensemble's leader.
    Leader,
    /// A follower.
    Follower,
    /// An observer.
    Observer,
    /// A member serving read-only requests without a quorum.
    ReadOnly,
    /// Any other mode, as reported.
    Other(String),
}

impl ServerMode {
    /// Finds the `Mode:` line in a `srvr` or `stat` reply. A server that is
    /// not serving has no such line.
    pub(crate) fn from_srvr(reply: &str) -> Option<ServerMode> {
        let mode = reply
            .lines()
            .find_map(|line| line.trim().strip_prefix("Mode:"))?
            .trim();
        Some(match mode {
            "standalone" => ServerMode::Standalone,
            "leader" => ServerMode::Leader,
            "follower" => ServerMode::Follower,
            "observer" => ServerMode::Observer,
            "read-only" => ServerMode::ReadOnly,
            other => ServerMode::Other(other.to_owned()),
        })
    }
}

/// Sends a four-letter word (`ruok`, `srvr`, `stat`, `mntr`, `cons`, `dump`,
/// `wchc`, ...) to the server at `addr` and returns its whole reply (the server
/// closes the connection after replying). `timeout` bounds the connect and
/// each read and write; replies are cut at 1 MiB.
pub fn four_letter_word(
    addr: SocketAddr,
    command: &str,
    timeout: Duration,
) -> Result<String, Error> {
    let context = |what: &str| format!("four-letter word `{command}` to {addr}: {what}");
    let timeout = timeout.max(Duration::from_millis(1));
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| Error::io(context("connect"), e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| Error::io(context("set timeouts"), e))?;
    stream
        .write_all(command.as_bytes())
        .map_err(|e| Error::io(context("send"), e))?;
    // The server replies and then closes the connection.
    let mut reply = Vec::new();
    stream
        .take(MAX_4LW_REPLY)
        .read_to_end(&mut reply)
        .map_err(|e| Error::io(context("read the reply"), e))?;
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// Asks `srvr` and parses the mode; `None` when the server does not answer or
/// is not serving.
pub(crate) fn server_mode(addr: SocketAddr, timeout: Duration) -> Option<ServerMode> {
    four_letter_word(addr, "srvr", timeout)
        .ok()
        .and_then(|reply| ServerMode::from_srvr(&reply))
}

/// Whether the server at `addr` says (`conf`) that it keeps its data in
/// `data_dir`.
pub(crate) fn serves_data_dir(addr: SocketAddr, data_dir: &Path, timeout: Duration) -> bool {
    four_letter_word(addr, "conf", timeout).is_ok_and(|reply| {
        reply
            .lines()
            .filter_map(|line| line.strip_prefix("dataDir="))
            .any(|dir| Path::new(dir.trim()).starts_with(data_dir))
    })
}

/// A `Duration` from a number of ms.
pub(crate) fn ms(ms: u32) -> Duration {
    Duration::from_millis(u64::from(ms))
}

/// The time left until `deadline`, at least 1 ms so it can be a socket timeout.
pub(crate) fn remaining(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// Sleeps one polling interval (never past `deadline`).
pub(crate) fn poll_pause(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    std::thread::sleep(left.min(Duration::from_millis(25)));
}

/// Ports handed out by this process and not yet forgotten, so two servers
/// started at the same time never get the same one.
static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// Finds `count` distinct free loopback ports for servers. They are free
/// when this returns but nothing holds them until a server binds them (and
/// a follower's quorum port only a leader ever binds), so they are taken
/// below the kernel's ephemeral range where it can be read: a port bound
/// to 0 (a proxy's) or an outgoing connection's source port, which come
/// from that range, can then never take one. Another process can still
/// bind one explicitly; the callers retry on "Address already in use".
pub(crate) fn free_ports(count: usize) -> Result<Vec<u16>, Error> {
    // Holding the listeners until all are picked keeps the same port from
    // being picked twice.
    let mut listeners = Vec::with_capacity(count);
    let mut ports = Vec::with_capacity(count);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    let mut seen: HashSet<u16> = handed_out.iter().copied().collect();
    let mut candidates = server_port_candidates();
    let mut attempts = 0;
    while ports.len() < count {
        attempts += 1;
        if attempts > count + 256 {
            return Err(Error::InvalidConfig(
                "could not find enough free loopback ports".into(),
            ));
        }
        let (listener, port) = match candidates.as_mut().and_then(Iterator::next) {
            Some(port) if seen.contains(&port) => continue,
            Some(port) => match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
                Ok(listener) => (listener, port),
                Err(_) => continue,
            },
            None => bind_loopback()?,
        };
        if seen.insert(port) {
            ports.push(port);
        }
        listeners.push(listener);
    }
    record(&mut handed_out, &ports);
    Ok(ports)
}

/// A loopback port nothing listens on, for a host that refuses
/// connections: taken as a server's is (see `free_ports`), so no test
/// server gets it, and below the ephemeral range, so a client connecting
/// to it again and again is never given it as its own source port (Linux
/// would then connect the socket to itself, and the client would read its
/// own ConnectRequest as the answer).
pub fn dead_port() -> Result<u16, Error> {
    free_ports(1)?
        .first()
        .copied()
        .ok_or_else(|| Error::InvalidConfig("no free loopback port".into()))
}

/// How many ports below the ephemeral range servers are given theirs from.
const SERVER_PORT_SPAN: u16 = 10_000;

/// Where the ephemeral range starts when the kernel's cannot be read: the
/// IANA range's start, which BSDs and macOS use.
const IANA_EPHEMERAL_LOW: u16 = 49_152;

/// The ports to try for servers, from a random point in the span below the
/// kernel's ephemeral range (`ip_local_port_range`, or the IANA range where
/// that cannot be read), round to it; `None`, with a warning, where that
/// range leaves no room below it: servers then get ports from the
/// ephemeral range, where a client's outgoing connection may take a
/// stopped server's port before it is restarted.
fn server_port_candidates() -> Option<impl Iterator<Item = u16>> {
    let low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(IANA_EPHEMERAL_LOW);
    let start = low
        .checked_sub(SERVER_PORT_SPAN)
        .filter(|start| *start >= 1024);
    let Some(start) = start else {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            log::warn!(
                "the ephemeral port range starts at {low}, leaving no {SERVER_PORT_SPAN} ports \
                 below it: test servers get ephemeral ports, which a restart may find taken"
            );
        });
        return None;
    };
    let first = crate::rand::Rng::new().below(usize::from(SERVER_PORT_SPAN));
    let first = u16::try_from(first).unwrap_or(0);
    Some((0..SERVER_PORT_SPAN).map(move |i| start + (i + first) % SERVER_PORT_SPAN))
}

/// A listener on a free loopback port that no server of this process was
/// given (or may be restarted on), recorded so that none is given it later:
/// for proxies and fake servers, which would otherwise race the servers for
/// the ports picked for test servers, which nothing holds until the server
/// binds them.
pub fn loopback_listener() -> Result<TcpListener, Error> {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    // Held until one is found, so the kernel does not offer them again.
    let mut taken = Vec::new();
    for _ in 0..64 {
        let (listener, port) = bind_loopback()?;
        if !handed_out.contains(&port) {
            record(&mut handed_out, &[port]);
            return Ok(listener);
        }
        taken.push(listener);
    }
    Err(Error::InvalidConfig(
        "could not find a free loopback port".into(),
    ))
}

/// A listener on a loopback port the kernel picks, and that port.
fn bind_loopback() -> Result<(TcpListener, u16), Error> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::io("bind a loopback port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("read a bound port", e))?
        .port();
    Ok((listener, port))
}

/// Adds `ports` to those handed out, remembering a bounded number: enough
/// to cover servers running together.
fn record(handed_out: &mut Vec<u16>, ports: &[u16]) {
    handed_out.extend_from_slice(ports);
    let excess = handed_out.len().saturating_sub(4096);
    handed_out.drain(..excess);
}

/// A fresh, empty temporary directory, named from the pid, a counter and the
/// time: `zklock-<what>-<pid>-<n>-<nanos>` under the system temp dir.
pub(crate) fn temp_dir(what: &str) -> Result<PathBuf, Error> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // Absolute: a server is given paths under it while it runs elsewhere.
    let mut base = std::env::temp_dir();
    if base.is_relative() {
        base = std::env::current_dir()
            .map_err(|e| Error::io("find the working directory", e))?
            .join(base);
    }
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = base.join(format!("zklock-{what}-{}-{n}-{nanos}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(format!("create temp dir {}", dir.display()), e)),
        }
    }
    Err(Error::InvalidConfig(format!(
        "could not create a unique temp dir under {}",
        base.display()
    )))
}

/// Creates `path` and its parents.
pub(crate) fn create_dir_all(path: &Path) -> Result<(), Error> {
    fs::create_dir_all(path).map_err(|e| Error::io(format!("create {}", path.display()), e))
}

/// Writes a whole file.
pub(crate) fn write_file(path: &Path, contents: &str) -> Result<(), Error> {
    fs::write(path, contents).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// Removes everything under `root` except the files named in `keep`. Errors
/// are ignored: this runs in destructors.
pub(crate) fn remove_all_but(root: &Path, keep: &[PathBuf]) {
    if keep.is_empty() {
        let _ = fs::remove_dir_all(root);
        return;
    }
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if keep.iter().any(|k| k == &path) {
            continue;
        }
        if keep.iter().any(|k| k.starts_with(&path)) {
            remove_all_but(&path, keep);
        } else if path.is_dir() {
            let _ = fs::remove_dir_all(&path);
        } else {
            let _ = fs::remove_file(&path);
        }
    }
}

/// The last `lines` lines of a log file (reading at most its last 16 KiB).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = fs::File::open(path) else {
        return String::from("(no log)");
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
    let mut bytes = Vec::new();
    let _ = file.take(16 * 1024).read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether a failed start was a port clash (worth retrying on new ports).
pub(crate) fn is_port_clash(err: &Error) -> bool {
    matches!(err, Error::Exited { tail, .. } if tail.contains("Address already in use"))
}

/// The java executable and the classpath to run ZooKeeper with.
#[derive(Debug, Clone)]
pub(crate) struct JavaSetup {
    pub(crate) java: PathBuf,
    pub(crate) classpath: String,
}

impl JavaSetup {
    /// Finds java and the ZooKeeper jars, or says what to install.
    pub(crate) fn locate() -> Result<JavaSetup, Error> {
        let java = match std::env::var_os("ZKLOCK_JAVA") {
            Some(java) => {
                let java = PathBuf::from(java);
                if !java.is_file() {
                    return Err(Error::JavaNotFound {
                        looked_for: format!("$ZKLOCK_JAVA = {}", java.display()),
                    });
                }
                java
            }
            None => find_on_path("java").ok_or_else(|| Error::JavaNotFound {
                looked_for: "`java` on the PATH".into(),
            })?,
        };
        let classpath = match std::env::var("ZKLOCK_ZOOKEEPER_CLASSPATH") {
            Ok(cp) if !cp.is_empty() => cp,
            _ => {
                let jar = Path::new(DEBIAN_ZOOKEEPER_JAR);
                if !jar.is_file() {
                    return Err(Error::ZooKeeperNotFound { path: jar.into() });
                }
                // The jar's manifest Class-Path names its dependencies; the
                // slf4j binding is not among them.
                let mut cp = DEBIAN_ZOOKEEPER_JAR.to_owned();
                if Path::new(DEBIAN_SLF4J_SIMPLE_JAR).is_file() {
                    cp.push(':');
                    cp.push_str(DEBIAN_SLF4J_SIMPLE_JAR);
                }
                cp
            }
        };
        // The JVM runs in the server's directory, where a relative path
        // would name something else.
        let relative = java.is_relative()
            || classpath
                .split(':')
                .any(|entry| Path::new(entry).is_relative());
        if !relative {
            return Ok(JavaSetup { java, classpath });
        }
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("find the working directory", e))?;
        Ok(JavaSetup {
            java: cwd.join(java),
            classpath: absolute_classpath(&classpath, &cwd),
        })
    }
}

/// `classpath` with each relative entry (a `*` one included, and an empty
/// one, which means the working directory) taken from `cwd`.
fn absolute_classpath(classpath: &str, cwd: &Path) -> String {
    let entries: Vec<String> = classpath
        .split(':')
        .map(|entry| cwd.join(entry).display().to_string())
        .collect();
    entries.join(":")
}

/// Looks an executable name up in `$PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Shuts a stream down both ways, ignoring errors.
pub(crate) fn shutdown_quietly(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_classpath_is_made_absolute_entry_by_entry() {
        let cwd = Path::new("/work/here");
        assert_eq!(
            absolute_classpath("/usr/share/java/zookeeper.jar:lib/*:../x.jar:", cwd),
            "/usr/share/java/zookeeper.jar:/work/here/lib/*:/work/here/../x.jar:/work/here/"
        );
    }

    /// Server ports are distinct, free and below the ephemeral range,
    /// where it can be read.
    #[test]
    fn server_ports_come_from_below_the_ephemeral_range() {
        let ports = free_ports(6).unwrap();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), 6, "{ports:?}");
        for &port in &ports {
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("a free port");
        }
        let range = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range");
        let Some(low) = range
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        else {
            return;
        };
        if low >= 1024 + SERVER_PORT_SPAN {
            for port in ports {
                assert!((low - SERVER_PORT_SPAN..low).contains(&port), "{port}");
            }
        }
    }

    /// A server on a port is taken for one only if it keeps that one's
    /// data: another process's server there is not.
    #[test]
    fn a_server_is_known_by_its_data_directory() {
        let server = crate::testing::TestServer::new().expect("start ZooKeeper");
        assert!(serves_data_dir(server.addr(), server.data_dir(), QUERY));
        let other = server.data_dir().with_file_name("another-data-dir");
        assert!(!serves_data_dir(server.addr(), &other, QUERY));
        assert!(!serves_data_dir(
            server.addr(),
            Path::new("/var/lib/zookeeper"),
            QUERY
        ));
    }

    const QUERY: Duration = Duration::from_secs(5);

    #[test]
    fn parses_modes() {
        let reply =
            "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: leader\nNode count: 5\n";
        assert_eq!(ServerMode::from_srvr(reply), Some(ServerMode::Leader));
        assert_eq!(
            ServerMode::from_srvr("Mode: standalone\n"),
            Some(ServerMode::Standalone)
        );
        assert_eq!(
            ServerMode::from_srvr("This ZooKeeper instance is not currently serving requests\n"),
            None
        );
    }

    #[test]
    fn ports_are_distinct() {
        let ports = free_ports(6).unwrap_or_default();
        let set: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(set.len(), 6);
    }
}
