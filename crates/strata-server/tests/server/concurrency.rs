//! Many commands and many clients at once.

use redis::Commands;

use super::TestServer;

#[test]
fn a_pipeline_of_10000_commands_is_answered_in_order() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..5_000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i);
        pipe.cmd("INCR").arg("counter");
    }
    let replies: Vec<redis::Value> = pipe.query(&mut c).unwrap();
    assert_eq!(replies.len(), 10_000);
    for (i, pair) in replies.chunks(2).enumerate() {
        assert_eq!(pair[0], redis::Value::Okay);
        assert_eq!(pair[1], redis::Value::Int(i as i64 + 1));
    }
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.cmd("GET").arg(format!("key:{}", i % 5_000));
    }
    let values: Vec<Option<i64>> = pipe.query(&mut c).unwrap();
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, Some((i % 5_000) as i64));
    }
}

#[test]
fn two_hundred_clients_incrementing_lose_no_update() {
    const CLIENTS: usize = 200;
    const INCRS_PER_CLIENT: usize = 50;
    let server = TestServer::start();
    let url = server.url();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..INCRS_PER_CLIENT {
                    let _: i64 = c.incr("shared", 1).unwrap();
                    let _: i64 = c.incr(format!("own:{i}"), 2).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut c = server.client();
    let total: i64 = c.get("shared").unwrap();
    assert_eq!(total, (CLIENTS * INCRS_PER_CLIENT) as i64);
    for i in 0..CLIENTS {
        let own: i64 = c.get(format!("own:{i}")).unwrap();
        assert_eq!(own, (2 * INCRS_PER_CLIENT) as i64);
    }
}

#[test]
fn pipelined_sets_merged_into_one_write_behave_like_single_sets() {
    let server = TestServer::start();
    let mut c = server.client();
    redis::cmd("JSON.SET")
        .arg("doc:7")
        .arg("$")
        .arg("{}")
        .query::<()>(&mut c)
        .unwrap();
    let mut pipe = redis::pipe();
    for i in 0..2_000 {
        // The same key twice in one run: the later value wins, as with separate SETs.
        pipe.cmd("SET").arg(format!("doc:{}", i % 1_000)).arg(i);
    }
    let replies: Vec<redis::Value> = pipe.query(&mut c).unwrap();
    assert!(replies.iter().all(|r| *r == redis::Value::Okay));
    for i in [0, 7, 999] {
        let v: i64 = c.get(format!("doc:{i}")).unwrap();
        assert_eq!(v, 1_000 + i);
    }
    // The document under doc:7 was replaced by the string, as SET does.
    let t: String = redis::cmd("TYPE").arg("doc:7").query(&mut c).unwrap();
    assert_eq!(t, "string");
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 1_000);
}

