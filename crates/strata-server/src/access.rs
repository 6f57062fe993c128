//! When each key was last used, for OBJECT IDLETIME. Redis keeps a 24-bit clock in every value
//! object; values here live on disk, so the times are kept beside them in memory, in a fixed
//! table ([`BUCKETS`] x [`WAYS`] slots, 2.5 MiB whatever the store holds): a key's slot is
//! found by its name's hash, and a full bucket gives up its least recently used key.
//!
//! What OBJECT IDLETIME answers: the seconds since the key was last read or written (Redis's
//! rules: EXISTS, TYPE, TTL and the like, OBJECT and SCAN do not count as a use); for a key not
//! used since the server started, the seconds since then (as Redis after loading its data);
//! for a key whose slot was given up, the seconds since the most recent time a key was pushed
//! out of its bucket: a lower bound, true for the key that left last, and the keys that leave
//! are the least recently used. Times are per name, not per database (MOVE and SWAPDB keep a
//! key's time); two keys of one name in two databases share one.
//!
//! Lock-free: each slot is one atomic word (a 32-bit fingerprint of the name and the unix time
//! in seconds); two threads touching one bucket at once may both replace a slot, which
//! only loses a time.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets in the table (a power of two).
const BUCKETS: usize = 1 << 16;
/// Slots per bucket.
const WAYS: usize = 4;

#[derive(Default)]
struct Bucket {
    /// `fingerprint << 32 | seconds since start`; 0: empty (fingerprints are never 0).
    ways: [AtomicU64; WAYS],
    /// The latest time of a key pushed out of this bucket (0: none).
    forgotten_secs: AtomicU64,
}

pub(crate) struct AccessTimes {
    /// Unix seconds at start: the time of a key not used since.
    started_secs: u64,
    buckets: Box<[Bucket]>,
}

/// Unix seconds now (a wall clock, as Redis's: RESTORE ... IDLETIME may name a time before
/// the server started).
fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .min(u64::from(u32::MAX))
}

impl AccessTimes {
    pub fn new() -> Self {
        Self::started_at(unix_secs())
    }

    fn started_at(started_secs: u64) -> Self {
        AccessTimes {
            started_secs,
            buckets: (0..BUCKETS).map(|_| Bucket::default()).collect(),
        }
    }

    fn now_secs(&self) -> u64 {
        unix_secs()
    }

    fn slot(&self, name: &[u8]) -> (&Bucket, u64) {
        let h = xxhash_rust::xxh3::xxh3_64(name);
        // Bucket from the low bits, fingerprint from the high ones (never 0).
        let bucket = &self.buckets[(h as usize) & (BUCKETS - 1)];
        (bucket, (h >> 32) | 1)
    }

    /// `name` was used now.
    pub fn touch(&self, name: &[u8]) {
        self.set(name, self.now_secs());
    }

    /// `name` was last used `idle_secs` ago (RESTORE ... IDLETIME).
    pub fn set_idle(&self, name: &[u8], idle_secs: u64) {
        self.set(name, self.now_secs().saturating_sub(idle_secs));
    }

    fn set(&self, name: &[u8], secs: u64) {
        let (bucket, fp) = self.slot(name);
        let entry = (fp << 32) | secs;
        let mut oldest: Option<(usize, u64)> = None;
        for (i, way) in bucket.ways.iter().enumerate() {
            let v = way.load(Ordering::Relaxed);
            if v >> 32 == fp {
                if v != entry {
                    way.store(entry, Ordering::Relaxed);
                }
                return;
            }
            // An empty slot sorts before every used one.
            let age_key = if v == 0 {
                0
            } else {
                (v & u64::from(u32::MAX)) + 1
            };
            if oldest.is_none_or(|(_, a)| age_key < a) {
                oldest = Some((i, age_key));
            }
        }
        let Some((i, _)) = oldest else {
            return;
        };
        let replaced = bucket.ways[i].swap(entry, Ordering::Relaxed);
        if replaced != 0 {
            bucket
                .forgotten_secs
                .fetch_max(replaced & u64::from(u32::MAX), Ordering::Relaxed);
        }
    }

    /// Seconds since `name` was last used (see the module comment).
    pub fn idle_secs(&self, name: &[u8]) -> u64 {
        let (bucket, fp) = self.slot(name);
        let now = self.now_secs();
        let last = bucket
            .ways
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .find(|v| v >> 32 == fp)
            .map_or_else(
                || {
                    bucket
                        .forgotten_secs
                        .load(Ordering::Relaxed)
                        .max(self.started_secs)
                },
                |v| v & u64::from(u32::MAX),
            );
        now.saturating_sub(last)
    }
}

/// Commands whose key lookups do not count as a use (Redis's `LOOKUP_NOTOUCH` callers, and
/// commands that only look at keys from outside).
pub(crate) const NO_TOUCH: &[&str] = &[
    "exists",
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "object",
    "scan",
    "dbsize",
    "keys",
    "randomkey",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A time set is read back; a key never used reads as used at start; a bucket that
    /// overflows gives up its least recently used key, which then reads at most as idle as
    /// the latest key given up.
    #[test]
    fn times_are_kept_per_name_and_bounded() {
        let t = AccessTimes::started_at(unix_secs() - 100);
        assert_eq!(t.idle_secs(b"never"), 100);
        t.touch(b"a");
        assert_eq!(t.idle_secs(b"a"), 0);
        t.set_idle(b"b", 30);
        assert_eq!(t.idle_secs(b"b"), 30);
        // Names that share one bucket: the first WAYS of them, then one more.
        let (target, _) = t.slot(b"x0");
        let same: Vec<Vec<u8>> = (0..5_000_000u32)
            .map(|i| format!("x{i}").into_bytes())
            .filter(|n| std::ptr::eq(t.slot(n).0, target))
            .take(WAYS + 1)
            .collect();
        assert_eq!(same.len(), WAYS + 1);
        for (i, n) in same[..WAYS].iter().enumerate() {
            t.set_idle(n, 50 - i as u64 * 10);
        }
        // The oldest (idle 50) goes when the fifth comes.
        t.touch(&same[WAYS]);
        assert_eq!(t.idle_secs(&same[WAYS]), 0);
        for n in &same[1..WAYS] {
            assert!(t.idle_secs(n) < 50);
        }
        assert_eq!(t.idle_secs(&same[0]), 50, "the key given up: its own time");
    }
}
