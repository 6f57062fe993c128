//! Fuzzes the server's RESP request parser (`strata_server::resp::parse`): any byte stream, cut
//! into reads at fuzzer-chosen points, must parse without panicking, to the same commands as
//! when it arrives at once, and every command parsed must re-encode and parse back to itself.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use strata_server::resp::parse::{encode_command, parse_all, Limits, Parsed, RequestParser};

fuzz_target!(|data: &[u8]| {
    // Small limits so the fuzzer reaches the limit checks with small inputs.
    let limits = Limits {
        bulk_bytes_max: 4096,
        inline_bytes_max: 256,
        multibulk_args_max: 64,
    };
    // The first byte picks the read size for the incremental run.
    let Some((&chunk, input)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let (whole, whole_err) = parse_all(input, &limits);

    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut pieces = Vec::new();
    let mut pieces_err = None;
    'feed: for part in input.chunks(chunk) {
        buf.extend_from_slice(part);
        loop {
            match parser.parse(&mut buf, &limits) {
                Parsed::Command(c) => pieces.push(c),
                Parsed::Incomplete => break,
                Parsed::Error(e) => {
                    pieces_err = Some(e);
                    break 'feed;
                }
            }
        }
    }
    assert_eq!(whole, pieces);
    assert_eq!(whole_err.is_some(), pieces_err.is_some());

    for command in &whole {
        assert!(!command.is_empty());
        let mut wire = Vec::new();
        encode_command(command, &mut wire);
        let (again, err) = parse_all(&wire, &Limits::default());
        assert_eq!(err, None);
        assert_eq!(again.as_slice(), std::slice::from_ref(command));
    }
});
