//! COMMAND DOCS as redis-server 7.0 answers it: each command's summary, since, group,
//! complexity, history, arguments and subcommands (`docs.json`, generated from redis-server's
//! COMMAND DOCS by `scripts/redis-command-docs.py`; Redis's data, BSD-3-Clause). redis-cli 7
//! reads it at start for its command hints. A command Redis does not have (the JSON family)
//! is described by its own `Spec`.
//!
//! The file keeps RESP3's types: a map is `{"%": [[key, value], ...]}`, a set `{"~": [...]}`, a
//! simple string `{"+": "..."}`, an array a JSON array, a bulk string a JSON string, an integer
//! a JSON number. It is read once, at the first COMMAND DOCS.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::Value;

use crate::resp::Reply;

static DOCS_JSON: &str = include_str!("docs.json");

/// Command name (lowercase) -> its docs reply.
fn table() -> &'static HashMap<String, Reply> {
    static TABLE: OnceLock<HashMap<String, Reply>> = OnceLock::new();
    TABLE.get_or_init(|| match parse(DOCS_JSON) {
        Ok(t) => t,
        Err(e) => {
            // Embedded at build time and checked by a test: only a broken build gets here.
            tracing::error!(error = %e, "the embedded COMMAND DOCS table does not parse");
            HashMap::new()
        }
    })
}

/// Redis's docs of `name` (lowercase), if Redis has the command.
pub(crate) fn of(name: &str) -> Option<Reply> {
    table().get(name).cloned()
}

/// Redis's docs of subcommand `full` (`config|get`) of `container`, from its container's
/// `subcommands` map.
pub(crate) fn of_subcommand(container: &str, full: &str) -> Option<Reply> {
    let Some(Reply::Map(fields)) = table().get(container) else {
        return None;
    };
    let (_, Reply::Map(subs)) = fields
        .iter()
        .find(|(k, _)| *k == Reply::Bulk(Bytes::from_static(b"subcommands")))?
    else {
        return None;
    };
    subs.iter()
        .find(|(k, _)| *k == Reply::Bulk(Bytes::copy_from_slice(full.as_bytes())))
        .map(|(_, v)| v.clone())
}

fn parse(json: &str) -> Result<HashMap<String, Reply>, String> {
    let Value::Object(all) = serde_json::from_str::<Value>(json).map_err(|e| e.to_string())? else {
        return Err("not an object".into());
    };
    all.into_iter()
        .map(|(name, docs)| Ok((name, reply(docs)?)))
        .collect()
}

/// One value of the file's encoding as a reply.
fn reply(v: Value) -> Result<Reply, String> {
    Ok(match v {
        Value::String(s) => Reply::Bulk(Bytes::from(s)),
        Value::Number(n) => Reply::Int(n.as_i64().ok_or_else(|| format!("not an integer: {n}"))?),
        Value::Array(items) => {
            Reply::Array(items.into_iter().map(reply).collect::<Result<_, _>>()?)
        }
        Value::Object(mut o) if o.len() == 1 => {
            if let Some(Value::Array(pairs)) = o.remove("%") {
                Reply::Map(
                    pairs
                        .into_iter()
                        .map(|p| match p {
                            Value::Array(kv) if kv.len() == 2 => {
                                let mut kv = kv.into_iter();
                                match (kv.next(), kv.next()) {
                                    (Some(k), Some(v)) => Ok((reply(k)?, reply(v)?)),
                                    _ => Err("a map entry is not a pair".to_string()),
                                }
                            }
                            other => Err(format!("a map entry is not a pair: {other}")),
                        })
                        .collect::<Result<_, _>>()?,
                )
            } else if let Some(Value::Array(items)) = o.remove("~") {
                Reply::Set(items.into_iter().map(reply).collect::<Result<_, _>>()?)
            } else if let Some(Value::String(s)) = o.remove("+") {
                Reply::Simple(Cow::Owned(s))
            } else {
                return Err("an object that is not a map, set or simple string".into());
            }
        }
        other => return Err(format!("unexpected value: {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_holds_redis_commands() {
        let t = parse(DOCS_JSON).unwrap();
        assert!(t.len() >= 200, "{} commands", t.len());
        let Some(Reply::Map(get)) = t.get("get") else {
            panic!("no docs for get")
        };
        assert_eq!(get[0].0, Reply::Bulk(Bytes::from_static(b"summary")));
        assert!(
            matches!(t.get("client"), Some(Reply::Map(m)) if m.iter().any(|(k, _)| *k == Reply::Bulk(Bytes::from_static(b"subcommands"))))
        );
    }

    #[test]
    fn the_encoding_keeps_resp3_types() {
        let t =
            parse(r#"{"x":{"%":[["a",1],["b",{"~":[{"+":"optional"}]}],["c",["d"]]]}}"#).unwrap();
        assert_eq!(
            t["x"],
            Reply::Map(vec![
                (Reply::Bulk(Bytes::from_static(b"a")), Reply::Int(1)),
                (
                    Reply::Bulk(Bytes::from_static(b"b")),
                    Reply::Set(vec![Reply::Simple(Cow::Borrowed("optional"))])
                ),
                (
                    Reply::Bulk(Bytes::from_static(b"c")),
                    Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"d"))])
                ),
            ])
        );
        assert!(parse(r#"{"x":{"?":1}}"#).is_err());
        assert!(parse(r#"{"x":1.5}"#).is_err());
    }
}
