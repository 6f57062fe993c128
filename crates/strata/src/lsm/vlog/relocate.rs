//! Values moved out of old value logs by compaction (RocksDB's integrated BlobDB garbage
//! collection, Titan's level merge). A compaction that writes a pointer into a value log chosen
//! as a victim (its victim share below `value_log_gc_live_ratio`, `VlogFile::victim_share`, or
//! taken by the space rule, [`choose_victims`]) copies the value into a value
//! file of its own and writes a pointer to the copy instead. The compaction already holds the
//! entry its tables keep for the key, so no lookup decides what is live and no dead value is
//! read; the copy adds no entry to the tree (garbage collection's rewrites go through the write
//! path, the memtable, a flush and the compactions after it). A victim leaves the version once
//! compactions have dropped or moved every pointer into it: its live bytes, exact for what
//! compactions have seen, reach zero.
//!
//! A value file, `wal/NNNNNN.vlog`, has the write-ahead log's format (header, then one record per
//! value: a batch of one put with sequence number 0), so reads, garbage collection and sampling
//! treat it like any value log; its own suffix keeps recovery from replaying it as a log. Its
//! number comes from the partition's file counter, like tables and logs. Every value file of a
//! compaction is fsynced, with the directory, before the manifest that lists it is written; one
//! that no manifest lists is removed on open.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::batch::{encode_batch, BatchHeader, Kind};
use crate::error::{IoContext, Result};
use crate::journal::{WalWriter, RECORD_HEADER_BYTES};
use crate::lsm::version::Version;
use crate::util::fsutil;
use crate::vfs::SharedFs;

use super::{ValuePtr, VlogFile};

/// File name suffix of value files written by compaction.
pub(crate) const MOVED_SUFFIX: &str = ".vlog";

/// A value file is closed and the next one started once it holds this many bytes, so that one
/// large compaction does not leave one file that lives until its last value dies.
const MOVED_FILE_BYTES_TARGET: u64 = 64 << 20;

/// The path of value file `number` in the log directory `dir`.
pub(crate) fn moved_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}{MOVED_SUFFIX}"))
}

/// Whether `path` names a value file (as [`moved_path`] makes them), not a write-ahead log.
pub(crate) fn is_moved_path(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.ends_with(MOVED_SUFFIX))
}

/// A value file being written: its number, writer, and the value bytes copied into it.
struct ValueFile {
    number: u64,
    writer: WalWriter,
    moved_bytes: u64,
}

/// Copies the values of victim logs that one compaction meets into new value files.
pub(crate) struct ValueMover {
    fs: SharedFs,
    dir: PathBuf,
    /// The version the compaction started from: it keeps the victims open.
    version: Arc<Version>,
    victims: HashSet<u64>,
    /// Files finished so far (written, not yet fsynced), then the one being written.
    done: Vec<ValueFile>,
    current: Option<ValueFile>,
    payload: Vec<u8>,
    offsets: Vec<u32>,
    /// Damaged values met and left in place, and the first one's error: reported once per
    /// compaction (`report_damage`), not once per value.
    damaged_values: u64,
    damaged_logs: Vec<u64>,
    first_damage: Option<crate::error::Error>,
}

/// The most a log taken for the space rule may still hold of the live bytes it was written
/// with (see [`choose_victims`]): moving a log nine tenths live frees a tenth of what it
/// copies.
pub(crate) const SPACE_RULE_LIVE_SHARE_MAX: f64 = 0.9;

/// A value log as the victim rule sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogShare {
    pub(crate) number: u64,
    pub(crate) total_bytes: u64,
    /// The share compared with the fixed threshold ([`VlogFile::victim_share`]): of a
    /// write-ahead log, the share of its size collecting it would keep; of a compaction's
    /// value file, its live bytes over those it was written with.
    pub(crate) victim_share: f64,
    /// Live bytes over the live bytes it was written with (1.0 when nothing died since).
    pub(crate) surviving_share: f64,
}

