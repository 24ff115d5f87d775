//! `host:port,host:port/chroot` connect strings.

use crate::error::{Error, Result};

/// The default client port.
pub const DEFAULT_PORT: u16 = 2181;

/// A parsed connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    /// `host:port` (IPv6 hosts in brackets), in the order given.
    pub hosts: Vec<String>,
    /// The chroot, without a trailing `/`; `None` for none or `/`.
    pub chroot: Option<String>,
}

impl ConnectString {
    pub(crate) fn parse(input: &str) -> Result<ConnectString> {
        let invalid = |reason: String| Error::InvalidConnectString {
            input: input.to_owned(),
            reason,
        };
        let (host_part, chroot) = match input.find('/') {
            Some(i) => (&input[..i], Some(&input[i..])),
            None => (input, None),
        };
        let chroot = match chroot {
            None | Some("/") => None,
            Some(c) => {
                super::path::validate(c, false).map_err(|e| invalid(format!("bad chroot: {e}")))?;
                if let Some(host) = misplaced_host(c) {
                    return Err(invalid(format!(
                        "the chroot {c:?} holds the host {host:?}: the chroot goes after \
                         the last host, as in \"a:2181,b:2181/app\""
                    )));
                }
                Some(c.to_owned())
            }
        };
        // Empty entries are skipped, as the Java client skips them: a
        // trailing comma from a templated list is common.
        let mut hosts = Vec::new();
        for entry in host_part.split(',').map(str::trim) {
            if !entry.is_empty() {
                hosts.push(parse_host(entry).map_err(invalid)?);
            }
        }
        if hosts.is_empty() {
            return Err(invalid("no host (it must name at least one server)".into()));
        }
        Ok(ConnectString { hosts, chroot })
    }
}

/// A `host:port` written after the chroot (`a:1/app,b:2`), which would
/// otherwise silently become part of the chroot. Node names may hold commas
/// and colons, so only an entry with a port (or a bracketed address) counts.
fn misplaced_host(chroot: &str) -> Option<&str> {
    chroot
        .split(',')
        .skip(1)
        .filter_map(|entry| entry.split('/').next())
        .map(str::trim)
        .find(|entry| {
            // `name:`, which a host entry may be, is a legal node name too.
            (entry.contains(':') || entry.starts_with('['))
                && !entry.ends_with(':')
                && parse_host(entry).is_ok()
        })
}

fn parse_host(entry: &str) -> std::result::Result<String, String> {
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(format!("unclosed '[' in {entry:?}"));
        };
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("unexpected text after ']' in {entry:?}")),
            },
        }
    } else {
        match entry.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err(format!(
                    "IPv6 address {entry:?} must be written as [addr]:port"
                ))
            }
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return Err(format!("missing host name in {entry:?}"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        // As the Java client reads `host:` (but not `[address]:`).
        Some("") if !entry.starts_with('[') => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => {
                return Err(format!("bad port {p:?} in {entry:?} (expected 1-65535)"))
            }
            Ok(p) => p,
        },
    };
    Ok(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_ports_and_chroot() {
        let cs = ConnectString::parse("a:1, b ,[::1]:3/app/x").unwrap();
        assert_eq!(cs.hosts, ["a:1", "b:2181", "[::1]:3"]);
        assert_eq!(cs.chroot.as_deref(), Some("/app/x"));
        // As the Java client reads them: empty entries skipped, an empty
        // port the default.
        let cs = ConnectString::parse(",a:1,, b: ,[::1],").unwrap();
        assert_eq!(cs.hosts, ["a:1", "b:2181", "[::1]:2181"]);
        let cs = ConnectString::parse("a:1/x,y:").unwrap();
        assert_eq!(cs.chroot.as_deref(), Some("/x,y:"));
        assert_eq!(ConnectString::parse("h/").unwrap().chroot, None);
        // Commas and colons are legal in node names: only a whole host:port
        // after a comma is taken for a misplaced host.
        for chroot in ["/x,y/b:2", "/x,y:z", "/x,y"] {
            let cs = ConnectString::parse(&format!("a:1{chroot}")).unwrap();
            assert_eq!(cs.chroot.as_deref(), Some(chroot));
        }
    }

    #[test]
    fn bad_strings_say_what_is_wrong() {
        for (input, needle) in [
            ("", "no host"),
            (" , ,", "no host"),
            ("/app", "no host"),
            ("a:notaport", "bad port"),
            ("a:0", "bad port"),
            ("a:70000", "bad port"),
            ("[::1]:", "bad port"),
            (":2181", "missing host"),
            ("::1:2181", "IPv6"),
            ("[::1", "unclosed"),
            ("a:1/app/", "bad chroot"),
            ("a:1/app//x", "bad chroot"),
            ("a:1/app,b:2", "holds the host \"b:2\""),
            ("a:1/app, [::1]:3", "holds the host \"[::1]:3\""),
            ("a:1/app,b:2/app", "holds the host \"b:2\""),
        ] {
            match ConnectString::parse(input) {
                Err(Error::InvalidConnectString { reason, .. }) => {
                    assert!(reason.contains(needle), "{input:?}: {reason}")
                }
                other => panic!("{input:?} gave {other:?}"),
            }
        }
    }
}
