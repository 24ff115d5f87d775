//! A small non-cryptographic random source, seeded from the standard
//! library's per-process random hash keys. Used to shuffle hosts, jitter
//! retries and make lock-node uuids unique; nothing security-relevant.

use std::collections::hash_map::RandomState;
use std::fmt::Write;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The length of a UUID in its canonical text form.
pub(crate) const UUID_LEN: usize = 36;

/// xorshift64*: fast, small, good enough for shuffling.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Rng {
    /// A generator seeded differently on every call, in every process.
    pub(crate) fn new() -> Rng {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        h.write_u64(nanos);
        // RandomState's keys are random per process already.
        Rng(h.finish() | 1)
    }

    /// A generator with a fixed seed, for tests.
    #[cfg(test)]
    pub(crate) fn seeded(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % (n.max(1) as u64)) as usize
    }

    /// Fisher–Yates.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// A random version-4 UUID in its canonical text form.
    #[cfg(test)]
    pub(crate) fn uuid(&mut self) -> String {
        // Sized up front: `format!` would grow the string as it goes.
        let mut uuid = String::with_capacity(UUID_LEN);
        self.write_uuid(&mut uuid);
        uuid
    }

    /// Appends a random version-4 UUID in its canonical text form
    /// ([`UUID_LEN`] bytes) to `out`.
    pub(crate) fn write_uuid(&mut self, out: &mut String) {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let hi = (hi & !0xF000) | 0x4000; // version 4
        let lo = (lo & !(0xC0 << 56)) | (0x80 << 56); // RFC 4122 variant
        let _ = write!(
            out,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xFFFF,
            hi & 0xFFFF,
            lo >> 48,
            lo & 0xFFFF_FFFF_FFFF
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_have_the_canonical_shape_and_differ() {
        let mut rng = Rng::new();
        let a = rng.uuid();
        let b = rng.uuid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(matches!(a.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut rng = Rng::seeded(7);
        let mut v: Vec<u32> = (0..50).collect();
        rng.shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }
}