/// The logs a compaction moves the values of: every log whose live share is below
/// `live_ratio_below` (the fixed rule), and then, least live first, logs still holding under
/// [`SPACE_RULE_LIVE_SHARE_MAX`] of the live bytes they were written with, while the value
/// logs would still take more than `space_ratio_max` times the bytes their live values need
/// once the logs taken so far are moved (the space rule). A log's need is its size times its
/// `surviving_share`, so headers and keys are not garbage to the rule and a freshly
/// moved log is never moved again for space. The fixed share alone keeps a store of steady
/// overwrites at `ln(1/r) / (1 - r)` times its live values (1.23 at 0.65); raising it for
/// every store would also move values where there is little garbage (a fresh store whose
/// deletes leave logs a fifth dead), which costs reads their compactions. The space rule moves
/// more only when the logs as a whole ask for it.
pub(crate) fn choose_victims(
    logs: &[LogShare],
    live_ratio_below: f64,
    space_ratio_max: f64,
) -> HashSet<u64> {
    // Clamped: a caller's share outside 0..=1 must not make `freed` negative.
    let share = |l: &LogShare| l.surviving_share.clamp(0.0, 1.0);
    let needed: f64 = logs.iter().map(|l| l.total_bytes as f64 * share(l)).sum();
    let freed = |l: &LogShare| l.total_bytes as f64 * (1.0 - share(l));
    let mut bytes_after: f64 = logs.iter().map(|l| l.total_bytes as f64).sum();
    let mut victims = HashSet::new();
    for l in logs.iter().filter(|l| l.victim_share < live_ratio_below) {
        victims.insert(l.number);
        bytes_after -= freed(l);
    }
    if space_ratio_max.is_infinite() {
        // Off (and `bytes_after <= inf * 0` would be false when nothing is live).
        return victims;
    }
    let mut rest: Vec<&LogShare> = logs
        .iter()
        .filter(|l| !victims.contains(&l.number) && share(l) < SPACE_RULE_LIVE_SHARE_MAX)
        .collect();
    rest.sort_by(|a, b| share(a).total_cmp(&share(b)));
    for l in rest {
        if bytes_after <= space_ratio_max * needed {
            break;
        }
        victims.insert(l.number);
        bytes_after -= freed(l);
    }
    victims
}

impl ValueMover {
    /// A mover for the value logs of `version` that [`choose_victims`] picks; `None` when
    /// there is none.
    pub(crate) fn new(
        fs: SharedFs,
        dir: &Path,
        version: Arc<Version>,
        live_ratio_below: f64,
        space_ratio_max: f64,
    ) -> Option<ValueMover> {
        let logs: Vec<LogShare> = version
            .vlogs
            .values()
            .map(|f| LogShare {
                number: f.number,
                total_bytes: f.total_bytes,
                victim_share: f.victim_share(),
                surviving_share: f.surviving_share(),
            })
            .collect();
        let victims = choose_victims(&logs, live_ratio_below, space_ratio_max);
        (!victims.is_empty()).then(|| ValueMover {
            fs,
            dir: dir.to_path_buf(),
            version,
            victims,
            done: Vec::new(),
            current: None,
            payload: Vec::new(),
            offsets: Vec::new(),
            damaged_values: 0,
            damaged_logs: Vec::new(),
            first_damage: None,
        })
    }

    /// The value `p` points to when `p` points into a victim (the compaction then writes it
    /// with [`ValueMover::write`] or drops it); `None` when the pointer stays as it is.
    pub(crate) fn read_victim(&mut self, p: &ValuePtr) -> Result<Option<bytes::Bytes>> {
        if !self.victims.contains(&p.file) {
            return Ok(None);
        }
        match self.version.vlogs.get(&p.file) {
            Some(log) => match log.read(p) {
                Ok(value) => Ok(Some(value)),
                // A damaged value stays where it is, pointer and all: reads of that key go on
                // reporting it, and the compaction (and every later one) goes on with the
                // rest instead of failing on it each time.
                Err(e) if e.is_corruption() => {
                    self.damaged_values += 1;
                    if !self.damaged_logs.contains(&p.file) {
                        self.damaged_logs.push(p.file);
                    }
                    self.first_damage.get_or_insert(e);
                    Ok(None)
                }
                Err(e) => Err(e),
            },
            None => Ok(None),
        }
    }

