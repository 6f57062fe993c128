//! The server as a separate process (the `strata-server` binary): killed with SIGKILL it keeps
//! every write it acknowledged, under `appendfsync always` and also under `everysec` and `no`
//! (a killed process is not a lost machine: every acknowledged record was handed to the OS);
//! stopped with SIGTERM it flushes everything, even under `appendfsync no`; on a full disk it
//! acknowledges nothing it could not write and keeps serving.

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
        Self::start_under(dir, appendfsync, None)
    }

    /// With `file_bytes_max`, every file the server writes is limited to that size
    /// (`prlimit --fsize`, SIGXFSZ ignored so a write past it fails with EFBIG, as ENOSPC would
    /// on a full disk).
    fn start_limited(dir: &Path, appendfsync: &str, file_bytes_max: u64) -> ServerProcess {
        Self::start_under(dir, appendfsync, Some(format!("--fsize={file_bytes_max}")))
    }

    /// The server under `prlimit` with `limits` (its arguments), SIGXFSZ ignored.
    fn start_under(dir: &Path, appendfsync: &str, limits: Option<String>) -> ServerProcess {
        let exe = env!("CARGO_BIN_EXE_strata-server");
        let mut command = match limits {
            None => Command::new(exe),
            Some(limits) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("trap '' XFSZ; exec prlimit {limits} \"$0\" \"$@\""));
                c.arg(exe);
                c
            }
        };
        let mut child = command
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
    // DBSIZE (counts taken again at startup, then kept by writes) against a walk of the keys.
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, keys.len());
    assert!(n > acked.len(), "{n} keys, {} acknowledged", acked.len());
    let _: () = c.set("one more", "key").unwrap();
    let m: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(m, n + 1);
    server.terminate();
}

/// A full disk under `appendfsync everysec`: the write whose log record cannot be handed to the
/// OS is not acknowledged (its connection is closed, no reply), the server keeps serving other
/// clients (reads, and clear errors for writes), and every acknowledged write is there after a
/// restart without the limit.
#[test]
fn full_disk_loses_no_acknowledged_write_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start_limited(dir.path(), "everysec", 200_000);
    let mut c = server.client();
    // HyperLogLogs whose cached count PFADD left invalid: PFCOUNT computes it and stores it in
    // the key as Redis does, a cache, so a store that refuses writes must still answer it.
    let hlls: Vec<String> = (0..16).map(|i| format!("hll{i:02}")).collect();
    for hll in &hlls {
        let added: i64 = redis::cmd("PFADD")
            .arg(hll)
            .arg(&["a", "b", "c"])
            .query(&mut c)
            .unwrap();
        assert_eq!(added, 1);
    }
    let value = "v".repeat(1000);
    let mut acked = Vec::new();
    let mut failed = false;
    for i in 0..10_000 {
        let key = format!("k{i:05}");
        match c.set::<_, _, ()>(&key, &value) {
            Ok(()) => acked.push(key),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "no write failed under a 200 kB file limit");
    assert!(
        acked.len() > 10,
        "too few writes before the limit: {}",
        acked.len()
    );

    // Other clients are still served: reads answer, and a write to the partition whose log
    // failed gets an error reply naming the cause. (A write to the other partition may still
    // succeed until its own log reaches the limit; then that connection is closed too.)
    let mut other = server.client();
    let got: Option<String> = other.get(&acked[0]).unwrap();
    assert_eq!(got.as_deref(), Some(value.as_str()));
    let mut refused = None;
    for i in 0..1_000 {
        let key = format!("after{i:04}");
        match other.set::<_, _, ()>(&key, &value) {
            Ok(()) => acked.push(key),
            Err(e) if e.kind() == redis::ErrorKind::ResponseError => {
                refused = Some(e.to_string());
                break;
            }
            // The connection whose write could not be handed to the OS is closed, unanswered.
            Err(_) => other = server.client(),
        }
    }
    let text = refused.expect("no write was refused with an error reply");
    assert!(
        text.contains("read-only") || text.contains("File too large"),
        "unclear error: {text}"
    );
    let got: Option<String> = other.get(&acked[0]).unwrap();
    assert_eq!(got.as_deref(), Some(value.as_str()), "reads stopped");
    // The PFADDs of some HyperLogLogs are refused now (their partition's log failed); PFCOUNT
    // of every one still answers.
    let mut pfadds_refused = 0;
    for hll in &hlls {
        let count: redis::RedisResult<i64> = redis::cmd("PFCOUNT").arg(hll).query(&mut other);
        assert_eq!(count, Ok(3), "PFCOUNT {hll} on a store refusing writes");
        let added: redis::RedisResult<i64> =
            redis::cmd("PFADD").arg(hll).arg("d").query(&mut other);
        if added.is_err() {
            pfadds_refused += 1;
            other = server.client();
        }
    }
    assert!(
        pfadds_refused > 0,
        "no HyperLogLog sat in a partition refusing writes"
    );
    drop((c, other));
    server.kill9();

    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    for key in &acked {
        let got: Option<String> = c.get(key).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(value.as_str()),
            "acknowledged {key} lost"
        );
    }
    server.terminate();
}