/// Clients pipelining writes to one hot key at once (runs that the server serves under one
/// hold of the key's partition lock, from both network threads): no write is lost or doubled,
/// and each pipeline's replies count up as its own writes land between the others'.
#[test]
fn clients_pipelining_on_one_hot_key_lose_no_write() {
    const CLIENTS: usize = 16;
    const PIPELINES: usize = 20;
    const PER_PIPELINE: usize = 25;
    let server = TestServer::start();
    let url = server.url();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                for p in 0..PIPELINES {
                    // Runs of one key each.
                    let mut pipe = redis::pipe();
                    for i in 0..PER_PIPELINE {
                        pipe.cmd("SADD").arg("hotset").arg(format!("{c}-{p}-{i}"));
                    }
                    for _ in 0..PER_PIPELINE {
                        pipe.cmd("HINCRBY").arg("hothash").arg("n").arg(1);
                    }
                    for _ in 0..PER_PIPELINE {
                        pipe.cmd("RPUSH").arg("hotlist").arg(c);
                    }
                    let replies: Vec<i64> = pipe.query(&mut conn).unwrap();
                    let (added, rest) = replies.split_at(PER_PIPELINE);
                    assert!(added.iter().all(|&n| n == 1), "each member is new");
                    // Counters and list lengths only grow within a pipeline.
                    for seen in rest.chunks(PER_PIPELINE) {
                        assert!(seen.windows(2).all(|x| x[0] < x[1]), "{seen:?}");
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let total = (CLIENTS * PIPELINES * PER_PIPELINE) as i64;
    let mut c = server.client();
    assert_eq!(c.scard::<_, i64>("hotset").unwrap(), total);
    assert_eq!(c.hget::<_, _, i64>("hothash", "n").unwrap(), total);
    assert_eq!(c.llen::<_, i64>("hotlist").unwrap(), total);
}

/// Clients pipelining scripts at once (a pipeline of scripts runs under one exclusive hold of
/// the exec lock, `conn.rs`): every script's read-modify-write is atomic (no two replies equal,
/// none lost), each client sees its own replies in order, and a GET in the middle of a
/// pipeline reads what the scripts before it wrote.
#[test]
fn pipelined_scripts_from_many_clients_are_each_atomic() {
    const CLIENTS: usize = 4;
    const SCRIPTS: usize = 200;
    let server = TestServer::start();
    let script = "local v = tonumber(redis.call('GET', KEYS[1]) or '0') + 1 \
                  redis.call('SET', KEYS[1], v) return v";
    let handles: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut c = server.client();
            std::thread::spawn(move || {
                let mut p = redis::pipe();
                for i in 0..SCRIPTS {
                    if i == SCRIPTS / 2 {
                        p.cmd("GET").arg("counter");
                    }
                    p.cmd("EVAL").arg(script).arg(1).arg("counter");
                }
                let replies: Vec<redis::Value> = p.query(&mut c).unwrap();
                let mut mine = Vec::new();
                let mut read_in_middle = None;
                for (i, r) in replies.iter().enumerate() {
                    if i == SCRIPTS / 2 {
                        let v: String = redis::from_redis_value(r).unwrap();
                        read_in_middle = Some(v.parse::<i64>().unwrap());
                    } else {
                        mine.push(redis::from_redis_value::<i64>(r).unwrap());
                    }
                }
                (mine, read_in_middle.unwrap())
            })
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        let (mine, middle) = h.join().unwrap();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "out of order: {mine:?}"
        );
        assert!(
            middle >= mine[SCRIPTS / 2 - 1],
            "GET read {middle} after {}",
            mine[SCRIPTS / 2 - 1]
        );
        all.extend(mine);
    }
    all.sort_unstable();
    let want: Vec<i64> = (1..=(CLIENTS * SCRIPTS) as i64).collect();
    assert_eq!(all, want, "a script's increment was lost or seen twice");
}

/// Clients moving elements between two lists (RPOPLPUSH, LMOVE) while others push to the
/// destination and pop from the source: every element ends up exactly once somewhere, and
/// every move and pop got a distinct element. Each move reads both lists and writes one batch;
/// without the exec lock held exclusively, two moves popped the same element, or a move's
/// batch overwrote a concurrent push.
#[test]
fn concurrent_list_moves_lose_and_duplicate_no_element() {
    const SEEDED: usize = 3_000;
    const MOVERS: usize = 4;
    const MOVES_EACH: usize = 500;
    const PUSHES: usize = 1_000;
    let server = TestServer::start_with(strata_server::ServerConfig {
        io_threads: Some(4),
        ..strata_server::ServerConfig::default()
    });
    let mut c = server.client();
    for chunk in (0..SEEDED).collect::<Vec<_>>().chunks(500) {
        let items: Vec<String> = chunk.iter().map(|i| format!("seed{i}")).collect();
        let _: i64 = c.rpush("src", items).unwrap();
    }
    let url = server.url();
    let mut workers = Vec::new();
    for m in 0..MOVERS {
        let url = url.clone();
        workers.push(std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut got = Vec::new();
            for i in 0..MOVES_EACH {
                let moved: Option<String> = if (i + m) % 2 == 0 {
                    redis::cmd("RPOPLPUSH").arg("src").arg("dst").query(&mut c)
                } else {
                    redis::cmd("LMOVE")
                        .arg("src")
                        .arg("dst")
                        .arg("LEFT")
                        .arg("RIGHT")
                        .query(&mut c)
                }
                .unwrap();
                got.extend(moved);
            }
            got
        }));
    }
    let pusher = {
        let url = url.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            for i in 0..PUSHES {
                let _: i64 = c.lpush("dst", format!("pushed{i}")).unwrap();
            }
        })
    };
    let popper = {
        let url = url.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut got = Vec::new();
            for _ in 0..PUSHES {
                let v: Option<String> = c.lpop("src", None).unwrap();
                got.extend(v);
            }
            got
        })
    };
    let mut moved = Vec::new();
    for w in workers {
        moved.extend(w.join().unwrap());
    }
    pusher.join().unwrap();
    let popped = popper.join().unwrap();

    let src: Vec<String> = c.lrange("src", 0, -1).unwrap();
    let dst: Vec<String> = c.lrange("dst", 0, -1).unwrap();
    let mut everywhere: Vec<&String> = src.iter().chain(&dst).chain(&popped).collect();
    everywhere.sort();
    let total = everywhere.len();
    everywhere.dedup();
    assert_eq!(total, everywhere.len(), "an element is in two places");
    let mut expected: Vec<String> = (0..SEEDED)
        .map(|i| format!("seed{i}"))
        .chain((0..PUSHES).map(|i| format!("pushed{i}")))
        .collect();
    expected.sort();
    let everywhere: Vec<String> = everywhere.into_iter().cloned().collect();
    assert_eq!(everywhere, expected, "elements lost or invented");
    let mut moved_sorted = moved.clone();
    moved_sorted.sort();
    moved_sorted.dedup();
    assert_eq!(moved_sorted.len(), moved.len(), "one element moved twice");
    let len_src: usize = c.llen("src").unwrap();
    let len_dst: usize = c.llen("dst").unwrap();
    assert_eq!(
        (len_src, len_dst),
        (src.len(), dst.len()),
        "counts disagree"
    );
}

