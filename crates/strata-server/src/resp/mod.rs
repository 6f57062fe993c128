//! The Redis serialization protocol: [`parse`] turns client bytes into commands (RESP multibulk
//! and inline), [`reply`] turns replies into RESP2 or RESP3 bytes. Nothing here knows about
//! commands or storage; both halves are pure functions over byte buffers, fuzzed and
//! property-tested.

pub mod parse;
pub mod reply;

pub use parse::{Limits, Parsed, RequestParser};
pub use reply::{EncodedBulks, Protocol, Reply};
