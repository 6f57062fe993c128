//! What the commands of every collection type share (`collection.rs` has the layout): an
//! atomic edit of one collection inside one `update_group`, and reading a live collection with
//! Redis's WRONGTYPE rule.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::strings::json_exists;
use super::{int_arg, is, Ctx};
use crate::backend::{BatchOp, GroupRead};
use crate::collection::{
    element_key, element_suffix, order_tag, read_live as read_record, visit_elements_from,
    visit_zset_members_from, Ceiling, FieldOrder, Floor, Live, Meta, ORDER_FIELDS_MAX,
};
use crate::config::EncodingLimits;
use crate::error::{Error, Result};
use crate::glob;
use crate::keyspace::{now_ms, string_key, DbIndex, Encoding, KeyType, Record};
use crate::resp::Reply;
use crate::state::{lock, ScanPosition};

/// Whether a collection of `kind` holding `count` elements, one of them `sub` -> `value`, is
/// past Redis's compact encoding (`limits`: `hash-max-listpack-entries` and `-value` for a
/// hash, a `listpack` within both; `set-max-intset-entries` for a set of integers, an
/// `intset`; `zset-max-listpack-entries` and `-value` for a sorted set). A collection that
/// ever outgrew them is a `hashtable` or `skiplist` (Redis never converts back).
pub(crate) fn outgrows(
    limits: &EncodingLimits,
    kind: KeyType,
    count: u64,
    sub: &[u8],
    value: &[u8],
) -> bool {
    let long = |b: &[u8], max: u64| b.len() as u64 > max;
    match kind {
        KeyType::Set => count > limits.set_max_intset_entries || !is_intset_member(sub),
        KeyType::Zset => {
            count > limits.zset_max_listpack_entries
                || long(sub, limits.zset_max_listpack_value_bytes)
        }
        _ => {
            count > limits.hash_max_listpack_entries
                || long(sub, limits.hash_max_listpack_value_bytes)
                || long(value, limits.hash_max_listpack_value_bytes)
        }
    }
}

/// Whether Redis's intset can hold `member`: a canonical decimal 64-bit integer.
pub(crate) fn is_intset_member(member: &[u8]) -> bool {
    intset_value(member).is_some()
}

/// The number an intset holds for `member`, if it can hold it.
fn intset_value(member: &[u8]) -> Option<i64> {
    if member.len() > 20 {
        return None;
    }
    crate::num::parse_i64(member).filter(|n| n.to_string().as_bytes() == member)
}

/// Puts set members in an intset's order, ascending numbers, when `limits` let Redis hold them
/// as one (every member an integer, at most `set-max-intset-entries`); leaves them as they
/// are otherwise. Redis 7.0 answers a set in its compact encoding, and a result it builds as
/// a new set (SUNION, SDIFF, the whole set from SRANDMEMBER or SPOP), in that order; any other
/// set is a hash table, whose order no client can rely on.
pub(crate) fn in_intset_order<T>(
    limits: &EncodingLimits,
    members: &mut [T],
    member: impl Fn(&T) -> &[u8],
) {
    let fits = members.len() as u64 <= limits.set_max_intset_entries
        && members.iter().all(|m| intset_value(member(m)).is_some());
    if fits {
        members.sort_by_cached_key(|m| intset_value(member(m)));
    }
}

/// A kept field order in an edit: as the record holds it until the edit changes it (most
/// edits of a hash only set fields it holds, and need not decode it).
struct OrderEdit {
    /// As read (`None`: the record lists none yet).
    read: Option<FieldOrder>,
    /// The tags once this edit changed them.
    changed: Option<Vec<u32>>,
}

impl OrderEdit {
    fn len(&self) -> usize {
        match (&self.changed, &self.read) {
            (Some(tags), _) => tags.len(),
            (None, read) => read.as_ref().map_or(0, FieldOrder::len),
        }
    }

    /// The tags, to change.
    fn tags_mut(&mut self) -> &mut Vec<u32> {
        let read = &self.read;
        self.changed
            .get_or_insert_with(|| read.as_ref().map(FieldOrder::tags).unwrap_or_default())
    }

    /// The tags as they stand.
    fn tags(&self) -> Vec<u32> {
        match (&self.changed, &self.read) {
            (Some(tags), _) => tags.clone(),
            (None, read) => read.as_ref().map(FieldOrder::tags).unwrap_or_default(),
        }
    }
}

