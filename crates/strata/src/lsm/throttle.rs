//! Write stalls: when flushes or level-0 compactions fall behind, writers are slowed a little
//! per write (gradually, the further behind) and then stopped, so memory and read amplification
//! stay bounded and throughput degrades smoothly instead of collapsing.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::tree::{Tree, View};
use crate::error::{Error, Result};

/// Sleep per write for each level-0 table over `l0_slowdown_tables`.
const SLOWDOWN_STEP_US: u64 = 100;
/// How long a stopped writer waits before looking again.
const STOP_RECHECK_MS: u64 = 20;
/// A stopped writer gives up with the background error after waiting this long while background
/// work keeps failing.
const STOP_ERROR_AFTER_MS: u64 = 1_000;

/// What [`Tree::throttle`] does to a writer.
enum Pace {
    Go,
    /// Sleep `SLOWDOWN_STEP_US` per step.
    Slow(u64),
    /// Wait for background work.
    Stop,
}

impl Tree {
    /// How far background work is behind, as seen by a writer now.
    fn pace(&self, v: &View) -> Pace {
        let l0 = v.version.levels[0].len();
        if v.immutables.len() >= self.opts.max_immutable_memtables || l0 >= self.opts.l0_stop_tables
        {
            Pace::Stop
        } else if l0 >= self.opts.l0_slowdown_tables {
            // Gradual: the further behind compaction is, the longer each write waits.
            Pace::Slow((l0 - self.opts.l0_slowdown_tables + 1) as u64)
        } else {
            Pace::Go
        }
    }

    /// Whether a write now would be slowed or stopped by [`Tree::throttle`].
    pub(crate) fn writes_would_wait(&self) -> bool {
        !matches!(self.pace(&self.view.load()), Pace::Go)
    }

    /// Slows writers down, then stops them, while flushes or level-0 compactions are behind,
    /// so memory and read amplification stay bounded.
    pub(super) fn throttle(&self) -> Result<()> {
        let mut waited_ms = 0u64;
        loop {
            let v = self.view.load();
            match self.pace(&v) {
                Pace::Go => return Ok(()),
                Pace::Slow(steps) => {
                    self.counters.stalls.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_micros(SLOWDOWN_STEP_US * steps));
                    return Ok(());
                }
                Pace::Stop => {}
            }
            drop(v);
            if waited_ms == 0 {
                self.counters.stalls.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(e) = self.background_error.lock().clone() {
                if waited_ms >= STOP_ERROR_AFTER_MS {
                    return Err(Error::Stalled {
                        partition: self.id,
                        reason: format!("background work is failing, writes cannot proceed: {e}"),
                    });
                }
            }
            self.work.request();
            let mut g = self.stall_lock.lock();
            self.stall_cv
                .wait_for(&mut g, Duration::from_millis(STOP_RECHECK_MS));
            waited_ms += STOP_RECHECK_MS;
        }
    }

    pub(super) fn wake_stalled(&self) {
        let _g = self.stall_lock.lock();
        self.stall_cv.notify_all();
    }
}
