//! Hint files: written beside each segment that a merge produces, so that opening the store
//! reads `key -> location` pairs instead of whole segments.
//!
//! `NNNNNN-SSS.hint`: magic `b"STRATHNT"`, format version u32, then per live record
//! `key (varint len + bytes) | offset varint | len varint`, then CRC32C of everything before
//! it (u32). A missing or damaged hint is ignored and the segment is scanned instead.

use std::path::Path;

use crate::error::Result;
use crate::util::coding::{put_len_prefixed, put_varint, Reader};
use crate::util::fsutil;
use crate::vfs::FileSystem;

/// Version of the hint file format.
pub const HINT_FORMAT_VERSION: u32 = 1;
const HINT_MAGIC: &[u8; 8] = b"STRATHNT";

/// Builds the bytes of a hint file.
#[derive(Default)]
pub(crate) struct HintWriter {
    buf: Vec<u8>,
}

impl HintWriter {
    pub(crate) fn new() -> Self {
        let mut buf = Vec::new();
        buf.extend_from_slice(HINT_MAGIC);
        buf.extend_from_slice(&HINT_FORMAT_VERSION.to_le_bytes());
        HintWriter { buf }
    }

    pub(crate) fn add(&mut self, key: &[u8], offset: u64, len: u64) {
        put_len_prefixed(&mut self.buf, key);
        put_varint(&mut self.buf, offset);
        put_varint(&mut self.buf, len);
    }

    /// Writes the hint durably next to its segment.
    pub(crate) fn finish(mut self, fs: &dyn FileSystem, dir: &Path, name: &str) -> Result<()> {
        let crc = crc32c::crc32c(&self.buf);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        fsutil::write_atomically(fs, dir, name, &self.buf)
    }
}

/// A hint file whose checksum, magic and version are verified.
pub(crate) struct Hint {
    bytes: Vec<u8>,
}

impl Hint {
    /// Reads a hint file; `None` if it is absent or fails any check.
    pub(crate) fn read(fs: &dyn FileSystem, path: &Path) -> Option<Hint> {
        let bytes = fs.read(path).ok()?;
        let body_len = bytes.len().checked_sub(4)?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32c::crc32c(body).to_le_bytes() != crc {
            return None;
        }
        let mut r = Reader::new(body);
        if r.bytes(8)? != HINT_MAGIC || r.u32()? != HINT_FORMAT_VERSION {
            return None;
        }
        Some(Hint { bytes })
    }

    /// Visits every `(key, offset, len)` in file order, without copying keys; `None` if an
    /// entry is malformed (the entries before it have been visited).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8], u64, u64)) -> Option<()> {
        let body = &self.bytes[..self.bytes.len().checked_sub(4)?];
        let mut r = Reader::new(body);
        r.bytes(12)?;
        while !r.is_empty() {
            let key = r.len_prefixed()?;
            f(key, r.varint()?, r.varint()?);
        }
        Some(())
    }
}
