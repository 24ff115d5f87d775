//! zklock: a synchronous ZooKeeper client with a hand-written wire protocol,
//! and fair distributed locks built on it.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod proto;

#[cfg(feature = "testing")]
pub mod testing;
