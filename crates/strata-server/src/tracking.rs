//! Client-side caching: CLIENT TRACKING, as Redis 6+ serves it (`tracking.c`). A client in
//! tracking mode is told when a key it may have cached changes:
//!
//! - **Default mode**: the keys each read-only command of the client named are remembered
//!   (OPTIN: only after `CLIENT CACHING yes`; OPTOUT: unless after `CLIENT CACHING no`); the
//!   first change of such a key sends the client `invalidate [key]` and forgets it (until read
//!   again). The table is one map of key names over every database, as Redis's, bounded by
//!   `tracking-table-max-keys`: past it, keys are forgotten with an invalidation, as if changed.
//! - **BCAST**: no table; every change of a key under one of the client's prefixes is collected
//!   and sent as one `invalidate [keys...]` per prefix when the connection that changed it has
//!   answered its batch of commands (Redis: before the event loop sleeps).
//! - `NOLOOP` skips the client's own changes; `REDIRECT id` sends the messages to another
//!   connection (RESP2: as `message __redis__:invalidate [keys]` when that one is subscribed);
//!   FLUSHDB/FLUSHALL send every tracking client `invalidate` with a null ("everything").
//!
//! Changes are seen where WATCH sees them: every write through the server's backend
//! (`txn::Watches::touch`), so merged SET runs, EXEC, scripts and active expiry all count.
//! A client's own invalidations wait until its command answered (as Redis's pending keys), kept
//! in a thread-local list while the command runs: the backend that sees the write does not know
//! which connection's command made it, the dispatcher does ([`enter`]).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

use crate::pubsub::{Mailbox, Message};
use crate::resp::{Protocol, Reply};
use crate::state::lock;

/// The channel a RESP2 redirect target receives invalidations on (it must be subscribed).
pub(crate) const INVALIDATE_CHANNEL: &str = "__redis__:invalidate";

/// Redis's default `tracking-table-max-keys`.
pub(crate) const TABLE_KEYS_MAX_DEFAULT: usize = 1_000_000;

/// A connection's tracking options (CLIENT TRACKING ON ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mode {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// The connection invalidations go to (0: this one).
    pub redirect: u64,
    /// BCAST prefixes, sorted (an empty one: every key).
    pub prefixes: Vec<Bytes>,
    /// The client speaks RESP3 (how a flush's null is written: [`Push::InvalidateAll`]).
    pub resp3: bool,
}

/// What a tracking connection is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Push {
    /// These keys changed.
    Invalidate(Vec<Bytes>),
    /// Every key changed (a flush): the keys are a null, written in the protocol of the
    /// tracking client (`tracker_resp3`) even where a redirect target speaks the other, as
    /// Redis writes it.
    InvalidateAll { tracker_resp3: bool },
    /// The redirect target (this id) is gone: nothing can be delivered.
    RedirectBroken(u64),
}

impl Push {
    /// Bytes it holds while queued in a mailbox.
    pub fn bytes(&self) -> usize {
        match self {
            Push::Invalidate(keys) => keys.iter().map(Bytes::len).sum(),
            Push::InvalidateAll { .. } | Push::RedirectBroken(_) => 0,
        }
    }

    /// Writes it as a connection in `protocol` receives it (`redirected`: for another
    /// connection's tracking; `subscribed`: this one is in Pub/Sub mode). RESP2 carries it only
    /// to a subscribed redirect target (`message __redis__:invalidate ...`); otherwise nothing
    /// is written, as in Redis.
    pub fn encode(
        &self,
        protocol: Protocol,
        redirected: bool,
        subscribed: bool,
        out: &mut bytes::BytesMut,
    ) {
        let mut head = match protocol {
            Protocol::Resp3 => vec![Reply::bulk("invalidate")],
            Protocol::Resp2 if redirected && subscribed => {
                vec![Reply::bulk("message"), Reply::bulk(INVALIDATE_CHANNEL)]
            }
            Protocol::Resp2 => return,
        };
        match self {
            Push::Invalidate(keys) => {
                head.push(Reply::Array(
                    keys.iter().cloned().map(Reply::Bulk).collect(),
                ));
                Reply::Push(head).encode(protocol, out);
            }
            Push::InvalidateAll { tracker_resp3 } => {
                let kind = if protocol == Protocol::Resp3 {
                    '>'
                } else {
                    '*'
                };
                out.extend_from_slice(format!("{kind}{}\r\n", head.len() + 1).as_bytes());
                for r in head {
                    r.encode(protocol, out);
                }
                out.extend_from_slice(if *tracker_resp3 { b"_\r\n" } else { b"$-1\r\n" });
            }
            Push::RedirectBroken(id) if protocol == Protocol::Resp3 => Reply::Push(vec![
                Reply::bulk("tracking-redir-broken"),
                Reply::Int(i64::try_from(*id).unwrap_or(i64::MAX)),
            ])
            .encode(protocol, out),
            Push::RedirectBroken(_) => {}
        }
    }
}

