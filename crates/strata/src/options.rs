//! Options of a database. Every limit is explicit and carries its unit in its name.

/// Most partitions a database may have.
pub const PARTITIONS_MAX: usize = 4096;
/// Smallest memtable size accepted.
const MEMTABLE_BYTES_MIN: usize = 1024;
/// Smallest log-engine segment size accepted.
const LOG_SEGMENT_BYTES_MIN: u64 = 4096;
/// Largest log-engine segment size accepted: a segment may exceed its size by one record (at
/// most a batch, 1 GiB), and the index stores offsets as `u32`, so 2 GiB keeps every offset in
/// range.
pub const LOG_SEGMENT_BYTES_LIMIT: u64 = 2 << 30;

/// When the write-ahead log is forced to stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// fsync before the write call returns. Concurrent writers share one fsync (group commit).
    Always,
    /// Each write hands its log record to the OS before it returns, and a background thread
    /// fsyncs the log every `n` milliseconds (the original Java prototype synced every 100 ms or 1 s). A crash of the process
    /// loses no acknowledged write; a crash of the machine loses at most the last `n` ms.
    EveryMs(u64),
    /// Each write hands its log record to the OS before it returns; nothing is fsynced until a
    /// memtable switch or close. A crash of the process loses nothing acknowledged; a crash of
    /// the machine may lose whatever the OS had not written back.
    Never,
}

/// Block compression for table files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Blocks are stored as written.
    None,
    /// Blocks are compressed with LZ4 when that makes them smaller.
    Lz4,
}

/// The engine each partition runs (fixed at creation; recorded in the `STRATA` file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// LSM tree: ordered, scans in key order, bounded memory.
    Lsm,
    /// Log-structured hash store (Bitcask-style): one read per GET, every key in memory, scans sort.
    Log,
}

