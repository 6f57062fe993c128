//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP,
//! with redis-server 7's semantics for what applications rely on: Lua 5.1 (the version Redis
//! embeds), `KEYS` and `ARGV`, `redis.call` / `redis.pcall` / `redis.error_reply` /
//! `redis.status_reply` / `redis.sha1hex`, Redis's conversions between replies and Lua values,
//! and its error texts (`... script: <name>, on @user_script:<line>.`).
//!
//! A script runs like EXEC: the dispatcher holds the exec lock exclusively, so no other client's
//! command runs during it (Redis's atomicity); its writes go to a transaction overlay that is
//! committed as one engine batch when the script ends, also when it ends with an error (Redis
//! keeps the writes a failing script made), so after a crash all of a script's writes are there
//! or none. Each thread keeps one Lua state (with the scripts it compiled) holding only the
//! base, table, string and math libraries (no `io`, `os`, `loadfile`, `dofile`); scripts run in
//! an environment whose writes are refused and whose libraries are read-only views, as Redis 7
//! makes them, and whatever a script forces into it (`rawset`) is cleared after it, so scripts
//! cannot reach the machine or leave state for each other (`getfenv`, `setfenv`, `loadstring`,
//! `load`, `rawset` and the string metatable are guarded: `install_libraries`). The `coroutine`
//! library is not offered: the hook that stops a killed script does not reach into one. `cjson.encode` / `cjson.decode` follow lua-cjson as Redis configures it, `bit` follows
//! LuaBitOp. Functions (FUNCTION LOAD, FCALL) run on the same
//! Lua states (`functions.rs`). `cmsgpack` follows lua-cmsgpack (`cmsgpack.rs`). Not
//! offered: the `struct` library, SCRIPT DEBUG.
//!
//! A long script runs to its end, as in Redis: past `busy-reply-threshold` other clients are
//! answered BUSY and SCRIPT KILL stops it if it has not written (`busy.rs`).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use mlua::{Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::{is, text, Ctx, Locking, Spec};
use crate::error::{Error, Result};
use crate::resp::Reply;
use crate::state::{lock, Shared};
use crate::txn::Overlay;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "eval", arity: -3, flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], keys: (0, 0, 0), group: "scripting", summary: "Executes a server-side Lua script.", handler: eval },
    Spec { name: "evalsha", arity: -3, flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], keys: (0, 0, 0), group: "scripting", summary: "Executes a server-side Lua script by SHA1 digest.", handler: evalsha },
    Spec { name: "eval_ro", arity: -3, flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], keys: (0, 0, 0), group: "scripting", summary: "Executes a read-only server-side Lua script.", handler: eval_ro },
    Spec { name: "evalsha_ro", arity: -3, flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], keys: (0, 0, 0), group: "scripting", summary: "Executes a read-only server-side Lua script by SHA1 digest.", handler: evalsha_ro },
    Spec { name: "script", arity: -2, flags: &["noscript"], keys: (0, 0, 0), group: "scripting", summary: "A container for Lua scripts management commands.", handler: script },
];

/// Most scripts kept for EVALSHA; past it the cache is emptied before the next is added (a
/// client that generates a new script per call would otherwise grow it without bound).
const SCRIPTS_MAX: usize = 10_000;

/// Lua instructions between two looks at the clock (FUNCTION LOAD) or the kill flag (scripts).
const CLOCK_EVERY_INSTRUCTIONS: u32 = 10_000;
/// Most memory one script's Lua state may take.
const SCRIPT_MEMORY_MAX_BYTES: usize = 256 << 20;

/// The error that stops a script killed by SCRIPT KILL or FUNCTION KILL, placed at the line it
/// was running as Redis's hook places it.
fn script_killed(lua: &Lua) -> mlua::Error {
    let (line, in_function) = lua
        .inspect_stack(0, |d| {
            let in_function = d
                .source()
                .source
                .is_some_and(|s| s.contains("user_function"));
            (d.current_line().unwrap_or(0), in_function)
        })
        .unwrap_or((0, false));
    let source = if in_function {
        "user_function"
    } else {
        "user_script"
    };
    mlua::Error::runtime(format!(
        "{source}:{line}: {LIB_ERROR_MARK}{}",
        crate::busy::KILLED
    ))
}

/// Marks a Redis error raised by `redis.call` inside a Lua error message, so the position Lua
/// prefixes can be told from the reply's own text.
const CALL_ERROR_MARK: &str = "\u{1}redis-error\u{1}";
/// Marks an error of Redis's own Lua library (`luaPushError`: the kill, `redis.sha1hex`'s
/// argument count), whose message Redis places only in the trailer, without Lua's prefix.
const LIB_ERROR_MARK: &str = "\u{1}redis-lib-error\u{1}";
/// The field Redis sets on the error table of a failed command (`ignore_error_stats_update`).
const ERROR_COUNTED: &str = "ignore_error_stats_update";

/// The lowercase hex SHA-1 of a script body (EVALSHA's name for it).
fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

