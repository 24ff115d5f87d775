//! Who in a lock's queue holds the lock.

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
