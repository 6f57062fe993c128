//! The command table and dispatcher. [`execute`] takes one parsed command, finds its [`Spec`],
//! checks arity and authentication the way Redis does (unknown command, then arity, then auth),
//! and runs the handler; every failure becomes an error reply, never a panic or a closed
//! connection. Handlers live by family: [`connection`] (PING, HELLO, AUTH, CLIENT...), [`server`]
//! (INFO, CONFIG, COMMAND, SAVE...), [`strings`], [`keys`] and [`json`]. The same table answers
//! COMMAND COUNT/INFO/DOCS, so what clients discover is what the dispatcher runs.

pub mod admin;
pub mod bitmaps;
pub mod cluster;
mod cmsgpack;
pub mod collections;
pub mod connection;
mod docs;
pub mod functions;
pub mod geo;
pub mod hashes;
mod hits;
pub mod hyperloglog;
pub mod json;
mod jsonpath;
pub mod keys;
pub mod lcs;
pub mod lists;
pub(crate) mod meta;
mod meta_table;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod transactions;
pub mod zsets;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::backend::KvBackend;
use crate::busy;
use crate::error::{Error, Result};
use crate::keyspace::DbIndex;
use crate::num::parse_i64;
use crate::resp::Reply;
use crate::state::{AfterReply, Session, Shared};

/// What a handler sees: the server's shared state, its own connection's session, and the
/// storage to use.
pub(crate) struct Ctx<'a> {
    pub shared: &'a Shared,
    pub session: &'a mut Session,
    /// The server's backend, or inside EXEC the transaction's overlay (`txn.rs`).
    pub store: &'a dyn KvBackend,
    /// How the exec lock is taken: not at all (inside EXEC, which holds it), without waiting
    /// (network threads), or waiting (the blocking pool).
    pub locking: Locking,
}

/// How the dispatcher takes the exec lock (`txn.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locking {
    /// The caller holds it (commands run by EXEC).
    Held,
    /// Try once; a command that would wait for it is handed to the blocking pool.
    Try,
    /// Wait for it.
    Wait,
}

impl<'a> Ctx<'a> {
    /// A context on the server's backend.
    pub fn new(shared: &'a Shared, session: &'a mut Session, locking: Locking) -> Self {
        Ctx {
            shared,
            session,
            store: shared.backend.as_ref(),
            locking,
        }
    }

    /// The storage.
    pub fn db(&self) -> &dyn KvBackend {
        self.store
    }

    /// The selected database, as the byte in engine keys (SWAPDB maps logical to physical).
    pub fn dbi(&self) -> DbIndex {
        self.shared.physical_db(self.session.db)
    }

    /// Reports a keyspace event of `class` (`notify.rs`) on `key` of the selected database:
    /// published when the command (its EXEC, its script) ends, if the setting selects it.
    pub fn notify(&mut self, class: u32, name: &'static str, key: &Bytes) {
        let db = self.session.db;
        self.notify_in(class, name, db, key);
    }

    /// Tells WATCH and CLIENT TRACKING that `key` of the selected database changed when the
    /// command wrote nothing (Redis's `signalModifiedKey` after an LTRIM that removed nothing).
    pub fn signal_modified(&self, key: &[u8]) {
        let record = crate::keyspace::string_key(self.session.db, key);
        self.shared
            .watches
            .touch([(record.as_slice(), crate::txn::Change::Put)]);
    }

    /// [`Ctx::notify`] for a key of logical database `db` (MOVE, COPY ... DB).
    pub fn notify_in(&mut self, class: u32, name: &'static str, db: DbIndex, key: &Bytes) {
        // A key removed or replaced (every way reports one of these events): the clients
        // blocked on it look again (a stream that went answers its blocked group readers, as
        // in Redis). Pushes wake their waiters after the events (`Session::note_key_push`).
        let waiters = &self.shared.list_waiters;
        if waiters.any_waiting() && KEY_REPLACED_EVENTS.contains(&name) {
            waiters.note_key_if_waited(db, key);
        }
        // With `new` events wanted every event is kept until the command ends: it tells the
        // dispatcher that the command made the key (`publish_events` skips the unwanted).
        let notify = &self.shared.notify;
        if notify.wants(class) || notify.wants(crate::notify::NEW) {
            self.session.events.push(crate::notify::Event {
                class,
                name,
                db,
                key: key.clone(),
            });
        }
    }
}

/// Events that say a key was removed or replaced by another value (of any kind).
const KEY_REPLACED_EVENTS: &[&str] = &[
    "del",
    "expired",
    "set",
    "rename_from",
    "rename_to",
    "move_from",
    "move_to",
    "copy_to",
    "restore",
    "sortstore",
    "sunionstore",
    "sinterstore",
    "sdiffstore",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zrangestore",
    "georadiusstore",
    "geosearchstore",
    "xgroup-destroy",
];

/// A command implementation. `args[0]` is the command name as sent. The dispatcher has checked
/// the spec's arity before calling, so a handler may index the arguments the arity guarantees.
pub(crate) type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> Result<Reply>;

/// One entry of the command table, with what COMMAND INFO/DOCS report.
pub(crate) struct Spec {
    /// Lowercase name.
    pub name: &'static str,
    /// Redis arity: `n` = exactly n words (name included), `-n` = at least n.
    pub arity: i32,
    /// Redis command flags (`write`, `readonly`, `fast`, ...).
    pub flags: &'static [&'static str],
    /// Position of the first key, the last key (-1 = last argument) and the step between keys.
    pub keys: (i32, i32, i32),
    /// Redis command group (`string`, `generic`, `connection`, `server`, `json`).
    pub group: &'static str,
    /// One line for COMMAND DOCS.
    pub summary: &'static str,
    pub handler: Handler,
}

/// Flags shared by many commands.
pub(crate) const WRITE: &[&str] = &["write", "denyoom"];
pub(crate) const WRITE_FAST: &[&str] = &["write", "denyoom", "fast"];
pub(crate) const READ: &[&str] = &["readonly"];
pub(crate) const READ_FAST: &[&str] = &["readonly", "fast"];
pub(crate) const CONN: &[&str] = &["fast", "noscript", "loading", "stale"];
pub(crate) const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];

/// The commands that run a script or function (whose own commands count as uses of keys).
const SCRIPT_CALLS: &[&str] = &[
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// Commands allowed before AUTH (Redis's `no-auth` flag).
const NO_AUTH: &[&str] = &["auth", "hello", "quit", "reset"];

/// The whole table, in COMMAND's order.
pub(crate) fn table() -> impl Iterator<Item = &'static Spec> {
    connection::SPECS
        .iter()
        .chain(server::SPECS)
        .chain(admin::SPECS)
        .chain(strings::SPECS)
        .chain(bitmaps::SPECS)
        .chain(hyperloglog::SPECS)
        .chain(lcs::SPECS)
        .chain(sort::SPECS)
        .chain(keys::SPECS)
        .chain(hashes::SPECS)
        .chain(sets::SPECS)
        .chain(lists::SPECS)
        .chain(zsets::SPECS)
        .chain(streams::SPECS)
        .chain(geo::SPECS)
        .chain(scripting::SPECS)
        .chain(functions::SPECS)
        .chain(json::SPECS)
        .chain(transactions::SPECS)
        .chain(pubsub::SPECS)
        .chain(cluster::SPECS)
}

