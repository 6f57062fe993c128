//! Keeps `docs/format.md` true: decodes files the engine really wrote with a decoder written
//! from that page alone (no engine internals), and checks the contents against what was put.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use strata::{Compression, Db, Options, SyncMode};

struct R<'a>(&'a [u8], usize);

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.0[self.1..self.1 + n];
        self.1 += n;
        s
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    fn varint(&mut self) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = self.u8();
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.varint() as usize;
        self.take(n).to_vec()
    }
    fn done(&self) -> bool {
        self.1 == self.0.len()
    }
}

/// Decodes a block at `off` with `size`, checking the trailer; returns its plain bytes.
fn block(file: &[u8], off: usize, size: usize) -> Vec<u8> {
    let stored = &file[off..off + size];
    let ctype = file[off + size];
    let crc = u32::from_le_bytes(file[off + size + 1..off + size + 5].try_into().unwrap());
    let mut covered = stored.to_vec();
    covered.push(ctype);
    assert_eq!(crc32c::crc32c(&covered), crc);
    match ctype {
        0 => stored.to_vec(),
        1 => {
            let n = u32::from_le_bytes(stored[..4].try_into().unwrap()) as usize;
            let out = lz4_flex::block::decompress(&stored[4..], n).unwrap();
            assert_eq!(out.len(), n);
            out
        }
        c => panic!("compression {c}"),
    }
}

/// Reads a value through a kind-3 pointer: `file varint, offset varint, len varint, crc u32`.
fn follow_pointer(wal_dir: &Path, ptr: &[u8]) -> Vec<u8> {
    let mut r = R(ptr, 0);
    let (file, offset, len) = (r.varint(), r.varint() as usize, r.varint() as usize);
    let crc = r.u32();
    assert!(r.done());
    // Numbers are unique across logs and value files: the number names one or the other.
    let log = std::fs::read(wal_dir.join(format!("{file:06}.log")))
        .or_else(|_| std::fs::read(wal_dir.join(format!("{file:06}.vlog"))))
        .unwrap();
    let value = log[offset..offset + len].to_vec();
    assert_eq!(crc32c::crc32c(&value), crc);
    value
}

fn decode_table(path: &Path, wal_dir: &Path) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let f = std::fs::read(path).unwrap();
    let foot = &f[f.len() - 40..];
    let mut r = R(foot, 0);
    let (filter_off, filter_size, index_off, index_size, version, crc, magic) = (
        r.u64(),
        r.u32(),
        r.u64(),
        r.u32(),
        r.u32(),
        r.u32(),
        r.take(8),
    );
    assert_eq!(magic, b"STRATSST");
    assert_eq!(version, 3);
    assert_eq!(crc, crc32c::crc32c(&foot[..28]));
    let filter = block(&f, filter_off as usize, filter_size as usize);
    let index = block(&f, index_off as usize, index_size as usize);
    let mut r = R(&index, 0);
    let entries = r.varint();
    let first_key = r.bytes();
    let blocks = r.varint();
    let mut out = BTreeMap::new();
    let mut expected_offset = 0usize;
    for _ in 0..blocks {
        let last_key = r.bytes();
        let (off, size) = (r.varint() as usize, r.varint() as usize);
        assert_eq!(off, expected_offset, "blocks are contiguous");
        expected_offset = off + size + 5;
        let data = block(&f, off, size);
        // Format 3: the block ends with the restart offsets (u32 LE) and their count (u32 LE);
        // entry 0, 16, 32, ... starts there with `shared = 0`.
        let count = u32::from_le_bytes(data[data.len() - 4..].try_into().unwrap()) as usize;
        let entries_end = data.len() - 4 - 4 * count;
        let restarts: Vec<usize> = (0..count)
            .map(|i| {
                let at = entries_end + 4 * i;
                u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize
            })
            .collect();
        let mut b = R(&data[..entries_end], 0);
        let mut key: Vec<u8> = Vec::new();
        let mut n = 0usize;
        while !b.done() {
            if n % 16 == 0 {
                assert_eq!(
                    restarts.get(n / 16),
                    Some(&b.1),
                    "restart point of entry {n}"
                );
            }
            let kind = b.u8();
            let shared = b.varint() as usize;
            if n % 16 == 0 {
                assert_eq!(shared, 0, "a restart entry holds its whole key");
            }
            n += 1;
            let unshared = b.varint() as usize;
            let vlen = if kind == 2 { 0 } else { b.varint() as usize };
            key.truncate(shared);
            key.extend_from_slice(b.take(unshared));
            let value = b.take(vlen).to_vec();
            let value = match kind {
                1 => Some(value),
                2 => None,
                3 => Some(follow_pointer(wal_dir, &value)),
                k => panic!("kind {k}"),
            };
            out.insert(key.clone(), value);
        }
        assert_eq!(key, last_key);
        assert_eq!(count, n.div_ceil(16), "one restart point per 16 entries");
    }
    assert!(r.done());
    assert_eq!(expected_offset, filter_off as usize);
    assert_eq!(out.len() as u64, entries);
    assert_eq!(out.keys().next().cloned().unwrap_or_default(), first_key);
    // Every key passes the filter, computed as the page says (formats 2 and 3: blocked).
    let (probes, lines) = (filter[0], &filter[1..]);
    assert_eq!(lines.len() % 64, 0);
    let line_count = (lines.len() / 64) as u64;
    for k in out.keys() {
        let h = xxhash_rust::xxh3::xxh3_64(k);
        let line = &lines[(((h >> 32) * line_count) >> 32) as usize * 64..][..64];
        let mut x = h as u32;
        for _ in 0..probes {
            x = x.wrapping_mul(0x9E37_79B9);
            let b = (x >> 23) as usize;
            assert_eq!(line[b / 8] >> (b % 8) & 1, 1);
        }
    }
    out
}

