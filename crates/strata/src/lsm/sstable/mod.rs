//! Sorted table files (`sst/NNNNNN.sst`): immutable, written once by a flush or a compaction.
//!
//! Layout: data blocks, a filter block, an index block, then a 40-byte footer. Every block is
//! followed by a 5-byte trailer `compression u8 (0 none, 1 LZ4) | crc32c(block bytes ++
//! compression byte) u32`. The index block is a sparse index: one entry (the block's last
//! key, offset, size) per data block, and a block holds at most `index_every_entries` entries.
//! Footer: `filter_offset u64 | filter_size u32 | index_offset u64 | index_size u32 |
//! format_version u32 | crc32c(previous 28 bytes) u32 | magic u64`.
//! `docs/format.md` describes the same bytes; a test decodes real files against it.
//!
//! Reads use positioned reads (`pread`) on one shared file handle per table and go through the
//! shared block cache.

mod block;
pub(crate) mod bloom;
mod index;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, IoContext, Result};
use crate::lsm::memtable::{Slot, SlotRef};
use crate::options::{Compression, Options};
use crate::util::cache::BlockCache;
use crate::util::coding::{put_len_prefixed, put_varint, Reader};
use crate::vfs::{BufAppender, FsFile, SharedFs};
use block::{BlockBuilder, BlockIter};
use bloom::Filter;
use index::SparseIndex;

/// Version of the table file format written: 3 ends each data block with restart points
/// (`block.rs`); 2 (without them) and 1 (whole-bitmap filter, no restart points) are still read.
pub const TABLE_FORMAT_VERSION: u32 = 3;
/// First format whose data blocks have restart points.
const FORMAT_WITH_RESTARTS: u32 = 3;
/// Oldest table format version still read.
const TABLE_FORMAT_VERSION_MIN: u32 = 1;
/// Last 8 bytes of every table file.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"STRATSST");
const FOOTER_BYTES: u64 = 40;
const TRAILER_BYTES: usize = 5;
pub(crate) const TABLE_SUFFIX: &str = ".sst";

pub(crate) fn table_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:06}{TABLE_SUFFIX}"))
}

/// What a finished table holds, as recorded in the manifest.
#[derive(Debug, Clone)]
pub(crate) struct TableMeta {
    pub(crate) id: u64,
    pub(crate) size: u64,
    pub(crate) entries: u64,
    pub(crate) min_key: Bytes,
    pub(crate) max_key: Bytes,
}

/// Most an LZ4 block can expand when decompressed.
const LZ4_EXPANSION_MAX: u64 = 255;

/// Bytes a table builder collects before each append to its file.
const TABLE_WRITE_BUFFER_BYTES: usize = 256 << 10;

/// Writes one table file: `<id>.sst.tmp`, renamed into place by [`TableBuilder::finish`].
pub(crate) struct TableBuilder {
    fs: SharedFs,
    id: u64,
    tmp_path: PathBuf,
    path: PathBuf,
    /// `None` once the file has been handed over by `finish`.
    file: Option<BufAppender>,
    /// Set once the file was renamed into place; otherwise dropping the builder removes it.
    renamed: bool,
    block: BlockBuilder,
    index: Vec<u8>,
    blocks: u64,
    hashes: Vec<u64>,
    offset: u64,
    entries: u64,
    first_key: Option<Bytes>,
    last_key: Vec<u8>,
    block_bytes: usize,
    index_every_entries: usize,
    compression: Compression,
    bloom_bits_per_key: u32,
    /// Format written (tests write older ones).
    format_version: u32,
    scratch: Vec<u8>,
}

