//! Property tests: the document order is a total order consistent with Eq and Hash and with an
//! independent numeric model; both codecs round-trip; the key codec preserves order; decoding
//! arbitrary or damaged bytes never panics; walking encoded bytes agrees with the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cmp::Ordering;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use proptest::prelude::*;
use strata_doc::{
    decode, decode_key, decode_stored, decode_stored_in, encode, encode_json_stored, encode_key,
    encode_stored, encoded_len, from_json_str, from_json_value, get_path_encoded, get_path_stored,
    skip, to_json_string, to_json_value, Doc, DocMap, KeyNames, NameTable, Path, PathStep,
    Streamed,
};

/// Names with ids, as a store would have them: some of the keys the generators use.
fn some_names() -> KeyNames {
    KeyNames::with_table(NameTable::from_names(["a", "b", "cd", "", "id"]).unwrap())
}

fn hash_of(d: &Doc) -> u64 {
    let mut h = DefaultHasher::new();
    d.hash(&mut h);
    h.finish()
}

/// Decimal text `m * 10^e` written in one of several equivalent ways, plus the model (m, e).
fn decimal_text() -> impl Strategy<Value = (String, i64, i32)> {
    (
        -1_000_000_000i64..1_000_000_000,
        -12i32..12,
        0u8..4,
        0usize..3,
    )
        .prop_map(|(m, e, style, extra_zeros)| {
            let neg = m < 0;
            let digits = m.unsigned_abs().to_string();
            let sign = if neg { "-" } else { "" };
            let text = match style {
                // Scientific with serde_json's exponent spelling.
                0 => format!(
                    "{sign}{digits}e{}{}",
                    if e >= 0 { "+" } else { "-" },
                    e.abs()
                ),
                // Plain notation with trailing zeros in the fraction.
                _ => {
                    let mut all = digits.clone();
                    let point = all.len() as i64 + i64::from(e);
                    let text = if point <= 0 {
                        format!("0.{}{}", "0".repeat((-point) as usize), all)
                    } else if point as usize >= all.len() {
                        all.push_str(&"0".repeat(point as usize - all.len()));
                        format!("{all}.0")
                    } else {
                        let (i, f) = all.split_at(point as usize);
                        format!("{i}.{f}")
                    };
                    format!("{sign}{text}{}", "0".repeat(extra_zeros))
                }
            };
            (text, m, e)
        })
}

fn leaf() -> impl Strategy<Value = Doc> {
    prop_oneof![
        Just(Doc::Null),
        any::<bool>().prop_map(Doc::Bool),
        any::<i64>().prop_map(Doc::Int),
        (-20i64..20).prop_map(Doc::Int),
        decimal_text().prop_map(|(t, _, _)| Doc::decimal(&t).unwrap()),
        "[a-c\u{0}\u{7f}é😀]{0,4}".prop_map(Doc::from),
        any::<String>().prop_map(Doc::from),
    ]
}

fn doc() -> impl Strategy<Value = Doc> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Doc::Array),
            prop::collection::vec(("[a-d]{0,2}".prop_map(Doc::from), inner.clone()), 0..5)
                .prop_map(|es| Doc::Map(es.into_iter().collect::<DocMap>())),
            // Maps with non-string keys (allowed by the model, not by JSON).
            prop::collection::vec((inner.clone(), inner), 0..3)
                .prop_map(|es| Doc::Map(es.into_iter().collect::<DocMap>())),
        ]
    })
}

/// Documents that JSON can hold (string keys only).
fn json_doc() -> impl Strategy<Value = Doc> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Doc::Array),
            prop::collection::vec((any::<String>().prop_map(Doc::from), inner), 0..5)
                .prop_map(|es| Doc::Map(es.into_iter().collect::<DocMap>())),
        ]
    })
}

/// JSON text with repeated object keys (a small key alphabet) and whitespace between tokens,
/// which `to_json_string` never writes.
fn json_text_with_duplicates() -> impl Strategy<Value = String> {
    let leaf = json_doc().prop_map(|d| to_json_string(&d).unwrap());
    leaf.prop_recursive(3, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[ {} ]", items.join(" , "))),
            prop::collection::vec(("[ab]{1}", inner), 0..6).prop_map(|entries| {
                let body: Vec<String> = entries
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\" :\n{v}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            }),
        ]
    })
}

