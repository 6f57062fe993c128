//! What Redis's command table says of a command that is description rather than behaviour:
//! its ACL categories, command tips and key specifications (`meta_table.rs`, generated from
//! redis-server's COMMAND by `scripts/redis-command-meta.py`). COMMAND INFO shows them, ACL
//! categories are read from them, and COMMAND GETKEYSANDFLAGS finds keys with them as Redis's
//! `getKeysUsingKeySpecs` does. What a command does here (arity, flags, which commands exist)
//! stays in its `Spec`.

use bytes::Bytes;

use super::meta_table::TABLE;

/// One command's (or `container|subcommand`'s) entry.
pub(crate) struct CommandMeta {
    /// Lowercase; a subcommand as `config|get`.
    pub name: &'static str,
    /// ACL categories without the `@`, in Redis's order.
    pub categories: &'static [&'static str],
    pub tips: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
    /// A subcommand's first six COMMAND INFO fields as Redis gives them (its container's entry
    /// lists them); `None` for a command.
    pub subcommand: Option<SubcommandHeader>,
}

/// A subcommand's arity, flags and key positions (first, last, step) in Redis's table.
pub(crate) struct SubcommandHeader {
    pub arity: i64,
    pub flags: &'static [&'static str],
    pub keys: (i64, i64, i64),
}

/// Where a command's keys are, and what it does with them (Redis 7's key specifications).
pub(crate) struct KeySpec {
    /// Redis's remark on the spec (why it is `unknown`, say).
    pub notes: Option<&'static str>,
    /// `RW`, `RO`, `OW` or `RM`, then `access`, `update`, `insert`, `delete`, `not_key`,
    /// `incomplete`, `variable_flags` as they apply.
    pub flags: &'static [&'static str],
    pub begin: BeginSearch,
    pub find: FindKeys,
}

/// Where the search for a spec's keys starts.
pub(crate) enum BeginSearch {
    /// At this argument.
    Index(i64),
    /// After this word, searched from `start_from` (from the end when negative).
    Keyword {
        keyword: &'static str,
        start_from: i64,
    },
    /// Only the command's own code knows.
    Unknown,
}

/// How many keys follow the start.
pub(crate) enum FindKeys {
    /// Up to `last_key` (relative to the start; negative: from the end), every `key_step`;
    /// with a `limit`, that part of what is left.
    Range {
        last_key: i64,
        key_step: i64,
        limit: i64,
    },
    /// An argument (`key_num_index` after the start) says how many.
    KeyNum {
        key_num_index: i64,
        first_key: i64,
        key_step: i64,
    },
    Unknown,
}

/// Commands of Redis 7.2 that the generated 7.0 table lacks, as Redis 7.2's command table
/// (`src/commands/waitaof.json`) describes them.
static NEWER: &[CommandMeta] = &[CommandMeta {
    name: "waitaof",
    categories: &["slow", "connection"],
    tips: &["request_policy:all_shards", "response_policy:agg_min"],
    key_specs: &[],
    subcommand: None,
}];

/// The entry for `name` (lowercase, `container|subcommand` for a subcommand).
pub(crate) fn lookup(name: &str) -> Option<&'static CommandMeta> {
    TABLE
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &TABLE[i])
        .or_else(|| NEWER.iter().find(|m| m.name == name))
}

/// The entry for the command `args` names: a container's subcommand where it has one.
pub(crate) fn of_command(args: &[Bytes]) -> Option<&'static CommandMeta> {
    let name = String::from_utf8_lossy(args.first()?).to_ascii_lowercase();
    if let Some(sub) = args.get(1) {
        let full = format!(
            "{name}|{}",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        );
        if let Some(m) = lookup(&full) {
            return Some(m);
        }
    }
    lookup(&name)
}

impl CommandMeta {
    /// Whether any key spec has `flag`.
    pub(crate) fn any_spec_has(&self, flag: &str) -> bool {
        self.key_specs.iter().any(|s| s.flags.contains(&flag))
    }

    /// The keys of `args` (the whole command) by its key specs, each with its spec's flags
    /// (Redis's `getKeysUsingKeySpecs`): `None` where a spec cannot be followed (an unknown
    /// one, a key count that is not there, a range past the end) or is incomplete, for the
    /// command's own rules to decide; a spec whose keyword is absent finds no keys. Specs of things that are not keys are skipped.
    pub(crate) fn keys_by_specs(
        &self,
        args: &[Bytes],
    ) -> Option<Vec<(usize, &'static [&'static str])>> {
        let argc = i64::try_from(args.len()).ok()?;
        let mut out = Vec::new();
        for spec in self.key_specs {
            if spec.flags.contains(&"not_key") {
                continue;
            }
            let mut first = match spec.begin {
                BeginSearch::Index(i) => i,
                BeginSearch::Keyword {
                    keyword,
                    start_from,
                } => {
                    // As Redis searches: forward up to the next-to-last argument, or
                    // backward down to the second (a keyword must have a key after it).
                    let at = |i: &i64| is_word(&args[*i as usize], keyword);
                    let found = if start_from > 0 {
                        (start_from..argc - 1).find(at)
                    } else {
                        (2..=(argc + start_from).min(argc - 1)).rev().find(at)
                    };
                    match found {
                        Some(i) => i + 1,
                        None => continue,
                    }
                }
                BeginSearch::Unknown => return None,
            };
            let (last, step) = match spec.find {
                FindKeys::Range {
                    last_key,
                    key_step,
                    limit,
                } => {
                    let last = if last_key >= 0 {
                        first + last_key
                    } else if limit == 0 {
                        argc + last_key
                    } else {
                        first + ((argc - first) / limit + last_key)
                    };
                    (last, key_step)
                }
                FindKeys::KeyNum {
                    key_num_index,
                    first_key,
                    key_step,
                } => {
                    if key_num_index >= argc - first {
                        return None;
                    }
                    let count = crate::num::parse_i64(&args[(first + key_num_index) as usize])
                        .filter(|n| *n >= 0)?;
                    first += first_key;
                    (first + count - 1, key_step)
                }
                FindKeys::Unknown => return None,
            };
            // An incomplete spec (MIGRATE's KEYS) that applies leaves the keys to the
            // command's own rules.
            if last >= argc || last < first || first >= argc || step < 1 {
                return None;
            }
            if spec.flags.contains(&"incomplete") {
                return None;
            }
            let mut i = first;
            while i <= last {
                out.push((i as usize, spec.flags));
                i += step;
            }
        }
        Some(out)
    }
}

fn is_word(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_by_name_so_lookups_find_every_entry() {
        assert!(TABLE.windows(2).all(|w| w[0].name < w[1].name));
        for m in TABLE {
            assert!(std::ptr::eq(lookup(m.name).unwrap(), m));
        }
        assert!(lookup("nosuch").is_none());
    }
}
