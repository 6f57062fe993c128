//! What connections share ([`Shared`]: the backend, live settings, counters, SCAN cursors, the
//! shutdown signal) and what each owns ([`Session`]: protocol version, auth, name). Commands get
//! both through `commands::Ctx`. Locks here are held only for short, non-blocking sections and
//! never across an engine call.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::backend::KvBackend;
use crate::collection::PopWindow;
use crate::config::ServerConfig;
use crate::error::Result;
use crate::keyspace::{DbIndex, KeyType};
use crate::pubsub::{Mailbox, Message, PubSub, Subscriptions};
use crate::resp::{Limits, Protocol, Reply};
use crate::txn::{ExpiryDue, WatchFlag, Watches, Watching};

/// Locks a mutex, ignoring poisoning: every section guarded here leaves its data consistent at
/// every step, so a panic elsewhere does not make it unusable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Milliseconds on the system's coarse monotonic clock (a tick's precision, 1-10 ms): stamps
/// read in whole seconds (CLIENT LIST `idle`) written on every command, where a fine clock
/// read cost 2-3 % of a pipelined PING's CPU.
pub(crate) fn coarse_monotonic_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let ms = u64::try_from(t.tv_nsec / 1_000_000).unwrap_or(0);
    secs.saturating_mul(1000).saturating_add(ms)
}

/// Server-wide counters reported by INFO.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub connected_clients: AtomicUsize,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_commands: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Keys read commands found and did not find (`commands/hits.rs`).
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    /// Keys active expiry removed.
    pub expired_keys: AtomicU64,
}

