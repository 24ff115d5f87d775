//! Protocol enumerations: opcodes, error codes, create modes, watch kinds and
//! states. Converting an unknown wire value gives [`DecodeError::UnknownValue`].

use super::{DecodeError, Field, Reader, Writer};

macro_rules! int_enum {
    (
        $(#[$meta:meta])*
        $name:ident : $kind:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )+ ];

            /// The value on the wire.
            pub const fn code(self) -> i32 {
                match self {
                    $( $name::$variant => $value, )+
                }
            }
        }

        impl TryFrom<i32> for $name {
            type Error = DecodeError;

            fn try_from(value: i32) -> Result<Self, DecodeError> {
                match value {
                    $( $value => Ok($name::$variant), )+
                    _ => Err(DecodeError::UnknownValue { kind: $kind, value }),
                }
            }
        }

        impl From<$name> for i32 {
            fn from(v: $name) -> i32 {
                v.code()
            }
        }

        impl Field for $name {
            const MIN_SIZE: usize = 4;
            fn write_field(&self, w: &mut Writer<'_>) {
                w.write_i32(self.code());
            }
            fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                $name::try_from(r.read_i32()?)
            }
        }
    };
}

int_enum! {
    /// Request types (`ZooDefs.OpCode`).
    OpCode: "opcode" {
        /// Server-internal; never sent by a client.
        Notification = 0,
        /// `create`: replies with the path only.
        Create = 1,
        /// `delete`.
        Delete = 2,
        /// `exists`.
        Exists = 3,
        /// `getData`.
        GetData = 4,
        /// `setData`.
        SetData = 5,
        /// `getACL`.
        GetAcl = 6,
        /// `setACL`.
        SetAcl = 7,
        /// `getChildren`.
        GetChildren = 8,
        /// `sync`.
        Sync = 9,
        /// `ping` (xid -2).
        Ping = 11,
        /// `getChildren2`: children plus the parent's Stat.
        GetChildren2 = 12,
        /// `check`: only inside a multi.
        Check = 13,
        /// `multi`: atomic writes.
        Multi = 14,
        /// `create2`: replies with the path and Stat.
        Create2 = 15,
        /// `reconfig`.
        Reconfig = 16,
        /// `checkWatches`.
        CheckWatches = 17,
        /// `removeWatches`.
        RemoveWatches = 18,
        /// `createContainer`.
        CreateContainer = 19,
        /// Server-internal; never sent by a client.
        DeleteContainer = 20,
        /// `createTTL`.
        CreateTtl = 21,
        /// `multiRead`: independent reads.
        MultiRead = 22,
        /// `auth` (xid -4).
        Auth = 100,
        /// `setWatches`.
        SetWatches = 101,
        /// `sasl`.
        Sasl = 102,
        /// `getEphemerals`.
        GetEphemerals = 103,
        /// `getAllChildrenNumber`.
        GetAllChildrenNumber = 104,
        /// `setWatches2`: also persistent and recursive watches.
        SetWatches2 = 105,
        /// `addWatch`.
        AddWatch = 106,
        /// `whoAmI`.
        WhoAmI = 107,
        /// Server-internal session creation.
        CreateSession = -10,
        /// `closeSession`.
        CloseSession = -11,
        /// The result type of a failed op inside a multi response.
        Error = -1,
    }
}

int_enum! {
    /// Server result codes (`KeeperException.Code`).
    ErrorCode: "error code" {
        /// Success.
        Ok = 0,
        /// Base of the system range; never returned as such.
        SystemError = -1,
        /// An op after the failing one in a multi.
        RuntimeInconsistency = -2,
        /// Data inconsistency.
        DataInconsistency = -3,
        /// The connection to the server was lost.
        ConnectionLoss = -4,
        /// The server could not parse the request.
        MarshallingError = -5,
        /// The operation is not implemented by this server (or not enabled).
        Unimplemented = -6,
        /// Operation timeout.
        OperationTimeout = -7,
        /// Invalid arguments.
        BadArguments = -8,
        /// Unknown session (since 3.5.0).
        UnknownSession = -12,
        /// No quorum of the new config (since 3.5.0).
        NewConfigNoQuorum = -13,
        /// Another reconfiguration is in progress (since 3.5.0).
        ReconfigInProgress = -14,
        /// Base of the API range; never returned as such.
        ApiError = -100,
        /// The node does not exist.
        NoNode = -101,
        /// Not authorised.
        NoAuth = -102,
        /// The expected version did not match.
        BadVersion = -103,
        /// Ephemeral nodes may not have children.
        NoChildrenForEphemerals = -108,
        /// The node already exists.
        NodeExists = -110,
        /// The node has children.
        NotEmpty = -111,
        /// The session has expired.
        SessionExpired = -112,
        /// Invalid callback.
        InvalidCallback = -113,
        /// Invalid ACL.
        InvalidAcl = -114,
        /// Authentication failed.
        AuthFailed = -115,
        /// The session moved to another server.
        SessionMoved = -118,
        /// A write sent to a read-only server.
        NotReadOnly = -119,
        /// A local session tried to create an ephemeral node.
        EphemeralOnLocalSession = -120,
        /// No such watch to remove or check.
        NoWatcher = -121,
        /// The request timed out (client-local in the Java client).
        RequestTimeout = -122,
        /// Reconfiguration is disabled.
        ReconfigDisabled = -123,
        /// The session was closed because SASL authentication is required.
        SessionClosedRequireSaslAuth = -124,
        /// A quota was exceeded (3.7.0+).
        QuotaExceeded = -125,
        /// The request was throttled (3.7.0+).
        ThrottledOp = -127,
    }
}

