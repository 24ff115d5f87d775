//! Shared by the examples (not an example itself): where ZooKeeper is, a
//! private path prefix to work under, and a tiny flag parser.
//!
//! With `ZK_CONNECT` unset, an example starts a throwaway local ZooKeeper
//! through `zklock::testing::TestServer` (Java and Debian's `zookeeper`
//! package are needed) and stops it at the end. With `ZK_CONNECT` set (for
//! example `ZK_CONNECT=zk1:2181,zk2:2181`), it uses that ensemble. Either way
//! it works under `/zklock-examples/<example>-<host>-<pid>` and deletes that subtree
//! when it finishes.

#![allow(dead_code)]

use std::error::Error;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

use zklock::testing::TestServer;
use zklock::{Acl, Client};

/// What an example's body returns: `Ok(true)` if its checks passed.
pub type Outcome = Result<bool, Box<dyn Error>>;

/// How long an example waits for any one thing it expects (a lock, an
/// event, a contender to queue) before it fails, rather than hang.
pub const WAIT: Duration = Duration::from_secs(20);

/// The parent of every example's prefix.
const ROOT: &str = "/zklock-examples";

/// The session timeout the examples ask for: above a stock `zoo.cfg`'s
/// `syncLimit` × `tickTime` (10 s), as the README asks.
const SESSION_TIMEOUT: Duration = Duration::from_secs(15);

/// The ZooKeeper an example talks to, and its private path prefix.
pub struct Zk {
    /// The throwaway server, when `ZK_CONNECT` was unset (stopped on drop).
    server: Option<TestServer>,
    connect: String,
    prefix: String,
    /// Whether the prefix was created (and so is deleted on drop).
    created: bool,
}

impl Zk {
    /// Connects to `$ZK_CONNECT`, or starts a local server, and creates
    /// `/zklock-examples/<example>-<host>-<pid>`.
    pub fn start(example: &str) -> Result<Zk, Box<dyn Error>> {
        let (server, connect) = match std::env::var("ZK_CONNECT") {
            Ok(connect) if !connect.is_empty() => {
                println!("using the ZooKeeper ensemble at {connect} (ZK_CONNECT)");
                (None, connect)
            }
            _ => {
                print!("ZK_CONNECT is unset: starting a throwaway local ZooKeeper... ");
                let server = TestServer::new()?;
                let connect = server.connect_string();
                println!("listening on {connect}");
                (Some(server), connect)
            }
        };
        let mut zk = Zk {
            server,
            connect,
            // The host too: examples on two machines sharing an ensemble
            // may have the same pid.
            prefix: format!(
                "{ROOT}/{example}-{}-{}",
                zklock::recipes::host_name(),
                std::process::id()
            ),
            created: false,
        };
        let client = zk.client()?;
        // Another example finishing meanwhile may delete `/zklock-examples`
        // under the new prefix's create: `ensure_path` makes it again.
        client
            .ensure_path(&zk.prefix, &Acl::open_unsafe())
            .map_err(|e| format!("create {}: {e}", zk.prefix))?;
        zk.created = true;
        client.close()?;
        println!("working under {}", zk.prefix);
        Ok(zk)
    }

    /// A new client: a session of its own.
    pub fn client(&self) -> zklock::Result<Client> {
        Client::builder()
            .session_timeout(SESSION_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .connect(&self.connect)
    }

    /// A client that takes over `client`'s session (to end it from
    /// outside, as a pause longer than the session timeout would).
    pub fn take_over(&self, client: &Client) -> zklock::Result<Client> {
        Client::builder()
            .session(client.session_id(), client.session_password())
            .connect_timeout(Duration::from_secs(5))
            .connect(&self.connect)
    }

    /// `name` under this example's prefix.
    pub fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.prefix)
    }

    /// Deletes the prefix (and `/zklock-examples` if nothing else is left).
    fn clean_up(&self) -> zklock::Result<()> {
        let client = self.client()?;
        client.delete_recursive(&self.prefix)?;
        match client.delete(ROOT, None) {
            Ok(()) | Err(zklock::Error::NotEmpty) | Err(zklock::Error::NoNode) => {}
            Err(e) => return Err(e),
        }
        client.close()
    }
}

