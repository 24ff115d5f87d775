//! Splitting a byte stream into length-prefixed frames.

use byteorder::{BigEndian, ByteOrder};

use super::DecodeError;

/// The server's default `jute.maxbuffer` (0xfffff bytes).
pub const JUTE_MAX_BUFFER: usize = 0xfffff;

/// The default largest frame accepted from a server: `jute.maxbuffer` plus
/// 64 KiB of slack for the reply header, Stat and vector overhead that the
/// server adds around a maximal payload without checking the total.
pub const DEFAULT_MAX_FRAME: usize = JUTE_MAX_BUFFER + 64 * 1024;

/// Looks for one complete frame at the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed, or `Ok(Some((payload,
/// consumed)))` with the payload (without its prefix) and the number of bytes
/// the frame occupied. A negative length, or one above `max_frame`, is an error
/// as soon as the 4-byte prefix is in, without waiting for the payload.
pub fn split_frame(buf: &[u8], max_frame: usize) -> Result<Option<(&[u8], usize)>, DecodeError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = BigEndian::read_i32(prefix);
    let len = usize::try_from(len).map_err(|_| DecodeError::NegativeFrameLength(len))?;
    if len > max_frame {
        return Err(DecodeError::FrameTooLarge {
            len,
            max: max_frame,
        });
    }
    Ok(buf.get(4..4 + len).map(|payload| (payload, 4 + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_complete_frames_only() {
        assert_eq!(split_frame(&[0, 0], 10), Ok(None));
        assert_eq!(split_frame(&[0, 0, 0, 2, 7], 10), Ok(None));
        assert_eq!(
            split_frame(&[0, 0, 0, 2, 7, 8, 9], 10),
            Ok(Some((&[7, 8][..], 6)))
        );
        assert_eq!(split_frame(&[0, 0, 0, 0], 10), Ok(Some((&[][..], 4))));
    }

    #[test]
    fn refuses_bad_lengths_from_the_prefix_alone() {
        assert_eq!(
            split_frame(&[0, 0, 0, 11], 10),
            Err(DecodeError::FrameTooLarge { len: 11, max: 10 })
        );
        assert_eq!(
            split_frame(&[0xff, 0xff, 0xff, 0xff], 10),
            Err(DecodeError::NegativeFrameLength(-1))
        );
    }
}
