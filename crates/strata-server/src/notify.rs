//! Keyspace notifications (Redis's `notify-keyspace-events`): a command that changes a key
//! names what it did ([`Ctx::notify`](crate::commands::Ctx::notify)); when the setting selects
//! that class of event, the server publishes `<event>` on `__keyspace@<db>__:<key>` (flag `K`)
//! and `<key>` on `__keyevent@<db>__:<event>` (flag `E`) through Pub/Sub, in memory, as Redis
//! does. A command's events are published when it ends, before its reply; those of the
//! commands of an EXEC or a script when the whole batch has been committed (never for a batch
//! that failed). With the setting empty (the default) an event costs one atomic load.
//!
//! Classes and event names are Redis 7's (`notify.c` and each command's
//! `notifyKeyspaceEvent` calls). Two come from the dispatcher rather than the commands: `new`
//! (a write command's key that did not exist before it and does after) and `keymiss` (a read
//! command's key that does not exist). Expired keys are published as `expired` when active
//! expiry removes them (`expire.rs`); a read that finds a key past its time does not remove
//! it, so the event comes from the next expiry cycle (within [`crate::expire::TICK`]) rather
//! than at that read; a write command that finds its key past its time reports `expired`
//! first, as Redis's write lookup does. Evictions never happen here (keys live on disk), so
//! `e` never fires; the JSON commands report no module (`d`) events yet.

use std::sync::atomic::{AtomicU32, Ordering};

use bytes::{BufMut, Bytes, BytesMut};

use crate::keyspace::DbIndex;
use crate::pubsub::PubSub;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub(crate) const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub(crate) const KEYEVENT: u32 = 1 << 1;
/// `g`: DEL, EXPIRE, RENAME, ... (type-independent commands).
pub(crate) const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub(crate) const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub(crate) const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub(crate) const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub(crate) const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub(crate) const ZSET: u32 = 1 << 7;
/// `x`: a key removed because its time passed.
pub(crate) const EXPIRED: u32 = 1 << 8;
/// `e`: a key evicted for memory (never here).
pub(crate) const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub(crate) const STREAM: u32 = 1 << 10;
/// `m`: a read of a key that does not exist (not part of `A`).
pub(crate) const KEY_MISS: u32 = 1 << 11;
/// `d`: module commands (accepted; the JSON commands do not report events yet).
pub(crate) const MODULE: u32 = 1 << 13;
/// `n`: a key added to a database (not part of `A`).
pub(crate) const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub(crate) const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Each class's letter, in the order Redis writes them back (`keyspaceEventsFlagsToString`).
const LETTERS: [(u32, char); 11] = [
    (GENERIC, 'g'),
    (STRING, '$'),
    (LIST, 'l'),
    (SET, 's'),
    (HASH, 'h'),
    (ZSET, 'z'),
    (EXPIRED, 'x'),
    (EVICTED, 'e'),
    (STREAM, 't'),
    (MODULE, 'd'),
    (NEW, 'n'),
];

/// Reads a `notify-keyspace-events` value; `None` names a character that is no class.
pub(crate) fn parse_flags(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            'm' => KEY_MISS,
            c => LETTERS.iter().find(|(_, l)| *l == c)?.0,
        };
    }
    Some(flags)
}

/// The setting's text as CONFIG GET shows it (Redis's canonical order, `A` for all).
pub(crate) fn format_flags(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        out.extend(
            LETTERS
                .iter()
                .filter(|(f, _)| flags & f != 0)
                .map(|(_, l)| *l),
        );
    }
    for (f, l) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & f != 0 {
            out.push(l);
        }
    }
    out
}

/// Redis's reason for a value [`parse_flags`] refuses.
pub(crate) const INVALID_FLAGS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// The live setting, read by every event.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    flags: AtomicU32,
}

impl Notifier {
    pub fn new(flags: u32) -> Self {
        Notifier {
            flags: AtomicU32::new(flags),
        }
    }

    pub fn set(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// Whether events of `class` are published: the class is selected and so is at least one
    /// kind of channel.
    pub fn wants(&self, class: u32) -> bool {
        let flags = self.flags.load(Ordering::Relaxed);
        flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
    }

    /// Publishes one event now.
    pub fn publish(&self, pubsub: &PubSub, event: &Event) {
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & event.class == 0 {
            return;
        }
        if flags & KEYSPACE != 0 {
            let channel = channel(b"__keyspace@", event.db, &event.key);
            pubsub.publish(&channel, &Bytes::from_static(event.name.as_bytes()));
        }
        if flags & KEYEVENT != 0 {
            let channel = channel(b"__keyevent@", event.db, event.name.as_bytes());
            pubsub.publish(&channel, &event.key);
        }
    }
}

/// `<prefix><db>__:<name>`.
fn channel(prefix: &[u8], db: DbIndex, name: &[u8]) -> Bytes {
    let db = db.to_string();
    let mut out = BytesMut::with_capacity(prefix.len() + db.len() + 3 + name.len());
    out.put_slice(prefix);
    out.put_slice(db.as_bytes());
    out.put_slice(b"__:");
    out.put_slice(name);
    out.freeze()
}

/// One thing that happened to a key, waiting to be published.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub class: u32,
    pub name: &'static str,
    /// The logical database, as clients number it.
    pub db: DbIndex,
    pub key: Bytes,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Redis's own examples (tests/unit/pubsub.tcl, "CONFIG GET/SET of event flags").
    #[test]
    fn flags_read_and_print_like_redis() {
        for (given, shown) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
            ("Kmn", "nKm"),
            // Redis prints `A` alone for all classes, so `n` beside it is not shown.
            ("AKEmn", "AKEm"),
            ("Ag$", "A"),
        ] {
            let flags = parse_flags(given).unwrap();
            assert_eq!(format_flags(flags), shown, "{given}");
        }
        assert_eq!(parse_flags("Kq"), None);
        assert_eq!(parse_flags("k"), None);
    }

    #[test]
    fn events_go_to_the_selected_channels_only() {
        let n = Notifier::default();
        assert!(!n.wants(STRING));
        n.set(parse_flags("$").unwrap());
        assert!(!n.wants(STRING), "no K or E: nothing is published");
        n.set(parse_flags("K$").unwrap());
        assert!(n.wants(STRING));
        assert!(!n.wants(LIST));
        n.set(parse_flags("EA").unwrap());
        assert!(n.wants(EXPIRED) && !n.wants(NEW) && !n.wants(KEY_MISS));
        assert_eq!(
            &channel(b"__keyevent@", 12, b"set")[..],
            b"__keyevent@12__:set"
        );
    }
}
