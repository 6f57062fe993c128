//! The script or function running now, as Redis tracks it for a long script: once one has run
//! past `busy-reply-threshold` (alias `lua-time-limit`, 5 000 ms by default) every other
//! client's command is answered BUSY (except those Redis flags `allow_busy`: AUTH, HELLO,
//! MULTI, DISCARD, WATCH, UNWATCH, QUIT, RESET, SHUTDOWN NOSAVE, SCRIPT KILL, FUNCTION KILL,
//! FUNCTION STATS), and SCRIPT KILL or FUNCTION KILL stops it if it has not written yet.
//!
//! A script holds the exec lock exclusively on the blocking pool (`conn.rs`), so the network
//! threads go on answering while it runs. It is stopped only by a kill (its Lua hook looks at
//! the flag every few thousand instructions) or by SHUTDOWN NOSAVE, never by the clock: a
//! long script is allowed to finish, as in Redis.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::error::Error;

/// Redis's reply to commands while a script (EVAL) is busy.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// Redis's reply to commands while a function (FCALL) is busy.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// The error a killed script ends with (placed at its line like any script error).
pub const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// How often SCRIPT KILL, sent before the script is busy, looks again (Redis handles it only
/// once the script is past the threshold, or after it ended).
const KILL_POLL: Duration = Duration::from_millis(5);

/// How long one timed attempt at the exec lock waits before looking whether the script holding
/// it became busy.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// Waits for a lock with `take` (a timed attempt), giving up once the running script is busy:
/// `Err(eval)` then, for [`busy_error`]. A command that was waiting for a script to end is
/// answered BUSY once it is past the threshold, as Redis answers it then.
pub fn wait_unless_busy<G>(
    running: &RunningScript,
    mut take: impl FnMut(Duration) -> Option<G>,
) -> Result<G, bool> {
    loop {
        if let Some(guard) = take(LOCK_POLL) {
            return Ok(guard);
        }
        if let Some(eval) = running.busy() {
            return Err(eval);
        }
    }
}

/// The commands a busy script does not refuse (Redis's `allow_busy` flag; SHUTDOWN checks
/// NOSAVE itself).
const ALLOWED_WHILE_BUSY: &[&str] = &[
    "auth", "discard", "hello", "multi", "quit", "reset", "shutdown", "unwatch", "watch",
];

/// The BUSY error for a script (`eval`) or a function.
pub fn busy_error(eval: bool) -> Error {
    Error::Coded(if eval { BUSY_EVAL } else { BUSY_FUNCTION }.into())
}

/// Containers whose listed subcommands a busy script does not refuse either.
const SUBCOMMANDS_ALLOWED_WHILE_BUSY: &[(&str, &[&str])] =
    &[("script", &["kill"]), ("function", &["kill", "stats"])];

/// Whether `name` (a command, lowercase) may run while a script is busy with some arguments
/// (then [`allowed_while_busy`] tells).
pub fn may_run_while_busy(name: &str) -> bool {
    ALLOWED_WHILE_BUSY.contains(&name)
        || SUBCOMMANDS_ALLOWED_WHILE_BUSY
            .iter()
            .any(|(container, _)| *container == name)
}

/// Whether `name` (a command, lowercase) with `args` runs while a script is busy.
pub fn allowed_while_busy(name: &str, args: &[Bytes]) -> bool {
    ALLOWED_WHILE_BUSY.contains(&name)
        || SUBCOMMANDS_ALLOWED_WHILE_BUSY
            .iter()
            .any(|(container, subs)| {
                *container == name
                    && args
                        .get(1)
                        .is_some_and(|a| subs.iter().any(|w| a.eq_ignore_ascii_case(w.as_bytes())))
            })
}

/// A run's stop flag: what its Lua hook reads.
pub const RUNNING: u8 = 0;
/// SCRIPT KILL or FUNCTION KILL stopped it.
pub const KILLED_FLAG: u8 = 1;
/// SHUTDOWN NOSAVE (or a shutdown's drain) stopped it: its writes are dropped, not committed.
pub const ABANDONED: u8 = 2;

