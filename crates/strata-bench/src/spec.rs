//! What a benchmark run is: which engine with which settings ([`EngineSpec`]), which workload
//! ([`RunSpec`]), or which read-only experiment ([`ReadonlySpec`]). Specs are plain data,
//! serialised into every result line so a JSONL file says exactly what produced it, and passed as
//! JSON to child processes.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The engines the harness can drive. Peers exist only with the `peers` feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Strata itself (LSM engine, the default).
    Strata,
    /// Strata with its second engine, the log-structured hash store (`strata::Engine::Log`).
    #[serde(rename = "strata-log")]
    StrataLog,
    /// RocksDB (system librocksdb through the `rocksdb` crate).
    Rocksdb,
    /// RocksDB with its integrated BlobDB (key-value separation, garbage collection in
    /// compaction): the peer closest to Strata's design.
    #[serde(rename = "rocksdb-blob")]
    RocksdbBlob,
    /// fjall, a Rust LSM engine.
    Fjall,
    /// fjall with key-value separation (blob files, garbage collected by staleness).
    #[serde(rename = "fjall-blob")]
    FjallBlob,
    /// sled, a Rust B-link-tree/log engine.
    Sled,
}

impl Engine {
    /// All engines, Strata first.
    pub const ALL: [Engine; 7] = [
        Engine::Strata,
        Engine::StrataLog,
        Engine::Rocksdb,
        Engine::RocksdbBlob,
        Engine::Fjall,
        Engine::FjallBlob,
        Engine::Sled,
    ];

    /// Lower-case name, as parsed.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Strata => "strata",
            Engine::StrataLog => "strata-log",
            Engine::Rocksdb => "rocksdb",
            Engine::RocksdbBlob => "rocksdb-blob",
            Engine::Fjall => "fjall",
            Engine::FjallBlob => "fjall-blob",
            Engine::Sled => "sled",
        }
    }

    /// Whether this build can open the engine (peers need the `peers` feature).
    pub fn compiled_in(self) -> bool {
        self.is_strata() || cfg!(feature = "peers")
    }

    /// One of Strata's own engines (hash-partitioned; the peers have no partitions).
    pub fn is_strata(self) -> bool {
        matches!(self, Engine::Strata | Engine::StrataLog)
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Engine {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown engine {s:?} (strata, strata-log, rocksdb, rocksdb-blob, fjall, fjall-blob, sled)"
                ))
            })
    }
}

/// When the write-ahead log reaches stable storage, expressed once for all engines. Each adapter
/// documents how it maps these (see BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SyncSpec {
    /// fsync before each write returns.
    Always,
    /// fsync the log every N milliseconds in the background.
    EveryMs(u64),
    /// Never fsync; the OS writes back when it likes.
    Never,
}

impl fmt::Display for SyncSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncSpec::Always => f.write_str("always"),
            SyncSpec::EveryMs(ms) => write!(f, "everyms:{ms}"),
            SyncSpec::Never => f.write_str("never"),
        }
    }
}

impl FromStr for SyncSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "always" => Ok(SyncSpec::Always),
            "never" => Ok(SyncSpec::Never),
            _ => match s.strip_prefix("everyms:").map(str::parse::<u64>) {
                Some(Ok(ms)) if ms > 0 => Ok(SyncSpec::EveryMs(ms)),
                _ => Err(Error::Invalid(format!(
                    "sync must be never, always or everyms:N (N >= 1), not {s:?}"
                ))),
            },
        }
    }
}

impl TryFrom<String> for SyncSpec {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<SyncSpec> for String {
    fn from(s: SyncSpec) -> String {
        s.to_string()
    }
}

impl SyncSpec {
    /// Strata's equivalent.
    pub fn to_strata(self) -> strata::SyncMode {
        match self {
            SyncSpec::Always => strata::SyncMode::Always,
            SyncSpec::EveryMs(ms) => strata::SyncMode::EveryMs(ms),
            SyncSpec::Never => strata::SyncMode::Never,
        }
    }
}

/// Block compression, for engines that have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionSpec {
    /// Store blocks as written.
    None,
    /// LZ4 (sled has no LZ4 and stays uncompressed).
    Lz4,
}

