//! External merge sort for bulk ingest: entries arrive in any order, are sorted in memory in
//! runs of at most `run_bytes_max`, spilled to temporary run files, and merged back into one
//! ascending stream for [`crate::Db::ingest`]. For equal keys the entry added last wins.
//!
//! Run file records: `key_len u32 | value_len u32 | key | value` (little-endian), private to one
//! sort and deleted when the sorter is dropped.

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
        for (k, _, v) in self.buf.drain(..) {
            w.write_all(&(k.len() as u32).to_le_bytes())
                .and_then(|()| w.write_all(&(v.len() as u32).to_le_bytes()))
                .and_then(|()| w.write_all(&k))
                .and_then(|()| w.write_all(&v))
                .at(&path)?;
        }
        w.flush().at(&path)?;
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

enum Source {
    Run {
        reader: BufReader<File>,
        path: PathBuf,
        rank: usize,
    },
    Memory(std::vec::IntoIter<(Vec<u8>, Vec<u8>)>),
}

impl Source {
    fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self {
            Source::Memory(it) => Ok(it.next()),
            Source::Run { reader, path, rank } => {
                let mut lens = [0u8; 8];
                match reader.read_exact(&mut lens) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                    Err(e) => return Err(Error::io(&*path, e)),
                }
                let kl = u32::from_le_bytes([lens[0], lens[1], lens[2], lens[3]]) as usize;
                let vl = u32::from_le_bytes([lens[4], lens[5], lens[6], lens[7]]) as usize;
                let mut k = vec![0u8; kl];
                let mut v = vec![0u8; vl];
                reader
                    .read_exact(&mut k)
                    .and_then(|()| reader.read_exact(&mut v))
                    .map_err(|e| {
                        Error::corruption(&*path, *rank as u64, format!("sort run: {e}"))
                    })?;
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
}
