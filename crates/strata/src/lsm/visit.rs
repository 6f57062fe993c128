//! Visits of a key range (`Tree::visit_at`, a collection's elements): the newest version of
//! each key from the memtables and tables, handed to a visitor as borrowed bytes.
//!
//! A scan's merge (`util/merge.rs`) takes an owned key and value per entry from every source,
//! and orders them in a heap. A visit only looks at each entry, so its sources are cursors
//! whose current key and value are borrowed (from a memtable's copy buffer, from a table's
//! block), and with the few sources a partition has (a memtable or two, a few level-0 tables,
//! one cursor per deeper level) the smallest key is found by comparing the heads in turn. What
//! that saves is paid per older version a key has: a list whose positions were popped and
//! pushed again has one in every level-0 table, and LRANGE's merge of them spent most of its
//! time in the heap and in reference counts (see BENCHMARKS.md).

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::lsm::memtable::{MemtableCursor, SlotRef};
use crate::lsm::sstable::{Table, TableCursor};
use crate::lsm::vlog::ValuePtr;

/// One ranked source of a visit.
// A memtable's cursor is large (its copy buffers' handles and its place in the runs); a
// visit holds a few sources in one vector, and boxing it would add an allocation per visit
// and an indirection per step to the common source.
#[allow(clippy::large_enum_variant)]
pub(super) enum Cursor<'a> {
    Memtable(MemtableCursor<'a>),
    /// Tables whose key ranges do not overlap, in key order (one level-0 table, or the tables
    /// of a deeper level that lie in the range).
    Tables(TablesCursor<'a>),
}

impl Cursor<'_> {
    fn advance(&mut self) -> Result<()> {
        match self {
            Cursor::Memtable(c) => {
                c.advance();
            }
            Cursor::Tables(c) => c.advance()?,
        }
        Ok(())
    }

    fn key(&self) -> Option<&[u8]> {
        match self {
            Cursor::Memtable(c) => c.key(),
            Cursor::Tables(c) => c.current.as_ref()?.key(),
        }
    }

    fn slot_ref(&self) -> SlotRef<'_> {
        match self {
            Cursor::Memtable(c) => c.slot_ref(),
            Cursor::Tables(c) => c
                .current
                .as_ref()
                .map_or(SlotRef::Delete, TableCursor::slot_ref),
        }
    }
}

/// Walks tables one after another, each from the range's lower bound to its upper.
pub(super) struct TablesCursor<'a> {
    /// The tables not opened yet, in key order (borrowed from the visit's view).
    waiting: std::slice::Iter<'a, Arc<Table>>,
    current: Option<TableCursor>,
    lower: &'a Bound<Bytes>,
    upper: &'a Bound<Bytes>,
}

impl<'a> TablesCursor<'a> {
    /// `tables` in key order, none overlapping another.
    pub(super) fn new(
        tables: &'a [Arc<Table>],
        lower: &'a Bound<Bytes>,
        upper: &'a Bound<Bytes>,
    ) -> Self {
        TablesCursor {
            waiting: tables.iter(),
            current: None,
            lower,
            upper,
        }
    }

    fn advance(&mut self) -> Result<()> {
        loop {
            if let Some(c) = self.current.as_mut() {
                if c.advance()? {
                    return Ok(());
                }
            }
            let Some(next) = self.waiting.next() else {
                self.current = None;
                return Ok(());
            };
            self.current = Some(next.cursor(self.lower.clone(), self.upper.clone(), true));
        }
    }
}

/// Calls `visit` on the newest version of each key the `sources` (newest first) hold, in key
/// order, tombstones skipped, until it returns false; `resolve` reads a value behind a pointer.
pub(super) fn visit_merged(
    mut sources: Vec<Cursor<'_>>,
    resolve: &dyn Fn(&ValuePtr) -> Result<Bytes>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    for s in sources.iter_mut() {
        s.advance()?;
    }
    // A source with nothing (left) in the range leaves the merge: most visits end up with one
    // (a collection's newest elements in the active memtable), which needs no comparisons.
    sources.retain(|s| s.key().is_some());
    while sources.len() > 1 {
        // The newest of the sources whose key is the smallest.
        let mut newest: Option<(usize, &[u8])> = None;
        for (i, s) in sources.iter().enumerate() {
            if let Some(k) = s.key() {
                if newest.is_none_or(|(_, smallest)| k < smallest) {
                    newest = Some((i, k));
                }
            }
        }
        let Some((i, _)) = newest else {
            return Ok(());
        };
        let (newer, older) = sources.split_at_mut(i + 1);
        let Some(winner) = newer.last_mut() else {
            return Ok(());
        };
        let Some(key) = winner.key() else {
            return Ok(());
        };
        // Older versions of the key are passed over.
        let mut ended = false;
        for s in older.iter_mut() {
            if s.key() == Some(key) {
                s.advance()?;
                ended |= s.key().is_none();
            }
        }
        if !visit_one(winner, resolve, visit)? {
            return Ok(());
        }
        winner.advance()?;
        if ended || winner.key().is_none() {
            sources.retain(|s| s.key().is_some());
        }
    }
    match sources.first_mut() {
        Some(Cursor::Memtable(only)) => only.visit_rest(resolve, visit)?,
        Some(only) => {
            while visit_one(only, resolve, visit)? {
                only.advance()?;
            }
        }
        None => {}
    }
    Ok(())
}

/// Hands `source`'s current entry to `visit` unless it is a tombstone; false when the visit is
/// over (the visitor said so, or the source has no entry).
fn visit_one(
    source: &Cursor<'_>,
    resolve: &dyn Fn(&ValuePtr) -> Result<Bytes>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<bool> {
    let Some(key) = source.key() else {
        return Ok(false);
    };
    Ok(match source.slot_ref() {
        SlotRef::Put(v) => visit(key, v),
        SlotRef::Pointer(p) => visit(key, &resolve(&p)?),
        SlotRef::Delete => true,
    })
}
