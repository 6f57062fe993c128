//! When each key was last used, for OBJECT IDLETIME. Redis keeps a 24-bit clock in every value
//! object; values here live on disk, so the times are kept beside them in memory, in a fixed
//! table ([`BUCKETS`] buckets of [`WAYS`] slots, one cache line each: 4 MiB whatever the store
//! holds): a key's slot is found by its name's hash, and a full bucket gives up its least
//! recently used key. Touches stamp a clock the active expiry cycle advances every 100 ms
//! (Redis's `lruclock`, advanced by its cron), so a command's touch costs no clock read.
//!
//! A command does not write the table itself: its touch goes into a bounded queue (a hash and
//! a time, written where the last one was, so in the cache) that the active expiry cycle
//! drains every tick, and OBJECT IDLETIME and RESTORE before they read or set a time. A bucket
//! is a cache miss on any store larger than the caches; measured, writing it from the
//! connection thread took 3 % of the CPU of `GET` at `-P 1`. A full queue is drained by the
//! touch that found it full.
//!
//! What OBJECT IDLETIME answers: the seconds since the key was last read or written (Redis's
//! rules: EXISTS, TYPE, TTL and the like, OBJECT and SCAN do not count as a use, nor does a
//! read that finds no key: the dispatcher touches a GET's key only if it was there); for a key not
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
/// Touches queued at most (1 MiB) before a touch writes them itself.
const QUEUE_TOUCHES_MAX: usize = 1 << 16;
/// Slots per bucket: with the bucket's forgotten time, one 64-byte cache line.
const WAYS: usize = 7;

#[derive(Default)]
#[repr(align(64))]
struct Bucket {
    /// `fingerprint << 32 | seconds since start`; 0: empty (fingerprints are never 0).
    ways: [AtomicU64; WAYS],
    /// The latest time of a key pushed out of this bucket (0: none).
    forgotten_secs: AtomicU64,
}

/// A queued touch: the name's hash and the unix seconds it was used at.
type Touch = (u64, u64);

pub(crate) struct AccessTimes {
    /// Unix seconds at start: the time of a key not used since.
    started_secs: u64,
    /// Touches not yet in the table.
    queue: (
        crossbeam_channel::Sender<Touch>,
        crossbeam_channel::Receiver<Touch>,
    ),
    /// The clock touches stamp (unix seconds, advanced by [`AccessTimes::tick`]).
    now_secs: AtomicU64,
    buckets: Box<[Bucket]>,
    /// Times set by RESTORE ... IDLETIME so far: a touch skipped as already queued must not
    /// skip past one (see [`AccessTimes::touch`]).
    times_set: AtomicU64,
}

