//! Transactions, scripts and held runs across a power cut: the server runs on an engine whose
//! file layer (`strata::vfs::FaultFs`) knows what a power cut keeps, the machine stops at a
//! chosen file call, every byte that was not fsynced is dropped, and a new server opens what is
//! left.
//!
//! Each round `n` is one unit of work that touches every kind of key (strings, `MSET`, a
//! counter, a hash with an expiry time, a list pushed and popped, a sorted set, a set with
//! members added and removed, a deleted key, values large enough for the value logs), sent
//! either as `MULTI`/`EXEC` or as one `EVAL`. The counter says how many rounds the store holds;
//! everything else must then equal an independent model after exactly that many rounds: no
//! round is half there, and the rounds kept are a prefix. What was acknowledged before the last
//! fsync (every round under `appendfsync always`, rounds before a `SAVE` under `no`) must be
//! kept.
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata::vfs::FaultFs;
use strata_server::{AppendFsync, KvBackend, ServerConfig, ServerThread};

/// Rounds each run tries to write.
const ROUNDS: u64 = 60;
/// Under `appendfsync no`, a `SAVE` (flush and fsync) after every this many rounds.
const SAVE_EVERY: u64 = 10;
/// Far-future base of the hash's expiry time (2100-01-01), so nothing expires in the test.
const EXPIRE_BASE_SECS: u64 = 4_102_444_800;

/// Runs the commands packed in ARGV (`argc arg...` repeated) as one script.
const SCRIPT: &str = "local i = 1
while i <= #ARGV do
  local argc = tonumber(ARGV[i])
  local args = {}
  for j = 1, argc do args[j] = ARGV[i + j] end
  redis.call(unpack(args))
  i = i + argc + 1
end
return 1";

fn big_value(n: u64) -> String {
    // Past the tiny options' value-separation threshold (100 bytes): a value-log entry.
    format!("{n:06}|").repeat(40)
}

/// The commands of round `n`.
fn round_commands(n: u64) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let ns = n.to_string();
    let mut c = vec![
        s(&["SET", &format!("s:{}", n % 7), &format!("v{n}")]),
        s(&["MSET", "m:a", &ns, "m:b", &ns]),
        s(&["INCR", "counter"]),
        s(&["HSET", "h", &format!("f{}", n % 5), &ns]),
        s(&["EXPIREAT", "h", &(EXPIRE_BASE_SECS + n).to_string()]),
        s(&["RPUSH", "l", &ns]),
        s(&["ZADD", "z", &ns, &format!("m{}", n % 11)]),
        s(&["SADD", "set", &format!("e{n}")]),
        s(&["SET", &format!("big:{}", n % 3), &big_value(n)]),
    ];
    if n % 3 == 0 {
        c.push(s(&["LPOP", "l"]));
    }
    if n > 4 {
        c.push(s(&["SREM", "set", &format!("e{}", n - 4)]));
    }
    if n % 4 == 0 {
        c.push(s(&["DEL", &format!("s:{}", (n / 4) % 7)]));
    }
    c
}

/// What the store holds after rounds `1..=rounds`, computed without the server.
#[derive(Debug, Default, PartialEq, Eq)]
struct Model {
    strings: BTreeMap<String, String>,
    hash: BTreeMap<String, String>,
    hash_expire_at: Option<u64>,
    list: VecDeque<String>,
    zset: BTreeMap<String, u64>,
    set: BTreeSet<String>,
    counter: u64,
}

impl Model {
    fn after(rounds: u64) -> Model {
        let mut m = Model::default();
        for n in 1..=rounds {
            let ns = n.to_string();
            m.strings.insert(format!("s:{}", n % 7), format!("v{n}"));
            m.strings.insert("m:a".into(), ns.clone());
            m.strings.insert("m:b".into(), ns.clone());
            m.counter += 1;
            m.hash.insert(format!("f{}", n % 5), ns.clone());
            m.hash_expire_at = Some(EXPIRE_BASE_SECS + n);
            m.list.push_back(ns.clone());
            m.zset.insert(format!("m{}", n % 11), n);
            m.set.insert(format!("e{n}"));
            m.strings.insert(format!("big:{}", n % 3), big_value(n));
            if n % 3 == 0 {
                m.list.pop_front();
            }
            if n > 4 {
                m.set.remove(&format!("e{}", n - 4));
            }
            if n % 4 == 0 {
                m.strings.remove(&format!("s:{}", (n / 4) % 7));
            }
        }
        m
    }

