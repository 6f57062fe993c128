//! A run's data directory: wiped before the run, measured while it runs, removed after it unless
//! kept; and the sibling paths that hold what must survive the wipe or stay out of the engine's
//! directory (generated input, sort runs).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Removes `dir` and creates it empty.
pub fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| Error::io("wiping", dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))
}

/// Removes a run's data unless it is to be kept.
pub fn finish_dir(dir: &Path, keep_data: bool) -> Result<()> {
    if keep_data || !dir.exists() {
        return Ok(());
    }
    std::fs::remove_dir_all(dir).map_err(|e| Error::io("removing", dir, e))
}

/// Bytes of all files under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Copies every file under `from` (a closed store) into a fresh `to`: a trial's own copy of a
/// built data set, so trials neither rebuild it nor see each other's changes (the engines may
/// append to their files when they open, so hard links would not do).
pub fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fresh_dir(to)?;
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        let rd = std::fs::read_dir(&src).map_err(|e| Error::io("listing", &src, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| Error::io("listing", &src, e))?;
            let (s, d) = (entry.path(), dst.join(entry.file_name()));
            let kind = entry.file_type().map_err(|e| Error::io("reading", &s, e))?;
            if kind.is_dir() {
                std::fs::create_dir_all(&d).map_err(|e| Error::io("creating", &d, e))?;
                stack.push((s, d));
            } else {
                std::fs::copy(&s, &d).map_err(|e| Error::io("copying", &s, e))?;
            }
        }
    }
    Ok(())
}

/// `dir` with `.suffix` appended to its last component: a path next to `dir`, not inside it.
pub fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "bench".into());
    name.push(".");
    name.push(suffix);
    dir.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_live_next_to_the_dir() {
        assert_eq!(
            sibling(Path::new("/tmp/x/bench-data"), "docs.jsonl"),
            PathBuf::from("/tmp/x/bench-data.docs.jsonl")
        );
    }
}