impl Counters {
    pub fn reset(&self) {
        for c in [
            &self.total_connections,
            &self.rejected_connections,
            &self.total_commands,
            &self.protocol_errors,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.expired_keys,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// What CLIENT LIST shows about a connection; updated only on rare events (connect, SETNAME,
/// HELLO), never per command, so it costs no contention on the hot path.
#[derive(Debug, Clone)]
pub(crate) struct ClientEntry {
    pub peer: String,
    pub local: String,
    pub name: Option<Bytes>,
    /// What the client library said it is (CLIENT SETINFO LIB-NAME / LIB-VER, Redis 7.2).
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    /// The ACL user the connection acts as (CLIENT LIST `user`, CLIENT KILL USER).
    pub user: Bytes,
    pub connected_at: Instant,
    pub protocol: Protocol,
    /// The selected (logical) database.
    pub db: DbIndex,
    /// The socket's file descriptor (-1 where there is none to show).
    pub fd: i64,
    /// What other connections may ask of this one.
    pub control: Arc<ClientControl>,
}

/// How another connection asks one to end or to stop waiting (CLIENT KILL, CLIENT UNBLOCK);
/// the connection's task looks at it whenever `wake` fires and before each batch.
#[derive(Debug, Default)]
pub(crate) struct ClientControl {
    /// Close the connection.
    pub kill: AtomicBool,
    /// End the blocked command: [`UNBLOCK_TIMEOUT`] or [`UNBLOCK_ERROR`] (0: nothing asked).
    pub unblock: std::sync::atomic::AtomicU8,
    /// Whether the connection waits in a blocking command (BLPOP...).
    pub blocked: AtomicBool,
    /// Whether the connection listens to a channel, pattern or shard channel (CLIENT LIST
    /// TYPE pubsub).
    pub subscribed: AtomicBool,
    /// Channels, patterns and shard channels it listens to (CLIENT LIST `sub`, `psub`, `ssub`).
    pub channels: std::sync::atomic::AtomicUsize,
    pub patterns: std::sync::atomic::AtomicUsize,
    pub shard_channels: std::sync::atomic::AtomicUsize,
    /// Commands queued since MULTI, -1 outside MULTI (CLIENT LIST `multi`).
    pub queued: std::sync::atomic::AtomicI64,
    /// When its last command ran, in [`coarse_monotonic_ms`], 0 before its first (CLIENT
    /// LIST `idle`).
    pub last_command_ms: AtomicU64,
    /// Its last command, as Redis names it (`get`, `client|list`: CLIENT LIST `cmd`).
    pub last_command: parking_lot::Mutex<(&'static str, Option<Bytes>)>,
    pub wake: tokio::sync::Notify,
}

impl ClientControl {
    /// Asks the connection to close (CLIENT KILL, ACL DELUSER...): it ends at its next look.
    pub fn close(&self) {
        self.kill.store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify_one();
    }

    /// Whether the connection was asked to close and is on its way out. Redis frees a killed
    /// client at once, so such a connection no longer counts: a second CLIENT KILL does not
    /// match it and CLIENT LIST does not show it.
    pub fn closing(&self) -> bool {
        self.kill.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// CLIENT UNBLOCK ... TIMEOUT: the command answers as if its time were up.
pub(crate) const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK ... ERROR: the command answers `-UNBLOCKED`.
pub(crate) const UNBLOCK_ERROR: u8 = 2;

/// Where a SCAN stopped: the namespace index and the last user key examined in it (`None`: the
/// namespace has not been started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanPosition {
    pub namespace: usize,
    pub after_key: Option<Vec<u8>>,
}

impl ScanPosition {
    fn key_bytes(&self) -> usize {
        self.after_key.as_ref().map_or(0, Vec::len)
    }
}

/// Open SCAN cursors. A Redis cursor is a 64-bit number clients echo back (client libraries parse
/// it as u64), too small to hold a key, so the position lives here and the cursor names it.
/// Bounded by count and key bytes; the oldest is forgotten first, and a forgotten cursor is
/// reported as invalid rather than silently restarting.
#[derive(Debug)]
pub(crate) struct CursorTable {
    next_id: u64,
    positions: HashMap<u64, ScanPosition>,
    order: VecDeque<u64>,
    key_bytes: usize,
}

/// Most open cursors remembered.
const CURSORS_MAX: usize = 100_000;
/// Most key bytes held by open cursors.
const CURSOR_KEY_BYTES_MAX: usize = 32 << 20;

impl CursorTable {
    fn new() -> Self {
        // Start ids at a time-derived value so cursors from before a restart do not name new
        // positions by accident.
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        CursorTable {
            next_id: (seed % (1 << 40)).max(1),
            positions: HashMap::new(),
            order: VecDeque::new(),
            key_bytes: 0,
        }
    }

    /// Remembers `pos`; returns its cursor (never 0).
    pub fn insert(&mut self, pos: ScanPosition) -> u64 {
        while self.positions.len() >= CURSORS_MAX
            || self.key_bytes + pos.key_bytes() > CURSOR_KEY_BYTES_MAX
        {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(p) = self.positions.remove(&old) {
                self.key_bytes -= p.key_bytes();
            }
        }
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        self.key_bytes += pos.key_bytes();
        self.positions.insert(id, pos);
        self.order.push_back(id);
        id
    }

    /// The position a cursor names (kept, so a client may retry the same call).
    pub fn get(&self, id: u64) -> Option<ScanPosition> {
        self.positions.get(&id).cloned()
    }

    /// Where a scan given cursor `id` goes on: the start for 0, and also for a cursor this
    /// table no longer knows (the oldest are forgotten past the bound, and a restart forgets
    /// all): keys may then come twice, none is missed. Redis takes any number as a cursor, so
    /// clients never expect an error here.
    pub fn resume(&self, id: u64) -> ScanPosition {
        self.get(id).unwrap_or(ScanPosition {
            namespace: 0,
            after_key: None,
        })
    }
}

/// Computed key counts of the logical databases that hold keys (INFO keyspace, MEMORY STATS):
/// when, what it cost, each database's tally.
pub(crate) type KeyspaceInfo = (
    Instant,
    std::time::Duration,
    Vec<(usize, crate::keyspace::Tally)>,
);

/// Stripes of `Shared::doc_locks`.
const DOC_LOCK_STRIPES: usize = 64;

/// State shared by all connections of one server.
pub(crate) struct Shared {
    pub backend: Arc<dyn KvBackend + Send + Sync>,
    config: RwLock<ServerConfig>,
    pub counters: Counters,
    pub cursors: Mutex<CursorTable>,
    pub clients: Mutex<BTreeMap<u64, ClientEntry>>,
    /// The exec lock (`txn.rs`): writes hold it shared; EXEC and commands that check several
    /// keys before writing them hold it exclusively.
    pub exec_lock: parking_lot::RwLock<()>,
    /// The script or function running now, for BUSY and SCRIPT KILL (`busy.rs`).
    pub running_script: crate::busy::RunningScript,
    /// WATCHed keys; the backend above reports every write to it.
    pub watches: Arc<Watches>,
    /// Pub/Sub subscriptions.
    pub pubsub: Arc<PubSub>,
    /// When each key was last used (OBJECT IDLETIME, `access.rs`).
    pub access: crate::access::AccessTimes,
    /// Which keyspace notifications are published (`notify.rs`).
    pub notify: crate::notify::Notifier,
    /// INFO keyspace's last result: when, what computing it cost, the lines.
    pub keyspace_info: Mutex<Option<KeyspaceInfo>>,
    /// Scripts EVAL and SCRIPT LOAD have seen, by the lowercase hex SHA-1 of their body
    /// (EVALSHA's cache; kept until SCRIPT FLUSH, in memory as in Redis).
    pub scripts: Mutex<HashMap<String, Bytes>>,
    /// The function libraries (FUNCTION LOAD, `commands/functions.rs`).
    pub functions: Mutex<crate::commands::functions::Registry>,
    /// Counts SCRIPT FLUSHes: a thread's Lua state made before the last one is made anew.
    pub script_generation: std::sync::atomic::AtomicU64,
    /// When each database next has an expiry due (`txn::ExpiryDue`).
    pub expiry_due: Arc<ExpiryDue>,
    /// Striped locks over document names: a document and its expiry record are two engine
    /// keys, so every change that reads one and writes both (JSON writes, EXPIRE/PERSIST on a
    /// document, DEL, active expiry) holds its name's stripe.
    doc_locks: Vec<parking_lot::Mutex<()>>,
    /// Logical database -> physical database (`keyspace::DbMap`); changed only by SWAPDB,
    /// under the exec lock held exclusively.
    db_map: [std::sync::atomic::AtomicU8; crate::keyspace::DATABASES_MAX],
    /// `true` once shutdown was requested (SHUTDOWN, a signal, or `Server::shutdown`).
    pub shutdown: watch::Sender<bool>,
    pub started: Instant,
    /// ACL users and the ACL log.
    pub acl: crate::acl::Acl,
    /// CONFIG `maxmemory` (0: none), read by the dispatcher before each command.
    maxmemory_bytes: AtomicU64,
    /// The resident set as last read, and when (ms since `started`): read again at most every
    /// [`USED_MEMORY_REFRESH_MS`] while a `maxmemory` is set.
    used_memory: (AtomicU64, AtomicU64),
    /// The resident set when the server had started (MEMORY STATS' `startup.allocated`).
    pub startup_resident_bytes: u64,
    next_client_id: AtomicU64,
    pub last_save_unix_secs: AtomicU64,
    /// Writes since the last SAVE (INFO's `rdb_changes_since_last_save`).
    pub dirty: AtomicU64,
    /// True while a BGSAVE thread runs; shutdown waits for it (it holds the engine).
    pub bgsave_running: Arc<AtomicBool>,
    /// CLIENT PAUSE: until when, and whether for every command or writes only.
    pub pause: ClientPause,
    /// INFO's instantaneous ops/s and network rates.
    pub rates: Rates,
    /// INFO's `run_id`: 40 random hex digits, new at each start.
    pub run_id: String,
    /// The key names of stored documents (shared with `DocStore` through the backend).
    pub names: Arc<strata_doc::KeyNames>,
    /// False while the store holds no JSON document (none at start, none written since): string
    /// commands then skip the lookup that keeps a name from being both a string and a document.
    /// Documents written around the server (a `DocStore` on the same engine while it serves) are
    /// not noticed until restart.
    docs_may_exist: AtomicBool,
    /// Versions for new incarnations of collections (`collection.rs`).
    pub versions: crate::collection::Versions,
    /// Connections blocked in BLPOP, BRPOP or BLMOVE, queued per list, and what wakes them.
    pub list_waiters: Arc<ListWaiters>,
    /// The cluster state in cluster node mode (`cluster.rs`); `None` for a standalone server.
    pub cluster: Option<crate::cluster::ClusterNode>,
    /// The slow log and the MONITOR clients.
    pub watchers: crate::watchers::Watchers,
    /// INFO commandstats and errorstats.
    pub command_stats: crate::watchers::CommandStats,
}

impl Shared {
    /// CONFIG SET maxmemory.
    pub fn set_maxmemory(&self, bytes: u64) {
        self.maxmemory_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Whether a `maxmemory` is set and the process's resident memory is above it (Redis's
    /// out-of-memory state under `noeviction`). One atomic load while none is set.
    pub fn over_maxmemory(&self) -> bool {
        let max = self.maxmemory_bytes.load(Ordering::Relaxed);
        if max == 0 {
            return false;
        }
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (used, read_at) = &self.used_memory;
        let last = read_at.load(Ordering::Relaxed);
        if last == 0 || now_ms.saturating_sub(last) >= USED_MEMORY_REFRESH_MS {
            read_at.store(now_ms.max(1), Ordering::Relaxed);
            if let Some(rss) = crate::commands::server::resident_bytes() {
                used.store(rss, Ordering::Relaxed);
            }
        }
        used.load(Ordering::Relaxed) > max
    }

    /// Wakes connections blocked on lists or sorted sets at once: the cluster's map changed
    /// (a command's pushes wake them after its events: [`Session::note_list_push`]).
    pub fn note_list_push(&self) {
        self.list_waiters.note();
    }

    /// Reads the key names of stored documents from `backend`.
    pub fn new(backend: Arc<dyn KvBackend + Send + Sync>, config: ServerConfig) -> Result<Self> {
        let (shutdown, _) = watch::channel(false);
        crate::keyspace::prepare(backend.as_ref())?;
        let db_map = crate::keyspace::read_db_map(backend.as_ref())?;
        let watches = Arc::new(Watches::default());
        watches
            .tracking
            .set_table_keys_max(config.tracking_table_max_keys);
        let expiry_due = Arc::new(ExpiryDue::default());
        let busy_reply_threshold_ms = config.busy_reply_threshold_ms;
        let backend: Arc<dyn KvBackend + Send + Sync> = Arc::new(Watching {
            inner: backend,
            watches: watches.clone(),
            due: expiry_due.clone(),
        });
        let names = Arc::new(strata_doc::KeyNames::open(Arc::new(
            crate::keyspace::BackendNames(Arc::clone(&backend)),
        ))?);
        let docs_may_exist = AtomicBool::new(crate::keyspace::any_document(backend.as_ref())?);
        let cluster = if config.cluster {
            Some(crate::cluster::ClusterNode::open(backend.as_ref())?)
        } else {
            None
        };
        // DBSIZE reads the engine's key counts, which are unknown after open: one walk of the
        // keys (values unread) before anything is served, like Redis loading its data.
        // A damaged table must not keep the server from serving the rest: the counts stay
        // unknown then, and DBSIZE walks.
        let counting = std::time::Instant::now();
        match backend.recount_keys() {
            Ok(()) => tracing::info!(
                elapsed_ms = counting.elapsed().as_millis() as u64,
                "keys counted"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "keys could not be counted; DBSIZE will walk them")
            }
        }
        let functions = crate::commands::functions::Registry::read(backend.as_ref())?;
        let watchers = crate::watchers::Watchers::new(
            config.slowlog_log_slower_than_us,
            config.slowlog_max_len,
        );
        let notify = crate::notify::Notifier::new(config.notify_keyspace_events);
        let acl = crate::acl::Acl::new(config.requirepass.as_deref());
        acl.set_log_entries_max(config.acllog_max_len);
        if let Some(path) = &config.aclfile {
            if path.exists() {
                acl.load_file(&strata::vfs::RealFs, path).map_err(|e| {
                    crate::error::Error::command(format!("the ACL file could not be loaded: {e}"))
                })?;
            } else {
                tracing::warn!(file = %path.display(), "aclfile does not exist yet: ACL SAVE writes it");
            }
        }
        let maxmemory_bytes = config.maxmemory_bytes;
        Ok(Shared {
            watchers,
            command_stats: crate::watchers::CommandStats::new(
                crate::commands::table().map(|s| s.name),
            ),
            cluster,
            names,
            docs_may_exist,
            backend,
            config: RwLock::new(config),
            counters: Counters::default(),
            cursors: Mutex::new(CursorTable::new()),
            clients: Mutex::new(BTreeMap::new()),
            exec_lock: parking_lot::RwLock::new(()),
            running_script: crate::busy::RunningScript::with_threshold_ms(busy_reply_threshold_ms),
            watches,
            pubsub: Arc::default(),
            access: crate::access::AccessTimes::new(),
            notify,
            keyspace_info: Mutex::new(None),
            scripts: Mutex::new(HashMap::new()),
            functions: Mutex::new(functions),
            script_generation: std::sync::atomic::AtomicU64::new(0),
            expiry_due,
            doc_locks: (0..DOC_LOCK_STRIPES)
                .map(|_| parking_lot::Mutex::new(()))
                .collect(),
            db_map: db_map.map(std::sync::atomic::AtomicU8::new),
            shutdown,
            started: Instant::now(),
            acl,
            maxmemory_bytes: AtomicU64::new(maxmemory_bytes),
            used_memory: (AtomicU64::new(0), AtomicU64::new(0)),
            startup_resident_bytes: crate::commands::server::resident_bytes().unwrap_or(0),
            next_client_id: AtomicU64::new(1),
            last_save_unix_secs: AtomicU64::new(unix_secs()),
            dirty: AtomicU64::new(0),
            bgsave_running: Arc::new(AtomicBool::new(false)),
            pause: ClientPause::default(),
            rates: Rates::default(),
            run_id: random_hex_40(),
            versions: crate::collection::Versions::default(),
            list_waiters: Arc::new(ListWaiters::default()),
        })
    }

    /// A snapshot of the live settings.
    pub fn config(&self) -> ServerConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes live settings atomically (all or nothing is the caller's job).
    pub fn update_config(&self, f: impl FnOnce(&mut ServerConfig)) {
        f(&mut self.config.write().unwrap_or_else(PoisonError::into_inner));
    }

    /// Redis's compact-encoding thresholds from the live settings (OBJECT ENCODING).
    pub fn encodings(&self) -> crate::config::EncodingLimits {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .encodings
    }

    /// The parser limits from the live settings.
    pub fn limits(&self) -> Limits {
        Limits {
            bulk_bytes_max: self
                .config
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .proto_max_bulk_len_bytes,
            ..Limits::default()
        }
    }

    /// Most bytes of unprocessed input a connection may hold.
    pub fn query_buffer_limit_bytes(&self) -> usize {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .client_query_buffer_limit_bytes
    }

    /// Idle seconds before a connection is closed (0 = never).
    pub fn idle_timeout_secs(&self) -> u64 {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .timeout_secs
    }

    /// Most simultaneous clients.
    pub fn maxclients(&self) -> usize {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .maxclients
    }

    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    #[cfg(test)]
    pub fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// The exec lock's shared side, waited for until a script holding it passes
    /// `busy-reply-threshold`: `Err(eval)` then, for `busy::busy_error` (`busy.rs`).
    pub fn exec_read_unless_busy(
        &self,
    ) -> std::result::Result<parking_lot::RwLockReadGuard<'_, ()>, bool> {
        crate::busy::wait_unless_busy(&self.running_script, |t| self.exec_lock.try_read_for(t))
    }

    /// [`Shared::exec_read_unless_busy`] for the exclusive side.
    pub fn exec_write_unless_busy(
        &self,
    ) -> std::result::Result<parking_lot::RwLockWriteGuard<'_, ()>, bool> {
        crate::busy::wait_unless_busy(&self.running_script, |t| self.exec_lock.try_write_for(t))
    }

    /// Whether a JSON document may exist (see `docs_may_exist`).
    pub fn docs_may_exist(&self) -> bool {
        self.docs_may_exist.load(Ordering::Acquire)
    }

    /// Called before a document is written, so that string commands look for documents from
    /// then on.
    pub fn note_document(&self) {
        self.docs_may_exist.store(true, Ordering::Release);
    }

    /// The stripe lock of document `name` in physical database `db` (see `doc_locks`).
    pub fn doc_lock(&self, db: DbIndex, name: &[u8]) -> parking_lot::MutexGuard<'_, ()> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (db, name).hash(&mut h);
        self.doc_locks[(h.finish() % DOC_LOCK_STRIPES as u64) as usize].lock()
    }

    /// The physical database (engine-key byte) of logical database `db`.
    pub fn physical_db(&self, db: DbIndex) -> DbIndex {
        self.db_map[usize::from(db)].load(Ordering::Relaxed)
    }

    /// The logical database (as clients number it) stored as physical database `physical`.
    pub fn logical_db(&self, physical: DbIndex) -> DbIndex {
        (0..crate::keyspace::DATABASES_MAX)
            .filter_map(|l| DbIndex::try_from(l).ok())
            .find(|&l| self.physical_db(l) == physical)
            .unwrap_or(physical)
    }

    /// Publishes the `expired` keyspace event of `key` of physical database `physical`, which
    /// active expiry just removed (`notify.rs`).
    pub fn notify_expired(&self, physical: DbIndex, key: &[u8]) {
        if self.list_waiters.any_waiting() {
            self.list_waiters
                .note_key_if_waited(self.logical_db(physical), key);
        }
        if !self.notify.wants(crate::notify::EXPIRED) {
            return;
        }
        let event = crate::notify::Event {
            class: crate::notify::EXPIRED,
            name: "expired",
            db: self.logical_db(physical),
            key: Bytes::copy_from_slice(key),
        };
        self.notify.publish(&self.pubsub, &event);
    }

    /// The whole database map.
    pub fn db_map(&self) -> crate::keyspace::DbMap {
        std::array::from_fn(|i| self.db_map[i].load(Ordering::Relaxed))
    }

    /// Swaps two logical databases (SWAPDB): written to `store` first, then visible. The
    /// caller holds the exec lock exclusively. Inside a transaction or a script `store` is its
    /// overlay, so the swap is part of its one batch; if that batch then fails, the caller puts
    /// the map back ([`Shared::set_db_map`]).
    pub fn swap_databases(
        &self,
        a: DbIndex,
        b: DbIndex,
        store: &dyn crate::backend::KvBackend,
    ) -> Result<()> {
        let mut map = self.db_map();
        map.swap(usize::from(a), usize::from(b));
        crate::keyspace::write_db_map(store, &map)?;
        self.set_db_map(&map);
        Ok(())
    }

    /// Makes `map` the database map (SWAPDB; and a transaction or script whose batch failed
    /// puts back the map it started with, which the store still holds).
    pub fn set_db_map(&self, map: &crate::keyspace::DbMap) {
        for (slot, physical) in self.db_map.iter().zip(map) {
            slot.store(*physical, Ordering::Relaxed);
        }
    }

    pub fn note_writes(&self, n: u64) {
        self.dirty.fetch_add(n, Ordering::Relaxed);
    }
}

/// What the connection must do after the current reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum AfterReply {
    /// Keep serving.
    #[default]
    Continue,
    /// Send the pending replies, then close (QUIT).
    Close,
    /// Close without sending this command's reply (SHUTDOWN, security probes).
    CloseSilently,
}

/// How often the dispatcher reads the resident set again while `maxmemory` is set.
pub(crate) const USED_MEMORY_REFRESH_MS: u64 = 100;

/// Per-connection state.
pub(crate) struct Session {
    pub id: u64,
    pub protocol: Protocol,
    pub authenticated: bool,
    /// The ACL user this connection acts as (`default` until AUTH names another).
    pub user: Bytes,
    /// That user as last looked up, with the ACL generation it was read at.
    pub acl_user: Option<(u64, Option<Arc<crate::acl::User>>)>,
    pub name: Option<Bytes>,
    pub after_reply: AfterReply,
    /// The selected database (SELECT).
    pub db: DbIndex,
    /// Commands queued since MULTI.
    pub multi: Option<Multi>,
    /// Keys WATCHed since the last EXEC, DISCARD or UNWATCH.
    pub watch: Option<WatchState>,
    /// Pub/Sub channels and patterns this connection listens to.
    pub subs: Subscriptions,
    /// The receiving end of this connection's mailbox, until its connection task takes it.
    pub mailbox: Option<mpsc::UnboundedReceiver<Message>>,
    /// The mailbox's byte count and overflow flag (shared with the senders).
    pub mailbox_bytes: Arc<std::sync::atomic::AtomicUsize>,
    pub mailbox_overflowed: Arc<AtomicBool>,
    /// Set by a blocking command (BLPOP...) that found nothing to take: its connection waits
    /// (without a thread) until a list may have grown or the time is up, then runs it again.
    pub blocked: Option<Blocked>,
    /// The blocked command's place in the queues of the lists it waits on; dropped (leaving
    /// them) when it answers or the client leaves.
    pub wait_ticket: Option<WaitTicket>,
    /// Cluster node mode: every keyed command goes through the dispatcher's slot check (a run
    /// of plain SETs merged by the connection only when every key is served here plainly).
    pub cluster: bool,
    /// ASKING was the previous command (cluster mode): a slot being imported serves the next.
    pub asking: bool,
    /// EXEC is running this session's queued commands (checked for their slots as a whole).
    pub in_exec: bool,
    /// The connection is running a held run (`conn.rs`): its commands hold the partition of
    /// their one key, so a pop may leave a [`PopWindow`] for the next.
    pub in_held_run: bool,
    /// When the last command of the batch being run ended (`conn::Batch::run` clears it as a
    /// batch starts and ends): the next command of the batch starts its timing there instead
    /// of reading the clock once more (each read was 2-3 % of a pipelined PING's CPU).
    pub clock_mark: Option<std::time::Instant>,
    /// What the held run's last command, a pop, read beyond what it took; dropped by any other
    /// command and when the run ends.
    pub pop_window: Option<PopWindow>,
    /// The client's address (`ip:port`), as the slow log and MONITOR show it.
    pub peer: Bytes,
    /// A script is running this session's commands (MONITOR shows them as `lua`; the slow log
    /// records the script, not its commands).
    pub in_script: bool,
    /// The command being dispatched reached its handler (INFO commandstats tells calls that
    /// failed from calls refused before they ran).
    pub handler_ran: bool,
    /// The error the command answers was counted in INFO errorstats already (a script's,
    /// made by a command that failed inside it).
    pub error_counted: bool,
    /// What other connections see of this one (CLIENT LIST); `None` for sessions without a
    /// connection (tests, the text port).
    pub control: Option<Arc<ClientControl>>,
    /// CLIENT REPLY: which replies are sent.
    pub replies: ReplyMode,
    /// Keyspace notifications of the running command (of a whole EXEC or script), published
    /// when it ends (`notify.rs`).
    pub events: Vec<crate::notify::Event>,
    /// Lists the running command (its EXEC, its script, its held run) pushed to: their blocked
    /// clients are woken after its events are published, so that a subscriber sees the push's
    /// events before the pop's, as in Redis ([`Session::wake_pushed`]).
    pub pushed: PendingPushes,
    /// A blocked XREAD's IDs as its first look resolved them (`$`: the stream's last ID then),
    /// for its looks again.
    pub stream_from: Option<Vec<crate::stream::StreamId>>,
    /// CLIENT TRACKING's options while on (a copy of what `tracking::Tracking` keeps, read by
    /// the dispatcher after each read-only command).
    pub tracking: Option<crate::tracking::Mode>,
    /// CLIENT CACHING was given for the next command (or transaction).
    pub caching: bool,
    /// Invalidations this connection's last command made for itself, written after its reply.
    pub own_pushes: Vec<crate::tracking::Push>,
    /// The keys the running script or function declared (kept while the client tracks).
    pub script_keys: Vec<Bytes>,
    /// CLIENT NO-TOUCH ON: this client's commands (but TOUCH) leave access times alone.
    pub no_touch: bool,
}

/// Lists a command pushed to, whose blocked clients it has yet to wake.
#[derive(Debug, Default)]
pub(crate) struct PendingPushes {
    /// Lists of unknown names changed (EXEC, a script, RENAME): every waiter looks again.
    all: bool,
    /// (logical database, list name).
    keys: Vec<(DbIndex, Bytes)>,
}

impl PendingPushes {
    pub fn is_empty(&self) -> bool {
        !self.all && self.keys.is_empty()
    }
}

impl Session {
    /// List `key` of the selected database may have gained elements: its blocked clients look
    /// again once the command's events are published ([`Session::wake_pushed`]).
    pub fn note_key_push(&mut self, key: &Bytes) {
        let db = self.db;
        self.pushed.keys.push((db, key.clone()));
    }

    /// Any list may have gained elements (EXEC, a script, RENAME): every blocked client looks
    /// again once the command's events are published.
    pub fn note_list_push(&mut self) {
        self.pushed.all = true;
        self.pushed.keys.clear();
    }

    /// Wakes the clients blocked on the lists this session's commands pushed to.
    pub fn wake_pushed(&mut self, waiters: &ListWaiters) {
        if self.pushed.all {
            waiters.note();
        } else if !self.pushed.keys.is_empty() {
            waiters.note_pairs(self.pushed.keys.iter().map(|(db, k)| (*db, &k[..])));
        }
        self.pushed.all = false;
        self.pushed.keys.clear();
    }
}

/// Connections blocked on lists, queued per list in the order they blocked. Redis serves the
/// clients blocked on a list first come, first served; here a blocked connection wakes at any
/// change, looks again only if one of its lists changed since it last looked
/// ([`ListWaiters::needs_look`]), and a waiter takes from a list only what the waiters queued
/// before it leave ([`ListWaiters::ahead`], `commands/lists.rs`), so the elements still go in
/// that order.
///
/// Redis serves blocked clients right after the command that pushed, before any next command:
/// `RPUSH q a` then `LLEN q` from the pusher answers 0 when a client was blocked on `q`. Here
/// the pusher's connection waits, before its next command, until every waiter whose lists
/// changed has looked at them again ([`ListWaiters::settled`]; `conn.rs`). Writers name the
/// keys they pushed to ([`ListWaiters::note_pairs`]) where they can; a change of unknown keys
/// (EXEC, a script, RENAME) makes every waiter look again ([`ListWaiters::note`]).
#[derive(Default)]
pub(crate) struct ListWaiters {
    queues: parking_lot::Mutex<WaitQueues>,
    /// Counts changes that may have added elements to a list or moved a queue; blocked
    /// connections wake when it changes.
    pub changes: watch::Sender<u64>,
    /// Waiters queued (tickets alive): read without the lock by every command of every
    /// connection, so that a server without blocked clients pays one load per command.
    waiting: AtomicUsize,
    /// Signalled whenever a waiter has looked again or left: a pusher waiting in
    /// [`ListWaiters::settled`] checks again.
    looked_again: tokio::sync::Notify,
    /// The change count of the last change that a queued waiter must look at (a push to a
    /// list someone waits on, a change of unnamed lists, a queue moving up): a command after
    /// which it moved lets the waiters take their turn ([`ListWaiters::concerning`]); pushes
    /// to lists nobody waits on leave it, so they do not stop a pipeline.
    concerning: AtomicU64,
}

#[derive(Default)]
struct WaitQueues {
    next_ticket: u64,
    /// Tickets per (logical database, list name), oldest first, with the kind each waits for
    /// (a list, a sorted set: a client in BLPOP does not wait behind one in BZPOPMIN).
    by_list: HashMap<(DbIndex, Bytes), VecDeque<(u64, WaitKind)>>,
    /// Per ticket: the change count its command read before it last looked, and its lists.
    tickets: HashMap<u64, (u64, Vec<(DbIndex, Bytes)>)>,
    /// The change count of the last change of each list someone waits on.
    changed_at: HashMap<(DbIndex, Bytes), u64>,
    /// The change count of the last change of lists not named (every list may have changed).
    all_changed_at: u64,
}

impl WaitQueues {
    /// Whether the waiter holding `ticket` has looked since the last change of its lists.
    fn settled(&self, ticket: u64) -> bool {
        let Some((looked_at, lists)) = self.tickets.get(&ticket) else {
            return true;
        };
        let last_change = lists
            .iter()
            .filter_map(|l| self.changed_at.get(l))
            .fold(self.all_changed_at, |a, &b| a.max(b));
        *looked_at >= last_change
    }
}

/// Longest a pusher waits for the blocked clients to look at what it pushed: a bound against a
/// waiter whose connection cannot run (it never happens in the tests); past it the pusher's
/// next command runs, possibly before a waiter took its element.
pub(crate) const SERVE_WAITERS_MAX: std::time::Duration = std::time::Duration::from_millis(500);

impl ListWaiters {
    /// Every list may have changed: every blocked connection looks again.
    pub fn note(&self) {
        // The count moves under the queues' lock, so a change recorded at `next` is never
        // followed by a count that goes back (a waiter would take a later change for one it
        // had seen).
        let mut q = self.queues.lock();
        let next = self.generation().wrapping_add(1);
        q.all_changed_at = next;
        if !q.tickets.is_empty() {
            self.concerning.store(next, Ordering::Release);
        }
        self.changes.send_modify(|n| *n = next);
    }

    /// The lists `lists` (logical database, name) may have gained elements: the connections
    /// blocked on them look again (others wake, see nothing changed for them, and wait on).
    pub fn note_pairs<'k>(&self, lists: impl IntoIterator<Item = (DbIndex, &'k [u8])>) {
        let mut q = self.queues.lock();
        let next = self.generation().wrapping_add(1);
        if !q.by_list.is_empty() {
            for (db, key) in lists {
                let list = (db, Bytes::copy_from_slice(key));
                if q.by_list.contains_key(&list) {
                    q.changed_at.insert(list, next);
                    self.concerning.store(next, Ordering::Release);
                }
            }
        }
        // The count moves even when nobody waits on these keys: a command about to block
        // read the count before it looked, and finds it moved when it queues (`enqueue`).
        self.changes.send_modify(|n| *n = next);
    }