impl CompressionSpec {
    /// `none` or `lz4`, as parsed and as in run ids and stats lines.
    pub fn name(self) -> &'static str {
        match self {
            CompressionSpec::None => "none",
            CompressionSpec::Lz4 => "lz4",
        }
    }
}

impl FromStr for CompressionSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(CompressionSpec::None),
            "lz4" => Ok(CompressionSpec::Lz4),
            _ => Err(Error::Invalid(format!(
                "compression must be none or lz4, not {s:?}"
            ))),
        }
    }
}

/// An engine and the settings it is opened with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineSpec {
    /// Which engine.
    pub engine: Engine,
    /// Strata's partition count (the peers have none and ignore it).
    pub partitions: usize,
    /// Log durability.
    pub sync: SyncSpec,
    /// Block compression.
    pub compression: CompressionSpec,
    /// Block cache budget, the same for every engine.
    pub block_cache_bytes: u64,
    /// Background flush/compaction threads (RocksDB `max_background_jobs`, fjall workers,
    /// Strata `background_threads`).
    pub background_threads: usize,
    /// Strata's sparse index density (`index_every_entries`: at most this many entries per data
    /// block, i.e. per sparse index entry, what the original read-only store called its
    /// `indexRate`); `None` keeps Strata's default. Peers ignore it.
    #[serde(default)]
    pub index_every_entries: Option<usize>,
    /// Strata's key-value separation threshold (`value_log_bytes_min`: values of at least this
    /// many bytes stay in the value log, which is not compressed); `Some(usize::MAX)` turns
    /// separation off, `None` keeps Strata's default. Peers ignore it.
    #[serde(default)]
    pub value_log_bytes_min: Option<usize>,
    /// Strata's memtable entry limit (`memtable_entries_max`: a memtable is switched after this
    /// many entries as well as at its byte budget; the original partitioned store flushed at
    /// 1 M entries). `None` keeps Strata's default (bytes only). Peers ignore it.
    #[serde(default)]
    pub memtable_entries_max: Option<usize>,
    /// The log engine's segment size (`log_segment_bytes_max`); `None`: Strata's default.
    #[serde(default)]
    pub log_segment_bytes_max: Option<u64>,
    /// The log engine's merge threshold (`log_merge_dead_ratio`: merge when dead bytes reach
    /// this share of the sealed segments); `None`: Strata's default.
    #[serde(default)]
    pub log_merge_dead_ratio: Option<f64>,
    /// The LSM's value-log threshold (`value_log_gc_live_ratio`: compactions move the values of a
    /// log less live than this; collection takes a quarter of it); `None`: Strata's default.
    #[serde(default)]
    pub value_log_live_ratio: Option<f64>,
    /// The LSM's space rule (`value_log_space_ratio_max`: compactions also move the least live
    /// logs while the value logs hold more than this many times their live bytes); `None`:
    /// Strata's default.
    #[serde(default)]
    pub value_log_space_ratio: Option<f64>,
    /// The LSM's level-1 size target (`level1_bytes_target`; each deeper level is
    /// `level_size_ratio` times larger); `None`: Strata's default.
    #[serde(default)]
    pub level1_bytes: Option<u64>,
    /// The LSM's level-0 table count that starts a compaction into level 1
    /// (`l0_compaction_trigger`; the slowdown and stop counts keep their distance above it);
    /// `None`: Strata's default.
    #[serde(default)]
    pub l0_compaction_trigger: Option<usize>,
    /// The LSM's log size at which a memtable is switched (`memtable_log_bytes_max`); `None`:
    /// Strata's default.
    #[serde(default)]
    pub memtable_log_bytes: Option<u64>,
}

impl EngineSpec {
    /// The settings: 4 partitions, WAL synced every 100 ms, no compression, 64 MiB cache,
    /// one background thread per core.
    pub fn new(engine: Engine) -> Self {
        EngineSpec {
            engine,
            partitions: 4,
            sync: SyncSpec::EveryMs(100),
            compression: CompressionSpec::None,
            block_cache_bytes: 64 << 20,
            background_threads: crate::sys::cores(),
            index_every_entries: None,
            value_log_bytes_min: None,
            memtable_entries_max: None,
            log_segment_bytes_max: None,
            log_merge_dead_ratio: None,
            value_log_live_ratio: None,
            value_log_space_ratio: None,
            level1_bytes: None,
            l0_compaction_trigger: None,
            memtable_log_bytes: None,
        }
    }

