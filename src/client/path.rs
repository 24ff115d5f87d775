//! Path rules, checked before anything is sent (the server's own rules).

use std::fmt::Write;

use crate::error::{Error, Result};

/// Checks `path` by the server's rules. A sequential create appends a
/// number, so its path may end in `/`, `/.` or `/..` (the server checks it
/// with a digit appended), and may be `/` itself: the node is then named by
/// its number alone, under the root.
pub(crate) fn validate(path: &str, sequential: bool) -> Result<()> {
    let invalid = |reason| {
        Err(Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })
    };
    if path.is_empty() {
        return invalid("the path is empty");
    }
    let Some(relative) = path.strip_prefix('/') else {
        return invalid("the path must start with '/'");
    };
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') && !sequential {
        return invalid("the path must not end with '/'");
    }
    if let Some(c) = path.chars().find(|c| forbidden_char(*c)) {
        return invalid(if c == '\0' {
            "the path contains a NUL character"
        } else if c > '\u{ffff}' {
            SUPPLEMENTARY
        } else {
            "the path contains a control or reserved character (U+0001-U+001F, U+007F-U+009F, U+E000-U+F8FF or U+FFF0-U+FFFF)"
        });
    }
    let mut segments = relative.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match segment {
            // The server's number makes it a name (`.0000000001`).
            "" | "." | ".." if last && sequential => {}
            "" => return invalid("the path contains an empty segment ('//')"),
            "." => return invalid("the path contains a '.' segment"),
            ".." => return invalid("the path contains a '..' segment"),
            _ => {}
        }
    }
    Ok(())
}

/// Why a character above U+FFFF is refused: Java strings hold it as a
/// UTF-16 surrogate pair, and the server refuses U+D800-U+F8FF in paths.
const SUPPLEMENTARY: &str =
    "the path contains a character above U+FFFF, which the server refuses (as UTF-16 surrogates)";

fn forbidden_char(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{10ffff}')
}

/// Joins a parent path and a child name.
pub(crate) fn join(parent: &str, child: &str) -> String {
    let parent = if parent == "/" { "" } else { parent };
    [parent, "/", child].concat()
}

/// The path the server gives a sequential node created at `prefix` as the
/// create numbered `sequence` under its parent: the number as a signed
/// 32-bit decimal, zero-padded to ten characters (`-000000005` after the
/// wrap at 2^31).
pub(crate) fn sequential_path(prefix: &str, sequence: u32) -> String {
    // Sized up front: `format!` would grow the string as it goes.
    let mut path = String::with_capacity(prefix.len() + 11);
    path.push_str(prefix);
    let _ = write!(path, "{:010}", sequence as i32);
    path
}

/// The last segment of a node path: the node's name.
pub(crate) fn last_segment(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

/// The parent of `path`, or `None` for the root.
pub(crate) fn parent(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => Some("/"),
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(path: &str) -> &'static str {
        match validate(path, false) {
            Err(Error::InvalidPath { reason, .. }) => reason,
            other => panic!("{path:?} gave {other:?}"),
        }
    }

    #[test]
    fn valid_paths() {
        for p in ["/", "/a", "/a/b.c", "/a/..b", "/ünï/路径", "/a/.x"] {
            assert_eq!(validate(p, false), Ok(()), "{p}");
        }
        assert_eq!(validate("/a/", true), Ok(()));
        assert_eq!(validate("/a/lock-", true), Ok(()));
        // As the server checks a sequential path: with a digit appended.
        for p in ["/", "/.", "/..", "/a/.", "/a/.."] {
            assert_eq!(validate(p, true), Ok(()), "{p}");
        }
    }

    #[test]
    fn each_rule_has_its_own_message() {
        assert_eq!(reason(""), "the path is empty");
        assert_eq!(reason("a/b"), "the path must start with '/'");
        assert_eq!(reason("/a/"), "the path must not end with '/'");
        assert_eq!(reason("/a//b"), "the path contains an empty segment ('//')");
        assert_eq!(reason("/a/./b"), "the path contains a '.' segment");
        assert_eq!(reason("/a/.."), "the path contains a '..' segment");
        assert_eq!(reason("/a\0b"), "the path contains a NUL character");
        assert!(reason("/a\u{1}").contains("control"));
        assert!(reason("/a\u{9f}").contains("control"));
        assert!(reason("/a\u{e000}").contains("control"));
        assert!(reason("/a\u{fff0}").contains("control"));
        assert_eq!(reason("/a\u{10000}"), SUPPLEMENTARY);
        assert_eq!(reason("/lock-\u{1f512}"), SUPPLEMENTARY);
        assert!(validate("/a//", true).is_err());
        assert!(validate("/./a", true).is_err());
        assert!(validate("/../", true).is_err());
    }

    #[test]
    fn parents_and_joins() {
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/"), None);
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }

    #[test]
    fn sequential_paths_are_numbered_as_the_server_numbers_them() {
        assert_eq!(sequential_path("/l/n-", 0), "/l/n-0000000000");
        assert_eq!(sequential_path("/l/n-", 42), "/l/n-0000000042");
        assert_eq!(sequential_path("/l/n-", 2_147_483_647), "/l/n-2147483647");
        assert_eq!(sequential_path("/l/n-", 2_147_483_648), "/l/n--2147483648");
        assert_eq!(sequential_path("/l/n-", u32::MAX - 4), "/l/n--000000005");
    }
}
