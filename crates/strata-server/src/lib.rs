//! # strata-server
//!
//! A Redis-protocol server over the Strata engine: RESP2, RESP3 (after `HELLO 3`) and inline
//! commands, so `redis-cli`, `redis-benchmark`, Redis client libraries and
//! `printf 'SET hello world\r\n' | nc 127.0.0.1 6379` all work. Strings and RedisJSON-style
//! documents share one keyspace.
//!
//! Data path: [`server`] accepts a socket -> `conn` reads bytes -> [`resp::parse`] cuts them into
//! commands -> `commands` runs each against a [`backend::KvBackend`] (the engine, or memory in
//! tests) under the key layout of [`keyspace`] -> [`resp::reply`] encodes the replies, written once
//! per batch. `config` and `state` hold the settings and what connections share.
//!
//! Entry points: [`serve_blocking`] (the `strata serve` command: opens the engine, serves until
//! SIGINT/SIGTERM/SHUTDOWN, syncs and closes), [`Server`] (async, embeddable) and
//! [`ServerThread`] (a server on its own thread, for synchronous callers and tests).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
mod acl;
pub mod backend;
mod busy;
pub mod cluster;
pub mod collection;
mod commands;
pub mod config;
mod conn;
mod dump;
pub mod error;
mod expire;
pub mod glob;
pub mod keyspace;
mod ldouble;
mod notify;
pub mod num;
mod pubsub;
pub mod resp;
mod server;
mod state;
mod stream;
mod stream_node;
mod text;
mod tracking;
mod txn;
mod watchers;

use std::path::Path;
use std::sync::Arc;

pub use backend::{KvBackend, MemoryBackend};
pub use config::{AppendFsync, ServeArgs, ServerConfig};
pub use error::{Error, Result};
pub use server::{Server, ServerThread, ShutdownHandle};

/// `opts` as a server's store in `dir` needs them; every program that opens a server's data
/// directory (`strata serve`, the CLI, tests) uses them: the key router that keeps a hash's
/// fields in its key's partition and the expiry index in a partition of its own
/// (`collection::ServerRouter`, recorded in the store), the compaction filter that reclaims
/// expired keys and disowned fields (`keyspace::DeadKeys`), and the key classes that count each
/// database's keys for DBSIZE (`keyspace::KeysByDb`).
///
/// A new store gets `opts.partitions` partitions for the data and one more for the expiry
/// index (asked for the engine's limit, `strata::PARTITIONS_MAX`, that many in all, one of
/// them the index's; more is left for `Db::open` to refuse); an
/// existing one keeps the rule it was made with (stores made before the index had a
/// partition of its own keep it among the data), and opens with its data partition count
/// as well as with its total. Options it already made are returned as they are (`strata
/// serve` passes the CLI's options on), so the index partition is added once.
pub fn store_options(mut opts: strata::Options, dir: &Path) -> strata::Options {
    if opts
        .key_router
        .as_ref()
        .is_some_and(|r| collection::ServerRouter::from_id(r.id()).is_some())
    {
        return opts;
    }
    // A layout that cannot be read leaves the choice to `Db::open`, which reports why.
    let layout = strata::Db::existing_layout(dir, opts.fs.as_ref())
        .ok()
        .flatten();
    let router = collection::ServerRouter::for_store(layout.map(|l| l.router_id));
    if router.keeps_expiry_apart() {
        match layout {
            // (No partitions at all is left for `Db::open` to refuse.)
            None if opts.partitions > 0 && opts.partitions < strata::PARTITIONS_MAX => {
                opts.partitions += 1
            }
            Some(l) if l.partitions == opts.partitions + 1 => opts.partitions = l.partitions,
            _ => {}
        }
    }
    opts.compaction_filter = Some(Arc::new(keyspace::DeadKeys::default()));
    opts.key_classes = Some(Arc::new(keyspace::KeysByDb));
    opts.key_router = Some(Arc::new(router));
    // Redis strings go up to 512 MiB (`proto-max-bulk-len`); a record adds its header and
    // expiry time.
    opts.value_bytes_max = opts
        .value_bytes_max
        .max(STRING_BYTES_MAX + RECORD_HEADER_BYTES_MAX);
    opts
}

/// Descriptors kept for the server's own use beyond one per client and the engine's files
/// (Redis's `CONFIG_MIN_RESERVED_FDS`).
const RESERVED_FDS: u64 = 32;

