//! The one error type of the crate.

use std::time::Duration;

use crate::proto::{DecodeError, ErrorCode};

/// Everything that can go wrong. Server result codes have a variant each,
/// named as in `KeeperException.Code`; the rest are the client's own.
///
/// `Error` is `Clone`, so one fatal session error reaches every waiting caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- Server result codes ----
    /// The server reported a system error (-1).
    #[error("server system error")]
    SystemError,
    /// An op after the failing one in a multi (-2); it was rolled back.
    #[error("runtime inconsistency (rolled back after an earlier op failed)")]
    RuntimeInconsistency,
    /// The server found its data inconsistent (-3).
    #[error("data inconsistency")]
    DataInconsistency,
    /// The connection was lost before the reply arrived (-4). The request
    /// may or may not have been applied. Safe to retry for idempotent ops.
    #[error("connection lost before the reply arrived")]
    ConnectionLoss,
    /// The server could not parse the request (-5).
    #[error("the server could not parse the request (marshalling error)")]
    MarshallingError,
    /// The server does not implement the operation, or it is disabled (-6).
    /// TTL nodes need `-Dzookeeper.extendedTypesEnabled=true` on the server.
    #[error("operation not implemented or not enabled on the server")]
    Unimplemented,
    /// The server timed out the operation (-7).
    #[error("the server timed out the operation")]
    OperationTimeout,
    /// The server rejected the arguments (-8).
    #[error("bad arguments")]
    BadArguments,
    /// The session is unknown to the server (-12).
    #[error("unknown session")]
    UnknownSession,
    /// A reconfiguration has no quorum (-13).
    #[error("new configuration has no quorum")]
    NewConfigNoQuorum,
    /// Another reconfiguration is in progress (-14).
    #[error("reconfiguration in progress")]
    ReconfigInProgress,
    /// Generic API error (-100).
    #[error("API error")]
    ApiError,
    /// The node does not exist (-101).
    #[error("no node")]
    NoNode,
    /// The session lacks the permission (-102).
    #[error("not authorized")]
    NoAuth,
    /// The version did not match (-103).
    #[error("bad version")]
    BadVersion,
    /// Ephemeral nodes may not have children (-108).
    #[error("ephemeral nodes may not have children")]
    NoChildrenForEphemerals,
    /// The node already exists (-110).
    #[error("node exists")]
    NodeExists,
    /// The node has children (-111).
    #[error("node not empty")]
    NotEmpty,
    /// The session has expired (-112). Every later call fails fast with this;
    /// build a new [`Client`](crate::Client) to get a new session.
    #[error("session expired")]
    SessionExpired,
    /// Invalid callback (-113).
    #[error("invalid callback")]
    InvalidCallback,
    /// The ACL is invalid (-114), e.g. `auth` with no authenticated id.
    #[error("invalid ACL")]
    InvalidAcl,
    /// Authentication failed (-115). The session cannot be used any more.
    #[error("authentication failed")]
    AuthFailed,
    /// The session moved to another server (-118).
    #[error("session moved")]
    SessionMoved,
    /// A write was sent to a read-only server (-119).
    #[error("server is read-only")]
    NotReadOnly,
    /// A local session tried to create an ephemeral node (-120).
    #[error("ephemeral node on a local session")]
    EphemeralOnLocalSession,
    /// No such watch (-121).
    #[error("no such watcher")]
    NoWatcher,
    /// The request timed out (-122).
    #[error("request timed out")]
    RequestTimeout,
    /// Reconfiguration is disabled (-123).
    #[error("reconfiguration disabled")]
    ReconfigDisabled,
    /// The server closed the session: SASL authentication is required (-124).
    #[error("session closed: SASL authentication required")]
    SessionClosedRequireSaslAuth,
    /// A quota was exceeded (-125).
    #[error("quota exceeded")]
    QuotaExceeded,
    /// The server throttled the request (-127). Safe to retry later.
    #[error("request throttled by the server")]
    ThrottledOp,
    /// A result code this client does not know.
    #[error("unknown server error code {0}")]
    UnknownServerError(i32),

    // ---- The client's own errors ----
    /// The client was closed; no more calls can be made.
    #[error("client closed")]
    Closed,
    /// A deadline passed. `what` says which one.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// The deadline that fired, e.g. "connection to the ensemble".
        what: &'static str,
        /// How long was waited.
        after: Duration,
    },
    /// No server in the connect string could be reached.
    #[error("could not connect to any of {hosts} within {timeout:?}: {last_error}")]
    ConnectFailed {
        /// The hosts tried, as given.
        hosts: String,
        /// The time allowed.
        timeout: Duration,
        /// What the last attempt reported.
        last_error: String,
    },
    /// A path that the server would refuse; nothing was sent.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A connect string that cannot be parsed; nothing was sent.
    #[error("invalid connect string {input:?}: {reason}")]
    InvalidConnectString {
        /// The string given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument the server would refuse (an empty ACL, a request over
    /// [`max_request`](crate::Config::max_request), a bad TTL...), caught
    /// before sending; or a [`Config`](crate::Config) setting out of range,
    /// caught by [`connect`](crate::ClientBuilder::connect).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The server sent bytes that break the protocol; the connection was dropped.
    #[error("protocol error: {0}")]
    Protocol(#[from] DecodeError),
    /// A reply whose xid is not the oldest outstanding request's: replies
    /// must come in request order, so the connection was dropped.
    #[error(
        "reply xid {received} does not match the oldest outstanding request's xid {expected:?}"
    )]
    UnexpectedReply {
        /// The xid of the oldest outstanding request, if any.
        expected: Option<i32>,
        /// The xid received.
        received: i32,
    },
    /// A socket error.
    #[error("I/O error ({kind:?}): {message}")]
    Io {
        /// The kind of the underlying error.
        kind: std::io::ErrorKind,
        /// Its message.
        message: String,
    },
    /// A multi failed: no op was applied. `index` is the first failing op.
    #[error("multi op {index} failed: {error}")]
    MultiFailed {
        /// The index of the op that failed.
        index: usize,
        /// Its error.
        error: Box<Error>,
    },
    /// A lock wait was cancelled through `cancel()`.
    #[error("cancelled")]
    Cancelled,
    /// Waiting would deadlock on the calling thread's own hold: it locks a
    /// [`Mutex`](crate::Mutex) or takes an [`RwLock`](crate::RwLock)'s
    /// write lock while it holds that lock already, asks for the write
    /// lock while it holds the read lock (no upgrades), or asks for the read
    /// lock while a queued writer would have it wait on itself (it holds
    /// the write lock and another writer is queued, or holds a read lock
    /// that a queued writer waits for).
    #[error("this thread already holds the lock; locking it again would deadlock")]
    WouldDeadlock,
    /// The lock was lost: its session expired or its node was deleted
    /// (while held, or while waiting for the lock), or a
    /// [`ReentrantMutex`](crate::ReentrantMutex) hold known to be lost was
    /// entered again.
    #[error("lock lost")]
    LockLost,
}

