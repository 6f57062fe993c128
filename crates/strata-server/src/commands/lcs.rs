//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest common subsequence of
//! two strings, with redis-server 7.0's replies: the same dynamic-programming table and the
//! same walk back through it, so that among several longest subsequences the one Redis picks is
//! returned, and IDX lists its matching ranges as Redis does (last first).

use bytes::Bytes;

use super::strings::read_string;
use super::{int_arg, is, Ctx, Spec, READ};
use crate::error::{Error, Result};
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "lcs", arity: -3, flags: READ, keys: (1, 2, 1), group: "string", summary: "Finds the longest common substring.", handler: lcs },
];

fn lcs(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Both keys first (another kind: Redis's own message), then the options.
    let read = |key: &[u8]| match read_string(ctx, key) {
        Err(Error::WrongType) => Err(Error::command(
            "The specified keys must contain string values",
        )),
        other => other,
    };
    let (a, b) = (read(&args[1])?, read(&args[2])?);
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    let (mut get_len, mut get_idx, mut with_match_len, mut min_match_len) =
        (false, false, false, 0u64);
    let mut j = 3;
    while j < args.len() {
        if is(&args[j], "IDX") {
            get_idx = true;
        } else if is(&args[j], "LEN") {
            get_len = true;
        } else if is(&args[j], "WITHMATCHLEN") {
            with_match_len = true;
        } else if is(&args[j], "MINMATCHLEN") && j + 1 < args.len() {
            min_match_len = int_arg(&args[j + 1])?.max(0) as u64;
            j += 1;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    if get_idx && get_len {
        return Err(Error::command(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let (alen, blen) = (a.len(), b.len());
    // The table Redis allocates, with its limit: 4 bytes a cell within proto-max-bulk-len.
    let cells = (alen + 1).saturating_mul(blen + 1);
    if cells.saturating_mul(4) > ctx.shared.config().proto_max_bulk_len_bytes {
        return Err(Error::command(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let width = blen + 1;
    let mut table = vec![0u32; cells];
    for i in 1..=alen {
        for k in 1..=blen {
            table[i * width + k] = if a[i - 1] == b[k - 1] {
                table[(i - 1) * width + k - 1] + 1
            } else {
                table[(i - 1) * width + k].max(table[i * width + k - 1])
            };
        }
    }
    let total = table[alen * width + blen];
    if get_len {
        return Ok(Reply::Int(i64::from(total)));
    }
    // Walk back as Redis does, collecting the subsequence and (for IDX) the ranges.
    let mut result = vec![0u8; total as usize];
    let mut idx = total as usize;
    let mut matches: Vec<Reply> = Vec::new();
    // `alen` as a start means no range is open.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0usize, 0usize, 0usize);
    let (mut i, mut k) = (alen, blen);
    while i > 0 && k > 0 {
        let mut emit = false;
        if a[i - 1] == b[k - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, k - 1, k - 1);
            } else if a_start == i && b_start == k {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            k -= 1;
        } else {
            if table[(i - 1) * width + k] > table[i * width + k - 1] {
                i -= 1;
            } else {
                k -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        let match_len = (a_end as i64 - a_start as i64 + 1) as u64;
        if emit {
            if get_idx && (min_match_len == 0 || match_len >= min_match_len) {
                let mut m = vec![
                    Reply::Array(vec![Reply::Int(a_start as i64), Reply::Int(a_end as i64)]),
                    Reply::Array(vec![Reply::Int(b_start as i64), Reply::Int(b_end as i64)]),
                ];
                if with_match_len {
                    m.push(Reply::Int(match_len as i64));
                }
                matches.push(Reply::Array(m));
            }
            a_start = alen;
        }
    }
    if get_idx {
        return Ok(Reply::Map(vec![
            (Reply::bulk("matches"), Reply::Array(matches)),
            (Reply::bulk("len"), Reply::Int(i64::from(total))),
        ]));
    }
    Ok(Reply::Bulk(Bytes::from(result)))
}
