//! What the operating system knows about this process: peak resident memory (`VmHWM` in
//! `/proc/self/status`, which can be reset by writing `5` to `/proc/self/clear_refs`) and bytes
//! sent to the storage layer (`write_bytes - cancelled_write_bytes` in `/proc/self/io`, counted
//! when pages are dirtied, over all threads). Linux only; elsewhere every reading is `None`.
//!
//! These are process-wide, so a run measures only its own engine when it has the process to
//! itself: `compare` and `matrix` start one child process per run for that reason.

/// Peak resident set size of this process since start or the last [`reset_peak_rss`].
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// Current resident set size.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|kib| kib * 1024)
}

/// Resets the peak RSS to the current RSS; returns whether the kernel allowed it.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Writes dirty pages back and drops the kernel's page cache, so that the next reads come from
/// the disk (needs root: `/proc/sys/vm/drop_caches`). Returns whether the cache was dropped.
pub fn drop_page_cache() -> bool {
    // Only clean pages can be dropped: write the dirty ones first.
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Bytes free to an unprivileged user on the file system holding `path` (or its nearest
/// existing ancestor), if they can be read.
pub fn free_disk_bytes(path: &std::path::Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    fs2::available_space(existing).ok()
}

/// Total memory of the machine (`MemTotal`), if it can be read.
pub fn memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes this process caused to be written to storage, less those cancelled because the file was
/// truncated or deleted before write-back.
pub fn io_write_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let written = field("write_bytes:")?;
    let cancelled = field("cancelled_write_bytes:").unwrap_or(0);
    Some(written.saturating_sub(cancelled))
}

fn status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Logical cores of this machine.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
}

/// The 1-minute load average (runnable threads, all processes): how busy the machine was.
pub fn load_avg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A one-line description of the machine: cores, memory, kernel.
pub fn machine_summary() -> String {
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "{} cores, {:.1} GiB RAM, Linux {}",
        cores(),
        mem_kib as f64 / (1u64 << 20) as f64,
        kernel
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_exist_on_linux() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let rss = rss_bytes().unwrap();
        assert!(rss > 0);
        assert!(peak_rss_bytes().unwrap() >= rss / 2);
        assert!(io_write_bytes().is_some());
        assert!(load_avg_1m().is_some());
    }
}
