//! ACL users, as Redis 7 keeps them: each user is on or off, has passwords (SHA-256) or none
//! needed, and a root selector plus any further selectors, each saying which commands (by
//! name, subcommand, first argument or ACL category), which keys (read, write or both) and
//! which Pub/Sub channels it may use. A command is allowed if any selector allows all of it.
//!
//! Users live in memory, as in a Redis without an ACL file: the `default` user starts with
//! every permission and `requirepass` as its password (or none), and CONFIG SET requirepass
//! changes its password as in Redis.
//!
//! Command rules are kept as Redis 7.2 keeps them: `+@all` or `-@all`, then each later rule in
//! the order given, a rule for the same target replacing the earlier one. A command's
//! permission is the last rule that covers it, which is what Redis's bitmap of applied rules
//! comes to.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::path::Path;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use strata::vfs::FileSystem;

use crate::commands::meta;
use crate::error::{Error, Result};

/// The name of the user every connection starts as.
pub(crate) const DEFAULT_USER: &[u8] = b"default";

/// ACL LOG keeps this many entries unless `acllog-max-len` says otherwise (Redis's default).
pub(crate) const LOG_ENTRIES_MAX: usize = 128;

/// An entry of ACL LOG is counted again rather than added when the same denial recurs within
/// this many milliseconds (Redis's `ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const LOG_GROUPING_MS: u64 = 60_000;

/// What a key pattern lets a command do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KeyAccess {
    read: bool,
    write: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Command(String),
    /// `container|subcommand`.
    Subcommand(String, String),
    /// A command allowed with this first argument only (`+select|0`).
    FirstArg(String, Bytes),
    Category(String),
}

#[derive(Clone, Debug)]
struct CommandRule {
    allow: bool,
    target: Target,
}

impl CommandRule {
    fn describe(&self) -> String {
        let sign = if self.allow { '+' } else { '-' };
        match &self.target {
            Target::Command(c) => format!("{sign}{c}"),
            Target::Subcommand(c, s) => format!("{sign}{c}|{s}"),
            Target::FirstArg(c, a) => format!("{sign}{c}|{}", String::from_utf8_lossy(a)),
            Target::Category(c) => format!("{sign}@{c}"),
        }
    }
}

/// One set of permissions: the root selector of a user, or one of its added selectors.
#[derive(Clone, Debug, Default)]
struct Selector {
    /// `+@all` (true) or `-@all` before the rules.
    all_commands: bool,
    rules: Vec<CommandRule>,
    all_keys: bool,
    keys: Vec<(Bytes, KeyAccess)>,
    all_channels: bool,
    channels: Vec<Bytes>,
}

/// What a command asks of a selector, worked out once per check.
pub(crate) struct Request<'a> {
    /// Lowercase; `container|sub` for a container's subcommand.
    pub full_name: String,
    /// The command's own name (lowercase).
    pub name: &'a str,
    pub args: &'a [Bytes],
    /// A command any user may run (AUTH, HELLO: Redis's `no-auth` flag).
    pub always_allowed: bool,
    /// Each key with what the command does with it (read, write).
    pub keys: Vec<(Bytes, bool, bool)>,
    /// Channels it publishes or subscribes to, and whether they are patterns (PSUBSCRIBE).
    pub channels: Vec<(Bytes, bool)>,
}

/// Why a command was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    Command,
    Key(Bytes),
    Channel(Bytes),
}

impl Selector {
    fn unrestricted() -> Self {
        Selector {
            all_commands: true,
            all_keys: true,
            all_channels: true,
            ..Selector::default()
        }
    }

    fn is_unrestricted(&self) -> bool {
        self.all_commands && self.rules.is_empty() && self.all_keys && self.all_channels
    }