    /// What the server holds, read back with ordinary commands.
    fn read(c: &mut redis::Connection) -> redis::RedisResult<Model> {
        let mut m = Model::default();
        let mut names: Vec<String> = (0..7).map(|k| format!("s:{k}")).collect();
        names.extend((0..3).map(|k| format!("big:{k}")));
        names.extend(["m:a".to_string(), "m:b".to_string()]);
        for name in names {
            let v: Option<String> = redis::cmd("GET").arg(&name).query(c)?;
            if let Some(v) = v {
                m.strings.insert(name, v);
            }
        }
        let counter: Option<u64> = redis::cmd("GET").arg("counter").query(c)?;
        m.counter = counter.unwrap_or(0);
        m.hash = redis::cmd("HGETALL").arg("h").query(c)?;
        let at: i64 = redis::cmd("EXPIRETIME").arg("h").query(c)?;
        m.hash_expire_at = u64::try_from(at).ok();
        let list: Vec<String> = redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(c)?;
        m.list = list.into();
        let z: Vec<(String, u64)> = redis::cmd("ZRANGE")
            .arg("z")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)?;
        m.zset = z.into_iter().collect();
        m.set = redis::cmd("SMEMBERS").arg("set").query(c)?;
        Ok(m)
    }
}

/// A server over `fs`, on the store in `dir`.
struct CutServer {
    thread: Option<ServerThread>,
    db: Option<Arc<strata::Db>>,
    addr: std::net::SocketAddr,
}

impl CutServer {
    fn start(dir: &Path, fs: &FaultFs, appendfsync: AppendFsync) -> CutServer {
        let mut options = strata_server::store_options(
            strata::Options {
                fs: Arc::new(fs.clone()),
                ..strata::Options::tiny()
            },
            dir,
        );
        options.sync = appendfsync.sync_mode();
        let db = Arc::new(strata::Db::open(dir, options).unwrap());
        let config = ServerConfig {
            bind: "127.0.0.1".into(),
            port: 0,
            appendfsync,
            dir: Some(dir.to_path_buf()),
            ..ServerConfig::default()
        };
        let backend: Arc<dyn KvBackend + Send + Sync> = db.clone();
        let thread = ServerThread::start(config, backend).unwrap();
        CutServer {
            addr: thread.local_addr(),
            thread: Some(thread),
            db: Some(db),
        }
    }

    fn client(&self) -> redis::Connection {
        let c = redis::Client::open(format!("redis://{}/", self.addr))
            .unwrap()
            .get_connection()
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c
    }

    /// Stops the server whatever state its files are in (errors expected after a crash) and
    /// lets go of the engine without closing it.
    fn abandon(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.shutdown();
        }
        drop(self.db.take());
    }
}

/// Sends round `n` as a transaction (even `n`) or a script (odd `n`); `Ok(false)` when the
/// server refused it (the machine has stopped).
fn send_round(c: &mut redis::Connection, n: u64) -> redis::RedisResult<bool> {
    let commands = round_commands(n);
    if n % 2 == 0 {
        let mut p = redis::pipe();
        p.atomic();
        for cmd in &commands {
            let mut rc = redis::cmd(&cmd[0]);
            for a in &cmd[1..] {
                rc.arg(a);
            }
            p.add_command(rc);
        }
        let r: redis::RedisResult<redis::Value> = p.query(c);
        return Ok(r.is_ok());
    }
    let mut e = redis::cmd("EVAL");
    e.arg(SCRIPT).arg(0);
    for cmd in &commands {
        e.arg(cmd.len());
        for a in cmd {
            e.arg(a);
        }
    }
    let r: redis::RedisResult<i64> = e.query(c);
    Ok(r.is_ok())
}

/// A run's store on a file layer that can cut the power: its directory, the file layer, the
/// store's path, the server on it, and the changing file calls made by opening it.
struct CutRun {
    _dir: tempfile::TempDir,
    fs: FaultFs,
    path: std::path::PathBuf,
    server: CutServer,
    opened: u64,
}

impl CutRun {
    /// A new store and its server; the machine stops at the `point`th changing file call after
    /// the open (none: never).
    fn start(appendfsync: AppendFsync, point: Option<u64>) -> CutRun {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let path = dir.path().join("db");
        let server = CutServer::start(&path, &fs, appendfsync);
        let opened = fs.mutations();
        if let Some(n) = point {
            fs.crash_at(opened + n);
        }
        CutRun {
            _dir: dir,
            fs,
            path,
            server,
            opened,
        }
    }
}

