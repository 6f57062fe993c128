//! Redis 7 functions: FUNCTION LOAD | LIST | DELETE | FLUSH | STATS | KILL | HELP, FCALL and
//! FCALL_RO, with redis-server 7.0's replies and errors.
//!
//! A library is Lua code whose first line names it (`#!lua name=mylib`) and which registers
//! functions with `redis.register_function`. FUNCTION LOAD runs the code once on a fresh Lua
//! state to check it and learn its functions ([`scripting::load_library`]); the code is kept in
//! the engine under `0xFF 'F' <library name>` (so libraries survive a restart and FLUSHALL, as
//! Redis keeps them in its RDB and AOF), and in memory in the [`Registry`]. Each thread's Lua
//! state loads every library again when the registry has changed since it last did; FCALL then
//! runs the function as EVAL runs a script (`scripting::execute_lua`): under the exec lock held
//! exclusively, its writes one batch, with the keys and arguments as the function's two
//! arguments.
//!
//! FUNCTION DUMP and RESTORE carry the libraries' code in Redis 7.0's payload
//! (`dump::dump_functions`), so libraries move between Redis and Strata both ways.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::scripting::{self, Invoke};
use super::{is, text, Ctx, Spec};
use crate::backend::{prefix_end, KvBackend};
use crate::error::{Error, Result};
use crate::resp::Reply;
use crate::state::lock;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "function", arity: -2, flags: &["noscript"], keys: (0, 0, 0), group: "scripting", summary: "FUNCTION LOAD, LIST, DELETE, FLUSH, STATS, KILL, HELP.", handler: function },
    Spec { name: "fcall", arity: -3, flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], keys: (0, 0, 0), group: "scripting", summary: "Invokes a function.", handler: fcall },
    Spec { name: "fcall_ro", arity: -3, flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], keys: (0, 0, 0), group: "scripting", summary: "Invokes a read-only function.", handler: fcall_ro },
];

/// Engine keys of the stored libraries: this prefix, then the library's name.
pub(crate) const LIBRARY_PREFIX: [u8; 2] = [0xff, b'F'];

/// One function of a library, as FUNCTION LIST shows it.
#[derive(Debug, Clone)]
pub(crate) struct FunctionInfo {
    pub name: String,
    pub description: Option<String>,
    pub flags: Vec<&'static str>,
}

/// A loaded library.
#[derive(Debug, Clone)]
pub(crate) struct Library {
    /// The code as loaded, its first line included (FUNCTION LIST WITHCODE shows it).
    pub code: Bytes,
    /// What follows the first line, its line end included: what the Lua states run.
    pub body: Bytes,
    pub functions: Vec<FunctionInfo>,
}

/// The loaded libraries; `generation` changes with every LOAD, DELETE and FLUSH, so each
/// thread's Lua state knows when to load them again.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub libraries: BTreeMap<String, Library>,
    pub generation: u64,
}

impl Registry {
    /// How many functions the libraries register (FUNCTION STATS, INFO memory).
    pub fn function_count(&self) -> usize {
        self.libraries.values().map(|l| l.functions.len()).sum()
    }

    /// Every library's body.
    pub fn codes(&self) -> impl Iterator<Item = &[u8]> {
        self.libraries.values().map(|l| &l.body[..])
    }

