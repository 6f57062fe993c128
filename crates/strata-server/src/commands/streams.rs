//! Stream commands (XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XREAD [BLOCK], XSETID, XINFO,
//! the consumer groups below) with redis-server 7.0's replies and errors, on the layout of
//! `stream.rs`. Every write is one atomic update of the stream's partition (the record and its entries). XREAD
//! BLOCK waits as BLPOP does (`lists::block_or_time_out`); XADD wakes it. Consumer groups:
//! XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS/CONSUMERS (their
//! records are engine keys of the stream, `stream.rs`). Blocked XREADGROUP readers of one
//! group take new entries in the order they blocked, as in Redis (`state::WaitKind`).
//!
//! Trimming follows Redis's nodes (`stream_node.rs`): XADD fills them as Redis does, `~`
//! removes whole nodes only (so it keeps what Redis keeps), an exact trim and XDEL count
//! entries deleted in their node. XINFO STREAM's `radix-tree-keys` is the node count;
//! `radix-tree-nodes` (the radix tree's inner nodes) is an estimate.

use bytes::Bytes;

use super::strings::json_exists;
use super::{is, Ctx, Spec};
use crate::backend::BatchOp;
use crate::backend::KvBackend;
use crate::error::{Error, Result};
use crate::keyspace::DbIndex;
use crate::keyspace::{now_ms, string_key, Encoding, KeyType, Record};
use crate::notify;
use crate::resp::{Protocol, Reply};
use crate::stream::{
    consumer_key, decode_fields, encode_fields, entries, entry_key, group_key, pel_key, pending,
    ConsumerTimes, Entry, Group, Nack, NodeCount, StreamId, StreamMeta,
};
use crate::stream_node::{node_key, Node, NodeLimits, NODE_TAG};
use std::collections::BTreeMap;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "xadd", arity: -5, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), group: "stream", summary: "Appends a new message to a stream. Creates the key if it doesn't exist.", handler: xadd },
    Spec { name: "xlen", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), group: "stream", summary: "Return the number of messages in a stream.", handler: xlen },
    Spec { name: "xrange", arity: -4, flags: &["readonly"], keys: (1, 1, 1), group: "stream", summary: "Returns the messages from a stream within a range of IDs.", handler: xrange },
    Spec { name: "xrevrange", arity: -4, flags: &["readonly"], keys: (1, 1, 1), group: "stream", summary: "Returns the messages from a stream within a range of IDs in reverse order.", handler: xrevrange },
    Spec { name: "xdel", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "stream", summary: "Returns the number of messages after removing them from a stream.", handler: xdel },
    Spec { name: "xtrim", arity: -4, flags: &["write"], keys: (1, 1, 1), group: "stream", summary: "Deletes messages from the beginning of a stream.", handler: xtrim },
    Spec { name: "xread", arity: -4, flags: &["readonly", "blocking"], keys: (0, 0, 0), group: "stream", summary: "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", handler: xread },
    Spec { name: "xsetid", arity: -3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), group: "stream", summary: "An internal command for replicating stream values.", handler: xsetid },
    Spec { name: "xreadgroup", arity: -7, flags: &["write", "blocking"], keys: (0, 0, 0), group: "stream", summary: "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.", handler: xreadgroup },
    Spec { name: "xgroup", arity: -2, flags: &["write"], keys: (2, 2, 1), group: "stream", summary: "A container for consumer groups commands (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP).", handler: xgroup },
    Spec { name: "xack", arity: -4, flags: &["write", "fast"], keys: (1, 1, 1), group: "stream", summary: "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", handler: xack },
    Spec { name: "xpending", arity: -3, flags: &["readonly"], keys: (1, 1, 1), group: "stream", summary: "Returns the information and entries from a stream consumer group's pending entries list.", handler: xpending },
    Spec { name: "xclaim", arity: -6, flags: &["write", "fast"], keys: (1, 1, 1), group: "stream", summary: "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", handler: xclaim },
    Spec { name: "xautoclaim", arity: -6, flags: &["write", "fast"], keys: (1, 1, 1), group: "stream", summary: "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", handler: xautoclaim },
    Spec { name: "xinfo", arity: -2, flags: &["readonly"], keys: (2, 2, 1), group: "stream", summary: "A container for stream introspection commands (STREAM, HELP).", handler: xinfo },
];

/// Entries a blocked XREAD without COUNT returns per stream (Redis's default).
const XREAD_BLOCKED_DEFAULT_COUNT: usize = 1000;

fn invalid_id() -> Error {
    Error::command("Invalid stream ID specified as stream command argument")
}

/// An ID argument: `-` and `+` as the ends when `strict` is false.
fn id_arg(arg: &[u8], missing_seq: u64, strict: bool) -> Result<StreamId> {
    match arg {
        b"-" if !strict => Ok(StreamId::MIN),
        b"+" if !strict => Ok(StreamId::MAX),
        _ => StreamId::parse(arg, missing_seq).ok_or_else(invalid_id),
    }
}

/// A range end of XRANGE: `(` makes it exclusive (then `-` and `+` are refused).
fn interval_arg(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool)> {
    match arg.strip_prefix(b"(") {
        Some(rest) if !rest.is_empty() => Ok((id_arg(rest, missing_seq, true)?, true)),
        _ => Ok((id_arg(arg, missing_seq, false)?, false)),
    }
}

/// A stream as found: its metadata and expiry.
#[derive(Debug, Clone, Copy)]
struct Found {
    meta: StreamMeta,
    expire_at_ms: Option<u64>,
}

/// Interprets a record for a stream command: `None` when absent or expired, WRONGTYPE for
/// another kind.
fn found(record: Option<Bytes>) -> Result<Option<Found>> {
    let Some(bytes) = record else {
        return Ok(None);
    };
    let r = Record::decode(bytes)?;
    if r.expired(now_ms()) {
        return Ok(None);
    }
    if r.kind != KeyType::Stream {
        return Err(Error::WrongType);
    }
    Ok(Some(Found {
        meta: StreamMeta::decode(&r.payload)?,
        expire_at_ms: r.expire_at_ms,
    }))
}

/// The live stream `key` of the selected database for a read.
fn read_stream(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Found>> {
    let f = found(ctx.db().get(&string_key(ctx.dbi(), key))?)?;
    if f.is_none() && json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(f)
}

/// What an update of a stream decided: its new metadata (`None`: leave the record alone),
/// the entry writes, and the command's answer.
struct Change<T> {
    meta: Option<StreamMeta>,
    ops: Vec<BatchOp>,
    out: T,
}

impl<T> Change<T> {
    fn none(out: T) -> Self {
        Change {
            meta: None,
            ops: Vec::new(),
            out,
        }
    }
}

/// Runs `f` on the stream `key` (absent: `None`) as one atomic update of its partition; the
/// record is rewritten with the metadata `f` returns, keeping the stream's expiry.
fn modify<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(Option<Found>) -> Result<Change<T>>,
) -> Result<T> {
    let record_key = string_key(ctx.dbi(), key);
    super::collections::update_key(ctx, key, |_, record| {
        let current = found(record)?;
        let change = f(current)?;
        let mut ops = change.ops;
        if let Some(meta) = change.meta {
            let expiry = current.and_then(|c| c.expire_at_ms);
            ops.push(BatchOp::Put(
                record_key.clone(),
                Record::encode_collection(
                    KeyType::Stream,
                    &meta.encode(),
                    expiry,
                    Encoding::ByContent,
                ),
            ));
        }
        Ok((ops, change.out))
    })
}

/// [`modify`] for the commands Redis 7.0 runs without `signalModifiedKey`: XSETID, XGROUP,
/// XREADGROUP, XACK, XCLAIM, XAUTOCLAIM change a stream that exists without telling WATCH or
/// CLIENT TRACKING (XGROUP CREATE MKSTREAM, which makes the stream, does tell them).
fn modify_unsignalled<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(Option<Found>) -> Result<Change<T>>,
) -> Result<T> {
    modify(ctx, key, |current| {
        if current.is_some() {
            crate::txn::leave_unsignalled();
        }
        f(current)
    })
}

/// An entry as Redis replies it: `[id, [field, value, ...]]`.
fn entry_reply((id, fields): &Entry) -> Result<Reply> {
    Ok(Reply::Array(vec![
        Reply::Bulk(id.to_bytes()),
        Reply::Array(
            decode_fields(fields)?
                .into_iter()
                .map(Reply::Bulk)
                .collect(),
        ),
    ]))
}

fn entries_reply(list: &[Entry]) -> Result<Reply> {
    Ok(Reply::Array(
        list.iter().map(entry_reply).collect::<Result<Vec<_>>>()?,
    ))
}

/// How to trim (XADD's and XTRIM's options).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Trim {
    None,
    MaxLen(u64),
    MinId(StreamId),
}

/// XADD's and XTRIM's options (Redis's `streamParseAddOrTrimArgsOrReply`): the trim, whether
/// it is approximate (`~`), its LIMIT (`None`: not given), NOMKSTREAM, and for XADD the ID's
/// position and value (`None`: `*`; `Some((id, false))`: `ms-*`).
struct AddArgs {
    trim: Trim,
    approx: bool,
    limit: Option<u64>,
    no_mkstream: bool,
    id_at: usize,
    id: Option<(StreamId, bool)>,
}

impl AddArgs {
    /// The trim with the most entries it may remove (0: no bound): LIMIT, or for `~` without
    /// one Redis's bound of 100 nodes (`100 * stream-node-max-entries`, between 1 and
    /// 1 000 000; 10 000 when that is 0).
    fn trim_spec(&self, ctx: &Ctx<'_>) -> TrimSpec {
        let limit = match (self.approx, self.limit) {
            (false, _) => 0,
            (true, Some(n)) => n,
            (true, None) => {
                match 100u64.saturating_mul(ctx.shared.encodings().stream_node_max_entries) {
                    0 => 10_000,
                    n => n.min(1_000_000),
                }
            }
        };
        TrimSpec {
            trim: self.trim,
            approx: self.approx,
            limit,
        }
    }
}