/// One run: rounds until the machine stops at changing file call `point` (none: never), then
/// a power cut and a check of what a new server finds. Returns the changing calls the run made.
fn cut_at(point: Option<u64>, tear: bool, appendfsync: AppendFsync) -> u64 {
    let CutRun {
        _dir,
        fs,
        path,
        server,
        opened,
    } = CutRun::start(appendfsync, point);
    let mut c = server.client();
    let mut durable = 0u64;
    let mut acknowledged = 0u64;
    for n in 1..=ROUNDS {
        if !send_round(&mut c, n).unwrap() {
            break;
        }
        acknowledged = n;
        match appendfsync {
            AppendFsync::Always => durable = n,
            _ if n % SAVE_EVERY == 0 => {
                let saved: redis::RedisResult<()> = redis::cmd("SAVE").query(&mut c);
                if saved.is_err() {
                    break;
                }
                durable = n;
            }
            _ => {}
        }
    }
    drop(c);
    let calls = fs.mutations() - opened;
    server.abandon();
    if tear {
        fs.tear_writes(point.unwrap_or(0));
    }
    fs.power_cut().unwrap();
    let ctx = format!(
        "{} crash at call {point:?} of {calls}, torn writes {tear}, acknowledged {acknowledged}, \
         durable {durable}",
        appendfsync.name()
    );

    let server = CutServer::start(&path, &fs, appendfsync);
    let mut c = server.client();
    let got = Model::read(&mut c).unwrap_or_else(|e| panic!("{ctx}: reading back failed: {e}"));
    let kept = got.counter;
    assert!(
        kept >= durable,
        "{ctx}: the store holds {kept} rounds, lost durable ones"
    );
    assert!(
        kept <= acknowledged + 1,
        "{ctx}: the store holds {kept} rounds, more than were sent"
    );
    assert_eq!(
        got,
        Model::after(kept),
        "{ctx}: the store is not the model after its {kept} rounds (a round half there, or \
         rounds kept out of order)"
    );
    // The recovered store takes new rounds.
    assert!(
        send_round(&mut c, kept + 1).unwrap(),
        "{ctx}: refused a write"
    );
    assert_eq!(
        Model::read(&mut c).unwrap(),
        Model::after(kept + 1),
        "{ctx}"
    );
    drop(c);
    server.abandon();
    calls
}

fn cut_rounds(appendfsync: AppendFsync, seed: u64) {
    let total = cut_at(None, false, appendfsync);
    let points: u64 = std::env::var("STRATA_CRASH_POINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut rng = SmallRng::seed_from_u64(seed);
    for i in 0..points {
        cut_at(Some(rng.gen_range(1..=total)), i % 2 == 1, appendfsync);
    }
    eprintln!(
        "{}: {points} power cuts over {total} changing file calls",
        appendfsync.name()
    );
}

#[test]
fn transactions_and_scripts_are_whole_or_absent_after_a_power_cut_with_fsync_always() {
    cut_rounds(AppendFsync::Always, 1);
}

#[test]
fn transactions_and_scripts_are_whole_or_absent_after_a_power_cut_with_fsync_no() {
    cut_rounds(AppendFsync::No, 2);
}

/// WAITAOF 1 0 0 under `appendfsync no`: everything the client was answered for before it (a
/// pipeline of writes ending in WAITAOF) survives a power cut; a write after it, handed to the
/// OS but never forced to disk, does not (so the cut drops what was not forced, and the test
/// can fail).
#[test]
fn waitaof_makes_the_writes_before_it_survive_a_power_cut() {
    let CutRun {
        _dir,
        fs,
        path,
        server,
        ..
    } = CutRun::start(AppendFsync::No, None);
    let mut c = server.client();
    let mut p = redis::pipe();
    for i in 0..50 {
        p.cmd("SET").arg(format!("k{i}")).arg(big_value(i)).ignore();
    }
    p.cmd("HSET").arg("h").arg("f").arg("1").ignore();
    p.cmd("RPUSH").arg("l").arg("a").arg("b").ignore();
    p.cmd("WAITAOF").arg(1).arg(0).arg(0);
    let (acks,): ((i64, i64),) = p.query(&mut c).unwrap();
    assert_eq!(acks, (1, 0), "WAITAOF's acknowledgements");
    let (none,): ((i64, i64),) = redis::pipe()
        .cmd("WAITAOF")
        .arg(0)
        .arg(0)
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(none, (0, 0), "WAITAOF 0 forces nothing");
    let () = redis::cmd("SET")
        .arg("after")
        .arg("x")
        .query(&mut c)
        .unwrap();
    drop(c);
    // The machine stops at its next file change: the server's shutdown forces nothing more.
    fs.crash_at(1);
    server.abandon();
    fs.power_cut().unwrap();

    let server = CutServer::start(&path, &fs, AppendFsync::No);
    let mut c = server.client();
    for i in 0..50 {
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, Some(big_value(i)), "k{i}, written before WAITAOF");
    }
    let f: Option<String> = redis::cmd("HGET").arg("h").arg("f").query(&mut c).unwrap();
    assert_eq!(f.as_deref(), Some("1"));
    let l: Vec<String> = redis::cmd("LRANGE")
        .arg("l")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(l, ["a", "b"]);
    let after: Option<String> = redis::cmd("GET").arg("after").query(&mut c).unwrap();
    assert_eq!(
        after, None,
        "a write after WAITAOF, never forced, is lost in the cut"
    );
    drop(c);
    server.abandon();
}