    /// Strata options for this spec.
    pub fn strata_options(&self) -> strata::Options {
        let defaults = strata::Options::default();
        // A higher level-0 trigger moves the slowdown and stop counts up by as much, so that
        // raising it does not stall writes sooner.
        let l0_raise = self
            .l0_compaction_trigger
            .map_or(0, |t| t.saturating_sub(defaults.l0_compaction_trigger));
        strata::Options {
            level1_bytes_target: self.level1_bytes.unwrap_or(defaults.level1_bytes_target),
            memtable_log_bytes_max: self
                .memtable_log_bytes
                .unwrap_or(defaults.memtable_log_bytes_max),
            l0_compaction_trigger: self
                .l0_compaction_trigger
                .unwrap_or(defaults.l0_compaction_trigger),
            l0_slowdown_tables: defaults.l0_slowdown_tables + l0_raise,
            l0_stop_tables: defaults.l0_stop_tables + l0_raise,
            engine: match self.engine {
                Engine::StrataLog => strata::Engine::Log,
                _ => strata::Engine::Lsm,
            },
            index_every_entries: self
                .index_every_entries
                .unwrap_or(defaults.index_every_entries),
            partitions: self.partitions.max(1),
            sync: self.sync.to_strata(),
            compression: match self.compression {
                CompressionSpec::None => strata::Compression::None,
                CompressionSpec::Lz4 => strata::Compression::Lz4,
            },
            block_cache_bytes: usize::try_from(self.block_cache_bytes).unwrap_or(usize::MAX),
            background_threads: self.background_threads.max(1),
            value_log_bytes_min: self.value_log_bytes_min.or(defaults.value_log_bytes_min),
            memtable_entries_max: self.memtable_entries_max.or(defaults.memtable_entries_max),
            log_segment_bytes_max: self
                .log_segment_bytes_max
                .unwrap_or(defaults.log_segment_bytes_max),
            log_merge_dead_ratio: self
                .log_merge_dead_ratio
                .unwrap_or(defaults.log_merge_dead_ratio),
            value_log_gc_live_ratio: self
                .value_log_live_ratio
                .unwrap_or(defaults.value_log_gc_live_ratio),
            value_log_space_ratio_max: self
                .value_log_space_ratio
                .unwrap_or(defaults.value_log_space_ratio_max),
            ..defaults
        }
    }
}

/// The operation mixes the partitioned LSM store was originally measured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// 90 % put, 5 % delete, 5 % get.
    PutHeavy,
    /// 10 % put, 5 % delete, 85 % get.
    GetHeavy,
    /// 45 % put, 45 % delete, 10 % get.
    DeleteHeavy,
    /// 33 % put, 33 % delete, 34 % get.
    Balanced,
}

impl Workload {
    /// (put, delete, get) percentages.
    pub fn percents(self) -> (u32, u32, u32) {
        match self {
            Workload::PutHeavy => (90, 5, 5),
            Workload::GetHeavy => (10, 5, 85),
            Workload::DeleteHeavy => (45, 45, 10),
            Workload::Balanced => (33, 33, 34),
        }
    }

    /// Parses `put-heavy`, `get-heavy`, `delete-heavy`, `balanced` (also with `_`, any case).
    pub fn parse(s: &str) -> Option<Workload> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "put-heavy" => Some(Workload::PutHeavy),
            "get-heavy" => Some(Workload::GetHeavy),
            "delete-heavy" => Some(Workload::DeleteHeavy),
            "balanced" => Some(Workload::Balanced),
            _ => None,
        }
    }

    /// Parses a comma-separated list of workloads, or `all`.
    pub fn parse_list(s: &str) -> Result<Vec<Workload>> {
        if s.trim() == "all" {
            return Ok(Workload::ALL.to_vec());
        }
        s.split(',')
            .map(|w| {
                Workload::parse(w).ok_or_else(|| {
                    Error::Invalid(format!(
                        "unknown workload {w:?} (put-heavy, get-heavy, delete-heavy, balanced, all)"
                    ))
                })
            })
            .collect()
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            Workload::PutHeavy => "put-heavy",
            Workload::GetHeavy => "get-heavy",
            Workload::DeleteHeavy => "delete-heavy",
            Workload::Balanced => "balanced",
        }
    }

    /// All four, in the order the original measurements list them.
    pub const ALL: [Workload; 4] = [
        Workload::PutHeavy,
        Workload::GetHeavy,
        Workload::DeleteHeavy,
        Workload::Balanced,
    ];
}