    fn command_allowed(&self, req: &Request<'_>) -> bool {
        if req.always_allowed {
            return true;
        }
        let sub = req.full_name.split_once('|').map(|(_, s)| s);
        let categories = meta::lookup(&req.full_name).map_or(&[][..], |m| m.categories);
        for rule in self.rules.iter().rev() {
            let covers = match &rule.target {
                Target::Command(c) => *c == req.name,
                Target::Subcommand(c, s) => *c == req.name && Some(s.as_str()) == sub,
                Target::FirstArg(c, a) => {
                    *c == req.name && req.args.get(1).is_some_and(|x| x.eq_ignore_ascii_case(a))
                }
                Target::Category(c) => categories.contains(&c.as_str()),
            };
            if covers {
                return rule.allow;
            }
        }
        self.all_commands
    }

    fn key_allowed(&self, key: &[u8], read: bool, write: bool) -> bool {
        self.all_keys
            || self.keys.iter().any(|(pattern, access)| {
                (access.read || !read)
                    && (access.write || !write)
                    && crate::glob::matches(pattern, key, false)
            })
    }

    fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p[..] == *channel
                } else {
                    crate::glob::matches(p, channel, false)
                }
            })
    }

    fn check(&self, req: &Request<'_>) -> std::result::Result<(), Denied> {
        if !self.command_allowed(req) {
            return Err(Denied::Command);
        }
        for (key, read, write) in &req.keys {
            if !self.key_allowed(key, *read, *write) {
                return Err(Denied::Key(key.clone()));
            }
        }
        for (channel, is_pattern) in &req.channels {
            if !self.channel_allowed(channel, *is_pattern) {
                return Err(Denied::Channel(channel.clone()));
            }
        }
        Ok(())
    }

    /// Applies one rule word (a command, key or channel rule) to this selector.
    fn apply(&mut self, op: &[u8]) -> std::result::Result<(), &'static str> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            "allchannels" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            "allcommands" | "+@all" => {
                self.all_commands = true;
                self.rules.clear();
                return Ok(());
            }
            "nocommands" | "-@all" => {
                self.all_commands = false;
                self.rules.clear();
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~') | Some(b'%') => self.add_key_pattern(op),
            Some(b'&') => {
                if self.all_channels {
                    return Err(ALL_CHANNELS_FIRST);
                }
                let pattern = Bytes::copy_from_slice(&op[1..]);
                if pattern[..] == *b"*" {
                    self.all_channels = true;
                    self.channels.clear();
                } else if !self.channels.contains(&pattern) {
                    self.channels.push(pattern);
                }
                Ok(())
            }
            Some(b'+') | Some(b'-') => self.add_command_rule(op[0] == b'+', &lower[1..]),
            _ => Err(SYNTAX),
        }
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> std::result::Result<(), &'static str> {
        let (access, pattern) = if op[0] == b'~' {
            (
                KeyAccess {
                    read: true,
                    write: true,
                },
                &op[1..],
            )
        } else {
            // %R~, %W~, %RW~ (either order, either case).
            let tilde = op.iter().position(|&c| c == b'~').ok_or(SYNTAX)?;
            let mut access = KeyAccess {
                read: false,
                write: false,
            };
            for &c in &op[1..tilde] {
                match c.to_ascii_uppercase() {
                    b'R' => access.read = true,
                    b'W' => access.write = true,
                    _ => return Err(SYNTAX),
                }
            }
            if !access.read && !access.write {
                return Err(SYNTAX);
            }
            (access, &op[tilde + 1..])
        };
        if self.all_keys {
            return Err(ALL_KEYS_FIRST);
        }
        let both = access.read && access.write;
        if pattern == b"*" && both {
            self.all_keys = true;
            self.keys.clear();
            return Ok(());
        }
        match self.keys.iter_mut().find(|(p, _)| p[..] == *pattern) {
            Some((_, existing)) => {
                existing.read |= access.read;
                existing.write |= access.write;
            }
            None => self.keys.push((Bytes::copy_from_slice(pattern), access)),
        }
        Ok(())
    }

    fn add_command_rule(
        &mut self,
        allow: bool,
        what: &str,
    ) -> std::result::Result<(), &'static str> {
        let target = if let Some(category) = what.strip_prefix('@') {
            if !crate::commands::admin::is_category(category) {
                return Err(UNKNOWN);
            }
            Target::Category(category.to_string())
        } else if let Some((command, rest)) = what.split_once('|') {
            let command = crate::commands::lookup(command.as_bytes()).ok_or(UNKNOWN)?;
            let name = command.spec.name.to_string();
            if command.props.subcommands {
                if rest.contains('|') {
                    return Err("Allowing first-arg of a subcommand is not supported");
                }
                if !crate::commands::is_subcommand(&format!("{name}|{rest}")) {
                    return Err(UNKNOWN);
                }
                Target::Subcommand(name, rest.to_string())
            } else if !allow || rest.is_empty() || rest.contains('|') {
                // Redis takes a first argument to allow, never one to deny.
                return Err(UNKNOWN);
            } else {
                Target::FirstArg(name, Bytes::copy_from_slice(rest.as_bytes()))
            }
        } else {
            let spec = crate::commands::lookup(what.as_bytes()).ok_or(UNKNOWN)?;
            Target::Command(spec.spec.name.to_string())
        };
        // A subcommand or first-argument rule that changes nothing (`+client|id` after
        // `+@all`) is not kept, as Redis's description of the user leaves it out.
        if let Target::Subcommand(c, _) | Target::FirstArg(c, _) = &target {
            let full = match &target {
                Target::Subcommand(c, s) => format!("{c}|{s}"),
                _ => c.clone(),
            };
            let args = match &target {
                Target::FirstArg(c, a) => vec![Bytes::from(c.clone()), a.clone()],
                _ => Vec::new(),
            };
            let probe = Request {
                full_name: full,
                name: c,
                args: &args,
                always_allowed: false,
                keys: Vec::new(),
                channels: Vec::new(),
            };
            if self.command_allowed(&probe) == allow {
                return Ok(());
            }
        }
        // The rule replaces any earlier one for the same target; a whole command's rule also
        // the earlier rules of its subcommands and first arguments, which it overrides.
        self.rules.retain(|r| match (&r.target, &target) {
            (a, b) if a == b => false,
            (Target::Subcommand(c, _) | Target::FirstArg(c, _), Target::Command(n)) => c != n,
            _ => true,
        });
        self.rules.push(CommandRule { allow, target });
        Ok(())
    }

    fn describe_commands(&self) -> String {
        let mut out = String::from(if self.all_commands { "+@all" } else { "-@all" });
        for r in &self.rules {
            out.push(' ');
            out.push_str(&r.describe());
        }
        out
    }

    fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let words: Vec<String> = self
            .keys
            .iter()
            .map(|(p, a)| {
                let prefix = match (a.read, a.write) {
                    (true, true) => "~",
                    (true, false) => "%R~",
                    _ => "%W~",
                };
                format!("{prefix}{}", String::from_utf8_lossy(p))
            })
            .collect();
        words.join(" ")
    }

    fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let words: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        words.join(" ")
    }

    /// ACL LIST's words for keys, channels and commands.
    fn describe_line(&self) -> String {
        let mut words = Vec::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            words.push(keys);
        }
        if self.all_channels {
            words.push("&*".into());
        } else {
            words.push("resetchannels".into());
            let channels = self.describe_channels();
            if !channels.is_empty() {
                words.push(channels);
            }
        }
        words.push(self.describe_commands());
        words.join(" ")
    }
}

