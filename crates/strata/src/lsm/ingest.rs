//! Bulk ingest into the LSM: sorted entries are written straight into table files of their
//! partitions (no log, no memtable), which are then installed at the deepest level they fit.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::sstable::{table_path, Table, TableBuilder, TableMeta};
use super::tree::Tree;
use super::version::Version;
use super::LEVELS;
use crate::error::Result;
use crate::util::fsutil;

impl Tree {
    /// A builder for a table of this partition (bulk ingest writes tables directly).
    pub(crate) fn new_table(&self) -> Result<TableBuilder> {
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
        fsutil::sync_dir(&self.sst_dir)?;
        let mut tables = Vec::with_capacity(metas.len());
        for m in &metas {
            self.counters
                .flush_bytes
                .fetch_add(m.size, Ordering::Relaxed);
            tables.push(Arc::new(Table::open(
                &table_path(&self.sst_dir, m.id),
                m.id,
                self.cache.clone(),
            )?));
        }
        let lo = tables
            .iter()
            .map(|t| t.min_key.clone())
            .min()
            .unwrap_or_default();
        let hi = tables
            .iter()
            .map(|t| t.max_key.clone())
            .max()
            .unwrap_or_default();
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