fn decode_wal(path: &Path) -> Vec<(u8, Vec<u8>, Vec<u8>)> {
    let f = std::fs::read(path).unwrap();
    let mut r = R(&f, 0);
    assert_eq!(r.take(8), b"STRATWAL");
    assert_eq!(r.u32(), 3);
    assert_eq!(r.u32(), crc32c::crc32c(&f[..12]));
    let mut out = Vec::new();
    while !r.done() {
        let start = r.1;
        let len = r.u32() as usize;
        let crc = r.u32();
        let payload = r.take(len);
        let mut covered = f[start..start + 4].to_vec();
        covered.extend_from_slice(payload);
        assert_eq!(crc32c::crc32c(&covered), crc);
        let mut p = R(payload, 0);
        let seq = p.varint();
        let unclaimed = p.varint();
        assert!(unclaimed <= seq, "a claim above its own batch");
        let parts = p.varint();
        if path.extension().is_some_and(|e| e == "vlog") {
            // A value file: one put per record, `seq` 0, no parts.
            assert_eq!((seq, unclaimed, parts), (0, 0, 0));
        } else {
            assert!(seq > 0, "format 3 numbers every batch from 1");
        }
        for _ in 0..parts {
            p.varint(); // a partition the batch spans
        }
        for _ in 0..p.varint() {
            let kind = p.u8();
            let klen = p.varint() as usize;
            let vlen = if kind == 1 { p.varint() as usize } else { 0 };
            out.push((kind, p.take(klen).to_vec(), p.take(vlen).to_vec()));
        }
        assert!(p.done());
    }
    out
}

