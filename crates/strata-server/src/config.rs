//! Server settings: the `serve` command-line flags ([`ServeArgs`]), the optional `strata.toml`
//! file, and the resolved [`ServerConfig`] the server runs with. Precedence: flag, then file, then
//! the built-in default, so a flag always wins and the help text shows Redis's defaults.
//!
//! The file is flat TOML (or the same keys under a `[server]` table; other tables belong to other
//! components and are ignored): `bind`, `port`, `appendfsync`, `requirepass`, `maxclients`,
//! `proto-max-bulk-len` (bytes, or a string such as `"512mb"`), `timeout` (idle seconds),
//! `background-nice`, `databases`, `text-port`, `io-threads`, `cluster-enabled`,
//! `notify-keyspace-events`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::resp::parse::BULK_BYTES_MAX_DEFAULT;

/// When the engine forces its write-ahead log to disk (Redis's `appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AppendFsync {
    /// fsync before every write is acknowledged (group commit shares one fsync among writers).
    Always,
    /// fsync once a second: a machine crash loses at most about a second of writes.
    #[default]
    Everysec,
    /// Never fsync; the operating system writes the log when it likes.
    No,
}

impl AppendFsync {
    /// The engine's durability mode for this setting.
    pub fn sync_mode(self) -> strata::SyncMode {
        match self {
            AppendFsync::Always => strata::SyncMode::Always,
            AppendFsync::Everysec => strata::SyncMode::EveryMs(1000),
            AppendFsync::No => strata::SyncMode::Never,
        }
    }

    /// The name Redis uses (`CONFIG GET appendfsync`).
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }

    fn parse(s: &str) -> Option<AppendFsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(AppendFsync::Always),
            "everysec" => Some(AppendFsync::Everysec),
            "no" => Some(AppendFsync::No),
            _ => None,
        }
    }
}

/// Niceness the server adds to the engine's background threads unless told otherwise: clients
/// first when cores are busy. In one side-by-side pair of `redis-benchmark -P 1` runs on two
/// cores, SETs ran 7-13 % faster in every round; an in-process PUT_HEAVY run was unchanged
/// (BENCHMARKS.md).
pub const BACKGROUND_NICE_DEFAULT: i32 = 10;

/// Databases a server offers unless told otherwise (Redis's default).
pub const DATABASES_DEFAULT: usize = 16;
/// Redis's default `busy-reply-threshold` (5 s).
pub const BUSY_REPLY_THRESHOLD_MS_DEFAULT: u64 = 5000;

/// Most threads `io-threads` may ask for.
pub const IO_THREADS_MAX: usize = 256;

/// Flags of `strata serve`. Unset flags fall back to the config file, then to the default shown.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1]. Anything else exposes the server beyond this
    /// machine: set --requirepass too.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// TCP port (0 picks a free one) [default: 6379].
    #[arg(long)]
    pub port: Option<u16>,
    /// Settings file (TOML; flags override it), e.g. strata.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// When the write-ahead log is fsynced [default: everysec].
    #[arg(long, value_enum)]
    pub appendfsync: Option<AppendFsync>,
    /// Password clients must send with AUTH (or HELLO AUTH) before any other command.
    #[arg(long, value_name = "PASSWORD")]
    pub requirepass: Option<String>,
    /// ACL users file (Redis's `aclfile`): read at start and by ACL LOAD, written by ACL SAVE.
    #[arg(long, value_name = "PATH")]
    pub aclfile: Option<PathBuf>,
    /// Most simultaneous client connections [default: 10000].
    #[arg(long, value_name = "N")]
    pub maxclients: Option<usize>,
    /// Largest bulk argument a client may send, e.g. 512mb [default: 512mb].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes_arg)]
    pub proto_max_bulk_len: Option<usize>,
    /// Close client connections idle for this many seconds (0 = never) [default: 0].
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Niceness added to the engine's flush and compaction threads, 0-19, so that with busy
    /// cores clients are served first [default: 10].
    #[arg(long, value_name = "N")]
    pub background_nice: Option<i32>,
    /// Number of databases clients may SELECT, 1-256 [default: 16].
    #[arg(long, value_name = "N")]
    pub databases: Option<usize>,
    /// Also answer seed 004's line protocol (`SET k v`, `GET k`, `DELETE k`) on this port
    /// [default: off].
    #[arg(long, value_name = "PORT")]
    pub text_port: Option<u16>,
    /// Threads serving client connections: their network I/O and the commands that need not
    /// wait for the disk, 1-256 [default: half the cores, at least 1; the rest are left to
    /// flushes, compactions and clients on the same machine].
    #[arg(long, value_name = "N")]
    pub io_threads: Option<usize>,
    /// Run as a Redis Cluster node: keys are spread over 16384 hash slots, the slot map is
    /// pushed with CLUSTERX SETNODES, and keys of slots another node owns get MOVED
    /// (docs/scale-out.md) [default: off].
    #[arg(long)]
    pub cluster: bool,
}

