//! Fuzz target for the loader's JSON encoder: arbitrary bytes go through `encode_json_stored`
//! (JSON text straight to stored bytes) and through the document path (`from_json_slice`, then
//! `encode_stored`). Neither may panic; they must accept the same texts, and where the encoder
//! says it is done (no repeated key), its bytes must be the document path's.
//!
//! Run: `cargo +nightly fuzz run json_stored -- -max_total_time=60` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_doc::{
    encode_json_stored, encode_stored, from_json_slice, KeyNames, NameTable, Streamed,
};

fuzz_target!(|data: &[u8]| {
    // Without key names, and with some (object keys become name references).
    let tables = [
        NameTable::empty(),
        NameTable::from_names(["a", "b", "id", ""]).expect("valid names"),
    ];
    for table in tables {
        let names = KeyNames::with_table(table);
        let mut out = Vec::new();
        let streamed = encode_json_stored(data, &mut out, &names);
        let doc = from_json_slice(data);
        assert_eq!(streamed.is_ok(), doc.is_ok(), "the two paths disagree on validity");
        if let (Ok(Streamed::Done), Ok(doc)) = (streamed, doc) {
            let want = encode_stored(&doc, &names).expect("a parsed document is within DEPTH_MAX");
            assert_eq!(out, want, "streamed bytes differ from the document's");
        }
    }
});