/// What the dispatcher asks of a command on every call, worked out once per command from its
/// flags and the name lists of this module (matching the name against those lists, some sixty
/// string comparisons a command, was several per cent of a GET's CPU).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Props {
    /// Flags `write`, `readonly`, `skip_monitor`, `skip_slowlog`.
    pub write: bool,
    pub readonly: bool,
    pub skip_monitor: bool,
    pub skip_slowlog: bool,
    /// In [`EXCLUSIVE`] or [`SCRIPT_CALLS`]: always holds the exec lock exclusively.
    pub exclusive: bool,
    /// In [`MULTI_KEY_READS`].
    pub multi_key_read: bool,
    /// In [`NOT_QUEUED`]: runs at once inside MULTI.
    pub not_queued: bool,
    /// In [`NO_AUTH`].
    pub no_auth: bool,
    /// In [`NO_MULTI`].
    pub no_multi: bool,
    /// Allowed to a RESP2 client in subscriber mode.
    pub while_subscribed: bool,
    /// Leaves its keys' OBJECT IDLETIME alone: Redis's NOTOUCH lookups, and [`SCRIPT_CALLS`]
    /// (whose commands count).
    pub no_touch: bool,
    /// In [`NO_DISPATCHER_EVENTS`] or [`SCRIPT_CALLS`].
    pub no_dispatcher_events: bool,
    /// Its keys are not where its spec's key positions say (`cluster::MOVABLE_KEYS`).
    pub movable_keys: bool,
    /// EVAL_RO and the like: remembers no keys for CLIENT TRACKING itself.
    pub read_only_script: bool,
    /// In [`CONTAINERS`]: CLIENT LIST shows it with its subcommand.
    pub container: bool,
    /// In [`CONTAINER_NAMES`]: its subcommand's existence and arity are checked first.
    pub subcommands: bool,
    /// May run while a script is busy (`busy::allowed_while_busy` decides, with its
    /// subcommand): the check's name comparisons are skipped for every other command.
    pub may_run_while_busy: bool,
}

impl Props {
    fn of(spec: &Spec) -> Props {
        let flag = |f: &str| spec.flags.contains(&f);
        let named = |list: &[&str]| list.contains(&spec.name);
        Props {
            write: flag("write"),
            readonly: flag("readonly"),
            skip_monitor: flag("skip_monitor"),
            skip_slowlog: flag("skip_slowlog"),
            exclusive: named(EXCLUSIVE) || named(SCRIPT_CALLS),
            multi_key_read: named(MULTI_KEY_READS),
            not_queued: named(NOT_QUEUED),
            no_auth: named(NO_AUTH),
            no_multi: named(NO_MULTI),
            while_subscribed: named(pubsub::ALLOWED_WHILE_SUBSCRIBED),
            no_touch: named(crate::access::NO_TOUCH) || named(SCRIPT_CALLS),
            no_dispatcher_events: named(NO_DISPATCHER_EVENTS) || named(SCRIPT_CALLS),
            movable_keys: named(cluster::MOVABLE_KEYS),
            read_only_script: named(&["eval_ro", "evalsha_ro", "fcall_ro"]),
            container: named(CONTAINERS),
            subcommands: CONTAINER_NAMES.iter().any(|(name, _)| *name == spec.name),
            may_run_while_busy: busy::may_run_while_busy(spec.name),
        }
    }
}

/// A command of the table as the dispatcher runs it: its entry and its [`Props`]. Reads as
/// its [`Spec`].
pub(crate) struct Command {
    pub spec: &'static Spec,
    pub props: Props,
}

impl std::ops::Deref for Command {
    type Target = Spec;
    fn deref(&self) -> &Spec {
        self.spec
    }
}

/// Finds a command by name, case-insensitively.
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Command> {
    static INDEX: OnceLock<HashMap<&'static str, Command, rustc_hash::FxBuildHasher>> =
        OnceLock::new();
    let index = INDEX.get_or_init(|| {
        table()
            .map(|spec| {
                let props = Props::of(spec);
                (spec.name, Command { spec, props })
            })
            .collect()
    });
    // Command names are short ASCII; anything longer than the longest name cannot match.
    const NAME_BYTES_MAX: usize = 32;
    if name.len() > NAME_BYTES_MAX {
        return None;
    }
    // Lowercased on the stack: this runs for every command.
    let mut lower = [0u8; NAME_BYTES_MAX];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let lower = std::str::from_utf8(lower).ok()?;
    index.get(lower)
}

/// Commands that may change data without the `write` flag: scripts and functions (their
/// commands), publishing, PFCOUNT (it may rewrite the key's cached count). CLIENT PAUSE WRITE
/// holds them back with the writes, and read-only scripts may not call them, as Redis does
/// with its `may-replicate` commands.
pub(super) const MAY_WRITE: &[&str] =
    &["eval", "evalsha", "fcall", "publish", "spublish", "pfcount"];

/// Whether `args` may change data, so that CLIENT PAUSE WRITE holds it back: a write, a
/// command of [`MAY_WRITE`], or an EXEC whose transaction holds one. As in Redis's
/// `processCommand`: a script or function whose flags say `no-writes` does not (EVAL's
/// shebang, the cached script EVALSHA names, FCALL's function); a command refused before it
/// would run (unknown, wrong arity, not authenticated) is answered at once.
pub(crate) fn may_write(args: &[Bytes], session: &crate::state::Session, shared: &Shared) -> bool {
    let Some(command) = resolve(args) else {
        return false;
    };
    let spec = command.spec;
    if !arity_fits(spec, args.len()) || (!session.authenticated && !command.props.no_auth) {
        return false;
    }
    match spec.name {
        "exec" => session.multi.as_ref().is_some_and(|m| {
            m.queued.iter().any(|q| {
                q.first().is_none_or(|n| !n.eq_ignore_ascii_case(b"exec"))
                    && may_write(q, session, shared)
            })
        }),
        // FUNCTION's container has no write flag; these subcommands change the libraries.
        "function" => args.get(1).is_some_and(|sub| {
            ["load", "delete", "flush", "restore"]
                .iter()
                .any(|w| sub.eq_ignore_ascii_case(w.as_bytes()))
        }),
        "eval" | "evalsha" => scripting::may_write(shared, spec.name == "evalsha", &args[1]),
        "fcall" => functions::may_write(shared, &args[1]),
        _ => spec.flags.contains(&"write") || MAY_WRITE.contains(&spec.name),
    }
}

/// Whether `n` words (the name included) fit `spec`'s arity.
pub(super) fn arity_fits(spec: &Spec, n: usize) -> bool {
    let n = n as i64;
    let arity = i64::from(spec.arity);
    (arity > 0 && n == arity) || (arity < 0 && n >= -arity)
}

/// Redis 7.0's container commands (their names as its HELP hints print them) and every
/// subcommand of theirs with its arity (`n` exactly, `-n` at least), as redis-server's COMMAND
/// lists them, with the two of Redis 7.2 this server offers. Redis checks a subcommand's existence and arity before anything else, inside
/// MULTI too (where a failure aborts the transaction at EXEC).
const CONTAINER_NAMES: &[(&str, &str)] = &[
    ("acl", "ACL"),
    ("client", "CLIENT"),
    ("cluster", "CLUSTER"),
    ("command", "COMMAND"),
    ("config", "CONFIG"),
    ("function", "FUNCTION"),
    ("latency", "LATENCY"),
    ("memory", "MEMORY"),
    ("module", "MODULE"),
    ("object", "OBJECT"),
    ("pubsub", "PUBSUB"),
    ("script", "SCRIPT"),
    ("slowlog", "SLOWLOG"),
    ("xgroup", "XGROUP"),
    ("xinfo", "XINFO"),
];

