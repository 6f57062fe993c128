//! `Options::key_router`, `Db::update_group` and the settled reads a compaction filter gets:
//! keys a router groups live in one partition, change together, and a filter may drop a
//! group's members once their shared record is durably gone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use strata::{CompactionFilter, Db, Engine, KeyRouter, Options, SettledRead, WriteBatch};

/// Routes `m<group>/<member>` with the group's head key `h<group>`; every other key whole.
#[derive(Debug)]
struct ByGroup(u32);

fn group_of(key: &[u8]) -> Option<&[u8]> {
    let rest = key.strip_prefix(b"m")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    Some(&rest[..slash])
}

impl KeyRouter for ByGroup {
    fn id(&self) -> u32 {
        self.0
    }
    fn route(&self, key: &[u8]) -> u64 {
        match group_of(key) {
            Some(g) => xxhash_rust::xxh3::xxh3_64(&[b"h", g].concat()),
            None => xxhash_rust::xxh3::xxh3_64(key),
        }
    }
}

fn options(router: Option<u32>) -> Options {
    let mut o = Options::tiny();
    o.partitions = 8;
    o.key_router = router.map(|id| Arc::new(ByGroup(id)) as Arc<dyn KeyRouter>);
    o
}

#[test]
fn a_router_groups_keys_and_is_required_once_recorded() {
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        // A store made without a router, with keys the router routes as before.
        let mut o = options(None);
        o.engine = engine;
        let db = Db::open(dir.path(), o.clone()).unwrap();
        for i in 0..200 {
            db.put(format!("h{i}").as_bytes(), b"head").unwrap();
        }
        db.close().unwrap();
        // Opened with a router: it is adopted, old keys are found, groups share a partition.
        let mut ro = options(Some(7));
        ro.engine = engine;
        let db = Db::open(dir.path(), ro.clone()).unwrap();
        for i in 0..200 {
            let head = format!("h{i}");
            assert_eq!(&db.get(head.as_bytes()).unwrap().unwrap()[..], b"head");
            for m in 0..5 {
                let member = format!("m{i}/{m}");
                assert_eq!(
                    db.partition_of(member.as_bytes()),
                    db.partition_of(head.as_bytes())
                );
                db.put(member.as_bytes(), b"x").unwrap();
            }
        }
        // Without the router, or with another, the store refuses to open.
        db.close().unwrap();
        let err = Db::open(dir.path(), o.clone()).err().unwrap().to_string();
        assert!(err.contains("key router 7"), "{err}");
        let mut other = options(Some(8));
        other.engine = engine;
        assert!(Db::open(dir.path(), other).is_err());
        let db = Db::open(dir.path(), ro).unwrap();
        assert_eq!(&db.get(b"m3/4").unwrap().unwrap()[..], b"x");
        db.close().unwrap();
    }
    // Router ids 0 and 1 are not routers.
    let dir = tempfile::tempdir().unwrap();
    assert!(Db::open(dir.path(), options(Some(1))).is_err());
}