/// A trim as it runs: the strategy, `~`, and the most entries it may remove (0: no bound).
#[derive(Debug, Clone, Copy)]
struct TrimSpec {
    trim: Trim,
    approx: bool,
    limit: u64,
}

fn parse_add_or_trim(args: &[Bytes], xadd: bool) -> Result<AddArgs> {
    let mut parsed = AddArgs {
        trim: Trim::None,
        approx: false,
        limit: None,
        no_mkstream: false,
        id_at: args.len(),
        id: None,
    };
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if xadd && opt.as_ref() == b"*" {
            parsed.id_at = i;
            break;
        } else if (is(opt, "MAXLEN") || is(opt, "MINID")) && more > 0 {
            if parsed.trim != Trim::None {
                return Err(Error::command(
                    "syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            parsed.approx = false;
            if more >= 2 && args[i + 1].as_ref() == b"~" {
                parsed.approx = true;
                i += 1;
            } else if more >= 2 && args[i + 1].as_ref() == b"=" {
                i += 1;
            }
            if is(opt, "MAXLEN") {
                let n = super::int_arg(&args[i + 1])?;
                let n = u64::try_from(n)
                    .map_err(|_| Error::command("The MAXLEN argument must be >= 0."))?;
                parsed.trim = Trim::MaxLen(n);
            } else {
                parsed.trim = Trim::MinId(id_arg(&args[i + 1], 0, true)?);
            }
            i += 2;
        } else if is(opt, "LIMIT") && more > 0 {
            let n = super::int_arg(&args[i + 1])?;
            parsed.limit = Some(
                u64::try_from(n).map_err(|_| Error::command("The LIMIT argument must be >= 0."))?,
            );
            i += 2;
        } else if xadd && is(opt, "NOMKSTREAM") {
            parsed.no_mkstream = true;
            i += 1;
        } else if xadd {
            // The ID: `ms-*` leaves the sequence to the stream.
            let id = match opt.strip_suffix(b"-*") {
                Some(ms) if !ms.is_empty() && !ms.contains(&b'-') => (id_arg(ms, 0, true)?, false),
                _ => (id_arg(opt, 0, true)?, true),
            };
            parsed.id = Some(id);
            parsed.id_at = i;
            break;
        } else {
            return Err(Error::Syntax);
        }
    }
    if parsed.limit.is_some_and(|n| n > 0) && parsed.trim == Trim::None {
        return Err(Error::command(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && parsed.trim == Trim::None {
        return Err(Error::command(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if parsed.limit.is_some() && !parsed.approx {
        return Err(Error::command(
            "syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    Ok(parsed)
}

/// A command's view of one stream's nodes (`stream_node.rs`): the count, first and last node
/// as the stream's record keeps them, and the other nodes' records with the changes the
/// command made so far, which [`Nodes::finish`] adds to its batch (reads within a command see
/// the store before the batch).
struct Nodes<'a> {
    db: DbIndex,
    name: &'a [u8],
    version: u64,
    /// The record's part (the last node lives there, without a record of its own).
    count: NodeCount,
    /// Records of other nodes written (`Some`) or deleted (`None`) by the command.
    changed: BTreeMap<StreamId, Option<Node>>,
}

impl<'a> Nodes<'a> {
    /// The nodes of `meta`'s stream, rebuilt first if it was written before streams kept them
    /// (format 1): its live entries appended again in order with the current bounds, as they
    /// would have been without the deletions.
    fn of(ctx: &Ctx<'_>, name: &'a [u8], meta: &StreamMeta) -> Result<Self> {
        let mut nodes = Nodes {
            db: ctx.dbi(),
            name,
            version: meta.version,
            count: meta.nodes.unwrap_or_default(),
            changed: BTreeMap::new(),
        };
        if meta.nodes.is_none() {
            let limits = node_limits(ctx);
            let mut failure = None;
            crate::stream::visit_entries(
                ctx.db(),
                ctx.dbi(),
                name,
                meta,
                (StreamId::MIN, StreamId::MAX),
                &mut |id, v| match decode_fields(v) {
                    Ok(pairs) => {
                        nodes.append(id, &pairs, limits);
                        true
                    }
                    Err(e) => {
                        failure = Some(e);
                        false
                    }
                },
            )?;
            if let Some(e) = failure {
                return Err(e);
            }
        }
        Ok(nodes)
    }

    fn damaged() -> Error {
        Error::command("stored data is damaged: a stream's node records")
    }

    fn is_tail(&self, first: StreamId) -> bool {
        self.count.count > 0 && first == self.count.tail.first
    }

    /// Adds entry `id` to the last node if it has room (Redis's `streamAppendItem`), or to a
    /// new last node (the old one gets its record).
    fn append(&mut self, id: StreamId, pairs: &[Bytes], limits: NodeLimits) {
        if self.count.count > 0 && self.count.tail.takes(pairs, limits) {
            self.count.tail.append(id, pairs);
            return;
        }
        if self.count.count == 0 {
            self.count.head = id;
        } else {
            let old = self.count.tail;
            self.changed.insert(old.first, Some(old));
        }
        self.count.tail = Node::start(id, pairs);
        self.count.count += 1;
    }

    /// The node whose first ID is `first`.
    fn get(&self, b: &dyn KvBackend, first: StreamId) -> Result<Option<Node>> {
        if self.is_tail(first) {
            return Ok(Some(self.count.tail));
        }
        if let Some(n) = self.changed.get(&first) {
            return Ok(*n);
        }
        match b.get(&node_key(self.db, self.name, self.version, first))? {
            Some(v) => Ok(Some(Node::decode(first, &v)?)),
            None => Ok(None),
        }
    }

    /// Stores a changed node.
    fn set(&mut self, node: Node) {
        if self.is_tail(node.first) {
            self.count.tail = node;
        } else {
            self.changed.insert(node.first, Some(node));
        }
    }

    /// Removes node `first` (XDEL of its last entry): the one after it becomes the first, the
    /// one before it the last.
    fn remove(&mut self, b: &dyn KvBackend, first: StreamId) -> Result<()> {
        let was_tail = self.is_tail(first);
        if !was_tail {
            self.changed.insert(first, None);
        }
        self.count.count = self.count.count.saturating_sub(1);
        if self.count.count == 0 {
            self.count = NodeCount::default();
            return Ok(());
        }
        if was_tail {
            let below = first.prev().ok_or_else(Self::damaged)?;
            let last = self.last_at_or_below(b, below)?.ok_or_else(Self::damaged)?;
            let node = self.get(b, last)?.ok_or_else(Self::damaged)?;
            // The new last node lives in the stream's record.
            self.changed.insert(last, None);
            self.count.tail = node;
        }
        if first == self.count.head {
            let mut next = None;
            self.visit_in_order(b, &mut |n| {
                next = Some(n.first);
                false
            })?;
            self.count.head = next.ok_or_else(Self::damaged)?;
        }
        Ok(())
    }

    /// The stored node records with first IDs in `range`, from the top when `rev`, until
    /// `visit` returns false (first ID and record).
    fn scan_stored(
        &self,
        b: &dyn KvBackend,
        range: (StreamId, StreamId),
        rev: bool,
        visit: &mut dyn FnMut(StreamId, &[u8]) -> bool,
    ) -> Result<()> {
        let at = (self.name, self.version, NODE_TAG);
        crate::stream::visit_ids(b, self.db, at, range, rev, visit)
    }

    /// The greatest first ID at or below `id` of a node the stream has.
    fn last_at_or_below(&self, b: &dyn KvBackend, id: StreamId) -> Result<Option<StreamId>> {
        if self.count.count == 0 {
            return Ok(None);
        }
        if self.count.tail.first <= id {
            return Ok(Some(self.count.tail.first));
        }
        if id < self.count.head {
            return Ok(None);
        }
        let mut stored = None;
        self.scan_stored(b, (self.count.head, id), true, &mut |first, _| {
            if self.changed.get(&first).is_some_and(Option::is_none) {
                return true;
            }
            stored = Some(first);
            false
        })?;
        let changed = self
            .changed
            .range(..=id)
            .rev()
            .find(|(_, n)| n.is_some())
            .map(|(first, _)| *first);
        Ok(stored.max(changed))
    }

    /// Visits the nodes in ID order, the last one last, until `visit` returns false.
    fn visit_in_order(
        &self,
        b: &dyn KvBackend,
        visit: &mut dyn FnMut(&Node) -> bool,
    ) -> Result<()> {
        if self.count.count == 0 {
            return Ok(());
        }
        let tail = self.count.tail;
        // Records only in `changed` (the last node before this command's XADD started a new
        // one) are visited in their place among the stored ones.
        let mut made = self
            .changed
            .iter()
            .filter_map(|(first, n)| n.as_ref().map(|n| (*first, *n)))
            .peekable();
        let mut going = true;
        let mut failure = None;
        // Records lie from the first node up to the last one, which has none (one node: no
        // scan).
        if let Some(below_tail) = tail.first.prev().filter(|below| self.count.head <= *below) {
            self.scan_stored(b, (self.count.head, below_tail), false, &mut |first, v| {
                while let Some((f, n)) = made.next_if(|(f, _)| *f <= first) {
                    if f < first && !visit(&n) {
                        going = false;
                        return false;
                    }
                }
                let node = match self.changed.get(&first) {
                    Some(Some(n)) => *n,
                    Some(None) => return true,
                    None => match Node::decode(first, v) {
                        Ok(n) => n,
                        Err(e) => {
                            failure = Some(e);
                            return false;
                        }
                    },
                };
                going = visit(&node);
                going
            })?;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        for (f, n) in made {
            if !going {
                return Ok(());
            }
            if f < tail.first {
                going = visit(&n);
            }
        }
        if going {
            visit(&tail);
        }
        Ok(())
    }

    /// The command's node record writes; the count, first and last node for the stream's
    /// record.
    fn finish(self, ops: &mut Vec<BatchOp>) -> NodeCount {
        for (first, n) in self.changed {
            let k = node_key(self.db, self.name, self.version, first);
            ops.push(match n {
                Some(n) => BatchOp::Put(k, n.encode()),
                None => BatchOp::Delete(k),
            });
        }
        self.count
    }
}

fn node_limits(ctx: &Ctx<'_>) -> NodeLimits {
    let e = ctx.shared.encodings();
    NodeLimits {
        bytes_max: e.stream_node_max_bytes,
        entries_max: e.stream_node_max_entries,
    }
}

/// Trims `meta`'s stream of `name` as Redis 7.0's `streamTrim` does: from the first node,
/// whole nodes go while the length stays at or above MAXLEN (or the node's last ID is below
/// MINID) and the LIMIT allows; then, unless `~`, entries of the next node one by one. Appends
/// the entry deletes, updates the metadata and `nodes`; returns how many entries went.
/// `pending`: an entry XADD is adding in the same batch (the last one, counted in `meta` and
/// its node but not stored yet), which the trim may remove too.
fn trim(
    ctx: &Ctx<'_>,
    name: &[u8],
    meta: &mut StreamMeta,
    nodes: &mut Nodes<'_>,
    spec: TrimSpec,
    pending: Option<StreamId>,
    ops: &mut Vec<BatchOp>,
) -> Result<u64> {
    if spec.trim == Trim::None {
        return Ok(0);
    }
    // Which nodes go whole, and the node trimmed entry by entry, decided on the counts; the
    // node the walk stopped at is the new first one.
    let mut length = meta.length;
    let mut planned = 0u64;
    let mut whole: Vec<Node> = Vec::new();
    let mut partial: Option<Node> = None;
    let mut stopped_at: Option<StreamId> = None;
    nodes.visit_in_order(ctx.db(), &mut |node| {
        let stop = match spec.trim {
            Trim::MaxLen(max) if length <= max => true,
            _ => spec.limit > 0 && planned + node.live > spec.limit,
        };
        let remove = !stop
            && match spec.trim {
                Trim::MaxLen(max) => length.saturating_sub(node.live) >= max,
                Trim::MinId(min) => node.last < min,
                Trim::None => false,
            };
        if remove {
            length -= node.live.min(length);
            planned += node.live;
            whole.push(*node);
            return true;
        }
        if !stop && !spec.approx {
            partial = Some(*node);
        }
        stopped_at = Some(node.first);
        false
    })?;
    let db = ctx.dbi();
    // The entries that go, in ID order.
    let mut gone: Vec<StreamId> = Vec::new();
    if let Some(upto) = whole.last().map(|n| n.last) {
        crate::stream::visit_entries(
            ctx.db(),
            db,
            name,
            meta,
            (StreamId::MIN, upto),
            &mut |id, _| {
                gone.push(id);
                true
            },
        )?;
        gone.extend(pending.filter(|p| *p <= upto));
        match stopped_at {
            Some(head) => {
                for n in &whole {
                    nodes.changed.insert(n.first, None);
                }
                nodes.count.count -= whole.len() as u64;
                nodes.count.head = head;
            }
            None => {
                // Every node went, the last one (which has no record) with them.
                for n in &whole[..whole.len() - 1] {
                    nodes.changed.insert(n.first, None);
                }
                nodes.count = NodeCount::default();
            }
        }
    }
    let mut length = meta.length - (gone.len() as u64).min(meta.length);
    // The first live entry after the trim, when the walk below meets it.
    let mut next_first = None;
    if let Some(mut node) = partial {
        let span = (node.first, node.last);
        // Its live entries one by one until the trim is done: the one it stops at stays.
        let mut step = |id: StreamId| {
            let done = match spec.trim {
                Trim::MaxLen(max) => length <= max,
                Trim::MinId(min) => id >= min,
                Trim::None => true,
            };
            if done {
                next_first = Some(id);
            } else {
                gone.push(id);
                node.delete_one();
                length -= 1;
            }
            !done
        };
        let mut going = true;
        crate::stream::visit_entries(ctx.db(), db, name, meta, span, &mut |id, _| {
            going = step(id);
            going
        })?;
        if let Some(p) = pending.filter(|p| going && span.0 <= *p && *p <= span.1) {
            step(p);
        }
        nodes.set(node);
    }
    for &id in &gone {
        // After XADD's put of a pending entry in the same batch: the delete wins.
        ops.push(BatchOp::Delete(entry_key(db, name, meta.version, id)));
    }
    meta.length = length;
    if let Some(&last_gone) = gone.last() {
        meta.first_id = StreamId::MIN;
        if meta.length > 0 {
            if next_first.is_none() {
                next_first = pending.filter(|p| *p > last_gone);
                if let Some(from) = last_gone.next() {
                    crate::stream::visit_entries(
                        ctx.db(),
                        db,
                        name,
                        meta,
                        (from, StreamId::MAX),
                        &mut |id, _| {
                            next_first = Some(id);
                            false
                        },
                    )?;
                }
            }
            meta.first_id = next_first.unwrap_or(StreamId::MIN);
        }
    }
    Ok(gone.len() as u64)
}

fn xadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let parsed = parse_add_or_trim(args, true)?;
    let fields_at = parsed.id_at + 1;
    if args.len() < fields_at + 2 || (args.len() - fields_at) % 2 == 1 {
        return Err(Error::WrongArity("xadd".into()));
    }
    if parsed.id == Some((StreamId::MIN, true)) {
        return Err(Error::command(
            "The ID specified in XADD must be greater than 0-0",
        ));
    }
    let key = &args[1];
    let db = ctx.dbi();
    let value = encode_fields(&args[fields_at..]);
    let versions = &ctx.shared.versions;
    let spec = parsed.trim_spec(ctx);
    let limits = node_limits(ctx);
    let outcome = modify(ctx, key, |current| {
        let mut meta = match current {
            Some(f) => f.meta,
            None if parsed.no_mkstream => return Ok(Change::none(None)),
            None => StreamMeta::new(versions.next()),
        };
        if meta.last_id == StreamId::MAX {
            return Err(Error::command(
                "The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        let id = match parsed.id {
            Some((id, true)) => id,
            Some((given, false)) if given.ms == meta.last_id.ms => {
                if meta.last_id.seq == u64::MAX {
                    return Err(too_small());
                }
                StreamId::new(given.ms, meta.last_id.seq + 1)
            }
            Some((given, false)) => StreamId::new(given.ms, 0),
            None => {
                let ms = now_ms();
                if ms > meta.last_id.ms {
                    StreamId::new(ms, 0)
                } else {
                    meta.last_id.next().ok_or_else(too_small)?
                }
            }
        };
        if id <= meta.last_id {
            return Err(too_small());
        }
        let mut ops = vec![BatchOp::Put(
            entry_key(db, key, meta.version, id),
            value.clone(),
        )];
        // Into the last node if it has room (Redis's `streamAppendItem`), or a new one.
        let mut nodes = Nodes::of(ctx, key, &meta)?;
        nodes.append(id, &args[fields_at..], limits);
        meta.last_id = id;
        meta.length += 1;
        meta.entries_added += 1;
        if meta.length == 1 {
            meta.first_id = id;
        }
        let trimmed = trim(ctx, key, &mut meta, &mut nodes, spec, Some(id), &mut ops)?;
        meta.nodes = Some(nodes.finish(&mut ops));
        Ok(Change {
            meta: Some(meta),
            ops,
            out: Some((id, trimmed)),
        })
    })?;
    let Some((id, trimmed)) = outcome else {
        return Ok(Reply::Nil);
    };
    ctx.notify(notify::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    ctx.session.note_key_push(key);
    Ok(Reply::Bulk(id.to_bytes()))
}

fn too_small() -> Error {
    Error::command("The ID specified in XADD is equal or smaller than the target stream top item")
}

fn xlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let n = read_stream(ctx, &args[1])?.map_or(0, |f| f.meta.length);
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

fn range(ctx: &mut Ctx<'_>, args: &[Bytes], rev: bool) -> Result<Reply> {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let (mut start, start_ex) = interval_arg(start_arg, 0)?;
    if start_ex {
        start = start
            .next()
            .ok_or_else(|| Error::command("invalid start ID for the interval"))?;
    }
    let (mut end, end_ex) = interval_arg(end_arg, u64::MAX)?;
    if end_ex {
        end = end
            .prev()
            .ok_or_else(|| Error::command("invalid end ID for the interval"))?;
    }
    let mut count: Option<u64> = None;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "COUNT") && j + 1 < args.len() {
            count = Some(u64::try_from(super::int_arg(&args[j + 1])?).unwrap_or(0));
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let Some(f) = read_stream(ctx, &args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let limit = match count {
        Some(0) => return Ok(Reply::NilArray),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    let found = entries(
        ctx.db(),
        ctx.dbi(),
        &args[1],
        &f.meta,
        (start, end),
        rev,
        limit,
    )?;
    entries_reply(&found)
}

fn xrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range(ctx, args, true)
}

fn xdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let key = &args[1];
    // Every ID is checked before anything is deleted (Redis's order: the key, then the IDs).
    if read_stream(ctx, key)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let ids = args[2..]
        .iter()
        .map(|a| id_arg(a, 0, true))
        .collect::<Result<Vec<_>>>()?;
    let db = ctx.dbi();
    let deleted = modify(ctx, key, |current| {
        let Some(f) = current else {
            return Ok(Change::none(0u64));
        };
        let mut meta = f.meta;
        let mut ops = Vec::new();
        let mut gone = std::collections::BTreeSet::new();
        let mut first_gone = false;
        for &id in &ids {
            if gone.contains(&id) || id < meta.first_id {
                continue;
            }
            let k = entry_key(db, key, meta.version, id);
            let mut exists = false;
            crate::stream::visit_entries(ctx.db(), db, key, &meta, (id, id), &mut |_, _| {
                exists = true;
                false
            })?;
            if exists {
                ops.push(BatchOp::Delete(k));
                gone.insert(id);
                first_gone |= id == meta.first_id;
                meta.max_deleted_id = meta.max_deleted_id.max(id);
            }
        }
        if gone.is_empty() {
            return Ok(Change::none(0));
        }
        // Each entry's node counts it deleted; a node left without entries goes (Redis's
        // `streamIteratorRemoveEntry`), and the one before it becomes the last.
        let mut nodes = Nodes::of(ctx, key, &meta)?;
        for &id in &gone {
            let first = nodes
                .last_at_or_below(ctx.db(), id)?
                .ok_or_else(Nodes::damaged)?;
            let mut node = nodes.get(ctx.db(), first)?.ok_or_else(Nodes::damaged)?;
            if node.live > 1 {
                node.delete_one();
                nodes.set(node);
            } else {
                nodes.remove(ctx.db(), first)?;
            }
        }
        meta.nodes = Some(nodes.finish(&mut ops));
        meta.length = meta.length.saturating_sub(gone.len() as u64);
        if meta.length == 0 {
            meta.first_id = StreamId::MIN;
        } else if first_gone {
            let mut next = None;
            crate::stream::visit_entries(
                ctx.db(),
                db,
                key,
                &meta,
                (meta.first_id, StreamId::MAX),
                &mut |id, _| {
                    if gone.contains(&id) {
                        return true;
                    }
                    next = Some(id);
                    false
                },
            )?;
            meta.first_id = next.unwrap_or(StreamId::MIN);
        }
        Ok(Change {
            meta: Some(meta),
            ops,
            out: gone.len() as u64,
        })
    })?;
    if deleted > 0 {
        ctx.notify(notify::STREAM, "xdel", key);
    }
    Ok(Reply::Int(i64::try_from(deleted).unwrap_or(i64::MAX)))
}

fn xtrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let parsed = parse_add_or_trim(args, false)?;
    let spec = parsed.trim_spec(ctx);
    let key = &args[1];
    let trimmed = modify(ctx, key, |current| {
        let Some(f) = current else {
            return Ok(Change::none(0));
        };
        let mut meta = f.meta;
        let mut ops = Vec::new();
        let mut nodes = Nodes::of(ctx, key, &meta)?;
        let n = trim(ctx, key, &mut meta, &mut nodes, spec, None, &mut ops)?;
        meta.nodes = Some(nodes.finish(&mut ops));
        if n == 0 {
            if meta == f.meta && ops.is_empty() {
                return Ok(Change::none(0));
            }
            // Only nodes changed (an emptied node went, or they were rebuilt): Redis tells
            // no watcher.
            crate::txn::leave_unsignalled();
        }
        Ok(Change {
            meta: Some(meta),
            ops,
            out: n,
        })
    })?;
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    Ok(Reply::Int(i64::try_from(trimmed).unwrap_or(i64::MAX)))
}

fn xsetid(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let id = id_arg(&args[2], 0, true)?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "ENTRIESADDED") && more {
            let n = super::int_arg(&args[i + 1])?;
            entries_added = Some(
                u64::try_from(n).map_err(|_| Error::command("entries_added must be positive"))?,
            );
            i += 2;
        } else if is(&args[i], "MAXDELETEDID") && more {
            max_deleted = id_arg(&args[i + 1], 0, true)?;
            if id < max_deleted {
                return Err(Error::command(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let key = &args[1];
    let db = ctx.dbi();
    modify_unsignalled(ctx, key, |current| {
        let Some(f) = current else {
            return Err(Error::command("no such key"));
        };
        let mut meta = f.meta;
        if meta.length > 0 {
            let top = entries(
                ctx.db(),
                db,
                key,
                &meta,
                (StreamId::MIN, StreamId::MAX),
                true,
                1,
            )?;
            if top.first().is_some_and(|(top, _)| id < *top) {
                return Err(Error::command(
                    "The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if entries_added.is_some_and(|n| meta.length > n) {
                return Err(Error::command(
                    "The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
        }
        meta.last_id = id;
        if let Some(n) = entries_added {
            meta.entries_added = n;
        }
        if max_deleted != StreamId::MIN {
            meta.max_deleted_id = max_deleted;
        }
        Ok(Change {
            meta: Some(meta),
            ops: Vec::new(),
            out: (),
        })
    })?;
    ctx.notify(notify::STREAM, "xsetid", key);
    Ok(Reply::ok())
}

/// The time XREAD BLOCK waits: milliseconds, 0 for ever; Redis's errors.
fn block_deadline(arg: &[u8]) -> Result<Option<std::time::Instant>> {
    let ms = crate::num::parse_i64(arg)
        .ok_or_else(|| Error::command("timeout is not an integer or out of range"))?;
    let ms = u64::try_from(ms).map_err(|_| Error::command("timeout is negative"))?;
    if ms == 0 {
        return Ok(None);
    }
    Ok(Some(
        std::time::Instant::now() + std::time::Duration::from_millis(ms),
    ))
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...].
fn xread(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    read_streams(ctx, args, false)
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key
/// [key ...] id [id ...].
fn xreadgroup(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    read_streams(ctx, args, true)
}

/// What XREADGROUP reads from one stream: new entries (`>`), or the consumer's pending
/// history after an ID.
#[derive(Debug, Clone, Copy)]
enum GroupRead {
    New,
    History(StreamId),
}

/// XREAD and XREADGROUP (Redis's `xreadCommand`): options, then every key's ID (`$`, `>`),
/// then what each stream can serve now; with BLOCK and nothing to serve, the connection waits
/// (the IDs the first look resolved are kept for the looks after a wake-up).
fn read_streams(ctx: &mut Ctx<'_>, args: &[Bytes], xreadgroup: bool) -> Result<Reply> {
    let mut block: Option<&Bytes> = None;
    let mut count: usize = 0;
    let mut streams_at = 0;
    let mut group: Option<(&Bytes, &Bytes)> = None;
    let mut noack = false;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = &args[i];
        if is(o, "BLOCK") && more > 0 {
            if ctx.session.in_script {
                return Err(Error::command(format!(
                    "{} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&args[0])
                )));
            }
            block = Some(&args[i + 1]);
            i += 2;
        } else if is(o, "COUNT") && more > 0 {
            count = usize::try_from(super::int_arg(&args[i + 1])?).unwrap_or(0);
            i += 2;
        } else if is(o, "STREAMS") && more > 0 {
            streams_at = i + 1;
            if (args.len() - streams_at) % 2 != 0 {
                return Err(Error::command(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if is(o, "GROUP") && more >= 2 {
            if !xreadgroup {
                return Err(Error::command(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((&args[i + 1], &args[i + 2]));
            i += 3;
        } else if is(o, "NOACK") {
            if !xreadgroup {
                return Err(Error::command(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
    }
    if streams_at == 0 {
        return Err(Error::Syntax);
    }
    if xreadgroup && group.is_none() {
        return Err(Error::command("Missing GROUP option for XREADGROUP"));
    }
    let n = (args.len() - streams_at) / 2;
    let keys = &args[streams_at..streams_at + n];
    // A blocked read looking again keeps the IDs its first look resolved (`$`).
    let again = ctx.session.blocked.is_some();
    let deadline = match (block, ctx.session.blocked) {
        (Some(_), Some(b)) => b.deadline,
        (Some(arg), None) => block_deadline(arg)?,
        (None, _) => None,
    };
    // From here this run answers or blocks anew (and is counted as a call when it answers).
    ctx.session.blocked = None;
    let remembered = ctx
        .session
        .stream_from
        .take()
        .filter(|r| again && r.len() == n);
    let mut reads: Vec<(StreamId, GroupRead)> = Vec::with_capacity(n);
    for (j, key) in keys.iter().enumerate() {
        // A reader that waited passes over a key that now holds another kind (Redis serves
        // it only from a stream); a group reader learns that its stream or group went.
        let f = super::lists::unless_other_kind(again, read_stream(ctx, key))?;
        if let (Some((g, _)), true) = (group, again) {
            let Some(f) = f else {
                ctx.session.wait_ticket = None;
                return Err(Error::Coded(
                    "UNBLOCKED the stream key no longer exists".into(),
                ));
            };
            if group_of(ctx, key, &f.meta, g)?.is_none() {
                ctx.session.wait_ticket = None;
                return Err(Error::Coded(
                    "NOGROUP the consumer group this client was blocked on no longer exists".into(),
                ));
            }
        }
        if let Some((g, _)) = group {
            let exists = match f {
                Some(f) => group_of(ctx, key, &f.meta, g)?.is_some(),
                None => false,
            };
            if !exists {
                return Err(Error::Coded(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    crate::error::shown_arg(key, usize::MAX),
                    crate::error::shown_arg(g, usize::MAX)
                )));
            }
        }
        let arg = &args[streams_at + n + j];
        let read = match (arg.as_ref(), &remembered) {
            (_, Some(r)) if !xreadgroup => (r[j], GroupRead::New),
            (b"$", _) if xreadgroup => {
                return Err(Error::command(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ))
            }
            (b"$", _) => (f.map_or(StreamId::MIN, |f| f.meta.last_id), GroupRead::New),
            (b">", _) if !xreadgroup => {
                return Err(Error::command(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ))
            }
            (b">", _) => (StreamId::MAX, GroupRead::New),
            _ => {
                let id = id_arg(arg, 0, true)?;
                (id, GroupRead::History(id))
            }
        };
        reads.push(read);
    }
    let look = super::lists::Look {
        deadline,
        seen: ctx.shared.list_waiters.generation(),
        again,
        kind: KeyType::Stream,
        // Readers of one group queue behind each other (XREAD readers consume nothing).
        group: group.map_or(0, |(g, _)| xxhash_rust::xxh3::xxh3_64(g).max(1)),
    };
    // Redis serves a reader it blocked at most 1000 entries per stream unless COUNT says.
    let limit = match count {
        0 if again => XREAD_BLOCKED_DEFAULT_COUNT,
        0 => usize::MAX,
        n => n,
    };
    let mut found = Vec::new();
    for (key, &(after, read)) in keys.iter().zip(&reads) {
        let served = match group {
            None => {
                let Some(f) = super::lists::unless_other_kind(again, read_stream(ctx, key))? else {
                    continue;
                };
                let Some(from) = after.next() else {
                    continue;
                };
                let list = entries(
                    ctx.db(),
                    ctx.dbi(),
                    key,
                    &f.meta,
                    (from, StreamId::MAX),
                    false,
                    limit,
                )?;
                (!list.is_empty())
                    .then(|| entries_reply(&list))
                    .transpose()?
            }
            Some((g, consumer)) => {
                // New entries go to the group's blocking readers in the order they blocked (a
                // read without BLOCK takes what is there).
                if block.is_some()
                    && matches!(read, GroupRead::New)
                    && !super::lists::my_turn(ctx, key, &look)
                {
                    continue;
                }
                let limit = if count == 0 && matches!(read, GroupRead::History(_)) {
                    usize::MAX
                } else {
                    limit
                };
                serve_group(ctx, key, g, consumer, read, limit, noack)?
            }
        };
        if let Some(reply) = served {
            found.push((key.clone(), reply));
        }
    }
    if !found.is_empty() {
        ctx.session.wait_ticket = None;
        return Ok(match ctx.session.protocol {
            Protocol::Resp3 => Reply::Map(
                found
                    .into_iter()
                    .map(|(k, v)| (Reply::Bulk(k), v))
                    .collect(),
            ),
            Protocol::Resp2 => Reply::Array(
                found
                    .into_iter()
                    .map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v]))
                    .collect(),
            ),
        });
    }
    if block.is_none() {
        return Ok(Reply::NilArray);
    }
    let reply = super::lists::block_or_time_out(ctx, keys, &look, Reply::NilArray)?;
    if ctx.session.blocked.is_some() {
        ctx.session.stream_from = Some(reads.iter().map(|(id, _)| *id).collect());
    }
    Ok(reply)
}

/// Consumer group `group` of the stream `key` as stored.
fn group_of(ctx: &Ctx<'_>, key: &[u8], meta: &StreamMeta, group: &[u8]) -> Result<Option<Group>> {
    ctx.db()
        .get(&group_key(ctx.dbi(), key, meta.version, group))?
        .map(|v| Group::decode(&v))
        .transpose()
}

/// Whether `id..` (or the whole stream) holds a deleted entry (Redis's
/// `streamRangeHasTombstones`, from the deleted-ID watermark).
fn range_has_tombstones(m: &StreamMeta, start: StreamId) -> bool {
    m.length != 0
        && m.max_deleted_id != StreamId::MIN
        && m.first_id <= m.max_deleted_id
        && start <= m.max_deleted_id
}

/// How many entries were added up to `id` (Redis's `streamEstimateDistanceFromFirstEverEntry`),
/// when that is known.
fn entries_before(m: &StreamMeta, id: StreamId) -> Option<u64> {
    if m.entries_added == 0 {
        return Some(0);
    }
    if m.length == 0 && id <= m.last_id {
        return Some(m.entries_added);
    }
    if id == m.last_id {
        return Some(m.entries_added);
    }
    if id > m.last_id {
        return None;
    }
    if m.max_deleted_id == StreamId::MIN || m.max_deleted_id < m.first_id {
        if id < m.first_id {
            return Some(m.entries_added.saturating_sub(m.length));
        }
        if id == m.first_id {
            return Some(m.entries_added.saturating_sub(m.length) + 1);
        }
    }
    None
}

/// A group's `last-delivered-id`, `entries-read` and `lag`, as XINFO shows them.
fn group_progress(m: &StreamMeta, g: &Group) -> [(Reply, Reply); 3] {
    let entries_read = g.entries_read.map_or(Reply::Nil, |n| {
        Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
    });
    [
        (
            Reply::text("last-delivered-id"),
            Reply::Bulk(g.last_id.to_bytes()),
        ),
        (Reply::text("entries-read"), entries_read),
        (Reply::text("lag"), lag(m, g).map_or(Reply::Nil, Reply::Int)),
    ]
}

/// A group's lag: entries added it has not read (Redis's `streamReplyWithCGLag`, in signed
/// arithmetic, so a counter set past the stream by ENTRIESREAD gives a negative lag as there);
/// `None` when it cannot be known.
fn lag(m: &StreamMeta, g: &Group) -> Option<i64> {
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    if m.entries_added == 0 {
        return Some(0);
    }
    if let Some(read) = g.entries_read {
        if !range_has_tombstones(m, g.last_id) {
            return Some(signed(m.entries_added).wrapping_sub(signed(read)));
        }
    }
    entries_before(m, g.last_id).map(|read| signed(m.entries_added).wrapping_sub(signed(read)))
}

/// Serves one stream of an XREADGROUP: new entries (delivered to `consumer`, added to the
/// group's pending entries unless `noack`, the group's last ID and read counter moved), or
/// the consumer's pending history after an ID (deleted entries as `[id, nil]`). `None` when
/// there is nothing new to serve (history always answers, possibly empty).
fn serve_group(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    group: &Bytes,
    consumer: &Bytes,
    read: GroupRead,
    limit: usize,
    noack: bool,
) -> Result<Option<Reply>> {
    let db = ctx.dbi();
    let outcome = modify_unsignalled(ctx, key, |current| {
        let Some(f) = current else {
            return Ok(Change::none(None));
        };
        let meta = f.meta;
        let Some(mut g) = group_of(ctx, key, &meta, group)? else {
            return Ok(Change::none(None));
        };
        let now = now_ms();
        let mut ops = Vec::new();
        let ckey = consumer_key(db, key, meta.version, group, consumer);
        let before = ctx.db().get(&ckey)?.map(|v| ConsumerTimes::decode(&v));
        let created = before.is_none();
        // Seen now; active now only if it is handed new entries (Redis 7.2).
        let mut times = ConsumerTimes {
            seen_ms: now,
            active_ms: before.and_then(|t| t.active_ms),
        };
        let mut out: Vec<Reply> = Vec::new();
        match read {
            GroupRead::New => {
                let Some(from) = g.last_id.next() else {
                    return Ok(Change::none(None));
                };
                let list = entries(
                    ctx.db(),
                    db,
                    key,
                    &meta,
                    (from, StreamId::MAX),
                    false,
                    limit,
                )?;
                if list.is_empty() {
                    return Ok(Change::none(None));
                }
                times.active_ms = Some(now);
                for entry in &list {
                    let id = entry.0;
                    if id > g.last_id {
                        g.entries_read = match g.entries_read {
                            Some(n) if !range_has_tombstones(&meta, id) => Some(n + 1),
                            _ if meta.entries_added != 0 => entries_before(&meta, id),
                            other => other,
                        };
                        g.last_id = id;
                    }
                    if !noack {
                        // A pending entry another consumer held (after SETID) moves here.
                        let nack = Nack {
                            consumer: consumer.clone(),
                            delivery_ms: now,
                            deliveries: 1,
                        };
                        ops.push(BatchOp::Put(
                            pel_key(db, key, meta.version, group, id),
                            nack.encode(),
                        ));
                    }
                    out.push(entry_reply(entry)?);
                }
                ops.push(BatchOp::Put(
                    group_key(db, key, meta.version, group),
                    g.encode(),
                ));
            }
            GroupRead::History(after) => {
                let Some(from) = after.next() else {
                    return Ok(Change {
                        meta: None,
                        ops: vec![BatchOp::Put(ckey, times.encode())],
                        out: Some((Reply::Array(Vec::new()), created)),
                    });
                };
                let mine = pending(ctx.db(), db, key, &meta, group, (from, StreamId::MAX))?;
                for (id, mut nack) in mine.into_iter().filter(|(_, n)| n.consumer == *consumer) {
                    if out.len() >= limit {
                        break;
                    }
                    let found = entries(ctx.db(), db, key, &meta, (id, id), false, 1)?;
                    match found.first() {
                        Some(entry) => {
                            out.push(entry_reply(entry)?);
                            nack.delivery_ms = now;
                            nack.deliveries += 1;
                            ops.push(BatchOp::Put(
                                pel_key(db, key, meta.version, group, id),
                                nack.encode(),
                            ));
                        }
                        None => out.push(Reply::Array(vec![
                            Reply::Bulk(id.to_bytes()),
                            Reply::NilArray,
                        ])),
                    }
                }
            }
        }
        ops.push(BatchOp::Put(ckey, times.encode()));
        Ok(Change {
            meta: None,
            ops,
            out: Some((Reply::Array(out), created)),
        })
    })?;
    let Some((reply, created)) = outcome else {
        return Ok(None);
    };
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    Ok(Some(reply))
}

/// `-NOGROUP No such key 'k' or consumer group 'g'` (XPENDING, XCLAIM, XAUTOCLAIM).
fn no_key_or_group(key: &[u8], group: &[u8]) -> Error {
    Error::Coded(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        crate::error::shown_arg(key, usize::MAX),
        crate::error::shown_arg(group, usize::MAX)
    ))
}

/// XGROUP CREATE | SETID | DESTROY | CREATECONSUMER | DELCONSUMER | HELP.
fn xgroup(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "help" => args.len() == 2,
        "create" | "setid" => args.len() >= 5,
        "destroy" => args.len() == 4,
        "createconsumer" | "delconsumer" => args.len() == 5,
        _ => {
            return Err(Error::UnknownSubcommand {
                container: "XGROUP",
                sub: String::from_utf8_lossy(&args[1]).into_owned(),
            })
        }
    };
    if !arity_ok {
        return Err(Error::WrongArity(format!("xgroup|{sub}")));
    }
    let syntax = || super::admin::sub_syntax("XGROUP", args);
    if sub == "help" {
        return Ok(Reply::Array(
            [
                "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a new consumer group. Options are:",
                "    * MKSTREAM",
                "      Create the empty stream if it does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Set the group's entries_read counter (internal use).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Create a new consumer in the specified group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove the specified consumer.",
                "DESTROY <key> <groupname>",
                "    Remove the specified group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Set the current group ID and entries_read counter.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|l| Reply::Simple((*l).into()))
            .collect(),
        ));
    }
    let (key, group) = (&args[2], &args[3]);
    let mut mkstream = false;
    let mut entries_read: Option<u64> = None;
    let mut i = 5;
    while i < args.len() {
        if sub == "create" && is(&args[i], "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if matches!(sub.as_str(), "create" | "setid")
            && is(&args[i], "ENTRIESREAD")
            && i + 1 < args.len()
        {
            let n = super::int_arg(&args[i + 1])?;
            if n < -1 {
                return Err(Error::command(
                    "value for ENTRIESREAD must be positive or -1",
                ));
            }
            entries_read = u64::try_from(n).ok();
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    let current = read_stream(ctx, key)?;
    if current.is_none() && !mkstream {
        return Err(Error::command(
            "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
        ));
    }
    if let Some(f) = current {
        if group_of(ctx, key, &f.meta, group)?.is_none()
            && matches!(sub.as_str(), "setid" | "createconsumer" | "delconsumer")
        {
            return Err(Error::Coded(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(group),
                String::from_utf8_lossy(key)
            )));
        }
    }
    // The argument counts each subcommand takes whole (Redis answers the syntax error).
    let shape_ok = match sub.as_str() {
        "create" => args.len() <= 8,
        "setid" => args.len() == 5 || args.len() == 7,
        _ => true,
    };
    if !shape_ok {
        return Err(syntax());
    }
    let db = ctx.dbi();
    let versions = &ctx.shared.versions;
    let (reply, event) = modify_unsignalled(ctx, key, |current| {
        // The checks above again, under the update: a DEL or an expiry in between must not
        // let a subcommand recreate the stream or its group.
        let (meta, created) = match current {
            Some(f) => (f.meta, false),
            None if sub == "create" && mkstream => (StreamMeta::new(versions.next()), true),
            None => {
                return Err(Error::command(
                    "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
                ))
            }
        };
        let gkey = group_key(db, key, meta.version, group);
        let existing = group_of(ctx, key, &meta, group)?;
        if existing.is_none() && matches!(sub.as_str(), "setid" | "createconsumer" | "delconsumer")
        {
            return Err(Error::Coded(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(group),
                String::from_utf8_lossy(key)
            )));
        }
        let id_of = |arg: &Bytes, strict: bool| -> Result<StreamId> {
            if arg.as_ref() == b"$" {
                Ok(meta.last_id)
            } else {
                id_arg(arg, 0, strict)
            }
        };
        let mut ops = Vec::new();
        let (reply, event) = match sub.as_str() {
            "create" => {
                let id = id_of(&args[4], true)?;
                if existing.is_some() {
                    return Err(Error::Coded(
                        "BUSYGROUP Consumer Group name already exists".into(),
                    ));
                }
                let g = Group {
                    last_id: id,
                    entries_read,
                };
                ops.push(BatchOp::Put(gkey, g.encode()));
                (Reply::ok(), Some("xgroup-create"))
            }
            "setid" => {
                let id = id_of(&args[4], false)?;
                let g = Group {
                    last_id: id,
                    entries_read,
                };
                ops.push(BatchOp::Put(gkey, g.encode()));
                (Reply::ok(), Some("xgroup-setid"))
            }
            "destroy" => match existing {
                Some(_) => {
                    for k in crate::stream::group_keys(ctx.db(), db, key, &meta, group)? {
                        ops.push(BatchOp::Delete(k));
                    }
                    (Reply::Int(1), Some("xgroup-destroy"))
                }
                None => (Reply::Int(0), None),
            },
            "createconsumer" => {
                let ckey = consumer_key(db, key, meta.version, group, &args[4]);
                if ctx.db().get(&ckey)?.is_some() {
                    (Reply::Int(0), None)
                } else {
                    ops.push(BatchOp::Put(ckey, ConsumerTimes::new(now_ms()).encode()));
                    (Reply::Int(1), Some("xgroup-createconsumer"))
                }
            }
            _ => {
                // DELCONSUMER: its pending entries go with it.
                let ckey = consumer_key(db, key, meta.version, group, &args[4]);
                if ctx.db().get(&ckey)?.is_none() {
                    (Reply::Int(0), None)
                } else {
                    let all = pending(
                        ctx.db(),
                        db,
                        key,
                        &meta,
                        group,
                        (StreamId::MIN, StreamId::MAX),
                    )?;
                    let mut n = 0;
                    for (id, nack) in all {
                        if nack.consumer == args[4] {
                            ops.push(BatchOp::Delete(pel_key(db, key, meta.version, group, id)));
                            n += 1;
                        }
                    }
                    ops.push(BatchOp::Delete(ckey));
                    (Reply::Int(n), Some("xgroup-delconsumer"))
                }
            }
        };
        let new_meta = created.then_some(meta);
        Ok(Change {
            meta: new_meta,
            ops,
            out: (reply, event),
        })
    })?;
    if let Some(event) = event {
        ctx.notify(notify::STREAM, event, key);
    }
    if sub == "destroy" {
        // Readers blocked on the group look again (and answer its absence).
        ctx.session.note_key_push(key);
    }
    Ok(reply)
}

fn xack(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (key, group) = (&args[1], &args[2]);
    let Some(f) = read_stream(ctx, key)? else {
        return Ok(Reply::Int(0));
    };
    if group_of(ctx, key, &f.meta, group)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let ids = args[3..]
        .iter()
        .map(|a| id_arg(a, 0, true))
        .collect::<Result<Vec<_>>>()?;
    let db = ctx.dbi();
    let acked = modify_unsignalled(ctx, key, |current| {
        let Some(f) = current else {
            return Ok(Change::none(0));
        };
        let mut ops = Vec::new();
        let mut gone = std::collections::BTreeSet::new();
        for &id in &ids {
            let k = pel_key(db, key, f.meta.version, group, id);
            if !gone.contains(&id) && ctx.db().get(&k)?.is_some() {
                ops.push(BatchOp::Delete(k));
                gone.insert(id);
            }
        }
        Ok(Change {
            meta: None,
            ops,
            out: gone.len() as i64,
        })
    })?;
    Ok(Reply::Int(acked))
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]].
fn xpending(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (key, group) = (&args[1], &args[2]);
    let summary = args.len() == 3;
    if !summary && !(6..=9).contains(&args.len()) {
        return Err(Error::Syntax);
    }
    let mut min_idle = 0i64;
    let mut range = (StreamId::MIN, StreamId::MAX);
    let mut count = 0usize;
    let mut consumer: Option<&Bytes> = None;
    if !summary {
        let mut at = 3;
        if is(&args[3], "IDLE") {
            min_idle = super::int_arg(&args[4])?;
            if args.len() < 8 {
                return Err(Error::Syntax);
            }
            at += 2;
        }
        count = usize::try_from(super::int_arg(&args[at + 2])?).unwrap_or(0);
        let (mut start, start_ex) = interval_arg(&args[at], 0)?;
        if start_ex {
            start = start
                .next()
                .ok_or_else(|| Error::command("invalid start ID for the interval"))?;
        }
        let (mut end, end_ex) = interval_arg(&args[at + 1], u64::MAX)?;
        if end_ex {
            end = end
                .prev()
                .ok_or_else(|| Error::command("invalid end ID for the interval"))?;
        }
        range = (start, end);
        consumer = args.get(at + 3);
    }
    let Some(f) = read_stream(ctx, key)? else {
        return Err(no_key_or_group(key, group));
    };
    if group_of(ctx, key, &f.meta, group)?.is_none() {
        return Err(no_key_or_group(key, group));
    }
    let db = ctx.dbi();
    if summary {
        let all = pending(
            ctx.db(),
            db,
            key,
            &f.meta,
            group,
            (StreamId::MIN, StreamId::MAX),
        )?;
        let (Some(first), Some(last)) = (all.first(), all.last()) else {
            return Ok(Reply::Array(vec![
                Reply::Int(0),
                Reply::Nil,
                Reply::Nil,
                Reply::NilArray,
            ]));
        };
        let mut per: std::collections::BTreeMap<Bytes, i64> = std::collections::BTreeMap::new();
        for (_, nack) in &all {
            *per.entry(nack.consumer.clone()).or_default() += 1;
        }
        return Ok(Reply::Array(vec![
            Reply::Int(all.len() as i64),
            Reply::Bulk(first.0.to_bytes()),
            Reply::Bulk(last.0.to_bytes()),
            Reply::Array(
                per.into_iter()
                    .map(|(c, n)| {
                        Reply::Array(vec![
                            Reply::Bulk(c),
                            Reply::Bulk(Bytes::from(n.to_string())),
                        ])
                    })
                    .collect(),
            ),
        ]));
    }
    if let Some(c) = consumer {
        if ctx
            .db()
            .get(&consumer_key(db, key, f.meta.version, group, c))?
            .is_none()
        {
            return Ok(Reply::Array(Vec::new()));
        }
    }
    let now = now_ms();
    let mut out = Vec::new();
    if count > 0 {
        crate::stream::visit_pending(ctx.db(), db, key, &f.meta, group, range, &mut |id, nack| {
            let idle = now.saturating_sub(nack.delivery_ms);
            let wanted = consumer.is_none_or(|c| *c == nack.consumer)
                && (min_idle == 0 || (idle as i64) >= min_idle);
            if wanted {
                out.push(Reply::Array(vec![
                    Reply::Bulk(id.to_bytes()),
                    Reply::Bulk(nack.consumer),
                    Reply::Int(i64::try_from(idle).unwrap_or(i64::MAX)),
                    Reply::Int(i64::try_from(nack.deliveries).unwrap_or(i64::MAX)),
                ]));
            }
            out.len() < count
        })?;
    }
    Ok(Reply::Array(out))
}

/// A numeric option of XCLAIM / XAUTOCLAIM with its own error text.
fn long_arg(arg: &[u8], message: &str) -> Result<i64> {
    crate::num::parse_i64(arg).ok_or_else(|| Error::command(message.to_string()))
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id].
fn xclaim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let Some(f) = read_stream(ctx, key)? else {
        return Err(no_key_or_group(key, group));
    };
    if group_of(ctx, key, &f.meta, group)?.is_none() {
        return Err(no_key_or_group(key, group));
    }
    let min_idle = long_arg(&args[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
    // The IDs run up to the first argument that is not one; the options follow.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match id_arg(&args[j], 0, true) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = now_ms();
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = &args[j];
        if is(opt, "FORCE") {
            force = true;
        } else if is(opt, "JUSTID") {
            justid = true;
        } else if is(opt, "IDLE") && more {
            j += 1;
            let idle = long_arg(&args[j], "Invalid IDLE option argument for XCLAIM")?;
            delivery = Some((now as i64).saturating_sub(idle));
        } else if is(opt, "TIME") && more {
            j += 1;
            delivery = Some(long_arg(
                &args[j],
                "Invalid TIME option argument for XCLAIM",
            )?);
        } else if is(opt, "RETRYCOUNT") && more {
            j += 1;
            retry = Some(long_arg(
                &args[j],
                "Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if is(opt, "LASTID") && more {
            j += 1;
            last_id = id_arg(&args[j], 0, true)?;
        } else {
            return Err(Error::command(format!(
                "Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 1;
    }
    let delivery_ms = match delivery {
        Some(t) if t >= 0 && (t as u64) <= now => t as u64,
        _ => now,
    };
    let db = ctx.dbi();
    let (reply, created) = modify_unsignalled(ctx, key, |current| {
        let Some(f) = current else {
            return Err(no_key_or_group(key, group));
        };
        let meta = f.meta;
        let Some(mut g) = group_of(ctx, key, &meta, group)? else {
            return Err(no_key_or_group(key, group));
        };
        let mut ops = Vec::new();
        if last_id > g.last_id {
            g.last_id = last_id;
            ops.push(BatchOp::Put(
                group_key(db, key, meta.version, group),
                g.encode(),
            ));
        }
        let ckey = consumer_key(db, key, meta.version, group, consumer);
        let mut consumer_known = None;
        let mut out = Vec::new();
        let mut claimed = std::collections::BTreeMap::new();
        for &id in &ids {
            let pkey = pel_key(db, key, meta.version, group, id);
            let nack = match claimed.get(&id) {
                Some(n) => Some(Nack::clone(n)),
                None => ctx.db().get(&pkey)?.map(|v| Nack::decode(&v)).transpose()?,
            };
            let entry = entries(ctx.db(), db, key, &meta, (id, id), false, 1)?;
            let Some(entry) = entry.first() else {
                if nack.is_some() {
                    ops.push(BatchOp::Delete(pkey));
                }
                continue;
            };
            let (mut nack, forced) = match nack {
                Some(n) => (n, false),
                None if force => (
                    Nack {
                        consumer: Bytes::new(),
                        delivery_ms: now,
                        deliveries: 1,
                    },
                    true,
                ),
                None => continue,
            };
            if !forced && min_idle > 0 && (now.saturating_sub(nack.delivery_ms) as i64) < min_idle {
                continue;
            }
            if consumer_known.is_none() {
                consumer_known = Some(ctx.db().get(&ckey)?.is_none());
            }
            nack.consumer = consumer.clone();
            nack.delivery_ms = delivery_ms;
            match retry {
                Some(r) if r >= 0 => nack.deliveries = r as u64,
                _ if !justid => nack.deliveries += 1,
                _ => {}
            }
            ops.push(BatchOp::Put(pkey, nack.encode()));
            claimed.insert(id, nack);
            out.push(if justid {
                Reply::Bulk(id.to_bytes())
            } else {
                entry_reply(entry)?
            });
        }
        let created = consumer_known.unwrap_or(false);
        if consumer_known.is_some() {
            let times = ConsumerTimes {
                seen_ms: now,
                active_ms: Some(now),
            };
            ops.push(BatchOp::Put(ckey, times.encode()));
        }
        Ok(Change {
            meta: None,
            ops,
            out: (Reply::Array(out), created),
        })
    })?;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    Ok(reply)
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID].
fn xautoclaim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let min_idle = long_arg(&args[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let (mut start, start_ex) = interval_arg(&args[5], 0)?;
    if start_ex {
        start = start
            .next()
            .ok_or_else(|| Error::command("invalid start ID for the interval"))?;
    }
    let mut count: u64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        if is(&args[j], "COUNT") && j + 1 < args.len() {
            let max = (i64::MAX / 16) as u64;
            count = crate::num::parse_i64(&args[j + 1])
                .and_then(|n| u64::try_from(n).ok())
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| Error::command("COUNT must be > 0"))?;
            j += 2;
        } else if is(&args[j], "JUSTID") {
            justid = true;
            j += 1;
        } else {
            return Err(Error::Syntax);
        }
    }
    let Some(f) = read_stream(ctx, key)? else {
        return Err(no_key_or_group(key, group));
    };
    if group_of(ctx, key, &f.meta, group)?.is_none() {
        return Err(no_key_or_group(key, group));
    }
    let db = ctx.dbi();
    let (reply, created) = modify_unsignalled(ctx, key, |current| {
        let Some(f) = current else {
            return Err(no_key_or_group(key, group));
        };
        let meta = f.meta;
        let now = now_ms();
        // What the attempts may look at, and one more for the cursor.
        let wanted =
            usize::try_from(count.saturating_mul(10).saturating_add(1)).unwrap_or(usize::MAX);
        let mut all = Vec::new();
        crate::stream::visit_pending(
            ctx.db(),
            db,
            key,
            &meta,
            group,
            (start, StreamId::MAX),
            &mut |id, nack| {
                all.push((id, nack));
                all.len() < wanted
            },
        )?;
        let ckey = consumer_key(db, key, meta.version, group, consumer);
        let mut consumer_known = None;
        let mut ops = Vec::new();
        let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
        let mut left = count;
        let mut attempts = count.saturating_mul(10);
        let mut next = 0;
        while attempts > 0 && left > 0 && next < all.len() {
            attempts -= 1;
            let (id, nack) = &all[next];
            next += 1;
            let pkey = pel_key(db, key, meta.version, group, *id);
            let entry = entries(ctx.db(), db, key, &meta, (*id, *id), false, 1)?;
            let Some(entry) = entry.first() else {
                ops.push(BatchOp::Delete(pkey));
                deleted.push(Reply::Bulk(id.to_bytes()));
                left -= 1;
                continue;
            };
            if min_idle > 0 && (now.saturating_sub(nack.delivery_ms) as i64) < min_idle {
                continue;
            }
            if consumer_known.is_none() {
                consumer_known = Some(ctx.db().get(&ckey)?.is_none());
            }
            let mut nack = nack.clone();
            nack.consumer = consumer.clone();
            nack.delivery_ms = now;
            if !justid {
                nack.deliveries += 1;
            }
            ops.push(BatchOp::Put(pkey, nack.encode()));
            claimed.push(if justid {
                Reply::Bulk(id.to_bytes())
            } else {
                entry_reply(entry)?
            });
            left -= 1;
        }
        // The cursor: the pending entry after the last one looked at, 0-0 past the end.
        let cursor = all.get(next).map_or(StreamId::MIN, |(id, _)| *id);
        let created = consumer_known.unwrap_or(false);
        if consumer_known.is_some() {
            let times = ConsumerTimes {
                seen_ms: now,
                active_ms: Some(now),
            };
            ops.push(BatchOp::Put(ckey, times.encode()));
        }
        Ok(Change {
            meta: None,
            ops,
            out: (
                Reply::Array(vec![
                    Reply::Bulk(cursor.to_bytes()),
                    Reply::Array(claimed),
                    Reply::Array(deleted),
                ]),
                created,
            ),
        })
    })?;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    Ok(reply)
}

fn xinfo(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    // Each subcommand's arity first, as Redis 7's command table checks it.
    let arity_ok = match sub.as_str() {
        "help" => args.len() == 2,
        "groups" => args.len() == 3,
        "consumers" => args.len() == 4,
        "stream" => args.len() >= 3,
        _ => {
            return Err(Error::UnknownSubcommand {
                container: "XINFO",
                sub: String::from_utf8_lossy(&args[1]).into_owned(),
            })
        }
    };
    if !arity_ok {
        return Err(Error::WrongArity(format!("xinfo|{sub}")));
    }
    if sub == "help" {
        return Ok(Reply::Array(
            [
                "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|l| Reply::Simple((*l).into()))
            .collect(),
        ));
    }
    let key = &args[2];
    let Some(f) = read_stream(ctx, key)? else {
        return Err(Error::command("no such key"));
    };
    let m = f.meta;
    let db = ctx.dbi();
    let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let groups = crate::stream::groups(ctx.db(), db, key, &m)?;
    let now = now_ms();
    match sub.as_str() {
        "groups" => {
            let mut out = Vec::new();
            for (name, g) in &groups {
                let consumers = crate::stream::consumers(ctx.db(), db, key, &m, name)?;
                let pel = pending(ctx.db(), db, key, &m, name, (StreamId::MIN, StreamId::MAX))?;
                let mut fields = vec![
                    (Reply::text("name"), Reply::Bulk(name.clone())),
                    (Reply::text("consumers"), int(consumers.len() as u64)),
                    (Reply::text("pending"), int(pel.len() as u64)),
                ];
                fields.extend(group_progress(&m, g));
                out.push(Reply::Map(fields));
            }
            return Ok(Reply::Array(out));
        }
        "consumers" => {
            let group = &args[3];
            if !groups.iter().any(|(name, _)| name == group) {
                return Err(Error::Coded(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    String::from_utf8_lossy(group),
                    String::from_utf8_lossy(key)
                )));
            }
            let pel = pending(ctx.db(), db, key, &m, group, (StreamId::MIN, StreamId::MAX))?;
            let mut out = Vec::new();
            for (name, times) in crate::stream::consumers(ctx.db(), db, key, &m, group)? {
                let mine = pel.iter().filter(|(_, n)| n.consumer == name).count();
                // Redis 7.2's `inactive`: since it last read or claimed an entry, -1 if never.
                let inactive = times.active_ms.map_or(-1, |t| {
                    i64::try_from(now.saturating_sub(t)).unwrap_or(i64::MAX)
                });
                out.push(Reply::Map(vec![
                    (Reply::text("name"), Reply::Bulk(name)),
                    (Reply::text("pending"), int(mine as u64)),
                    (Reply::text("idle"), int(now.saturating_sub(times.seen_ms))),
                    (Reply::text("inactive"), Reply::Int(inactive)),
                ]));
            }
            return Ok(Reply::Array(out));
        }
        _ => {}
    }
    // STREAM key [FULL [COUNT count]].
    let syntax = || super::admin::sub_syntax("XINFO", args);
    let full = match &args[3..] {
        [] => None,
        [f] if is(f, "FULL") => Some(10),
        [f, c, n] if is(f, "FULL") && is(c, "COUNT") => {
            let n = super::int_arg(n)?;
            Some(if n < 0 { 10 } else { n })
        }
        _ => return Err(syntax()),
    };
    let all = (StreamId::MIN, StreamId::MAX);
    // Redis's radix tree: one key per node (`stream_node.rs`; a stream written before nodes
    // were kept: an estimate, nodes of 100 entries), and its inner nodes (an estimate).
    let keys = m.nodes.map_or(m.length.div_ceil(100), |n| n.count);
    let mut out = vec![
        (Reply::text("length"), int(m.length)),
        (Reply::text("radix-tree-keys"), int(keys)),
        (Reply::text("radix-tree-nodes"), int(keys + 1)),
        (
            Reply::text("last-generated-id"),
            Reply::Bulk(m.last_id.to_bytes()),
        ),
        (
            Reply::text("max-deleted-entry-id"),
            Reply::Bulk(m.max_deleted_id.to_bytes()),
        ),
        (Reply::text("entries-added"), int(m.entries_added)),
        (
            Reply::text("recorded-first-entry-id"),
            Reply::Bulk(m.first_id.to_bytes()),
        ),
    ];
    match full {
        None => {
            let edge = |rev: bool| -> Result<Reply> {
                match entries(ctx.db(), db, key, &m, all, rev, 1)?.first() {
                    Some(entry) => entry_reply(entry),
                    None => Ok(Reply::Nil),
                }
            };
            out.push((Reply::text("groups"), int(groups.len() as u64)));
            out.push((Reply::text("first-entry"), edge(false)?));
            out.push((Reply::text("last-entry"), edge(true)?));
        }
        Some(count) => {
            let limit = match count {
                0 => usize::MAX,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            };
            let list = entries(ctx.db(), db, key, &m, all, false, limit)?;
            out.push((Reply::text("entries"), entries_reply(&list)?));
            let mut detail = Vec::new();
            for (name, g) in &groups {
                let pel = pending(ctx.db(), db, key, &m, name, all)?;
                let nack_reply = |id: &StreamId, n: &Nack, with_consumer: bool| {
                    let mut r = vec![Reply::Bulk(id.to_bytes())];
                    if with_consumer {
                        r.push(Reply::Bulk(n.consumer.clone()));
                    }
                    r.push(int(n.delivery_ms));
                    r.push(int(n.deliveries));
                    Reply::Array(r)
                };
                let mut consumers = Vec::new();
                for (cname, times) in crate::stream::consumers(ctx.db(), db, key, &m, name)? {
                    let mine: Vec<&(StreamId, Nack)> =
                        pel.iter().filter(|(_, n)| n.consumer == cname).collect();
                    consumers.push(Reply::Map(vec![
                        (Reply::text("name"), Reply::Bulk(cname.clone())),
                        (Reply::text("seen-time"), int(times.seen_ms)),
                        (
                            Reply::text("active-time"),
                            times.active_ms.map_or(Reply::Int(-1), int),
                        ),
                        (Reply::text("pel-count"), int(mine.len() as u64)),
                        (
                            Reply::text("pending"),
                            Reply::Array(
                                mine.iter()
                                    .take(limit)
                                    .map(|(id, n)| nack_reply(id, n, false))
                                    .collect(),
                            ),
                        ),
                    ]));
                }
                let mut fields = vec![(Reply::text("name"), Reply::Bulk(name.clone()))];
                fields.extend(group_progress(&m, g));
                fields.extend([
                    (Reply::text("pel-count"), int(pel.len() as u64)),
                    (
                        Reply::text("pending"),
                        Reply::Array(
                            pel.iter()
                                .take(limit)
                                .map(|(id, n)| nack_reply(id, n, true))
                                .collect(),
                        ),
                    ),
                    (Reply::text("consumers"), Reply::Array(consumers)),
                ]);
                detail.push(Reply::Map(fields));
            }
            out.push((Reply::text("groups"), Reply::Array(detail)));
        }
    }
    Ok(Reply::Map(out))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::testing::*;
    use crate::keyspace::{string_key, Encoding, KeyType, Record};
    use crate::resp::Reply;
    use crate::stream::{StreamId, StreamMeta};

    /// XINFO STREAM's `radix-tree-keys` (the node count).
    fn node_count(h: &mut Harness, key: &str) -> Reply {
        let info = match h.run(&["XINFO", "STREAM", key]) {
            Reply::Array(info) => info,
            Reply::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            other => panic!("XINFO STREAM {key}: {other:?}"),
        };
        let at = info
            .iter()
            .position(|r| *r == bulk("radix-tree-keys"))
            .unwrap();
        info[at + 1].clone()
    }

    /// A stream written before streams kept nodes (record format 1, no node records) gets
    /// its nodes at its next write: its live entries appended again in order, so it trims as
    /// the same stream written by this build does.
    #[test]
    fn a_stream_without_nodes_gets_them_at_its_next_write() {
        let mut h = Harness::new();
        h.run(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
        for name in ["new", "old", "old2"] {
            for i in 1..=23 {
                let id = format!("{i}-1");
                let value = "v".repeat(i * 7);
                h.run(&["XADD", name, &id, "f", &value, "n", &i.to_string()]);
            }
        }
        // "old" and "old2" as an earlier build left them.
        for name in ["old", "old2"] {
            let key = string_key(0, name.as_bytes());
            let record = Record::decode(h.shared.backend.get(&key).unwrap().unwrap()).unwrap();
            let mut meta = StreamMeta::decode(&record.payload).unwrap();
            let prefix =
                crate::stream::id_key(0, name.as_bytes(), meta.version, b'N', StreamId::MIN);
            let prefix = prefix[..prefix.len() - 16].to_vec();
            let mut nodes = Vec::new();
            h.shared
                .backend
                .scan(
                    std::ops::Bound::Included(prefix.clone()),
                    crate::backend::prefix_end(&prefix),
                    &mut |k, _| {
                        nodes.push(k.to_vec());
                        true
                    },
                )
                .unwrap();
            // 23 entries in nodes of 4: five records, the last node in the stream's record.
            assert_eq!(nodes.len(), 5);
            for k in nodes {
                h.shared.backend.delete(&k).unwrap();
            }
            meta.nodes = None;
            let old = meta.encode();
            assert_eq!(old[0], 1, "format 1");
            h.shared
                .backend
                .put(
                    &key,
                    &Record::encode_collection(KeyType::Stream, &old, None, Encoding::ByContent),
                )
                .unwrap();
        }
        // Unknown nodes: XINFO estimates (one node of up to 100 entries).
        assert_eq!(node_count(&mut h, "old"), Reply::Int(1));
        for trim in [
            ["MAXLEN", "~", "10"],
            ["MINID", "~", "14-0"],
            ["MAXLEN", "=", "5"],
        ] {
            let mut cmd = vec!["XTRIM", "new"];
            cmd.extend(trim);
            let expected = h.run(&cmd);
            cmd[1] = "old";
            assert_eq!(h.run(&cmd), expected, "{trim:?}");
            assert_eq!(node_count(&mut h, "old"), node_count(&mut h, "new"));
            assert_eq!(
                h.run(&["XRANGE", "old", "-", "+"]),
                h.run(&["XRANGE", "new", "-", "+"])
            );
        }
        assert_eq!(h.run(&["XLEN", "old"]), Reply::Int(5));
        // XADD rebuilds them too: nodes 1-4, 5-8, ..., 17-20, 21-23; 30-1 joins the last,
        // 31-1 starts a seventh; `~ 10` removes three whole nodes (25 -> 13 entries: a
        // fourth would leave 9).
        h.run(&["XADD", "old2", "30-1", "f", "x"]);
        assert_eq!(node_count(&mut h, "old2"), Reply::Int(6));
        assert_eq!(
            h.run(&["XADD", "old2", "MAXLEN", "~", "10", "31-1", "f", "x"]),
            bulk("31-1")
        );
        assert_eq!(node_count(&mut h, "old2"), Reply::Int(4));
        assert_eq!(h.run(&["XLEN", "old2"]), Reply::Int(13));
        assert_eq!(
            h.run(&["XRANGE", "old2", "-", "+", "COUNT", "1"]),
            h.run(&["XRANGE", "old2", "13-1", "13-1"])
        );
        // And XDEL: emptying the last node makes the one before it the last.
        h.run(&["CONFIG", "SET", "stream-node-max-entries", "100"]);
        assert_eq!(h.run(&["XDEL", "old2", "31-1"]), Reply::Int(1));
        assert_eq!(node_count(&mut h, "old2"), Reply::Int(3));
        h.run(&["XADD", "old2", "32-1", "f", "x"]);
        assert_eq!(
            node_count(&mut h, "old2"),
            Reply::Int(3),
            "joins 21-23 and 30-1"
        );
    }
}
