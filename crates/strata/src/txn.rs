//! Optimistic transactions (fjall's and RocksDB's `OptimisticTransactionDB`): reads at a
//! snapshot, writes buffered, and a commit that applies the writes as one atomic batch only if
//! no key the transaction read has changed since.
//!
//! The check runs under the write locks of every partition the transaction read or writes
//! (taken in partition order), so nothing can change between the check and the write. A key
//! changed if a memtable holds a version of it newer than the snapshot; writes already flushed
//! into tables carry no sequence number, so for those the key's current value is compared with
//! the value the transaction read. The commit is then serializable: every value it read is
//! the current one at the moment its writes apply. (A write that left a flushed key with the
//! value it had is not seen as a change.)

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::batch::{Entry, Kind};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::journal;
use crate::lsm::tree::Tree;
use crate::meta;
use crate::snapshot::Snapshot;

/// A read-modify-write across keys, committed all or nothing (see [`Db::transaction`]).
/// Dropping it without [`Transaction::commit`] discards its writes.
pub struct Transaction<'db> {
    db: &'db Db,
    snapshot: Snapshot,
    /// The value each key had when the transaction first read it.
    reads: HashMap<Vec<u8>, Option<Bytes>>,
    /// The transaction's own writes, the last per key (`None`: delete).
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'db> Transaction<'db> {
    pub(crate) fn new(db: &'db Db, snapshot: Snapshot) -> Self {
        Transaction {
            db,
            snapshot,
            reads: HashMap::new(),
            writes: BTreeMap::new(),
        }
    }

    /// The value of `key`: the transaction's own write if it made one, else the value at its
    /// snapshot. The key is checked for changes at commit.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        if let Some(w) = self.writes.get(key) {
            return Ok(w.as_deref().map(Bytes::copy_from_slice));
        }
        if let Some(seen) = self.reads.get(key) {
            return Ok(seen.clone());
        }
        let v = self.snapshot.get(key)?;
        self.reads.insert(key.to_vec(), v.clone());
        Ok(v)
    }

    /// Stores `value` under `key` when the transaction commits.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.check_sizes(key, value)?;
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    /// Deletes `key` when the transaction commits.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.db.check_sizes(key, &[])?;
        self.writes.insert(key.to_vec(), None);
        Ok(())
    }

    /// The sequence number the transaction reads at.
    pub fn snapshot_seq(&self) -> u64 {
        self.snapshot.seq()
    }

    /// Applies the writes atomically if no key read has changed since the snapshot; otherwise
    /// applies nothing and returns [`Error::Conflict`] naming the key.
    pub fn commit(self) -> Result<()> {
        if self.writes.is_empty() {
            // Everything it read came from one snapshot: consistent, and nothing to apply.
            return Ok(());
        }
        let inner = self.db.inner();
        let n = inner.partitions.len();
        let tree = |p: usize| -> Result<&Tree> {
            inner.partitions[p]
                .lsm()
                .ok_or_else(|| Error::InvalidArgument("transaction on the log engine".into()))
        };
        let mut by_part: BTreeMap<usize, Vec<Entry<'_>>> = BTreeMap::new();
        for key in self.reads.keys() {
            by_part.entry(meta::route(&inner.opts, key, n)).or_default();
        }
        for (key, value) in &self.writes {
            let entry = match value {
                Some(v) => (Kind::Put, &key[..], &v[..]),
                None => (Kind::Delete, &key[..], &[][..]),
            };
            by_part
                .entry(meta::route(&inner.opts, key, n))
                .or_default()
                .push(entry);
        }
        let mut parts = Vec::with_capacity(by_part.len());
        for (p, entries) in by_part {
            parts.push((tree(p)?, entries));
        }
        let seq = self.snapshot.seq();
        journal::write_across(&parts, || {
            for (key, seen) in &self.reads {
                let t = tree(meta::route(&inner.opts, key, n))?;
                let changed = t.changed_in_memory_since(key, seq)
                    || t.get_at(&t.pinned_view(), key, u64::MAX)? != *seen;
                if changed {
                    return Err(Error::Conflict { key: key.clone() });
                }
            }
            Ok(())
        })
    }
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("snapshot_seq", &self.snapshot.seq())
            .field("reads", &self.reads.len())
            .field("writes", &self.writes.len())
            .finish()
    }
}