/// Sets a short `busy-reply-threshold` and starts, on a connection of its own, a script that
/// writes `partial` = `value` and then loops forever; returns its client's thread.
fn start_busy_writer(
    server: &ServerProcess,
    c: &mut redis::Connection,
    value: &str,
) -> std::thread::JoinHandle<redis::RedisResult<redis::Value>> {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg("100")
        .query(c)
        .unwrap();
    let mut runner = server.client();
    let script = format!("redis.call('SET', 'partial', '{value}') while true do end");
    std::thread::spawn(move || {
        redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .query::<redis::Value>(&mut runner)
    })
}

/// A script that wrote and then loops cannot be killed (UNKILLABLE); SHUTDOWN without NOSAVE
/// is refused with BUSY; SHUTDOWN NOSAVE stops the process at once, the script's client gets
/// no reply, and after a restart the script's writes are absent (none of a script is kept
/// unless all is) while every acknowledged write is there.
#[test]
fn shutdown_nosave_stops_a_busy_script_and_drops_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let _: () = c.set("kept", "1").unwrap();
    let running = start_busy_writer(&server, &mut c, "1");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let refused = redis::cmd("SCRIPT").arg("KILL").query::<()>(&mut c);
        // (The client names error codes in its own case: NotBusy.)
        let text = format!("{refused:?}").to_uppercase();
        if text.contains("UNKILLABLE") {
            break;
        }
        assert!(text.contains("NOTBUSY"), "SCRIPT KILL answered {text}");
        assert!(Instant::now() < deadline, "the script never got busy");
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = format!("{:?}", redis::cmd("SHUTDOWN").query::<()>(&mut c)).to_uppercase();
    assert!(refused.contains("BUSY"), "SHUTDOWN answered {refused}");
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    let exited = Instant::now() + Duration::from_secs(30);
    while server.child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < exited,
            "SHUTDOWN NOSAVE left the server running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let script_reply = running.join().unwrap();
    assert!(
        script_reply.is_err(),
        "the script's client got {script_reply:?}"
    );
    server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let kept: Option<String> = c.get("kept").unwrap();
    let partial: Option<String> = c.get("partial").unwrap();
    assert_eq!((kept.as_deref(), partial), (Some("1"), None));
    // SIGTERM during a busy script that wrote: the server stops too (the script is dropped).
    let _running = start_busy_writer(&server, &mut c, "2");
    let busy = Instant::now() + Duration::from_secs(20);
    while !format!("{:?}", redis::cmd("PING").query::<String>(&mut c))
        .to_uppercase()
        .contains("BUSY")
    {
        assert!(Instant::now() < busy, "the script never got busy");
        std::thread::sleep(Duration::from_millis(20));
    }
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

/// A transaction cut by SIGKILL is all or nothing: a writer runs MULTI, SET of 20 keys to the
/// same round number, EXEC, in a loop; after the kill every key holds the same round, at least
/// the last one EXEC acknowledged.
#[test]
fn sigkill_leaves_each_exec_whole_or_absent() {
    writes_of_twenty_keys_survive_sigkill_whole_or_absent("EXEC", |c, n| {
        let mut p = redis::pipe();
        p.atomic();
        for k in 0..20 {
            p.cmd("SET").arg(format!("key:{k}")).arg(n).ignore();
        }
        p.query::<()>(c).is_ok()
    });
}

