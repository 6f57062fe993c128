//! External merge sort for bulk ingest: entries arrive in any order, are sorted in memory in
//! runs of at most `run_bytes_max`, spilled to temporary run files, and merged back into one
//! ascending stream for [`crate::Db::ingest`]. For equal keys the entry added last wins.
//!
//! Run file records: `key_len u32 | value_len u32 | key | value | crc32c(key, value) u32`
//! (little-endian), then an end marker `u32::MAX | entry count u32`: a run cut short or with a
//! damaged byte is an error, never a shorter run (its lost entries would silently be missing
//! from an ingest). Private to one sort and deleted when the sorter is dropped.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// Sorts more entries than fit in memory.
pub struct ExternalSorter {
    dir: PathBuf,
    run_bytes_max: usize,
    buf: Vec<(Vec<u8>, u64, Vec<u8>)>,
    buf_bytes: usize,
    seq: u64,
    runs: Vec<PathBuf>,
}

impl ExternalSorter {
    /// Spills runs of at most `run_bytes_max` bytes into `dir` (created if missing).
    pub fn new(dir: &Path, run_bytes_max: usize) -> Result<Self> {
        std::fs::create_dir_all(dir).at(dir)?;
        Ok(ExternalSorter {
            dir: dir.to_path_buf(),
            run_bytes_max: run_bytes_max.max(1 << 16),
            buf: Vec::new(),
            buf_bytes: 0,
            seq: 0,
            runs: Vec::new(),
        })
    }

    /// Adds an entry.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.buf_bytes += key.len() + value.len() + 48;
        self.buf.push((key.to_vec(), self.seq, value.to_vec()));
        self.seq += 1;
        if self.buf_bytes >= self.run_bytes_max {
            self.spill()?;
        }
        Ok(())
    }

    /// Run files written so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.sort_buffer();
        let path = self.dir.join(format!("run-{:06}.tmp", self.runs.len()));
        let mut w = BufWriter::new(File::create(&path).at(&path)?);
        let entries = self.buf.len();
        for (k, _, v) in self.buf.drain(..) {
            let (kl, vl) = (entry_len(&k, &path)?, entry_len(&v, &path)?);
            let crc = crc32c::crc32c_append(crc32c::crc32c(&k), &v);
            w.write_all(&kl.to_le_bytes())
                .and_then(|()| w.write_all(&vl.to_le_bytes()))
                .and_then(|()| w.write_all(&k))
                .and_then(|()| w.write_all(&v))
                .and_then(|()| w.write_all(&crc.to_le_bytes()))
                .at(&path)?;
        }
        let count = u32::try_from(entries).map_err(|_| {
            Error::InvalidArgument("a sort run of more than 4 billion entries".into())
        })?;
        w.write_all(&RUN_END.to_le_bytes())
            .and_then(|()| w.write_all(&count.to_le_bytes()))
            .and_then(|()| w.flush())
            .at(&path)?;
        self.buf_bytes = 0;
        self.runs.push(path);
        Ok(())
    }

    /// Sorts by key, newest first among equals, and keeps only the newest of each key.
    fn sort_buffer(&mut self) {
        self.buf
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        self.buf.dedup_by(|later, earlier| later.0 == earlier.0);
    }

    /// The entries in ascending key order, one per key.
    pub fn finish(mut self) -> Result<Sorted> {
        let mut sources: Vec<Source> = Vec::new();
        if !self.runs.is_empty() {
            self.spill()?;
        }
        for (i, path) in self.runs.iter().enumerate() {
            let r = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
            sources.push(Source::Run {
                reader: r,
                path: path.clone(),
                rank: i,
                read: 0,
                done: false,
            });
        }
        if self.runs.is_empty() {
            self.sort_buffer();
            let entries: Vec<(Vec<u8>, Vec<u8>)> =
                self.buf.drain(..).map(|(k, _, v)| (k, v)).collect();
            sources.push(Source::Memory(entries.into_iter()));
        }
        let mut heap = BinaryHeap::new();
        for (i, s) in sources.iter_mut().enumerate() {
            if let Some((k, v)) = s.next_entry()? {
                heap.push(Reverse((k, Reverse(i), v)));
            }
        }
        let runs = std::mem::take(&mut self.runs);
        Ok(Sorted {
            sources,
            heap,
            runs,
            last: None,
        })
    }
}

impl Drop for ExternalSorter {
    fn drop(&mut self) {
        for r in &self.runs {
            let _ = std::fs::remove_file(r);
        }
    }
}

/// The key length that marks a run's end (the entry count follows).
const RUN_END: u32 = u32::MAX;
/// Longest key or value a run holds (what `Db::ingest` accepts fits well within it); a longer
/// stated length is damage, refused before anything is allocated for it.
const RUN_ENTRY_BYTES_MAX: u32 = 1 << 30;

fn entry_len(bytes: &[u8], path: &Path) -> Result<u32> {
    u32::try_from(bytes.len())
        .ok()
        .filter(|&n| n <= RUN_ENTRY_BYTES_MAX)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "an entry of {} bytes for the sort run {}",
                bytes.len(),
                path.display()
            ))
        })
}