fn eval(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let numkeys = key_count(args)?;
    shebang(&args[1])?;
    let name = remember(ctx, &args[1]);
    run(ctx, args, numkeys, &name, &args[1], false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let numkeys = key_count(args)?;
    shebang(&args[1])?;
    let name = remember(ctx, &args[1]);
    run(ctx, args, numkeys, &name, &args[1], true)
}

/// A script's first line when it starts with `#!` (Redis 7's shebang, `#!lua flags=a,b`):
/// its flags (`None`: no shebang, the scripts of Redis 6 and before) and its length (the code
/// compiled starts at its line end, so line numbers stay the script's). Redis's errors.
fn shebang(body: &[u8]) -> Result<(Option<Vec<&'static str>>, usize)> {
    if !body.starts_with(b"#!") {
        return Ok((None, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(Error::command("Invalid script shebang"));
    };
    let parts = super::functions::first_line_words(&body[..end])
        .filter(|p| !p.is_empty())
        .ok_or_else(|| Error::command("Invalid engine in script shebang"))?;
    if parts[0] != "#!lua" {
        return Err(Error::command(format!(
            "Unexpected engine in script shebang: {}",
            parts[0]
        )));
    }
    let mut flags = Vec::new();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(Error::command(format!(
                "Unknown lua shebang option: {part}"
            )));
        };
        for given in list.split(',').filter(|f| !f.is_empty()) {
            let Some(flag) = FUNCTION_FLAGS.iter().find(|f| **f == given) else {
                return Err(Error::command(format!(
                    "Unexpected flag in script shebang: {given}"
                )));
            };
            flags.push(*flag);
        }
    }
    Ok((Some(flags), end))
}

fn evalsha(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis checks the key count before it looks the script up.
    let numkeys = key_count(args)?;
    let (name, body) = cached(ctx, &args[1])?;
    run(ctx, args, numkeys, &name, &body, false)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis checks the key count before it looks the script up.
    let numkeys = key_count(args)?;
    let (name, body) = cached(ctx, &args[1])?;
    run(ctx, args, numkeys, &name, &body, true)
}

/// Whether EVAL of `script` (EVALSHA of the script named `script` when `by_name`) may write,
/// for CLIENT PAUSE WRITE: unless its shebang says `no-writes`. One without a shebang (Redis
/// 6's kind), a malformed one and an unknown name may (Redis holds them with the
/// `may-replicate` commands; EVALSHA of an unknown name then answers NOSCRIPT).
pub(crate) fn may_write(shared: &Shared, by_name: bool, script: &Bytes) -> bool {
    let body = if by_name {
        let name = String::from_utf8_lossy(script).to_ascii_lowercase();
        match lock(&shared.scripts).get(&name) {
            Some(body) => body.clone(),
            None => return true,
        }
    } else {
        script.clone()
    };
    match shebang(&body) {
        Ok((Some(flags), _)) => !flags.contains(&"no-writes"),
        Ok((None, _)) | Err(_) => true,
    }
}

/// The script EVALSHA names (its name in lowercase, and its body), or Redis's NOSCRIPT.
fn cached(ctx: &Ctx<'_>, sha: &[u8]) -> Result<(String, Bytes)> {
    let name = String::from_utf8_lossy(sha).to_ascii_lowercase();
    let body = lock(&ctx.shared.scripts)
        .get(&name)
        .cloned()
        .ok_or_else(|| Error::Coded("NOSCRIPT No matching script. Please use EVAL.".into()))?;
    Ok((name, body))
}

/// Keeps `body` for EVALSHA; returns its name.
fn remember(ctx: &Ctx<'_>, body: &Bytes) -> String {
    let name = sha1_hex(body);
    let mut scripts = lock(&ctx.shared.scripts);
    if !scripts.contains_key(&name) {
        if scripts.len() >= SCRIPTS_MAX {
            scripts.clear();
        }
        scripts.insert(name.clone(), body.clone());
    }
    name
}

/// SCRIPT LOAD | EXISTS | FLUSH [ASYNC|SYNC] | KILL | HELP.
fn script(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = &args[1];
    let wrong_arity = || Error::WrongArity(format!("script|{}", text(sub).to_ascii_lowercase()));
    if is(sub, "LOAD") {
        if args.len() != 3 {
            return Err(wrong_arity());
        }
        let (_, shebang_bytes) = shebang(&args[2])?;
        compile_check(&args[2][shebang_bytes..])?;
        return Ok(Reply::text(remember(ctx, &args[2])));
    }
    if is(sub, "EXISTS") {
        if args.len() < 3 {
            return Err(wrong_arity());
        }
        let scripts = lock(&ctx.shared.scripts);
        return Ok(Reply::Array(
            args[2..]
                .iter()
                .map(|s| {
                    let name = String::from_utf8_lossy(s).to_ascii_lowercase();
                    Reply::Int(i64::from(scripts.contains_key(&name)))
                })
                .collect(),
        ));
    }
    if is(sub, "FLUSH") {
        match args.get(2) {
            None => {}
            Some(mode) if args.len() == 3 && (is(mode, "ASYNC") || is(mode, "SYNC")) => {}
            Some(_) => {
                return Err(Error::command(
                    "SCRIPT FLUSH only support SYNC|ASYNC option",
                ))
            }
        }
        lock(&ctx.shared.scripts).clear();
        ctx.shared.script_generation.fetch_add(1, Ordering::AcqRel);
        return Ok(Reply::ok());
    }
    if is(sub, "KILL") {
        if args.len() != 2 {
            return Err(wrong_arity());
        }
        return match ctx.shared.running_script.kill(true) {
            Ok(()) => Ok(Reply::ok()),
            Err(refused) => Err(refused.into_error()),
        };
    }
    if is(sub, "DEBUG") && args.len() == 3 {
        // Redis's Lua debugger (LDB) speaks its own protocol over the connection; this server
        // has none, so only turning it off succeeds.
        let mode = &args[2];
        return if is(mode, "NO") {
            Ok(Reply::ok())
        } else if is(mode, "YES") || is(mode, "SYNC") {
            Err(Error::command(
                "SCRIPT DEBUG is not supported: this server has no Lua debugger",
            ))
        } else {
            Err(Error::command("Use SCRIPT DEBUG YES/SYNC/NO"))
        };
    }
    if is(sub, "HELP") {
        return Ok(super::admin::help(&[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Print this help.",
        ]));
    }
    Err(Error::UnknownSubcommand {
        container: "SCRIPT",
        sub: text(sub),
    })
}

/// A Lua state for one script: the safe libraries only, loaders that read files removed.
fn new_lua() -> Result<Lua> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )
    .map_err(lua_failure)?;
    let globals = lua.globals();
    // Redis removes these two as well (they read files). Coroutines are removed here: the
    // clock hook that stops a runaway script does not follow a coroutine, so a loop inside one
    // would hold the exec lock for ever (measured: the server stopped answering).
    for name in ["dofile", "loadfile", "coroutine"] {
        globals.set(name, Value::Nil).map_err(lua_failure)?;
    }
    Ok(lua)
}

fn lua_failure(e: mlua::Error) -> Error {
    Error::command(format!("internal error in the Lua engine: {e}"))
}

/// Compiles `body` (SCRIPT LOAD and EVAL check it before anything runs).
fn compile_check(body: &[u8]) -> Result<()> {
    let lua = new_lua()?;
    lua.load(body)
        .set_name("@user_script")
        .into_function()
        .map(|_| ())
        .map_err(|e| compile_error(&e))
}

fn compile_error(e: &mlua::Error) -> Error {
    let message = match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    Error::command(format!("Error compiling script (new function): {message}"))
}

/// Commands a script may not call (Redis's `noscript` flag), and PING, ECHO and SELECT,
/// which it may although they are connection commands here.
fn callable(spec: &Spec) -> bool {
    let blocking = matches!(
        spec.name,
        "blpop" | "brpop" | "brpoplpush" | "blmove" | "blmpop" | "bzpopmin" | "bzpopmax" | "bzmpop"
    );
    !blocking
        && (!spec.flags.contains(&"noscript")
            || matches!(spec.name, "ping" | "echo" | "select" | "time" | "lastsave"))
}

/// An error as a script sees it (Redis's `luaPushErrorBuff`): `CODE message`, the code taken
/// from a leading `-CODE ` or else `ERR`, line ends trimmed.
fn error_text(raw: &str) -> String {
    let body = raw.strip_prefix('-').unwrap_or(raw);
    let (code, message) = match (raw.starts_with('-'), body.split_once(' ')) {
        (true, Some((code, message))) => (code, message),
        _ => ("ERR", body),
    };
    format!("{code} {}", message.trim_matches(['\r', '\n']))
}

/// EVAL's and EVALSHA's shared part: the keys and arguments, then the script, in an overlay
/// committed at the end whatever the script did.
/// EVAL's key count argument, with Redis's errors (checked before the script is cached).
fn key_count(args: &[Bytes]) -> Result<usize> {
    let numkeys = crate::num::parse_i64(&args[2]).ok_or(Error::NotInteger)?;
    if numkeys < 0 {
        return Err(Error::command("Number of keys can't be negative"));
    }
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > args.len() - 3 {
        return Err(Error::command(
            "Number of keys can't be greater than number of args",
        ));
    }
    Ok(numkeys)
}

