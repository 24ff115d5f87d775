//! zklock: a synchronous ZooKeeper client with a hand-written wire protocol,
//! and fair distributed locks built on it.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod client;
mod error;
pub mod proto;
mod rand;
pub mod recipes;
pub mod session;

pub use client::{
    Client, ClientBuilder, Config, Op, OpOutcome, ReadOp, ReadOutcome, WatchReceiver,
};
pub use error::{Error, Result};
pub use proto::{Acl, AddWatchMode, CreateMode, EventType, Id, KeeperState, Stat, WatcherType};
pub use recipes::{
    LockState, Mutex, MutexGuard, ReentrantMutex, ReentrantMutexGuard, RwLock, RwLockReadGuard,
    RwLockWriteGuard,
};
pub use session::{State, WatchedEvent};

#[cfg(feature = "testing")]
pub mod testing;
