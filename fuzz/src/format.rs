//! Just enough of the on-disk formats (`docs/format.md`) for structure-aware fuzzing, written
//! from the document, not from the engine's code: recomputing checksums after the fuzzer has
//! changed a file (so that mutations reach the parsers behind the checksums), finding a table's
//! blocks and keys, and encoding manifests and tables. Every function here takes arbitrary
//! bytes without panicking (best effort: what does not parse is left alone).

use strata::varint;

/// The manifest's magic.
pub const MANIFEST_MAGIC: &[u8; 8] = b"STRATMAN";
/// A table's last 8 bytes.
pub const TABLE_MAGIC: &[u8; 8] = b"STRATSST";
/// Bytes of a table footer.
pub const FOOTER_BYTES: usize = 40;
/// Bytes of the trailer after every table block.
pub const TRAILER_BYTES: usize = 5;
/// Bytes of a log file header.
pub const LOG_HEADER_BYTES: usize = 16;
/// Bytes of a log record header.
pub const RECORD_HEADER_BYTES: usize = 8;

/// CRC32C.
pub fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(<[u8; 4]>::try_from(s).ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(<[u8; 8]>::try_from(s).ok()?))
}

/// A bounds-checked cursor.
pub struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `b`.
    pub fn new(b: &'a [u8]) -> Self {
        Cursor { b, pos: 0 }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.b.len()
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        let v = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(v)
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> Option<u16> {
        let s = self.bytes(2)?;
        Some(u16::from_le_bytes([s[0], s[1]]))
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Option<u32> {
        let v = u32_at(self.b, self.pos)?;
        self.pos += 4;
        Some(v)
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// A varint.
    pub fn varint(&mut self) -> Option<u64> {
        let (v, n) = varint::decode(self.b.get(self.pos..)?).ok()?;
        self.pos += n;
        Some(v)
    }

    /// A varint length and that many bytes.
    pub fn len_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.bytes(n)
    }
}

fn put_len_prefixed(out: &mut Vec<u8>, b: &[u8]) {
    varint::put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// `STRATA`: the CRC32C of bytes 0..24 into 24..28.
pub fn fix_meta(b: &mut [u8]) {
    if b.len() >= 28 {
        let c = crc(&b[..24]);
        put_u32(b, 24, c);
    }
}

/// `MANIFEST`: the payload length (everything after the 20-byte header) and the checksum.
pub fn fix_manifest(b: &mut [u8]) {
    if b.len() < 20 {
        return;
    }
    let len = u32::try_from(b.len() - 20).unwrap_or(u32::MAX);
    put_u32(b, 12, len);
    let c = crc32c::crc32c_append(crc(&b[8..16]), &b[20..]);
    put_u32(b, 16, c);
}

/// Hint file: the CRC32C of everything before the last 4 bytes into them.
pub fn fix_hint(b: &mut [u8]) {
    if let Some(body) = b.len().checked_sub(4) {
        let c = crc(&b[..body]);
        put_u32(b, body, c);
    }
}

/// Write-ahead log, value log or segment: the header checksum and the checksum of every record
/// that lies inside the file (framing as found: lengths are left as the fuzzer made them). A
/// tail of zeros is left alone (it is what a preallocated, never written tail looks like).
pub fn fix_log(b: &mut [u8]) {
    if b.len() < LOG_HEADER_BYTES {
        return;
    }
    let c = crc(&b[..12]);
    put_u32(b, 12, c);
    let mut pos = LOG_HEADER_BYTES;
    while let Some(len) = u32_at(b, pos) {
        if b[pos..].iter().all(|&x| x == 0) {
            return;
        }
        let start = pos + RECORD_HEADER_BYTES;
        let Some(end) = start.checked_add(len as usize).filter(|&e| e <= b.len()) else {
            return;
        };
        let c = crc32c::crc32c_append(crc(&b[pos..pos + 4]), &b[start..end]);
        put_u32(b, pos + 4, c);
        pos = end;
    }
}

/// Records of a log file as (offset, payload range), for valid framing only.
pub fn log_records(b: &[u8]) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut pos = LOG_HEADER_BYTES;
    while let Some(len) = u32_at(b, pos) {
        let start = pos + RECORD_HEADER_BYTES;
        let Some(end) = start.checked_add(len as usize).filter(|&e| e <= b.len()) else {
            break;
        };
        out.push((pos, start..end));
        pos = end;
    }
    out
}

/// A table footer, read without checks.
#[derive(Debug, Clone, Copy)]
pub struct Footer {
    /// Offset of the filter block.
    pub filter_offset: u64,
    /// Size of the filter block without its trailer.
    pub filter_size: u32,
    /// Offset of the index block.
    pub index_offset: u64,
    /// Size of the index block without its trailer.
    pub index_size: u32,
}

/// The footer of table bytes `b`.
pub fn footer(b: &[u8]) -> Option<Footer> {
    let at = b.len().checked_sub(FOOTER_BYTES)?;
    Some(Footer {
        filter_offset: u64_at(b, at)?,
        filter_size: u32_at(b, at + 8)?,
        index_offset: u64_at(b, at + 12)?,
        index_size: u32_at(b, at + 20)?,
    })
}

/// The stored bytes of the block at `offset` of `size` (without trailer), and its compression
/// byte.
pub fn block_at(b: &[u8], offset: u64, size: u32) -> Option<(&[u8], u8)> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(size as usize)?;
    let body = b.get(start..end)?;
    Some((body, *b.get(end)?))
}

