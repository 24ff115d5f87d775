//! The one error type of the crate.

use std::fmt;
use std::time::Duration;

use crate::proto::{DecodeError, ErrorCode};

/// Everything that can go wrong. Server result codes have a variant each,
/// named as in `KeeperException.Code`; the rest are the client's own.
///
/// `Error` is `Clone`, so one fatal session error reaches every waiting caller.
///
/// A server result code says what went wrong, not where: `NoNode` displays
/// as "no node", without the path. Add the path, or the operation, as
/// context where you report the error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- Server result codes ----
    /// The server reported a system error (-1): a failure inside the
    /// server, not caused by the request.
    #[error("server system error")]
    SystemError,
    /// An op after the failing one in a multi (-2); it was rolled back.
    /// Not returned by this client's calls: a failed
    /// [`Client::multi`](crate::Client::multi) reports its first failing
    /// op's own error, in [`MultiFailed`](Error::MultiFailed).
    #[error("runtime inconsistency (rolled back after an earlier op failed)")]
    RuntimeInconsistency,
    /// The server found its data inconsistent (-3).
    #[error("data inconsistency")]
    DataInconsistency,
    /// The connection was lost before the reply arrived (-4). The request
    /// may or may not have been applied. Safe to retry for idempotent ops.
    ///
    /// Also what every call still in flight gets when the client drops a
    /// connection itself (a silent server, an undecodable reply, a wrong
    /// xid, another call's [`Timeout`](Error::Timeout)), and what a call
    /// made while disconnected gets, never sent, if no connection comes
    /// within the session timeout. A call whose connection is lost is never
    /// sent again.
    #[error("connection lost before a reply came; the request may or may not have been applied")]
    ConnectionLoss,
    /// The server could not parse the request (-5): its bytes did not
    /// decode there, which a request this client encodes should never
    /// cause.
    #[error("the server could not parse the request (marshalling error)")]
    MarshallingError,
    /// The server does not implement the operation, or it is disabled (-6):
    /// servers before 3.6 lack `addWatch`, `multiRead`, `getEphemerals` and
    /// `getAllChildrenNumber`, those before 3.7 lack `whoAmI`, and TTL
    /// nodes need `-Dzookeeper.extendedTypesEnabled=true` on the server.
    /// The server closes the connection after it: calls in flight then
    /// fail with `ConnectionLoss`.
    #[error("operation not implemented or not enabled on the server")]
    Unimplemented,
    /// The server timed out the operation (-7).
    #[error("the server timed out the operation")]
    OperationTimeout,
    /// The server rejected the arguments (-8), e.g. a delete of `/`.
    #[error("bad arguments")]
    BadArguments,
    /// The session is unknown to the server (-12); decoded if a server
    /// sends it. A session the ensemble no longer knows is refused at a
    /// reconnect as expired: [`SessionExpired`](Error::SessionExpired).
    #[error("unknown session")]
    UnknownSession,
    /// A reconfiguration has no quorum (-13). This client sends no
    /// reconfiguration, so no call of it fails with this.
    #[error("new configuration has no quorum")]
    NewConfigNoQuorum,
    /// Another reconfiguration is in progress (-14). Not returned by this
    /// client's calls, which include no reconfiguration.
    #[error("reconfiguration in progress")]
    ReconfigInProgress,
    /// Generic API error (-100): the base of the server's API codes,
    /// decoded if a server sends it as such.
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
    /// The session has expired (-112): a server said so on a reconnect (or
    /// to [`ClientBuilder::session`](crate::ClientBuilder::session), taking
    /// over a session that is gone), or the client heard from no server for
    /// 4/3 of the negotiated timeout (unless only read-only servers have
    /// seen the session, which then holds nothing). Every call waiting then fails with
    /// this. Every later call fails fast with it too, and a new
    /// [`Client`](crate::Client) gets a new session, unless the client was
    /// built with
    /// [`new_session_on_expiry`](crate::ClientBuilder::new_session_on_expiry):
    /// later calls then go to the new session that it starts. A lock
    /// attempt of the expired session fails with it either way.
    #[error("session expired")]
    SessionExpired,
    /// Invalid callback (-113): a Java client code that servers do not
    /// send; decoded if one does.
    #[error("invalid callback")]
    InvalidCallback,
    /// The ACL is invalid (-114), e.g. `auth` with no authenticated id.
    #[error("invalid ACL")]
    InvalidAcl,
    /// Authentication failed (-115): a server refused credentials from
    /// [`Client::add_auth`](crate::Client::add_auth) (an unknown scheme,
    /// say; the digest scheme, and so the builder's
    /// [`digest`](crate::ClientBuilder::digest), takes any user and
    /// password, and a wrong one shows as `NoAuth` instead). The session
    /// ends (`State::AuthFailed`) and cannot be used any more.
    #[error("authentication failed")]
    AuthFailed,
    /// The session moved to another server (-118): a request came through a
    /// connection the session has since left for another one (a reconnect
    /// elsewhere, or a takeover with
    /// [`ClientBuilder::session`](crate::ClientBuilder::session)).
    #[error("session moved")]
    SessionMoved,
    /// A write, or a lock attempt, was sent to a read-only server (-119),
    /// with [`can_be_read_only`](crate::ClientBuilder::can_be_read_only).
    /// A read-only member that refuses a new session says so too (then in
    /// [`ConnectFailed`](Error::ConnectFailed)'s `last_error`).
    #[error("server is read-only")]
    NotReadOnly,
    /// A local session tried to create an ephemeral node (-120), a lock
    /// node included (see `localSessionsUpgradingEnabled`).
    #[error("ephemeral node on a local session")]
    EphemeralOnLocalSession,
    /// No such watch (-121): [`Client::remove_watches`](crate::Client::remove_watches)
    /// found none of that type on the path.
    #[error("no such watcher")]
    NoWatcher,
    /// The request timed out (-122): the code of the Java client's own
    /// request timeout. This client's
    /// [`request_timeout`](crate::Config::request_timeout) fails a call
    /// with [`Timeout`](Error::Timeout) instead, so this comes only from a
    /// server that sends the code.
    #[error("request timed out")]
    RequestTimeout,
    /// Reconfiguration is disabled (-123). Not returned by this client's
    /// calls, which include no reconfiguration.
    #[error("reconfiguration disabled")]
    ReconfigDisabled,
    /// The server requires a credential of a scheme this session lacks
    /// (-124): `enforce.auth.enabled` with `enforce.auth.schemes`, `sasl`
    /// or `digest`, say. The server answers every request with it and
    /// closes the connection, but not the session, which the client
    /// resumes; a credential added with
    /// [`add_auth`](crate::Client::add_auth) goes first on that
    /// handshake, and lets later requests through.
    #[error("the server requires authentication this session lacks")]
    SessionClosedRequireSaslAuth,
    /// A quota was exceeded (-125): a create or setData under a path
    /// with a hard quota (`setquota` with `-N` / `-B` in 3.7+) that the
    /// server enforces (`zookeeper.enforceQuota=true`).
    #[error("quota exceeded")]
    QuotaExceeded,
    /// The server throttled the request (-127; ZooKeeper 3.7+ shedding
    /// load): it was not applied. Safe to retry later. A lock's release
    /// and its node's create are retried by the client itself.
    #[error("request throttled by the server")]
    ThrottledOp,
    /// A result code this client does not know (from a newer server,
    /// say), with its number.
    #[error("unknown server error code {0}")]
    UnknownServerError(i32),

    // ---- The client's own errors ----
    /// The client was closed ([`Client::close`](crate::Client::close), or
    /// its last handle dropped): calls made since, calls still waiting for
    /// a connection or a reply, and lock attempts under way fail with it.
    /// No more calls can be made.
    #[error("client closed")]
    Closed,
    /// A deadline passed. `deadline` says which one (see [`Deadline`]). A
    /// call gets it when its reply is later than
    /// [`request_timeout`](crate::Config::request_timeout) (unset: when the
    /// server has answered none of the calls in flight for twice the
    /// session timeout; the connection is then dropped, and the calls sent
    /// after it fail with `ConnectionLoss`), an auth packet included
    /// ([`Client::add_auth`](crate::Client::add_auth), or `connect` with a
    /// [`digest`](crate::ClientBuilder::digest), which also waits for its
    /// answer no longer than [`connect_timeout`](crate::Config::connect_timeout));
    /// [`Client::close`](crate::Client::close)
    /// when no read-write server confirmed the close within
    /// [`connect_timeout`](crate::Config::connect_timeout); and
    /// [`Client::wait_connected`](crate::Client::wait_connected). The
    /// client's other deadlines (the handshake's, the read timeout,
    /// closeSession's share on one connection) only drop the connection,
    /// and the calls on it fail with `ConnectionLoss`: their `Timeout` is
    /// the reason logged.
    #[error("timed out after {after:?} waiting for {deadline}")]
    Timeout {
        /// The deadline that fired.
        deadline: Deadline,
        /// How long was waited.
        after: Duration,
    },
    /// [`Client::connect`](crate::Client::connect) (or the builder's)
    /// found no server in the connect string to establish the session
    /// with, within [`connect_timeout`](crate::Config::connect_timeout)
    /// for each address (a host name counts once per address it resolves
    /// to).
    #[error("could not connect to any of {hosts} within {timeout:?}: {last_error}")]
    ConnectFailed {
        /// The hosts tried, as parsed: `host:port`, with the default port
        /// added where none was given.
        hosts: String,
        /// The time allowed: the connect timeout times the number of
        /// addresses.
        timeout: Duration,
        /// What the last attempt reported.
        last_error: String,
    },
    /// A path that the server would refuse, a sequential create at `/`
    /// under a chroot (the server would put the node beside the chroot,
    /// outside it), or a lock path of `/` (a lock needs a directory of its
    /// own); nothing was sent.
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
    /// The server sent bytes that break the protocol. A frame or reply that
    /// cannot be decoded, or a reply over
    /// [`max_frame`](crate::Config::max_frame), drops the connection: the
    /// call whose reply it was fails with this (unless it went in a batch
    /// of reads), the others in flight with `ConnectionLoss`. A reply
    /// to [`Client::multi`](crate::Client::multi) or
    /// [`multi_read`](crate::Client::multi_read) with more results than
    /// the request has ops is refused before they are decoded, and drops
    /// the connection; one that decodes but holds fewer, or a result unlike
    /// its op, fails that call alone, and the connection stays.
    #[error("protocol error: {0}")]
    Protocol(#[from] DecodeError),
    /// A reply whose xid is not the oldest outstanding request's: replies
    /// must come in request order, so the connection was dropped. This is
    /// the reason logged for the drop; the calls in flight fail with
    /// `ConnectionLoss`.
    #[error(
        "reply xid {received} does not match the oldest outstanding request's xid {expected:?}"
    )]
    UnexpectedReply {
        /// The xid of the oldest outstanding request, if any.
        expected: Option<i32>,
        /// The xid received.
        received: i32,
    },
    /// An I/O error outside any connection: `connect` fails with it when
    /// the client's I/O thread, or its state handler's, cannot be started.
    /// A connection's socket errors fail its calls with `ConnectionLoss`
    /// (and name the host in [`ConnectFailed`](Error::ConnectFailed)'s
    /// `last_error`).
    #[error("I/O error ({kind:?}): {message}")]
    Io {
        /// The kind of the underlying error.
        kind: std::io::ErrorKind,
        /// Its message.
        message: String,
    },
    /// A bug in the client, which the message names. Its I/O thread
    /// panicking ends the session: every call, and `close`, fails with it
    /// from then on, as after a close (the state is
    /// [`Closed`](crate::State::Closed)), but the servers were not told:
    /// they keep the session's ephemeral nodes, and its locks, until the
    /// session times out. Only a new client can go on. (The one other
    /// case, a lock call without a deadline returning without the lock,
    /// cannot happen.)
    #[error("internal error: {0}")]
    Internal(String),
    /// A [`Client::multi`](crate::Client::multi) failed: no op was applied.
    /// `index` is the first failing op. (A `set_data` batched with others,
    /// see [`batch_writes`](crate::Config::batch_writes), gets its own
    /// error, never this.)
    #[error("multi op {index} failed: {error}")]
    MultiFailed {
        /// The index of the op that failed.
        index: usize,
        /// Its error.
        error: Box<Error>,
    },
    /// A lock attempt was cancelled through its lock object's `cancel()`
    /// ([`Mutex::cancel`](crate::Mutex::cancel) and the others); its node
    /// is deleted.
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
    /// The lock was lost: a waiting attempt's own node was deleted (by an
    /// operator; an attempt whose session ended fails with the session's
    /// error instead, `SessionExpired` or `Closed`), a guard's `unlock`
    /// found its lock already lost (its node deleted, or its session
    /// expired), a guard's or a [`LockMonitor`](crate::LockMonitor)'s `multi`
    /// was refused because the lock's node is gone or its session ended
    /// (nothing was applied), or a [`ReentrantMutex`](crate::ReentrantMutex)
    /// hold known to be lost was entered again, used through an older guard,
    /// or found lost as it was granted.
    #[error("lock lost")]
    LockLost,
}

