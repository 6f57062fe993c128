//! The file-system seam: every file the engine touches is created, read, written, fsynced,
//! renamed, listed and removed through [`FileSystem`] (LevelDB's `Env`, RocksDB's `FileSystem`).
//! The default, [`RealFs`], is the operating system; [`FaultFs`] wraps it for tests, remembers
//! what was made durable, and can cut the power or fail calls.
//!
//! The engine only ever appends to its files (logs, tables, hints and the manifest are written
//! front to back, a manifest by write-then-rename) and truncates a log's torn tail, so a file
//! handle offers positional reads, appends, `set_len` and the two fsyncs, nothing else.

mod fault;

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

pub use fault::{FaultFs, FaultKind, IoKind};

/// Replaces `dir/name` with `bytes` so that a crash or a power cut leaves the old file or the
/// new one, never a mix (write `name.tmp`, fsync, rename, fsync `dir`): the engine's own
/// manifest step, for the files of its users (the server's ACL file).
pub fn write_atomically(
    fs: &dyn FileSystem,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> crate::Result<()> {
    crate::util::fsutil::write_atomically(fs, dir, name, bytes)
}

/// One open file.
pub trait FsFile: Send + Sync + Debug {
    /// Reads exactly `buf.len()` bytes at `offset`. Inside [`crate::without_waiting`] a read
    /// that would wait for the disk fails with `WouldBlock` instead.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Appends `buf` at the end of the file.
    fn append(&self, buf: &[u8]) -> io::Result<()>;
    /// Forces the file's data (and the size when it grew) to stable storage.
    fn sync_data(&self) -> io::Result<()>;
    /// Forces the file's data and metadata to stable storage.
    fn sync_all(&self) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's size in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// Where the engine's files live. `Send + Sync`; shared by every partition of a database.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates a new, empty file for appending; fails if it exists.
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FsFile>>;
    /// Creates (or empties) a file for appending.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>>;
    /// Opens an existing file for reading (and, for a log's torn tail, `set_len`).
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>>;
    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of a directory (creates, renames, removes) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// The names of the entries of a directory, in no order.
    fn list(&self, path: &Path) -> io::Result<Vec<String>>;
    /// The size of a file.
    fn file_len(&self, path: &Path) -> io::Result<u64>;
    /// Whether a file or directory exists.
    fn exists(&self, path: &Path) -> bool;
    /// Whether `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Makes `to` a second name of the file `from` (a hard link); file systems without links
    /// say `Unsupported`, and callers copy instead.
    fn hard_link(&self, _from: &Path, _to: &Path) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// A file of [`RealFs`].
#[derive(Debug)]
pub struct RealFile {
    file: File,
}

impl RealFile {
    fn shared(file: File) -> Arc<dyn FsFile> {
        Arc::new(RealFile { file })
    }
}

impl FsFile for RealFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        crate::util::nowait::read_exact_at(&self.file, buf, offset)
    }

    fn append(&self, buf: &[u8]) -> io::Result<()> {
        // Files are opened with O_APPEND, or (`create`) written front to back through one
        // handle: every write lands at the end.
        (&self.file).write_all(buf)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

impl FileSystem for RealFs {
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let f = OpenOptions::new()
            .create_new(true)
            .read(true)
            .append(true)
            .open(path)?;
        Ok(RealFile::shared(f))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        // Not O_APPEND (truncating needs plain write access); the engine writes such a file
        // front to back through one handle, so each write lands at the end all the same.
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)?;
        Ok(RealFile::shared(f))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        // Read-write so that a torn tail can be cut; append so that no write lands mid-file.
        let f = OpenOptions::new().read(true).append(true).open(path);
        let f = match f {
            Ok(f) => f,
            // A read-only file (or file system) can still be read.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                File::open(path)?
            }
            Err(e) => return Err(e),
        };
        Ok(RealFile::shared(f))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in fs::read_dir(path)? {
            if let Ok(name) = e?.file_name().into_string() {
                out.push(name);
            }
        }
        Ok(out)
    }

    fn file_len(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)?.len())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
}

/// The file system a database uses: shared, cheap to clone.
pub type SharedFs = Arc<dyn FileSystem>;

/// The default file system: the operating system's.
pub fn real() -> SharedFs {
    Arc::new(RealFs)
}

/// Appends to a file through a buffer of `capacity` bytes (tables and hints are written this
/// way): one `append` per full buffer.
pub struct BufAppender {
    file: Arc<dyn FsFile>,
    buf: Vec<u8>,
    capacity: usize,
}

impl BufAppender {
    pub(crate) fn new(file: Arc<dyn FsFile>, capacity: usize) -> Self {
        BufAppender {
            file,
            buf: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// Buffers `bytes`, appending to the file whenever the buffer fills.
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buf.len() + bytes.len() > self.capacity {
            self.flush()?;
        }
        if bytes.len() >= self.capacity {
            return self.file.append(bytes);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Appends what is buffered.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let res = self.file.append(&self.buf);
            self.buf.clear();
            res?;
        }
        Ok(())
    }

    /// Appends what is buffered and returns the file.
    pub(crate) fn into_file(mut self) -> io::Result<Arc<dyn FsFile>> {
        self.flush()?;
        Ok(self.file)
    }
}
