//! A file system for tests that knows what a power cut would leave (RocksDB's
//! `FaultInjectionTestFS`, LazyFS): it wraps the real file system under one root directory and
//! remembers, for every file, the bytes its last fsync made durable, and for every directory,
//! the entries its last directory fsync made durable.
//!
//! - [`FaultFs::power_cut`] puts the files back as a power cut would leave them: every byte not
//!   fsynced is gone (or, with [`FaultFs::tear_writes`], a random prefix of it survives, cut at a
//!   512-byte boundary), and every create, rename and unlink not followed by a directory fsync is
//!   undone.
//! - [`FaultFs::crash_at`] stops the machine during the Nth call that changes anything: that call
//!   and every later one fail with `EIO`. Then [`FaultFs::power_cut`] loses what was not durable,
//!   or [`FaultFs::revive`] keeps it, as when only the process was killed.
//! - [`FaultFs::fail`] fails the Nth call of a kind (write, fsync, rename, directory fsync,
//!   read) once, with `EIO` or `ENOSPC`, or flips a bit in what a read returns.
//!
//! Limits of the model: directories themselves are durable from creation (the engine fsyncs the
//! parent of each directory it creates; losing one is not simulated); a file's durable bytes are
//! copied at every fsync, so it is meant for the small stores of tests.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileSystem, FsFile, RealFs};

/// Which calls a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// Appends to a file.
    Write,
    /// `fsync`/`fdatasync` of a file.
    Sync,
    /// Renames.
    Rename,
    /// `fsync` of a directory.
    SyncDir,
    /// Positional reads and whole-file reads.
    Read,
    /// Removals of files (unlink).
    Remove,
    /// Opens of existing files (EMFILE, say; `FaultKind::FlipBit` does not apply).
    Open,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Fail with `EIO`.
    Eio,
    /// Fail with `ENOSPC` (disk full).
    Enospc,
    /// Reads only: succeed, with one bit of the returned bytes flipped.
    FlipBit,
}

type FileId = u64;

#[derive(Default)]
struct State {
    /// The bytes each file's last fsync made durable (empty if never fsynced).
    durable: HashMap<FileId, Vec<u8>>,
    /// The file each current path holds.
    names: HashMap<PathBuf, FileId>,
    /// Per directory, the entries its last fsync made durable.
    durable_dirs: HashMap<PathBuf, HashMap<String, FileId>>,
    next_id: FileId,
    /// Calls that changed something, counted for `crash_at`.
    mutations: u64,
    crash_at: Option<u64>,
    crashed: bool,
    /// Faults still to fire: kind, calls of that kind still to let through, fault.
    faults: Vec<(IoKind, u64, FaultKind)>,
    /// Seed for torn writes at the next power cut; `None` drops every unsynced byte.
    tear_seed: Option<u64>,
}

impl State {
    fn new_id(&mut self) -> FileId {
        self.next_id += 1;
        self.next_id
    }
}

struct Shared {
    root: PathBuf,
    real: RealFs,
    state: Mutex<State>,
}

/// The fault-injecting file system (see the module comment). Clones share one state.
#[derive(Clone)]
pub struct FaultFs(Arc<Shared>);

impl fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultFs")
            .field("root", &self.0.root)
            .finish_non_exhaustive()
    }
}

fn eio(why: &str) -> io::Error {
    io::Error::other(format!("injected I/O error: {why}"))
}

fn error_for(fault: FaultKind, what: &str) -> io::Error {
    match fault {
        FaultKind::Enospc => io::Error::from_raw_os_error(28),
        FaultKind::Eio | FaultKind::FlipBit => io::Error::other(format!("injected EIO in {what}")),
    }
}