/// The settings a server runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Address to listen on.
    pub bind: String,
    /// TCP port (0 = any free port).
    pub port: u16,
    /// WAL durability (applied to the engine's options when the server opens it).
    pub appendfsync: AppendFsync,
    /// Password required before commands, if any.
    pub requirepass: Option<String>,
    /// Redis's `maxmemory` under its `noeviction` policy: while the process's resident memory
    /// is above it, commands that may add data are refused with OOM (0: no limit). Keys are
    /// never evicted.
    pub maxmemory_bytes: u64,
    /// Most simultaneous clients.
    pub maxclients: usize,
    /// Largest bulk argument.
    pub proto_max_bulk_len_bytes: usize,
    /// Idle seconds before a client is disconnected (0 = never).
    pub timeout_secs: u64,
    /// Niceness added to the engine's background threads (applied when the server opens it).
    pub background_nice: i32,
    /// Where the data lives (reported by INFO and CONFIG GET dir).
    pub dir: Option<PathBuf>,
    /// ACL users file (`aclfile`), if any.
    pub aclfile: Option<PathBuf>,
    /// Number of databases SELECT may choose from (Redis's `databases`), at most
    /// `keyspace::DATABASES_MAX`.
    pub databases: usize,
    /// Port of seed 004's line protocol (`text.rs`); off when `None`.
    pub text_port: Option<u16>,
    /// Threads serving connections (`None`: `default_io_threads`, half the cores, for `run`; two
    /// for a `ServerThread`).
    pub io_threads: Option<usize>,
    /// Cluster node mode (`cluster.rs`): only database 0, keys routed by hash slot.
    pub cluster: bool,
    /// Commands that run at least this many microseconds go to the slow log (negative: none,
    /// 0: every command); Redis's `slowlog-log-slower-than`.
    pub slowlog_log_slower_than_us: i64,
    /// Most entries the slow log keeps (`slowlog-max-len`).
    pub slowlog_max_len: usize,
    /// Most bytes a connection's unprocessed input may hold (`client-query-buffer-limit`):
    /// a client that sends more while its commands cannot run (it waits in BLPOP, say) is
    /// disconnected, as Redis does.
    pub client_query_buffer_limit_bytes: usize,
    /// Redis's thresholds for its compact encodings (what OBJECT ENCODING reports).
    pub encodings: EncodingLimits,
    /// Redis's RDB save points (`save`, as CONFIG GET shows them: "3600 1 300 100"; empty:
    /// none). Kept for applications that set them; they change nothing here, where every
    /// acknowledged write is already in the write-ahead log.
    pub save_points: String,
    /// The config file the settings were read from, if any (INFO's `config_file`).
    pub config_file: Option<PathBuf>,
    /// Which keyspace notifications are published (`notify-keyspace-events`, as flags of
    /// `notify.rs`; 0: none).
    pub notify_keyspace_events: u32,
    /// Most keys CLIENT TRACKING remembers for invalidation (`tracking-table-max-keys`; 0: no
    /// bound): past it, keys are forgotten with an invalidation.
    pub tracking_table_max_keys: usize,
    /// ACL LOG's most entries (`acllog-max-len`).
    pub acllog_max_len: usize,
    /// How long a script runs before other clients are answered BUSY and SCRIPT KILL may stop
    /// it (`busy-reply-threshold`, alias `lua-time-limit`; `busy.rs`).
    pub busy_reply_threshold_ms: u64,
}

