//! `strata put/get/del/scan`: the server's keyspace from the command line. Keys are Redis
//! strings of database 0, stored exactly as `strata serve` stores them
//! (`strata_server::keyspace`), so `strata put k v` then `redis-cli GET k` on the same data
//! directory gives `v`, and a `SET` over the protocol is what `strata get` prints. Keys past
//! their expiry time are absent here too.

use std::ops::Bound;

use anyhow::Context;
use strata_server::backend::{prefix_end, BatchOp, KvBackend};
use strata_server::keyspace::{self, now_ms, string_key, KeyType, Record, Space};

/// Opens the keyspace of `db` (bringing an older layout to the current one first) and returns
/// the physical database that logical database 0 (the CLI's) maps to (SWAPDB changes it).
pub fn prepare(db: &strata::Db) -> anyhow::Result<keyspace::DbIndex> {
    keyspace::prepare(db).context("preparing the keyspace")?;
    Ok(keyspace::read_db_map(db).context("reading the database map")?[0])
}

/// SET semantics: a JSON document of that name is replaced.
pub fn put(db: &strata::Db, dbi: keyspace::DbIndex, key: &str, value: &str) -> anyhow::Result<()> {
    let mut ops = vec![BatchOp::Put(
        string_key(dbi, key.as_bytes()),
        Record::encode(value.as_bytes(), None),
    )];
    if let Some(doc) = Space::Docs.key(dbi, key.as_bytes()) {
        ops.push(BatchOp::Delete(doc));
        ops.push(BatchOp::Delete(keyspace::doc_ttl_key(dbi, key.as_bytes())));
    }
    KvBackend::write(db, ops)?;
    Ok(())
}

/// The string value of `key`; an error names a key that is absent or holds a document.
pub fn get(db: &strata::Db, dbi: keyspace::DbIndex, key: &str) -> anyhow::Result<Vec<u8>> {
    let now = now_ms();
    if let Some(r) = keyspace::read_record(db, dbi, key.as_bytes(), now)? {
        if r.kind != KeyType::String {
            anyhow::bail!(
                "{key} holds a {}: read it over the protocol (`redis-cli`)",
                r.kind.name()
            );
        }
        return Ok(r.payload.to_vec());
    }
    if keyspace::read_doc_bytes(db, dbi, key.as_bytes(), now)?.is_some() {
        anyhow::bail!("{key} holds a JSON document: read it with `strata doc get {key}`");
    }
    anyhow::bail!("key not found: {key}")
}

/// Removes `key` whatever it holds; true if it existed.
pub fn del(db: &strata::Db, dbi: keyspace::DbIndex, key: &str) -> anyhow::Result<bool> {
    Ok(keyspace::remove(db, dbi, key.as_bytes(), now_ms(), true)?)
}

/// Visits live string keys in `[start, end)` (or under `prefix`), in key order (`reverse`:
/// greatest first), at most `limit` (keys holding other kinds are passed over).
pub fn scan(
    db: &strata::Db,
    dbi: keyspace::DbIndex,
    (prefix, start, end): (Option<&str>, Option<&str>, Option<&str>),
    limit: usize,
    reverse: bool,
    out: &mut dyn FnMut(&[u8], &[u8]),
) -> anyhow::Result<()> {
    let (lo, hi) = match prefix {
        Some(p) => {
            let lower = string_key(dbi, p.as_bytes());
            (Bound::Included(lower.clone()), prefix_end(&lower))
        }
        None => (
            Bound::Included(string_key(dbi, start.unwrap_or("").as_bytes())),
            match end {
                Some(e) => Bound::Excluded(string_key(dbi, e.as_bytes())),
                None => prefix_end(&string_key(dbi, b"")),
            },
        ),
    };
    let now = now_ms();
    let mut shown = 0;
    let mut failure = None;
    let mut visit = |k: &[u8], v: &[u8]| {
        if shown >= limit {
            return false;
        }
        let Some(user) = Space::Records.user_key(dbi, k) else {
            return true;
        };
        match Record::decode(bytes::Bytes::copy_from_slice(v)) {
            Ok(r) if r.expired(now) || r.kind != KeyType::String => true,
            Ok(r) => {
                out(&user, &r.payload);
                shown += 1;
                true
            }
            Err(e) => {
                failure = Some(e);
                false
            }
        }
    };
    if reverse {
        for entry in db.scan_rev((lo, hi)) {
            let (k, v) = entry?;
            if !visit(&k, &v) {
                break;
            }
        }
    } else {
        KvBackend::scan(db, lo, hi, &mut visit)?;
    }
    failure.map_or(Ok(()), |e| Err(e.into()))
}

/// An ingested `key<TAB>value` line as the engine entry of a database-0 string.
pub fn ingest_entry(dbi: keyspace::DbIndex, key: &[u8], value: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (string_key(dbi, key), Record::encode(value, None))
}
