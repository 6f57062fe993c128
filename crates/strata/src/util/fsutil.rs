//! File-system helpers over the [`crate::vfs`] seam that make renames durable: a file is fsynced
//! before it is renamed into place, and the directory is fsynced after, so a power loss leaves
//! the old or the new file.

use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::vfs::FileSystem;

/// File numbers (logs, tables, value logs) stay below this: 2^48 files, far beyond any store's
/// life, with room to add one without overflow. A larger number on disk is damage.
pub(crate) const FILE_NUMBER_LIMIT: u64 = 1 << 48;

/// Suffix of files being written; any left on open are removed.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// fsyncs a directory so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs.sync_dir(dir).at(dir)
}

/// Writes `name` in `dir` as: write `name.tmp`, fsync, rename, fsync directory.
pub(crate) fn write_atomically(
    fs: &dyn FileSystem,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<()> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    {
        let f = fs.create(&tmp).at(&tmp)?;
        f.append(bytes).at(&tmp)?;
        f.sync_all().at(&tmp)?;
    }
    let dst = dir.join(name);
    fs.rename(&tmp, &dst).at(&dst)?;
    sync_dir(fs, dir)
}

/// Creates `dir` (and parents) and fsyncs its parent so the directory itself is durable.
pub(crate) fn create_dir_durably(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    if fs.is_dir(dir) {
        return Ok(());
    }
    fs.create_dir_all(dir).at(dir)?;
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() {
            sync_dir(fs, parent)?;
        }
    }
    Ok(())
}

/// Files in `dir` named `<number><suffix>`, sorted by number. A name whose number is not below
/// [`FILE_NUMBER_LIMIT`] is not one the engine wrote: it is left alone (and logged).
pub(crate) fn numbered_files(
    fs: &dyn FileSystem,
    dir: &Path,
    suffix: &str,
) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for name in fs.list(dir).at(dir)? {
        if let Some(num) = name
            .strip_suffix(suffix)
            .and_then(|n| n.parse::<u64>().ok())
        {
            if num >= FILE_NUMBER_LIMIT {
                tracing::warn!(dir = %dir.display(), name, "ignoring a file whose number is out of range");
                continue;
            }
            out.push((num, dir.join(name)));
        }
    }
    out.sort();
    Ok(out)
}

/// Removes leftover `*.tmp` files from an interrupted write.
pub(crate) fn remove_tmp_files(fs: &dyn FileSystem, dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for name in fs.list(dir).at(dir)? {
        if name.ends_with(TMP_SUFFIX) {
            let p = dir.join(name);
            fs.remove_file(&p).at(&p)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Size of a file, 0 if it is gone.
pub(crate) fn file_len(fs: &dyn FileSystem, path: &Path) -> u64 {
    fs.file_len(path).unwrap_or(0)
}