/// See [`CONTAINER_NAMES`]; sorted, for a binary search.
const SUBCOMMAND_ARITIES: &[(&str, i32)] = &[
    ("acl|cat", -2),
    ("acl|deluser", -3),
    ("acl|dryrun", -4),
    ("acl|genpass", -2),
    ("acl|getuser", 3),
    ("acl|help", 2),
    ("acl|list", 2),
    ("acl|load", 2),
    ("acl|log", -2),
    ("acl|save", 2),
    ("acl|setuser", -3),
    ("acl|users", 2),
    ("acl|whoami", 2),
    ("client|caching", 3),
    ("client|getname", 2),
    ("client|getredir", 2),
    ("client|help", 2),
    ("client|id", 2),
    ("client|info", 2),
    ("client|kill", -3),
    ("client|list", -2),
    ("client|no-evict", 3),
    // Redis 7.2's, which client libraries send on connecting (redis-py: SETINFO).
    ("client|no-touch", 3),
    ("client|pause", -3),
    ("client|reply", 3),
    ("client|setinfo", 4),
    ("client|setname", 3),
    ("client|tracking", -3),
    ("client|trackinginfo", 2),
    ("client|unblock", -3),
    ("client|unpause", 2),
    ("cluster|addslots", -3),
    ("cluster|addslotsrange", -4),
    ("cluster|bumpepoch", 2),
    ("cluster|count-failure-reports", 3),
    ("cluster|countkeysinslot", 3),
    ("cluster|delslots", -3),
    ("cluster|delslotsrange", -4),
    ("cluster|failover", -2),
    ("cluster|flushslots", 2),
    ("cluster|forget", 3),
    ("cluster|getkeysinslot", 4),
    ("cluster|help", 2),
    ("cluster|info", 2),
    ("cluster|keyslot", 3),
    ("cluster|links", 2),
    ("cluster|meet", -4),
    ("cluster|myid", 2),
    ("cluster|nodes", 2),
    ("cluster|replicas", 3),
    ("cluster|replicate", 3),
    ("cluster|reset", -2),
    ("cluster|saveconfig", 2),
    ("cluster|set-config-epoch", 3),
    ("cluster|setslot", -4),
    ("cluster|shards", 2),
    ("cluster|slaves", 3),
    ("cluster|slots", 2),
    ("command|count", 2),
    ("command|docs", -2),
    ("command|getkeys", -4),
    ("command|getkeysandflags", -4),
    ("command|help", 2),
    ("command|info", -2),
    ("command|list", -2),
    ("config|get", -3),
    ("config|help", 2),
    ("config|resetstat", 2),
    ("config|rewrite", 2),
    ("config|set", -4),
    ("function|delete", 3),
    ("function|dump", 2),
    ("function|flush", -2),
    ("function|help", 2),
    ("function|kill", 2),
    ("function|list", -2),
    ("function|load", -3),
    ("function|restore", -3),
    ("function|stats", 2),
    ("latency|doctor", 2),
    ("latency|graph", 3),
    ("latency|help", 2),
    ("latency|histogram", -2),
    ("latency|history", 3),
    ("latency|latest", 2),
    ("latency|reset", -2),
    ("memory|doctor", 2),
    ("memory|help", 2),
    ("memory|malloc-stats", 2),
    ("memory|purge", 2),
    ("memory|stats", 2),
    ("memory|usage", -3),
    ("module|help", 2),
    ("module|list", 2),
    ("module|load", -3),
    ("module|loadex", -3),
    ("module|unload", 3),
    ("object|encoding", 3),
    ("object|freq", 3),
    ("object|help", 2),
    ("object|idletime", 3),
    ("object|refcount", 3),
    ("pubsub|channels", -2),
    ("pubsub|help", 2),
    ("pubsub|numpat", 2),
    ("pubsub|numsub", -2),
    ("pubsub|shardchannels", -2),
    ("pubsub|shardnumsub", -2),
    ("script|debug", 3),
    ("script|exists", -3),
    ("script|flush", -2),
    ("script|help", 2),
    ("script|kill", 2),
    ("script|load", 3),
    ("slowlog|get", -2),
    ("slowlog|help", 2),
    ("slowlog|len", 2),
    ("slowlog|reset", 2),
    ("xgroup|create", -5),
    ("xgroup|createconsumer", 5),
    ("xgroup|delconsumer", 5),
    ("xgroup|destroy", 4),
    ("xgroup|help", 2),
    ("xgroup|setid", -5),
    ("xinfo|consumers", 4),
    ("xinfo|groups", 3),
    ("xinfo|help", 2),
    ("xinfo|stream", -3),
];

/// Redis's existence and arity check of a container's subcommand `args[1]` (a command that
/// is no container, or given no subcommand, passes).
pub(super) fn check_subcommand(command: &Command, args: &[Bytes]) -> Result<()> {
    if !command.props.subcommands {
        return Ok(());
    }
    let container = command.spec.name;
    let (Some(&(_, shown)), Some(sub)) = (
        CONTAINER_NAMES.iter().find(|(name, _)| *name == container),
        args.get(1),
    ) else {
        return Ok(());
    };
    let full = format!(
        "{container}|{}",
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    );
    let Ok(at) = SUBCOMMAND_ARITIES.binary_search_by(|(name, _)| (*name).cmp(full.as_str())) else {
        return Err(Error::UnknownSubcommand {
            container: shown,
            sub: text(sub),
        });
    };
    let arity = i64::from(SUBCOMMAND_ARITIES[at].1);
    let n = args.len() as i64;
    if (arity >= 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(Error::WrongArity(full));
    }
    Ok(())
}

/// A refusal of EXEC itself (ACL, maxmemory) ends the transaction with the reason, as Redis's
/// `rejectCommand` does (`execCommandAbort`); other commands' refusals are returned as they are.
fn exec_abort(ctx: &mut Ctx<'_>, command: &Command, e: Error) -> Error {
    if command.spec.name != "exec" {
        return e;
    }
    ctx.session.multi = None;
    ctx.session.watch = None;
    Error::Coded(format!("EXECABORT Transaction discarded because of: {e}"))
}

/// Redis's ACL check of a command before it runs or is queued (`ACLCheckAllPerm`): the
/// connection's user must be allowed the command (or subcommand, or first argument), its keys
/// for what it does with them, and its channels. A refusal is NOPERM and an ACL LOG entry. A
/// user with every permission (the default user, unless changed) costs one atomic load.
fn acl_check(ctx: &mut Ctx<'_>, command: &Command, args: &[Bytes]) -> Result<()> {
    let context = if ctx.session.multi.is_some() {
        "multi"
    } else {
        "toplevel"
    };
    let Some((denied, full_name)) = acl_denial(ctx, command, args, context) else {
        return Ok(());
    };
    let message = match denied {
        crate::acl::Denied::Command => {
            format!("this user has no permissions to run the '{full_name}' command")
        }
        crate::acl::Denied::Key(_) => {
            "this user has no permissions to access one of the keys used as arguments".into()
        }
        crate::acl::Denied::Channel(_) => {
            "this user has no permissions to access one of the channels used as arguments".into()
        }
    };
    Err(Error::Coded(format!("NOPERM {message}")))
}

/// Whether the connection's user may not run `args`: why, and the command's full name (the
/// refusal logged in ACL LOG under `context`); `None` if it may.
pub(crate) fn acl_denial(
    ctx: &mut Ctx<'_>,
    command: &Command,
    args: &[Bytes],
    context: &'static str,
) -> Option<(crate::acl::Denied, String)> {
    let generation = ctx.shared.acl.generation();
    if !matches!(&ctx.session.acl_user, Some((g, _)) if *g == generation) {
        let user = ctx.shared.acl.user(&ctx.session.user);
        ctx.session.acl_user = Some((generation, user));
    }
    let user = match &ctx.session.acl_user {
        Some((_, Some(user))) if user.is_unrestricted() => return None,
        Some((_, Some(user))) => user.clone(),
        // The user was deleted (its connections are closed): nothing more is allowed.
        _ => return Some((crate::acl::Denied::Command, full_name(command, args))),
    };
    let request = acl_request(command, args);
    let denied = user.check(&request).err()?;
    let (reason, object) = match &denied {
        crate::acl::Denied::Command => ("command", Bytes::from(request.full_name.clone())),
        crate::acl::Denied::Key(k) => ("key", k.clone()),
        crate::acl::Denied::Channel(c) => ("channel", c.clone()),
    };
    admin::log_denial_in(ctx, reason, context, object, user.name.clone());
    Some((denied, request.full_name))
}

