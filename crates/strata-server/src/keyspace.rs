//! How Redis keys map to engine keys. A Redis key names either a string or a JSON document; each
//! kind lives under its own one-byte namespace prefix in the engine, so a document written by the
//! server is the same record the `strata doc` tools and `strata_doc::DocStore` read.
//!
//! Invariant (kept by the write commands, best effort under races between two writers of the
//! same name with different types): a name exists in at most one namespace. Readers check the
//! string namespace first, so if a race ever leaves both, the key behaves as a string.

use std::ops::Bound;

use std::sync::Arc;

use strata_doc::{Doc, DocStore, NameStorage, NAMES_KEY};

use crate::backend::{prefix_end, KvBackend, Write};
use crate::error::{Error, Result};

/// Engine-key prefix of Redis strings: `s` + the key's bytes.
pub const STRING_PREFIX: u8 = b's';
/// Engine-key prefix of documents (`0xFF 'D'`), followed by strata-doc's order-preserving key
/// encoding of the name as a string document: exactly `DocStore::engine_key`, so documents set
/// over the protocol are the ones `strata doc` and `DocStore` see, and vice versa.
pub use strata_doc::DOC_KEY_PREFIX;

/// Tag byte of a string in strata-doc's key encoding (its documented, versioned format:
/// `0x40`, the UTF-8 bytes with each 0x00 written as 0x00 0xFF, then 0x00 0x01). Only the prefix
/// form below depends on it; full keys come from `DocStore::engine_key` itself.
const DOC_STRING_TAG: u8 = 0x40;

/// Engine keys the server keeps for itself and FLUSHDB leaves alone: strata-doc's key-name
/// record, which stored documents refer to (it only grows; a name with no document left costs
/// its few bytes).
pub fn is_internal(engine_key: &[u8]) -> bool {
    engine_key == NAMES_KEY
}

/// The server's backend as the keeper of strata-doc's key-name record (so documents written over
/// the protocol share names with `DocStore`).
pub struct BackendNames(pub Arc<dyn KvBackend>);

fn to_doc_error(e: Error) -> strata_doc::Error {
    match e {
        Error::Doc(e) => e,
        Error::Engine(e) => strata_doc::Error::Engine(e),
        other => strata_doc::Error::Storage(Box::new(other)),
    }
}

impl NameStorage for BackendNames {
    fn read(&self) -> strata_doc::Result<Option<Vec<u8>>> {
        Ok(self
            .0
            .get(&NAMES_KEY)
            .map_err(to_doc_error)?
            .map(|b| b.to_vec()))
    }

    fn update(&self, f: &mut strata_doc::RecordUpdate<'_>) -> strata_doc::Result<()> {
        let mut failure = None;
        self.0
            .update(&NAMES_KEY, &mut |old| {
                Ok(match f(old) {
                    Ok(Some(new)) => Write::Put(new),
                    Ok(None) => Write::Keep,
                    Err(e) => {
                        failure = Some(e);
                        Write::Keep
                    }
                })
            })
            .map_err(to_doc_error)?;
        failure.map_or(Ok(()), Err)
    }

    fn sync(&self) -> strata_doc::Result<()> {
        self.0.sync().map_err(to_doc_error)
    }
}

/// The kinds of value a key can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// A binary-safe string.
    String,
    /// A JSON document (RedisJSON's type).
    Json,
}

impl KeyType {
    /// Every kind, in scan order.
    pub const ALL: [KeyType; 2] = [KeyType::String, KeyType::Json];