/// On the log engine (whose partitions are not held across a pipeline's commands), pipelined
/// pops and another client's pops never hand out one member twice, and together they take
/// every member once. Pop windows (members read ahead by one pop for the next pop of the
/// pipeline) are only for an engine that holds the partition between them; on the log engine
/// they handed out members another client had already popped.
#[test]
fn pipelined_and_concurrent_pops_on_the_log_engine_take_each_member_once() {
    const MEMBERS: usize = 4_000;
    let server = TestServer::start_log_engine(strata_server::ServerConfig {
        io_threads: Some(4),
        ..strata_server::ServerConfig::default()
    });
    let mut c = server.client();
    for kind in ["zset", "set"] {
        for chunk in (0..MEMBERS).collect::<Vec<_>>().chunks(500) {
            let mut cmd = redis::cmd(if kind == "zset" { "ZADD" } else { "SADD" });
            cmd.arg(kind);
            for i in chunk {
                if kind == "zset" {
                    cmd.arg(*i);
                }
                cmd.arg(format!("m{i}"));
            }
            let _: i64 = cmd.query(&mut c).unwrap();
        }
        let pop = if kind == "zset" { "ZPOPMIN" } else { "SPOP" };
        let url = server.url();
        let workers: Vec<_> = (0..3)
            .map(|w| {
                let url = url.clone();
                std::thread::spawn(move || {
                    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                    let mut got = Vec::new();
                    loop {
                        let mut p = redis::pipe();
                        for _ in 0..if w == 0 { 1 } else { 32 } {
                            p.cmd(pop).arg(kind);
                        }
                        let replies: Vec<redis::Value> = p.query(&mut c).unwrap();
                        let mut any = false;
                        for r in replies {
                            let member = match r {
                                redis::Value::Array(items) if !items.is_empty() => {
                                    items.into_iter().next()
                                }
                                redis::Value::BulkString(b) => Some(redis::Value::BulkString(b)),
                                _ => None,
                            };
                            if let Some(redis::Value::BulkString(b)) = member {
                                got.push(String::from_utf8(b).unwrap());
                                any = true;
                            }
                        }
                        if !any {
                            return got;
                        }
                    }
                })
            })
            .collect();
        let mut all: Vec<String> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        let total = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), total, "{kind}: a member was popped twice");
        assert_eq!(total, MEMBERS, "{kind}: members popped");
    }
}