/// Options for [`crate::Db::open`].
#[derive(Debug, Clone)]
pub struct Options {
    /// The engine of every partition.
    pub engine: Engine,
    /// Number of independent LSM trees keys are hash-partitioned into (fixed at creation).
    pub partitions: usize,
    /// When writes are fsynced.
    pub sync: SyncMode,
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// A memtable is switched for a new one when it holds this many bytes of keys and values
    /// (a value left in the log, at least `value_separation_bytes_min`, counts as its pointer).
    pub memtable_bytes_max: usize,
    /// LSM: a memtable is also switched once its write-ahead log holds this many bytes. Large
    /// values stay in the log, so the memtable itself stays small and this usually decides
    /// when it flushes. Larger means fewer flushes and compactions (more throughput under
    /// overwrites) but more garbage no compaction has seen yet (more disk) and a longer replay
    /// at open: PUT_HEAVY over 10 M keys, BENCHMARKS.md, 32 MiB against 128 MiB: 0.89x the
    /// throughput, 0.84x the bytes on disk, 0.70x the peak memory.
    pub memtable_log_bytes_max: u64,
    /// LSM: all memtables of all partitions together (the active ones and those waiting for
    /// flush). Over it, a partition switches to a new memtable once its active one holds at least
    /// `memtable_budget_bytes / (2 x partitions)`, so memory stays about the same whatever the
    /// partition count (RocksDB's write-buffer manager).
    pub memtable_budget_bytes: usize,
    /// Optional bound on entries per memtable (the original prototype flushed after a fixed
    /// count of pending writes).
    pub memtable_entries_max: Option<usize>,
    /// Full memtables waiting for flush; at this count writers stall (as the original prototype
    /// bounded its in-flight flush jobs).
    pub max_immutable_memtables: usize,
    /// Target uncompressed size of a data block.
    pub block_bytes: usize,
    /// At most this many entries per data block: the sparse index holds one key per block, so this
    /// is the sparse index's rate (one index entry every N keys at most).
    pub index_every_entries: usize,
    /// Bloom filter bits per key (0 disables filters).
    pub bloom_bits_per_key: u32,
    /// Block compression.
    pub compression: Compression,
    /// Byte budget of the shared block cache.
    pub block_cache_bytes: usize,
    /// Compaction output tables are cut at about this size.
    pub table_bytes_target: usize,
    /// Level-0 table count that triggers a level-0 compaction.
    pub l0_compaction_trigger: usize,
    /// Level-0 table count from which each write is delayed a little.
    pub l0_slowdown_tables: usize,
    /// Level-0 table count at which writes wait for compaction.
    pub l0_stop_tables: usize,
    /// Target size of level 1; each deeper level is `level_size_ratio` times larger.
    pub level1_bytes_target: u64,
    /// Size ratio between adjacent levels.
    pub level_size_ratio: u64,
    /// Threads running flushes and compactions for all partitions.
    pub background_threads: usize,
    /// Niceness added to the background threads (0-19; 0 leaves them as the process is): with
    /// cores busy, the threads serving requests then run first and flushes, compactions and
    /// garbage collection take what is left (RocksDB's `LowerThreadPoolCPUPriority`). Write
    /// stalls still hold writers back if compaction falls too far behind. `strata serve` uses 10.
    pub background_nice: i32,
    /// Largest key accepted.
    pub key_bytes_max: usize,
    /// Largest value accepted.
    pub value_bytes_max: usize,
    /// LSM: values of at least this many bytes stay in the write-ahead log (which becomes a
    /// value log) and tables store a pointer to them: less rewriting by compaction. `None`
    /// chooses by compression: 512 bytes without it, no separation with LZ4 (value logs are not
    /// compressed, and compressible values take far less space in compressed table blocks:
    /// 37 % of the JSON instead of 87 % for the document benchmark). `Some(usize::MAX)` turns
    /// separation off.
    pub value_log_bytes_min: Option<usize>,
    /// LSM: compactions move the values of a value log whose live share falls below this into
    /// value files of their own (the log is deleted once nothing points into it); a flushed
    /// log's share is its live value bytes over its size, a value file's its live values over
    /// those it was written with; background
    /// garbage collection (live values written again through the write path) takes a log
    /// below a quarter of it, and a full compaction below it. Higher keeps less garbage on disk
    /// for more values moved. With uniform overwrites the value logs hold about
    /// `ln(1/r) / (1 - r)` times their live bytes and compactions move about `r / (1 - r)`
    /// bytes per byte written. Measured (BALANCED over 10 M keys, 20 minutes, BENCHMARKS.md):
    /// 0.78 kept 1.29x the live data on disk over the last ten minutes against 1.37x at 0.65,
    /// for 0.92x the throughput and a write amplification of 3.7 against 2.6; on fresh stores
    /// (60 s) it cost GET_HEAVY and DELETE_HEAVY 8-9 %, so the default stays at 0.65.
    pub value_log_gc_live_ratio: f64,
    /// LSM, the space rule: compactions also move the values of the least live logs (those
    /// that lost at least a tenth of their live bytes) while the value logs take more than this
    /// many times the bytes their live values need (a log's need: its size times the share of
    /// its values still live, so record headers and keys are not counted as garbage). Live
    /// bytes are an upper bound until compactions see the garbage, so the bytes on disk run a
    /// little above it. `f64::INFINITY` turns the rule off.
    pub value_log_space_ratio_max: f64,
    /// Log engine: a segment is sealed and a new one started at this size.
    pub log_segment_bytes_max: u64,
    /// Log engine: merge when dead bytes reach this share of the sealed segments.
    pub log_merge_dead_ratio: f64,
    /// Where the database's files live: the operating system's file system by default
    /// ([`crate::vfs::RealFs`]); tests put [`crate::vfs::FaultFs`] here to cut the power or fail
    /// calls.
    pub fs: crate::vfs::SharedFs,
    /// LSM: values that are dead although no newer write replaced them (expired keys): compaction
    /// and value-log collection turn them into tombstones instead of copying them on. `None`
    /// keeps everything.
    pub compaction_filter: Option<std::sync::Arc<dyn CompactionFilter>>,
    /// How keys are routed to partitions. `None`: by the hash of the whole key. A router may
    /// send groups of keys to one partition (every element of one Redis hash), so that
    /// [`crate::Db::update_group`] can change them together and a compaction filter can read
    /// their shared metadata. Recorded in the `STRATA` file at creation (or the first open with a
    /// router) and required at every later open.
    pub key_router: Option<std::sync::Arc<dyn KeyRouter>>,
    /// Keys counted by class ([`KeyClasses`]): every write looks up, under its partition's write
    /// lock, whether each counted key it writes exists, so [`crate::Db::key_count`] is exact
    /// without a walk (a server's DBSIZE). Counts are unknown after open until
    /// [`crate::Db::recount_keys`]. `None` counts nothing and costs nothing.
    pub key_classes: Option<std::sync::Arc<dyn KeyClasses>>,
    /// Both engines: on a damaged record in a log or segment, keep the file up to the damage and
    /// drop the rest of that file (with a warning naming file, offset and bytes dropped) instead
    /// of refusing to open. Later files are still replayed.
    pub salvage: bool,
}

/// Decides that a stored value is dead, for [`Options::compaction_filter`] (RocksDB's
/// compaction filter; Kvrocks drops expired keys with one). Called from background work on
/// values that compaction copies (those stored in tables), on values it moves out of a value
/// log and on the live values of a value log being collected; a full compaction
/// ([`crate::Db::compact`]) reads every value it keeps in a value log for it too. A dead one
/// becomes a tombstone, so older versions below stay hidden, and
/// the tombstone goes when nothing older remains below it. Must be monotonic: a value once dead
/// is dead forever (readers must already treat it as absent: the filter only reclaims space).
pub trait CompactionFilter: Send + Sync + std::fmt::Debug {
    /// True when `value`, the newest version of `key` in what is being rewritten, is dead.
    /// `settled` reads other keys of the same partition (see [`SettledRead`]).
    fn is_dead(&self, key: &[u8], value: &[u8], settled: &dyn SettledRead) -> bool;