/// Runs script `name` (`body`, already in the cache: EVAL put it there, EVALSHA found it) with
/// its first `numkeys` arguments as `KEYS`.
fn run(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    numkeys: usize,
    name: &str,
    body: &[u8],
    read_only: bool,
) -> Result<Reply> {
    // A script with a shebang runs by its flags (Redis 7): `no-writes` makes it read-only,
    // EVAL_RO refuses one without it; one without a shebang runs as in Redis 6.
    let (flags, shebang_bytes) = shebang(body)?;
    let mut read_only = read_only;
    if let Some(flags) = &flags {
        let no_writes = flags.contains(&"no-writes");
        if read_only && !no_writes {
            return Err(Error::command(
                "Can not execute a script with write flag using *_ro command.",
            ));
        }
        if ctx.session.cluster && flags.contains(&"no-cluster") {
            return Err(Error::command(
                "Can not run script on cluster, 'no-cluster' flag is set.",
            ));
        }
        read_only |= no_writes;
    }
    let code = &body[shebang_bytes..];
    execute_lua(ctx, args, numkeys, name, read_only, Invoke::Script, |vm| {
        vm.function(name, code)
    })
}

/// How a compiled chunk is run: a script (EVAL: `KEYS` and `ARGV` globals, no arguments) or
/// a function (FCALL: the keys and the arguments as its two arguments, no such globals).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Invoke {
    Script,
    Function,
}

/// Runs the function `pick` chooses on this thread's Lua state, with the first `numkeys` of
/// `args[3..]` as keys, in an overlay committed at the end whatever it did.
pub(super) fn execute_lua(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    numkeys: usize,
    name: &str,
    read_only: bool,
    invoke: Invoke,
    pick: impl FnOnce(&mut Vm) -> Result<mlua::Function>,
) -> Result<Reply> {
    let generation = ctx.shared.script_generation.load(Ordering::Acquire);
    VM.with(|cell| {
        // (EVAL is not callable from a script, so the state is never in use here.)
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| Error::command("internal error: the Lua state is in use"))?;
        let stale = slot
            .as_ref()
            .is_none_or(|vm| vm.generation != generation || vm.functions.len() >= VM_FUNCTIONS_MAX);
        if stale {
            *slot = Some(Vm::new(generation)?);
        }
        let Some(vm) = slot.as_mut() else {
            return Err(Error::command("internal error: no Lua state"));
        };
        let function = pick(vm)?;
        let keys = &args[3..3 + numkeys];
        let argv = &args[3 + numkeys..];
        // A SWAPDB in the script changes the map at once; if the batch fails, it goes back.
        let map_before = ctx.shared.db_map();
        let overlay = Overlay::new(ctx.store);
        let outcome = {
            let mut sub = Ctx {
                shared: ctx.shared,
                session: &mut *ctx.session,
                store: &overlay,
                locking: Locking::Held,
            };
            // A SELECT inside the script lasts until it ends (as in Redis 7).
            let (in_exec, in_script, db) =
                (sub.session.in_exec, sub.session.in_script, sub.session.db);
            sub.session.in_exec = true;
            sub.session.in_script = true;
            // CLIENT TRACKING remembers the script's declared keys when it reads (Redis).
            let script_keys = if sub.session.tracking.is_some() {
                std::mem::replace(&mut sub.session.script_keys, keys.to_vec())
            } else {
                Vec::new()
            };
            let run = sub
                .shared
                .running_script
                .begin(invoke == Invoke::Script, name, args);
            let outcome = call_script(
                vm,
                &function,
                &mut sub,
                (keys, argv),
                read_only,
                (name, &run.stop),
                invoke,
            );
            let abandoned = run.abandoned();
            drop(run);
            sub.session.in_exec = in_exec;
            sub.session.in_script = in_script;
            sub.session.db = db;
            sub.session.script_keys = script_keys;
            if abandoned {
                // SHUTDOWN NOSAVE stopped it: none of its writes are kept (`busy.rs`), and its
                // client gets no reply: the connection closes, as Redis exits.
                ctx.shared.set_db_map(&map_before);
                ctx.session.events.clear();
                ctx.session.after_reply = crate::state::AfterReply::CloseSilently;
                return Err(Error::command("the server is shutting down"));
            }
            outcome
        };
        // A script stopped by the memory limit may have left the state near it: start anew.
        if matches!(&outcome, Err(e) if e.to_string().contains("not enough memory")) {
            *slot = None;
        }
        // (The script's changes reach the store, and tracking clients, here.)
        if let Err(e) = crate::tracking::in_script(|| overlay.commit()) {
            ctx.shared.set_db_map(&map_before);
            // Nothing of it happened: no keyspace events either.
            ctx.session.events.clear();
            return Err(e);
        }
        ctx.session.note_list_push();
        outcome
    })
}

/// Most compiled scripts a thread's Lua state keeps; past it the state is made anew.
const VM_FUNCTIONS_MAX: usize = 1000;

thread_local! {
    /// This thread's Lua state: making one and compiling a script took most of an EVAL's
    /// 280 us; each thread keeps one, with its compiled scripts, until SCRIPT FLUSH.
    static VM: std::cell::RefCell<Option<Vm>> = const { std::cell::RefCell::new(None) };
}

/// A Lua state with Redis's libraries and protected globals, and the scripts it compiled.
pub(super) struct Vm {
    lua: Lua,
    /// The environment scripts run in (`install_libraries`).
    env: Table,
    /// The `redis` library table itself (scripts see a read-only view of it): `call` and
    /// `pcall` are bound to each call's client here.
    redis: Table,
    /// Compiled scripts by name (SHA-1).
    functions: std::collections::HashMap<String, mlua::Function>,
    /// `Shared::script_generation` when made: SCRIPT FLUSH makes every state stale.
    generation: u64,
    /// The functions of the loaded function libraries, by name, and the registry generation
    /// they were loaded at (`functions.rs`).
    library_functions: std::collections::HashMap<String, mlua::Function>,
    libraries_generation: Option<u64>,
}

impl Vm {
    fn new(generation: u64) -> Result<Vm> {
        let lua = new_lua()?;
        lua.set_memory_limit(SCRIPT_MEMORY_MAX_BYTES)
            .map_err(lua_failure)?;
        let (env, redis) = install_libraries(&lua).map_err(lua_failure)?;
        Ok(Vm {
            lua,
            env,
            redis,
            functions: std::collections::HashMap::new(),
            generation,
            library_functions: std::collections::HashMap::new(),
            libraries_generation: None,
        })
    }

    /// Function `name` of the function libraries `registry` holds, loading them all into this
    /// state first if it has an older set.
    pub(super) fn library_function(
        &mut self,
        registry: &super::functions::Registry,
        name: &str,
    ) -> Result<mlua::Function> {
        if self.libraries_generation != Some(registry.generation) {
            self.library_functions.clear();
            for code in registry.codes() {
                for f in load_library(self, code)? {
                    self.library_functions.insert(f.name, f.callback);
                }
            }
            self.libraries_generation = Some(registry.generation);
        }
        // The exact name first, else one that differs in case only (Redis finds functions
        // case-insensitively).
        self.library_functions
            .get(name)
            .or_else(|| {
                self.library_functions
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|(_, f)| f)
            })
            .cloned()
            .ok_or_else(|| Error::command("Function not found"))
    }

    /// The compiled script `name` (compiled now if new to this state).
    fn function(&mut self, name: &str, body: &[u8]) -> Result<mlua::Function> {
        if let Some(f) = self.functions.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .lua
            .load(body)
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| compile_error(&e))?;
        self.functions.insert(name.to_string(), f.clone());
        Ok(f)
    }
}

