//! Requests and responses of the single-node operations.

use super::{Acl, CreateMode, Stat};

record! {
    /// `create`, `create2` and `createContainer`.
    pub struct CreateRequest {
        /// The node path (the parent's path plus a prefix for sequential modes).
        pub path: String,
        /// The initial data; `None` creates a node with null data.
        pub data: Option<Vec<u8>>,
        /// The node's ACL; must not be empty.
        pub acl: Vec<Acl>,
        /// The create mode, sent as its flag.
        pub mode: CreateMode,
    }
}

record! {
    /// `createTTL`.
    pub struct CreateTtlRequest {
        /// The node path.
        pub path: String,
        /// The initial data.
        pub data: Option<Vec<u8>>,
        /// The node's ACL.
        pub acl: Vec<Acl>,
        /// A TTL mode.
        pub mode: CreateMode,
        /// The TTL in ms, 1 to 0xFF_FFFF_FFFF.
        pub ttl: i64,
    }
}

record! {
    /// The reply to `create`: the created path (with any sequence suffix).
    pub struct CreateResponse {
        /// The created path.
        pub path: String,
    }
}

record! {
    /// The reply to `create2`, `createContainer` and `createTTL`.
    pub struct Create2Response {
        /// The created path.
        pub path: String,
        /// The new node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `delete`.
    pub struct DeleteRequest {
        /// The node path.
        pub path: String,
        /// The expected data version, or -1 for any.
        pub version: i32,
    }
}

record! {
    /// `exists`.
    pub struct ExistsRequest {
        /// The node path.
        pub path: String,
        /// Leave an exists watch (set even when the node is missing).
        pub watch: bool,
    }
}

record! {
    /// The reply to `exists` when the node exists.
    pub struct ExistsResponse {
        /// The node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `getData`.
    pub struct GetDataRequest {
        /// The node path.
        pub path: String,
        /// Leave a data watch.
        pub watch: bool,
    }
}

record! {
    /// The reply to `getData`.
    pub struct GetDataResponse {
        /// The data; `None` if the node was created with null data.
        pub data: Option<Vec<u8>>,
        /// The node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `setData`.
    pub struct SetDataRequest {
        /// The node path.
        pub path: String,
        /// The new data; `None` sets null data.
        pub data: Option<Vec<u8>>,
        /// The expected data version, or -1 for any.
        pub version: i32,
    }
}

record! {
    /// The reply to `setData`.
    pub struct SetDataResponse {
        /// The node's new Stat.
        pub stat: Stat,
    }
}

record! {
    /// `getACL`.
    pub struct GetAclRequest {
        /// The node path.
        pub path: String,
    }
}

record! {
    /// The reply to `getACL`.
    pub struct GetAclResponse {
        /// The node's ACL.
        pub acl: Vec<Acl>,
        /// The node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `setACL`.
    pub struct SetAclRequest {
        /// The node path.
        pub path: String,
        /// The new ACL; must not be empty.
        pub acl: Vec<Acl>,
        /// The expected ACL version (`aversion`), or -1 for any.
        pub version: i32,
    }
}

record! {
    /// The reply to `setACL`.
    pub struct SetAclResponse {
        /// The node's new Stat.
        pub stat: Stat,
    }
}

record! {
    /// `getChildren` and `getChildren2` (the same layout).
    pub struct GetChildrenRequest {
        /// The parent path.
        pub path: String,
        /// Leave a child watch.
        pub watch: bool,
    }
}

record! {
    /// The reply to `getChildren`: names relative to the parent, unordered.
    pub struct GetChildrenResponse {
        /// The children's names.
        pub children: Vec<String>,
    }
}

record! {
    /// The reply to `getChildren2`.
    pub struct GetChildren2Response {
        /// The children's names, unordered.
        pub children: Vec<String>,
        /// The parent's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `sync`, and its reply (the path as the server saw it).
    pub struct PathRecord {
        /// A node path.
        pub path: String,
    }
}

/// `sync`: the request record.
pub type SyncRequest = PathRecord;
/// `sync`: the reply record.
pub type SyncResponse = PathRecord;
/// `getEphemerals`: the prefix to match (a plain string prefix, not a subtree).
pub type GetEphemeralsRequest = PathRecord;
/// `getAllChildrenNumber`: the subtree root.
pub type GetAllChildrenNumberRequest = PathRecord;

record! {
    /// `check`: a version precondition, only meaningful inside a multi.
    pub struct CheckVersionRequest {
        /// The node path.
        pub path: String,
        /// The expected data version.
        pub version: i32,
    }
}

record! {
    /// The reply to `getEphemerals`: full server paths.
    pub struct GetEphemeralsResponse {
        /// The session's ephemeral nodes under the prefix.
        pub ephemerals: Vec<String>,
    }
}

record! {
    /// The reply to `getAllChildrenNumber`.
    pub struct GetAllChildrenNumberResponse {
        /// The number of descendants (not only direct children).
        pub total_number: i32,
    }
}
