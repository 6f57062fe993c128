//! End-to-end tests: a real server on 127.0.0.1:0 over the real engine in a temporary
//! directory, driven by the `redis` crate's synchronous client and by raw sockets. One test
//! binary (one link step) with a module per concern.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod collections;
mod commands;
mod compat;
mod concurrency;
mod differential;
mod durability;
mod json;
mod parser_props;
mod placement;
mod power_cut;
mod process;
mod protocol;
mod scale_out;
mod tracking;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strata_server::{KvBackend, ServerConfig, ServerThread};

/// A server over an engine in its own directory.
pub struct TestServer {
    thread: Option<ServerThread>,
    db: Option<Arc<strata::Db>>,
    pub addr: SocketAddr,
    _dir: Option<tempfile::TempDir>,
}

impl TestServer {
    /// A server on a fresh database with default settings.
    pub fn start() -> TestServer {
        Self::start_with(ServerConfig::default())
    }

    /// A server on a fresh database with `config` (bind and port are forced to 127.0.0.1:0).
    pub fn start_with(config: ServerConfig) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Self::start_in(dir.path(), config);
        s._dir = Some(dir);
        s
    }

    /// A server on a fresh database of the log engine (`Engine::Log`).
    pub fn start_log_engine(config: ServerConfig) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut options = strata::Options::tiny();
        options.engine = strata::Engine::Log;
        let mut s = Self::start_with_options(dir.path(), config, options);
        s._dir = Some(dir);
        s
    }

    /// A server on the database in `dir`, which outlives the server.
    pub fn start_in(dir: &Path, config: ServerConfig) -> TestServer {
        Self::start_with_options(dir, config, strata::Options::tiny())
    }

    /// A server on the database in `dir` opened with `options` (sync mode from `config`).
    pub fn start_with_options(
        dir: &Path,
        config: ServerConfig,
        options: strata::Options,
    ) -> TestServer {
        let mut options = strata_server::store_options(options, dir);
        options.sync = config.appendfsync.sync_mode();
        let db = Arc::new(strata::Db::open(dir, options).unwrap());
        let config = ServerConfig {
            bind: "127.0.0.1".into(),
            port: 0,
            dir: Some(dir.to_path_buf()),
            ..config
        };
        let backend: Arc<dyn KvBackend + Send + Sync> = db.clone();
        let thread = ServerThread::start(config, backend).unwrap();
        TestServer {
            addr: thread.local_addr(),
            thread: Some(thread),
            db: Some(db),
            _dir: None,
        }
    }

    /// The port of seed 004's line protocol, when the config enabled it.
    pub fn text_port(&self) -> Option<u16> {
        self.thread.as_ref().and_then(ServerThread::text_port)
    }

    /// The engine under the server.
    pub fn db(&self) -> &Arc<strata::Db> {
        self.db
            .as_ref()
            .expect("engine is open while the server runs")
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// A connected client (RESP2).
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// A raw socket with a read timeout, for protocol-level tests.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    /// Stops the server and closes the engine cleanly.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    /// Waits for a server that was told to stop (SHUTDOWN), then closes the engine.
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Some(t) = self.thread.take() {
            t.shutdown().unwrap();
        }
        if let Some(db) = self.db.take() {
            match Arc::try_unwrap(db) {
                Ok(db) => db.close().unwrap(),
                Err(_) => panic!("engine still referenced after the server stopped"),
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.stop_inner();
        }
    }
}

/// Runs a command and returns its reply, with server errors as `Err("CODE detail")`.
pub fn call(con: &mut redis::Connection, args: &[&str]) -> Result<redis::Value, String> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<redis::Value>(con).map_err(|e| error_text(&e))
}

/// The full error line the server sent (`ERR wrong number of ...`).
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

pub fn bulk(s: &str) -> redis::Value {
    redis::Value::BulkString(s.as_bytes().to_vec())
}

/// Writes `request` and reads until the server closes the connection (or 5 s pass).
pub fn send_and_read_to_end(stream: &mut TcpStream, request: &[u8]) -> (Vec<u8>, bool) {
    stream.write_all(request).unwrap();
    read_to_end(stream)
}

/// Reads until EOF; returns the bytes and whether the server closed the connection.
pub fn read_to_end(stream: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

/// Reads exactly `want` bytes.
pub fn read_exact_text(stream: &mut TcpStream, want: usize) -> String {
    let mut buf = vec![0u8; want];
    stream.read_exact(&mut buf).unwrap();
    String::from_utf8_lossy(&buf).into_owned()
}

/// Runs `tests/clients/<name>` with python3 (and redis-py, which `.ci/test-deps` installs);
/// fails the test with its output unless it exits 0.
pub fn run_client_script(name: &str, args: &[String]) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name);
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .expect("python3 not found: the client tests need python3 with redis-py (.ci/test-deps installs it)");
    assert!(
        out.status.success(),
        "{name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
