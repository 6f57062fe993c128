//! Background work shared by every partition: a pool of worker threads that run a partition's
//! flushes, compactions, value-log collection or segment merges one step at a time, and the log
//! syncer thread that hands buffered log records to the OS (and fsyncs them under `EveryMs`).
//!
//! A partition asks for a turn through its `WorkRequest` (`util::work`).

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::error::{Error, Result};
use crate::options::SyncMode;
use crate::partition::Partition;

/// Pause before a partition whose background step failed is tried again.
const RETRY_AFTER_ERROR_MS: u64 = 200;
/// How often the syncer hands buffered records to the OS when the sync mode names no period.
const SYNCER_PERIOD_DEFAULT_MS: u64 = 100;

/// Starts a named thread.
pub(crate) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|e| Error::io(name, e))
}

/// Adds `nice` to this thread's niceness (Linux applies a thread id given as a process id to
/// that thread only). Failing only costs the priority, so it is logged, not returned.
pub(crate) fn lower_priority(nice: i32) {
    if nice == 0 {
        return;
    }
    let tid = rustix::thread::gettid();
    let res = rustix::process::getpriority_process(Some(tid))
        .and_then(|now| rustix::process::setpriority_process(Some(tid), (now + nice).min(19)));
    if let Err(e) = res {
        tracing::warn!("could not lower the priority of a background thread: {e}");
    }
}

/// A worker thread's loop: takes partition ids from `work` and runs that partition's
/// background steps until it has nothing left to do, until `stop` says so.
pub(crate) fn run_worker(partitions: &[Partition], work: &Receiver<usize>, stop: &Receiver<()>) {
    loop {
        crossbeam_channel::select! {
            recv(stop) -> _ => return,
            recv(work) -> msg => {
                let Ok(id) = msg else { return };
                let Some(p) = partitions.get(id) else {
                    debug_assert!(false, "work requested for partition {id}, which does not exist");
                    continue;
                };
                p.work_request().taken();
                loop {
                    if !stop.is_empty() {
                        return;
                    }
                    match p.background_step() {
                        Ok(true) => continue,
                        Ok(false) => break,
                        Err(e) => {
                            tracing::error!(partition = id, dir = %p.dir().display(), error = %e, "background flush/compaction failed; retrying");
                            // The pause ends early when the database closes: a close
                            // does not wait out a retry.
                            if stop.recv_timeout(Duration::from_millis(RETRY_AFTER_ERROR_MS)).is_ok() {
                                return;
                            }
                            p.work_request().request();
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// The syncer thread's loop: periodically hands buffered log records to the OS and, for
/// `EveryMs`, fsyncs them, until `stop` says so.
pub(crate) fn run_log_syncer(partitions: &[Partition], sync: SyncMode, stop: &Receiver<()>) {
    let (period, fsync) = match sync {
        SyncMode::EveryMs(ms) => (Duration::from_millis(ms), true),
        _ => (Duration::from_millis(SYNCER_PERIOD_DEFAULT_MS), false),
    };
    while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = stop.recv_timeout(period) {
        for p in partitions {
            if let Err(e) = p.sync_now(fsync) {
                tracing::error!(partition = p.id(), error = %e, "syncing the write-ahead log failed");
            }
        }
    }
}
