//! zklock: a synchronous ZooKeeper client with a hand-written wire protocol,
//! and fair distributed locks built on it.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
pub mod proto;
mod rand;
pub mod session;

pub use error::{Error, Result};

#[cfg(feature = "testing")]
pub mod testing;