/// Exact order of m1*10^e1 vs m2*10^e2 in i128 (the independent model).
fn model_cmp(m1: i64, e1: i32, m2: i64, e2: i32) -> Ordering {
    let e = e1.min(e2);
    let a = i128::from(m1) * 10i128.pow((e1 - e) as u32);
    let b = i128::from(m2) * 10i128.pow((e2 - e) as u32);
    a.cmp(&b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn order_is_total_and_consistent_with_eq_and_hash(a in doc(), b in doc(), c in doc()) {
        prop_assert_eq!(a.cmp(&a.clone()), Ordering::Equal);
        prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
        prop_assert_eq!(a == b, a.cmp(&b) == Ordering::Equal);
        if a == b {
            prop_assert_eq!(hash_of(&a), hash_of(&b));
        }
        if a <= b && b <= c {
            prop_assert!(a <= c);
        }
        // Transitivity also through sorting: a sorted triple is pairwise ordered.
        let mut v = [a, b, c];
        v.sort();
        prop_assert!(v[0] <= v[1] && v[1] <= v[2] && v[0] <= v[2]);
    }

    #[test]
    fn numbers_compare_like_the_exact_model(x in decimal_text(), y in decimal_text(), i in -1_000_000i64..1_000_000) {
        let (tx, m1, e1) = x;
        let (ty, m2, e2) = y;
        let (a, b) = (Doc::decimal(&tx).unwrap(), Doc::decimal(&ty).unwrap());
        let want = model_cmp(m1, e1, m2, e2);
        prop_assert_eq!(a.cmp(&b), want, "{} vs {}", tx, ty);
        prop_assert_eq!(encode_key(&a).unwrap().cmp(&encode_key(&b).unwrap()), want);
        if want == Ordering::Equal {
            prop_assert_eq!(hash_of(&a), hash_of(&b));
        }
        // Against integers too.
        prop_assert_eq!(a.cmp(&Doc::Int(i)), model_cmp(m1, e1, i, 0));
        // The same integer written as a decimal is equal, hashes equal and shares the key.
        let twin = Doc::decimal(&format!("{i}.000")).unwrap();
        prop_assert_eq!(&twin, &Doc::Int(i));
        prop_assert_eq!(hash_of(&twin), hash_of(&Doc::Int(i)));
        prop_assert_eq!(encode_key(&twin).unwrap(), encode_key(&Doc::Int(i)).unwrap());
    }

    #[test]
    fn value_codec_round_trips_exactly(a in doc()) {
        let bytes = encode(&a).unwrap();
        prop_assert_eq!(bytes.len(), encoded_len(&a));
        prop_assert_eq!(skip(&bytes).unwrap(), bytes.len());
        let back = decode(&bytes).unwrap();
        prop_assert_eq!(&back, &a);
        // Byte identity, stronger than ==: decimal text and map order survive.
        prop_assert_eq!(encode(&back).unwrap(), bytes);
    }

    #[test]
    fn key_codec_preserves_order_and_round_trips(a in doc(), b in doc()) {
        let (ka, kb) = (encode_key(&a).unwrap(), encode_key(&b).unwrap());
        prop_assert_eq!(ka.cmp(&kb), a.cmp(&b), "{} vs {}", a, b);
        prop_assert_eq!(decode_key(&ka).unwrap(), a);
        prop_assert_eq!(decode_key(&kb).unwrap(), b);
    }

    #[test]
    fn json_round_trips_and_agrees_with_serde_json(a in json_doc()) {
        let text = to_json_string(&a).unwrap();
        let back = from_json_str(&text).unwrap();
        prop_assert_eq!(encode(&back).unwrap(), encode(&a).unwrap(), "{}", text);
        let via_serde: serde_json::Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(via_serde, to_json_value(&a).unwrap());
    }

    #[test]
    fn direct_parsing_agrees_with_parsing_through_serde_json_values(text in json_text_with_duplicates()) {
        let direct = from_json_str(&text).unwrap();
        let via_value = from_json_value(serde_json::from_str(&text).unwrap()).unwrap();
        // Byte identity: same map order (duplicates merged alike), same decimal text.
        prop_assert_eq!(encode(&direct).unwrap(), encode(&via_value).unwrap(), "{}", text);
    }

    #[test]
    fn streaming_json_to_stored_bytes_agrees_with_the_document_path(a in json_doc(), text in json_text_with_duplicates()) {
        // Text without repeated keys: always streamed, always the same bytes.
        let plain = to_json_string(&a).unwrap();
        for names in [KeyNames::detached(), some_names()] {
            let mut out = Vec::new();
            prop_assert_eq!(encode_json_stored(plain.as_bytes(), &mut out, &names).unwrap(), Streamed::Done);
            prop_assert_eq!(&out, &encode_stored(&from_json_str(&plain).unwrap(), &names).unwrap(), "{}", plain);
            // Text that may repeat keys: when it says it is done, the bytes are the merged document's.
            out.clear();
            if encode_json_stored(text.as_bytes(), &mut out, &names).unwrap() == Streamed::Done {
                prop_assert_eq!(&out, &encode_stored(&from_json_str(&text).unwrap(), &names).unwrap(), "{}", text);
            }
        }
    }

    #[test]
    fn invalid_json_fails_in_both_parsers(text in "[\\[\\]{}:,\"a1 .e-]{0,12}") {
        let direct = from_json_str(&text);
        let via_serde = serde_json::from_str::<serde_json::Value>(&text);
        prop_assert_eq!(direct.is_ok(), via_serde.is_ok(), "{}", text);
        let streamed = encode_json_stored(text.as_bytes(), &mut Vec::new(), &some_names());
        prop_assert_eq!(streamed.is_ok(), via_serde.is_ok(), "{}", text);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(d) = decode(&bytes) {
            // The decoder only accepts canonical bytes.
            prop_assert_eq!(encode(&d).unwrap(), bytes.clone());
            prop_assert_eq!(skip(&bytes).unwrap(), bytes.len());
        }
        if let Ok(d) = decode_key(&bytes) {
            prop_assert_eq!(encode_key(&d).unwrap(), bytes.clone());
        }
        let _ = skip(&bytes);
        let _ = get_path_encoded(&bytes, &Path::parse("$.a[1]").unwrap());
        // As a stored value with name references (version 2) and without (version 1).
        let names = some_names();
        for version in [1u8, 2] {
            let mut stored = vec![version];
            stored.extend_from_slice(&bytes);
            let _ = decode_stored_in(&stored, &names.table());
            let _ = get_path_stored(&stored, &Path::parse("$.a[1]").unwrap(), &names);
        }
    }

    #[test]
    fn stored_documents_round_trip_with_and_without_names(a in doc()) {
        let plain = encode_stored(&a, &KeyNames::detached()).unwrap();
        prop_assert_eq!(&plain[1..], &encode(&a).unwrap()[..]);
        let names = some_names();
        let stored = encode_stored(&a, &names).unwrap();
        prop_assert!(stored.len() <= plain.len());
        prop_assert_eq!(decode_stored(&stored, &names).unwrap(), a.clone());
        prop_assert_eq!(decode_stored(&plain, &names).unwrap(), a);
    }

    #[test]
    fn decoding_damaged_encodings_never_panics(a in doc(), cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(), bits in 1u8..=255) {
        let bytes = encode(&a).unwrap();
        let truncated = &bytes[..cut.index(bytes.len() + 1)];
        if truncated.len() < bytes.len() {
            prop_assert!(decode(truncated).is_err());
        }
        let mut flipped = bytes.clone();
        let at = flip.index(flipped.len());
        flipped[at] ^= bits;
        if let Ok(d) = decode(&flipped) {
            prop_assert_eq!(encode(&d).unwrap(), flipped.clone());
        }
        let key = encode_key(&a).unwrap();
        let _ = decode_key(&key[..cut.index(key.len() + 1)]);
        let mut kf = key.clone();
        let at = flip.index(kf.len());
        kf[at] ^= bits;
        let _ = decode_key(&kf);
    }

    #[test]
    fn walking_encoded_bytes_agrees_with_the_model(a in json_doc(), steps in prop::collection::vec(prop_oneof![
        "[a-d]{0,2}".prop_map(PathStep::Key),
        (-3i64..4).prop_map(PathStep::Index),
    ], 0..4)) {
        let mut path = Path::root();
        for s in steps {
            path = match s {
                PathStep::Key(k) => path.key(k),
                PathStep::Index(i) => path.index(i),
            };
        }
        prop_assert_eq!(Path::parse(&path.to_string()).unwrap(), path.clone());
        let bytes = encode(&a).unwrap();
        let walked = get_path_encoded(&bytes, &path).unwrap();
        prop_assert_eq!(walked.as_ref(), a.get_path(&path));
        let names = some_names();
        let stored = encode_stored(&a, &names).unwrap();
        let walked = get_path_stored(&stored, &path, &names).unwrap();
        prop_assert_eq!(walked.as_ref(), a.get_path(&path));
    }
}

#[test]
fn walking_finds_every_leaf_of_a_real_comment() {
    let line = strata_doc::gen::comment_json(11, 3);
    let doc = from_json_str(&line).unwrap();
    let bytes = encode(&doc).unwrap();
    for (k, v) in doc.as_map().unwrap().iter() {
        let path = Path::root().key(k.as_str().unwrap());
        assert_eq!(get_path_encoded(&bytes, &path).unwrap().as_ref(), Some(v));
    }
}