/// A pipelined SET whose key the engine refuses (longer than its 64 KiB key limit) fails
/// alone: the SETs around it, merged into one engine write otherwise, are stored as if each
/// ran by itself (the merged write used to fail whole).
#[test]
fn an_oversized_key_in_a_pipeline_of_sets_fails_alone() {
    let server = TestServer::start();
    let mut c = server.client();
    let huge = "k".repeat(70 << 10);
    let mut p = redis::pipe();
    p.cmd("SET").arg("before").arg("1");
    p.cmd("SET").arg(&huge).arg("v");
    p.cmd("SET").arg("after").arg("2");
    let replies: Vec<redis::RedisResult<redis::Value>> = {
        let r: redis::RedisResult<Vec<redis::Value>> = p.query(&mut c);
        match r {
            Ok(v) => v.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        }
    };
    let _ = replies;
    let before: Option<String> = c.get("before").unwrap();
    let after: Option<String> = c.get("after").unwrap();
    assert_eq!(before.as_deref(), Some("1"));
    assert_eq!(after.as_deref(), Some("2"));
}

/// A name holds a string or a document, never both, however SET and JSON.SET of it race: the
/// store is checked directly after every round (readers prefer the string, so through the
/// protocol a name holding both would just look like a string with a hidden document).
#[test]
fn racing_set_and_json_set_never_leave_both_a_string_and_a_document() {
    use strata_server::keyspace::{string_key, Space};
    const ROUNDS: usize = 300;
    let server = TestServer::start_with(strata_server::ServerConfig {
        io_threads: Some(4),
        ..strata_server::ServerConfig::default()
    });
    let mut c = server.client();
    let _: () = redis::cmd("JSON.SET")
        .arg("warm")
        .arg("$")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let url = server.url();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(3));
    let spawn = |json: bool| {
        let url = url.clone();
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            for i in 0..ROUNDS {
                barrier.wait();
                let name = format!("race{i}");
                if json {
                    let _: redis::RedisResult<redis::Value> = redis::cmd("JSON.SET")
                        .arg(&name)
                        .arg("$")
                        .arg("{\"a\":1}")
                        .query(&mut c);
                } else {
                    let _: () = redis::cmd("SET").arg(&name).arg("s").query(&mut c).unwrap();
                }
                barrier.wait();
            }
        })
    };
    let setter = spawn(false);
    let jsoner = spawn(true);
    let db = server.db().clone();
    let mut both = 0;
    for i in 0..ROUNDS {
        barrier.wait();
        barrier.wait();
        let name = format!("race{i}");
        let string = db.get(&string_key(0, name.as_bytes())).unwrap().is_some();
        let doc = db
            .get(&Space::Docs.key(0, name.as_bytes()).unwrap())
            .unwrap()
            .is_some();
        if string && doc {
            both += 1;
        }
    }
    setter.join().unwrap();
    jsoner.join().unwrap();
    assert_eq!(both, 0, "names holding both a string and a document");
}

