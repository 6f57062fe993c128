//! The fuzz targets' bodies and their seed inputs. Every input is `flags byte | payload`; bit 0
//! of the flags recomputes the checksums of the file the payload becomes (so that mutations
//! reach the parsers behind the checksums; a CRC is no defence against a crafted file), the
//! other bits choose options and which file is replaced, per target.

use strata::Engine;

use crate::format::{self, Cursor};
use crate::store::{self, exercise, manifest_path, meta_path, table_path, with_keys, Template};

/// Flag: recompute the checksums of the replaced file.
const FIX: u8 = 1;

fn split(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(f, rest)| (*f, rest))
}

fn salvage_opts(engine: Engine, salvage: bool) -> strata::Options {
    strata::Options {
        salvage,
        ..store::options(engine)
    }
}

/// `wal_replay`: the payload is the newest write-ahead log of an LSM partition.
/// Flags: 1 fix checksums, 2 salvage, 4 compact after reading.
pub fn wal_replay(data: &[u8]) {
    let Some((flags, body)) = split(data) else {
        return;
    };
    let t = store::lsm();
    let Some(path) = t.files_in("wal", ".log").pop() else {
        return;
    };
    let mut bytes = body.to_vec();
    if flags & FIX != 0 {
        format::fix_log(&mut bytes);
    }
    let mut files = t.files.clone();
    files.files.insert(path, bytes);
    exercise(
        files,
        salvage_opts(Engine::Lsm, flags & 2 != 0),
        &t.keys,
        flags & 4 != 0,
    );
}

/// `table`: the payload is a table file of an LSM partition; the manifest is rewritten to
/// describe it (size, entries, key range as its index claims), so that its blocks get read.
/// Flags: 1 fix checksums, 2 the bottom-level table instead of the level-0 one, 4 compact.
pub fn table(data: &[u8]) {
    let Some((flags, body)) = split(data) else {
        return;
    };
    let t = store::lsm();
    let Some(mut m) = t.manifest() else {
        return;
    };
    let ids: Vec<u64> = m.levels.iter().flatten().map(|t| t.id).collect();
    let Some(&id) = ids.get(usize::from(flags >> 1 & 1) % ids.len().max(1)) else {
        return;
    };
    let mut bytes = body.to_vec();
    if flags & FIX != 0 {
        format::fix_table(&mut bytes);
    }
    m.describe_table(id, &bytes);
    let keys = with_keys(&t.keys, format::table_keys(&bytes, 64));
    let mut files = t.files.clone();
    files.files.insert(manifest_path(), m.encode());
    if store::verbose() {
        let entries = format::table_entries(&bytes);
        let keys: Vec<String> = entries
            .iter()
            .map(|e| String::from_utf8_lossy(&e.0).into_owned())
            .collect();
        eprintln!(
            "table {id}: {} blocks, entries {keys:?}",
            format::table_blocks(&bytes).len()
        );
    }
    let compact = flags & 4 != 0;
    files.files.insert(table_path(id), bytes);
    exercise(files, store::options(Engine::Lsm), &keys, compact);
}

/// `manifest`: the payload is the `MANIFEST` of an LSM partition with tables on two levels and
/// value logs. Flags: 1 fix length and checksum, 2 salvage, 4 compact.
pub fn manifest(data: &[u8]) {
    let Some((flags, body)) = split(data) else {
        return;
    };
    let t = store::lsm();
    let mut bytes = body.to_vec();
    if flags & FIX != 0 {
        format::fix_manifest(&mut bytes);
    }
    let mut files = t.files.clone();
    files.files.insert(manifest_path(), bytes);
    exercise(
        files,
        salvage_opts(Engine::Lsm, flags & 2 != 0),
        &t.keys,
        flags & 4 != 0,
    );
}

/// `meta`: the payload is the `STRATA` file. Flags: 1 fix checksum, 2 open as the log engine,
/// bits 2-3: open with 1 to 4 partitions.
pub fn meta(data: &[u8]) {
    let Some((flags, body)) = split(data) else {
        return;
    };
    let t = store::lsm();
    let mut bytes = body.to_vec();
    if flags & FIX != 0 {
        format::fix_meta(&mut bytes);
    }
    let mut files = t.files.clone();
    files.files.insert(meta_path(), bytes);
    let engine = if flags & 2 != 0 {
        Engine::Log
    } else {
        Engine::Lsm
    };
    let opts = strata::Options {
        partitions: 1 + usize::from(flags >> 2 & 3),
        ..store::options(engine)
    };
    exercise(files, opts, &t.keys, false);
}