/// The script running now, if any (scripts run one at a time under the exec lock). What every
/// command reads while one runs (`busy`) and what its writes set (`note_write`) are atomics;
/// the mutex orders a run's start and end against kills, so a kill never reaches the next run.
pub struct RunningScript {
    /// The clock `started_us` counts from.
    epoch: Instant,
    /// When the running script started, in µs since `epoch` plus one; 0 while none runs.
    started_us: AtomicU64,
    /// The running one is a script (EVAL, EVALSHA), not a function (FCALL).
    eval: AtomicBool,
    /// It called a write command: it can no longer be killed (Redis's write-dirty flag).
    wrote: AtomicBool,
    /// The running one's stop flag ([`RUNNING`], [`KILLED_FLAG`], [`ABANDONED`]), shared with
    /// its Lua hook; a new one per run.
    run: parking_lot::Mutex<Option<Run>>,
    /// `busy-reply-threshold`.
    threshold_ms: AtomicU64,
}

/// What a run keeps behind the mutex.
struct Run {
    stop: Arc<AtomicU8>,
    /// FUNCTION STATS's `name` and `command` (functions only: EVAL is not shown).
    function: Option<(String, Vec<Bytes>)>,
}

/// Ends the run it stands for when dropped.
pub struct RunGuard<'a> {
    owner: &'a RunningScript,
    /// Set by a kill or a shutdown: the script's Lua hook stops it.
    pub stop: Arc<AtomicU8>,
}

impl RunGuard<'_> {
    /// Whether SHUTDOWN NOSAVE stopped the script: its writes must not be committed.
    pub fn abandoned(&self) -> bool {
        self.stop.load(Ordering::Acquire) == ABANDONED
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        let mut run = self.owner.run.lock();
        self.owner.started_us.store(0, Ordering::Release);
        *run = None;
    }
}

/// Why a kill was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum KillRefused {
    /// No script runs.
    NotBusy,
    /// It wrote already.
    Unkillable,
    /// SCRIPT KILL of a function, or FUNCTION KILL of a script: the BUSY error naming the
    /// right one.
    OtherKind { eval: bool },
}

impl KillRefused {
    pub fn into_error(self) -> Error {
        Error::Coded(match self {
            KillRefused::NotBusy => "NOTBUSY No scripts in execution right now.".into(),
            KillRefused::Unkillable => "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into(),
            KillRefused::OtherKind { eval } => {
                if eval { BUSY_EVAL } else { BUSY_FUNCTION }.into()
            }
        })
    }
}

impl RunningScript {
    pub fn with_threshold_ms(ms: u64) -> RunningScript {
        RunningScript {
            epoch: Instant::now(),
            started_us: AtomicU64::new(0),
            eval: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            run: parking_lot::Mutex::new(None),
            threshold_ms: AtomicU64::new(ms),
        }
    }

    /// CONFIG SET busy-reply-threshold (the configuration keeps it too; this copy is what
    /// every command reads while a script runs, without cloning the configuration).
    pub fn set_threshold_ms(&self, ms: u64) {
        self.threshold_ms.store(ms, Ordering::Relaxed);
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// How long the running script has run, if one runs.
    fn running_for(&self) -> Option<Duration> {
        let started = self.started_us.load(Ordering::Acquire);
        (started != 0).then(|| Duration::from_micros(self.now_us().saturating_sub(started - 1)))
    }

    fn past_threshold(&self) -> bool {
        let threshold = Duration::from_millis(self.threshold_ms.load(Ordering::Relaxed));
        self.running_for().is_some_and(|ran| ran >= threshold)
    }

    /// Notes a script (`eval`) or function starting (`command` is kept for FUNCTION STATS,
    /// functions only); it ends when the guard drops.
    pub fn begin(&self, eval: bool, name: &str, command: &[Bytes]) -> RunGuard<'_> {
        let stop = Arc::new(AtomicU8::new(RUNNING));
        let mut run = self.run.lock();
        *run = Some(Run {
            stop: stop.clone(),
            function: (!eval).then(|| (name.to_string(), command.to_vec())),
        });
        self.eval.store(eval, Ordering::Relaxed);
        self.wrote.store(false, Ordering::Relaxed);
        self.started_us
            .store(self.now_us().saturating_add(1), Ordering::Release);
        drop(run);
        RunGuard { owner: self, stop }
    }

