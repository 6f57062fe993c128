//! The parallel JSON-lines loader: [`load`] reads a `.jsonl` file (or `.jsonl.gz`), parses each
//! line into a document and puts it into a [`DocStore`] under the value of its id field.
//!
//! Threads (as in the original document store's loader): `readers` threads each own one byte range
//! of the file, aligned to line starts (a line belongs to the range holding its first byte), and
//! send batches of lines into one bounded queue; `writers` threads parse the lines and write each
//! batch with one engine write batch. A gzip input cannot be split, so it gets one reader. Memory
//! is bounded: at most `queue_batches_max` batches of at most `batch_bytes_max` bytes wait, and a
//! line longer than `line_bytes_max` is rejected without being held in memory.
//!
//! A bad line (invalid JSON, not an object, no id field, too long) is reported with its 1-based
//! line number and skipped; in strict mode the first one stops the load with [`Error::BadLine`].
//! Because a reader only knows line numbers inside its own range, a bad line is reported once every
//! earlier range has been read (immediately with one reader). Progress is reported to the caller's
//! callback on the calling thread every `progress_interval`; [`LoadProgress::stats_line`] renders
//! the per-second stats line the original loader printed.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most reader threads, and most writer threads, one load may ask for.
pub const LOAD_THREADS_MAX: usize = 256;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use crate::codec::{decode_in, encode_stored, type_name_of_code};
use crate::doc::Doc;
use crate::error::{Error, Result};
use crate::json::from_json_slice;
use crate::json_stored::{encode_json_stored_in, Streamed};
use crate::names::KeyNames;
use crate::path::{get_path_bytes_in, Path as DocPath};
use crate::store::DocStore;

/// How to load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Top-level field whose value is the document key (Reddit comments: `id`).
    pub id_field: String,
    /// Stop at the first bad line instead of skipping it.
    pub strict: bool,
    /// Reader threads (plain files only; gzip uses one).
    pub readers: usize,
    /// Parser/writer threads.
    pub writers: usize,
    /// A batch is cut at this many lines...
    pub batch_lines_max: usize,
    /// ...or at this many bytes.
    pub batch_bytes_max: usize,
    /// Batches waiting for a writer, at most.
    pub queue_batches_max: usize,
    /// Longest line accepted, in bytes.
    pub line_bytes_max: usize,
    /// How often the progress callback runs.
    pub progress_interval: Duration,
    /// Bad lines reported (and kept in the report) at most; the rest are only counted.
    pub bad_lines_reported_max: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            id_field: "id".to_string(),
            strict: false,
            readers: 1,
            writers: 2,
            batch_lines_max: 256,
            batch_bytes_max: 1 << 20,
            queue_batches_max: 16,
            line_bytes_max: 16 << 20,
            progress_interval: Duration::from_secs(1),
            bad_lines_reported_max: 1000,
        }
    }
}

/// Where a load stands.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadProgress {
    /// Time since the load started.
    pub elapsed: Duration,
    /// Documents written so far.
    pub docs_written: u64,
    /// Input lines read so far (good, bad and blank).
    pub lines_read: u64,
    /// Bytes of the input file consumed (compressed bytes for gzip).
    pub bytes_read: u64,
    /// Size of the input file (compressed size for gzip).
    pub bytes_total: u64,
    /// Bad lines so far.
    pub bad_lines: u64,
    /// Bytes the database occupies on disk (from engine stats).
    pub disk_bytes: u64,
}

impl LoadProgress {
    /// The original loader's stats line:
    /// `{"time":<ns since start>,"writes":<docs>,"size":<disk bytes>}`.
    pub fn stats_line(&self) -> String {
        format!(
            "{{\"time\":{},\"writes\":{},\"size\":{}}}",
            self.elapsed.as_nanos(),
            self.docs_written,
            self.disk_bytes
        )
    }
}

/// One rejected input line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number in the (uncompressed) input.
    pub line: u64,
    /// Offset of the line's first byte in the (uncompressed) input.
    pub byte_offset: u64,
    /// Why it was rejected.
    pub reason: String,
}

