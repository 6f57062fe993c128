//! Key names: the map keys that documents of one store repeat, each stored once and referred to by
//! a small number inside documents.
//!
//! Documents of one kind repeat the same field names: the generated Reddit comments spend 43 % of
//! every JSON line on the names of their 44 fields. Stored form version 2 (see `codec`) lets a
//! map key be a *name reference* (type code [`type_code::NAME_REF`](crate::type_code::NAME_REF),
//! the number is the name's id) instead of the key's text, which takes one or two bytes instead
//! of the name's length plus one.
//!
//! The names live in one engine record ([`NAMES_KEY`]), an append-only list (the id of a name is
//! its position), so ids never change or disappear and any cached copy of the list is a prefix
//! of the stored one. Rules that keep every stored document readable:
//!
//! - a name gets an id only through [`KeyNames::intern_pending`], which appends it with an atomic
//!   read-modify-write of the record (so two handles on one store cannot give one id two names)
//!   and **fsyncs** before the id is used: no document that refers to an id can outlive, on disk,
//!   the name it refers to, in any sync mode;
//! - encoders only use ids of the table they hold, which was read from or written to the record;
//! - a decoder that meets an id past its table reads the record again ([`KeyNames::refresh`]):
//!   another handle on the same store may have added names.
//!
//! Limits: at most [`NAMES_MAX`] names of at most [`NAME_BYTES_MAX`] bytes each; other keys stay
//! inline. A name gets an id the second time this process writes it in a document
//! ([`SEEN_BEFORE_ID`]), so keys that occur once (ids used as map keys, say) do not fill the table.
//!
//! Record format (`NAMES_KEY`'s value): `version u8` ([`NAMES_FORMAT_VERSION`]), `count varint`,
//! then per name `len varint` and its UTF-8 bytes, then `crc32c u32` (little-endian) of everything
//! before it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use crate::error::{Error, Result};

/// The engine key of the name record (beside documents' `0xFF 'D'`).
pub const NAMES_KEY: [u8; 2] = [0xff, b'N'];
/// First byte of the name record.
pub const NAMES_FORMAT_VERSION: u8 = 1;
/// Most names a store gives ids to.
pub const NAMES_MAX: usize = 4096;
/// Longest name (in UTF-8 bytes) that gets an id.
pub const NAME_BYTES_MAX: usize = 64;
/// Times this process must have written a name in documents before the name gets an id.
pub const SEEN_BEFORE_ID: u32 = 2;
/// Most names counted while waiting for an id (bounds memory whatever the documents hold).
const CANDIDATES_MAX: usize = 4 * NAMES_MAX;

/// What [`NameStorage::update`] runs: sees the current record, returns the record to store
/// (`None`: leave it).
pub type RecordUpdate<'a> = dyn FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>> + 'a;

/// Where a store keeps its name record: one key, read, updated atomically, and made durable.
/// Implemented for `strata::Db` (in `store`) and by the server for its backend.
pub trait NameStorage: Send + Sync {
    /// The record under [`NAMES_KEY`], if there is one.
    fn read(&self) -> Result<Option<Vec<u8>>>;
    /// Atomic read-modify-write of the record: `f` sees the current bytes and returns the bytes
    /// to store, or `None` to leave them; no other write to the record happens in between.
    fn update(&self, f: &mut RecordUpdate<'_>) -> Result<()>;
    /// Makes every write so far durable (fsync), whatever the store's sync mode.
    fn sync(&self) -> Result<()>;
}

/// One version of the name list: id -> name and name -> id.
#[derive(Debug, Default, Clone)]
pub struct NameTable {
    names: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
}

impl NameTable {
    /// A table without names (documents are then stored with every map key inline, as the
    /// original encoding stored them).
    pub fn empty() -> Self {
        NameTable::default()
    }

    /// A table of these names, ids in order; the limits of a stored record apply (at most
    /// [`NAMES_MAX`] distinct names of at most [`NAME_BYTES_MAX`] bytes).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self> {
        let mut table = NameTable::empty();
        for name in names {
            if name.len() > NAME_BYTES_MAX
                || table.len() >= NAMES_MAX
                || table.ids.contains_key(name)
            {
                return Err(Error::InvalidArgument(format!(
                    "name {name:?}: longer than {NAME_BYTES_MAX} bytes, repeated, or past {NAMES_MAX} names"
                )));
            }
            table.push(name);
        }
        Ok(table)
    }

    /// The id of `name`, if it has one.
    pub fn id(&self, name: &str) -> Option<u32> {
        if self.names.is_empty() {
            return None;
        }
        self.ids.get(name).copied()
    }

