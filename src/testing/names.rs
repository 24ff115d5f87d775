//! Host names that resolve to addresses a test chooses, without the
//! system's resolver: a name with several addresses (a DNS round robin, a
//! headless service) made of loopback servers and proxies.

use std::net::SocketAddr;
use std::sync::Mutex;

/// The names made up so far, each with its addresses.
static NAMES: Mutex<Vec<(String, Vec<SocketAddr>)>> = Mutex::new(Vec::new());

/// A made-up host name; it stops resolving when dropped.
#[derive(Debug)]
#[must_use = "the name resolves only while this lives"]
pub struct FakeName {
    host: String,
}

impl FakeName {
    /// Makes `host` (`name:port`, as in a connect string) resolve to
    /// `addresses`, in that order, in this process. Pick a name under
    /// `.test` (RFC 6761), unique to the test: tests run in parallel, and
    /// the name never reaches a real resolver.
    pub fn new(host: &str, addresses: Vec<SocketAddr>) -> FakeName {
        names().push((host.to_owned(), addresses));
        FakeName {
            host: host.to_owned(),
        }
    }

    /// The `name:port` to put in a connect string.
    pub fn host(&self) -> &str {
        &self.host
    }
}

impl Drop for FakeName {
    fn drop(&mut self) {
        let mut names = names();
        if let Some(at) = names.iter().position(|(host, _)| *host == self.host) {
            names.remove(at);
        }
    }
}

fn names() -> std::sync::MutexGuard<'static, Vec<(String, Vec<SocketAddr>)>> {
    NAMES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The addresses of `host`, if a test made it up.
pub(crate) fn lookup(host: &str) -> Option<Vec<SocketAddr>> {
    names()
        .iter()
        .find(|(name, _)| name == host)
        .map(|(_, addresses)| addresses.clone())
}