/// A Lua script is one atomic write as well: after SIGKILL and restart each one's twenty keys
/// are all there or none, and every acknowledged script is.
#[test]
fn sigkill_leaves_each_script_whole_or_absent() {
    writes_of_twenty_keys_survive_sigkill_whole_or_absent("EVAL", |c, n| {
        redis::cmd("EVAL")
            .arg("for k = 0, 19 do redis.call('SET', 'key:' .. k, ARGV[1]) end")
            .arg(0)
            .arg(n)
            .query::<()>(c)
            .is_ok()
    });
}

/// Writes `key:0`..`key:19` = n for n = 1, 2, ... with `write` (one atomic unit each) until a
/// SIGKILL, three times at different moments; after each restart the twenty keys must hold one
/// n, at least the last acknowledged.
fn writes_of_twenty_keys_survive_sigkill_whole_or_absent(
    what: &str,
    write: fn(&mut redis::Connection, u64) -> bool,
) {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let server = ServerProcess::start(dir.path(), "everysec");
        let acked = Arc::new(Mutex::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let mut c = server.client();
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                for n in 1u64.. {
                    if stop.load(Ordering::Relaxed) || !write(&mut c, n) {
                        return;
                    }
                    *acked.lock().unwrap() = n;
                }
            })
        };
        std::thread::sleep(Duration::from_millis(150 + 100 * round));
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        let acked = *acked.lock().unwrap();
        assert!(acked > 0, "no {what} acknowledged before the kill");
        let server = ServerProcess::start(dir.path(), "everysec");
        let mut c = server.client();
        let values: Vec<Option<u64>> = (0..20)
            .map(|k| c.get(format!("key:{k}")).unwrap())
            .collect();
        let first = values[0];
        assert!(
            values.iter().all(|v| *v == first),
            "round {round}: a {what} survived in part: {values:?}"
        );
        assert!(
            first.unwrap_or(0) >= acked,
            "round {round}: acknowledged {what} {acked} lost, found {first:?}"
        );
        server.terminate();
    }
}

/// Expiry times survive SIGKILL and restart: keys whose time passed while the server was down
/// are gone, the others keep their exact expiry time; keys without one stay.
#[test]
fn expiry_times_survive_sigkill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("PX")
        .arg(300)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("long")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let _: () = c.set("forever", "v").unwrap();
    let _: () = redis::cmd("SET")
        .arg("persisted")
        .arg("v")
        .arg("PX")
        .arg(300)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("PERSIST")
        .arg("persisted")
        .query(&mut c)
        .unwrap();
    let long_at: i64 = redis::cmd("PEXPIRETIME").arg("long").query(&mut c).unwrap();
    server.kill9();
    std::thread::sleep(Duration::from_millis(400));
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let short: Option<String> = c.get("short").unwrap();
    assert_eq!(short, None);
    let at: i64 = redis::cmd("PEXPIRETIME").arg("long").query(&mut c).unwrap();
    assert_eq!(at, long_at);
    let forever: i64 = redis::cmd("TTL").arg("forever").query(&mut c).unwrap();
    assert_eq!(forever, -1);
    let persisted: i64 = redis::cmd("TTL").arg("persisted").query(&mut c).unwrap();
    assert_eq!(persisted, -1);
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 3);
    server.terminate();
}

