//! # strata-doc
//!
//! Documents on top of the `strata` key/value engine: a JSON-like value model with a total order
//! ([`Doc`]), exact decimals ([`Decimal`]), JSON conversion ([`from_json_str`],
//! [`to_json_string`]), a compact prefix-byte value codec (the original document store's encoding:
//! [`encode`], [`decode`], [`skip`]), an order-preserving key codec ([`encode_key`]), paths that
//! walk encoded bytes ([`Path`], [`get_path_bytes`]), the document store ([`DocStore`]), a
//! synthetic Reddit-comment generator ([`gen::write_comments`]) and a parallel JSON-lines loader
//! ([`load::load`]).
//!
//! ```
//! use strata_doc::{decode, encode, Doc, Path};
//! # fn main() -> strata_doc::Result<()> {
//! let doc = Doc::from_json(r#"{"id":"evn2i5p","score":109,"ratio":99.34901097702962}"#)?;
//! let bytes = encode(&doc)?;
//! assert_eq!(decode(&bytes)?, doc);
//! let score = strata_doc::get_path_encoded(&bytes, &Path::parse("$.score")?)?;
//! assert_eq!(score, Some(Doc::Int(109)));
//! assert_eq!(doc.to_json()?, r#"{"id":"evn2i5p","score":109,"ratio":99.34901097702962}"#);
//! # Ok(())
//! # }
//! ```
//!
//! Module map: `num` (exact numbers) <- `doc` (model, order, paths on the model) <- `names`
//! (key names a store gives ids to) <- `json`, `codec` (values), `key` (keys), `path` (path
//! syntax, walking encoded values) <- `store` (DocStore over `strata::Db`) <- `load` (JSON lines
//! into a store, through `json_stored`, which encodes JSON text without building a document);
//! `gen` stands alone.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod codec;
mod doc;
mod error;
pub mod gen;
mod json;
mod json_stored;
mod key;
pub mod load;
mod names;
mod num;
mod path;
mod store;

pub use codec::{
    decode, decode_in, decode_prefix, decode_stored, decode_stored_in, encode, encode_into,
    encode_stored, encode_stored_in, encoded_len, skip, stored_body, type_code, DEPTH_MAX,
    STORED_FORMAT_VERSION, STORED_FORMAT_VERSION_V1,
};
pub use doc::{Doc, DocMap};
pub use error::{Error, Result};
pub use json::{
    from_json_slice, from_json_str, from_json_value, to_json_pretty, to_json_string, to_json_value,
};
pub use json_stored::{encode_json_stored, Streamed};
pub use key::{decode_key, encode_key, encode_key_into};
pub use names::{
    KeyNames, NameStorage, NameTable, RecordUpdate, NAMES_FORMAT_VERSION, NAMES_KEY, NAMES_MAX,
    NAME_BYTES_MAX, SEEN_BEFORE_ID,
};
pub use num::{Decimal, DECIMAL_POINT_ABS_MAX};
pub use path::{
    get_path_bytes, get_path_bytes_in, get_path_encoded, get_path_stored, Path, PathStep,
};
pub use store::{DocScan, DocStore, DocUpdate, DOC_KEY_PREFIX};
