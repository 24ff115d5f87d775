//! State shared between the calling threads and the I/O thread, and the
//! mechanics of one blocking call.

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::watch_receiver::WatchSender;
use crate::changes::{Listeners, StateChanges};
use crate::error::{Error, Result};
use crate::proto::{OpCode, Record, Response, SetDataRequest};
use crate::session::{BatchRead, Event, Session, State, WatchRequest, WatchedEvent};

/// An internal watch callback.
pub(crate) type NotifyFn = Arc<dyn Fn(&WatchedEvent) + Send + Sync>;

/// Who a watch notifies.
#[derive(Clone)]
pub(crate) enum Watcher {
    /// A user's receiver; sending never blocks (see `WatchSender::send`).
    Channel(WatchSender),
    /// An internal callback; must return quickly (it runs on the I/O thread).
    Notify(NotifyFn),
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Watcher::Channel(_) => f.write_str("Watcher::Channel"),
            Watcher::Notify(_) => f.write_str("Watcher::Notify"),
        }
    }
}

impl Watcher {
    /// True if this is the internal callback `f` (the same allocation).
    pub(crate) fn is_notify(&self, f: &NotifyFn) -> bool {
        matches!(self, Watcher::Notify(g) if Arc::ptr_eq(g, f))
    }

    /// True for a user's watch whose receiver is dropped.
    pub(crate) fn is_abandoned(&self) -> bool {
        matches!(self, Watcher::Channel(tx) if tx.is_abandoned())
    }

    /// True for a user's persistent watch that ended for the events its
    /// receiver held unread.
    pub(crate) fn is_overflowed(&self) -> bool {
        matches!(self, Watcher::Channel(tx) if tx.is_overflowed())
    }

    /// True for a user's persistent watch whose receiver is dropped.
    pub(crate) fn is_abandoned_persistent(&self) -> bool {
        matches!(self, Watcher::Channel(tx) if tx.is_abandoned_persistent())
    }

    pub(crate) fn deliver(&self, event: &WatchedEvent) {
        match self {
            Watcher::Channel(tx) => tx.send(event),
            Watcher::Notify(f) => f(event),
        }
    }
}

/// Runs on the I/O thread when a reply arrives, so it must be quick.
pub(crate) type ReplyCallback = Box<dyn Fn(&Result<Response>) + Send + Sync>;

/// Takes the reply that nobody waits for, on the I/O thread (so it must be
/// quick): the reply is moved, not copied.
pub(crate) type ReplyConsumer = Box<dyn Fn(Result<Response>) + Send + Sync>;

/// Where one call's reply lands; the calling thread sleeps on the condvar.
#[derive(Default)]
pub(crate) struct ReplySlot {
    result: Mutex<SlotState>,
    ready: Condvar,
    on_reply: Option<ReplyCallback>,
    /// Set for a request nobody waits for: the reply goes here alone.
    consume: Option<ReplyConsumer>,
}

#[derive(Default)]
struct SlotState {
    result: Option<Result<Response>>,
    /// True while the caller sleeps on the condvar: a reply that arrives
    /// before the caller waits needs no wake-up (a futex call saved).
    waiting: bool,
}

impl std::fmt::Debug for ReplySlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplySlot")
            .field("has_callback", &self.on_reply.is_some())
            .field("has_consumer", &self.consume.is_some())
            .finish_non_exhaustive()
    }
}

impl ReplySlot {
    /// A slot for a request nobody waits for, but whose reply `on_reply`
    /// is told of (on the I/O thread).
    pub(super) fn with_callback(on_reply: ReplyCallback) -> ReplySlot {
        ReplySlot {
            on_reply: Some(on_reply),
            ..ReplySlot::default()
        }
    }

    /// A slot for a request nobody waits for: its reply goes to `consume`
    /// alone, on the I/O thread.
    pub(super) fn consumed(consume: ReplyConsumer) -> ReplySlot {
        ReplySlot {
            consume: Some(consume),
            ..ReplySlot::default()
        }
    }

    /// Hands in the request's reply, or the error that ends it unanswered.
    pub(super) fn complete(&self, result: Result<Response>) {
        if let Some(consume) = &self.consume {
            return consume(result);
        }
        if let Some(on_reply) = &self.on_reply {
            on_reply(&result);
        }
        let mut state = lock(&self.result);
        state.result = Some(result);
        if state.waiting {
            drop(state);
            self.ready.notify_one();
        }
    }