impl FaultFs {
    /// Wraps the files under `root` (created if missing); what exists there now counts as
    /// durable.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<FaultFs> {
        let root = root.into();
        std::fs::create_dir_all(&root)?;
        let fs = FaultFs(Arc::new(Shared {
            root: root.clone(),
            real: RealFs,
            state: Mutex::new(State::default()),
        }));
        {
            let mut st = fs.0.state.lock();
            fs.adopt_tree(&mut st, &root)?;
        }
        Ok(fs)
    }

    /// Records every file under `dir` as durable, as it is now.
    fn adopt_tree(&self, st: &mut State, dir: &Path) -> io::Result<()> {
        let mut entries = HashMap::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let path = e.path();
            if e.file_type()?.is_dir() {
                self.adopt_tree(st, &path)?;
            } else if let Ok(name) = e.file_name().into_string() {
                let id = st.new_id();
                st.durable.insert(id, std::fs::read(&path)?);
                st.names.insert(path, id);
                entries.insert(name, id);
            }
        }
        st.durable_dirs.insert(dir.to_path_buf(), entries);
        Ok(())
    }

    /// Cuts the power during the `n`th call (counting from now, 1-based) that changes anything.
    pub fn crash_at(&self, n: u64) {
        let mut st = self.0.state.lock();
        st.mutations = 0;
        st.crash_at = Some(n);
    }

    /// Whether the power was cut by [`FaultFs::crash_at`].
    pub fn crashed(&self) -> bool {
        self.0.state.lock().crashed
    }

    /// Calls that changed something since [`FaultFs::crash_at`] (or creation).
    pub fn mutations(&self) -> u64 {
        self.0.state.lock().mutations
    }

    /// Fails the `nth` call of `kind` from now on (1-based) with `fault`, once.
    pub fn fail(&self, kind: IoKind, nth: u64, fault: FaultKind) {
        self.0
            .state
            .lock()
            .faults
            .push((kind, nth.saturating_sub(1), fault));
    }

    /// At the next power cut, keep a random prefix (a multiple of 512 bytes, from `seed`) of each
    /// file's unsynced appended bytes instead of none: a torn write.
    pub fn tear_writes(&self, seed: u64) {
        self.0.state.lock().tear_seed = Some(seed);
    }

    /// Ends a crash as a killed process does, not a power cut: calls work again and every byte
    /// written so far stays (the page cache survives the process), durable or not.
    pub fn revive(&self) {
        let mut st = self.0.state.lock();
        st.crashed = false;
        st.crash_at = None;
        st.mutations = 0;
        st.faults.clear();
    }

    /// Puts every file and directory under the root back to what a power cut would leave (see
    /// the module comment), and ends a crash: calls work again.
    pub fn power_cut(&self) -> io::Result<()> {
        let mut st = self.0.state.lock();
        let mut rng = st.tear_seed.take();
        let dirs: Vec<PathBuf> = st.durable_dirs.keys().cloned().collect();
        for dir in dirs {
            let durable = st.durable_dirs.get(&dir).cloned().unwrap_or_default();
            // Entries that were created or renamed in without a directory fsync vanish.
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
                    let name = e.file_name().to_string_lossy().into_owned();
                    if is_file && !durable.contains_key(&name) {
                        std::fs::remove_file(e.path())?;
                    }
                }
            }
            // Durable entries hold their file's durable bytes (and, torn, some of the rest).
            for (name, id) in &durable {
                let path = dir.join(name);
                let mut bytes = st.durable.get(id).cloned().unwrap_or_default();
                if let Some(seed) = rng.as_mut() {
                    if st.names.get(&path) == Some(id) {
                        let now = std::fs::read(&path).unwrap_or_default();
                        if now.len() > bytes.len() && now.starts_with(&bytes) {
                            let extra = now.len() - bytes.len();
                            let keep = (next_random(seed) as usize % (extra / 512 + 1)) * 512;
                            bytes.extend_from_slice(&now[bytes.len()..bytes.len() + keep]);
                        }
                    }
                }
                std::fs::write(&path, &bytes)?;
            }
        }
        // Paths now name what the durable directories say.
        st.names.clear();
        let entries: Vec<(PathBuf, FileId)> = st
            .durable_dirs
            .iter()
            .flat_map(|(dir, e)| e.iter().map(move |(n, id)| (dir.join(n), *id)))
            .collect();
        for (path, id) in entries {
            // What survived is durable now (a torn write's surviving prefix included).
            let bytes = std::fs::read(&path)?;
            st.durable.insert(id, bytes);
            st.names.insert(path, id);
        }
        st.crashed = false;
        st.crash_at = None;
        st.mutations = 0;
        st.faults.clear();
        Ok(())
    }

    /// Counts a call that changes something; fails it if the power is (or goes) out now.
    fn mutate(&self, st: &mut State, what: &str) -> io::Result<()> {
        if st.crashed {
            return Err(eio("the power is out"));
        }
        st.mutations += 1;
        if st.crash_at.is_some_and(|n| st.mutations >= n) {
            st.crashed = true;
            return Err(eio(&format!("power cut during {what}")));
        }
        Ok(())
    }

    /// The fault to inject into this call of `kind`, if one is due.
    fn fault(&self, st: &mut State, kind: IoKind) -> Option<FaultKind> {
        let i = st.faults.iter().position(|(k, _, _)| *k == kind)?;
        if st.faults[i].1 > 0 {
            st.faults[i].1 -= 1;
            return None;
        }
        Some(st.faults.remove(i).2)
    }

    /// Checks a call that changes something: power, then injected faults of `kind`.
    fn check(&self, kind: Option<IoKind>, what: &str) -> io::Result<()> {
        let mut st = self.0.state.lock();
        self.mutate(&mut st, what)?;
        if let Some(kind) = kind {
            if let Some(f) = self.fault(&mut st, kind) {
                return Err(error_for(f, what));
            }
        }
        Ok(())
    }

    fn wrap(&self, path: &Path, inner: Arc<dyn FsFile>, new: bool) -> Arc<dyn FsFile> {
        let mut st = self.0.state.lock();
        let id = match st.names.get(path) {
            Some(id) if !new => *id,
            _ => {
                let id = st.new_id();
                st.durable.insert(id, Vec::new());
                st.names.insert(path.to_path_buf(), id);
                id
            }
        };
        Arc::new(FaultFile {
            fs: self.clone(),
            id,
            inner,
        })
    }
}