    /// The name with id `id`.
    pub fn name(&self, id: u64) -> Option<&str> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.names.get(i))
            .map(|n| &**n)
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no name has an id.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The names in id order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    fn push(&mut self, name: &str) {
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
    }

    /// The record bytes of this table (see the module comment).
    pub fn to_record(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(16 + self.names.iter().map(|n| n.len() + 1).sum::<usize>());
        out.push(NAMES_FORMAT_VERSION);
        strata::varint::put(&mut out, self.names.len() as u64);
        for n in &self.names {
            strata::varint::put(&mut out, n.len() as u64);
            out.extend_from_slice(n.as_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses record bytes; damage is an error naming the byte offset.
    pub fn from_record(bytes: &[u8]) -> Result<Self> {
        let bad = |offset: usize, reason: &'static str| Error::NamesDecode { offset, reason };
        let body_len = bytes
            .len()
            .checked_sub(4)
            .ok_or_else(|| bad(0, "record shorter than its checksum"))?;
        let (body, crc) = bytes.split_at(body_len);
        let want = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32c::crc32c(body) != want {
            return Err(bad(body_len, "checksum mismatch"));
        }
        match body.first() {
            Some(&NAMES_FORMAT_VERSION) => {}
            Some(&version) => {
                return Err(Error::UnsupportedFormatVersion {
                    what: "name record",
                    version,
                    supported: NAMES_FORMAT_VERSION,
                })
            }
            None => return Err(bad(0, "empty record")),
        }
        let mut pos = 1;
        let count = get_varint(body, &mut pos).ok_or_else(|| bad(pos, "bad name count"))?;
        let count = usize::try_from(count)
            .ok()
            .filter(|&c| c <= NAMES_MAX)
            .ok_or_else(|| bad(1, "more names than NAMES_MAX"))?;
        let mut table = NameTable::empty();
        for _ in 0..count {
            let at = pos;
            let len = get_varint(body, &mut pos)
                .and_then(|l| usize::try_from(l).ok())
                .filter(|&l| l <= NAME_BYTES_MAX && l <= body.len().saturating_sub(pos))
                .ok_or_else(|| bad(at, "name length past the end or over NAME_BYTES_MAX"))?;
            let name = std::str::from_utf8(&body[pos..pos + len])
                .map_err(|_| bad(pos, "name is not UTF-8"))?;
            if table.ids.contains_key(name) {
                return Err(bad(at, "name listed twice"));
            }
            table.push(name);
            pos += len;
        }
        if pos != body.len() {
            return Err(bad(pos, "bytes after the last name"));
        }
        Ok(table)
    }
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let (v, n) = strata::varint::decode(bytes.get(*pos..)?).ok()?;
    *pos += n;
    Some(v)
}

/// The names of one store as this process sees them: the current [`NameTable`] (read without
/// locks), the names waiting for an id, and the storage to add them to. `Send + Sync`; share it
/// behind an `Arc`.
pub struct KeyNames {
    table: ArcSwap<NameTable>,
    storage: Option<Arc<dyn NameStorage>>,
    /// How often each name without an id was written (bounded by `CANDIDATES_MAX`).
    candidates: Mutex<HashMap<Box<str>, u32>>,
    /// Some candidate reached `SEEN_BEFORE_ID`: `intern_pending` has work.
    due: AtomicBool,
    /// The table holds `NAMES_MAX` names: nothing more to count.
    full: AtomicBool,
    /// One interning at a time in this process (others find their names done after it).
    intern_lock: Mutex<()>,
}

impl std::fmt::Debug for KeyNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyNames")
            .field("names", &self.table.load().len())
            .field("stored", &self.storage.is_some())
            .finish()
    }
}

impl KeyNames {
    /// Reads the names of the store behind `storage`.
    pub fn open(storage: Arc<dyn NameStorage>) -> Result<Self> {
        let table = match storage.read()? {
            Some(bytes) => {
                let table = NameTable::from_record(&bytes)?;
                // Another handle may have written ids it has not synced yet: sync before any
                // document written here refers to them.
                if !table.is_empty() {
                    storage.sync()?;
                }
                table
            }
            None => NameTable::empty(),
        };
        Ok(KeyNames {
            full: AtomicBool::new(table.len() >= NAMES_MAX),
            table: ArcSwap::from_pointee(table),
            storage: Some(storage),
            candidates: Mutex::new(HashMap::new()),
            due: AtomicBool::new(false),
            intern_lock: Mutex::new(()),
        })
    }

    /// Names that belong to no store: nothing ever gets an id, so documents encoded with them
    /// hold every key inline, and decoding a name reference fails. For codec use without a store.
    pub fn detached() -> Self {
        KeyNames::with_table(NameTable::empty())
    }