const SYNTAX: &str = "Syntax error";
const UNKNOWN: &str = "Unknown command or category name in ACL";
const ALL_KEYS_FIRST: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const ALL_CHANNELS_FIRST: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";

/// One user.
#[derive(Clone, Debug)]
pub(crate) struct User {
    pub name: Bytes,
    pub enabled: bool,
    nopass: bool,
    /// `sanitize-payload` (true), `skip-sanitize-payload` (false) or neither.
    sanitize_payload: Option<bool>,
    /// SHA-256 of each password, lowercase hex.
    passwords: Vec<String>,
    root: Selector,
    selectors: Vec<Selector>,
}

/// The SHA-256 of `password` in lowercase hex, as ACL shows passwords.
pub(crate) fn password_hash(password: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(password)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl User {
    /// A new user as ACL SETUSER makes one: off, no passwords, no permissions.
    fn new(name: Bytes) -> User {
        User {
            name,
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            root: Selector::default(),
            selectors: Vec::new(),
        }
    }

    /// The default user: on, every permission, `requirepass` as its password or none.
    fn default_user(requirepass: Option<&str>) -> User {
        let mut user = User {
            enabled: true,
            root: Selector::unrestricted(),
            ..User::new(Bytes::from_static(DEFAULT_USER))
        };
        user.set_requirepass(requirepass);
        user
    }

    fn set_requirepass(&mut self, requirepass: Option<&str>) {
        self.passwords.clear();
        match requirepass {
            Some(p) => {
                self.nopass = false;
                self.passwords.push(password_hash(p.as_bytes()));
            }
            None => self.nopass = true,
        }
    }

    /// Whether every command, key and channel is allowed (no check needed).
    pub(crate) fn is_unrestricted(&self) -> bool {
        self.root.is_unrestricted()
    }

    /// Whether `password` opens this user.
    pub(crate) fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = password_hash(password);
        self.passwords
            .iter()
            .any(|h| same_secret(h.as_bytes(), hash.as_bytes()))
    }

    /// Whether a connection needs no AUTH to act as this user (`on` and `nopass`).
    pub(crate) fn is_open(&self) -> bool {
        self.enabled && self.nopass
    }

    /// Checks `req` against the root selector, then the others; the root's refusal is the one
    /// reported.
    pub(crate) fn check(&self, req: &Request<'_>) -> std::result::Result<(), Denied> {
        let root = self.root.check(req);
        if root.is_ok() || self.selectors.iter().any(|s| s.check(req).is_ok()) {
            return Ok(());
        }
        root
    }

    /// Applies ACL SETUSER's rules in order; `Err((index, reason))` names the rule that failed.
    fn apply(&mut self, rules: &[Bytes]) -> std::result::Result<(), (usize, &'static str)> {
        for (i, op) in rules.iter().enumerate() {
            self.apply_one(op).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    fn apply_one(&mut self, op: &[u8]) -> std::result::Result<(), &'static str> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "sanitize-payload" => self.sanitize_payload = Some(true),
            "skip-sanitize-payload" => self.sanitize_payload = Some(false),
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                let name = self.name.clone();
                *self = User::new(name);
                self.sanitize_payload = Some(true);
            }
            _ => {
                match op.first() {
                    Some(b'>') => {
                        let hash = password_hash(&op[1..]);
                        if !self.passwords.contains(&hash) {
                            self.passwords.push(hash);
                        }
                        self.nopass = false;
                    }
                    Some(b'#') => {
                        let hash = &lower[1..];
                        let valid = hash.len() == 64
                            && op[1..]
                                .iter()
                                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
                        if !valid {
                            return Err("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters");
                        }
                        if !self.passwords.iter().any(|h| h == hash) {
                            self.passwords.push(hash.to_string());
                        }
                        self.nopass = false;
                    }
                    Some(b'<') | Some(b'!') => {
                        let hash = if op[0] == b'<' {
                            password_hash(&op[1..])
                        } else {
                            lower[1..].to_string()
                        };
                        let before = self.passwords.len();
                        self.passwords.retain(|h| *h != hash);
                        if self.passwords.len() == before {
                            return Err("The password you are trying to remove from the user does not exist");
                        }
                    }
                    Some(b'(') if op.ends_with(b")") => {
                        let mut selector = Selector::default();
                        let inner = &op[1..op.len() - 1];
                        for word in inner
                            .split(|c| c.is_ascii_whitespace())
                            .filter(|w| !w.is_empty())
                        {
                            selector.apply(word)?;
                        }
                        self.selectors.push(selector);
                    }
                    _ => self.root.apply(op)?,
                }
            }
        }
        Ok(())
    }

    fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(true) => flags.push("sanitize-payload"),
            Some(false) => flags.push("skip-sanitize-payload"),
            None => {}
        }
        flags
    }

    /// ACL LIST's line.
    pub(crate) fn describe(&self) -> String {
        let mut words = vec![format!("user {}", String::from_utf8_lossy(&self.name))];
        words.extend(self.flags().iter().map(|f| f.to_string()));
        words.extend(self.passwords.iter().map(|h| format!("#{h}")));
        words.push(self.root.describe_line());
        for s in &self.selectors {
            words.push(format!("({})", s.describe_line()));
        }
        words.join(" ")
    }

    /// ACL GETUSER's fields: flags, passwords, commands, keys, channels, selectors (each
    /// selector's commands, keys and channels).
    pub(crate) fn details(&self) -> UserDetails {
        UserDetails {
            flags: self.flags(),
            passwords: self.passwords.clone(),
            commands: self.root.describe_commands(),
            keys: self.root.describe_keys(),
            channels: self.root.describe_channels(),
            selectors: self
                .selectors
                .iter()
                .map(|s| {
                    [
                        s.describe_commands(),
                        s.describe_keys(),
                        s.describe_channels(),
                    ]
                })
                .collect(),
        }
    }
}

