//! What applications written for Redis use, through real clients: the `redis` crate's atomic
//! pipelines, WATCH retry loops and pub/sub; redis-py (`clients/redis_py_check.py`, run with
//! the machine's python3 and redis-py, which `.ci/run` installs); seed 004's line protocol.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use redis::Commands;
use strata_server::ServerConfig;

use super::TestServer;

#[test]
fn atomic_pipelines_and_watch_retry_loops_of_the_redis_crate() {
    let server = TestServer::start();
    let mut c = server.client();
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("a")
        .cmd("INCRBY")
        .arg("b")
        .arg(5)
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (1, 5));
    // Optimistic locking: eight threads each add 1 to a counter 50 times with WATCH / GET /
    // MULTI / SET / EXEC, retrying on nil; no increment may be lost.
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let mut c = server.client();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let _: () = redis::transaction(&mut c, &["counter"], |con, pipe| {
                        let n: i64 = con.get::<_, Option<i64>>("counter")?.unwrap_or(0);
                        pipe.set("counter", n + 1).ignore().query(con)
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let n: i64 = c.get("counter").unwrap();
    assert_eq!(n, 400);
}

#[test]
fn pubsub_through_the_redis_crate() {
    let server = TestServer::start();
    let mut sub = server.client();
    let mut publisher = server.client();
    let mut ps = sub.as_pubsub();
    ps.subscribe("news").unwrap();
    ps.psubscribe("sport.*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n: i64 = publisher.publish("news", "hello").unwrap();
    assert_eq!(n, 1);
    let n: i64 = publisher.publish("sport.tennis", "ace").unwrap();
    assert_eq!(n, 1);
    let m = ps.get_message().unwrap();
    assert_eq!(
        (m.get_channel_name(), m.get_payload::<String>().unwrap()),
        ("news", "hello".into())
    );
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_pattern::<String>().unwrap(), "sport.*");
    assert_eq!(m.get_payload::<String>().unwrap(), "ace");
}

#[test]
fn redis_py_works_unchanged() {
    let server = TestServer::start();
    super::run_client_script("redis_py_check.py", &[server.addr.port().to_string()]);
}

/// Seed 004's client, one connection per command as `echo 'SET hello world' | nc` does, on
/// both engines (the seed's own store is a log-structured hash store).
#[test]
fn seed_004_line_protocol_shares_the_keyspace() {
    let config = ServerConfig {
        text_port: Some(0),
        ..ServerConfig::default()
    };
    seed_004_on(TestServer::start_with(config.clone()));
    seed_004_on(TestServer::start_log_engine(config));
}

/// Transactions, expiry and databases on the log engine too (its limits: RELIABILITY.md).
#[test]
fn the_log_engine_serves_transactions_expiry_and_databases() {
    let server = TestServer::start_log_engine(ServerConfig::default());
    let mut c = server.client();
    let (a, b): (i64, String) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("SET")
        .arg("s")
        .arg("v")
        .arg("GET")
        .cmd("GET")
        .arg("s")
        .query::<(i64, Option<String>, String)>(&mut c)
        .map(|(a, _, b)| (a, b))
        .unwrap();
    assert_eq!((a, b.as_str()), (1, "v"));
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("x")
        .arg("PX")
        .arg(30)
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(60));
    let t: Option<String> = c.get("t").unwrap();
    assert_eq!(t, None);
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
    let s: Option<String> = c.get("s").unwrap();
    assert_eq!(s, None);
}

fn seed_004_on(server: TestServer) {
    let port = server.text_port().unwrap();
    let say = |line: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        reply
    };
    assert_eq!(say("SET hello world"), "success\n");
    assert_eq!(say("GET hello"), "world\n");
    let mut c = server.client();
    let v: String = c.get("hello").unwrap();
    assert_eq!(v, "world");
    let _: () = c.set("from-resp", "yes").unwrap();
    assert_eq!(say("GET from-resp"), "yes\n");
    assert_eq!(say("DELETE hello"), "success\n");
    assert_eq!(say("GET hello"), "no value stored\n");
    assert_eq!(say("FLUSHALL"), "Unknown command\n");
}
