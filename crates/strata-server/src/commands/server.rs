//! Server commands: INFO, CONFIG GET/SET/RESETSTAT, COMMAND (COUNT/INFO/DOCS/LIST), SAVE,
//! BGSAVE, LASTSAVE, SHUTDOWN, TIME. COMMAND answers from the same table the dispatcher uses.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::connection::REDIS_COMPAT_VERSION;
use super::{is, table, text, Ctx, Spec, ADMIN};
use crate::config::ServerConfig;
use crate::error::{Error, Result};
use crate::glob;
use crate::keyspace;
use crate::resp::Reply;
use crate::state::lock;
use crate::state::{unix_secs, AfterReply};

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "info", arity: -1, flags: &["loading", "stale"], keys: (0, 0, 0), group: "server", summary: "Returns information and statistics about the server and the engine.", handler: info },
    Spec { name: "config", arity: -2, flags: ADMIN, keys: (0, 0, 0), group: "server", summary: "CONFIG GET, SET, RESETSTAT.", handler: config },
    Spec { name: "command", arity: -1, flags: &["loading", "stale"], keys: (0, 0, 0), group: "server", summary: "Returns details about commands (COUNT, INFO, DOCS, LIST).", handler: command },
    Spec { name: "save", arity: 1, flags: ADMIN, keys: (0, 0, 0), group: "server", summary: "Flushes memtables to table files and waits.", handler: save },
    Spec { name: "bgsave", arity: -1, flags: ADMIN, keys: (0, 0, 0), group: "server", summary: "Flushes memtables to table files in the background.", handler: bgsave },
    Spec { name: "lastsave", arity: 1, flags: &["loading", "stale", "fast"], keys: (0, 0, 0), group: "server", summary: "Returns the Unix time of the last successful save.", handler: lastsave },
    Spec { name: "shutdown", arity: -1, flags: ADMIN, keys: (0, 0, 0), group: "server", summary: "Stops the server after flushing the write-ahead logs.", handler: shutdown },
    Spec { name: "memory", arity: -2, flags: &["readonly"], keys: (2, 2, 1), group: "server", summary: "Estimates the bytes a key takes in the store (MEMORY USAGE).", handler: memory },
    Spec { name: "role", arity: 1, flags: &["noscript", "loading", "stale", "fast"], keys: (0, 0, 0), group: "server", summary: "Returns the replication role.", handler: role },
    Spec { name: "slowlog", arity: -2, flags: ADMIN, keys: (0, 0, 0), group: "server", summary: "SLOWLOG GET, LEN, RESET: the commands that took longest to run.", handler: slowlog },
    Spec { name: "monitor", arity: 1, flags: ADMIN, keys: (0, 0, 0), group: "server", summary: "Streams every command the server runs to this connection.", handler: monitor },
    Spec { name: "lolwut", arity: -1, flags: &["readonly", "fast"], keys: (0, 0, 0), group: "server", summary: "Displays computer art and the Redis version", handler: lolwut },
    Spec { name: "time", arity: 1, flags: &["loading", "stale", "fast"], keys: (0, 0, 0), group: "server", summary: "Returns the server time.", handler: time },
];

/// INFO sections in output order; `all` and `everything` print all of them, `default` (and no
/// argument) all but `commandstats`, as Redis.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "engine",
];

fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let asked: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = asked
        .iter()
        .any(|a| matches!(a.as_str(), "all" | "everything"));
    let default = asked.is_empty() || asked.iter().any(|a| a == "default");
    let mut out = String::new();
    for section in SECTIONS {
        let wanted = all
            || (default && !matches!(*section, "commandstats" | "latencystats"))
            || asked.iter().any(|a| a == section);
        if !wanted {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut title = section.to_string();
        if let Some(first) = title.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        let _ = write!(out, "# {title}\r\n");
        for (k, v) in info_section(ctx, section)? {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    Ok(Reply::Verbatim(out))
}

/// INFO keyspace: keys, keys with an expiry time and their average time left, per database.
/// Counting walks every key (the engine keeps no count): a result that took more than
/// `KEYSPACE_EXACT_COST_MAX` to compute is reused for `KEYSPACE_REUSE_FACTOR` times that, so
/// monitoring that polls INFO costs at most about 1 % of a core however large the store; small
/// stores always get exact counts (and DBSIZE is always exact).
fn keyspace_lines(ctx: &Ctx<'_>, config: &ServerConfig) -> Result<Vec<(String, String)>> {
    Ok(keyspace_tallies(ctx, config)?
        .into_iter()
        .map(|(logical, t)| {
            let avg_ttl = t
                .ttl_left_ms
                .checked_div(u128::from(t.expires))
                .unwrap_or(0);
            (
                format!("db{logical}"),
                format!("keys={},expires={},avg_ttl={avg_ttl}", t.keys, t.expires),
            )
        })
        .collect())
}

/// The tally of each logical database that holds keys: a walk of every key, reused while an
/// expensive one is recent (INFO keyspace and MEMORY STATS share it).
fn keyspace_tallies(ctx: &Ctx<'_>, config: &ServerConfig) -> Result<Vec<(usize, keyspace::Tally)>> {
    let mut cache = lock(&ctx.shared.keyspace_info);
    if let Some((at, cost, tallies)) = cache.as_ref() {
        if *cost > KEYSPACE_EXACT_COST_MAX && at.elapsed() < *cost * KEYSPACE_REUSE_FACTOR {
            return Ok(tallies.clone());
        }
    }
    let started = Instant::now();
    let now = keyspace::now_ms();
    let mut tallies = Vec::new();
    for logical in 0..config.databases {
        let index = keyspace::DbIndex::try_from(logical).unwrap_or(keyspace::DbIndex::MAX);
        let t = keyspace::tally(ctx.db(), ctx.shared.physical_db(index), now)?;
        if t.keys > 0 {
            tallies.push((logical, t));
        }
    }
    *cache = Some((Instant::now(), started.elapsed(), tallies.clone()));
    Ok(tallies)
}

/// How many times its own computing time an expensive INFO keyspace result is reused.
const KEYSPACE_REUSE_FACTOR: u32 = 100;
/// INFO keyspace results cheaper than this are never reused.
const KEYSPACE_EXACT_COST_MAX: Duration = Duration::from_millis(10);

fn info_section(ctx: &Ctx<'_>, section: &str) -> Result<Vec<(String, String)>> {
    let s = ctx.shared;
    let c = &s.counters;
    let config = s.config();
    let kv = |k: &str, v: String| (k.to_string(), v);
    Ok(match section {
        "server" => {
            let uptime = s.started.elapsed().as_secs();
            vec![
                kv("redis_version", REDIS_COMPAT_VERSION.into()),
                kv("strata_version", env!("CARGO_PKG_VERSION").into()),
                kv(
                    "redis_mode",
                    if s.cluster.is_some() {
                        "cluster"
                    } else {
                        "standalone"
                    }
                    .into(),
                ),
                kv(
                    "os",
                    format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
                ),
                kv("arch_bits", (usize::BITS).to_string()),
                kv("process_id", std::process::id().to_string()),
                kv("tcp_port", config.port.to_string()),
                kv("run_id", s.run_id.clone()),
                kv("uptime_in_seconds", uptime.to_string()),
                kv("uptime_in_days", (uptime / 86_400).to_string()),
                // Active expiry's fixed tick (`expire.rs`), shown as CONFIG GET hz shows it.
                kv("hz", "10".into()),
                kv("configured_hz", "10".into()),
                // Redis's LRU clock: seconds, in 24 bits.
                kv("lru_clock", ((unix_secs()) & 0xFF_FFFF).to_string()),
                kv(
                    "executable",
                    std::env::current_exe()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                ),
                kv("config_file", config_file(ctx)),
                kv("server_time_usec", unix_micros().to_string()),
                kv("multiplexing_api", "epoll".into()),
            ]
        }
        "clients" => vec![
            kv(
                "connected_clients",
                c.connected_clients.load(Ordering::Relaxed).to_string(),
            ),
            kv("maxclients", config.maxclients.to_string()),
            // Clients waiting in BLPOP, BZPOPMIN and the other blocking pops (test harnesses
            // written for Redis poll this to know a client is waiting).
            // ... and those CLIENT PAUSE holds, as Redis 7.0 counts them.
            kv(
                "blocked_clients",
                (s.list_waiters.waiting() + s.pause.held()).to_string(),
            ),
            kv("tracking_clients", s.watches.tracking.stats().0.to_string()),
        ],
        "memory" => {
            // The process's resident memory is what it uses: the engine's caches and
            // memtables are its own allocations, each under its limit.
            let rss = resident_bytes().unwrap_or(0);
            // The kernel's high-water mark of the resident set, whenever it was reached.
            let peak = peak_resident_bytes().unwrap_or(rss).max(rss);
            let system = system_memory_bytes().unwrap_or(0);
            let (libraries, functions) = {
                let registry = crate::state::lock(&s.functions);
                (registry.libraries.len(), registry.function_count())
            };
            vec![
                kv("used_memory", rss.to_string()),
                kv("used_memory_human", human_bytes(rss)),
                kv("used_memory_rss", rss.to_string()),
                kv("used_memory_rss_human", human_bytes(rss)),
                kv("used_memory_peak", peak.to_string()),
                kv("used_memory_peak_human", human_bytes(peak)),
                kv("total_system_memory", system.to_string()),
                kv("total_system_memory_human", human_bytes(system)),
                // Keys are never evicted: past maxmemory, writes are refused (noeviction).
                kv("maxmemory", config.maxmemory_bytes.to_string()),
                kv("maxmemory_human", human_bytes(config.maxmemory_bytes)),
                kv("maxmemory_policy", "noeviction".into()),
                kv("mem_fragmentation_ratio", "1.00".into()),
                kv(
                    "number_of_cached_scripts",
                    crate::state::lock(&s.scripts).len().to_string(),
                ),
                kv("number_of_functions", functions.to_string()),
                kv("number_of_libraries", libraries.to_string()),
            ]
        }
        "persistence" => vec![
            kv("loading", "0".into()),
            kv(
                "rdb_changes_since_last_save",
                s.dirty.load(Ordering::Relaxed).to_string(),
            ),
            kv(
                "rdb_bgsave_in_progress",
                i32::from(s.bgsave_running.load(Ordering::Relaxed)).to_string(),
            ),
            kv(
                "rdb_last_save_time",
                s.last_save_unix_secs.load(Ordering::Relaxed).to_string(),
            ),
            kv("rdb_last_bgsave_status", "ok".into()),
            kv("aof_enabled", "1".into()),
            kv(
                "aof_rewrite_in_progress",
                i32::from(s.bgsave_running.load(Ordering::Relaxed)).to_string(),
            ),
            kv("aof_last_bgrewrite_status", "ok".into()),
            kv("aof_last_write_status", "ok".into()),
            kv("appendfsync", config.appendfsync.name().into()),
        ],
        "stats" => {
            // (clients, keys, items, prefixes), read under one lock.
            let tracking = s.watches.tracking.stats();
            let (ops_per_sec, input_kbps, output_kbps) = s.rates.current();
            let pubsub = s.pubsub.counts();
            let counter = |k: &str, v: &std::sync::atomic::AtomicU64| {
                kv(k, v.load(Ordering::Relaxed).to_string())
            };
            vec![
                counter("total_connections_received", &c.total_connections),
                counter("total_commands_processed", &c.total_commands),
                counter("rejected_connections", &c.rejected_connections),
                kv("instantaneous_ops_per_sec", ops_per_sec.to_string()),
                counter("total_net_input_bytes", &c.net_input_bytes),
                counter("total_net_output_bytes", &c.net_output_bytes),
                kv("instantaneous_input_kbps", format!("{input_kbps:.2}")),
                kv("instantaneous_output_kbps", format!("{output_kbps:.2}")),
                counter("expired_keys", &c.expired_keys),
                // Never: keys are not evicted, nor clients for memory.
                kv("evicted_keys", "0".into()),
                kv("evicted_clients", "0".into()),
                counter("keyspace_hits", &c.keyspace_hits),
                counter("keyspace_misses", &c.keyspace_misses),
                kv("pubsub_channels", pubsub.0.to_string()),
                kv("pubsub_patterns", pubsub.1.to_string()),
                kv("pubsubshard_channels", pubsub.2.to_string()),
                // Nothing forks: saves are the engine's flushes.
                kv("total_forks", "0".into()),
                kv(
                    "total_error_replies",
                    s.command_stats.error_replies().to_string(),
                ),
                counter("total_error_replies_protocol", &c.protocol_errors),
                kv("tracking_total_keys", tracking.1.to_string()),
                kv("tracking_total_items", tracking.2.to_string()),
                kv("tracking_total_prefixes", tracking.3.to_string()),
            ]
        }
        // No replicas: a primary with none attached, as a standalone redis-server reports.
        "replication" => vec![
            kv("role", "master".into()),
            kv("connected_slaves", "0".into()),
            kv("master_failover_state", "no-failover".into()),
            kv("master_replid", s.run_id.clone()),
            kv("master_replid2", "0".repeat(40)),
            kv("master_repl_offset", "0".into()),
            kv("second_repl_offset", "-1".into()),
            kv("repl_backlog_active", "0".into()),
        ],
        "commandstats" => s.command_stats.command_lines(),
        "errorstats" => s.command_stats.error_lines(),
        // Redis 7's default `latency-tracking-info-percentiles`: 50, 99, 99.9.
        "latencystats" => s
            .command_stats
            .called()
            .into_iter()
            .filter_map(|name| {
                let (_, counts) = s.command_stats.latencies(name)?;
                let p = |percent| crate::watchers::latency_percentile(&counts, percent);
                Some(kv(
                    &format!("latency_percentiles_usec_{name}"),
                    format!(
                        "p50={:.3},p99={:.3},p99.9={:.3}",
                        p(50.0)?,
                        p(99.0)?,
                        p(99.9)?
                    ),
                ))
            })
            .collect(),
        "cpu" => {
            let times = cpu_times().unwrap_or_default();
            let secs = |t: Duration| format!("{}.{:06}", t.as_secs(), t.subsec_micros());
            vec![
                kv("used_cpu_sys", secs(times.sys)),
                kv("used_cpu_user", secs(times.user)),
                kv("used_cpu_sys_children", secs(times.children_sys)),
                kv("used_cpu_user_children", secs(times.children_user)),
            ]
        }
        "cluster" => vec![kv(
            "cluster_enabled",
            i32::from(s.cluster.is_some()).to_string(),
        )],
        "keyspace" => keyspace_lines(ctx, &config)?,
        "engine" => {
            let mut lines = vec![kv(
                "dir",
                config
                    .dir
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            )];
            lines.extend(ctx.db().stats_lines());
            lines
        }
        _ => vec![],
    })
}

/// CPU time this process (all its threads) and its waited-for children spent.
#[derive(Default)]
struct CpuTimes {
    sys: Duration,
    user: Duration,
    children_sys: Duration,
    children_user: Duration,
}

/// CPU times from Linux's `/proc/self/stat` (fields 14-17, in clock ticks).
fn cpu_times() -> Option<CpuTimes> {
    // The kernel's USER_HZ, 100 on every Linux architecture we target.
    const TICKS_PER_SEC: u64 = 100;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after its ')' are plain.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let time = |ticks: u64| Duration::from_millis(ticks * 1000 / TICKS_PER_SEC);
    Some(CpuTimes {
        user: time(*fields.first()?),
        sys: time(*fields.get(1)?),
        children_user: time(*fields.get(2)?),
        children_sys: time(*fields.get(3)?),
    })
}

/// The most this process has held resident (Linux `/proc/self/status`'s VmHWM).
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The config file's path as INFO shows it (empty without one).
fn config_file(ctx: &Ctx<'_>) -> String {
    ctx.shared
        .config()
        .config_file
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// The machine's memory (Linux `/proc/meminfo`'s MemTotal), if it can be read.
fn system_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn unix_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// Resident set size of this process (Linux `/proc/self/statm`), if it can be read.
pub(crate) fn resident_bytes() -> Option<u64> {
    // statm reports pages; 4 KiB pages are what Linux uses on the machines we target.
    const PAGE_BYTES: u64 = 4096;
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * PAGE_BYTES)
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.2}{}", UNITS[unit])
}

/// Settings CONFIG GET shows: name and current value.
fn config_values(c: &ServerConfig) -> Vec<(&'static str, String)> {
    vec![
        ("bind", c.bind.clone()),
        ("port", c.port.to_string()),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("maxclients", c.maxclients.to_string()),
        ("proto-max-bulk-len", c.proto_max_bulk_len_bytes.to_string()),
        ("timeout", c.timeout_secs.to_string()),
        (
            "slowlog-log-slower-than",
            c.slowlog_log_slower_than_us.to_string(),
        ),
        ("slowlog-max-len", c.slowlog_max_len.to_string()),
        (
            "client-query-buffer-limit",
            c.client_query_buffer_limit_bytes.to_string(),
        ),
        ("appendfsync", c.appendfsync.name().into()),
        ("background-nice", c.background_nice.to_string()),
        // No RDB snapshots: the write-ahead log is the persistence (save points are kept,
        // and change nothing).
        ("save", c.save_points.clone()),
        ("maxmemory", c.maxmemory_bytes.to_string()),
        ("replicaof", String::new()),
        ("slaveof", String::new()),
        ("daemonize", "no".into()),
        (
            "io-threads",
            c.io_threads
                .unwrap_or_else(crate::default_io_threads)
                .to_string(),
        ),
        ("databases", c.databases.to_string()),
        (
            "busy-reply-threshold",
            c.busy_reply_threshold_ms.to_string(),
        ),
        ("lua-time-limit", c.busy_reply_threshold_ms.to_string()),
        (
            "notify-keyspace-events",
            crate::notify::format_flags(c.notify_keyspace_events),
        ),
        (
            "cluster-enabled",
            if c.cluster { "yes" } else { "no" }.into(),
        ),
        (
            "tracking-table-max-keys",
            c.tracking_table_max_keys.to_string(),
        ),
        ("acllog-max-len", c.acllog_max_len.to_string()),
        (
            "aclfile",
            c.aclfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        (
            "dir",
            c.dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        ),
    ]
    .into_iter()
    .chain(
        FIXED
            .iter()
            .map(|(name, value, _)| (*name, (*value).to_string())),
    )
    .chain(crate::config::ENCODING_SETTINGS.iter().map(|name| {
        let value = c.encodings.get(name).unwrap_or_default();
        (*name, value.to_string())
    }))
    .collect()
}

/// Settings CONFIG SET may change while running; the rest are fixed when the server and the
/// engine start (the engine's durability mode is an open-time option).
const MUTABLE: &[&str] = &[
    "save",
    "requirepass",
    "maxmemory",
    "maxclients",
    "proto-max-bulk-len",
    "timeout",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "client-query-buffer-limit",
    "notify-keyspace-events",
    "tracking-table-max-keys",
    "acllog-max-len",
    "busy-reply-threshold",
    "lua-time-limit",
];

/// Redis settings that describe what this server always does: CONFIG GET shows the value,
/// CONFIG SET accepts that same value (applications set them at start-up) and refuses any other
/// with the reason.
const FIXED: &[(&str, &str, &str)] = &[
    (
        "maxmemory-policy",
        "noeviction",
        "keys live on disk and are never evicted",
    ),
    (
        "maxmemory-samples",
        "5",
        "keys live on disk and are never evicted",
    ),
    (
        "maxmemory-eviction-tenacity",
        "10",
        "keys live on disk and are never evicted",
    ),
    ("maxmemory-clients", "0", "clients are never evicted"),
    (
        "lfu-log-factor",
        "10",
        "keys are never evicted, so no access frequency is kept",
    ),
    (
        "lfu-decay-time",
        "1",
        "keys are never evicted, so no access frequency is kept",
    ),
    (
        "latency-monitor-threshold",
        "0",
        "the latency monitor is not offered (LATENCY HISTOGRAM and INFO latencystats are)",
    ),
    (
        "latency-tracking",
        "yes",
        "per-command latency tracking is always on",
    ),
    (
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        "INFO latencystats reports p50, p99 and p99.9",
    ),
    ("hz", "10", "active expiry runs 10 times a second"),
    (
        "appendonly",
        "yes",
        "every write goes to the write-ahead log; it cannot be turned off",
    ),
];

/// Redis 7.0's settings that CONFIG SET refuses as immutable (`IMMUTABLE_CONFIG` in its
/// config.c) and this server does not otherwise show: refused with Redis's reason rather than
/// as unknown.
const REDIS_IMMUTABLE: &[&str] = &[
    "rdbchecksum",
    "io-threads-do-reads",
    "always-show-logo",
    "set-proc-title",
    "syslog-enabled",
    "disable-thp",
    "unixsocket",
    "pidfile",
    "cluster-config-file",
    "syslog-ident",
    "appendfilename",
    "appenddirname",
    "logfile",
    "supervised",
    "syslog-facility",
    "enable-protected-configs",
    "enable-debug-command",
    "enable-module-command",
    "tcp-backlog",
    "cluster-port",
    "unixsocketperm",
    "socket-mark-id",
];

/// CONFIG SET's check of the names before any value, in Redis's order: the first name that is
/// unknown, immutable, or given before (ignoring case) fails the command, named as given.
fn check_setting_names(known: &[(&'static str, String)], names: &[Bytes]) -> Result<()> {
    let lower: Vec<String> = names
        .iter()
        .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
        .collect();
    for (i, name) in lower.iter().enumerate() {
        let given = String::from_utf8_lossy(&names[i]);
        if !known.iter().any(|(k, _)| k == name) && !REDIS_IMMUTABLE.contains(&name.as_str()) {
            return Err(Error::command(format!(
                "Unknown option or number of arguments for CONFIG SET - '{given}'"
            )));
        }
        let settable = MUTABLE.contains(&name.as_str())
            || crate::config::ENCODING_SETTINGS.contains(&name.as_str())
            || FIXED.iter().any(|(n, _, _)| n == name);
        let reason = if !settable {
            "can't set immutable config"
        } else if lower[..i].contains(name) {
            "duplicate parameter"
        } else {
            continue;
        };
        return Err(Error::command(format!(
            "CONFIG SET failed (possibly related to argument '{given}') - {reason}"
        )));
    }
    Ok(())
}

fn config(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" => {
            if args.len() < 3 {
                return Err(Error::WrongArity("config|get".into()));
            }
            let values = config_values(&ctx.shared.config());
            let mut pairs = Vec::new();
            for (name, value) in values {
                if args[2..]
                    .iter()
                    .any(|p| glob::matches(p, name.as_bytes(), true))
                {
                    pairs.push((Reply::text(name), Reply::text(value)));
                }
            }
            Ok(Reply::Map(pairs))
        }
        "set" => {
            if args.len() < 4 {
                return Err(Error::WrongArity("config|set".into()));
            }
            // A name without its value: Redis's syntax error, not an arity one.
            if args.len() % 2 != 0 {
                return Err(Error::Syntax);
            }
            // Validate everything on a copy, then apply at once: all or nothing, as in Redis.
            let mut next = ctx.shared.config();
            let names: Vec<Bytes> = args[2..].iter().step_by(2).cloned().collect();
            check_setting_names(&config_values(&next), &names)?;
            for pair in args[2..].chunks(2) {
                let name = text(&pair[0]).to_ascii_lowercase();
                let value = text(&pair[1]);
                let failed = |reason: &str| {
                    Error::command(format!(
                        "CONFIG SET failed (possibly related to argument '{name}') - {reason}"
                    ))
                };
                if let Some((_, fixed, reason)) = FIXED.iter().find(|(n, _, _)| *n == name) {
                    if value.eq_ignore_ascii_case(fixed) {
                        continue;
                    }
                    return Err(failed(reason));
                }
                next.set(&name, &value).map_err(|reason| failed(&reason))?;
            }
            ctx.shared
                .watchers
                .configure(next.slowlog_log_slower_than_us, next.slowlog_max_len);
            ctx.shared.notify.set(next.notify_keyspace_events);
            ctx.shared
                .watches
                .tracking
                .set_table_keys_max(next.tracking_table_max_keys);
            ctx.shared.watches.tracking.limit();
            ctx.shared
                .running_script
                .set_threshold_ms(next.busy_reply_threshold_ms);
            ctx.shared.set_maxmemory(next.maxmemory_bytes);
            ctx.shared.acl.set_log_entries_max(next.acllog_max_len);
            if next.requirepass != ctx.shared.config().requirepass {
                // As in Redis: requirepass is the default user's one password (or none).
                ctx.shared.acl.set_requirepass(next.requirepass.as_deref());
            }
            ctx.shared.update_config(|c| *c = next);
            Ok(Reply::ok())
        }
        "rewrite" => {
            if args.len() != 2 {
                return Err(Error::WrongArity("config|rewrite".into()));
            }
            Err(Error::command(if config_file(ctx).is_empty() {
                "The server is running without a config file"
            } else {
                // The file is TOML with its own layout and comments; settings changed at run
                // time are the operator's to copy into it.
                "CONFIG REWRITE is not supported: edit the config file (TOML) to keep settings changed with CONFIG SET"
            }))
        }
        "resetstat" => {
            ctx.shared.counters.reset();
            ctx.shared.command_stats.reset();
            Ok(Reply::ok())
        }
        "help" => Ok(Reply::Array(
            [
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
            ]
            .iter()
            .map(|s| Reply::Simple(Cow::Borrowed(s)))
            .collect(),
        )),
        _ => Err(Error::UnknownSubcommand {
            container: "CONFIG",
            sub: text(&args[1]),
        }),
    }
}

fn status_set(items: &[&'static str]) -> Reply {
    Reply::Set(
        items
            .iter()
            .map(|s| Reply::Simple(Cow::Borrowed(s)))
            .collect(),
    )
}

/// One COMMAND INFO entry, in Redis 7's ten-field layout: name, arity, flags and the legacy
/// key positions from the command's `Spec` (what it does here); ACL categories, tips and key
/// specifications from Redis's table where Redis has the command (`meta.rs`; this server's
/// own commands get the category of their group). Subcommands are not listed.
fn command_info(spec: &Spec) -> Reply {
    let meta = super::meta::lookup(spec.name);
    let mut flags = spec.flags.to_vec();
    if super::cluster::MOVABLE_KEYS.contains(&spec.name) && !flags.contains(&"movablekeys") {
        flags.push("movablekeys");
    }
    let mut entry = vec![
        Reply::text(spec.name),
        Reply::Int(i64::from(spec.arity)),
        status_set(&flags),
        Reply::Int(i64::from(spec.keys.0)),
        Reply::Int(i64::from(spec.keys.1)),
        Reply::Int(i64::from(spec.keys.2)),
    ];
    entry.extend(described(&super::admin::categories(spec), meta));
    entry.push(subcommand_infos(spec.name));
    Reply::Array(entry)
}

/// COMMAND INFO's 7th to 9th fields: ACL categories, tips and key specifications.
fn described<S: AsRef<str>>(
    categories: &[S],
    meta: Option<&super::meta::CommandMeta>,
) -> [Reply; 3] {
    [
        Reply::Set(
            categories
                .iter()
                .map(|c| Reply::Simple(Cow::Owned(format!("@{}", c.as_ref()))))
                .collect(),
        ),
        Reply::Set(
            meta.map_or(&[][..], |m| m.tips)
                .iter()
                .map(|t| Reply::bulk(*t))
                .collect(),
        ),
        Reply::Set(
            meta.map_or(&[][..], |m| m.key_specs)
                .iter()
                .map(key_spec_reply)
                .collect(),
        ),
    ]
}

/// COMMAND INFO's 10th field of container `name`: an entry per subcommand this server offers,
/// as Redis's table describes it (`config|get`'s arity, flags, key positions, categories, tips
/// and key specifications). A command without subcommands (a subcommand too) has an empty
/// set there, as Redis replies (an empty array in RESP2, `~0` in RESP3).
fn subcommand_infos(name: &str) -> Reply {
    let Some((_, subs)) = SUBCOMMANDS.iter().find(|(c, _)| *c == name) else {
        return Reply::Set(Vec::new());
    };
    Reply::Array(
        subs.iter()
            .filter_map(|(sub, _)| subcommand_info(name, sub))
            .collect(),
    )
}

/// COMMAND INFO's entry of subcommand `sub` of `container`, from Redis's table.
fn subcommand_info(container: &str, sub: &str) -> Option<Reply> {
    let full = format!("{container}|{sub}");
    let meta = super::meta::lookup(&full)?;
    let header = meta.subcommand.as_ref()?;
    let mut entry = vec![
        Reply::text(full),
        Reply::Int(header.arity),
        status_set(header.flags),
        Reply::Int(header.keys.0),
        Reply::Int(header.keys.1),
        Reply::Int(header.keys.2),
    ];
    entry.extend(described(meta.categories, Some(meta)));
    entry.push(Reply::Set(Vec::new()));
    Some(Reply::Array(entry))
}

/// A key specification as COMMAND INFO shows it.
fn key_spec_reply(spec: &super::meta::KeySpec) -> Reply {
    use super::meta::{BeginSearch, FindKeys};
    let int = |name: &'static str, n: i64| (Reply::bulk(name), Reply::Int(n));
    let part = |kind: &'static str, fields: Vec<(Reply, Reply)>| {
        Reply::Map(vec![
            (Reply::bulk("type"), Reply::bulk(kind)),
            (Reply::bulk("spec"), Reply::Map(fields)),
        ])
    };
    let begin = match spec.begin {
        BeginSearch::Index(i) => part("index", vec![int("index", i)]),
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => part(
            "keyword",
            vec![
                (Reply::bulk("keyword"), Reply::bulk(keyword)),
                int("startfrom", start_from),
            ],
        ),
        BeginSearch::Unknown => part("unknown", vec![]),
    };
    let find = match spec.find {
        FindKeys::Range {
            last_key,
            key_step,
            limit,
        } => part(
            "range",
            vec![
                int("lastkey", last_key),
                int("keystep", key_step),
                int("limit", limit),
            ],
        ),
        FindKeys::KeyNum {
            key_num_index,
            first_key,
            key_step,
        } => part(
            "keynum",
            vec![
                int("keynumidx", key_num_index),
                int("firstkey", first_key),
                int("keystep", key_step),
            ],
        ),
        FindKeys::Unknown => part("unknown", vec![]),
    };
    let mut fields = Vec::new();
    if let Some(notes) = spec.notes {
        fields.push((Reply::bulk("notes"), Reply::bulk(notes)));
    }
    fields.extend([
        (Reply::bulk("flags"), status_set(spec.flags)),
        (Reply::bulk("begin_search"), begin),
        (Reply::bulk("find_keys"), find),
    ]);
    Reply::Map(fields)
}

/// A command's COMMAND DOCS entry: Redis's, or for a command Redis lacks its summary and
/// group.
fn command_docs(spec: &Spec) -> Reply {
    super::docs::of(spec.name).unwrap_or_else(|| {
        Reply::Map(vec![
            (Reply::text("summary"), Reply::text(spec.summary)),
            (Reply::text("since"), Reply::text("1.0.0")),
            (Reply::text("group"), Reply::text(spec.group)),
        ])
    })
}

/// What COMMAND INFO and COMMAND DOCS name: a command, or an offered subcommand of a
/// container (`config|get`, any case).
enum Named {
    Command(&'static Spec),
    Subcommand(&'static str, &'static str),
}

fn named_command(name: &Bytes) -> Option<Named> {
    if let Some(c) = super::lookup(name) {
        return Some(Named::Command(c.spec));
    }
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    let (container, sub) = lower.split_once('|')?;
    let (container, subs) = SUBCOMMANDS.iter().find(|(c, _)| *c == container)?;
    let (sub, _) = subs.iter().find(|(s, _)| *s == sub)?;
    Some(Named::Subcommand(container, sub))
}

/// The subcommands of Redis 7.0's container commands that this server answers (those it
/// refuses with a reason included, as Redis lists them whatever its configuration), with
/// their ACL categories as redis-server gives them (a subcommand's differ from its
/// container's: `pubsub|help` is not in @pubsub), for COMMAND LIST's `container|subcommand`
/// entries.
const SUBCOMMANDS: &[(&str, &[Subcommand])] = &[
    (
        "acl",
        &[
            ("cat", &["slow"]),
            ("deluser", &["admin", "slow", "dangerous"]),
            ("dryrun", &["admin", "slow", "dangerous"]),
            ("genpass", &["slow"]),
            ("getuser", &["admin", "slow", "dangerous"]),
            ("help", &["slow"]),
            ("list", &["admin", "slow", "dangerous"]),
            ("load", &["admin", "slow", "dangerous"]),
            ("log", &["admin", "slow", "dangerous"]),
            ("save", &["admin", "slow", "dangerous"]),
            ("setuser", &["admin", "slow", "dangerous"]),
            ("users", &["admin", "slow", "dangerous"]),
            ("whoami", &["slow"]),
        ],
    ),
    (
        "client",
        &[
            ("caching", &["slow", "connection"]),
            ("getname", &["slow", "connection"]),
            ("getredir", &["slow", "connection"]),
            ("help", &["slow", "connection"]),
            ("id", &["slow", "connection"]),
            ("info", &["slow", "connection"]),
            ("kill", &["admin", "slow", "dangerous", "connection"]),
            ("list", &["admin", "slow", "dangerous", "connection"]),
            ("no-evict", &["admin", "slow", "dangerous", "connection"]),
            ("pause", &["admin", "slow", "dangerous", "connection"]),
            ("reply", &["slow", "connection"]),
            ("setname", &["slow", "connection"]),
            ("tracking", &["slow", "connection"]),
            ("trackinginfo", &["slow", "connection"]),
            ("unblock", &["admin", "slow", "dangerous", "connection"]),
            ("unpause", &["admin", "slow", "dangerous", "connection"]),
        ],
    ),
    (
        "cluster",
        &[
            ("addslots", &["admin", "slow", "dangerous"]),
            ("addslotsrange", &["admin", "slow", "dangerous"]),
            ("bumpepoch", &["admin", "slow", "dangerous"]),
            ("countkeysinslot", &["slow"]),
            ("delslots", &["admin", "slow", "dangerous"]),
            ("delslotsrange", &["admin", "slow", "dangerous"]),
            ("failover", &["admin", "slow", "dangerous"]),
            ("flushslots", &["admin", "slow", "dangerous"]),
            ("forget", &["admin", "slow", "dangerous"]),
            ("getkeysinslot", &["slow"]),
            ("help", &["slow"]),
            ("info", &["slow"]),
            ("keyslot", &["slow"]),
            ("meet", &["admin", "slow", "dangerous"]),
            ("myid", &["slow"]),
            ("nodes", &["slow"]),
            ("replicate", &["admin", "slow", "dangerous"]),
            ("reset", &["admin", "slow", "dangerous"]),
            ("saveconfig", &["admin", "slow", "dangerous"]),
            ("set-config-epoch", &["admin", "slow", "dangerous"]),
            ("setslot", &["admin", "slow", "dangerous"]),
            ("shards", &["slow"]),
            ("slots", &["slow"]),
        ],
    ),
    (
        "command",
        &[
            ("count", &["slow", "connection"]),
            ("docs", &["slow", "connection"]),
            ("getkeys", &["slow", "connection"]),
            ("getkeysandflags", &["slow", "connection"]),
            ("help", &["slow", "connection"]),
            ("info", &["slow", "connection"]),
            ("list", &["slow", "connection"]),
        ],
    ),
    (
        "config",
        &[
            ("get", &["admin", "slow", "dangerous"]),
            ("help", &["slow"]),
            ("resetstat", &["admin", "slow", "dangerous"]),
            ("rewrite", &["admin", "slow", "dangerous"]),
            ("set", &["admin", "slow", "dangerous"]),
        ],
    ),
    (
        "function",
        &[
            ("delete", &["write", "slow", "scripting"]),
            ("dump", &["slow", "scripting"]),
            ("flush", &["write", "slow", "scripting"]),
            ("help", &["slow", "scripting"]),
            ("kill", &["slow", "scripting"]),
            ("list", &["slow", "scripting"]),
            ("load", &["write", "slow", "scripting"]),
            ("restore", &["write", "slow", "scripting"]),
            ("stats", &["slow", "scripting"]),
        ],
    ),
    (
        "latency",
        &[
            ("doctor", &["admin", "slow", "dangerous"]),
            ("graph", &["admin", "slow", "dangerous"]),
            ("help", &["slow"]),
            ("histogram", &["admin", "slow", "dangerous"]),
            ("history", &["admin", "slow", "dangerous"]),
            ("latest", &["admin", "slow", "dangerous"]),
            ("reset", &["admin", "slow", "dangerous"]),
        ],
    ),
    (
        "memory",
        &[
            ("doctor", &["slow"]),
            ("help", &["slow"]),
            ("malloc-stats", &["slow"]),
            ("purge", &["slow"]),
            ("stats", &["slow"]),
            ("usage", &["read", "slow"]),
        ],
    ),
    (
        "module",
        &[
            ("help", &["slow"]),
            ("list", &["admin", "slow", "dangerous"]),
            ("load", &["admin", "slow", "dangerous"]),
            ("loadex", &["admin", "slow", "dangerous"]),
            ("unload", &["admin", "slow", "dangerous"]),
        ],
    ),
    (
        "object",
        &[
            ("encoding", &["keyspace", "read", "slow"]),
            ("freq", &["keyspace", "read", "slow"]),
            ("help", &["keyspace", "slow"]),
            ("idletime", &["keyspace", "read", "slow"]),
            ("refcount", &["keyspace", "read", "slow"]),
        ],
    ),
    (
        "pubsub",
        &[
            ("channels", &["pubsub", "slow"]),
            ("help", &["slow"]),
            ("numpat", &["pubsub", "slow"]),
            ("numsub", &["pubsub", "slow"]),
            ("shardchannels", &["pubsub", "slow"]),
            ("shardnumsub", &["pubsub", "slow"]),
        ],
    ),
    (
        "script",
        &[
            ("exists", &["slow", "scripting"]),
            ("flush", &["slow", "scripting"]),
            ("help", &["slow", "scripting"]),
            ("kill", &["slow", "scripting"]),
            ("load", &["slow", "scripting"]),
        ],
    ),
    (
        "slowlog",
        &[
            ("get", &["admin", "slow", "dangerous"]),
            ("help", &["slow"]),
            ("len", &["admin", "slow", "dangerous"]),
            ("reset", &["admin", "slow", "dangerous"]),
        ],
    ),
    (
        "xgroup",
        &[
            ("create", &["write", "stream", "slow"]),
            ("createconsumer", &["write", "stream", "slow"]),
            ("delconsumer", &["write", "stream", "slow"]),
            ("destroy", &["write", "stream", "slow"]),
            ("help", &["stream", "slow"]),
            ("setid", &["write", "stream", "slow"]),
        ],
    ),
    (
        "xinfo",
        &[
            ("consumers", &["read", "stream", "slow"]),
            ("groups", &["read", "stream", "slow"]),
            ("help", &["stream", "slow"]),
            ("stream", &["read", "stream", "slow"]),
        ],
    ),
];

/// A subcommand's name and its ACL categories.
type Subcommand = (&'static str, &'static [&'static str]);

/// COMMAND LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p]: every command and, after each
/// container, its subcommands (`config|get`), as Redis 7 lists them; a pattern matches the
/// whole name (`config|*re*`, case-insensitively, as Redis matches).
fn command_list(filter: &[Bytes]) -> Result<Reply> {
    /// What a filter sees of an entry: the command's spec, or a subcommand's categories.
    enum Entry<'a> {
        Command(&'a Spec),
        Subcommand(&'a [&'a str]),
    }
    type Keep = Box<dyn Fn(&Entry<'_>, &str) -> bool>;
    let keep: Keep = match filter {
        [] => Box::new(|_, _| true),
        [by, kind, value] if is(by, "FILTERBY") => {
            if is(kind, "MODULE") {
                Box::new(|_, _| false)
            } else if is(kind, "ACLCAT") {
                let category = text(value).to_ascii_lowercase();
                Box::new(move |entry, _| match entry {
                    Entry::Command(spec) => super::admin::in_category(spec, &category),
                    Entry::Subcommand(categories) => categories.contains(&category.as_str()),
                })
            } else if is(kind, "PATTERN") {
                let pattern = value.clone();
                Box::new(move |_, name| crate::glob::matches(&pattern, name.as_bytes(), true))
            } else {
                return Err(Error::Syntax);
            }
        }
        _ => return Err(Error::Syntax),
    };
    let mut names = Vec::new();
    for spec in table() {
        if keep(&Entry::Command(spec), spec.name) {
            names.push(Reply::text(spec.name));
        }
        let subs = SUBCOMMANDS
            .iter()
            .find(|(container, _)| *container == spec.name)
            .map_or(&[][..], |(_, subs)| *subs);
        for (sub, categories) in subs {
            let name = format!("{}|{sub}", spec.name);
            if keep(&Entry::Subcommand(categories), &name) {
                names.push(Reply::text(name));
            }
        }
    }
    Ok(Reply::Array(names))
}

fn command(_: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(table().map(command_info).collect()));
    };
    let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
    // The commands named after INFO or DOCS: a command, or a subcommand as `config|get`.
    let named = || args[2..].iter().map(named_command);
    match sub.as_str() {
        "count" => Ok(Reply::Int(table().count() as i64)),
        "help" if args.len() == 2 => Ok(super::admin::help(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
            "HELP",
            "    Prints this help.",
        ])),
        "help" => Err(Error::WrongArity("command|help".into())),
        "getkeys" if args.len() >= 4 => super::cluster::getkeys(&args[2..], false),
        "getkeys" => Err(Error::WrongArity("command|getkeys".into())),
        "getkeysandflags" if args.len() >= 4 => super::cluster::getkeys(&args[2..], true),
        "getkeysandflags" => Err(Error::WrongArity("command|getkeysandflags".into())),
        "list" => command_list(&args[2..]),
        "info" if args.len() == 2 => Ok(Reply::Array(table().map(command_info).collect())),
        "info" => Ok(Reply::Array(
            named()
                .map(|n| match n {
                    Some(Named::Command(s)) => command_info(s),
                    Some(Named::Subcommand(c, sub)) => {
                        subcommand_info(c, sub).unwrap_or(Reply::Nil)
                    }
                    None => Reply::Nil,
                })
                .collect(),
        )),
        "docs" if args.len() == 2 => Ok(Reply::Map(
            table()
                .map(|s| (Reply::text(s.name), command_docs(s)))
                .collect(),
        )),
        // Keyed by the full lowercase name, as Redis does; unknown names are left out.
        "docs" => Ok(Reply::Map(
            named()
                .filter_map(|n| match n? {
                    Named::Command(s) => Some((Reply::text(s.name), command_docs(s))),
                    Named::Subcommand(c, sub) => {
                        let full = format!("{c}|{sub}");
                        let docs = super::docs::of_subcommand(c, &full)?;
                        Some((Reply::text(full), docs))
                    }
                })
                .collect(),
        )),
        _ => Err(Error::UnknownSubcommand {
            container: "COMMAND",
            sub: text(&args[1]),
        }),
    }
}

fn slowlog(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(Error::WrongArity(format!("slowlog|{sub}")))
        }
    };
    let watchers = &ctx.shared.watchers;
    match sub.as_str() {
        "get" if args.len() <= 3 => {
            let count = match args.get(2) {
                None => Some(10),
                Some(a) => match text(a).parse::<i64>() {
                    Ok(-1) => None,
                    Ok(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                    _ => {
                        return Err(Error::command(
                            "count should be greater than or equal to -1",
                        ))
                    }
                },
            };
            Ok(Reply::Array(
                watchers
                    .entries(count)
                    .into_iter()
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(i64::try_from(e.id).unwrap_or(i64::MAX)),
                            Reply::Int(e.at_unix_secs),
                            Reply::Int(i64::try_from(e.micros).unwrap_or(i64::MAX)),
                            Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                            Reply::Bulk(e.peer),
                            Reply::Bulk(e.name),
                        ])
                    })
                    .collect(),
            ))
        }
        "get" => Err(Error::command(
            "unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.",
        )),
        "len" => {
            arity(2)?;
            Ok(Reply::Int(
                i64::try_from(watchers.len()).unwrap_or(i64::MAX),
            ))
        }
        "reset" => {
            arity(2)?;
            watchers.reset();
            Ok(Reply::ok())
        }
        "help" => {
            arity(2)?;
            Ok(Reply::Array(
                [
                    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "GET [<count>]",
                    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                    "    Entries are made of:",
                    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                    "    client name",
                    "LEN",
                    "    Return the length of the slowlog.",
                    "RESET",
                    "    Reset the slowlog.",
                    "HELP",
                    "    Prints this help.",
                ]
                .iter()
                .map(|s| Reply::Simple(Cow::Borrowed(s)))
                .collect(),
            ))
        }
        _ => Err(Error::UnknownSubcommand {
            container: "SLOWLOG",
            sub: text(&args[1]),
        }),
    }
}

