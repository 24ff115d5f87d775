//! A new session after an expiry, when the configuration asks for one
//! ([`SessionConfig::new_session_on_expiry`](super::SessionConfig)): a
//! long-running service then survives a partition longer than the session
//! timeout, as with Curator and kazoo.
//!
//! The expiry is reported in full first (see `terminate`): `Expired`, every
//! waiting call failed with `SessionExpired`, every watcher told and
//! dropped, and the background deletes dropped, since their nodes went with
//! the session. Only the credentials and the host list carry over: the next
//! handshake asks for a session of its own, as the first one did.

use super::{Error, Result, Session, State};
use crate::proto::PASSWORD_LEN;

impl<T, W: Clone> Session<T, W> {
    /// Which session of this state machine's this is: 0 for the first, one
    /// more for each new session started after an expiry. Requests that
    /// belong to one session (a lock node's create, a held lock's
    /// transaction) are sent only while it is current: see
    /// [`Session::check_generation`].
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// `Ok` while `generation` is the current session; `SessionExpired`
    /// once it has been replaced by a new one, whose requests could not
    /// tell that the session they were made for is gone (its ephemeral
    /// nodes with it).
    pub fn check_generation(&self, generation: u64) -> Result<()> {
        if generation == self.generation {
            Ok(())
        } else {
            Err(Error::SessionExpired)
        }
    }

    /// True if an expiry now starts a new session: asked for, and the
    /// expired session had been established. A session taken over with
    /// [`Session::resume`] that turns out expired on its first handshake is
    /// reported expired, with nothing after it: the caller asked for that
    /// session, not for any. A closing session is ended, not replaced.
    pub(super) fn renews_after_expiry(&self) -> bool {
        self.config.new_session_on_expiry && self.negotiated.is_some() && self.closing.is_none()
    }

    /// Replaces the expired session with a new one, not yet connected: the
    /// next handshake asks for a session id, with a zero password, as if
    /// nothing had been seen (lastZxidSeen 0: the new session's view of the
    /// servers starts afresh). Called once `terminate` has reported the
    /// expiry, so that nothing of the old session (its calls, watches and
    /// background deletes) reaches the new one; the credentials are kept,
    /// and the handshake's `prime` sends them again.
    pub(super) fn start_new_session(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.fatal = None;
        self.session_id = 0;
        self.passwd = vec![0; PASSWORD_LEN];
        self.last_zxid = 0;
        // The refusals of the old session's re-registrations say nothing of
        // the new one's.
        self.rewatch_refusals = 0;
        // No timeout is negotiated for the new session yet: without one it
        // cannot expire locally, as the first session could not before its
        // handshake, and its calls wait the requested session timeout.
        self.negotiated = None;
        self.shorter_connection_grant = None;
        // Nothing of the new session is on any server yet: a close before
        // its handshake has nothing to close.
        self.seen_rw_server = false;
        log::info!("session expired: starting a new one");
        self.set_state(State::Disconnected);
    }
}