    /// A fixed table that belongs to no store (tests, tools that read a copy of a record).
    pub fn with_table(table: NameTable) -> Self {
        KeyNames {
            table: ArcSwap::from_pointee(table),
            storage: None,
            candidates: Mutex::new(HashMap::new()),
            due: AtomicBool::new(false),
            full: AtomicBool::new(false),
            intern_lock: Mutex::new(()),
        }
    }

    /// The current table.
    pub fn table(&self) -> Arc<NameTable> {
        self.table.load_full()
    }

    /// Counts names an encoder had to write inline (see [`SEEN_BEFORE_ID`]). Cheap when `names`
    /// is empty, which it is once a store's names all have ids.
    pub fn note_inline(&self, names: &[&str]) {
        if names.is_empty() || self.storage.is_none() || self.full.load(Ordering::Relaxed) {
            return;
        }
        let mut c = self
            .candidates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for &name in names {
            if name.len() > NAME_BYTES_MAX {
                continue;
            }
            let room = c.len() < CANDIDATES_MAX;
            let seen = match c.get_mut(name) {
                Some(n) => {
                    *n = n.saturating_add(1);
                    *n
                }
                None if room => {
                    c.insert(name.into(), 1);
                    1
                }
                None => continue,
            };
            if seen >= SEEN_BEFORE_ID {
                self.due.store(true, Ordering::Release);
            }
        }
    }

    /// Gives ids to the names seen often enough: appends them to the stored record, fsyncs, then
    /// publishes the new table. Call it outside any engine read-modify-write (it writes the
    /// record); nothing to do is a single atomic load.
    pub fn intern_pending(&self) -> Result<()> {
        if !self.due.load(Ordering::Acquire) {
            return Ok(());
        }
        let Some(storage) = &self.storage else {
            return Ok(());
        };
        let _one = self
            .intern_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let wanted: Vec<Box<str>> = {
            let mut c = self
                .candidates
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.due.store(false, Ordering::Release);
            let ready: Vec<Box<str>> = c
                .iter()
                .filter(|(_, &n)| n >= SEEN_BEFORE_ID)
                .map(|(k, _)| k.clone())
                .collect();
            for k in &ready {
                c.remove(k);
            }
            ready
        };
        if wanted.is_empty() {
            return Ok(());
        }
        let mut newest: Option<NameTable> = None;
        let result = storage.update(&mut |old| {
            let mut table = match old {
                Some(bytes) => NameTable::from_record(bytes)?,
                None => NameTable::empty(),
            };
            let before = table.len();
            for name in &wanted {
                if table.len() >= NAMES_MAX {
                    break;
                }
                if table.id(name).is_none() {
                    table.push(name);
                }
            }
            let changed = table.len() != before;
            let record = changed.then(|| table.to_record());
            newest = Some(table);
            Ok(record)
        });
        if let Err(e) = result {
            // Count them again so a later call retries.
            self.note_inline(&wanted.iter().map(|n| &**n).collect::<Vec<_>>());
            return Err(e);
        }
        storage.sync()?;
        if let Some(table) = newest {
            if table.len() >= NAMES_MAX {
                // Full: stop counting names that can never get an id.
                self.full.store(true, Ordering::Relaxed);
                self.candidates
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
            }
            self.publish(table);
        }
        Ok(())
    }

    /// Reads the stored record again (another handle on the store may have added names).
    pub fn refresh(&self) -> Result<()> {
        let Some(storage) = &self.storage else {
            return Ok(());
        };
        if let Some(bytes) = storage.read()? {
            let table = NameTable::from_record(&bytes)?;
            if table.len() > self.table.load().len() {
                // Ids another handle wrote may not be synced yet: sync before using them.
                storage.sync()?;
                self.publish(table);
            }
        }
        Ok(())
    }

    /// Replaces the table, unless the current one already holds more (the list only grows).
    fn publish(&self, table: NameTable) {
        self.table.rcu(|current| {
            if current.len() >= table.len() {
                Arc::clone(current)
            } else {
                Arc::new(table.clone())
            }
        });
    }