/// Recomputes one block's trailer checksum, if the block and trailer lie inside `b`.
fn fix_block(b: &mut [u8], offset: u64, size: u32) {
    let Ok(start) = usize::try_from(offset) else {
        return;
    };
    let Some(end) = start
        .checked_add(size as usize)
        .and_then(|e| e.checked_add(TRAILER_BYTES))
        .filter(|&e| e <= b.len())
    else {
        return;
    };
    let c = crc(&b[start..end - 4]);
    put_u32(b, end - 4, c);
}

/// A table's index block, parsed without checks.
#[derive(Debug, Clone, Default)]
pub struct TableIndex {
    /// Entry count the table claims.
    pub entries: u64,
    /// Its first key.
    pub first_key: Vec<u8>,
    /// Per data block: last key, offset, size.
    pub blocks: Vec<(Vec<u8>, u64, u32)>,
}

impl TableIndex {
    /// The largest key (the last block's last key), empty if there are no blocks.
    pub fn last_key(&self) -> Vec<u8> {
        self.blocks.last().map(|b| b.0.clone()).unwrap_or_default()
    }
}

/// Parses the index block of table bytes `b`.
pub fn table_index(b: &[u8]) -> Option<TableIndex> {
    let f = footer(b)?;
    let (index, _) = block_at(b, f.index_offset, f.index_size)?;
    let mut r = Cursor::new(index);
    let entries = r.varint()?;
    let first_key = r.len_prefixed()?.to_vec();
    let count = r.varint()?;
    if count > index.len() as u64 {
        return None;
    }
    let mut blocks = Vec::new();
    for _ in 0..count {
        let last = r.len_prefixed()?.to_vec();
        let offset = r.varint()?;
        let size = u32::try_from(r.varint()?).ok()?;
        blocks.push((last, offset, size));
    }
    Some(TableIndex {
        entries,
        first_key,
        blocks,
    })
}

/// Table: every data block's trailer checksum (blocks found through the index as it is), then
/// the filter's, the index's and the footer's.
pub fn fix_table(b: &mut [u8]) {
    let Some(f) = footer(b) else {
        return;
    };
    if let Some(index) = table_index(b) {
        for (_, offset, size) in &index.blocks {
            fix_block(b, *offset, *size);
        }
    }
    fix_block(b, f.filter_offset, f.filter_size);
    fix_block(b, f.index_offset, f.index_size);
    let at = b.len() - FOOTER_BYTES;
    let c = crc(&b[at..at + 28]);
    put_u32(b, at + 28, c);
}

/// One entry of a data block: key, kind (1 put, 2 delete, 3 value pointer), value bytes.
pub type BlockEntry = (Vec<u8>, u8, Vec<u8>);

/// The entries of an uncompressed data block, up to the first malformed one.
pub fn block_entries(block: &[u8]) -> Vec<BlockEntry> {
    parse_block(block).0
}

/// The entries of an uncompressed data block up to the first malformed one, and whether there
/// was none.
fn parse_block(block: &[u8]) -> (Vec<BlockEntry>, bool) {
    let mut out = Vec::new();
    let mut r = Cursor::new(block);
    let mut key: Vec<u8> = Vec::new();
    while !r.is_empty() {
        let parsed = (|| {
            let kind = r.u8().filter(|k| (1..=3).contains(k))?;
            let shared = usize::try_from(r.varint()?).ok()?;
            let unshared = usize::try_from(r.varint()?).ok()?;
            let vlen = if kind == 2 {
                0
            } else {
                usize::try_from(r.varint()?).ok()?
            };
            if shared > key.len() {
                return None;
            }
            let suffix = r.bytes(unshared)?;
            let value = r.bytes(vlen)?;
            if kind == 3 {
                // A pointer that does not decode ends a block's iteration in the engine too.
                decode_pointer(value).filter(|p| u32::try_from(p.2).is_ok())?;
            }
            Some((kind, shared, suffix, value))
        })();
        let Some((kind, shared, suffix, value)) = parsed else {
            return (out, false);
        };
        key.truncate(shared);
        key.extend_from_slice(suffix);
        out.push((key.clone(), kind, value.to_vec()));
    }
    (out, true)
}

