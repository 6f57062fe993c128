//! JSON document commands, RedisJSON-compatible: JSON.SET, GET, MGET, DEL/FORGET, TYPE,
//! NUMINCRBY, STRLEN, ARRAPPEND, ARRLEN, OBJKEYS, OBJLEN. Documents are strata-doc values stored
//! exactly where `DocStore` keeps them (see `keyspace`), encoded with its codec.
//!
//! Paths: strata-doc's `$`-paths (`$`, `$.a.b`, `$.arr[-1]`, `$["key with space"]`) with
//! RedisJSON's two reply styles: a path starting with `$` answers with a list of matches (here
//! zero or one, as there are no wildcards), a legacy path (`.`, `.a.b`, `a.b`) answers with the
//! single value or an error when it matches nothing. Every write is one atomic
//! read-modify-write of the document (`KvBackend::update`), so concurrent JSON.NUMINCRBY calls
//! never lose an increment.

use bytes::Bytes;
use strata_doc::{
    decode_stored, decode_stored_in, encode_stored, from_json_slice, to_json_string, Doc, DocMap,
    Path, PathStep,
};

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
];

/// A parsed path argument and the reply style it asks for.
struct JsonPath {
    path: Path,
    /// `$...` (list of matches) rather than legacy (single value).
    multi: bool,
    /// The text as the client sent it (for messages and JSON.GET's multi-path object).
    text: String,
}