/// Redis's thresholds for its compact in-memory encodings (`hash-max-listpack-entries` and the
/// rest). Strata stores every collection the same way whatever its size; these decide only
/// what OBJECT ENCODING answers (`listpack` or `hashtable`, `intset`, `skiplist`), so that an
/// application or a test written for Redis that tunes them sees Redis's answers. Defaults are
/// those of the reference redis-server 7.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodingLimits {
    /// `hash-max-listpack-entries`: most fields of a `listpack` hash.
    pub hash_max_listpack_entries: u64,
    /// `hash-max-listpack-value`: longest field or value of a `listpack` hash.
    pub hash_max_listpack_value_bytes: u64,
    /// `set-max-intset-entries`: most members of an `intset`.
    pub set_max_intset_entries: u64,
    /// `zset-max-listpack-entries`: most members of a `listpack` sorted set.
    pub zset_max_listpack_entries: u64,
    /// `zset-max-listpack-value`: longest member of a `listpack` sorted set.
    pub zset_max_listpack_value_bytes: u64,
    /// Accepted and shown; a list's encoding is always `quicklist` (as in Redis 7.0).
    pub list_max_listpack_size: i64,
    /// Accepted and shown; nothing is compressed by it.
    pub list_compress_depth: i64,
    /// `hll-sparse-max-bytes`: past it a sparse HyperLogLog string becomes dense (the bytes
    /// of HyperLogLog strings are Redis's).
    pub hll_sparse_max_bytes: u64,
    /// `stream-node-max-bytes`: where XADD starts a new stream node (`stream_node.rs`).
    pub stream_node_max_bytes: u64,
    /// `stream-node-max-entries`: where XADD starts a new stream node.
    pub stream_node_max_entries: u64,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value_bytes: 64,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value_bytes: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            hll_sparse_max_bytes: 3000,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
        }
    }
}

/// The encoding settings' names, Redis 7's first and then the older names it still accepts
/// for the same setting (`ziplist` for `listpack`).
pub const ENCODING_SETTINGS: &[&str] = &[
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "set-max-intset-entries",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "list-max-listpack-size",
    "list-compress-depth",
    "hll-sparse-max-bytes",
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "hash-max-ziplist-entries",
    "hash-max-ziplist-value",
    "zset-max-ziplist-entries",
    "zset-max-ziplist-value",
    "list-max-ziplist-size",
];

/// A setting Redis reads as a non-negative 64-bit integer, or its reasons (CONFIG SET shows
/// them).
fn redis_non_negative(value: &str) -> std::result::Result<u64, String> {
    let n = crate::num::parse_i64(value.as_bytes())
        .ok_or("argument couldn't be parsed into an integer")?;
    u64::try_from(n).map_err(|_| format!("argument must be between 0 and {} inclusive", i64::MAX))
}

/// `save`'s value in Redis's form ("3600 1 300 100": pairs of seconds, at least 1, and
/// changes, at least 0, each separated by one space; empty: none), or Redis's reason.
fn save_points(value: &str) -> std::result::Result<String, String> {
    let invalid = || "Invalid save parameters".to_string();
    if value.is_empty() {
        return Ok(String::new());
    }
    let words: Vec<&str> = value.split(' ').collect();
    if words.len() % 2 != 0 {
        return Err(invalid());
    }
    let mut points = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        // Redis reads each with strtoll, which takes an empty word as 0.
        let n: i64 = if w.is_empty() {
            0
        } else {
            w.parse().map_err(|_| invalid())?
        };
        if (i % 2 == 0 && n < 1) || n < 0 {
            return Err(invalid());
        }
        points.push(n.to_string());
    }
    Ok(points.join(" "))
}