#[test]
fn group_updates_are_atomic_and_stay_in_their_partition() {
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(Some(9));
        o.engine = engine;
        let db = Arc::new(Db::open(dir.path(), o).unwrap());
        // Threads add members to shared groups; the head counts them. Without atomicity the
        // count and the members disagree.
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..300 {
                        let g = i % 7;
                        let head = format!("h{g}");
                        db.update_group(head.as_bytes(), |read| {
                            let n = read
                                .get(head.as_bytes())?
                                .map_or(0, |v| u64::from_le_bytes(v[..].try_into().unwrap()));
                            let mut b = WriteBatch::new();
                            b.put(format!("m{g}/{t}-{i}"), b"1");
                            b.put(&head, (n + 1).to_le_bytes());
                            Ok((b, ()))
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for g in 0..7 {
            let head = db.get(format!("h{g}").as_bytes()).unwrap().unwrap();
            let n = u64::from_le_bytes(head[..].try_into().unwrap());
            let members = db.scan_prefix(format!("m{g}/").as_bytes()).count() as u64;
            assert_eq!(n, members, "group {g}");
        }
        assert_eq!(db.scan_prefix(b"m").count(), 1200);
        // A group's range read in its partition alone equals the scan of every partition.
        for g in 0..7 {
            let prefix = format!("m{g}/").into_bytes();
            let mut end = prefix.clone();
            *end.last_mut().unwrap() += 1;
            let all: Vec<_> = db.scan_prefix(&prefix).map(|e| e.unwrap()).collect();
            let routed: Vec<_> = db
                .scan_routed(format!("h{g}").as_bytes(), prefix.clone()..end)
                .map(|e| e.unwrap())
                .collect();
            assert_eq!(routed, all, "group {g}");
            assert!(!all.is_empty());
        }
        // A key of another partition is refused, and nothing of the batch is written.
        let (a, b) = (0..100)
            .map(|i| format!("h{i}"))
            .find_map(|k| (db.partition_of(k.as_bytes()) != db.partition_of(b"h0")).then_some(k))
            .map(|k| (b"h0".to_vec(), k.into_bytes()))
            .unwrap();
        let err = db.update_group(&a, |_| {
            let mut w = WriteBatch::new();
            w.put(&a, b"changed");
            w.put(&b, b"elsewhere");
            Ok((w, ()))
        });
        assert!(matches!(err, Err(strata::Error::InvalidArgument(_))));
        assert_ne!(db.get(&a).unwrap().as_deref(), Some(&b"changed"[..]));
        assert!(db
            .update_group(&a, |read| read.get(&b).map(|_| (WriteBatch::new(), ())))
            .is_err());
        assert!(db
            .update_group(&a, |read| read
                .contains(&b)
                .map(|_| (WriteBatch::new(), ())))
            .is_err());
    }
}

/// `Db::hold_group`: runs of updates under one lock interleave with plain group updates of the
/// same groups from other threads without losing any (the heads count the members), each
/// update is visible to plain reads before the next one decides, keys of another partition
/// are refused, and everything is there after a reopen.
#[test]
fn held_group_updates_are_atomic_visible_and_durable() {
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(Some(9));
        o.engine = engine;
        let db = Arc::new(Db::open(dir.path(), o.clone()).unwrap());
        let add = |read: &strata::GroupRead<'_>,
                   head: &str,
                   member: String|
         -> strata::Result<(WriteBatch, u64)> {
            let n = read
                .get(head.as_bytes())?
                .map_or(0, |v| u64::from_le_bytes(v[..].try_into().unwrap()));
            let mut b = WriteBatch::new();
            b.put(member, b"1");
            b.put(head, (n + 1).to_le_bytes());
            Ok((b, n + 1))
        };
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..60 {
                        let g = i % 3;
                        let head = format!("h{g}");
                        if t % 2 == 0 {
                            // A run of five under one lock; each sees the one before.
                            db.hold_group(head.as_bytes(), |hold| {
                                for j in 0..5 {
                                    let n = hold
                                        .update_group(head.as_bytes(), |read| {
                                            add(read, &head, format!("m{g}/{t}-{i}-{j}"))
                                        })
                                        .unwrap();
                                    // Visible at once; the LSM holds the lock across the
                                    // run, so nothing else came between (the log engine's
                                    // reads take the lock: it locks per update).
                                    let seen = db.get(head.as_bytes()).unwrap().unwrap();
                                    let seen = u64::from_le_bytes(seen[..].try_into().unwrap());
                                    if engine == Engine::Lsm {
                                        assert_eq!(seen, n);
                                    } else {
                                        assert!(seen >= n);
                                    }
                                }
                            })
                            .unwrap();
                        } else {
                            db.update_group(head.as_bytes(), |read| {
                                add(read, &head, format!("m{g}/{t}-{i}"))
                            })
                            .unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let check = |db: &Db| {
            for g in 0..3 {
                let head = db.get(format!("h{g}").as_bytes()).unwrap().unwrap();
                let n = u64::from_le_bytes(head[..].try_into().unwrap());
                let members = db.scan_prefix(format!("m{g}/").as_bytes()).count() as u64;
                assert_eq!(n, members, "group {g}");
            }
            // Two threads x 60 x 5 held, two x 60 plain.
            assert_eq!(db.scan_prefix(b"m").count(), 2 * 60 * 5 + 2 * 60);
        };
        check(&db);
        // Another partition's key is refused inside a hold, and nothing of it is written.
        let other = (0..100)
            .map(|i| format!("x{i}"))
            .find(|k| db.partition_of(k.as_bytes()) != db.partition_of(b"h0"))
            .unwrap();
        db.hold_group(b"h0", |hold| {
            assert!(hold.holds(b"h0") && !hold.holds(other.as_bytes()));
            let err = hold.update_group(b"h0", |_| {
                let mut w = WriteBatch::new();
                w.put(b"h0", b"changed");
                w.put(&other, b"elsewhere");
                Ok((w, ()))
            });
            assert!(matches!(err, Err(strata::Error::InvalidArgument(_))));
            assert!(hold
                .update_group(other.as_bytes(), |_| Ok((WriteBatch::new(), ())))
                .is_err());
        })
        .unwrap();
        assert_ne!(db.get(b"h0").unwrap().as_deref(), Some(&b"changed"[..]));
        assert_eq!(db.get(other.as_bytes()).unwrap(), None);
        drop(db);
        let db = Db::open(dir.path(), o).unwrap();
        check(&db);
    }
}

/// Drops a member when its group's head is settled and absent (the metadata-driven filter a
/// Redis hash needs).
#[derive(Debug, Default)]
struct OrphanMembers;

impl CompactionFilter for OrphanMembers {
    fn is_dead(&self, key: &[u8], _value: &[u8], settled: &dyn SettledRead) -> bool {
        let Some(g) = group_of(key) else {
            return false;
        };
        settled
            .settled(&[b"h", g].concat())
            .is_some_and(|head| head.is_none())
    }
}

#[test]
fn a_filter_drops_the_members_of_deleted_heads() {
    let dir = tempfile::tempdir().unwrap();
    let filter = Arc::new(OrphanMembers);
    let mut o = options(Some(9));
    o.partitions = 2;
    o.compaction_filter = Some(filter.clone());
    let db = Db::open(dir.path(), o).unwrap();
    let pad = "v".repeat(150); // above the tiny separation threshold: value logs too
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for g in 0..40 {
        let mut b = WriteBatch::new();
        b.put(format!("h{g}"), b"head");
        model.insert(format!("h{g}").into_bytes(), b"head".to_vec());
        for m in 0..30 {
            let v = if m % 2 == 0 {
                pad.clone()
            } else {
                format!("{m}")
            };
            b.put(format!("m{g}/{m:02}"), &v);
            model.insert(format!("m{g}/{m:02}").into_bytes(), v.into_bytes());
        }
        db.write(b).unwrap();
    }
    db.flush().unwrap();
    // Heads of even groups go; the deletes sit in the memtable: unsettled, nothing dropped.
    for g in (0..40).step_by(2) {
        db.delete(format!("h{g}").as_bytes()).unwrap();
        model.remove(format!("h{g}").as_bytes());
    }
    db.compact().unwrap();
    // Compaction flushes first, so the deletes are settled by the time tables merge: every
    // member of a deleted group is gone, its separated values too (a full compaction reads
    // them for the filter; their value logs, wholly live by the counts, would otherwise keep
    // them); the rest untouched.
    for g in 0..40 {
        for m in 0..30 {
            let k = format!("m{g}/{m:02}");
            let got = db.get(k.as_bytes()).unwrap();
            if g % 2 == 0 {
                assert_eq!(got, None, "{k}");
                model.remove(k.as_bytes());
            } else {
                assert_eq!(
                    got.as_deref(),
                    model.get(k.as_bytes()).map(|v| &v[..]),
                    "{k}"
                );
            }
        }
    }
    assert_eq!(db.get(b"h1").unwrap().as_deref(), Some(&b"head"[..]));
    assert_eq!(db.scan_prefix(b"m").count(), 20 * 30);
    assert_eq!(
        db.scan::<&[u8], _>(..)
            .map(|e| e.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect::<BTreeMap<_, _>>(),
        model
    );
}

/// Keeps every key starting with `x` in the last partition and spreads the rest over the others
/// (the server keeps its expiry index apart this way).
#[derive(Debug)]
struct LastForX;

impl KeyRouter for LastForX {
    fn id(&self) -> u32 {
        11
    }
    fn route(&self, key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(key)
    }
    fn partition(&self, key: &[u8], partitions: usize) -> usize {
        if key.starts_with(b"x") {
            partitions - 1
        } else {
            (self.route(key) % (partitions as u64 - 1)) as usize
        }
    }
    fn keeps_default_placement(&self) -> bool {
        false
    }
}

/// A router that places keys itself: every write, read and scan follows its placement (the
/// last partition holds the `x` keys and nothing else, across a reopen), the `STRATA` file
/// records it, and a store the default rule placed refuses it rather than losing its keys.
#[test]
fn a_router_places_keys_in_partitions_of_its_own() {
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::tiny();
        o.partitions = 5;
        o.engine = engine;
        o.key_router = Some(Arc::new(LastForX));
        let mut model = BTreeMap::new();
        {
            let db = Db::open(dir.path(), o.clone()).unwrap();
            for i in 0..400 {
                let (k, v) = (format!("{}{i}", ["x", "k"][i % 2]), format!("v{i}"));
                if i % 3 == 0 {
                    let mut b = WriteBatch::new();
                    b.put(&k, &v);
                    b.put(format!("x-index-{i}"), b"");
                    db.write(b).unwrap();
                    model.insert(format!("x-index-{i}").into_bytes(), Vec::new());
                } else {
                    db.put(k.as_bytes(), v.as_bytes()).unwrap();
                }
                model.insert(k.into_bytes(), v.into_bytes());
            }
            db.flush().unwrap();
            db.close().unwrap();
        }
        let layout = Db::existing_layout(dir.path(), &strata::vfs::RealFs)
            .unwrap()
            .unwrap();
        assert_eq!(
            (layout.partitions, layout.engine, layout.router_id),
            (5, engine, 11)
        );
        let db = Db::open(dir.path(), o.clone()).unwrap();
        for (k, v) in &model {
            let p = db.partition_of(k);
            assert_eq!(p == 4, k.starts_with(b"x"), "{k:?} in partition {p}");
            assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
        }
        // The last partition alone holds exactly the `x` keys; the others none of them.
        let last: Vec<Vec<u8>> = db
            .scan_routed::<&[u8], _>(b"x", ..)
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        let xs: Vec<Vec<u8>> = model
            .keys()
            .filter(|k| k.starts_with(b"x"))
            .cloned()
            .collect();
        assert_eq!(last, xs);
        let all: BTreeMap<Vec<u8>, Vec<u8>> = db
            .scan::<&[u8], _>(..)
            .map(|e| e.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(all, model);
        db.close().unwrap();
        // A store placed by the default rule refuses the router: its keys would not be found.
        let plain = tempfile::tempdir().unwrap();
        let mut po = o.clone();
        po.key_router = None;
        Db::open(plain.path(), po).unwrap().close().unwrap();
        let err = Db::open(plain.path(), o.clone()).err().unwrap().to_string();
        assert!(err.contains("places keys its own way"), "{err}");
    }
}

/// Drops a member when its group's head, settled, no longer names the member's incarnation
/// (the head's first byte): the version check of a Redis collection's record.
#[derive(Debug, Default)]
struct StaleMembers;

impl CompactionFilter for StaleMembers {
    fn is_dead(&self, key: &[u8], value: &[u8], settled: &dyn SettledRead) -> bool {
        let Some(g) = group_of(key) else {
            return false;
        };
        match settled.settled(&[b"h", g].concat()) {
            Some(Some(head)) => head.first() != value.first(),
            Some(None) => true,
            None => false,
        }
    }
}

/// Heads large enough to be separated into value logs are read for the filter as small ones
/// are (a Redis stream's record with its last node is past the tiny options' threshold).
#[test]
fn a_filter_reads_separated_heads() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(Some(9));
    o.partitions = 2;
    o.compaction_filter = Some(Arc::new(StaleMembers));
    let db = Db::open(dir.path(), o).unwrap();
    let pad = "p".repeat(300);
    for g in 0..20 {
        let mut b = WriteBatch::new();
        b.put(format!("h{g}"), format!("A{pad}"));
        for m in 0..30 {
            b.put(format!("m{g}/{m:02}"), format!("A{m}"));
        }
        db.write(b).unwrap();
    }
    db.flush().unwrap();
    // Even groups start a new incarnation: their members of "A" are dead.
    for g in (0..20).step_by(2) {
        db.put(format!("h{g}").as_bytes(), format!("B{pad}").as_bytes())
            .unwrap();
    }
    db.compact().unwrap();
    for g in 0..20 {
        let members = db.scan_prefix(format!("m{g}/").as_bytes()).count();
        assert_eq!(members, if g % 2 == 0 { 0 } else { 30 }, "group {g}");
    }
}