impl JsonPath {
    fn root() -> JsonPath {
        JsonPath {
            path: Path::root(),
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
        let path = Path::parse(&canonical)?;
        Ok(JsonPath { path, multi, text })
    }

    fn missing(&self) -> Error {
        Error::command(format!("Path '{}' does not exist", self.text))
    }
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

/// The path without its last step, and that step (`None` for the root).
fn split_last(path: &Path) -> Option<(Path, &PathStep)> {
    let (last, init) = path.steps().split_last()?;
    let parent = init.iter().fold(Path::root(), |p, s| match s {
        PathStep::Key(k) => p.key(k.clone()),
        PathStep::Index(i) => p.index(*i),
    });
    Some((parent, last))
}

/// Maps a possibly negative index onto `0..len`.
fn resolve_index(i: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let at = if i < 0 { len + i } else { i };
    (0..len).contains(&at).then_some(at as usize)
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

/// The matches of `path` in `doc` as a JSON array (zero or one element).
fn matches_of(doc: &Doc, path: &Path) -> Doc {
    Doc::Array(doc.get_path(path).cloned().into_iter().collect())
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
            _ => {
                paths.push(JsonPath::parse(a)?);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let Some(doc) = read_doc(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    if paths.is_empty() {
        paths.push(JsonPath::root());
    }
    if let [p] = paths.as_slice() {
        return if p.multi {
            json_text(&matches_of(&doc, &p.path), &fmt)
        } else {
            json_text(doc.get_path(&p.path).ok_or_else(|| p.missing())?, &fmt)
        };
    }
    // Several paths: an object from each path's text to its result.
    let any_multi = paths.iter().any(|p| p.multi);
    let mut out = DocMap::new();
    for p in &paths {
        let result = if any_multi {
            matches_of(&doc, &p.path)
        } else {
            doc.get_path(&p.path).cloned().ok_or_else(|| p.missing())?
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
            json_text(&matches_of(&doc, &p.path), &fmt)?
        } else {
            match doc.get_path(&p.path) {
                Some(v) => json_text(v, &fmt)?,
                None => Reply::Nil,
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
    modify_doc(ctx, &args[1], |old| {
        let Some(mut doc) = old else {
            if !p.path.is_root() {
                return Err(Error::command("new objects must be created at the root"));
            }
            return Ok(if xx {
                (DocWrite::Keep, Reply::Nil)
            } else {
                (DocWrite::Put(value.clone()), Reply::ok())
            });
        };
        let exists = doc.get_path(&p.path).is_some();
        if (nx && exists) || (xx && !exists) {
            return Ok((DocWrite::Keep, Reply::Nil));
        }
        if let Some(slot) = doc.get_path_mut(&p.path) {
            *slot = value.clone();
            return Ok((DocWrite::Put(doc), Reply::ok()));
        }
        // A new member of an existing object; RedisJSON creates nothing deeper than that.
        let created = match split_last(&p.path) {
            Some((parent, PathStep::Key(k))) => match doc.get_path_mut(&parent) {
                Some(Doc::Map(m)) => {
                    m.insert(Doc::String(k.clone()), value.clone());
                    true
                }
                _ => false,
            },
            _ => false,
        };
        match (created, p.multi) {
            (true, _) => Ok((DocWrite::Put(doc), Reply::ok())),
            (false, true) => Ok((DocWrite::Keep, Reply::Nil)),
            (false, false) => Err(p.missing()),
        }
    })
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
        let Some((parent, last)) = split_last(&p.path) else {
            return Ok((DocWrite::Delete, Reply::Int(1)));
        };
        let removed = match (doc.get_path_mut(&parent), last) {
            (Some(Doc::Map(m)), PathStep::Key(k)) => m.remove(&Doc::String(k.clone())).is_some(),
            (Some(Doc::Array(a)), PathStep::Index(i)) => match resolve_index(*i, a.len()) {
                Some(at) => {
                    a.remove(at);
                    true
                }
                None => false,
            },
            _ => false,
        };
        Ok(if removed {
            (DocWrite::Put(doc), Reply::Int(1))
        } else {
            (DocWrite::Keep, Reply::Int(0))
        })
    })
}

/// Runs a read-only query at a path with RedisJSON's reply shapes: `$` paths give an array with
/// one result per match (`Nil` where `f` declines the value's type), legacy paths give the
/// result itself or an error.
fn query(
    ctx: &Ctx<'_>,
    args: &[Bytes],
    want: &str,
    f: impl Fn(&Doc) -> Option<Reply>,
) -> Result<Reply> {
    let p = optional_path(args)?;
    let Some(doc) = read_doc(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let found = doc.get_path(&p.path);
    if p.multi {
        return Ok(Reply::Array(
            found
                .map(|v| f(v).unwrap_or(Reply::Nil))
                .into_iter()
                .collect(),
        ));
    }
    let v = found.ok_or_else(|| p.missing())?;
    f(v).ok_or_else(|| wrong_type_at(want, v))
}

fn json_type(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = optional_path(args)?;
    let Some(doc) = read_doc(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let found = doc.get_path(&p.path);
    Ok(if p.multi {
        Reply::Array(
            found
                .map(|v| Reply::text(type_name(v)))
                .into_iter()
                .collect(),
        )
    } else {
        found.map_or(Reply::Nil, |v| Reply::simple(type_name(v)))
    })
}

fn json_strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "string", |v| match v {
        Doc::String(s) => Some(Reply::Int(s.len() as i64)),
        _ => None,
    })
}

fn json_arrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "array", |v| match v {
        Doc::Array(a) => Some(Reply::Int(a.len() as i64)),
        _ => None,
    })
}

fn json_objlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "object", |v| match v {
        Doc::Map(m) => Some(Reply::Int(m.len() as i64)),
        _ => None,
    })
}

fn json_objkeys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    query(ctx, args, "object", |v| match v {
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
/// a float, refused when not finite.
fn add_numbers(a: &Doc, b: &Doc) -> Result<Doc> {
    if let (Doc::Int(x), Doc::Int(y)) = (a, b) {
        if let Some(sum) = x.checked_add(*y) {
            return Ok(Doc::Int(sum));
        }
    }
    let as_f64 = |d: &Doc| -> Result<f64> {
        match d {
            Doc::Int(i) => Ok(*i as f64),
            Doc::Decimal(x) => x
                .as_str()
                .parse::<f64>()
                .map_err(|_| Error::command("number out of range")),
            _ => Err(Error::command("not a number")),
        }
    };
    let sum = as_f64(a)? + as_f64(b)?;
    if !sum.is_finite() {
        return Err(Error::command("result is not a finite number"));
    }
    // Whole results that fit i64 become integers (1.5 + 1.5 = 3); others keep their digits.
    if sum.fract() == 0.0 && sum.abs() < 9.0e15 {
        return Ok(Doc::Int(sum as i64));
    }
    Ok(Doc::decimal(&crate::num::format_f64(sum))?)
}

fn json_numincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let delta = from_json_slice(&args[3])?;
    if !matches!(delta, Doc::Int(_) | Doc::Decimal(_)) {
        return Err(Error::command(format!(
            "expected a number but found {}",
            type_name(&delta)
        )));
    }
    modify_doc(ctx, &args[1], |old| {
        let mut doc = old.ok_or_else(no_such_key)?;
        let Some(slot) = doc.get_path_mut(&p.path) else {
            return if p.multi {
                Ok((DocWrite::Keep, Reply::text("[]")))
            } else {
                Err(p.missing())
            };
        };
        if !matches!(slot, Doc::Int(_) | Doc::Decimal(_)) {
            return if p.multi {
                Ok((DocWrite::Keep, Reply::text("[null]")))
            } else {
                Err(wrong_type_at("a number", slot))
            };
        }
        let sum = add_numbers(slot, &delta)?;
        let text = to_json_string(&sum)?;
        *slot = sum;
        let reply = if p.multi {
            Reply::text(format!("[{text}]"))
        } else {
            Reply::text(text)
        };
        Ok((DocWrite::Put(doc), reply))
    })
}

fn json_arrappend(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let p = JsonPath::parse(&args[2])?;
    let values = args[3..]
        .iter()
        .map(|v| from_json_slice(v))
        .collect::<std::result::Result<Vec<Doc>, _>>()?;
    modify_doc(ctx, &args[1], |old| {
        let mut doc = old.ok_or_else(no_such_key)?;
        let Some(slot) = doc.get_path_mut(&p.path) else {
            return if p.multi {
                Ok((DocWrite::Keep, Reply::Array(vec![])))
            } else {
                Err(p.missing())
            };
        };
        let Doc::Array(items) = slot else {
            return if p.multi {
                Ok((DocWrite::Keep, Reply::Array(vec![Reply::Nil])))
            } else {
                Err(wrong_type_at("array", slot))
            };
        };
        items.extend(values.iter().cloned());
        let len = Reply::Int(items.len() as i64);
        let reply = if p.multi {
            Reply::Array(vec![len])
        } else {
            len
        };
        Ok((DocWrite::Put(doc), reply))
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
