//! Template stores, built once per process in a [`MemFs`] through the public API, and the
//! per-input exercise: open the store (with one file replaced or altered by the fuzz input),
//! read every known key, scan, optionally compact, close. Errors are expected and ignored;
//! only a panic, an abort, an out-of-memory or a hang is a finding.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use strata::{Compression, Db, Engine, Options, SyncMode};

use crate::format::{self, Manifest};
use crate::memfs::{MemFs, Snapshot};

/// Where the store lives in the in-memory file system.
pub const DB: &str = "/db";
/// The only partition's directory.
pub const PARTITION: &str = "/db/p0000";
/// Most entries a scan reads per input.
const SCAN_MAX: usize = 4096;
/// Most keys looked up per input.
const GETS_MAX: usize = 128;

/// The options every input is opened with (on a fresh file system): one partition, small
/// memtables, blocks and segments (`Options::tiny`), values of 100 bytes or more separated
/// into value logs, one background thread and no log-syncer thread (every fsync is free here).
pub fn options(engine: Engine) -> Options {
    Options {
        engine,
        partitions: 1,
        sync: SyncMode::Always,
        background_threads: 1,
        log_segment_bytes_max: 4096,
        ..Options::tiny()
    }
}

/// The key of index `i`.
pub fn key(i: usize) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

fn small_value(i: usize, round: usize) -> Vec<u8> {
    format!("value-{i}-{round}").into_bytes()
}

/// A value of `len` bytes, compressible, different per key and round.
fn big_value(i: usize, round: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| b"abcdefghijklmnopqrstuvwxyz"[(i + round + j / 16) % 26])
        .collect()
}

/// A store built once, frozen.
pub struct Template {
    /// Its files.
    pub files: Snapshot,
    /// Every key it was given.
    pub keys: Vec<Vec<u8>>,
    /// The engine it runs.
    pub engine: Engine,
}

impl Template {
    fn build(opts: Options, keys: usize, fill: impl FnOnce(&Db) -> strata::Result<()>) -> Self {
        let fs = MemFs::new();
        let engine = opts.engine;
        // No background value-log collection or merge while the template is written, so that
        // every process builds the same bytes (corpus entries then mean the same everywhere).
        let opts = Options {
            fs: Arc::new(fs.clone()),
            value_log_gc_live_ratio: 0.0,
            value_log_space_ratio_max: f64::INFINITY,
            log_merge_dead_ratio: 0.95,
            ..opts
        };
        let built = Db::open(DB, opts).and_then(|db| {
            fill(&db)?;
            db.close()
        });
        if let Err(e) = built {
            // Only valid operations on a healthy file system: a failure is a bug worth a report.
            panic!("building a template store failed: {e}");
        }
        Template {
            files: fs.snapshot(),
            keys: (0..keys).map(key).collect(),
            engine,
        }
    }

    /// Files of the partition's `sub` directory ending in `suffix`, sorted.
    pub fn files_in(&self, sub: &str, suffix: &str) -> Vec<PathBuf> {
        let dir = Path::new(PARTITION).join(sub);
        self.files.files_in(&dir, suffix)
    }

    /// The decoded manifest.
    pub fn manifest(&self) -> Option<Manifest> {
        Manifest::decode(self.files.get(&manifest_path()))
    }
}

/// `/db/p0000/MANIFEST`.
pub fn manifest_path() -> PathBuf {
    Path::new(PARTITION).join("MANIFEST")
}

/// `/db/STRATA`.
pub fn meta_path() -> PathBuf {
    Path::new(DB).join("STRATA")
}

/// The path of table `id`.
pub fn table_path(id: u64) -> PathBuf {
    Path::new(PARTITION).join(format!("sst/{id:06}.sst"))
}

/// The LSM store: a bottom-level table (after a full compaction) holding puts and value
/// pointers, a level-0 table with overwrites and deletes, value logs, and a newest write-ahead
/// log holding writes not yet flushed (puts, deletes, large values, a multi-entry batch).
fn build_lsm(compression: Compression) -> Template {
    let opts = Options {
        compression,
        ..options(Engine::Lsm)
    };
    Template::build(opts, 40, |db| {
        for i in 0..20 {
            db.put(&key(i), &small_value(i, 0))?;
        }
        for i in 20..24 {
            db.put(&key(i), &big_value(i, 0, 200))?;
        }
        db.flush()?;
        db.compact()?;
        for i in 12..30 {
            db.put(&key(i), &small_value(i, 1))?;
        }
        for i in 0..3 {
            db.delete(&key(i))?;
        }
        db.put(&key(22), &big_value(22, 1, 150))?;
        db.flush()?;
        for i in 30..37 {
            db.put(&key(i), &small_value(i, 2))?;
        }
        db.put(&key(37), &big_value(37, 2, 200))?;
        db.delete(&key(6))?;
        let mut batch = strata::WriteBatch::new();
        batch
            .put(key(38), b"in a batch")
            .delete(key(8))
            .put(key(39), big_value(39, 2, 120));
        db.write(batch)
    })
}

/// The LSM store (uncompressed tables).
pub fn lsm() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| build_lsm(Compression::None))
}