/// What ACL GETUSER shows of a user.
pub(crate) struct UserDetails {
    pub flags: Vec<&'static str>,
    pub passwords: Vec<String>,
    pub commands: String,
    pub keys: String,
    pub channels: String,
    /// Each selector's commands, keys and channels.
    pub selectors: Vec<[String; 3]>,
}

/// Compares secrets in time independent of where they differ.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub(crate) struct LogEntry {
    pub id: u64,
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    pub object: Bytes,
    pub username: Bytes,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub client_info: String,
}

/// Every user, and the log of refusals.
pub(crate) struct Acl {
    users: RwLock<BTreeMap<Bytes, Arc<User>>>,
    /// Moves at every change, so a connection's cached user is looked up again.
    generation: AtomicU64,
    log: Mutex<(u64, std::collections::VecDeque<LogEntry>)>,
    /// `acllog-max-len`.
    log_entries_max: std::sync::atomic::AtomicUsize,
}

impl Acl {
    pub(crate) fn new(requirepass: Option<&str>) -> Acl {
        let mut users = BTreeMap::new();
        users.insert(
            Bytes::from_static(DEFAULT_USER),
            Arc::new(User::default_user(requirepass)),
        );
        Acl {
            users: RwLock::new(users),
            generation: AtomicU64::new(1),
            log: Mutex::new((0, Default::default())),
            log_entries_max: std::sync::atomic::AtomicUsize::new(LOG_ENTRIES_MAX),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub(crate) fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Whether connections are authenticated without AUTH (the default user is on and needs
    /// no password: Redis's `authRequired`).
    pub(crate) fn default_is_open(&self) -> bool {
        self.user(DEFAULT_USER).is_some_and(|u| u.is_open())
    }

    /// CONFIG SET requirepass: the default user's passwords become that one (or none).
    pub(crate) fn set_requirepass(&self, requirepass: Option<&str>) {
        let mut users = self.users.write();
        if let Some(u) = users.get_mut(DEFAULT_USER) {
            let mut changed = User::clone(u);
            changed.set_requirepass(requirepass);
            *u = Arc::new(changed);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// ACL SETUSER: all rules apply or none (the error names the first that failed).
    pub(crate) fn set_user(&self, name: &Bytes, rules: &[Bytes]) -> Result<()> {
        if name.iter().any(|&c| c == b' ' || c == 0) {
            return Err(Error::command(
                "Usernames can't contain spaces or null characters",
            ));
        }
        let mut users = self.users.write();
        let mut user = match users.get(name) {
            Some(u) => User::clone(u),
            None => User::new(name.clone()),
        };
        user.apply(rules).map_err(|(i, reason)| {
            Error::command(format!(
                "Error in ACL SETUSER modifier '{}': {reason}",
                String::from_utf8_lossy(&rules[i])
            ))
        })?;
        users.insert(name.clone(), Arc::new(user));
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// ACL DELUSER: how many of `names` existed (the default user cannot be removed).
    pub(crate) fn delete_users(&self, names: &[Bytes]) -> Result<usize> {
        if names.iter().any(|n| n[..] == *DEFAULT_USER) {
            return Err(Error::command("The 'default' user cannot be removed"));
        }
        let mut users = self.users.write();
        let removed = names.iter().filter(|n| users.remove(*n).is_some()).count();
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(removed)
    }

    /// Adds a refusal to the log, or counts it again if the same one was logged within the
    /// last minute (Redis groups by reason, context, object and user).
    /// CONFIG SET acllog-max-len.
    pub(crate) fn set_log_entries_max(&self, n: usize) {
        self.log_entries_max.store(n, Ordering::Relaxed);
        self.log.lock().1.truncate(n);
    }

    pub(crate) fn log(&self, mut entry: LogEntry) {
        let mut log = self.log.lock();
        let (next_id, entries) = &mut *log;
        let grouped = entries.iter().position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.object == entry.object
                && e.username == entry.username
                && entry.created_ms.saturating_sub(e.updated_ms) < LOG_GROUPING_MS
        });
        // A recurring refusal is counted again and moves to the front, as in Redis.
        if let Some(mut e) = grouped.and_then(|at| entries.remove(at)) {
            e.count += 1;
            e.updated_ms = entry.created_ms;
            e.client_info = entry.client_info;
            entries.push_front(e);
            return;
        }
        entry.id = *next_id;
        *next_id += 1;
        entries.push_front(entry);
        entries.truncate(self.log_entries_max.load(Ordering::Relaxed));
    }

    /// The newest `count` entries, newest first.
    pub(crate) fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().1.iter().take(count).cloned().collect()
    }

    pub(crate) fn reset_log(&self) {
        self.log.lock().1.clear();
    }
}

/// The words of one ACL file line, a selector's parenthesised words joined back into one
/// (ACL LIST writes `(~x -@all +get)`; Redis's `ACLMergeSelectorArguments`).
fn rule_words(line: &str) -> std::result::Result<Vec<String>, &'static str> {
    let mut out = Vec::new();
    let mut open: Option<String> = None;
    for word in line.split_ascii_whitespace() {
        match open.as_mut() {
            Some(selector) => {
                selector.push(' ');
                selector.push_str(word);
                if word.ends_with(')') {
                    out.extend(open.take());
                }
            }
            None if word.starts_with('(') && !word.ends_with(')') => open = Some(word.to_string()),
            None => out.push(word.to_string()),
        }
    }
    if open.is_some() {
        return Err("Unmatched parenthesis in acl selector starting at '('.");
    }
    Ok(out)
}

impl Acl {
    /// The users an ACL file describes (one `user <name> <rules...>` per line, as ACL LIST and
    /// ACL SAVE write them; blank lines and `#` comments skipped), checked whole: an error
    /// names the line. A file without the default user leaves it as it is now.
    fn parse_file(&self, text: &str) -> std::result::Result<BTreeMap<Bytes, Arc<User>>, String> {
        let mut users = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |reason: &str| format!("line {}: {reason}", i + 1);
            let words = rule_words(line).map_err(at)?;
            let (Some("user"), Some(name)) = (words.first().map(String::as_str), words.get(1))
            else {
                return Err(at("should start with user keyword"));
            };
            let name = Bytes::from(name.clone());
            if name.iter().any(|&c| c == b' ' || c == 0) {
                return Err(at("Usernames can't contain spaces or null characters"));
            }
            if users.contains_key(&name) {
                return Err(at(
                    "Duplicate user found. A user can only be defined once in config files",
                ));
            }
            // Applied to a new user (off, no permissions), as Redis reads the file.
            let rules: Vec<Bytes> = words[2..].iter().map(|w| Bytes::from(w.clone())).collect();
            let mut user = User::new(name.clone());
            user.apply(&rules).map_err(|(j, reason)| {
                at(&format!(
                    "Error in user declaration '{}': {reason}",
                    String::from_utf8_lossy(&rules[j])
                ))
            })?;
            users.insert(name, Arc::new(user));
        }
        if !users.contains_key(DEFAULT_USER) {
            if let Some(current) = self.user(DEFAULT_USER) {
                users.insert(Bytes::from_static(DEFAULT_USER), current);
            }
        }
        Ok(users)
    }

    /// ACL LOAD (and the start of a server with an `aclfile`): every user of `path` replaces
    /// every user now, or nothing changes (the error names the file and line).
    pub(crate) fn load_file(&self, fs: &dyn FileSystem, path: &Path) -> Result<()> {
        let bytes = fs.read(path).map_err(|e| {
            Error::command(format!(
                "Error loading ACLs, opening file '{}': {e}",
                path.display()
            ))
        })?;
        let users = self
            .parse_file(&String::from_utf8_lossy(&bytes))
            .map_err(|e| Error::command(format!("{}:{e}", path.display())))?;
        *self.users.write() = users;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// ACL SAVE: every user, as ACL LIST shows them, in place of `path` as the engine replaces
    /// its manifest (`strata::vfs::write_atomically`), so a crash or power cut leaves the old
    /// file or the new one.
    pub(crate) fn save_file(&self, fs: &dyn FileSystem, path: &Path) -> Result<()> {
        let mut text = String::new();
        for user in self.users() {
            text.push_str(&user.describe());
            text.push('\n');
        }
        let failed = |e: &dyn std::fmt::Display| {
            Error::command(format!("There was an error trying to save the ACLs. Please check the server logs for more information ({}: {e})", path.display()))
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| failed(&"not a file name"))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        strata::vfs::write_atomically(fs, dir.unwrap_or(Path::new(".")), name, text.as_bytes())
            .map_err(|e| failed(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new(Bytes::from_static(b"u"));
        let rules: Vec<Bytes> = rules.iter().map(|r| Bytes::from(r.to_string())).collect();
        u.apply(&rules).unwrap();
        u
    }

    fn request<'a>(args: &'a [Bytes], full: &str) -> Request<'a> {
        Request {
            full_name: full.into(),
            name: full.split('|').next().unwrap_or(full).to_string().leak(),
            args,
            always_allowed: false,
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    #[test]
    fn the_last_rule_that_covers_a_command_decides() {
        let u = user(&["+@all", "-get", "+select|0", "-@hash", "+hget"]);
        let args =
            |w: &[&str]| -> Vec<Bytes> { w.iter().map(|s| Bytes::from(s.to_string())).collect() };
        assert!(u.check(&request(&args(&["set", "k", "v"]), "set")).is_ok());
        assert_eq!(
            u.check(&request(&args(&["get", "k"]), "get")),
            Err(Denied::Command)
        );
        assert_eq!(
            u.check(&request(&args(&["hset", "h", "f", "v"]), "hset")),
            Err(Denied::Command)
        );
        assert!(u
            .check(&request(&args(&["hget", "h", "f"]), "hget"))
            .is_ok());
        let u = user(&["-@all", "+select|0", "+config|get"]);
        assert!(u.check(&request(&args(&["select", "0"]), "select")).is_ok());
        assert_eq!(
            u.check(&request(&args(&["select", "1"]), "select")),
            Err(Denied::Command)
        );
        assert!(u
            .check(&request(&args(&["config", "get", "x"]), "config|get"))
            .is_ok());
        assert_eq!(
            u.check(&request(&args(&["config", "set", "x", "y"]), "config|set")),
            Err(Denied::Command)
        );
        assert_eq!(u.root.describe_commands(), "-@all +select|0 +config|get");
    }

    #[test]
    fn key_patterns_say_what_may_be_read_and_written() {
        let u = user(&["+@all", "%R~r:*", "%W~w:*", "~both:*"]);
        let args: Vec<Bytes> = Vec::new();
        let mut req = request(&args, "get");
        for (key, read, write, ok) in [
            ("r:1", true, false, true),
            ("r:1", true, true, false),
            ("w:1", false, true, true),
            ("w:1", true, false, false),
            ("both:1", true, true, true),
            ("other", false, false, false),
        ] {
            req.keys = vec![(Bytes::from(key), read, write)];
            assert_eq!(u.check(&req).is_ok(), ok, "{key} read {read} write {write}");
        }
        assert_eq!(u.root.describe_keys(), "%R~r:* %W~w:* ~both:*");
    }

    #[test]
    fn an_acl_file_reads_back_what_acl_list_wrote() {
        let acl = Acl::new(Some("root-pass"));
        let set = |name: &str, rules: &[&str]| {
            let rules: Vec<Bytes> = rules.iter().map(|r| Bytes::from(r.to_string())).collect();
            acl.set_user(&Bytes::from(name.to_string()), &rules)
                .unwrap();
        };
        set(
            "alice",
            &[
                "on",
                ">pw",
                "~cache:*",
                "%R~ro:*",
                "&ch*",
                "+@hash",
                "-hdel",
                "+select|0",
            ],
        );
        set(
            "bob",
            &[
                "off",
                "nopass",
                "allkeys",
                "allchannels",
                "+@all",
                "-@dangerous",
            ],
        );
        let hash = format!("#{}", "ab".repeat(32));
        set("carol", &["on", &hash, "(+get ~x)", "(%W~y +set)"]);
        let listed: Vec<String> = acl.users().iter().map(|u| u.describe()).collect();
        let file = listed.join("\n");
        let again = Acl::new(None);
        again.users.write().clear();
        let users = again.parse_file(&format!("# users\n\n{file}\n")).unwrap();
        let relisted: Vec<String> = users.values().map(|u| u.describe()).collect();
        assert_eq!(relisted, listed);
        // Errors name the line; nothing is half-read.
        assert_eq!(
            again.parse_file("user a on\nuser b +nosuch\n").unwrap_err(),
            "line 2: Error in user declaration '+nosuch': Unknown command or category name in ACL"
        );
        assert!(again
            .parse_file("nouser x\n")
            .unwrap_err()
            .starts_with("line 1: "));
        assert!(again
            .parse_file("user a\nuser a\n")
            .unwrap_err()
            .contains("Duplicate user"));
        assert!(again
            .parse_file("user a (+get ~x\n")
            .unwrap_err()
            .contains("Unmatched"));
    }

    /// ACL SAVE cut by a power failure at each of its file-system calls in turn: what the
    /// disk keeps is the old file or the new one, never a mix, and ACL LOAD reads it.
    #[test]
    fn a_power_cut_during_acl_save_leaves_the_old_file_or_the_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl");
        let old = "user old on nopass +@all ~*\n";
        std::fs::write(&path, old).unwrap();
        let acl = Acl::new(None);
        let rules: Vec<Bytes> = ["on", ">pw", "+get", "~k:*"]
            .iter()
            .map(|r| Bytes::from(r.to_string()))
            .collect();
        acl.set_user(&Bytes::from_static(b"new"), &rules).unwrap();
        let mut saw_old = false;
        for n in 1.. {
            let fs = strata::vfs::FaultFs::new(dir.path()).unwrap();
            fs.crash_at(n);
            let saved = acl.save_file(&fs, &path);
            let crashed = fs.crashed();
            fs.power_cut().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            if text == old {
                saw_old = true;
                assert!(crashed, "a save that returned leaves the new file");
            } else {
                assert!(text.contains("user new on #"), "cut at call {n}: {text:?}");
                let reread = Acl::new(None);
                reread.load_file(&fs, &path).unwrap();
                assert!(reread.user(b"new").is_some_and(|u| u.accepts(b"pw")));
            }
            if !crashed {
                assert!(saved.is_ok());
                break;
            }
            std::fs::write(&path, old).unwrap();
        }
        assert!(saw_old, "some cut came before the rename");
    }

    #[test]
    fn passwords_open_a_user_only_while_it_is_on() {
        let mut u = user(&[">secret", "on"]);
        assert!(u.accepts(b"secret"));
        assert!(!u.accepts(b"other"));
        u.apply(&[Bytes::from_static(b"off")]).unwrap();
        assert!(!u.accepts(b"secret"));
        assert_eq!(
            u.apply(&[Bytes::from_static(b"<nope")]),
            Err((
                0,
                "The password you are trying to remove from the user does not exist"
            ))
        );
    }
}
