//! Which watchers wait on which paths, and which of them an event fires.

use std::collections::HashMap;

use crate::proto::{EventType, KeeperState};

/// A watch notification, or the session's end, as delivered to user code.
/// Paths are relative to the client's chroot. Unlike the Java client's
/// watchers, these hear no disconnections or reconnections: those go to
/// [`Client::state_changes`](crate::Client::state_changes) and the state
/// handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    /// What happened; [`EventType::None`] for the session's end (`state`
    /// then says how it ended).
    pub event_type: EventType,
    /// The session state at the time, as the server names it
    /// ([`KeeperState::SyncConnected`] for a node event). This is not
    /// [`Client::state`](crate::Client::state)'s [`State`](crate::State):
    /// compare with `KeeperState` variants.
    pub state: KeeperState,
    /// The node concerned; empty for state changes.
    pub path: String,
}

impl WatchedEvent {
    pub(crate) fn state(state: KeeperState) -> WatchedEvent {
        WatchedEvent {
            event_type: EventType::None,
            state,
            path: String::new(),
        }
    }
}

/// The kinds of watch a session tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// Set by getData, or by exists on an existing node. One-shot.
    Data,
    /// Set by exists on a missing node. One-shot.
    Exist,
    /// Set by getChildren. One-shot.
    Child,
    /// addWatch PERSISTENT: every change of the node itself.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: every change in the subtree.
    PersistentRecursive,
}

impl WatchKind {
    /// Every kind.
    pub const ALL: [WatchKind; 5] = [
        WatchKind::Data,
        WatchKind::Exist,
        WatchKind::Child,
        WatchKind::Persistent,
        WatchKind::PersistentRecursive,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Watchers by kind and server path (chroot included).
#[derive(Debug)]
pub(crate) struct WatchRegistry<W> {
    tables: [HashMap<String, Vec<W>>; 5],
}

impl<W: Clone> WatchRegistry<W> {
    pub(crate) fn new() -> Self {
        WatchRegistry {
            tables: Default::default(),
        }
    }

    pub(crate) fn add(&mut self, kind: WatchKind, path: String, watcher: W) {
        self.tables[kind.index()]
            .entry(path)
            .or_default()
            .push(watcher);
    }

    /// The watchers an event on `path` reaches. One-shot watches that fire
    /// are removed; persistent ones stay.
    pub(crate) fn fire(&mut self, event_type: EventType, path: &str) -> Vec<W> {
        let mut out = Vec::new();
        let mut take = |kind: WatchKind, out: &mut Vec<W>| {
            if let Some(ws) = self.tables[kind.index()].remove(path) {
                out.extend(ws);
            }
        };
        match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                take(WatchKind::Data, &mut out);
                take(WatchKind::Exist, &mut out);
            }
            EventType::NodeChildrenChanged => take(WatchKind::Child, &mut out),
            EventType::NodeDeleted => {
                take(WatchKind::Data, &mut out);
                take(WatchKind::Exist, &mut out);
                take(WatchKind::Child, &mut out);
            }
            _ => return out,
        }
        if let Some(ws) = self.tables[WatchKind::Persistent.index()].get(path) {
            out.extend(ws.iter().cloned());
        }
        // Recursive watches never see NodeChildrenChanged: the server sends
        // the creations and deletions themselves instead.
        if event_type != EventType::NodeChildrenChanged {
            let recursive = &self.tables[WatchKind::PersistentRecursive.index()];
            // Each ancestor looked up costs a hash of its path: for a deep
            // path (up to a megabyte, from a hostile server) and few
            // recursive watches, each watch's path is compared instead.
            let depth = path.bytes().filter(|b| *b == b'/').count();
            if recursive.len() < depth {
                for (watched, ws) in recursive {
                    if is_ancestor_or_self(watched, path) {
                        out.extend(ws.iter().cloned());
                    }
                }
            } else {
                for ancestor in ancestors_and_self(path) {
                    if let Some(ws) = recursive.get(ancestor) {
                        out.extend(ws.iter().cloned());
                    }
                }
            }
        }
        out
    }

