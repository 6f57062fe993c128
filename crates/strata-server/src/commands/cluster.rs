//! Cluster commands (`cluster.rs` holds the state and the routing rule): CLUSTER (INFO, MYID,
//! SLOTS, SHARDS, NODES, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, SETSLOT), CLUSTERX (SETNODES,
//! SETNODEID, VERSION, MYID: the operator's map, as Kvrocks has it), ASKING, READONLY,
//! READWRITE, MIGRATE and RESTORE-ASKING; and the dispatcher's slot check ([`route`]) with the
//! key positions of every command ([`command_keys`]), which COMMAND GETKEYS also answers.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;

use super::{int_arg, is, text, Ctx, Spec, CONN};
use crate::cluster::{key_slot, valid_node_id, ClusterNode, ClusterState, Route, SlotMap, SLOTS};
use crate::error::{Error, Result};
use crate::keyspace::{self, now_ms, Space};
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "cluster", arity: -2, flags: &[], keys: (0, 0, 0), group: "cluster", summary: "CLUSTER INFO, MYID, SLOTS, SHARDS, NODES, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, SETSLOT.", handler: cluster },
    Spec { name: "clusterx", arity: -2, flags: &["admin"], keys: (0, 0, 0), group: "cluster", summary: "Sets the slot map (SETNODES), this node's id (SETNODEID); VERSION, MYID.", handler: clusterx },
    Spec { name: "asking", arity: 1, flags: CONN, keys: (0, 0, 0), group: "cluster", summary: "Lets the next command use a slot this node is importing.", handler: asking },
    Spec { name: "readonly", arity: 1, flags: CONN, keys: (0, 0, 0), group: "cluster", summary: "Accepted for cluster clients (this node mode has no replicas).", handler: readonly },
    Spec { name: "readwrite", arity: 1, flags: CONN, keys: (0, 0, 0), group: "cluster", summary: "Accepted for cluster clients (this node mode has no replicas).", handler: readonly },
    Spec { name: "migrate", arity: -6, flags: &["write"], keys: (3, 3, 1), group: "generic", summary: "Moves keys to another server atomically (DUMP, RESTORE there, delete here).", handler: migrate },
    Spec { name: "restore-asking", arity: -4, flags: &["write", "denyoom", "asking"], keys: (1, 1, 1), group: "server", summary: "RESTORE sent by MIGRATE: serves a slot being imported without ASKING.", handler: restore_asking },
];

/// Commands whose keys are not all at fixed positions (COMMAND INFO reports `movablekeys`;
/// [`command_keys`] reads their arguments).
pub(crate) const MOVABLE_KEYS: &[&str] = &[
    "zunion",
    "zinter",
    "zdiff",
    "zintercard",
    "sintercard",
    "lmpop",
    "zmpop",
    "blmpop",
    "bzmpop",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "sort",
    "sort_ro",
    "migrate",
    "georadius",
    "georadiusbymember",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "xread",
    "xreadgroup",
];

