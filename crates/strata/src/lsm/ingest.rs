//! Bulk ingest into the LSM: sorted entries are written straight into table files of their
//! partitions (no log, no memtable), which are then installed at the deepest level they fit.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::memtable::Slot;
use super::sstable::{table_path, Table, TableBuilder, TableMeta};
use super::tree::Tree;
use super::version::Version;
use super::LEVELS;
use crate::error::Result;
use crate::meta;
use crate::util::fsutil;

/// Writes `sorted` (strictly increasing keys, checked by the caller's iterator) into new tables
/// of the partitions of `trees` (indexed by partition), each table closed at
/// `table_bytes_target`, then installs each partition's tables. Returns the entries written.
///
/// Ingested tables count as newer than everything in the tree, so every memtable is flushed
/// first, and value-log garbage collection is held off until they are installed: it writes live
/// values again through the write path, and a value it rewrote into a memtable meanwhile would
/// shadow the newer ingested one.
pub(crate) fn ingest_sorted<K: AsRef<[u8]>, V: AsRef<[u8]>>(
    trees: &[&Tree],
    table_bytes_target: u64,
    sorted: impl Iterator<Item = Result<(K, V)>>,
) -> Result<u64> {
    // `gc_lock` comes first in the lock order; partitions are taken in index order.
    let _no_gc: Vec<_> = trees.iter().map(|t| t.gc_lock.lock()).collect();
    for t in trees {
        t.flush_all()?;
    }
    let n = trees.len();
    let mut metas: Vec<Vec<TableMeta>> = vec![Vec::new(); n];
    let built = build_tables(trees, table_bytes_target, sorted, &mut metas);
    let count = match built {
        Ok(count) => count,
        Err(e) => {
            // Finished tables no manifest will name (bad input, a full disk): removed now, not
            // left to the next open on a disk that may be full.
            remove_tables(trees, &metas);
            return Err(e);
        }
    };
    for p in 0..n {
        let m = std::mem::take(&mut metas[p]);
        if let Err(e) = trees[p].install_ingested(m) {
            // The partitions after this one get none of theirs: their tables go too.
            remove_tables(&trees[p + 1..], &metas[p + 1..]);
            return Err(e);
        }
    }
    Ok(count)
}

/// Writes the sorted entries into tables of their partitions (`metas[p]`); returns how many.
fn build_tables<K: AsRef<[u8]>, V: AsRef<[u8]>>(
    trees: &[&Tree],
    table_bytes_target: u64,
    sorted: impl Iterator<Item = Result<(K, V)>>,
    metas: &mut [Vec<TableMeta>],
) -> Result<u64> {
    let n = trees.len();
    // Unfinished builders remove their temporary files when dropped (an error here).
    let mut builders: Vec<Option<TableBuilder>> = (0..n).map(|_| None).collect();
    let mut count = 0u64;
    for kv in sorted {
        let (k, v) = kv?;
        let (k, v) = (k.as_ref(), v.as_ref());
        let p = meta::route(&trees[0].opts, k, n);
        let b = match builders[p].as_mut() {
            Some(b) => b,
            None => builders[p].insert(trees[p].new_table()?),
        };
        b.add(k, &Slot::Put(Bytes::copy_from_slice(v)))?;
        count += 1;
        if b.size_estimate() >= table_bytes_target {
            if let Some(b) = builders[p].take() {
                metas[p].push(b.finish()?);
            }
        }
    }
    for (p, b) in builders.into_iter().enumerate() {
        if let Some(b) = b {
            metas[p].push(b.finish()?);
        }
    }
    Ok(count)
}

/// Removes finished ingest tables that will not be installed (errors are logged: the next
/// open removes what is left, as it removes every table no manifest names).
fn remove_tables(trees: &[&Tree], metas: &[Vec<TableMeta>]) {
    for (t, ms) in trees.iter().zip(metas) {
        for m in ms {
            let path = table_path(&t.sst_dir, m.id);
            if let Err(e) = t.opts.fs.remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "could not remove an ingest table that will not be installed");
            }
        }
    }
}

impl Tree {
    /// A builder for a table of this partition (bulk ingest writes tables directly).
    fn new_table(&self) -> Result<TableBuilder> {
        let id = self.next_file.fetch_add(1, Ordering::AcqRel);
        TableBuilder::create(&self.sst_dir, id, &self.opts)
    }

    /// Installs tables written by bulk ingest. Their data counts as newer than everything in
    /// the tree (the caller flushed memtables first), so they go to the deepest level where no
    /// table of that level or above overlaps them; with level-0 overlap, to level 0.
    pub(crate) fn install_ingested(&self, metas: Vec<TableMeta>) -> Result<usize> {
        if metas.is_empty() {
            return Ok(0);
        }
        fsutil::sync_dir(&*self.opts.fs, &self.sst_dir)?;
        let mut tables = Vec::with_capacity(metas.len());
        for m in &metas {
            self.counters
                .flush_bytes
                .fetch_add(m.size, Ordering::Relaxed);
            tables.push(Arc::new(Table::open(
                self.opts.fs.clone(),
                &table_path(&self.sst_dir, m.id),
                m.id,
                self.cache.clone(),
            )?));
        }
        let lo = tables.iter().map(|t| t.min_key.clone()).min();
        let hi = tables.iter().map(|t| t.max_key.clone()).max();
        let (Some(lo), Some(hi)) = (lo, hi) else {
            unreachable!("metas is not empty (checked above), so neither is tables");
        };
        // No compaction may move tables while we pick the level.
        let _c = self.compaction_lock.lock();
        self.install(None, |nv| Ok(place_ingested(nv, tables, &lo, &hi)))
    }
}

/// Adds ingested tables spanning `lo..=hi` to `nv` at the deepest level no table of that level
/// or above overlaps (level 0 if a level-0 table does); returns the level.
fn place_ingested(nv: &mut Version, tables: Vec<Arc<Table>>, lo: &Bytes, hi: &Bytes) -> usize {
    let l0_overlaps = nv.levels[0]
        .iter()
        .any(|t| t.max_key >= *lo && t.min_key <= *hi);
    let mut level = 0;
    if !l0_overlaps {
        for l in 1..LEVELS {
            if !nv.overlapping(l, lo, hi).is_empty() {
                break;
            }
            level = l;
        }
    }
    let target = &mut nv.levels[level];
    if level == 0 {
        for t in tables {
            target.insert(0, t);
        }
    } else {
        target.extend(tables);
        target.sort_by(|a, b| a.min_key.cmp(&b.min_key));
    }
    level
}