    /// Copies `key`'s value (read at `p` by [`ValueMover::read_victim`]) into the current value
    /// file and returns the pointer to the copy. `new_number` numbers a new file.
    pub(crate) fn write(
        &mut self,
        key: &[u8],
        value: &[u8],
        p: &ValuePtr,
        new_number: &mut dyn FnMut() -> u64,
    ) -> Result<ValuePtr> {
        if self
            .current
            .as_ref()
            .is_some_and(|f| f.writer.len_bytes >= MOVED_FILE_BYTES_TARGET)
        {
            if let Some(full) = self.current.take() {
                self.done.push(full);
            }
        }
        let file = match &mut self.current {
            Some(f) => f,
            None => {
                let number = new_number();
                let writer = WalWriter::create(&*self.fs, moved_path(&self.dir, number), 0)?;
                self.current.insert(ValueFile {
                    number,
                    writer,
                    moved_bytes: 0,
                })
            }
        };
        self.payload.clear();
        encode_batch(
            &mut self.payload,
            &BatchHeader::default(),
            std::iter::once((Kind::Put, key, value)),
            Some(&mut self.offsets),
        );
        let offset = file.writer.len_bytes
            + RECORD_HEADER_BYTES
            + u64::from(self.offsets.first().copied().unwrap_or(0));
        file.writer.append(&self.payload, 0)?;
        file.moved_bytes += value.len() as u64;
        Ok(ValuePtr {
            file: file.number,
            offset,
            len: p.len,
            crc: p.crc,
        })
    }

    /// Logs the damaged values this compaction left in place: one line, an error the first
    /// time a log's damage is met in this process and a debug line after that (every later
    /// compaction over the same keys meets the same values again).
    fn report_damage(&self) {
        let Some(first) = &self.first_damage else {
            return;
        };
        let count = self.damaged_values;
        // Every damaged log is marked reported (no short-circuit).
        let mut first_time = false;
        for log in self
            .damaged_logs
            .iter()
            .filter_map(|n| self.version.vlogs.get(n))
        {
            first_time |= !log.damage_reported.swap(true, Ordering::Relaxed);
        }
        if first_time {
            tracing::error!(count, first = %first, "damaged values left in place by compaction; reads of their keys report the damage");
        } else {
            tracing::debug!(count, first = %first, "damaged values left in place by compaction");
        }
    }