/// The key arguments of a command (Redis's `getKeysFromCommand`), in argument order.
pub(crate) fn command_keys<'a>(spec: &Spec, args: &'a [Bytes]) -> Vec<&'a [u8]> {
    let numkeys_at = |at: usize| -> Vec<&'a [u8]> {
        let n = args
            .get(at)
            .and_then(|a| crate::num::parse_i64(a))
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        args.iter()
            .skip(at + 1)
            .take(n)
            .map(|a| a.as_ref())
            .collect()
    };
    match spec.name {
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            numkeys_at(1)
        }
        "blmpop" | "bzmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall"
        | "fcall_ro" => numkeys_at(2),
        "xread" | "xreadgroup" => {
            // The first half of what follows STREAMS (Redis's xreadGetKeys).
            let Some(at) = args.iter().skip(1).position(|a| is(a, "STREAMS")) else {
                return Vec::new();
            };
            let rest = &args[at + 2..];
            rest[..rest.len() / 2].iter().map(|a| a.as_ref()).collect()
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let mut keys = vec![args[1].as_ref()];
            keys.extend(numkeys_at(2));
            keys
        }
        "georadius" | "georadiusbymember" => {
            // The source, then a STORE or STOREDIST destination (Redis's key specs).
            let mut keys = vec![args[1].as_ref()];
            for pair in args.windows(2).skip(2) {
                if is(&pair[0], "STORE") || is(&pair[0], "STOREDIST") {
                    keys.push(pair[1].as_ref());
                }
            }
            keys
        }
        "sort" => {
            let mut keys = vec![args[1].as_ref()];
            // As Redis's sortGetKeys: of several STOREs the last one is the destination.
            let mut store = None;
            let mut i = 2;
            while i < args.len() {
                if is(&args[i], "STORE") && i + 1 < args.len() {
                    store = Some(args[i + 1].as_ref());
                    i += 1;
                } else if is(&args[i], "LIMIT") {
                    i += 2;
                } else if is(&args[i], "BY") || is(&args[i], "GET") {
                    i += 1;
                }
                i += 1;
            }
            keys.extend(store);
            keys
        }
        "migrate" => {
            // Redis's migrateGetKeys: options from the sixth argument, AUTH's password and
            // AUTH2's user and password skipped, so a password spelled "keys" is not KEYS.
            let mut i = 6;
            while i < args.len() {
                if is(&args[i], "AUTH") {
                    i += 1;
                } else if is(&args[i], "AUTH2") {
                    i += 2;
                } else if is(&args[i], "KEYS") && args[3].is_empty() {
                    return args[i + 1..].iter().map(|a| a.as_ref()).collect();
                }
                i += 1;
            }
            vec![args[3].as_ref()]
        }
        _ => {
            let (first, last, step) = spec.keys;
            if first <= 0 {
                return Vec::new();
            }
            let n = args.len() as i64;
            let last = if last < 0 {
                n + i64::from(last)
            } else {
                i64::from(last)
            };
            let step = usize::try_from(step.max(1)).unwrap_or(1);
            (i64::from(first)..=last.min(n - 1))
                .step_by(step)
                .filter_map(|i| args.get(usize::try_from(i).ok()?))
                .map(|a| a.as_ref())
                .collect()
        }
    }
}

/// The dispatcher's slot check in cluster mode: `Ok` when the command runs here, else the
/// redirection or refusal to answer. EXEC is checked with the keys of all it queued, and a
/// refused EXEC discards its transaction (as in Redis).
pub(crate) fn route(ctx: &mut Ctx<'_>, spec: &Spec, args: &[Bytes], asking: bool) -> Result<()> {
    let Some(node) = ctx.shared.cluster.as_ref() else {
        return Ok(());
    };
    let asking = asking || spec.name == "restore-asking";
    if ctx.session.in_exec {
        return Ok(());
    }
    let keys: Vec<&[u8]> = if spec.name == "exec" {
        match &ctx.session.multi {
            Some(multi) => multi
                .queued
                .iter()
                .filter_map(|queued| Some((super::resolve(queued)?, queued)))
                .flat_map(|(s, queued)| command_keys(s, queued))
                .collect(),
            None => Vec::new(),
        }
    } else {
        command_keys(spec, args)
    };
    if keys.is_empty() {
        return Ok(());
    }
    let db = ctx.dbi();
    let docs = ctx.shared.docs_may_exist();
    let store = ctx.db();
    let mut exists = |key: &[u8]| -> Result<bool> {
        Ok(keyspace::lookup(store, db, key, now_ms(), docs)?.is_some())
    };
    let state = node.read();
    match state.route(&keys, asking, spec.name == "migrate", &mut exists)? {
        Route::Here => Ok(()),
        Route::Elsewhere(error) => {
            drop(state);
            if spec.name == "exec" {
                ctx.session.multi = None;
                ctx.session.watch = None;
            }
            Err(Error::Coded(error))
        }
    }
}

fn node<'a>(ctx: &Ctx<'a>) -> Result<&'a ClusterNode> {
    ctx.shared
        .cluster
        .as_ref()
        .ok_or_else(|| Error::command("This instance has cluster support disabled"))
}

fn asking(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    node(ctx)?;
    ctx.session.asking = true;
    Ok(Reply::ok())
}

fn readonly(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    node(ctx)?;
    Ok(Reply::ok())
}

fn restore_asking(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    super::keys::restore(ctx, args)
}

fn slot_arg(arg: &[u8]) -> Result<u16> {
    crate::num::parse_i64(arg)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| usize::from(*s) < SLOTS)
        .ok_or_else(|| Error::command("Invalid or out of range slot"))
}

