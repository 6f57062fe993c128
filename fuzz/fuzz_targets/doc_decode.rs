//! Fuzz target for the document decoders: arbitrary bytes go through the value decoder, the
//! stored-value decoder, `skip`, the encoded-path walk and the order-preserving key decoder. None
//! may panic; whatever decodes must re-encode to exactly the same bytes (both decoders accept only
//! canonical encodings), and `skip` must agree with the decoder on where a value ends.
//!
//! Run: `cargo +nightly fuzz run doc_decode -- -max_total_time=60` from `/work/main/fuzz`'s parent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_doc::{
    decode, decode_key, decode_prefix, decode_stored, encode, encode_key, get_path_bytes, skip,
    Path,
};

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
    let _ = decode_stored(data);
    for path in ["$.a", "$[0]", "$[-1].b", "$.id"] {
        if let Ok(path) = Path::parse(path) {
            if let Ok(Some(sub)) = get_path_bytes(data, &path) {
                // A found sub-value is exactly one encoded value.
                assert_eq!(skip(sub).ok(), Some(sub.len()));
            }
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