/// A collection being changed inside one `update_group`: pending element writes over what
/// the store holds, the count kept as they are made.
pub(crate) struct Edit<'r, 'a> {
    read: &'r GroupRead<'a>,
    kind: KeyType,
    db: DbIndex,
    name: &'r [u8],
    /// The collection as found (`None`: absent or expired).
    pub found: Option<Live>,
    version: u64,
    count: u64,
    big: bool,
    floor: Floor,
    /// A hash's field order, kept while it is in the compact encoding (`None`: not kept).
    order: Option<OrderEdit>,
    /// Whether this edit changed the order.
    order_changed: bool,
    /// Element -> new value (`None`: removed).
    pending: BTreeMap<Vec<u8>, Option<Bytes>>,
    limits: EncodingLimits,
}

impl Edit<'_, '_> {
    /// The element's value (a set member's is empty), pending writes first.
    pub fn get(&self, sub: &[u8]) -> Result<Option<Bytes>> {
        if let Some(v) = self.pending.get(sub) {
            return Ok(v.clone());
        }
        if self.found.is_none() {
            return Ok(None);
        }
        self.read
            .get(&element_key(self.db, self.name, self.version, sub))
    }

    /// Whether the element exists, pending writes first; its value is not read (a hash
    /// field's value in a value log stays there).
    pub fn contains(&self, sub: &[u8]) -> Result<bool> {
        if let Some(v) = self.pending.get(sub) {
            return Ok(v.is_some());
        }
        if self.found.is_none() {
            return Ok(false);
        }
        self.read
            .contains(&element_key(self.db, self.name, self.version, sub))
    }

    /// Sets an element; true when it is new.
    pub fn set(&mut self, sub: &[u8], value: Bytes) -> Result<bool> {
        let new = !self.contains(sub)?;
        self.put(sub, value, new);
        Ok(new)
    }

    /// Writes an element whose presence the caller has just looked up (`new`: it was absent).
    fn put(&mut self, sub: &[u8], value: Bytes, new: bool) {
        if new {
            self.count += 1;
            self.floor.lower_to(&element_suffix(sub));
            if let Some(order) = &mut self.order {
                // A listpack appends a new field.
                order.tags_mut().push(order_tag(sub));
                self.order_changed = true;
            }
        }
        self.big |= outgrows(&self.limits, self.kind, self.count, sub, &value);
        let too_long = self
            .order
            .as_ref()
            .is_some_and(|o| o.len() > ORDER_FIELDS_MAX);
        if (self.big || too_long) && self.order.take().is_some() {
            self.order_changed = true;
        }
        self.pending.insert(sub.to_vec(), Some(value));
    }

    /// Takes a removed element out of the kept order.
    fn unlist(&mut self, sub: &[u8]) {
        let Some(order) = &mut self.order else {
            return;
        };
        let tags = order.tags_mut();
        let p = order_tag(sub);
        if let Some(i) = tags.iter().position(|&q| q == p) {
            tags.remove(i);
            self.order_changed = true;
        }
    }

    /// Adds a member that carries no value (a set's); true when it is new. A member already
    /// there is not written again: Redis's SADD of a member it holds changes nothing, so
    /// nothing is written and WATCH and tracking are not told.
    pub fn add(&mut self, sub: &[u8]) -> Result<bool> {
        if self.contains(sub)? {
            return Ok(false);
        }
        self.put(sub, Bytes::new(), true);
        Ok(true)
    }

    /// Removes an element; true when it existed.
    pub fn remove(&mut self, sub: &[u8]) -> Result<bool> {
        let existed = self.contains(sub)?;
        if existed {
            self.count -= 1;
            self.pending.insert(sub.to_vec(), None);
            self.unlist(sub);
        }
        Ok(existed)
    }

    /// Removes an element this update just read from the collection's own range (under the
    /// same lock, so it is there): no second read of it.
    pub fn remove_scanned(&mut self, sub: &[u8]) {
        if self.pending.insert(sub.to_vec(), None) != Some(None) {
            self.count -= 1;
            self.unlist(sub);
        }
    }

    /// Raises the collection's floor to element `sub`, which the caller knows no live element
    /// is below once this edit is written (SPOP: it read every element below from the floor).
    pub fn raise_floor(&mut self, sub: &[u8]) {
        self.floor.raise_to(&element_suffix(sub));
    }

    /// The collection's metadata as it stands (what the reads of an edit start from).
    pub fn meta(&self) -> Meta {
        Meta {
            version: self.version,
            count: self.count,
            floor: self.floor,
            ceiling: Ceiling::default(),
        }
    }

    /// Elements after pending writes.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The record payload of `meta`, with the kept order.
    fn encode_meta(&self, meta: &Meta) -> Vec<u8> {
        match &self.order {
            Some(order) => meta.encode_ordered(&order.tags()),
            None => meta.encode(),
        }
    }