    /// Function `name` (names are case-insensitive, as in Redis).
    fn function(&self, name: &str) -> Option<&FunctionInfo> {
        self.libraries
            .values()
            .flat_map(|l| l.functions.iter())
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// Reads the stored libraries (at start-up). One that no longer loads is left out, with
    /// a warning (it loaded when it was stored; a change of this server could refuse it).
    pub fn read(backend: &dyn KvBackend) -> Result<Registry> {
        let mut stored = Vec::new();
        backend.scan(
            std::ops::Bound::Included(LIBRARY_PREFIX.to_vec()),
            prefix_end(&LIBRARY_PREFIX),
            &mut |_, v| {
                stored.push(Bytes::copy_from_slice(v));
                true
            },
        )?;
        let mut registry = Registry::default();
        for code in stored {
            match check(&code) {
                Ok((name, library)) => {
                    registry.libraries.insert(name, library);
                }
                Err(e) => tracing::warn!("a stored function library was not loaded: {e}"),
            }
        }
        Ok(registry)
    }
}

/// The words of a script's or library's first line, split as Redis's `sdssplitargs` splits
/// them (the inline protocol's splitter); `None` for an unbalanced quote.
pub(super) fn first_line_words(line: &[u8]) -> Option<Vec<String>> {
    crate::resp::parse::split_args(line).map(|words| {
        words
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect()
    })
}

/// Whether `name` may name a library or a function: letters, digits and `_`, at least one.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The library `code` is, checked as FUNCTION LOAD checks it (before looking at the libraries
/// already loaded): its first line, its name, its engine, and its code run once.
fn check(code: &Bytes) -> Result<(String, Library)> {
    let (name, body) = metadata(code)?;
    let functions = scripting::check_library(&body)?;
    Ok((
        name,
        Library {
            code: code.clone(),
            body,
            functions,
        },
    ))
}

/// A library's name and the code after its first line, with Redis's errors for the line.
fn metadata(code: &Bytes) -> Result<(String, Bytes)> {
    if !code.starts_with(b"#!") {
        return Err(Error::command("Missing library metadata"));
    }
    let Some(line_end) = code.iter().position(|&b| b == b'\n') else {
        return Err(Error::command("Invalid library metadata"));
    };
    let parts = first_line_words(&code[..line_end])
        .filter(|p| !p.is_empty())
        .ok_or_else(|| Error::command("Invalid library metadata"))?;
    let mut parts = parts.into_iter();
    let engine = parts
        .next()
        .map(|p| p.get(2..).unwrap_or_default().to_string())
        .ok_or_else(|| Error::command("Invalid library metadata"))?;
    let mut name = None;
    for part in parts {
        if part.len() >= 5 && part.is_char_boundary(5) && part[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(Error::command(
                    "Invalid metadata value, name argument was given multiple times",
                ));
            }
            name = Some(part[5..].to_string());
            continue;
        }
        return Err(Error::command(format!(
            "Invalid metadata value given: {part}"
        )));
    }
    let name = name.ok_or_else(|| Error::command("Library name was not given"))?;
    if !valid_name(&name) {
        return Err(Error::command("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(Error::command(format!("Engine '{engine}' not found")));
    }
    Ok((name, code.slice(line_end..)))
}

fn function(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = text(&args[1]).to_ascii_lowercase();
    let wrong_arity = || Error::WrongArity(format!("function|{sub}"));
    // What FLUSH and RESTORE answer for too many arguments (Redis's
    // `addReplySubcommandSyntaxError`).
    let syntax = || super::admin::sub_syntax("FUNCTION", args);
    match sub.as_str() {
        "load" => {
            if args.len() < 3 {
                return Err(wrong_arity());
            }
            let mut replace = false;
            let mut at = 2;
            while at < args.len() - 1 {
                if is(&args[at], "REPLACE") {
                    replace = true;
                    at += 1;
                    continue;
                }
                return Err(Error::command(format!(
                    "Unknown option given: {}",
                    text(&args[at])
                )));
            }
            load(ctx, &args[at], replace)
        }
        "list" => list(ctx, args),
        "delete" => {
            if args.len() != 3 {
                return Err(wrong_arity());
            }
            let name = text(&args[2]);
            let mut registry = lock(&ctx.shared.functions);
            if !registry.libraries.contains_key(&name) {
                return Err(Error::command("Library not found"));
            }
            ctx.db().delete(&library_key(&name))?;
            registry.libraries.remove(&name);
            registry.generation += 1;
            ctx.shared.note_writes(1);
            Ok(Reply::ok())
        }
        "flush" => {
            match args.len() {
                2 => {}
                3 if is(&args[2], "ASYNC") || is(&args[2], "SYNC") => {}
                3 => {
                    return Err(Error::command(
                        "FUNCTION FLUSH only supports SYNC|ASYNC option",
                    ))
                }
                _ => return Err(syntax()),
            }
            let mut registry = lock(&ctx.shared.functions);
            let ops = registry
                .libraries
                .keys()
                .map(|name| crate::backend::BatchOp::Delete(library_key(name)))
                .collect::<Vec<_>>();
            if !ops.is_empty() {
                ctx.db().write(ops)?;
            }
            registry.libraries.clear();
            registry.generation += 1;
            ctx.shared.note_writes(1);
            Ok(Reply::ok())
        }
        "stats" => {
            if args.len() != 2 {
                return Err(wrong_arity());
            }
            let registry = lock(&ctx.shared.functions);
            let functions = registry.function_count();
            if ctx.shared.running_script.busy() == Some(true) {
                // A script run by EVAL: Redis points to SCRIPT KILL.
                return Err(crate::busy::busy_error(true));
            }
            let running = match ctx.shared.running_script.function_stats() {
                None => Reply::Nil,
                Some((name, command, ran)) => Reply::Map(vec![
                    (Reply::bulk("name"), Reply::Bulk(Bytes::from(name))),
                    (
                        Reply::bulk("command"),
                        Reply::Array(command.into_iter().map(Reply::Bulk).collect()),
                    ),
                    (
                        Reply::bulk("duration_ms"),
                        Reply::Int(i64::try_from(ran.as_millis()).unwrap_or(i64::MAX)),
                    ),
                ]),
            };
            Ok(Reply::Map(vec![
                (Reply::bulk("running_script"), running),
                (
                    Reply::bulk("engines"),
                    Reply::Map(vec![(
                        Reply::bulk("LUA"),
                        Reply::Map(vec![
                            (
                                Reply::bulk("libraries_count"),
                                Reply::Int(registry.libraries.len() as i64),
                            ),
                            (Reply::bulk("functions_count"), Reply::Int(functions as i64)),
                        ]),
                    )]),
                ),
            ]))
        }
        "kill" => {
            if args.len() != 2 {
                return Err(wrong_arity());
            }
            match ctx.shared.running_script.kill(false) {
                Ok(()) => Ok(Reply::ok()),
                Err(refused) => Err(refused.into_error()),
            }
        }
        "dump" => {
            if args.len() != 2 {
                return Err(wrong_arity());
            }
            let registry = lock(&ctx.shared.functions);
            Ok(Reply::Bulk(Bytes::from(crate::dump::dump_functions(
                registry.libraries.values().map(|l| &l.code[..]),
            ))))
        }
        "restore" => {
            if args.len() < 3 {
                return Err(wrong_arity());
            }
            if args.len() > 4 {
                return Err(syntax());
            }
            restore(ctx, &args[2], args.get(3))
        }
        "help" if args.len() == 2 => Ok(super::admin::help(&[
                "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LOAD [REPLACE] <FUNCTION CODE>",
                "    Create a new library with the given library name and code.",
                "DELETE <LIBRARY NAME>",
                "    Delete the given library.",
                "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
                "    Return general information on all the libraries:",
                "    * Library name",
                "    * The engine used to run the Library",
                "    * Library description",
                "    * Functions list",
                "    * Library code (if WITHCODE is given)",
                "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
                "STATS",
                "    Return information about the current function running:",
                "    * Function name",
                "    * Command used to run the function",
                "    * Duration in MS that the function is running",
                "    If no function is running, return nil",
                "    In addition, returns a list of available engines.",
                "KILL",
                "    Kill the current running function.",
                "FLUSH [ASYNC|SYNC]",
                "    Delete all the libraries.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the libraries.",
                "    * SYNC: Synchronously flush the libraries.",
                "DUMP",
                "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
                "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
                "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
                "    control how to handle existing libraries (default APPEND):",
                "    * FLUSH: delete all existing libraries.",
                "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
                "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
                "      libraries with the new libraries (notice that even on this option there is a chance of failure",
                "      in case of functions name collision with another library).",
                "HELP",
                "    Prints this help.",
        ])),
        _ => Err(Error::UnknownSubcommand {
            container: "FUNCTION",
            sub: text(&args[1]),
        }),
    }
}

/// FUNCTION RESTORE payload [FLUSH | APPEND | REPLACE]: every library of the payload is
/// checked before any is applied; APPEND (the default) refuses a library name already loaded,
/// REPLACE replaces it, FLUSH first deletes every library.
fn restore(ctx: &Ctx<'_>, payload: &[u8], policy: Option<&Bytes>) -> Result<Reply> {
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy = match policy {
        None => Policy::Append,
        Some(p) if is(p, "FLUSH") => Policy::Flush,
        Some(p) if is(p, "APPEND") => Policy::Append,
        Some(p) if is(p, "REPLACE") => Policy::Replace,
        Some(_) => {
            return Err(Error::command(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    let codes = crate::dump::restore_functions(payload)?;
    let mut incoming = BTreeMap::new();
    for code in codes {
        let (name, library) = check(&Bytes::from(code))?;
        if incoming.insert(name.clone(), library).is_some() {
            return Err(Error::command(format!("Library '{name}' already exists")));
        }
    }
    let mut registry = lock(&ctx.shared.functions);
    let mut next = if policy == Policy::Flush {
        BTreeMap::new()
    } else {
        registry.libraries.clone()
    };
    for (name, library) in incoming {
        if policy == Policy::Append && next.contains_key(&name) {
            return Err(Error::command(format!("Library {name} already exists")));
        }
        next.insert(name, library);
    }
    // No function name twice across the libraries.
    let mut seen = std::collections::HashSet::new();
    for f in next.values().flat_map(|l| l.functions.iter()) {
        if !seen.insert(f.name.to_ascii_lowercase()) {
            return Err(Error::command(format!(
                "Function {} already exists",
                f.name
            )));
        }
    }
    let mut ops: Vec<crate::backend::BatchOp> = registry
        .libraries
        .keys()
        .filter(|name| !next.contains_key(*name))
        .map(|name| crate::backend::BatchOp::Delete(library_key(name)))
        .collect();
    ops.extend(
        next.iter()
            .map(|(name, l)| crate::backend::BatchOp::Put(library_key(name), l.code.to_vec())),
    );
    if !ops.is_empty() {
        ctx.db().write(ops)?;
    }
    registry.libraries = next;
    registry.generation += 1;
    ctx.shared.note_writes(1);
    Ok(Reply::ok())
}

fn library_key(name: &str) -> Vec<u8> {
    let mut key = LIBRARY_PREFIX.to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

/// FUNCTION LOAD: checks the library, then its place among the loaded ones, stores it.
fn load(ctx: &Ctx<'_>, code: &Bytes, replace: bool) -> Result<Reply> {
    // Redis's order: the first line and the name, the engine, a library of that name, the
    // code run, functions registered at all, functions of other libraries.
    let (name, body) = metadata(code)?;
    if !replace && lock(&ctx.shared.functions).libraries.contains_key(&name) {
        return Err(Error::command(format!("Library '{name}' already exists")));
    }
    let library = Library {
        code: code.clone(),
        functions: scripting::check_library(&body)?,
        body,
    };
    if library.functions.is_empty() {
        return Err(Error::command("No functions registered"));
    }
    let mut registry = lock(&ctx.shared.functions);
    if !replace && registry.libraries.contains_key(&name) {
        return Err(Error::command(format!("Library '{name}' already exists")));
    }
    for f in &library.functions {
        let elsewhere = registry.libraries.iter().any(|(other, l)| {
            *other != name
                && l.functions
                    .iter()
                    .any(|g| g.name.eq_ignore_ascii_case(&f.name))
        });
        if elsewhere {
            return Err(Error::command(format!(
                "Function {} already exists",
                f.name
            )));
        }
    }
    ctx.db().put(&library_key(&name), code)?;
    registry.libraries.insert(name.clone(), library);
    registry.generation += 1;
    ctx.shared.note_writes(1);
    Ok(Reply::Bulk(Bytes::from(name)))
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn list(ctx: &Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut i = 2;
    while i < args.len() {
        if !with_code && is(&args[i], "WITHCODE") {
            with_code = true;
        } else if pattern.is_none() && is(&args[i], "LIBRARYNAME") {
            let Some(p) = args.get(i + 1) else {
                return Err(Error::command("library name argument was not given"));
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Err(Error::command(format!(
                "Unknown argument {}",
                text(&args[i])
            )));
        }
        i += 1;
    }
    let registry = lock(&ctx.shared.functions);
    let mut out = Vec::new();
    for (name, library) in &registry.libraries {
        if pattern.is_some_and(|p| !crate::glob::matches(p, name.as_bytes(), false)) {
            continue;
        }
        let functions = library
            .functions
            .iter()
            .map(|f| {
                Reply::Map(vec![
                    (
                        Reply::bulk("name"),
                        Reply::Bulk(Bytes::from(f.name.clone())),
                    ),
                    (
                        Reply::bulk("description"),
                        f.description
                            .as_ref()
                            .map_or(Reply::Nil, |d| Reply::Bulk(Bytes::from(d.clone()))),
                    ),
                    (
                        Reply::bulk("flags"),
                        Reply::Set(
                            f.flags
                                .iter()
                                .map(|s| Reply::Simple(std::borrow::Cow::Borrowed(s)))
                                .collect(),
                        ),
                    ),
                ])
            })
            .collect();
        let mut fields = vec![
            (
                Reply::bulk("library_name"),
                Reply::Bulk(Bytes::from(name.clone())),
            ),
            (Reply::bulk("engine"), Reply::bulk("LUA")),
            (Reply::bulk("functions"), Reply::Array(functions)),
        ];
        if with_code {
            fields.push((
                Reply::bulk("library_code"),
                Reply::Bulk(library.code.clone()),
            ));
        }
        out.push(Reply::Map(fields));
    }
    Ok(Reply::Array(out))
}

/// Whether FCALL of function `name` may write, for CLIENT PAUSE WRITE: unless its flags say
/// `no-writes`. An unknown function may (Redis holds it; it answers "Function not found" once
/// the pause ends).
pub(crate) fn may_write(shared: &crate::state::Shared, name: &Bytes) -> bool {
    lock(&shared.functions)
        .function(&text(name))
        .is_none_or(|f| !f.flags.contains(&"no-writes"))
}

fn fcall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    call(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    call(ctx, args, true)
}

/// FCALL and FCALL_RO: Redis's checks in its order, then the function run as a script.
fn call(ctx: &mut Ctx<'_>, args: &[Bytes], ro: bool) -> Result<Reply> {
    let name = text(&args[1]);
    let flags = {
        let registry = lock(&ctx.shared.functions);
        registry
            .function(&name)
            .map(|f| f.flags.clone())
            .ok_or_else(|| Error::command("Function not found"))?
    };
    let numkeys = crate::num::parse_i64(&args[2])
        .ok_or_else(|| Error::command("Bad number of keys provided"))?;
    if numkeys > args.len() as i64 - 3 {
        return Err(Error::command(
            "Number of keys can't be greater than number of args",
        ));
    }
    let numkeys =
        usize::try_from(numkeys).map_err(|_| Error::command("Number of keys can't be negative"))?;
    if ctx.session.cluster && flags.contains(&"no-cluster") {
        return Err(Error::command(
            "Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    let no_writes = flags.contains(&"no-writes");
    if ro && !no_writes {
        return Err(Error::command(
            "Can not execute a script with write flag using *_ro command.",
        ));
    }
    let shared = ctx.shared;
    scripting::execute_lua(
        ctx,
        args,
        numkeys,
        &name,
        ro || no_writes,
        Invoke::Function,
        |vm| vm.library_function(&lock(&shared.functions), &name),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::MemoryBackend;

    /// A stored library that no longer loads (damaged code, a name that is not one) is left out
    /// at start-up and the others load; the server starts either way.
    #[test]
    fn start_up_skips_a_stored_library_that_does_not_load() {
        let store = MemoryBackend::new();
        let good = "#!lua name=good\nredis.register_function('f', function() return 1 end)";
        store.put(&library_key("good"), good.as_bytes()).unwrap();
        store
            .put(
                &library_key("bad"),
                b"#!lua name=bad\nredis.register_function(",
            )
            .unwrap();
        store.put(&library_key("noname"), b"no shebang").unwrap();
        let registry = Registry::read(&store).unwrap();
        assert_eq!(registry.libraries.keys().collect::<Vec<_>>(), vec!["good"]);
        assert_eq!(registry.function("F").map(|f| f.name.as_str()), Some("f"));
    }
}