    /// Key `key` of logical database `db` changed in a way other than a push (deleted,
    /// replaced by another kind, a stream's group destroyed): the connections blocked on it
    /// look again (a reader blocked in a stream's consumer group then answers that the key or
    /// its group is gone, as Redis does). Nothing happens when nobody waits on the key. (A
    /// reader that looked at the key just before the change and queues just after it waits
    /// on: a narrow window, for a change that is rare beside a blocked reader.)
    pub fn note_key_if_waited(&self, db: DbIndex, key: &[u8]) {
        let mut q = self.queues.lock();
        let list = (db, Bytes::copy_from_slice(key));
        if !q.by_list.contains_key(&list) {
            return;
        }
        let next = self.generation().wrapping_add(1);
        q.changed_at.insert(list, next);
        self.concerning.store(next, Ordering::Release);
        self.changes.send_modify(|n| *n = next);
    }

    /// The current change count (see [`ListWaiters::changes`]).
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    /// The change count of the last change a queued waiter must look at; when it moves
    /// during a command, the blocked clients are served before the next one (`conn.rs`).
    pub fn concerning(&self) -> u64 {
        self.concerning.load(Ordering::Acquire)
    }

    /// Whether a connection waits on a list of `pushed` (any, when it names every list).
    pub fn concerns(&self, pushed: &PendingPushes) -> bool {
        if !self.any_waiting() || pushed.is_empty() {
            return false;
        }
        let q = self.queues.lock();
        pushed.all
            || pushed
                .keys
                .iter()
                .any(|(db, k)| q.by_list.contains_key(&(*db, k.clone())))
    }

