//! The administration commands a Redis deployment's tools send, answered as a standalone
//! redis-server 7 with its default settings answers them, so that monitoring, client libraries
//! and operations scripts get the replies they expect instead of "unknown command":
//! - ACL: the users of `acl.rs` (SETUSER, DELUSER, GETUSER, LIST, USERS, WHOAMI, DRYRUN, LOG,
//!   CAT, GENPASS; the default user's password is `requirepass`); no ACL file, so LOAD and
//!   SAVE are refused as Redis refuses them without one;
//! - LATENCY: the latency monitor is off, as it is by default (`latency-monitor-threshold 0`);
//!   HISTOGRAM reports each command's run times (kept for every command, as Redis keeps them);
//! - MODULE: none loaded, loading refused as `enable-module-command no` refuses it;
//! - DEBUG: refused as `enable-debug-command no` refuses it;
//! - FAILOVER, REPLICAOF, SLAVEOF: a primary without replicas (REPLICAOF NO ONE is accepted,
//!   replicating from another server is not offered);
//! - BGREWRITEAOF: the write-ahead logs are cut by flushing the memtables, as BGSAVE does.

use std::borrow::Cow;

use bytes::Bytes;

use super::{is, text, Ctx, Spec};
use crate::error::{Error, Result};
use crate::resp::Reply;

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const CONTAINER: &[&str] = &["noscript", "loading", "stale"];

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "acl", arity: -2, flags: CONTAINER, keys: (0, 0, 0), group: "server", summary: "ACL WHOAMI, USERS, LIST, GETUSER, CAT, DRYRUN, GENPASS, LOG, DELUSER, HELP.", handler: acl },
    Spec { name: "latency", arity: -2, flags: CONTAINER, keys: (0, 0, 0), group: "server", summary: "LATENCY HISTOGRAM, LATEST, HISTORY, RESET, GRAPH, DOCTOR, HELP (the latency monitor is off).", handler: latency },
    Spec { name: "module", arity: -2, flags: CONTAINER, keys: (0, 0, 0), group: "server", summary: "MODULE LIST, HELP (no modules; loading is refused).", handler: module },
    Spec { name: "debug", arity: -2, flags: ADMIN, keys: (0, 0, 0), group: "server", summary: "Refused, as redis-server refuses it by default.", handler: debug },
    Spec { name: "failover", arity: -1, flags: &["admin", "noscript", "stale"], keys: (0, 0, 0), group: "server", summary: "Refused: this server has no replicas.", handler: failover },
    Spec { name: "replicaof", arity: 3, flags: &["admin", "noscript", "stale", "no_async_loading"], keys: (0, 0, 0), group: "server", summary: "REPLICAOF NO ONE: this server is a primary.", handler: replicaof },
    Spec { name: "slaveof", arity: 3, flags: &["admin", "noscript", "stale", "no_async_loading"], keys: (0, 0, 0), group: "server", summary: "SLAVEOF NO ONE: this server is a primary.", handler: replicaof },
    Spec { name: "bgrewriteaof", arity: 1, flags: &["admin", "noscript", "no_async_loading"], keys: (0, 0, 0), group: "server", summary: "Flushes the memtables in the background, so the write-ahead logs can be cut.", handler: bgrewriteaof },
];

/// Redis 7's ACL categories, in the order ACL CAT lists them.
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// A HELP reply: its lines as simple strings, as Redis gives them.
pub(crate) fn help(lines: &[&'static str]) -> Reply {
    Reply::Array(
        lines
            .iter()
            .map(|l| Reply::Simple(Cow::Borrowed(l)))
            .collect(),
    )
}

/// Redis's reply to a known subcommand given the wrong number of arguments, for subcommands
/// whose arity the handler checks (Redis 7 words it so for them).
pub(crate) fn sub_syntax(container: &str, args: &[Bytes]) -> Error {
    Error::command(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {container} HELP.",
        crate::error::shown_arg(&args[1], crate::error::SHOWN_ARG_BYTES_MAX)
    ))
}

