//! Redis glob patterns (KEYS, SCAN MATCH, CONFIG GET): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.
//! Iterative with single-star backtracking, so a hostile pattern costs O(pattern x text) time and
//! no stack (Redis's recursive matcher needed a nesting limit for that reason).

/// True when `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    // Where to resume after the last `*`: (pattern index after the star, text index it covers to).
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            if pattern[p] == b'*' {
                // Collapse runs of stars; remember where to come back to.
                while p < pattern.len() && pattern[p] == b'*' {
                    p += 1;
                }
                if p == pattern.len() {
                    return true;
                }
                backtrack = Some((p, t));
                continue;
            }
            if let Some(next_p) = match_one(pattern, p, text[t], nocase) {
                p = next_p;
                t += 1;
                continue;
            }
        }
        match backtrack {
            Some((star_p, star_t)) => {
                backtrack = Some((star_p, star_t + 1));
                p = star_p;
                t = star_t + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The longest literal prefix of `pattern` (before any glob syntax): scans can start there.
pub fn literal_prefix(pattern: &[u8]) -> &[u8] {
    let end = pattern
        .iter()
        .position(|c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
        .unwrap_or(pattern.len());
    &pattern[..end]
}

/// Matches one text byte against the pattern element at `p`; the index after that element on a
/// match.
fn match_one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match pattern[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], c).then_some(p + 2),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            loop {
                match pattern.get(i) {
                    // An unterminated class ends at the pattern's end, as in Redis.
                    None => break,
                    Some(b']') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if i + 1 < pattern.len() => {
                        hit |= eq(pattern[i + 1], c);
                        i += 2;
                    }
                    Some(&lo) if pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len() => {
                        let hi = pattern[i + 2];
                        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                        let c2 = if nocase { c.to_ascii_lowercase() } else { c };
                        let (lo2, hi2) = if nocase {
                            (lo.to_ascii_lowercase(), hi.to_ascii_lowercase())
                        } else {
                            (lo, hi)
                        };
                        hit |= (lo..=hi).contains(&c) || (lo2..=hi2).contains(&c2);
                        i += 3;
                    }
                    Some(&other) => {
                        hit |= eq(other, c);
                        i += 1;
                    }
                }
            }
            (hit != negate).then_some(i)
        }
        other => eq(other, c).then_some(p + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        matches(p.as_bytes(), t.as_bytes(), false)
    }

    #[test]
    fn globs_match_like_redis() {
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("user:*:name", "user:42:name"));
        assert!(!m("user:*:name", "user:42:age"));
        assert!(m(r"a\*b", "a*b"));
        assert!(!m(r"a\*b", "axb"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(matches(b"HELLO", b"hello", true));
        // A pathological pattern finishes quickly.
        let text = "a".repeat(2000);
        assert!(!m(&format!("{}b", "*a".repeat(30)), &text));
    }

    #[test]
    fn literal_prefix_stops_at_glob_syntax() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"abc"), b"abc");
        assert_eq!(literal_prefix(b"a?c"), b"a");
        assert_eq!(literal_prefix(b"*"), b"");
    }
}