/// Commands that read several keys see them at one point of the commands' order: while one
/// member moves back and forth between two sets (SMOVE, one atomic command), their union always
/// holds it once and their intersection never does (the reads of the two sets used to be
/// separate, so a move could land between them).
#[test]
fn multi_key_reads_see_a_moving_member_exactly_once() {
    const ROUNDS: usize = 2_000;
    let server = TestServer::start_with(strata_server::ServerConfig {
        io_threads: Some(4),
        ..strata_server::ServerConfig::default()
    });
    let mut c = server.client();
    let _: i64 = c.sadd("a", "x").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mover = {
        let url = server.url();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: i64 = c.smove("a", "b", "x").unwrap();
                let _: i64 = c.smove("b", "a", "x").unwrap();
            }
        })
    };
    let mut wrong = Vec::new();
    for _ in 0..ROUNDS {
        let union: Vec<String> = c.sunion(&["a", "b"]).unwrap();
        let inter: Vec<String> = c.sinter(&["a", "b"]).unwrap();
        let card: i64 = redis::cmd("SINTERCARD")
            .arg(2)
            .arg("a")
            .arg("b")
            .query(&mut c)
            .unwrap();
        if union.len() != 1 || !inter.is_empty() || card != 0 {
            wrong.push((union, inter, card));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    mover.join().unwrap();
    assert!(
        wrong.is_empty(),
        "{} of {ROUNDS} reads saw a half move: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
}

/// DBSIZE reads counts that every write keeps (the engine's key counts): after clients create
/// and remove keys of every type at once, documents and keys that expire included, on one
/// small set of names so that their writes collide, it equals a walk of the keys (KEYS *) in
/// each database; again after the engine compacts everything (expired strings become stubs)
/// and after a restart (the counts are taken again at startup).
#[test]
fn dbsize_equals_a_walk_after_concurrent_creates_and_removes() {
    use rand::{Rng, SeedableRng};
    const CLIENTS: u64 = 6;
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir.path(), strata_server::ServerConfig::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|seed| {
            let mut c = server.client();
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                for _ in 0..150 {
                    let mut pipe = redis::pipe();
                    for _ in 0..10 {
                        let k = format!("k{}", rng.gen_range(0..20));
                        let k2 = format!("k{}", rng.gen_range(0..20));
                        let m = format!("m{}", rng.gen_range(0..3));
                        let cmd: Vec<&str> = match rng.gen_range(0..22) {
                            0 => vec!["SET", &k, "v"],
                            1 => vec!["SET", &k, "v", "PX", "1"],
                            2 => vec!["DEL", &k, &k2],
                            3 => vec!["HSET", &k, &m, "v"],
                            4 => vec!["HDEL", &k, &m],
                            5 => vec!["SADD", &k, &m],
                            6 => vec!["SREM", &k, &m],
                            7 => vec!["SPOP", &k],
                            8 => vec!["LPUSH", &k, &m],
                            9 => vec!["LPOP", &k],
                            10 => vec!["ZADD", &k, "1", &m],
                            11 => vec!["ZPOPMIN", &k],
                            12 => vec!["RENAME", &k, &k2],
                            13 => vec!["MOVE", &k, "1"],
                            14 => vec!["MSET", &k, "a", &k2, "b"],
                            15 => vec!["COPY", &k, &k2, "DB", "1"],
                            16 => vec!["SUNIONSTORE", &k, &k2],
                            17 => vec!["JSON.SET", &k, "$", "{\"a\":1}"],
                            18 => vec!["JSON.DEL", &k],
                            19 => vec!["GETDEL", &k],
                            20 => vec!["EXPIRE", &k, "-1"],
                            _ => vec!["SETNX", &k, "v"],
                        };
                        let mut c = redis::cmd(cmd[0]);
                        for a in &cmd[1..] {
                            c.arg(*a);
                        }
                        pipe.add_command(c).ignore();
                    }
                    // Replies (WRONGTYPE and all) do not matter here: the keyspace does.
                    let _: redis::RedisResult<()> = pipe.query(&mut c);
                }
            })
        })
        .collect();
    for t in clients {
        t.join().unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    let check = |c: &mut redis::Connection, when: &str| {
        for db in ["0", "1"] {
            let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
            let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
            let n: usize = redis::cmd("DBSIZE").query(c).unwrap();
            assert_eq!(n, keys.len(), "{when}, database {db}: {keys:?}");
        }
        let _: () = redis::cmd("SELECT").arg("0").query(c).unwrap();
    };
    let mut c = server.client();
    check(&mut c, "after the clients");
    server.db().compact().unwrap();
    check(&mut c, "after a full compaction");
    let total: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!(total > 0, "the clients left some keys");
    drop(c);
    server.stop();
    let server = TestServer::start_in(dir.path(), strata_server::ServerConfig::default());
    let mut c = server.client();
    check(&mut c, "after a restart");
}