    /// What a dead value becomes instead of a tombstone: `Some(stub)` keeps the key present
    /// with (usually far smaller) `stub` as its value. A store with [`Options::key_classes`]
    /// needs this for counted keys: a tombstone written by compaction removes a key without a
    /// write, which the counts cannot see (they are then marked unknown until
    /// [`crate::Db::recount_keys`]). The stub must itself read as dead to the store's users.
    fn stub(&self, _key: &[u8], _value: &[u8]) -> Option<Vec<u8>> {
        None
    }

    /// The filter as `Any`, for its owner to reach state it keeps (what it saw) through
    /// [`crate::Db::compaction_filter`]. `None` by default.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Sorts keys into classes for [`Options::key_classes`] (a server: one class per database).
pub trait KeyClasses: Send + Sync + std::fmt::Debug {
    /// How many classes there are; a class is below this. At most [`KEY_CLASSES_MAX`].
    fn classes(&self) -> usize;
    /// The class `key` is counted in, or `None` for a key not counted. A pure function of the
    /// key, cheap: it runs for every key of every write.
    fn class_of(&self, key: &[u8]) -> Option<usize>;
}

/// Most classes [`KeyClasses::classes`] may declare (an atomic counter per class and partition).
pub const KEY_CLASSES_MAX: usize = 4096;

/// Reads, for a [`CompactionFilter`], keys of the partition being compacted whose state is
/// *settled*: not written since the last flush, so what the tables hold is both the newest
/// version and durable (a power cut cannot bring back an older one). A filter that drops
/// values because of another key (elements of a deleted collection) decides on settled state
/// only; otherwise a crash could restore the other key while its elements are already gone.
pub trait SettledRead {
    /// `Some(value or None for absent)` when `key` is settled; `None` when it was written since
    /// the last flush, could not be read, or lives in another partition: keep the value then.
    fn settled(&self, key: &[u8]) -> Option<Option<bytes::Bytes>>;
}

/// Routes keys to partitions (the [`Options::key_router`]): partition = `route(key) % partitions`
/// unless the router places keys itself ([`KeyRouter::partition`]). Must be a pure function of
/// the key (and the partition count), stable across versions of the program. A store routed by
/// the default rule adopts a router at its first open with one, if the router keeps the default
/// placement ([`KeyRouter::keeps_default_placement`]): it must then send every key that already
/// exists where the default does (its `xxh3_64` of the whole key), changing the routing of new
/// kinds of keys only.
pub trait KeyRouter: Send + Sync + std::fmt::Debug {
    /// Names the routing rule in the `STRATA` file: at least 2 (1 is the default rule), never
    /// reused for a different rule.
    fn id(&self) -> u32;
    /// The 64-bit hash that picks the partition of `key`.
    fn route(&self, key: &[u8]) -> u64;
    /// The partition of `key` among `partitions`: by default `route(key) % partitions`. A
    /// router may keep partitions for some keys (the server keeps one for its expiry index,
    /// so that the tables a GET searches hold no index entries).
    fn partition(&self, key: &[u8], partitions: usize) -> usize {
        (self.route(key) % partitions as u64) as usize
    }
    /// Whether keys the default rule placed are found where it placed them, so that a store
    /// routed by the default may adopt this router. False for a router that places keys by
    /// its own [`KeyRouter::partition`]: such a store refuses to open with it.
    fn keeps_default_placement(&self) -> bool {
        true
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            engine: Engine::Lsm,
            partitions: 4,
            sync: SyncMode::EveryMs(100),
            create_if_missing: true,
            memtable_bytes_max: 32 << 20,
            memtable_log_bytes_max: 32 << 20,
            memtable_budget_bytes: 128 << 20,
            memtable_entries_max: None,
            max_immutable_memtables: 2,
            block_bytes: 4096,
            index_every_entries: 128,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            block_cache_bytes: 64 << 20,
            table_bytes_target: 32 << 20,
            l0_compaction_trigger: 4,
            l0_slowdown_tables: 12,
            l0_stop_tables: 20,
            level1_bytes_target: 256 << 20,
            level_size_ratio: 10,
            background_threads: 2,
            background_nice: 0,
            key_bytes_max: 64 << 10,
            value_bytes_max: 64 << 20,
            value_log_bytes_min: None,
            value_log_gc_live_ratio: 0.65,
            value_log_space_ratio_max: 1.12,
            log_segment_bytes_max: 64 << 20,
            log_merge_dead_ratio: 0.5,
            salvage: false,
            fs: crate::vfs::real(),
            compaction_filter: None,
            key_router: None,
            key_classes: None,
        }
    }
}