fn decode_manifest(path: &Path) -> (Vec<Vec<(u64, u64)>>, Vec<u64>) {
    let f = std::fs::read(path).unwrap();
    let mut r = R(&f, 0);
    assert_eq!(r.take(8), b"STRATMAN");
    assert_eq!(r.u32(), 4);
    let len = r.u32() as usize;
    let crc = r.u32();
    assert_eq!(crc32c::crc32c(&[&f[8..16], &f[20..]].concat()), crc);
    assert_eq!(f.len(), 20 + len);
    let _next_file = r.varint();
    let _log_number = r.varint();
    let levels = r.varint();
    assert_eq!(levels, 7);
    let mut out = Vec::new();
    for _ in 0..levels {
        let n = r.varint();
        let mut tables = Vec::new();
        for _ in 0..n {
            let (id, size, _entries) = (r.varint(), r.varint(), r.varint());
            let (_min, _max) = (r.bytes(), r.bytes());
            tables.push((id, size));
        }
        out.push(tables);
    }
    let mut vlogs = Vec::new();
    for _ in 0..r.varint() {
        let (number, total, live, first_live) = (r.varint(), r.varint(), r.varint(), r.varint());
        let first_dead = r.varint();
        assert!(live <= first_live && first_live <= total);
        // A flushed write-ahead log: its garbage at flush leaves room for its values with
        // their keys and lengths (every put of this file's stores has a key); a compaction's
        // value file: none.
        let wal = path.parent().unwrap().join("wal");
        if wal.join(format!("{number:06}.log")).exists() {
            assert!(
                first_dead + first_live < total,
                "{number}: {first_dead} + {first_live} of {total}"
            );
        } else {
            assert!(wal.join(format!("{number:06}.vlog")).exists());
            assert_eq!(first_dead, 0);
        }
        vlogs.push(number);
    }
    let _last_seq = r.varint();
    assert!(r.done());
    (out, vlogs)
}

#[test]
fn real_files_decode_as_docs_format_md_describes() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            partitions: 2,
            sync: SyncMode::Never,
            compression,
            ..Options::tiny()
        };
        let db = Db::open(dir.path(), opts).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..2_000u32 {
            let k = format!("key{:05}", i * 37 % 2_000).into_bytes();
            if i % 5 == 4 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else if i % 3 == 0 {
                // Above the separation threshold: left in the log, which becomes a value log
                // the tables point into.
                let v = format!("long value {i} ").repeat(12).into_bytes();
                assert!(v.len() >= Options::tiny().value_log_bytes_min.unwrap());
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            } else {
                let v = format!("value {i} ")
                    .repeat(1 + (i % 4) as usize)
                    .into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush().unwrap();
        // Some writes stay in the logs only.
        for i in 0..50u32 {
            db.put(format!("late{i}").as_bytes(), b"v").unwrap();
        }
        db.close().unwrap();

        let meta = std::fs::read(dir.path().join("STRATA")).unwrap();
        assert_eq!(&meta[..8], b"STRATADB");
        assert_eq!(u32::from_le_bytes(meta[12..16].try_into().unwrap()), 2);
        assert_eq!(crc32c::crc32c(&meta[..24]).to_le_bytes(), meta[24..28]);

        // Merge tables newest-first per partition as the manifest orders them.
        let mut decoded: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let (mut late, mut value_logs) = (0, 0);
        for p in 0..2 {
            let pdir = dir.path().join(format!("p{p:04}"));
            let (levels, vlogs) = decode_manifest(&pdir.join("MANIFEST"));
            value_logs += vlogs.len();
            let mut seen = std::collections::BTreeSet::new();
            for level in &levels {
                for &(id, size) in level {
                    let path = pdir.join("sst").join(format!("{id:06}.sst"));
                    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
                    for (k, v) in decode_table(&path, &pdir.join("wal")) {
                        if seen.insert(k.clone()) {
                            if let Some(v) = v {
                                decoded.insert(k, v);
                            }
                        }
                    }
                }
            }
            for e in std::fs::read_dir(pdir.join("wal")).unwrap() {
                let path = e.unwrap().path();
                let number: u64 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
                let records = decode_wal(&path);
                if vlogs.contains(&number) {
                    continue; // a value log: its records are in tables already
                }
                for (kind, k, _) in records {
                    assert_eq!(kind, 1);
                    assert!(k.starts_with(b"late"));
                    late += 1;
                }
            }
        }
        assert_eq!(late, 50);
        assert!(value_logs > 0, "no value log listed in a manifest");
        assert!(
            decoded == model,
            "tables decoded from the documented format differ from what was written"
        );
    }
}

