//! Checkpoints: a consistent copy of a live database in another directory, which opens as an
//! ordinary database (RocksDB's `Checkpoint`). Immutable files (tables, value logs, sealed
//! segments, hints) are hard links where the file system allows, copies otherwise; what only
//! memory holds is written out.
//!
//! - LSM: a [`Snapshot`] fixes the moment. Its tables and value logs are linked, the manifest is
//!   written for exactly those, and the memtables' contents at the snapshot are written as one
//!   new write-ahead log, which the copy replays when it opens.
//! - Log engine: every partition's merges are held off and every journal is locked at once
//!   (the moment); the segments are append-only, so sealed ones and their hints are linked and
//!   the active one is copied up to the length it had then.
//!
//! Everything is fsynced, files and directories, before the call returns.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use crate::batch::{encode_batch, BatchHeader, Kind};
use crate::db::Inner;
use crate::error::{Error, IoContext, Result};
use crate::journal::{self, Journaled, WalWriter};
use crate::lsm::memtable::Slot;
use crate::lsm::sstable::table_path;
use crate::lsm::version::{self, LogState, Version};
use crate::meta::META_FILE;
use crate::partition::Partition;
use crate::snapshot::Snapshot;
use crate::util::fsutil;
use crate::vfs::FileSystem;

/// Bytes copied at a time where a file cannot be linked.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Bytes of entries per log record when a checkpoint writes memtables out.
const RECORD_BYTES_TARGET: usize = 1 << 20;

/// Copies the database of `inner` to `dest`, which must not exist yet.
pub(crate) fn checkpoint(inner: &std::sync::Arc<Inner>, dest: &Path) -> Result<()> {
    checkpoint_as_of(inner, dest, None)
}

/// [`checkpoint`] of the LSM partitions as `snap` sees them (`None`: a snapshot taken now).
fn checkpoint_as_of(
    inner: &std::sync::Arc<Inner>,
    dest: &Path,
    snap: Option<&Snapshot>,
) -> Result<()> {
    let fs = &*inner.opts.fs;
    if fs.exists(dest) {
        return Err(Error::InvalidArgument(format!(
            "checkpoint destination {} exists; a checkpoint goes into a new directory",
            dest.display()
        )));
    }
    fsutil::create_dir_durably(fs, dest)?;
    let meta = inner.dir.join(META_FILE);
    let meta_bytes = fs.read(&meta).at(&meta)?;
    match &inner.partitions[0] {
        Partition::Lsm(_) => match snap {
            Some(snap) => checkpoint_lsm(inner, snap, dest)?,
            None => checkpoint_lsm(inner, &Snapshot::take(inner)?, dest)?,
        },
        Partition::Log(_) => checkpoint_log(inner, dest)?,
    }
    // The descriptor last: a directory without it is not a database, so a checkpoint cut
    // short by a crash is never opened as one.
    fsutil::write_atomically(fs, dest, META_FILE, &meta_bytes)?;
    fsutil::sync_dir(fs, dest)
}

fn partition_dir(root: &Path, id: usize) -> PathBuf {
    root.join(format!("p{id:04}"))
}

