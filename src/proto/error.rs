//! Why a sequence of bytes could not be decoded.

use thiserror::Error;

/// A decoding failure. Every variant names what was wrong, so a hostile or
/// broken peer produces a specific message instead of a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
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
    #[error("null where the protocol requires a value")]
    UnexpectedNull,
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
    /// Decoding reports it within the record's name (`GetDataResponse:
    /// 1 unexpected trailing byte(s) after the record`), as an
    /// [`InField`](DecodeError::InField): match on
    /// [`reason`](DecodeError::reason).
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
    /// The field a decoding failure happened in, so that a broken reply
    /// says where it broke: `field` is the innermost record field
    /// (`Stat.mzxid`), or the record bytes were left after, `within` the
    /// outermost one holding it
    /// (`GetDataResponse.stat`), if it is nested.
    #[error("{field}{}: {error}", Within(*.within))]
    InField {
        /// The field, as `Record.field`.
        field: &'static str,
        /// The outermost field containing `field`, if not `field` itself.
        within: Option<&'static str>,
        /// What was wrong with it: never itself `InField`.
        error: Box<DecodeError>,
    },
}

impl DecodeError {
    /// This error, as one in `field`: the innermost field named stays the
    /// one reported, and `field` becomes the one it is within.
    pub fn in_field(self, field: &'static str) -> DecodeError {
        match self {
            DecodeError::InField {
                field: inner,
                error,
                ..
            } => DecodeError::InField {
                field: inner,
                within: Some(field),
                error,
            },
            error => DecodeError::InField {
                field,
                within: None,
                error: Box::new(error),
            },
        }
    }

    /// What was wrong, without the field it was in.
    pub fn reason(&self) -> &DecodeError {
        match self {
            DecodeError::InField { error, .. } => error,
            error => error,
        }
    }

    /// The innermost record field the failure happened in, as
    /// `Record.field`, if it happened in one; for bytes left over, the
    /// record they were left after (`GetDataResponse`, `ping reply`).
    pub fn field(&self) -> Option<&'static str> {
        match self {
            DecodeError::InField { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// Displays the ` (in Record.field)` of a nested field, or nothing.
struct Within(Option<&'static str>);

impl std::fmt::Display for Within {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(within) => write!(f, " (in {within})"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_failure_names_its_field_and_the_field_it_is_within() {
        let eof = DecodeError::UnexpectedEof {
            needed: 8,
            remaining: 3,
        };
        let error = eof
            .clone()
            .in_field("Stat.mzxid")
            .in_field("GetDataResponse.stat");
        assert_eq!(
            error.to_string(),
            "Stat.mzxid (in GetDataResponse.stat): truncated input: \
             needed 8 more byte(s) but only 3 remain"
        );
        assert_eq!(error.field(), Some("Stat.mzxid"));
        assert_eq!(error.reason(), &eof);
        let top = DecodeError::UnexpectedNull.in_field("GetChildrenResponse.children");
        assert_eq!(
            top.to_string(),
            "GetChildrenResponse.children: null where the protocol requires a value"
        );
        assert_eq!(eof.field(), None);
        assert_eq!(eof.reason(), &eof);
    }
}