struct Client {
    mode: Mode,
    broken_redirect: bool,
}

/// A BCAST prefix: who listens, and the keys changed since the last broadcast (with the client
/// that changed each last, for NOLOOP; 0 when no client did).
#[derive(Default)]
struct Prefix {
    clients: Vec<u64>,
    changed: BTreeMap<Bytes, u64>,
}

#[derive(Default)]
struct Tables {
    /// Every connection's mailbox (tracking clients and redirect targets alike).
    mailboxes: HashMap<u64, Mailbox>,
    clients: HashMap<u64, Client>,
    /// Default mode: key -> the clients that may have cached it.
    keys: HashMap<Bytes, HashSet<u64>>,
    /// Sum of the sets' sizes (INFO's `tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Bytes, Prefix>,
}

/// The server's tracking state (`Shared::tracking` through `txn::Watches`).
pub(crate) struct Tracking {
    /// Clients in tracking mode: zero means changes need not look.
    clients: AtomicUsize,
    /// BCAST keys wait to be sent.
    broadcast_due: AtomicBool,
    table_keys_max: AtomicUsize,
    tables: Mutex<Tables>,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            clients: AtomicUsize::new(0),
            broadcast_due: AtomicBool::new(false),
            table_keys_max: AtomicUsize::new(TABLE_KEYS_MAX_DEFAULT),
            tables: Mutex::default(),
        }
    }
}

thread_local! {
    /// The client whose command runs on this thread (0: none), see [`enter`].
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// Invalidations for [`CURRENT`] itself, sent after its reply.
    static OWN: RefCell<Vec<Push>> = const { RefCell::new(Vec::new()) };
    /// Set while a flush empties databases: its deletions send nothing one by one.
    static QUIET: Cell<bool> = const { Cell::new(false) };
    /// Set while a script or function runs: for BCAST's NOLOOP its changes are not its
    /// caller's own (Redis records its Lua client as the one that changed them), while default
    /// mode treats them as the caller's (Redis compares with the client being served).
    static IN_SCRIPT: Cell<bool> = const { Cell::new(false) };
}

/// Marks the client whose command runs on this thread until dropped.
pub(crate) struct Entered {
    previous: u64,
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// Runs `client`'s command on this thread from now until the guard drops.
pub(crate) fn enter(client: u64) -> Entered {
    Entered {
        previous: CURRENT.with(|c| c.replace(client)),
    }
}

/// The invalidations the current command made for its own client, in order.
pub(crate) fn take_own() -> Vec<Push> {
    OWN.with(|o| std::mem::take(&mut *o.borrow_mut()))
}

/// Runs `f` (a flush) without per-key invalidations.
pub(crate) fn quietly<T>(f: impl FnOnce() -> T) -> T {
    with_flag(&QUIET, f)
}

/// Runs `f` (a script's commit, where its changes reach the store) with its changes marked as a
/// script's ([`IN_SCRIPT`]).
pub(crate) fn in_script<T>(f: impl FnOnce() -> T) -> T {
    with_flag(&IN_SCRIPT, f)
}

fn with_flag<T>(flag: &'static std::thread::LocalKey<Cell<bool>>, f: impl FnOnce() -> T) -> T {
    let before = flag.with(|q| q.replace(true));
    let out = f();
    flag.with(|q| q.set(before));
    out
}

impl Tables {
    /// Sends `push` for tracking client `id`: to its redirect target, or to it (after its
    /// reply when its command is the one running).
    fn send(&mut self, id: u64, push: Push, current: u64) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        let redirect = client.mode.redirect;
        if redirect != 0 {
            if let Some(target) = self.mailboxes.get(&redirect) {
                target.deliver(Message::Tracking {
                    push,
                    redirected: true,
                });
                return;
            }
            client.broken_redirect = true;
            self.send_own(id, Push::RedirectBroken(redirect), current);
            return;
        }
        self.send_own(id, push, current);
    }

    fn send_own(&self, id: u64, push: Push, current: u64) {
        if id == current {
            OWN.with(|o| o.borrow_mut().push(push));
        } else if let Some(mailbox) = self.mailboxes.get(&id) {
            mailbox.deliver(Message::Tracking {
                push,
                redirected: false,
            });
        }
    }

