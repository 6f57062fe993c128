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