thread_local! {
    /// The last touch this thread queued: the table's address, the name's hash, the second,
    /// and the table's `times_set` then.
    static LAST_TOUCH: std::cell::Cell<(usize, u64, u64, u64)> =
        const { std::cell::Cell::new((0, 0, 0, 0)) };
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
            queue: crossbeam_channel::bounded(QUEUE_TOUCHES_MAX),
            now_secs: AtomicU64::new(unix_secs()),
            buckets: (0..BUCKETS).map(|_| Bucket::default()).collect(),
            times_set: AtomicU64::new(0),
        }
    }

    /// Advances the clock touches stamp and writes the queued touches (the active expiry
    /// cycle calls it every tick).
    pub fn tick(&self) {
        self.now_secs.store(unix_secs(), Ordering::Relaxed);
        self.drain();
    }

    /// Writes the queued touches into the table.
    fn drain(&self) {
        for (h, secs) in self.queue.1.try_iter() {
            self.set_hashed(h, secs);
        }
    }

    fn now_secs(&self) -> u64 {
        self.now_secs.load(Ordering::Relaxed)
    }

    fn slot(&self, name: &[u8]) -> (&Bucket, u64) {
        self.slot_hashed(xxhash_rust::xxh3::xxh3_64(name))
    }

    fn slot_hashed(&self, h: u64) -> (&Bucket, u64) {
        // Bucket from the low bits, fingerprint from the high ones (never 0).
        let bucket = &self.buckets[(h as usize) & (BUCKETS - 1)];
        (bucket, (h >> 32) | 1)
    }

    /// `name` was used now.
    pub fn touch(&self, name: &[u8]) {
        let touch = (xxhash_rust::xxh3::xxh3_64(name), self.now_secs());
        // A touch this thread already queued for this table (same name, same second, no time
        // set since) would write the same slot the same value: a pipeline on one key queues
        // one touch a second instead of one per command.
        let seen = (
            std::ptr::from_ref(self) as usize,
            touch.0,
            touch.1,
            self.times_set.load(Ordering::Relaxed),
        );
        if LAST_TOUCH.with(|last| last.replace(seen)) == seen {
            return;
        }
        if let Err(e) = self.queue.0.try_send(touch) {
            // Full: this touch drains the queue.
            self.drain();
            let (h, secs) = e.into_inner();
            self.set_hashed(h, secs);
        }
    }

    /// `name` was last used `idle_secs` ago (RESTORE ... IDLETIME).
    pub fn set_idle(&self, name: &[u8], idle_secs: u64) {
        // The next touch of `name` in this second must be queued again, whichever thread's.
        self.times_set.fetch_add(1, Ordering::Relaxed);
        // After the queued touches: the command's own touch is among them.
        self.drain();
        let secs = self.now_secs().saturating_sub(idle_secs);
        self.set_hashed(xxhash_rust::xxh3::xxh3_64(name), secs);
    }

    fn set_hashed(&self, h: u64, secs: u64) {
        let (bucket, fp) = self.slot_hashed(h);
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
        // Plain loads and stores, no locked instruction (a swap, a fetch-max): the drain's
        // writes of consecutive touches can then overlap their cache misses. A touch of this
        // bucket from another thread at the same moment may undo this one or be undone by it:
        // a time is lost, as the module says.
        let replaced = bucket.ways[i].load(Ordering::Relaxed);
        bucket.ways[i].store(entry, Ordering::Relaxed);
        let replaced_secs = replaced & u64::from(u32::MAX);
        if replaced != 0 && replaced_secs > bucket.forgotten_secs.load(Ordering::Relaxed) {
            bucket
                .forgotten_secs
                .store(replaced_secs, Ordering::Relaxed);
        }
    }

    /// Seconds since `name` was last used (see the module comment).
    pub fn idle_secs(&self, name: &[u8]) -> u64 {
        self.drain();
        let (bucket, fp) = self.slot(name);
        // The clock touches stamp, as Redis reads idle times off its cached LRU clock: the
        // wall clock here made a key touched just before a second ticked over read 1 second
        // idle when the expiry tick that advances the stamp ran late.
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

/// Commands whose key arguments do not count as a use (Redis's `LOOKUP_NOTOUCH` callers).
/// Commands without key arguments (SCAN, KEYS, RANDOMKEY, DBSIZE) touch nothing anyway.
pub(crate) const NO_TOUCH: &[&str] = &[
    "exists",
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "object",
    // Their key positions name shard channels (for cluster routing), not keys.
    "ssubscribe",
    "sunsubscribe",
    "spublish",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A key touched while the stamping clock lags the wall clock (the expiry tick that
    /// advances it ran late, across a second's turn) reads 0 seconds idle at once, as in
    /// Redis, whose idle times come off the same cached clock its touches stamp.
    #[test]
    fn a_late_tick_does_not_age_a_key_just_touched() {
        let t = AccessTimes::new();
        t.now_secs.store(unix_secs() - 1, Ordering::Relaxed);
        t.touch(b"k");
        assert_eq!(t.idle_secs(b"k"), 0);
        t.set_idle(b"r", 7);
        assert_eq!(t.idle_secs(b"r"), 7);
        t.tick();
        assert!(t.idle_secs(b"k") >= 1, "a tick moves idle times on");
    }

    /// A touch repeated in the same second is queued once, but one after RESTORE ... IDLETIME
    /// set the name's time (on whichever table) counts again, as in Redis, where the key's
    /// next use resets its idle time.
    #[test]
    fn a_touch_after_a_time_was_set_counts_again() {
        let t = AccessTimes::new();
        let other = AccessTimes::new();
        t.touch(b"k");
        t.touch(b"k");
        assert_eq!(t.idle_secs(b"k"), 0);
        t.set_idle(b"k", 500);
        assert_eq!(t.idle_secs(b"k"), 500);
        t.touch(b"k");
        assert_eq!(t.idle_secs(b"k"), 0, "the touch after the time was set");
        // The same name and second on another table is another touch.
        other.set_idle(b"k", 40);
        other.touch(b"k");
        assert_eq!(other.idle_secs(b"k"), 0);
        other.set_idle(b"k", 40);
        assert_eq!(other.idle_secs(b"k"), 40);
        t.touch(b"k");
        assert_eq!(
            other.idle_secs(b"k"),
            40,
            "a touch of one table leaves the other"
        );
    }

    /// A time set is read back; a key never used reads as used at start; a bucket that
    /// overflows gives up its least recently used key, which then reads at most as idle as
    /// the latest key given up.
    #[test]
    fn times_are_kept_per_name_and_bounded() {
        // Idle times are whole seconds of the wall clock, which may tick while the test runs
        // (the search for names sharing a bucket takes about a second unoptimised): a time
        // read back may be up to `TICKS` more than the one set.
        const TICKS: u64 = 3;
        let near = |got: u64, want: u64| (want..=want + TICKS).contains(&got);
        let t = AccessTimes::started_at(unix_secs() - 100);
        assert!(near(t.idle_secs(b"never"), 100));
        t.touch(b"a");
        assert!(near(t.idle_secs(b"a"), 0));
        t.set_idle(b"b", 30);
        assert!(near(t.idle_secs(b"b"), 30));
        // Names that share one bucket: the first WAYS of them, then one more.
        let (target, _) = t.slot(b"x0");
        let same: Vec<Vec<u8>> = (0..5_000_000u32)
            .map(|i| format!("x{i}").into_bytes())
            .filter(|n| std::ptr::eq(t.slot(n).0, target))
            .take(WAYS + 1)
            .collect();
        assert_eq!(same.len(), WAYS + 1);
        for (i, n) in same[..WAYS].iter().enumerate() {
            t.set_idle(n, 80 - i as u64 * 10);
        }
        // The oldest (idle 80) goes when one more comes.
        t.touch(&same[WAYS]);
        assert!(near(t.idle_secs(&same[WAYS]), 0));
        for (i, n) in same[1..WAYS].iter().enumerate() {
            assert!(near(t.idle_secs(n), 70 - i as u64 * 10));
        }
        let given_up = t.idle_secs(&same[0]);
        assert!(
            near(given_up, 80),
            "the key given up: its own time, not {given_up}"
        );
    }
}
