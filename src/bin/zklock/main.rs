//! `zklock`: run a command under a ZooKeeper lock, list a lock's holders,
//! and benchmark. Errors are one line on stderr with a non-zero exit.

mod args;
mod bench;
mod exec;
mod holders;

use std::process::ExitCode;
use std::time::Duration;

use args::{Args, Usage};

/// Exit status for errors (unreachable ensemble, bad path, auth failure...).
const EXIT_ERROR: u8 = 1;
/// Exit status for usage errors.
const EXIT_USAGE: u8 = 2;

const USAGE: &str = "usage:
  zklock exec [--connect HOSTS] [--session-timeout MS] [--wait SECS | --no-wait]
              [--read | --write] [--grace MS] [--quiet] LOCK_PATH -- COMMAND [ARGS...]
  zklock holders [--connect HOSTS] [--json] LOCK_PATH
  zklock bench --connect HOST:PORT --mode uncontended|contended|get|set
               [--clients C] [--ops N] [--path P]

--connect defaults to $ZK_CONNECT, then 127.0.0.1:2181.
exec exits with COMMAND's status; 75 if the lock was not acquired (COMMAND did
not run); 76 if the lock was lost while COMMAND ran (COMMAND was terminated).";

/// Settings shared by the subcommands.
#[derive(Clone)]
pub struct Common {
    pub connect: String,
    pub session_timeout: Duration,
}

impl Common {
    fn new() -> Common {
        Common {
            connect: std::env::var("ZK_CONNECT")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "127.0.0.1:2181".into()),
            session_timeout: Duration::from_secs(10),
        }
    }

    /// Handles `--connect` and `--session-timeout`; false for other options.
    fn option(
        &mut self,
        name: &str,
        value: &mut dyn FnMut() -> Result<String, Usage>,
    ) -> Result<bool, Usage> {
        match name {
            "connect" => self.connect = value()?,
            "session-timeout" => {
                let ms: u64 = args::number(name, &value()?)?;
                if ms == 0 {
                    return Err(Usage("--session-timeout must be positive".into()));
                }
                self.session_timeout = Duration::from_millis(ms);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn client(&self) -> Result<zklock::Client, zklock::Error> {
        zklock::Client::builder()
            .session_timeout(self.session_timeout)
            .connect_timeout(Duration::from_secs(5))
            .connect(&self.connect)
    }
}

/// Why the process ends: a status, or an error line.
pub enum Outcome {
    Exit(u8),
    Usage(String),
    Error(String),
}

impl From<Usage> for Outcome {
    fn from(u: Usage) -> Outcome {
        Outcome::Usage(u.0)
    }
}

impl From<zklock::Error> for Outcome {
    fn from(e: zklock::Error) -> Outcome {
        Outcome::Error(e.to_string())
    }
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let outcome = match argv.next().as_deref() {
        Some("exec") => exec::run(Args::new(argv)),
        Some("holders") => holders::run(Args::new(argv)),
        Some("bench") => bench::run(Args::new(argv)),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Outcome::Exit(0)
        }
        Some(other) => Outcome::Usage(format!("unknown command {other:?}")),
        None => Outcome::Usage("missing command".into()),
    };
    match outcome {
        Outcome::Exit(code) => ExitCode::from(code),
        Outcome::Usage(message) => {
            eprintln!("zklock: {message} (zklock --help shows the usage)");
            ExitCode::from(EXIT_USAGE)
        }
        Outcome::Error(message) => {
            eprintln!("zklock: {message}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