/// Function libraries survive SIGKILL and restart (Redis keeps them in its RDB and AOF; here
/// they are engine records): a loaded library's functions answer after the restart, a deleted
/// one's do not, FLUSHALL leaves them, and FUNCTION FLUSH removes them for good.
#[test]
fn function_libraries_survive_sigkill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    for code in [
        "#!lua name=kept\nredis.register_function('greet', function(keys, args) return 'hi ' .. args[1] end)",
        "#!lua name=gone\nredis.register_function('bye', function() return 1 end)",
    ] {
        let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(code).query(&mut c).unwrap();
    }
    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg("gone")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    server.kill9();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let hi: String = redis::cmd("FCALL")
        .arg("greet")
        .arg(0)
        .arg("you")
        .query(&mut c)
        .unwrap();
    assert_eq!(hi, "hi you");
    let bye: redis::RedisResult<i64> = redis::cmd("FCALL").arg("bye").arg(0).query(&mut c);
    assert!(
        bye.is_err(),
        "a deleted library's function answered: {bye:?}"
    );
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 0, "libraries are not keys");
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut c).unwrap();
    server.kill9();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let hi: redis::RedisResult<String> = redis::cmd("FCALL")
        .arg("greet")
        .arg(0)
        .arg("x")
        .query(&mut c);
    assert!(hi.is_err(), "a flushed library's function answered: {hi:?}");
    server.terminate();
}

/// Streams survive SIGKILL: every acknowledged XADD, XDEL and XTRIM is there after the
/// restart, and so are a consumer group's deliveries and acknowledgements (XPENDING), and the stream's record (length, last ID, entries added) agrees with its entries
/// (the record and the entries of one command are one atomic batch). The model is a map of
/// the entries the commands' replies said are there.
#[test]
fn stream_entries_survive_sigkill_with_a_record_that_matches_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let mut model: std::collections::BTreeMap<u64, String> = std::collections::BTreeMap::new();
    let mut added = 0u64;
    for n in 1..=600u64 {
        let value = format!("v{n}");
        let id: String = redis::cmd("XADD")
            .arg("events")
            .arg(format!("{n}-1"))
            .arg("n")
            .arg(&value)
            .query(&mut c)
            .unwrap();
        assert_eq!(id, format!("{n}-1"));
        model.insert(n, value);
        added += 1;
        if n % 7 == 0 {
            let gone: i64 = redis::cmd("XDEL")
                .arg("events")
                .arg(format!("{}-1", n - 3))
                .query(&mut c)
                .unwrap();
            assert_eq!(gone, i64::from(model.remove(&(n - 3)).is_some()));
        }
        if n % 100 == 0 {
            let trimmed: i64 = redis::cmd("XTRIM")
                .arg("events")
                .arg("MAXLEN")
                .arg(300)
                .query(&mut c)
                .unwrap();
            let excess = model.len().saturating_sub(300);
            assert_eq!(trimmed, excess as i64);
            let keep: Vec<u64> = model.keys().skip(excess).copied().collect();
            model.retain(|k, _| keep.contains(k));
        }
    }
    // A consumer group: five of the live entries delivered to "w", two acknowledged.
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("events")
        .arg("g")
        .arg("0")
        .query(&mut c)
        .unwrap();
    type Entries = Vec<(String, Vec<String>)>;
    let read: Vec<(String, Entries)> = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("w")
        .arg("COUNT")
        .arg(5)
        .arg("STREAMS")
        .arg("events")
        .arg(">")
        .query(&mut c)
        .unwrap();
    let delivered: Vec<String> = read[0].1.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(delivered.len(), 5);
    let acked: i64 = redis::cmd("XACK")
        .arg("events")
        .arg("g")
        .arg(&delivered[0])
        .arg(&delivered[3])
        .query(&mut c)
        .unwrap();
    assert_eq!(acked, 2);
    server.kill9();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let pending: (i64, String, String, Vec<(String, String)>) = redis::cmd("XPENDING")
        .arg("events")
        .arg("g")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        pending,
        (
            3,
            delivered[1].clone(),
            delivered[4].clone(),
            vec![("w".to_string(), "3".to_string())]
        )
    );
    let found: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("events")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    let want: Vec<(String, Vec<String>)> = model
        .iter()
        .map(|(n, v)| (format!("{n}-1"), vec!["n".to_string(), v.clone()]))
        .collect();
    assert_eq!(found, want);
    let len: u64 = redis::cmd("XLEN").arg("events").query(&mut c).unwrap();
    assert_eq!(len, model.len() as u64);
    let info: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg("events")
        .query(&mut c)
        .unwrap();
    let field = |name: &str| -> redis::Value {
        let at = info
            .iter()
            .position(|v| matches!(v, redis::Value::BulkString(b) if b == name.as_bytes()))
            .unwrap();
        info[at + 1].clone()
    };
    assert_eq!(field("entries-added"), redis::Value::Int(added as i64));
    assert_eq!(
        field("last-generated-id"),
        redis::Value::BulkString(b"600-1".to_vec())
    );
    let first = format!("{}-1", model.keys().next().unwrap());
    assert_eq!(
        field("recorded-first-entry-id"),
        redis::Value::BulkString(first.into_bytes())
    );
    server.terminate();
}

