//! Small byte-level helpers: little-endian integers, varints (from [`crate::util::varint`]) and a bounds-checked reader
//! that returns `None` instead of panicking on short input.

pub(crate) use crate::util::varint::put as put_varint;

/// A cursor over a byte slice; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet (the reader is at its end afterwards).
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = self.buf.get(self.pos..).unwrap_or_default();
        self.pos = self.buf.len();
        s
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }

    /// Reads a varint (shortest encoding only, see [`crate::util::varint`]).
    pub(crate) fn varint(&mut self) -> Option<u64> {
        let (v, n) = crate::util::varint::decode(self.buf.get(self.pos..)?).ok()?;
        self.pos += n;
        Some(v)
    }

    /// Reads a varint length followed by that many bytes.
    pub(crate) fn len_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = self.varint()?;
        self.bytes(usize::try_from(n).ok()?)
    }
}

/// Appends a varint length and the bytes.
pub(crate) fn put_len_prefixed(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}