/// What ACL looks at in the command `args`: its full name, keys and channels.
pub(crate) fn acl_request<'a>(command: &'a Command, args: &'a [Bytes]) -> crate::acl::Request<'a> {
    let keys = cluster::keys_with_flags(command.spec, args)
        .into_iter()
        .map(|(at, flags)| {
            let read = flags.contains(&"access");
            let write = flags
                .iter()
                .any(|f| matches!(*f, "insert" | "delete" | "update"));
            (args[at].clone(), read, write)
        })
        .collect();
    let channels = match command.spec.name {
        "publish" | "spublish" => args
            .get(1)
            .map(|c| (c.clone(), false))
            .into_iter()
            .collect(),
        "subscribe" | "ssubscribe" => args[1..].iter().map(|c| (c.clone(), false)).collect(),
        "psubscribe" => args[1..].iter().map(|c| (c.clone(), true)).collect(),
        _ => Vec::new(),
    };
    crate::acl::Request {
        full_name: full_name(command, args),
        name: command.spec.name,
        args,
        always_allowed: command.props.no_auth,
        keys,
        channels,
    }
}

/// Every subcommand this server offers, as `container|sub`.
pub(crate) fn subcommand_names() -> impl Iterator<Item = &'static str> {
    SUBCOMMAND_ARITIES.iter().map(|(name, _)| *name)
}

/// Whether `full` (`container|sub`, lowercase) is a subcommand this server offers.
pub(crate) fn is_subcommand(full: &str) -> bool {
    SUBCOMMAND_ARITIES
        .binary_search_by(|(name, _)| (*name).cmp(full))
        .is_ok()
}

/// The name ACL and the ACL log give the command `args`: `container|sub` for a container's
/// subcommand this server offers, else the command's own name.
pub(crate) fn full_name(command: &Command, args: &[Bytes]) -> String {
    if command.props.subcommands {
        if let Some(sub) = args.get(1) {
            let full = format!(
                "{}|{}",
                command.spec.name,
                String::from_utf8_lossy(sub).to_ascii_lowercase()
            );
            if is_subcommand(&full) {
                return full;
            }
        }
    }
    command.spec.name.to_string()
}

/// The command `args` names, if it is one (looked up once per command: placement and
/// dispatch share it).
pub(crate) fn resolve(args: &[Bytes]) -> Option<&'static Command> {
    args.first().and_then(|name| lookup(name))
}

/// Runs one command and returns its reply (errors included). Sets `session.after_reply` when the
/// connection must close.
pub(crate) fn execute(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    execute_resolved(ctx, args, resolve(args))
}

/// [`execute`] for a command already looked up with [`resolve`].
pub(crate) fn execute_resolved(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    spec: Option<&'static Command>,
) -> Reply {
    count_command(ctx);
    dispatch(ctx, args, spec).unwrap_or_else(Reply::from)
}

/// Runs a write command on a network thread: `None` when it would have waited for the exec
/// lock (nothing changed, not counted; run it again on the blocking pool).
pub(crate) fn execute_here(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    spec: Option<&'static Command>,
) -> Option<Reply> {
    match dispatch(ctx, args, spec) {
        Err(Error::WouldWait) => None,
        result => {
            count_command(ctx);
            Some(result.unwrap_or_else(Reply::from))
        }
    }
}

/// Counts a command that runs (INFO's `total_commands_processed`).
fn count_command(ctx: &Ctx<'_>) {
    ctx.shared
        .counters
        .total_commands
        .fetch_add(1, Ordering::Relaxed);
}

/// Where a command may run: on the connection's network thread, or on the blocking pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Reads keys (or touches only the connection): on the network thread, with engine reads
    /// that fail instead of waiting for the disk ([`execute_without_waiting`]).
    Read,
    /// Writes keys: on the network thread while the engine says writes would not wait.
    Write,
    /// Walks the keyspace or administers the server (KEYS, SCAN, DBSIZE, FLUSHDB, INFO, SAVE,
    /// ...): always on the blocking pool.
    Pool,
}

/// Where a command may run. Unknown commands (`None`) only produce an error reply.
pub(crate) fn placement(spec: Option<&Command>) -> Placement {
    let Some(spec) = spec else {
        return Placement::Read;
    };
    if spec.group == "connection" || matches!(spec.name, "multi" | "discard" | "unwatch" | "watch")
    {
        return Placement::Read;
    }
    // Commands without a first key walk the keyspace or administer the server, except those
    // whose keys the table cannot place (`movablekeys`: after a count or `STREAMS`), which read
    // or write only those keys and run where other reads and writes of keys do: on the pool a
    // blocking XREADGROUP sent just before another client's DEL of its stream ran after it,
    // where Redis, serving clients in arrival order, blocks the reader first. Scripts stay on
    // the pool (they hold the exec lock exclusively and may run long); MIGRATE waits on
    // another server.
    let keyed = spec.keys.0 > 0 || (spec.props.movable_keys && !SCRIPT_CALLS.contains(&spec.name));
    if !keyed || spec.name == "migrate" {
        return Placement::Pool;
    }
    if spec.props.write {
        Placement::Write
    } else if spec.props.readonly {
        Placement::Read
    } else {
        Placement::Pool
    }
}

/// Where a command may run, given its connection: EXEC runs on the network thread when every
/// command it queued may run there (reads and writes of keys: a transaction of a few writes),
/// on the blocking pool otherwise. On the pool it could be overtaken by another client's
/// command sent just after it, which Redis runs after (its Tcl test "BRPOPLPUSH does not
/// affect WATCH while still blocked" sends EXEC and then, from another client, the LPUSH
/// that would change the watched list).
pub(crate) fn placement_in(spec: Option<&Command>, session: &Session) -> Placement {
    match (spec, &session.multi) {
        (Some(s), Some(multi)) if s.name == "exec" => {
            let here = multi.queued.iter().all(|args| {
                let queued = resolve(args);
                queued.is_some_and(|q| q.name != "exec") && placement(queued) != Placement::Pool
            });
            if here {
                Placement::Write
            } else {
                Placement::Pool
            }
        }
        _ => placement(spec),
    }
}

/// Runs a read command with engine reads that do not wait for the disk
/// (`strata::without_waiting`). `None` when one would have waited: the command changed nothing,
/// was not counted, and should run again on the blocking pool.
pub(crate) fn execute_without_waiting(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    spec: Option<&'static Command>,
) -> Option<Reply> {
    match strata::without_waiting(|| dispatch(ctx, args, spec)) {
        Err(e) if e.is_would_block() => None,
        result => {
            count_command(ctx);
            Some(result.unwrap_or_else(Reply::from))
        }
    }
}

/// Commands whose subcommand CLIENT LIST shows with them (`client|list`), as Redis 7 does.
const CONTAINERS: &[&str] = &[
    "client", "cluster", "clusterx", "command", "config", "memory", "object", "pubsub", "script",
    "slowlog",
];

/// What CLIENT LIST shows of the command a connection is running: its name (with its
/// subcommand) and when.
fn note_activity(ctx: &Ctx<'_>, args: &[Bytes], spec: Option<&'static Command>) {
    let Some(control) = &ctx.session.control else {
        return;
    };
    if ctx.session.in_exec || ctx.session.in_script {
        // The client's command is the EXEC or the script itself.
        return;
    }
    control
        .last_command_ms
        .store(crate::state::coarse_monotonic_ms(), Ordering::Relaxed);
    if let Some(spec) = spec {
        let sub = spec.props.container.then(|| args.get(1).cloned()).flatten();
        *control.last_command.lock() = (spec.name, sub);
    }
}

