//! Authentication records.

use super::ClientInfo;

record! {
    /// `auth` (xid -4): adds credentials to the session.
    pub struct AuthPacket {
        /// Ignored by the server; the Java client sends 0.
        pub auth_type: i32,
        /// The scheme, e.g. `digest`.
        pub scheme: String,
        /// The credentials, e.g. `user:password`.
        pub auth: Vec<u8>,
    }
}

record! {
    /// The reply to `whoAmI`.
    pub struct WhoAmIResponse {
        /// The session's authenticated identities.
        pub client_info: Vec<ClientInfo>,
    }
}
