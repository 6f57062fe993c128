//! An in-memory [`strata::vfs::FileSystem`]: a map of path -> file behind a mutex, so that a fuzz
//! input becomes a store without touching the disk and each execution costs microseconds.
//!
//! Semantics follow POSIX closely enough for the engine: a file is an inode (shared bytes) that
//! open handles keep alive after an unlink or a rename; `create` truncates an existing inode;
//! creating a file needs its parent directory; reads past the end fail with `UnexpectedEof`
//! like `pread`'s `read_exact_at`. Every offset and length is checked, so no input can make the
//! file system itself panic (a panic here would be reported as a finding of the engine).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use strata::vfs::{FileSystem, FsFile};

/// Largest file the in-memory file system holds (the stores fuzzed are a few kilobytes; a
/// larger `set_len` would only waste memory).
const FILE_BYTES_MAX: u64 = 64 << 20;

type Inode = Arc<RwLock<Vec<u8>>>;

#[derive(Default)]
struct State {
    files: BTreeMap<PathBuf, Inode>,
    dirs: BTreeSet<PathBuf>,
}

/// The in-memory file system. Clones share one state.
#[derive(Clone, Default)]
pub struct MemFs(Arc<Mutex<State>>);

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFs").finish_non_exhaustive()
    }
}

/// A frozen copy of a [`MemFs`]: its files and directories. Cheap to clone for stores of a few
/// kilobytes; [`MemFs::from_snapshot`] makes a live file system of it.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// File contents by path.
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    /// Directories (every ancestor of a directory is listed too).
    pub dirs: BTreeSet<PathBuf>,
}

impl Snapshot {
    /// Files directly in `dir` whose names end with `suffix`, sorted by path.
    pub fn files_in(&self, dir: &Path, suffix: &str) -> Vec<PathBuf> {
        self.files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter(|p| p.to_str().is_some_and(|s| s.ends_with(suffix)))
            .cloned()
            .collect()
    }

    /// The bytes of `path`; empty if it does not exist.
    pub fn get(&self, path: &Path) -> &[u8] {
        self.files.get(path).map_or(&[][..], |v| &v[..])
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("memfs: {} not found", path.display()),
    )
}

fn root_dirs() -> BTreeSet<PathBuf> {
    BTreeSet::from([PathBuf::from("/")])
}

impl MemFs {
    /// An empty file system holding only the root directory `/`.
    pub fn new() -> MemFs {
        MemFs(Arc::new(Mutex::new(State {
            files: BTreeMap::new(),
            dirs: root_dirs(),
        })))
    }

    /// A live file system holding the files of `snapshot`.
    pub fn from_snapshot(snapshot: Snapshot) -> MemFs {
        let mut dirs = snapshot.dirs;
        dirs.extend(root_dirs());
        let files = snapshot
            .files
            .into_iter()
            .map(|(p, b)| (p, Arc::new(RwLock::new(b))))
            .collect();
        MemFs(Arc::new(Mutex::new(State { files, dirs })))
    }

    /// A copy of every file and directory now.
    pub fn snapshot(&self) -> Snapshot {
        let st = self.state();
        Snapshot {
            files: st
                .files
                .iter()
                .map(|(p, f)| (p.clone(), read_inode(f).clone()))
                .collect(),
            dirs: st.dirs.clone(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic already happened, which aborts the fuzzer anyway.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn read_inode(f: &Inode) -> std::sync::RwLockReadGuard<'_, Vec<u8>> {
    f.read().unwrap_or_else(|e| e.into_inner())
}

fn write_inode(f: &Inode) -> std::sync::RwLockWriteGuard<'_, Vec<u8>> {
    f.write().unwrap_or_else(|e| e.into_inner())
}

impl State {
    fn parent_exists(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() && !self.dirs.contains(p) => Err(not_found(p)),
            _ => Ok(()),
        }
    }
}

/// An open file of [`MemFs`].
pub struct MemFile {
    inode: Inode,
}

impl fmt::Debug for MemFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFile").finish_non_exhaustive()
    }
}

fn shared(inode: Inode) -> Arc<dyn FsFile> {
    Arc::new(MemFile { inode })
}

impl FsFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let data = read_inode(&self.inode);
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .filter(|r| r.end <= data.len());
        match range {
            Some(r) => {
                buf.copy_from_slice(&data[r]);
                Ok(())
            }
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "failed to fill whole buffer",
            )),
        }
    }

    fn append(&self, buf: &[u8]) -> io::Result<()> {
        let mut data = write_inode(&self.inode);
        if (data.len() + buf.len()) as u64 > FILE_BYTES_MAX {
            return Err(io::Error::other("memfs: file too large"));
        }
        data.extend_from_slice(buf);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if len > FILE_BYTES_MAX {
            return Err(io::Error::other("memfs: file too large"));
        }
        write_inode(&self.inode).resize(len as usize, 0);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(read_inode(&self.inode).len() as u64)
    }
}

impl FileSystem for MemFs {
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let mut st = self.state();
        st.parent_exists(path)?;
        if st.files.contains_key(path) || st.dirs.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("memfs: {} exists", path.display()),
            ));
        }
        let inode = Inode::default();
        st.files.insert(path.to_path_buf(), inode.clone());
        Ok(shared(inode))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let mut st = self.state();
        st.parent_exists(path)?;
        if st.dirs.contains(path) {
            return Err(io::Error::other(format!(
                "memfs: {} is a directory",
                path.display()
            )));
        }
        let inode = st.files.entry(path.to_path_buf()).or_default().clone();
        write_inode(&inode).clear();
        Ok(shared(inode))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let st = self.state();
        st.files
            .get(path)
            .cloned()
            .map(shared)
            .ok_or_else(|| not_found(path))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let inode = self.state().files.get(path).cloned();
        inode
            .map(|f| read_inode(&f).clone())
            .ok_or_else(|| not_found(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state();
        st.parent_exists(to)?;
        if st.dirs.contains(to) {
            return Err(io::Error::other(format!(
                "memfs: {} is a directory",
                to.display()
            )));
        }
        let inode = st.files.remove(from).ok_or_else(|| not_found(from))?;
        st.files.insert(to.to_path_buf(), inode);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.state()
            .files
            .remove(path)
            .map(drop)
            .ok_or_else(|| not_found(path))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state();
        for dir in path.ancestors() {
            if dir.as_os_str().is_empty() {
                continue;
            }
            if st.files.contains_key(dir) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("memfs: {} is a file", dir.display()),
                ));
            }
            st.dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.state().dirs.contains(path) {
            Ok(())
        } else {
            Err(not_found(path))
        }
    }

    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        let st = self.state();
        if !st.dirs.contains(path) {
            return Err(not_found(path));
        }
        let names = st
            .files
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect();
        Ok(names)
    }

    fn file_len(&self, path: &Path) -> io::Result<u64> {
        let inode = self.state().files.get(path).cloned();
        inode
            .map(|f| read_inode(&f).len() as u64)
            .ok_or_else(|| not_found(path))
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state();
        st.files.contains_key(path) || st.dirs.contains(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.state().dirs.contains(path)
    }
}
