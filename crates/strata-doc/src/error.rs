//! The one error type of `strata-doc`. Every variant says what was wrong and where: the line and
//! column of bad JSON, the byte offset of a bad encoded value or key, the path that did not fit the
//! document, the input line that failed to load. Nothing here panics on bad input; it returns one of
//! these.

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with documents.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Text is not valid JSON (or nests deeper than serde_json's recursion limit of 128).
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line of the error (0 when the input ended early and no line is known).
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What serde_json found wrong.
        message: String,
    },
    /// A number's text is not a JSON number, or its magnitude is beyond
    /// [`crate::DECIMAL_POINT_ABS_MAX`].
    #[error("invalid decimal {text:?}: {reason}")]
    InvalidDecimal {
        /// The offending text (cut to 64 bytes).
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Encoded value bytes (the prefix-byte codec) are malformed.
    #[error("malformed encoded document at byte {offset}: {reason}")]
    Decode {
        /// Offset into the encoded bytes where decoding failed.
        offset: usize,
        /// Which check failed.
        reason: &'static str,
    },
    /// Encoded key bytes (the order-preserving codec) are malformed.
    #[error("malformed encoded key at byte {offset}: {reason}")]
    KeyDecode {
        /// Offset into the key bytes where decoding failed.
        offset: usize,
        /// Which check failed.
        reason: &'static str,
    },
    /// A stored value starts with a format version this build does not know.
    #[error("{what} has format version {version}, this build reads up to version {supported}")]
    UnsupportedFormatVersion {
        /// What was read ("stored document", "name record").
        what: &'static str,
        /// The version byte found.
        version: u8,
        /// The version this build writes and reads.
        supported: u8,
    },
    /// A stored document refers to a key name the store's name table does not hold.
    #[error("stored document refers to key name {id} at byte {offset}, which the name table does not hold")]
    UnknownName {
        /// The name id.
        id: u64,
        /// Offset of the reference in the stored bytes.
        offset: usize,
    },
    /// The store's name record is damaged.
    #[error("malformed key-name record at byte {offset}: {reason}")]
    NamesDecode {
        /// Offset into the record.
        offset: usize,
        /// Which check failed.
        reason: &'static str,
    },
    /// A document nests deeper than [`crate::DEPTH_MAX`] arrays/maps (checked when encoding).
    #[error("document nests deeper than {depth_max} levels")]
    TooDeep {
        /// The limit.
        depth_max: usize,
    },
    /// A map with a non-string key cannot become a JSON object.
    #[error("map key {key} is not a string, so the map cannot be written as a JSON object")]
    NonStringKey {
        /// The key, rendered as text.
        key: String,
    },
    /// A path expression does not parse.
    #[error("invalid path {path:?} at character {offset}: {reason}")]
    InvalidPath {
        /// The path text.
        path: String,
        /// Byte offset into the path text.
        offset: usize,
        /// What was expected.
        reason: &'static str,
    },
    /// A path does not fit the document (wrong type on the way, index out of range, not a number).
    #[error("path {path} does not fit the document: {reason}")]
    PathMismatch {
        /// The path, in canonical form.
        path: String,
        /// What did not fit.
        reason: String,
    },
    /// An increment would leave the i64 range.
    #[error("increment of {path} by {delta} overflows i64 (current value {current})")]
    Overflow {
        /// The path incremented.
        path: String,
        /// The current value.
        current: i64,
        /// The requested delta.
        delta: i64,
    },
    /// A read-modify-write operation needs a document that is not there.
    #[error("no document with key {key}")]
    NotFound {
        /// The key, rendered as text.
        key: String,
    },
    /// A line of a JSON-lines input could not be loaded (strict mode stops at the first one).
    #[error("{path}: line {line} (byte {byte_offset}): {reason}")]
    BadLine {
        /// The input file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// Byte offset of the line's first byte in the (uncompressed) input.
        byte_offset: u64,
        /// Why it was rejected.
        reason: String,
    },
    /// An operating-system I/O call failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file the call was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The storage engine failed.
    #[error("storage engine: {0}")]
    Engine(#[from] strata::Error),
    /// Storage other than `strata::Db` under a [`crate::NameStorage`] failed.
    #[error("document storage: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An argument is out of range (zero threads, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// Builds an [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn from_json(e: &serde_json::Error) -> Self {
        Error::Json {
            line: e.line(),
            column: e.column(),
            message: strip_location(&e.to_string()),
        }
    }
}

/// serde_json appends " at line L column C" to its messages; the variant carries those as fields.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}
