//! Data records shared by many operations: Stat, Id, ACL, ClientInfo.

record! {
    /// A node's metadata (68 bytes on the wire).
    #[derive(Default)]
    pub struct Stat {
        /// The zxid of the change that created the node.
        pub czxid: i64,
        /// The zxid of the last change to the node's data.
        pub mzxid: i64,
        /// Creation time, in ms since the epoch.
        pub ctime: i64,
        /// Last modification time, in ms since the epoch.
        pub mtime: i64,
        /// The data version.
        pub version: i32,
        /// The children version.
        pub cversion: i32,
        /// The ACL version.
        pub aversion: i32,
        /// The owning session for an ephemeral node; 0 for persistent nodes
        /// and (as a 3.8 server reports them) containers and TTL nodes too:
        /// the server keeps its markers for those to itself.
        pub ephemeral_owner: i64,
        /// The length of the node's data.
        pub data_length: i32,
        /// The number of children.
        pub num_children: i32,
        /// The zxid of the last change to the children.
        pub pzxid: i64,
    }
}

record! {
    /// An identity under an auth scheme, e.g. `world:anyone` or `digest:user:hash`.
    pub struct Id {
        /// The scheme: `world`, `auth`, `digest`, `ip`, `sasl`, ...
        pub scheme: String,
        /// The identity within the scheme.
        pub id: String,
    }
}

record! {
    /// One access-control entry: permission bits granted to an identity.
    pub struct Acl {
        /// Bits from [`perms`](super::perms).
        pub perms: i32,
        /// Who they are granted to.
        pub id: Id,
    }
}

record! {
    /// One authenticated identity of a session, from `whoAmI`.
    pub struct ClientInfo {
        /// The auth scheme.
        pub auth_scheme: String,
        /// The user within that scheme.
        pub user: String,
    }
}

record_vec_field!(Acl, ClientInfo);

impl Id {
    /// An identity from its scheme and id.
    pub fn new(scheme: impl Into<String>, id: impl Into<String>) -> Self {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }
}

impl Acl {
    /// `[ALL, world:anyone]`: anyone may do anything (`OPEN_ACL_UNSAFE`).
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: super::perms::ALL,
            id: Id::new("world", "anyone"),
        }]
    }

    /// `[ALL, auth:""]`: only the creator's authenticated ids (`CREATOR_ALL_ACL`).
    pub fn creator_all() -> Vec<Acl> {
        vec![Acl {
            perms: super::perms::ALL,
            id: Id::new("auth", ""),
        }]
    }

    /// `[READ, world:anyone]` (`READ_ACL_UNSAFE`).
    pub fn read_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: super::perms::READ,
            id: Id::new("world", "anyone"),
        }]
    }
}