/// The protocol error of a reply that decodes but makes no sense (another
/// kind than its request's, a wrong count...): `what` says how.
pub(crate) fn malformed(what: &'static str) -> Error {
    Error::Protocol(crate::proto::DecodeError::Malformed(what))
}

impl Error {
    /// The error for a non-zero server result code.
    pub fn from_code(code: i32) -> Error {
        let Ok(code) = ErrorCode::try_from(code) else {
            return Error::UnknownServerError(code);
        };
        match code {
            ErrorCode::Ok => Error::UnknownServerError(0),
            ErrorCode::SystemError => Error::SystemError,
            ErrorCode::RuntimeInconsistency => Error::RuntimeInconsistency,
            ErrorCode::DataInconsistency => Error::DataInconsistency,
            ErrorCode::ConnectionLoss => Error::ConnectionLoss,
            ErrorCode::MarshallingError => Error::MarshallingError,
            ErrorCode::Unimplemented => Error::Unimplemented,
            ErrorCode::OperationTimeout => Error::OperationTimeout,
            ErrorCode::BadArguments => Error::BadArguments,
            ErrorCode::UnknownSession => Error::UnknownSession,
            ErrorCode::NewConfigNoQuorum => Error::NewConfigNoQuorum,
            ErrorCode::ReconfigInProgress => Error::ReconfigInProgress,
            ErrorCode::ApiError => Error::ApiError,
            ErrorCode::NoNode => Error::NoNode,
            ErrorCode::NoAuth => Error::NoAuth,
            ErrorCode::BadVersion => Error::BadVersion,
            ErrorCode::NoChildrenForEphemerals => Error::NoChildrenForEphemerals,
            ErrorCode::NodeExists => Error::NodeExists,
            ErrorCode::NotEmpty => Error::NotEmpty,
            ErrorCode::SessionExpired => Error::SessionExpired,
            ErrorCode::InvalidCallback => Error::InvalidCallback,
            ErrorCode::InvalidAcl => Error::InvalidAcl,
            ErrorCode::AuthFailed => Error::AuthFailed,
            ErrorCode::SessionMoved => Error::SessionMoved,
            ErrorCode::NotReadOnly => Error::NotReadOnly,
            ErrorCode::EphemeralOnLocalSession => Error::EphemeralOnLocalSession,
            ErrorCode::NoWatcher => Error::NoWatcher,
            ErrorCode::RequestTimeout => Error::RequestTimeout,
            ErrorCode::ReconfigDisabled => Error::ReconfigDisabled,
            ErrorCode::SessionClosedRequireSaslAuth => Error::SessionClosedRequireSaslAuth,
            ErrorCode::QuotaExceeded => Error::QuotaExceeded,
            ErrorCode::ThrottledOp => Error::ThrottledOp,
        }
    }