fn unknown_sub(container: &'static str, args: &[Bytes]) -> Error {
    Error::UnknownSubcommand {
        container,
        sub: text(&args[1]),
    }
}

/// Checks a subcommand's Redis arity (`n` exactly, `-n` at least).
fn arity(args: &[Bytes], container: &str, sub: &str, n: i64) -> Result<()> {
    let have = args.len() as i64;
    if (n > 0 && have != n) || (n < 0 && have < -n) {
        return Err(Error::WrongArity(format!("{container}|{sub}")));
    }
    Ok(())
}

/// Closes the connections `which` picks (CLIENT KILL, ACL DELUSER, ACL LOAD, revoked
/// channels): another's at once, this one's after its reply. One already closing is not
/// picked again. Returns how many it closed.
pub(crate) fn close_connections(
    ctx: &mut Ctx<'_>,
    which: impl Fn(u64, &crate::state::ClientEntry) -> bool,
) -> i64 {
    let me = ctx.session.id;
    let mut close_me = false;
    let mut closed = 0;
    for (id, e) in crate::state::lock(&ctx.shared.clients).iter() {
        if e.control.closing() || !which(*id, e) {
            continue;
        }
        closed += 1;
        if *id == me {
            close_me = true;
        } else {
            e.control.close();
        }
    }
    if close_me {
        ctx.session.after_reply = crate::state::AfterReply::Close;
    }
    closed
}

/// After ACL SETUSER: the connections of `user` that listen to a channel or pattern it may no
/// longer use are closed, as Redis closes them (`ACLKillPubsubClientsIfNeeded`).
fn close_revoked_subscribers(ctx: &mut Ctx<'_>, user: &Bytes) {
    let Some(rules) = ctx.shared.acl.user(user) else {
        return;
    };
    if rules.is_unrestricted() {
        return;
    }
    let theirs: Vec<u64> = crate::state::lock(&ctx.shared.clients)
        .iter()
        .filter(|(_, e)| e.user == *user)
        .map(|(id, _)| *id)
        .collect();
    // Subscriptions are read outside the clients' lock.
    let revoked: Vec<u64> = theirs
        .into_iter()
        .filter(|&id| {
            let (channels, patterns) = ctx.shared.pubsub.subscriptions_of(id);
            let listened: Vec<(Bytes, bool)> = channels
                .into_iter()
                .map(|(c, _)| (c, false))
                .chain(patterns.into_iter().map(|p| (p, true)))
                .collect();
            let request = crate::acl::Request {
                full_name: String::new(),
                name: "",
                args: &[],
                always_allowed: true,
                keys: Vec::new(),
                channels: listened,
            };
            !request.channels.is_empty() && rules.check(&request).is_err()
        })
        .collect();
    close_connections(ctx, |id, _| revoked.contains(&id));
}

/// Adds an ACL LOG entry for a refusal of this connection's (`reason`: `auth`, `command`,
/// `key` or `channel`), at the top level.
pub(crate) fn log_denial(ctx: &Ctx<'_>, reason: &'static str, object: Bytes, username: Bytes) {
    log_denial_in(ctx, reason, "toplevel", object, username);
}

/// [`log_denial`] in a given context (`toplevel`, `multi`, `lua`).
pub(crate) fn log_denial_in(
    ctx: &Ctx<'_>,
    reason: &'static str,
    context: &'static str,
    object: Bytes,
    username: Bytes,
) {
    let now = crate::keyspace::now_ms();
    ctx.shared.acl.log(crate::acl::LogEntry {
        id: 0,
        count: 1,
        reason,
        context,
        object,
        username,
        created_ms: now,
        updated_ms: now,
        client_info: super::connection::own_client_line(ctx),
    });
}

/// Whether `name` (lowercase, without `@`) is an ACL category.
pub(crate) fn is_category(name: &str) -> bool {
    CATEGORIES.contains(&name)
}

