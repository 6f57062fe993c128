//! Property tests of the request parser: it never panics on any input, splitting the input into
//! arbitrary reads never changes what it parses, and encoded commands parse back to themselves.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use strata_server::resp::parse::{
    encode_command, parse_all, split_args, Limits, Parsed, RequestParser,
};

/// Feeds `input` in pieces cut at `cuts` and collects commands and the first error.
fn parse_in_pieces(
    input: &[u8],
    cuts: &[usize],
    limits: &Limits,
) -> (Vec<Vec<Bytes>>, Option<String>) {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    points.push(input.len());
    points.sort_unstable();
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    let mut from = 0;
    for to in points {
        buf.extend_from_slice(&input[from..to]);
        from = to;
        loop {
            match parser.parse(&mut buf, limits) {
                Parsed::Command(c) => commands.push(c),
                Parsed::Incomplete => break,
                Parsed::Error(e) => return (commands, Some(e)),
            }
        }
    }
    (commands, None)
}

fn small_limits() -> Limits {
    Limits {
        bulk_bytes_max: 64,
        inline_bytes_max: 48,
        multibulk_args_max: 16,
        unauthenticated: false,
    }
}

/// Quotes an argument so that Redis's inline splitting gives it back byte for byte.
fn quote(arg: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in arg {
        if b.is_ascii_alphanumeric() {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('"');
    s
}

/// Bytes that look like protocol fragments, so random inputs reach deep parser states.
fn protocolish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"'".to_vec()),
        Just(b"\\x4".to_vec()),
        Just(b" ".to_vec()),
        (0i64..70).prop_map(|n| n.to_string().into_bytes()),
        Just(b"-1".to_vec()),
        Just(b"GET".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..4),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parser_never_panics_and_reads_are_invisible(
        input in prop_oneof![proptest::collection::vec(any::<u8>(), 0..256), protocolish()],
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let limits = small_limits();
        let whole = parse_all(&input, &limits);
        let pieces = parse_in_pieces(&input, &cuts, &limits);
        // Errors caused by a length limit may be detected at a different point when the data
        // arrives in pieces, but the commands before the error are always the same.
        prop_assert_eq!(&whole.0, &pieces.0);
        prop_assert_eq!(whole.1.is_some(), pieces.1.is_some());
    }

    #[test]
    fn multibulk_round_trips(
        commands in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
            1..6,
        ),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut wire = Vec::new();
        for c in &commands {
            encode_command(c, &mut wire);
        }
        let limits = Limits::default();
        let (parsed, err) = parse_in_pieces(&wire, &cuts, &limits);
        prop_assert_eq!(err, None);
        let parsed: Vec<Vec<Vec<u8>>> = parsed
            .into_iter()
            .map(|c| c.into_iter().map(|a| a.to_vec()).collect())
            .collect();
        prop_assert_eq!(parsed, commands);
    }

    #[test]
    fn quoted_inline_arguments_round_trip(
        args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..6),
    ) {
        let line: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let split = split_args(line.join(" ").as_bytes());
        prop_assert_eq!(split, Some(args));
    }
}