fn cluster(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // The subcommand exists and has its arity: the dispatcher checked both first, as Redis
    // does, before whether cluster mode is on (`commands::check_subcommand`).
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let node = node(ctx)?;
    match sub.as_str() {
        "myid" => {
            Ok(Reply::text(&node.read().my_id))
        }
        "info" => {
            Ok(Reply::Verbatim(info_text(&node.read())))
        }
        "slots" => {
            Ok(slots_reply(&node.read()))
        }
        "shards" => {
            Ok(shards_reply(&node.read()))
        }
        "nodes" => {
            Ok(Reply::Verbatim(nodes_text(&node.read())))
        }
        "keyslot" => {
            Ok(Reply::Int(i64::from(key_slot(&args[2]))))
        }
        "countkeysinslot" => {
            let slot = int_arg(&args[2])?;
            let slot = u16::try_from(slot)
                .ok()
                .filter(|s| usize::from(*s) < SLOTS)
                .ok_or_else(|| Error::command("Invalid slot"))?;
            let mut n = 0i64;
            keys_in_slot(ctx, slot, &mut |_| {
                n += 1;
                true
            })?;
            Ok(Reply::Int(n))
        }
        "getkeysinslot" => {
            let (slot, count) = (int_arg(&args[2])?, int_arg(&args[3])?);
            let slot = u16::try_from(slot)
                .ok()
                .filter(|s| usize::from(*s) < SLOTS && count >= 0)
                .ok_or_else(|| Error::command("Invalid slot or number of keys"))?;
            let mut keys = Vec::new();
            if count > 0 {
                keys_in_slot(ctx, slot, &mut |k| {
                    keys.push(Reply::Bulk(Bytes::copy_from_slice(k)));
                    (keys.len() as i64) < count
                })?;
            }
            Ok(Reply::Array(keys))
        }
        "setslot" => setslot(ctx, node, args),
        "help" => Ok(super::admin::help(&[
                "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "INFO, MYID, SLOTS, SHARDS, NODES, KEYSLOT <key>, COUNTKEYSINSLOT <slot>,",
                "GETKEYSINSLOT <slot> <count>, SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE),",
                "HELP. The slot map is set with CLUSTERX SETNODES (there is no gossip bus).",
            ])),
        // The rest of Redis's (the gossip bus's) subcommands.
        _ => Err(Error::command(format!(
            "CLUSTER {} is not supported here: the slot map is the operator's, set on every node with CLUSTERX SETNODES",
            sub.to_ascii_uppercase()
        ))),
    }
}

/// Calls `visit` with each live key of `slot` in database 0 until it returns false. A walk of
/// every key (the engine keeps no index by slot): O(keys), like DBSIZE.
fn keys_in_slot(ctx: &Ctx<'_>, slot: u16, visit: &mut dyn FnMut(&[u8]) -> bool) -> Result<()> {
    let db = ctx.dbi();
    let now = now_ms();
    for space in Space::ALL {
        let mut more = true;
        keyspace::visit_keys(ctx.db(), db, space, b"", None, now, &mut |k, _, _| {
            if key_slot(k) == slot {
                more = visit(k);
            }
            more
        })?;
        if !more {
            break;
        }
    }
    Ok(())
}

