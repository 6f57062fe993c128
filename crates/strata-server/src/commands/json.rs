//! JSON document commands, RedisJSON-compatible: JSON.SET, GET, MGET, DEL/FORGET, TYPE,
//! NUMINCRBY, NUMMULTBY, STRAPPEND, STRLEN, ARRAPPEND, ARRINSERT, ARRINDEX, ARRPOP, ARRTRIM,
//! ARRLEN, OBJKEYS, OBJLEN, TOGGLE, CLEAR, MERGE, MSET, RESP. Documents are strata-doc values
//! stored exactly where `DocStore` keeps them (see `keyspace`), encoded with its codec.
//!
//! Paths: JSONPath (`jsonpath.rs`: keys, indexes, `*`, unions, slices, `..`, filters) with RedisJSON's
//! two reply styles: a path starting with `$` answers with a list, one entry per match (nil
//! where the value is not of the command's type); a legacy path (`.`, `.a.b`, `a.b`, `..a`)
//! answers with a single value (the first match for reads, the last changed for writes) or an
//! error when nothing of the right type matches. Over RESP3 a few commands answer as RedisJSON
//! does there (NUMINCRBY and NUMMULTBY: arrays of native numbers; RESP: doubles; TYPE: one more
//! array). Every write is one atomic read-modify-write of the document (`KvBackend::update`),
//! so concurrent JSON.NUMINCRBY calls never lose an increment; JSON.MSET is one batch.

use bytes::Bytes;
use strata_doc::{
    decode_stored, decode_stored_in, encode_stored, from_json_slice, get_path_stored,
    to_json_string, Doc, DocMap, Path, PathStep,
};

use super::jsonpath::{value_at, Location, Query};
use super::{is, Ctx, Spec, READ, READ_FAST, WRITE};
use crate::backend::{BatchOp, Write};
use crate::error::{Error, Result};
use crate::keyspace::{doc_expiry, doc_ttl_key, now_ms, read_doc_bytes, read_record, Space};
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "json.set", arity: -4, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Sets or updates the JSON value at a path (NX, XX).", handler: json_set },
    Spec { name: "json.get", arity: -2, flags: READ, keys: (1, 1, 1), group: "json", summary: "Returns the JSON at one or more paths (INDENT, NEWLINE, SPACE).", handler: json_get },
    Spec { name: "json.mget", arity: -3, flags: READ, keys: (1, -2, 1), group: "json", summary: "Returns the JSON at a path of several keys.", handler: json_mget },
    Spec { name: "json.del", arity: -2, flags: &["write"], keys: (1, 1, 1), group: "json", summary: "Deletes the value at a path (the whole key by default).", handler: json_del },
    Spec { name: "json.forget", arity: -2, flags: &["write"], keys: (1, 1, 1), group: "json", summary: "Deletes the value at a path (alias of JSON.DEL).", handler: json_del },
    Spec { name: "json.type", arity: -2, flags: READ_FAST, keys: (1, 1, 1), group: "json", summary: "Returns the type of the JSON value at a path.", handler: json_type },
    Spec { name: "json.numincrby", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Atomically adds a number to the number at a path.", handler: json_numincrby },
    Spec { name: "json.strlen", arity: -2, flags: READ_FAST, keys: (1, 1, 1), group: "json", summary: "Returns the length of the string at a path.", handler: json_strlen },
    Spec { name: "json.arrappend", arity: -4, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Appends values to the array at a path.", handler: json_arrappend },
    Spec { name: "json.arrlen", arity: -2, flags: READ_FAST, keys: (1, 1, 1), group: "json", summary: "Returns the length of the array at a path.", handler: json_arrlen },
    Spec { name: "json.objkeys", arity: -2, flags: READ, keys: (1, 1, 1), group: "json", summary: "Returns the keys of the object at a path.", handler: json_objkeys },
    Spec { name: "json.objlen", arity: -2, flags: READ_FAST, keys: (1, 1, 1), group: "json", summary: "Returns the number of keys of the object at a path.", handler: json_objlen },
    Spec { name: "json.nummultby", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Multiplies the number at a path by a number.", handler: json_nummultby },
    Spec { name: "json.strappend", arity: -3, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Appends a string to the strings at a path.", handler: json_strappend },
    Spec { name: "json.arrinsert", arity: -5, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Inserts values into the arrays at a path before an index.", handler: json_arrinsert },
    Spec { name: "json.arrpop", arity: -2, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Removes and returns an element of the arrays at a path.", handler: json_arrpop },
    Spec { name: "json.arrtrim", arity: 5, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Keeps a range of the arrays at a path.", handler: json_arrtrim },
    Spec { name: "json.arrindex", arity: -4, flags: READ, keys: (1, 1, 1), group: "json", summary: "Returns the first index of a value in the arrays at a path.", handler: json_arrindex },
    Spec { name: "json.toggle", arity: 3, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Toggles the booleans at a path.", handler: json_toggle },
    Spec { name: "json.clear", arity: -2, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Empties the arrays and objects and zeroes the numbers at a path.", handler: json_clear },
    Spec { name: "json.resp", arity: -2, flags: READ, keys: (1, 1, 1), group: "json", summary: "Returns the JSON at a path in RESP form.", handler: json_resp },
    Spec { name: "json.mset", arity: -4, flags: WRITE, keys: (1, -1, 3), group: "json", summary: "Sets JSON values at paths of several keys, atomically.", handler: json_mset },
    Spec { name: "json.merge", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "json", summary: "Merges a JSON value into the values at a path (RFC 7396).", handler: json_merge },
];

/// A parsed path argument and the reply style it asks for.
struct JsonPath {
    query: Query,
    /// `$...` (list of matches) rather than legacy (single value).
    multi: bool,
    /// The text as the client sent it (for messages and JSON.GET's multi-path object).
    text: String,
}

impl JsonPath {
    fn root() -> JsonPath {
        JsonPath {
            query: Query::root(),
            multi: false,
            text: ".".into(),
        }
    }

    fn parse(arg: &[u8]) -> Result<JsonPath> {
        let text = std::str::from_utf8(arg)
            .map_err(|_| Error::command("JSON path must be valid UTF-8"))?
            .to_string();
        let multi = text.starts_with('$');
        // Legacy paths: `.` is the root, `.a.b` and `a.b` are `$.a.b`, `[0]` is `$[0]`.
        let canonical = if multi {
            text.clone()
        } else if text == "." {
            "$".to_string()
        } else if text.starts_with('.') || text.starts_with('[') {
            format!("${text}")
        } else {
            format!("$.{text}")
        };
        let query = Query::parse(&canonical)?;
        Ok(JsonPath { query, multi, text })
    }

    /// Every location the path matches in `doc`, in document order.
    fn locate(&self, doc: &Doc) -> Vec<Location> {
        self.query.locate(doc)
    }

    /// The values the path matches in `doc`.
    fn values<'a>(&self, doc: &'a Doc) -> Vec<&'a Doc> {
        self.locate(doc)
            .iter()
            .filter_map(|loc| value_at(doc, loc))
            .collect()
    }

    fn missing(&self) -> Error {
        Error::command(format!("Path '{}' does not exist", self.text))
    }
}

/// A location as strata-doc's path.
fn doc_path(loc: &[PathStep]) -> Path {
    loc.iter().fold(Path::root(), |p, s| match s {
        PathStep::Key(k) => p.key(k.clone()),
        PathStep::Index(i) => p.index(*i),
    })
}

/// RedisJSON's type names.
fn type_name(d: &Doc) -> &'static str {
    match d {
        Doc::Null => "null",
        Doc::Bool(_) => "boolean",
        Doc::Int(_) => "integer",
        Doc::Decimal(_) => "number",
        Doc::String(_) => "string",
        Doc::Array(_) => "array",
        Doc::Map(_) => "object",
    }
}

fn wrong_type_at(want: &str, found: &Doc) -> Error {
    Error::command(format!(
        "wrong type of path value - expected {want} but found {}",
        type_name(found)
    ))
}

fn no_such_key() -> Error {
    Error::command("could not perform this operation on a key that doesn't exist")
}

/// Reads the document under `key`: `None` when absent, WRONGTYPE when the name holds a string.
fn read_doc(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Doc>> {
    let now = now_ms();
    if let Some(bytes) = read_doc_bytes(ctx.db(), ctx.dbi(), key, now)? {
        return Ok(Some(decode_stored(&bytes, &ctx.shared.names)?));
    }
    if read_record(ctx.db(), ctx.dbi(), key, now)?.is_some() {
        return Err(Error::WrongType);
    }
    Ok(None)
}

/// What a document read-modify-write decides.
enum DocWrite {
    Keep,
    Put(Doc),
    Delete,
}

/// Atomically reads, changes and writes the document under `key`. WRONGTYPE when the name holds
/// a string (JSON commands never overwrite other types, as in RedisJSON).
fn modify_doc<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(Option<Doc>) -> Result<(DocWrite, T)>,
) -> Result<T> {
    let now = now_ms();
    let db = ctx.dbi();
    if read_record(ctx.db(), db, key, now)?.is_some() {
        return Err(Error::WrongType);
    }
    // The document and its expiry record change together (`Shared::doc_locks`).
    let _doc_guard = ctx.shared.doc_lock(db, key);
    let engine_key = Space::Docs
        .key(db, key)
        .ok_or_else(|| Error::command("JSON keys must be valid UTF-8"))?;
    // A document past its expiry time is gone: removed first, so that what is written now
    // starts without it (and without its expiry time). An expiry record without a document
    // (left by a crash of a build that removed the two in separate writes) goes too.
    match doc_expiry(ctx.db(), db, key)? {
        Some(at) if at <= now => ctx.db().write(vec![
            BatchOp::Delete(engine_key.clone()),
            BatchOp::Delete(doc_ttl_key(db, key)),
        ])?,
        Some(_) if ctx.db().get(&engine_key)?.is_none() => {
            ctx.db().delete(&doc_ttl_key(db, key))?;
        }
        _ => {}
    }
    let names = &ctx.shared.names;
    // From now on string commands look for documents (before the write, so a SET racing this
    // write still finds it).
    ctx.shared.note_document();
    // Names that earlier writes repeated get ids first (this writes the name record, which
    // cannot happen inside the document's read-modify-write).
    names.intern_pending()?;
    let mut out = None;
    let mut wrote = false;
    let mut deleted = false;
    for attempt in 0..2 {
        let table = names.table();
        let result = ctx.db().update(&engine_key, &mut |old| {
            let old = old.map(|b| decode_stored_in(b, &table)).transpose()?;
            let (decision, result) = f(old)?;
            out = Some(result);
            // A delete is written below, in one batch with the expiry record.
            let write = match decision {
                DocWrite::Keep => Write::Keep,
                DocWrite::Put(doc) => Write::Put(encode_stored(&doc, names)?),
                DocWrite::Delete => {
                    deleted = true;
                    Write::Keep
                }
            };
            wrote = write != Write::Keep;
            Ok(write)
        });
        match result {
            // The document names an id added by another handle on this store (a `DocStore`
            // in the same process): read the names again and retry once.
            Err(Error::Doc(strata_doc::Error::UnknownName { .. })) if attempt == 0 => {
                names.refresh()?;
            }
            other => {
                other?;
                break;
            }
        }
    }
    if deleted {
        // The document lock is held: the document read above is still the stored one. It and
        // its expiry record go in one batch (two writes could leave the record behind).
        let mut ops = vec![BatchOp::Delete(engine_key)];
        if doc_expiry(ctx.db(), db, key)?.is_some() {
            ops.push(BatchOp::Delete(doc_ttl_key(db, key)));
        }
        ctx.db().write(ops)?;
        wrote = true;
    }
    if wrote {
        ctx.shared.note_writes(1);
    }
    out.ok_or_else(|| Error::command("internal error: update callback did not run"))
}

/// JSON.GET's output options.
#[derive(Default)]
struct Format {
    indent: String,
    newline: String,
    space: String,
}

fn write_json(doc: &Doc, fmt: &Format, level: usize, out: &mut String) -> Result<()> {
    let pad = |out: &mut String, level: usize| {
        out.push_str(&fmt.newline);
        for _ in 0..level {
            out.push_str(&fmt.indent);
        }
    };
    match doc {
        Doc::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, level + 1);
                write_json(item, fmt, level + 1, out)?;
            }
            pad(out, level);
            out.push(']');
        }
        Doc::Map(m) if !m.is_empty() => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, level + 1);
                // Documents loaded by other tools may have non-string keys; JSON cannot.
                if !matches!(k, Doc::String(_)) {
                    return Err(strata_doc::Error::NonStringKey { key: k.to_string() }.into());
                }
                out.push_str(&to_json_string(k)?);
                out.push(':');
                out.push_str(&fmt.space);
                write_json(v, fmt, level + 1, out)?;
            }
            pad(out, level);
            out.push('}');
        }
        scalar_or_empty => out.push_str(&to_json_string(scalar_or_empty)?),
    }
    Ok(())
}