    /// Whether any connection is blocked on a list or sorted set.
    pub fn any_waiting(&self) -> bool {
        self.waiting() > 0
    }

    /// How many connections are blocked on lists or sorted sets.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Queues a new waiter for keys of `kind` on `lists`, which looked at them when the change
    /// count was `looked_at`; it leaves when the ticket is dropped.
    pub fn enqueue(
        self: &Arc<Self>,
        lists: Vec<(DbIndex, Bytes)>,
        kind: WaitKind,
        looked_at: u64,
    ) -> WaitTicket {
        let mut q = self.queues.lock();
        q.next_ticket += 1;
        let ticket = q.next_ticket;
        // Something changed between the command's reading of the count and now, perhaps one
        // of these lists before anyone waited on it: it looks again.
        let now = self.generation();
        if now != looked_at {
            for list in &lists {
                q.changed_at.insert(list.clone(), now);
            }
        }
        for list in &lists {
            let queue = q.by_list.entry(list.clone()).or_default();
            if !queue.iter().any(|&(t, _)| t == ticket) {
                queue.push_back((ticket, kind));
            }
        }
        q.tickets.insert(ticket, (looked_at, lists));
        self.waiting.fetch_add(1, Ordering::AcqRel);
        drop(q);
        self.looked_again.notify_waiters();
        WaitTicket {
            waiters: self.clone(),
            ticket,
        }
    }