fn dispatch(ctx: &mut Ctx<'_>, args: &[Bytes], spec: Option<&'static Command>) -> Result<Reply> {
    note_activity(ctx, args, spec);
    ctx.session.handler_ran = false;
    ctx.session.error_counted = false;
    // Cluster mode: ASKING lets only the next command through, whatever becomes of it (as
    // Redis clears the flag after every command but ASKING itself), except that it lasts while
    // the client is in MULTI (to EXEC or DISCARD, as Redis's `resetClient` keeps it); a command
    // that will run again (deferred to the blocking pool, or blocked) keeps it for that run.
    let asking =
        ctx.session.cluster && spec.is_none_or(|s| s.name != "asking") && ctx.session.asking;
    let result = {
        let _running = crate::tracking::enter(ctx.session.id);
        dispatch_checked(ctx, args, spec, asking)
    };
    if !ctx.session.in_exec && !ctx.session.in_script {
        note_tracking_after(ctx, spec, &result);
    }
    if asking
        && ctx.session.multi.is_none()
        && ctx.session.blocked.is_none()
        && !result.as_ref().is_err_and(Error::is_would_block)
    {
        ctx.session.asking = false;
    }
    if let Err(e) = &result {
        if !e.is_would_block() {
            // An error is the answer: a blocked command run again (BLPOP after a wake) that
            // fails before its handler, say with MOVED once its slot moved away, is no longer
            // blocked.
            ctx.session.blocked = None;
            let stats = &ctx.shared.command_stats;
            if !ctx.session.error_counted {
                stats.note_error(&e.to_string());
            }
            // A subcommand Redis does not know is no command to count against.
            let known = !matches!(e, Error::UnknownSubcommand { .. });
            if let (Some(spec), false, true) = (spec, ctx.session.handler_ran, known) {
                stats.note(spec.name, args, crate::watchers::Outcome::Rejected);
            }
        }
    }
    if let (Ok(Reply::Error(message)), false) = (&result, ctx.session.error_counted) {
        ctx.shared.command_stats.note_error(message);
    }
    if let (Err(e), Some(multi)) = (&result, ctx.session.multi.as_mut()) {
        // A command refused while queueing (unknown, wrong arity, not authenticated) makes
        // EXEC fail, as in Redis; errors of the commands that run at once do not.
        if !e.is_would_block() && !spec.is_some_and(|s| s.props.not_queued) {
            multi.failed = true;
        }
    }
    if let Some(control) = &ctx.session.control {
        let queued = ctx
            .session
            .multi
            .as_ref()
            .map_or(-1, |m| i64::try_from(m.queued.len()).unwrap_or(i64::MAX));
        control.queued.store(queued, Ordering::Relaxed);
    }
    result
}