/// Hash writes survive SIGKILL whole: every acknowledged HSET's field is there after the
/// restart, and each hash's count (its record) agrees with the fields found (the record and
/// the fields of one command are one atomic batch).
#[test]
fn hash_writes_survive_sigkill_with_counts_that_match_their_fields() {
    for round in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let server = ServerProcess::start(dir.path(), "everysec");
        let acked = Arc::new(Mutex::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let mut c = server.client();
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                for n in 1u64.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    // Two fields per command, and every tenth command removes one again.
                    let key = format!("h{}", n % 4);
                    let set: redis::RedisResult<i64> = redis::cmd("HSET")
                        .arg(&key)
                        .arg(format!("f{n}"))
                        .arg(n)
                        .arg(format!("g{n}"))
                        .arg(n)
                        .query(&mut c);
                    if set.is_err() {
                        return;
                    }
                    if n % 10 == 0 {
                        let del: redis::RedisResult<i64> = redis::cmd("HDEL")
                            .arg(&key)
                            .arg(format!("g{n}"))
                            .query(&mut c);
                        if del.is_err() {
                            return;
                        }
                    }
                    *acked.lock().unwrap() = n;
                }
            })
        };
        std::thread::sleep(Duration::from_millis(200 + 150 * round));
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        let acked = *acked.lock().unwrap();
        assert!(acked > 0, "no HSET acknowledged before the kill");
        let server = ServerProcess::start(dir.path(), "everysec");
        let mut c = server.client();
        for h in 0..4 {
            let key = format!("h{h}");
            let fields: HashMap<String, u64> = c.hgetall(&key).unwrap();
            let len: usize = c.hlen(&key).unwrap();
            assert_eq!(
                len,
                fields.len(),
                "round {round}: {key}'s count and fields disagree"
            );
            for n in (1..=acked).filter(|n| n % 4 == h) {
                assert_eq!(
                    fields.get(&format!("f{n}")),
                    Some(&n),
                    "round {round}: f{n} lost"
                );
                let g = fields.get(&format!("g{n}"));
                assert_eq!(g, (n % 10 != 0).then_some(&n), "round {round}: g{n}");
            }
        }
        server.terminate();
    }
}