    /// Records that the waiter holding `ticket` looked at its lists again (its command read
    /// the change count `looked_at` first) and still waits.
    pub fn looked(&self, ticket: &WaitTicket, looked_at: u64) {
        if let Some((seen, _)) = self.queues.lock().tickets.get_mut(&ticket.ticket) {
            *seen = looked_at;
        }
        self.looked_again.notify_waiters();
    }

    /// Whether the waiter holding ticket `id` must look at its lists again: one changed since
    /// it last looked.
    pub fn needs_look(&self, id: u64) -> bool {
        !self.queues.lock().settled(id)
    }

    /// Whether every waiter has looked at its lists since their last change.
    fn all_settled(&self) -> bool {
        let q = self.queues.lock();
        q.tickets.keys().all(|&t| q.settled(t))
    }

    /// Waits until every blocked connection whose lists changed has looked at them again
    /// (taking what it could), or [`SERVE_WAITERS_MAX`] passed. A waiter served by a push
    /// leaves its queue, which is a change of its lists for those behind it, and a BLMOVE's
    /// push is a change of its destination: those clients are served before this returns too.
    pub async fn settled(&self) {
        let give_up = tokio::time::Instant::now() + SERVE_WAITERS_MAX;
        loop {
            let looked = self.looked_again.notified();
            tokio::pin!(looked);
            looked.as_mut().enable();
            if self.all_settled() {
                return;
            }
            tokio::select! {
                () = looked => {}
                () = tokio::time::sleep_until(give_up) => {
                    tracing::debug!("blocked clients did not look at a push within {SERVE_WAITERS_MAX:?}");
                    return;
                }
            }
        }
    }