/// One run's workload parameters (the engine is chosen separately).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
    /// Operation mix.
    pub workload: Workload,
    /// Share of GET/DELETE keys drawn from keys written before.
    pub known_key_rate: f64,
    /// Keys are drawn from `0..key_space`.
    pub key_space: u64,
    /// Bytes per value.
    pub value_bytes: usize,
    /// Client threads.
    pub threads: usize,
    /// How long to run.
    #[serde(rename = "durationMs", with = "millis")]
    pub duration: Duration,
    /// How often to emit a stats line.
    #[serde(rename = "intervalMs", with = "millis")]
    pub interval: Duration,
    /// Seed of the generators.
    pub seed: u64,
    /// Before the timed run, load every key of `0..key_space` (values of `value_bytes`)
    /// through the engine's bulk load, so that the store starts at its full size and every
    /// GET finds its key (without it, reads find only keys the run itself wrote).
    #[serde(default)]
    pub preload: bool,
    /// Drop the kernel's page cache after the preload (needs root), so that a key space
    /// larger than memory is read from the disk.
    #[serde(default)]
    pub drop_page_cache: bool,
}

impl RunSpec {
    /// The original partitioned-store measurements' parameters for `workload`: known-key rate
    /// 0.5, 100 M keys, 1 KiB values; 2 threads (this machine's cores), 60 s, stats every 10 s.
    /// ("Seed" is what the design experiments Strata reimplements were called.)
    pub fn seed_defaults(workload: Workload) -> Self {
        RunSpec {
            workload,
            known_key_rate: 0.5,
            key_space: 100_000_000,
            value_bytes: 1024,
            threads: 2,
            duration: Duration::from_secs(60),
            interval: Duration::from_secs(10),
            seed: 42,
            preload: false,
            drop_page_cache: false,
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.threads == 0 || self.key_space == 0 {
            return Err(Error::Invalid(
                "threads and key space must be at least 1".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.known_key_rate) {
            return Err(Error::Invalid("known-key rate must be within 0..=1".into()));
        }
        if self.interval.is_zero() {
            return Err(Error::Invalid("the stats interval must be positive".into()));
        }
        Ok(())
    }
}

/// One mixed-workload run: an engine and a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchSpec {
    /// The engine and its settings.
    pub engine: EngineSpec,
    /// The workload.
    pub run: RunSpec,
}

/// The read-only benchmark (after the original read-only sorted-file store with a sparse
/// index): build a data set, then read random keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadonlySpec {
    /// The engine and its settings.
    pub engine: EngineSpec,
    /// Bytes of keys and values to load (the number of keys follows from it).
    pub data_bytes: u64,
    /// Bytes per key (the original used 16, a UUID's size).
    pub key_bytes: usize,
    /// Bytes per value (the original measured 16, 256 and 4096).
    pub value_bytes: usize,
    /// Share of reads that ask for a key that exists.
    pub known_key_rate: f64,
    /// Reader threads.
    pub threads: usize,
    /// How long to read.
    #[serde(rename = "durationMs", with = "millis")]
    pub duration: Duration,
    /// How many keys one in-memory sorted run holds while generating (external merge sort).
    pub sort_run_keys: usize,
    /// Load through the engine's bulk load (Strata: `Db::ingest`) where it has one, instead of
    /// the write path plus compaction.
    #[serde(default)]
    pub bulk_load: bool,
    /// Seed of the generators.
    pub seed: u64,
    /// Trials per read phase (the original ran 10): above 1, the built data set is closed and
    /// each trial reads its own fresh copy of it, trials of every phase in a random order.
    #[serde(default)]
    pub trials: u32,
    /// Drop the kernel's page cache before each read phase (needs root), so that reads come
    /// from the disk rather than from memory the load or an earlier phase filled.
    #[serde(default)]
    pub drop_page_cache: bool,
}

impl ReadonlySpec {
    /// Number of keys that make up `data_bytes`.
    pub fn keys(&self) -> u64 {
        let per_key = (self.key_bytes + self.value_bytes).max(1) as u64;
        (self.data_bytes / per_key).max(1)
    }