/// Which of the client's deadlines an [`Error::Timeout`] is for. Its
/// `Display` says what was waited for, and by which setting where one
/// applies. A call gets `Request`, `Unanswered`, `Close`, `ConnectAuth` or
/// `WaitConnected`; `Handshake`, `Read` and `CloseReply` only drop a
/// connection (the calls on it fail with `ConnectionLoss`): they show in
/// the log, in [`Session::poll_disconnect`](crate::session::Session::poll_disconnect),
/// and in the last error of
/// [`ConnectFailed`](Error::ConnectFailed).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deadline {
    /// A call's reply (an auth packet's included), past
    /// [`request_timeout`](crate::Config::request_timeout). The connection
    /// is dropped: the calls sent after it fail with `ConnectionLoss`.
    Request,
    /// Without a `request_timeout` set, no answer to any call in flight for
    /// twice the session timeout (a server answering pings only). The
    /// connection is dropped, as for `Request`.
    Unanswered,
    /// The server's answer to a handshake, past
    /// [`connect_timeout`](crate::Config::connect_timeout), its share of
    /// the session timeout, or, during a close, its share of the close's
    /// deadline (it drops the connection).
    Handshake,
    /// Anything from the server, past the read timeout, 2/3 of the session
    /// timeout (it drops the connection).
    Read,
    /// During [`Client::close`](crate::Client::close), closeSession's reply
    /// on one connection, past its share of the close's deadline, before
    /// the next host is tried (it drops the connection).
    CloseReply,
    /// [`Client::close`](crate::Client::close): no read-write server
    /// confirmed the close within
    /// [`connect_timeout`](crate::Config::connect_timeout).
    Close,
    /// `connect`: the answer to a builder's
    /// [`digest`](crate::ClientBuilder::digest), past
    /// [`connect_timeout`](crate::Config::connect_timeout).
    ConnectAuth,
    /// [`Client::wait_connected`](crate::Client::wait_connected)'s timeout.
    WaitConnected,
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Deadline::Request => "the reply to a request (request_timeout)",
            Deadline::Unanswered => {
                "any answer to the requests in flight (no request_timeout: twice the session timeout)"
            }
            Deadline::Handshake => "the server's handshake response",
            Deadline::Read => "any reply or ping response from the server",
            Deadline::CloseReply => "the reply to closeSession before trying the next host",
            Deadline::Close => "a read-write server to confirm closeSession (connect_timeout)",
            Deadline::ConnectAuth => "the reply to an auth packet of connect (connect_timeout)",
            Deadline::WaitConnected => "a connection to the ensemble (wait_connected's timeout)",
        })
    }
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

    /// True when the failure may pass: the connection dropped, the server
    /// was busy, a deadline fired, or a thread could not be started. A call
    /// on a live session may then succeed if simply made again, and so may
    /// `connect`. A [`Client::close`](crate::Client::close) that timed out
    /// has ended the client all the same: it returns that error again, the
    /// client's other calls fail with `Closed`, and only a new client can go
    /// on.
    /// Non-idempotent writes (a sequential create, say) may have been applied
    /// once already when this is `ConnectionLoss` or `Timeout`.
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

    /// True if a request that failed with this error may still have been
    /// applied: its reply was lost with the connection, or came but could
    /// not be decoded (the server said it did something; the client then
    /// drops the connection). Not `ThrottledOp`: the server refused it
    /// unapplied.
    pub(crate) fn outcome_unknown(&self) -> bool {
        (self.is_retryable() && *self != Error::ThrottledOp) || matches!(self, Error::Protocol(_))
    }

    /// True when the session is gone for good (expired, auth failed,
    /// closed, or ended by a bug of the client's): its ephemeral nodes, and so its locks, are gone or going, and
    /// only a new [`Client`](crate::Client) can go on, or, after an expiry,
    /// the new session of a client built with
    /// [`new_session_on_expiry`](crate::ClientBuilder::new_session_on_expiry).
    /// Not for `LockLost`,
    /// which names one lock's loss: its node may have been deleted while the
    /// session lives on, and [`Client::state`](crate::Client::state) tells
    /// whether it does.
    pub fn is_session_lost(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired | Error::AuthFailed | Error::Closed | Error::Internal(_)
        )
    }
}

/// What a lock call without a deadline returns should its attempt end
/// without the lock, which it never does.
pub(crate) fn ended_without_deadline() -> Error {
    Error::Internal("a lock call without a deadline ended without the lock".into())
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

    /// A throttled request was refused unapplied: retryable, but its
    /// outcome is known (an abandoned create so refused is not searched
    /// for). A lost or undecodable reply's is not.
    #[test]
    fn a_throttled_request_has_a_known_outcome() {
        assert!(Error::ThrottledOp.is_retryable());
        assert!(!Error::ThrottledOp.outcome_unknown());
        let unknown = [
            Error::ConnectionLoss,
            Error::RequestTimeout,
            malformed("a reply"),
        ];
        assert!(unknown.iter().all(Error::outcome_unknown));
        assert!(!Error::NoNode.outcome_unknown());
    }
}
