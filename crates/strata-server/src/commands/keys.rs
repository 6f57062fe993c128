//! Keyspace commands over both namespaces (strings and documents): DEL, UNLINK, EXISTS, TYPE,
//! KEYS, SCAN, DBSIZE, FLUSHDB/FLUSHALL, and the TTL family (keys never expire, so TTL is -1 for
//! every existing key and setting an expiry is refused).
//!
//! KEYS, SCAN and DBSIZE walk the engine in key order; a pattern's literal prefix narrows the
//! walk. SCAN's cursor names a remembered position (namespace + last key) in `state::CursorTable`,
//! so a scan sees every key that exists for its whole duration exactly once.

use std::ops::Bound;

use bytes::Bytes;

use super::{is, strings::no_expiry, text, Ctx, Spec, READ, READ_FAST, WRITE};
use crate::backend::BatchOp;
use crate::error::{Error, Result};
use crate::glob;
use crate::keyspace::{self, KeyType};
use crate::resp::Reply;
use crate::state::{lock, ScanPosition};

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "del", arity: -2, flags: &["write"], keys: (1, -1, 1), group: "generic", summary: "Deletes one or more keys.", handler: del },
    Spec { name: "unlink", arity: -2, flags: &["write", "fast"], keys: (1, -1, 1), group: "generic", summary: "Deletes one or more keys.", handler: del },
    Spec { name: "exists", arity: -2, flags: READ_FAST, keys: (1, -1, 1), group: "generic", summary: "Counts how many of the given keys exist.", handler: exists },
    Spec { name: "type", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns the type of value stored at a key.", handler: type_cmd },
    Spec { name: "keys", arity: 2, flags: READ, keys: (0, 0, 0), group: "generic", summary: "Returns all key names that match a pattern.", handler: keys },
    Spec { name: "scan", arity: -2, flags: READ, keys: (0, 0, 0), group: "generic", summary: "Iterates over the key names in the database.", handler: scan },
    Spec { name: "dbsize", arity: 1, flags: READ, keys: (0, 0, 0), group: "server", summary: "Returns the number of keys in the database (walks the keys).", handler: dbsize },
    Spec { name: "flushdb", arity: -1, flags: &["write"], keys: (0, 0, 0), group: "server", summary: "Removes all keys.", handler: flush },
    Spec { name: "flushall", arity: -1, flags: &["write"], keys: (0, 0, 0), group: "server", summary: "Removes all keys.", handler: flush },
    Spec { name: "ttl", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns -1 for an existing key (keys never expire), -2 otherwise.", handler: ttl },
    Spec { name: "pttl", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns -1 for an existing key (keys never expire), -2 otherwise.", handler: ttl },
    Spec { name: "persist", arity: 2, flags: &["write", "fast"], keys: (1, 1, 1), group: "generic", summary: "Returns 0: no key has an expiry to remove.", handler: persist },
    Spec { name: "expire", arity: -3, flags: WRITE, keys: (1, 1, 1), group: "generic", summary: "Not supported: keys never expire.", handler: no_expiry },
    Spec { name: "pexpire", arity: -3, flags: WRITE, keys: (1, 1, 1), group: "generic", summary: "Not supported: keys never expire.", handler: no_expiry },
    Spec { name: "expireat", arity: -3, flags: WRITE, keys: (1, 1, 1), group: "generic", summary: "Not supported: keys never expire.", handler: no_expiry },
    Spec { name: "pexpireat", arity: -3, flags: WRITE, keys: (1, 1, 1), group: "generic", summary: "Not supported: keys never expire.", handler: no_expiry },
];

fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut removed = 0;
    for key in &args[1..] {
        if keyspace::remove(ctx.db(), key)? {
            removed += 1;
        }
    }
    ctx.shared.note_writes(removed as u64);
    Ok(Reply::Int(removed))
}

fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // A key named twice counts twice, as in Redis.
    let mut n = 0;
    for key in &args[1..] {
        if keyspace::type_of(ctx.db(), key)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn type_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::simple(
        keyspace::type_of(ctx.db(), &args[1])?.map_or("none", KeyType::name),
    ))
}