/// A command's ACL categories (without `@`): Redis's where Redis has the command, otherwise
/// those its group and flags imply, in Redis's order.
pub(crate) fn categories(spec: &Spec) -> Vec<String> {
    if let Some(meta) = super::meta::lookup(spec.name) {
        return meta.categories.iter().map(|c| c.to_string()).collect();
    }
    CATEGORIES
        .iter()
        .filter(|c| implied_category(spec, c))
        .map(|c| c.to_string())
        .collect()
}

/// Whether `spec` is in `category` (ACL CAT, COMMAND LIST FILTERBY ACLCAT).
pub(crate) fn in_category(spec: &Spec, category: &str) -> bool {
    match super::meta::lookup(spec.name) {
        Some(meta) => meta.categories.contains(&category),
        None => implied_category(spec, category),
    }
}

/// The categories of a command Redis does not have (JSON.*, this server's own), from its group
/// and flags as Redis's `setImplicitACLCategories` derives them.
fn implied_category(spec: &Spec, category: &str) -> bool {
    let has = |f: &str| spec.flags.contains(&f);
    match category {
        "keyspace" => spec.group == "generic",
        "read" => has("readonly"),
        "write" => has("write"),
        "set" | "list" | "hash" | "string" | "bitmap" | "hyperloglog" | "geo" | "stream"
        | "pubsub" | "connection" | "scripting" => spec.group == category,
        "transaction" => spec.group == "transactions",
        "sortedset" => spec.group == "sorted_set",
        "admin" | "dangerous" => has("admin"),
        "fast" => has("fast"),
        "slow" => !has("fast"),
        "blocking" => has("blocking"),
        _ => false,
    }
}

