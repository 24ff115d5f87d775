//! Appends jute-encoded values to a reusable buffer.

use byteorder::{BigEndian, ByteOrder};

/// Writes jute values by appending to a caller-owned buffer, which is reused
/// across frames; no field allocates on its own.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut Vec<u8>,
}

/// Where a frame started, returned by [`Writer::begin_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a frame must be finished with Writer::finish_frame"]
pub struct FrameStart(usize);

impl<'a> Writer<'a> {
    /// A writer appending to `buf`.
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Writer { buf }
    }

    /// Bytes in the underlying buffer.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when the underlying buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Reserves a 4-byte length prefix, to be back-patched by `finish_frame`.
    pub fn begin_frame(&mut self) -> FrameStart {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        FrameStart(start)
    }

    /// Back-patches the length prefix of the frame begun at `start` and
    /// returns the payload length (which excludes the prefix itself).
    pub fn finish_frame(&mut self, start: FrameStart) -> usize {
        let payload = self.buf.len() - start.0 - 4;
        // Frames are bounded far below i32::MAX by the caller's size checks;
        // saturate rather than wrap if that contract is ever broken.
        let len = i32::try_from(payload).unwrap_or(i32::MAX);
        BigEndian::write_i32(&mut self.buf[start.0..start.0 + 4], len);
        payload
    }

    /// Removes everything written since `start`, e.g. after a size check fails.
    pub fn abandon_frame(&mut self, start: FrameStart) {
        self.buf.truncate(start.0);
    }

    /// A jute `byte`.
    pub fn write_u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A jute `boolean`, written as 0 or 1.
    pub fn write_bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// A jute `int`.
    pub fn write_i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A jute `long`.
    pub fn write_i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A length prefix for `n` bytes or elements. Lengths beyond i32::MAX
    /// cannot be represented; callers reject such inputs before encoding.
    fn write_len(&mut self, n: usize) {
        self.write_i32(i32::try_from(n).unwrap_or(i32::MAX));
    }

    /// A non-null jute `buffer`.
    pub fn write_buffer(&mut self, v: &[u8]) {
        self.write_len(v.len());
        self.buf.extend_from_slice(v);
    }

    /// A jute `buffer` that may be null.
    pub fn write_opt_buffer(&mut self, v: Option<&[u8]>) {
        match v {
            Some(v) => self.write_buffer(v),
            None => self.write_i32(-1),
        }
    }

    /// A non-null jute `ustring`, as standard UTF-8.
    pub fn write_str(&mut self, v: &str) {
        self.write_buffer(v.as_bytes());
    }

    /// A jute `ustring` that may be null.
    pub fn write_opt_str(&mut self, v: Option<&str>) {
        self.write_opt_buffer(v.map(str::as_bytes));
    }

    /// A non-null jute `vector`, each element written by `element`.
    pub fn write_vec<T>(&mut self, items: &[T], mut element: impl FnMut(&mut Self, &T)) {
        self.write_len(items.len());
        for item in items {
            element(self, item);
        }
    }

    /// A non-null vector of strings.
    pub fn write_string_vec<S: AsRef<str>>(&mut self, items: &[S]) {
        self.write_vec(items, |w, s| w.write_str(s.as_ref()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_back_patched() {
        let mut buf = vec![9];
        let mut w = Writer::new(&mut buf);
        let f = w.begin_frame();
        w.write_i32(-2);
        w.write_str("é");
        assert_eq!(w.finish_frame(f), 10);
        assert_eq!(
            buf,
            [9, 0, 0, 0, 10, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 2, 0xc3, 0xa9]
        );
    }

    #[test]
    fn null_is_minus_one() {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf);
        w.write_opt_buffer(None);
        w.write_opt_str(Some(""));
        assert_eq!(buf, [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    }
}