/// Pipelines of one key's writes, which the server runs as a held run (`conn.rs`: decided on
/// the writes staged by the commands before, applied as one engine batch), each key in turn:
/// a list (pushes at both ends, pops), a hash (sets, deletes, increments) and a sorted set
/// (adds, pops of the lowest), each pipeline of a few to 40 commands.
fn held_pipeline(rng: &mut SmallRng, key: usize, first: u64, len: u64) -> Vec<Vec<String>> {
    (first..first + len)
        .map(|n| {
            let ns = n.to_string();
            let field = format!("f{}", n % 3);
            let pick = rng.gen_range(0..4);
            let words: Vec<&str> = match (key, pick) {
                (0, 0) => vec!["LPUSH", "hl", &ns],
                (0, 1) => vec!["LPOP", "hl"],
                (0, _) => vec!["RPUSH", "hl", &ns],
                (1, 0) => vec!["HDEL", "hh", "f0", "f1"],
                (1, 1) => vec!["HINCRBY", "hh", "n", "1"],
                (2, 0) => vec!["ZPOPMIN", "hz"],
                (2, _) => vec!["ZADD", "hz", &ns, &ns],
                _ => vec!["HSET", "hh", &field, &ns],
            };
            words.into_iter().map(String::from).collect()
        })
        .collect()
}

/// One key's state, as ordinary commands read it.
fn held_state(c: &mut redis::Connection, key: usize) -> Vec<String> {
    let (cmd, args): (&str, &[&str]) = match key {
        0 => ("LRANGE", &["hl", "0", "-1"]),
        1 => ("HGETALL", &["hh"]),
        _ => ("ZRANGE", &["hz", "0", "-1", "WITHSCORES"]),
    };
    redis::cmd(cmd).arg(args).query(c).unwrap()
}

/// Held runs under `appendfsync always`, cut by a power cut at a random file call: each key
/// then holds exactly what its first `k` commands made, for some `k` from the commands whose
/// replies came back (all of them must survive) to those sent; the model is the same
/// commands replayed one by one on a fresh server without cuts.
#[test]
fn held_runs_keep_every_acknowledged_write_after_a_power_cut() {
    const PIPELINES: u64 = 45;
    // The commands of one run, key by key: (key, pipeline).
    let plan = |seed: u64| -> Vec<(usize, Vec<Vec<String>>)> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut next = 1;
        (0..PIPELINES)
            .map(|i| {
                let key = (i % 3) as usize;
                let len = rng.gen_range(3..40);
                let p = held_pipeline(&mut rng, key, next, len);
                next += len;
                (key, p)
            })
            .collect()
    };
    let send = |c: &mut redis::Connection, commands: &[Vec<String>]| -> bool {
        let mut p = redis::pipe();
        for cmd in commands {
            p.cmd(&cmd[0]).arg(&cmd[1..]);
        }
        let r: redis::RedisResult<Vec<redis::Value>> = p.query(c);
        r.is_ok()
    };
    // Each key's state after each of its commands, from a server that is never cut.
    let models = |seed: u64| -> [Vec<Vec<String>>; 3] {
        let run = CutRun::start(AppendFsync::Always, None);
        let server = run.server;
        let mut c = server.client();
        let mut states: [Vec<Vec<String>>; 3] = Default::default();
        for (key, state) in states.iter_mut().enumerate() {
            state.push(held_state(&mut c, key));
        }
        for (key, pipeline) in plan(seed) {
            for cmd in &pipeline {
                assert!(send(&mut c, std::slice::from_ref(cmd)));
                states[key].push(held_state(&mut c, key));
            }
        }
        drop(c);
        server.abandon();
        states
    };
    // Replayed once per seed, for every cut of it.
    let replayed = [models(7), models(8)];
    let run = |seed: u64, point: Option<u64>| -> u64 {
        let CutRun {
            _dir,
            fs,
            path,
            server,
            opened,
        } = CutRun::start(AppendFsync::Always, point);
        let mut c = server.client();
        let (mut acknowledged, mut sent) = ([0usize; 3], [0usize; 3]);
        for (key, pipeline) in plan(seed) {
            sent[key] += pipeline.len();
            if !send(&mut c, &pipeline) {
                break;
            }
            acknowledged[key] = sent[key];
        }
        drop(c);
        let calls = fs.mutations() - opened;
        server.abandon();
        if point.is_none() {
            return calls;
        }
        fs.power_cut().unwrap();
        let server = CutServer::start(&path, &fs, AppendFsync::Always);
        let mut c = server.client();
        let models = &replayed[(seed - 7) as usize];
        for key in 0..3 {
            let got = held_state(&mut c, key);
            let kept = (acknowledged[key]..=sent[key]).find(|&k| models[key][k] == got);
            assert!(
                kept.is_some(),
                "seed {seed}, cut at call {point:?} of {calls}: key {key} holds {got:?}, which \
                 is no state after {} (acknowledged) to {} (sent) of its commands",
                acknowledged[key],
                sent[key]
            );
        }
        drop(c);
        server.abandon();
        calls
    };
    let total = run(7, None);
    let mut rng = SmallRng::seed_from_u64(17);
    let points = 8;
    for i in 0..points {
        run(7 + i % 2, Some(rng.gen_range(1..=total)));
    }
    eprintln!("held runs: {points} power cuts over {total} changing file calls");
}

