//! Data outlives the server: graceful restarts, SHUTDOWN, and the write-ahead log under
//! `appendfsync always`.

use redis::Commands;
use strata_server::{keyspace, AppendFsync, ServerConfig};

use super::{call, read_to_end, TestServer};

#[test]
fn data_survives_a_restart_on_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir.path(), ServerConfig::default());
    let mut c = server.client();
    for i in 0..500 {
        let _: () = c.set(format!("k{i}"), format!("v{i}")).unwrap();
    }
    let _: i64 = c.incr("counter", 41).unwrap();
    drop(c);
    server.stop();

    let server = TestServer::start_in(dir.path(), ServerConfig::default());
    let mut c = server.client();
    for i in (0..500).step_by(37) {
        let v: String = c.get(format!("k{i}")).unwrap();
        assert_eq!(v, format!("v{i}"));
    }
    let n: i64 = c.incr("counter", 1).unwrap();
    assert_eq!(n, 42);
    assert_eq!(call(&mut c, &["DBSIZE"]), Ok(redis::Value::Int(501)));
}

/// SWAPDB's database map is persisted: after a restart the swapped databases stay swapped
/// (their keys were never moved, only the map).
#[test]
fn swapped_databases_stay_swapped_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir.path(), ServerConfig::default());
    let mut c = server.client();
    let _: () = c.set("zero", "was in 0").unwrap();
    assert_eq!(call(&mut c, &["SWAPDB", "0", "1"]), Ok(redis::Value::Okay));
    drop(c);
    server.stop();

    let server = TestServer::start_in(dir.path(), ServerConfig::default());
    let mut c = server.client();
    assert_eq!(call(&mut c, &["GET", "zero"]), Ok(redis::Value::Nil));
    assert_eq!(call(&mut c, &["SELECT", "1"]), Ok(redis::Value::Okay));
    let v: String = c.get("zero").unwrap();
    assert_eq!(v, "was in 0");
}

#[test]
fn shutdown_command_stops_the_server_and_keeps_acknowledged_writes() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        appendfsync: AppendFsync::Always,
        ..ServerConfig::default()
    };
    let server = TestServer::start_in(dir.path(), config.clone());
    let mut c = server.client();
    let _: () = c.set("durable", "yes").unwrap();
    let mut raw = server.raw();
    std::io::Write::write_all(&mut raw, b"SHUTDOWN\r\n").unwrap();
    let (out, closed) = read_to_end(&mut raw);
    assert!(
        closed && out.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    // The listener goes away: new connections are refused.
    let addr = server.addr;
    server.join();
    assert!(std::net::TcpStream::connect(addr).is_err());

    let server = TestServer::start_in(dir.path(), config);
    let mut c = server.client();
    let v: String = c.get("durable").unwrap();
    assert_eq!(v, "yes");
}

/// Every engine key of `db` in the partition that `route` routes to (the partition alone).
fn keys_of_partition(db: &strata::Db, route: &[u8]) -> Vec<Vec<u8>> {
    db.scan_routed::<&[u8], _>(route, ..)
        .map(|e| e.unwrap().0.to_vec())
        .collect()
}

/// For each partition of `db`, an engine key routed there.
fn a_key_per_partition(db: &strata::Db) -> Vec<Vec<u8>> {
    (0..db.partitions())
        .map(|p| {
            std::iter::once(keyspace::expiry_index_key(0, 0, b""))
                .chain((0..10_000).map(|j| format!("route{j}").into_bytes()))
                .find(|k| db.partition_of(k) == p)
                .unwrap()
        })
        .collect()
}

/// Writes keys with and without expiry times, some about to expire.
fn write_keys_with_expiry_times(c: &mut redis::Connection) {
    for i in 0..300 {
        let _: () = c.set(format!("plain{i}"), "v").unwrap();
        let _: () = redis::cmd("SET")
            .arg(format!("ttl{i}"))
            .arg("v")
            .arg("EX")
            .arg(100_000)
            .query(c)
            .unwrap();
        if i % 3 == 0 {
            let _: i64 = c.pexpire(format!("plain{i}"), 200).unwrap();
        }
    }
}

/// Waits until active expiry (not a read of the keys) removed the 100 short-lived keys.
fn active_expiry_removes_them(c: &mut redis::Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let n: i64 = redis::cmd("DBSIZE").query(c).unwrap();
        if n == 500 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "DBSIZE stays {n}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ttl: i64 = c.ttl("ttl7").unwrap();
    assert!(ttl > 99_000, "TTL {ttl}");
}