    /// The name TYPE reports.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Json => "ReJSON-RL",
        }
    }

    /// The engine key of a Redis key of this kind; `None` when this kind cannot hold such a name
    /// (document names must be UTF-8, as strata-doc keys are text).
    pub fn key(self, user_key: &[u8]) -> Option<Vec<u8>> {
        match self {
            KeyType::String => Some(string_key(user_key)),
            KeyType::Json => {
                let name = std::str::from_utf8(user_key).ok()?;
                DocStore::engine_key(&Doc::String(name.to_string())).ok()
            }
        }
    }

    /// The engine-key prefix shared by every key of this kind whose name starts with
    /// `user_prefix`.
    pub fn prefix(self, user_prefix: &[u8]) -> Vec<u8> {
        match self {
            KeyType::String => string_key(user_prefix),
            KeyType::Json => {
                let mut p = Vec::with_capacity(user_prefix.len() + 4);
                p.extend_from_slice(&DOC_KEY_PREFIX);
                p.push(DOC_STRING_TAG);
                for &b in user_prefix {
                    p.push(b);
                    if b == 0 {
                        p.push(0xff);
                    }
                }
                p
            }
        }
    }

    /// The Redis key an engine key of this kind stands for; `None` for entries under the prefix
    /// that are not Redis keys (documents keyed by numbers or arrays, loaded by other tools).
    pub fn user_key(self, engine_key: &[u8]) -> Option<Vec<u8>> {
        match self {
            KeyType::String => engine_key
                .strip_prefix(&[STRING_PREFIX])
                .map(<[u8]>::to_vec),
            KeyType::Json => match DocStore::doc_key(engine_key) {
                Ok(Doc::String(name)) => Some(name.into_bytes()),
                _ => None,
            },
        }
    }
}

/// The engine key of a Redis string.
pub fn string_key(user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 1);
    k.push(STRING_PREFIX);
    k.extend_from_slice(user_key);
    k
}

/// Whether the store holds at least one JSON document (one step of a scan).
pub fn any_document(b: &dyn KvBackend) -> Result<bool> {
    let mut found = false;
    b.scan(
        Bound::Included(DOC_KEY_PREFIX.to_vec()),
        prefix_end(&DOC_KEY_PREFIX),
        &mut |_, _| {
            found = true;
            false
        },
    )?;
    Ok(found)
}

/// The kind of value `key` holds, if any.
pub fn type_of(b: &dyn KvBackend, key: &[u8]) -> Result<Option<KeyType>> {
    for t in KeyType::ALL {
        if exists_as(b, t, key)? {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// True when `key` exists with kind `t`.
pub fn exists_as(b: &dyn KvBackend, t: KeyType, key: &[u8]) -> Result<bool> {
    match t.key(key) {
        Some(k) => Ok(b.get(&k)?.is_some()),
        None => Ok(false),
    }
}

/// Removes `key` whatever it holds; true if something was removed. Each namespace is cleared with
/// an atomic read-and-delete, so concurrent DELs of one key count it once.
pub fn remove(b: &dyn KvBackend, key: &[u8]) -> Result<bool> {
    let mut removed = false;
    for t in KeyType::ALL {
        let Some(k) = t.key(key) else { continue };
        b.update(&k, &mut |old| {
            if old.is_some() {
                removed = true;
                Ok(Write::Delete)
            } else {
                Ok(Write::Keep)
            }
        })?;
    }
    Ok(removed)
}

/// Visits the user keys of kind `t` that start with `prefix` and sort after `after` (exclusive),
/// in engine order, until `visit` returns false.
pub fn visit_keys(
    b: &dyn KvBackend,
    t: KeyType,
    prefix: &[u8],
    after: Option<&[u8]>,
    visit: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<()> {
    let lower = t.prefix(prefix);
    let start = match after.and_then(|a| t.key(a)) {
        Some(a) if a >= lower => Bound::Excluded(a),
        _ => Bound::Included(lower.clone()),
    };
    b.scan(start, prefix_end(&lower), &mut |k, _| match t.user_key(k) {
        Some(user) => visit(&user),
        None => true,
    })
}

/// Number of keys of every kind (a full key scan: O(keys)).
pub fn count(b: &dyn KvBackend) -> Result<u64> {
    let mut n = 0u64;
    for t in KeyType::ALL {
        visit_keys(b, t, b"", None, &mut |_| {
            n += 1;
            true
        })?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn document_prefixes_agree_with_docstore_keys() {
        let names = ["", "a", "ab", "a\0b", "user:1", "user:10", "üñí", "a\0"];
        for name in names {
            let full = KeyType::Json.key(name.as_bytes()).unwrap();
            assert_eq!(KeyType::Json.user_key(&full).unwrap(), name.as_bytes());
            for other in names {
                let p = KeyType::Json.prefix(other.as_bytes());
                assert_eq!(
                    full.starts_with(&p),
                    name.as_bytes().starts_with(other.as_bytes()),
                    "name {name:?} prefix {other:?}"
                );
            }
        }
        assert_eq!(KeyType::Json.key(b"\xff"), None);
        assert_eq!(KeyType::String.user_key(&string_key(b"k")).unwrap(), b"k");
    }
}
