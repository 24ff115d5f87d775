//! Golden vectors, property tests and fuzz-corpus replay for `zklock::proto`.

pub mod strategies;
pub mod targets;