    /// The reply if it is in, without waiting for it.
    pub(crate) fn take_ready(&self) -> Option<Result<Response>> {
        lock(&self.result).result.take()
    }

    pub(crate) fn wait(&self) -> Result<Response> {
        match self.wait_until(None) {
            Some(result) => result,
            None => unreachable!("a wait without a deadline ends with the reply"),
        }
    }

    /// The reply, once in: `None` if `deadline` passes first.
    pub(crate) fn wait_until(&self, deadline: Option<Instant>) -> Option<Result<Response>> {
        let mut state = lock(&self.result);
        loop {
            if let Some(result) = state.result.take() {
                return Some(result);
            }
            let left = time_left(deadline)?;
            state.waiting = true;
            state = wait_on(&self.ready, state, left);
        }
    }
}

/// An internal state listener; runs on the I/O thread, so it must be quick.
pub(crate) type StateCallback = Arc<dyn Fn(State) + Send + Sync>;

pub(crate) type ClientSession = Session<Arc<ReplySlot>, Watcher>;

/// Everything behind the session lock.
pub(crate) struct Core {
    pub(crate) session: ClientSession,
    /// The socket of the current connection, for writing.
    pub(crate) stream: Option<Arc<TcpStream>>,
    /// True while some thread is writing the outbox to the socket; others
    /// just append and leave, so writes coalesce.
    flushing: bool,
    /// Buffers swapped with the session's outbox, to avoid allocating.
    spare: Vec<u8>,
    /// The rest of a write to `stream` that the session's write deadline
    /// cut short: it goes before anything queued since.
    unsent: Vec<u8>,
    /// The write timeout set on `stream` (`None`: none, a write may block
    /// for ever).
    write_timeout: Option<Duration>,
    /// True while the release timer waits with no lingering delete (and so
    /// needs a notify for a new one).
    pub(crate) release_timer_idle: bool,
    /// Server paths whose dropped persistent watches are still on the
    /// server because a live watch of the session shares them (see
    /// `watch_receiver::remove_abandoned`). Cleared with the connection,
    /// which takes the server's watches.
    pub(crate) owed_removals: Vec<String>,
}

impl Core {
    /// Makes `stream` the connection's socket, or leaves none.
    pub(crate) fn set_stream(&mut self, stream: Option<Arc<TcpStream>>) {
        self.stream = stream;
        self.unsent.clear();
        self.write_timeout = None;
    }

    /// True when bytes are waiting to be written.
    pub(crate) fn has_transmit(&self) -> bool {
        !self.unsent.is_empty() || self.session.has_transmit()
    }

    /// True if `stream` is still the connection's socket.
    pub(crate) fn is_current(&self, stream: &Arc<TcpStream>) -> bool {
        self.stream.as_ref().is_some_and(|s| Arc::ptr_eq(s, stream))
    }

    /// True if the release timer must be woken: it is idle, and a lingering
    /// delete needs it (see [`Session::deferred_deletes_need_timer`]).
    pub(crate) fn timer_needed(&self) -> bool {
        self.release_timer_idle && self.session.deferred_deletes_need_timer()
    }
}

/// State shared by every clone of a client and its threads.
pub(crate) struct Shared {
    core: Mutex<Core>,
    /// Wakes the release timer (see `release.rs`); paired with `core`.
    pub(crate) release_timer: Condvar,
    /// Callers blocked waiting for a reply: when there are some, replies
    /// come in batches that wake several callers at once.
    waiting_callers: std::sync::atomic::AtomicUsize,
    /// Whether `Core::owed_removals` holds a path, for the I/O thread to
    /// look at without the session's lock after a watch event.
    pub(crate) removals_owed: std::sync::atomic::AtomicBool,
    /// The session's connection count, kept by the I/O thread as each
    /// connection comes up: read without the session's lock on a lock's
    /// hot path (see [`connection_count`](Shared::connection_count)).
    pub(crate) connections: std::sync::atomic::AtomicU64,
    state: Mutex<State>,
    state_changed: Condvar,
    listeners: Listeners<State>,
    callbacks: Mutex<Vec<(u64, StateCallback)>>,
    next_callback: std::sync::atomic::AtomicU64,
    events: Mutex<Option<Sender<State>>>,
    pub(crate) last_connect_error: Mutex<Option<String>>,
    /// Whether an expiry is followed by a new session (see
    /// [`Config::new_session_on_expiry`](super::Config::new_session_on_expiry)).
    new_session_on_expiry: bool,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data
    // half-updated in a way that matters more than stopping would.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits on `cv` until notified, or at most `left` if given; like [`lock`],
/// it takes the lock back even if another thread panicked holding it.
pub(crate) fn wait_on<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    left: Option<Duration>,
) -> MutexGuard<'a, T> {
    match left {
        None => cv.wait(guard).unwrap_or_else(|e| e.into_inner()),
        Some(left) => cv
            .wait_timeout(guard, left)
            .map(|(guard, _)| guard)
            .unwrap_or_else(|e| e.into_inner().0),
    }
}