fn dispatch_checked(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    spec: Option<&'static Command>,
    asking: bool,
) -> Result<Reply> {
    let Some(name) = args.first() else {
        return Err(Error::unknown_command(args));
    };
    let Some(spec) = spec else {
        // HTTP requests sent to this port (browsers, SSRF probes) are cut off without a reply,
        // as Redis does: `POST` and `Host:` are never Redis commands.
        if name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:") {
            tracing::warn!("HTTP request on the Redis port: closing the connection");
            ctx.session.after_reply = AfterReply::CloseSilently;
        }
        return Err(Error::unknown_command(args));
    };
    if !arity_fits(spec, args.len()) {
        return Err(Error::WrongArity(spec.name.to_string()));
    }
    check_subcommand(spec, args)?;
    if !ctx.session.authenticated && !spec.props.no_auth {
        return Err(Error::NoAuth);
    }
    if ctx.session.multi.is_some() && spec.props.no_multi {
        // Refused while queueing, so EXEC then answers EXECABORT (a queued SHUTDOWN used to
        // stop the server at EXEC).
        return Err(Error::command("Command not allowed inside a transaction"));
    }
    acl_check(ctx, spec, args).map_err(|e| exec_abort(ctx, spec, e))?;
    // `maxmemory` with Redis's `noeviction`: over it, commands that may add data are refused,
    // and so is queueing anything but EXEC, DISCARD, QUIT and RESET (`processCommand`).
    if ctx.shared.over_maxmemory() {
        let denyoom = spec.flags.contains(&"denyoom")
            || (spec.name == "exec"
                && ctx.session.multi.as_ref().is_some_and(|m| {
                    m.queued
                        .iter()
                        .any(|q| resolve(q).is_some_and(|c| c.spec.flags.contains(&"denyoom")))
                }));
        let queueing = ctx.session.multi.is_some()
            && !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
        if denyoom || queueing {
            let oom =
                Error::Coded("OOM command not allowed when used memory > 'maxmemory'.".into());
            return Err(exec_abort(ctx, spec, oom));
        }
    }
    if ctx.session.protocol == crate::resp::Protocol::Resp2
        && ctx.session.subs.count() > 0
        && !spec.props.while_subscribed
    {
        return Err(Error::command(format!(
            "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        )));
    }
    // A script past busy-reply-threshold: other clients are answered BUSY (`busy.rs`), also
    // inside MULTI (which the refusal then fails, as in Redis).
    let allowed_while_busy = ctx.session.in_script
        || (spec.props.may_run_while_busy && busy::allowed_while_busy(spec.name, args));
    if !allowed_while_busy {
        if let Some(eval) = ctx.shared.running_script.busy() {
            if ctx.session.multi.is_some() {
                return Err(exec_abort(ctx, spec, busy::busy_error(eval)));
            }
            return Err(busy::busy_error(eval));
        }
    }
    let routed = ctx.session.cluster && spec.name != "asking";
    let queued = ctx.session.multi.is_some() && !spec.props.not_queued;
    if queued {
        if routed {
            // Checked when queued (a redirection aborts the transaction, as in Redis) and
            // again, all together, at EXEC.
            cluster::route(ctx, spec, args, asking)?;
        }
        if let Some(multi) = ctx.session.multi.as_mut() {
            multi.queued.push(args.to_vec());
        }
        return Ok(Reply::simple("QUEUED"));
    }
    // Changes of a cluster node's map hold the lock exclusively too: a keyed command (which
    // holds its shared side from its slot check to its end, a blocking one until it has read
    // the wake-up counter) sees the map before or after, never a change in its middle.
    // FUNCTION KILL and STATS look at a running function; they must not wait for it.
    let exclusive = (spec.props.exclusive
        && !(spec.name == "function"
            && args.get(1).is_some_and(|a| is(a, "KILL") || is(a, "STATS"))))
        || (matches!(spec.name, "del" | "delete" | "unlink") && args.len() > 2)
        || (matches!(spec.name, "georadius" | "georadiusbymember")
            && args.iter().any(|a| is(a, "STORE") || is(a, "STOREDIST")))
        || (spec.name == "clusterx"
            && !args
                .get(1)
                .is_some_and(|a| is(a, "VERSION") || is(a, "MYID")))
        || (spec.name == "cluster" && args.get(1).is_some_and(|a| is(a, "SETSLOT")));
    // Cluster mode: keyed reads hold the exec lock's shared side too, and the slot check runs
    // under the lock, so MIGRATE (which holds it exclusively) never moves a key between the
    // check and the command.
    let shared_lock = spec.props.write
        || (spec.props.multi_key_read
            && !(spec.name == "exists" && args.len() <= 2))
        // PFCOUNT of one key stores the count it computed in the key (as Redis does).
        || spec.name == "pfcount"
        || (routed && (spec.keys.0 > 0 || spec.props.movable_keys));
    let shared = ctx.shared;
    let _guard = match (ctx.locking, exclusive, shared_lock) {
        (Locking::Held, _, _) | (_, false, false) => ExecGuard::None,
        (Locking::Try, true, _) => {
            ExecGuard::Exclusive(shared.exec_lock.try_write().ok_or(Error::WouldWait)?)
        }
        (Locking::Try, false, true) => {
            ExecGuard::Shared(shared.exec_lock.try_read().ok_or(Error::WouldWait)?)
        }
        (Locking::Wait, true, _) if allowed_while_busy => {
            ExecGuard::Exclusive(shared.exec_lock.write())
        }
        (Locking::Wait, false, true) if allowed_while_busy => {
            ExecGuard::Shared(shared.exec_lock.read())
        }
        (Locking::Wait, true, _) => {
            ExecGuard::Exclusive(shared.exec_write_unless_busy().map_err(busy::busy_error)?)
        }
        (Locking::Wait, false, true) => {
            ExecGuard::Shared(shared.exec_read_unless_busy().map_err(busy::busy_error)?)
        }
    };
    if routed {
        cluster::route(ctx, spec, args, asking)?;
    }
    run_watched(ctx, spec, args)
}

/// Runs the handler, timed for the slow log and shown to MONITOR clients (`watchers.rs`), as
/// Redis does in `call()`: commands refused before they run (arity, auth, queued by MULTI) are
/// neither; admin commands are not shown to monitors; scripts are shown before they run (their
/// commands follow as `lua`); a script's commands are logged as its Lua client's; EXEC is not
/// logged (its commands are).
fn run_watched(ctx: &mut Ctx<'_>, spec: &'static Command, args: &[Bytes]) -> Result<Reply> {
    let watchers = &ctx.shared.watchers;
    let in_script = ctx.session.in_script;
    let source: &[u8] = if in_script { b"lua" } else { &ctx.session.peer };
    let shown_before = spec.props.skip_monitor;
    if shown_before && watchers.monitored() {
        watchers.feed(ctx.session.db, source, args);
    }
    let events_before = ctx.session.events.len();
    // The command's keys, found once for the access touch, the events and tracking.
    let keys = cluster::command_keys(spec, args);
    let expired_seen = crate::keyspace::expired_seen();
    let absent_before = match keys_before_write(ctx, spec, &keys) {
        Ok(absent) => absent,
        Err(e) => {
            // It runs again (a read that would wait: on the blocking pool) and reports again.
            ctx.session.events.truncate(events_before);
            return Err(e);
        }
    };
    // A read whose reply tells whether its one key exists touches the key only if it does
    // (`hits::says_missing`), as Redis's lookup touches only an object it found.
    let touch_after = hits::tells_existence(spec, &keys);
    if !touch_after {
        touch_keys(ctx, spec, &keys);
    }
    // The end of the batch's previous command, where nothing but this one's checks ran since:
    // not where this one may have waited for the exec lock, nor in a script (its Lua code
    // runs between its calls).
    let chained = ctx.locking != Locking::Wait && !in_script;
    let started = match ctx.session.clock_mark.take() {
        Some(mark) if chained => mark,
        _ => std::time::Instant::now(),
    };
    let result = (spec.handler)(ctx, args);
    ctx.session.handler_ran = true;
    if result.as_ref().is_err_and(Error::is_would_block) || ctx.session.blocked.is_some() {
        // It runs again (on the blocking pool, or once a list may have grown): what it
        // reported is reported again then.
        ctx.session.events.truncate(events_before);
        if !ctx.session.in_exec && !ctx.session.in_script && !ctx.session.in_held_run {
            // A push it made before it stopped (none of ours does) still wakes its readers.
            ctx.session.wake_pushed(&ctx.shared.list_waiters);
        }
        return result;
    }
    if crate::keyspace::expired_seen() != expired_seen {
        passive_expiry(ctx, spec, &keys, events_before);
    }
    if touch_after && !hits::says_missing(spec, args, &result) {
        touch_keys(ctx, spec, &keys);
    }
    note_dispatcher_events(ctx, spec, &keys, events_before, absent_before);
    hits::note(ctx, spec, args, &keys, &result);
    remember_tracked_keys(ctx, spec, &keys);
    if !ctx.session.in_exec && !ctx.session.in_script && !ctx.session.in_held_run {
        // EXEC, scripts and held runs (`conn.rs`) publish their commands' events once their
        // writes are committed.
        publish_events(ctx);
    }
    if matches!(&result, Err(Error::UnknownSubcommand { .. }))
        || matches!(&result, Err(Error::WrongArity(name)) if name.contains('|'))
    {
        // Redis refuses an unknown subcommand, or one with the wrong number of arguments,
        // before the command runs: neither logged nor shown, nor counted as a call.
        return result;
    }
    let ended = std::time::Instant::now();
    if chained {
        ctx.session.clock_mark = Some(ended);
    }
    let nanos = u64::try_from(ended.duration_since(started).as_nanos()).unwrap_or(u64::MAX);
    let micros = nanos / 1000;
    // As Redis: EXEC is a call, and so is each command it runs.
    ctx.shared.command_stats.note(
        spec.name,
        args,
        crate::watchers::Outcome::Ran {
            nanos,
            // An error reply made by the command (a script's) fails it too.
            failed: matches!(&result, Err(_) | Ok(Reply::Error(_))),
        },
    );
    let watchers = &ctx.shared.watchers;
    if watchers.timing() && !spec.props.skip_slowlog {
        if in_script {
            // Redis logs a script's commands as its Lua client's: no address, no name.
            const LUA_CLIENT: Bytes = Bytes::from_static(b"?:0");
            watchers.note_duration(micros, args, &LUA_CLIENT, None);
        } else {
            watchers.note_duration(micros, args, &ctx.session.peer, ctx.session.name.as_ref());
        }
    }
    if !shown_before
        && watchers.monitored()
        && !crate::watchers::hidden_from_monitors(spec.flags, args)
    {
        let source: &[u8] = if in_script { b"lua" } else { &ctx.session.peer };
        watchers.feed(ctx.session.db, source, args);
    }
    result
}

/// Passive expiry, as Redis's key lookup does it: a command that met one of its keys stored
/// past its expiry time (invisible to it) removes the key at once, counts it in INFO's
/// `expired_keys` and reports `expired` before the command's own events, instead of leaving it
/// to active expiry's next tick. A single-key write that met its key expired and replaced or
/// removed it counts it the same way (Redis removes the key before such a write runs). Runs only
/// when the command found an expired record (`keyspace::expired_seen`), so other commands pay
/// one thread-local read.
///
/// Not while clients are paused (Redis keeps expired keys then, as active expiry does here),
/// nor where the removal would wait (a network thread while the engine is behind, the exec
/// lock held elsewhere) or is refused (a read-only script): active expiry removes those keys.
/// Documents are left to active expiry too (their removal needs the document lock).
fn passive_expiry(ctx: &mut Ctx<'_>, spec: &'static Command, keys: &[&[u8]], events_before: usize) {
    use crate::notify::EXPIRED;
    if keys.is_empty()
        || SCRIPT_CALLS.contains(&spec.name)
        || ctx.shared.pause.current().is_some()
        || (ctx.locking == Locking::Try && ctx.shared.backend.writes_would_wait())
    {
        return;
    }
    let shared = ctx.shared;
    // Write commands hold the exec lock's shared side already (`dispatch_checked`), as do the
    // commands of EXEC and scripts (`Locking::Held`).
    let _guard = match (ctx.locking, spec.props.write) {
        (Locking::Held, _) | (_, true) => None,
        _ => match shared.exec_lock.try_read() {
            Some(guard) => Some(guard),
            None => return,
        },
    };
    let now = crate::keyspace::now_ms();
    let dbi = ctx.dbi();
    let replaced_possible = spec.props.write && keys.len() == 1;
    let mut at = events_before;
    for &key in keys {
        let reported = ctx.session.events[events_before..]
            .iter()
            .any(|e| e.class == EXPIRED && e.key[..] == *key);
        let removed = match crate::keyspace::expire_record_if_due(ctx.db(), dbi, key, now) {
            Ok(removed) => removed,
            Err(e) => {
                tracing::debug!("passive expiry left a key to active expiry: {e}");
                false
            }
        };
        if !(removed || reported || replaced_possible) {
            continue;
        }
        shared.counters.expired_keys.fetch_add(1, Ordering::Relaxed);
        if reported {
            continue;
        }
        let events = ctx.session.events.len();
        ctx.notify(EXPIRED, "expired", &Bytes::copy_from_slice(key));
        if ctx.session.events.len() > events {
            // Before the command's own events, as in Redis.
            let event = ctx.session.events.remove(events);
            ctx.session.events.insert(at, event);
            at += 1;
        }
    }
}

/// OBJECT IDLETIME: the keys a command names count as used now (`access.rs`), but for the
/// commands that only look (Redis's `LOOKUP_NOTOUCH`), scripts (whose commands count), and a
/// client in CLIENT NO-TOUCH mode (except its TOUCH). A read of one missing key is not a use
/// (the caller asks `hits::says_missing`): a flood of misses would otherwise push the times of
/// keys that exist out of the table's buckets, and spend a cache miss each on the table.
fn touch_keys(ctx: &Ctx<'_>, spec: &'static Command, keys: &[&[u8]]) {
    if spec.keys.0 == 0 || spec.props.no_touch || (ctx.session.no_touch && spec.name != "touch") {
        return;
    }
    for &key in keys {
        ctx.shared.access.touch(key);
    }
}

/// CLIENT TRACKING (default mode): the keys a read-only command named are remembered for its
/// client, as Redis's `call()` does (whether the command succeeded or not). Inside a script a
/// read-only command remembers the keys the script declared (Redis remembers its caller's
/// command's keys). EVAL_RO and the like remember nothing themselves.
fn remember_tracked_keys(ctx: &Ctx<'_>, spec: &'static Command, keys: &[&[u8]]) {
    let Some(mode) = &ctx.session.tracking else {
        return;
    };
    if mode.bcast
        || !spec.props.readonly
        || spec.props.read_only_script
        || (mode.optin && !ctx.session.caching)
        || (mode.optout && ctx.session.caching)
    {
        return;
    }
    let tracking = &ctx.shared.watches.tracking;
    if ctx.session.in_script {
        if !ctx.session.script_keys.is_empty() {
            tracking.remember(
                ctx.session.id,
                ctx.session.script_keys.iter().map(|k| &k[..]),
            );
        }
    } else if !keys.is_empty() {
        tracking.remember(ctx.session.id, keys.iter().copied());
    }
}

/// After a connection's command (not one run by EXEC or a script): the invalidations it made
/// for its own client wait for its reply (`Session::answer`), and CLIENT CACHING's choice
/// ends unless the command was CLIENT itself or a transaction is open (Redis's `resetClient`).
fn note_tracking_after(ctx: &mut Ctx<'_>, spec: Option<&'static Command>, result: &Result<Reply>) {
    let own = crate::tracking::take_own();
    if !own.is_empty() {
        ctx.session.own_pushes.extend(own);
    }
    let again = result.as_ref().is_err_and(Error::is_would_block) || ctx.session.blocked.is_some();
    if ctx.session.caching
        && !again
        && ctx.session.multi.is_none()
        && spec.is_none_or(|s| s.name != "client")
    {
        ctx.session.caching = false;
    }
}

/// Commands whose key arguments the `new` and `keymiss` events do not look at: those that run
/// other commands (which report their own: these and [`SCRIPT_CALLS`]), and OBJECT (Redis's
/// lookup for it notifies nothing).
const NO_DISPATCHER_EVENTS: &[&str] = &["exec", "object", "migrate"];

/// Before a write command runs, when `new` or `expired` events are wanted: reports `expired`
/// for each of its keys stored past its time (Redis's write lookup removes such a key and
/// reports it before the command's own events; here the command replaces it, and active
/// expiry, which would have reported it, then finds it gone or alive), and returns the keys
/// that do not exist now (for `new`).
fn keys_before_write(
    ctx: &mut Ctx<'_>,
    spec: &'static Command,
    keys: &[&[u8]],
) -> Result<Vec<Bytes>> {
    use crate::notify::{EXPIRED, NEW};
    let notify = &ctx.shared.notify;
    let (new, expired) = (notify.wants(NEW), notify.wants(EXPIRED));
    if !(new || expired) || !spec.props.write || spec.props.no_dispatcher_events {
        return Ok(Vec::new());
    }
    let mut absent = Vec::new();
    let now = crate::keyspace::now_ms();
    for &key in keys {
        if key_exists(ctx, key)? {
            continue;
        }
        let key = Bytes::copy_from_slice(key);
        let dbi = ctx.dbi();
        if expired && transactions::stored_but_expired(ctx, dbi, &key, now)? {
            ctx.notify(EXPIRED, "expired", &key);
        }
        if new {
            absent.push(key);
        }
    }
    Ok(absent)
}

/// Whether `key` is live in the selected database (documents looked up only while the store
/// may hold one, as the string commands look them up).
fn key_exists(ctx: &Ctx<'_>, key: &[u8]) -> Result<bool> {
    let now = crate::keyspace::now_ms();
    let docs = ctx.shared.docs_may_exist();
    Ok(crate::keyspace::lookup(ctx.db(), ctx.dbi(), key, now, docs)?.is_some())
}

/// The events Redis raises below its commands: `new` for a key a write added (placed before
/// the first event the command reported on that key, where Redis's `dbAdd` raises it), and
/// `keymiss` for each key a read command looked up and did not find (a failed look, a read
/// that would wait on the network thread say, adds none rather than failing a command that
/// already ran).
///
/// A key that did not exist before the command is new when the command reported a change of
/// it (every way Redis adds a key reports one; a key set with a time already past counts,
/// as in Redis, though it is gone at once).
fn note_dispatcher_events(
    ctx: &mut Ctx<'_>,
    spec: &'static Command,
    keys: &[&[u8]],
    events_before: usize,
    absent_before: Vec<Bytes>,
) {
    use crate::notify::{Event, EXPIRED, KEY_MISS, NEW};
    let db = ctx.session.db;
    for key in absent_before {
        let reported = &ctx.session.events[events_before..];
        if reported
            .iter()
            .any(|e| e.class == NEW && e.db == db && e.key == key)
        {
            continue;
        }
        let Some(first_change) = reported.iter().position(|e| {
            e.db == db
                && e.key == key
                && e.class != KEY_MISS
                && e.class != EXPIRED
                && e.name != "del"
        }) else {
            continue;
        };
        let at = events_before + first_change;
        let event = Event {
            class: NEW,
            name: "new",
            db,
            key,
        };
        ctx.session.events.insert(at, event);
    }
    if ctx.shared.notify.wants(KEY_MISS) && spec.props.readonly && !spec.props.no_dispatcher_events
    {
        for &key in keys {
            if matches!(key_exists(ctx, key), Ok(false)) {
                ctx.notify(KEY_MISS, "keymiss", &Bytes::copy_from_slice(key));
            }
        }
    }
}

/// Publishes the session's waiting events (`notify.rs`).
pub(crate) fn publish_events(ctx: &mut Ctx<'_>) {
    publish_session_events(ctx.shared, ctx.session);
}

/// [`publish_events`] of `session` outside a command (after a held run).
/// Then the clients blocked on lists the commands pushed to are woken: Redis serves them after
/// the command, so a subscriber sees the push's events before the pop's.
pub(crate) fn publish_session_events(shared: &Shared, session: &mut Session) {
    for event in session.events.drain(..) {
        shared.notify.publish(&shared.pubsub, &event);
    }
    if !session.pushed.is_empty() {
        session.wake_pushed(&shared.list_waiters);
    }
}

/// A held side of the exec lock.
enum ExecGuard<'a> {
    None,
    Shared(#[allow(dead_code)] parking_lot::RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] parking_lot::RwLockWriteGuard<'a, ()>),
}

/// Commands refused inside MULTI (Redis's `no-multi` flag, of those this server has).
const NO_MULTI: &[&str] = &["save", "shutdown"];

/// Commands that run at once even inside MULTI (Redis's list).
const NOT_QUEUED: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// Commands that check several keys before writing them, or write a whole database: they hold
/// the exec lock exclusively, so no other write comes between their reads and their batch.
const EXCLUSIVE: &[&str] = &[
    "exec",
    // No write is in flight while a WATCH registers: a writer looks for watchers once, and one
    // registered in the middle of its write would be missed (and its client could read the
    // old value and then commit over the write).
    "watch",
    // JSON.SET may create a document: it checks that no string, hash, set, list or sorted set
    // has the name, then writes; a write of one of those checks for a document the same way.
    // Holding the lock exclusively keeps the two checks from crossing (a name held both a
    // string and a document).
    "json.set",
    // JSON.MERGE creates documents as JSON.SET does; JSON.MSET sets several atomically.
    "json.merge",
    "json.mset",
    // Scripts and functions ([`SCRIPT_CALLS`]) too: a script is atomic.
    "function",
    "msetnx",
    "rename",
    "renamenx",
    "move",
    "copy",
    "flushdb",
    "flushall",
    "swapdb",
    "restore",
    "smove",
    "lmove",
    "rpoplpush",
    "blmove",
    "brpoplpush",
    "sunionstore",
    "sinterstore",
    "sdiffstore",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zrangestore",
    "geosearchstore",
    "bitop",
    "pfmerge",
    "sort",
    // LCS may take up to 512 MiB for its table: one at a time, as in Redis.
    "lcs",
    "migrate",
    "restore-asking",
];

/// Reads of several keys that hold the exec lock's shared side: a command that changes several
/// keys at once (SMOVE, RENAME, EXEC, a script) holds it exclusively, so it lands wholly before
/// or after such a read, never between the read's keys (SUNION of two sets saw a member moving
/// between them in neither or in both). MGET reads its keys at one engine snapshot instead.
const MULTI_KEY_READS: &[&str] = &[
    "exists",
    "sunion",
    "sinter",
    "sdiff",
    "sintercard",
    "zunion",
    "zinter",
    "zdiff",
    "zintercard",
    "pfcount",
    "sort_ro",
    "json.mget",
];

/// True when `arg` equals `word`, ignoring ASCII case (option keywords such as `NX`).
pub(crate) fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// An integer argument, with Redis's error.
pub(crate) fn int_arg(arg: &[u8]) -> Result<i64> {
    parse_i64(arg).ok_or(Error::NotInteger)
}

/// An argument as text (lossy), for messages and names.
pub(crate) fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

#[cfg(test)]
pub(crate) mod testing {
    //! Runs commands against a [`crate::backend::MemoryBackend`] without sockets.
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use bytes::Bytes;

    use super::{execute, Ctx, Locking};
    use crate::backend::MemoryBackend;
    use crate::config::ServerConfig;
    use crate::resp::Reply;
    use crate::state::{Session, Shared};

    pub struct Harness {
        pub shared: Shared,
        pub session: Session,
    }

    impl Harness {
        pub fn new() -> Self {
            Self::with_config(ServerConfig::default())
        }

        pub fn with_config(config: ServerConfig) -> Self {
            Self::with_backend(Arc::new(MemoryBackend::new()), config)
        }

        /// A server over `backend` (a wrapper that injects failures, say).
        pub fn with_backend(
            backend: Arc<dyn crate::backend::KvBackend + Send + Sync>,
            config: ServerConfig,
        ) -> Self {
            let shared = Shared::new(backend, config).unwrap();
            let session = Session::new(shared.next_client_id(), &shared);
            Harness { shared, session }
        }

        /// Runs a command given as words.
        /// Another connection's session on the same server.
        pub fn second_session(&self) -> Session {
            Session::new(self.shared.next_client_id(), &self.shared)
        }

        /// Runs a command as `session`.
        pub fn run_as(&self, session: &mut Session, words: &[&str]) -> Reply {
            let args: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
            let mut ctx = Ctx::new(&self.shared, session, Locking::Wait);
            execute(&mut ctx, &args)
        }

        pub fn run(&mut self, words: &[&str]) -> Reply {
            let args: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
            let mut ctx = Ctx::new(&self.shared, &mut self.session, Locking::Wait);
            execute(&mut ctx, &args)
        }
    }

    pub fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::from(s.to_string()))
    }

    pub fn err(s: &str) -> Reply {
        Reply::Error(s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use crate::resp::Reply;

    /// Redis serves a client blocked on a list after the command that pushed, so a subscriber
    /// sees the push's events before the pop's. Here the pusher's wake of the blocked clients
    /// waits until its events are published: in a held run (whose events wait for its commit)
    /// the change count the blocked clients watch does not move before then.
    #[test]
    fn a_push_wakes_blocked_clients_after_its_events_are_published() {
        let mut h = Harness::new();
        h.run(&["CONFIG", "SET", "notify-keyspace-events", "AKE"]);
        let (mailbox, mut rx) = crate::pubsub::Mailbox::new(u64::MAX);
        let mut subs = crate::pubsub::Subscriptions::new(h.shared.pubsub.clone(), mailbox);
        subs.psubscribe(&bytes::Bytes::from_static(b"*"));
        let before = h.shared.list_waiters.generation();
        h.session.in_held_run = true;
        assert_eq!(h.run(&["RPUSH", "jobs", "j1"]), Reply::Int(1));
        h.session.in_held_run = false;
        assert!(
            rx.try_recv().is_err(),
            "a held run's events wait for its commit"
        );
        assert_eq!(
            h.shared.list_waiters.generation(),
            before,
            "blocked clients were woken before the push's events were published"
        );
        super::publish_session_events(&h.shared, &mut h.session);
        let mut published = 0;
        while rx.try_recv().is_ok() {
            published += 1;
        }
        // `rpush` on the keyspace and the keyevent channel (`A` leaves `new` out).
        assert_eq!(published, 2);
        assert_ne!(h.shared.list_waiters.generation(), before);
    }

    #[test]
    fn table_has_unique_lowercase_names_and_sane_arity() {
        let mut seen = std::collections::HashSet::new();
        for spec in super::table() {
            assert!(seen.insert(spec.name), "duplicate {}", spec.name);
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            assert_ne!(spec.arity, 0, "{}", spec.name);
            assert!(super::lookup(spec.name.to_uppercase().as_bytes()).is_some());
        }
    }

    #[test]
    fn unknown_commands_and_arity_use_redis_wording() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["foo", "a", "b"]),
            err("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
        );
        assert_eq!(
            h.run(&["FOO"]),
            err("ERR unknown command 'FOO', with args beginning with: ")
        );
        assert_eq!(
            h.run(&["GET"]),
            err("ERR wrong number of arguments for 'get' command")
        );
        assert_eq!(h.run(&["get", "nope"]), Reply::Nil);
    }
}
