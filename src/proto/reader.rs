//! A bounds-checked cursor over received bytes.

use byteorder::{BigEndian, ByteOrder};

use super::DecodeError;

/// A cursor over a byte slice. Every read is bounds-checked, and lengths read
/// from the input are checked against the bytes actually left before anything
/// is allocated.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The unread bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// Fails with [`DecodeError::TrailingBytes`] unless everything was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }

    /// Takes exactly `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::UnexpectedEof {
                needed: n,
                remaining: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// Hands out a reader over the next `n` bytes and skips them here, so the
    /// sub-reader cannot read past its bound.
    pub fn sub(&mut self, n: usize) -> Result<Reader<'a>, DecodeError> {
        self.take(n).map(Reader::new)
    }

    /// A jute `byte`.
    pub fn read_u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// A jute `boolean`: like Java's `readBoolean`, any non-zero byte is true.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_u8()? != 0)
    }

    /// A jute `int` (big-endian i32).
    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(BigEndian::read_i32(self.take(4)?))
    }

    /// A jute `long` (big-endian i64).
    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(BigEndian::read_i64(self.take(8)?))
    }

    /// A length prefix: `None` for -1 (null), otherwise a length that is
    /// guaranteed to fit in the remaining bytes when each unit is at least
    /// `unit_size` bytes long.
    fn read_len(&mut self, unit_size: usize) -> Result<Option<usize>, DecodeError> {
        let len = self.read_i32()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| DecodeError::NegativeLength(len))?;
        if len.saturating_mul(unit_size) > self.buf.len() {
            return Err(DecodeError::LengthExceedsFrame {
                len,
                remaining: self.buf.len(),
            });
        }
        Ok(Some(len))
    }

    /// A jute `buffer`: `None` when the peer sent null (-1).
    pub fn read_opt_buffer(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.read_len(1)? {
            None => Ok(None),
            Some(n) => self.take(n).map(Some),
        }
    }

    /// A jute `buffer` that must not be null.
    pub fn read_buffer(&mut self) -> Result<&'a [u8], DecodeError> {
        self.read_opt_buffer()?.ok_or(DecodeError::UnexpectedNull)
    }

    /// A jute `ustring`: `None` when the peer sent null (-1).
    pub fn read_opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        self.read_opt_buffer()?.map(decode_string).transpose()
    }

    /// A jute `ustring` that must not be null.
    pub fn read_string(&mut self) -> Result<String, DecodeError> {
        self.read_opt_string()?.ok_or(DecodeError::UnexpectedNull)
    }

    /// A vector element count: `None` for null. Each element occupies at least
    /// `min_element_size` bytes, so the count is checked against the bytes left
    /// before the caller allocates for it.
    pub fn read_opt_vec_len(
        &mut self,
        min_element_size: usize,
    ) -> Result<Option<usize>, DecodeError> {
        self.read_len(min_element_size.max(1))
    }

    /// A jute `vector` of elements read by `element`; null is refused.
    pub fn read_vec<T>(
        &mut self,
        min_element_size: usize,
        mut element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let len = self
            .read_opt_vec_len(min_element_size)?
            .ok_or(DecodeError::UnexpectedNull)?;
        let mut out = Vec::with_capacity(len);
        for _ in 0..len {
            out.push(element(self)?);
        }
        Ok(out)
    }

    /// A non-null vector of non-null strings.
    pub fn read_string_vec(&mut self) -> Result<Vec<String>, DecodeError> {
        self.read_vec(4, Reader::read_string)
    }
}

/// Decodes a jute string. The Java writer encodes each UTF-16 unit on its own,
/// so a character outside the BMP arrives as two 3-byte surrogate encodings
/// (CESU-8). Standard UTF-8 is tried first; CESU-8 is accepted as a fallback so
/// that such strings written by Java clients are not lost.
fn decode_string(bytes: &[u8]) -> Result<String, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => decode_cesu8(bytes).ok_or(DecodeError::InvalidUtf8),
    }
}

fn decode_cesu8(bytes: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (valid, tail) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).ok()?);
                let high = surrogate(tail)?;
                let low = surrogate(tail.get(3..)?)?;
                if !(0xD800..0xDC00).contains(&high) || !(0xDC00..0xE000).contains(&low) {
                    return None;
                }
                let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                out.push(char::from_u32(c)?);
                rest = tail.get(6..)?;
            }
        }
    }
    Some(out)
}

/// The code unit of a 3-byte encoded UTF-16 surrogate at the start of `b`.
fn surrogate(b: &[u8]) -> Option<u32> {
    match b {
        [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, ..] => {
            Some(0xD000 | (u32::from(b1 & 0x3F) << 6) | u32::from(b2 & 0x3F))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_larger_than_the_input_are_refused_before_allocating() {
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 1, 2]);
        assert_eq!(
            r.read_opt_buffer(),
            Err(DecodeError::LengthExceedsFrame {
                len: i32::MAX as usize,
                remaining: 2
            })
        );
        let mut r = Reader::new(&[0, 0, 0, 2, 0, 0, 0, 0]);
        assert_eq!(
            r.read_string_vec(),
            Err(DecodeError::LengthExceedsFrame {
                len: 2,
                remaining: 4
            })
        );
    }

    #[test]
    fn null_and_empty_are_distinct() {
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(r.read_opt_buffer(), Ok(None));
        assert_eq!(r.read_opt_buffer(), Ok(Some(&[][..])));
        assert_eq!(
            r.read_opt_vec_len(4),
            Err(DecodeError::UnexpectedEof {
                needed: 4,
                remaining: 0
            })
        );
    }

    #[test]
    fn negative_lengths_other_than_null_are_errors() {
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(r.read_opt_buffer(), Err(DecodeError::NegativeLength(-2)));
    }

    #[test]
    fn sub_readers_are_bounded() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5]);
        let mut sub = r.sub(2).unwrap();
        assert_eq!(sub.take(2), Ok(&[1, 2][..]));
        assert!(sub.read_u8().is_err());
        assert_eq!(r.remaining(), 3);
    }

    #[test]
    fn cesu8_supplementary_characters_decode() {
        // U+1F600 as the surrogate pair D83D DE00, each encoded in 3 bytes.
        let bytes = [b'a', 0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80, b'b'];
        assert_eq!(decode_string(&bytes), Ok("a\u{1F600}b".to_owned()));
        assert_eq!(
            decode_string(&[0xED, 0xA0, 0xBD]),
            Err(DecodeError::InvalidUtf8)
        );
        assert_eq!(decode_string(&[0xff]), Err(DecodeError::InvalidUtf8));
    }
}
