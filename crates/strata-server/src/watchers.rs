//! Who watches the commands the server runs: the slow log (SLOWLOG) and MONITOR clients, in
//! memory as in Redis.
//!
//! - The slow log keeps the last `slowlog-max-len` commands whose execution took at least
//!   `slowlog-log-slower-than` microseconds (negative: none; 0: every command), newest first,
//!   each with Redis's limits on what it keeps of the arguments ([`ARGS_MAX`],
//!   [`ARG_BYTES_MAX`]).
//! - A MONITOR client receives a line per command run by anyone, in Redis's format:
//!   `<unix time>.<microseconds> [<db> <client address>|lua] "arg" ...`, arguments quoted and
//!   escaped as `sdscatrepr` does. Admin commands are not shown (Redis hides them too).
//!
//! Both show passwords as `(redacted)` (AUTH, HELLO ... AUTH, CONFIG SET requirepass).
//!
//! - Command statistics (INFO commandstats and errorstats, [`CommandStats`]): per command its
//!   calls, microseconds, calls refused before they ran and calls that failed; per error
//!   prefix (`ERR`, `WRONGTYPE`, ...) how many error replies were sent.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::pubsub::{Mailbox, Message};

/// Most arguments an entry keeps; the last kept one then says how many more there were.
pub(crate) const ARGS_MAX: usize = 32;
/// Most bytes an entry keeps of one argument.
pub(crate) const ARG_BYTES_MAX: usize = 128;

/// One slow command.
#[derive(Debug, Clone)]
pub(crate) struct SlowEntry {
    pub id: u64,
    pub at_unix_secs: i64,
    pub micros: u64,
    pub args: Vec<Bytes>,
    pub peer: Bytes,
    pub name: Bytes,
}

/// The slow log and the MONITOR clients.
pub(crate) struct Watchers {
    /// `slowlog-log-slower-than`, kept here so that no command reads the settings.
    slower_than_us: AtomicI64,
    /// `slowlog-max-len`.
    max_len: AtomicUsize,
    log: parking_lot::Mutex<(u64, VecDeque<SlowEntry>)>,
    monitor_count: AtomicUsize,
    monitors: parking_lot::Mutex<Vec<(u64, Mailbox)>>,
}