fn acl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = text(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "whoami" => {
            arity(args, "acl", "whoami", 2)?;
            Ok(Reply::Bulk(ctx.session.user.clone()))
        }
        "users" => {
            arity(args, "acl", "users", 2)?;
            Ok(Reply::Array(
                ctx.shared
                    .acl
                    .users()
                    .iter()
                    .map(|u| Reply::Bulk(u.name.clone()))
                    .collect(),
            ))
        }
        "list" => {
            arity(args, "acl", "list", 2)?;
            Ok(Reply::Array(
                ctx.shared
                    .acl
                    .users()
                    .iter()
                    .map(|u| Reply::text(u.describe()))
                    .collect(),
            ))
        }
        "getuser" => {
            arity(args, "acl", "getuser", 3)?;
            let Some(user) = ctx.shared.acl.user(&args[2]) else {
                return Ok(Reply::Nil);
            };
            let d = user.details();
            let bulk = |t: String| Reply::Bulk(Bytes::from(t));
            let selectors = d
                .selectors
                .into_iter()
                .map(|[commands, keys, channels]| {
                    Reply::Map(vec![
                        (Reply::bulk("commands"), bulk(commands)),
                        (Reply::bulk("keys"), bulk(keys)),
                        (Reply::bulk("channels"), bulk(channels)),
                    ])
                })
                .collect();
            Ok(Reply::Map(vec![
                (
                    Reply::bulk("flags"),
                    Reply::Set(d.flags.into_iter().map(Reply::bulk).collect()),
                ),
                (
                    Reply::bulk("passwords"),
                    Reply::Array(d.passwords.into_iter().map(bulk).collect()),
                ),
                (Reply::bulk("commands"), bulk(d.commands)),
                (Reply::bulk("keys"), bulk(d.keys)),
                (Reply::bulk("channels"), bulk(d.channels)),
                (Reply::bulk("selectors"), Reply::Array(selectors)),
            ]))
        }
        "cat" => match args.len() {
            2 => Ok(Reply::Array(
                CATEGORIES.iter().map(|c| Reply::bulk(*c)).collect(),
            )),
            3 => {
                let category = text(&args[2]).to_ascii_lowercase();
                if !CATEGORIES.contains(&category.as_str()) {
                    return Err(Error::command(format!(
                        "Unknown category '{}'",
                        text(&args[2])
                    )));
                }
                // Commands, then subcommands (`function|list`) by their own categories.
                let subcommands = super::subcommand_names().filter(|name| {
                    super::meta::lookup(name)
                        .is_some_and(|m| m.categories.contains(&category.as_str()))
                });
                Ok(Reply::Array(
                    super::table()
                        .filter(|s| in_category(s, &category))
                        .map(|s| s.name)
                        .chain(subcommands)
                        .map(Reply::bulk)
                        .collect(),
                ))
            }
            _ => Err(sub_syntax("ACL", args)),
        },
        "dryrun" => {
            arity(args, "acl", "dryrun", -4)?;
            let Some(user) = ctx.shared.acl.user(&args[2]) else {
                return Err(Error::command(format!(
                    "User '{}' not found",
                    text(&args[2])
                )));
            };
            let Some(command) = super::lookup(&args[3]) else {
                return Err(Error::command(format!(
                    "Command '{}' not found",
                    text(&args[3])
                )));
            };
            let spec = command.spec;
            let (n, want) = (args.len() as i64 - 3, i64::from(spec.arity));
            if (want > 0 && n != want) || (want < 0 && n < -want) {
                return Err(Error::WrongArity(spec.name.to_string()));
            }
            let request = super::acl_request(command, &args[3..]);
            Ok(match user.check(&request) {
                Ok(()) => Reply::ok(),
                Err(crate::acl::Denied::Command) => Reply::text(format!(
                    "This user has no permissions to run the '{}' command",
                    request.full_name
                )),
                Err(crate::acl::Denied::Key(k)) => Reply::text(format!(
                    "This user has no permissions to access the '{}' key",
                    String::from_utf8_lossy(&k)
                )),
                Err(crate::acl::Denied::Channel(c)) => Reply::text(format!(
                    "This user has no permissions to access the '{}' channel",
                    String::from_utf8_lossy(&c)
                )),
            })
        }
        "genpass" => {
            let bits = match args.len() {
                2 => 256,
                3 => {
                    let n = crate::num::parse_i64(&args[2]).ok_or(Error::NotInteger)?;
                    if !(1..=4096).contains(&n) {
                        return Err(Error::command("ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"));
                    }
                    n as usize
                }
                _ => return Err(sub_syntax("ACL", args)),
            };
            use rand::RngCore;
            let chars = bits.div_ceil(4);
            let mut bytes = vec![0u8; chars.div_ceil(2)];
            rand::rngs::OsRng.fill_bytes(&mut bytes);
            let mut hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            hex.truncate(chars);
            Ok(Reply::text(hex))
        }
        "log" => {
            let count = match args.len() {
                2 => 10,
                3 if is(&args[2], "RESET") => {
                    ctx.shared.acl.reset_log();
                    return Ok(Reply::ok());
                }
                3 => {
                    let n = crate::num::parse_i64(&args[2]).ok_or(Error::NotInteger)?;
                    usize::try_from(n).unwrap_or(0)
                }
                _ => return Err(sub_syntax("ACL", args)),
            };
            let now = crate::keyspace::now_ms();
            Ok(Reply::Array(
                ctx.shared
                    .acl
                    .log_entries(count)
                    .into_iter()
                    .map(|e| {
                        let age = now.saturating_sub(e.created_ms) as f64 / 1000.0;
                        let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
                        Reply::Map(vec![
                            (Reply::bulk("count"), int(e.count)),
                            (Reply::bulk("reason"), Reply::bulk(e.reason)),
                            (Reply::bulk("context"), Reply::bulk(e.context)),
                            (Reply::bulk("object"), Reply::Bulk(e.object)),
                            (Reply::bulk("username"), Reply::Bulk(e.username)),
                            (Reply::bulk("age-seconds"), Reply::Double(age)),
                            (
                                Reply::bulk("client-info"),
                                Reply::Bulk(Bytes::from(e.client_info.trim_end().to_string())),
                            ),
                            (Reply::bulk("entry-id"), int(e.id)),
                            (Reply::bulk("timestamp-created"), int(e.created_ms)),
                            (Reply::bulk("timestamp-last-updated"), int(e.updated_ms)),
                        ])
                    })
                    .collect(),
            ))
        }
        "deluser" => {
            arity(args, "acl", "deluser", -3)?;
            let removed = ctx.shared.acl.delete_users(&args[2..])?;
            // As in Redis: the connections of a removed user are closed.
            close_connections(ctx, |_, e| args[2..].contains(&e.user));
            Ok(Reply::Int(i64::try_from(removed).unwrap_or(i64::MAX)))
        }
        "setuser" => {
            arity(args, "acl", "setuser", -3)?;
            ctx.shared.acl.set_user(&args[2], &args[3..])?;
            close_revoked_subscribers(ctx, &args[2]);
            Ok(Reply::ok())
        }
        "load" | "save" if ctx.shared.config().aclfile.is_some() => {
            arity(args, "acl", &sub, 2)?;
            let path = ctx.shared.config().aclfile.unwrap_or_default();
            if sub == "save" {
                ctx.shared.acl.save_file(&strata::vfs::RealFs, &path)?;
                return Ok(Reply::ok());
            }
            ctx.shared.acl.load_file(&strata::vfs::RealFs, &path)?;
            // Connections of users the file no longer has are closed.
            let acl = &ctx.shared.acl;
            close_connections(ctx, |_, e| acl.user(&e.user).is_none());
            Ok(Reply::ok())
        }
        "load" | "save" => {
            arity(args, "acl", &sub, 2)?;
            Err(Error::command("This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."))
        }
        "help" => {
            arity(args, "acl", "help", 2)?;
            Ok(help(&[
                "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CAT [<category>]",
                "    List all commands that belong to <category>, or all command categories",
                "    when no category is specified.",
                "DELUSER <username> [<username> ...]",
                "    Delete a list of users.",
                "DRYRUN <username> <command> [<arg> ...]",
                "    Returns whether the user can execute the given command without executing the command.",
                "GETUSER <username>",
                "    Get the user's details.",
                "GENPASS [<bits>]",
                "    Generate a secure 256-bit user password. The optional `bits` argument can",
                "    be used to specify a different size.",
                "LIST",
                "    Show users details in config file format.",
                "LOAD",
                "    Reload users from the ACL file.",
                "LOG [<count> | RESET]",
                "    Show the ACL log entries.",
                "SAVE",
                "    Save the current config to the ACL file.",
                "SETUSER <username> <attribute> [<attribute> ...]",
                "    Create or modify a user with the specified attributes.",
                "USERS",
                "    List all the registered usernames.",
                "WHOAMI",
                "    Return the current connection username.",
                "HELP",
                "    Prints this help.",
            ]))
        }
        _ => Err(unknown_sub("ACL", args)),
    }
}