/// `hint`: the payload is one hint file of the hash engine (written by a merge).
/// Flags: 1 fix checksum, bit 1: which hint file, 4 merge after reading.
pub fn hint(data: &[u8]) {
    let Some((flags, body)) = split(data) else {
        return;
    };
    let t = store::log();
    let hints = t.files_in("log", ".hint");
    let Some(path) = hints.get(usize::from(flags >> 1 & 1) % hints.len().max(1)) else {
        return;
    };
    let mut bytes = body.to_vec();
    if flags & FIX != 0 {
        format::fix_hint(&mut bytes);
    }
    let mut files = t.files.clone();
    files.files.insert(path.clone(), bytes);
    exercise(files, store::options(Engine::Log), &t.keys, flags & 4 != 0);
}

/// `segment`: the payload is one segment of the hash engine.
/// Flags: 1 fix checksums, 2 salvage, 4 remove the segment's hint (so it is replayed, not
/// read through the hint), bits 3-4: which segment (merge outputs, then the newest), 32 merge.
pub fn segment(data: &[u8]) {
    let Some((flags, body)) = split(data) else {
        return;
    };
    let t = store::log();
    let segs = t.files_in("log", ".seg");
    let Some(path) = segs.get(usize::from(flags >> 3 & 3) % segs.len().max(1)) else {
        return;
    };
    let mut bytes = body.to_vec();
    if flags & FIX != 0 {
        format::fix_log(&mut bytes);
    }
    let mut files = t.files.clone();
    if flags & 4 != 0 {
        files.files.remove(&path.with_extension("hint"));
    }
    files.files.insert(path.clone(), bytes);
    exercise(
        files,
        salvage_opts(Engine::Log, flags & 2 != 0),
        &t.keys,
        flags & 32 != 0,
    );
}

/// `value_pointer`: the table of the value-pointer store is re-encoded with entries the input
/// changes, and its value log patched. Flags: 1 fix the value log's checksums after patching,
/// 2 compact (rewrites pointers, collects value logs). Then operations until the input ends:
///
/// - `0x00..=0x3F i`: entry `i % n` gets raw pointer bytes: `len u8` (mod 33), the bytes;
/// - `0x40..=0x7F i`: entry `i % n` gets a pointer `file_sel u8 | offset u32 | len u32 |
///   crc_sel u8`: file 0 the value log, 1 the newest write-ahead log, 2 a missing one, 3
///   `u64::MAX`; the CRC is that of the bytes pointed at (inverted if `crc_sel` is odd);
/// - `0x80..=0xBF`: patch the value log: `offset u16 | len u8` (mod 65), the bytes;
/// - `0xC0..=0xFF`: by `op & 3`: 0 truncate the value log at `u16`; 1 make entry
///   `(op >> 2 & 15) % n` an inline put of its pointer bytes; 2 make it a delete; 3 drop it.
pub fn value_pointer(data: &[u8]) {
    let Some((flags, ops)) = split(data) else {
        return;
    };
    let v = store::vlog();
    let mut entries = v.entries.clone();
    let mut vlog = v.t.files.get(&v.vlog.1).to_vec();
    let mut r = Cursor::new(ops);
    while let Some(op) = r.u8() {
        let n = entries.len();
        if n == 0 {
            break;
        }
        let i = usize::from(op & 0x3F) % n;
        let done = match op >> 6 {
            0 => (|| {
                let len = usize::from(r.u8()? % 33);
                entries[i].1 = 3;
                entries[i].2 = r.bytes(len)?.to_vec();
                Some(())
            })(),
            1 => (|| {
                let file = match r.u8()? & 3 {
                    0 => v.vlog.0,
                    1 => v.newest_wal,
                    2 => v.vlog.0.wrapping_sub(1),
                    _ => u64::MAX,
                };
                let offset = u64::from(r.u32()?);
                let len = u64::from(r.u32()?);
                let invert = r.u8()? & 1 == 1;
                let pointed = usize::try_from(offset)
                    .ok()
                    .and_then(|o| vlog.get(o..o.checked_add(usize::try_from(len).ok()?)?));
                let crc = pointed.map_or(0, format::crc) ^ if invert { u32::MAX } else { 0 };
                entries[i].1 = 3;
                entries[i].2 = format::encode_pointer(file, offset, len, crc);
                Some(())
            })(),
            2 => (|| {
                let at = usize::from(r.u16()?).min(vlog.len());
                let len = usize::from(r.u8()? % 65);
                let bytes = r.bytes(len)?;
                let end = at + bytes.len();
                if end > vlog.len() {
                    vlog.resize(end, 0);
                }
                vlog[at..end].copy_from_slice(bytes);
                Some(())
            })(),
            _ => (|| {
                let i = usize::from(op >> 2 & 0xF) % n;
                match op & 3 {
                    0 => vlog.truncate(usize::from(r.u16()?)),
                    1 => entries[i].1 = 1,
                    2 => entries[i].1 = 2,
                    _ => {
                        entries.remove(i);
                    }
                }
                Some(())
            })(),
        };
        if done.is_none() {
            break;
        }
    }
    if flags & FIX != 0 {
        format::fix_log(&mut vlog);
    }
    let table = format::encode_table(&entries, 16);
    let mut files = v.t.files.clone();
    if let Some(mut m) = v.t.manifest() {
        m.describe_table(v.table_id, &table);
        files.files.insert(manifest_path(), m.encode());
    }
    files.files.insert(table_path(v.table_id), table);
    files.files.insert(v.vlog.1.clone(), vlog);
    exercise(
        files,
        store::options(Engine::Lsm),
        &v.t.keys,
        flags & 2 != 0,
    );
}