enum Source {
    Run {
        reader: BufReader<File>,
        path: PathBuf,
        rank: usize,
        /// Entries read so far (checked against the end marker).
        read: u32,
        done: bool,
    },
    Memory(std::vec::IntoIter<(Vec<u8>, Vec<u8>)>),
}

impl Source {
    fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self {
            Source::Memory(it) => Ok(it.next()),
            Source::Run {
                reader,
                path,
                rank,
                read,
                done,
            } => {
                if *done {
                    return Ok(None);
                }
                let damaged = |what: String| Error::corruption(&*path, *rank as u64, what);
                let mut lens = [0u8; 8];
                reader
                    .read_exact(&mut lens)
                    .map_err(|e| damaged(format!("sort run ends before its end marker ({e})")))?;
                let kl = u32::from_le_bytes([lens[0], lens[1], lens[2], lens[3]]);
                let vl = u32::from_le_bytes([lens[4], lens[5], lens[6], lens[7]]);
                if kl == RUN_END {
                    if vl != *read {
                        return Err(damaged(format!(
                            "sort run holds {read} entries, its end marker says {vl}"
                        )));
                    }
                    *done = true;
                    return Ok(None);
                }
                if kl > RUN_ENTRY_BYTES_MAX || vl > RUN_ENTRY_BYTES_MAX {
                    return Err(damaged("sort run entry with an impossible length".into()));
                }
                let mut k = vec![0u8; kl as usize];
                let mut v = vec![0u8; vl as usize];
                let mut crc = [0u8; 4];
                reader
                    .read_exact(&mut k)
                    .and_then(|()| reader.read_exact(&mut v))
                    .and_then(|()| reader.read_exact(&mut crc))
                    .map_err(|e| damaged(format!("sort run: {e}")))?;
                if crc32c::crc32c_append(crc32c::crc32c(&k), &v) != u32::from_le_bytes(crc) {
                    return Err(damaged("sort run entry checksum mismatch".into()));
                }
                *read += 1;
                Ok(Some((k, v)))
            }
        }
    }
}

/// Key, source (higher = newer, so reversed), value.
type HeapEntry = (Vec<u8>, Reverse<usize>, Vec<u8>);

/// The merged, ascending stream of an [`ExternalSorter`]; yields `Err` once on an I/O error.
pub struct Sorted {
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<HeapEntry>>,
    runs: Vec<PathBuf>,
    last: Option<Vec<u8>>,
}

impl Iterator for Sorted {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let Reverse((k, Reverse(i), v)) = self.heap.pop()?;
            match self.sources[i].next_entry() {
                Ok(Some((nk, nv))) => self.heap.push(Reverse((nk, Reverse(i), nv))),
                Ok(None) => {}
                Err(e) => {
                    self.heap.clear();
                    return Some(Err(e));
                }
            }
            // Later runs hold later entries: among equal keys the highest run index comes
            // first (Reverse), so the first one seen is the newest; skip the rest.
            if self.last.as_ref() == Some(&k) {
                continue;
            }
            self.last = Some(k.clone());
            return Some(Ok((k, v)));
        }
    }
}

impl Drop for Sorted {
    fn drop(&mut self) {
        for r in &self.runs {
            let _ = std::fs::remove_file(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn sorts_across_spilled_runs_and_keeps_the_newest_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::new(dir.path(), 1).unwrap();
        let mut model = BTreeMap::new();
        let mut x: u64 = 12345;
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("{:05}", (x >> 33) % 7000).into_bytes();
            let v = i.to_le_bytes().to_vec();
            s.add(&k, &v).unwrap();
            model.insert(k, v);
        }
        assert!(s.runs() > 1);
        let got: Vec<(Vec<u8>, Vec<u8>)> = s.finish().unwrap().map(|r| r.unwrap()).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
        assert!(got == want);
        // Run files are gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A run file cut short (at an entry boundary or inside one) or with a flipped byte makes
    /// the merge fail instead of ending early: the entries it lost would silently be missing
    /// from an ingest.
    #[test]
    fn a_damaged_run_is_an_error_not_a_short_run() {
        for damage in ["cut at an entry", "cut inside an entry", "flipped byte"] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = ExternalSorter::new(dir.path(), 1).unwrap();
            for i in 0..5_000u32 {
                s.add(format!("k{i:05}").as_bytes(), b"value").unwrap();
            }
            s.spill().unwrap();
            let run = s.runs[0].clone();
            let mut bytes = std::fs::read(&run).unwrap();
            match damage {
                // Each entry: 8 length bytes, "kNNNNN", "value", a 4-byte checksum.
                "cut at an entry" => bytes.truncate(bytes.len() / 2 / 23 * 23),
                "cut inside an entry" => bytes.truncate(bytes.len() - 3),
                _ => {
                    let at = bytes.len() / 3;
                    bytes[at] ^= 0x10;
                }
            }
            std::fs::write(&run, &bytes).unwrap();
            let merged: Result<Vec<(Vec<u8>, Vec<u8>)>> = s.finish().unwrap().collect();
            assert!(merged.is_err(), "{damage}: the merge did not fail");
        }
    }
}
