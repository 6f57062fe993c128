//! The command table and dispatcher. [`execute`] takes one parsed command, finds its [`Spec`],
//! checks arity and authentication the way Redis does (unknown command, then arity, then auth),
//! and runs the handler; every failure becomes an error reply, never a panic or a closed
//! connection. Handlers live by family: [`connection`] (PING, HELLO, AUTH, CLIENT...), [`server`]
//! (INFO, CONFIG, COMMAND, SAVE...), [`strings`], [`keys`] and [`json`]. The same table answers
//! COMMAND COUNT/INFO/DOCS, so what clients discover is what the dispatcher runs.

pub mod connection;
pub mod json;
pub mod keys;
pub mod server;
pub mod strings;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::backend::KvBackend;
use crate::error::{Error, Result};
use crate::num::{parse_f64, parse_i64};
use crate::resp::Reply;
use crate::state::{AfterReply, Session, Shared};

/// What a handler sees: the server's shared state and its own connection's session.
pub(crate) struct Ctx<'a> {
    pub shared: &'a Shared,
    pub session: &'a mut Session,
}

impl Ctx<'_> {
    /// The storage.
    pub fn db(&self) -> &dyn KvBackend {
        self.shared.backend.as_ref()
    }
}

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

/// Commands allowed before AUTH (Redis's `no-auth` flag).
const NO_AUTH: &[&str] = &["auth", "hello", "quit"];

/// The whole table, in COMMAND's order.
pub(crate) fn table() -> impl Iterator<Item = &'static Spec> {
    connection::SPECS
        .iter()
        .chain(server::SPECS)
        .chain(strings::SPECS)
        .chain(keys::SPECS)
        .chain(json::SPECS)
}

/// Finds a command by name, case-insensitively.
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Spec> {
    static INDEX: OnceLock<HashMap<&'static str, &'static Spec>> = OnceLock::new();
    let index = INDEX.get_or_init(|| table().map(|s| (s.name, s)).collect());
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
    index.get(lower).copied()
}

/// The command `args` names, if it is one (looked up once per command: placement and
/// dispatch share it).
pub(crate) fn resolve(args: &[Bytes]) -> Option<&'static Spec> {
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
    spec: Option<&'static Spec>,
) -> Reply {
    count_command(ctx);
    dispatch(ctx, args, spec).unwrap_or_else(Reply::from)
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
pub(crate) fn placement(spec: Option<&Spec>) -> Placement {
    let Some(spec) = spec else {
        return Placement::Read;
    };
    if spec.group == "connection" {
        return Placement::Read;
    }
    if spec.keys.0 == 0 {
        return Placement::Pool;
    }
    if spec.flags.contains(&"write") {
        Placement::Write
    } else if spec.flags.contains(&"readonly") {
        Placement::Read
    } else {
        Placement::Pool
    }
}

/// Runs a read command with engine reads that do not wait for the disk
/// (`strata::without_waiting`). `None` when one would have waited: the command changed nothing,
/// was not counted, and should run again on the blocking pool.
pub(crate) fn execute_without_waiting(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    spec: Option<&'static Spec>,
) -> Option<Reply> {
    match strata::without_waiting(|| dispatch(ctx, args, spec)) {
        Err(e) if e.is_would_block() => None,
        result => {
            count_command(ctx);
            Some(result.unwrap_or_else(Reply::from))
        }
    }
}

fn dispatch(ctx: &mut Ctx<'_>, args: &[Bytes], spec: Option<&'static Spec>) -> Result<Reply> {
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
    let n = args.len() as i64;
    let arity = i64::from(spec.arity);
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(Error::WrongArity(spec.name.to_string()));
    }
    if !ctx.session.authenticated && !NO_AUTH.contains(&spec.name) {
        return Err(Error::NoAuth);
    }
    (spec.handler)(ctx, args)
}

/// True when `arg` equals `word`, ignoring ASCII case (option keywords such as `NX`).
pub(crate) fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// An integer argument, with Redis's error.
pub(crate) fn int_arg(arg: &[u8]) -> Result<i64> {
    parse_i64(arg).ok_or(Error::NotInteger)
}

/// A float argument, with Redis's error.
pub(crate) fn float_arg(arg: &[u8]) -> Result<f64> {
    parse_f64(arg).ok_or(Error::NotFloat)
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

    use super::{execute, Ctx};
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
            let shared = Shared::new(Arc::new(MemoryBackend::new()), config).unwrap();
            let session = Session::new(shared.next_client_id(), &shared);
            Harness { shared, session }
        }

        /// Runs a command given as words.
        pub fn run(&mut self, words: &[&str]) -> Reply {
            let args: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
            let mut ctx = Ctx {
                shared: &self.shared,
                session: &mut self.session,
            };
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