/// Targets by name.
pub const TARGETS: &[&str] = &[
    "wal_replay",
    "table",
    "manifest",
    "meta",
    "hint",
    "segment",
    "value_pointer",
];

fn with_flags(flags: u8, bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![flags];
    v.extend_from_slice(bytes);
    v
}

/// Variants of a file as seeds: as it is with each flag combination in `flags`, and a few
/// small mutations (cut short, a flipped byte, zeros appended) with checksums fixed.
fn file_seeds(bytes: &[u8], flags: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = flags.iter().map(|&f| with_flags(f, bytes)).collect();
    if bytes.len() > 8 {
        out.push(with_flags(FIX, &bytes[..bytes.len() - 5]));
        let mut flipped = bytes.to_vec();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x20;
        out.push(with_flags(0, &flipped));
        out.push(with_flags(FIX, &flipped));
    }
    let mut zeros = bytes.to_vec();
    zeros.extend_from_slice(&[0; 64]);
    out.push(with_flags(FIX, &zeros));
    out
}

fn files_of(t: &Template, paths: &[std::path::PathBuf]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| t.files.get(p).to_vec()).collect()
}

/// Seed inputs of a target (valid files and small mutations of them).
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    match target {
        "wal_replay" => {
            let t = store::lsm();
            let logs = files_of(t, &t.files_in("wal", ".log"));
            if let Some(newest) = logs.last() {
                out.extend(file_seeds(newest, &[0, 1, 3, 5]));
            }
            // Older logs (value logs) as the newest: other records, other values.
            for old in logs.iter().rev().skip(1) {
                out.push(with_flags(FIX, old));
            }
        }
        "table" => {
            for t in [store::lsm(), store::lsm_lz4()] {
                // Tables in manifest order (level 0 first, then the bottom level): the slot
                // is flag bit 1.
                let ids: Vec<u64> = t
                    .manifest()
                    .map(|m| m.levels.iter().flatten().map(|t| t.id).collect())
                    .unwrap_or_default();
                for (slot, id) in ids.iter().enumerate() {
                    let table = t.files.get(&table_path(*id)).to_vec();
                    let sel = (slot as u8 & 1) << 1;
                    out.extend(file_seeds(&table, &[sel | FIX, sel]));
                    out.push(with_flags(sel | FIX | 4, &table));
                }
            }
        }
        "manifest" => {
            let t = store::lsm();
            let m = t.files.get(&manifest_path()).to_vec();
            out.extend(file_seeds(&m, &[0, 1, 3, 5]));
        }
        "meta" => {
            for t in [store::lsm(), store::log()] {
                let m = t.files.get(&meta_path()).to_vec();
                let engine_flag = if t.engine == Engine::Log { 2 } else { 0 };
                out.extend(file_seeds(&m, &[engine_flag, engine_flag | FIX]));
                // Two partitions recorded and asked for.
                let mut two = m.clone();
                if two.len() >= 16 {
                    two[12] = 2;
                }
                out.push(with_flags(engine_flag | FIX | 4, &two));
            }
        }
        "hint" => {
            let t = store::log();
            for (i, h) in files_of(t, &t.files_in("log", ".hint")).iter().enumerate() {
                let sel = (i as u8 & 1) << 1;
                out.extend(file_seeds(h, &[sel, sel | FIX, sel | FIX | 4]));
            }
        }
        "segment" => {
            let t = store::log();
            for (i, s) in files_of(t, &t.files_in("log", ".seg")).iter().enumerate() {
                let sel = (i as u8 & 3) << 3;
                out.extend(file_seeds(
                    s,
                    &[sel, sel | FIX, sel | FIX | 4, sel | FIX | 2 | 32],
                ));
            }
        }
        "value_pointer" => {
            let v = store::vlog();
            out.push(vec![0]);
            out.push(vec![FIX]);
            out.push(vec![2]);
            // Entry 3 keeps its own pointer, through both encodings.
            if let Some((_, _, ptr)) = v.entries.get(3) {
                let mut raw = vec![FIX, 0x03, ptr.len() as u8];
                raw.extend_from_slice(ptr);
                out.push(raw);
                if let Some((file, offset, len, _)) = format::decode_pointer(ptr) {
                    let sel = u8::from(file != v.vlog.0);
                    let mut s = vec![FIX, 0x40 | 3, sel];
                    s.extend_from_slice(&(offset as u32).to_le_bytes());
                    s.extend_from_slice(&(len as u32).to_le_bytes());
                    s.push(0);
                    // The same for entry 7, pointing at entry 3's value, with a wrong CRC.
                    s.extend_from_slice(&[0x40 | 7, sel]);
                    s.extend_from_slice(&(offset as u32).to_le_bytes());
                    s.extend_from_slice(&(len as u32).to_le_bytes());
                    s.push(1);
                    out.push(s);
                    // Patch a value inside the log (checksums fixed), then truncate it.
                    let mut p = vec![FIX, 0x80];
                    p.extend_from_slice(&(offset as u16 + 10).to_le_bytes());
                    p.push(4);
                    p.extend_from_slice(b"XXXX");
                    out.push(p.clone());
                    p[0] = 0;
                    out.push(p);
                    let mut cut = vec![0, 0xC0];
                    cut.extend_from_slice(&(offset as u16 + 50).to_le_bytes());
                    out.push(cut);
                }
            }
            // Entry kinds changed: inline put of pointer bytes, delete, dropped.
            out.push(vec![2, 0xC1, 0xC6, 0xCB]);
        }
        _ => {}
    }
    out
}

/// For a fuzz target's `init`: if `STRATA_FUZZ_WRITE_SEEDS` names a directory, writes the
/// target's seeds there (one file each, named by content hash) and exits.
pub fn write_seeds_if_asked(target: &str) {
    let Some(dir) = std::env::var_os("STRATA_FUZZ_WRITE_SEEDS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let seeds = seeds(target);
    let template = match target {
        "hint" | "segment" => store::log(),
        "value_pointer" => &store::vlog().t,
        _ => store::lsm(),
    };
    for (path, bytes) in &template.files.files {
        eprintln!("template file {} ({} bytes)", path.display(), bytes.len());
    }
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        for s in &seeds {
            let name = format!("seed-{:08x}-{}", format::crc(s), s.len());
            std::fs::write(dir.join(name), s)?;
        }
        Ok(())
    });
    match written {
        Ok(()) => {
            eprintln!(
                "wrote {} seeds for {target} to {}",
                seeds.len(),
                dir.display()
            );
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("writing seeds to {}: {e}", dir.display());
            std::process::exit(1);
        }
    }
}