impl EncodingLimits {
    /// The value of setting `name` (one of [`ENCODING_SETTINGS`]).
    pub fn get(&self, name: &str) -> Option<i64> {
        let wide = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        Some(match name.replace("ziplist", "listpack").as_str() {
            "hash-max-listpack-entries" => wide(self.hash_max_listpack_entries),
            "hash-max-listpack-value" => wide(self.hash_max_listpack_value_bytes),
            "set-max-intset-entries" => wide(self.set_max_intset_entries),
            "zset-max-listpack-entries" => wide(self.zset_max_listpack_entries),
            "zset-max-listpack-value" => wide(self.zset_max_listpack_value_bytes),
            "list-max-listpack-size" => self.list_max_listpack_size,
            "list-compress-depth" => self.list_compress_depth,
            "hll-sparse-max-bytes" => wide(self.hll_sparse_max_bytes),
            "stream-node-max-bytes" => wide(self.stream_node_max_bytes),
            "stream-node-max-entries" => wide(self.stream_node_max_entries),
            _ => return None,
        })
    }

    /// Sets `name` from its text with Redis's checks and reasons; `None` when `name` is not an
    /// encoding setting.
    fn set(&mut self, name: &str, value: &str) -> Option<std::result::Result<(), String>> {
        let canonical = name.replace("ziplist", "listpack");
        if canonical == "hll-sparse-max-bytes" || canonical == "stream-node-max-bytes" {
            // A memory setting: units allowed (`3kb`), Redis's reason otherwise.
            return Some(
                match parse_bytes(value).map(|n| i64::try_from(n).map(|_| n)) {
                    Some(Ok(n)) => {
                        if canonical == "hll-sparse-max-bytes" {
                            self.hll_sparse_max_bytes = n as u64;
                        } else {
                            self.stream_node_max_bytes = n as u64;
                        }
                        Ok(())
                    }
                    _ if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => Err(
                        format!("argument must be between 0 and {} inclusive", i64::MAX),
                    ),
                    _ => Err("argument must be a memory value".into()),
                },
            );
        }
        let (min, max) = match canonical.as_str() {
            "list-max-listpack-size" => (i64::from(i32::MIN), i64::from(i32::MAX)),
            "list-compress-depth" => (0, i64::from(i32::MAX)),
            _ if self.get(&canonical).is_some() => (0, i64::MAX),
            _ => return None,
        };
        let Some(n) = crate::num::parse_i64(value.as_bytes()) else {
            return Some(Err("argument couldn't be parsed into an integer".into()));
        };
        if n < min || n > max {
            return Some(Err(format!(
                "argument must be between {min} and {max} inclusive"
            )));
        }
        let unsigned = u64::try_from(n).unwrap_or(0);
        match canonical.as_str() {
            "hash-max-listpack-entries" => self.hash_max_listpack_entries = unsigned,
            "hash-max-listpack-value" => self.hash_max_listpack_value_bytes = unsigned,
            "set-max-intset-entries" => self.set_max_intset_entries = unsigned,
            "zset-max-listpack-entries" => self.zset_max_listpack_entries = unsigned,
            "zset-max-listpack-value" => self.zset_max_listpack_value_bytes = unsigned,
            "stream-node-max-entries" => self.stream_node_max_entries = unsigned,
            "list-max-listpack-size" => self.list_max_listpack_size = n,
            _ => self.list_compress_depth = n,
        }
        Some(Ok(()))
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1".into(),
            port: 6379,
            appendfsync: AppendFsync::Everysec,
            requirepass: None,
            maxmemory_bytes: 0,
            maxclients: 10_000,
            proto_max_bulk_len_bytes: BULK_BYTES_MAX_DEFAULT,
            timeout_secs: 0,
            slowlog_log_slower_than_us: 10_000,
            slowlog_max_len: 128,
            client_query_buffer_limit_bytes: 1 << 30,
            background_nice: BACKGROUND_NICE_DEFAULT,
            dir: None,
            aclfile: None,
            databases: DATABASES_DEFAULT,
            text_port: None,
            io_threads: None,
            cluster: false,
            encodings: EncodingLimits::default(),
            save_points: String::new(),
            config_file: None,
            notify_keyspace_events: 0,
            tracking_table_max_keys: crate::tracking::TABLE_KEYS_MAX_DEFAULT,
            acllog_max_len: crate::acl::LOG_ENTRIES_MAX,
            busy_reply_threshold_ms: BUSY_REPLY_THRESHOLD_MS_DEFAULT,
        }
    }
}