impl TableBuilder {
    pub(crate) fn create(dir: &Path, id: u64, opts: &Options) -> Result<Self> {
        let path = table_path(dir, id);
        let tmp_path = path.with_extension("sst.tmp");
        let file = opts.fs.create(&tmp_path).at(&tmp_path)?;
        Ok(TableBuilder {
            fs: opts.fs.clone(),
            id,
            tmp_path,
            path,
            file: Some(BufAppender::new(file, TABLE_WRITE_BUFFER_BYTES)),
            renamed: false,
            block: BlockBuilder::new(TABLE_FORMAT_VERSION >= FORMAT_WITH_RESTARTS),
            index: Vec::new(),
            blocks: 0,
            hashes: Vec::new(),
            offset: 0,
            entries: 0,
            first_key: None,
            last_key: Vec::new(),
            block_bytes: opts.block_bytes,
            index_every_entries: opts.index_every_entries,
            compression: opts.compression,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            format_version: TABLE_FORMAT_VERSION,
            scratch: Vec::new(),
        })
    }

    /// Writes an older `format_version` instead, as earlier builds did: 1 (whole-bitmap filter,
    /// no restart points) or 2 (no restart points).
    #[cfg(test)]
    pub(crate) fn with_format(mut self, format_version: u32) -> Self {
        self.format_version = format_version;
        self.block.with_restarts = format_version >= FORMAT_WITH_RESTARTS;
        self
    }

    /// Adds an entry; keys must arrive in strictly increasing order.
    pub(crate) fn add(&mut self, key: &[u8], slot: &Slot) -> Result<()> {
        if self.entries > 0 && key <= &self.last_key[..] {
            // Merged inputs are sorted unless one of them is damaged in a way its checksums
            // did not catch: refuse to write a table that would break the order.
            return Err(Error::corruption(
                &self.tmp_path,
                self.offset,
                "keys arrive out of order (a damaged input table?)",
            ));
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        if self.first_key.is_none() {
            self.first_key = Some(Bytes::copy_from_slice(key));
        }
        if self.bloom_bits_per_key > 0 {
            self.hashes.push(bloom::hash(key));
        }
        self.block.add(key, slot);
        self.entries += 1;
        if self.block.buf.len() >= self.block_bytes
            || self.block.entries >= self.index_every_entries
        {
            self.finish_block()?;
        }
        Ok(())
    }

    /// Bytes written so far (an estimate of the final size).
    pub(crate) fn size_estimate(&self) -> u64 {
        self.offset + self.block.buf.len() as u64
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    fn finish_block(&mut self) -> Result<()> {
        if self.block.entries == 0 {
            return Ok(());
        }
        self.block.finish_restarts();
        let buf = std::mem::take(&mut self.block.buf);
        let (offset, size) = self.write_block(&buf, true)?;
        put_len_prefixed(&mut self.index, &self.block.last_key);
        put_varint(&mut self.index, offset);
        put_varint(&mut self.index, size);
        self.blocks += 1;
        self.block.buf = buf;
        self.block.reset();
        Ok(())
    }

    /// Writes a block and its trailer; returns (offset, size without trailer).
    fn write_block(&mut self, raw: &[u8], compressible: bool) -> Result<(u64, u64)> {
        let mut ctype = 0u8;
        let mut body: &[u8] = raw;
        if compressible && self.compression == Compression::Lz4 {
            self.scratch = lz4_flex::compress_prepend_size(raw);
            if self.scratch.len() < raw.len() {
                ctype = 1;
                body = &self.scratch;
            }
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(body), &[ctype]);
        let offset = self.offset;
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("table builder already finished".into()))?;
        file.write_all(body)
            .and_then(|()| file.write_all(&[ctype]))
            .and_then(|()| file.write_all(&crc.to_le_bytes()))
            .at(&self.tmp_path)?;
        self.offset += (body.len() + TRAILER_BYTES) as u64;
        Ok((offset, body.len() as u64))
    }

    /// Writes filter, index and footer, fsyncs and renames the file into place. The caller
    /// fsyncs the directory before recording the table in the manifest.
    pub(crate) fn finish(mut self) -> Result<TableMeta> {
        self.finish_block()?;
        let filter = match (self.bloom_bits_per_key, self.format_version) {
            (0, _) => Vec::new(),
            #[cfg(test)]
            (bits, 1) => bloom::build_whole(&self.hashes, bits),
            (bits, _) => bloom::build(&self.hashes, bits),
        };
        let (filter_offset, filter_size) = self.write_block(&filter, false)?;
        let mut index = Vec::with_capacity(self.index.len() + 32);
        put_varint(&mut index, self.entries);
        put_len_prefixed(&mut index, self.first_key.as_deref().unwrap_or(&[]));
        put_varint(&mut index, self.blocks);
        index.extend_from_slice(&self.index);
        let (index_offset, index_size) = self.write_block(&index, false)?;
        let mut footer = Vec::with_capacity(FOOTER_BYTES as usize);
        footer.extend_from_slice(&filter_offset.to_le_bytes());
        footer.extend_from_slice(&(filter_size as u32).to_le_bytes());
        footer.extend_from_slice(&index_offset.to_le_bytes());
        footer.extend_from_slice(&(index_size as u32).to_le_bytes());
        footer.extend_from_slice(&self.format_version.to_le_bytes());
        let crc = crc32c::crc32c(&footer);
        footer.extend_from_slice(&crc.to_le_bytes());
        footer.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        self.writer()?.write_all(&footer).at(&self.tmp_path)?;
        self.offset += FOOTER_BYTES;
        let file = self
            .file
            .take()
            .ok_or_else(|| Error::InvalidArgument("table builder already finished".into()))?
            .into_file()
            .at(&self.tmp_path)?;
        file.sync_all().at(&self.tmp_path)?;
        drop(file);
        self.fs.rename(&self.tmp_path, &self.path).at(&self.path)?;
        self.renamed = true;
        Ok(TableMeta {
            id: self.id,
            size: self.offset,
            entries: self.entries,
            min_key: self.first_key.take().unwrap_or_default(),
            max_key: Bytes::from(std::mem::take(&mut self.last_key)),
        })
    }

    fn writer(&mut self) -> Result<&mut BufAppender> {
        self.file
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("table builder already finished".into()))
    }

