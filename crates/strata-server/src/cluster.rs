//! Cluster node mode (`strata serve --cluster`): the node side of Redis Cluster's protocol, so
//! cluster-aware clients (redis-cli `-c`, redis-py's `RedisCluster`, the `redis` crate's
//! cluster client) spread keys over several servers by hash slot.
//!
//! - Every key belongs to one of [`SLOTS`] hash slots: CRC16 (XMODEM) of the key, or of its
//!   hash tag (the bytes between the first `{` and the next `}` when not empty), modulo 16384,
//!   exactly as Redis computes it ([`key_slot`]).
//! - There is no gossip bus. The *slot map* (node ids, addresses, slot ranges and a version) is
//!   the operator's: pushed to every node with `CLUSTERX SETNODES` (the shape Kvrocks uses),
//!   persisted, and refused when older than the node's own ([`SlotMap`]).
//! - A keyed command for a slot another node owns gets `-MOVED slot host:port`; keys of several
//!   slots in one command (or one transaction) get `-CROSSSLOT`. While a slot moves (`CLUSTER
//!   SETSLOT ... MIGRATING|IMPORTING`, then `MIGRATE`), the source answers `-ASK` for keys it no
//!   longer has and the target serves them after `ASKING` ([`ClusterState::route`]).
//!
//! What the node persists (map, own id, slots being moved) is one engine record, [`STATE_KEY`],
//! written and fsynced before the command that changed it answers; its bytes are
//! `"SCL" | format u8 | body length u32 LE | body | crc32c u32 LE of all before` with a text
//! body (`docs/format.md`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::backend::KvBackend;
use crate::error::{Error, Result};

/// Number of hash slots (Redis's).
pub const SLOTS: usize = 16384;

/// Engine key of the node's persisted cluster state (outside every keyspace prefix; FLUSHALL
/// leaves it alone).
pub const STATE_KEY: [u8; 2] = [0xff, b'C'];

/// Magic bytes of the persisted state.
const STATE_MAGIC: &[u8; 3] = b"SCL";
/// Format of the persisted state this build writes and reads.
const STATE_FORMAT_VERSION: u8 = 1;
/// Largest persisted state accepted (a full map of 1000 nodes with fragmented ranges fits).
const STATE_BYTES_MAX: usize = 16 << 20;
/// Most nodes a map may name.
pub const NODES_MAX: usize = 1000;
/// Longest host name a map may give (DNS's limit).
pub const HOST_BYTES_MAX: usize = 255;
/// Longest CLUSTERX SETNODES text accepted (a full map of `NODES_MAX` nodes with fragmented
/// ranges fits).
pub const MAP_TEXT_BYTES_MAX: usize = 8 << 20;
/// Length of a node id (hex characters), as Redis's.
pub const NODE_ID_LEN: usize = 40;

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The bytes of `key` that choose its slot: its hash tag when it has a non-empty one.
fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            if close > 0 {
                return &rest[..close];
            }
        }
    }
    key
}

/// The hash slot of `key` (Redis's `keyHashSlot`).
pub fn key_slot(key: &[u8]) -> u16 {
    CRC16.checksum(hashed_part(key)) & (SLOTS as u16 - 1)
}

/// A fresh random node id: 40 lowercase hex characters, as Redis makes them.
pub fn random_node_id() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..NODE_ID_LEN)
        .map(|_| char::from(b"0123456789abcdef"[rng.gen_range(0..16)]))
        .collect()
}

/// Whether `id` has the shape of a node id.
pub fn valid_node_id(id: &str) -> bool {
    id.len() == NODE_ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One node of a slot map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapNode {
    /// Node id (40 hex characters).
    pub id: String,
    /// Address clients connect to.
    pub host: String,
    /// Port clients connect to.
    pub port: u16,
    /// Slot ranges it owns, inclusive, sorted and not overlapping.
    pub ranges: Vec<(u16, u16)>,
}

/// The operator's slot map: who owns which slot, and the map's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMap {
    /// Grows with every change; a node refuses a map older than its own.
    pub version: u64,
    /// The nodes, in the order given.
    pub nodes: Vec<MapNode>,
    /// Slot -> index into `nodes`, or `UNOWNED`.
    owner: Vec<u16>,
    /// Number of slots with an owner (checked on every routed command).
    assigned: usize,
}

