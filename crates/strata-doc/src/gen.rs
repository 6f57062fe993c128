//! Synthetic Reddit comments as JSON lines, deterministic per RNG seed, standing in for the input
//! of the original document store's benchmarks (147 M real comments): the same field set (the 44
//! fields of a pushshift.io comment: `id`, `author`, `body`, `score`, `subreddit`, `created_utc`,
//! ...) with a line-size distribution fitted to the percentiles measured over those comments
//! ([`SIZE_PERCENTILES`]: p50 1184 bytes, p99 2506, max 121 186).
//!
//! Each comment `i` of seed `s` is a pure function of `(s, i)` (its own splitmix64 stream), so any
//! range can be generated independently and in parallel. Ids are 7 base-36 characters from a
//! bijection of the 36-bit index space, so the first 2^36 comments of a seed have distinct ids.
//! The line size is drawn first (log-linear interpolation between the percentiles), then the
//! `body` is written to fill exactly the bytes the other fields leave; lines whose other fields
//! already exceed the drawn size get a short body. Depends on nothing else in the crate except the
//! JSON string escaper.

use std::io::{self, Write};

use crate::json::write_json_string;

/// (cumulative fraction, line bytes) of the 147 M real comments the original document benchmarks
/// loaded: min, p25, p50, p75, p90, p95, p99, p99.9, max.
pub const SIZE_PERCENTILES: [(f64, f64); 9] = [
    (0.0, 919.0),
    (0.25, 1119.0),
    (0.50, 1184.0),
    (0.75, 1304.0),
    (0.90, 1516.0),
    (0.95, 1742.0),
    (0.99, 2506.0),
    (0.999, 5106.0),
    (1.0, 121_186.0),
];

