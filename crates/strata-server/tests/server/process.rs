//! The server as a separate process (the `strata-server` binary): killed with SIGKILL it keeps
//! every write it acknowledged, under `appendfsync always` and also under `everysec` and `no`
//! (a killed process is not a lost machine: every acknowledged record was handed to the OS);
//! stopped with SIGTERM it flushes everything, even under `appendfsync no`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Commands;

struct ServerProcess {
    child: Child,
    addr: String,
}

impl ServerProcess {
    fn start(dir: &Path, appendfsync: &str) -> ServerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata-server"))
            .arg("--dir")
            .arg(dir)
            .args([
                "--port",
                "0",
                "--appendfsync",
                appendfsync,
                "--partitions",
                "2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let (false, Some(at)) = (sent, line.find("listening on ")) {
                    let addr = line[at + "listening on ".len()..]
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    let _ = tx.send(addr);
                    sent = true;
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("server process did not report its address");
        ServerProcess { child, addr }
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/", self.addr))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn terminate(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "server exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "server ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write_under_appendfsync_always() {
    sigkill_loses_no_acknowledged_write("always");
}

#[test]
fn sigkill_loses_no_acknowledged_write_under_appendfsync_everysec() {
    sigkill_loses_no_acknowledged_write("everysec");
}

#[test]
fn sigkill_loses_no_acknowledged_write_under_appendfsync_no() {
    sigkill_loses_no_acknowledged_write("no");
}

/// Writers SET (one at a time, and in pipelines of 8 that the server merges into one engine
/// write) and INCR until the server is killed; every acknowledged write must be there after a
/// restart.
fn sigkill_loses_no_acknowledged_write(appendfsync: &str) {
    const WRITERS: usize = 4;
    const PIPELINE: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), appendfsync);
    // The oracle: what the server acknowledged, per writer.
    let acked: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let incrs_acked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (acked, incrs, stop) = (acked.clone(), incrs_acked.clone(), stop.clone());
            let mut c = server.client();
            std::thread::spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if w % 2 == 1 {
                        // Pipelined SETs: acknowledged together when the replies arrive.
                        let mut pipe = redis::pipe();
                        let kvs: Vec<(String, String)> = (0..PIPELINE)
                            .map(|j| (format!("w{w}:k{i}:{j}"), format!("value-{w}-{i}-{j}")))
                            .collect();
                        for (k, v) in &kvs {
                            pipe.cmd("SET").arg(k).arg(v).ignore();
                        }
                        if pipe.query::<()>(&mut c).is_err() {
                            return;
                        }
                        acked.lock().unwrap().extend(kvs);
                    } else {
                        let (k, v) = (format!("w{w}:k{i}"), format!("value-{w}-{i}"));
                        if c.set::<_, _, ()>(&k, &v).is_err() {
                            return;
                        }
                        acked.lock().unwrap().insert(k, v);
                    }
                    if c.incr::<_, _, i64>("counter", 1).is_err() {
                        return;
                    }
                    incrs.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let incrs = incrs_acked.load(Ordering::Relaxed) as i64;
    assert!(
        acked.len() > 10,
        "too few writes before the kill: {}",
        acked.len()
    );

    let server = ServerProcess::start(dir.path(), appendfsync);
    let mut c = server.client();
    for (k, v) in &acked {
        let got: Option<String> = c.get(k).unwrap();
        assert_eq!(got.as_ref(), Some(v), "acknowledged write of {k} lost");
    }
    let counter: i64 = c.get("counter").unwrap();
    // Every acknowledged INCR survived; at most one unacknowledged one per writer may have too.
    assert!(
        counter >= incrs && counter <= incrs + WRITERS as i64,
        "counter {counter}, acknowledged {incrs}"
    );
    server.terminate();
}

#[test]
fn sigterm_flushes_everything_even_without_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "no");
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..2_000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    call_json(&mut c);
    drop(c);
    server.terminate();

    let server = ServerProcess::start(dir.path(), "no");
    let mut c = server.client();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 2_001);
    let v: i64 = c.get("k1999").unwrap();
    assert_eq!(v, 1999);
    let doc: String = redis::cmd("JSON.GET")
        .arg("doc")
        .arg(".a")
        .query(&mut c)
        .unwrap();
    assert_eq!(doc, "1");
    server.terminate();
}

fn call_json(c: &mut redis::Connection) {
    let _: () = redis::cmd("JSON.SET")
        .arg("doc")
        .arg("$")
        .arg(r#"{"a":1}"#)
        .query(c)
        .unwrap();
}