impl ServerConfig {
    /// Resolves flags over the config file (if `args.config` names one) over the defaults.
    pub fn from_args(args: &ServeArgs) -> Result<ServerConfig> {
        let mut config = ServerConfig::default();
        if let Some(file) = &args.config {
            config.apply_file(file)?;
            config.config_file = Some(std::fs::canonicalize(file).unwrap_or_else(|_| file.clone()));
        }
        if let Some(v) = &args.bind {
            config.bind = v.clone();
        }
        if let Some(v) = args.port {
            config.port = v;
        }
        if let Some(v) = args.appendfsync {
            config.appendfsync = v;
        }
        if let Some(v) = &args.aclfile {
            config.aclfile = Some(v.clone());
        }
        if let Some(v) = &args.requirepass {
            config.requirepass = (!v.is_empty()).then(|| v.clone());
        }
        if let Some(v) = args.maxclients {
            config.maxclients = v;
        }
        if let Some(v) = args.proto_max_bulk_len {
            config.proto_max_bulk_len_bytes = v;
        }
        if let Some(v) = args.timeout {
            config.timeout_secs = v;
        }
        if let Some(v) = args.background_nice {
            config.background_nice = v;
        }
        if let Some(v) = args.databases {
            config.databases = v;
        }
        if let Some(v) = args.text_port {
            config.text_port = Some(v);
        }
        if let Some(v) = args.io_threads {
            config.io_threads = Some(v);
        }
        if args.cluster {
            config.cluster = true;
        }
        config
            .validate()
            .map_err(|reason| Error::Config { file: None, reason })?;
        Ok(config)
    }

