//! A lock's queue from its children's names alone, and who in it holds.
//!
//! The library orders contenders the same way, but privately; `lock_queue`
//! reads every node's data too, which is too costly to repeat each second
//! while waiting (see `progress`).

/// The name markers of each contender kind, as the library writes and reads
/// them (`naming.rs`): zklock and Curator mutex nodes, kazoo mutex nodes,
/// and the two sides of a read-write lock.
const MARKERS: [(&str, &str); 4] = [
    ("lock-", "mutex"),
    ("__lock__", "kazoo"),
    ("__READ__", "read"),
    ("__WRIT__", "write"),
];

/// One contender: its node name and kind (`mutex`, `kazoo`, `read`, `write`).
#[derive(Debug, PartialEq, Eq)]
pub struct Contender<'a> {
    pub name: &'a str,
    pub kind: &'static str,
}

/// The children that are lock contenders, in queue order: by sequence
/// suffix, read as the unsigned number it is past the server's signed wrap.
pub fn contenders(children: &[String]) -> Vec<Contender<'_>> {
    let mut found: Vec<(u32, Contender<'_>)> = children
        .iter()
        .filter_map(|name| {
            MARKERS.iter().find_map(|(marker, kind)| {
                let at = name.rfind(marker)?;
                let sequence = parse_sequence(name.get(at + marker.len()..)?)?;
                Some((sequence, Contender { name, kind }))
            })
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(b.1.name)));
    found.into_iter().map(|(_, c)| c).collect()
}

/// A server sequence suffix: ten digits, or a minus sign and digits to a
/// width of ten after the wrap.
fn parse_sequence(suffix: &str) -> Option<u32> {
    let well_formed = (10..=11).contains(&suffix.len())
        && suffix
            .char_indices()
            .all(|(i, c)| c.is_ascii_digit() || (i == 0 && c == '-'));
    if !well_formed {
        return None;
    }
    suffix.parse::<i32>().ok().map(|n| n as u32)
}

/// How many contenders at the head of a queue with these kinds hold the
/// lock: every reader ahead of the first other node; otherwise the first
/// node alone. A read-write lock counts a mutex node as a writer, and a
/// mutex counts every node, so one rule serves both.
pub fn holding<'a>(kinds: impl IntoIterator<Item = &'a str>) -> usize {
    let mut kinds = kinds.into_iter();
    match kinds.next() {
        None => 0,
        Some("read") => 1 + kinds.take_while(|k| *k == "read").count(),
        Some(_) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_every_kind_by_sequence_and_skips_other_children() {
        let children: Vec<String> = [
            "_c_b-__WRIT__0000000003",
            "config",
            "deadbeef__lock__0000000001",
            "_c_a-__READ__0000000002",
            "_c_c-lock--000000005",
            "_c_d-lock-2147483647",
            "_c_e-lock-12",
        ]
        .map(String::from)
        .to_vec();
        let got: Vec<(&str, &str)> = contenders(&children)
            .iter()
            .map(|c| (c.name, c.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("deadbeef__lock__0000000001", "kazoo"),
                ("_c_a-__READ__0000000002", "read"),
                ("_c_b-__WRIT__0000000003", "write"),
                ("_c_d-lock-2147483647", "mutex"),
                ("_c_c-lock--000000005", "mutex"),
            ]
        );
    }

    #[test]
    fn readers_ahead_of_any_other_node_hold_together() {
        assert_eq!(holding([]), 0);
        assert_eq!(holding(["mutex", "mutex"]), 1);
        assert_eq!(holding(["write", "read"]), 1);
        assert_eq!(holding(["read", "read", "write", "read"]), 2);
        assert_eq!(holding(["read", "mutex", "read"]), 1);
        assert_eq!(holding(["read", "read"]), 2);
        assert_eq!(holding(["kazoo", "read"]), 1);
    }
}
