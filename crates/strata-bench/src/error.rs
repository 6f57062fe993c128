//! The harness's one error type. Every variant says what was being done (which engine and
//! operation, which file, which child process) so a failed benchmark explains itself.

use std::path::PathBuf;

/// Result of harness operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong while benchmarking.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine under test returned an error.
    #[error("{engine}: {op} failed: {message}")]
    Engine {
        /// Engine name.
        engine: &'static str,
        /// Operation, e.g. `put` or `open`.
        op: &'static str,
        /// The engine's own message.
        message: String,
    },
    /// A file or directory operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Which path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A JSON line could not be read or written.
    #[error("{context}: {source}")]
    Json {
        /// Where (file and line, or what was being encoded).
        context: String,
        /// The cause.
        source: serde_json::Error,
    },
    /// Drawing a plot failed.
    #[error("plot {}: {message}", path.display())]
    Plot {
        /// The image being drawn.
        path: PathBuf,
        /// What the drawing library said.
        message: String,
    },
    /// A child benchmark process failed or broke the line protocol.
    #[error("child run {run}: {message}")]
    Child {
        /// The run id the child was given.
        run: String,
        /// What went wrong.
        message: String,
    },
    /// A specification or argument is invalid.
    #[error("invalid benchmark setting: {0}")]
    Invalid(String),
}

impl Error {
    /// Wraps an I/O error with what was done to which path.
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            what,
            path: path.into(),
            source,
        }
    }

    /// Wraps an engine's error.
    pub fn engine(engine: &'static str, op: &'static str, message: impl ToString) -> Self {
        Error::Engine {
            engine,
            op,
            message: message.to_string(),
        }
    }
}
