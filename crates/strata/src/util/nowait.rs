//! Reads that must not wait for the disk: inside [`without_waiting`], the file reads of a GET
//! (table blocks, value-log values, log-engine records) use `preadv2(RWF_NOWAIT)`, which copies
//! what the page cache holds and fails with `EAGAIN` instead of starting disk I/O. Such a read
//! then fails with an I/O error of kind `WouldBlock` ([`crate::Error::is_would_block`]) and the
//! caller retries where blocking is fine.
//!
//! Why: the server answers reads on its network threads when the data is in memory (no thread
//! hand-off, the cost that dominated small requests), and hands only the reads that would wait
//! for the disk to its blocking pool, so a data set larger than memory does not stall every
//! connection of a network thread behind one disk read.
//!
//! The mode is a thread-local flag, so it covers exactly the calls made by the closure on this
//! thread; background work (flush, compaction) never runs inside it. On kernels or file systems
//! without `RWF_NOWAIT` every such read reports `WouldBlock`: slower, never wrong.

use std::cell::Cell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use rustix::io::{Errno, IoSliceMut, ReadWriteFlags};

thread_local! {
    static NO_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with reads that fail instead of waiting for the disk (see the module comment).
/// Writes inside `f` are not affected.
pub fn without_waiting<T>(f: impl FnOnce() -> T) -> T {
    /// Puts the previous mode back, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_WAIT.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(NO_WAIT.with(|m| m.replace(true)));
    f()
}

/// True inside [`without_waiting`] on this thread: for storage of one's own behind the same API
/// (a backend that cannot tell whether a read would wait should then fail it as `WouldBlock`).
pub fn waiting_forbidden() -> bool {
    NO_WAIT.with(Cell::get)
}

/// `read_exact_at` that honours [`without_waiting`].
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    if !NO_WAIT.with(Cell::get) {
        return file.read_exact_at(buf, offset);
    }
    let mut done = 0usize;
    while done < buf.len() {
        let at = offset + done as u64;
        match rustix::io::preadv2(
            file,
            &mut [IoSliceMut::new(&mut buf[done..])],
            at,
            ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ))
            }
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) | Err(Errno::OPNOTSUPP) | Err(Errno::INVAL) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "not in the page cache (read without waiting)",
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn cached_reads_succeed_and_the_mode_ends_with_its_scope() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello, page cache").unwrap();
        let file = File::open(&path).unwrap();
        let mut buf = [0u8; 5];
        // Just written, so cached: a read without waiting finds it (or, where the kernel lacks
        // RWF_NOWAIT, reports WouldBlock; never anything else).
        let r = without_waiting(|| read_exact_at(&file, &mut buf, 7));
        match r {
            Ok(()) => assert_eq!(&buf, b"page "),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
        }
        // Past the end is an end-of-file error in both modes.
        let past = without_waiting(|| read_exact_at(&file, &mut buf, 15)).unwrap_err();
        assert!(matches!(
            past.kind(),
            io::ErrorKind::UnexpectedEof | io::ErrorKind::WouldBlock
        ));
        assert_eq!(
            read_exact_at(&file, &mut buf, 15).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        assert!(!NO_WAIT.with(Cell::get), "the mode outlived its scope");
        let nested = without_waiting(|| without_waiting(|| 1) + i32::from(NO_WAIT.with(Cell::get)));
        assert_eq!(nested, 2, "an inner scope ended the outer one");
    }
}