    /// The engine writes that make the edit.
    fn finish(self) -> Vec<BatchOp> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        let record_key = string_key(self.db, self.name);
        if self.count == 0 {
            // The record goes; the elements of this version are disowned with it (compaction
            // drops them), so no per-element delete is written.
            return if self.found.is_some() {
                vec![BatchOp::Delete(record_key)]
            } else {
                Vec::new()
            };
        }
        let mut ops = Vec::with_capacity(self.pending.len() + 1);
        let meta = self.meta();
        let unchanged = !self.order_changed
            && self
                .found
                .as_ref()
                .is_some_and(|f| f.meta == meta && f.big == self.big);
        if !unchanged {
            let expiry = self.found.as_ref().and_then(|f| f.expire_at_ms);
            let encoding = if self.big {
                Encoding::Raw
            } else {
                Encoding::ByContent
            };
            ops.push(BatchOp::Put(
                record_key,
                Record::encode_collection(self.kind, &self.encode_meta(&meta), expiry, encoding),
            ));
        }
        for (sub, value) in self.pending {
            let k = element_key(self.db, self.name, self.version, &sub);
            ops.push(match value {
                Some(v) => BatchOp::Put(k, v.to_vec()),
                None => BatchOp::Delete(k),
            });
        }
        ops
    }
}

/// Starts an edit of `key` whose record read `record` (`fresh`: as if the key were absent,
/// for commands that replace whatever it holds).
fn start<'r, 'a>(
    ctx: &Ctx<'_>,
    read: &'r GroupRead<'a>,
    key: &'r [u8],
    kind: KeyType,
    record: Option<Bytes>,
    fresh: bool,
) -> Result<Edit<'r, 'a>> {
    let found = if fresh {
        None
    } else {
        crate::collection::live(record, now_ms(), kind)?
    };
    let (meta, big) = match &found {
        Some(h) => (h.meta, h.big),
        None => (Meta::new(ctx.shared.versions.next(), 0), false),
    };
    // A compact hash keeps its fields' order; one whose record lists none (written before
    // orders were kept) starts listing what is added from now on.
    let order = (kind == KeyType::Hash && !big).then(|| OrderEdit {
        read: found.as_ref().and_then(|h| h.order.clone()),
        changed: None,
    });
    Ok(Edit {
        read,
        kind,
        db: ctx.dbi(),
        name: key,
        found,
        version: meta.version,
        count: meta.count,
        big,
        floor: meta.floor,
        order,
        order_changed: false,
        pending: BTreeMap::new(),
        limits: ctx.shared.encodings(),
    })
}

/// One atomic read-modify-write of the Redis key `key` of the selected database (its record
/// and elements: one `update_group` on its partition), what every collection kind's update
/// stands on: WRONGTYPE when the name holds a document; `f` gets the group's reads and the
/// record as stored, and returns the writes and its answer; writes count as one change.
pub(crate) fn update_key<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(&GroupRead<'_>, Option<Bytes>) -> Result<(Vec<BatchOp>, T)>,
) -> Result<T> {
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    let record_key = string_key(ctx.dbi(), key);
    let mut out = None;
    let mut wrote = false;
    ctx.db().update_group(&record_key, &mut |read| {
        let (ops, answer) = f(read, read.get(&record_key)?)?;
        wrote = !ops.is_empty();
        out = Some(answer);
        Ok(ops)
    })?;
    if wrote {
        ctx.shared.note_writes(1);
    }
    out.ok_or_else(|| Error::command("internal error: the key's update did not run"))
}

/// Runs `f` on the collection `key` of `kind` in the selected database as one atomic
/// read-modify-write ([`update_key`]). WRONGTYPE when the name holds another kind or a
/// document. `f` sees `found: None` for an absent key; if it adds elements, the key is created
/// with a new version.
pub(crate) fn modify<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    kind: KeyType,
    mut f: impl FnMut(&mut Edit<'_, '_>) -> Result<T>,
) -> Result<T> {
    update_key(ctx, key, |read, record| {
        let mut edit = start(ctx, read, key, kind, record, false)?;
        let out = f(&mut edit)?;
        Ok((edit.finish(), out))
    })
}

/// [`modify`] for a command that holds the exec lock exclusively and writes several keys in
/// one batch (SMOVE, SUNIONSTORE...): returns the writes instead of applying them. `fresh`:
/// start from an absent key whatever `key` holds (the caller removes what was there).
pub(crate) fn plan<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    kind: KeyType,
    fresh: bool,
    f: impl FnOnce(&mut Edit<'_, '_>) -> Result<T>,
) -> Result<(T, Vec<BatchOp>)> {
    if !fresh && json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    let record_key = string_key(ctx.dbi(), key);
    let get = |k: &[u8]| ctx.db().get(k);
    let read = GroupRead::new(&get);
    let record = if fresh {
        None
    } else {
        ctx.db().get(&record_key)?
    };
    let mut edit = start(ctx, &read, key, kind, record, fresh)?;
    let out = f(&mut edit)?;
    Ok((out, edit.finish()))
}