    /// Free disk the run needs next to its directory: the data set with room for the engine's
    /// own overhead (an eighth: indexes, filters, file headers), the sort runs (8 bytes per
    /// key), and with trials one copy of the data set at a time.
    pub fn disk_bytes_needed(&self) -> u64 {
        let data = self.data_bytes.saturating_add(self.data_bytes / 8);
        let copies = if self.trials > 1 { 2 } else { 1 };
        data.saturating_mul(copies)
            .saturating_add(self.keys().saturating_mul(8))
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if !(8..=1024).contains(&self.key_bytes) {
            return Err(Error::Invalid(
                "key bytes must be between 8 and 1024".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.known_key_rate) {
            return Err(Error::Invalid("known-key rate must be within 0..=1".into()));
        }
        if self.threads == 0 || self.sort_run_keys == 0 {
            return Err(Error::Invalid(
                "threads and sort run keys must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// What to build and how to open it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartupSpec {
    /// The engine and its settings (Strata or Strata's log engine).
    pub engine: EngineSpec,
    /// Keys to load.
    pub keys: u64,
    /// Bytes per key.
    pub key_bytes: usize,
    /// Bytes per value.
    pub value_bytes: usize,
    /// Writer threads of the build step.
    pub load_threads: usize,
    /// Drop the page cache before the first open of each state (needs root); each state is
    /// opened warm as well.
    pub drop_caches: bool,
    /// Keys read back after each open; every one must be found.
    pub sample_reads: u64,
    /// Seed of the generators.
    pub seed: u64,
}

impl StartupSpec {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if !(8..=1024).contains(&self.key_bytes) {
            return Err(Error::Invalid(
                "key bytes must be between 8 and 1024".into(),
            ));
        }
        if self.keys == 0 || self.load_threads == 0 {
            return Err(Error::Invalid(
                "keys and load threads must be at least 1".into(),
            ));
        }
        if !self.engine.engine.is_strata() {
            return Err(Error::Invalid(format!(
                "the startup benchmark measures Strata's engines (strata, strata-log), not {}",
                self.engine.engine
            )));
        }
        Ok(())
    }
}

/// Where the documents come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DocsInput {
    /// Synthetic Reddit comments `0..docs` of `strata_doc::gen` with this seed (the same as
    /// `strata gen comments DOCS --seed SEED`).
    Generated {
        /// How many comments.
        docs: u64,
        /// Generator seed.
        seed: u64,
    },
    /// A JSON-lines file (`.gz` is read by one reader thread).
    File {
        /// The file.
        path: PathBuf,
    },
}

/// A timed phase over the loaded documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DocsPhase {
    /// `DocStore::get` of a random loaded id (the original document store's GET benchmark).
    Get,
    /// `DocStore::get_path` of `$.score`: the part of the document only.
    GetPath,
    /// The original document store's update benchmark: GET, score + 1, PUT; not atomic.
    Update,
    /// `DocStore::increment` of `$.score` by 1: atomic read-modify-write.
    Increment,
}

impl DocsPhase {
    /// Every phase, in the order they run (reads first, then the writes).
    pub const ALL: [DocsPhase; 4] = [
        DocsPhase::Get,
        DocsPhase::GetPath,
        DocsPhase::Update,
        DocsPhase::Increment,
    ];

    /// The name `parse_list` accepts.
    pub fn name(self) -> &'static str {
        match self {
            DocsPhase::Get => "get",
            DocsPhase::GetPath => "get-path",
            DocsPhase::Update => "update",
            DocsPhase::Increment => "increment",
        }
    }

    /// Parses a comma-separated list of phases, `all` or `none` (load only).
    pub fn parse_list(s: &str) -> Result<Vec<DocsPhase>> {
        match s.trim() {
            "all" => return Ok(DocsPhase::ALL.to_vec()),
            "none" | "" => return Ok(Vec::new()),
            _ => {}
        }
        s.split(',')
            .map(|p| {
                let p = p.trim().to_ascii_lowercase().replace('_', "-");
                DocsPhase::ALL
                    .into_iter()
                    .find(|ph| ph.name() == p)
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "unknown docs phase {p:?} (get, get-path, update, increment, all, none)"
                        ))
                    })
            })
            .collect()
    }
}

