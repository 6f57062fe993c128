//! The one error type of the server. Command failures carry Redis's exact wording in their
//! `Display` text (first word = the error code a client library dispatches on, e.g. `ERR`,
//! `WRONGTYPE`, `NOAUTH`), so turning an error into a RESP error reply is `to_string()`. Start-up
//! failures (binding, configuration, opening the engine) share the enum so that nothing stringly
//! crosses a module boundary.

use std::path::PathBuf;

/// Result alias used throughout the server.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the server, from one command to start-up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command got too few or too many arguments (`name` is lowercase, `container|sub` for
    /// subcommands, as Redis 7 prints it).
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    /// A command name the table does not know.
    #[error("ERR unknown command '{name}', with args beginning with: {args}")]
    UnknownCommand {
        /// The name as the client sent it (truncated to 128 bytes).
        name: String,
        /// The first arguments, each quoted and followed by a space, as Redis prints them.
        args: String,
    },
    /// A subcommand of a container command (CLIENT, CONFIG, COMMAND) the table does not know.
    #[error("ERR unknown subcommand '{}'. Try {container} HELP.", shown_arg(.sub.as_bytes(), SHOWN_ARG_BYTES_MAX))]
    UnknownSubcommand {
        /// The container, uppercase.
        container: &'static str,
        /// The subcommand as sent.
        sub: String,
    },
    /// An argument or a stored value is not a 64-bit signed integer.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// An argument or a stored value is not a finite float.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// An integer increment would leave the i64 range.
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    /// Options that do not parse or contradict each other.
    #[error("ERR syntax error")]
    Syntax,
    /// The key holds a value of another type (string vs JSON document).
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// `requirepass` is set and the connection has not authenticated.
    #[error("NOAUTH Authentication required.")]
    NoAuth,
    /// AUTH or HELLO AUTH with a wrong password or user.
    #[error("WRONGPASS invalid username-password pair or user is disabled.")]
    WrongPass,
    /// HELLO asked for a protocol version other than 2 or 3.
    #[error("NOPROTO unsupported protocol version")]
    NoProto,
    /// Any other command failure; the text follows `ERR ` verbatim.
    #[error("ERR {0}")]
    Command(String),
    /// A failure with its own error code (e.g. RedisJSON's), printed verbatim.
    #[error("{0}")]
    Coded(String),
    /// A command on a network thread would have waited for the exec lock (EXEC or another
    /// exclusive command is running): it changed nothing and runs again on the blocking pool.
    /// Never sent to a client.
    #[error("ERR internal: command deferred")]
    WouldWait,
    /// The request stream broke the protocol; the connection is closed after this reply.
    #[error("ERR Protocol error: {0}")]
    Protocol(String),
    /// A document operation failed (invalid JSON, a path that does not parse, a damaged
    /// stored document).
    #[error("ERR {0}")]
    Doc(#[from] strata_doc::Error),
    /// The storage engine failed.
    #[error("ERR storage engine: {0}")]
    Engine(#[from] strata::Error),
    /// A socket or file operation failed outside of a command.
    #[error("I/O error on {what}: {source}")]
    Io {
        /// What was being done (e.g. `binding 127.0.0.1:6379`).
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A setting in the configuration file or on the command line is invalid.
    #[error("invalid configuration{}: {reason}", .file.as_ref().map(|f| format!(" in {}", f.display())).unwrap_or_default())]
    Config {
        /// The configuration file, when the setting came from one.
        file: Option<PathBuf>,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// True when an engine read inside `strata::without_waiting` would have waited for the
    /// disk: the command did nothing and can run again where waiting is fine.
    pub fn is_would_block(&self) -> bool {
        match self {
            Error::Engine(e) | Error::Doc(strata_doc::Error::Engine(e)) => e.is_would_block(),
            Error::WouldWait => true,
            _ => false,
        }
    }

    /// Builds an [`Error::Io`].
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// Builds an [`Error::Command`] from any message.
    pub fn command(msg: impl Into<String>) -> Self {
        Error::Command(msg.into())
    }

    /// Builds the unknown-command error exactly as Redis words it: the name and up to 128 bytes
    /// of arguments, each quoted and followed by a space.
    pub fn unknown_command(args: &[bytes::Bytes]) -> Self {
        let name = args
            .first()
            .map(|n| shown_arg(n, SHOWN_ARG_BYTES_MAX))
            .unwrap_or_default();
        let mut shown = String::new();
        for a in args.iter().skip(1) {
            if shown.len() >= SHOWN_ARG_BYTES_MAX {
                break;
            }
            let room = SHOWN_ARG_BYTES_MAX - shown.len();
            shown.push('\'');
            shown.push_str(&shown_arg(a, room));
            shown.push_str("' ");
        }
        Error::UnknownCommand { name, args: shown }
    }
}

/// Most bytes of one argument Redis prints in an error (`%.128s`).
pub(crate) const SHOWN_ARG_BYTES_MAX: usize = 128;

/// An argument as Redis prints it in an error (`%.*s` of a C string): up to its first NUL
/// byte and at most `max_bytes`, as text (invalid UTF-8 replaced).
pub(crate) fn shown_arg(b: &[u8], max_bytes: usize) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end.min(max_bytes)]).into_owned()
}
