//! Watch notifications and the requests that manage watches.

use super::{AddWatchMode, EventType, KeeperState, WatcherType};

record! {
    /// The body of a notification frame (xid -1).
    pub struct WatcherEvent {
        /// What changed.
        pub event_type: EventType,
        /// Always `SyncConnected` from a server.
        pub state: KeeperState,
        /// The server path (chroot included).
        pub path: String,
    }
}

record! {
    /// `setWatches`: re-registers one-shot watches after a reconnect.
    pub struct SetWatches {
        /// Changes after this zxid fire the watches at once.
        pub relative_zxid: i64,
        /// Paths with data watches.
        pub data_watches: Vec<String>,
        /// Paths with exists watches.
        pub exist_watches: Vec<String>,
        /// Paths with child watches.
        pub child_watches: Vec<String>,
    }
}

record! {
    /// `setWatches2`: like `setWatches`, plus persistent and recursive watches.
    pub struct SetWatches2 {
        /// Changes after this zxid fire the one-shot watches at once.
        pub relative_zxid: i64,
        /// Paths with data watches.
        pub data_watches: Vec<String>,
        /// Paths with exists watches.
        pub exist_watches: Vec<String>,
        /// Paths with child watches.
        pub child_watches: Vec<String>,
        /// Paths with persistent watches.
        pub persistent_watches: Vec<String>,
        /// Paths with persistent recursive watches.
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    /// `addWatch`.
    pub struct AddWatchRequest {
        /// The watched path; the node need not exist.
        pub path: String,
        /// Persistent or persistent-recursive.
        pub mode: AddWatchMode,
    }
}

record! {
    /// `removeWatches` and `checkWatches` (the same layout).
    pub struct RemoveWatchesRequest {
        /// The watched path.
        pub path: String,
        /// Which watches.
        pub watcher_type: WatcherType,
    }
}

/// `checkWatches`: the same layout as `removeWatches`.
pub type CheckWatchesRequest = RemoveWatchesRequest;

record! {
    /// A bare result code: the reply body of `addWatch`, and the body of a
    /// failed op inside a multi response.
    pub struct ErrorResponse {
        /// An [`ErrorCode`](super::ErrorCode) value.
        pub err: i32,
    }
}