/// A new store keeps the expiry index in a partition of its own, on top of the partitions
/// asked for: the partitions GET and SET search hold no index entry, and the last one holds
/// every index entry and nothing else. Restarts keep the layout (no partition added again),
/// and active expiry finds its way through the index there.
#[test]
fn the_expiry_index_lives_in_a_partition_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let asked = strata::Options::tiny().partitions;
    for round in 0..2 {
        let server = TestServer::start_in(dir.path(), ServerConfig::default());
        let db = server.db().clone();
        assert_eq!(db.partitions(), asked + 1, "round {round}");
        let mut c = server.client();
        if round == 0 {
            write_keys_with_expiry_times(&mut c);
        }
        db.flush().unwrap();
        let routes = a_key_per_partition(&db);
        let (last, data) = routes.split_last().unwrap();
        let index = keys_of_partition(&db, last);
        assert!(index.len() >= 300, "{} index entries", index.len());
        assert!(index.iter().all(|k| keyspace::is_expiry_index_key(k)));
        for r in data {
            let keys = keys_of_partition(&db, r);
            assert!(!keys.is_empty());
            assert!(!keys.iter().any(|k| keyspace::is_expiry_index_key(k)));
        }
        if round == 0 {
            active_expiry_removes_them(&mut c);
        } else {
            let ttl: i64 = c.ttl("ttl7").unwrap();
            assert!(ttl > 99_000, "TTL {ttl} after a restart");
            assert_eq!(call(&mut c, &["DBSIZE"]), Ok(redis::Value::Int(500)));
        }
        drop((c, db));
        server.stop();
    }
    // Opened by its data partition count or by its total: both are the same store.
    for partitions in [asked, asked + 1] {
        let opts = strata::Options {
            partitions,
            ..strata::Options::tiny()
        };
        let opts = strata_server::store_options(opts, dir.path());
        strata::Db::open(dir.path(), opts).unwrap().close().unwrap();
    }
}

/// Asked for as many partitions as the engine allows, a new store gets that many in all, one of
/// them the expiry index's (one more than asked would be refused), and opens again with the
/// same number; asked for more, it is refused as before.
#[test]
fn a_new_store_at_the_partition_limit_opens() {
    // A log file open per partition: more than many systems' default of 1024 descriptors.
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut files = getrlimit(Resource::Nofile);
    files.current = files.maximum;
    setrlimit(Resource::Nofile, files).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let too_many = strata::Options {
        partitions: strata::PARTITIONS_MAX + 1,
        ..strata::Options::tiny()
    };
    let refused = strata::Db::open(
        dir.path(),
        strata_server::store_options(too_many, dir.path()),
    );
    assert!(matches!(refused, Err(strata::Error::InvalidArgument(_))));
    let opts = || strata::Options {
        partitions: strata::PARTITIONS_MAX,
        memtable_budget_bytes: 64 << 20,
        ..strata::Options::tiny()
    };
    for round in 0..2 {
        let db = strata::Db::open(dir.path(), strata_server::store_options(opts(), dir.path()))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(db.partitions(), strata::PARTITIONS_MAX);
        let key = keyspace::string_key(0, b"k");
        if round == 0 {
            db.put(&key, &keyspace::Record::encode(b"v", None)).unwrap();
        } else {
            assert!(db.get(&key).unwrap().is_some());
        }
        db.close().unwrap();
    }
}

/// Stores made before the expiry index had a partition of its own (key router rule 1), and
/// stores the engine's default rule placed (the CLI's, before it shared the server's
/// keyspace), keep their placement: the server opens them with rule 1, finds their keys and
/// expires keys through an index kept among the data, as it was.
#[test]
fn older_stores_keep_the_expiry_index_among_the_data() {
    use strata::KeyRouter;
    for router in [Some(strata_server::collection::ServerRouter::SHARED), None] {
        let dir = tempfile::tempdir().unwrap();
        let made = strata::Options {
            key_router: router.map(|r| std::sync::Arc::new(r) as _),
            ..strata::Options::tiny()
        };
        let db = strata::Db::open(dir.path(), made.clone()).unwrap();
        db.put(
            &keyspace::string_key(0, b"old"),
            &keyspace::Record::encode(b"kept", None),
        )
        .unwrap();
        db.close().unwrap();

        let server = TestServer::start_in(dir.path(), ServerConfig::default());
        let db = server.db().clone();
        assert_eq!(db.partitions(), made.partitions);
        let mut c = server.client();
        let old: String = c.get("old").unwrap();
        assert_eq!(old, "kept");
        write_keys_with_expiry_times(&mut c);
        let _: i64 = c.del("old").unwrap();
        let partitions_with_index = a_key_per_partition(&db)
            .iter()
            .filter(|r| {
                keys_of_partition(&db, r)
                    .iter()
                    .any(|k| keyspace::is_expiry_index_key(k))
            })
            .count();
        assert_eq!(partitions_with_index, made.partitions, "{router:?}");
        active_expiry_removes_them(&mut c);
        drop((c, db));
        server.stop();
        let layout = strata::Db::existing_layout(dir.path(), &strata::vfs::RealFs)
            .unwrap()
            .unwrap();
        assert_eq!(
            layout.router_id,
            strata_server::collection::ServerRouter::SHARED.id()
        );
    }
}