const UNOWNED: u16 = u16::MAX;

impl SlotMap {
    /// Parses the text of `CLUSTERX SETNODES`: one node per line (lines split on `\n`, blank
    /// ones skipped), `<id> <host> <port> master - <slot or first-last>...`. Replicas
    /// (`slave <master-id>`) are refused: this node mode has none.
    pub fn parse(text: &str, version: u64) -> std::result::Result<SlotMap, String> {
        if text.len() > MAP_TEXT_BYTES_MAX {
            return Err(format!(
                "the map text is longer than {MAP_TEXT_BYTES_MAX} bytes"
            ));
        }
        let mut nodes: Vec<MapNode> = Vec::new();
        let mut owner = vec![UNOWNED; SLOTS];
        for line in text.split('\n').map(str::trim).filter(|l| !l.is_empty()) {
            let words: Vec<&str> = line.split_ascii_whitespace().collect();
            if words.len() < 5 {
                return Err(format!("invalid node line (too few fields): {line}"));
            }
            let id = words[0].to_ascii_lowercase();
            if !valid_node_id(&id) {
                return Err(format!("invalid node id: {}", words[0]));
            }
            if nodes.iter().any(|n| n.id == id) {
                return Err(format!("node id named twice: {id}"));
            }
            if words[1].len() > HOST_BYTES_MAX {
                return Err(format!("host longer than {HOST_BYTES_MAX} bytes"));
            }
            let host = words[1].to_string();
            let port: u16 = words[2]
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("invalid port: {}", words[2]))?;
            if !words[3].eq_ignore_ascii_case("master") || words[4] != "-" {
                return Err(format!(
                    "only masters are supported (role 'master', master id '-'): {line}"
                ));
            }
            if nodes.len() >= NODES_MAX {
                return Err(format!("more than {NODES_MAX} nodes"));
            }
            let index = nodes.len() as u16;
            let mut ranges = Vec::new();
            for word in &words[5..] {
                let (first, last) = match word.split_once('-') {
                    Some((a, b)) => (parse_slot(a)?, parse_slot(b)?),
                    None => {
                        let s = parse_slot(word)?;
                        (s, s)
                    }
                };
                if first > last {
                    return Err(format!("invalid slot range: {word}"));
                }
                for slot in first..=last {
                    if owner[usize::from(slot)] != UNOWNED {
                        return Err(format!("slot {slot} is given to two nodes"));
                    }
                    owner[usize::from(slot)] = index;
                }
                ranges.push((first, last));
            }
            ranges.sort_unstable();
            nodes.push(MapNode {
                id,
                host,
                port,
                ranges,
            });
        }
        let assigned = owner.iter().filter(|&&o| o != UNOWNED).count();
        Ok(SlotMap {
            version,
            nodes,
            owner,
            assigned,
        })
    }

    /// The map as `CLUSTERX SETNODES` text (parses back to an equal map).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let _ = write!(out, "{} {} {} master -", n.id, n.host, n.port);
            for (a, b) in &n.ranges {
                if a == b {
                    let _ = write!(out, " {a}");
                } else {
                    let _ = write!(out, " {a}-{b}");
                }
            }
            out.push('\n');
        }
        out
    }

    /// The node owning `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&MapNode> {
        let i = *self.owner.get(usize::from(slot))?;
        self.nodes.get(usize::from(i))
    }

    /// The node with id `id`.
    pub fn node(&self, id: &str) -> Option<&MapNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Number of slots some node owns.
    pub fn assigned_slots(&self) -> usize {
        self.assigned
    }

    /// Runs of consecutive slots with one owner, in slot order: (first, last, owner).
    pub fn runs(&self) -> Vec<(u16, u16, &MapNode)> {
        let mut runs: Vec<(u16, u16, &MapNode)> = Vec::new();
        for (slot, &o) in self.owner.iter().enumerate() {
            let Some(node) = self.nodes.get(usize::from(o)) else {
                continue;
            };
            let slot = slot as u16;
            match runs.last_mut() {
                Some((_, last, n)) if *last + 1 == slot && n.id == node.id => *last = slot,
                _ => runs.push((slot, slot, node)),
            }
        }
        runs
    }
}