/// Largest LZ4 block this module decompresses (the size is read from the block): what the
/// allocation guard allows, as the engine decompresses whatever size it is given.
const LZ4_BYTES_MAX: usize = crate::alloc_guard::ALLOC_BYTES_MAX;

/// The data blocks of a table as the engine's iterator sees them, decompressed: `None` for a
/// block that does not lie in the file, has an unknown compression byte, or does not
/// decompress (or claims more than the allocation guard allows). Checksums are not checked.
pub fn table_blocks(b: &[u8]) -> Vec<Option<Vec<u8>>> {
    let Some(index) = table_index(b) else {
        return Vec::new();
    };
    index
        .blocks
        .iter()
        .map(|(_, offset, size)| match block_at(b, *offset, *size)? {
            (body, 0) => Some(body.to_vec()),
            (body, 1) => {
                let claimed = u32_at(body, 0)? as usize;
                if claimed > LZ4_BYTES_MAX {
                    return None;
                }
                lz4_flex::decompress_size_prepended(body).ok()
            }
            _ => None,
        })
        .collect()
}

/// Every key a table's index and data blocks name (best effort), at most `max`.
pub fn table_keys(b: &[u8], max: usize) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let Some(index) = table_index(b) else {
        return keys;
    };
    keys.push(index.first_key.clone());
    keys.extend(index.blocks.iter().map(|blk| blk.0.clone()));
    for block in table_blocks(b).into_iter().flatten() {
        if keys.len() >= max {
            break;
        }
        keys.extend(block_entries(&block).into_iter().map(|e| e.0));
    }
    keys.sort();
    keys.dedup();
    keys.truncate(max);
    keys
}

/// The entries of a table in the order the engine's iterator yields them, up to where it would
/// stop (a block that cannot be read, or a malformed entry).
pub fn table_entries(b: &[u8]) -> Vec<BlockEntry> {
    let mut out = Vec::new();
    for block in table_blocks(b) {
        let Some(block) = block else {
            break;
        };
        // At a malformed entry the engine's iterator stops, for the whole table.
        let (entries, complete) = parse_block(&block);
        out.extend(entries);
        if !complete {
            break;
        }
    }
    out
}

/// Encodes a table (format 2, uncompressed, no filter) of `entries` in key order, at most
/// `per_block` entries per data block.
pub fn encode_table(entries: &[BlockEntry], per_block: usize) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, body: &[u8]) -> (u64, u64) {
        let offset = out.len() as u64;
        out.extend_from_slice(body);
        out.push(0);
        let c = crc(&out[offset as usize..]);
        out.extend_from_slice(&c.to_le_bytes());
        (offset, body.len() as u64)
    }
    let mut out = Vec::new();
    let mut index_blocks = Vec::new();
    for chunk in entries.chunks(per_block.max(1)) {
        let mut body = Vec::new();
        let mut prev: &[u8] = &[];
        for (i, (key, kind, value)) in chunk.iter().enumerate() {
            let shared = if i == 0 {
                0
            } else {
                key.iter().zip(prev).take_while(|(a, b)| a == b).count()
            };
            body.push(*kind);
            varint::put(&mut body, shared as u64);
            varint::put(&mut body, (key.len() - shared) as u64);
            if *kind != 2 {
                varint::put(&mut body, value.len() as u64);
            }
            body.extend_from_slice(&key[shared..]);
            if *kind != 2 {
                body.extend_from_slice(value);
            }
            prev = key;
        }
        let (offset, size) = block(&mut out, &body);
        put_len_prefixed(&mut index_blocks, prev);
        varint::put(&mut index_blocks, offset);
        varint::put(&mut index_blocks, size);
    }
    let (filter_offset, filter_size) = block(&mut out, &[]);
    let mut index = Vec::new();
    varint::put(&mut index, entries.len() as u64);
    put_len_prefixed(&mut index, entries.first().map_or(&[][..], |e| &e.0[..]));
    varint::put(&mut index, entries.len().div_ceil(per_block.max(1)) as u64);
    index.extend_from_slice(&index_blocks);
    let (index_offset, index_size) = block(&mut out, &index);
    let foot = out.len();
    out.extend_from_slice(&filter_offset.to_le_bytes());
    out.extend_from_slice(&(filter_size as u32).to_le_bytes());
    out.extend_from_slice(&index_offset.to_le_bytes());
    out.extend_from_slice(&(index_size as u32).to_le_bytes());
    out.extend_from_slice(&2u32.to_le_bytes());
    let c = crc(&out[foot..]);
    out.extend_from_slice(&c.to_le_bytes());
    out.extend_from_slice(TABLE_MAGIC);
    out
}