/// One document benchmark run: an engine setting, the input, the loader's threads and the timed
/// phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocsSpec {
    /// The engine settings (Strata only).
    pub engine: EngineSpec,
    /// The documents.
    pub input: DocsInput,
    /// Top-level field holding each document's id (the Reddit comments: `id`).
    pub id_field: String,
    /// Loader reader threads.
    pub readers: usize,
    /// Loader parser/writer threads.
    pub writers: usize,
    /// Timed phases after the load, in this order.
    pub phases: Vec<DocsPhase>,
    /// Client thread counts; every phase runs once per count.
    pub threads: Vec<usize>,
    /// How long each phase runs.
    #[serde(rename = "durationMs", with = "millis")]
    pub duration: Duration,
    /// How often a stats line is written (the original benchmarks: every second).
    #[serde(rename = "intervalMs", with = "millis")]
    pub interval: Duration,
    /// Seed of the id pickers.
    pub seed: u64,
    /// Trials per phase and thread count: above 1, every trial of a write phase (update,
    /// increment) runs on its own fresh copy of the loaded store (a checkpoint: hard links,
    /// not a reload), as the original gave each update trial a fresh copy, and all trials run
    /// in a random order.
    #[serde(default)]
    pub trials: u32,
}

impl DocsSpec {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.engine.engine != Engine::Strata {
            return Err(Error::Invalid(
                "the document benchmarks run on Strata only".into(),
            ));
        }
        if self.readers == 0 || self.writers == 0 {
            return Err(Error::Invalid(
                "loader readers and writers must be at least 1".into(),
            ));
        }
        if !self.phases.is_empty() && (self.threads.is_empty() || self.threads.contains(&0)) {
            return Err(Error::Invalid(
                "thread counts must be at least 1 (and at least one is needed)".into(),
            ));
        }
        if self.interval.is_zero() {
            return Err(Error::Invalid("the stats interval must be positive".into()));
        }
        if self.id_field.is_empty() {
            return Err(Error::Invalid("the id field must be named".into()));
        }
        Ok(())
    }
}

/// Parses a byte count with an optional binary suffix: `4096`, `64KiB`, `256MiB`, `1GiB`, `2G`.
pub fn parse_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| Error::Invalid(format!("not a byte count: {s:?}")))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(Error::Invalid(format!("unknown byte unit in {s:?}"))),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| Error::Invalid(format!("byte count too large: {s:?}")))
}

/// Parses a comma-separated list, e.g. `1,4,8,16`.
pub fn parse_list<T: FromStr>(s: &str) -> Result<Vec<T>> {
    let items: Vec<T> = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            p.trim()
                .parse()
                .map_err(|_| Error::Invalid(format!("bad list item {p:?} in {s:?}")))
        })
        .collect::<Result<_>>()?;
    if items.is_empty() {
        return Err(Error::Invalid(format!("empty list {s:?}")));
    }
    Ok(items)
}

