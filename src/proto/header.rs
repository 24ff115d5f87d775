//! Request and reply headers, and the special xids.

record! {
    /// Precedes every request body except the ConnectRequest.
    pub struct RequestHeader {
        /// Matches the reply to the request; see the `*_XID` constants.
        pub xid: i32,
        /// The [`OpCode`](super::OpCode) value.
        pub op: i32,
    }
}

record! {
    /// Precedes every reply body except the ConnectResponse. The body is
    /// present only when `err` is 0.
    pub struct ReplyHeader {
        /// The request's xid, or a special xid.
        pub xid: i32,
        /// The server's last processed zxid (-1 on 3.5–3.8 notifications).
        pub zxid: i64,
        /// An [`ErrorCode`](super::ErrorCode) value; 0 is success.
        pub err: i32,
    }
}

/// The xid of a watch notification.
pub const NOTIFICATION_XID: i32 = -1;
/// The xid of pings and their replies.
pub const PING_XID: i32 = -2;
/// The xid of auth packets and their replies.
pub const AUTH_XID: i32 = -4;
/// The xid the C client uses for SetWatches.
pub const SET_WATCHES_XID: i32 = -8;
