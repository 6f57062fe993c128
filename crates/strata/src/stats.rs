//! Statistics snapshots reported by [`crate::Db::stats`].

/// Size of one level of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Number of table files.
    pub tables: usize,
    /// Bytes of those files.
    pub bytes: u64,
}

/// State and counters of one partition.
#[derive(Debug, Clone, Default)]
pub struct PartitionStats {
    /// Bytes charged for the active memtable: its keys and values plus 128 bytes of
    /// bookkeeping per entry (what `memtable_bytes_max` and the memtable budget bound).
    pub memtable_bytes: u64,
    /// Full memtables waiting to be flushed.
    pub immutable_memtables: usize,
    /// Bytes charged for those memtables (as `memtable_bytes`).
    pub immutable_memtable_bytes: u64,
    /// LSM: memory the open tables hold outside the block cache (sparse indexes, filters).
    pub table_memory_bytes: u64,
    /// Per level, from level 0 down.
    pub levels: Vec<LevelStats>,
    /// Bytes of write-ahead log files and value files on disk.
    pub wal_bytes: u64,
    /// Bytes of keys and values the user asked to write.
    pub user_bytes_written: u64,
    /// Bytes written to the write-ahead log.
    pub wal_bytes_written: u64,
    /// Bytes of tables written by flushes.
    pub flush_bytes_written: u64,
    /// Bytes of tables written by compactions.
    pub compaction_bytes_written: u64,
    /// Number of flushes and compactions run so far.
    pub flushes: u64,
    /// Number of compactions run so far.
    pub compactions: u64,
    /// Writes that were delayed or stopped because background work was behind.
    pub write_stalls: u64,
    /// LSM: value logs (flushed write-ahead logs that tables point into).
    pub value_log_files: usize,
    /// LSM: bytes of those value logs.
    pub value_log_bytes: u64,
    /// LSM: bytes of values in them still referenced (an upper bound).
    pub value_log_live_bytes: u64,
    /// LSM: bytes written again by value-log garbage collection.
    pub value_log_gc_bytes_written: u64,
    /// LSM: value logs garbage-collected so far.
    pub value_log_gcs: u64,
    /// LSM: bytes of value files written by compactions (values moved out of value logs with
    /// little left live; `lsm/vlog/relocate.rs`).
    pub moved_value_bytes_written: u64,
    /// LSM: value files written by compactions so far.
    pub moved_value_files: u64,
    /// Log engine: keys in the in-memory index.
    pub index_keys: u64,
    /// Log engine: estimated bytes of memory held by the index.
    pub index_bytes: u64,
}

impl PartitionStats {
    /// Bytes of table files on disk.
    pub fn table_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }

    /// Bytes written to disk (log + flush + compaction, values moved included) per byte written
    /// by the user. Values rewritten by value-log garbage collection go through the log, so
    /// they are in `wal_bytes_written` already (`value_log_gc_bytes_written` says how many).
    pub fn write_amplification(&self) -> f64 {
        ratio(self.disk_bytes_written(), self.user_bytes_written)
    }

    /// Bytes this partition wrote to disk: log, flushes and compactions, with the value files
    /// compactions wrote (value-log garbage collection writes through the log).
    fn disk_bytes_written(&self) -> u64 {
        self.wal_bytes_written
            + self.flush_bytes_written
            + self.compaction_bytes_written
            + self.moved_value_bytes_written
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A snapshot of the whole database.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// One entry per partition, in partition order.
    pub partitions: Vec<PartitionStats>,
    /// Bytes of blocks in the block cache (shared by all partitions).
    pub block_cache_bytes: u64,
}

impl Stats {
    /// Bytes of table and log files on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| p.table_bytes() + p.wal_bytes)
            .sum()
    }

    /// Memory the engine accounts for: memtables (as charged), the block cache, tables'
    /// indexes and filters, and the log engine's index: what the options bound or what grows
    /// with the data. The process holds more (buffers of background work, memory the
    /// allocator keeps after it is freed).
    pub fn memory_bytes(&self) -> u64 {
        self.block_cache_bytes
            + self
                .partitions
                .iter()
                .map(|p| {
                    p.memtable_bytes
                        + p.immutable_memtable_bytes
                        + p.table_memory_bytes
                        + p.index_bytes
                })
                .sum::<u64>()
    }

    /// Bytes written by users across all partitions.
    pub fn user_bytes_written(&self) -> u64 {
        self.partitions.iter().map(|p| p.user_bytes_written).sum()
    }

    /// Value files compactions wrote across all partitions (values moved out of value logs).
    pub fn moved_value_files(&self) -> u64 {
        self.partitions.iter().map(|p| p.moved_value_files).sum()
    }

    /// Bytes written to disk across all partitions: logs, flushes, compactions (with the values
    /// they moved) and tables written by `Db::ingest`.
    pub fn disk_bytes_written(&self) -> u64 {
        self.partitions
            .iter()
            .map(PartitionStats::disk_bytes_written)
            .sum()
    }

    /// Total write amplification (disk bytes written / user bytes written; see
    /// [`PartitionStats::write_amplification`]).
    pub fn write_amplification(&self) -> f64 {
        ratio(self.disk_bytes_written(), self.user_bytes_written())
    }

    /// Flat `name: value` pairs, e.g. for the server's `INFO` reply or the CLI.
    pub fn lines(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("partitions".to_string(), self.partitions.len().to_string()),
            ("disk_bytes".to_string(), self.disk_bytes().to_string()),
            (
                "user_bytes_written".to_string(),
                self.user_bytes_written().to_string(),
            ),
            (
                "write_amplification".to_string(),
                format!("{:.2}", self.write_amplification()),
            ),
            ("memory_bytes".to_string(), self.memory_bytes().to_string()),
            (
                "block_cache_bytes".to_string(),
                self.block_cache_bytes.to_string(),
            ),
        ];
        for (i, p) in self.partitions.iter().enumerate() {
            let levels: Vec<String> = p
                .levels
                .iter()
                .map(|l| format!("{}:{}", l.tables, l.bytes))
                .collect();
            out.push((
                format!("partition{i}"),
                format!(
                    "memtable_bytes={},immutable_memtables={},immutable_memtable_bytes={},table_memory_bytes={},wal_bytes={},levels={},flushes={},compactions={},write_stalls={},value_logs={}:{}:{},value_log_gcs={},moved_value_files={},index_keys={},index_bytes={},write_amplification={:.2}",
                    p.memtable_bytes,
                    p.immutable_memtables,
                    p.immutable_memtable_bytes,
                    p.table_memory_bytes,
                    p.wal_bytes,
                    levels.join("/"),
                    p.flushes,
                    p.compactions,
                    p.write_stalls,
                    p.value_log_files,
                    p.value_log_bytes,
                    p.value_log_live_bytes,
                    p.value_log_gcs,
                    p.moved_value_files,
                    p.index_keys,
                    p.index_bytes,
                    p.write_amplification()
                ),
            ));
        }
        out
    }
}
