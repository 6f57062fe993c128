//! Client-side caching (CLIENT TRACKING) against the real redis-server: the same seeded command
//! sequences on both, from a tracking connection (A) and a writer (B), in each mode (default,
//! OPTIN, OPTOUT, NOLOOP, BCAST with prefixes, REDIRECT to a RESP2 subscriber); after every
//! command both connections are read up to a PING's reply, so each invalidation message, and
//! where it falls between replies, is compared byte for byte.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::differential::{words, Pair, Raw};

/// The PING that ends each read: with an argument no command here answers, so its reply
/// (`pong`, which differs in RESP2's subscribed mode) cannot be mistaken for another.
const SYNC: &[&str] = &["PING", "sync-marker"];

/// Reads replies (and pushed messages) on `conn` up to the reply to a [`SYNC`] sent now.
fn drain(conn: &mut Raw, pong: &[u8]) -> Vec<Vec<u8>> {
    conn.send(&words(SYNC));
    read_to(conn, pong)
}

/// Reads replies and pushed messages on `conn` up to `pong` (a PING already sent).
fn read_to(conn: &mut Raw, pong: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let r = conn.reply();
        if r == pong {
            return out;
        }
        out.push(r);
        assert!(out.len() < 10_000, "no PING reply");
    }
}

fn show(rs: &[Vec<u8>]) -> Vec<String> {
    rs.iter()
        .map(|r| String::from_utf8_lossy(r).replace("\r\n", " "))
        .collect()
}

struct Sides {
    pair: Pair,
    /// What a PING answers on A and on B (B may be a RESP2 subscriber).
    pong: [Vec<u8>; 2],
    compared: usize,
    /// Invalidation messages among them.
    invalidations: usize,
    /// BCAST mode: see [`Sides::run_pipeline`].
    bcast: bool,
}

impl Sides {
    /// Sends `cmd` on connection `conn` of both servers, then reads both connections of both
    /// up to a PING's reply and compares everything read.
    fn run(&mut self, conn: usize, cmd: &[Vec<u8>], context: &str) {
        self.run_pipeline(conn, &[cmd.to_vec()], context);
    }

    /// [`Sides::run`] for several commands sent in one write.
    fn run_pipeline(&mut self, conn: usize, cmds: &[Vec<Vec<u8>>], context: &str) {
        let cmd = cmds.concat();
        // The PING goes in the same write, so both servers read it with the commands: a
        // broadcast made by the batch then follows the PING's reply on both (Redis sends it
        // before its event loop sleeps), and is read with the next command's.
        let mut with_ping = cmds.to_vec();
        with_ping.push(words(SYNC));
        for side in 0..2 {
            self.pair.conns[side][conn].send_all(&with_ping);
        }
        for c in [conn, 1 - conn] {
            if std::env::var("STRATA_TRACKING_TRACE").is_ok() {
                eprintln!(
                    "{context}: {:?} on {conn}, reading {c}",
                    show(&[cmd.concat()])
                );
            }
            let bcast = self.bcast;
            let got: Vec<Vec<Vec<u8>>> = (0..2)
                .map(|side| {
                    let raw = &mut self.pair.conns[side][c];
                    let mut got = if c == conn {
                        read_to(raw, &self.pong[c])
                    } else {
                        drain(raw, &self.pong[c])
                    };
                    if bcast {
                        // Where a batch's broadcast falls among its replies depends on how
                        // the server's reads cut the batch: read everything up to a second
                        // PING, and compare the messages and the replies each in order.
                        got.push(self.pong[c].clone());
                        got.extend(drain(raw, &self.pong[c]));
                        let (mut pushes, replies): (Vec<_>, Vec<_>) =
                            got.into_iter().partition(|r| r.starts_with(b">"));
                        pushes.extend(replies);
                        got = pushes;
                    }
                    got
                })
                .collect();
            if std::env::var("STRATA_TRACKING_TRACE").is_ok() {
                eprintln!("  redis {:?}\n  ours  {:?}", show(&got[0]), show(&got[1]));
            }
            assert!(
                got[0] == got[1],
                "{context}: {:?} on connection {conn}; connection {c} read\n redis:  {:?}\n strata: {:?}",
                show(std::slice::from_ref(&cmd.concat())),
                show(&got[0]),
                show(&got[1])
            );
            self.compared += got[0].len();
            self.invalidations += got[0]
                .iter()
                .filter(|r| r.windows(10).any(|w| w == b"invalidate"))
                .count();
        }
    }
}