    /// How many waiters for keys of `kind` queued on `list` come before `ticket` (every one of
    /// them for `None`, a command not queued yet).
    pub fn ahead(
        &self,
        list: &(DbIndex, Bytes),
        kind: WaitKind,
        ticket: Option<&WaitTicket>,
    ) -> usize {
        let q = self.queues.lock();
        let Some(queue) = q.by_list.get(list) else {
            return 0;
        };
        let mine = ticket.map(|t| t.ticket);
        queue
            .iter()
            .take_while(|&&(x, _)| Some(x) != mine)
            .filter(|&&(_, k)| k == kind)
            .count()
    }

    fn leave(&self, ticket: u64) {
        let mut q = self.queues.lock();
        let next = self.generation().wrapping_add(1);
        let mut behind = false;
        let lists = match q.tickets.remove(&ticket) {
            Some((_, lists)) => {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                lists
            }
            None => Vec::new(),
        };
        for list in &lists {
            if let Some(queue) = q.by_list.get_mut(list) {
                queue.retain(|&(x, _)| x != ticket);
                if queue.is_empty() {
                    q.by_list.remove(list);
                    q.changed_at.remove(list);
                } else {
                    // Those behind moved up: they look again.
                    q.changed_at.insert(list.clone(), next);
                    behind = true;
                }
            }
        }
        if behind {
            self.concerning.store(next, Ordering::Release);
            self.changes.send_modify(|n| *n = next);
        }
        drop(q);
        self.looked_again.notify_waiters();
    }
}

/// A blocked command's place in the queues of the lists it waits on.
pub(crate) struct WaitTicket {
    waiters: Arc<ListWaiters>,
    ticket: u64,
}

impl WaitTicket {
    /// The ticket's number ([`ListWaiters::needs_look`]).
    pub fn id(&self) -> u64 {
        self.ticket
    }
}

impl Drop for WaitTicket {
    fn drop(&mut self) {
        self.waiters.leave(self.ticket);
    }
}

/// What a blocked client waits for, which decides whom it queues behind: the kind of key (a
/// client in BLPOP does not wait behind one in BZPOPMIN), and for a stream's consumer-group
/// reader its group (a hash of the name; 0 for every other waiter): readers of one group take
/// new entries in the order they blocked, as in Redis; other groups and XREAD readers take
/// nothing from them.
pub(crate) type WaitKind = (KeyType, u64);

/// Why and until when a connection waits for a list (see `commands/lists.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blocked {
    /// `ListWaiters::changes` when the command looked: any later change wakes the connection.
    pub seen_pushes: u64,
    /// When the command answers its timeout reply (`None`: never).
    pub deadline: Option<Instant>,
}

/// A transaction being queued.
#[derive(Default)]
pub(crate) struct Multi {
    pub queued: Vec<Vec<Bytes>>,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub failed: bool,
}

/// A connection's watched keys. Dropping it (UNWATCH, EXEC, DISCARD, disconnect) takes them
/// out of the registry.
pub(crate) struct WatchState {
    pub watches: Arc<Watches>,
    pub flag: WatchFlag,
    pub engine_keys: Vec<Vec<u8>>,
    /// Each watched name with its database and whether it was already expired when watched
    /// (Redis fails EXEC when a watched key expires after WATCH).
    pub keys: Vec<(DbIndex, Bytes, bool)>,
}

impl Drop for WatchState {
    fn drop(&mut self) {
        self.watches.remove(&self.engine_keys, &self.flag);
    }
}