    /// Removes the watchers of `kinds` on `path`, returning them.
    pub(crate) fn remove(&mut self, path: &str, kinds: &[WatchKind]) -> Vec<(WatchKind, W)> {
        let mut out = Vec::new();
        for &kind in kinds {
            if let Some(ws) = self.tables[kind.index()].remove(path) {
                out.extend(ws.into_iter().map(|w| (kind, w)));
            }
        }
        out
    }

    /// Removes the watchers of `kind` on `path` that `matches` picks, and
    /// the path's entry once it has none left; returns how many went.
    pub(crate) fn remove_where(
        &mut self,
        kind: WatchKind,
        path: &str,
        matches: impl Fn(&W) -> bool,
    ) -> usize {
        let table = &mut self.tables[kind.index()];
        let Some(ws) = table.get_mut(path) else {
            return 0;
        };
        let before = ws.len();
        ws.retain(|w| !matches(w));
        let removed = before - ws.len();
        if ws.is_empty() {
            table.remove(path);
        }
        removed
    }

    /// Removes the watchers of `kind` that `matches` picks, on every path,
    /// and the entries of paths left with none.
    pub(crate) fn remove_everywhere(&mut self, kind: WatchKind, matches: impl Fn(&W) -> bool) {
        self.tables[kind.index()].retain(|_, ws| {
            ws.retain(|w| !matches(w));
            !ws.is_empty()
        });
    }

