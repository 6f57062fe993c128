//! File-system helpers that make renames durable: a file is fsynced before it is renamed into
//! place, and the directory is fsynced after, so a power loss leaves the old or the new file.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

/// Suffix of files being written; any left on open are removed.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// fsyncs a directory so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// Writes `name` in `dir` as: write `name.tmp`, fsync, rename, fsync directory.
pub(crate) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    {
        let mut f = File::create(&tmp).at(&tmp)?;
        f.write_all(bytes).at(&tmp)?;
        f.sync_all().at(&tmp)?;
    }
    let dst = dir.join(name);
    fs::rename(&tmp, &dst).at(&dst)?;
    sync_dir(dir)
}

/// Creates `dir` (and parents) and fsyncs its parent so the directory itself is durable.
pub(crate) fn create_dir_durably(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).at(dir)?;
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Files in `dir` named `<number><suffix>`, sorted by number.
pub(crate) fn numbered_files(dir: &Path, suffix: &str) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(num) = name
            .strip_suffix(suffix)
            .and_then(|n| n.parse::<u64>().ok())
        {
            out.push((num, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Removes leftover `*.tmp` files from an interrupted write.
pub(crate) fn remove_tmp_files(dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        if entry.file_name().to_string_lossy().ends_with(TMP_SUFFIX) {
            let p = entry.path();
            fs::remove_file(&p).at(&p)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Size of a file, 0 if it is gone.
pub(crate) fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}