const NAMES: &[&str] = &["k1", "k2", "user:1", "user:2", "h", "l", "s", "other"];

fn random_read(rng: &mut SmallRng) -> Vec<Vec<u8>> {
    let k = NAMES[rng.gen_range(0..NAMES.len())];
    let k2 = NAMES[rng.gen_range(0..NAMES.len())];
    let cmd: Vec<&str> = match rng.gen_range(0..9) {
        0 => vec!["MGET", k, k2],
        1 => vec!["HGET", "h", "f"],
        2 => vec!["LRANGE", "l", "0", "-1"],
        3 => vec!["EXISTS", k, k2],
        4 => vec!["STRLEN", k],
        5 => vec!["SCARD", "s"],
        6 => vec!["TYPE", k],
        _ => vec!["GET", k],
    };
    words(&cmd)
}

fn random_write(rng: &mut SmallRng, round: usize) -> Vec<Vec<u8>> {
    let strings = ["k1", "k2", "user:1", "user:2", "other"];
    let k = strings[rng.gen_range(0..strings.len())];
    let k2 = strings[rng.gen_range(0..strings.len())];
    let v = format!("v{round}");
    let cmd: Vec<&str> = match rng.gen_range(0..11) {
        0 => vec!["INCR", "k1"],
        1 => vec!["DEL", k, k2],
        2 => vec!["HSET", "h", "f", &v],
        3 => vec!["LPUSH", "l", &v],
        4 => vec!["EXPIRE", k, "1000"],
        5 => vec!["MSET", k, &v, k2, &v],
        6 => vec!["SADD", "s", &v],
        7 => vec!["APPEND", k, "x"],
        8 => vec!["SET", k, &v, "NX"],
        _ => vec!["SET", k, &v],
    };
    words(&cmd)
}