/// An expired key whose expiry-index entry is missing (a crash between EXPIRE's two writes can
/// lose it) is still deleted: compaction finds the record long expired and hands it to active
/// expiry, so it stops counting in DBSIZE. A key that expired moments ago keeps its bytes
/// until the grace period passes (a command that judged it live just before its time must not
/// find it emptied).
#[test]
fn an_expired_key_without_an_index_entry_is_removed_after_compaction() {
    let server = TestServer::start();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // The documented record: header 0x80 (a string with an expiry time), the time, the bytes.
    let record = |at: u64| {
        let mut r = vec![0x80u8];
        r.extend_from_slice(&at.to_le_bytes());
        r.extend_from_slice(&[b'v'; 100]);
        r
    };
    let db = server.db();
    db.put(b"k\x00orphan", &record(now_ms - 120_000)).unwrap();
    db.put(b"k\x00recent", &record(now_ms - 1_000)).unwrap();
    let mut c = server.client();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 2, "counted until a write removes them");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert!(keys.is_empty(), "expired keys are invisible: {keys:?}");
    db.compact().unwrap();
    assert_eq!(
        db.get(b"k\x00recent").unwrap().map(|v| v.len()),
        Some(109),
        "within the grace period the bytes stay"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if db.get(b"k\x00orphan").unwrap().is_none() {
            assert_eq!(n, 1, "the orphan is gone from the count");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the orphan was never removed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Job queues on lists, as applications run them: workers blocked in BLPOP on three queues
/// without a timeout, more connections blocking and timing out on lists nobody pushes to (so
/// blocking, waking and leaving go on all the time), and pushers racing each other; a `stop`
/// job per worker at the end. Every job is taken exactly once and every worker stops: a lost
/// wake-up (a waiter that wakes at a change but looks again only when one of its lists
/// changed, or a command about to block that missed a push in between) leaves a worker
/// waiting for ever, which the deadline reports.
#[test]
fn blocked_workers_take_every_job_once() {
    const QUEUES: usize = 3;
    const PUSHERS: usize = 4;
    const JOBS_PER_PUSHER: usize = 500;
    const WORKERS: usize = 6;
    const IDLE: usize = 20;
    let server = TestServer::start();
    let url = server.url();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let idle: Vec<_> = (0..IDLE)
        .map(|i| {
            let (url, done) = (url.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    let got: Option<(String, String)> = redis::cmd("BLPOP")
                        .arg(format!("idle:{i}"))
                        .arg(0.05)
                        .query(&mut c)
                        .unwrap();
                    assert_eq!(got, None, "nobody pushes to idle:{i}");
                }
            })
        })
        .collect();
    let (finished_tx, finished_rx) = std::sync::mpsc::channel();
    for w in 0..WORKERS {
        let (url, finished) = (url.clone(), finished_tx.clone());
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut taken = Vec::new();
            loop {
                let mut cmd = redis::cmd("BLPOP");
                // Workers listen to the queues in different orders.
                for q in 0..QUEUES {
                    cmd.arg(format!("jobs:{}", (q + w) % QUEUES));
                }
                let (_, job): (String, String) = cmd.arg(0).query(&mut c).unwrap();
                if job == "stop" {
                    break;
                }
                taken.push(job);
            }
            let _ = finished.send(taken);
        });
    }
    let pushers: Vec<_> = (0..PUSHERS)
        .map(|p| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for j in 0..JOBS_PER_PUSHER {
                    let queue = format!("jobs:{}", (p + j) % QUEUES);
                    let _: i64 = c.rpush(queue, format!("{p}:{j}")).unwrap();
                }
            })
        })
        .collect();
    for p in pushers {
        p.join().unwrap();
    }
    let mut c = server.client();
    for w in 0..WORKERS {
        let _: i64 = c.rpush(format!("jobs:{}", w % QUEUES), "stop").unwrap();
    }
    let mut all = Vec::new();
    for _ in 0..WORKERS {
        let taken = finished_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a worker still waits though jobs and its stop were pushed");
        all.extend(taken);
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    for i in idle {
        i.join().unwrap();
    }
    let taken = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), taken, "a job was taken twice");
    assert_eq!(taken, PUSHERS * JOBS_PER_PUSHER, "jobs taken");
    let left: usize = (0..QUEUES)
        .map(|q| c.llen::<_, usize>(format!("jobs:{q}")).unwrap())
        .sum();
    assert_eq!(left, 0, "jobs left in the queues");
}

/// CLIENT PAUSE WRITE: reads go on, a write (a SET, a transaction holding one) waits until
/// CLIENT UNPAUSE and then runs; nothing it would change is visible before.
#[test]
fn client_pause_write_holds_writes_until_unpause() {
    let server = TestServer::start();
    let mut admin = server.client();
    let _: () = admin.set("k", "old").unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query(&mut admin)
        .unwrap();
    let url = server.url();
    let writer = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = c.set("k", "new").unwrap();
        let (n,): (i64,) = redis::pipe().atomic().incr("n", 1).query(&mut c).unwrap();
        n
    });
    // The held writer counts in blocked_clients, as in Redis 7.0.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query(&mut admin).unwrap();
        if info.contains("blocked_clients:1\r\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Reads are served during the pause, and see nothing of the held write.
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let v: String = admin.get("k").unwrap();
        assert_eq!(v, "old", "a write ran during CLIENT PAUSE WRITE");
    }
    assert!(
        !writer.is_finished(),
        "the writer was answered during the pause"
    );
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .unwrap();
    assert_eq!(writer.join().unwrap(), 1);
    let v: String = admin.get("k").unwrap();
    assert_eq!(v, "new");
    let info: String = redis::cmd("INFO").arg("clients").query(&mut admin).unwrap();
    assert!(info.contains("blocked_clients:0\r\n"), "{info}");
}