/// Makes room for `maxclients` clients under the open-files limit, as redis-server does at
/// startup: the soft limit is raised as far as the hard limit allows (to the hard limit: the
/// engine opens more files as its tables grow); if even that leaves too few descriptors for
/// `maxclients` beside the files open now and a reserve, `maxclients` is lowered to fit, with a
/// warning, so that a client over the limit is turned away with Redis's "max number of
/// clients reached" instead of hanging on a connection nobody accepts.
fn fit_open_files_limit(config: &mut ServerConfig) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    // `None` is unlimited.
    let Some(soft) = limit.current else {
        return;
    };
    // Linux's default ceiling for an unlimited hard limit (`fs.nr_open`).
    const UNLIMITED_HARD_FDS: u64 = 1 << 20;
    let hard = limit.maximum.unwrap_or(UNLIMITED_HARD_FDS);
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    let wanted = config.maxclients as u64 + RESERVED_FDS + open_now;
    let mut usable = soft;
    if soft < wanted && hard > soft {
        limit.current = Some(hard);
        match setrlimit(Resource::Nofile, limit) {
            Ok(()) => {
                tracing::info!("raised the open-files limit from {soft} to {hard}");
                usable = hard;
            }
            Err(e) => tracing::warn!("cannot raise the open-files limit from {soft}: {e}"),
        }
    }
    if usable < wanted {
        let fit = usable.saturating_sub(RESERVED_FDS + open_now).max(1);
        tracing::warn!(
            "maxclients {} needs {wanted} open files (clients, the engine's {open_now}, a reserve of {RESERVED_FDS}) but the limit is {usable}: maxclients lowered to {fit} (raise `ulimit -n`)",
            config.maxclients
        );
        config.maxclients = usize::try_from(fit).unwrap_or(usize::MAX);
    }
}

/// Largest string value, as Redis's default `proto-max-bulk-len`.
const STRING_BYTES_MAX: usize = 512 << 20;
/// A record's header byte and expiry time, at most (`keyspace::Record`).
const RECORD_HEADER_BYTES_MAX: usize = 16;

/// Runs `strata serve`: opens the engine in `dir` with `opts` (its durability mode replaced by
/// `--appendfsync`), serves until SIGINT, SIGTERM or the SHUTDOWN command, then stops accepting,
/// lets in-flight commands finish, syncs the write-ahead logs and closes the engine.
pub fn serve_blocking(args: ServeArgs, opts: strata::Options, dir: &Path) -> anyhow::Result<()> {
    let mut config = ServerConfig::from_args(&args)?;
    config.dir = Some(dir.to_path_buf());
    let mut opts = opts;
    opts.sync = config.appendfsync.sync_mode();
    opts.background_nice = config.background_nice;
    let opts = store_options(opts, dir);
    tracing::info!(
        dir = %dir.display(),
        appendfsync = config.appendfsync.name(),
        partitions = opts.partitions,
        "opening the database"
    );
    let db = Arc::new(
        strata::Db::open(dir, opts)
            .map_err(|e| anyhow::anyhow!("opening the database in {}: {e}", dir.display()))?,
    );
    fit_open_files_limit(&mut config);
    let runtime = connection_runtime(config.io_threads.unwrap_or_else(default_io_threads))?;
    let backend: Arc<dyn KvBackend + Send + Sync> = db.clone();
    let served = runtime.block_on(async {
        let signals = termination_signal();
        let server = Server::bind(config, backend).await?;
        tracing::info!(
            "serving {} on {}; stop with Ctrl-C, SIGTERM or SHUTDOWN",
            dir.display(),
            server.local_addr()
        );
        tokio::select! {
            _ = server.shutdown_requested() => {}
            r = async {
                match signals {
                    Ok(signal) => Ok(signal.await),
                    Err(e) => Err(e),
                }
            } => match r {
                Ok(name) => tracing::info!("{name} received, shutting down"),
                Err(e) => tracing::warn!("cannot listen for signals ({e}); shutting down"),
            },
        }
        server.shutdown().await
    });
    // Connection tasks that outlived the drain timeout still hold the engine; dropping the
    // runtime cancels them (after any engine call they are in finishes) so the engine can be
    // closed cleanly below.
    drop(runtime);
    served?;
    match Arc::try_unwrap(db) {
        Ok(db) => db.close()?,
        Err(db) => {
            // Someone still holds the engine (cannot happen once the runtime is gone, but the
            // logs must be durable whatever happens).
            db.sync()?;
        }
    }
    tracing::info!(dir = %dir.display(), "database closed");
    Ok(())
}

/// Installs the SIGINT and SIGTERM handlers now and returns a future that waits for either
/// (its name). Called before the listener binds: a SIGTERM that comes as soon as clients can
/// connect must shut the server down cleanly, not kill it with the default action (a crash
/// test sent one there and saw the process die of it).
fn termination_signal() -> std::io::Result<impl std::future::Future<Output = &'static str>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            match tokio::signal::ctrl_c().await {
                Ok(()) => "Ctrl-C",
                Err(_) => std::future::pending().await,
            }
        })
    }
}

/// The runtime of the connection threads. One thread (the default on two cores): a
/// single-threaded runtime runs the connections woken by one poll of the sockets in the order
/// they were woken, as Redis's event loop does. The multi-threaded one runs the last woken first
/// (its LIFO slot), so of two clients' commands that arrived together the second could run
/// first (a client's UNSUBSCRIBE sent before another's PUBLISH, say: redis-server's own test
/// suite saw it).
pub(crate) fn connection_runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("strata-server")
            .enable_all()
            .build()
    }
}

/// Connection threads when `io-threads` is not set: half the cores, at least one. The other
/// half is left to the engine's flush and compaction threads and to clients on the same machine:
/// on 2 cores with `redis-benchmark` beside the server, one connection thread served
/// redis-benchmark's default tests at 1.03-1.83x the requests of two (`-P 16`; GET and
/// LRANGE at 0.90, BENCHMARKS.md).
pub fn default_io_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}
