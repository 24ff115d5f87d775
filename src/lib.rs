//! zklock: a synchronous ZooKeeper client with a hand-written wire protocol,
//! and fair distributed locks built on it. No async runtime.
//!
//! ```
//! # #[cfg(feature = "testing")]
//! # fn main() -> zklock::Result<()> {
//! # let server = zklock::testing::TestServer::new().expect("a ZooKeeper server");
//! # let hosts = server.connect_string();
//! let client = zklock::Client::connect(&hosts)?; // "127.0.0.1:2181", say
//! # let open = zklock::Acl::open_unsafe();
//! # client.ensure_path("/stock", &open)?;
//! # client.create("/stock/42", b"3", &open, zklock::CreateMode::Persistent)?;
//! let stock = client.mutex("/locks/stock/42")?;
//! {
//!     let guard = stock.lock()?; // blocks until held; fair, first come first served
//!     let (data, stat) = client.get_data("/stock/42")?;
//!     let left: u32 = String::from_utf8_lossy(&data).parse().unwrap_or(0);
//!     // Pass the fencing token to storage that can reject stale writers.
//!     println!("holding with token {}", guard.fencing_token());
//!     // `left - 1` would underflow once the stock is gone.
//!     if let Some(now) = left.checked_sub(1) {
//!         // Applied only if the lock is still held when the server applies
//!         // it, and only to the version read: a retry with this guard after
//!         // an unknown outcome (`ConnectionLoss`) cannot deduct twice. One
//!         // under a new lock needs a marker in the same transaction (a
//!         // create of `/orders/<id>`, say).
//!         let version = Some(stat.version);
//!         guard.multi(&[zklock::Op::set_data("/stock/42", now.to_string(), version)])?;
//!     }
//! } // dropping the guard releases the lock
//! # assert_eq!(client.get_data("/stock/42")?.0, b"2");
//! # Ok(()) }
//! # #[cfg(not(feature = "testing"))]
//! # fn main() {}
//! ```
//!
//! - [`Client`]: one session shared by cheap clones; calls block the calling
//!   thread and are pipelined on one connection. Reconnects resume the
//!   session; watches are re-registered. An expiry ends the client, or,
//!   with [`ClientBuilder::new_session_on_expiry`], starts a new session.
//! - [`Mutex`], [`ReentrantMutex`], [`RwLock`]: locks whose guards report
//!   [`LockState`] (`Held`, `Suspended`, `Lost`), carry a fencing token, and
//!   write to ZooKeeper only while the lock is held (`guard.multi`);
//!   [`AnyGuard`] holds a guard of any of them.
//! - [`proto`]: the jute codec, with no I/O. [`session`]: the protocol state
//!   machine, with no I/O.
//! - `testing` (feature): real ZooKeeper servers, a TCP fault proxy and pause
//!   points for tests.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod changes;
pub mod client;
mod error;
pub mod proto;
mod rand;
pub mod recipes;
pub mod session;

pub use changes::StateChanges;
pub use client::{
    Client, ClientBuilder, Config, Op, OpOutcome, ReadOp, ReadOutcome, WatchReceiver,
};
pub use error::{Deadline, Error, Result};
pub use proto::{
    perms, Acl, AddWatchMode, ClientInfo, CreateMode, DecodeError, EventType, Id, KeeperState,
    Stat, WatcherType,
};
pub use recipes::{
    AnyGuard, LockMonitor, LockState, Mutex, MutexGuard, ReentrantMutex, ReentrantMutexGuard,
    RwLock, RwLockReadGuard, RwLockWriteGuard,
};
pub use session::{State, WatchedEvent};

#[cfg(feature = "testing")]
pub mod testing;