/// Redis's append-only file keeps a prefix of the writes through a power cut, whatever
/// `appendfsync` says (one file, written in order: what is lost is its end). Strata keeps one
/// log per partition, each synced on its own (and a flush makes one partition's writes
/// permanent in a table), so a cut can keep a later write to one partition and lose an earlier
/// one to another; recovery cuts every partition at the first write missing in any of them
/// (the engine's `cut_point`). Before that cut, this test found such a hole in about 3 % of
/// its cuts (one kept 550 of 1000 `SET`s, 25 of them after the first one lost). 40 pipelines
/// of 25 `SET`s under `appendfsync no`, cut at random calls (`STRATA_PREFIX_CUTS`, 60 by
/// default; 200 found no hole).
#[test]
fn a_power_cut_keeps_a_prefix_of_the_writes_across_keys() {
    let run = |point: Option<u64>| -> (u64, Option<String>) {
        let CutRun {
            _dir,
            fs,
            path,
            server,
            opened,
        } = CutRun::start(AppendFsync::No, point);
        let mut c = server.client();
        let mut sent = 0;
        for p in 0..40 {
            let mut pipe = redis::pipe();
            for j in 0..25 {
                let i = p * 25 + j;
                pipe.cmd("SET").arg(format!("k{i}")).arg(i);
            }
            sent += 25;
            let r: redis::RedisResult<Vec<redis::Value>> = pipe.query(&mut c);
            if r.is_err() {
                break;
            }
        }
        drop(c);
        let calls = fs.mutations() - opened;
        server.abandon();
        if point.is_none() {
            return (calls, None);
        }
        fs.power_cut().unwrap();
        let server = CutServer::start(&path, &fs, AppendFsync::No);
        let mut c = server.client();
        let present: Vec<bool> = (0..sent)
            .map(|i| {
                let v: Option<String> = redis::cmd("GET")
                    .arg(format!("k{i}"))
                    .query(&mut c)
                    .unwrap();
                v.is_some()
            })
            .collect();
        let kept = present.iter().filter(|&&b| b).count();
        let prefix = present.iter().take_while(|&&b| b).count();
        drop(c);
        server.abandon();
        let hole = (kept != prefix).then(|| {
            format!("cut at call {point:?} of {calls}: kept {kept} of {sent}, a prefix of {prefix}")
        });
        (calls, hole)
    };
    let (total, _) = run(None);
    let mut rng = SmallRng::seed_from_u64(3);
    let cuts: usize = std::env::var("STRATA_PREFIX_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let holes: Vec<String> = (0..cuts)
        .filter_map(|_| run(Some(rng.gen_range(1..=total))).1)
        .collect();
    assert!(holes.is_empty(), "writes kept after a lost one: {holes:#?}");
}