fn setslot(ctx: &Ctx<'_>, node: &ClusterNode, args: &[Bytes]) -> Result<Reply> {
    if args.len() < 4 {
        return Err(Error::WrongArity("cluster|setslot".into()));
    }
    let slot = slot_arg(&args[2])?;
    let action = String::from_utf8_lossy(&args[3]).to_ascii_lowercase();
    let other = args.get(4).map(|a| text(a).to_ascii_lowercase());
    node.change(ctx.shared.backend.as_ref(), |state| {
        let mine = state
            .map
            .as_ref()
            .and_then(|m| m.owner(slot))
            .is_some_and(|n| n.id == state.my_id);
        let known = |id: &str| {
            state
                .map
                .as_ref()
                .and_then(|m| m.node(id))
                .is_some()
        };
        match (action.as_str(), &other, args.len()) {
            ("migrating", Some(id), 5) => {
                if !mine {
                    return Err(Error::command(format!(
                        "I'm not the owner of hash slot {slot}"
                    )));
                }
                if !known(id) {
                    return Err(Error::command(format!("I don't know about node {id}")));
                }
                state.migrating.insert(slot, id.clone());
            }
            ("importing", Some(id), 5) => {
                if mine {
                    return Err(Error::command(format!(
                        "I'm already the owner of hash slot {slot}"
                    )));
                }
                if !known(id) {
                    return Err(Error::command(format!("I don't know about node {id}")));
                }
                state.importing.insert(slot, id.clone());
            }
            ("stable", None, 4) => {
                state.migrating.remove(&slot);
                state.importing.remove(&slot);
            }
            ("node", Some(_), 5) => {
                return Err(Error::command(
                    "CLUSTER SETSLOT NODE is not supported here: give the slot to its new owner in a newer map on every node with CLUSTERX SETNODES",
                ))
            }
            _ => {
                return Err(Error::command(
                    "Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
                ))
            }
        }
        Ok(())
    })?;
    // Blocked clients look again: a key of a slot moving out may be gone (ASK).
    ctx.shared.note_list_push();
    Ok(Reply::ok())
}

fn info_text(state: &ClusterState) -> String {
    let assigned = state.map.as_ref().map_or(0, SlotMap::assigned_slots);
    let known = state.map.as_ref().map_or(1, |m| m.nodes.len().max(1));
    let size = state.map.as_ref().map_or(0, |m| {
        m.nodes.iter().filter(|n| !n.ranges.is_empty()).count()
    });
    let version = state.map.as_ref().map_or(0, |m| m.version);
    let lines = [
        (
            "cluster_state",
            if state.is_ok() { "ok" } else { "fail" }.to_string(),
        ),
        ("cluster_slots_assigned", assigned.to_string()),
        ("cluster_slots_ok", assigned.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        ("cluster_known_nodes", known.to_string()),
        ("cluster_size", size.to_string()),
        ("cluster_current_epoch", version.to_string()),
        ("cluster_my_epoch", version.to_string()),
        ("cluster_stats_messages_sent", "0".into()),
        ("cluster_stats_messages_received", "0".into()),
        ("total_cluster_links_buffer_limit_exceeded", "0".into()),
    ];
    lines.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect()
}

fn node_entry(host: &str, port: u16, id: &str) -> Reply {
    Reply::Array(vec![
        Reply::text(host),
        Reply::Int(i64::from(port)),
        Reply::text(id),
        Reply::Map(Vec::new()),
    ])
}

fn slots_reply(state: &ClusterState) -> Reply {
    let Some(map) = &state.map else {
        return Reply::Array(Vec::new());
    };
    Reply::Array(
        map.runs()
            .into_iter()
            .map(|(first, last, n)| {
                Reply::Array(vec![
                    Reply::Int(i64::from(first)),
                    Reply::Int(i64::from(last)),
                    node_entry(&n.host, n.port, &n.id),
                ])
            })
            .collect(),
    )
}

fn shards_reply(state: &ClusterState) -> Reply {
    let Some(map) = &state.map else {
        return Reply::Array(Vec::new());
    };
    Reply::Array(
        map.nodes
            .iter()
            .map(|n| {
                let slots = n
                    .ranges
                    .iter()
                    .flat_map(|(a, b)| [Reply::Int(i64::from(*a)), Reply::Int(i64::from(*b))])
                    .collect();
                let node = Reply::Map(vec![
                    (Reply::text("id"), Reply::text(&n.id)),
                    (Reply::text("port"), Reply::Int(i64::from(n.port))),
                    (Reply::text("ip"), Reply::text(&n.host)),
                    (Reply::text("endpoint"), Reply::text(&n.host)),
                    (Reply::text("role"), Reply::text("master")),
                    (Reply::text("replication-offset"), Reply::Int(0)),
                    (Reply::text("health"), Reply::text("online")),
                ]);
                Reply::Map(vec![
                    (Reply::text("slots"), Reply::Array(slots)),
                    (Reply::text("nodes"), Reply::Array(vec![node])),
                ])
            })
            .collect(),
    )
}

/// CLUSTER NODES in Redis's layout: `id host:port@cport flags master ping pong epoch link
/// slots...`; the bus port is reported as port + 10000 as Redis's convention (no bus listens).
fn nodes_text(state: &ClusterState) -> String {
    let mut out = String::new();
    let version = state.map.as_ref().map_or(0, |m| m.version);
    let nodes = state
        .map
        .as_ref()
        .map(|m| m.nodes.as_slice())
        .unwrap_or(&[]);
    if state.me().is_none() {
        // Not in the map (yet): Redis always lists itself.
        out.push_str(&format!(
            "{} :0@0 myself,master - 0 0 {version} connected\n",
            state.my_id
        ));
    }
    for n in nodes {
        let myself = n.id == state.my_id;
        let flags = if myself { "myself,master" } else { "master" };
        let bus = u32::from(n.port) + 10_000;
        out.push_str(&format!(
            "{} {}:{}@{bus} {flags} - 0 0 {version} connected",
            n.id, n.host, n.port
        ));
        for (a, b) in &n.ranges {
            if a == b {
                out.push_str(&format!(" {a}"));
            } else {
                out.push_str(&format!(" {a}-{b}"));
            }
        }
        if myself {
            for (slot, id) in &state.migrating {
                out.push_str(&format!(" [{slot}->-{id}]"));
            }
            for (slot, id) in &state.importing {
                out.push_str(&format!(" [{slot}-<-{id}]"));
            }
        }
        out.push('\n');
    }
    out
}

fn clusterx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let node = node(ctx)?;
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("version", 2) => Ok(Reply::Int(
            node.read().map.as_ref().map_or(0, |m| m.version) as i64,
        )),
        ("myid", 2) => Ok(Reply::text(&node.read().my_id)),
        ("setnodeid", 3) => {
            let id = text(&args[2]).to_ascii_lowercase();
            if !valid_node_id(&id) {
                return Err(Error::command("Invalid node id (40 hex characters)"));
            }
            node.change(ctx.shared.backend.as_ref(), |state| {
                state.my_id = id;
                Ok(())
            })?;
            ctx.shared.note_list_push();
            Ok(Reply::ok())
        }
        ("setnodes", 4 | 5) => {
            let force = match args.get(4) {
                None => false,
                Some(a) if is(a, "FORCE") => true,
                Some(_) => return Err(Error::Syntax),
            };
            let version = crate::num::parse_i64(&args[3])
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(|| Error::command("Invalid cluster version"))?;
            let map = SlotMap::parse(&String::from_utf8_lossy(&args[2]), version)
                .map_err(|e| Error::command(format!("Invalid cluster nodes info: {e}")))?;
            node.change(ctx.shared.backend.as_ref(), |state| {
                state.set_map(map, force).map_err(Error::command)
            })?;
            // Blocked clients look again: their keys may belong elsewhere now (MOVED).
            ctx.shared.note_list_push();
            Ok(Reply::ok())
        }
        _ => Err(Error::command(
            "CLUSTERX subcommands: SETNODES <nodes> <version> [FORCE], SETNODEID <id>, VERSION, MYID",
        )),
    }
}