    /// The paths with a watcher of `kind` that `matches` picks.
    pub(crate) fn paths_where(&self, kind: WatchKind, matches: impl Fn(&W) -> bool) -> Vec<String> {
        self.tables[kind.index()]
            .iter()
            .filter(|(_, ws)| ws.iter().any(&matches))
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// True if a watcher of `kind` on `path` that `matches` picks is
    /// registered.
    pub(crate) fn any_where(
        &self,
        kind: WatchKind,
        path: &str,
        matches: impl Fn(&W) -> bool,
    ) -> bool {
        self.tables[kind.index()]
            .get(path)
            .is_some_and(|ws| ws.iter().any(matches))
    }

    /// Every path of `kind`, for re-registration after a reconnect.
    pub(crate) fn paths(&self, kind: WatchKind) -> Vec<String> {
        self.tables[kind.index()].keys().cloned().collect()
    }

    /// How many watchers are registered, over every kind and path.
    pub(crate) fn len(&self) -> usize {
        self.tables
            .iter()
            .flat_map(|table| table.values())
            .map(Vec::len)
            .sum()
    }

    /// Removes everything, e.g. when the session ends.
    pub(crate) fn drain(&mut self) -> Vec<W> {
        let mut out = Vec::new();
        for kind in WatchKind::ALL {
            for (_, ws) in self.tables[kind.index()].drain() {
                out.extend(ws);
            }
        }
        out
    }
}

/// True if `ancestor` is `path` or a node above it.
fn is_ancestor_or_self(ancestor: &str, path: &str) -> bool {
    ancestor == "/"
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `/a/b` yields `/a/b`, `/a`, `/`.
fn ancestors_and_self(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let current = next?;
        next = match current.rfind('/') {
            _ if current == "/" => None,
            Some(0) => Some("/"),
            Some(i) => Some(&current[..i]),
            None => None,
        };
        Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors() {
        assert_eq!(
            ancestors_and_self("/a/b").collect::<Vec<_>>(),
            ["/a/b", "/a", "/"]
        );
        assert_eq!(ancestors_and_self("/").collect::<Vec<_>>(), ["/"]);
    }

    /// Recursive watches are found by comparing their paths when they are
    /// fewer than the event path's segments, by looking its ancestors up
    /// otherwise: the same watchers either way.
    #[test]
    fn recursive_watches_reach_the_same_events_however_they_are_found() {
        let mut reg = WatchRegistry::new();
        for (path, watcher) in [("/", 1), ("/a", 2), ("/a/b", 3), ("/ab", 4), ("/a/bc", 5)] {
            reg.add(WatchKind::PersistentRecursive, path.into(), watcher);
        }
        let mut reached = |path: &str| {
            let mut watchers = reg.fire(EventType::NodeDataChanged, path);
            watchers.sort();
            watchers
        };
        // Deeper than five watches: compared.
        assert_eq!(reached("/a/b/c/d/e/f"), [1, 2, 3]);
        assert_eq!(reached("/ab/c/d/e/f/g"), [1, 4]);
        // Shallower: looked up.
        assert_eq!(reached("/a/b"), [1, 2, 3]);
        assert_eq!(reached("/a/bc"), [1, 2, 5]);
        assert_eq!(reached("/x"), [1]);
        assert!(is_ancestor_or_self("/a", "/a"));
        assert!(!is_ancestor_or_self("/a", "/ab"));
    }

    #[test]
    fn a_forgotten_watcher_is_not_told_and_its_path_entry_goes() {
        let mut reg = WatchRegistry::new();
        reg.add(WatchKind::Data, "/p".into(), 1);
        reg.add(WatchKind::Data, "/p".into(), 2);
        assert_eq!(reg.remove_where(WatchKind::Data, "/p", |w| *w == 1), 1);
        assert_eq!(reg.remove_where(WatchKind::Child, "/p", |_| true), 0);
        assert_eq!(reg.fire(EventType::NodeDeleted, "/p"), [2]);
        reg.add(WatchKind::Data, "/q".into(), 3);
        assert_eq!(reg.remove_where(WatchKind::Data, "/q", |w| *w == 3), 1);
        assert!(
            reg.paths(WatchKind::Data).is_empty(),
            "no empty entry is left to re-register"
        );
    }

    #[test]
    fn removal_everywhere_keeps_the_others_and_paths_where_finds_them() {
        let mut reg: WatchRegistry<u32> = WatchRegistry::new();
        reg.add(WatchKind::Persistent, "/a".into(), 1);
        reg.add(WatchKind::Persistent, "/a".into(), 2);
        reg.add(WatchKind::Persistent, "/b".into(), 1);
        reg.add(WatchKind::Persistent, "/c".into(), 3);
        reg.add(WatchKind::Data, "/d".into(), 1);
        let mut paths = reg.paths_where(WatchKind::Persistent, |w| *w == 1);
        paths.sort();
        assert_eq!(paths, ["/a", "/b"]);
        reg.remove_everywhere(WatchKind::Persistent, |w| *w == 1);
        let mut left = reg.paths(WatchKind::Persistent);
        left.sort();
        assert_eq!(left, ["/a", "/c"], "/b's entry went with its last");
        assert_eq!(reg.paths(WatchKind::Data), ["/d"], "other kinds kept");
        assert_eq!(reg.len(), 3);
    }

    #[test]
    fn any_where_looks_only_at_the_kind_and_path_given() {
        let mut reg = WatchRegistry::new();
        reg.add(WatchKind::Data, "/p".into(), 1);
        reg.add(WatchKind::Exist, "/q".into(), 2);
        assert!(reg.any_where(WatchKind::Data, "/p", |w| *w == 1));
        assert!(!reg.any_where(WatchKind::Data, "/p", |w| *w != 1));
        assert!(!reg.any_where(WatchKind::Exist, "/p", |_| true));
        assert!(!reg.any_where(WatchKind::Data, "/q", |_| true));
    }

    #[test]
    fn one_shot_watches_fire_once_and_persistent_ones_stay() {
        let mut reg = WatchRegistry::new();
        reg.add(WatchKind::Data, "/a".into(), 1);
        reg.add(WatchKind::Exist, "/a".into(), 2);
        reg.add(WatchKind::Child, "/a".into(), 3);
        reg.add(WatchKind::Persistent, "/a".into(), 4);
        reg.add(WatchKind::PersistentRecursive, "/".into(), 5);
        assert_eq!(reg.fire(EventType::NodeDataChanged, "/a"), [1, 2, 4, 5]);
        assert_eq!(reg.fire(EventType::NodeDataChanged, "/a"), [4, 5]);
        assert_eq!(reg.fire(EventType::NodeChildrenChanged, "/a"), [3, 4]);
        assert_eq!(reg.fire(EventType::NodeDeleted, "/a/b"), [5]);
        assert_eq!(reg.drain().len(), 2);
        assert!(reg.drain().is_empty());
    }
}