/// The LSM partitions as `snap` sees them, into `dest`.
fn checkpoint_lsm(inner: &std::sync::Arc<Inner>, snap: &Snapshot, dest: &Path) -> Result<()> {
    let fs = &*inner.opts.fs;
    for (id, p) in inner.partitions.iter().enumerate() {
        let Some(tree) = p.lsm() else { continue };
        let view = snap.view(id);
        let pdir = partition_dir(dest, id);
        let (wal_dir, sst_dir) = (pdir.join("wal"), pdir.join("sst"));
        for d in [&pdir, &wal_dir, &sst_dir] {
            fsutil::create_dir_durably(fs, d)?;
        }
        let src = tree.dir();
        for t in view.version.levels.iter().flatten() {
            let name = table_path(Path::new(""), t.id);
            link_or_copy(fs, &src.join("sst").join(&name), &sst_dir.join(&name), None)?;
        }
        for vlog in view.version.vlogs.values() {
            // A flushed log (`.log`) or a value file a compaction wrote (`.vlog`).
            let Some(name) = vlog.path().file_name() else {
                continue;
            };
            link_or_copy(fs, vlog.path(), &wal_dir.join(name), None)?;
        }
        // Numbered above every file the view has: the copy replays it as its newest log.
        let log_number = tree.next_file_number();
        let mut wal = WalWriter::create(fs, journal::wal_path(&wal_dir, log_number), 0)?;
        // The copy holds every batch up to the snapshot and nothing after: it claims them all.
        let header = BatchHeader {
            seq: snap.seq(),
            parts: Vec::new(),
            claim: Some(snap.seq()),
        };
        let mut entries: Vec<(Kind, bytes::Bytes, bytes::Bytes)> = Vec::new();
        let mut bytes = 0usize;
        let mut records = 0u64;
        let mut flush = |entries: &mut Vec<(Kind, bytes::Bytes, bytes::Bytes)>| -> Result<()> {
            if entries.is_empty() {
                return Ok(());
            }
            let mut payload = Vec::with_capacity(RECORD_BYTES_TARGET);
            encode_batch(
                &mut payload,
                &header,
                entries.iter().map(|(k, key, v)| (*k, &key[..], &v[..])),
                None,
            );
            records += 1;
            wal.append(&payload, records)?;
            entries.clear();
            Ok(())
        };
        // Oldest memtable first: replay applies records in order, so newer versions win.
        for mem in view
            .immutables
            .iter()
            .rev()
            .chain(std::iter::once(&view.active))
        {
            mem.for_each_at(snap.seq(), |key, slot| {
                let (kind, value) = match slot {
                    Slot::Put(v) => (Kind::Put, v.clone()),
                    Slot::Delete => (Kind::Delete, bytes::Bytes::new()),
                    // A value the memtable left in its log: copied into the copy's log.
                    Slot::Pointer(p) => (Kind::Put, tree.read_pointer(view, p)?),
                };
                bytes += key.len() + value.len();
                entries.push((kind, key.clone(), value));
                if bytes >= RECORD_BYTES_TARGET {
                    bytes = 0;
                    flush(&mut entries)?;
                }
                Ok(())
            })?;
        }
        flush(&mut entries)?;
        wal.write_buffer()?;
        wal.file().sync_all().at(wal.path())?;
        version::write_with_live(
            fs,
            &pdir,
            &view.version,
            log_number + 1,
            LogState {
                log_number,
                last_seq: snap.seq(),
            },
            &pointer_bytes(&view.version)?,
        )?;
        for d in [&wal_dir, &sst_dir, &pdir] {
            fsutil::sync_dir(fs, d)?;
        }
    }
    Ok(())
}

/// The value bytes the tables of `version` reference in each value log: the lengths of every
/// pointer into it, shadowed ones included (as compactions count them when they drop one). The
/// running store's live counts cannot go into the copy: they are shared by all its versions and
/// fall as compactions drop or move pointers after the snapshot, and a copy whose manifest
/// lists a log as emptier than its own tables make it deletes that log while they still point
/// into it.
fn pointer_bytes(version: &Version) -> Result<BTreeMap<u64, u64>> {
    let mut out = BTreeMap::new();
    for t in version.levels.iter().flatten() {
        for entry in t.iter(Bound::Unbounded, Bound::Unbounded, false) {
            if let (_, Slot::Pointer(p)) = entry? {
                *out.entry(p.file).or_default() += u64::from(p.len);
            }
        }
    }
    Ok(out)
}