    /// Checks values that parse but make no sense.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.cluster && self.text_port.is_some() {
            // Its SET/GET/DELETE lines would bypass the slot check.
            return Err("text-port cannot be used in cluster mode".into());
        }
        if self.maxclients == 0 {
            return Err("maxclients must be at least 1".into());
        }
        if self.proto_max_bulk_len_bytes < 1024 {
            return Err("proto-max-bulk-len must be at least 1024 bytes".into());
        }
        if !(0..=19).contains(&self.background_nice) {
            return Err("background-nice must be between 0 and 19".into());
        }
        if self
            .io_threads
            .is_some_and(|n| !(1..=IO_THREADS_MAX).contains(&n))
        {
            return Err(format!("io-threads must be between 1 and {IO_THREADS_MAX}"));
        }
        if !(1..=crate::keyspace::DATABASES_MAX).contains(&self.databases) {
            return Err(format!(
                "databases must be between 1 and {}",
                crate::keyspace::DATABASES_MAX
            ));
        }
        Ok(())
    }

    fn apply_file(&mut self, file: &Path) -> Result<()> {
        let bad = |reason: String| Error::Config {
            file: Some(file.to_path_buf()),
            reason,
        };
        let text = std::fs::read_to_string(file)
            .map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
        let table: toml::Table = text.parse().map_err(|e| bad(format!("{e}")))?;
        let mut settings: Vec<(&String, &toml::Value)> = table.iter().collect();
        if let Some(toml::Value::Table(server)) = table.get("server") {
            settings.extend(server.iter());
        }
        for (key, value) in settings {
            if value.is_table() {
                continue;
            }
            self.set_from_toml(key, value).map_err(bad)?;
        }
        Ok(())
    }

    fn set_from_toml(&mut self, key: &str, value: &toml::Value) -> std::result::Result<(), String> {
        let text = || match value {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(i) => Ok(i.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            other => Err(format!("{key}: unsupported value {other}")),
        };
        self.set(key, &text()?)
    }

    /// Sets one setting from its Redis-style text form (config file and CONFIG SET share this).
    pub fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), String> {
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{key}: '{v}' is not a non-negative integer"))
        };
        if let Some(result) = self.encodings.set(&key.to_ascii_lowercase(), value) {
            return result;
        }
        match key.to_ascii_lowercase().as_str() {
            "bind" => self.bind = value.to_string(),
            "save" => self.save_points = save_points(value)?,
            "port" => {
                self.port = u16::try_from(number(value)?)
                    .map_err(|_| format!("port: {value} is out of range"))?
            }
            "appendfsync" => {
                self.appendfsync = AppendFsync::parse(value).ok_or_else(|| {
                    format!("appendfsync: '{value}' is not always, everysec or no")
                })?
            }
            "requirepass" => self.requirepass = (!value.is_empty()).then(|| value.to_string()),
            "aclfile" => self.aclfile = (!value.is_empty()).then(|| PathBuf::from(value)),
            "maxmemory" => {
                self.maxmemory_bytes = parse_bytes(value)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| "argument must be a memory value".to_string())?
            }
            "maxclients" => {
                self.maxclients = usize::try_from(number(value)?)
                    .map_err(|_| format!("maxclients: {value} is out of range"))?
            }
            "proto-max-bulk-len" => {
                self.proto_max_bulk_len_bytes = parse_bytes(value)
                    .ok_or_else(|| format!("proto-max-bulk-len: '{value}' is not a size"))?
            }
            "timeout" => self.timeout_secs = number(value)?,
            "client-query-buffer-limit" => {
                self.client_query_buffer_limit_bytes = parse_bytes(value)
                    .filter(|n| *n >= 1 << 20)
                    .ok_or_else(|| {
                        format!(
                            "client-query-buffer-limit: '{value}' is not a size of at least 1mb"
                        )
                    })?
            }
            // Redis's own reasons, as CONFIG SET reports them.
            "slowlog-log-slower-than" | "slowlog-max-len" => {
                let n = value
                    .parse::<i64>()
                    .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                if key.eq_ignore_ascii_case("slowlog-max-len") {
                    self.slowlog_max_len = usize::try_from(n).map_err(|_| {
                        "argument must be between 0 and 9223372036854775807 inclusive".to_string()
                    })?;
                } else if n < -1 {
                    return Err(
                        "argument must be between -1 and 9223372036854775807 inclusive".into(),
                    );
                } else {
                    self.slowlog_log_slower_than_us = n;
                }
            }
            "background-nice" => {
                self.background_nice = i32::try_from(number(value)?)
                    .map_err(|_| format!("background-nice: {value} is out of range"))?
            }
            "text-port" => {
                self.text_port = Some(
                    u16::try_from(number(value)?)
                        .map_err(|_| format!("text-port: {value} is out of range"))?,
                )
            }
            "databases" => {
                self.databases = usize::try_from(number(value)?)
                    .map_err(|_| format!("databases: {value} is out of range"))?
            }
            "io-threads" => {
                self.io_threads = Some(
                    usize::try_from(number(value)?)
                        .map_err(|_| format!("io-threads: {value} is out of range"))?,
                )
            }
            "notify-keyspace-events" => {
                self.notify_keyspace_events = crate::notify::parse_flags(value)
                    .ok_or_else(|| crate::notify::INVALID_FLAGS.to_string())?
            }
            "busy-reply-threshold" | "lua-time-limit" => {
                self.busy_reply_threshold_ms = redis_non_negative(value)?
            }
            "acllog-max-len" => {
                self.acllog_max_len =
                    usize::try_from(redis_non_negative(value)?).unwrap_or(usize::MAX)
            }
            "tracking-table-max-keys" => {
                self.tracking_table_max_keys =
                    usize::try_from(redis_non_negative(value)?).unwrap_or(usize::MAX)
            }
            "cluster-enabled" => {
                self.cluster = match value.to_ascii_lowercase().as_str() {
                    "yes" | "true" => true,
                    "no" | "false" => false,
                    _ => return Err(format!("cluster-enabled: '{value}' is not yes or no")),
                }
            }
            other => return Err(format!("unknown setting '{other}'")),
        }
        self.validate()
    }
}