/// One seeded run in `mode` (the words after CLIENT TRACKING ON).
fn run_mode(seed: u64, mode: &[&str], redirect: bool) -> usize {
    let mut pair = Pair::start();
    let resp3_pong = b"$11\r\nsync-marker\r\n".to_vec();
    let subscribed_pong = b"*2\r\n$4\r\npong\r\n$11\r\nsync-marker\r\n".to_vec();
    for side in 0..2 {
        // HELLO's reply names the server: not compared.
        pair.conns[side][0].call(&words(&["HELLO", "3"]));
        let mut on = words(&["CLIENT", "TRACKING", "ON"]);
        on.extend(words(mode));
        if redirect {
            // B receives A's invalidations as a RESP2 subscriber (ids differ between servers).
            let id = pair.conns[side][1].call(&words(&["CLIENT", "ID"]));
            let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
            let sub = pair.conns[side][1].call(&words(&["SUBSCRIBE", "__redis__:invalidate"]));
            assert!(sub.starts_with(b"*3"), "{}", String::from_utf8_lossy(&sub));
            on.extend(words(&["REDIRECT", &id]));
        }
        let ok = pair.conns[side][0].call(&on);
        assert_eq!(ok, b"+OK\r\n", "CLIENT TRACKING ON {mode:?}");
    }
    let mut sides = Sides {
        pair,
        pong: [
            resp3_pong.clone(),
            if redirect {
                subscribed_pong
            } else {
                resp3_pong
            },
        ],
        compared: 0,
        invalidations: 0,
        bcast: mode.contains(&"BCAST"),
    };
    let optin = mode.contains(&"OPTIN");
    let optout = mode.contains(&"OPTOUT");
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 0..600 {
        let context = format!("tracking {mode:?} redirect {redirect}, seed {seed}, round {round}");
        // In the redirect runs B is subscribed (RESP2): only A sends commands.
        let writer = if redirect || rng.gen_bool(0.5) { 0 } else { 1 };
        match rng.gen_range(0..20) {
            0..=6 if (optin || optout) && rng.gen_bool(0.5) => {
                // CLIENT CACHING and the read it is for, in one write.
                let yes = if optin { "YES" } else { "NO" };
                let cmds = vec![words(&["CLIENT", "CACHING", yes]), random_read(&mut rng)];
                sides.run_pipeline(0, &cmds, &context);
            }
            0..=6 => sides.run(0, &random_read(&mut rng), &context),
            7..=13 => sides.run(writer, &random_write(&mut rng, round), &context),
            14 if optin || optout => {
                let yes = if optin { "YES" } else { "NO" };
                sides.run(0, &words(&["CLIENT", "CACHING", yes]), &context);
                sides.run(0, &random_read(&mut rng), &context);
            }
            15 => {
                // A transaction's reads are remembered, its own changes follow EXEC's reply.
                let tx = vec![
                    words(&["MULTI"]),
                    random_read(&mut rng),
                    random_write(&mut rng, round),
                    words(&["EXEC"]),
                ];
                sides.run_pipeline(0, &tx, &context);
            }
            16 => {
                // A script that reads remembers the keys it declared, whatever it read; one
                // that only writes remembers none.
                let k = NAMES[rng.gen_range(0..5)];
                let k2 = NAMES[rng.gen_range(0..5)];
                let script = [
                    "return redis.call('GET', KEYS[1])",
                    "return redis.call('GET', 'other')",
                    "return redis.call('SET', 'other', 'x')",
                    "return redis.call('PING')",
                ][rng.gen_range(0..4)];
                let eval = if rng.gen_bool(0.3) && !script.contains("SET") {
                    "EVAL_RO"
                } else {
                    "EVAL"
                };
                sides.run(0, &words(&[eval, script, "2", k, k2]), &context);
            }
            17 if rng.gen_bool(0.1) => sides.run(writer, &words(&["FLUSHDB"]), &context),
            // (The redirect's id differs between the servers.)
            18 if !redirect => sides.run(0, &words(&["CLIENT", "TRACKINGINFO"]), &context),
            19 if !redirect => sides.run(0, &words(&["CLIENT", "GETREDIR"]), &context),
            _ => sides.run(writer, &random_write(&mut rng, round), &context),
        }
    }
    // A pipeline of own writes and reads: each own invalidation right after its reply.
    let pipeline: Vec<Vec<Vec<u8>>> = [
        &["GET", "k1"][..],
        &["SET", "k1", "a"],
        &["GET", "k1"],
        &["SET", "k1", "b"],
        &["SET", "k2", "c"],
    ]
    .iter()
    .map(|c| words(c))
    .collect();
    sides.run_pipeline(0, &pipeline, &format!("a pipeline in {mode:?}"));
    eprintln!(
        "client tracking {mode:?} redirect {redirect}: {} replies, {} invalidations",
        sides.compared, sides.invalidations
    );
    assert!(
        sides.invalidations >= 30,
        "too few invalidations to compare"
    );
    sides.compared
}

#[test]
fn client_tracking_matches_redis() {
    let mut total = 0;
    let modes: &[(&[&str], bool)] = &[
        (&[], false),
        (&["NOLOOP"], false),
        (&["OPTIN"], false),
        (&["OPTOUT"], false),
        (&["BCAST", "PREFIX", "user:", "PREFIX", "k"], false),
        (&["BCAST", "NOLOOP"], false),
        (&[], true),
    ];
    for (i, (mode, redirect)) in modes.iter().enumerate() {
        total += run_mode(60 + i as u64, mode, *redirect);
    }
    eprintln!("client tracking: {total} replies and messages compared with redis-server");
    assert!(total >= 5000);
}

