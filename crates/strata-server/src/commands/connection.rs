//! Connection commands: PING, ECHO, QUIT, HELLO, AUTH, SELECT, CLIENT. They touch only the
//! session and the client registry, never the storage.

use std::borrow::Cow;

use bytes::Bytes;

use super::{is, text, Ctx, Spec, CONN};
use crate::error::{Error, Result};
use crate::resp::{Protocol, Reply};
use crate::state::{lock, AfterReply, ClientEntry, ReplyMode};

/// The Redis version reported to clients. Client libraries and tools gate features on it, so it
/// names the Redis release whose command semantics this server follows; INFO also reports
/// `strata_version`.
pub(crate) const REDIS_COMPAT_VERSION: &str = "7.2.0";

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "ping", arity: -1, flags: CONN, keys: (0, 0, 0), group: "connection", summary: "Returns the server's liveliness response.", handler: ping },
    Spec { name: "echo", arity: 2, flags: CONN, keys: (0, 0, 0), group: "connection", summary: "Returns the given string.", handler: echo },
    Spec { name: "quit", arity: -1, flags: &["noscript", "loading", "stale", "fast", "no_auth"], keys: (0, 0, 0), group: "connection", summary: "Closes the connection.", handler: quit },
    Spec { name: "hello", arity: -1, flags: &["noscript", "loading", "stale", "fast", "no_auth"], keys: (0, 0, 0), group: "connection", summary: "Handshakes with the server: protocol version, authentication, client name.", handler: hello },
    Spec { name: "auth", arity: -2, flags: &["noscript", "loading", "stale", "fast", "no_auth"], keys: (0, 0, 0), group: "connection", summary: "Authenticates the connection.", handler: auth },
    Spec { name: "reset", arity: 1, flags: &["noscript", "loading", "stale", "fast", "no_auth"], keys: (0, 0, 0), group: "connection", summary: "Resets the connection: transaction, watches, subscriptions, database, protocol, name, authentication.", handler: reset },
    Spec { name: "select", arity: 2, flags: CONN, keys: (0, 0, 0), group: "connection", summary: "Changes the selected database.", handler: select },
    Spec { name: "client", arity: -2, flags: CONN, keys: (0, 0, 0), group: "connection", summary: "CLIENT ID, GETNAME, SETNAME, SETINFO, INFO, LIST.", handler: client },
];

fn ping(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // A RESP2 connection in subscribed mode gets PING's answer in the shape of a message.
    if ctx.session.protocol == crate::resp::Protocol::Resp2 && ctx.session.subs.count() > 0 {
        let msg = match args {
            [_] => Bytes::new(),
            [_, msg] => msg.clone(),
            _ => return Err(Error::WrongArity("ping".into())),
        };
        return Ok(Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(msg)]));
    }
    match args {
        [_] => Ok(Reply::simple("PONG")),
        [_, msg] => Ok(Reply::Bulk(msg.clone())),
        _ => Err(Error::WrongArity("ping".into())),
    }
}

fn echo(_: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Bulk(args[1].clone()))
}

fn quit(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    ctx.session.after_reply = AfterReply::Close;
    Ok(Reply::ok())
}