/// The `redis` library's functions that need no client, `cjson`, `bit`, and the globals'
/// protection: reading a global that does not exist or creating one is an error, as in
/// Redis 7 (a misspelt name fails loudly, and one script cannot leave state for the next).
fn install_libraries(lua: &Lua) -> mlua::Result<(Table, Table)> {
    let globals = lua.globals();
    let redis = lua.create_table()?;
    redis.set(
        "error_reply",
        lua.create_function(|lua, msg: mlua::LuaString| {
            let msg = msg.to_string_lossy();
            let dashed = if msg.starts_with('-') {
                msg
            } else {
                format!("-{msg}")
            };
            let t = lua.create_table()?;
            t.set("err", error_text(&dashed))?;
            Ok(t)
        })?,
    )?;
    redis.set(
        "status_reply",
        lua.create_function(|lua, msg: mlua::LuaString| {
            let t = lua.create_table()?;
            t.set("ok", msg)?;
            Ok(t)
        })?,
    )?;
    redis.set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            // Redis's own check and words, before any conversion.
            if args.len() != 1 {
                return Err(raise(
                    lua,
                    format!("{LIB_ERROR_MARK}wrong number of arguments"),
                ));
            }
            let s: mlua::LuaString = lua.unpack(args.into_iter().next().unwrap_or(Value::Nil))?;
            Ok(sha1_hex(&s.as_bytes()))
        })?,
    )?;
    redis.set("log", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    for (level, n) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.set(level, n)?;
    }
    redis.set(
        "setresp",
        lua.create_function(|lua, v: i64| {
            if v == 2 {
                Ok(())
            } else {
                Err(raise(lua, "RESP version other than 2 is not offered here"))
            }
        })?,
    )?;
    redis.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    // The version this server answers as (INFO's redis_version), and as 0x00MMmmpp.
    let version = super::connection::REDIS_COMPAT_VERSION;
    redis.set("REDIS_VERSION", version)?;
    let number = version
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .fold(0i64, |n, p| (n << 8) | p);
    redis.set("REDIS_VERSION_NUM", number)?;
    redis.set("set_repl", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    globals.set("redis", redis.clone())?;
    // Redis 7 removes `print` from the base library (it wrote to the server's stdout).
    globals.raw_set("print", Value::Nil)?;
    globals.set("cjson", cjson_table(lua)?)?;
    globals.set("cmsgpack", super::cmsgpack::table(lua)?)?;
    globals.set("bit", bit_table(lua)?)?;
    // Scripts run with an environment of their own, not the globals: reads fall through to
    // the globals (a missing name is an error), writes are refused, and the libraries are seen
    // through read-only views, as Redis 7 makes them read-only. What a script still manages to
    // put in its environment (`rawset`) is cleared after it, so no script sees another's state.
    //
    // Lua 5.1 has other ways to the real globals and the shared library tables, each closed
    // here (Redis closes them with a patched Lua whose tables can be made read-only):
    // - `getfenv` and `setfenv` are not offered (nor are they by Redis 7): `getfenv(0)` and
    //   `getfenv(f)` of a library function return the real globals, and `setfenv` would change
    //   what later scripts run with;
    // - `rawset` on the environment, the globals, a library or a read-only view is refused;
    // - a function made by `loadstring` or `load` gets the environment instead of the
    //   globals, and a precompiled (binary) chunk is refused: Lua 5.1 does not check bytecode,
    //   and a crafted chunk can corrupt memory (Redis refuses them too, CVE-2015-4335);
    // - `getmetatable('')` returns a read-only view whose `__index` is the string library's
    //   view, not the library itself.
    lua.load(
        r#"
        local CALL_ERROR_MARK = ...
        local G = _G
        local rawset, rawget, setmetatable, getmetatable = rawset, rawget, setmetatable, getmetatable
        local setfenv, loadstring, type, error = setfenv, loadstring, type, error
        local tconcat = table.concat
        local READONLY = "Attempt to modify a readonly table"
        local function refuse() error(READONLY, 2) end
        local protected = { [G] = true }
        local function readonly(t)
            local view = setmetatable({}, { __index = t, __newindex = refuse, __metatable = false })
            protected[t] = true
            protected[view] = true
            return view
        end
        for _, name in ipairs({ "redis", "cjson", "cmsgpack", "bit", "string", "table", "math", "coroutine" }) do
            local lib = rawget(G, name)
            if lib ~= nil then
                rawset(G, name, readonly(lib))
            end
        end
        local function global(_, name)
            local v = rawget(G, name)
            if v == nil then
                error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
            end
            return v
        end
        -- `getmetatable(_G)` shows a read-only copy of the environment's metatable, as
        -- Redis's read-only `_G` has one; changing it fails like any read-only table.
        local env = setmetatable({}, {
            __index = global,
            __newindex = refuse,
            __metatable = readonly({ __index = global, __newindex = refuse }),
        })
        local string_meta = getmetatable("")
        rawset(string_meta, "__metatable", readonly({ __index = rawget(G, "string") }))
        protected[string_meta] = true
        protected[env] = true
        rawset(G, "rawset", function(t, k, v)
            -- Redis's C `rawset` fails with a bare error (no position in the message), placed
            -- at the script's line in the reply's suffix, as `redis.call`'s errors are.
            if protected[t] then error(CALL_ERROR_MARK .. "ERR " .. READONLY, 2) end
            return rawset(t, k, v)
        end)
        -- A read-only table's metatable cannot be replaced (Redis's message, not Lua's; bare,
        -- as its C function's).
        rawset(G, "setmetatable", function(t, mt)
            if protected[t] then error(CALL_ERROR_MARK .. "ERR " .. READONLY, 2) end
            return setmetatable(t, mt)
        end)
        -- Redis 7 offers neither: each would reach the real globals or change what later
        -- scripts run with.
        rawset(G, "getfenv", nil)
        rawset(G, "setfenv", nil)
        local function load_here(chunk, name)
            if type(chunk) == "string" and chunk:byte(1) == 27 then
                return nil, "loading precompiled (binary) chunks is not allowed"
            end
            local f, err = loadstring(chunk, name)
            if f == nil then return nil, err end
            return setfenv(f, env)
        end
        rawset(G, "loadstring", load_here)
        rawset(G, "load", function(reader, name)
            if type(reader) ~= "function" then
                error("bad argument #1 to 'load' (function expected, got " .. type(reader) .. ")", 2)
            end
            local parts = {}
            while true do
                local piece = reader()
                if piece == nil or piece == "" then break end
                if type(piece) ~= "string" then return nil, "reader function must return a string" end
                parts[#parts + 1] = piece
            end
            return load_here(tconcat(parts), name or "=(load)")
        end)
        rawset(G, "_G", env)
        return env
        "#,
    )
    .set_name("=redis_lib")
    .call(CALL_ERROR_MARK)
    .map(|env| (env, redis))
}

/// A function a library registered with `redis.register_function`.
pub(super) struct Registered {
    pub name: String,
    pub description: Option<String>,
    /// Its flags, in Redis's order ([`FUNCTION_FLAGS`]).
    pub flags: Vec<&'static str>,
    pub callback: mlua::Function,
}

/// Redis's script flags, in the order it lists them (`scripts_flags_def`).
pub(super) const FUNCTION_FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// How long FUNCTION LOAD lets a library's code run (Redis's `LOAD_TIMEOUT_MS`): it should
/// only register functions.
const LOAD_TIME_LIMIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs a library's code on `vm` and returns the functions it registered. `code` is what
/// follows the library's first line (`#!lua name=...`), that line's end included, so errors
/// name the library's own line numbers. While it runs, `redis.register_function` exists and
/// `redis.call` does not, as in Redis.
pub(super) fn load_library(vm: &Vm, code: &[u8]) -> Result<Vec<Registered>> {
    let lua = &vm.lua;
    let chunk = lua
        .load(code)
        .set_name("@user_function")
        .into_function()
        .map_err(|e| {
            let message = match &e {
                mlua::Error::SyntaxError { message, .. } => message.clone(),
                other => other.to_string(),
            };
            Error::command(format!("Error compiling function: {message}"))
        })?;
    let found: std::cell::RefCell<Vec<Registered>> = std::cell::RefCell::new(Vec::new());
    // What the code sees while it loads is Redis's load API only: `redis` with
    // `register_function`, `log` and the version; any other name is an error. Its functions
    // keep this environment, whose look-ups go to the scripts' environment once loaded.
    let load_redis = lua.create_table().map_err(lua_failure)?;
    let load_api = lua.create_table().map_err(lua_failure)?;
    let env = lua.create_table().map_err(lua_failure)?;
    let env_meta = lua.create_table().map_err(lua_failure)?;
    (|| -> mlua::Result<()> {
        load_redis.set("log", vm.redis.get::<Value>("log")?)?;
        for name in [
            "LOG_DEBUG",
            "LOG_VERBOSE",
            "LOG_NOTICE",
            "LOG_WARNING",
            "REDIS_VERSION",
            "REDIS_VERSION_NUM",
        ] {
            load_redis.set(name, vm.redis.get::<Value>(name)?)?;
        }
        load_api.set("redis", load_redis.clone())?;
        let api_meta = lua.create_table()?;
        api_meta.set(
            "__index",
            lua.create_function(|lua, (_, name): (Value, Value)| -> mlua::Result<()> {
                let name = match name {
                    Value::String(s) => s.to_string_lossy(),
                    other => format!("{other:?}"),
                };
                Err(raise_coded(
                    lua,
                    &format!("Script attempted to access nonexistent global variable '{name}'"),
                ))
            })?,
        )?;
        // `redis.call` and any other missing field of the load API fail the same way.
        load_redis.set_metatable(Some(api_meta.clone()))?;
        load_api.set_metatable(Some(api_meta))?;
        env_meta.set("__index", load_api.clone())?;
        env_meta.set("__newindex", vm.env.clone())?;
        env.set_metatable(Some(env_meta.clone()))?;
        Ok(())
    })()
    .map_err(lua_failure)?;
    let started = std::time::Instant::now();
    lua.set_hook(
        mlua::HookTriggers::new().every_nth_instruction(CLOCK_EVERY_INSTRUCTIONS),
        move |_, _| {
            if started.elapsed() > LOAD_TIME_LIMIT {
                Err(mlua::Error::runtime("FUNCTION LOAD timeout"))
            } else {
                Ok(mlua::VmState::Continue)
            }
        },
    )
    .map_err(lua_failure)?;
    let result = lua.scope(|scope| {
        let register = scope.create_function(|lua, args: MultiValue| {
            let r = registration(lua, args)?;
            let mut found = found.borrow_mut();
            // Within a library names are case-sensitive (Redis's library dictionary); calls
            // find them case-insensitively, the first registered winning.
            if found.iter().any(|f| f.name == r.name) {
                return Err(raise_in_library(
                    lua,
                    "Function already exists in the library",
                ));
            }
            found.push(r);
            Ok(())
        })?;
        load_redis.raw_set("register_function", register)?;
        chunk.set_environment(env.clone())?;
        chunk.call::<()>(())
    });
    lua.remove_hook();
    let _ = load_redis.raw_set("register_function", Value::Nil);
    // From now on the functions see what scripts see.
    env_meta
        .raw_set("__index", vm.env.clone())
        .map_err(lua_failure)?;
    result.map_err(|e| {
        let mut text = lua_error_text(&e);
        if let Some(at) = text.find("\nstack traceback:") {
            text.truncate(at);
        }
        Error::command(format!("Error registering functions: {text}"))
    })?;
    Ok(found.into_inner())
}

/// Runs a library's code on a fresh Lua state (FUNCTION LOAD's check, and loading the stored
/// libraries at start-up): the functions it registers, as FUNCTION LIST shows them.
pub(super) fn check_library(body: &[u8]) -> Result<Vec<super::functions::FunctionInfo>> {
    let vm = Vm::new(0)?;
    Ok(load_library(&vm, body)?
        .into_iter()
        .map(|r| super::functions::FunctionInfo {
            name: r.name,
            description: r.description,
            flags: r.flags,
        })
        .collect())
}

/// An error `redis.register_function` raises, as Redis words it (`ERR message`, no place).
fn raise_in_library(_lua: &Lua, message: &str) -> mlua::Error {
    mlua::Error::runtime(format!("ERR {message}"))
}

/// An error raised while a library loads, placed at its line as Redis places them.
fn raise_coded(lua: &Lua, message: &str) -> mlua::Error {
    let line = lua
        .inspect_stack(1, |d| d.current_line())
        .flatten()
        .unwrap_or(0);
    mlua::Error::runtime(format!("ERR user_function:{line}: {message}"))
}

/// The arguments of one `redis.register_function` call, checked as Redis checks them: a name
/// and a callback, or one table of named arguments (`function_name`, `callback`, `flags`,
/// `description`).
fn registration(lua: &Lua, args: MultiValue) -> mlua::Result<Registered> {
    let fail = |m: &str| raise_in_library(lua, m);
    let as_text = |v: &Value| match v {
        Value::String(s) => Some(s.to_string_lossy()),
        Value::Integer(n) => Some(n.to_string()),
        Value::Number(n) => Some(crate::num::format_g17(*n)),
        _ => None,
    };
    let args: Vec<Value> = args.into_iter().collect();
    let (name, callback, description, flags) = match args.as_slice() {
        [named] => {
            let Value::Table(t) = named else {
                return Err(fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."));
            };
            let (mut name, mut callback, mut description, mut flags) =
                (None, None, None, Vec::new());
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Some(key) = as_text(&k) else {
                    return Err(fail(
                        "named argument key given to redis.register_function is not a string",
                    ));
                };
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => {
                        name = Some(as_text(&v).ok_or_else(|| {
                            fail("function_name argument given to redis.register_function must be a string")
                        })?);
                    }
                    "description" => {
                        description = Some(as_text(&v).ok_or_else(|| {
                            fail("description argument given to redis.register_function must be a string")
                        })?);
                    }
                    "callback" => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return Err(fail(
                            "callback argument given to redis.register_function must be a function",
                        )),
                    },
                    "flags" => {
                        let Value::Table(list) = v else {
                            return Err(fail("flags argument to redis.register_function must be a table representing function flags"));
                        };
                        for item in list.sequence_values::<Value>() {
                            let given = as_text(&item?).unwrap_or_default();
                            let Some(flag) = FUNCTION_FLAGS
                                .iter()
                                .find(|f| f.eq_ignore_ascii_case(&given))
                            else {
                                return Err(fail("unknown flag given"));
                            };
                            if !flags.contains(flag) {
                                flags.push(*flag);
                            }
                        }
                    }
                    _ => return Err(fail("unknown argument given to redis.register_function")),
                }
            }
            let name = name
                .ok_or_else(|| fail("redis.register_function must get a function name argument"))?;
            let callback = callback
                .ok_or_else(|| fail("redis.register_function must get a callback argument"))?;
            (name, callback, description, flags)
        }
        [first, second] => {
            let name = as_text(first).ok_or_else(|| {
                fail("first argument to redis.register_function must be a string")
            })?;
            let Value::Function(f) = second else {
                return Err(fail(
                    "second argument to redis.register_function must be a function",
                ));
            };
            (name, f.clone(), None, Vec::new())
        }
        _ => return Err(fail("wrong number of arguments to redis.register_function")),
    };
    if !super::functions::valid_name(&name) {
        // (Redis 7.0 says "Library" here too.)
        return Err(fail("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    let mut flags = flags;
    flags.sort_by_key(|f| FUNCTION_FLAGS.iter().position(|x| x == f));
    Ok(Registered {
        name,
        description,
        flags,
        callback,
    })
}

/// Runs the compiled script with `KEYS`, `ARGV` and `redis.call` / `redis.pcall` bound to
/// `ctx`, until it ends or `stop` is set (SCRIPT KILL, FUNCTION KILL, SHUTDOWN: `busy.rs`).
fn call_script(
    vm: &Vm,
    function: &mlua::Function,
    ctx: &mut Ctx<'_>,
    (keys, argv): (&[Bytes], &[Bytes]),
    read_only: bool,
    (name, stop): (&str, &std::sync::Arc<std::sync::atomic::AtomicU8>),
    invoke: Invoke,
) -> Result<Reply> {
    let lua = &vm.lua;
    let stop = stop.clone();
    lua.set_hook(
        mlua::HookTriggers::new().every_nth_instruction(CLOCK_EVERY_INSTRUCTIONS),
        move |lua, _| {
            if stop.load(Ordering::Acquire) == crate::busy::RUNNING {
                return Ok(mlua::VmState::Continue);
            }
            // From now on every instruction fails, as Redis's kill does: a pcall that caught
            // this error returns into code that fails at once, so the script unwinds.
            lua.set_hook(
                mlua::HookTriggers::new().every_nth_instruction(1),
                |lua, _| Err(script_killed(lua)),
            )?;
            Err(script_killed(lua))
        },
    )
    .map_err(lua_failure)?;
    let ctx = std::cell::RefCell::new(ctx);
    // The chunk name errors carry: a script's, or a function library's.
    let source = match invoke {
        Invoke::Script => "user_script",
        Invoke::Function => "user_function",
    };
    let result = lua.scope(|scope| {
        let globals = lua.globals();
        let (keys, argv) = (strings_table(lua, keys)?, strings_table(lua, argv)?);
        let (as_globals, as_arguments) = match invoke {
            Invoke::Script => (Some((keys, argv)), None),
            Invoke::Function => (None, Some((keys, argv))),
        };
        // A function gets its keys and arguments as parameters: no KEYS or ARGV global.
        let (keys_global, argv_global) = match as_globals {
            Some((k, a)) => (Value::Table(k), Value::Table(a)),
            None => (Value::Nil, Value::Nil),
        };
        globals.raw_set("KEYS", keys_global)?;
        globals.raw_set("ARGV", argv_global)?;
        let redis = &vm.redis;
        // pcall returns a command's error as a table; call raises it, marked and placed at the
        // caller's line (a Rust function, so `return redis.call(...)` keeps the caller's frame,
        // as Redis's C function does).
        let pcall = scope.create_function_mut(|lua, args: MultiValue| {
            let mut ctx = ctx.borrow_mut();
            to_lua(lua, call_command(&mut ctx, args, read_only))
        })?;
        let call = scope.create_function_mut(|lua, args: MultiValue| {
            let reply = call_command(&mut ctx.borrow_mut(), args, read_only);
            if let Reply::Error(e) = &reply {
                let line = lua
                    .inspect_stack(1, |d| d.current_line())
                    .flatten()
                    .unwrap_or(0);
                return Err(mlua::Error::runtime(format!(
                    "{source}:{line}: {CALL_ERROR_MARK}{}",
                    error_text(&format!("-{e}"))
                )));
            }
            to_lua(lua, reply)
        })?;
        redis.raw_set("pcall", pcall)?;
        redis.raw_set("call", call)?;
        let value: Value = match as_arguments {
            Some(parameters) => function.call(parameters)?,
            None => function.call(())?,
        };
        let counted = matches!(&value, Value::Table(t)
            if matches!(t.raw_get::<Value>(ERROR_COUNTED), Ok(Value::Boolean(true))));
        from_lua(&value).map(|reply| (reply, counted))
    });
    lua.remove_hook();
    // A script that stopped the collector (`collectgarbage("stop")`) does not leave it
    // stopped for the next one on this state.
    lua.gc_restart();
    // What the script put in its environment goes with it.
    let leftovers: Vec<Value> = vm
        .env
        .pairs::<Value, Value>()
        .filter_map(|pair| pair.ok().map(|(k, _)| k))
        .collect();
    for k in leftovers {
        vm.env.raw_set(k, Value::Nil).map_err(lua_failure)?;
    }
    let ctx = ctx.into_inner();
    match result {
        Ok((reply, counted)) => {
            ctx.session.error_counted = counted;
            Ok(reply)
        }
        Err(e) => {
            // A redis.call error the script did not catch was counted when its command
            // failed.
            ctx.session.error_counted = lua_error_text(&e).contains(CALL_ERROR_MARK);
            Err(script_error(&e, name))
        }
    }
}

/// The message of a Lua error (a callback's cause's, for errors raised in Rust functions).
fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => match cause.as_ref() {
            mlua::Error::RuntimeError(m) => m.clone(),
            other => other.to_string(),
        },
        mlua::Error::RuntimeError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// `KEYS` or `ARGV`.
fn strings_table(lua: &Lua, items: &[Bytes]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.set(i + 1, lua.create_string(&item[..])?)?;
    }
    Ok(t)
}

/// One `redis.call` / `redis.pcall`: its arguments as a command, run on the script's context.
fn call_command(ctx: &mut Ctx<'_>, args: MultiValue, read_only: bool) -> Reply {
    if args.is_empty() {
        return Reply::Error(
            "ERR Please specify at least one argument for this redis lib call".into(),
        );
    }
    let mut words: Vec<Bytes> = Vec::with_capacity(args.len());
    for v in args.iter() {
        match v {
            Value::String(s) => words.push(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(n) => words.push(Bytes::from(n.to_string())),
            Value::Number(n) => words.push(Bytes::from(crate::num::format_g17(*n))),
            _ => {
                return Reply::Error(
                    "ERR Lua redis lib command arguments must be strings or integers".into(),
                )
            }
        }
    }
    let Some(spec) = super::resolve(&words) else {
        return Reply::Error("ERR Unknown Redis command called from script".into());
    };
    // Redis's scriptCall looks the subcommand up and checks the arity itself, with its own
    // words.
    match super::check_subcommand(spec, &words) {
        Err(Error::UnknownSubcommand { .. }) => {
            return Reply::Error("ERR Unknown Redis command called from script".into())
        }
        Err(_) => {
            return Reply::Error(
                "ERR Wrong number of args calling Redis command from script".into(),
            )
        }
        Ok(()) if !super::arity_fits(spec.spec, words.len()) => {
            return Reply::Error(
                "ERR Wrong number of args calling Redis command from script".into(),
            )
        }
        Ok(()) => {}
    }
    let cluster_reset = spec.name == "cluster" && super::is(&words[1], "RESET");
    if !callable(spec) || cluster_reset {
        return Reply::Error("ERR This Redis command is not allowed from script".into());
    }
    // The script's user is checked as its commands run (Redis's scriptCall), logged as `lua`.
    if let Some((denied, _)) = super::acl_denial(ctx, spec, &words, "lua") {
        return Reply::Error(match denied {
            crate::acl::Denied::Command => {
                "ERR The user executing the script can't run this command or subcommand"
            }
            crate::acl::Denied::Key(_) => {
                "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments"
            }
            crate::acl::Denied::Channel(_) => {
                "ERR The user executing the script can't publish to the channel mentioned in the command"
            }
        }
        .into());
    }
    // Redis counts `may-replicate` commands (PUBLISH, PFCOUNT) as writes here, so that
    // read-only scripts may run during CLIENT PAUSE WRITE.
    if read_only && (spec.props.write || super::MAY_WRITE.contains(&spec.spec.name)) {
        return Reply::Error("ERR Write commands are not allowed from read-only scripts.".into());
    }
    if spec.props.write {
        // From now on SCRIPT KILL refuses (UNKILLABLE), as Redis's write-dirty flag does.
        ctx.shared.running_script.note_write();
    }
    super::execute_resolved(ctx, &words, Some(spec))
}

/// A reply as the Lua value Redis gives a script (RESP2's view of it).
fn to_lua(lua: &Lua, reply: Reply) -> mlua::Result<Value> {
    let status = |key: &str, text: &str| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.set(key, lua.create_string(text)?)?;
        Ok(Value::Table(t))
    };
    let list = |items: Vec<Reply>| -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.into_iter().enumerate() {
            t.set(i + 1, to_lua(lua, item)?)?;
        }
        Ok(Value::Table(t))
    };
    Ok(match reply {
        Reply::Simple(s) => return status("ok", &s),
        Reply::Error(e) => {
            let t = lua.create_table()?;
            t.set("err", lua.create_string(error_text(&format!("-{e}")))?)?;
            // As Redis: a command's error is counted in INFO errorstats once, when the
            // command fails, not again if the script returns it.
            t.set(ERROR_COUNTED, true)?;
            return Ok(Value::Table(t));
        }
        Reply::Int(n) => Value::Number(n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(&b[..])?),
        Reply::Verbatim(t) | Reply::DoubleText(t) => Value::String(lua.create_string(&t)?),
        Reply::Double(d) => Value::String(lua.create_string(crate::num::format_g17(d))?),
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Bool(b) => Value::Number(if b { 1.0 } else { 0.0 }),
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) | Reply::Several(items) => {
            return list(items)
        }
        Reply::Map(pairs) => return list(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
        Reply::Bulks(bulks) => {
            let t = lua.create_table_with_capacity(bulks.len(), 0)?;
            for (i, item) in bulks.items().enumerate() {
                t.set(i + 1, lua.create_string(item)?)?;
            }
            Value::Table(t)
        }
    })
}