/// SMOVE changes two sets, in two partitions, in one batch: after SIGKILL every token is in
/// exactly one of the two sets, and each acknowledged move is there.
#[test]
fn smove_survives_sigkill_whole() {
    const TOKENS: u64 = 20;
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    for t in 0..TOKENS {
        let _: i64 = c.sadd("left", t).unwrap();
    }
    let acked = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (acked.clone(), stop.clone());
        std::thread::spawn(move || {
            for n in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let t = n % TOKENS;
                let (from, to) = if (n / TOKENS) % 2 == 0 {
                    ("left", "right")
                } else {
                    ("right", "left")
                };
                match redis::cmd("SMOVE")
                    .arg(from)
                    .arg(to)
                    .arg(t)
                    .query::<i64>(&mut c)
                {
                    Ok(1) => *acked.lock().unwrap() = n + 1,
                    Ok(other) => panic!("SMOVE of token {t} from {from} answered {other}"),
                    Err(_) => return,
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let left: std::collections::BTreeSet<u64> = c.smembers("left").unwrap();
    let right: std::collections::BTreeSet<u64> = c.smembers("right").unwrap();
    assert_eq!(
        left.len() + right.len(),
        TOKENS as usize,
        "left {left:?} right {right:?}"
    );
    assert!(left.is_disjoint(&right), "a token in both sets");
    // The sets are as the acknowledged moves left them, or one move further (a move applied
    // but not yet acknowledged when the process died). After `k` moves, token `t` has moved
    // `k / TOKENS` times, once more if `t < k % TOKENS`: an odd count puts it on the right.
    let acked = *acked.lock().unwrap();
    assert!(acked > 0, "no SMOVE acknowledged");
    let right_after = |k: u64| -> std::collections::BTreeSet<u64> {
        (0..TOKENS)
            .filter(|t| (k / TOKENS + u64::from(*t < k % TOKENS)) % 2 == 1)
            .collect()
    };
    assert!(
        right == right_after(acked) || right == right_after(acked + 1),
        "after {acked} acknowledged moves: right {right:?}"
    );
    server.terminate();
}

/// A queue on a list survives SIGKILL: every acknowledged RPUSH is there unless an
/// acknowledged LPOP took it, and the list holds a contiguous run of the pushed numbers (the
/// record and the element of each command are one batch).
#[test]
fn list_queue_survives_sigkill() {
    list_queue_survives_sigkill_in_pipelines_of(1, 1);
}

/// The same queue fed and drained in pipelines of 16 (held runs, whose writes the server
/// stages and applies as one batch per run): after SIGKILL and a restart the list is a
/// contiguous run of the pushed numbers, starting just after the last acknowledged pop or
/// within the pipeline of pops in flight, and ending at the last acknowledged push or within
/// the pipeline of pushes in flight.
#[test]
fn pipelined_list_queue_survives_sigkill() {
    list_queue_survives_sigkill_in_pipelines_of(16, 17);
}

/// A producer RPUSHes consecutive numbers and a consumer LPOPs them, each in pipelines of
/// `pipeline` commands, until the server is SIGKILLed (after at least `min_pushed` were
/// acknowledged); after a restart the list holds a contiguous run from just after the last
/// acknowledged pop to the last acknowledged push, each end off by at most the one pipeline
/// that was in flight.
fn list_queue_survives_sigkill_in_pipelines_of(pipeline: u64, min_pushed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "everysec");
    let pushed = Arc::new(Mutex::new(0u64));
    let popped = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let mut c = server.client();
        let (pushed, stop) = (pushed.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut next = 1u64;
            while !stop.load(Ordering::Relaxed) {
                let mut pipe = redis::pipe();
                for n in next..next + pipeline {
                    pipe.cmd("RPUSH").arg("queue").arg(n);
                }
                if pipe.query::<Vec<i64>>(&mut c).is_err() {
                    return;
                }
                next += pipeline;
                *pushed.lock().unwrap() = next - 1;
            }
        })
    };
    let consumer = {
        let mut c = server.client();
        let (popped, stop) = (popped.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut pipe = redis::pipe();
                for _ in 0..pipeline {
                    pipe.cmd("LPOP").arg("queue");
                }
                let Ok(got) = pipe.query::<Vec<Option<u64>>>(&mut c) else {
                    return;
                };
                let mut p = popped.lock().unwrap();
                let before = *p;
                for n in got.into_iter().flatten() {
                    assert_eq!(n, *p + 1, "popped out of order");
                    *p = n;
                }
                let none = *p == before;
                drop(p);
                if none {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    consumer.join().unwrap();
    let (pushed, popped) = (*pushed.lock().unwrap(), *popped.lock().unwrap());
    assert!(pushed >= min_pushed, "too little pushed: {pushed}");
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let left: Vec<u64> = c.lrange("queue", 0, -1).unwrap();
    let len: usize = c.llen("queue").unwrap();
    assert_eq!(len, left.len());
    // At most one pipeline of pushes and one of pops were in flight when the process died.
    let first = left.first().copied().unwrap_or(popped + 1);
    assert!(
        (popped + 1..=popped + 1 + pipeline).contains(&first),
        "first {first}, popped {popped}"
    );
    for (i, n) in left.iter().enumerate() {
        assert_eq!(*n, first + i as u64, "a hole in the queue: {left:?}");
    }
    let last = left.last().copied().unwrap_or(first - 1);
    assert!(
        (pushed..=pushed + pipeline).contains(&last),
        "last {last}, pushed {pushed}"
    );
    server.terminate();
}

/// Commands that remove many elements in one batch, cut by SIGKILL while they run: an XTRIM
/// of a long stream, an LPOP with a count (read with one scan) and an LTRIM of a long list,
/// sent together without waiting and the process killed a few milliseconds later. After the
/// restart each is whole or absent: the stream holds all its entries or the last ten, read
/// and counted alike; the list holds all its elements, or the LPOP's cut, or that and the
/// LTRIM's, each in order (the model is the entries and elements acknowledged before).
#[test]
fn big_removals_cut_by_sigkill_are_whole_or_absent() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServerProcess::start(dir.path(), "everysec");
    let (mut next_id, mut next_elem) = (1u64, 1u64);
    let mut stream: Vec<u64> = Vec::new();
    let mut list: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
    let mut outcomes = std::collections::BTreeSet::new();
    for round in 0..6u64 {
        let mut c = server.client();
        // Grow both by 20 000 (pipelines of 500 commands; the list by RPUSHes of 100).
        for _ in 0..40 {
            let mut pipe = redis::pipe();
            for _ in 0..500 {
                pipe.cmd("XADD")
                    .arg("s")
                    .arg(format!("{next_id}-0"))
                    .arg("f")
                    .arg(next_id)
                    .ignore();
                stream.push(next_id);
                next_id += 1;
            }
            for _ in 0..5 {
                let elems: Vec<u64> = (next_elem..next_elem + 100).collect();
                next_elem += 100;
                pipe.cmd("RPUSH").arg("q").arg(&elems).ignore();
                list.extend(elems);
            }
            let () = pipe.query(&mut c).unwrap();
        }
        let (stream_len, list_len) = (stream.len(), list.len());
        let popped = 7000.min(list_len);
        let kept = 5000.min(list_len - popped);
        let mut raw = std::net::TcpStream::connect(&server.addr).unwrap();
        std::io::Write::write_all(
            &mut raw,
            format!(
                "XTRIM s MAXLEN 10\r\nLPOP q {popped}\r\nLTRIM q 0 {}\r\n",
                kept - 1
            )
            .as_bytes(),
        )
        .unwrap();
        // From at once to long after all three are done: kills before, inside and after them.
        std::thread::sleep(Duration::from_millis(
            [0, 5, 20, 60, 150, 800][round as usize],
        ));
        server.kill9();
        server = ServerProcess::start(dir.path(), "everysec");
        let mut c = server.client();
        // The stream: whole, or trimmed to its last ten.
        let ids: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg("s")
            .arg("-")
            .arg("+")
            .query(&mut c)
            .unwrap();
        let found: Vec<u64> = ids
            .iter()
            .map(|(id, _)| id.trim_end_matches("-0").parse().unwrap())
            .collect();
        let xlen: usize = redis::cmd("XLEN").arg("s").query(&mut c).unwrap();
        assert_eq!(xlen, found.len(), "round {round}: XLEN against XRANGE");
        let trimmed = found.len() == 10.min(stream_len);
        if trimmed {
            stream.drain(..stream_len - found.len());
        } else {
            assert_eq!(found.len(), stream_len, "round {round}: part of an XTRIM");
        }
        assert_eq!(found, stream, "round {round}: the stream's entries");
        // The list: whole, or without the LPOP's elements, or also cut by the LTRIM.
        let left: Vec<u64> = c.lrange("q", 0, -1).unwrap();
        let llen: usize = c.llen("q").unwrap();
        assert_eq!(llen, left.len(), "round {round}: LLEN against LRANGE");
        let outcome = match left.len() {
            n if n == list_len => 0,
            n if n == list_len - popped => 1,
            n if n == kept => 2,
            n => panic!("round {round}: {n} elements of {list_len}: part of an LPOP or LTRIM"),
        };
        if outcome >= 1 {
            list.drain(..popped);
        }
        if outcome == 2 {
            list.truncate(kept);
        }
        assert!(
            left.iter().eq(list.iter()),
            "round {round}: the list's elements"
        );
        outcomes.insert((trimmed, outcome));
    }
    // The kills came at different points of the three commands (the last, at least, after).
    eprintln!("big removals cut by SIGKILL: (stream trimmed, list outcome) met: {outcomes:?}");
    assert!(
        outcomes.len() >= 2,
        "every kill met the same state: {outcomes:?}"
    );
    server.terminate();
}

/// A sorted set used as a queue from its top (ZADD at falling scores, ZPOPMAX: oldest first)
/// while the server is SIGKILLed: after the restart the set holds a run of consecutive
/// members from just after the last acknowledged pop to the last acknowledged push, read
/// from the top (through the ceiling its pops left) and counted alike; an add above the
/// ceiling after the restart is seen first.
#[test]
fn zpopmax_queue_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "everysec");
    let pushed = Arc::new(Mutex::new(0u64));
    let popped = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let mut c = server.client();
        let (pushed, stop) = (pushed.clone(), stop.clone());
        std::thread::spawn(move || {
            for n in 1u64.. {
                let score = -(n as f64);
                if stop.load(Ordering::Relaxed) || c.zadd::<_, _, _, i64>("pq", n, score).is_err() {
                    return;
                }
                *pushed.lock().unwrap() = n;
            }
        })
    };
    let consumer = {
        let mut c = server.client();
        let (popped, stop) = (popped.clone(), stop.clone());
        std::thread::spawn(move || loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match c.zpopmax::<_, Vec<(u64, f64)>>("pq", 1) {
                Ok(got) if got.is_empty() => std::thread::sleep(Duration::from_millis(1)),
                Ok(got) => {
                    let mut p = popped.lock().unwrap();
                    assert_eq!(got[0].0, *p + 1, "popped out of order");
                    *p = got[0].0;
                }
                Err(_) => return,
            }
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    consumer.join().unwrap();
    let (pushed, popped) = (*pushed.lock().unwrap(), *popped.lock().unwrap());
    assert!(pushed > 0 && popped > 0, "pushed {pushed}, popped {popped}");
    let server = ServerProcess::start(dir.path(), "everysec");
    let mut c = server.client();
    let left: Vec<u64> = c.zrevrange("pq", 0, -1).unwrap();
    let card: usize = c.zcard("pq").unwrap();
    assert_eq!(card, left.len());
    let first = left.first().copied().unwrap_or(popped + 1);
    assert!(
        first == popped + 1 || first == popped + 2,
        "first {first}, popped {popped}"
    );
    for (i, n) in left.iter().enumerate() {
        assert_eq!(*n, first + i as u64, "a hole in the queue: {left:?}");
    }
    let last = left.last().copied().unwrap_or(first - 1);
    assert!(
        last == pushed || last == pushed + 1,
        "last {last}, pushed {pushed}"
    );
    let _: i64 = c.zadd("pq", "urgent", 10.0).unwrap();
    let top: Vec<String> = c.zrevrange("pq", 0, 0).unwrap();
    assert_eq!(top, vec!["urgent".to_string()]);
    server.terminate();
}

/// Started with a low open-files limit (soft 256, hard 1024), the server raises it, as
/// redis-server does, and serves more clients than the soft limit allowed; maxclients shrinks
/// to what the hard limit leaves room for (Redis's default 10 000 does not fit), so a client
/// over it would be refused with an error rather than left hanging.
#[test]
fn the_server_raises_a_low_open_files_limit_for_its_clients() {
    const CLIENTS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let server =
        ServerProcess::start_under(dir.path(), "everysec", Some("--nofile=256:1024".into()));
    let mut clients = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let mut c = std::net::TcpStream::connect(&server.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        std::io::Write::write_all(&mut c, b"PING\r\n").unwrap();
        let mut reply = [0u8; 7];
        std::io::Read::read_exact(&mut c, &mut reply)
            .unwrap_or_else(|e| panic!("client {i} got no reply: {e}"));
        assert_eq!(&reply, b"+PONG\r\n", "client {i}");
        clients.push(c);
    }
    let mut c = server.client();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .query(&mut c)
        .unwrap();
    let maxclients: usize = got[1].parse().unwrap();
    assert!(
        (CLIENTS..1024 - 32).contains(&maxclients),
        "maxclients {maxclients} under a hard limit of 1024 open files"
    );
}