fn json_text(doc: &Doc, fmt: &Format) -> Result<Reply> {
    let mut out = String::new();
    write_json(doc, fmt, 0, &mut out)?;
    Ok(Reply::text(out))
}

/// The matches of `path` in `doc` as a JSON array.
fn matches_of(doc: &Doc, path: &JsonPath) -> Doc {
    Doc::Array(path.values(doc).into_iter().cloned().collect())
}

/// A legacy path's value: its first match, an error when it has none.
fn first_match<'a>(doc: &'a Doc, path: &JsonPath) -> Result<&'a Doc> {
    path.values(doc)
        .into_iter()
        .next()
        .ok_or_else(|| path.missing())
}

fn json_get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut fmt = Format::default();
    let mut paths = Vec::new();
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        let value = args.get(i + 1);
        match value {
            Some(v) if is(a, "INDENT") => fmt.indent = super::text(v),
            Some(v) if is(a, "NEWLINE") => fmt.newline = super::text(v),
            Some(v) if is(a, "SPACE") => fmt.space = super::text(v),
            // RedisJSON accepts and ignores it (strings are never escaped beyond JSON's rules).
            _ if is(a, "NOESCAPE") => {
                i += 1;
                continue;
            }
            _ => {
                paths.push(JsonPath::parse(a)?);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    if paths.is_empty() {
        paths.push(JsonPath::root());
    }
    // One path of keys and indexes: walk the stored bytes to it instead of decoding the whole
    // document (a small part of a large document costs the bytes skipped, not a decode).
    if let [p] = paths.as_slice() {
        if let Some(path) = p.query.definite_path().filter(|path| !path.is_root()) {
            if let Some(stored) = read_doc_bytes(ctx.db(), ctx.dbi(), &args[1], now_ms())? {
                let found = get_path_stored(&stored, &path, &ctx.shared.names)?;
                return if p.multi {
                    json_text(&Doc::Array(found.into_iter().collect()), &fmt)
                } else {
                    json_text(&found.ok_or_else(|| p.missing())?, &fmt)
                };
            }
        }
    }
    let Some(doc) = read_doc(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    if let [p] = paths.as_slice() {
        return if p.multi {
            json_text(&matches_of(&doc, p), &fmt)
        } else {
            json_text(first_match(&doc, p)?, &fmt)
        };
    }
    // Several paths: an object from each path's text to its result.
    let any_multi = paths.iter().any(|p| p.multi);
    let mut out = DocMap::new();
    for p in &paths {
        let result = if any_multi {
            matches_of(&doc, p)
        } else {
            first_match(&doc, p)?.clone()
        };
        out.insert(Doc::String(p.text.clone()), result);
    }
    json_text(&Doc::Map(out), &fmt)
}

fn json_mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (path_arg, keys) = match args[1..].split_last() {
        Some(split) => split,
        None => return Err(Error::WrongArity("json.mget".into())),
    };
    let p = JsonPath::parse(path_arg)?;
    let fmt = Format::default();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        // Like RedisJSON, a missing key or one of another type reads as nil.
        let doc = match read_doc(ctx, key) {
            Ok(Some(doc)) => doc,
            Ok(None) | Err(Error::WrongType) => {
                out.push(Reply::Nil);
                continue;
            }
            Err(e) => return Err(e),
        };
        out.push(if p.multi {
            json_text(&matches_of(&doc, &p), &fmt)?
        } else {
            match first_match(&doc, &p) {
                Ok(v) => json_text(v, &fmt)?,
                Err(_) => Reply::Nil,
            }
        });
    }
    Ok(Reply::Array(out))
}

fn json_set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let value = from_json_slice(&args[3])?;
    let (mut nx, mut xx) = (false, false);
    for a in &args[4..] {
        if is(a, "NX") && !xx {
            nx = true;
        } else if is(a, "XX") && !nx {
            xx = true;
        } else {
            return Err(Error::Syntax);
        }
    }
    modify_doc(ctx, &args[1], |old| set_at(old, &p, &value, nx, xx))
}

/// JSON.SET's change: the value at every match, or, where nothing matches and the path ends
/// in a key, a new member of each object its parent path matches (RedisJSON creates nothing
/// deeper than that). A new document only at the root.
fn set_at(
    old: Option<Doc>,
    p: &JsonPath,
    value: &Doc,
    nx: bool,
    xx: bool,
) -> Result<(DocWrite, Reply)> {
    let Some(mut doc) = old else {
        if !p.query.is_root() {
            return Err(Error::command("new objects must be created at the root"));
        }
        return Ok(if xx {
            (DocWrite::Keep, Reply::Nil)
        } else {
            (DocWrite::Put(value.clone()), Reply::ok())
        });
    };
    let found = p.locate(&doc);
    if !found.is_empty() {
        if nx {
            return Ok((DocWrite::Keep, Reply::Nil));
        }
        for loc in &found {
            // (A match inside an earlier match is gone once that one is replaced.)
            if let Some(slot) = doc.get_path_mut(&doc_path(loc)) {
                *slot = value.clone();
            }
        }
        return Ok((DocWrite::Put(doc), Reply::ok()));
    }
    if xx {
        return Ok((DocWrite::Keep, Reply::Nil));
    }
    let mut created = 0;
    if let Some((parent, key)) = p.query.parent_and_key() {
        for loc in parent.locate(&doc) {
            if let Some(Doc::Map(m)) = doc.get_path_mut(&doc_path(&loc)) {
                m.insert(Doc::String(key.to_string()), value.clone());
                created += 1;
            }
        }
    }
    match (created > 0, p.multi) {
        (true, _) => Ok((DocWrite::Put(doc), Reply::ok())),
        (false, true) => Ok((DocWrite::Keep, Reply::Nil)),
        (false, false) => Err(p.missing()),
    }
}