    /// Writes and fsyncs every value file (and the directory) and opens them as value logs,
    /// each with its copied bytes live. `flushes`: the partition's flush count (sampling order).
    pub(crate) fn finish(mut self, flushes: u64) -> Result<Vec<Arc<VlogFile>>> {
        self.report_damage();
        self.done.extend(self.current.take());
        let mut files = Vec::with_capacity(self.done.len());
        for f in &mut self.done {
            f.writer.write_buffer()?;
            f.writer.file().sync_data().at(f.writer.path())?;
            files.push((f.number, f.writer.path().to_path_buf(), f.moved_bytes));
        }
        if !files.is_empty() {
            fsutil::sync_dir(&*self.fs, &self.dir)?;
        }
        let mut out = Vec::with_capacity(files.len());
        for (number, path, moved) in files {
            let log = VlogFile::open(self.fs.clone(), &path, number, moved, moved, 0, flushes);
            match log {
                Ok(log) => out.push(Arc::new(log)),
                Err(e) => {
                    // Not listed anywhere yet: every file of this mover goes.
                    for log in &out {
                        log.obsolete
                            .store(true, std::sync::atomic::Ordering::Release);
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Removes the value files written so far (the compaction failed: no manifest lists them).
    pub(crate) fn abandon(mut self) {
        self.report_damage();
        self.done.extend(self.current.take());
        for f in &self.done {
            if let Err(e) = self.fs.remove_file(f.writer.path()) {
                tracing::warn!(path = %f.writer.path().display(), error = %e, "could not delete an abandoned value file");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write-ahead log of `total_bytes` whose values were `density` of its bytes when
    /// written and of which `share` is still live.
    fn log(number: u64, total_bytes: u64, density: f64, share: f64) -> LogShare {
        LogShare {
            number,
            total_bytes,
            victim_share: density * share,
            surviving_share: share,
        }
    }

    fn chosen(logs: &[LogShare], below: f64, space_max: f64) -> Vec<u64> {
        let mut v: Vec<u64> = choose_victims(logs, below, space_max).into_iter().collect();
        v.sort_unstable();
        v
    }

    /// Worked by hand: the fixed share takes every log under it; the space rule then takes the
    /// least live of the rest, one at a time, only while the bytes left after moving the logs
    /// taken so far exceed the bound times the bytes the live values need.
    #[test]
    fn victims_are_the_fixed_share_then_the_least_live_while_space_asks() {
        let logs = [
            log(1, 100, 1.0, 0.5),
            log(2, 100, 1.0, 0.8),
            log(3, 100, 1.0, 0.7),
            log(4, 100, 1.0, 1.0),
        ];
        // Off: the fixed share alone.
        assert_eq!(chosen(&logs, 0.65, f64::INFINITY), vec![1]);
        // Needed 300 of 400 bytes. Bound 1.15 (345): after log 1, 350 bytes are left, so log 3
        // (the next least live) too: 320, under the bound, so log 2 stays.
        assert_eq!(chosen(&logs, 0.65, 1.15), vec![1, 3]);
        // Bound 1.0 (300): 350, 320, then log 2 (300 after it); log 4 is wholly live.
        assert_eq!(chosen(&logs, 0.65, 1.0), vec![1, 2, 3]);
        // Bound 1.4 (420): the bytes are already under it.
        assert_eq!(chosen(&logs, 0.65, 1.4), vec![1]);
        // The fixed share is taken whatever the space says.
        assert_eq!(chosen(&logs, 0.75, 2.0), vec![1, 3]);
    }

    /// Headers and keys are not garbage: logs of small values under long keys (values a
    /// fifth of the bytes) with nothing dead are never taken for space, however far their
    /// size is above their live bytes; once they lose values, the loss counts.
    #[test]
    fn the_space_rule_measures_what_died_not_the_record_overhead() {
        let fresh = [log(1, 100, 0.8, 1.0), log(2, 100, 0.8, 1.0)];
        assert!(chosen(&fresh, 0.65, 1.05).is_empty());
        let worn = [log(1, 100, 0.8, 0.85), log(2, 100, 0.8, 1.0)];
        // Needed 185 of 200 bytes; bound 1.05 (194.25): log 1 goes (its share 0.85 < 0.9).
        assert_eq!(chosen(&worn, 0.65, 1.05), vec![1]);
    }

    #[test]
    fn the_space_rule_leaves_mostly_live_logs_and_empty_sets_alone() {
        // 200 bytes for 187 needed is over a bound of 1.0, but moving a log nine tenths live or
        // more frees too little for what it copies.
        let logs = [log(1, 100, 1.0, 0.92), log(2, 100, 1.0, 0.95)];
        assert!(chosen(&logs, 0.65, 1.0).is_empty());
        assert!(chosen(&[], 0.65, 1.0).is_empty());
        // Logs with nothing live are taken by the fixed share (and freed by it).
        assert_eq!(
            chosen(&[log(7, 100, 1.0, 0.0)], 0.65, f64::INFINITY),
            vec![7]
        );
        // Off means off, also when no live byte is left to need (infinity times zero).
        assert!(chosen(&[log(7, 100, 1.0, 0.0)], 0.0, f64::INFINITY).is_empty());
    }
}