impl Drop for Zk {
    fn drop(&mut self) {
        if !self.created {
            return;
        }
        if let Err(e) = self.clean_up() {
            eprintln!("cleaning up {}: {e}", self.prefix);
        }
        if let Some(server) = self.server.take() {
            // Dropping it kills the JVM and removes its directory.
            drop(server);
            println!("stopped the local ZooKeeper");
        }
    }
}

/// Parses an example's flags, then runs its body with its ZooKeeper, cleans
/// up, and turns the outcome into the exit status: 0 if the checks passed,
/// 1 if not, 2 for bad flags (before anything starts), 3 for any other error.
pub fn run<T>(
    example: &str,
    parse: impl FnOnce(&mut Flags) -> Result<T, BadFlag>,
    body: impl FnOnce(&Zk, T) -> Outcome,
) -> ExitCode {
    let mut flags = Flags::from_env();
    if flags.switch("--help") {
        println!("see the doc comment at the top of examples/{example}.rs");
        return ExitCode::SUCCESS;
    }
    let options = match parse(&mut flags).and_then(|options| flags.finish().map(|()| options)) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{example}: {e}");
            return ExitCode::from(2);
        }
    };
    let zk = match Zk::start(example) {
        Ok(zk) => zk,
        Err(e) => {
            eprintln!("{example}: cannot set up ZooKeeper: {e}");
            return ExitCode::from(3);
        }
    };
    let outcome = body(&zk, options);
    drop(zk);
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{example}: CHECK FAILED");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{example}: {e}");
            ExitCode::from(3)
        }
    }
}

/// A bad command-line flag.
#[derive(Debug)]
pub struct BadFlag(String);

impl BadFlag {
    /// A bad flag, explained.
    pub fn new(message: impl Into<String>) -> BadFlag {
        BadFlag(message.into())
    }
}

impl std::fmt::Display for BadFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for BadFlag {}

/// `--name value` and `--switch` flags.
pub struct Flags {
    args: Vec<String>,
}

impl Flags {
    fn from_env() -> Flags {
        Flags {
            // One that is not UTF-8 is kept, lossily, to be refused as
            // an unknown argument or a bad value.
            args: std::env::args_os()
                .skip(1)
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect(),
        }
    }

    /// True (and consumed) if `--name` was given.
    pub fn switch(&mut self, name: &str) -> bool {
        let before = self.args.len();
        self.args.retain(|a| a != name);
        self.args.len() != before
    }

    /// The value of `--name value` or `--name=value`, or `default`.
    pub fn value<T: FromStr>(&mut self, name: &str, default: T) -> Result<T, BadFlag> {
        let Some(i) = self
            .args
            .iter()
            .position(|a| a == name || a.starts_with(&format!("{name}=")))
        else {
            return Ok(default);
        };
        let arg = self.args.remove(i);
        let text = match arg.split_once('=') {
            Some((_, v)) => v.to_owned(),
            None if i < self.args.len() => self.args.remove(i),
            None => return Err(BadFlag(format!("{name} needs a value"))),
        };
        text.parse()
            .map_err(|_| BadFlag(format!("{name}: {text:?} is not a valid value")))
    }

    /// Fails if anything is left unparsed.
    pub fn finish(&self) -> Result<(), BadFlag> {
        match self.args.first() {
            None => Ok(()),
            Some(extra) => Err(BadFlag(format!("unknown argument {extra:?}"))),
        }
    }
}

/// Polls `done` every 10 ms until it is true; an error after `timeout`.
pub fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> zklock::Result<bool>,
) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + timeout;
    while !done()? {
        if Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Prints a check's result and returns whether it passed.
pub fn check(passed: bool, what: &str) -> bool {
    println!("check: {} {what}", if passed { "ok  " } else { "FAIL" });
    passed
}

/// Closes its clients when dropped: an example that fails half-way must
/// not leave a thread blocked in a lock call on one of them (the thread
/// scope would wait for it for ever). Empty it to keep them open.
#[derive(Default)]
pub struct CloseAll(pub Vec<Client>);

impl Drop for CloseAll {
    fn drop(&mut self) {
        for client in &self.0 {
            let _ = client.close();
        }
    }
}