/// How long to wait until `deadline`: `Some(None)` for ever (no deadline),
/// `None` once it has passed.
pub(crate) fn time_left(deadline: Option<Instant>) -> Option<Option<Duration>> {
    match deadline {
        None => Some(None),
        Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Some(Some(left)),
            _ => None,
        },
    }
}

impl Shared {
    pub(crate) fn new(
        session: ClientSession,
        events: Option<Sender<State>>,
        new_session_on_expiry: bool,
    ) -> Shared {
        Shared {
            waiting_callers: std::sync::atomic::AtomicUsize::new(0),
            removals_owed: std::sync::atomic::AtomicBool::new(false),
            connections: std::sync::atomic::AtomicU64::new(0),
            core: Mutex::new(Core {
                session,
                stream: None,
                flushing: false,
                spare: Vec::new(),
                unsent: Vec::new(),
                write_timeout: None,
                release_timer_idle: false,
                owed_removals: Vec::new(),
            }),
            release_timer: Condvar::new(),
            state: Mutex::new(State::Disconnected),
            state_changed: Condvar::new(),
            listeners: Listeners::new(),
            callbacks: Mutex::new(Vec::new()),
            next_callback: std::sync::atomic::AtomicU64::new(0),
            events: Mutex::new(events),
            last_connect_error: Mutex::new(None),
            new_session_on_expiry,
        }
    }

    /// True for a state that no other follows: a terminal one, except an
    /// expiry that a new session follows. (The first connect of a session
    /// taken over may end in an expiry that nothing follows even then, but
    /// that client is never handed out.)
    pub(crate) fn is_final(&self, state: State) -> bool {
        state.is_terminal() && !(state == State::Expired && self.new_session_on_expiry)
    }