/// CLIENT REPLY: which replies the connection sends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    /// Every reply (the default; CLIENT REPLY ON).
    #[default]
    On,
    /// None but pushes (pub/sub messages and subscription confirmations), until CLIENT REPLY
    /// ON (CLIENT REPLY OFF).
    Off,
    /// None for the next command (CLIENT REPLY SKIP, which answers nothing itself).
    SkipNext,
    /// None for this command, then every reply again.
    SkipThis,
}

impl Session {
    /// Encodes the reply of a command that ran into `out`, unless CLIENT REPLY silences it
    /// (pushes always go out, as Redis sends pub/sub messages to a client whose replies are
    /// off); then moves CLIENT REPLY SKIP on by one command, as Redis's `resetClient`.
    pub fn answer(&mut self, reply: &Reply, out: &mut bytes::BytesMut) {
        let push = match reply {
            Reply::Push(_) => true,
            Reply::Several(parts) => parts.iter().all(|p| matches!(p, Reply::Push(_))),
            _ => false,
        };
        let silent = matches!(self.replies, ReplyMode::Off | ReplyMode::SkipThis);
        if !silent || push {
            reply.encode(self.protocol, out);
        }
        // Invalidations of keys the command itself changed follow its reply (Redis's pending
        // keys, `tracking.rs`); pushes are sent whatever CLIENT REPLY says.
        for p in self.own_pushes.drain(..) {
            p.encode(self.protocol, false, self.subs.count() > 0, out);
        }
        self.replies = match self.replies {
            ReplyMode::SkipNext => ReplyMode::SkipThis,
            ReplyMode::SkipThis => ReplyMode::On,
            other => other,
        };
    }

    /// Whether a plain `SET key value` from this connection would simply run: authenticated,
    /// not queued by MULTI, not refused by RESP2's subscribed mode. The connection merges runs
    /// of such SETs into one engine write without going through the dispatcher, so this is
    /// the dispatcher's gate for them (`commands::dispatch_checked`), kept beside the state
    /// it reads; any new per-session rule there must be added here.
    pub fn plain_sets_run_now(&self) -> bool {
        self.authenticated && self.multi.is_none() && self.subs.count() == 0
    }

    /// Whether this connection's user is known (as of the current ACL generation) to have every
    /// permission; `false` until the dispatcher has looked the user up.
    pub fn acl_unrestricted(&self, shared: &Shared) -> bool {
        matches!(&self.acl_user, Some((g, Some(u))) if *g == shared.acl.generation() && u.is_unrestricted())
    }

    pub fn new(id: u64, shared: &Shared) -> Self {
        let (mailbox, rx) = Mailbox::new(id);
        let mailbox_bytes = mailbox.queued_bytes.clone();
        let mailbox_overflowed = mailbox.overflowed.clone();
        Session {
            subs: Subscriptions::new(shared.pubsub.clone(), mailbox),
            mailbox: Some(rx),
            mailbox_bytes,
            mailbox_overflowed,
            id,
            protocol: Protocol::Resp2,
            authenticated: shared.acl.default_is_open(),
            user: Bytes::from_static(crate::acl::DEFAULT_USER),
            acl_user: None,
            name: None,
            after_reply: AfterReply::Continue,
            db: 0,
            multi: None,
            watch: None,
            blocked: None,
            wait_ticket: None,
            cluster: shared.cluster.is_some(),
            asking: false,
            in_exec: false,
            in_held_run: false,
            clock_mark: None,
            pop_window: None,
            peer: Bytes::new(),
            in_script: false,
            handler_ran: false,
            error_counted: false,
            control: None,
            replies: ReplyMode::On,
            events: Vec::new(),
            pushed: PendingPushes::default(),
            stream_from: None,
            tracking: None,
            caching: false,
            own_pushes: Vec::new(),
            script_keys: Vec::new(),
            no_touch: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command that looked at its list, then saw a push land before it queued, looks again
    /// (else it would sleep with the element there); a queued waiter looks again when its own
    /// list changes, or lists nobody named, and not for another list.
    #[test]
    fn waiters_look_again_exactly_when_their_lists_may_have_changed() {
        let w = Arc::new(ListWaiters::default());
        let q = || vec![(0, Bytes::from_static(b"q"))];
        let seen = w.generation();
        w.note_pairs([(0, &b"q"[..])]);
        let t = w.enqueue(q(), (KeyType::List, 0), seen);
        assert!(
            w.needs_look(t.id()),
            "a push between the look and the queueing"
        );
        w.looked(&t, w.generation());
        assert!(!w.needs_look(t.id()));
        w.note_pairs([(0, &b"other"[..])]);
        w.note_pairs([(1, &b"q"[..])]);
        assert!(!w.needs_look(t.id()), "other lists changed");
        w.note_pairs([(0, &b"q"[..])]);
        assert!(w.needs_look(t.id()), "its list changed");
        w.looked(&t, w.generation());
        w.note();
        assert!(w.needs_look(t.id()), "unnamed lists changed");
        assert!(w.any_waiting());
        drop(t);
        assert!(!w.any_waiting());
    }

    /// The waiter behind one that leaves moves up, and looks again.
    #[test]
    fn the_waiter_behind_one_that_leaves_looks_again() {
        let w = Arc::new(ListWaiters::default());
        let q = || vec![(0, Bytes::from_static(b"q"))];
        let first = w.enqueue(q(), (KeyType::List, 0), w.generation());
        let second = w.enqueue(q(), (KeyType::List, 0), w.generation());
        assert_eq!(w.ahead(&q()[0], (KeyType::List, 0), Some(&second)), 1);
        assert_eq!(w.ahead(&q()[0], (KeyType::Zset, 0), Some(&second)), 0);
        assert!(!w.needs_look(second.id()));
        drop(first);
        assert!(w.needs_look(second.id()));
        assert_eq!(w.ahead(&q()[0], (KeyType::List, 0), Some(&second)), 0);
    }

    /// Stream group readers queue behind readers of their own group only.
    #[test]
    fn group_readers_queue_behind_their_own_group() {
        let w = Arc::new(ListWaiters::default());
        let q = || vec![(0, Bytes::from_static(b"s"))];
        let xread = w.enqueue(q(), (KeyType::Stream, 0), w.generation());
        let reader = w.enqueue(q(), (KeyType::Stream, 7), w.generation());
        assert_eq!(w.ahead(&q()[0], (KeyType::Stream, 7), Some(&reader)), 0);
        assert_eq!(w.ahead(&q()[0], (KeyType::Stream, 8), None), 0);
        assert_eq!(w.ahead(&q()[0], (KeyType::Stream, 7), None), 1);
        drop((xread, reader));
    }

    #[test]
    fn cursor_table_forgets_oldest_first_and_never_issues_zero() {
        let mut t = CursorTable::new();
        let first = t.insert(ScanPosition {
            namespace: 0,
            after_key: Some(b"a".to_vec()),
        });
        assert_ne!(first, 0);
        for i in 0..CURSORS_MAX {
            let id = t.insert(ScanPosition {
                namespace: 0,
                after_key: Some(i.to_string().into_bytes()),
            });
            assert_ne!(id, 0);
        }
        assert_eq!(t.get(first), None);
        assert_eq!(t.positions.len(), CURSORS_MAX);
    }
}

/// A CLIENT PAUSE in force: clients' commands (all, or those that write) wait until `until`
/// or CLIENT UNPAUSE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pause {
    pub until: Instant,
    /// ALL: every command waits; WRITE: those that may change data.
    pub all: bool,
}

/// The server's CLIENT PAUSE state. Connections check `active` (one relaxed load) before each
/// run of commands and only then read the pause and wait on its changes.
#[derive(Debug)]
pub(crate) struct ClientPause {
    active: AtomicBool,
    state: watch::Sender<Option<Pause>>,
    /// Connections waiting out the pause (INFO's `blocked_clients` counts them, as Redis 7.0
    /// counts its postponed clients).
    held: AtomicUsize,
}

impl Default for ClientPause {
    fn default() -> Self {
        ClientPause {
            active: AtomicBool::new(false),
            state: watch::Sender::new(None),
            held: AtomicUsize::new(0),
        }
    }
}

impl ClientPause {
    /// Pauses until `until`; as in Redis, a pause during another keeps the later end and the
    /// wider mode (ALL over WRITE).
    pub fn pause(&self, until: Instant, all: bool) {
        // `active` changes only under the channel's lock (here and in `current`), so a pause
        // that ended cannot clear the flag of one set meanwhile.
        self.state.send_modify(|p| {
            *p = Some(match *p {
                Some(old) if old.until > Instant::now() => Pause {
                    until: old.until.max(until),
                    all: old.all || all,
                },
                _ => Pause { until, all },
            });
            self.active.store(true, Ordering::Release);
        });
    }