/// Parses a size the way Redis's `memtoll` does: `100`, `1k` (1000), `1kb` (1024), `512mb`,
/// `1gb`.
pub fn parse_bytes(s: &str) -> Option<usize> {
    let lower = s.trim().to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(digits_end);
    let n: u64 = digits.parse().ok()?;
    let multiplier: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1000 * 1000,
        "mb" => 1 << 20,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1 << 30,
        _ => return None,
    };
    usize::try_from(n.checked_mul(multiplier)?).ok()
}

fn parse_bytes_arg(s: &str) -> std::result::Result<usize, String> {
    parse_bytes(s).ok_or_else(|| format!("'{s}' is not a size (e.g. 1048576, 64kb, 512mb)"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes_parse_like_redis() {
        assert_eq!(parse_bytes("512mb"), Some(512 << 20));
        assert_eq!(parse_bytes("1k"), Some(1000));
        assert_eq!(parse_bytes("1KB"), Some(1024));
        assert_eq!(parse_bytes("77"), Some(77));
        assert_eq!(parse_bytes("mb"), None);
        assert_eq!(parse_bytes("1xb"), None);
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("strata.toml");
        std::fs::write(
            &file,
            "port = 7000\ntimeout = 5\nio-threads = 3\nproto-max-bulk-len = \"1mb\"\n[server]\nappendfsync = \"always\"\n[engine]\npartitions = 8\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(file.clone()),
            port: Some(7001),
            ..ServeArgs::default()
        };
        let c = ServerConfig::from_args(&args).unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.timeout_secs, 5);
        assert_eq!(c.proto_max_bulk_len_bytes, 1 << 20);
        assert_eq!(c.appendfsync, AppendFsync::Always);
        assert_eq!(c.bind, "127.0.0.1");
        assert_eq!(c.maxclients, 10_000);
        assert_eq!(c.background_nice, 10);
        assert_eq!(c.io_threads, Some(3));
        assert_eq!(
            c.config_file,
            Some(std::fs::canonicalize(&file).unwrap()),
            "INFO's config_file"
        );
        assert_eq!(ServerConfig::default().config_file, None);
        let zero = ServeArgs {
            io_threads: Some(0),
            ..ServeArgs::default()
        };
        assert!(ServerConfig::from_args(&zero)
            .unwrap_err()
            .to_string()
            .contains("io-threads must be between 1 and 256"));

        std::fs::write(&file, "cluster-enabled = \"yes\"\n").unwrap();
        let c = ServerConfig::from_args(&args).unwrap();
        assert!(c.cluster);
        let with_text = ServeArgs {
            text_port: Some(7878),
            ..args.clone()
        };
        let err = ServerConfig::from_args(&with_text).unwrap_err().to_string();
        assert!(
            err.contains("text-port cannot be used in cluster mode"),
            "{err}"
        );
        std::fs::write(&file, "cluster-enabled = \"maybe\"\n").unwrap();
        assert!(ServerConfig::from_args(&args).is_err());

        std::fs::write(&file, "prot = 1\n").unwrap();
        let err = ServerConfig::from_args(&args).unwrap_err().to_string();
        assert!(err.contains("unknown setting 'prot'"), "{err}");
        assert!(err.contains("strata.toml"), "{err}");
    }
}