/// (De)serialises a `Duration` as whole milliseconds.
pub(crate) mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_spec_round_trips_through_its_text() {
        for s in [SyncSpec::Always, SyncSpec::Never, SyncSpec::EveryMs(100)] {
            assert_eq!(s.to_string().parse::<SyncSpec>().unwrap(), s);
        }
        assert!("everyms:0".parse::<SyncSpec>().is_err());
        assert!("sometimes".parse::<SyncSpec>().is_err());
    }

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("2g").unwrap(), 2 << 30);
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn lists_parse_and_reject_garbage() {
        assert_eq!(parse_list::<usize>("1,4, 8,16").unwrap(), vec![1, 4, 8, 16]);
        assert!(parse_list::<usize>("1,x").is_err());
        assert!(parse_list::<usize>("").is_err());
    }

    #[test]
    fn engine_names_parse() {
        for e in Engine::ALL {
            assert_eq!(e.name().parse::<Engine>().unwrap(), e);
        }
        assert!("leveldb".parse::<Engine>().is_err());
    }

    #[test]
    fn workloads_parse_in_both_spellings() {
        assert_eq!(Workload::parse("PUT_HEAVY"), Some(Workload::PutHeavy));
        assert_eq!(Workload::parse_list("all").unwrap().len(), 4);
        assert_eq!(
            Workload::parse_list("balanced,get-heavy").unwrap(),
            vec![Workload::Balanced, Workload::GetHeavy]
        );
        assert!(Workload::parse_list("mostly-reads").is_err());
    }

    #[test]
    fn phases_parse_in_both_spellings() {
        assert_eq!(
            DocsPhase::parse_list("all").unwrap(),
            DocsPhase::ALL.to_vec()
        );
        assert!(DocsPhase::parse_list("none").unwrap().is_empty());
        assert_eq!(
            DocsPhase::parse_list("GET_PATH, increment").unwrap(),
            vec![DocsPhase::GetPath, DocsPhase::Increment]
        );
        assert!(DocsPhase::parse_list("scan").is_err());
    }

    #[test]
    fn seed_parameters_reach_the_engine() {
        let mut spec = EngineSpec::new(Engine::StrataLog);
        spec.memtable_entries_max = Some(1_000_000);
        spec.log_segment_bytes_max = Some(8 << 10);
        spec.log_merge_dead_ratio = Some(0.3);
        spec.value_log_live_ratio = Some(0.7);
        spec.value_log_space_ratio = Some(1.4);
        spec.level1_bytes = Some(32 << 20);
        spec.l0_compaction_trigger = Some(8);
        spec.memtable_log_bytes = Some(64 << 20);
        let o = spec.strata_options();
        assert_eq!(o.memtable_log_bytes_max, 64 << 20);
        assert_eq!(o.value_log_gc_live_ratio, 0.7);
        assert_eq!(o.value_log_space_ratio_max, 1.4);
        assert_eq!(o.level1_bytes_target, 32 << 20);
        assert_eq!(o.l0_compaction_trigger, 8);
        let defaults = strata::Options::default();
        assert_eq!(
            o.l0_slowdown_tables - o.l0_compaction_trigger,
            defaults.l0_slowdown_tables - defaults.l0_compaction_trigger
        );
        assert_eq!(o.memtable_entries_max, Some(1_000_000));
        assert_eq!(o.log_segment_bytes_max, 8 << 10);
        assert_eq!(o.log_merge_dead_ratio, 0.3);
        // Jobs written before these settings existed still parse, with the engine's defaults.
        let mut old = serde_json::to_value(EngineSpec::new(Engine::Strata)).unwrap();
        for field in [
            "memtable_entries_max",
            "log_segment_bytes_max",
            "log_merge_dead_ratio",
            "value_log_live_ratio",
            "value_log_space_ratio",
            "level1_bytes",
            "l0_compaction_trigger",
            "memtable_log_bytes",
        ] {
            old.as_object_mut().unwrap().remove(field);
        }
        let old: EngineSpec = serde_json::from_value(old).unwrap();
        let defaults = strata::Options::default();
        let o = old.strata_options();
        assert_eq!(o.log_segment_bytes_max, defaults.log_segment_bytes_max);
        assert_eq!(o.memtable_entries_max, defaults.memtable_entries_max);
        // And the log engine really seals small segments: 200 values of 1 KiB fill many.
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open_store(&spec, dir.path()).unwrap();
        for i in 0..200u32 {
            store.put(&i.to_be_bytes(), &[7u8; 1024]).unwrap();
        }
        store.close().unwrap();
        let segments = walk(dir.path())
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "seg"))
            .count();
        assert!(
            segments >= 10,
            "{segments} segments for 200 KiB at 8 KiB each"
        );
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }
}