    pub fn unpause(&self) {
        self.state.send_modify(|p| {
            *p = None;
            self.active.store(false, Ordering::Release);
        });
    }

    /// The pause in force now, if any. One that has ended is cleared, so commands go back to
    /// the one-load check.
    pub fn current(&self) -> Option<Pause> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let p = *self.state.borrow();
        match p {
            Some(p) if p.until > Instant::now() => Some(p),
            _ => {
                self.state.send_if_modified(|p| {
                    if p.is_some_and(|p| p.until > Instant::now()) {
                        return false;
                    }
                    *p = None;
                    self.active.store(false, Ordering::Release);
                    true
                });
                None
            }
        }
    }

    /// Connections waiting out a pause now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Waits until the pause in force ends (its time passes, or it is lifted or changed);
    /// the caller checks again. The connection counts as held meanwhile.
    pub async fn changed_or_over(&self, p: Pause) {
        struct Held<'a>(&'a AtomicUsize);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.held.fetch_add(1, Ordering::Relaxed);
        let _held = Held(&self.held);
        let mut rx = self.state.subscribe();
        if *rx.borrow_and_update() != Some(p) {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(p.until)) => {}
            _ = rx.changed() => {}
        }
    }
}

#[cfg(test)]
mod pause_tests {
    use super::*;
    use std::time::Duration;

    /// A pause during another keeps the later end and the wider mode; UNPAUSE lifts it; a
    /// pause whose time has passed is none.
    #[test]
    fn pauses_merge_as_in_redis() {
        let p = ClientPause::default();
        assert_eq!(p.current(), None);
        let now = Instant::now();
        p.pause(now + Duration::from_secs(60), false);
        p.pause(now + Duration::from_secs(30), true);
        assert_eq!(
            p.current(),
            Some(Pause {
                until: now + Duration::from_secs(60),
                all: true
            })
        );
        p.unpause();
        assert_eq!(p.current(), None);
        p.pause(now, true);
        assert_eq!(p.current(), None, "a pause that has ended holds nothing");
        assert!(
            !p.active.load(Ordering::Relaxed),
            "an ended pause still costs every command the lock"
        );
        p.pause(now + Duration::from_secs(5), false);
        assert_eq!(
            p.current(),
            Some(Pause {
                until: now + Duration::from_secs(5),
                all: false
            }),
            "an ended pause's mode does not carry over"
        );
    }
}

/// 40 random hex digits (Redis's run and replication ids).
pub(crate) fn random_hex_40() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 20];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Samples kept per rate: Redis's `STATS_METRIC_SAMPLES`, 16 samples of 100 ms each.
const RATE_SAMPLES: usize = 16;

/// INFO's `instantaneous_ops_per_sec`, `instantaneous_input_kbps` and
/// `instantaneous_output_kbps`, as Redis computes them: every 100 ms the change of a counter
/// over the time since the last sample, averaged over the last 16 samples.
#[derive(Debug, Default)]
pub(crate) struct Rates {
    inner: Mutex<RateSamples>,
}

#[derive(Debug, Default)]
struct RateSamples {
    last: Option<(Instant, [u64; 3])>,
    /// Per second, for commands, input bytes and output bytes.
    samples: VecDeque<[f64; 3]>,
}

impl Rates {
    /// Takes one sample of `c`.
    pub fn sample(&self, c: &Counters) {
        let now = Instant::now();
        let values = [
            c.total_commands.load(Ordering::Relaxed),
            c.net_input_bytes.load(Ordering::Relaxed),
            c.net_output_bytes.load(Ordering::Relaxed),
        ];
        let mut r = lock(&self.inner);
        if let Some((then, before)) = r.last {
            let secs = now.duration_since(then).as_secs_f64();
            if secs > 0.0 {
                let per_sec = |i: usize| values[i].saturating_sub(before[i]) as f64 / secs;
                r.samples.push_back([per_sec(0), per_sec(1), per_sec(2)]);
                if r.samples.len() > RATE_SAMPLES {
                    r.samples.pop_front();
                }
            }
        }
        r.last = Some((now, values));
    }

    /// Commands per second, then input and output KiB per second, averaged over the samples.
    pub fn current(&self) -> (u64, f64, f64) {
        let r = lock(&self.inner);
        if r.samples.is_empty() {
            return (0, 0.0, 0.0);
        }
        let n = r.samples.len() as f64;
        let mean = |i: usize| r.samples.iter().map(|s| s[i]).sum::<f64>() / n;
        (mean(0) as u64, mean(1) / 1024.0, mean(2) / 1024.0)
    }
}

#[cfg(test)]
mod rates_tests {
    use super::*;

    /// The rate is the counter's change over the time between samples: 500 commands over
    /// at least 100 ms is more than nothing and at most 5000 a second; input and output
    /// bytes likewise, in KiB.
    #[test]
    fn rates_are_counter_changes_over_time() {
        let rates = Rates::default();
        let c = Counters::default();
        assert_eq!(rates.current(), (0, 0.0, 0.0));
        rates.sample(&c);
        c.total_commands.fetch_add(500, Ordering::Relaxed);
        c.net_input_bytes.fetch_add(1024 * 100, Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(100));
        rates.sample(&c);
        let (ops, input_kbps, output_kbps) = rates.current();
        assert!((1..=5000).contains(&ops), "{ops}");
        assert!(input_kbps > 0.0 && input_kbps <= 1000.0, "{input_kbps}");
        assert_eq!(output_kbps, 0.0);
        // Samples beyond the window drop out: an idle second brings the rate to zero.
        for _ in 0..RATE_SAMPLES {
            rates.sample(&c);
        }
        assert_eq!(rates.current().0, 0);
    }
}