fn ttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(
        if keyspace::type_of(ctx.db(), &args[1])?.is_some() {
            -1
        } else {
            -2
        },
    ))
}

fn persist(_: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(0))
}

fn keys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pattern = &args[1];
    let prefix = glob::literal_prefix(pattern);
    let mut out = Vec::new();
    for t in KeyType::ALL {
        keyspace::visit_keys(ctx.db(), t, prefix, None, &mut |k| {
            if glob::matches(pattern, k, false) {
                out.push(Reply::Bulk(Bytes::copy_from_slice(k)));
            }
            true
        })?;
    }
    Ok(Reply::Array(out))
}

fn dbsize(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(keyspace::count(ctx.db())? as i64))
}

/// SCAN's default COUNT: keys examined per call.
const SCAN_COUNT_DEFAULT: usize = 10;

fn scan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::command("invalid cursor"))?;
    let mut pattern: Option<&[u8]> = None;
    let mut count = SCAN_COUNT_DEFAULT;
    let mut only: Option<Option<KeyType>> = None;
    let mut i = 2;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(Error::Syntax)?;
        if is(&args[i], "MATCH") {
            pattern = Some(value);
        } else if is(&args[i], "COUNT") {
            count = match super::int_arg(value)? {
                n if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(Error::Syntax),
            };
        } else if is(&args[i], "TYPE") {
            only = Some(KeyType::ALL.into_iter().find(|t| is(value, t.name())));
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    let start = if cursor == 0 {
        ScanPosition {
            namespace: 0,
            after_key: None,
        }
    } else {
        lock(&ctx.shared.cursors)
            .get(cursor)
            .ok_or_else(|| Error::command("invalid cursor"))?
    };
    let prefix = pattern.map_or(&b""[..], glob::literal_prefix);
    let mut budget = count;
    let mut found = Vec::new();
    let mut next: Option<ScanPosition> = None;
    let mut namespace = start.namespace;
    let mut after = start.after_key;
    while namespace < KeyType::ALL.len() {
        let t = KeyType::ALL[namespace];
        if only.is_some_and(|o| o != Some(t)) {
            namespace += 1;
            after = None;
            continue;
        }
        let mut last: Option<Vec<u8>> = None;
        let mut more = false;
        keyspace::visit_keys(ctx.db(), t, prefix, after.as_deref(), &mut |k| {
            if budget == 0 {
                more = true;
                return false;
            }
            budget -= 1;
            last = Some(k.to_vec());
            if pattern.is_none_or(|p| glob::matches(p, k, false)) {
                found.push(Reply::Bulk(Bytes::copy_from_slice(k)));
            }
            true
        })?;
        if more {
            next = Some(ScanPosition {
                namespace,
                after_key: last,
            });
            break;
        }
        namespace += 1;
        after = None;
        if budget == 0 && namespace < KeyType::ALL.len() {
            next = Some(ScanPosition {
                namespace,
                after_key: None,
            });
            break;
        }
    }
    let cursor = match next {
        Some(pos) => lock(&ctx.shared.cursors).insert(pos),
        None => 0,
    };
    Ok(Reply::Array(vec![
        Reply::text(cursor.to_string()),
        Reply::Array(found),
    ]))
}

/// Keys deleted per engine batch by FLUSHDB: bounds the batch's memory.
const FLUSH_BATCH_KEYS: usize = 1024;