/// The small, fast, well-mixed generator used for everything here (splitmix64).
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, n)` (`n > 0`; 0 gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let i = self.below(items.len() as u64) as usize;
        items.get(i).copied().unwrap_or("")
    }
}

/// Draws a line size in bytes from [`SIZE_PERCENTILES`] (log-linear between the points).
pub fn sample_size_bytes(rng: &mut SplitMix64) -> usize {
    let u = rng.next_f64();
    let mut prev = SIZE_PERCENTILES[0];
    for &(p, bytes) in &SIZE_PERCENTILES[1..] {
        if u <= p {
            let t = if p > prev.0 {
                (u - prev.0) / (p - prev.0)
            } else {
                0.0
            };
            let size = prev.1 * (bytes / prev.1).powf(t);
            return size.round() as usize;
        }
        prev = (p, bytes);
    }
    prev.1 as usize
}

const SUBREDDITS: [&str; 40] = [
    "AskReddit",
    "funny",
    "gaming",
    "pics",
    "news",
    "worldnews",
    "aww",
    "videos",
    "todayilearned",
    "movies",
    "nba",
    "soccer",
    "nfl",
    "politics",
    "memes",
    "teenagers",
    "dankmemes",
    "science",
    "Showerthoughts",
    "relationship_advice",
    "AmItheAsshole",
    "unpopularopinion",
    "leagueoflegends",
    "FortNiteBR",
    "hockey",
    "CFB",
    "pcmasterrace",
    "gifs",
    "Music",
    "books",
    "food",
    "DIY",
    "AnimalsBeingJerks",
    "trees",
    "buildapc",
    "anime",
    "europe",
    "canada",
    "ukpolitics",
    "RoastMe",
];

const WORDS: [&str; 64] = [
    "the", "a", "I", "you", "it", "that", "is", "was", "to", "and", "of", "in", "this", "not",
    "but", "for", "my", "just", "like", "what", "have", "be", "they", "so", "on", "with", "would",
    "people", "think", "really", "do", "if", "can", "he", "she", "at", "one", "all", "me", "your",
    "about", "get", "no", "more", "lol", "actually", "game", "time", "good", "know", "yeah", "cat",
    "why", "because", "still", "even", "never", "going", "pretty", "much", "thing", "first",
    "right", "make",
];

const NAME_PARTS: [&str; 24] = [
    "frank", "lovee", "dark", "throw", "away", "pixel", "moon", "the", "real", "bob", "ninja",
    "potato", "captain", "lazy", "red", "fox", "mr", "cool", "sad", "happy", "tree", "wolf",
    "jimmy", "blue",
];

const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

fn base36(mut v: u64, width: usize, out: &mut String) {
    let mut buf = [b'0'; 16];
    let width = width.min(buf.len());
    for slot in buf[..width].iter_mut().rev() {
        *slot = BASE36[(v % 36) as usize];
        v /= 36;
    }
    out.extend(buf[..width].iter().map(|&b| b as char));
}

/// A bijection on 36-bit integers (so distinct indexes give distinct ids).
fn permute36(mut x: u64) -> u64 {
    const MASK: u64 = (1 << 36) - 1;
    x &= MASK;
    x = x.wrapping_mul(0x9e37_79b9_7f4b) & MASK;
    x ^= x >> 17;
    x = x.wrapping_mul(0x5851_f42d_4c95) & MASK;
    x ^= x >> 15;
    x
}

fn field_str(out: &mut String, name: &str, value: &str) {
    out.push('"');
    out.push_str(name);
    out.push_str("\":");
    write_json_string(value, out);
    out.push(',');
}

fn field_raw(out: &mut String, name: &str, raw: &str) {
    out.push('"');
    out.push_str(name);
    out.push_str("\":");
    out.push_str(raw);
    out.push(',');
}

fn field_int(out: &mut String, name: &str, v: i64) {
    field_raw(out, name, &v.to_string());
}

/// Everything about a comment except its body, decided before the size is known.
struct Skeleton {
    id: String,
    author: String,
    author_created_utc: i64,
    author_fullname: String,
    flair: Option<String>,
    subreddit: &'static str,
    subreddit_id: String,
    link_id: String,
    parent_id: String,
    slug: String,
    created_utc: i64,
    edited: Option<i64>,
    retrieved_on: i64,
    score: i64,
    controversiality: i64,
    gilded: i64,
    is_submitter: bool,
    distinguished: bool,
}

const AUGUST_2019_UTC: i64 = 1_564_617_600;
const MONTH_SECONDS: u64 = 31 * 24 * 3600;

fn skeleton(seed: u64, index: u64, rng: &mut SplitMix64) -> Skeleton {
    let mut id = String::with_capacity(7);
    base36(
        permute36(index.wrapping_add(seed.wrapping_mul(0x2545_f491))),
        7,
        &mut id,
    );
    let mut author = String::new();
    if rng.chance(0.04) {
        author.push_str("[deleted]");
    } else {
        author.push_str(rng.pick(&NAME_PARTS));
        if rng.chance(0.5) {
            author.push(if rng.chance(0.5) { '_' } else { '-' });
        }
        author.push_str(rng.pick(&NAME_PARTS));
        if rng.chance(0.4) {
            author.push_str(&rng.below(10_000).to_string());
        }
    }
    let mut author_fullname = String::from("t2_");
    base36(
        rng.below(36u64.pow(6)),
        5 + rng.below(4) as usize,
        &mut author_fullname,
    );
    // Subreddit popularity is skewed: square the uniform draw.
    let u = rng.next_f64();
    let sub_index = ((u * u) * SUBREDDITS.len() as f64) as usize;
    let subreddit = SUBREDDITS.get(sub_index).copied().unwrap_or(SUBREDDITS[0]);
    let mut subreddit_id = String::from("t5_");
    base36(
        permute36(sub_index as u64 + 1000) % 36u64.pow(5),
        5,
        &mut subreddit_id,
    );
    let mut link = String::new();
    base36(rng.below(36u64.pow(6)), 6, &mut link);
    let link_id = format!("t3_{link}");
    let parent_id = if rng.chance(0.45) {
        link_id.clone()
    } else {
        let mut p = String::from("t1_");
        base36(rng.below(36u64.pow(7)), 7, &mut p);
        p
    };
    let words = 2 + rng.below(7);
    let slug = (0..words)
        .map(|_| rng.pick(&WORDS).to_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    let created_utc = AUGUST_2019_UTC + rng.below(MONTH_SECONDS) as i64;
    let edited = rng
        .chance(0.05)
        .then(|| created_utc + 60 + rng.below(200_000) as i64);
    let retrieved_on = created_utc + 8_000_000 + rng.below(1_000_000) as i64;
    let score = if rng.chance(0.4) {
        1
    } else if rng.chance(0.1) {
        -(rng.below(30) as i64)
    } else {
        // Heavy tail: log-uniform up to ~50 000.
        (50_000f64.powf(rng.next_f64())) as i64
    };
    let flair = rng.chance(0.12).then(|| {
        let n = 1 + rng.below(3);
        (0..n)
            .map(|_| rng.pick(&WORDS))
            .collect::<Vec<_>>()
            .join(" ")
    });
    Skeleton {
        id,
        author_created_utc: 1_130_000_000 + rng.below(430_000_000) as i64,
        author,
        author_fullname,
        flair,
        subreddit,
        subreddit_id,
        link_id,
        parent_id,
        slug,
        created_utc,
        edited,
        retrieved_on,
        score,
        controversiality: i64::from(rng.chance(0.03)),
        gilded: i64::from(rng.chance(0.002)),
        is_submitter: rng.chance(0.1),
        distinguished: rng.chance(0.01),
    }
}

/// Writes the comment with `body` (already a JSON string literal) into `out`.
fn render(s: &Skeleton, body_literal: &str, out: &mut String) {
    out.push('{');
    field_raw(out, "all_awardings", "[]");
    field_raw(out, "associated_award", "null");
    field_str(out, "author", &s.author);
    field_int(out, "author_created_utc", s.author_created_utc);
    match &s.flair {
        Some(text) => {
            field_str(out, "author_flair_background_color", "#edeff1");
            field_str(out, "author_flair_css_class", "flair");
            field_raw(out, "author_flair_richtext", "[]");
            field_str(
                out,
                "author_flair_template_id",
                "7b6e2a8c-1f3d-11e9-9a2b-0e5e5bd4c7d2",
            );
            field_str(out, "author_flair_text", text);
            field_str(out, "author_flair_text_color", "dark");
        }
        None => {
            field_raw(out, "author_flair_background_color", "null");
            field_raw(out, "author_flair_css_class", "null");
            field_raw(out, "author_flair_richtext", "[]");
            field_raw(out, "author_flair_template_id", "null");
            field_raw(out, "author_flair_text", "null");
            field_raw(out, "author_flair_text_color", "null");
        }
    }
    field_str(out, "author_flair_type", "text");
    field_str(out, "author_fullname", &s.author_fullname);
    field_raw(out, "author_patreon_flair", "false");
    field_raw(out, "awarders", "[]");
    field_raw(out, "body", body_literal);
    field_raw(out, "can_gild", "true");
    field_raw(out, "can_mod_post", "false");
    field_raw(out, "collapsed", "false");
    field_raw(out, "collapsed_reason", "null");
    field_int(out, "controversiality", s.controversiality);
    field_int(out, "created_utc", s.created_utc);
    field_raw(
        out,
        "distinguished",
        if s.distinguished {
            "\"moderator\""
        } else {
            "null"
        },
    );
    match s.edited {
        Some(t) => field_int(out, "edited", t),
        None => field_raw(out, "edited", "false"),
    }
    field_int(out, "gilded", s.gilded);
    field_raw(out, "gildings", "{}");
    field_str(out, "id", &s.id);
    field_raw(
        out,
        "is_submitter",
        if s.is_submitter { "true" } else { "false" },
    );
    field_str(out, "link_id", &s.link_id);
    field_raw(out, "locked", "false");
    field_raw(out, "no_follow", "true");
    field_str(out, "parent_id", &s.parent_id);
    let link = s.link_id.trim_start_matches("t3_");
    let permalink = format!("/r/{}/comments/{link}/{}/{}/", s.subreddit, s.slug, s.id);
    field_str(out, "permalink", &permalink);
    field_raw(out, "quarantined", "false");
    field_raw(out, "removal_reason", "null");
    field_int(out, "retrieved_on", s.retrieved_on);
    field_int(out, "score", s.score);
    field_raw(out, "send_replies", "true");
    field_raw(out, "steward_reports", "[]");
    field_raw(out, "stickied", "false");
    field_str(out, "subreddit", s.subreddit);
    field_str(out, "subreddit_id", &s.subreddit_id);
    field_str(
        out,
        "subreddit_name_prefixed",
        &format!("r/{}", s.subreddit),
    );
    field_str(out, "subreddit_type", "public");
    out.push_str("\"total_awards_received\":0}");
}

/// A JSON string literal of exactly `bytes` bytes (at least 2, the quotes) of comment-like text.
fn body_literal(rng: &mut SplitMix64, bytes: usize) -> String {
    let content_bytes = bytes.saturating_sub(2).max(1);
    let mut out = String::with_capacity(content_bytes + 2);
    out.push('"');
    let mut used = 0usize;
    let mut sentence_start = true;
    while used < content_bytes {
        let left = content_bytes - used;
        let roll = rng.below(100);
        let piece: String = if roll < 2 && left > 4 && used > 0 {
            sentence_start = true;
            "\\n\\n".to_string()
        } else if roll < 3 && left > 30 {
            format!("https://imgur.com/gallery/{} ", {
                let mut s = String::new();
                base36(rng.next_u64(), 7, &mut s);
                s
            })
        } else if roll < 4 && left > 10 {
            "\\\"this\\\" ".to_string()
        } else {
            let w = rng.pick(&WORDS);
            let mut w = if sentence_start {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            } else {
                w.to_string()
            };
            sentence_start = false;
            if rng.chance(0.08) {
                w.push('.');
                sentence_start = true;
            }
            w.push(' ');
            w
        };
        if piece.len() <= left {
            used += piece.len();
            out.push_str(&piece);
        } else {
            // Fill the last bytes with plain letters (1 byte each, no escapes to split).
            for _ in 0..left {
                out.push('x');
            }
            used = content_bytes;
        }
    }
    out.push('"');
    out
}

/// Comment `index` of seed `seed` as one line of compact JSON (no newline).
pub fn comment_json(seed: u64, index: u64) -> String {
    let mut rng = SplitMix64::new(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
    // Burn one draw so that neighbouring (seed, index) pairs decorrelate.
    rng.next_u64();
    let target_bytes = sample_size_bytes(&mut rng);
    let skel = skeleton(seed, index, &mut rng);
    let mut line = String::with_capacity(target_bytes + 64);
    render(&skel, "\"\"", &mut line);
    let without_body = line.len() - 2;
    let body_bytes = target_bytes
        .saturating_sub(without_body)
        .max(3 + rng.below(40) as usize);
    let body = body_literal(&mut rng, body_bytes);
    line.clear();
    render(&skel, &body, &mut line);
    line
}

/// Writes comments `0..count` of seed `seed` to `out`, one JSON object per line.
pub fn write_comments(out: &mut impl Write, count: u64, seed: u64) -> io::Result<()> {
    for i in 0..count {
        let line = comment_json(seed, i);
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::Doc;

    #[test]
    fn deterministic_per_seed_and_index() {
        assert_eq!(comment_json(7, 3), comment_json(7, 3));
        assert_ne!(comment_json(7, 3), comment_json(8, 3));
        assert_ne!(comment_json(7, 3), comment_json(7, 4));
        let mut a = Vec::new();
        write_comments(&mut a, 10, 42).unwrap();
        let mut b = Vec::new();
        write_comments(&mut b, 10, 42).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.iter().filter(|&&c| c == b'\n').count(), 10);
    }

    #[test]
    fn comments_have_the_pushshift_field_set_and_parse() {
        let line = comment_json(1, 0);
        let doc = Doc::from_json(&line).unwrap();
        let m = doc.as_map().unwrap();
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str().unwrap()).collect();
        let expected = [
            "all_awardings",
            "associated_award",
            "author",
            "author_created_utc",
            "author_flair_background_color",
            "author_flair_css_class",
            "author_flair_richtext",
            "author_flair_template_id",
            "author_flair_text",
            "author_flair_text_color",
            "author_flair_type",
            "author_fullname",
            "author_patreon_flair",
            "awarders",
            "body",
            "can_gild",
            "can_mod_post",
            "collapsed",
            "collapsed_reason",
            "controversiality",
            "created_utc",
            "distinguished",
            "edited",
            "gilded",
            "gildings",
            "id",
            "is_submitter",
            "link_id",
            "locked",
            "no_follow",
            "parent_id",
            "permalink",
            "quarantined",
            "removal_reason",
            "retrieved_on",
            "score",
            "send_replies",
            "steward_reports",
            "stickied",
            "subreddit",
            "subreddit_id",
            "subreddit_name_prefixed",
            "subreddit_type",
            "total_awards_received",
        ];
        assert_eq!(keys, expected);
        assert!(matches!(m.get_str("score"), Some(Doc::Int(_))));
        assert_eq!(m.get_str("id").unwrap().as_str().unwrap().len(), 7);
    }

    #[test]
    fn ids_are_unique() {
        let mut ids: Vec<u64> = (0..100_000).map(|i| permute36(i + 12345)).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 100_000);
    }

    #[test]
    fn size_percentiles_match_the_measured_ones_roughly() {
        let n = 20_000;
        let mut sizes: Vec<usize> = (0..n)
            .map(|i| {
                let line = comment_json(2, i);
                // Every line is valid JSON with an exact body fill.
                if i % 500 == 0 {
                    Doc::from_json(&line).unwrap();
                }
                line.len()
            })
            .collect();
        sizes.sort_unstable();
        let pct = |p: f64| sizes[((p * n as f64) as usize).min(sizes.len() - 1)] as f64;
        let within = |p: f64, want: f64, tol: f64| {
            let got = pct(p);
            assert!(
                (got - want).abs() <= want * tol,
                "p{}: got {got} bytes, want {want} +- {}%",
                p * 100.0,
                tol * 100.0
            );
        };
        within(0.50, 1184.0, 0.03);
        within(0.75, 1304.0, 0.03);
        within(0.90, 1516.0, 0.05);
        within(0.95, 1742.0, 0.05);
        within(0.99, 2506.0, 0.10);
        // p99.9 sits at the foot of a steep tail, so with 20 000 lines count the lines above it
        // (expected 20) instead of reading the noisy order statistic.
        let above = sizes.iter().filter(|&&s| s > 5106).count();
        assert!((6..=40).contains(&above), "{above} lines above 5106 bytes");
        assert!(pct(1.0) <= 121_186.0 + 200.0);
        assert!(pct(0.0) >= 300.0);
    }

    #[test]
    fn sampler_reaches_the_long_tail() {
        let mut rng = SplitMix64::new(9);
        let max = (0..200_000)
            .map(|_| sample_size_bytes(&mut rng))
            .max()
            .unwrap();
        assert!(max > 20_000, "max {max}");
    }
}