    /// Runs `f` with the current table; if it fails on a name id past the table, reads the
    /// record again and runs it once more.
    pub fn with_refresh<T>(&self, f: impl Fn(&NameTable) -> Result<T>) -> Result<T> {
        match f(&self.table.load()) {
            Err(Error::UnknownName { .. }) if self.storage.is_some() => {
                self.refresh()?;
                f(&self.table.load())
            }
            other => other,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A name record kept in memory, counting syncs.
    #[derive(Default)]
    struct MemStorage {
        record: Mutex<Option<Vec<u8>>>,
        syncs: std::sync::atomic::AtomicU64,
    }

    impl NameStorage for MemStorage {
        fn read(&self) -> Result<Option<Vec<u8>>> {
            Ok(self.record.lock().unwrap().clone())
        }
        fn update(&self, f: &mut RecordUpdate<'_>) -> Result<()> {
            let mut r = self.record.lock().unwrap();
            if let Some(new) = f(r.as_deref())? {
                *r = Some(new);
            }
            Ok(())
        }
        fn sync(&self) -> Result<()> {
            self.syncs.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    #[test]
    fn record_round_trips_and_every_flipped_byte_is_detected() {
        let mut t = NameTable::empty();
        for n in ["id", "author", "body", "é", ""] {
            t.push(n);
        }
        let rec = t.to_record();
        let back = NameTable::from_record(&rec).unwrap();
        assert_eq!(
            back.names().collect::<Vec<_>>(),
            t.names().collect::<Vec<_>>()
        );
        assert_eq!(back.id("body"), Some(2));
        assert_eq!(back.name(3), Some("é"));
        for i in 0..rec.len() {
            for bit in 0..8 {
                let mut bad = rec.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    NameTable::from_record(&bad).is_err(),
                    "flip of bit {bit} in byte {i} not detected"
                );
            }
        }
        assert!(NameTable::from_record(&rec[..rec.len() - 1]).is_err());
        assert!(NameTable::from_record(&[]).is_err());
    }

    #[test]
    fn names_get_ids_the_second_time_and_stay_in_order() {
        let storage = Arc::new(MemStorage::default());
        let names = KeyNames::open(storage.clone()).unwrap();
        names.note_inline(&["a", "b"]);
        names.intern_pending().unwrap();
        assert!(names.table().is_empty(), "a name seen once got an id");
        names.note_inline(&["b", "a", "c"]);
        names.intern_pending().unwrap();
        let t = names.table();
        assert_eq!(t.len(), 2);
        assert!(t.id("a").is_some() && t.id("b").is_some() && t.id("c").is_none());
        assert_eq!(storage.syncs.load(Ordering::Relaxed), 1);
        // A second handle on the same storage sees them, and adds its own after them.
        let other = KeyNames::open(storage.clone()).unwrap();
        assert_eq!(other.table().id("a"), t.id("a"));
        other.note_inline(&["z", "z"]);
        other.intern_pending().unwrap();
        assert_eq!(other.table().id("z"), Some(2));
        // The first handle learns of "z" when it refreshes.
        assert_eq!(names.table().id("z"), None);
        names.refresh().unwrap();
        assert_eq!(names.table().id("z"), Some(2));
    }

    /// Ids another handle has written but not yet synced are synced before this handle uses
    /// them (a document written with such an id could not be decoded after a power cut, or
    /// would decode with another name once the id was given again).
    #[test]
    fn ids_read_from_the_record_are_synced_before_they_are_used() {
        let storage = Arc::new(MemStorage::default());
        let mut t = NameTable::empty();
        t.push("written");
        t.push("not synced");
        // As another handle leaves it between its update and its sync.
        storage.update(&mut |_| Ok(Some(t.to_record()))).unwrap();
        let opened = KeyNames::open(storage.clone()).unwrap();
        assert_eq!(opened.table().id("not synced"), Some(1));
        assert_eq!(
            storage.syncs.load(Ordering::Relaxed),
            1,
            "open published unsynced ids"
        );
        t.push("later");
        storage.update(&mut |_| Ok(Some(t.to_record()))).unwrap();
        opened.refresh().unwrap();
        assert_eq!(opened.table().id("later"), Some(2));
        assert_eq!(
            storage.syncs.load(Ordering::Relaxed),
            2,
            "refresh published unsynced ids"
        );
    }

    #[test]
    fn long_names_and_names_past_the_limit_stay_inline() {
        let storage = Arc::new(MemStorage::default());
        let names = KeyNames::open(storage).unwrap();
        let long = "x".repeat(NAME_BYTES_MAX + 1);
        names.note_inline(&[&long, &long]);
        names.intern_pending().unwrap();
        assert!(names.table().is_empty());
        let many: Vec<String> = (0..NAMES_MAX + 10).map(|i| format!("n{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        names.note_inline(&refs);
        names.note_inline(&refs);
        names.intern_pending().unwrap();
        assert_eq!(names.table().len(), NAMES_MAX);
        let reread = NameTable::from_record(&names.table().to_record()).unwrap();
        assert_eq!(reread.len(), NAMES_MAX);
    }
}