/// MONITOR: from now on this connection receives a line per command anyone runs
/// (`watchers.rs`); RESET or QUIT ends it.
fn monitor(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    if ctx.session.multi.is_some() || ctx.session.in_exec || ctx.session.in_script {
        return Err(Error::command(
            "MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    ctx.shared
        .watchers
        .add_monitor(ctx.session.id, ctx.session.subs.mailbox());
    Ok(Reply::ok())
}

fn save(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    ctx.db().flush()?;
    ctx.shared
        .last_save_unix_secs
        .store(unix_secs(), Ordering::Relaxed);
    ctx.shared.dirty.store(0, Ordering::Relaxed);
    Ok(Reply::ok())
}

fn bgsave(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    match args.get(1) {
        None => {}
        Some(a) if is(a, "SCHEDULE") && args.len() == 2 => {}
        Some(_) => return Err(Error::Syntax),
    }
    if !start_background_flush(ctx, true)? {
        return Err(Error::command("Background save already in progress"));
    }
    Ok(Reply::simple("Background saving started"))
}

/// Starts flushing every memtable on a thread of its own (BGSAVE, BGREWRITEAOF); false when
/// one is already running. `save`: it counts as a save (LASTSAVE, the changes since).
pub(crate) fn start_background_flush(ctx: &mut Ctx<'_>, save: bool) -> Result<bool> {
    if ctx.shared.bgsave_running.swap(true, Ordering::AcqRel) {
        return Ok(false);
    }
    let backend = ctx.shared.backend.clone();
    let running = ctx.shared.bgsave_running.clone();
    // The engine's flush blocks until table files are written; a plain thread keeps it off the
    // async runtime without tying up one of its blocking-pool threads for long.
    let spawned = std::thread::Builder::new()
        .name("strata-bgsave".into())
        .spawn(move || {
            let result = backend.flush();
            // Release the engine before saying we are done: shutdown waits on the flag and
            // then expects to be the engine's only owner.
            drop(backend);
            match result {
                Ok(()) => tracing::info!("background save done"),
                Err(e) => tracing::error!("background save failed: {e}"),
            }
            running.store(false, Ordering::Release);
        });
    if let Err(e) = spawned {
        ctx.shared.bgsave_running.store(false, Ordering::Release);
        return Err(Error::command(format!("cannot start background save: {e}")));
    }
    if save {
        ctx.shared
            .last_save_unix_secs
            .store(unix_secs(), Ordering::Relaxed);
        ctx.shared.dirty.store(0, Ordering::Relaxed);
    }
    Ok(true)
}

/// LOLWUT [VERSION v] ...: the version line Redis answers for versions past 6
/// (`lolwutUnstableCommand`). Redis draws a generative picture for versions 5 and 6, different
/// at every call; here every version answers the line. VERSION's number is read as Redis reads
/// it.
fn lolwut(_: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if args.len() >= 3 && is(&args[1], "VERSION") {
        super::int_arg(&args[2])?;
    }
    Ok(Reply::Verbatim(format!(
        "Redis ver. {}\n",
        super::connection::REDIS_COMPAT_VERSION
    )))
}

fn lastsave(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(
        ctx.shared.last_save_unix_secs.load(Ordering::Relaxed) as i64,
    ))
}

fn shutdown(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    for a in &args[1..] {
        if is(a, "ABORT") {
            return Err(Error::command("No shutdown in progress."));
        }
        if !["NOSAVE", "SAVE", "NOW", "FORCE"].iter().any(|w| is(a, w)) {
            return Err(Error::Syntax);
        }
    }
    // A script past busy-reply-threshold: only NOSAVE stops the server, dropping the script's
    // writes (as Redis does).
    let nosave = args[1..].iter().any(|a| is(a, "NOSAVE"));
    if let Some(eval) = ctx.shared.running_script.busy() {
        if !nosave {
            return Err(crate::busy::busy_error(eval));
        }
    }
    if nosave {
        ctx.shared.running_script.abandon();
    }
    // NOSAVE is accepted but the write-ahead logs are still synced: acknowledged writes must
    // survive. Like Redis, a successful SHUTDOWN sends no reply; the connection just closes.
    tracing::info!(client = ctx.session.id, "SHUTDOWN requested by a client");
    ctx.shared.request_shutdown();
    ctx.session.after_reply = AfterReply::CloseSilently;
    Ok(Reply::ok())
}

/// Elements MEMORY USAGE reads of a collection when not told (Redis's default sample).
const MEMORY_SAMPLES_DEFAULT: u64 = 5;

/// MEMORY USAGE key [SAMPLES n]: the bytes the key takes in the store, as the engine keeps it
/// (engine keys and values, not RAM: the data lives on disk). A string or document: its key and
/// value. A collection: its record, plus its element entries estimated from the first `n` of
/// them (all for `SAMPLES 0`), as Redis estimates from a sample; a sorted set has two entries
/// per member. Nil for a missing key. MEMORY HELP lists this.
/// MEMORY STATS in Redis 7.0's layout (`memoryCommand`), filled with what this process can
/// tell: its resident set is both what it allocated and what the allocator holds (the engine's
/// memtables and caches are its own allocations, each under a budget), no replication, AOF
/// buffer or per-client accounting (0), and a `db.N` entry for each logical database that
/// holds keys, whose hash-table overheads are 0 (keys live in the engine, not in a table).
fn memory_stats(ctx: &Ctx<'_>) -> Result<Reply> {
    let total = resident_bytes().unwrap_or(0);
    let peak = peak_resident_bytes().unwrap_or(total).max(total);
    let startup = ctx.shared.startup_resident_bytes.min(total);
    let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let field = |name: &'static str, value: Reply| (Reply::text(name), value);
    let mut out = vec![
        field("peak.allocated", int(peak)),
        field("total.allocated", int(total)),
        field("startup.allocated", int(startup)),
        field("replication.backlog", int(0)),
        field("clients.slaves", int(0)),
        field("clients.normal", int(0)),
        field("cluster.links", int(0)),
        field("aof.buffer", int(0)),
        field("lua.caches", int(0)),
        field("functions.caches", int(0)),
    ];
    let mut keys = 0u64;
    for (logical, t) in keyspace_tallies(ctx, &ctx.shared.config())? {
        keys += t.keys;
        out.push((
            Reply::Bulk(Bytes::from(format!("db.{logical}"))),
            Reply::Map(vec![
                field("overhead.hashtable.main", int(0)),
                field("overhead.hashtable.expires", int(0)),
                field("overhead.hashtable.slot-to-keys", int(0)),
            ]),
        ));
    }
    let overhead = startup;
    let dataset = total.saturating_sub(overhead);
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    out.extend([
        field("overhead.total", int(overhead)),
        field("keys.count", int(keys)),
        field(
            "keys.bytes-per-key",
            int(total.saturating_sub(startup).checked_div(keys).unwrap_or(0)),
        ),
        field("dataset.bytes", int(dataset)),
        field(
            "dataset.percentage",
            Reply::Double(share(dataset, total.saturating_sub(startup))),
        ),
        field("peak.percentage", Reply::Double(share(total, peak))),
        field("allocator.allocated", int(total)),
        field("allocator.active", int(total)),
        field("allocator.resident", int(total)),
        field("allocator-fragmentation.ratio", Reply::Double(1.0)),
        field("allocator-fragmentation.bytes", int(0)),
        field("allocator-rss.ratio", Reply::Double(1.0)),
        field("allocator-rss.bytes", int(0)),
        field("rss-overhead.ratio", Reply::Double(1.0)),
        field("rss-overhead.bytes", int(0)),
        field("fragmentation", Reply::Double(1.0)),
        field("fragmentation.bytes", int(0)),
    ]);
    Ok(Reply::Map(out))
}

fn memory(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    use crate::keyspace::{string_key, KeyType};
    if is(&args[1], "HELP") && args.len() == 2 {
        return Ok(Reply::Array(
            [
                "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "USAGE <key> [SAMPLES <count>]",
                "    Return the bytes <key> takes in the store (its engine keys and values),",
                "    collections estimated from <count> elements (default 5, 0: all).",
                "DOCTOR",
                "    Return memory problems reports.",
                "MALLOC-STATS",
                "    Return internal statistics report from the memory allocator.",
                "PURGE",
                "    Attempt to purge dirty pages for reclamation by the allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "HELP",
                "    Print this help.",
            ]
            .iter()
            .map(|s| Reply::Simple(Cow::Borrowed(s)))
            .collect(),
        ));
    }
    let sub = text(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "usage" => {}
        "purge" | "doctor" | "malloc-stats" | "stats" if args.len() != 2 => {
            return Err(Error::WrongArity(format!("memory|{sub}")));
        }
        // Memory is the engine's caches and memtables, each under its own limit: nothing
        // for Redis's allocator purge or fragmentation report to act on.
        "purge" => return Ok(Reply::ok()),
        "doctor" => {
            return Ok(Reply::Verbatim(
                "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".into(),
            ))
        }
        "stats" => return memory_stats(ctx),
        "malloc-stats" => {
            return Ok(Reply::Verbatim(
                "Stats not supported for the current allocator".into(),
            ))
        }
        _ => {
            return Err(Error::UnknownSubcommand {
                container: "MEMORY",
                sub: text(&args[1]),
            })
        }
    }
    let Some(key) = args.get(2) else {
        return Err(Error::WrongArity("memory|usage".into()));
    };
    let mut samples = MEMORY_SAMPLES_DEFAULT;
    let mut rest = args[3..].iter();
    while let Some(word) = rest.next() {
        match rest.next() {
            Some(n) if is(word, "SAMPLES") => {
                let n = crate::num::parse_i64(n).ok_or(Error::NotInteger)?;
                samples = match u64::try_from(n) {
                    Ok(0) => u64::MAX,
                    Ok(n) => n,
                    Err(_) => return Err(Error::Syntax),
                };
            }
            _ => return Err(Error::Syntax),
        }
    }
    let db = ctx.dbi();
    let now = keyspace::now_ms();
    let record_key = string_key(db, key);
    // (Decoding shares the value's bytes: its length is still the stored length.)
    let record = match ctx.db().get(&record_key)? {
        Some(v) => Some((v.len(), keyspace::Record::decode(v)?)).filter(|(_, r)| !r.expired(now)),
        None => None,
    };
    let Some((stored_len, r)) = record else {
        if ctx.shared.docs_may_exist() {
            if let Some(doc) = keyspace::read_doc_bytes(ctx.db(), db, key, now)? {
                let doc_key = keyspace::Space::Docs.key(db, key).map_or(0, |k| k.len());
                return Ok(Reply::Int((doc_key + doc.len()) as i64));
            }
        }
        return Ok(Reply::Nil);
    };
    let own = (record_key.len() + stored_len) as u64;
    if r.kind == KeyType::String {
        return Ok(Reply::Int(i64::try_from(own).unwrap_or(i64::MAX)));
    }
    let meta = crate::collection::Meta::decode(&r.payload)?;
    let entries = if r.kind == KeyType::Zset {
        meta.count.saturating_mul(2)
    } else {
        meta.count
    };
    let prefix = crate::collection::element_prefix(db, key, meta.version);
    let (mut seen, mut bytes) = (0u64, 0u64);
    ctx.db().scan_group(
        &record_key,
        std::ops::Bound::Included(prefix.clone()),
        crate::backend::prefix_end(&prefix),
        &mut |k, v| {
            seen += 1;
            bytes += (k.len() + v.len()) as u64;
            seen < samples.min(entries)
        },
    )?;
    let elements = if seen == 0 {
        0
    } else {
        u64::try_from(u128::from(bytes) * u128::from(entries) / u128::from(seen))
            .unwrap_or(u64::MAX)
    };
    Ok(Reply::Int(
        i64::try_from(own.saturating_add(elements)).unwrap_or(i64::MAX),
    ))
}

/// ROLE: always a primary with no replicas (this server does not replicate), in Redis's form
/// (role, replication offset, replicas).
fn role(_: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Array(vec![
        Reply::text("master"),
        Reply::Int(0),
        Reply::Array(Vec::new()),
    ]))
}

fn time(_: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Ok(Reply::Array(vec![
        Reply::text(now.as_secs().to_string()),
        Reply::text(now.subsec_micros().to_string()),
    ]))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::resp::Reply;

    fn text_of(r: Reply) -> String {
        match r {
            Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap_or_default(),
            Reply::Verbatim(t) => t,
            other => panic!("expected a text reply, got {other:?}"),
        }
    }

    #[test]
    fn info_has_the_sections_clients_read() {
        let mut h = Harness::new();
        h.run(&["SET", "a", "1"]);
        let all = text_of(h.run(&["INFO"]));
        for needle in [
            "# Server\r\n",
            "redis_version:",
            "# Clients\r\n",
            "# Memory\r\nused_memory:",
            "# Persistence\r\n",
            "aof_enabled:1",
            "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n",
            "# Engine\r\n",
            "backend:memory",
        ] {
            assert!(all.contains(needle), "INFO lacks {needle:?}:\n{all}");
        }
        let one = text_of(h.run(&["INFO", "clients"]));
        assert!(
            one.starts_with("# Clients\r\n") && !one.contains("# Server"),
            "{one}"
        );
    }

    #[test]
    fn config_get_set() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["CONFIG", "GET", "maxclients"]),
            Reply::Map(vec![(bulk("maxclients"), bulk("10000"))])
        );
        assert_eq!(
            h.run(&["CONFIG", "SET", "maxclients", "5", "timeout", "9"]),
            Reply::ok()
        );
        assert_eq!(h.shared.config().maxclients, 5);
        assert_eq!(h.shared.config().timeout_secs, 9);
        assert_eq!(
            h.run(&["CONFIG", "SET", "port", "1"]),
            err("ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config")
        );
        assert_eq!(
            h.run(&["CONFIG", "SET", "nope", "1"]),
            err("ERR Unknown option or number of arguments for CONFIG SET - 'nope'")
        );
        assert!(h.run(&["CONFIG", "SET", "timeout", "x"]).is_error());
        assert_eq!(h.shared.config().timeout_secs, 9);
        let Reply::Map(all) = h.run(&["CONFIG", "GET", "*"]) else {
            panic!()
        };
        assert!(all.len() >= 10);
    }

    #[test]
    fn command_introspection() {
        let mut h = Harness::new();
        let Reply::Int(n) = h.run(&["COMMAND", "COUNT"]) else {
            panic!()
        };
        assert!(n > 50);
        let Reply::Array(infos) = h.run(&["COMMAND", "INFO", "get", "nosuch"]) else {
            panic!()
        };
        assert_eq!(infos[1], Reply::Nil);
        let Reply::Array(get) = &infos[0] else {
            panic!()
        };
        assert_eq!(get[0], bulk("get"));
        assert_eq!(get[1], Reply::Int(2));
        let Reply::Map(docs) = h.run(&["COMMAND", "DOCS", "set"]) else {
            panic!()
        };
        assert_eq!(docs.len(), 1);
    }

    #[test]
    fn shutdown_requests_stop_without_a_reply() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["SHUTDOWN", "ABORT"]),
            err("ERR No shutdown in progress.")
        );
        h.run(&["SHUTDOWN", "NOSAVE"]);
        assert!(h.shared.shutting_down());
        assert_eq!(
            h.session.after_reply,
            crate::state::AfterReply::CloseSilently
        );
    }

    /// INFO keyspace reuses a result only when computing it was expensive, and not for longer
    /// than its reuse window.
    #[test]
    fn expensive_keyspace_counts_are_reused_cheap_ones_never() {
        use std::time::{Duration, Instant};
        let mut h = Harness::new();
        h.run(&["SET", "k", "v"]);
        let fake = vec![(
            9,
            crate::keyspace::Tally {
                keys: 42,
                ..Default::default()
            },
        )];
        let info = |h: &mut Harness| text_of(h.run(&["INFO", "keyspace"]));
        // A result that took a second to compute: reused.
        *crate::state::lock(&h.shared.keyspace_info) =
            Some((Instant::now(), Duration::from_secs(1), fake.clone()));
        assert!(info(&mut h).contains("db9:keys=42"));
        // One that took a millisecond: counted again.
        *crate::state::lock(&h.shared.keyspace_info) =
            Some((Instant::now(), Duration::from_millis(1), fake.clone()));
        assert!(info(&mut h).contains("db0:keys=1,"));
        // An expensive one past its window (100 x its cost): counted again.
        *crate::state::lock(&h.shared.keyspace_info) = Some((
            Instant::now() - Duration::from_secs(3),
            Duration::from_millis(20),
            fake,
        ));
        assert!(info(&mut h).contains("db0:keys=1,"));
    }
}