impl Watchers {
    pub fn new(slower_than_us: i64, max_len: usize) -> Watchers {
        Watchers {
            slower_than_us: AtomicI64::new(slower_than_us),
            max_len: AtomicUsize::new(max_len),
            log: parking_lot::Mutex::new((0, VecDeque::new())),
            monitor_count: AtomicUsize::new(0),
            monitors: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// Takes new settings (CONFIG SET); a shorter log drops its oldest entries.
    pub fn configure(&self, slower_than_us: i64, max_len: usize) {
        self.slower_than_us.store(slower_than_us, Ordering::Relaxed);
        self.max_len.store(max_len, Ordering::Relaxed);
        self.log.lock().1.truncate(max_len);
    }

    /// Whether commands are timed for the slow log at all.
    pub fn timing(&self) -> bool {
        self.slower_than_us.load(Ordering::Relaxed) >= 0
    }

    /// Records a command that took `micros`, if that is slow enough.
    pub fn note_duration(&self, micros: u64, args: &[Bytes], peer: &Bytes, name: Option<&Bytes>) {
        let threshold = self.slower_than_us.load(Ordering::Relaxed);
        if threshold < 0 || micros < threshold.unsigned_abs() {
            return;
        }
        let max_len = self.max_len.load(Ordering::Relaxed);
        let mut log = self.log.lock();
        let id = log.0;
        log.0 += 1;
        if max_len == 0 {
            return;
        }
        log.1.push_front(SlowEntry {
            id,
            at_unix_secs: i64::try_from(unix_micros() / 1_000_000).unwrap_or(i64::MAX),
            micros,
            args: kept_args(args),
            peer: peer.clone(),
            name: name.cloned().unwrap_or_default(),
        });
        log.1.truncate(max_len);
    }

    /// The newest `count` entries (all for `None`).
    pub fn entries(&self, count: Option<usize>) -> Vec<SlowEntry> {
        let log = self.log.lock();
        log.1
            .iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.log.lock().1.len()
    }

    pub fn reset(&self) {
        self.log.lock().1.clear();
    }

    /// Makes connection `client` a monitor.
    pub fn add_monitor(&self, client: u64, mailbox: Mailbox) {
        let mut monitors = self.monitors.lock();
        if monitors.iter().all(|(c, _)| *c != client) {
            monitors.push((client, mailbox));
            self.monitor_count.store(monitors.len(), Ordering::Release);
        }
    }

    /// Connection `client` no longer monitors (RESET, or it left).
    pub fn remove_monitor(&self, client: u64) {
        let mut monitors = self.monitors.lock();
        monitors.retain(|(c, _)| *c != client);
        self.monitor_count.store(monitors.len(), Ordering::Release);
    }

    /// Whether any client monitors (one atomic load per command when none does).
    pub fn monitored(&self) -> bool {
        self.monitor_count.load(Ordering::Acquire) > 0
    }

    /// Sends every monitor the line for `args`, run in database `db` by `source` (a client's
    /// address, or `lua`).
    pub fn feed(&self, db: u8, source: &[u8], args: &[Bytes]) {
        let mut line = String::with_capacity(64);
        let micros = unix_micros();
        let _ = write!(
            line,
            "{}.{:06} [{db} {}]",
            micros / 1_000_000,
            micros % 1_000_000,
            String::from_utf8_lossy(source)
        );
        for arg in redacted(args) {
            line.push(' ');
            repr(&arg, &mut line);
        }
        let line = Bytes::from(line);
        let mut monitors = self.monitors.lock();
        let before = monitors.len();
        monitors.retain(|(_, m)| m.deliver(Message::Monitor(line.clone())));
        if monitors.len() != before {
            self.monitor_count.store(monitors.len(), Ordering::Release);
        }
    }
}

/// Whether MONITOR clients are spared `args`: Redis hides admin commands, and for container
/// commands whether one is admin depends on the subcommand (Redis 7's command table: CONFIG
/// HELP and CLIENT SETNAME are shown, CONFIG GET and CLIENT LIST are not).
pub(crate) fn hidden_from_monitors(flags: &[&str], args: &[Bytes]) -> bool {
    const ADMIN_SUBCOMMANDS: &[(&str, &[&str])] = &[
        ("config", &["set", "get", "rewrite", "resetstat"]),
        (
            "client",
            &["pause", "kill", "list", "no-evict", "unblock", "unpause"],
        ),
        ("slowlog", &["get", "reset", "len"]),
        (
            "cluster",
            &[
                "reset",
                "set-config-epoch",
                "count-failure-reports",
                "setslot",
                "bumpepoch",
                "failover",
                "delslotsrange",
                "flushslots",
                "addslotsrange",
                "delslots",
                "replicate",
                "replicas",
                "addslots",
                "forget",
                "slaves",
                "saveconfig",
                "meet",
            ],
        ),
    ];
    let name = args.first().map(|n| n.to_ascii_lowercase());
    let container = ADMIN_SUBCOMMANDS
        .iter()
        .find(|(c, _)| name.as_deref() == Some(c.as_bytes()));
    match (container, args.get(1)) {
        (Some((_, admin)), Some(sub)) => {
            let sub = sub.to_ascii_lowercase();
            admin.iter().any(|a| a.as_bytes() == sub.as_slice())
        }
        _ => flags.contains(&"admin"),
    }
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The arguments with passwords replaced, as Redis shows them in the slow log and to monitors.
fn redacted(args: &[Bytes]) -> Vec<Bytes> {
    const HIDDEN: Bytes = Bytes::from_static(b"(redacted)");
    let mut out = args.to_vec();
    let name = out.first().map(|n| n.to_ascii_lowercase());
    match name.as_deref() {
        Some(b"auth") => out.iter_mut().skip(1).for_each(|a| *a = HIDDEN),
        Some(b"hello") => {
            // HELLO [protover [AUTH username password] [SETNAME name]]
            let mut i = 2;
            while i < out.len() {
                if out[i].eq_ignore_ascii_case(b"auth") {
                    for a in out.iter_mut().skip(i + 1).take(2) {
                        *a = HIDDEN;
                    }
                    i += 3;
                } else {
                    i += 2;
                }
            }
        }
        Some(b"config") if out.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"set")) => {
            for pair in out[2..].chunks_mut(2) {
                if let [name, value] = pair {
                    if name.eq_ignore_ascii_case(b"requirepass")
                        || name.eq_ignore_ascii_case(b"masterauth")
                    {
                        *value = HIDDEN;
                    }
                }
            }
        }
        _ => {}
    }
    out
}

/// What a slow-log entry keeps of `args` (Redis's `slowlogCreateEntry`).
fn kept_args(args: &[Bytes]) -> Vec<Bytes> {
    let args = redacted(args);
    let kept = if args.len() > ARGS_MAX {
        ARGS_MAX - 1
    } else {
        args.len()
    };
    let mut out: Vec<Bytes> = args[..kept]
        .iter()
        .map(|a| {
            if a.len() > ARG_BYTES_MAX {
                let mut s = a[..ARG_BYTES_MAX].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - ARG_BYTES_MAX).as_bytes(),
                );
                Bytes::from(s)
            } else {
                a.clone()
            }
        })
        .collect();
    if args.len() > ARGS_MAX {
        out.push(Bytes::from(format!(
            "... ({} more arguments)",
            args.len() - kept
        )));
    }
    out
}