/// Deepest nesting of tables a script's return value may have (a table that contains itself
/// would otherwise recurse until the thread's stack overflows and the process dies; Redis stops
/// at its Lua stack limit with the same error).
const REPLY_DEPTH_MAX: usize = 1000;

/// A script's return value as the reply Redis makes of it.
fn from_lua(value: &Value) -> mlua::Result<Reply> {
    reply_of(value, 0)
}

fn reply_of(value: &Value, depth: usize) -> mlua::Result<Reply> {
    if depth > REPLY_DEPTH_MAX {
        return Err(mlua::Error::runtime("reached lua stack limit"));
    }
    Ok(match value {
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(n) => Reply::Int(*n),
        // Lua 5.1 numbers are doubles: Redis truncates them to integers.
        Value::Number(n) => Reply::Int(*n as i64),
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(t) => {
            if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                return Ok(Reply::Error(e.to_string_lossy()));
            }
            if let Ok(Value::String(ok)) = t.raw_get::<Value>("ok") {
                return Ok(Reply::Simple(std::borrow::Cow::Owned(ok.to_string_lossy())));
            }
            let mut items = Vec::new();
            for i in 1.. {
                let v: Value = t.raw_get(i)?;
                if v == Value::Nil {
                    break;
                }
                items.push(reply_of(&v, depth + 1)?);
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    })
}

/// A script that failed, in Redis's words: a command error raised by `redis.call` keeps its
/// own code; any other Lua error becomes `ERR <lua message>`; both end with where it happened.
fn script_error(e: &mlua::Error, name: &str) -> Error {
    let mut text = lua_error_text(e);
    // mlua appends a Lua traceback to runtime errors; Redis's message has none.
    if let Some(at) = text.find("\nstack traceback:") {
        text.truncate(at);
    }
    // A script's chunk is `@user_script`, a function library's `@user_function`.
    let source = if text.contains("user_function:") && !text.contains("user_script:") {
        "user_function"
    } else {
        "user_script"
    };
    let line = text
        .find(&format!("{source}:"))
        .and_then(|at| text[at + source.len() + 1..].split(':').next())
        .and_then(|n| n.parse::<u32>().ok());
    let message = match text.find(CALL_ERROR_MARK) {
        Some(at) => text[at + CALL_ERROR_MARK.len()..].to_string(),
        None => match text.find(LIB_ERROR_MARK) {
            Some(at) => format!("ERR {}", &text[at + LIB_ERROR_MARK.len()..]),
            None => format!("ERR {text}"),
        },
    };
    Error::Coded(match line {
        Some(line) => format!("{message} script: {name}, on @{source}:{line}."),
        None => message,
    })
}

/// An error raised by a library function, placed like Lua's `luaL_error` places it: at the
/// line of the script that called the function.
pub(super) fn raise(lua: &Lua, message: impl std::fmt::Display) -> mlua::Error {
    let line = lua
        .inspect_stack(1, |d| d.current_line())
        .flatten()
        .unwrap_or(0);
    mlua::Error::runtime(format!("user_script:{line}: {message}"))
}

/// Deepest nesting `cjson.encode` and `cjson.decode` accept (lua-cjson's default).
const JSON_DEPTH_MAX: usize = 1000;

/// The `cjson` library: `encode`, `decode`, and `null` (a light userdata that stands for JSON's
/// null in decoded tables and encodes as null).
fn cjson_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = String::new();
            json_encode(&v, 0, &mut out).map_err(|e| raise(lua, e))?;
            Ok(out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, text: mlua::LuaString| {
            let parsed: serde_json::Value = serde_json::from_slice(&text.as_bytes())
                .map_err(|e| raise(lua, format!("cjson.decode: {e}")))?;
            json_to_lua(lua, &parsed, 0).map_err(|e| raise(lua, e))
        })?,
    )?;
    t.set("null", json_null())?;
    Ok(t)
}