/// CLIENT TRACKING's option checks, CLIENT CACHING's, TRACKINGINFO and GETREDIR in each state,
/// the broken redirect, and tracking's end at RESET, compared with redis-server.
#[test]
fn client_tracking_options_and_errors_match_redis() {
    let mut pair = Pair::start();
    for side in 0..2 {
        pair.conns[side][0].call(&words(&["HELLO", "3"]));
    }
    let sequence: &[&[&str]] = &[
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "CACHING", "YES"],
        &["CLIENT", "TRACKING"],
        &["CLIENT", "TRACKING", "MAYBE"],
        &["CLIENT", "TRACKING", "ON", "PREFIX", "a"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
        &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"],
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"],
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "x"],
        &["CLIENT", "TRACKING", "ON", "WHAT"],
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a",
        ],
        &["CLIENT", "TRACKING", "ON", "OPTIN"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "CACHING", "NO"],
        &["CLIENT", "CACHING", "MAYBE"],
        &["CLIENT", "CACHING", "YES"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "ON", "OPTOUT"],
        &["CLIENT", "TRACKING", "ON", "BCAST"],
        &["CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "TRACKING", "OFF"],
        &["CLIENT", "TRACKINGINFO"],
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "x",
        ],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "use"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "y"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "ON"],
        &["CONFIG", "GET", "tracking-table-max-keys"],
        &["CONFIG", "SET", "tracking-table-max-keys", "-1"],
        &["CLIENT", "TRACKING", "OFF"],
        &["RESET"],
        &["CLIENT", "TRACKINGINFO"],
    ];
    for cmd in sequence {
        let context = format!("{cmd:?}");
        pair.check(0, &words(cmd), &context);
    }
    // A redirect to a connection that then goes: the tracking client hears that (RESP3).
    let mut ids = Vec::new();
    for side in 0..2 {
        let conn = &mut pair.conns[side][0];
        conn.call(&words(&["HELLO", "3"]));
        let id = pair.conns[side][1].call(&words(&["CLIENT", "ID"]));
        ids.push(String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned());
    }
    let addrs: Vec<std::net::SocketAddr> = (0..2)
        .map(|side| pair.conns[side][1].server_addr())
        .collect();
    for side in 0..2 {
        let on = words(&["CLIENT", "TRACKING", "ON", "REDIRECT", &ids[side]]);
        assert_eq!(pair.conns[side][0].call(&on), b"+OK\r\n");
        assert_eq!(
            pair.conns[side][0].call(&words(&["GET", "gone"])),
            b"_\r\n".to_vec()
        );
        // The redirect target leaves.
        pair.conns[side][1] = Raw::connect(addrs[side]);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    for side in 0..2 {
        pair.conns[side][1].call(&words(&["SET", "gone", "1"]));
    }
    let got: Vec<Vec<Vec<u8>>> = (0..2)
        .map(|side| drain(&mut pair.conns[side][0], b"$11\r\nsync-marker\r\n"))
        .collect();
    // The message ends with the (differing) id: compared without it, and the id checked.
    let masked = |rs: &[Vec<u8>], id: &str| -> Vec<String> {
        show(rs)
            .into_iter()
            .map(|r| {
                let suffix = format!(":{id} ");
                assert!(r.ends_with(&suffix), "{r} names {id}");
                r[..r.len() - suffix.len()].to_string()
            })
            .collect()
    };
    assert_eq!(masked(&got[0], &ids[0]), masked(&got[1], &ids[1]));
    assert_eq!(got[1].len(), 1, "one tracking-redir-broken message");
    let info: Vec<Vec<Vec<u8>>> = (0..2)
        .map(|side| vec![pair.conns[side][0].call(&words(&["CLIENT", "TRACKINGINFO"]))])
        .collect();
    assert_eq!(
        show(&info[0])
            .concat()
            .replace(&format!(":{} ", ids[0]), ":ID "),
        show(&info[1])
            .concat()
            .replace(&format!(":{} ", ids[1]), ":ID "),
        "TRACKINGINFO with a broken redirect"
    );
}

/// An EXPIREAT to the time a key already has is a change in Redis (it signals the key): a
/// WATCH on it fails the transaction and a tracking client is told. It was no write here
/// (found by the random test above when two EXPIREs fell in one millisecond).
#[test]
fn expire_to_the_same_time_is_a_change_like_redis() {
    let mut pair = Pair::start();
    for side in 0..2 {
        pair.conns[side][0].call(&words(&["HELLO", "3"]));
    }
    let setup: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["EXPIREAT", "k", "4000000000"],
        &["CLIENT", "TRACKING", "ON"],
        &["GET", "k"],
        &["WATCH", "k"],
    ];
    for cmd in setup {
        pair.check(0, &words(cmd), "set-up");
    }
    pair.check(1, &words(&["EXPIREAT", "k", "4000000000"]), "same time");
    let got: Vec<Vec<Vec<u8>>> = (0..2)
        .map(|side| drain(&mut pair.conns[side][0], b"$11\r\nsync-marker\r\n"))
        .collect();
    assert_eq!(show(&got[0]), show(&got[1]), "the invalidation");
    assert_eq!(got[1].len(), 1, "one invalidation");
    for cmd in [&["MULTI"][..], &["SET", "k", "w"], &["EXEC"]] {
        pair.check(0, &words(cmd), "the watched key changed");
    }
    pair.check(0, &words(&["GET", "k"]), "after");
}