fn checkpoint_log(inner: &Inner, dest: &Path) -> Result<()> {
    let fs = &*inner.opts.fs;
    let stores: Vec<_> = inner
        .partitions
        .iter()
        .filter_map(|p| match p {
            Partition::Log(l) => Some(l.clone()),
            Partition::Lsm(_) => None,
        })
        .collect();
    // Lock order of the hash engine: merges, then the journal; partitions in order.
    let _merges: Vec<_> = stores.iter().map(|s| s.hold_merges()).collect();
    let files: Vec<Vec<(PathBuf, Option<u64>)>> = {
        let mut guards: Vec<_> = stores.iter().map(|s| s.journal().lock()).collect();
        stores
            .iter()
            .zip(guards.iter_mut())
            .map(|(s, st)| s.checkpoint_files(st))
            .collect::<Result<_>>()?
    };
    for ((id, store), files) in stores.iter().enumerate().zip(files) {
        let pdir = partition_dir(dest, id);
        let seg_dir = pdir.join("log");
        for d in [&pdir, &seg_dir] {
            fsutil::create_dir_durably(fs, d)?;
        }
        for (path, len) in files {
            let Some(name) = path.file_name() else {
                continue;
            };
            link_or_copy(fs, &path, &seg_dir.join(name), len)?;
        }
        fsutil::sync_dir(fs, &seg_dir)?;
        tracing::debug!(
            partition = store.id,
            "checkpoint of a log-engine partition written"
        );
    }
    Ok(())
}

/// Makes `to` hold the bytes of `from` (its first `len` bytes, if given): a hard link when the
/// whole file is wanted and the file system has links, a copy (fsynced) otherwise.
fn link_or_copy(fs: &dyn FileSystem, from: &Path, to: &Path, len: Option<u64>) -> Result<()> {
    if len.is_none() && fs.hard_link(from, to).is_ok() {
        return Ok(());
    }
    let src = fs.open(from).at(from)?;
    let total = src.len().at(from)?;
    let len = len.map_or(total, |l| l.min(total));
    let dst = fs.create_new(to).at(to)?;
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    let mut at = 0u64;
    while at < len {
        let n = COPY_CHUNK_BYTES.min(usize::try_from(len - at).unwrap_or(COPY_CHUNK_BYTES));
        src.read_exact_at(&mut buf[..n], at).at(from)?;
        dst.append(&buf[..n]).at(to)?;
        at += n as u64;
    }
    dst.sync_all().at(to)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Db, Options};

    /// A checkpoint of a snapshot taken before compactions dropped pointers into a value log
    /// still holds that log's values: its manifest carries the counts of its own tables, not the
    /// running store's (which reached zero; a copy listing the log as empty could delete it
    /// while its tables point into it), and the copy reads every value after compacting.
    #[test]
    fn a_checkpoint_writes_the_live_counts_of_its_own_tables() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            partitions: 1,
            // Compactions only when asked for.
            l0_compaction_trigger: 1000,
            l0_slowdown_tables: 2000,
            l0_stop_tables: 3000,
            // No background collection: the round-0 logs go because compaction drops every
            // pointer into them.
            value_log_gc_live_ratio: 0.0,
            value_log_space_ratio_max: f64::INFINITY,
            ..Options::tiny()
        };
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        let value = |round: u32, k: u32| format!("{round}:{k}:").repeat(40).into_bytes();
        for k in 0..100u32 {
            db.put(format!("k{k:04}").as_bytes(), &value(0, k)).unwrap();
        }
        db.flush().unwrap();
        let snap = Snapshot::take(db.inner()).unwrap();
        // Every round-0 value is overwritten and compacted away: its log leaves the store.
        for k in 0..100u32 {
            db.put(format!("k{k:04}").as_bytes(), &value(1, k)).unwrap();
        }
        db.compact().unwrap();
        let copy = dir.path().join("copy");
        checkpoint_as_of(db.inner(), &copy, Some(&snap)).unwrap();
        drop(snap);
        let copy_db = Db::open(&copy, opts).unwrap();
        // The copy's value logs hold exactly the round-0 values its tables point to.
        let round_0_bytes: u64 = (0..100u32).map(|k| value(0, k).len() as u64).sum();
        let live: u64 = copy_db
            .stats()
            .partitions
            .iter()
            .map(|p| p.value_log_live_bytes)
            .sum();
        assert_eq!(live, round_0_bytes);
        copy_db.compact().unwrap();
        for k in 0..100u32 {
            let got = copy_db.get(format!("k{k:04}").as_bytes()).unwrap();
            assert_eq!(got.as_deref(), Some(&value(0, k)[..]), "key {k}");
        }
    }
}