fn json_null() -> Value {
    Value::LightUserData(mlua::LightUserData(std::ptr::null_mut()))
}

fn json_to_lua(lua: &Lua, v: &serde_json::Value, depth: usize) -> Result<Value, String> {
    if depth > JSON_DEPTH_MAX {
        return Err("cjson.decode: too many nested data structures".into());
    }
    let lua_err = |e: mlua::Error| e.to_string();
    Ok(match v {
        serde_json::Value::Null => json_null(),
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(lua.create_string(s).map_err(lua_err)?),
        serde_json::Value::Array(items) => {
            let t = lua
                .create_table_with_capacity(items.len(), 0)
                .map_err(lua_err)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, json_to_lua(lua, item, depth + 1)?)
                    .map_err(lua_err)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(fields) => {
            let t = lua
                .create_table_with_capacity(0, fields.len())
                .map_err(lua_err)?;
            for (k, item) in fields {
                t.raw_set(k.as_str(), json_to_lua(lua, item, depth + 1)?)
                    .map_err(lua_err)?;
            }
            Value::Table(t)
        }
    })
}

/// lua-cjson's string escaping: `"`, `\\`, `/`, the short escapes, other control bytes as
/// `\u00XX`; other bytes as they are.
fn json_string(bytes: &[u8], out: &mut String) {
    out.push('"');
    let text = String::from_utf8_lossy(bytes);
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A Lua value as lua-cjson encodes it: numbers with `%.14g`, a table whose keys are all
/// positive integers as an array (holes as null; one more sparse than lua-cjson allows is an
/// error), any other table as an object in the table's own order, an empty table as `{}`.
fn json_encode(v: &Value, depth: usize, out: &mut String) -> Result<(), String> {
    let lua_err = |e: mlua::Error| e.to_string();
    if depth > JSON_DEPTH_MAX {
        return Err("Cannot serialise, excessive nesting (1001)".into());
    }
    match v {
        Value::Nil => out.push_str("null"),
        Value::LightUserData(u) if u.0.is_null() => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(n) => out.push_str(&crate::num::format_g(*n as f64, 14)),
        Value::Number(n) => {
            if !n.is_finite() {
                return Err("Cannot serialise number: must not be NaN or Inf".into());
            }
            out.push_str(&crate::num::format_g(*n, 14));
        }
        Value::String(s) => json_string(&s.as_bytes(), out),
        Value::Table(t) => {
            let mut max = 0usize;
            let mut items = 0usize;
            let mut array = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair.map_err(lua_err)?;
                items += 1;
                let index = match k {
                    Value::Integer(i) => usize::try_from(i).ok().filter(|&i| i >= 1),
                    Value::Number(f) if f.fract() == 0.0 && f >= 1.0 => Some(f as usize),
                    _ => None,
                };
                match index {
                    Some(i) => max = max.max(i),
                    None => array = false,
                }
            }
            if array && items > 0 {
                // lua-cjson: more than twice as many slots as items (and more than 10) is too
                // sparse to write as an array.
                if max > items * 2 && max > 10 {
                    return Err("Cannot serialise table: excessively sparse array".into());
                }
                out.push('[');
                for i in 1..=max {
                    if i > 1 {
                        out.push(',');
                    }
                    json_encode(&t.raw_get::<Value>(i).map_err(lua_err)?, depth + 1, out)?;
                }
                out.push(']');
                return Ok(());
            }
            out.push('{');
            let mut first = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, item) = pair.map_err(lua_err)?;
                if !first {
                    out.push(',');
                }
                first = false;
                match &k {
                    Value::String(s) => json_string(&s.as_bytes(), out),
                    Value::Integer(_) | Value::Number(_) => {
                        let mut key = String::new();
                        json_encode(&k, depth + 1, &mut key)?;
                        json_string(key.as_bytes(), out);
                    }
                    _ => {
                        return Err(
                            "Cannot serialise table: table key must be a number or string".into(),
                        )
                    }
                }
                out.push(':');
                json_encode(&item, depth + 1, out)?;
            }
            out.push('}');
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

/// LuaBitOp's conversion of a number to a 32-bit integer: rounded to the nearest (ties to even,
/// as its `+ 2^52 + 2^51` trick rounds), modulo 2^32, signed.
fn tobit(x: f64) -> i32 {
    if !x.is_finite() {
        return 0;
    }
    x.round_ties_even().rem_euclid(4_294_967_296.0) as u32 as i32
}

/// The `bit` library (LuaBitOp, which Redis bundles): 32-bit operations on Lua numbers.
fn bit_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let fold = |lua: &Lua, op: fn(i32, i32) -> i32| {
        lua.create_function(move |_, (first, rest): (f64, mlua::Variadic<f64>)| {
            Ok(f64::from(
                rest.iter().fold(tobit(first), |acc, &x| op(acc, tobit(x))),
            ))
        })
    };
    t.set("band", fold(lua, |a, b| a & b)?)?;
    t.set("bor", fold(lua, |a, b| a | b)?)?;
    t.set("bxor", fold(lua, |a, b| a ^ b)?)?;
    t.set(
        "tobit",
        lua.create_function(|_, x: f64| Ok(f64::from(tobit(x))))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|_, x: f64| Ok(f64::from(!tobit(x))))?,
    )?;
    t.set(
        "bswap",
        lua.create_function(|_, x: f64| Ok(f64::from(tobit(x).swap_bytes())))?,
    )?;
    let shift = |lua: &Lua, op: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (x, n): (f64, f64)| {
            Ok(f64::from(op(tobit(x), (tobit(n) & 31) as u32)))
        })
    };
    t.set("lshift", shift(lua, |x, n| ((x as u32) << n) as i32)?)?;
    t.set("rshift", shift(lua, |x, n| ((x as u32) >> n) as i32)?)?;
    t.set("arshift", shift(lua, |x, n| x >> n)?)?;
    t.set("rol", shift(lua, |x, n| (x as u32).rotate_left(n) as i32)?)?;
    t.set("ror", shift(lua, |x, n| (x as u32).rotate_right(n) as i32)?)?;
    t.set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| {
            let n = n.map_or(8, tobit);
            let upper = n < 0;
            let digits = n.unsigned_abs().min(8) as usize;
            let value = tobit(x) as u32;
            let masked = if digits < 8 {
                value & ((1u32 << (4 * digits)) - 1)
            } else {
                value
            };
            Ok(if digits == 0 {
                String::new()
            } else if upper {
                format!("{masked:0digits$X}")
            } else {
                format!("{masked:0digits$x}")
            })
        })?,
    )?;
    Ok(t)
}