/// What the callback of [`load`] is told.
#[derive(Debug)]
pub enum LoadEvent<'a> {
    /// Periodic progress (also once at the start and once at the end).
    Progress(&'a LoadProgress),
    /// A line was skipped.
    BadLine(&'a BadLine),
}

/// The outcome of a load.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Final counters.
    pub progress: LoadProgress,
    /// The first [`LoadOptions::bad_lines_reported_max`] bad lines.
    pub bad_lines: Vec<BadLine>,
}

/// A line as it travels from a reader to a writer.
struct LineRef {
    start: usize,
    len: usize,
    byte_offset: u64,
    /// 1-based line number inside the reader's range.
    local_line: u64,
    too_long: bool,
}

struct Batch {
    chunk: usize,
    data: Vec<u8>,
    lines: Vec<LineRef>,
}

/// Messages to the coordinating (calling) thread.
enum Event {
    ChunkDone { chunk: usize, lines: u64 },
    Bad(RawBad),
}

struct RawBad {
    chunk: usize,
    local_line: u64,
    byte_offset: u64,
    reason: String,
}

/// Shared counters and the first fatal error.
struct Shared {
    abort: AtomicBool,
    docs_written: AtomicU64,
    lines_read: AtomicU64,
    bytes_read: AtomicU64,
    bad_lines: AtomicU64,
    fatal: Mutex<Option<Fatal>>,
}

enum Fatal {
    Error(Error),
    StrictBadLine(RawBad),
}

impl Shared {
    fn fail(&self, f: Fatal) {
        if let Ok(mut slot) = self.fatal.lock() {
            if slot.is_none() {
                *slot = Some(f);
            }
        }
        self.abort.store(true, Ordering::SeqCst);
    }

    fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// Loads the JSON-lines file `input` into `store`. `on_event` runs on the calling thread.
pub fn load(
    store: &DocStore,
    input: &Path,
    options: &LoadOptions,
    mut on_event: impl FnMut(LoadEvent<'_>),
) -> Result<LoadReport> {
    if options.readers == 0 || options.writers == 0 {
        return Err(Error::InvalidArgument(
            "readers and writers must be at least 1".into(),
        ));
    }
    if options.readers > LOAD_THREADS_MAX || options.writers > LOAD_THREADS_MAX {
        // Each is a thread with its own buffers (a reader holds about 2 MiB): past this the
        // OS refuses threads or memory runs out, which would end the load in a panic.
        return Err(Error::InvalidArgument(format!(
            "readers and writers must be at most {LOAD_THREADS_MAX} each"
        )));
    }
    let started = Instant::now();
    let bytes_total = std::fs::metadata(input)
        .map_err(|e| Error::io(input, e))?
        .len();
    let gzip = input.extension().is_some_and(|e| e == "gz");
    let readers = if gzip {
        1
    } else {
        // No more readers than there are bytes (each range must be non-empty).
        options
            .readers
            .min(usize::try_from(bytes_total.max(1)).unwrap_or(usize::MAX))
    };
    let ranges: Vec<(u64, u64)> = (0..readers as u64)
        .map(|i| {
            let r = readers as u64;
            (bytes_total * i / r, bytes_total * (i + 1) / r)
        })
        .collect();

    let shared = Shared {
        abort: AtomicBool::new(false),
        docs_written: AtomicU64::new(0),
        lines_read: AtomicU64::new(0),
        bytes_read: AtomicU64::new(0),
        bad_lines: AtomicU64::new(0),
        fatal: Mutex::new(None),
    };
    let progress = |shared: &Shared| LoadProgress {
        elapsed: started.elapsed(),
        docs_written: shared.docs_written.load(Ordering::Relaxed),
        lines_read: shared.lines_read.load(Ordering::Relaxed),
        bytes_read: shared.bytes_read.load(Ordering::Relaxed),
        bytes_total,
        bad_lines: shared.bad_lines.load(Ordering::Relaxed),
        disk_bytes: store.db().stats().disk_bytes(),
    };

    let mut resolver = Resolver::new(readers, options.bad_lines_reported_max);
    let (batch_tx, batch_rx) = bounded::<Batch>(options.queue_batches_max.max(1));
    let (event_tx, event_rx) = bounded::<Event>(1024);

    std::thread::scope(|scope| {
        for (chunk, &(start, end)) in ranges.iter().enumerate() {
            let (batch_tx, event_tx, shared) = (batch_tx.clone(), event_tx.clone(), &shared);
            scope.spawn(move || {
                let result = if gzip {
                    read_gzip(input, options, shared, &batch_tx)
                } else {
                    read_range(input, chunk, start, end, options, shared, &batch_tx)
                };
                match result {
                    Ok(Some(lines)) => {
                        let _ = event_tx.send(Event::ChunkDone { chunk, lines });
                    }
                    Ok(None) => {}
                    Err(e) => shared.fail(Fatal::Error(e)),
                }
            });
        }
        drop(batch_tx);
        for _ in 0..options.writers {
            let (batch_rx, event_tx, shared) = (batch_rx.clone(), event_tx.clone(), &shared);
            scope.spawn(move || write_batches(store, options, shared, &batch_rx, &event_tx));
        }
        drop(event_tx);

        on_event(LoadEvent::Progress(&progress(&shared)));
        let mut next_tick = Instant::now() + options.progress_interval;
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match event_rx.recv_timeout(wait) {
                Ok(Event::ChunkDone { chunk, lines }) => {
                    resolver.chunk_done(chunk, lines, &mut on_event)
                }
                Ok(Event::Bad(bad)) => resolver.bad(bad, &mut on_event),
                Err(RecvTimeoutError::Timeout) => {
                    on_event(LoadEvent::Progress(&progress(&shared)));
                    next_tick += options.progress_interval;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    });

    let final_progress = progress(&shared);
    on_event(LoadEvent::Progress(&final_progress));
    let fatal = shared.fatal.lock().ok().and_then(|mut f| f.take());
    match fatal {
        None => Ok(LoadReport {
            progress: final_progress,
            bad_lines: resolver.reported,
        }),
        Some(Fatal::Error(e)) => Err(e),
        Some(Fatal::StrictBadLine(bad)) => {
            let line = match resolver.line_of(bad.chunk, bad.local_line) {
                Some(line) => line,
                None => count_lines_before(input, bad.byte_offset)? + 1,
            };
            Err(Error::BadLine {
                path: input.to_path_buf(),
                line,
                byte_offset: bad.byte_offset,
                reason: bad.reason,
            })
        }
    }
}

/// Turns (range, line within range) into global line numbers once earlier ranges are counted.
struct Resolver {
    chunk_lines: Vec<Option<u64>>,
    pending: Vec<RawBad>,
    reported: Vec<BadLine>,
    reported_max: usize,
    seen: usize,
}

impl Resolver {
    fn new(chunks: usize, reported_max: usize) -> Self {
        Resolver {
            chunk_lines: vec![None; chunks],
            pending: Vec::new(),
            reported: Vec::new(),
            reported_max,
            seen: 0,
        }
    }

    /// Global line number, if every earlier range has been counted.
    fn line_of(&self, chunk: usize, local_line: u64) -> Option<u64> {
        let mut before = 0u64;
        for c in self.chunk_lines.get(..chunk)? {
            before += (*c)?;
        }
        Some(before + local_line)
    }

    fn bad(&mut self, bad: RawBad, on_event: &mut impl FnMut(LoadEvent<'_>)) {
        if self.seen >= self.reported_max {
            return;
        }
        self.seen += 1;
        self.pending.push(bad);
        self.flush(on_event);
    }

    fn chunk_done(&mut self, chunk: usize, lines: u64, on_event: &mut impl FnMut(LoadEvent<'_>)) {
        if let Some(slot) = self.chunk_lines.get_mut(chunk) {
            *slot = Some(lines);
        }
        self.flush(on_event);
    }

    fn flush(&mut self, on_event: &mut impl FnMut(LoadEvent<'_>)) {
        let pending = std::mem::take(&mut self.pending);
        for bad in pending {
            match self.line_of(bad.chunk, bad.local_line) {
                Some(line) => {
                    let b = BadLine {
                        line,
                        byte_offset: bad.byte_offset,
                        reason: bad.reason,
                    };
                    on_event(LoadEvent::BadLine(&b));
                    self.reported.push(b);
                }
                None => self.pending.push(bad),
            }
        }
    }
}

/// Reads one line into `buf` (without the newline), holding at most `line_bytes_max` bytes of it.
/// Returns (bytes consumed including the newline, whether the line was longer than the limit).
fn read_line_bounded(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    line_bytes_max: usize,
) -> std::io::Result<(u64, bool)> {
    let mut consumed = 0u64;
    let mut too_long = false;
    let start_len = buf.len();
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (chunk, done) = match available.iter().position(|&c| c == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() - start_len + chunk.len() > line_bytes_max {
                too_long = true;
                buf.truncate(start_len);
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(available.len());
        reader.consume(used);
        consumed += used as u64;
        if done.is_some() {
            break;
        }
    }
    if !too_long && buf.last() == Some(&b'\r') && buf.len() > start_len {
        buf.pop();
    }
    Ok((consumed, too_long))
}

/// Reads lines from any reader into batches. `range_end`: stop before a line starting at or after
/// this offset. Returns the number of lines read, or `None` when stopped early by an abort (then
/// the count is not the range's line count and must not be used for line numbers).
#[allow(clippy::too_many_arguments)]
fn pump_lines(
    reader: &mut impl BufRead,
    chunk: usize,
    mut offset: u64,
    range_end: Option<u64>,
    options: &LoadOptions,
    shared: &Shared,
    tx: &Sender<Batch>,
    count_bytes: bool,
) -> Result<Option<u64>> {
    let mut lines = 0u64;
    let new_batch = || Batch {
        chunk,
        data: Vec::with_capacity(options.batch_bytes_max.min(1 << 20)),
        lines: Vec::with_capacity(options.batch_lines_max.min(4096)),
    };
    let mut batch = new_batch();
    loop {
        if shared.aborted() {
            return Ok(None);
        }
        if range_end.is_some_and(|end| offset >= end) {
            break;
        }
        let start = batch.data.len();
        let (consumed, too_long) =
            read_line_bounded(reader, &mut batch.data, options.line_bytes_max)
                .map_err(|e| Error::io(PathBuf::from("<input>"), e))?;
        if consumed == 0 {
            break;
        }
        lines += 1;
        shared.lines_read.fetch_add(1, Ordering::Relaxed);
        if count_bytes {
            shared.bytes_read.fetch_add(consumed, Ordering::Relaxed);
        }
        batch.lines.push(LineRef {
            start,
            len: batch.data.len() - start,
            byte_offset: offset,
            local_line: lines,
            too_long,
        });
        offset += consumed;
        let full = batch.lines.len() >= options.batch_lines_max
            || batch.data.len() >= options.batch_bytes_max;
        if full && tx.send(std::mem::replace(&mut batch, new_batch())).is_err() {
            return Ok(None);
        }
    }
    if !batch.lines.is_empty() && tx.send(batch).is_err() {
        return Ok(None);
    }
    Ok(Some(lines))
}

fn read_range(
    input: &Path,
    chunk: usize,
    start: u64,
    end: u64,
    options: &LoadOptions,
    shared: &Shared,
    tx: &Sender<Batch>,
) -> Result<Option<u64>> {
    let io = |e| Error::io(input, e);
    let mut file = File::open(input).map_err(io)?;
    let mut offset = start;
    if start > 0 {
        // Skip the rest of the line that started before our range: it belongs to the previous one.
        file.seek(SeekFrom::Start(start - 1)).map_err(io)?;
        offset = start - 1;
    }
    let mut reader = BufReader::with_capacity(1 << 20, file);
    if start > 0 {
        let mut sink = Vec::new();
        let (consumed, _) = read_line_bounded(&mut reader, &mut sink, 0).map_err(io)?;
        // Those bytes are counted by the previous range's reader, which reads its last line whole.
        offset += consumed;
    }
    pump_lines(
        &mut reader,
        chunk,
        offset,
        Some(end),
        options,
        shared,
        tx,
        true,
    )
    .map_err(|e| with_path(e, input))
}

/// Counts compressed bytes pulled through it.
struct CountingReader<'a, R> {
    inner: R,
    shared: &'a Shared,
}

impl<R: Read> Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.shared
            .bytes_read
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn read_gzip(
    input: &Path,
    options: &LoadOptions,
    shared: &Shared,
    tx: &Sender<Batch>,
) -> Result<Option<u64>> {
    let file = File::open(input).map_err(|e| Error::io(input, e))?;
    let counting = CountingReader {
        inner: BufReader::with_capacity(1 << 20, file),
        shared,
    };
    let mut reader = BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(counting));
    pump_lines(&mut reader, 0, 0, None, options, shared, tx, false).map_err(|e| with_path(e, input))
}

fn with_path(e: Error, input: &Path) -> Error {
    match e {
        Error::Io { source, .. } => Error::io(input, source),
        other => other,
    }
}

fn write_batches(
    store: &DocStore,
    options: &LoadOptions,
    shared: &Shared,
    rx: &Receiver<Batch>,
    events: &Sender<Event>,
) {
    let id_path = DocPath::root().key(options.id_field.as_str());
    // One buffer for every line's stored bytes: the write batch takes a copy.
    let mut stored = Vec::with_capacity(4096);
    let names = store.names();
    while let Ok(batch) = rx.recv() {
        if shared.aborted() {
            continue;
        }
        // Names the previous batches repeated get their ids before this batch is encoded.
        if let Err(e) = names.intern_pending() {
            shared.fail(Fatal::Error(e));
            continue;
        }
        let mut writes = strata::WriteBatch::new();
        for line in &batch.lines {
            let text = batch
                .data
                .get(line.start..line.start + line.len)
                .unwrap_or(&[]);
            let parsed = if line.too_long {
                Err(format!("line longer than {} bytes", options.line_bytes_max))
            } else if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            } else {
                stored.clear();
                parse_line(text, &options.id_field, &id_path, names, &mut stored)
            };
            match parsed {
                Ok(key) => {
                    writes.put(key, &stored);
                }
                Err(reason) => {
                    shared.bad_lines.fetch_add(1, Ordering::Relaxed);
                    let bad = RawBad {
                        chunk: batch.chunk,
                        local_line: line.local_line,
                        byte_offset: line.byte_offset,
                        reason,
                    };
                    if options.strict {
                        shared.fail(Fatal::StrictBadLine(bad));
                        break;
                    }
                    let _ = events.send(Event::Bad(bad));
                }
            }
        }
        if writes.is_empty() {
            continue;
        }
        let docs = writes.len() as u64;
        match store.db().write(writes) {
            Ok(()) => {
                shared.docs_written.fetch_add(docs, Ordering::Relaxed);
            }
            Err(e) => shared.fail(Fatal::Error(e.into())),
        }
    }
}

/// Parses one line: leaves its stored form (what `DocStore::put` writes) in `stored` and returns
/// its engine key, or says why the line cannot be loaded. The text is encoded without building a
/// document; a line that repeats an object key goes through the document model, which merges
/// the repeats.
fn parse_line(
    text: &[u8],
    id_field: &str,
    id_path: &DocPath,
    names: &KeyNames,
    stored: &mut Vec<u8>,
) -> std::result::Result<Vec<u8>, String> {
    let explain = |e: Error| match e {
        Error::Json {
            column, message, ..
        } => format!("invalid JSON at column {column}: {message}"),
        other => other.to_string(),
    };
    // One table for encoding the line and for finding its id in the bytes.
    let table = names.table();
    let mut inline = Vec::new();
    let streamed = encode_json_stored_in(text, stored, &table, &mut inline);
    names.note_inline(&inline.iter().map(String::as_str).collect::<Vec<_>>());
    let key = match streamed.map_err(explain)? {
        Streamed::Done => {
            let body = stored.get(1..).unwrap_or(&[]);
            let code = body.first().map_or(0, |b| b & 0x0f);
            if code != crate::codec::type_code::MAP {
                return Err(format!(
                    "a {} line, not a JSON object",
                    type_name_of_code(code)
                ));
            }
            let id = get_path_bytes_in(body, id_path, &table)
                .map_err(explain)?
                .ok_or_else(|| format!("no {id_field:?} field"))?;
            decode_in(id, &table).map_err(explain)?
        }
        Streamed::RepeatedKey => {
            let doc = from_json_slice(text).map_err(explain)?;
            let key = match &doc {
                Doc::Map(m) => m
                    .get_str(id_field)
                    .cloned()
                    .ok_or_else(|| format!("no {id_field:?} field"))?,
                other => return Err(format!("a {} line, not a JSON object", other.type_name())),
            };
            stored.clear();
            stored.extend_from_slice(&encode_stored(&doc, names).map_err(explain)?);
            key
        }
    };
    DocStore::engine_key(&key).map_err(explain)
}

/// Number of newlines before `offset` (the strict-mode fallback when earlier ranges were not
/// finished). For gzip input there is only one range, so this is never needed there.
fn count_lines_before(input: &Path, offset: u64) -> Result<u64> {
    let file = File::open(input).map_err(|e| Error::io(input, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file.take(offset));
    let mut n = 0u64;
    loop {
        let buf = reader.fill_buf().map_err(|e| Error::io(input, e))?;
        if buf.is_empty() {
            return Ok(n);
        }
        n += buf.iter().filter(|&&c| c == b'\n').count() as u64;
        let len = buf.len();
        reader.consume(len);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::Write;

    fn store() -> (tempfile::TempDir, DocStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = DocStore::open(dir.path().join("db"), strata::Options::tiny()).unwrap();
        (dir, s)
    }

    fn write_file(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    #[test]
    fn bounded_line_reader() {
        let mut r = std::io::Cursor::new(b"abc\r\ndefghij\nxy".to_vec());
        let mut buf = Vec::new();
        assert_eq!(read_line_bounded(&mut r, &mut buf, 10).unwrap(), (5, false));
        assert_eq!(buf, b"abc");
        buf.clear();
        assert_eq!(read_line_bounded(&mut r, &mut buf, 3).unwrap(), (8, true));
        assert!(buf.is_empty());
        assert_eq!(read_line_bounded(&mut r, &mut buf, 3).unwrap(), (2, false));
        assert_eq!(buf, b"xy");
    }

    #[test]
    fn every_line_lands_once_whatever_the_reader_count() {
        let (dir, _) = store();
        let mut content = Vec::new();
        for i in 0..300 {
            writeln!(
                content,
                r#"{{"id":"k{i:03}","n":{i},"pad":"{}"}}"#,
                "p".repeat(i % 37)
            )
            .unwrap();
        }
        let input = write_file(dir.path(), "in.jsonl", &content);
        for readers in [1, 2, 3, 7, 16] {
            let (_d, s) = store();
            let options = LoadOptions {
                readers,
                writers: 3,
                batch_lines_max: 7,
                ..LoadOptions::default()
            };
            let report = load(&s, &input, &options, |_| {}).unwrap();
            assert_eq!(report.progress.docs_written, 300, "readers {readers}");
            assert_eq!(report.progress.lines_read, 300, "readers {readers}");
            assert_eq!(
                report.progress.bytes_read,
                content.len() as u64,
                "readers {readers}"
            );
            let all: Vec<(Doc, Doc)> = s.scan(..).map(|kv| kv.unwrap()).collect();
            let keys: Vec<Doc> = all.iter().map(|(k, _)| k.clone()).collect();
            let want: Vec<Doc> = (0..300).map(|i| Doc::from(format!("k{i:03}"))).collect();
            assert_eq!(keys, want, "readers {readers}");
            // Every document reads back as its line.
            for (i, (_, doc)) in all.iter().enumerate() {
                let line = format!(
                    r#"{{"id":"k{i:03}","n":{i},"pad":"{}"}}"#,
                    "p".repeat(i % 37)
                );
                assert_eq!(doc, &Doc::from_json(&line).unwrap(), "readers {readers}");
            }
            let t = s.names().table();
            assert!(
                t.id("id").is_some() && t.id("pad").is_some(),
                "readers {readers}"
            );
            // The field names got ids once a writer had seen them, and each writer interns
            // before its next batch, so every writer's second batch (there are more batches than
            // writers) is stored with references. Which documents those are depends on how the
            // readers and writers race: with many readers the last lines may be among the first
            // batches encoded, so the test counts references instead of naming a document.
            let referenced = all
                .iter()
                .filter(|(key, doc)| {
                    let stored = s.get_stored(key).unwrap().unwrap();
                    let inline = crate::codec::encode_stored(doc, &KeyNames::detached()).unwrap();
                    stored.len() < inline.len()
                })
                .count();
            assert!(
                referenced > 0,
                "readers {readers}: no document uses name ids"
            );
        }
    }

    /// Thread counts past the bound are refused with a clear error before any thread starts
    /// (a million readers ended the load in a panic when the OS refused threads).
    #[test]
    fn absurd_thread_counts_are_refused() {
        let (dir, s) = store();
        let input = write_file(dir.path(), "in.jsonl", b"{\"id\":1}\n");
        for (readers, writers) in [(1_000_000, 1), (1, 1_000_000)] {
            let options = LoadOptions {
                readers,
                writers,
                ..LoadOptions::default()
            };
            let Err(Error::InvalidArgument(why)) = load(&s, &input, &options, |_| {}) else {
                panic!("{readers} readers and {writers} writers were accepted")
            };
            assert!(why.contains("at most"), "{why}");
        }
    }

    #[test]
    fn bad_lines_are_reported_with_line_numbers_and_skipped() {
        let (dir, s) = store();
        let mut content = String::new();
        for i in 1..=40 {
            match i {
                5 => content.push_str("{not json}\n"),
                17 => content.push_str("[1,2]\n"),
                23 => content.push_str("{\"no_id\":1}\n"),
                30 => content.push('\n'),
                _ => content.push_str(&format!("{{\"id\":{i}}}\n")),
            }
        }
        let input = write_file(dir.path(), "in.jsonl", content.as_bytes());
        let mut events = Vec::new();
        let options = LoadOptions {
            readers: 4,
            writers: 2,
            batch_lines_max: 3,
            ..LoadOptions::default()
        };
        let report = load(&s, &input, &options, |e| {
            if let LoadEvent::BadLine(b) = e {
                events.push(b.clone());
            }
        })
        .unwrap();
        let mut lines: Vec<u64> = report.bad_lines.iter().map(|b| b.line).collect();
        lines.sort_unstable();
        assert_eq!(lines, vec![5, 17, 23]);
        assert_eq!(events.len(), 3);
        assert_eq!(report.progress.docs_written, 36);
        assert_eq!(report.progress.bad_lines, 3);
        let bad5 = report.bad_lines.iter().find(|b| b.line == 5).unwrap();
        assert!(
            bad5.reason.contains("invalid JSON at column 2"),
            "{}",
            bad5.reason
        );
        assert_eq!(bad5.byte_offset, content.find("{not").unwrap() as u64);
    }

    #[test]
    fn a_line_that_repeats_a_key_loads_like_the_document_model_reads_it() {
        let (dir, s) = store();
        let input = write_file(
            dir.path(),
            "in.jsonl",
            b"{\"id\":\"a\",\"v\":1,\"w\":[],\"v\":{\"x\":2}}\n{\"id\":\"b\",\"v\":3}\n",
        );
        let report = load(&s, &input, &LoadOptions::default(), |_| {}).unwrap();
        assert_eq!(report.progress.docs_written, 2);
        let a = s.get(&Doc::from("a")).unwrap().unwrap();
        assert_eq!(a.to_json().unwrap(), r#"{"id":"a","v":{"x":2},"w":[]}"#);
        let b = s.get(&Doc::from("b")).unwrap().unwrap();
        assert_eq!(b.to_json().unwrap(), r#"{"id":"b","v":3}"#);
    }

    #[test]
    fn numeric_ids_and_escaped_text_load_like_parsed_documents() {
        let (dir, s) = store();
        let lines = [
            r#"{"id":42,"t":"caf\u00e9 \"q\"","n":-1.50}"#,
            r#"{"n":[1,2,{"k":null}],"id":"x\ny"}"#,
        ];
        let input = write_file(dir.path(), "in.jsonl", lines.join("\n").as_bytes());
        load(&s, &input, &LoadOptions::default(), |_| {}).unwrap();
        for line in lines {
            let doc = Doc::from_json(line).unwrap();
            let id = doc.as_map().unwrap().get_str("id").unwrap().clone();
            assert_eq!(s.get(&id).unwrap(), Some(doc), "{line}");
        }
    }

    #[test]
    fn strict_mode_stops_at_the_first_bad_line() {
        let (dir, s) = store();
        let mut content = String::new();
        for i in 1..=100 {
            if i == 61 {
                content.push_str("{\"id\": oops}\n");
            } else {
                content.push_str(&format!("{{\"id\":{i}}}\n"));
            }
        }
        let input = write_file(dir.path(), "in.jsonl", content.as_bytes());
        for readers in [1, 3] {
            let options = LoadOptions {
                strict: true,
                readers,
                ..LoadOptions::default()
            };
            match load(&s, &input, &options, |_| {}) {
                Err(Error::BadLine { line, .. }) => assert_eq!(line, 61),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn gzip_input_is_read_whole() {
        let (dir, s) = store();
        let mut raw = Vec::new();
        crate::gen::write_comments(&mut raw, 200, 5).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        let input = write_file(dir.path(), "c.jsonl.gz", &gz.finish().unwrap());
        let options = LoadOptions {
            readers: 4,
            ..LoadOptions::default()
        };
        let report = load(&s, &input, &options, |_| {}).unwrap();
        assert_eq!(report.progress.docs_written, 200);
        assert_eq!(
            report.progress.bytes_read,
            std::fs::metadata(&input).unwrap().len()
        );
        let first = Doc::from_json(&crate::gen::comment_json(5, 0)).unwrap();
        let id = first.as_map().unwrap().get_str("id").unwrap().clone();
        assert_eq!(s.get(&id).unwrap(), Some(first));
    }

    #[test]
    fn stats_line_has_time_writes_and_size() {
        let p = LoadProgress {
            elapsed: Duration::from_millis(1500),
            docs_written: 7,
            disk_bytes: 4096,
            ..LoadProgress::default()
        };
        let v: serde_json::Value = serde_json::from_str(&p.stats_line()).unwrap();
        assert_eq!(v["time"], 1_500_000_000u64);
        assert_eq!(v["writes"], 7);
        assert_eq!(v["size"], 4096);
    }

    #[test]
    fn missing_input_is_an_io_error_naming_the_file() {
        let (dir, s) = store();
        let err = load(
            &s,
            &dir.path().join("nope.jsonl"),
            &LoadOptions::default(),
            |_| {},
        )
        .unwrap_err();
        assert!(err.to_string().contains("nope.jsonl"), "{err}");
    }
}