fn parse_slot(s: &str) -> std::result::Result<u16, String> {
    s.parse::<u16>()
        .ok()
        .filter(|&v| usize::from(v) < SLOTS)
        .ok_or_else(|| format!("invalid slot: {s}"))
}

/// What a node knows about its cluster: its own id, the operator's map, and the slots it is
/// moving out (`migrating`, slot -> target id) or in (`importing`, slot -> source id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterState {
    /// This node's id.
    pub my_id: String,
    /// The latest map pushed, if any.
    pub map: Option<SlotMap>,
    /// Slots this node is moving to another node.
    pub migrating: BTreeMap<u16, String>,
    /// Slots this node is taking from another node.
    pub importing: BTreeMap<u16, String>,
}

/// Where a command must run, by [`ClusterState::route`].
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Here.
    Here,
    /// Not here: the error to answer (`MOVED`, `ASK`, `CROSSSLOT`, `TRYAGAIN`, `CLUSTERDOWN`).
    Elsewhere(String),
}

impl ClusterState {
    /// A node that knows no map yet.
    pub fn new(my_id: String) -> Self {
        ClusterState {
            my_id,
            map: None,
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
        }
    }

    /// This node's entry in the map.
    pub fn me(&self) -> Option<&MapNode> {
        self.map.as_ref().and_then(|m| m.node(&self.my_id))
    }

    /// `ok` when every slot has an owner (Redis's `cluster-require-full-coverage yes`).
    pub fn is_ok(&self) -> bool {
        self.map
            .as_ref()
            .is_some_and(|m| m.assigned_slots() == SLOTS)
    }

