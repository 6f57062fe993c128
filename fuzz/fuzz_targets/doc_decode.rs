//! Fuzz target for the document decoders: arbitrary bytes go through the value decoder, the
//! stored-value decoder (with a table of key names, so name references are exercised), `skip`, the encoded-path walk and the order-preserving key decoder. None
//! may panic; whatever decodes must re-encode to exactly the same bytes (both decoders accept only
//! canonical encodings), and `skip` must agree with the decoder on where a value ends.
//!
//! Run: `cargo +nightly fuzz run doc_decode -- -max_total_time=60` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_doc::{
    decode, decode_key, decode_prefix, decode_stored, encode, encode_key, encode_stored,
    get_path_bytes, get_path_stored, skip, KeyNames, NameTable, Path,
};

fn names() -> KeyNames {
    KeyNames::with_table(NameTable::from_names(["a", "b", "id", ""]).expect("valid names"))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = decode(data) {
        let again = encode(&doc).expect("a decoded document is within DEPTH_MAX");
        assert_eq!(again, data, "value decoder accepted non-canonical bytes");
        assert_eq!(skip(data).ok(), Some(data.len()), "skip disagrees with decode");
    }
    if let Ok((doc, used)) = decode_prefix(data) {
        assert_eq!(skip(data).ok(), Some(used), "skip disagrees with decode_prefix");
        let again = encode(&doc).expect("a decoded document is within DEPTH_MAX");
        assert_eq!(&again[..], &data[..used]);
    }
    let names = names();
    if let Ok(doc) = decode_stored(data, &names) {
        // Re-encoding gives a document that decodes the same (bytes may differ: a key with an
        // id may have been stored inline).
        let again = encode_stored(&doc, &names).expect("a decoded document is within DEPTH_MAX");
        assert_eq!(decode_stored(&again, &names).ok(), Some(doc));
    }
    for path in ["$.a", "$[0]", "$[-1].b", "$.id"] {
        if let Ok(path) = Path::parse(path) {
            if let Ok(Some(sub)) = get_path_bytes(data, &path) {
                // A found sub-value is exactly one encoded value.
                assert_eq!(skip(sub).ok(), Some(sub.len()));
            }
            let _ = get_path_stored(data, &path, &names);
        }
    }
    if let Ok(doc) = decode_key(data) {
        let again = encode_key(&doc).expect("a decoded key is within DEPTH_MAX");
        assert_eq!(again, data, "key decoder accepted non-canonical bytes");
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(path) = Path::parse(text) {
            assert_eq!(Path::parse(&path.to_string()).ok(), Some(path));
        }
    }
});
