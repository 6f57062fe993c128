//! Data outlives the server: graceful restarts, SHUTDOWN, and the write-ahead log under
//! `appendfsync always`.

use redis::Commands;
use strata_server::{AppendFsync, ServerConfig};

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