    /// Where a command with `keys` must run (Redis's `getNodeByQuery`). `asking`: the client
    /// sent ASKING just before (or the command is RESTORE-ASKING); `migrate`: the command is
    /// MIGRATE, which runs here whenever its slot is being moved; `exists` says whether a key
    /// is here, asked only for slots being moved.
    pub fn route(
        &self,
        keys: &[&[u8]],
        asking: bool,
        migrate: bool,
        exists: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> Result<Route> {
        let Some(first) = keys.first() else {
            return Ok(Route::Here);
        };
        let slot = key_slot(first);
        if keys[1..].iter().any(|k| key_slot(k) != slot) {
            return Ok(Route::Elsewhere(
                "CROSSSLOT Keys in request don't hash to the same slot".into(),
            ));
        }
        let Some(owner) = self.map.as_ref().and_then(|m| m.owner(slot)) else {
            return Ok(Route::Elsewhere("CLUSTERDOWN Hash slot not served".into()));
        };
        if !self.is_ok() {
            return Ok(Route::Elsewhere("CLUSTERDOWN The cluster is down".into()));
        }
        let mine = owner.id == self.my_id;
        let migrating = if mine {
            self.migrating.get(&slot)
        } else {
            None
        };
        let importing = !mine && asking && self.importing.contains_key(&slot);
        if migrate && (migrating.is_some() || self.importing.contains_key(&slot)) {
            return Ok(Route::Here);
        }
        if migrating.is_some() || importing {
            let mut missing = 0;
            for key in keys {
                if !exists(key)? {
                    missing += 1;
                }
            }
            let multiple = keys.len() > 1;
            if let Some(target) = migrating {
                if missing > 0 {
                    if missing < keys.len() {
                        return Ok(Route::Elsewhere(TRYAGAIN.into()));
                    }
                    let addr = self
                        .map
                        .as_ref()
                        .and_then(|m| m.node(target))
                        .map(|n| format!("{}:{}", n.host, n.port));
                    return Ok(match addr {
                        Some(addr) => Route::Elsewhere(format!("ASK {slot} {addr}")),
                        // The target is not in the map: nothing to send the client to.
                        None => Route::Elsewhere(TRYAGAIN.into()),
                    });
                }
                return Ok(Route::Here);
            }
            if multiple && missing > 0 {
                return Ok(Route::Elsewhere(TRYAGAIN.into()));
            }
            return Ok(Route::Here);
        }
        if mine {
            Ok(Route::Here)
        } else {
            Ok(Route::Elsewhere(format!(
                "MOVED {slot} {}:{}",
                owner.host, owner.port
            )))
        }
    }

    /// Whether a command on `key` alone runs here with no redirection possible: the cluster is
    /// ok, this node owns the slot and is not moving it (so [`route`](Self::route) answers
    /// `Here` without looking at the key).
    pub fn serves_plainly(&self, key: &[u8]) -> bool {
        let slot = key_slot(key);
        self.is_ok()
            && self
                .map
                .as_ref()
                .and_then(|m| m.owner(slot))
                .is_some_and(|n| n.id == self.my_id)
            && !self.migrating.contains_key(&slot)
    }

    /// Takes a new map: refused when its version is older than the node's (or equal with other
    /// contents). Slots the new map gives this node stop importing; slots it gives another node
    /// stop migrating.
    pub fn set_map(&mut self, map: SlotMap, force: bool) -> std::result::Result<(), String> {
        if let Some(old) = &self.map {
            if !force && map.version < old.version {
                return Err(format!(
                    "Invalid cluster version: the node has version {}, the map {}",
                    old.version, map.version
                ));
            }
            if !force && map.version == old.version && &map != old {
                return Err(format!(
                    "Invalid cluster version: the node already has another map at version {}",
                    old.version
                ));
            }
        }
        let me = self.my_id.clone();
        self.migrating
            .retain(|slot, _| map.owner(*slot).is_some_and(|n| n.id == me));
        self.importing
            .retain(|slot, _| map.owner(*slot).is_none_or(|n| n.id != me));
        self.map = Some(map);
        Ok(())
    }

    /// The persisted bytes (see the module documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut body = String::new();
        let _ = writeln!(body, "id {}", self.my_id);
        if let Some(map) = &self.map {
            let _ = writeln!(body, "version {}", map.version);
            for line in map.to_text().lines() {
                let _ = writeln!(body, "node {line}");
            }
        }
        for (slot, id) in &self.migrating {
            let _ = writeln!(body, "migrating {slot} {id}");
        }
        for (slot, id) in &self.importing {
            let _ = writeln!(body, "importing {slot} {id}");
        }
        let mut out = Vec::with_capacity(body.len() + 12);
        out.extend_from_slice(STATE_MAGIC);
        out.push(STATE_FORMAT_VERSION);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body.as_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads persisted bytes; a damaged or unknown record is an error naming what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<ClusterState> {
        let bad = |why: &str| Error::command(format!("cluster state record: {why}"));
        if bytes.len() < 12 || bytes.len() > STATE_BYTES_MAX {
            return Err(bad("wrong length"));
        }
        if &bytes[..3] != STATE_MAGIC {
            return Err(bad("not a cluster state record"));
        }
        if bytes[3] != STATE_FORMAT_VERSION {
            return Err(bad(&format!(
                "format {} is not one this build reads ({STATE_FORMAT_VERSION})",
                bytes[3]
            )));
        }
        let (data, crc) = bytes.split_at(bytes.len() - 4);
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32c::crc32c(data) != stored {
            return Err(bad("checksum mismatch"));
        }
        let len = u32::from_le_bytes([data[4], data[5], data[6], data[7]]) as usize;
        let body = &data[8..];
        if body.len() != len {
            return Err(bad("body length mismatch"));
        }
        let body = std::str::from_utf8(body).map_err(|_| bad("body is not UTF-8"))?;
        let mut my_id = None;
        let mut version = None;
        let mut nodes = String::new();
        let mut migrating = BTreeMap::new();
        let mut importing = BTreeMap::new();
        for line in body.lines() {
            let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
            match tag {
                "id" if valid_node_id(rest) => my_id = Some(rest.to_string()),
                "version" => version = Some(rest.parse::<u64>().map_err(|_| bad("version"))?),
                "node" => {
                    nodes.push_str(rest);
                    nodes.push('\n');
                }
                "migrating" | "importing" => {
                    let (slot, id) = rest.split_once(' ').ok_or_else(|| bad(line))?;
                    let slot = parse_slot(slot).map_err(|e| bad(&e))?;
                    if !valid_node_id(id) {
                        return Err(bad(line));
                    }
                    let table = if tag == "migrating" {
                        &mut migrating
                    } else {
                        &mut importing
                    };
                    table.insert(slot, id.to_string());
                }
                _ => return Err(bad(&format!("unknown line: {line}"))),
            }
        }
        let my_id = my_id.ok_or_else(|| bad("no node id"))?;
        let map = match version {
            Some(v) => Some(SlotMap::parse(&nodes, v).map_err(|e| bad(&e))?),
            None => None,
        };
        Ok(ClusterState {
            my_id,
            map,
            migrating,
            importing,
        })
    }
}

const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

/// A running node's cluster state, shared by its connections.
pub(crate) struct ClusterNode {
    state: parking_lot::RwLock<ClusterState>,
    /// Serializes changes, so the state's lock is held only to swap a persisted state in (every
    /// routed command reads it; none should wait for an fsync).
    changing: parking_lot::Mutex<()>,
}

impl ClusterNode {
    /// The state persisted in `b`, or a new one (a fresh random node id, no map) persisted now.
    pub fn open(b: &dyn KvBackend) -> Result<ClusterNode> {
        let state = match b.get(&STATE_KEY)? {
            Some(bytes) => ClusterState::decode(&bytes)?,
            None => {
                let state = ClusterState::new(random_node_id());
                b.put(&STATE_KEY, &state.encode())?;
                b.sync()?;
                state
            }
        };
        Ok(ClusterNode {
            state: parking_lot::RwLock::new(state),
            changing: parking_lot::Mutex::new(()),
        })
    }