fn optional_path(args: &[Bytes]) -> Result<JsonPath> {
    match args.get(2) {
        Some(p) if args.len() == 3 => JsonPath::parse(p),
        Some(_) => Err(Error::Syntax),
        None => Ok(JsonPath::root()),
    }
}

fn json_del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = optional_path(args)?;
    modify_doc(ctx, &args[1], |old| {
        let Some(mut doc) = old else {
            return Ok((DocWrite::Keep, Reply::Int(0)));
        };
        let mut found = p.locate(&doc);
        if found.iter().any(Vec::is_empty) {
            return Ok((DocWrite::Delete, Reply::Int(1)));
        }
        // A match inside another match goes with it and is not counted (RedisJSON: `$..a` of
        // `{"a":{"a":1}}` deletes 1). The rest go last first, so that removing an element
        // leaves the indexes of those still to remove as they were.
        found.sort_by(|a, b| compare_locations(b, a));
        found.dedup();
        let outer: Vec<&Location> = found
            .iter()
            .filter(|loc| {
                !found
                    .iter()
                    .any(|other| other.len() < loc.len() && loc.starts_with(other))
            })
            .collect();
        let mut removed = 0;
        for loc in outer {
            let Some((last, parent)) = loc.split_last() else {
                continue;
            };
            let gone = match (doc.get_path_mut(&doc_path(parent)), last) {
                (Some(Doc::Map(m)), PathStep::Key(k)) => {
                    m.remove(&Doc::String(k.clone())).is_some()
                }
                (Some(Doc::Array(a)), PathStep::Index(i)) => match usize::try_from(*i) {
                    Ok(at) if at < a.len() => {
                        a.remove(at);
                        true
                    }
                    _ => false,
                },
                _ => false,
            };
            removed += i64::from(gone);
        }
        Ok(if removed > 0 {
            (DocWrite::Put(doc), Reply::Int(removed))
        } else {
            (DocWrite::Keep, Reply::Int(0))
        })
    })
}

/// Document order of two locations (array indexes by number, a location before those inside
/// it).
fn compare_locations(a: &[PathStep], b: &[PathStep]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let order = match (x, y) {
            (PathStep::Index(i), PathStep::Index(j)) => i.cmp(j),
            (PathStep::Key(k), PathStep::Key(l)) => k.cmp(l),
            (PathStep::Key(_), PathStep::Index(_)) => std::cmp::Ordering::Less,
            (PathStep::Index(_), PathStep::Key(_)) => std::cmp::Ordering::Greater,
        };
        if order.is_ne() {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// Runs a read-only query at a path with RedisJSON's reply shapes: `$` paths give an array with
/// one result per match (`Nil` where `f` declines the value's type), legacy paths give the
/// first match's result or an error. A missing key: nil for a legacy path, an error for `$`.
fn query(
    ctx: &Ctx<'_>,
    args: &[Bytes],
    want: &str,
    missing_is_nil: bool,
    f: impl Fn(&Doc) -> Option<Reply>,
) -> Result<Reply> {
    let p = optional_path(args)?;
    let Some(doc) = read_doc(ctx, &args[1])? else {
        // RedisJSON: nil for a legacy path, an error for a `$` path.
        return if p.multi {
            Err(no_such_key())
        } else {
            Ok(Reply::Nil)
        };
    };
    if p.multi {
        return Ok(Reply::Array(
            p.values(&doc)
                .into_iter()
                .map(|v| f(v).unwrap_or(Reply::Nil))
                .collect(),
        ));
    }
    let v = match first_match(&doc, &p) {
        Ok(v) => v,
        // RedisJSON's OBJLEN answers nil for a legacy path that matches nothing.
        Err(_) if missing_is_nil => return Ok(Reply::Nil),
        Err(e) => return Err(e),
    };
    f(v).ok_or_else(|| wrong_type_at(want, v))
}

fn json_type(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = optional_path(args)?;
    let Some(doc) = read_doc(ctx, &args[1])? else {
        // (RESP3: in an array too.)
        return Ok(if resp3(ctx) {
            Reply::Array(vec![Reply::Nil])
        } else {
            Reply::Nil
        });
    };
    let found = p.values(&doc);
    // Over RESP3 RedisJSON wraps JSON.TYPE's answer in one more array.
    let resp3 = resp3(ctx);
    Ok(if p.multi {
        let names = Reply::Array(
            found
                .into_iter()
                .map(|v| Reply::text(type_name(v)))
                .collect(),
        );
        if resp3 {
            Reply::Array(vec![names])
        } else {
            names
        }
    } else {
        match found.first() {
            None => Reply::Nil,
            Some(v) if resp3 => Reply::Array(vec![Reply::text(type_name(v))]),
            Some(v) => Reply::simple(type_name(v)),
        }
    })
}

fn json_strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "string", false, |v| match v {
        Doc::String(s) => Some(Reply::Int(s.len() as i64)),
        _ => None,
    })
}

fn json_arrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "array", false, |v| match v {
        Doc::Array(a) => Some(Reply::Int(a.len() as i64)),
        _ => None,
    })
}

fn json_objlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "object", true, |v| match v {
        Doc::Map(m) => Some(Reply::Int(m.len() as i64)),
        _ => None,
    })
}

fn json_objkeys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "object", false, |v| match v {
        Doc::Map(m) => Some(Reply::Array(
            m.iter()
                .map(|(k, _)| match k {
                    Doc::String(s) => Reply::text(s.clone()),
                    other => Reply::text(other.to_string()),
                })
                .collect(),
        )),
        _ => None,
    })
}

/// `a + b` with RedisJSON's rules: integers stay integers while they fit; otherwise the sum is
/// a float, refused when not finite. Whole results that fit an `i64` become integers
/// (1.5 + 1.5 = 3); others keep their digits.
fn add_numbers(a: &Doc, b: &Doc) -> Result<Doc> {
    if let (Doc::Int(x), Doc::Int(y)) = (a, b) {
        if let Some(sum) = x.checked_add(*y) {
            return Ok(Doc::Int(sum));
        }
    }
    float_result(as_f64(a)? + as_f64(b)?)
}

/// Applies `f` to each value the path matches in the document under `key`, which must exist.
/// `f` answers `None` for a value of a type it does not apply to, leaving it as it was. With a
/// `$` path the result is one answer per match (`None` where `f` declined); with a legacy path
/// only the matches `f` took count, and the command fails when there is none (the path does
/// not exist, or its values are not `want`), as in RedisJSON. The document is written when `f`
/// took any match.
fn update_each<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    p: &JsonPath,
    want: &str,
    mut f: impl FnMut(&mut Doc) -> Result<Option<T>>,
) -> Result<Vec<Option<T>>> {
    modify_doc(ctx, key, |old| {
        let mut doc = old.ok_or_else(no_such_key)?;
        let found = p.locate(&doc);
        let mut results = Vec::with_capacity(found.len());
        let mut wrong = None;
        for loc in &found {
            let Some(slot) = doc.get_path_mut(&doc_path(loc)) else {
                results.push(None);
                continue;
            };
            let result = f(slot)?;
            if result.is_none() && wrong.is_none() {
                wrong = Some(wrong_type_at(want, slot));
            }
            results.push(result);
        }
        let took = results.iter().any(Option::is_some);
        if !p.multi && !took {
            return Err(wrong.unwrap_or_else(|| p.missing()));
        }
        if !p.multi {
            results.retain(Option::is_some);
        }
        Ok((
            if took {
                DocWrite::Put(doc)
            } else {
                DocWrite::Keep
            },
            results,
        ))
    })
}

/// RedisJSON's reply to a command on every match: a `$` path gets an array (`Nil` where the
/// value was not of the command's type), a legacy path the last match's answer.
fn each_reply<T>(p: &JsonPath, results: Vec<Option<T>>, reply: impl Fn(T) -> Reply) -> Reply {
    if p.multi {
        Reply::Array(
            results
                .into_iter()
                .map(|r| r.map_or(Reply::Nil, &reply))
                .collect(),
        )
    } else {
        results
            .into_iter()
            .flatten()
            .last()
            .map_or(Reply::Nil, reply)
    }
}

/// A number argument of JSON.NUMINCRBY / NUMMULTBY.
fn number_arg(arg: &[u8]) -> Result<Doc> {
    let n = from_json_slice(arg)?;
    if !matches!(n, Doc::Int(_) | Doc::Decimal(_)) {
        return Err(Error::command(format!(
            "expected a number but found {}",
            type_name(&n)
        )));
    }
    Ok(n)
}

