//! INFO's `keyspace_hits` and `keyspace_misses`: as Redis counts them, one per key a command
//! looks up for reading (every key of a read-only command; GETEX, GETDEL, GETSET and SET with
//! GET among the writes), a hit when the key exists, whatever its type, a miss when it does
//! not or has expired. Write lookups (INCR, LPUSH...) count nothing, nor do commands refused
//! before they look (wrong arity, syntax errors); the sources of the *STORE commands, which
//! Redis counts, are not counted here.
//!
//! The command's reply usually says whether its key existed (GET's value or nil, TYPE's
//! `none`, TTL's -2...): the key is looked up again only when the reply leaves it open (an
//! HGET's nil: no hash, or no such field), so a GET costs no second lookup.

use bytes::Bytes;

use super::{Command, Ctx};
use crate::error::{Error, Result};
use crate::resp::Reply;

/// Write commands whose key Redis looks up for reading.
const READING_WRITES: &[&str] = &["getex", "getdel", "getset"];

/// Commands whose reply tells exactly whether their one key exists: nil, `none`, -2 or 0
/// only for a missing key (collections are never empty; a string may be, so STRLEN is not
/// here).
const EXACT_REPLIES: &[&str] = &[
    "get",
    "getex",
    "getdel",
    "getset",
    "set",
    "dump",
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "scard",
    "llen",
    "hlen",
    "zcard",
    "object",
];

/// Counts the lookups of `args` (whose keys are `keys`) given its `result`.
pub(super) fn note(
    ctx: &Ctx<'_>,
    spec: &'static Command,
    args: &[Bytes],
    keys: &[&[u8]],
    result: &Result<Reply>,
) {
    let name = spec.spec.name;
    let reads = spec.props.readonly
        || READING_WRITES.contains(&name)
        || (name == "set" && args[3..].iter().any(|a| a.eq_ignore_ascii_case(b"GET")));
    // Scripts' own commands count their keys (EVAL_RO's declared keys do not), and Redis's
    // PFCOUNT reads without counting.
    if !reads
        || keys.is_empty()
        || spec.props.read_only_script
        || matches!(name, "exec" | "migrate" | "pfcount")
    {
        return;
    }
    let reply = match result {
        Ok(r) => r,
        // The key was found, of another type.
        Err(Error::WrongType) => {
            count(ctx, keys.len() as u64, 0);
            return;
        }
        // Refused before looking (or failing in a way that says nothing of the key).
        Err(_) => return,
    };
    if let Reply::Error(_) = reply {
        return;
    }
    let (mut hits, mut misses) = (0, 0);
    if keys.len() == 1 {
        match known(name, args, reply) {
            Some(true) => hits += 1,
            Some(false) => misses += 1,
            None => match super::key_exists(ctx, keys[0]) {
                Ok(true) => hits += 1,
                Ok(false) => misses += 1,
                Err(_) => {}
            },
        }
    } else {
        let per_key: Option<&[Reply]> = match (name, reply) {
            // MGET's value for a key is there exactly when it is a string; a nil says no more
            // than that.
            ("mget", Reply::Array(values)) if values.len() == keys.len() => Some(values),
            _ => None,
        };
        for (i, key) in keys.iter().enumerate() {
            let certain = per_key.and_then(|v| match v.get(i) {
                Some(Reply::Bulk(_)) => Some(true),
                _ => None,
            });
            match certain.map_or_else(|| super::key_exists(ctx, key), Ok) {
                Ok(true) => hits += 1,
                Ok(false) => misses += 1,
                Err(_) => {}
            }
        }
    }
    count(ctx, hits, misses);
}

/// Whether `spec` reads its one key (of `keys`) and its reply will tell whether the key
/// exists (see [`says_missing`]).
pub(super) fn tells_existence(spec: &'static Command, keys: &[&[u8]]) -> bool {
    spec.props.readonly && keys.len() == 1 && EXACT_REPLIES.contains(&spec.spec.name)
}

/// Whether `result`, the outcome of a command [`tells_existence`] says of, shows its key was
/// missing (absent or expired). Errors say it was not (WRONGTYPE: it is there) or nothing.
pub(super) fn says_missing(spec: &'static Command, args: &[Bytes], result: &Result<Reply>) -> bool {
    matches!(result, Ok(reply) if known(spec.spec.name, args, reply) == Some(false))
}

fn count(ctx: &Ctx<'_>, hits: u64, misses: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &ctx.shared.counters;
    if hits > 0 {
        c.keyspace_hits.fetch_add(hits, Relaxed);
    }
    if misses > 0 {
        c.keyspace_misses.fetch_add(misses, Relaxed);
    }
}

/// Whether the reply of one-key command `name` says its key exists: `None` when it leaves
/// that open.
fn known(name: &str, args: &[Bytes], reply: &Reply) -> Option<bool> {
    if EXACT_REPLIES.contains(&name) {
        // Only a missing key gives these; anything else (an empty string GETDEL just took
        // away included) comes from one that was there.
        return Some(!match reply {
            Reply::Nil | Reply::NilArray => true,
            Reply::Int(0) => matches!(name, "scard" | "llen" | "hlen" | "zcard"),
            Reply::Int(-2) => matches!(name, "ttl" | "pttl" | "expiretime" | "pexpiretime"),
            Reply::Simple(s) => name == "type" && s == "none",
            _ => false,
        });
    }
    match reply {
        // EXISTS and TOUCH of one key count it.
        Reply::Int(n) if matches!(name, "exists" | "touch") && args.len() == 2 => Some(*n == 1),
        _ if data(reply) => Some(true),
        _ => None,
    }
}

/// Whether a reply holds something only an existing key gives: a value, a positive count, a
/// list with a value in it. Nils, zeros, negative numbers and empty strings or lists say
/// nothing (a missing key gives them too, or an empty string does).
fn data(reply: &Reply) -> bool {
    match reply {
        Reply::Bulk(b) => !b.is_empty(),
        Reply::Int(n) => *n > 0,
        Reply::Double(_) | Reply::DoubleText(_) => true,
        Reply::Array(items) | Reply::Set(items) => items.iter().any(data),
        Reply::Bulks(bulks) => bulks.items().any(|b| !b.is_empty()),
        Reply::Map(pairs) => !pairs.is_empty(),
        Reply::Verbatim(t) => !t.is_empty(),
        _ => false,
    }
}