    /// The current state.
    pub fn read(&self) -> parking_lot::RwLockReadGuard<'_, ClusterState> {
        self.state.read()
    }

    /// Changes the state with `f`, persists it in `b` (written and fsynced; `b` must be the
    /// server's store itself, not a transaction's overlay) and only then makes it current; if
    /// `f` or the write fails nothing changes. A state too large to be read back is refused.
    pub fn change<R>(
        &self,
        b: &dyn KvBackend,
        f: impl FnOnce(&mut ClusterState) -> Result<R>,
    ) -> Result<R> {
        let _one_at_a_time = self.changing.lock();
        let mut next = self.state.read().clone();
        let result = f(&mut next)?;
        if next != *self.state.read() {
            let bytes = next.encode();
            if bytes.len() > STATE_BYTES_MAX {
                return Err(Error::command(format!(
                    "the cluster state would take {} bytes, more than the {STATE_BYTES_MAX} a node reads back",
                    bytes.len()
                )));
            }
            b.put(&STATE_KEY, &bytes)?;
            b.sync()?;
            *self.state.write() = next;
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> String {
        std::iter::repeat_n(c, NODE_ID_LEN).collect()
    }

    fn two_nodes(version: u64) -> SlotMap {
        let text = format!(
            "{} 127.0.0.1 7001 master - 0-8191\n{} 127.0.0.1 7002 master - 8192-16383\n",
            id('a'),
            id('b')
        );
        SlotMap::parse(&text, version).unwrap()
    }

    #[test]
    fn slots_match_redis_vectors() {
        // CRC16/XMODEM check value, and slots redis-server 7.0 answers for CLUSTER KEYSLOT.
        assert_eq!(CRC16.checksum(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn maps_parse_print_and_refuse_bad_lines() {
        let map = two_nodes(3);
        assert_eq!(SlotMap::parse(&map.to_text(), 3).unwrap(), map);
        assert_eq!(map.owner(0).unwrap().port, 7001);
        assert_eq!(map.owner(16383).unwrap().port, 7002);
        assert_eq!(map.assigned_slots(), SLOTS);
        assert_eq!(map.runs().len(), 2);
        for bad in [
            "zz 127.0.0.1 1 master - 0",
            &format!("{} h 0 master - 0", id('a')),
            &format!("{} h 1 slave {} 0", id('a'), id('b')),
            &format!("{} h 1 master - 16384", id('a')),
            &format!("{} h 1 master - 5-4", id('a')),
            &format!("{} h 1 master - 0-5\n{} h 2 master - 5", id('a'), id('b')),
            &format!("{} h 1 master - 0\n{} h 2 master - 1", id('a'), id('a')),
            &format!(
                "{} {} 1 master - 0",
                id('a'),
                "h".repeat(HOST_BYTES_MAX + 1)
            ),
            &format!(
                "{} h 1 master - 0{}",
                id('a'),
                " ".repeat(MAP_TEXT_BYTES_MAX)
            ),
        ] {
            assert!(SlotMap::parse(bad, 1).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn routes_follow_redis_rules() {
        let mut state = ClusterState::new(id('a'));
        let mut none = |_: &[u8]| Ok(false);
        assert_eq!(
            state.route(&[b"foo"], false, false, &mut none).unwrap(),
            Route::Elsewhere("CLUSTERDOWN Hash slot not served".into())
        );
        state.set_map(two_nodes(1), false).unwrap();
        // "bar" (5061) is ours, "foo" (12182) is b's.
        assert_eq!(
            state.route(&[b"bar"], false, false, &mut none).unwrap(),
            Route::Here
        );
        assert_eq!(
            state.route(&[b"foo"], false, false, &mut none).unwrap(),
            Route::Elsewhere("MOVED 12182 127.0.0.1:7002".into())
        );
        assert!(matches!(
            state.route(&[b"foo", b"bar"], false, false, &mut none).unwrap(),
            Route::Elsewhere(e) if e.starts_with("CROSSSLOT")
        ));
        assert_eq!(
            state.route(&[], false, false, &mut none).unwrap(),
            Route::Here
        );
        // Moving 5061 to b: present keys stay here, missing ones are asked of b.
        state.migrating.insert(5061, id('b'));
        let mut has_bar = |k: &[u8]| Ok(k == b"bar");
        assert_eq!(
            state.route(&[b"bar"], false, false, &mut has_bar).unwrap(),
            Route::Here
        );
        assert_eq!(
            state
                .route(&[b"{bar}x"], false, false, &mut has_bar)
                .unwrap(),
            Route::Elsewhere("ASK 5061 127.0.0.1:7002".into())
        );
        assert!(matches!(
            state.route(&[b"bar", b"{bar}x"], false, false, &mut has_bar).unwrap(),
            Route::Elsewhere(e) if e.starts_with("TRYAGAIN")
        ));
        // Importing 12182 from b: only after ASKING.
        state.importing.insert(12182, id('b'));
        assert!(matches!(
            state.route(&[b"foo"], false, false, &mut none).unwrap(),
            Route::Elsewhere(e) if e.starts_with("MOVED")
        ));
        assert_eq!(
            state.route(&[b"foo"], true, false, &mut none).unwrap(),
            Route::Here
        );
    }

    #[test]
    fn maps_are_refused_when_older_and_settle_moves() {
        let mut state = ClusterState::new(id('a'));
        state.set_map(two_nodes(5), false).unwrap();
        assert!(state.set_map(two_nodes(4), false).is_err());
        assert!(state.set_map(two_nodes(5), false).is_ok());
        state.migrating.insert(5061, id('b'));
        state.importing.insert(12182, id('b'));
        // Version 6 gives 5061 to b and 12182 to a: both moves are over.
        let text = format!(
            "{} 127.0.0.1 7001 master - 0-5060 5062-8191 12182\n{} 127.0.0.1 7002 master - 5061 8192-12181 12183-16383\n",
            id('a'),
            id('b')
        );
        let moved = SlotMap::parse(&text, 6).unwrap();
        assert!(state.set_map(moved.clone(), false).is_ok());
        assert!(state.migrating.is_empty() && state.importing.is_empty());
        let mut different = moved;
        different.nodes[0].port = 7009;
        assert!(state.set_map(different.clone(), false).is_err());
        assert!(state.set_map(different, true).is_ok());
    }

    #[test]
    fn state_round_trips_and_every_flipped_byte_is_detected() {
        let mut state = ClusterState::new(id('a'));
        let bytes = state.encode();
        assert_eq!(ClusterState::decode(&bytes).unwrap(), state);
        state.set_map(two_nodes(9), false).unwrap();
        state.migrating.insert(7, id('b'));
        state.importing.insert(9000, id('b'));
        let bytes = state.encode();
        assert_eq!(ClusterState::decode(&bytes).unwrap(), state);
        for i in 0..bytes.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = bytes.clone();
                bad[i] ^= bit;
                assert!(ClusterState::decode(&bad).is_err(), "flip at {i} not seen");
            }
        }
        assert!(ClusterState::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