/// A value pointer's bytes: `file varint | offset varint | len varint | crc u32`.
pub fn encode_pointer(file: u64, offset: u64, len: u64, crc: u32) -> Vec<u8> {
    let mut out = Vec::new();
    varint::put(&mut out, file);
    varint::put(&mut out, offset);
    varint::put(&mut out, len);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A value pointer, decoded: (file, offset, len, crc).
pub fn decode_pointer(b: &[u8]) -> Option<(u64, u64, u64, u32)> {
    let mut r = Cursor::new(b);
    let p = (r.varint()?, r.varint()?, r.varint()?, r.u32()?);
    r.is_empty().then_some(p)
}

/// A manifest's entry for one table.
#[derive(Debug, Clone)]
pub struct TableMeta {
    /// File number.
    pub id: u64,
    /// Size of the file.
    pub size: u64,
    /// Entries in it.
    pub entries: u64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
}

/// A decoded manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Next file number.
    pub next_file_number: u64,
    /// Logs below this are in tables.
    pub log_number: u64,
    /// Tables per level.
    pub levels: Vec<Vec<TableMeta>>,
    /// Value logs: (number, total bytes, live bytes).
    pub vlogs: Vec<(u64, u64, u64)>,
}

impl Manifest {
    /// Decodes a manifest of any format (checksum not checked); what format 1 does not hold
    /// (format 2's `last_seq`, format 3's first live bytes of each value log) is dropped.
    pub fn decode(b: &[u8]) -> Option<Manifest> {
        let version = u32::from_le_bytes(b.get(8..12)?.try_into().ok()?);
        let payload = b.get(20..)?;
        let mut r = Cursor::new(payload);
        let next_file_number = r.varint()?;
        let log_number = r.varint()?;
        let level_count = r.varint()?;
        if level_count > 64 {
            return None;
        }
        let mut levels = Vec::new();
        for _ in 0..level_count {
            let n = r.varint()?;
            if n > payload.len() as u64 {
                return None;
            }
            let mut tables = Vec::new();
            for _ in 0..n {
                tables.push(TableMeta {
                    id: r.varint()?,
                    size: r.varint()?,
                    entries: r.varint()?,
                    min_key: r.len_prefixed()?.to_vec(),
                    max_key: r.len_prefixed()?.to_vec(),
                });
            }
            levels.push(tables);
        }
        let n = r.varint()?;
        if n > payload.len() as u64 {
            return None;
        }
        let mut vlogs = Vec::new();
        for _ in 0..n {
            vlogs.push((r.varint()?, r.varint()?, r.varint()?));
            if version >= 3 {
                r.varint()?;
            }
        }
        Some(Manifest {
            next_file_number,
            log_number,
            levels,
            vlogs,
        })
    }

    /// Encodes the manifest as format 1, checksum included.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        varint::put(&mut p, self.next_file_number);
        varint::put(&mut p, self.log_number);
        varint::put(&mut p, self.levels.len() as u64);
        for level in &self.levels {
            varint::put(&mut p, level.len() as u64);
            for t in level {
                varint::put(&mut p, t.id);
                varint::put(&mut p, t.size);
                varint::put(&mut p, t.entries);
                put_len_prefixed(&mut p, &t.min_key);
                put_len_prefixed(&mut p, &t.max_key);
            }
        }
        varint::put(&mut p, self.vlogs.len() as u64);
        for &(n, total, live) in &self.vlogs {
            varint::put(&mut p, n);
            varint::put(&mut p, total);
            varint::put(&mut p, live);
        }
        let mut out = Vec::with_capacity(p.len() + 20);
        out.extend_from_slice(MANIFEST_MAGIC);
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&p);
        fix_manifest(&mut out);
        out
    }

    /// Points the entry of table `id` at new table bytes: size, and entry count and key range as
    /// the table's index gives them (unchanged where the index does not parse), so that the
    /// engine's check of a table against its manifest entry passes and its blocks get read.
    pub fn describe_table(&mut self, id: u64, table: &[u8]) {
        let index = table_index(table);
        for t in self.levels.iter_mut().flatten().filter(|t| t.id == id) {
            t.size = table.len() as u64;
            if let Some(ix) = &index {
                t.entries = ix.entries;
                t.min_key = ix.first_key.clone();
                t.max_key = ix.last_key();
            }
        }
    }
}