/// JSON.NUMINCRBY and JSON.NUMMULTBY: the new numbers as JSON text, an array of them (`null`
/// for values that are not numbers) for `$` paths.
fn number_op(ctx: &Ctx<'_>, args: &[Bytes], op: fn(&Doc, &Doc) -> Result<Doc>) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let operand = number_arg(&args[3])?;
    let results = update_each(ctx, &args[1], &p, "a number", |slot| {
        if !matches!(slot, Doc::Int(_) | Doc::Decimal(_)) {
            return Ok(None);
        }
        let new = op(slot, &operand)?;
        *slot = new.clone();
        Ok(Some(new))
    })?;
    if resp3(ctx) {
        // Over RESP3 RedisJSON answers an array of numbers, for a legacy path too (the last
        // number it changed).
        let numbers = if p.multi {
            results
        } else {
            results
                .into_iter()
                .flatten()
                .last()
                .map(Some)
                .into_iter()
                .collect()
        };
        return Ok(Reply::Array(
            numbers
                .iter()
                .map(|n| n.as_ref().map_or(Reply::Nil, number_reply))
                .collect(),
        ));
    }
    if p.multi {
        let all = Doc::Array(
            results
                .into_iter()
                .map(|r| r.unwrap_or(Doc::Null))
                .collect(),
        );
        return Ok(Reply::text(to_json_string(&all)?));
    }
    match results.into_iter().flatten().last() {
        Some(n) => Ok(Reply::text(to_json_string(&n)?)),
        None => Err(p.missing()),
    }
}

/// Whether the client speaks RESP3, where RedisJSON answers some commands in native types.
fn resp3(ctx: &Ctx<'_>) -> bool {
    ctx.session.protocol == crate::resp::Protocol::Resp3
}

/// A number as a native reply: an integer, or a double (RESP3; a bulk string in RESP2).
fn number_reply(n: &Doc) -> Reply {
    match n {
        Doc::Int(i) => Reply::Int(*i),
        Doc::Decimal(x) => x
            .as_str()
            .parse::<f64>()
            .map_or_else(|_| Reply::text(x.as_str().to_string()), Reply::Double),
        _ => Reply::Nil,
    }
}

fn json_numincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    number_op(ctx, args, add_numbers)
}

fn json_nummultby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    number_op(ctx, args, multiply_numbers)
}

/// A number as `f64`, for arithmetic that leaves the integers.
fn as_f64(d: &Doc) -> Result<f64> {
    match d {
        Doc::Int(i) => Ok(*i as f64),
        Doc::Decimal(x) => x
            .as_str()
            .parse::<f64>()
            .map_err(|_| Error::command("number out of range")),
        _ => Err(Error::command("not a number")),
    }
}

/// A float result: refused when not finite, whole results that fit an `i64` as integers.
fn float_result(x: f64) -> Result<Doc> {
    if !x.is_finite() {
        return Err(Error::command("result is not a finite number"));
    }
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        return Ok(Doc::Int(x as i64));
    }
    Ok(Doc::decimal(&crate::num::format_f64(x))?)
}

/// `a * b` with the rules of [`add_numbers`].
fn multiply_numbers(a: &Doc, b: &Doc) -> Result<Doc> {
    if let (Doc::Int(x), Doc::Int(y)) = (a, b) {
        if let Some(product) = x.checked_mul(*y) {
            return Ok(Doc::Int(product));
        }
    }
    float_result(as_f64(a)? * as_f64(b)?)
}

fn json_arrappend(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let values = json_args(&args[3..])?;
    let results = update_each(ctx, &args[1], &p, "array", |slot| {
        let Doc::Array(items) = slot else {
            return Ok(None);
        };
        items.extend(values.iter().cloned());
        Ok(Some(items.len() as i64))
    })?;
    Ok(each_reply(&p, results, Reply::Int))
}

/// JSON values given as arguments.
fn json_args(args: &[Bytes]) -> Result<Vec<Doc>> {
    args.iter()
        .map(|v| from_json_slice(v).map_err(Error::from))
        .collect()
}

/// An integer argument (an index, a bound).
fn int_arg(arg: &[u8]) -> Result<i64> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| Error::command("expected an integer"))
}

/// JSON.STRAPPEND key [path] value
fn json_strappend(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (p, value) = match args.len() {
        3 => (JsonPath::root(), &args[2]),
        4 => (JsonPath::parse(&args[2])?, &args[3]),
        _ => return Err(Error::WrongArity("json.strappend".into())),
    };
    let Doc::String(suffix) = from_json_slice(value)? else {
        return Err(Error::command(
            "wrong type of value - expected a JSON string",
        ));
    };
    let results = update_each(ctx, &args[1], &p, "string", |slot| {
        let Doc::String(s) = slot else {
            return Ok(None);
        };
        s.push_str(&suffix);
        Ok(Some(s.len() as i64))
    })?;
    Ok(each_reply(&p, results, Reply::Int))
}

/// JSON.ARRINSERT key path index value [value ...]
fn json_arrinsert(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let index = int_arg(&args[3])?;
    let values = json_args(&args[4..])?;
    let results = update_each(ctx, &args[1], &p, "array", |slot| {
        let Doc::Array(items) = slot else {
            return Ok(None);
        };
        let len = items.len() as i64;
        let at = if index < 0 { len + index } else { index };
        if !(0..=len).contains(&at) {
            return Err(Error::command("index out of bounds"));
        }
        let at = at as usize;
        items.splice(at..at, values.iter().cloned());
        Ok(Some(items.len() as i64))
    })?;
    Ok(each_reply(&p, results, Reply::Int))
}

/// JSON.ARRPOP key [path [index]]: the removed element as JSON text (`Nil` for an empty
/// array); an index past either end takes the element at that end.
fn json_arrpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = match args.get(2) {
        Some(path) => JsonPath::parse(path)?,
        None => JsonPath::root(),
    };
    let index = match args.get(3) {
        Some(i) if args.len() == 4 => int_arg(i)?,
        Some(_) => return Err(Error::Syntax),
        None => -1,
    };
    let results = update_each(ctx, &args[1], &p, "array", |slot| {
        let Doc::Array(items) = slot else {
            return Ok(None);
        };
        if items.is_empty() {
            return Ok(Some(None));
        }
        let len = items.len() as i64;
        let at = if index < 0 { len + index } else { index }.clamp(0, len - 1);
        Ok(Some(Some(items.remove(at as usize))))
    })?;
    let popped = |d: Option<Doc>| match d {
        Some(d) => to_json_string(&d).map_or(Reply::Nil, Reply::text),
        None => Reply::Nil,
    };
    Ok(each_reply(&p, results, popped))
}

/// JSON.ARRTRIM key path start stop: keeps `start..=stop` (negative from the end, `stop`
/// past the end is the last element); the new length.
fn json_arrtrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let start = int_arg(&args[3])?;
    let stop = int_arg(&args[4])?;
    let results = update_each(ctx, &args[1], &p, "array", |slot| {
        let Doc::Array(items) = slot else {
            return Ok(None);
        };
        let len = items.len() as i64;
        let from = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let to = if stop < 0 {
            len + stop
        } else {
            stop.min(len - 1)
        };
        if from >= len || from > to {
            items.clear();
        } else {
            items.truncate(to as usize + 1);
            items.drain(..from as usize);
        }
        Ok(Some(items.len() as i64))
    })?;
    Ok(each_reply(&p, results, Reply::Int))
}

/// JSON.TOGGLE key path: the new values, 1 or 0 per match for `$` paths, `true`/`false` for a
/// legacy path.
fn json_toggle(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let results = update_each(ctx, &args[1], &p, "boolean", |slot| {
        let Doc::Bool(b) = slot else {
            return Ok(None);
        };
        *b = !*b;
        Ok(Some(*b))
    })?;
    Ok(if p.multi {
        each_reply(&p, results, |b| Reply::Int(i64::from(b)))
    } else {
        each_reply(&p, results, |b| {
            Reply::text(if b { "true" } else { "false" })
        })
    })
}

/// JSON.CLEAR key [path]: empties the arrays and objects and zeroes the numbers the path
/// matches; how many it cleared.
fn json_clear(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = optional_path(args)?;
    let mut p = p;
    // Legacy or not, CLEAR answers a count and never fails on a path that matches nothing.
    p.multi = true;
    let results = update_each(ctx, &args[1], &p, "container", |slot| {
        Ok(match slot {
            Doc::Array(a) => {
                a.clear();
                Some(())
            }
            Doc::Map(m) => {
                *m = DocMap::new();
                Some(())
            }
            Doc::Int(_) | Doc::Decimal(_) => {
                *slot = Doc::Int(0);
                Some(())
            }
            _ => None,
        })
    })?;
    Ok(Reply::Int(results.iter().flatten().count() as i64))
}