int_enum! {
    /// How a node is created (`CreateMode`), sent as the create flags.
    CreateMode: "create mode" {
        /// A plain persistent node.
        Persistent = 0,
        /// Deleted when the creating session ends.
        Ephemeral = 1,
        /// Persistent, with a 10-digit sequence suffix.
        PersistentSequential = 2,
        /// Ephemeral, with a 10-digit sequence suffix.
        EphemeralSequential = 3,
        /// Deleted by the server once its last child is gone.
        Container = 4,
        /// Persistent, deleted after a TTL without changes or children.
        PersistentWithTtl = 5,
        /// Sequential and TTL.
        PersistentSequentialWithTtl = 6,
    }
}

impl CreateMode {
    /// True for modes whose node dies with the session.
    pub const fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// True for modes that append a sequence suffix.
    pub const fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    /// True for container nodes.
    pub const fn is_container(self) -> bool {
        matches!(self, CreateMode::Container)
    }

    /// True for modes that need a TTL.
    pub const fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

int_enum! {
    /// The kind of change a watch notification reports (`Watcher.Event.EventType`).
    EventType: "event type" {
        /// A state change, not a node change (client-local).
        None = -1,
        /// The node was created.
        NodeCreated = 1,
        /// The node was deleted.
        NodeDeleted = 2,
        /// The node's data changed.
        NodeDataChanged = 3,
        /// The node's children changed.
        NodeChildrenChanged = 4,
        /// A data watch was removed (client-local).
        DataWatchRemoved = 5,
        /// A child watch was removed (client-local).
        ChildWatchRemoved = 6,
        /// A persistent watch was removed (client-local).
        PersistentWatchRemoved = 7,
    }
}

impl EventType {
    /// True for a change to a node, the only kind a server notifies: the
    /// others (a state change, a watch removed) are made by a client for its
    /// own watchers.
    pub const fn is_node_change(self) -> bool {
        matches!(
            self,
            EventType::NodeCreated
                | EventType::NodeDeleted
                | EventType::NodeDataChanged
                | EventType::NodeChildrenChanged
        )
    }
}

int_enum! {
    /// Connection state carried by watch events (`Watcher.Event.KeeperState`).
    KeeperState: "keeper state" {
        /// Deprecated.
        Unknown = -1,
        /// Disconnected.
        Disconnected = 0,
        /// Deprecated.
        NoSyncConnected = 1,
        /// Connected; the only state a server sends.
        SyncConnected = 3,
        /// Authentication failed.
        AuthFailed = 4,
        /// Connected to a read-only server.
        ConnectedReadOnly = 5,
        /// SASL authentication succeeded.
        SaslAuthenticated = 6,
        /// The session expired.
        Expired = -112,
        /// The client was closed.
        Closed = 7,
    }
}

int_enum! {
    /// Which watches `removeWatches` and `checkWatches` address.
    WatcherType: "watcher type" {
        /// Child watches.
        Children = 1,
        /// Data and exists watches.
        Data = 2,
        /// Any watch.
        Any = 3,
        /// Persistent watches (3.9.0+ servers only).
        Persistent = 4,
        /// Persistent recursive watches (3.9.0+ servers only).
        PersistentRecursive = 5,
    }
}

int_enum! {
    /// The mode of an `addWatch` request.
    AddWatchMode: "add-watch mode" {
        /// Fires on every change of the node itself, until removed.
        Persistent = 0,
        /// Fires on every change of the node and all its descendants.
        PersistentRecursive = 1,
    }
}

/// ACL permission bits.
pub mod perms {
    /// Read data and list children.
    pub const READ: i32 = 1;
    /// Set data.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// Set the ACL.
    pub const ADMIN: i32 = 16;
    /// Everything.
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips_and_unknown_values_are_errors() {
        for op in OpCode::ALL {
            assert_eq!(OpCode::try_from(op.code()), Ok(*op));
        }
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::try_from(code.code()), Ok(*code));
        }
        assert_eq!(
            OpCode::try_from(10),
            Err(DecodeError::UnknownValue {
                kind: "opcode",
                value: 10
            })
        );
        assert_eq!(
            ErrorCode::try_from(-126),
            Err(DecodeError::UnknownValue {
                kind: "error code",
                value: -126
            })
        );
        assert!(CreateMode::try_from(7).is_err());
        assert_eq!(perms::ALL, 31);
    }
}