    /// SHUTDOWN NOSAVE: stops the running script, if any, whatever it wrote; its writes are
    /// dropped (Redis exits without them too), so the server can stop.
    pub fn abandon(&self) {
        if let Some(run) = self.run.lock().as_ref() {
            run.stop.store(ABANDONED, Ordering::Release);
        }
    }

    /// The running script called a write command.
    pub fn note_write(&self) {
        self.wrote.store(true, Ordering::Relaxed);
    }

    /// `Some(eval)` while a script (`eval`) or function has run past the threshold: other
    /// clients' commands are answered BUSY.
    pub fn busy(&self) -> Option<bool> {
        self.past_threshold()
            .then(|| self.eval.load(Ordering::Relaxed))
    }

    /// FUNCTION STATS's `running_script`: the function's name, its command and how long it
    /// has run (scripts run by EVAL are not shown, as in Redis).
    pub fn function_stats(&self) -> Option<(String, Vec<Bytes>, Duration)> {
        let run = self.run.lock();
        let (name, command) = run.as_ref()?.function.clone()?;
        Some((name, command, self.running_for()?))
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: stops the running script if it may be. Sent
    /// while a script runs but is not yet past the threshold, it waits for one or the other,
    /// as Redis handles it only then.
    pub fn kill(&self, eval: bool) -> Result<(), KillRefused> {
        loop {
            {
                let run = self.run.lock();
                let Some(run) = run.as_ref() else {
                    return Err(KillRefused::NotBusy);
                };
                if self.past_threshold() {
                    if self.wrote.load(Ordering::Relaxed) {
                        return Err(KillRefused::Unkillable);
                    }
                    let running_eval = self.eval.load(Ordering::Relaxed);
                    if running_eval != eval {
                        return Err(KillRefused::OtherKind { eval: running_eval });
                    }
                    let _ = run.stop.compare_exchange(
                        RUNNING,
                        KILLED_FLAG,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    return Ok(());
                }
            }
            std::thread::sleep(KILL_POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_follow_redis_rules() {
        let running = RunningScript::with_threshold_ms(0);
        assert_eq!(running.kill(true), Err(KillRefused::NotBusy));
        assert_eq!(running.busy(), None);
        {
            let guard = running.begin(false, "f", &[]);
            assert_eq!(running.busy(), Some(false));
            running.set_threshold_ms(3_600_000);
            assert_eq!(running.busy(), None);
            running.set_threshold_ms(0);
            assert_eq!(
                running.kill(true),
                Err(KillRefused::OtherKind { eval: false })
            );
            assert_eq!(guard.stop.load(Ordering::Acquire), RUNNING);
            assert_eq!(running.kill(false), Ok(()));
            assert_eq!(guard.stop.load(Ordering::Acquire), KILLED_FLAG);
        }
        assert_eq!(running.busy(), None);
        let _guard = running.begin(true, "sha", &[]);
        running.note_write();
        assert_eq!(running.kill(true), Err(KillRefused::Unkillable));
    }

    #[test]
    fn an_early_kill_waits_for_the_threshold_or_the_end() {
        let running = Arc::new(RunningScript::with_threshold_ms(50));
        let guard = running.begin(true, "sha", &[]);
        let stop = guard.stop.clone();
        let killer = {
            let running = running.clone();
            std::thread::spawn(move || running.kill(true))
        };
        assert_eq!(killer.join().ok(), Some(Ok(())));
        assert_eq!(stop.load(Ordering::Acquire), KILLED_FLAG);
        drop(guard);
        running.set_threshold_ms(3_600_000);
        let guard = running.begin(true, "sha", &[]);
        let killer = {
            let running = running.clone();
            std::thread::spawn(move || running.kill(true))
        };
        std::thread::sleep(Duration::from_millis(30));
        drop(guard);
        assert_eq!(killer.join().ok(), Some(Err(KillRefused::NotBusy)));
    }
}