    /// Default mode: `name` changed (or is forgotten); tells the clients that may hold it.
    fn invalidate_key(&mut self, name: &[u8], current: u64, skip_noloop: bool) {
        let Some(ids) = self.keys.remove(name) else {
            return;
        };
        self.items -= ids.len();
        let key = Bytes::copy_from_slice(name);
        for id in ids {
            let Some(c) = self.clients.get(&id) else {
                continue;
            };
            if c.mode.bcast || (skip_noloop && c.mode.noloop && id == current) {
                continue;
            }
            self.send(id, Push::Invalidate(vec![key.clone()]), current);
        }
    }
}

impl Tracking {
    /// Whether any client tracks (one atomic load: the cost of every write otherwise).
    pub fn active(&self) -> bool {
        self.clients.load(Ordering::Acquire) != 0
    }

    pub fn connect(&self, id: u64, mailbox: Mailbox) {
        lock(&self.tables).mailboxes.insert(id, mailbox);
    }

    /// The connection is gone: its tracking ends (its ids left in the key table go lazily, when
    /// their keys change, as in Redis) and redirects to it break.
    pub fn disconnect(&self, id: u64) {
        let mut t = lock(&self.tables);
        t.mailboxes.remove(&id);
        self.disable_locked(&mut t, id);
    }

    pub fn set_table_keys_max(&self, max: usize) {
        self.table_keys_max.store(max, Ordering::Relaxed);
    }

    pub fn table_keys_max(&self) -> usize {
        self.table_keys_max.load(Ordering::Relaxed)
    }

    /// Whether connection `id` exists (a REDIRECT target must).
    pub fn connected(&self, id: u64) -> bool {
        lock(&self.tables).mailboxes.contains_key(&id)
    }