/// The live collection `key` of `kind` in the selected database for a read command
/// (WRONGTYPE for another kind, documents included).
pub(crate) fn read_live(ctx: &Ctx<'_>, key: &[u8], kind: KeyType) -> Result<Option<Live>> {
    let found = read_record(ctx.db(), ctx.dbi(), key, now_ms(), kind)?;
    if found.is_none() && json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(found)
}

/// HSCAN's, SSCAN's and ZSCAN's default COUNT.
const SCAN_COUNT_DEFAULT: usize = 10;

/// HSCAN / SSCAN / ZSCAN `key cursor [MATCH pattern] [COUNT n]`: a collection in Redis's
/// compact encoding is returned whole in one call (cursor 0), whatever COUNT says, as Redis
/// does; a larger one pages by COUNT elements, its cursor naming the last element returned
/// (`state::CursorTable`). Hashes answer field and value, sets the member, sorted sets the
/// member and its score (`%.17g`, as Redis's `d2string`).
pub(crate) fn scan_elements(ctx: &Ctx<'_>, args: &[Bytes], kind: KeyType) -> Result<Reply> {
    let key = &args[1];
    let cursor: u64 = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::command("invalid cursor"))?;
    // Redis's order: the cursor, then the key (absent: an empty answer, whatever the options
    // say), then the options.
    let Some(live) = read_live(ctx, key, kind)? else {
        return Ok(Reply::Array(vec![
            Reply::text("0".to_string()),
            Reply::Array(Vec::new()),
        ]));
    };
    let mut pattern: Option<&[u8]> = None;
    let mut count = SCAN_COUNT_DEFAULT;
    let mut i = 3;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(Error::Syntax)?;
        if is(&args[i], "MATCH") {
            pattern = Some(value);
        } else if is(&args[i], "COUNT") {
            count = match int_arg(value)? {
                n if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(Error::Syntax),
            };
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    let after = lock(&ctx.shared.cursors).resume(cursor).after_key;
    let whole = !live.big;
    let mut found = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    let mut more = false;
    let mut examined = 0usize;
    let mut failure = None;
    let db = ctx.dbi();
    let mut visit = |sub: &[u8], value: &[u8]| {
        if !whole && examined == count {
            more = true;
            return false;
        }
        examined += 1;
        last = Some(sub.to_vec());
        if pattern.is_none_or(|p| glob::matches(p, sub, false)) {
            found.push(Reply::Bulk(Bytes::copy_from_slice(sub)));
            match kind {
                KeyType::Hash => found.push(Reply::Bulk(Bytes::copy_from_slice(value))),
                KeyType::Zset => match <[u8; 8]>::try_from(value) {
                    Ok(score) => found.push(Reply::Bulk(Bytes::from(crate::num::format_g17(
                        f64::from_le_bytes(score),
                    )))),
                    Err(_) => {
                        failure =
                            Some(Error::command("stored data is damaged: a sorted set score"));
                        return false;
                    }
                },
                _ => {}
            }
        }
        true
    };
    if kind == KeyType::Zset && whole {
        // All of a compact sorted set in its listpack's order: by score.
        for (member, score) in crate::collection::zset_entries(ctx.db(), db, key, &live.meta)? {
            if !visit(&member, &score.to_le_bytes()) {
                break;
            }
        }
    } else if kind == KeyType::Zset {
        visit_zset_members_from(
            ctx.db(),
            db,
            key,
            live.meta.version,
            after.as_deref(),
            &mut visit,
        )?;
    } else if whole {
        // All of a compact hash or set, in Redis's order: a listpack's (the fields as added),
        // an intset's (ascending numbers).
        let mut all = crate::collection::read_fields_in_order(ctx.db(), db, key, &live)?;
        if kind == KeyType::Set {
            in_intset_order(&ctx.shared.encodings(), &mut all, |(m, _)| m);
        }
        for (sub, value) in &all {
            if !visit(sub, value) {
                break;
            }
        }
    } else {
        visit_elements_from(ctx.db(), db, key, &live.meta, after.as_deref(), &mut visit)?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let cursor = if more {
        lock(&ctx.shared.cursors).insert(ScanPosition {
            namespace: 0,
            after_key: last,
        })
    } else {
        0
    };
    Ok(Reply::Array(vec![
        Reply::text(cursor.to_string()),
        Reply::Array(found),
    ]))
}