/// The same store with LZ4-compressed table blocks (its tables seed the `table` target).
pub fn lsm_lz4() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| build_lsm(Compression::Lz4))
}

/// The value-pointer store: one level-0 table whose entries are mostly pointers into one value
/// log (200-byte values), some inline values, and a write-ahead log with unflushed writes (so
/// that the flush after open samples the value log).
pub struct VlogTemplate {
    /// The store.
    pub t: Template,
    /// The table's id.
    pub table_id: u64,
    /// The table's entries: key, kind, value (an encoded pointer for kind 3).
    pub entries: Vec<format::BlockEntry>,
    /// The value log's number and path.
    pub vlog: (u64, PathBuf),
    /// The number of the newest write-ahead log.
    pub newest_wal: u64,
}

/// The value-pointer store.
pub fn vlog() -> &'static VlogTemplate {
    static T: OnceLock<VlogTemplate> = OnceLock::new();
    T.get_or_init(|| {
        let t = Template::build(options(Engine::Lsm), 30, |db| {
            for i in 0..24 {
                if i % 5 == 4 {
                    db.put(&key(i), &small_value(i, 0))?;
                } else {
                    db.put(&key(i), &big_value(i, 0, 200))?;
                }
            }
            db.flush()?;
            for i in 24..30 {
                db.put(&key(i), &big_value(i, 1, 200))?;
            }
            Ok(())
        });
        let m = t.manifest().expect("the template's manifest decodes");
        let table_id = m
            .levels
            .iter()
            .flatten()
            .map(|t| t.id)
            .next()
            .expect("one table");
        let entries = format::table_entries(t.files.get(&table_path(table_id)));
        assert!(
            entries.iter().filter(|e| e.1 == 3).count() >= 16,
            "the template's table holds value pointers"
        );
        let number = m.vlogs.first().expect("one value log").0;
        let vlog = Path::new(PARTITION).join(format!("wal/{number:06}.log"));
        let newest_wal = t
            .files_in("wal", ".log")
            .last()
            .and_then(|p| p.file_stem()?.to_str()?.parse().ok())
            .expect("a write-ahead log");
        VlogTemplate {
            t,
            table_id,
            entries,
            vlog: (number, vlog),
            newest_wal,
        }
    })
}

/// The hash-engine store: segments merged into outputs with hint files, then a newer segment
/// with overwrites and deletes, and an active segment.
pub fn log() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        Template::build(options(Engine::Log), 48, |db| {
            for round in 0..3 {
                for i in 0..40 {
                    db.put(&key(i), &big_value(i, round, 120))?;
                }
            }
            for i in 0..40 {
                if i % 7 == 0 {
                    db.delete(&key(i))?;
                }
            }
            db.compact()?;
            for i in 36..48 {
                db.put(&key(i), &big_value(i, 3, 400))?;
            }
            db.delete(&key(1))?;
            let mut batch = strata::WriteBatch::new();
            batch
                .put(key(2), b"two")
                .put(key(3), b"three")
                .delete(key(4));
            db.write(batch)
        })
    })
}

/// Opens the store in `files`, reads `keys` one by one, scans everything and a range,
/// compacts if asked, and closes. Every error is ignored.
pub fn exercise(files: Snapshot, opts: Options, keys: &[Vec<u8>], compact: bool) {
    let fs = MemFs::from_snapshot(files);
    let opts = Options {
        fs: Arc::new(fs),
        ..opts
    };
    let db = match Db::open(DB, opts) {
        Ok(db) => db,
        Err(e) => {
            if verbose() {
                eprintln!("open: {e}");
            }
            return;
        }
    };
    read_all(&db, keys);
    if compact {
        let res = db.compact();
        if verbose() {
            eprintln!("compact: {res:?}");
        }
        if res.is_ok() {
            read_all(&db, keys);
        }
    }
    let _ = db.close();
}

/// `STRATA_FUZZ_VERBOSE=1`: say what each input did (for checking seeds and reproducers).
pub fn verbose() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| std::env::var_os("STRATA_FUZZ_VERBOSE").is_some())
}

fn read_all(db: &Db, keys: &[Vec<u8>]) {
    let (mut found, mut errors) = (0, Vec::new());
    for k in keys.iter().take(GETS_MAX) {
        match db.get(k) {
            Ok(v) => found += usize::from(v.is_some()),
            Err(e) => errors.push(e.to_string()),
        }
    }
    let mut scanned = 0;
    for kv in db.scan::<&[u8], _>(..).take(SCAN_MAX) {
        match kv {
            Ok(_) => scanned += 1,
            Err(e) => errors.push(e.to_string()),
        }
    }
    for kv in db.scan(&b"key020"[..]..&b"key024"[..]).take(SCAN_MAX) {
        if let Err(e) = kv {
            errors.push(e.to_string());
        }
    }
    if verbose() {
        eprintln!(
            "get: {found} of {} found; scan: {scanned} entries; errors: {errors:?}",
            keys.len().min(GETS_MAX)
        );
    }
}

/// `keys` and `more`, deduplicated, in order.
pub fn with_keys(keys: &[Vec<u8>], more: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> = keys.iter().cloned().chain(more).collect();
    all.sort();
    all.dedup();
    all
}