/// `bytes` quoted as Redis's `sdscatrepr` writes it.
fn repr(bytes: &[u8], out: &mut String) {
    out.push('"');
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Error codes and subcommand names that clients choose are kept up to a bound (a client
    /// sending made-up ones cannot grow the maps); the totals still count every reply.
    #[test]
    fn command_statistics_stay_bounded() {
        let stats = CommandStats::new(["get", "config"].into_iter());
        for i in 0..1000 {
            stats.note_error(&format!("CODE{i} made up"));
            let args = [Bytes::from("config"), Bytes::from(format!("sub{i}"))];
            stats.note("config", &args, Outcome::Rejected);
        }
        stats.note(
            "get",
            &[Bytes::from("get")],
            Outcome::Ran {
                nanos: 3_000,
                failed: false,
            },
        );
        assert_eq!(stats.error_replies(), 1000);
        assert_eq!(stats.error_lines().len(), ERROR_KINDS_MAX);
        let lines = stats.command_lines();
        assert_eq!(lines.len(), SUBCOMMANDS_MAX + 1);
        assert!(lines.contains(&(
            "cmdstat_get".to_string(),
            "calls=1,usec=3,usec_per_call=3.00,rejected_calls=0,failed_calls=0".to_string()
        )));
    }

    fn words(w: &[&str]) -> Vec<Bytes> {
        w.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn repr_escapes_as_redis() {
        let mut s = String::new();
        repr(b"a b\"\\\n\r\t\x07\x08\x01\xff~", &mut s);
        assert_eq!(s, r#""a b\"\\\n\r\t\a\b\x01\xff~""#);
    }

    #[test]
    fn entries_keep_redis_limits_and_hide_passwords() {
        let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let mut args = vec!["RPUSH".to_string()];
        args.extend(many);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let kept = kept_args(&words(&args));
        assert_eq!(kept.len(), ARGS_MAX);
        assert_eq!(&kept[31][..], b"... (10 more arguments)");
        let long = "x".repeat(200);
        let kept = kept_args(&words(&["SET", "k", &long]));
        assert_eq!(kept[2].len(), 128 + "... (72 more bytes)".len());
        assert_eq!(
            redacted(&words(&["AUTH", "user", "pw"])),
            words(&["AUTH", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            redacted(&words(&["HELLO", "3", "AUTH", "u", "p", "SETNAME", "n"])),
            words(&[
                "HELLO",
                "3",
                "AUTH",
                "(redacted)",
                "(redacted)",
                "SETNAME",
                "n"
            ])
        );
    }

    #[test]
    fn the_log_keeps_the_newest_within_its_length() {
        let w = Watchers::new(0, 3);
        for i in 0..5 {
            w.note_duration(i, &words(&["GET", &i.to_string()]), &Bytes::new(), None);
        }
        let e = w.entries(None);
        assert_eq!(e.iter().map(|e| e.id).collect::<Vec<_>>(), vec![4, 3, 2]);
        assert_eq!(w.entries(Some(1)).len(), 1);
        w.configure(10, 2);
        assert_eq!(w.len(), 2);
        w.note_duration(9, &words(&["GET"]), &Bytes::new(), None);
        assert_eq!(w.len(), 2);
        w.configure(-1, 2);
        assert!(!w.timing());
        w.reset();
        assert_eq!(w.len(), 0);
    }
}

/// One command's counters (Redis's `cmdstat_<name>`) and its latencies.
#[derive(Default)]
struct CommandCounters {
    calls: AtomicU64,
    micros: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    latency: Latencies,
}

/// Powers of two of nanoseconds a [`Latencies`] tells apart (2^40 ns is about 18 minutes;
/// longer runs count there).
const LATENCY_EXPONENTS: usize = 40;
/// Bits after the leading one that choose a slot: eight slots per power of two, so a value is
/// kept to an eighth of its size (Redis's histograms keep two significant digits).
const LATENCY_SUB_BITS: usize = 3;
const LATENCY_SLOTS_PER_EXPONENT: usize = 1 << LATENCY_SUB_BITS;
const LATENCY_SLOTS: usize = LATENCY_SLOTS_PER_EXPONENT * LATENCY_EXPONENTS;

/// A command's run times (LATENCY HISTOGRAM, INFO latencystats): counts per slot of
/// nanoseconds, eight slots per power of two, added to with relaxed atomics (no lock on the
/// command path).
pub(crate) struct Latencies {
    slots: [AtomicU64; LATENCY_SLOTS],
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The slot of a run of `nanos`: the value itself below 8, else its power of two and the
/// three bits after its leading one.
fn latency_slot(nanos: u64) -> usize {
    const PER: usize = LATENCY_SLOTS_PER_EXPONENT;
    if nanos < PER as u64 {
        return nanos as usize;
    }
    let exponent = 63 - nanos.leading_zeros() as usize;
    let sub = ((nanos >> (exponent - LATENCY_SUB_BITS)) as usize) & (PER - 1);
    (PER * (exponent - LATENCY_SUB_BITS + 1) + sub).min(LATENCY_SLOTS - 1)
}

/// The largest number of nanoseconds slot `i` holds.
fn latency_slot_top(i: usize) -> u64 {
    const PER: usize = LATENCY_SLOTS_PER_EXPONENT;
    if i < PER {
        return i as u64;
    }
    let shift = i / PER - 1;
    let sub = (i % PER) as u64;
    ((PER as u64 + sub) << shift) + (1 << shift) - 1
}

impl Latencies {
    fn add(&self, nanos: u64, n: u64) {
        self.slots[latency_slot(nanos)].fetch_add(n, Ordering::Relaxed);
    }

    fn counts(&self) -> Vec<u64> {
        self.slots
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .collect()
    }

    fn reset(&self) {
        for s in &self.slots {
            s.store(0, Ordering::Relaxed);
        }
    }
}

/// The run time, in microseconds, that `percent` of the runs in `counts` (per slot) took at
/// most; `None` without runs.
pub(crate) fn latency_percentile(counts: &[u64], percent: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    // Rounded to the nearest run, as HdrHistogram (Redis's) counts it.
    let wanted = (((percent / 100.0) * total as f64) + 0.5).max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in counts.iter().enumerate() {
        seen += n;
        if seen >= wanted {
            return Some(latency_slot_top(i) as f64 / 1000.0);
        }
    }
    None
}

/// LATENCY HISTOGRAM's buckets: powers of two of nanoseconds from 1024, each with the runs
/// that took at most that long, listed where the count grows (as Redis lists them), labelled
/// in microseconds as Redis labels them (its histogram's highest equivalent value: 1, 2, 4,
/// 8, 16, 33, 66, 132...).
pub(crate) fn latency_buckets(counts: &[u64]) -> Vec<(u64, u64)> {
    // Runs per power of two: a slot of exponent e holds values below 2^(e+1).
    let mut per_bound: Vec<u64> = vec![0; LATENCY_EXPONENTS + 1];
    for (i, n) in counts.iter().enumerate() {
        if *n == 0 {
            continue;
        }
        let top = latency_slot_top(i).max(1);
        let bound_exponent = (64 - top.leading_zeros() as usize).clamp(10, LATENCY_EXPONENTS);
        per_bound[bound_exponent] += n;
    }
    let mut cumulative = 0;
    per_bound
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(e, n)| {
            cumulative += n;
            let label = ((1u64 << e) + (1u64 << (e - 7)) - 1) / 1000;
            (label, cumulative)
        })
        .collect()
}

/// Commands whose statistics Redis keeps per subcommand (`cmdstat_config|get`), of those this
/// server has.
const PER_SUBCOMMAND: &[&str] = &[
    "client", "cluster", "command", "config", "object", "pubsub", "script", "slowlog", "memory",
    "latency", "acl", "function", "module",
];

/// Most error codes INFO errorstats keeps (Redis's `ERRORSTATS_LIMIT`).
const ERROR_KINDS_MAX: usize = 128;
/// Most `command|subcommand` names INFO commandstats keeps.
const SUBCOMMANDS_MAX: usize = 256;

/// INFO commandstats and errorstats: counters per command (fixed at start: every name of the
/// command table, so a command costs a map look-up and a few relaxed additions, no lock) and
/// per subcommand of the commands Redis counts that way, and error replies per prefix.
pub(crate) struct CommandStats {
    /// Keyed by the command's static name, looked up on every command (Fx: a few
    /// multiplications for a short name, where the standard SipHash was 1-2 % of a PING).
    by_name: HashMap<&'static str, CommandCounters, rustc_hash::FxBuildHasher>,
    by_subcommand: parking_lot::Mutex<BTreeMap<String, [u64; 4]>>,
    errors: parking_lot::Mutex<BTreeMap<String, u64>>,
    error_replies: AtomicU64,
}

/// What happened to a command, for [`CommandStats::note`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It ran and answered (an error reply included when `failed`), in `nanos`.
    Ran { nanos: u64, failed: bool },
    /// Refused before it ran (arity, authentication, inside MULTI, cluster routing).
    Rejected,
}

impl CommandStats {
    /// Counters for every command named in `names` (those counted per subcommand apart).
    pub fn new(names: impl Iterator<Item = &'static str>) -> CommandStats {
        CommandStats {
            by_name: names
                .filter(|n| !PER_SUBCOMMAND.contains(n))
                .map(|n| (n, CommandCounters::default()))
                .collect(),
            by_subcommand: parking_lot::Mutex::new(BTreeMap::new()),
            errors: parking_lot::Mutex::new(BTreeMap::new()),
            error_replies: AtomicU64::new(0),
        }
    }

    /// Counts one command `name` (its arguments `args`).
    /// A command's calls and run times per latency slot, if it was called (LATENCY
    /// HISTOGRAM, INFO latencystats; commands counted per subcommand are not kept).
    pub fn latencies(&self, name: &str) -> Option<(u64, Vec<u64>)> {
        let c = self.by_name.get(name)?;
        let calls = c.calls.load(Ordering::Relaxed);
        (calls > 0).then(|| (calls, c.latency.counts()))
    }

    /// The names of the commands that were called, in order.
    pub fn called(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self
            .by_name
            .iter()
            .filter(|(_, c)| c.calls.load(Ordering::Relaxed) > 0)
            .map(|(n, _)| *n)
            .collect();
        names.sort_unstable();
        names
    }

    pub fn note(&self, name: &'static str, args: &[Bytes], outcome: Outcome) {
        let Some(c) = self.by_name.get(name) else {
            // A command counted per subcommand. A refused one's subcommand was not checked:
            // past SUBCOMMANDS_MAX names, new ones are not counted (an unauthenticated client
            // could otherwise grow the map with made-up names).
            let Some(sub) = args.get(1) else {
                return;
            };
            let key = format!(
                "{name}|{}",
                String::from_utf8_lossy(sub).to_ascii_lowercase()
            );
            let mut map = self.by_subcommand.lock();
            if !map.contains_key(&key) && map.len() >= SUBCOMMANDS_MAX {
                return;
            }
            let c = map.entry(key).or_default();
            match outcome {
                Outcome::Ran { nanos, failed } => {
                    c[0] += 1;
                    c[1] += nanos / 1000;
                    c[3] += u64::from(failed);
                }
                Outcome::Rejected => c[2] += 1,
            }
            return;
        };
        match outcome {
            Outcome::Ran { nanos, failed } => {
                c.calls.fetch_add(1, Ordering::Relaxed);
                c.micros.fetch_add(nanos / 1000, Ordering::Relaxed);
                c.latency.add(nanos, 1);
                if failed {
                    c.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            Outcome::Rejected => {
                c.rejected.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts `n` calls of `name` that took `micros` in all (merged runs of SETs: each is
    /// taken to have run for the mean).
    pub fn note_run(&self, name: &'static str, n: u64, micros: u64) {
        if let Some(c) = self.by_name.get(name) {
            c.calls.fetch_add(n, Ordering::Relaxed);
            c.micros.fetch_add(micros, Ordering::Relaxed);
            if let Some(mean_nanos) = micros.saturating_mul(1000).checked_div(n) {
                c.latency.add(mean_nanos, n);
            }
        }
    }

    /// Counts an error reply whose text is `message` (by its first word, as Redis).
    pub fn note_error(&self, message: &str) {
        self.error_replies.fetch_add(1, Ordering::Relaxed);
        let prefix = message.split(' ').next().unwrap_or("ERR");
        let mut errors = self.errors.lock();
        // Scripts choose their error codes: as Redis, past ERROR_KINDS_MAX codes new ones are
        // not tracked (their replies still count in the total).
        if let Some(n) = errors.get_mut(prefix) {
            *n += 1;
        } else if errors.len() < ERROR_KINDS_MAX {
            errors.insert(prefix.to_string(), 1);
        }
    }

    /// Error replies sent (INFO stats `total_error_replies`).
    pub fn error_replies(&self) -> u64 {
        self.error_replies.load(Ordering::Relaxed)
    }

    /// INFO commandstats' lines: commands that were called or refused, by name.
    pub fn command_lines(&self) -> Vec<(String, String)> {
        let line = |calls: u64, micros: u64, rejected: u64, failed: u64| {
            let per_call = if calls == 0 {
                0.0
            } else {
                micros as f64 / calls as f64
            };
            format!(
                "calls={calls},usec={micros},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}"
            )
        };
        let mut lines: Vec<(String, String)> = self
            .by_name
            .iter()
            .filter_map(|(name, c)| {
                let calls = c.calls.load(Ordering::Relaxed);
                let rejected = c.rejected.load(Ordering::Relaxed);
                let failed = c.failed.load(Ordering::Relaxed);
                (calls + rejected + failed > 0).then(|| {
                    let micros = c.micros.load(Ordering::Relaxed);
                    (
                        format!("cmdstat_{name}"),
                        line(calls, micros, rejected, failed),
                    )
                })
            })
            .collect();
        for (name, c) in self.by_subcommand.lock().iter() {
            lines.push((format!("cmdstat_{name}"), line(c[0], c[1], c[2], c[3])));
        }
        lines.sort();
        lines
    }

    /// INFO errorstats' lines.
    pub fn error_lines(&self) -> Vec<(String, String)> {
        self.errors
            .lock()
            .iter()
            .map(|(prefix, n)| (format!("errorstat_{prefix}"), format!("count={n}")))
            .collect()
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for c in self.by_name.values() {
            for a in [&c.calls, &c.micros, &c.rejected, &c.failed] {
                a.store(0, Ordering::Relaxed);
            }
            c.latency.reset();
        }
        self.by_subcommand.lock().clear();
        self.errors.lock().clear();
        self.error_replies.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod latency_tests {
    use super::*;

    /// Every run time falls in the slot whose range holds it: at most the slot's top, above
    /// the top of the slot before; and a slot's top is within a quarter of the values in it.
    #[test]
    fn slots_hold_their_values() {
        let mut values: Vec<u64> = (0..5000).collect();
        values.extend((0..62).flat_map(|e| [1u64 << e, (1u64 << e) + 1, (3u64 << e) / 2]));
        for v in values {
            let i = latency_slot(v);
            if i == LATENCY_SLOTS - 1 {
                continue;
            }
            assert!(latency_slot_top(i) >= v, "{v} above its slot {i}");
            if i > 0 {
                assert!(latency_slot_top(i - 1) < v, "{v} belongs before slot {i}");
            }
            assert!(
                latency_slot_top(i) <= v + v / 8,
                "slot {i} too wide for {v}"
            );
        }
    }

    #[test]
    fn percentiles_and_buckets_of_known_runs() {
        let l = Latencies::default();
        l.add(1_000, 990);
        l.add(5_000, 9);
        l.add(1_000_000, 1);
        let counts = l.counts();
        let p50 = latency_percentile(&counts, 50.0).unwrap();
        assert!((1.0..=1.125).contains(&p50), "{p50}");
        let p99 = latency_percentile(&counts, 99.0).unwrap();
        assert!((1.0..=1.125).contains(&p99), "{p99}");
        let p999 = latency_percentile(&counts, 99.9).unwrap();
        assert!((5.0..=5.625).contains(&p999), "{p999}");
        let p100 = latency_percentile(&counts, 100.0).unwrap();
        assert!((1000.0..=1125.0).contains(&p100), "{p100}");
        // 1 µs runs in the 1024 ns bucket, 5 µs ones in 8192, 1 ms in 2^20 ns, with Redis's
        // labels for those buckets.
        assert_eq!(
            latency_buckets(&counts),
            vec![(1, 990), (8, 999), (1056, 1000)]
        );
        assert_eq!(latency_percentile(&vec![0; LATENCY_SLOTS], 50.0), None);
        assert!(latency_buckets(&vec![0; LATENCY_SLOTS]).is_empty());
    }
}