/// xorshift64*: enough randomness for choosing torn-write prefixes.
fn next_random(seed: &mut u64) -> u64 {
    let mut x = *seed | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *seed = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

struct FaultFile {
    fs: FaultFs,
    id: FileId,
    inner: Arc<dyn FsFile>,
}

impl fmt::Debug for FaultFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultFile").field("id", &self.id).finish()
    }
}

impl FaultFile {
    /// Records the file's first `len` bytes (its length when the fsync began: bytes appended by
    /// another thread during the fsync are not covered by it) as durable. Durability only
    /// grows: an fsync that began earlier and ends later (another thread's) does not shrink
    /// what a later-begun fsync already made durable, unless the file was cut since.
    fn mark_durable(&self, len: u64) -> io::Result<()> {
        let mut bytes = vec![0u8; usize::try_from(len).map_err(|_| eio("file too large"))?];
        self.inner.read_exact_at(&mut bytes, 0)?;
        let mut st = self.fs.0.state.lock();
        if let Some(old) = st.durable.get(&self.id) {
            if old.len() > bytes.len() && self.inner.len()? >= old.len() as u64 {
                let mut now = vec![0u8; old.len()];
                self.inner.read_exact_at(&mut now, 0)?;
                if now == *old {
                    return Ok(());
                }
            }
        }
        st.durable.insert(self.id, bytes);
        Ok(())
    }
}