    /// The server result code this error stands for, if any.
    pub fn code(&self) -> Option<i32> {
        Some(match self {
            Error::SystemError => ErrorCode::SystemError.code(),
            Error::RuntimeInconsistency => ErrorCode::RuntimeInconsistency.code(),
            Error::DataInconsistency => ErrorCode::DataInconsistency.code(),
            Error::ConnectionLoss => ErrorCode::ConnectionLoss.code(),
            Error::MarshallingError => ErrorCode::MarshallingError.code(),
            Error::Unimplemented => ErrorCode::Unimplemented.code(),
            Error::OperationTimeout => ErrorCode::OperationTimeout.code(),
            Error::BadArguments => ErrorCode::BadArguments.code(),
            Error::UnknownSession => ErrorCode::UnknownSession.code(),
            Error::NewConfigNoQuorum => ErrorCode::NewConfigNoQuorum.code(),
            Error::ReconfigInProgress => ErrorCode::ReconfigInProgress.code(),
            Error::ApiError => ErrorCode::ApiError.code(),
            Error::NoNode => ErrorCode::NoNode.code(),
            Error::NoAuth => ErrorCode::NoAuth.code(),
            Error::BadVersion => ErrorCode::BadVersion.code(),
            Error::NoChildrenForEphemerals => ErrorCode::NoChildrenForEphemerals.code(),
            Error::NodeExists => ErrorCode::NodeExists.code(),
            Error::NotEmpty => ErrorCode::NotEmpty.code(),
            Error::SessionExpired => ErrorCode::SessionExpired.code(),
            Error::InvalidCallback => ErrorCode::InvalidCallback.code(),
            Error::InvalidAcl => ErrorCode::InvalidAcl.code(),
            Error::AuthFailed => ErrorCode::AuthFailed.code(),
            Error::SessionMoved => ErrorCode::SessionMoved.code(),
            Error::NotReadOnly => ErrorCode::NotReadOnly.code(),
            Error::EphemeralOnLocalSession => ErrorCode::EphemeralOnLocalSession.code(),
            Error::NoWatcher => ErrorCode::NoWatcher.code(),
            Error::RequestTimeout => ErrorCode::RequestTimeout.code(),
            Error::ReconfigDisabled => ErrorCode::ReconfigDisabled.code(),
            Error::SessionClosedRequireSaslAuth => ErrorCode::SessionClosedRequireSaslAuth.code(),
            Error::QuotaExceeded => ErrorCode::QuotaExceeded.code(),
            Error::ThrottledOp => ErrorCode::ThrottledOp.code(),
            Error::UnknownServerError(code) => *code,
            _ => return None,
        })
    }

    /// True when the same call may succeed if simply made again: the
    /// connection dropped or the server was busy, but the session lives.
    /// Non-idempotent writes (a sequential create, say) may have been applied
    /// once already when this is `ConnectionLoss`.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::ConnectionLoss
                | Error::OperationTimeout
                | Error::RequestTimeout
                | Error::ThrottledOp
                | Error::Timeout { .. }
                | Error::Io { .. }
        )
    }

    /// True when the session is gone for good (expired, auth failed or
    /// closed): its ephemeral nodes, and so its locks, are gone or going, and
    /// only a new [`Client`](crate::Client) can go on. Not for `LockLost`,
    /// which names one lock's loss: its node may have been deleted while the
    /// session lives on, and [`Client::state`](crate::Client::state) tells
    /// whether it does.
    pub fn is_session_lost(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired | Error::AuthFailed | Error::Closed
        )
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_code_maps_to_a_named_variant_and_back() {
        for code in ErrorCode::ALL.iter().filter(|c| **c != ErrorCode::Ok) {
            let err = Error::from_code(code.code());
            assert!(!matches!(err, Error::UnknownServerError(_)), "{code:?}");
            assert_eq!(err.code(), Some(code.code()));
        }
        assert_eq!(Error::from_code(-999), Error::UnknownServerError(-999));
        assert_eq!(Error::Closed.code(), None);
    }

    #[test]
    fn only_the_end_of_a_session_counts_as_a_lost_session() {
        let lost = [Error::SessionExpired, Error::AuthFailed, Error::Closed];
        assert!(lost.iter().all(Error::is_session_lost));
        // A lock's loss alone says nothing about its session.
        let not_lost = [Error::LockLost, Error::ConnectionLoss, Error::NoNode];
        assert!(!not_lost.iter().any(Error::is_session_lost));
    }
}