fn latency(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = text(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "histogram" => Ok(latency_histogram(ctx, &args[2..])),
        "latest" => {
            arity(args, "latency", "latest", 2)?;
            Ok(Reply::Array(vec![]))
        }
        "history" => {
            arity(args, "latency", "history", 3)?;
            Ok(Reply::Array(vec![]))
        }
        "reset" => Ok(Reply::Int(0)),
        "graph" => {
            arity(args, "latency", "graph", 3)?;
            Err(Error::command(format!(
                "No samples available for event '{}'",
                text(&args[2])
            )))
        }
        "doctor" => {
            arity(args, "latency", "doctor", 2)?;
            Ok(Reply::Verbatim("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".into()))
        }
        "help" => {
            arity(args, "latency", "help", 2)?;
            Ok(help(&[
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                "    If no commands are specified then all histograms are replied.",
                "HELP",
                "    Prints this help.",
            ]))
        }
        _ => Err(unknown_sub("LATENCY", args)),
    }
}

/// LATENCY HISTOGRAM [command ...]: for each command named (all without names) that ran,
/// its calls and the runs that took at most each power of two of microseconds (commands
/// counted per subcommand, and names that are no command, are left out, as Redis leaves out
/// the latter).
fn latency_histogram(ctx: &Ctx<'_>, names: &[Bytes]) -> Reply {
    let stats = &ctx.shared.command_stats;
    let chosen: Vec<&'static str> = if names.is_empty() {
        stats.called()
    } else {
        let mut chosen = Vec::new();
        for n in names {
            if let Some(c) = super::lookup(n) {
                if !chosen.contains(&c.spec.name) {
                    chosen.push(c.spec.name);
                }
            }
        }
        chosen
    };
    Reply::Map(
        chosen
            .into_iter()
            .filter_map(|name| {
                let (calls, counts) = stats.latencies(name)?;
                let buckets = crate::watchers::latency_buckets(&counts)
                    .into_iter()
                    .map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)))
                    .collect();
                Some((
                    Reply::bulk(name),
                    Reply::Map(vec![
                        (Reply::bulk("calls"), Reply::Int(calls as i64)),
                        (Reply::bulk("histogram_usec"), Reply::Map(buckets)),
                    ]),
                ))
            })
            .collect(),
    )
}