    /// Turns tracking on for `id` with `mode` (checked by the caller); a client already
    /// tracking keeps its keys and adds prefixes.
    pub fn enable(&self, id: u64, mut mode: Mode) {
        // Kept in order, as Redis's radix tree lists them (CLIENT TRACKINGINFO).
        mode.prefixes.sort();
        mode.prefixes.dedup();
        let mut t = lock(&self.tables);
        for p in &mode.prefixes {
            let prefix = t.prefixes.entry(p.clone()).or_default();
            if !prefix.clients.contains(&id) {
                prefix.clients.push(id);
            }
        }
        match t.clients.get_mut(&id) {
            Some(c) => {
                let mut prefixes = std::mem::take(&mut c.mode.prefixes);
                prefixes.extend(mode.prefixes.iter().cloned());
                prefixes.sort();
                prefixes.dedup();
                c.mode = Mode { prefixes, ..mode };
                c.broken_redirect = false;
            }
            None => {
                t.clients.insert(
                    id,
                    Client {
                        mode,
                        broken_redirect: false,
                    },
                );
                self.clients.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    pub fn disable(&self, id: u64) {
        let mut t = lock(&self.tables);
        self.disable_locked(&mut t, id);
    }

    fn disable_locked(&self, t: &mut Tables, id: u64) {
        let Some(c) = t.clients.remove(&id) else {
            return;
        };
        self.clients.fetch_sub(1, Ordering::AcqRel);
        for p in &c.mode.prefixes {
            if let Some(prefix) = t.prefixes.get_mut(p) {
                prefix.clients.retain(|&c| c != id);
                if prefix.clients.is_empty() {
                    t.prefixes.remove(p);
                }
            }
        }
    }

    /// The client's mode and whether its redirect broke, if it tracks.
    pub fn mode(&self, id: u64) -> Option<(Mode, bool)> {
        lock(&self.tables)
            .clients
            .get(&id)
            .map(|c| (c.mode.clone(), c.broken_redirect))
    }

    /// Remembers that client `id` read `keys` (default mode), then keeps the table within its
    /// bound by forgetting keys with an invalidation.
    pub fn remember<'k>(&self, id: u64, keys: impl IntoIterator<Item = &'k [u8]>) {
        let mut t = lock(&self.tables);
        for k in keys {
            let inserted = match t.keys.get_mut(k) {
                Some(ids) => ids.insert(id),
                None => {
                    t.keys
                        .insert(Bytes::copy_from_slice(k), HashSet::from([id]));
                    true
                }
            };
            t.items += usize::from(inserted);
        }
        self.limit_locked(&mut t);
    }

    /// Brings the table within `tracking-table-max-keys` (after the bound was lowered).
    pub fn limit(&self) {
        self.limit_locked(&mut lock(&self.tables));
    }

    fn limit_locked(&self, t: &mut Tables) {
        let max = self.table_keys_max();
        if max == 0 || t.keys.len() <= max {
            return;
        }
        // Which keys go does not matter (Redis picks at random): the map's order is arbitrary.
        let over = t.keys.len() - max;
        let victims: Vec<Bytes> = t.keys.keys().take(over).cloned().collect();
        for k in victims {
            t.invalidate_key(&k, 0, false);
        }
    }

    /// Keys named (Redis names, any database) changed: tells the clients that may have them.
    pub fn invalidate<'k>(&self, names: impl IntoIterator<Item = &'k [u8]>) {
        if !self.active() || QUIET.with(Cell::get) {
            return;
        }
        let current = CURRENT.with(Cell::get);
        let changed_by = if IN_SCRIPT.with(Cell::get) {
            0
        } else {
            current
        };
        let mut t = lock(&self.tables);
        for name in names {
            if !t.prefixes.is_empty() {
                let mut due = false;
                for (p, prefix) in t.prefixes.iter_mut() {
                    if name.starts_with(p) {
                        prefix
                            .changed
                            .insert(Bytes::copy_from_slice(name), changed_by);
                        due = true;
                    }
                }
                if due {
                    self.broadcast_due.store(true, Ordering::Release);
                }
            }
            t.invalidate_key(name, current, true);
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client is told that everything changed, and the key
    /// table is emptied (as Redis's `trackingInvalidateKeysOnFlush`). Costs a lock per flush.
    pub fn invalidate_all(&self) {
        let current = CURRENT.with(Cell::get);
        let mut t = lock(&self.tables);
        // (The table is emptied also when nobody tracks now: ids of clients that stopped stay
        // in it until their keys change.)
        let ids: Vec<(u64, bool)> = t
            .clients
            .iter()
            .map(|(&id, c)| (id, c.mode.resp3))
            .collect();
        for (id, resp3) in ids {
            t.send(
                id,
                Push::InvalidateAll {
                    tracker_resp3: resp3,
                },
                current,
            );
        }
        t.keys.clear();
        t.items = 0;
    }

    /// Sends the BCAST invalidations collected since the last call: one message per prefix
    /// per client, without a NOLOOP client's own changes.
    pub fn broadcast(&self) {
        if !self.active() {
            return;
        }
        // Taken under the lock, and delivered under it: a caller that returns has seen every
        // change made before it called delivered (by itself or by whoever took them first).
        let mut t = lock(&self.tables);
        if !self.broadcast_due.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut sends = Vec::new();
        for prefix in t.prefixes.values_mut() {
            if prefix.changed.is_empty() {
                continue;
            }
            let changed = std::mem::take(&mut prefix.changed);
            for &id in &prefix.clients {
                sends.push((id, changed.clone()));
            }
        }
        for (id, changed) in sends {
            let noloop = t.clients.get(&id).is_some_and(|c| c.mode.noloop);
            let keys: Vec<Bytes> = changed
                .into_iter()
                .filter(|(_, by)| !(noloop && *by == id))
                .map(|(k, _)| k)
                .collect();
            if !keys.is_empty() {
                // Never the running command's own: broadcasts go after its batch, by mailbox.
                t.send(id, Push::Invalidate(keys), 0);
            }
        }
    }

    /// The client switched protocols (HELLO).
    pub fn set_resp3(&self, id: u64, resp3: bool) {
        if let Some(c) = lock(&self.tables).clients.get_mut(&id) {
            c.mode.resp3 = resp3;
        }
    }

    /// INFO: tracking clients, keys in the table, (key, client) items, BCAST prefixes.
    pub fn stats(&self) -> (usize, usize, usize, usize) {
        let t = lock(&self.tables);
        (t.clients.len(), t.keys.len(), t.items, t.prefixes.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mailbox(id: u64) -> (Mailbox, tokio::sync::mpsc::UnboundedReceiver<Message>) {
        Mailbox::new(id)
    }

    fn received(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Message>) -> Vec<Push> {
        let mut out = Vec::new();
        while let Ok(Message::Tracking { push, .. }) = rx.try_recv() {
            out.push(push);
        }
        out
    }

    type Inbox = tokio::sync::mpsc::UnboundedReceiver<Message>;

    /// Client 1 tracking in default mode, client 2 in `second`, both connected.
    fn two_clients(second: Mode) -> (Tracking, Inbox, Inbox) {
        let t = Tracking::default();
        let (m1, r1) = mailbox(1);
        let (m2, r2) = mailbox(2);
        t.connect(1, m1);
        t.connect(2, m2);
        t.enable(1, Mode::default());
        t.enable(2, second);
        (t, r1, r2)
    }

    fn keys(names: &[&str]) -> Push {
        Push::Invalidate(names.iter().map(|n| Bytes::from(n.to_string())).collect())
    }

    /// A remembered key is invalidated once, then forgotten until read again; the client that
    /// changed it gets its own message after its command (OWN), or none with NOLOOP.
    #[test]
    fn default_mode_invalidates_once_per_read() {
        let (t, mut r1, mut r2) = two_clients(Mode {
            noloop: true,
            ..Mode::default()
        });
        t.remember(1, [&b"a"[..], b"b"]);
        t.remember(2, [&b"a"[..]]);
        {
            let _e = enter(2);
            t.invalidate([&b"a"[..], b"a"]);
        }
        assert_eq!(received(&mut r1), vec![keys(&["a"])]);
        assert!(received(&mut r2).is_empty(), "NOLOOP: its own change");
        assert!(take_own().is_empty());
        {
            let _e = enter(1);
            t.invalidate([&b"b"[..]]);
        }
        assert_eq!(take_own(), vec![keys(&["b"])]);
        assert!(received(&mut r1).is_empty());
        assert_eq!(t.stats(), (2, 0, 0, 0));
    }

    /// BCAST: changes under a prefix go out together at `broadcast`, NOLOOP leaves out the
    /// client's own; other prefixes and other keys are not sent.
    #[test]
    fn bcast_sends_changed_keys_per_prefix() {
        let t = Tracking::default();
        let (m1, mut r1) = mailbox(1);
        t.connect(1, m1);
        t.enable(
            1,
            Mode {
                bcast: true,
                noloop: true,
                prefixes: vec![Bytes::from("user:"), Bytes::from("x")],
                ..Mode::default()
            },
        );
        t.invalidate([&b"user:2"[..], b"other", b"user:1"]);
        {
            let _e = enter(1);
            t.invalidate([&b"user:3"[..]]);
        }
        t.broadcast();
        assert_eq!(received(&mut r1), vec![keys(&["user:1", "user:2"])]);
        t.broadcast();
        assert!(received(&mut r1).is_empty());
    }

    /// A redirect goes to the target's mailbox; once the target is gone the client is told
    /// (RESP3) that its redirect broke.
    #[test]
    fn redirect_and_broken_redirect() {
        let t = Tracking::default();
        let (m1, mut r1) = mailbox(1);
        let (m9, mut r9) = mailbox(9);
        t.connect(1, m1);
        t.connect(9, m9);
        t.enable(
            1,
            Mode {
                redirect: 9,
                ..Mode::default()
            },
        );
        t.remember(1, [&b"k"[..]]);
        t.invalidate([&b"k"[..]]);
        assert_eq!(received(&mut r9), vec![keys(&["k"])]);
        t.disconnect(9);
        t.remember(1, [&b"k"[..]]);
        t.invalidate([&b"k"[..]]);
        assert_eq!(received(&mut r1), vec![Push::RedirectBroken(9)]);
        assert!(t.mode(1).unwrap().1);
    }

    /// The table stays within its bound: the keys forgotten are invalidated.
    #[test]
    fn table_bound_forgets_with_invalidation() {
        let t = Tracking::default();
        t.set_table_keys_max(3);
        let (m1, mut r1) = mailbox(1);
        t.connect(1, m1);
        t.enable(1, Mode::default());
        let names: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        t.remember(1, names.iter().map(|n| n.as_bytes()));
        assert_eq!(t.stats().1, 3);
        let mut forgotten = 0;
        for p in received(&mut r1) {
            match p {
                Push::Invalidate(k) => forgotten += k.len(),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(forgotten, 7);
    }

    /// A flush tells every tracking client, in both modes, and empties the table; changes made
    /// quietly (the flush's own deletes) send nothing.
    #[test]
    fn flush_invalidates_everything() {
        let (t, mut r1, mut r2) = two_clients(Mode {
            bcast: true,
            prefixes: vec![Bytes::new()],
            ..Mode::default()
        });
        t.remember(1, [&b"a"[..]]);
        quietly(|| t.invalidate([&b"a"[..]]));
        t.invalidate_all();
        t.broadcast();
        let all = Push::InvalidateAll {
            tracker_resp3: false,
        };
        assert_eq!(received(&mut r1), vec![all.clone()]);
        assert_eq!(received(&mut r2), vec![all]);
        // With nobody tracking any more, a flush still empties the table.
        t.remember(1, [&b"z"[..]]);
        t.disable(1);
        t.disable(2);
        assert_eq!(t.stats(), (0, 1, 1, 0));
        t.invalidate_all();
        assert_eq!(t.stats(), (0, 0, 0, 0));
        assert!(received(&mut r1).is_empty());
    }
}
