//! The one error type of the engine. Every failure names what was wrong and, for files, which file
//! and which byte offset, so an operator can act on the message alone.

use std::path::PathBuf;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine. New kinds of failure may be added, so matches
/// need a catch-all arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed (disk full, permission, ...).
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory the call was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Bytes on disk do not match their checksum or the documented format.
    #[error("corruption in {file} at byte {offset}: {what}")]
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset of the damaged record or block.
        offset: u64,
        /// What check failed.
        what: String,
    },
    /// A request broke an explicit limit (key or value too large, ...).
    #[error("limit exceeded: {what} is {actual} bytes, the maximum is {max} bytes")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// The size that was asked for.
        actual: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The options or the on-disk metadata disagree, or an argument is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A previous write failed in a way that may have left the write-ahead log incomplete; the
    /// partition refuses further writes until the database is reopened (reads still work).
    #[error("partition {partition} is read-only after an earlier write error: {reason}")]
    ReadOnly {
        /// The partition that failed.
        partition: usize,
        /// The error that made it read-only.
        reason: String,
    },
    /// Writers waited for background work (flush, compaction) that keeps failing; the write was
    /// not applied. Reads still work; writes may succeed once the cause (say, a full disk) is
    /// gone.
    #[error("partition {partition} stalled: {reason}")]
    Stalled {
        /// The partition whose background work is failing.
        partition: usize,
        /// The background error.
        reason: String,
    },
    /// The operation met a transient condition and may succeed if retried (say, a hash-engine
    /// merge kept moving the key being read).
    #[error("busy, retry: {0}")]
    Busy(String),
    /// The database was closed.
    #[error("database is closed")]
    Closed,
    /// An optimistic transaction did not commit: a key it read was written by someone else
    /// after the transaction's snapshot. Nothing of it was applied; run it again.
    #[error(
        "transaction conflict: key {} changed since the transaction read it",
        String::from_utf8_lossy(key)
    )]
    Conflict {
        /// The first key found changed.
        key: Vec<u8>,
    },
}

impl Error {
    /// Builds an [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    /// True for a read inside [`crate::without_waiting`] that would have waited for the disk.
    pub fn is_would_block(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// True for a transaction that lost to a concurrent write ([`Error::Conflict`]).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }

    /// True for errors that say the bytes on disk are damaged.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

/// Attaches a path to `std::io::Result`s.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}