/// CLIENT PAUSE ALL holds every command, reads too, until its timeout.
#[test]
fn client_pause_all_holds_reads_until_it_ends() {
    let server = TestServer::start();
    let mut admin = server.client();
    let mut reader = server.client();
    let _: () = admin.set("k", "v").unwrap();
    let started = std::time::Instant::now();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(200)
        .arg("ALL")
        .query(&mut admin)
        .unwrap();
    let v: String = reader.get("k").unwrap();
    assert_eq!(v, "v");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(200),
        "a read ran during CLIENT PAUSE ALL"
    );
}

/// A connection held by CLIENT PAUSE still answers CLIENT KILL: it closes at once instead of
/// when the pause ends.
#[test]
fn a_paused_connection_can_be_killed() {
    use std::io::{Read, Write};
    let server = TestServer::start();
    let mut admin = server.client();
    let mut held = server.raw();
    held.write_all(b"CLIENT ID\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = held.read(&mut buf).unwrap();
    let id: String = String::from_utf8_lossy(&buf[1..n - 2]).into_owned();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query(&mut admin)
        .unwrap();
    held.write_all(b"SET k v\r\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    held.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let started = std::time::Instant::now();
    let n = held.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the held SET was answered: {:?}", &buf[..n]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "the killed connection stayed open"
    );
    let v: Option<String> = admin.get("k").unwrap();
    assert_eq!(v, None, "the killed client's held write ran");
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .unwrap();
}

/// Keys do not expire during a pause (as in Redis: the data set stays as it was paused), and
/// do once it ends.
#[test]
fn keys_wait_out_a_pause_to_expire() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..5 {
        let _: () = redis::cmd("SET")
            .arg(format!("t{i}"))
            .arg("v")
            .arg("PX")
            .arg(20)
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(600)
        .arg("WRITE")
        .query(&mut c)
        .unwrap();
    let expired = |c: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(expired(&mut c), 0, "active expiry ran during the pause");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while expired(&mut c) < 5 {
        assert!(std::time::Instant::now() < deadline, "keys never expired");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// CLIENT PAUSE WRITE holds the writes pipelined after it on its own connection, and once it
/// has answered, no write of a client writing without pause runs until UNPAUSE.
#[test]
fn no_write_runs_once_client_pause_answered() {
    use std::io::{Read, Write};
    let server = TestServer::start();
    let mut admin = server.client();
    // A writer that pipelines INCRs as fast as it can.
    let url = server.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut pipe = redis::pipe();
                for _ in 0..16 {
                    pipe.incr("n", 1).ignore();
                }
                let _: () = pipe.query(&mut c).unwrap();
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut own = server.raw();
    own.write_all(b"CLIENT PAUSE 60000 WRITE\r\nSET k v\r\nGET k\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let n = own.read(&mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        b"+OK\r\n",
        "only PAUSE answers while it holds the SET"
    );
    std::thread::sleep(std::time::Duration::from_millis(50));
    let first: i64 = admin.get("n").unwrap();
    assert!(first > 0, "the writer never ran");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let later: i64 = admin.get("n").unwrap();
    assert_eq!(first, later, "writes ran during CLIENT PAUSE WRITE");
    let k: Option<String> = admin.get("k").unwrap();
    assert_eq!(k, None, "the SET pipelined after PAUSE ran");
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .unwrap();
    own.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    while got.len() < b"+OK\r\n$1\r\nv\r\n".len() {
        let n = own.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"+OK\r\n$1\r\nv\r\n");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let after: i64 = admin.get("n").unwrap();
    assert!(after > later, "the writer did not go on after UNPAUSE");
}