fn flush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    match args.get(1..) {
        Some([]) | None => {}
        Some([mode]) if is(mode, "SYNC") || is(mode, "ASYNC") => {}
        Some(_) => return Err(Error::Syntax),
    }
    // One database holds everything, so FLUSHDB and FLUSHALL both clear the whole engine,
    // including keys written outside the server's namespaces (e.g. by `strata put`), except
    // the key-name record that documents written later may refer to.
    let mut after: Option<Vec<u8>> = None;
    let mut deleted = 0u64;
    loop {
        let start = after.take().map_or(Bound::Unbounded, Bound::Excluded);
        let mut batch = Vec::new();
        let mut last = None;
        let mut seen = 0usize;
        ctx.db().scan(start, Bound::Unbounded, &mut |k, _| {
            seen += 1;
            last = Some(k.to_vec());
            if !crate::keyspace::is_internal(k) {
                batch.push(k.to_vec());
            }
            seen < FLUSH_BATCH_KEYS
        })?;
        let Some(last) = last else {
            break;
        };
        deleted += batch.len() as u64;
        if !batch.is_empty() {
            ctx.db()
                .write(batch.into_iter().map(BatchOp::Delete).collect())?;
        }
        after = Some(last);
    }
    ctx.shared.note_writes(deleted);
    tracing::info!(deleted, command = %text(&args[0]), "flushed the database");
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::testing::*;
    use crate::resp::Reply;

    #[test]
    fn del_exists_type_ttl() {
        let mut h = Harness::new();
        h.run(&["MSET", "a", "1", "b", "2"]);
        assert_eq!(h.run(&["EXISTS", "a", "a", "zz"]), Reply::Int(2));
        assert_eq!(h.run(&["TYPE", "a"]), Reply::simple("string"));
        assert_eq!(h.run(&["TYPE", "zz"]), Reply::simple("none"));
        assert_eq!(h.run(&["TTL", "a"]), Reply::Int(-1));
        assert_eq!(h.run(&["PTTL", "zz"]), Reply::Int(-2));
        assert_eq!(h.run(&["DEL", "a", "b", "zz"]), Reply::Int(2));
        assert_eq!(h.run(&["UNLINK", "a"]), Reply::Int(0));
        assert!(h.run(&["EXPIRE", "a", "10"]).is_error());
    }

    fn scan_all(h: &mut Harness, extra: &[&str]) -> Vec<Reply> {
        let mut cursor = "0".to_string();
        let mut all = Vec::new();
        let mut calls = 0;
        loop {
            let mut cmd = vec!["SCAN", cursor.as_str()];
            cmd.extend_from_slice(extra);
            let Reply::Array(parts) = h.run(&cmd) else {
                panic!("bad SCAN reply")
            };
            let (Reply::Bulk(c), Reply::Array(keys)) = (&parts[0], &parts[1]) else {
                panic!("bad SCAN reply")
            };
            all.extend(keys.iter().cloned());
            cursor = String::from_utf8(c.to_vec()).unwrap();
            calls += 1;
            if cursor == "0" {
                return all;
            }
            assert!(calls < 1000);
        }
    }

    #[test]
    fn keys_and_scan_cover_every_key_once() {
        let mut h = Harness::new();
        for i in 0..57 {
            h.run(&["SET", &format!("user:{i:03}"), "x"]);
        }
        h.run(&["SET", "other", "y"]);
        let Reply::Array(keys) = h.run(&["KEYS", "user:*"]) else {
            panic!()
        };
        assert_eq!(keys.len(), 57);
        assert_eq!(h.run(&["KEYS", "oth?r"]), Reply::Array(vec![bulk("other")]));
        assert_eq!(scan_all(&mut h, &[]).len(), 58);
        assert_eq!(scan_all(&mut h, &["COUNT", "7"]).len(), 58);
        assert_eq!(
            scan_all(&mut h, &["MATCH", "user:01*", "COUNT", "3"]).len(),
            10
        );
        assert_eq!(scan_all(&mut h, &["TYPE", "ReJSON-RL"]).len(), 0);
        assert_eq!(h.run(&["DBSIZE"]), Reply::Int(58));
        assert_eq!(h.run(&["SCAN", "12345"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["SCAN", "x"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["SCAN", "0", "COUNT", "0"]), err("ERR syntax error"));
        assert_eq!(h.run(&["FLUSHDB"]), Reply::ok());
        assert_eq!(h.run(&["DBSIZE"]), Reply::Int(0));
    }
}