fn reset(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    let s = &mut *ctx.session;
    s.multi = None;
    s.watch = None;
    s.subs.clear();
    ctx.shared.watchers.remove_monitor(s.id);
    s.db = 0;
    s.protocol = crate::resp::Protocol::Resp2;
    s.authenticated = ctx.shared.acl.default_is_open();
    if s.tracking.take().is_some() {
        ctx.shared.watches.tracking.disable(s.id);
    }
    s.caching = false;
    act_as(ctx, Bytes::from_static(crate::acl::DEFAULT_USER));
    set_name(ctx, Bytes::new());
    if let Some(entry) = lock(&ctx.shared.clients).get_mut(&ctx.session.id) {
        entry.protocol = crate::resp::Protocol::Resp2;
        entry.db = 0;
        let c = &entry.control;
        c.subscribed
            .store(false, std::sync::atomic::Ordering::Relaxed);
        c.channels.store(0, std::sync::atomic::Ordering::Relaxed);
        c.patterns.store(0, std::sync::atomic::Ordering::Relaxed);
        c.shard_channels
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(Reply::simple("RESET"))
}

/// Makes the connection act as `user` (AUTH, HELLO AUTH, RESET).
fn act_as(ctx: &mut Ctx<'_>, user: Bytes) {
    if let Some(entry) = lock(&ctx.shared.clients).get_mut(&ctx.session.id) {
        entry.user = user.clone();
    }
    ctx.session.user = user;
    ctx.session.acl_user = None;
}

/// Checks a user/password pair against the ACL users (`requirepass` is the default user's
/// password); a wrong pair, or a user that is off, is WRONGPASS and an ACL LOG entry.
fn check_password(ctx: &mut Ctx<'_>, user: &[u8], pass: &[u8]) -> Result<()> {
    let ok = ctx.shared.acl.user(user).is_some_and(|u| u.accepts(pass));
    if ok {
        ctx.session.authenticated = true;
        act_as(ctx, Bytes::copy_from_slice(user));
        Ok(())
    } else {
        super::admin::log_denial(
            ctx,
            "auth",
            Bytes::from_static(b"AUTH"),
            Bytes::copy_from_slice(user),
        );
        Err(Error::WrongPass)
    }
}

fn auth(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    match args {
        [_, pass] => {
            let default_nopass = ctx
                .shared
                .acl
                .user(crate::acl::DEFAULT_USER)
                .is_some_and(|u| u.is_open());
            if default_nopass {
                return Err(Error::command("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
            }
            check_password(ctx, crate::acl::DEFAULT_USER, pass)?;
        }
        [_, user, pass] => check_password(ctx, user, pass)?,
        _ => return Err(Error::Syntax),
    }
    Ok(Reply::ok())
}

fn select(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let db = super::keys::db_arg(ctx, &args[1], None)?;
    if ctx.session.cluster && db != 0 {
        return Err(Error::command("SELECT is not allowed in cluster mode"));
    }
    ctx.session.db = db;
    if let Some(entry) = lock(&ctx.shared.clients).get_mut(&ctx.session.id) {
        entry.db = db;
    }
    Ok(Reply::ok())
}

fn hello(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut protocol = ctx.session.protocol;
    let mut credentials = None;
    let mut name = None;
    if let Some(version) = args.get(1) {
        protocol = match crate::num::parse_i64(version) {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            Some(_) => return Err(Error::NoProto),
            None => {
                return Err(Error::command(
                    "Protocol version is not an integer or out of range",
                ))
            }
        };
        let mut i = 2;
        while i < args.len() {
            if is(&args[i], "AUTH") && i + 2 < args.len() {
                credentials = Some((args[i + 1].clone(), args[i + 2].clone()));
                i += 3;
            } else if is(&args[i], "SETNAME") && i + 1 < args.len() {
                name = Some(args[i + 1].clone());
                i += 2;
            } else {
                return Err(Error::command(format!(
                    "Syntax error in HELLO option '{}'",
                    text(&args[i])
                )));
            }
        }
    }
    if let Some((user, pass)) = credentials {
        check_password(ctx, &user, &pass)?;
    }
    if !ctx.session.authenticated {
        return Err(Error::Coded("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into()));
    }
    if let Some(name) = name {
        validate_client_name(&name)?;
        set_name(ctx, name);
    }
    ctx.session.protocol = protocol;
    if let Some(mode) = ctx.session.tracking.as_mut() {
        mode.resp3 = protocol == crate::resp::Protocol::Resp3;
        ctx.shared
            .watches
            .tracking
            .set_resp3(ctx.session.id, mode.resp3);
    }
    if let Some(entry) = lock(&ctx.shared.clients).get_mut(&ctx.session.id) {
        entry.protocol = protocol;
    }
    // Redis writes the map's keys as bulk strings.
    let field = |k: &'static str| Reply::bulk(k);
    Ok(Reply::Map(vec![
        (field("server"), Reply::text("redis")),
        (field("version"), Reply::text(REDIS_COMPAT_VERSION)),
        (field("proto"), Reply::Int(protocol.version())),
        (field("id"), Reply::Int(ctx.session.id as i64)),
        (
            field("mode"),
            Reply::text(if ctx.session.cluster {
                "cluster"
            } else {
                "standalone"
            }),
        ),
        (field("role"), Reply::text("master")),
        (field("modules"), Reply::Array(vec![])),
    ]))
}

/// Names and library attributes are shown space-separated in CLIENT LIST, so Redis allows only
/// printable non-space ASCII (`validateClientAttr`).
fn is_client_attribute(value: &[u8]) -> bool {
    value.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn validate_client_name(name: &[u8]) -> Result<()> {
    if is_client_attribute(name) {
        Ok(())
    } else {
        Err(Error::command(
            "Client names cannot contain spaces, newlines or special characters.",
        ))
    }
}

fn set_name(ctx: &mut Ctx<'_>, name: Bytes) {
    let name = (!name.is_empty()).then_some(name);
    ctx.session.name = name.clone();
    if let Some(entry) = lock(&ctx.shared.clients).get_mut(&ctx.session.id) {
        entry.name = name;
    }
}

fn client(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(Error::WrongArity(format!("client|{sub}")))
        }
    };
    match sub.as_str() {
        "id" => {
            arity(2)?;
            Ok(Reply::Int(ctx.session.id as i64))
        }
        "reply" => {
            arity(3)?;
            let mode = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
            // OFF and SKIP answer nothing themselves; ON answers OK.
            let nothing = Reply::Several(Vec::new());
            match mode.as_str() {
                "on" => {
                    ctx.session.replies = ReplyMode::On;
                    Ok(Reply::ok())
                }
                "off" => {
                    ctx.session.replies = ReplyMode::Off;
                    Ok(nothing)
                }
                "skip" => {
                    if ctx.session.replies != ReplyMode::Off {
                        ctx.session.replies = ReplyMode::SkipNext;
                    }
                    Ok(nothing)
                }
                _ => Err(Error::Syntax),
            }
        }
        "getname" => {
            arity(2)?;
            Ok(Reply::bulk_or_nil(ctx.session.name.clone()))
        }
        "setname" => {
            arity(3)?;
            validate_client_name(&args[2])?;
            set_name(ctx, args[2].clone());
            Ok(Reply::ok())
        }
        // Client libraries announce themselves (redis-py, go-redis); CLIENT LIST and CLIENT
        // INFO show it (Redis 7.2's `clientSetinfoCommand`: an empty value clears it).
        "setinfo" => {
            arity(4)?;
            let lib_name = is(&args[2], "LIB-NAME");
            if !lib_name && !is(&args[2], "LIB-VER") {
                return Err(Error::command(format!(
                    "Unrecognized option '{}'",
                    text(&args[2])
                )));
            }
            if !is_client_attribute(&args[3]) {
                return Err(Error::command(format!(
                    "{} cannot contain spaces, newlines or special characters.",
                    text(&args[2])
                )));
            }
            let value = (!args[3].is_empty()).then(|| args[3].clone());
            if let Some(entry) = lock(&ctx.shared.clients).get_mut(&ctx.session.id) {
                if lib_name {
                    entry.lib_name = value;
                } else {
                    entry.lib_ver = value;
                }
            }
            Ok(Reply::ok())
        }
        // Keys are never evicted: NO-EVICT is true to its word whatever it is set to.
        "no-evict" => {
            arity(3)?;
            if is(&args[2], "ON") || is(&args[2], "OFF") {
                Ok(Reply::ok())
            } else {
                Err(Error::Syntax)
            }
        }
        // Redis 7.2: this client's commands (but TOUCH) leave OBJECT IDLETIME's times alone.
        "no-touch" => {
            arity(3)?;
            if is(&args[2], "ON") {
                ctx.session.no_touch = true;
            } else if is(&args[2], "OFF") {
                ctx.session.no_touch = false;
            } else {
                return Err(Error::Syntax);
            }
            Ok(Reply::ok())
        }
        "info" => {
            arity(2)?;
            Ok(Reply::Verbatim(own_client_line(ctx)))
        }
        "list" => {
            // Redis's forms: CLIENT LIST, CLIENT LIST TYPE <type>, CLIENT LIST ID <id> ...
            // (no replicas or masters here: those types list no one).
            let mut ids: Option<Vec<u64>> = None;
            let mut kind: Option<ClientType> = None;
            if args.len() == 4 && is(&args[2], "TYPE") {
                kind = Some(ClientType::parse(&args[3])?);
            } else if args.len() > 3 && is(&args[2], "ID") {
                let mut wanted = Vec::with_capacity(args.len() - 3);
                for a in &args[3..] {
                    let id = crate::num::parse_i64(a)
                        .ok_or_else(|| Error::command("Invalid client ID"))?;
                    wanted.push(u64::try_from(id).unwrap_or(u64::MAX));
                }
                ids = Some(wanted);
            } else if args.len() != 2 {
                return Err(Error::Syntax);
            }
            let clients = lock(&ctx.shared.clients);
            let mut out = String::new();
            match ids {
                Some(ids) => {
                    for id in ids {
                        if let Some(e) = clients.get(&id).filter(|e| !e.control.closing()) {
                            out.push_str(&client_line(id, e, ctx.shared));
                        }
                    }
                }
                None => {
                    for (id, e) in clients.iter() {
                        if !e.control.closing() && kind.is_none_or(|k| k.matches(e)) {
                            out.push_str(&client_line(*id, e, ctx.shared));
                        }
                    }
                }
            }
            Ok(Reply::Verbatim(out))
        }
        "kill" => client_kill(ctx, args),
        "tracking" => client_tracking(ctx, args),
        "caching" => {
            arity(3)?;
            let mode = ctx.session.tracking.as_ref().ok_or_else(|| {
                Error::command("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
            })?;
            if is(&args[2], "YES") {
                if !mode.optin {
                    return Err(Error::command(
                        "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
                    ));
                }
            } else if is(&args[2], "NO") {
                if !mode.optout {
                    return Err(Error::command(
                        "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
                    ));
                }
            } else {
                return Err(Error::Syntax);
            }
            ctx.session.caching = true;
            Ok(Reply::ok())
        }
        "getredir" => {
            arity(2)?;
            Ok(Reply::Int(match &ctx.session.tracking {
                Some(mode) => i64::try_from(mode.redirect).unwrap_or(i64::MAX),
                None => -1,
            }))
        }
        "trackinginfo" => {
            arity(2)?;
            let state = ctx.shared.watches.tracking.mode(ctx.session.id);
            let mut flags = Vec::new();
            let (redirect, prefixes) = match &state {
                None => {
                    flags.push("off");
                    (-1, Vec::new())
                }
                Some((mode, broken)) => {
                    flags.push("on");
                    if mode.bcast {
                        flags.push("bcast");
                    }
                    if mode.optin {
                        flags.push("optin");
                        if ctx.session.caching {
                            flags.push("caching-yes");
                        }
                    }
                    if mode.optout {
                        flags.push("optout");
                        if ctx.session.caching {
                            flags.push("caching-no");
                        }
                    }
                    if mode.noloop {
                        flags.push("noloop");
                    }
                    if *broken {
                        flags.push("broken_redirect");
                    }
                    (
                        i64::try_from(mode.redirect).unwrap_or(i64::MAX),
                        mode.prefixes.clone(),
                    )
                }
            };
            Ok(Reply::Map(vec![
                (
                    Reply::bulk("flags"),
                    Reply::Set(flags.into_iter().map(Reply::bulk).collect()),
                ),
                (Reply::bulk("redirect"), Reply::Int(redirect)),
                (
                    Reply::bulk("prefixes"),
                    Reply::Array(prefixes.into_iter().map(Reply::Bulk).collect()),
                ),
            ]))
        }
        "pause" => {
            if !(3..=4).contains(&args.len()) {
                return Err(if args.len() < 3 {
                    Error::WrongArity("client|pause".into())
                } else {
                    super::admin::sub_syntax("CLIENT", args)
                });
            }
            // The mode is checked first, as Redis checks it.
            let all = match args.get(3) {
                None => true,
                Some(m) if is(m, "ALL") => true,
                Some(m) if is(m, "WRITE") => false,
                Some(_) => return Err(Error::command("CLIENT PAUSE mode must be WRITE or ALL")),
            };
            let ms = crate::num::parse_i64(&args[2])
                .ok_or_else(|| Error::command("timeout is not an integer or out of range"))?;
            let ms = u64::try_from(ms).map_err(|_| Error::command("timeout is negative"))?;
            // Any i64 of milliseconds fits (some 290 million years) on the clocks we run on.
            let until = std::time::Instant::now()
                .checked_add(std::time::Duration::from_millis(ms))
                .ok_or_else(|| Error::command("timeout is out of range"))?;
            ctx.shared.pause.pause(until, all);
            Ok(Reply::ok())
        }
        "unpause" => {
            if args.len() != 2 {
                return Err(Error::WrongArity("client|unpause".into()));
            }
            ctx.shared.pause.unpause();
            Ok(Reply::ok())
        }
        "unblock" => {
            if args.len() < 3 {
                return Err(Error::WrongArity("client|unblock".into()));
            }
            if args.len() > 4 {
                return Err(super::admin::sub_syntax("CLIENT", args));
            }
            let id = crate::num::parse_i64(&args[2]).ok_or(Error::NotInteger)?;
            let reason = match args.get(3) {
                None => crate::state::UNBLOCK_TIMEOUT,
                Some(r) if is(r, "TIMEOUT") => crate::state::UNBLOCK_TIMEOUT,
                Some(r) if is(r, "ERROR") => crate::state::UNBLOCK_ERROR,
                Some(_) => {
                    return Err(Error::command(
                        "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                    ))
                }
            };
            let clients = lock(&ctx.shared.clients);
            let target = u64::try_from(id)
                .ok()
                .and_then(|id| clients.get(&id))
                .filter(|e| e.control.blocked.load(std::sync::atomic::Ordering::Acquire));
            Ok(Reply::Int(match target {
                Some(e) => {
                    e.control
                        .unblock
                        .store(reason, std::sync::atomic::Ordering::Release);
                    e.control.wake.notify_one();
                    1
                }
                None => 0,
            }))
        }
        "help" => Ok(Reply::Array(
            [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ID",
                "    Return the ID of the current connection.",
                "GETNAME",
                "    Return the name of the current connection.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "    Accepted for client libraries; not stored.",
                "INFO",
                "    Return information about the current connection.",
                "LIST",
                "    Return information about all connections.",
                "KILL <ip:port> | [ID <id>] [ADDR <ip:port>] [LADDR <ip:port>] [SKIPME (YES|NO)]",
                "    Close the connections that match every filter given.",
                "REPLY (ON|OFF|SKIP)",
                "    Control the replies sent to the current connection.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Unblock the specified blocked client.",
                "UNPAUSE",
                "    Stop the current client pause, resuming traffic.",
                "PAUSE <timeout> [WRITE|ALL]",
                "    Suspend all, or just write, clients for <timeout> milliseconds.",
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                "         [OPTIN] [OPTOUT] [NOLOOP]",
                "    Control server assisted client side caching.",
                "CACHING (YES|NO)",
                "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                "GETREDIR",
                "    Return the client ID we are redirecting to when tracking is enabled.",
                "TRACKINGINFO",
                "    Report tracking status for the current connection.",
                "NO-EVICT (ON|OFF)",
                "    Accepted: this server never evicts keys.",
                "NO-TOUCH (ON|OFF)",
                "    Will not touch LRU/LFU stats when this mode is on.",
            ]
            .iter()
            .map(|s| Reply::Simple(Cow::Borrowed(s)))
            .collect(),
        )),
        _ => Err(Error::UnknownSubcommand {
            container: "CLIENT",
            sub: text(&args[1]),
        }),
    }
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP], with
/// Redis's checks in its order (`tracking.rs`).
fn client_tracking(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if args.len() < 3 {
        return Err(Error::WrongArity("client|tracking".into()));
    }
    let tracking = &ctx.shared.watches.tracking;
    let mut mode = crate::tracking::Mode::default();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if is(a, "REDIRECT") && more {
            j += 1;
            if mode.redirect != 0 {
                return Err(Error::command(
                    "A client can only redirect to a single other client",
                ));
            }
            let id = crate::num::parse_i64(&args[j]).ok_or(Error::NotInteger)?;
            let id = u64::try_from(id).unwrap_or(0);
            if id == 0 || !tracking.connected(id) {
                return Err(Error::command(
                    "The client ID you want redirect to does not exist",
                ));
            }
            mode.redirect = id;
        } else if is(a, "BCAST") {
            mode.bcast = true;
        } else if is(a, "OPTIN") {
            mode.optin = true;
        } else if is(a, "OPTOUT") {
            mode.optout = true;
        } else if is(a, "NOLOOP") {
            mode.noloop = true;
        } else if is(a, "PREFIX") && more {
            j += 1;
            mode.prefixes.push(args[j].clone());
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    if is(&args[2], "OFF") {
        if ctx.session.tracking.take().is_some() {
            tracking.disable(ctx.session.id);
        }
        ctx.session.caching = false;
        return Ok(Reply::ok());
    }
    if !is(&args[2], "ON") {
        return Err(Error::Syntax);
    }
    if !mode.bcast && !mode.prefixes.is_empty() {
        return Err(Error::command(
            "PREFIX option requires BCAST mode to be enabled",
        ));
    }
    let current = ctx.session.tracking.as_ref();
    if current.is_some_and(|c| c.bcast != mode.bcast) {
        return Err(Error::command("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    if mode.bcast && (mode.optin || mode.optout) {
        return Err(Error::command(
            "OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if mode.optin && mode.optout {
        return Err(Error::command(
            "You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if current.is_some_and(|c| (mode.optin && c.optout) || (mode.optout && c.optin)) {
        return Err(Error::command("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    if mode.bcast {
        let existing = current.map(|c| c.prefixes.as_slice()).unwrap_or_default();
        let overlap = |a: &[u8], b: &[u8]| {
            let n = a.len().min(b.len());
            a[..n] == b[..n]
        };
        for (i, p) in mode.prefixes.iter().enumerate() {
            if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
                return Err(Error::command(format!(
                    "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(e)
                )));
            }
            if let Some(q) = mode.prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Err(Error::command(format!(
                    "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(q)
                )));
            }
        }
        if mode.prefixes.is_empty() {
            // BCAST without PREFIX: every key.
            mode.prefixes.push(Bytes::new());
        }
    }
    mode.resp3 = ctx.session.protocol == crate::resp::Protocol::Resp3;
    tracking.enable(ctx.session.id, mode);
    ctx.session.tracking = tracking.mode(ctx.session.id).map(|(m, _)| m);
    Ok(Reply::ok())
}

/// CLIENT KILL: the old form `CLIENT KILL ip:port` (OK, or an error when no client has that
/// address) and the filter form `ID id`, `ADDR ip:port`, `LADDR ip:port`, `SKIPME yes|no`
/// (the number of clients closed; the caller is skipped unless SKIPME no). A killed connection
/// closes at once (its running batch ends first); the caller's own closes after this reply.
fn client_kill(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (mut id, mut addr, mut laddr, mut skip_me) = (None, None, None, true);
    let mut user: Option<Bytes> = None;
    let mut kind: Option<ClientType> = None;
    if args.len() == 2 {
        return Err(Error::WrongArity("client|kill".into()));
    }
    let old_form = args.len() == 3;
    if old_form {
        addr = Some(text(&args[2]));
    } else if args.len() < 3 || args.len() % 2 != 0 {
        return Err(Error::Syntax);
    } else {
        for pair in args[2..].chunks_exact(2) {
            let (name, value) = (&pair[0], &pair[1]);
            if is(name, "ID") {
                id = Some(
                    crate::num::parse_i64(value)
                        .and_then(|n| u64::try_from(n).ok())
                        .filter(|&n| n > 0)
                        .ok_or_else(|| Error::command("client-id should be greater than 0"))?,
                );
            } else if is(name, "ADDR") {
                addr = Some(text(value));
            } else if is(name, "LADDR") {
                laddr = Some(text(value));
            } else if is(name, "TYPE") {
                kind = Some(ClientType::parse(value)?);
            } else if is(name, "USER") {
                if ctx.shared.acl.user(value).is_none() {
                    return Err(Error::command(format!("No such user '{}'", text(value))));
                }
                user = Some(value.clone());
            } else if is(name, "SKIPME") {
                skip_me = if is(value, "YES") {
                    true
                } else if is(value, "NO") {
                    false
                } else {
                    return Err(Error::Syntax);
                };
            } else {
                return Err(Error::Syntax);
            }
        }
    }
    let me = ctx.session.id;
    let killed = super::admin::close_connections(ctx, |cid, e| {
        id.is_none_or(|i| i == cid)
            && addr.as_ref().is_none_or(|a| *a == e.peer)
            && laddr.as_ref().is_none_or(|a| *a == e.local)
            && kind.is_none_or(|k| k.matches(e))
            && user.as_ref().is_none_or(|u| *u == e.user)
            && !(cid == me && skip_me && !old_form)
    });
    if old_form {
        return if killed == 0 {
            Err(Error::command("No such client"))
        } else {
            Ok(Reply::ok())
        };
    }
    Ok(Reply::Int(killed))
}

/// A client type of CLIENT LIST TYPE and CLIENT KILL TYPE.
#[derive(Debug, Clone, Copy)]
enum ClientType {
    Normal,
    Pubsub,
    /// Masters and replicas: this server has none.
    Replication,
}

impl ClientType {
    /// Parses a type name, with Redis's error for an unknown one.
    fn parse(arg: &[u8]) -> Result<ClientType> {
        match text(arg).to_ascii_lowercase().as_str() {
            "normal" => Ok(ClientType::Normal),
            "pubsub" => Ok(ClientType::Pubsub),
            "master" | "replica" | "slave" => Ok(ClientType::Replication),
            _ => Err(Error::command(format!(
                "Unknown client type '{}'",
                text(arg)
            ))),
        }
    }

    /// Whether the client `e` is of this type (a client listening to a channel or pattern is
    /// `pubsub`, any other `normal`).
    fn matches(self, e: &ClientEntry) -> bool {
        let subscribed = e
            .control
            .subscribed
            .load(std::sync::atomic::Ordering::Relaxed);
        match self {
            ClientType::Normal => !subscribed,
            ClientType::Pubsub => subscribed,
            ClientType::Replication => false,
        }
    }
}

/// This connection's CLIENT INFO line.
pub(crate) fn own_client_line(ctx: &Ctx<'_>) -> String {
    let clients = lock(&ctx.shared.clients);
    clients
        .get(&ctx.session.id)
        .map(|e| client_line(ctx.session.id, e, ctx.shared))
        .unwrap_or_default()
}

/// One line of CLIENT LIST / CLIENT INFO, with Redis 7.2's fields in its order (7.0's and the
/// client library's `lib-name` and `lib-ver`). Buffer and
/// memory fields this server does not account per client read 0; `events` is `r` (every
/// connection waits for input).
fn client_line(id: u64, e: &ClientEntry, shared: &crate::state::Shared) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let tracking = shared.watches.tracking.mode(id);
    let name = e
        .name
        .as_ref()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    let c = &e.control;
    let now_ms = crate::state::coarse_monotonic_ms();
    let last_ms = c.last_command_ms.load(Relaxed);
    let idle = if last_ms == 0 {
        e.connected_at.elapsed().as_secs()
    } else {
        now_ms.saturating_sub(last_ms) / 1000
    };
    let channels = c.channels.load(Relaxed);
    let patterns = c.patterns.load(Relaxed);
    let shard_channels = c.shard_channels.load(Relaxed);
    let queued = c.queued.load(Relaxed);
    let mut flags = String::new();
    if channels + patterns + shard_channels > 0 {
        flags.push('P');
    }
    if queued >= 0 {
        flags.push('x');
    }
    if c.blocked.load(Relaxed) {
        flags.push('b');
    }
    if let Some((mode, broken)) = &tracking {
        flags.push('t');
        if *broken {
            flags.push('R');
        }
        if mode.bcast {
            flags.push('B');
        }
    }
    let redir = tracking
        .as_ref()
        .map_or(-1, |(m, _)| i64::try_from(m.redirect).unwrap_or(i64::MAX));
    if flags.is_empty() {
        flags.push('N');
    }
    let user = String::from_utf8_lossy(&e.user);
    let cmd = match &*c.last_command.lock() {
        ("", _) => "NULL".to_string(),
        (name, Some(sub)) => format!(
            "{name}|{}",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ),
        (name, None) => (*name).to_string(),
    };
    format!(
        "id={id} addr={} laddr={} fd={} name={name} age={} idle={idle} flags={flags} db={} \
         sub={channels} psub={patterns} ssub={shard_channels} multi={queued} qbuf=0 qbuf-free=0 argv-mem=0 \
         multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={cmd} user={user} \
         redir={redir} resp={} lib-name={} lib-ver={}\n",
        e.peer,
        e.local,
        e.fd,
        e.connected_at.elapsed().as_secs(),
        e.db,
        e.protocol.version(),
        String::from_utf8_lossy(e.lib_name.as_deref().unwrap_or_default()),
        String::from_utf8_lossy(e.lib_ver.as_deref().unwrap_or_default()),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::config::ServerConfig;
    use crate::resp::{Protocol, Reply};

    #[test]
    fn ping_echo_select() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["PING"]), Reply::simple("PONG"));
        assert_eq!(h.run(&["ping", "hi"]), bulk("hi"));
        assert_eq!(
            h.run(&["ping", "a", "b"]),
            err("ERR wrong number of arguments for 'ping' command")
        );
        assert_eq!(h.run(&["ECHO", "x"]), bulk("x"));
        assert_eq!(h.run(&["SELECT", "0"]), Reply::ok());
        assert_eq!(h.run(&["SET", "k", "zero"]), Reply::ok());
        assert_eq!(h.run(&["SELECT", "15"]), Reply::ok());
        assert_eq!(h.run(&["GET", "k"]), Reply::Nil);
        assert_eq!(
            h.run(&["SELECT", "16"]),
            err("ERR DB index is out of range")
        );
        assert_eq!(
            h.run(&["SELECT", "-1"]),
            err("ERR DB index is out of range")
        );
        assert_eq!(
            h.run(&["SELECT", "x"]),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(h.run(&["SELECT", "0"]), Reply::ok());
        assert_eq!(h.run(&["GET", "k"]), bulk("zero"));
    }

    #[test]
    fn requirepass_gates_every_command_but_auth_hello_quit() {
        let mut h = Harness::with_config(ServerConfig {
            requirepass: Some("s3cret".into()),
            ..ServerConfig::default()
        });
        assert_eq!(h.run(&["GET", "k"]), err("NOAUTH Authentication required."));
        assert_eq!(h.run(&["PING"]), err("NOAUTH Authentication required."));
        assert!(h.run(&["HELLO", "3"]).is_error());
        assert_eq!(
            h.run(&["AUTH", "nope"]),
            err("WRONGPASS invalid username-password pair or user is disabled.")
        );
        assert_eq!(
            h.run(&["AUTH", "root", "s3cret"]),
            err("WRONGPASS invalid username-password pair or user is disabled.")
        );
        assert_eq!(h.run(&["AUTH", "s3cret"]), Reply::ok());
        assert_eq!(h.run(&["PING"]), Reply::simple("PONG"));
    }

    #[test]
    fn no_touch_and_no_evict_take_on_or_off() {
        let mut h = Harness::new();
        for sub in ["NO-TOUCH", "no-evict"] {
            assert_eq!(h.run(&["CLIENT", sub, "on"]), Reply::ok());
            assert_eq!(h.run(&["CLIENT", sub, "OFF"]), Reply::ok());
            assert_eq!(h.run(&["CLIENT", sub, "yes"]), err("ERR syntax error"));
        }
    }

    /// CLIENT NO-TOUCH ON (Redis 7.2; no reference server to compare with here): the client's
    /// reads leave a key's access time, its TOUCH does not; OFF reads touch again.
    #[test]
    fn no_touch_leaves_access_times_but_touch() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v"]);
        let idle = |h: &mut Harness| match h.run(&["OBJECT", "IDLETIME", "k"]) {
            Reply::Int(n) => n,
            other => panic!("OBJECT IDLETIME answered {other:?}"),
        };
        h.run(&["CLIENT", "NO-TOUCH", "ON"]);
        h.shared.access.set_idle(b"k", 100);
        h.run(&["GET", "k"]);
        // (A second may pass between the two clock reads.)
        assert!((100..=101).contains(&idle(&mut h)), "a read in NO-TOUCH");
        h.run(&["TOUCH", "k"]);
        assert!(idle(&mut h) <= 1, "TOUCH in NO-TOUCH");
        h.run(&["CLIENT", "NO-TOUCH", "OFF"]);
        h.shared.access.set_idle(b"k", 100);
        h.run(&["GET", "k"]);
        assert!(idle(&mut h) <= 1, "a read after NO-TOUCH OFF");
    }

    #[test]
    fn hello_switches_protocol_and_names_the_client() {
        let mut h = Harness::new();
        let Reply::Map(fields) = h.run(&["HELLO", "3", "SETNAME", "app"]) else {
            panic!("HELLO must reply with a map");
        };
        assert!(fields.contains(&(bulk("proto"), Reply::Int(3))));
        assert_eq!(h.session.protocol, Protocol::Resp3);
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), bulk("app"));
        assert_eq!(
            h.run(&["HELLO", "4"]),
            err("NOPROTO unsupported protocol version")
        );
        assert_eq!(
            h.run(&["HELLO", "x"]),
            err("ERR Protocol version is not an integer or out of range")
        );
        assert_eq!(
            h.run(&["HELLO", "2", "FOO"]),
            err("ERR Syntax error in HELLO option 'FOO'")
        );
        assert!(h.run(&["AUTH", "x"]).is_error());
        assert_eq!(h.run(&["AUTH", "default", "anything"]), Reply::ok());
    }

    #[test]
    fn client_subcommands() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), Reply::Nil);
        assert_eq!(
            h.run(&["CLIENT", "SETNAME", "a b"]),
            err("ERR Client names cannot contain spaces, newlines or special characters.")
        );
        assert_eq!(h.run(&["CLIENT", "SETNAME", "worker-1"]), Reply::ok());
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), bulk("worker-1"));
        assert_eq!(h.run(&["CLIENT", "ID"]), Reply::Int(h.session.id as i64));
        assert_eq!(
            h.run(&["CLIENT", "SETNAME"]),
            err("ERR wrong number of arguments for 'client|setname' command")
        );
        assert_eq!(
            h.run(&["CLIENT", "BOGUS"]),
            err("ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.")
        );
        assert_eq!(
            h.run(&["CLIENT", "SETINFO", "LIB-NAME", "redis-rs"]),
            Reply::ok()
        );
    }
}