    pub(crate) fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    /// How many connections have been up so far (see
    /// [`Session::connection_count`](crate::session::Session::connection_count)).
    pub(crate) fn connection_count(&self) -> u64 {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Sends a request and blocks until its reply (or failure) arrives.
    pub(crate) fn call(
        &self,
        op: OpCode,
        body: &impl Record,
        watch: Option<WatchRequest<Watcher>>,
    ) -> Result<Response> {
        let slot = self.start(op, body, watch)?;
        self.flush();
        self.wait(&slot)
    }

    /// Sends a read that may share a request with others (see
    /// [`Session::submit_read`]) and waits for its reply.
    pub(crate) fn call_read(&self, read: BatchRead) -> Result<Response> {
        let slot = Shared::start_read_locked(&mut self.core(), read)?;
        self.flush();
        self.wait(&slot)
    }

    /// Sends a setData that may share a request with others (see
    /// [`Session::submit_write`]) and waits for its reply.
    pub(crate) fn call_write(&self, write: SetDataRequest) -> Result<Response> {
        let slot = Shared::start_write_locked(&mut self.core(), write)?;
        self.flush();
        self.wait(&slot)
    }

    /// Like [`Self::call`] (with no watch), for a request that belongs
    /// to the session `generation` if given (see [`Session::generation`]):
    /// once that session has been replaced by a new one, it fails with
    /// `SessionExpired` unsent, since the new session would answer for a
    /// session it is not.
    pub(crate) fn call_in_session(
        &self,
        generation: Option<u64>,
        op: OpCode,
        body: &impl Record,
    ) -> Result<Response> {
        let slot = Shared::start_slot(
            &mut self.core(),
            generation,
            None,
            op,
            body,
            None,
            ReplySlot::default(),
        )?;
        self.flush();
        self.wait(&slot)
    }

    /// Waits for a started request's reply.
    pub(crate) fn wait(&self, slot: &ReplySlot) -> Result<Response> {
        use std::sync::atomic::Ordering::Relaxed;
        self.waiting_callers.fetch_add(1, Relaxed);
        let result = slot.wait();
        self.waiting_callers.fetch_sub(1, Relaxed);
        result
    }

    /// Queues a request without sending or waiting: several can be started
    /// and then sent together by one `flush`. The reply lands in the slot.
    pub(crate) fn start(
        &self,
        op: OpCode,
        body: &impl Record,
        watch: Option<WatchRequest<Watcher>>,
    ) -> Result<Arc<ReplySlot>> {
        Shared::start_slot(
            &mut self.core(),
            None,
            None,
            op,
            body,
            watch,
            ReplySlot::default(),
        )
    }

    /// Like `start`, with `on_reply` run (on the I/O thread) when the reply
    /// arrives: for requests nobody waits for but whose outcome matters.
    /// Sent only in the session `generation` if given (see
    /// [`Self::call_in_session`]): a watch an old session's lock set in the
    /// new one would outlive it there. With `due`, it goes only once `due`
    /// has come (see [`Session::submit_at`]): for the I/O thread's reply
    /// handlers, since the I/O thread looks at the session's timers before
    /// each wait, while one made so on another thread could go up to one
    /// wait (at most a second) late.
    pub(crate) fn start_with_callback(
        &self,
        generation: Option<u64>,
        due: Option<Instant>,
        op: OpCode,
        body: &impl Record,
        watch: Option<WatchRequest<Watcher>>,
        on_reply: ReplyCallback,
    ) -> Result<Arc<ReplySlot>> {
        let slot = ReplySlot::with_callback(on_reply);
        Shared::start_slot(&mut self.core(), generation, due, op, body, watch, slot)
    }

    /// Starts a request whose reply only `consume` takes, on the I/O
    /// thread: nothing can wait for it. Sent only in the session
    /// `generation` if given, and only once `due` has come if given (as in
    /// [`Self::start_with_callback`]).
    pub(crate) fn start_consumed(
        &self,
        generation: Option<u64>,
        due: Option<Instant>,
        op: OpCode,
        body: &impl Record,
        consume: ReplyConsumer,
    ) -> Result<Arc<ReplySlot>> {
        Shared::start_slot(
            &mut self.core(),
            generation,
            due,
            op,
            body,
            None,
            ReplySlot::consumed(consume),
        )
    }

    /// Takes back `first`, and `then` made after it, if `first` still waits
    /// for a connection (see [`Session::withdraw_queued`]), and completes
    /// them in that order with `error`, on this thread. False if `first`
    /// was sent already: its reply will come.
    pub(crate) fn withdraw_unsent(
        &self,
        first: &Arc<ReplySlot>,
        then: &Arc<ReplySlot>,
        error: &Error,
    ) -> bool {
        let taken = self
            .core()
            .session
            .withdraw_queued(|t| Arc::ptr_eq(t, first), |t| Arc::ptr_eq(t, then));
        for slot in &taken {
            slot.complete(Err(error.clone()));
        }
        !taken.is_empty()
    }

    /// Like [`Self::start_with_callback`] (without a due time), under a
    /// session lock the caller already holds: for a request that must go
    /// only if the session's state, looked at under that same lock, still
    /// calls for it.
    pub(crate) fn start_with_callback_locked(
        core: &mut Core,
        generation: Option<u64>,
        op: OpCode,
        body: &impl Record,
        on_reply: ReplyCallback,
    ) -> Result<Arc<ReplySlot>> {
        let slot = ReplySlot::with_callback(on_reply);
        Shared::start_slot(core, generation, None, op, body, None, slot)
    }

    /// Submits a request with `slot` for its reply, under a session lock
    /// the caller holds: checking the generation and submitting under one
    /// lock, no new session can start in between.
    fn start_slot(
        core: &mut Core,
        generation: Option<u64>,
        due: Option<Instant>,
        op: OpCode,
        body: &impl Record,
        watch: Option<WatchRequest<Watcher>>,
        slot: ReplySlot,
    ) -> Result<Arc<ReplySlot>> {
        let slot = Arc::new(slot);
        if let Some(generation) = generation {
            core.session.check_generation(generation)?;
        }
        let now = Instant::now();
        match due {
            Some(due) => core
                .session
                .submit_at(now, due, op, body, slot.clone(), watch),
            None => core.session.submit(now, op, body, slot.clone(), watch),
        }?;
        Ok(slot)
    }

    /// Like `start`, under a session lock the caller already holds.
    pub(crate) fn start_locked(
        core: &mut Core,
        op: OpCode,
        body: &impl Record,
    ) -> Result<Arc<ReplySlot>> {
        let slot = Arc::new(ReplySlot::default());
        core.session
            .submit(Instant::now(), op, body, slot.clone(), None)?;
        Ok(slot)
    }

    /// Like `start_locked`, for a read that may share a request with others
    /// (see [`Session::submit_read`]).
    pub(crate) fn start_read_locked(core: &mut Core, read: BatchRead) -> Result<Arc<ReplySlot>> {
        let slot = Arc::new(ReplySlot::default());
        core.session
            .submit_read(Instant::now(), read, slot.clone())?;
        Ok(slot)
    }

    /// Like `start_locked`, for a setData that may share a request with
    /// others (see [`Session::submit_write`]).
    pub(crate) fn start_write_locked(
        core: &mut Core,
        write: SetDataRequest,
    ) -> Result<Arc<ReplySlot>> {
        let slot = Arc::new(ReplySlot::default());
        core.session
            .submit_write(Instant::now(), write, slot.clone())?;
        Ok(slot)
    }

    /// Submits through `f` (under the session lock), then flushes.
    pub(crate) fn with_session<R>(&self, f: impl FnOnce(&mut ClientSession) -> R) -> R {
        let out = f(&mut self.core().session);
        self.flush();
        out
    }

    /// Writes whatever the session has queued. Only one thread writes at a
    /// time; a thread that finds another writing leaves its bytes for it.
    ///
    /// A write into a full send buffer (a server that stopped reading)
    /// blocks whoever makes it, the I/O thread included, and meanwhile no
    /// timer of the session runs there. So a write gives way at the
    /// session's [`write_deadline`](Session::write_deadline), or after its
    /// [`longest_blind_wait`](Session::longest_blind_wait), keeping the
    /// rest for later: the I/O thread then runs the timers, which drop the
    /// connection with the error of the deadline that passed, or (a reply
    /// having come meanwhile) the rest goes out next.
    pub(crate) fn flush(&self) {
        let mut buf = Vec::new();
        let mut core = self.core();
        // Nothing queued: no write, and no reason to yield for company.
        if core.flushing || !core.has_transmit() {
            return;
        }
        core.flushing = true;
        if self
            .waiting_callers
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
        {
            // Callers woken by one batch of replies submit at nearly the same
            // time: giving them the CPU first lets one write carry them all.
            // With no other caller waiting, there is no such batch.
            drop(core);
            std::thread::yield_now();
            core = self.core();
        }
        loop {
            std::mem::swap(&mut buf, &mut core.spare);
            buf.clear();
            // Every buffer written comes back here, the room a large
            // request took given back.
            buf.shrink_to(crate::session::KEPT_BUFFER);
            if !core.unsent.is_empty() {
                std::mem::swap(&mut buf, &mut core.unsent);
            }
            core.session.poll_transmit(&mut buf);
            let stream = core.stream.clone();
            let Some(stream) = stream.filter(|_| !buf.is_empty()) else {
                core.spare = buf;
                core.flushing = false;
                return;
            };
            // Without a deadline (the connection is over for the session),
            // the read timeout still bounds a blocked write. Nor does a
            // write block past the session's longest blind wait, as a read
            // does not: a close begun meanwhile, on another thread, has
            // nearer deadlines, which only the timers run after the write
            // would see.
            let now = Instant::now();
            let deadline = core
                .session
                .write_deadline()
                .unwrap_or_else(|| now + core.session.read_timeout());
            let deadline = core
                .session
                .longest_blind_wait()
                .map_or(deadline, |blind| deadline.min(now + blind));
            let mut write_timeout = core.write_timeout;
            drop(core);
            let written = write_until(&stream, &buf, deadline, &mut write_timeout);
            core = self.core();
            let current = core.is_current(&stream);
            if current {
                core.write_timeout = write_timeout;
            }
            match written {
                // Cut short at the write deadline: the rest waits for the
                // I/O thread's timers. Cut short on a connection replaced
                // since, the loop goes on to the new one's bytes (its
                // handshake), rather than leave them until the I/O thread
                // next wakes, which may be past the handshake's deadline.
                Ok(n) if n < buf.len() && current => {
                    buf.drain(..n);
                    std::mem::swap(&mut core.unsent, &mut buf);
                    buf.clear();
                    core.spare = buf;
                    core.flushing = false;
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    log::debug!("write failed: {e}");
                    // The I/O thread sees the shutdown and handles the loss.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                }
            }
            std::mem::swap(&mut buf, &mut core.spare);
        }
    }

    /// Delivers session outputs (outside the session lock), emptying
    /// `events`. An internal callback that panics (a bug) does not keep the
    /// events after it from their callers, whose replies would otherwise be
    /// lost with the unwinding: the panic goes on once every event is out.
    pub(crate) fn dispatch(self: &Arc<Self>, events: &mut Vec<ClientEvent>) {
        let (mut abandoned, mut watched) = (false, false);
        let mut panicked = None;
        for event in events.drain(..) {
            let deliver = std::panic::AssertUnwindSafe(|| match event {
                Event::Reply { token, result } => token.complete(result),
                Event::Watch { watchers, event } => {
                    watched = true;
                    for w in &watchers {
                        w.deliver(&event);
                    }
                    // After delivering: a receiver holding too many events
                    // unread is abandoned by it.
                    abandoned |= watchers.iter().any(Watcher::is_abandoned_persistent);
                }
                Event::State(state) => self.publish_state(state),
            });
            if let Err(panic) = std::panic::catch_unwind(deliver) {
                panicked.get_or_insert(panic);
            }
        }
        if abandoned {
            super::watch_receiver::remove_abandoned(self);
        } else if watched && self.removals_owed.load(std::sync::atomic::Ordering::SeqCst) {
            // The event may have fired the watch that kept one. Read without
            // the lock: an owed path is added, under the lock, before the
            // event that fires its watch is taken in, under it too.
            super::watch_receiver::settle_owed(self);
        }
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
    }

    fn publish_state(&self, state: State) {
        // The state is updated under the listeners' lock, so a subscriber
        // either sees the old state and then gets this change, or sees the
        // new one and does not: never a change it had already seen.
        let mut listeners = self.listeners.lock();
        {
            let mut current = lock(&self.state);
            // Two threads may dispatch session events (the I/O thread and a
            // closing caller), so a change can arrive after the end it
            // preceded: the end stays the last state anyone sees. An expiry
            // that a new session follows is no end: the states after it
            // still come in order, since only the closing caller's events
            // can overtake others, and its only state is `Closed`.
            if self.is_final(*current) {
                return;
            }
            *current = state;
        }
        // The locks follow first: whoever learns of the change (a
        // subscriber, a waiter, the event thread) then finds every hold's
        // state matching it, `Suspended` as soon as `Disconnected` is seen.
        // A callback may queue a request (under the session's lock) but
        // never takes this lock, which nothing takes under the session's.
        let callbacks: Vec<StateCallback> = lock(&self.callbacks)
            .iter()
            .map(|(_, f)| f.clone())
            .collect();
        for callback in callbacks {
            callback(state);
        }
        self.state_changed.notify_all();
        listeners.publish(state);
        // Queued for the state handler still under the listeners' lock, so
        // that it hears the changes in the order they were made, the end
        // last (the channel is unbounded: the send never waits).
        if let Some(tx) = lock(&self.events).as_ref() {
            let _ = tx.send(state);
        }
        drop(listeners);
    }

    /// Lets the event thread end once the queue is drained.
    pub(crate) fn drop_event_sender(&self) {
        lock(&self.events).take();
    }

    pub(crate) fn state(&self) -> State {
        *lock(&self.state)
    }

    #[cfg(feature = "testing")]
    pub(crate) fn state_listener_count(&self) -> usize {
        self.listeners.len()
    }

    /// A receiver of every later state change.
    pub(crate) fn subscribe(&self) -> StateChanges<State> {
        self.listeners.lock().subscribe()
    }

    /// Registers an internal state listener; returns its id for removal.
    pub(crate) fn add_state_callback(&self, callback: StateCallback) -> u64 {
        let id = self
            .next_callback
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.callbacks).push((id, callback));
        id
    }

    pub(crate) fn remove_state_callback(&self, id: u64) {
        lock(&self.callbacks).retain(|(i, _)| *i != id);
    }

    /// Waits until `done(state)` holds or `deadline` (if any) passes;
    /// returns the state.
    pub(crate) fn wait_state(
        &self,
        deadline: Option<Instant>,
        done: impl Fn(State) -> bool,
    ) -> State {
        let mut state = lock(&self.state);
        loop {
            if done(*state) {
                return *state;
            }
            let Some(left) = time_left(deadline) else {
                return *state;
            };
            state = wait_on(&self.state_changed, state, left);
        }
    }
}

/// What the session hands the client to deliver.
pub(crate) type ClientEvent = Event<Arc<ReplySlot>, Watcher>;

/// Moves the session's pending outputs into `events` (a buffer the I/O
/// thread keeps, so that delivering replies allocates nothing).
pub(crate) fn drain_events(session: &mut ClientSession, events: &mut Vec<ClientEvent>) {
    events.extend(std::iter::from_fn(|| session.poll_event()));
}

/// The shortest write timeout set: a deadline nearer than this is kept
/// to within it.
const MIN_WRITE_TIMEOUT: Duration = Duration::from_millis(1);

/// Writes `buf` until all of it is written or `deadline` passes, and
/// returns how many bytes went. A peer that stops reading (a partition, a
/// stuck server) fills the send buffer, and then a write blocks until the
/// socket's write timeout: `write_timeout`, the one set on the socket, is
/// kept within the deadline.
fn write_until(
    mut stream: &TcpStream,
    buf: &[u8],
    deadline: Instant,
    write_timeout: &mut Option<Duration>,
) -> io::Result<usize> {
    let mut written = 0;
    let mut blocked = false;
    while let Some(rest) = buf.get(written..).filter(|rest| !rest.is_empty()) {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        if left.is_zero() {
            break;
        }
        if blocked || write_timeout.map_or(true, |set| set > left) {
            // Half of what is left, so that a deadline that draws nearer
            // over the next writes needs no new system call until half of
            // it has passed; all of it once a write blocked, as the next
            // one may block to the end.
            let wanted = if blocked { left } else { left / 2 }.max(MIN_WRITE_TIMEOUT);
            stream.set_write_timeout(Some(wanted))?;
            *write_timeout = Some(wanted);
        }
        match stream.write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                written += n;
                blocked = false;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // The socket's write timeout: the deadline may have come.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                blocked = true;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{EventType, KeeperState};
    use crate::session::SessionConfig;

    /// An internal watch callback that panics (a bug) does not take the
    /// reply behind it in the same batch of events with it: the reply is
    /// delivered, and the panic goes on after, for the I/O thread's guard
    /// to end the session. Before, the unwinding dropped the reply, and
    /// its caller waited for ever.
    #[test]
    fn a_panicking_callback_does_not_lose_the_replies_after_it() {
        let config = SessionConfig {
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            can_be_read_only: false,
            max_frame: crate::proto::DEFAULT_MAX_FRAME,
            max_request: crate::proto::JUTE_MAX_BUFFER,
            chroot: None,
            request_timeout: None,
            batch_reads: true,
            batch_writes: true,
            new_session_on_expiry: false,
        };
        let session = Session::new(config, vec!["127.0.0.1:1".into()], Instant::now());
        let shared = Arc::new(Shared::new(session, None, false));
        let panicking: NotifyFn = Arc::new(|_| panic!("a callback's bug"));
        let slot = Arc::new(ReplySlot::default());
        let mut events = vec![
            Event::Watch {
                watchers: vec![Watcher::Notify(panicking)],
                event: WatchedEvent {
                    event_type: EventType::NodeCreated,
                    state: KeeperState::SyncConnected,
                    path: "/boom".into(),
                },
            },
            Event::Reply {
                token: slot.clone(),
                result: Ok(Response::Empty),
            },
        ];
        let dispatched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.dispatch(&mut events)
        }));
        let panic = dispatched.expect_err("the panic goes on");
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"a callback's bug"));
        assert_eq!(slot.take_ready(), Some(Ok(Response::Empty)));
    }
}