/// Default MIGRATE timeout when the client gives 0 (Redis's).
const MIGRATE_TIMEOUT_DEFAULT: Duration = Duration::from_millis(1000);

fn migrate(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let host = text(&args[1]);
    let port = crate::num::parse_i64(&args[2])
        .and_then(|p| u16::try_from(p).ok())
        .ok_or(Error::NotInteger)?;
    let db = int_arg(&args[4])?;
    let timeout_ms = int_arg(&args[5])?;
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<Vec<Bytes>> = None;
    let mut keys: Vec<Bytes> = Vec::new();
    let mut i = 6;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(&args[i], "COPY") {
            copy = true;
        } else if is(&args[i], "REPLACE") {
            replace = true;
        } else if is(&args[i], "AUTH") && more >= 1 {
            auth = Some(vec![args[i + 1].clone()]);
            i += 1;
        } else if is(&args[i], "AUTH2") && more >= 2 {
            auth = Some(vec![args[i + 1].clone(), args[i + 2].clone()]);
            i += 2;
        } else if is(&args[i], "KEYS") {
            if !args[3].is_empty() {
                return Err(Error::command(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            keys.extend(args[i + 1..].iter().cloned());
            break;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if keys.is_empty() {
        keys.push(args[3].clone());
    }
    let timeout = match u64::try_from(timeout_ms) {
        Ok(0) | Err(_) => MIGRATE_TIMEOUT_DEFAULT,
        Ok(ms) => Duration::from_millis(ms),
    };
    // The dispatcher holds the exec lock exclusively: no write lands between these reads, the
    // transfer and the removal.
    let now = now_ms();
    let mut found = Vec::new();
    for key in &keys {
        if let Some((payload, expire_at_ms)) = super::keys::dump_payload(ctx, key)? {
            let ttl_ms = match expire_at_ms {
                None => 0,
                Some(at) if at > now => at - now,
                Some(_) => continue,
            };
            found.push((key.clone(), payload, ttl_ms));
        }
    }
    if found.is_empty() {
        return Ok(Reply::simple("NOKEY"));
    }
    let restore = if ctx.shared.cluster.is_some() {
        "RESTORE-ASKING"
    } else {
        "RESTORE"
    };
    let mut target = Target::connect(&host, port, timeout)?;
    if let Some(auth) = &auth {
        let mut command = vec![Bytes::from_static(b"AUTH")];
        command.extend(auth.iter().cloned());
        target.call(&command)?;
    }
    if ctx.shared.cluster.is_none() {
        target.call(&[Bytes::from_static(b"SELECT"), Bytes::from(db.to_string())])?;
    }
    let mut moved = Vec::new();
    let mut failure = None;
    for (key, payload, ttl_ms) in found {
        let mut command = vec![
            Bytes::from_static(restore.as_bytes()),
            key.clone(),
            Bytes::from(ttl_ms.to_string()),
            Bytes::from(payload),
        ];
        if replace {
            command.push(Bytes::from_static(b"REPLACE"));
        }
        match target.call(&command) {
            Ok(()) => moved.push(key),
            // A key the target refuses (BUSYKEY, say) stays here; the others still go, as
            // Redis carries on through every key and reports the first refusal.
            Err(e @ Error::Coded(_)) => {
                failure.get_or_insert(e);
            }
            // The connection is gone: the keys the target acknowledged are still removed here
            // below (they are there now), the rest stay.
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if !copy && !moved.is_empty() {
        let db = ctx.dbi();
        let mut ops = Vec::new();
        for key in &moved {
            let _doc_guard = ctx
                .shared
                .docs_may_exist()
                .then(|| ctx.shared.doc_lock(db, key));
            super::keys::ops_removing(ctx, db, key, &mut ops)?;
        }
        super::keys::write_ops(ctx, ops)?;
        // The moved keys are deleted here, as Redis reports them.
        for key in &moved {
            ctx.notify(crate::notify::GENERIC, "del", key);
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(Reply::ok()),
    }
}

/// Longest reply line MIGRATE reads from its target (status and error lines).
const TARGET_REPLY_LINE_BYTES_MAX: u64 = 64 << 10;

/// MIGRATE's connection to the target server: RESP commands out, one reply read per command.
struct Target {
    reader: BufReader<TcpStream>,
}

impl Target {
    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Target> {
        let io = |_| Error::Coded("IOERR error or timeout connecting to the client".into());
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| {
                Error::Coded("IOERR error or timeout connecting to the client".into())
            })?;
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        Ok(Target {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command; `Ok` for a status or integer reply, `Coded` for the target's error.
    fn call(&mut self, command: &[Bytes]) -> Result<()> {
        let mut out = format!("*{}\r\n", command.len()).into_bytes();
        for arg in command {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        let write_failed =
            |_| Error::Coded("IOERR error or timeout writing to target instance".into());
        self.reader
            .get_mut()
            .write_all(&out)
            .map_err(write_failed)?;
        let read_failed =
            || Error::Coded("IOERR error or timeout reading to target instance".into());
        // A reply line from a well-behaved target is short; a longer one is not read whole.
        let mut line = String::new();
        std::io::Read::take(&mut self.reader, TARGET_REPLY_LINE_BYTES_MAX)
            .read_line(&mut line)
            .map_err(|_| read_failed())?;
        let line = line.trim_end_matches(['\r', '\n']);
        match line.as_bytes().first() {
            Some(b'+') | Some(b':') => Ok(()),
            Some(b'-') => Err(Error::Coded(format!(
                "ERR Target instance replied with error: {}",
                &line[1..]
            ))),
            _ => Err(read_failed()),
        }
    }
}

/// COMMAND GETKEYS (`flags` false) and GETKEYSANDFLAGS: the keys of the command `args`, each
/// with what the command does with it, as Redis 7.0's `getKeysSubcommandImpl` finds them: by
/// the command's key specifications where they can be followed and their flags do not depend
/// on the arguments; otherwise, for the commands whose keys Redis's own code finds
/// ([`KEY_FUNCTIONS`], here by [`command_keys`]), with the flags that code gives (SET with GET
/// reads the old value, BITFIELD with only GETs reads, SORT's source is read and its STORE
/// written, MIGRATE deletes what it moves). A key count that does not fit finds no keys.
/// Shard channels (SPUBLISH) are not keys.
pub(crate) fn getkeys(args: &[Bytes], flags: bool) -> Result<Reply> {
    let Some(spec) = super::resolve(args) else {
        return Err(Error::command("Invalid command specified"));
    };
    let meta = super::meta::of_command(args);
    let has_keys = MOVABLE_KEYS.contains(&spec.name)
        || KEY_FUNCTIONS.contains(&spec.name)
        || meta.is_some_and(|m| m.key_specs.iter().any(|s| !s.flags.contains(&"not_key")));
    if !has_keys {
        return Err(Error::command("The command has no key arguments"));
    }
    let n = args.len() as i64;
    let arity = i64::from(spec.arity);
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(Error::command(
            "Invalid number of arguments specified for command",
        ));
    }
    let keys = keys_with_flags(spec, args);
    if keys.is_empty() && !spec.flags.contains(&"no_mandatory_keys") {
        return Err(Error::command("Invalid arguments specified for command"));
    }
    Ok(Reply::Array(
        keys.into_iter()
            .map(|(at, key_flags)| {
                let key = Reply::Bulk(args[at].clone());
                if !flags {
                    return key;
                }
                Reply::Array(vec![
                    key,
                    Reply::Set(
                        key_flags
                            .iter()
                            .map(|f| Reply::Simple(std::borrow::Cow::Borrowed(*f)))
                            .collect(),
                    ),
                ])
            })
            .collect(),
    ))
}

/// The keys of the command `args` (of `command`, arity checked) by position, each with its
/// key-spec flags, as [`getkeys`] describes; none where they cannot be found.
pub(crate) fn keys_with_flags(
    command: &Spec,
    args: &[Bytes],
) -> Vec<(usize, &'static [&'static str])> {
    let by_specs = super::meta::of_command(args)
        .filter(|m| !m.any_spec_has("variable_flags"))
        .and_then(|m| m.keys_by_specs(args));
    match by_specs {
        Some(keys) => keys,
        None if KEY_FUNCTIONS.contains(&command.name) => command_keys(command, args)
            .into_iter()
            .enumerate()
            .filter_map(|(i, key)| {
                let at = args
                    .iter()
                    .position(|a| std::ptr::eq(a.as_ptr(), key.as_ptr()))?;
                Some((at, key_function_flags(command.name, args, i)))
            })
            .collect(),
        None => Vec::new(),
    }
}

/// Commands whose keys Redis finds with a function of its own rather than (only) key
/// specifications, beyond [`MOVABLE_KEYS`].
const KEY_FUNCTIONS: &[&str] = &["set", "bitfield", "sort", "sort_ro", "migrate"];

/// The flags Redis's key function for `command` gives its `nth` key.
fn key_function_flags(command: &str, args: &[Bytes], nth: usize) -> &'static [&'static str] {
    const READ: &[&str] = &["RO", "access"];
    match command {
        "set" if args.iter().skip(3).any(|a| is(a, "GET")) => &["RW", "access", "update"],
        "set" => &["OW", "update"],
        "bitfield" if bitfield_reads_only(args) => READ,
        "bitfield" => &["RW", "access", "update"],
        "sort" | "sort_ro" if nth == 0 => READ,
        "sort" => &["OW", "update"],
        "migrate" => &["RW", "access", "delete"],
        _ => &[],
    }
}

/// Redis's `bitfieldGetKeys`: only GETs (and OVERFLOWs) read; anything else, a malformed
/// argument included, may write.
fn bitfield_reads_only(args: &[Bytes]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        if is(&args[i], "GET") && left >= 2 {
            i += 3;
        } else if is(&args[i], "OVERFLOW") && left >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}
