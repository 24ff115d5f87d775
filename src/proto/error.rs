//! Why a sequence of bytes could not be decoded.

use thiserror::Error;

/// A decoding failure. Every variant names what was wrong, so a hostile or
/// broken peer produces a specific message instead of a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended before a field was complete.
    #[error("truncated input: needed {needed} more byte(s) but only {remaining} remain")]
    UnexpectedEof {
        /// Bytes the field needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A buffer, string or vector length below -1.
    #[error("negative length {0}")]
    NegativeLength(i32),
    /// A length or element count that cannot fit in the bytes left of the frame.
    #[error("length {len} exceeds the {remaining} byte(s) left in the frame")]
    LengthExceedsFrame {
        /// The declared length, in bytes or (for vectors) in minimum-size elements.
        len: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A null (-1) string, buffer or vector where the protocol never sends one.
    #[error("unexpected null {0}")]
    UnexpectedNull(&'static str),
    /// A string that is neither UTF-8 nor the CESU-8 the Java client writes.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A frame length prefix below zero.
    #[error("negative frame length {0}")]
    NegativeFrameLength(i32),
    /// A frame longer than the configured maximum.
    #[error("frame of {len} bytes exceeds the {max}-byte limit")]
    FrameTooLarge {
        /// The declared frame length.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// Bytes left over after a record that should have filled its frame.
    #[error("{0} unexpected trailing byte(s) after the record")]
    TrailingBytes(usize),
    /// A value outside an enumeration (opcode, error code, event type, ...).
    #[error("unknown {kind} value {value}")]
    UnknownValue {
        /// Which enumeration.
        kind: &'static str,
        /// The value received.
        value: i32,
    },
    /// A structurally valid record whose content breaks a protocol rule.
    #[error("malformed {0}")]
    Malformed(&'static str),
}