impl FsFile for FaultFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let fault = {
            let mut st = self.fs.0.state.lock();
            self.fs.fault(&mut st, IoKind::Read)
        };
        match fault {
            Some(FaultKind::FlipBit) => {
                self.inner.read_exact_at(buf, offset)?;
                if let Some(b) = buf.first_mut() {
                    *b ^= 0x10;
                }
                Ok(())
            }
            Some(f) => Err(error_for(f, "read")),
            None => self.inner.read_exact_at(buf, offset),
        }
    }

    fn append(&self, buf: &[u8]) -> io::Result<()> {
        self.fs.check(Some(IoKind::Write), "write")?;
        self.inner.append(buf)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.fs.check(Some(IoKind::Sync), "fsync")?;
        let len = self.inner.len()?;
        self.inner.sync_data()?;
        self.mark_durable(len)
    }

    fn sync_all(&self) -> io::Result<()> {
        self.fs.check(Some(IoKind::Sync), "fsync")?;
        let len = self.inner.len()?;
        self.inner.sync_all()?;
        self.mark_durable(len)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.fs.check(Some(IoKind::Write), "truncate")?;
        self.inner.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl FileSystem for FaultFs {
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        self.check(None, "create")?;
        let f = self.0.real.create_new(path)?;
        Ok(self.wrap(path, f, true))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        self.check(None, "create")?;
        let f = self.0.real.create(path)?;
        Ok(self.wrap(path, f, true))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        // Opening changes nothing: no crash point, only an injected fault.
        let fault = {
            let mut st = self.0.state.lock();
            self.fault(&mut st, IoKind::Open)
        };
        if let Some(f) = fault {
            return Err(error_for(f, "open"));
        }
        let f = self.0.real.open(path)?;
        Ok(self.wrap(path, f, false))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let fault = {
            let mut st = self.0.state.lock();
            self.fault(&mut st, IoKind::Read)
        };
        let mut bytes = self.0.real.read(path)?;
        match fault {
            Some(FaultKind::FlipBit) => {
                if let Some(b) = bytes.first_mut() {
                    *b ^= 0x10;
                }
                Ok(bytes)
            }
            Some(f) => Err(error_for(f, "read")),
            None => Ok(bytes),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check(Some(IoKind::Rename), "rename")?;
        self.0.real.rename(from, to)?;
        let mut st = self.0.state.lock();
        if let Some(id) = st.names.remove(from) {
            st.names.insert(to.to_path_buf(), id);
        }
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.check(Some(IoKind::Remove), "unlink")?;
        self.0.real.remove_file(path)?;
        self.0.state.lock().names.remove(path);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.check(None, "mkdir")?;
        self.0.real.create_dir_all(path)?;
        let mut st = self.0.state.lock();
        let mut dir = Some(path);
        while let Some(d) = dir {
            if !d.starts_with(&self.0.root) {
                break;
            }
            st.durable_dirs.entry(d.to_path_buf()).or_default();
            dir = d.parent();
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.check(Some(IoKind::SyncDir), "directory fsync")?;
        self.0.real.sync_dir(path)?;
        let mut st = self.0.state.lock();
        let entries: HashMap<String, FileId> = st
            .names
            .iter()
            .filter(|(p, _)| p.parent() == Some(path))
            .filter_map(|(p, id)| Some((p.file_name()?.to_str()?.to_string(), *id)))
            .collect();
        st.durable_dirs.insert(path.to_path_buf(), entries);
        Ok(())
    }

    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        self.0.real.list(path)
    }

    fn file_len(&self, path: &Path) -> io::Result<u64> {
        self.0.real.file_len(path)
    }

    fn exists(&self, path: &Path) -> bool {
        self.0.real.exists(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.0.real.is_dir(path)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Two fsyncs of one file overlap: one begins when the file has 6 bytes, another begins
    /// later (11 bytes) and ends first. The earlier one ending last must not shrink what the
    /// later one made durable; a cut of the file does shrink it.
    #[test]
    fn an_earlier_fsync_ending_last_does_not_shrink_durability() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let path = dir.path().join("f");
        let inner = fs.0.real.create_new(&path).unwrap();
        let f = FaultFile {
            fs: fs.clone(),
            id: {
                let mut st = fs.0.state.lock();
                let id = st.new_id();
                st.durable.insert(id, Vec::new());
                st.names.insert(path.clone(), id);
                id
            },
            inner,
        };
        fs.sync_dir(dir.path()).unwrap();
        f.inner.append(b"first").unwrap();
        f.inner.append(b" more").unwrap();
        // The later fsync (all 10 bytes) ends first, then the earlier one (5 bytes).
        f.mark_durable(10).unwrap();
        f.mark_durable(5).unwrap();
        f.inner.append(b" unsynced").unwrap();
        fs.power_cut().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first more");
        // After a cut, a shorter durable length is the truth.
        f.inner.set_len(3).unwrap();
        f.mark_durable(3).unwrap();
        f.inner.append(b"zzzzzzzzzz").unwrap();
        fs.power_cut().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"fir");
    }
}