/// Values of at least this size are separated by default, without compression.
const VALUE_LOG_BYTES_MIN_DEFAULT: usize = 512;

impl Options {
    /// The separation threshold in effect: [`Options::value_log_bytes_min`], or its default for
    /// the compression chosen. At least 1: an empty value is never separated (a pointer to no
    /// bytes counts no live bytes in its value log, which could then be dropped under it).
    pub fn value_separation_bytes_min(&self) -> usize {
        self.value_log_bytes_min
            .unwrap_or(match self.compression {
                Compression::None => VALUE_LOG_BYTES_MIN_DEFAULT,
                Compression::Lz4 => usize::MAX,
            })
            .max(1)
    }

    /// Options that make flushes and compactions happen very often: for tests.
    pub fn tiny() -> Self {
        Options {
            memtable_bytes_max: 16 << 10,
            memtable_log_bytes_max: 64 << 10,
            block_bytes: 512,
            index_every_entries: 16,
            table_bytes_target: 32 << 10,
            level1_bytes_target: 64 << 10,
            level_size_ratio: 4,
            block_cache_bytes: 256 << 10,
            log_segment_bytes_max: 32 << 10,
            value_log_bytes_min: Some(100),
            ..Options::default()
        }
    }

    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |m: &str| Err(crate::Error::InvalidArgument(m.to_string()));
        if self.partitions == 0 || self.partitions > PARTITIONS_MAX {
            return bad("partitions must be between 1 and 4096");
        }
        if self.memtable_bytes_max < MEMTABLE_BYTES_MIN
            || self.memtable_log_bytes_max < MEMTABLE_BYTES_MIN as u64
        {
            return bad("memtable_bytes_max and memtable_log_bytes_max must be at least 1024");
        }
        if self.memtable_budget_bytes < self.memtable_bytes_max.min(1 << 20) {
            return bad("memtable_budget_bytes must be at least 1 MiB or memtable_bytes_max");
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1");
        }
        if self.block_bytes < 64 || self.index_every_entries == 0 {
            return bad("block_bytes must be at least 64 and index_every_entries at least 1");
        }
        // 0 would make a table per entry, or a level whose every byte is over its target.
        if self.table_bytes_target < self.block_bytes || self.level1_bytes_target == 0 {
            return bad(
                "table_bytes_target must be at least block_bytes and level1_bytes_target at least 1",
            );
        }
        if self.l0_compaction_trigger < 2
            || self.l0_slowdown_tables < self.l0_compaction_trigger
            || self.l0_stop_tables < self.l0_slowdown_tables
        {
            return bad("need 2 <= l0_compaction_trigger <= l0_slowdown_tables <= l0_stop_tables");
        }
        if !(0..=19).contains(&self.background_nice) {
            return bad("background_nice must be between 0 and 19");
        }
        if self.level_size_ratio < 2 || self.background_threads == 0 {
            return bad("level_size_ratio must be at least 2 and background_threads at least 1");
        }
        if !(0.05..=0.95).contains(&self.log_merge_dead_ratio) {
            return bad("log_merge_dead_ratio must be in 0.05..=0.95");
        }
        if !(LOG_SEGMENT_BYTES_MIN..=LOG_SEGMENT_BYTES_LIMIT).contains(&self.log_segment_bytes_max)
        {
            return bad("log_segment_bytes_max must be between 4 KiB and 2 GiB");
        }
        if !(0.0..=0.95).contains(&self.value_log_gc_live_ratio) {
            return bad("value_log_gc_live_ratio must be in 0.0..=0.95");
        }
        if self.value_log_space_ratio_max.is_nan() || self.value_log_space_ratio_max < 1.0 {
            return bad("value_log_space_ratio_max must be at least 1.0 (f64::INFINITY: off)");
        }
        if let SyncMode::EveryMs(0) = self.sync {
            return bad("SyncMode::EveryMs needs a period of at least 1 ms");
        }
        if self.key_bytes_max == 0 || self.key_bytes_max > u32::MAX as usize / 2 {
            return bad("key_bytes_max out of range");
        }
        if self.value_bytes_max > u32::MAX as usize / 2 {
            return bad("value_bytes_max must be below 2 GiB");
        }
        if self.key_router.as_ref().is_some_and(|r| r.id() < 2) {
            return bad("a key router's id must be at least 2 (1 is the default routing)");
        }
        if self
            .key_classes
            .as_ref()
            .is_some_and(|c| c.classes() == 0 || c.classes() > KEY_CLASSES_MAX)
        {
            return bad("key_classes must declare between 1 and KEY_CLASSES_MAX classes");
        }
        Ok(())
    }
}
