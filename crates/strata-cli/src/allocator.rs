//! Process-wide allocator settings of the `strata` binary (`strata serve`, `strata bench` and
//! the rest). A program that embeds the library keeps its own settings; ARCHITECTURE.md
//! ("Memory") says what to set.
//!
//! glibc serves an allocation of at least its mmap threshold with a mapping of its own, which
//! goes back to the system when freed; smaller ones come from its heaps, which keep freed memory
//! that other live allocations pin. The threshold starts at 128 KiB but rises to the size of any
//! mapped block that is freed (up to 32 MiB): once the first 1 MiB memtable chunk is flushed and
//! freed, every later chunk comes from the heaps, and the memory of flushed memtables stays
//! resident. A PUT_HEAVY run over 10 M keys grew to 397-518 MiB of peak RSS while the engine
//! held 106-234 MiB; with the threshold fixed at 1 MiB, 300-340 MiB (BENCHMARKS.md, "Memory").
//! Setting it fixes it for the whole process: the peer engines of `strata bench` (RocksDB's C++
//! heap too) run under the same setting as Strata.

/// Allocations of at least this many bytes get their own mapping: the memtables' 1 MiB arena
/// chunks do, smaller buffers come from the heaps. (128 KiB, glibc's starting value, held the
/// same RSS but cost 15-20 % of PUT_HEAVY throughput in an alternating pair of runs: every
/// medium buffer mapped, faulted in and unmapped.)
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: i32 = 1 << 20;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD_BYTES`] (which also stops its dynamic
/// rise), unless the environment sets it (`MALLOC_MMAP_THRESHOLD_`, read by glibc itself).
/// Called first thing in `main`; does nothing on other platforms and C libraries.
pub(crate) fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
            return;
        }
        // SAFETY: mallopt changes a tuning parameter of glibc's allocator; it takes no pointers
        // and is called before the process starts a thread. A refusal (return value 0) leaves
        // glibc's defaults, which are correct, only larger.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
        }
    }
}