const MODULE_REFUSED: &str = "MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

fn module(_: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = text(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "list" => {
            arity(args, "module", "list", 2)?;
            Ok(Reply::Array(vec![]))
        }
        "load" | "loadex" => {
            arity(args, "module", &sub, -3)?;
            Err(Error::command(MODULE_REFUSED))
        }
        "unload" => {
            arity(args, "module", "unload", 3)?;
            Err(Error::command(MODULE_REFUSED))
        }
        "help" => {
            arity(args, "module", "help", 2)?;
            Ok(help(&[
                "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LIST",
                "    Return a list of loaded modules.",
                "LOAD <path> [<arg> ...]",
                "    Load a module library from <path>, passing to it any optional arguments.",
                "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
                "    Load a module library from <path>, while passing it module configurations and optional arguments.",
                "UNLOAD <name>",
                "    Unload a module.",
                "HELP",
                "    Prints this help.",
            ]))
        }
        _ => Err(unknown_sub("MODULE", args)),
    }
}

fn debug(_: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    Err(Error::command("DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."))
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: the options checked as Redis checks
/// them, then refused for want of replicas.
fn failover(_: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut rest = args[1..].iter();
    let (mut abort, mut to, mut timeout, mut force) = (false, false, false, false);
    while let Some(word) = rest.next() {
        if is(word, "ABORT") && !abort {
            abort = true;
        } else if is(word, "TO") && !to {
            let (Some(_host), Some(port)) = (rest.next(), rest.next()) else {
                return Err(Error::Syntax);
            };
            crate::num::parse_i64(port).ok_or(Error::NotInteger)?;
            to = true;
        } else if is(word, "TIMEOUT") && !timeout {
            let Some(ms) = rest.next() else {
                return Err(Error::Syntax);
            };
            if crate::num::parse_i64(ms).ok_or(Error::NotInteger)? <= 0 {
                return Err(Error::command("FAILOVER timeout must be greater than 0"));
            }
            timeout = true;
        } else if is(word, "FORCE") && !force {
            force = true;
        } else {
            return Err(Error::Syntax);
        }
    }
    let others = to || timeout || force;
    if abort {
        if others {
            return Err(Error::Syntax);
        }
        return Err(Error::command("No failover in progress."));
    }
    Err(Error::command("FAILOVER requires connected replicas."))
}

/// REPLICAOF / SLAVEOF host port: NO ONE is what a primary already is; following another
/// server is not offered (there is no replication).
fn replicaof(_: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if is(&args[1], "NO") && is(&args[2], "ONE") {
        return Ok(Reply::ok());
    }
    let port = crate::num::parse_i64(&args[2]);
    if !port.is_some_and(|p| (0..=65535).contains(&p)) {
        return Err(Error::command("Invalid master port"));
    }
    Err(Error::command(
        "replication is not offered by this server: it stays a primary (REPLICAOF NO ONE)",
    ))
}

fn bgrewriteaof(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    // Not a save: the changes-since-save count and LASTSAVE stay as they are, as in Redis.
    if super::server::start_background_flush(ctx, false)? {
        Ok(Reply::simple(
            "Background append only file rewriting started",
        ))
    } else {
        // A flush already running cuts the logs as well.
        Ok(Reply::simple(
            "Background append only file rewriting scheduled",
        ))
    }
}