    /// Drops a table that will not be finished (its temporary file is removed).
    pub(crate) fn abandon(self) {}
}

impl Drop for TableBuilder {
    fn drop(&mut self) {
        if !self.renamed {
            // A failed or abandoned build: do not leave its bytes on a possibly full disk.
            self.file = None;
            let _ = self.fs.remove_file(&self.tmp_path);
        }
    }
}

static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(1);

/// An open table: index and filter in memory, data blocks read on demand.
pub(crate) struct Table {
    pub(crate) id: u64,
    fs: SharedFs,
    path: PathBuf,
    file: Arc<dyn FsFile>,
    cache_id: u64,
    pub(crate) size: u64,
    pub(crate) entries: u64,
    filter: Filter,
    index: SparseIndex,
    /// Whether data blocks end with restart points (format 3 and later).
    has_restarts: bool,
    pub(crate) min_key: Bytes,
    pub(crate) max_key: Bytes,
    cache: Arc<BlockCache>,
    /// Set when a compaction replaced this table; the file is deleted when the last reader
    /// (a version or an iterator) lets go of it.
    pub(crate) obsolete: AtomicBool,
}

impl Drop for Table {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            if let Err(e) = self.fs.remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "could not delete obsolete table");
            }
        }
    }
}

impl Table {
    /// Bytes of memory an open table holds outside the block cache: its sparse index, filter
    /// and first and last keys (what RocksDB reports as table readers' memory when index and
    /// filter blocks are not cached).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.index.memory_bytes()
            + self.filter.memory_bytes()
            + self.min_key.len()
            + self.max_key.len()
            + std::mem::size_of::<Table>()
    }

    pub(crate) fn open(
        fs: SharedFs,
        path: &Path,
        id: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Table> {
        let file = fs.open(path).at(path)?;
        let size = file.len().at(path)?;
        let corrupt = |offset: u64, reason: &str| Error::corruption(path, offset, reason);
        if size < FOOTER_BYTES {
            return Err(corrupt(0, "file shorter than the table footer"));
        }
        let mut footer = [0u8; FOOTER_BYTES as usize];
        file.read_exact_at(&mut footer, size - FOOTER_BYTES)
            .at(path)?;
        let foot_at = size - FOOTER_BYTES;
        let mut r = Reader::new(&footer);
        let (filter_offset, filter_size, index_offset, index_size, version, crc, magic) = (|| {
            Some((
                r.u64()?,
                r.u32()?,
                r.u64()?,
                r.u32()?,
                r.u32()?,
                r.u32()?,
                r.u64()?,
            ))
        })(
        )
        .ok_or_else(|| corrupt(foot_at, "short footer"))?;
        if magic != TABLE_MAGIC {
            return Err(corrupt(foot_at + 32, "bad table magic"));
        }
        if crc32c::crc32c(&footer[..28]) != crc {
            return Err(corrupt(foot_at, "footer checksum mismatch"));
        }
        if !(TABLE_FORMAT_VERSION_MIN..=TABLE_FORMAT_VERSION).contains(&version) {
            return Err(corrupt(
                foot_at + 24,
                &format!("unsupported table format version {version}"),
            ));
        }
        let mut t = Table {
            id,
            fs,
            path: path.to_path_buf(),
            file,
            cache_id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            size,
            entries: 0,
            filter: Filter::None,
            index: SparseIndex::with_capacity(0, 0),
            has_restarts: version >= FORMAT_WITH_RESTARTS,
            min_key: Bytes::new(),
            max_key: Bytes::new(),
            cache,
            obsolete: AtomicBool::new(false),
        };
        let filter = t.read_raw(filter_offset, filter_size)?;
        t.filter = Filter::decode(&filter, version).map_err(|m| corrupt(filter_offset, m))?;
        let index = t.read_raw(index_offset, index_size)?;
        let mut r = Reader::new(&index);
        let parsed = (|| {
            let entries = r.varint()?;
            let first = Bytes::copy_from_slice(r.len_prefixed()?);
            let blocks = r.varint()?;
            if blocks > index.len() as u64 {
                return None;
            }
            // The keys take less than the index block holds.
            let mut v = SparseIndex::with_capacity(blocks as usize, index.len());
            for _ in 0..blocks {
                let last_key = r.len_prefixed()?;
                let offset = r.varint()?;
                let size = u32::try_from(r.varint()?).ok()?;
                if offset.checked_add(u64::from(size) + TRAILER_BYTES as u64)? > filter_offset {
                    return None;
                }
                v.push(last_key, offset, size)?;
            }
            r.is_empty().then_some((entries, first, v))
        })();
        let (entries, first, mut index) =
            parsed.ok_or_else(|| corrupt(index_offset, "malformed index block"))?;
        t.entries = entries;
        t.min_key = first;
        t.max_key = index
            .last_key()
            .map(Bytes::copy_from_slice)
            .unwrap_or_default();
        // Keys are sorted, so all of them share what the first and last share.
        index.seal(
            t.min_key
                .iter()
                .zip(t.max_key.iter())
                .take_while(|(a, b)| a == b)
                .count(),
        );
        t.index = index;
        Ok(t)
    }

    /// The first block whose last key is `>= key`, for a key within the table's key range.
    fn block_for(&self, key: &[u8]) -> usize {
        self.index.block_for(key)
    }

    /// Reads a block and verifies its trailer; returns the decompressed bytes.
    fn read_raw(&self, offset: u64, size: u32) -> Result<Bytes> {
        // Checked before allocating: `size` and `offset` come from the file.
        let inside = offset
            .checked_add(u64::from(size) + TRAILER_BYTES as u64)
            .is_some_and(|end| end <= self.size);
        if !inside {
            return Err(Error::corruption(
                &self.path,
                offset,
                "block runs past end of file",
            ));
        }
        let mut buf = vec![0u8; size as usize + TRAILER_BYTES];
        self.file.read_exact_at(&mut buf, offset).at(&self.path)?;
        let n = size as usize;
        let ctype = buf[n];
        let stored = u32::from_le_bytes([buf[n + 1], buf[n + 2], buf[n + 3], buf[n + 4]]);
        if crc32c::crc32c(&buf[..n + 1]) != stored {
            return Err(Error::corruption(
                &self.path,
                offset,
                "block checksum mismatch",
            ));
        }
        buf.truncate(n);
        match ctype {
            0 => Ok(Bytes::from(buf)),
            1 => {
                // LZ4 expands at most 255-fold; a larger stated size is damage, and refusing it
                // spares allocating what the file claims.
                let stated = buf
                    .first_chunk::<4>()
                    .map_or(u64::MAX, |b| u64::from(u32::from_le_bytes(*b)));
                if stated > (buf.len() as u64).saturating_mul(LZ4_EXPANSION_MAX) {
                    return Err(Error::corruption(
                        &self.path,
                        offset,
                        "LZ4 block states an impossible decompressed size",
                    ));
                }
                lz4_flex::decompress_size_prepended(&buf)
                    .map(Bytes::from)
                    .map_err(|e| Error::corruption(&self.path, offset, format!("LZ4: {e}")))
            }
            c => Err(Error::corruption(
                &self.path,
                offset,
                format!("unknown compression type {c}"),
            )),
        }
    }

    fn block(&self, i: usize, fill_cache: bool) -> Result<Bytes> {
        let offset = self.index.offset(i);
        if let Some(b) = self.cache.get(self.cache_id, offset) {
            return Ok(b);
        }
        let b = self.read_raw(offset, self.index.size(i))?;
        if fill_cache {
            self.cache.insert(self.cache_id, offset, b.clone());
        }
        Ok(b)
    }

    /// Looks `key` up: filter, then index, then one block (kept in the block cache when
    /// `fill_cache`; read from it either way).
    pub(crate) fn get(&self, key: &[u8], hash: u64, fill_cache: bool) -> Result<Option<Slot>> {
        // The filter first: it turns most absent keys away with one memory access, where the
        // range check reads two keys elsewhere on the heap.
        if !self.filter.may_contain(hash) || key < &self.min_key[..] || key > &self.max_key[..] {
            return Ok(None);
        }
        let i = self.block_for(key);
        if i >= self.index.len() {
            return Ok(None);
        }
        block::find(&self.block(i, fill_cache)?, key, self.has_restarts)
            .map_err(|r| Error::corruption(&self.path, self.index.offset(i), r))
    }

    /// Where a backwards scan of this table's keys below `upper` may start its next forward
    /// step so that the step reads one block of it (`reverse.rs`): the last key of the block
    /// before the one that holds the table's greatest key below `upper`, a key below `upper`.
    /// `None` when that block is the table's first.
    pub(crate) fn split_below(&self, upper: &Bound<Bytes>) -> Option<&[u8]> {
        let last = self.index.len().checked_sub(1)?;
        // Blocks after the first whose last key reaches `upper` hold no key below it.
        let top = match upper {
            Bound::Included(u) | Bound::Excluded(u) => self.index.first_at_or_after(u).min(last),
            Bound::Unbounded => last,
        };
        top.checked_sub(1).map(|i| self.index.key(i))
    }

    /// Entries with keys in `(lower, upper)`, in order.
    pub(crate) fn iter(
        self: &Arc<Self>,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
        fill_cache: bool,
    ) -> TableIter {
        TableIter {
            cursor: self.cursor(lower, upper, fill_cache),
        }
    }

    /// A cursor over the entries with keys in `(lower, upper)`, before the first of them.
    pub(crate) fn cursor(
        self: &Arc<Self>,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
        fill_cache: bool,
    ) -> TableCursor {
        let block = match &lower {
            Bound::Included(k) | Bound::Excluded(k) => self.index.first_at_or_after(k),
            Bound::Unbounded => 0,
        };
        TableCursor {
            table: self.clone(),
            next_block: block,
            cur: None,
            lower,
            upper,
            fill_cache,
            done: false,
            seeked: false,
            past_lower: false,
            block_below_upper: false,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Walks a table's entries in a key range, the current one's key and value borrowed from its
/// block: what a merge reads to pick each key's newest version passes older ones without a copy.
pub(crate) struct TableCursor {
    table: Arc<Table>,
    next_block: usize,
    cur: Option<(BlockIter, u64)>,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
    fill_cache: bool,
    done: bool,
    /// Whether the first block was read (and sought to the lower bound).
    seeked: bool,
    /// Whether an entry at or above the lower bound was reached.
    past_lower: bool,
    /// Whether the current block's last key (its index entry) lies below the upper bound.
    block_below_upper: bool,
}

impl TableCursor {
    /// Moves to the next entry of the range: `Ok(false)` past its end (and from then on).
    pub(crate) fn advance(&mut self) -> Result<bool> {
        while !self.done {
            let Some((it, offset)) = self.cur.as_mut() else {
                if self.next_block >= self.table.index.len() {
                    self.done = true;
                    return Ok(false);
                }
                let i = self.next_block;
                self.next_block += 1;
                let offset = self.table.index.offset(i);
                let b = match self.table.block(i, self.fill_cache) {
                    Ok(b) => b,
                    Err(e) => {
                        self.done = true;
                        return Err(e);
                    }
                };
                let mut it = BlockIter::new(b, self.table.has_restarts);
                // A block whose last key is below the range's end needs no check per entry.
                let last = self.table.index.key(i);
                self.block_below_upper = match &self.upper {
                    Bound::Included(u) => last <= &u[..],
                    Bound::Excluded(u) => last < &u[..],
                    Bound::Unbounded => true,
                };
                // The first block read may start below the range: skip to it.
                if let Bound::Included(l) | Bound::Excluded(l) = &self.lower {
                    if !self.seeked {
                        if let Err(r) = it.seek(l) {
                            self.done = true;
                            return Err(Error::corruption(self.table.path(), offset, r));
                        }
                    }
                }
                self.seeked = true;
                self.cur = Some((it, offset));
                continue;
            };
            match it.step() {
                None => self.cur = None,
                Some(Err(r)) => {
                    self.done = true;
                    return Err(Error::corruption(self.table.path(), *offset, r));
                }
                Some(Ok(())) => {
                    let key = it.key();
                    if !self.past_lower {
                        let below = match &self.lower {
                            Bound::Included(l) => key < &l[..],
                            Bound::Excluded(l) => key <= &l[..],
                            Bound::Unbounded => false,
                        };
                        if below {
                            continue;
                        }
                        // Keys only grow from here: no later one is below the range.
                        self.past_lower = true;
                    }
                    let above = !self.block_below_upper
                        && match &self.upper {
                            Bound::Included(u) => key > &u[..],
                            Bound::Excluded(u) => key >= &u[..],
                            Bound::Unbounded => false,
                        };
                    if above {
                        self.done = true;
                        return Ok(false);
                    }
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The current entry (after an [`TableCursor::advance`] that returned true).
    fn current(&self) -> Option<&BlockIter> {
        match &self.cur {
            Some((it, _)) if !self.done => Some(it),
            _ => None,
        }
    }

    /// The current entry's key; `None` before the first step and past the end.
    pub(crate) fn key(&self) -> Option<&[u8]> {
        self.current().map(BlockIter::key)
    }

    /// The current entry's slot, its value borrowed from the block (a tombstone past the end).
    pub(crate) fn slot_ref(&self) -> SlotRef<'_> {
        self.current().map_or(SlotRef::Delete, BlockIter::slot_ref)
    }
}

/// A table's entries in a key range, each key copied and each value a slice of its block.
pub(crate) struct TableIter {
    cursor: TableCursor,
}

impl Iterator for TableIter {
    type Item = Result<(Bytes, Slot)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.cursor.advance() {
            Ok(true) => {
                let it = self.cursor.current()?;
                Some(Ok((Bytes::copy_from_slice(it.key()), it.slot())))
            }
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests;
