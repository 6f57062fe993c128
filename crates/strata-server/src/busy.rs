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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// Whether `name` (a command, lowercase) with `args` runs while a script is busy.
pub fn allowed_while_busy(name: &str, args: &[Bytes]) -> bool {
    let sub = |word: &str| {
        args.get(1)
            .is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
    };
    ALLOWED_WHILE_BUSY.contains(&name)
        || (name == "script" && sub("kill"))
        || (name == "function" && (sub("kill") || sub("stats")))
}

/// One script or function run.
struct Run {
    /// SHUTDOWN NOSAVE stopped it: its writes are dropped, not committed.
    abandoned: Arc<AtomicBool>,
    started: Instant,
    /// EVAL or EVALSHA (SCRIPT KILL) rather than FCALL (FUNCTION KILL).
    eval: bool,
    /// FUNCTION STATS's `name` and `command`.
    name: String,
    command: Vec<Bytes>,
    /// It called a write command: it can no longer be killed.
    wrote: bool,
    kill: Arc<AtomicBool>,
}

/// The script running now, if any (scripts run one at a time under the exec lock).
#[derive(Default)]
pub struct RunningScript {
    /// Whether one runs: the one load every command's dispatch pays.
    active: AtomicBool,
    run: parking_lot::Mutex<Option<Run>>,
    /// `busy-reply-threshold`.
    threshold_ms: AtomicU64,
}

/// Ends the run it stands for when dropped.
pub struct RunGuard<'a> {
    owner: &'a RunningScript,
    /// Set by a kill: the script's Lua hook stops it.
    pub kill: Arc<AtomicBool>,
    abandoned: Arc<AtomicBool>,
}

impl RunGuard<'_> {
    /// Whether SHUTDOWN NOSAVE stopped the script: its writes must not be committed.
    pub fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        *self.owner.run.lock() = None;
        self.owner.active.store(false, Ordering::Release);
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
            threshold_ms: AtomicU64::new(ms),
            ..RunningScript::default()
        }
    }

    /// CONFIG SET busy-reply-threshold.
    pub fn set_threshold_ms(&self, ms: u64) {
        self.threshold_ms.store(ms, Ordering::Relaxed);
    }

    fn threshold(&self) -> Duration {
        Duration::from_millis(self.threshold_ms.load(Ordering::Relaxed))
    }

    /// Notes a script (`eval`) or function starting; it ends when the guard drops.
    pub fn begin(&self, eval: bool, name: &str, command: &[Bytes]) -> RunGuard<'_> {
        let kill = Arc::new(AtomicBool::new(false));
        let abandoned = Arc::new(AtomicBool::new(false));
        *self.run.lock() = Some(Run {
            abandoned: abandoned.clone(),
            started: Instant::now(),
            eval,
            name: name.to_string(),
            command: command.to_vec(),
            wrote: false,
            kill: kill.clone(),
        });
        self.active.store(true, Ordering::Release);
        RunGuard {
            owner: self,
            kill,
            abandoned,
        }
    }

    /// SHUTDOWN NOSAVE: stops the running script, if any, whatever it wrote; its writes are
    /// dropped (Redis exits without them too), so the server can stop.
    pub fn abandon(&self) {
        if let Some(run) = self.run.lock().as_ref() {
            run.abandoned.store(true, Ordering::Release);
            run.kill.store(true, Ordering::Release);
        }
    }

    /// The running script called a write command.
    pub fn note_write(&self) {
        if let Some(run) = self.run.lock().as_mut() {
            run.wrote = true;
        }
    }

    /// `Some(eval)` while a script (`eval`) or function has run past the threshold: other
    /// clients' commands are answered BUSY.
    pub fn busy(&self) -> Option<bool> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let threshold = self.threshold();
        self.run
            .lock()
            .as_ref()
            .filter(|r| r.started.elapsed() >= threshold)
            .map(|r| r.eval)
    }

    /// FUNCTION STATS's `running_script`: the function's name, its command and how long it
    /// has run (scripts run by EVAL are not shown, as in Redis).
    pub fn function_stats(&self) -> Option<(String, Vec<Bytes>, Duration)> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        self.run
            .lock()
            .as_ref()
            .filter(|r| !r.eval)
            .map(|r| (r.name.clone(), r.command.clone(), r.started.elapsed()))
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: stops the running script if it may be. Sent
    /// while a script runs but is not yet past `threshold`, it waits for one or the other, as
    /// Redis handles it only then.
    pub fn kill(&self, eval: bool) -> Result<(), KillRefused> {
        loop {
            let threshold = self.threshold();
            {
                let run = self.run.lock();
                let Some(run) = run.as_ref() else {
                    return Err(KillRefused::NotBusy);
                };
                if run.started.elapsed() >= threshold {
                    if run.wrote {
                        return Err(KillRefused::Unkillable);
                    }
                    if run.eval != eval {
                        return Err(KillRefused::OtherKind { eval: run.eval });
                    }
                    run.kill.store(true, Ordering::Release);
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
            assert!(!guard.kill.load(Ordering::Acquire));
            assert_eq!(running.kill(false), Ok(()));
            assert!(guard.kill.load(Ordering::Acquire));
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
        let kill = guard.kill.clone();
        let killer = {
            let running = running.clone();
            std::thread::spawn(move || running.kill(true))
        };
        assert_eq!(killer.join().ok(), Some(Ok(())));
        assert!(kill.load(Ordering::Acquire));
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