/// Rewrites a format-4 `MANIFEST` as format 2 wrote it (no `first_live_bytes` nor
/// `first_dead_bytes` per value log), from the layout docs/format.md gives; returns the
/// value logs it lists.
fn rewrite_manifest_as_format_2(path: &Path) -> Vec<u64> {
    let f = std::fs::read(path).unwrap();
    let mut r = R(&f, 0);
    assert_eq!(r.take(8), b"STRATMAN");
    assert_eq!(r.u32(), 4);
    let len = r.u32() as usize;
    let _crc = r.u32();
    assert_eq!(f.len(), 20 + len);
    let mut out = Vec::new();
    let put = |out: &mut Vec<u8>, mut v: u64| loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    };
    let put_bytes = |out: &mut Vec<u8>, b: &[u8]| {
        put(out, b.len() as u64);
        out.extend_from_slice(b);
    };
    for _ in 0..2 {
        let v = r.varint(); // next file number, log number
        put(&mut out, v);
    }
    let levels = r.varint();
    put(&mut out, levels);
    for _ in 0..levels {
        let n = r.varint();
        put(&mut out, n);
        for _ in 0..n {
            for _ in 0..3 {
                let v = r.varint(); // id, size, entries
                put(&mut out, v);
            }
            for _ in 0..2 {
                let b = r.bytes(); // min and max key
                put_bytes(&mut out, &b);
            }
        }
    }
    let n = r.varint();
    put(&mut out, n);
    let mut vlogs = Vec::new();
    for _ in 0..n {
        let (number, total, live, _first_live) = (r.varint(), r.varint(), r.varint(), r.varint());
        let _first_dead = r.varint();
        vlogs.push(number);
        for v in [number, total, live] {
            put(&mut out, v);
        }
    }
    let last_seq = r.varint();
    put(&mut out, last_seq);
    assert!(r.done());
    let mut file = b"STRATMAN".to_vec();
    file.extend_from_slice(&2u32.to_le_bytes());
    file.extend_from_slice(&(out.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c(&[&file[8..16], &out[..]].concat());
    file.extend_from_slice(&crc.to_le_bytes());
    file.extend_from_slice(&out);
    std::fs::write(path, file).unwrap();
    vlogs
}

/// A store whose manifests format 2 wrote (before value logs recorded their first live bytes)
/// opens, reads every value through its value logs, and keeps working: new writes, a full
/// compaction that leaves the old value logs unreferenced and deletes them, and manifests
/// written again as format 4.
#[test]
fn a_store_with_format_2_manifests_opens_and_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 2,
        sync: SyncMode::Never,
        ..Options::tiny()
    };
    let long = |i: u32, round: u32| {
        format!("value {i} of round {round} ")
            .repeat(8)
            .into_bytes()
    };
    let mut model = BTreeMap::new();
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for round in 0..2 {
        for i in (0..600u32).filter(|i| round == 0 || i % 3 == 0) {
            let k = format!("key{i:04}").into_bytes();
            db.put(&k, &long(i, round)).unwrap();
            model.insert(k, long(i, round));
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    let manifests: Vec<_> = (0..2)
        .map(|p| dir.path().join(format!("p{p:04}")).join("MANIFEST"))
        .collect();
    let old_vlogs: Vec<Vec<u64>> = manifests
        .iter()
        .map(|m| rewrite_manifest_as_format_2(m))
        .collect();
    assert!(old_vlogs.iter().all(|v| !v.is_empty()));

    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    for i in 0..600u32 {
        let k = format!("key{i:04}").into_bytes();
        db.put(&k, &long(i, 2)).unwrap();
        model.insert(k, long(i, 2));
    }
    db.compact().unwrap();
    db.close().unwrap();

    let db = Db::open(dir.path(), opts).unwrap();
    let all: BTreeMap<Vec<u8>, Vec<u8>> = db
        .scan::<&[u8], _>(..)
        .map(|e| e.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert!(all == model, "the store differs from what was written");
    db.close().unwrap();
    for (m, old) in manifests.iter().zip(&old_vlogs) {
        let (_, vlogs) = decode_manifest(m); // format 4 again
        for n in old {
            assert!(!vlogs.contains(n), "value log {n} still listed");
            let wal = m.parent().unwrap().join("wal");
            assert!(!wal.join(format!("{n:06}.log")).exists());
            assert!(!wal.join(format!("{n:06}.vlog")).exists());
        }
    }
}