/// JSON.ARRINDEX key path value [start [stop]]: the first index of `value` in `start..stop`
/// (negative from the end; a `stop` of 0 or past the end is the end), -1 if absent.
fn json_arrindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let wanted = from_json_slice(&args[3])?;
    let (start, stop) = match &args[4..] {
        [] => (0, 0),
        [s] => (int_arg(s)?, 0),
        [s, e] => (int_arg(s)?, int_arg(e)?),
        _ => return Err(Error::Syntax),
    };
    let Some(doc) = read_doc(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let find = |v: &Doc| -> Option<Reply> {
        let Doc::Array(items) = v else {
            return None;
        };
        let len = items.len() as i64;
        let from = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let to = match stop {
            0 => len,
            s if s < 0 => len + s,
            s => s.min(len),
        };
        let found = (from..to)
            .find(|&i| same_json(&items[i as usize], &wanted))
            .unwrap_or(-1);
        Some(Reply::Int(found))
    };
    if p.multi {
        return Ok(Reply::Array(
            p.values(&doc)
                .into_iter()
                .map(|v| find(v).unwrap_or(Reply::Nil))
                .collect(),
        ));
    }
    let v = first_match(&doc, &p)?;
    find(v).ok_or_else(|| wrong_type_at("array", v))
}

/// JSON equality as RedisJSON's ARRINDEX sees it: an integer never equals a float (`3` is not
/// `3.0`), where strata-doc compares numbers by value.
fn same_json(a: &Doc, b: &Doc) -> bool {
    match (a, b) {
        (Doc::Int(_), Doc::Decimal(_)) | (Doc::Decimal(_), Doc::Int(_)) => false,
        (Doc::Array(x), Doc::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Doc::Map(x), Doc::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// A value as JSON.RESP shows it: arrays as `[` then the elements, objects as `{` then keys
/// and values, booleans as simple strings, floats as bulk strings.
fn resp_of(d: &Doc, resp3: bool) -> Result<Reply> {
    Ok(match d {
        Doc::Null => Reply::Nil,
        Doc::Bool(b) => Reply::simple(if *b { "true" } else { "false" }),
        Doc::Int(i) => Reply::Int(*i),
        // RESP3: a double, as RedisJSON answers there.
        Doc::Decimal(_) if resp3 => number_reply(d),
        Doc::Decimal(x) => Reply::text(x.as_str().to_string()),
        Doc::String(s) => Reply::text(s.clone()),
        Doc::Array(items) => {
            let mut out = Vec::with_capacity(items.len() + 1);
            out.push(Reply::simple("["));
            for item in items {
                out.push(resp_of(item, resp3)?);
            }
            Reply::Array(out)
        }
        Doc::Map(m) => {
            let mut out = Vec::with_capacity(2 * m.len() + 1);
            out.push(Reply::simple("{"));
            for (k, v) in m.iter() {
                out.push(match k {
                    Doc::String(s) => Reply::text(s.clone()),
                    other => Reply::text(other.to_string()),
                });
                out.push(resp_of(v, resp3)?);
            }
            Reply::Array(out)
        }
    })
}

/// JSON.RESP key [path]
fn json_resp(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = optional_path(args)?;
    let Some(doc) = read_doc(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let resp3 = resp3(ctx);
    if p.multi {
        return Ok(Reply::Array(
            p.values(&doc)
                .into_iter()
                .map(|v| resp_of(v, resp3))
                .collect::<Result<_>>()?,
        ));
    }
    resp_of(first_match(&doc, &p)?, resp3)
}

/// JSON.MSET key path value [key path value ...]: each as JSON.SET would, all or none. The
/// arguments are checked first; the sets run in an overlay committed as one batch (under the
/// exclusive exec lock, as JSON.SET: `EXCLUSIVE`), so no client sees part of it and a crash
/// keeps all of it or none.
fn json_mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let triples = &args[1..];
    if triples.len() % 3 != 0 {
        return Err(Error::WrongArity("json.mset".into()));
    }
    let mut sets = Vec::with_capacity(triples.len() / 3);
    for t in triples.chunks_exact(3) {
        sets.push((&t[0], JsonPath::parse(&t[1])?, from_json_slice(&t[2])?));
    }
    let overlay = crate::txn::Overlay::new(ctx.store);
    {
        let sub = Ctx {
            shared: ctx.shared,
            session: &mut *ctx.session,
            store: &overlay,
            locking: super::Locking::Held,
        };
        for (key, p, value) in &sets {
            let reply = modify_doc(&sub, key, |old| set_at(old, p, value, false, false))?;
            if reply == Reply::Nil {
                // A `$` path whose parent is not there: RedisJSON fails the whole command.
                return Err(p.missing());
            }
        }
    }
    overlay.commit()?;
    Ok(Reply::ok())
}

/// RFC 7396's merge patch: objects merge member by member, a `null` member removes, anything
/// else replaces.
fn merge_patch(target: &mut Doc, patch: &Doc) {
    let Doc::Map(changes) = patch else {
        *target = patch.clone();
        return;
    };
    if !matches!(target, Doc::Map(_)) {
        *target = Doc::Map(DocMap::new());
    }
    let Doc::Map(m) = target else {
        return;
    };
    for (k, v) in changes.iter() {
        if *v == Doc::Null {
            m.remove(k);
        } else if let Some(slot) = m.get_mut(k) {
            merge_patch(slot, v);
        } else {
            let mut fresh = Doc::Null;
            merge_patch(&mut fresh, v);
            m.insert(k.clone(), fresh);
        }
    }
}

/// JSON.MERGE key path value: the merge patch applied at every match; where nothing matches,
/// created as JSON.SET would.
fn json_merge(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let patch = from_json_slice(&args[3])?;
    modify_doc(ctx, &args[1], |old| {
        let Some(mut doc) = old else {
            let mut fresh = Doc::Null;
            merge_patch(&mut fresh, &patch);
            return set_at(None, &p, &fresh, false, false);
        };
        let found = p.locate(&doc);
        if found.is_empty() {
            let mut fresh = Doc::Null;
            merge_patch(&mut fresh, &patch);
            return set_at(Some(doc), &p, &fresh, false, false);
        }
        for loc in &found {
            if let Some(slot) = doc.get_path_mut(&doc_path(loc)) {
                merge_patch(slot, &patch);
            }
        }
        Ok((DocWrite::Put(doc), Reply::ok()))
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::resp::Reply;

    /// A document's expiry record left without its document (a crash between the two deletes
    /// of DEL or JSON.DEL in earlier builds) is not inherited by a new document of that name:
    /// it would have expired, and active expiry deleted, a document nobody gave an expiry.
    #[test]
    fn a_new_document_does_not_inherit_an_orphaned_expiry_time() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["JSON.SET", "other", "$", "1"]), Reply::ok());
        let at = crate::keyspace::now_ms() + 100_000_000;
        h.shared
            .backend
            .put(&crate::keyspace::doc_ttl_key(0, b"doc"), &at.to_le_bytes())
            .unwrap();
        assert_eq!(h.run(&["JSON.SET", "doc", "$", "1"]), Reply::ok());
        assert_eq!(h.run(&["TTL", "doc"]), Reply::Int(-1));
        // DEL and JSON.DEL remove a document with its expiry record: a new one starts clean.
        for del in [&["DEL", "doc"][..], &["JSON.DEL", "doc", "$"][..]] {
            assert_eq!(h.run(&["JSON.SET", "doc", "$", "1"]), Reply::ok());
            assert_eq!(h.run(&["EXPIRE", "doc", "1000"]), Reply::Int(1));
            assert_eq!(h.run(del), Reply::Int(1));
            assert_eq!(
                h.shared
                    .backend
                    .get(&crate::keyspace::doc_ttl_key(0, b"doc"))
                    .unwrap(),
                None,
                "{del:?}"
            );
            assert_eq!(h.run(&["JSON.SET", "doc", "$", "1"]), Reply::ok());
            assert_eq!(h.run(&["TTL", "doc"]), Reply::Int(-1), "{del:?}");
        }
    }

    fn ints(v: &[Option<i64>]) -> Reply {
        Reply::Array(v.iter().map(|x| x.map_or(Reply::Nil, Reply::Int)).collect())
    }

    /// RedisJSON's answers to paths that match at every depth, as redis-py's test suite
    /// (tests/test_json.py, run against RedisJSON) records them: one entry per match in
    /// document order for `$` paths, nil where the value is of another type.
    #[test]
    fn dollar_paths_answer_per_match_like_redisjson() {
        let mut h = Harness::new();
        let set = |h: &mut Harness, key: &str, json: &str| {
            assert_eq!(h.run(&["JSON.SET", key, "$", json]), Reply::ok());
        };
        set(
            &mut h,
            "t",
            r#"{"a":["foo"],"nested1":{"a":false},"nested2":{"a":31},"nested3":{"a":true}}"#,
        );
        assert_eq!(
            h.run(&["JSON.TOGGLE", "t", "$..a"]),
            ints(&[None, Some(1), None, Some(0)])
        );
        assert_eq!(
            h.run(&["JSON.GET", "t", "$..a"]),
            bulk(r#"[["foo"],true,31,false]"#)
        );
        assert!(h.run(&["JSON.TOGGLE", "nodoc", "$..a"]).is_error());
        assert_eq!(h.run(&["JSON.TOGGLE", "t", ".nested1.a"]), bulk("false"));
        assert!(h.run(&["JSON.TOGGLE", "t", ".nested2.a"]).is_error());

        set(&mut h, "d", r#"{"a":1,"nested":{"a":2,"b":3}}"#);
        assert_eq!(h.run(&["JSON.DEL", "d", "$..a"]), Reply::Int(2));
        assert_eq!(
            h.run(&["JSON.GET", "d", "$"]),
            bulk(r#"[{"nested":{"b":3}}]"#)
        );
        // A match inside a deleted match is not counted.
        set(
            &mut h,
            "d",
            r#"{"a":{"a":2,"b":3},"b":["a","b"],"nested":{"b":[true,"a","b"]}}"#,
        );
        assert_eq!(h.run(&["JSON.FORGET", "d", "$..a"]), Reply::Int(1));
        assert_eq!(
            h.run(&["JSON.GET", "d"]),
            bulk(r#"{"b":["a","b"],"nested":{"b":[true,"a","b"]}}"#)
        );
        set(
            &mut h,
            "d",
            r#"[{"ciao":["x"],"nested":[{"ciao":[1]},{"ciao":[2]},{"ciaoc":[3]},{"ciao":[4]},{"e":[5]}]}]"#,
        );
        assert_eq!(
            h.run(&["JSON.DEL", "d", r#"$.[0]["nested"]..ciao"#]),
            Reply::Int(3)
        );
        assert_eq!(
            h.run(&["JSON.GET", "d"]),
            bulk(r#"[{"ciao":["x"],"nested":[{},{},{"ciaoc":[3]},{},{"e":[5]}]}]"#)
        );

        set(
            &mut h,
            "s",
            r#"{"a":"foo","nested1":{"a":"hello"},"nested2":{"a":31}}"#,
        );
        assert_eq!(
            h.run(&["JSON.STRAPPEND", "s", "$..a", r#""bar""#]),
            ints(&[Some(6), Some(8), None])
        );
        assert_eq!(
            h.run(&["JSON.STRAPPEND", "s", "$.nested1.a", r#""baz""#]),
            ints(&[Some(11)])
        );
        assert_eq!(
            h.run(&["JSON.STRLEN", "s", "$..a"]),
            ints(&[Some(6), Some(11), None])
        );
        assert!(h.run(&["JSON.STRLEN", "nodoc", "$..a"]).is_error());
        assert_eq!(h.run(&["JSON.STRLEN", "nodoc", "..a"]), Reply::Nil);
        assert!(h
            .run(&["JSON.STRAPPEND", "nodoc", "$..a", r#""x""#])
            .is_error());
        assert_eq!(h.run(&["JSON.SET", "str", ".", r#""foo""#]), Reply::ok());
        assert_eq!(h.run(&["JSON.STRAPPEND", "str", r#""bar""#]), Reply::Int(6));
        assert_eq!(h.run(&["JSON.GET", "str"]), bulk(r#""foobar""#));

        set(&mut h, "n", r#"{"a":"b","b":[{"a":2},{"a":5},{"a":"c"}]}"#);
        assert_eq!(
            h.run(&["JSON.NUMINCRBY", "n", "$..a", "2"]),
            bulk("[null,4,7,null]")
        );
        assert_eq!(
            h.run(&["JSON.NUMMULTBY", "n", "$..a", "2"]),
            bulk("[null,8,14,null]")
        );
        assert_eq!(
            h.run(&["JSON.NUMMULTBY", "n", "$.b[2].a", "2"]),
            bulk("[null]")
        );
        assert_eq!(h.run(&["JSON.NUMMULTBY", "n", ".b[0].a", "3"]), bulk("24"));
        assert_eq!(h.run(&["JSON.NUMMULTBY", "n", ".b[1].a", "0.5"]), bulk("7"));
        assert_eq!(
            h.run(&["JSON.NUMMULTBY", "n", ".b[1].a", "0.5"]),
            bulk("3.5")
        );
        assert!(h.run(&["JSON.NUMINCRBY", "nodoc", "$..a", "2"]).is_error());

        set(
            &mut h,
            "c",
            r#"{"nested1":{"a":{"foo":10,"bar":20}},"a":["foo"],"nested2":{"a":"claro"},"nested3":{"a":{"baz":50}}}"#,
        );
        assert_eq!(h.run(&["JSON.CLEAR", "c", "$..a"]), Reply::Int(3));
        assert_eq!(
            h.run(&["JSON.GET", "c"]),
            bulk(r#"{"nested1":{"a":{}},"a":[],"nested2":{"a":"claro"},"nested3":{"a":{}}}"#)
        );
        assert_eq!(
            h.run(&["JSON.OBJLEN", "c", "$..a"]),
            ints(&[None, Some(0), None, Some(0)])
        );
        assert_eq!(h.run(&["JSON.OBJLEN", "c", ".nowhere"]), Reply::Nil);
        assert_eq!(
            h.run(&["JSON.OBJLEN", "c", "$.nowhere"]),
            Reply::Array(vec![])
        );
        assert_eq!(
            h.run(&["JSON.TYPE", "c", "$..a"]),
            Reply::Array(vec![
                bulk("array"),
                bulk("object"),
                bulk("string"),
                bulk("object")
            ])
        );
        assert!(!h.run(&["HELLO", "3"]).is_error());
        assert_eq!(
            h.run(&["JSON.TYPE", "c", "$.a"]),
            Reply::Array(vec![Reply::Array(vec![bulk("array")])])
        );
        assert_eq!(
            h.run(&["JSON.TYPE", "c", ".a"]),
            Reply::Array(vec![bulk("array")])
        );
        assert!(!h.run(&["HELLO", "2"]).is_error());
        assert_eq!(h.run(&["JSON.TYPE", "c", ".a"]), Reply::simple("array"));
        assert_eq!(h.run(&["JSON.CLEAR", "c"]), Reply::Int(1));
        assert_eq!(h.run(&["JSON.GET", "c", "$"]), bulk("[{}]"));
        assert!(h.run(&["JSON.CLEAR", "nodoc", "$..a"]).is_error());
    }

    /// JSON.GET of one path of keys and indexes walks the stored bytes; it answers what the
    /// path's matches in the decoded document are (`jsonpath.rs`, tested on its own), for
    /// every location of a few documents, negative indexes, and paths that lead nowhere.
    #[test]
    fn reads_that_walk_the_bytes_match_the_decoded_document() {
        use super::super::jsonpath::{value_at, Query};
        use strata_doc::{from_json_slice, to_json_string, Doc, PathStep};
        let mut h = Harness::new();
        let docs = [
            r#"{"a":{"b":[1,{"c":"x"},[2,3]],"d":null},"e":[],"f":{"g":{"h":true}},"n":1.50}"#,
            r#"[{"a":1},[[]],"s",{"":{"k":[0,-1]}}]"#,
            r#""scalar""#,
        ];
        for (n, json) in docs.iter().enumerate() {
            let key = format!("doc{n}");
            assert_eq!(h.run(&["JSON.SET", &key, "$", json]), Reply::ok());
            let doc = from_json_slice(json.as_bytes()).unwrap();
            let mut paths = vec!["$.nope".to_string(), "$[9]".into(), "$.a.b[-1][-2]".into()];
            for loc in Query::parse("$..*").unwrap().locate(&doc) {
                let mut text = "$".to_string();
                for step in &loc {
                    match step {
                        PathStep::Key(k) => text.push_str(&format!(
                            "[{}]",
                            to_json_string(&Doc::String(k.clone())).unwrap()
                        )),
                        PathStep::Index(i) => text.push_str(&format!("[{i}]")),
                    }
                }
                paths.push(text);
            }
            for path in &paths {
                let q = Query::parse(path).unwrap();
                let want: Vec<Doc> = q
                    .locate(&doc)
                    .iter()
                    .filter_map(|l| value_at(&doc, l).cloned())
                    .collect();
                let text = to_json_string(&Doc::Array(want.clone())).unwrap();
                assert_eq!(
                    h.run(&["JSON.GET", &key, path]),
                    bulk(&text),
                    "{key} {path}"
                );
                let legacy = &path[1..];
                let legacy = if legacy.is_empty() { "." } else { legacy };
                let reply = h.run(&["JSON.GET", &key, legacy]);
                match want.first() {
                    Some(v) => {
                        assert_eq!(reply, bulk(&to_json_string(v).unwrap()), "{key} {legacy}")
                    }
                    None => assert!(reply.is_error(), "{key} {legacy}"),
                }
            }
        }
    }

    /// The array commands, with RedisJSON's bounds (redis-py's test suite records them).
    #[test]
    fn array_commands_follow_redisjson_bounds() {
        let mut h = Harness::new();
        let arr = |h: &mut Harness, json: &str| {
            assert_eq!(h.run(&["JSON.SET", "arr", ".", json]), Reply::ok());
        };
        arr(&mut h, "[0,4]");
        assert_eq!(
            h.run(&["JSON.ARRINSERT", "arr", ".", "1", "1", "2", "3"]),
            Reply::Int(5)
        );
        assert_eq!(h.run(&["JSON.GET", "arr"]), bulk("[0,1,2,3,4]"));
        assert_eq!(
            h.run(&["JSON.ARRINSERT", "arr", ".", "-1", r#""x""#]),
            Reply::Int(6)
        );
        assert_eq!(h.run(&["JSON.GET", "arr"]), bulk(r#"[0,1,2,3,"x",4]"#));
        assert!(h.run(&["JSON.ARRINSERT", "arr", ".", "7", "1"]).is_error());

        arr(&mut h, "[0,1,2,3,4]");
        for (args, want) in [
            (&["1"][..], 1),
            (&["1", "2"], -1),
            (&["4"], 4),
            (&["4", "0"], 4),
            (&["4", "0", "5000"], 4),
            (&["4", "0", "-1"], -1),
            (&["4", "1", "3"], -1),
            (&["9"], -1),
        ] {
            let mut cmd = vec!["JSON.ARRINDEX", "arr", "."];
            cmd.extend_from_slice(args);
            assert_eq!(h.run(&cmd), Reply::Int(want), "{args:?}");
        }
        // An integer and a float of the same value are different values.
        arr(&mut h, "[0,1,3.0,3,2]");
        assert_eq!(h.run(&["JSON.ARRINDEX", "arr", "$", "3"]), ints(&[Some(3)]));
        assert_eq!(
            h.run(&["JSON.ARRINDEX", "arr", "$", "3.0"]),
            ints(&[Some(2)])
        );

        arr(&mut h, "[0,1,2,3,4]");
        assert_eq!(h.run(&["JSON.ARRPOP", "arr", ".", "4"]), bulk("4"));
        assert_eq!(h.run(&["JSON.ARRPOP", "arr", ".", "-1"]), bulk("3"));
        assert_eq!(h.run(&["JSON.ARRPOP", "arr", "."]), bulk("2"));
        assert_eq!(h.run(&["JSON.ARRPOP", "arr", ".", "0"]), bulk("0"));
        assert_eq!(h.run(&["JSON.GET", "arr"]), bulk("[1]"));
        arr(&mut h, "[0,1,2,3,4]");
        assert_eq!(h.run(&["JSON.ARRPOP", "arr", ".", "99"]), bulk("4"));
        arr(&mut h, "[]");
        assert_eq!(h.run(&["JSON.ARRPOP", "arr"]), Reply::Nil);

        for (start, stop, len, left) in [
            ("1", "3", 3, "[1,2,3]"),
            ("-1", "3", 0, "[]"),
            ("3", "99", 2, "[3,4]"),
            ("9", "1", 0, "[]"),
            ("9", "11", 0, "[]"),
            ("-2", "-1", 2, "[3,4]"),
        ] {
            arr(&mut h, "[0,1,2,3,4]");
            assert_eq!(
                h.run(&["JSON.ARRTRIM", "arr", ".", start, stop]),
                Reply::Int(len),
                "{start} {stop}"
            );
            assert_eq!(h.run(&["JSON.GET", "arr"]), bulk(left), "{start} {stop}");
        }

        let doc = r#"{"a":["foo"],"nested1":{"a":["hello",null,"world"]},"nested2":{"a":31}}"#;
        assert_eq!(h.run(&["JSON.SET", "d", "$", doc]), Reply::ok());
        assert_eq!(
            h.run(&["JSON.ARRPOP", "d", "$..a", "1"]),
            Reply::Array(vec![bulk(r#""foo""#), bulk("null"), Reply::Nil])
        );
        assert_eq!(h.run(&["JSON.SET", "d", "$", doc]), Reply::ok());
        // A legacy path changes every array it matches and answers for the last.
        assert_eq!(h.run(&["JSON.ARRPOP", "d", "..a", "1"]), bulk("null"));
        assert_eq!(
            h.run(&["JSON.GET", "d"]),
            bulk(r#"{"a":[],"nested1":{"a":["hello","world"]},"nested2":{"a":31}}"#)
        );
        assert!(h.run(&["JSON.ARRPOP", "nodoc", "..a"]).is_error());
        assert_eq!(h.run(&["JSON.SET", "d", "$", doc]), Reply::ok());
        assert_eq!(
            h.run(&["JSON.ARRTRIM", "d", "$..a", "1", "-1"]),
            ints(&[Some(0), Some(2), None])
        );
        assert_eq!(
            h.run(&["JSON.ARRAPPEND", "d", "$..a", r#""x""#]),
            ints(&[Some(1), Some(3), None])
        );
        assert_eq!(
            h.run(&["JSON.ARRLEN", "d", "$..a"]),
            ints(&[Some(1), Some(3), None])
        );
    }

    /// JSON.RESP's shapes, JSON.MERGE (RFC 7396's rules) and writes through wildcards.
    #[test]
    fn resp_merge_and_wildcard_writes() {
        let mut h = Harness::new();
        let obj = r#"{"foo":"bar","baz":1,"qaz":true,"f":1.5,"n":null,"l":[1]}"#;
        assert_eq!(h.run(&["JSON.SET", "obj", "$", obj]), Reply::ok());
        assert_eq!(
            h.run(&["JSON.RESP", "obj"]),
            Reply::Array(vec![
                Reply::simple("{"),
                bulk("foo"),
                bulk("bar"),
                bulk("baz"),
                Reply::Int(1),
                bulk("qaz"),
                Reply::simple("true"),
                bulk("f"),
                bulk("1.5"),
                bulk("n"),
                Reply::Nil,
                bulk("l"),
                Reply::Array(vec![Reply::simple("["), Reply::Int(1)]),
            ])
        );
        assert_eq!(h.run(&["JSON.RESP", "obj", "foo"]), bulk("bar"));
        // RESP3: floats as doubles; NUMINCRBY answers native numbers in an array.
        assert!(!h.run(&["HELLO", "3"]).is_error());
        assert_eq!(
            h.run(&["JSON.RESP", "obj", "$.f"]),
            Reply::Array(vec![Reply::Double(1.5)])
        );
        assert_eq!(
            h.run(&["JSON.NUMINCRBY", "obj", "$..*", "1"]),
            Reply::Array(vec![
                Reply::Nil,
                Reply::Int(2),
                Reply::Nil,
                Reply::Double(2.5),
                Reply::Nil,
                Reply::Nil,
                Reply::Int(2),
            ])
        );
        assert_eq!(
            h.run(&["JSON.NUMMULTBY", "obj", ".baz", "3"]),
            Reply::Array(vec![Reply::Int(6)])
        );
        assert_eq!(
            h.run(&["JSON.TYPE", "nodoc", ".baz"]),
            Reply::Array(vec![Reply::Nil])
        );
        assert!(!h.run(&["HELLO", "2"]).is_error());
        assert_eq!(h.run(&["JSON.NUMMULTBY", "obj", ".baz", "0.5"]), bulk("3"));
        assert_eq!(h.run(&["JSON.TYPE", "nodoc", ".baz"]), Reply::Nil);
        assert_eq!(h.run(&["JSON.SET", "obj", "$", obj]), Reply::ok());
        assert_eq!(
            h.run(&["JSON.RESP", "obj", "$.baz"]),
            Reply::Array(vec![Reply::Int(1)])
        );

        let p = "p";
        assert_eq!(
            h.run(&[
                "JSON.SET",
                p,
                "$",
                r#"{"person1":{"data":{"name":"John"}}}"#
            ]),
            Reply::ok()
        );
        assert_eq!(
            h.run(&[
                "JSON.MERGE",
                p,
                "$",
                r#"{"person1":{"data":{"hobbies":"reading"}}}"#
            ]),
            Reply::ok()
        );
        assert_eq!(
            h.run(&[
                "JSON.MERGE",
                p,
                "$.person1.data",
                r#"{"country":"Israel","name":null}"#
            ]),
            Reply::ok()
        );
        assert_eq!(
            h.run(&["JSON.GET", p]),
            bulk(r#"{"person1":{"data":{"hobbies":"reading","country":"Israel"}}}"#)
        );
        // A new member where the path's parent is an object; a new document at the root.
        assert_eq!(h.run(&["JSON.MERGE", p, "$.age", "30"]), Reply::ok());
        assert_eq!(h.run(&["JSON.GET", p, "$.age"]), bulk("[30]"));
        assert_eq!(
            h.run(&["JSON.MERGE", "fresh", "$", r#"{"a":1,"b":null}"#]),
            Reply::ok()
        );
        assert_eq!(h.run(&["JSON.GET", "fresh"]), bulk(r#"{"a":1}"#));

        // JSON.MSET: all of it, or (one path cannot be set) none of it.
        assert_eq!(
            h.run(&["JSON.MSET", "m1", "$", "1", "m2", "$", r#"{"a":[]}"#]),
            Reply::ok()
        );
        assert_eq!(
            h.run(&["JSON.MGET", "m1", "m2", "$"]),
            Reply::Array(vec![bulk("[1]"), bulk(r#"[{"a":[]}]"#)])
        );
        assert_eq!(
            h.run(&["JSON.MSET", "m2", "$.a", "2", "m1", "$.x.y", "3"]),
            err("ERR Path '$.x.y' does not exist")
        );
        assert_eq!(h.run(&["JSON.GET", "m2"]), bulk(r#"{"a":[]}"#));
        assert!(h.run(&["JSON.MSET", "m1", "$", "1", "m2", "$"]).is_error());
        assert!(h
            .run(&["JSON.MSET", "m1", "$", "{bad", "m2", "$", "1"])
            .is_error());
        assert_eq!(
            h.run(&["JSON.MSET", "m2", "$.a", "2", "m3", "$", "true"]),
            Reply::ok()
        );
        assert_eq!(
            h.run(&["JSON.MGET", "m2", "m3", "$"]),
            Reply::Array(vec![bulk(r#"[{"a":2}]"#), bulk("[true]")])
        );

        let w = r#"{"x":{"a":1},"y":{"a":2},"z":[{"a":3},{"b":4}]}"#;
        assert_eq!(h.run(&["JSON.SET", "w", "$", w]), Reply::ok());
        assert_eq!(h.run(&["JSON.SET", "w", "$..a", "0"]), Reply::ok());
        assert_eq!(h.run(&["JSON.GET", "w", "$..a"]), bulk("[0,0,0]"));
        // A key the path ends in is created in every object its parent matches.
        assert_eq!(h.run(&["JSON.SET", "w", "$.*.c", "true"]), Reply::ok());
        assert_eq!(h.run(&["JSON.GET", "w", "$..c"]), bulk("[true,true]"));
        assert_eq!(h.run(&["JSON.GET", "w", "$.z[*].b"]), bulk("[4]"));
        assert_eq!(
            h.run(&["JSON.GET", "w", "$.z[0:1].a", "NOESCAPE"]),
            bulk("[0]")
        );
        assert_eq!(h.run(&["JSON.GET", "w", "$.z[?(@.b>1)].b"]), bulk("[4]"));
        assert_eq!(
            h.run(&["JSON.NUMINCRBY", "w", "$.z[?(@.b)].b", "1"]),
            bulk("[5]")
        );
        assert!(h.run(&["JSON.GET", "w", "$.z[?(@.b>)]"]).is_error());
    }

    #[test]
    fn set_get_and_paths() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&[
                "JSON.SET",
                "doc",
                "$",
                r#"{"a":1,"b":{"c":"x"},"arr":[1,2]}"#
            ]),
            Reply::ok()
        );
        assert_eq!(
            h.run(&["JSON.GET", "doc"]),
            bulk(r#"{"a":1,"b":{"c":"x"},"arr":[1,2]}"#)
        );
        assert_eq!(h.run(&["JSON.GET", "doc", "$.b.c"]), bulk(r#"["x"]"#));
        assert_eq!(h.run(&["JSON.GET", "doc", ".b.c"]), bulk(r#""x""#));
        assert_eq!(h.run(&["JSON.GET", "doc", "$.nope"]), bulk("[]"));
        assert_eq!(
            h.run(&["JSON.GET", "doc", ".nope"]),
            err("ERR Path '.nope' does not exist")
        );
        assert_eq!(
            h.run(&["JSON.GET", "doc", "$.a", "$.arr[-1]"]),
            bulk(r#"{"$.a":[1],"$.arr[-1]":[2]}"#)
        );
        assert_eq!(
            h.run(&["JSON.GET", "doc", "INDENT", "  ", "NEWLINE", "\n", "SPACE", " ", "$.b"]),
            bulk("[\n  {\n    \"c\": \"x\"\n  }\n]")
        );
        assert_eq!(h.run(&["JSON.GET", "missing"]), Reply::Nil);
        assert_eq!(h.run(&["JSON.SET", "doc", "$.b.d", "true"]), Reply::ok());
        assert_eq!(h.run(&["JSON.SET", "doc", "$.x.y", "1"]), Reply::Nil);
        assert_eq!(h.run(&["JSON.SET", "doc", "$.a", "5", "NX"]), Reply::Nil);
        assert_eq!(h.run(&["JSON.SET", "doc", "$.z", "5", "XX"]), Reply::Nil);
        assert_eq!(h.run(&["JSON.SET", "doc", "$.a", "5", "XX"]), Reply::ok());
        assert_eq!(
            h.run(&["JSON.SET", "new", "$.a", "1"]),
            err("ERR new objects must be created at the root")
        );
        assert!(h.run(&["JSON.SET", "doc", "$", "{bad"]).is_error());
        assert_eq!(h.run(&["JSON.GET", "doc", "$.a",]), bulk("[5]"));
        assert_eq!(h.run(&["TYPE", "doc"]), Reply::simple("ReJSON-RL"));
        assert_eq!(h.run(&["KEYS", "*"]), Reply::Array(vec![bulk("doc")]));
    }

    #[test]
    fn strings_and_documents_do_not_mix() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "v"]);
        h.run(&["JSON.SET", "j", "$", "{}"]);
        let wrongtype = err("WRONGTYPE Operation against a key holding the wrong kind of value");
        assert_eq!(h.run(&["JSON.SET", "s", "$", "1"]), wrongtype);
        assert_eq!(h.run(&["JSON.GET", "s"]), wrongtype);
        assert_eq!(h.run(&["GET", "j"]), wrongtype);
        assert_eq!(h.run(&["INCR", "j"]), wrongtype);
        assert_eq!(
            h.run(&["JSON.MGET", "s", "j", "$"]),
            Reply::Array(vec![Reply::Nil, bulk("[{}]")])
        );
        // SET overwrites any type, as in Redis.
        assert_eq!(h.run(&["SET", "j", "now a string"]), Reply::ok());
        assert_eq!(h.run(&["TYPE", "j"]), Reply::simple("string"));
        assert_eq!(h.run(&["DBSIZE"]), Reply::Int(2));
        assert_eq!(h.run(&["DEL", "j", "s"]), Reply::Int(2));
    }

    #[test]
    fn modifying_commands() {
        let mut h = Harness::new();
        h.run(&[
            "JSON.SET",
            "d",
            "$",
            r#"{"n":1,"f":1.5,"s":"héllo","arr":[],"o":{"k1":1,"k2":2}}"#,
        ]);
        assert_eq!(h.run(&["JSON.NUMINCRBY", "d", "$.n", "2"]), bulk("[3]"));
        assert_eq!(h.run(&["JSON.NUMINCRBY", "d", ".n", "-4"]), bulk("-1"));
        assert_eq!(h.run(&["JSON.NUMINCRBY", "d", ".f", "1.5"]), bulk("3"));
        assert_eq!(h.run(&["JSON.NUMINCRBY", "d", ".f", "0.25"]), bulk("3.25"));
        assert_eq!(h.run(&["JSON.NUMINCRBY", "d", "$.s", "1"]), bulk("[null]"));
        assert_eq!(
            h.run(&["JSON.NUMINCRBY", "d", ".s", "1"]),
            err("ERR wrong type of path value - expected a number but found string")
        );
        assert_eq!(
            h.run(&["JSON.NUMINCRBY", "nope", ".n", "1"]),
            err("ERR could not perform this operation on a key that doesn't exist")
        );
        assert_eq!(
            h.run(&["JSON.STRLEN", "d", "$.s"]),
            Reply::Array(vec![Reply::Int(6)])
        );
        assert_eq!(h.run(&["JSON.STRLEN", "d", ".s"]), Reply::Int(6));
        assert_eq!(
            h.run(&["JSON.ARRAPPEND", "d", "$.arr", "1", r#""two""#]),
            Reply::Array(vec![Reply::Int(2)])
        );
        assert_eq!(
            h.run(&["JSON.ARRAPPEND", "d", ".arr", "null"]),
            Reply::Int(3)
        );
        assert_eq!(
            h.run(&["JSON.ARRAPPEND", "d", "$.n", "1"]),
            Reply::Array(vec![Reply::Nil])
        );
        assert_eq!(h.run(&["JSON.ARRLEN", "d", ".arr"]), Reply::Int(3));
        assert_eq!(
            h.run(&["JSON.GET", "d", "$.arr"]),
            bulk(r#"[[1,"two",null]]"#)
        );
        assert_eq!(
            h.run(&["JSON.OBJKEYS", "d", "$.o"]),
            Reply::Array(vec![Reply::Array(vec![bulk("k1"), bulk("k2")])])
        );
        assert_eq!(h.run(&["JSON.OBJLEN", "d", "."]), Reply::Int(5));
        assert_eq!(h.run(&["JSON.TYPE", "d"]), Reply::simple("object"));
        assert_eq!(
            h.run(&["JSON.TYPE", "d", "$.f"]),
            Reply::Array(vec![bulk("number")])
        );
        assert_eq!(h.run(&["JSON.TYPE", "d", "$.nope"]), Reply::Array(vec![]));
        assert_eq!(h.run(&["JSON.DEL", "d", "$.o.k1"]), Reply::Int(1));
        assert_eq!(h.run(&["JSON.DEL", "d", "$.arr[-1]"]), Reply::Int(1));
        assert_eq!(h.run(&["JSON.DEL", "d", "$.nope"]), Reply::Int(0));
        assert_eq!(
            h.run(&["JSON.GET", "d", "$.o", "$.arr"]),
            bulk(r#"{"$.o":[{"k2":2}],"$.arr":[[1,"two"]]}"#)
        );
        assert_eq!(h.run(&["JSON.DEL", "d"]), Reply::Int(1));
        assert_eq!(h.run(&["JSON.DEL", "d"]), Reply::Int(0));
        assert_eq!(h.run(&["EXISTS", "d"]), Reply::Int(0));
    }
}
