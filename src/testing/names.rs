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
    ///
    /// # Panics
    ///
    /// If `host` is made up already and still alive: two tests sharing a
    /// name would take each other's addresses.
    pub fn new(host: &str, addresses: Vec<SocketAddr>) -> FakeName {
        let mut names = names();
        assert!(
            names.iter().all(|(name, _)| name != host),
            "{host} is made up already: give each test a name of its own"
        );
        names.push((host.to_owned(), addresses));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_resolves_while_it_lives_and_only_once_at_a_time() {
        let addr: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let host = "names-unit.zklock.test:7";
        let name = FakeName::new(host, vec![addr]);
        assert_eq!(lookup(host), Some(vec![addr]));
        let again = std::panic::catch_unwind(|| FakeName::new(host, Vec::new()));
        assert!(again.is_err(), "a second name alike is refused");
        assert_eq!(lookup(host), Some(vec![addr]), "and the first kept");
        drop(name);
        assert_eq!(lookup(host), None);
    }
}
