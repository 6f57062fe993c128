//! Past one machine, with the tools users already run: Strata nodes behind twemproxy
//! (`nutcracker`, which `.ci/test-deps` installs), and cluster node mode driven by redis-py's
//! `RedisCluster` (`clients/cluster_check.py`), `redis-cli -c` and the `redis` crate, with its
//! replies compared byte for byte with redis-server's own cluster mode.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A free loopback port with `digits` decimal digits (the differential test swaps ports of
/// equal length in replies).
fn free_port(digits: usize) -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port.to_string().len() == digits {
            return port;
        }
    }
}

fn wait_for_ping(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut buf = [0u8; 7];
            if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok()
                && s.read_exact(&mut buf).is_ok()
                && &buf == b"+PONG\r\n"
            {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what} on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `strata-server` process on a fixed port (so a restarted node keeps its address).
struct Node {
    child: Child,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl Node {
    fn start(dir: &Path, port: u16, extra: &[&str]) -> Node {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let child = Self::spawn(dir, port, &extra);
        wait_for_ping(port, "strata-server");
        Node {
            child,
            port,
            dir: dir.to_path_buf(),
            extra,
        }
    }

    fn spawn(dir: &Path, port: u16, extra: &[String]) -> Child {
        Command::new(env!("CARGO_BIN_EXE_strata-server"))
            .arg("--dir")
            .arg(dir)
            .args(["--port", &port.to_string(), "--partitions", "2"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn restart(&mut self) {
        self.child = Self::spawn(&self.dir, self.port, &self.extra);
        wait_for_ping(self.port, "restarted strata-server");
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bare RESP client (twemproxy closes connections that send commands it does not know, such
/// as the `CLIENT SETINFO` some client libraries send first).
struct Bare {
    reader: std::io::BufReader<TcpStream>,
}

impl Bare {
    fn connect(port: u16) -> std::io::Result<Bare> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Bare {
            reader: std::io::BufReader::new(s),
        })
    }

    /// Sends a command; the reply's first line (`+OK`, `-ERR ...`, `$3`), and a bulk's bytes.
    fn call(&mut self, args: &[&str]) -> std::io::Result<(String, Option<String>)> {
        use std::io::BufRead;
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.reader.get_mut().write_all(out.as_bytes())?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end().to_string();
        let bulk = match line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => {
                let mut buf = vec![0u8; n + 2];
                self.reader.read_exact(&mut buf)?;
                buf.truncate(n);
                Some(String::from_utf8_lossy(&buf).into_owned())
            }
            None => None,
        };
        Ok((line, bulk))
    }
}

/// Any child process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Pushes a map that gives the nodes equal slot ranges, at `version`.
fn push_even_map(nodes: &[&Node], version: u64) -> Vec<String> {
    let ids: Vec<String> = nodes
        .iter()
        .map(|n| {
            redis::cmd("CLUSTER")
                .arg("MYID")
                .query(&mut n.client())
                .unwrap()
        })
        .collect();
    let n = nodes.len();
    let mut map = String::new();
    for (i, node) in nodes.iter().enumerate() {
        let (first, last) = (16384 * i / n, 16384 * (i + 1) / n - 1);
        map.push_str(&format!(
            "{} 127.0.0.1 {} master - {first}-{last}\n",
            ids[i], node.port
        ));
    }
    for node in nodes {
        let reply: String = redis::cmd("CLUSTERX")
            .arg("SETNODES")
            .arg(&map)
            .arg(version)
            .query(&mut node.client())
            .unwrap();
        assert_eq!(reply, "OK");
    }
    ids
}

fn redis_cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .output()
        .expect("redis-cli not found (.ci/test-deps installs redis-server and redis-tools)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn redis_py_cluster_client_follows_moved_and_survives_a_slot_move_under_writes() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Node> = dirs
        .iter()
        .map(|d| Node::start(d.path(), free_port(5), &["--cluster"]))
        .collect();
    push_even_map(&nodes.iter().collect::<Vec<_>>(), 1);

    // redis-cli -c follows MOVED from whichever node it asks.
    let ports: Vec<String> = nodes.iter().map(|n| n.port.to_string()).collect();
    assert_eq!(
        redis_cli(&["-c", "-p", &ports[0], "SET", "foo", "bar"]),
        "OK"
    );
    assert_eq!(redis_cli(&["-c", "-p", &ports[1], "GET", "foo"]), "bar");
    assert_eq!(redis_cli(&["-c", "-p", &ports[2], "GET", "foo"]), "bar");

    super::run_client_script("cluster_check.py", &ports);
}

/// The `redis` crate's cluster client (the Rust applications' route): it reads CLUSTER SLOTS,
/// sends each command to its slot's node, and follows MOVED after the map changes under it.
#[test]
fn the_redis_crates_cluster_client_routes_and_follows_moved() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Node> = dirs
        .iter()
        .map(|d| Node::start(d.path(), free_port(5), &["--cluster"]))
        .collect();
    let ids = push_even_map(&nodes.iter().collect::<Vec<_>>(), 1);
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| format!("redis://127.0.0.1:{}/", n.port))
        .collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut c = client.get_connection().unwrap();
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("JSON.SET")
        .arg("doc")
        .arg("$")
        .arg(r#"{"n":1}"#)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("MSET")
        .arg("{t}a")
        .arg("1")
        .arg("{t}b")
        .arg("2")
        .query(&mut c)
        .unwrap();
    let per_node: Vec<i64> = nodes
        .iter()
        .map(|n| redis::cmd("DBSIZE").query(&mut n.client()).unwrap())
        .collect();
    assert!(
        per_node.iter().all(|&n| n > 50),
        "keys spread: {per_node:?}"
    );
    // Give node 0's slots to node 1, its keys copied over with DUMP/RESTORE: the client's map
    // is now stale, and MOVED corrects it.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut nodes[0].client())
        .unwrap();
    let mut src = nodes[0].client();
    let dumps: Vec<(String, Vec<u8>)> = keys
        .iter()
        .map(|k| {
            (
                k.clone(),
                redis::cmd("DUMP").arg(k).query(&mut src).unwrap(),
            )
        })
        .collect();
    let last0 = 16384 / 3 - 1;
    let last1 = 2 * 16384 / 3 - 1;
    let map = format!(
        "{} 127.0.0.1 {} master -\n{} 127.0.0.1 {} master - 0-{last1}\n{} 127.0.0.1 {} master - {}-16383\n",
        ids[0],
        nodes[0].port,
        ids[1],
        nodes[1].port,
        ids[2],
        nodes[2].port,
        last1 + 1
    );
    assert!(last0 < last1);
    for n in &nodes {
        let _: () = redis::cmd("CLUSTERX")
            .arg("SETNODES")
            .arg(&map)
            .arg(2)
            .query(&mut n.client())
            .unwrap();
    }
    let mut dst = nodes[1].client();
    for (k, payload) in &dumps {
        let _: () = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(payload.as_slice())
            .query(&mut dst)
            .unwrap();
    }
    let _: () = redis::cmd("FLUSHALL").query(&mut src).unwrap();
    for i in 0..300 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, i);
    }
    let doc: String = redis::cmd("JSON.GET").arg("doc").query(&mut c).unwrap();
    assert_eq!(doc, r#"{"n":1}"#);
    let tagged: Vec<String> = redis::cmd("MGET")
        .arg("{t}a")
        .arg("{t}b")
        .query(&mut c)
        .unwrap();
    assert_eq!(tagged, ["1", "2"]);
    assert!(!dumps.is_empty());
}

#[test]
fn cluster_state_survives_sigkill_and_older_maps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::start(dir.path(), free_port(5), &["--cluster"]);
    let other = "b".repeat(40);
    let id: String = redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.client())
        .unwrap();
    let map = format!(
        "{id} 127.0.0.1 {} master - 0-8191\n{other} 127.0.0.1 1 master - 8192-16383",
        node.port
    );
    let mut c = node.client();
    let set = |c: &mut redis::Connection, map: &str, v: u64| -> Result<String, String> {
        redis::cmd("CLUSTERX")
            .arg("SETNODES")
            .arg(map)
            .arg(v)
            .query(c)
            .map_err(|e| super::error_text(&e))
    };
    // Before any map: every keyed command is refused.
    assert_eq!(
        super::call(&mut c, &["GET", "bar"]).unwrap_err(),
        "CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(set(&mut c, &map, 5).unwrap(), "OK");
    let _: () = redis::cmd("SET").arg("bar").arg("1").query(&mut c).unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(5061)
        .arg("MIGRATING")
        .arg(&other)
        .query(&mut c)
        .unwrap();
    node.kill9();
    node.restart();
    let mut c = node.client();
    let again: String = redis::cmd("CLUSTER").arg("MYID").query(&mut c).unwrap();
    assert_eq!(again, id);
    let version: i64 = redis::cmd("CLUSTERX").arg("VERSION").query(&mut c).unwrap();
    assert_eq!(version, 5);
    // The move in progress survived too: a missing key of slot 5061 is asked of the target.
    assert_eq!(
        super::call(&mut c, &["GET", "{bar}missing"]).unwrap_err(),
        "ASK 5061 127.0.0.1:1"
    );
    assert_eq!(
        super::call(&mut c, &["GET", "foo"]).unwrap_err(),
        "MOVED 12182 127.0.0.1:1"
    );
    let older = set(&mut c, &map, 4).unwrap_err();
    assert!(older.contains("Invalid cluster version"), "{older}");
    let changed = map.replace("0-8191", "0-8190\n");
    let same_version = set(&mut c, &changed, 5).unwrap_err();
    assert!(
        same_version.contains("Invalid cluster version"),
        "{same_version}"
    );
    assert!(set(&mut c, "garbage line", 6)
        .unwrap_err()
        .contains("Invalid cluster nodes info"));
    // A standalone server has no cluster commands.
    drop(c);
    node.kill9();
    let mut plain = Node::start(dir.path(), node.port, &[]);
    let mut c = plain.client();
    assert_eq!(
        super::call(&mut c, &["CLUSTER", "INFO"]).unwrap_err(),
        "ERR This instance has cluster support disabled"
    );
    plain.kill9();
}

fn nutcracker() -> &'static str {
    ["nutcracker", "/usr/sbin/nutcracker"]
        .into_iter()
        .find(|p| Command::new(p).arg("-V").output().is_ok())
        .expect("nutcracker not found (.ci/test-deps installs Debian's nutcracker)")
}

/// Adding a node to a twemproxy pool: deploy/twemproxy/rebalance.py predicts nutcracker's
/// placement of every key (md5 and fnv1a_64 ketama) and moves the keys whose owner changed;
/// the proxy over four nodes then reads every key (`clients/twemproxy_check.py`).
#[test]
fn twemproxy_rebalance_predicts_placement_and_moves_keys_to_a_new_node() {
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Node> = dirs
        .iter()
        .map(|d| Node::start(d.path(), free_port(5), &[]))
        .collect();
    let work = tempfile::tempdir().unwrap();
    let mut args = vec![nutcracker().to_string(), work.path().display().to_string()];
    args.extend(nodes.iter().map(|n| n.port.to_string()));
    super::run_client_script("twemproxy_check.py", &args);
}

/// The twemproxy setup of deploy/twemproxy with `appendfsync always`: one node is SIGKILLed
/// while clients write through the proxy and restarted. Writes for its keys fail with an error
/// while it is down and succeed after; every acknowledged write reads back at the end.
#[test]
fn twemproxy_nodes_lose_no_acknowledged_write_when_one_is_killed() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes: Vec<Node> = dirs
        .iter()
        .map(|d| Node::start(d.path(), free_port(5), &["--appendfsync", "always"]))
        .collect();
    let proxy_port = free_port(5);
    let stats_port = free_port(5);
    let conf_dir = tempfile::tempdir().unwrap();
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/twemproxy/nutcracker.yml"
    ))
    .unwrap();
    let mut conf: String = template
        .lines()
        .take_while(|l| !l.trim_start().starts_with("- "))
        .map(|l| {
            if l.trim_start().starts_with("listen:") {
                format!("  listen: 127.0.0.1:{proxy_port}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    for (i, n) in nodes.iter().enumerate() {
        conf.push_str(&format!("    - 127.0.0.1:{}:1 strata{}\n", n.port, i + 1));
    }
    let conf_path = conf_dir.path().join("nutcracker.yml");
    std::fs::write(&conf_path, conf).unwrap();
    let _proxy = Proc(
        Command::new(nutcracker())
            .arg("-c")
            .arg(&conf_path)
            .args(["-s", &stats_port.to_string(), "-a", "127.0.0.1"])
            .arg("-o")
            .arg(conf_dir.path().join("nutcracker.log"))
            .arg("-p")
            .arg(conf_dir.path().join("nutcracker.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_ping(proxy_port, "nutcracker");

    let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let failed: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (acked, failed, stop) = (acked.clone(), failed.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = Bare::connect(proxy_port).unwrap();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let (k, v) = (format!("k{w}:{i}"), format!("v{i}"));
                    match c.call(&["SET", &k, &v]) {
                        Ok((line, _)) if line == "+OK" => acked.lock().unwrap().push((k, v)),
                        Ok(_) => failed.lock().unwrap().push(k),
                        Err(_) => {
                            failed.lock().unwrap().push(k);
                            // The proxy closed this connection: open another.
                            std::thread::sleep(Duration::from_millis(20));
                            if let Ok(fresh) = Bare::connect(proxy_port) {
                                c = fresh;
                            }
                        }
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    nodes[1].kill9();
    std::thread::sleep(Duration::from_millis(1500));
    let failed_while_down = failed.lock().unwrap().clone();
    let acked_while_down = acked.lock().unwrap().len();
    nodes[1].restart();
    let acked_at_restart = acked.lock().unwrap().len();
    std::thread::sleep(Duration::from_millis(2500));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        !failed_while_down.is_empty(),
        "no write failed while a node was down"
    );
    assert!(
        acked.len() > acked_while_down,
        "writes resumed after the restart"
    );
    // Every failed key belongs to the killed node, every acknowledged key reads back through
    // the proxy, and the killed node holds acknowledged keys written after its restart.
    let mut down_node = nodes[1].client();
    for k in &failed_while_down {
        let on_other_nodes: i64 = [0usize, 2]
            .iter()
            .map(|&i| {
                redis::cmd("EXISTS")
                    .arg(k)
                    .query::<i64>(&mut nodes[i].client())
                    .unwrap()
            })
            .sum();
        assert_eq!(on_other_nodes, 0, "{k} failed but another node stored it");
    }
    let mut c = Bare::connect(proxy_port).unwrap();
    let mut on_killed_after_restart = 0;
    for (i, (k, v)) in acked.iter().enumerate() {
        let (_, got) = c.call(&["GET", k]).unwrap();
        assert_eq!(got.as_deref(), Some(v.as_str()), "acknowledged {k} lost");
        if i >= acked_at_restart
            && redis::cmd("EXISTS")
                .arg(k)
                .query::<i64>(&mut down_node)
                .unwrap()
                == 1
        {
            on_killed_after_restart += 1;
        }
    }
    assert!(
        on_killed_after_restart > 0,
        "no write to the restarted node's keys succeeded after its restart"
    );
    eprintln!(
        "twemproxy: {} writes acknowledged, {} failed while a node was down, {} acknowledged by it after its restart",
        acked.len(),
        failed_while_down.len(),
        on_killed_after_restart
    );
}

/// Cluster replies compared byte for byte with redis-server's own cluster mode: two Redis
/// nodes joined with CLUSTER MEET and two Strata nodes given the same node ids and slot ranges;
/// the same commands go to the first node of each (RESP2, then RESP3), ports swapped for
/// names. Covers KEYSLOT, SLOTS, MOVED, CROSSSLOT, per-command and per-transaction checks,
/// ASK, TRYAGAIN and ASKING while a slot moves, SETSLOT's refusals, COUNTKEYSINSLOT,
/// GETKEYSINSLOT, SELECT, and COMMAND GETKEYS for fixed and movable key positions.
#[test]
fn cluster_replies_match_redis_cluster() {
    use super::differential::{words, Raw, RedisRef};
    let cluster_args = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "5000",
    ];
    // The bus port (port + 10000) must exist and ports must be five digits like Strata's.
    let start = || loop {
        let r = RedisRef::start_with(&cluster_args);
        if r.addr.port() < 55000 && r.addr.port() >= 10000 {
            return r;
        }
    };
    let (ra, rb) = (start(), start());
    let mut a = Raw::connect(ra.addr);
    let mut b = Raw::connect(rb.addr);
    let ok = b"+OK\r\n".to_vec();
    assert_eq!(
        a.call(&words(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"])),
        ok
    );
    assert_eq!(
        b.call(&words(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"])),
        ok
    );
    let meet = words(&["CLUSTER", "MEET", "127.0.0.1", &rb.addr.port().to_string()]);
    assert_eq!(a.call(&meet), ok);
    let id = |c: &mut Raw| {
        let r = c.call(&words(&["CLUSTER", "MYID"]));
        String::from_utf8_lossy(&r)
            .lines()
            .nth(1)
            .unwrap()
            .to_string()
    };
    let (id_a, id_b) = (id(&mut a), id(&mut b));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = [&mut a, &mut b].into_iter().all(|c| {
            let info = c.call(&words(&["CLUSTER", "INFO"]));
            let slots = c.call(&words(&["CLUSTER", "SLOTS"]));
            String::from_utf8_lossy(&info).contains("cluster_state:ok")
                && slots.starts_with(b"*2\r\n")
        });
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "the Redis cluster did not form");
        std::thread::sleep(Duration::from_millis(100));
    }

    let config = strata_server::ServerConfig {
        cluster: true,
        ..strata_server::ServerConfig::default()
    };
    let (sa, sb) = loop {
        let (x, y) = (
            super::TestServer::start_with(config.clone()),
            super::TestServer::start_with(config.clone()),
        );
        if [x.addr.port(), y.addr.port()]
            .iter()
            .all(|p| p.to_string().len() == 5)
        {
            break (x, y);
        }
    };
    let mut s = Raw::connect(sa.addr);
    for (server, id) in [(&sa, &id_a), (&sb, &id_b)] {
        let mut c = Raw::connect(server.addr);
        assert_eq!(c.call(&words(&["CLUSTERX", "SETNODEID", id])), ok);
    }
    let map = format!(
        "{id_a} 127.0.0.1 {} master - 0-8191\n{id_b} 127.0.0.1 {} master - 8192-16383\n",
        sa.addr.port(),
        sb.addr.port()
    );
    for server in [&sa, &sb] {
        let mut c = Raw::connect(server.addr);
        assert_eq!(c.call(&words(&["CLUSTERX", "SETNODES", &map, "1"])), ok);
    }

    let ports = [
        (ra.addr.port(), "PORTA"),
        (rb.addr.port(), "PORTB"),
        (sa.addr.port(), "PORTA"),
        (sb.addr.port(), "PORTB"),
    ];
    let named = |reply: Vec<u8>| {
        let mut text = String::from_utf8_lossy(&reply).into_owned();
        for (port, name) in ports {
            text = text.replace(&port.to_string(), name);
        }
        text
    };
    let unknown = "0".repeat(40);
    let script: Vec<Vec<&str>> = vec![
        vec!["CLUSTER", "KEYSLOT", "foo"],
        vec!["CLUSTER", "KEYSLOT", "{user1000}.following"],
        vec!["CLUSTER", "KEYSLOT", ""],
        vec!["CLUSTER", "SLOTS"],
        vec!["CLUSTER", "MYID"],
        vec!["SET", "bar", "x"],
        vec!["GET", "bar"],
        vec!["SET", "foo", "x"],
        vec!["GET", "foo"],
        vec!["DEL", "bar", "foo"],
        vec!["MSET", "bar", "1", "{bar}2", "2"],
        vec!["MGET", "bar", "{bar}2"],
        vec!["MSET", "bar", "1", "foo", "2"],
        vec!["EXISTS", "bar", "{bar}2"],
        vec!["SET", "hello", "1"],
        vec!["CLUSTER", "COUNTKEYSINSLOT", "5061"],
        vec!["CLUSTER", "COUNTKEYSINSLOT", "16384"],
        vec!["CLUSTER", "COUNTKEYSINSLOT", "x"],
        vec!["CLUSTER", "GETKEYSINSLOT", "866", "5"],
        vec!["CLUSTER", "GETKEYSINSLOT", "866", "0"],
        vec!["CLUSTER", "GETKEYSINSLOT", "5061", "-1"],
        vec!["CLUSTER", "GETKEYSINSLOT", "99999", "1"],
        vec!["MULTI"],
        vec!["SET", "foo", "1"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["SET", "bar", "1"],
        vec!["SET", "{bar}x", "2"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["SET", "bar", "1"],
        vec!["SET", "hello", "2"],
        vec!["EXEC"],
        vec!["EXEC"],
        vec!["SELECT", "1"],
        vec!["SELECT", "0"],
        vec!["ASKING"],
        vec!["GET", "foo"],
        vec!["CLUSTER", "SETSLOT", "5061", "MIGRATING", &id_b],
        vec!["GET", "bar"],
        vec!["GET", "{bar}zz"],
        vec!["MSET", "bar", "1", "{bar}zz", "2"],
        vec!["SET", "{bar}new", "1"],
        vec!["CLUSTER", "SETSLOT", "5061", "STABLE"],
        vec!["GET", "{bar}zz"],
        vec!["CLUSTER", "SETSLOT", "12182", "IMPORTING", &id_b],
        vec!["GET", "foo"],
        vec!["ASKING"],
        vec!["GET", "foo"],
        vec!["ASKING"],
        vec!["SET", "foo", "v"],
        vec!["GET", "foo"],
        vec!["ASKING"],
        vec!["MSET", "foo", "1", "{foo}b", "2"],
        // ASKING lets only the next command through, even one refused for its arity.
        vec!["ASKING"],
        vec!["GET"],
        vec!["GET", "foo"],
        vec!["ASKING"],
        vec!["NOSUCHCOMMAND"],
        vec!["GET", "foo"],
        // ASKING lasts through a transaction (Redis keeps it while in MULTI), and ends with it.
        vec!["ASKING"],
        vec!["MULTI"],
        vec!["SET", "foo", "in-multi"],
        vec!["GET", "foo"],
        vec!["EXEC"],
        vec!["GET", "foo"],
        vec!["CLUSTER", "SETSLOT", "12182", "STABLE"],
        vec!["CLUSTER", "SETSLOT", "12182", "MIGRATING", &id_b],
        vec!["CLUSTER", "SETSLOT", "5061", "MIGRATING", &unknown],
        vec!["CLUSTER", "SETSLOT", "5061", "IMPORTING", &id_b],
        vec!["CLUSTER", "SETSLOT", "99999", "STABLE"],
        vec!["COMMAND", "GETKEYS", "SET", "a", "b"],
        vec!["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
        vec!["COMMAND", "GETKEYS", "GET"],
        vec!["COMMAND", "GETKEYS", "PING"],
        vec!["COMMAND", "GETKEYS", "NOSUCH", "a"],
        vec![
            "COMMAND",
            "GETKEYS",
            "ZUNIONSTORE",
            "d",
            "2",
            "a",
            "b",
            "WEIGHTS",
            "1",
            "2",
        ],
        vec!["COMMAND", "GETKEYS", "ZUNION", "2", "a", "b"],
        // Of several STOREs the last is the destination (Redis's sort.tcl).
        vec![
            "COMMAND", "GETKEYS", "SORT", "abc", "STORE", "invalid", "STORE", "stillbad", "STORE",
            "def",
        ],
        vec![
            "COMMAND",
            "GETKEYS",
            "ZINTERCARD",
            "2",
            "a",
            "b",
            "LIMIT",
            "1",
        ],
        vec!["COMMAND", "GETKEYS", "SINTERCARD", "3", "a", "b", "c"],
        vec!["COMMAND", "GETKEYS", "LMPOP", "2", "a", "b", "LEFT"],
        vec!["COMMAND", "GETKEYS", "BLMPOP", "0", "2", "a", "b", "LEFT"],
        vec!["COMMAND", "GETKEYS", "BZMPOP", "0", "1", "z", "MIN"],
        vec![
            "COMMAND", "GETKEYS", "SORT", "s", "BY", "w", "GET", "g", "STORE", "d",
        ],
        vec![
            "COMMAND", "GETKEYS", "SORT", "s", "LIMIT", "0", "1", "ALPHA",
        ],
        vec!["COMMAND", "GETKEYS", "LMOVE", "a", "b", "LEFT", "RIGHT"],
        vec!["COMMAND", "GETKEYS", "BLPOP", "a", "b", "0"],
        vec!["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "k", "0", "10"],
        vec![
            "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "10", "KEYS", "a", "b",
        ],
        vec!["COMMAND", "GETKEYS", "OBJECT", "ENCODING", "k"],
        vec!["COMMAND", "GETKEYS", "RENAME", "a", "b"],
        vec!["COMMAND", "GETKEYS", "BITOP", "AND", "d", "a", "b"],
        vec!["COMMAND", "GETKEYS", "ZRANGESTORE", "d", "s", "0", "1"],
        vec!["COMMAND", "GETKEYS", "EXISTS", "a", "b", "c"],
        vec!["COMMAND", "GETKEYS", "JSON.GET", "a"],
        vec!["RPUSH", "{bar}list", "3", "1", "2"],
        vec!["SORT", "{bar}list"],
        vec!["SORT", "{bar}list", "BY", "nosort"],
        vec!["SORT", "{bar}list", "BY", "w_*"],
        vec!["SORT", "{bar}list", "GET", "o_*"],
        vec!["SORT", "{bar}list", "GET", "#"],
        vec!["LCS", "bar", "{bar}2"],
        vec!["LCS", "bar", "foo"],
        vec!["COPY", "bar", "{bar}copy", "DB", "1"],
        vec!["COPY", "bar", "{bar}copy", "DB", "0"],
        vec!["DBSIZE"],
        vec!["KEYS", "*"],
        vec!["CLUSTER", "NOSUCH"],
        vec!["FLUSHALL"],
    ];
    let mut compared = 0;
    for protocol in ["2", "3"] {
        if protocol == "3" {
            // Both say they run in cluster mode (the rest of HELLO names each server).
            for hello in [
                a.call(&words(&["HELLO", "3"])),
                s.call(&words(&["HELLO", "3"])),
            ] {
                let text = String::from_utf8_lossy(&hello).into_owned();
                assert!(
                    text.contains("mode\r\n$7\r\ncluster\r\n"),
                    "HELLO in cluster mode: {text:?}"
                );
            }
        }
        for command in &script {
            // JSON commands exist only here: the reference has no RedisJSON.
            if command.contains(&"JSON.GET") {
                continue;
            }
            let args = words(command);
            let want = named(a.call(&args));
            let got = named(s.call(&args));
            let shown = if command[0] == "KEYS" {
                // Key order: compare sorted.
                let mut w: Vec<&str> = want.lines().collect();
                let mut g: Vec<&str> = got.lines().collect();
                w.sort_unstable();
                g.sort_unstable();
                (w.join("\n"), g.join("\n"))
            } else {
                (want, got)
            };
            assert_eq!(
                shown.1, shown.0,
                "RESP{protocol}: {command:?} differs (left: Strata, right: redis-server)"
            );
            compared += 1;
        }
    }
    // A pipeline of plain SETs (which the connection may merge into one engine write) still
    // gets each key's own answer, while a slot is moving too.
    let pipeline: Vec<Vec<Vec<u8>>> = [
        vec!["SET", "bar", "1"],
        vec!["SET", "foo", "1"],
        vec!["SET", "hello", "2"],
        vec!["SET", "{bar}x", "3"],
        vec!["SET", "{foo}y", "4"],
        vec!["SET", "user:1", "5"],
    ]
    .iter()
    .map(|c| words(c))
    .collect();
    for migrating in [false, true] {
        for c in [&mut a, &mut s] {
            let setslot = if migrating { "MIGRATING" } else { "STABLE" };
            let mut args = words(&["CLUSTER", "SETSLOT", "5061", setslot]);
            if migrating {
                args.push(id_b.as_bytes().to_vec());
            }
            assert_eq!(named(c.call(&args)), "+OK\r\n");
            c.call(&words(&["DEL", "{bar}x"]));
        }
        a.send_all(&pipeline);
        s.send_all(&pipeline);
        for command in &pipeline {
            let (want, got) = (named(a.reply()), named(s.reply()));
            assert_eq!(
                got,
                want,
                "pipelined {:?} (migrating: {migrating})",
                String::from_utf8_lossy(&command[1])
            );
            compared += 1;
        }
    }
    eprintln!("cluster replies compared: {compared}");
}

/// MIGRATE between two standalone servers, compared with the same between two redis-servers
/// (replies byte for byte, and what each side holds afterwards), and across: a key moved from
/// Strata to redis-server and back arrives whole, with its time to live.
#[test]
fn migrate_matches_redis_and_moves_keys_between_strata_and_redis() {
    use super::differential::{words, Raw, RedisRef};
    let (r1, r2) = (RedisRef::start(), RedisRef::start());
    let (s1, s2) = (super::TestServer::start(), super::TestServer::start());
    let setup: Vec<Vec<&str>> = vec![
        vec!["SET", "s", "hello"],
        vec!["RPUSH", "l", "a", "b", "c"],
        vec!["HSET", "h", "f", "v", "g", "w"],
        vec!["SADD", "set", "x", "y"],
        vec!["ZADD", "z", "1", "m", "2.5", "n"],
        vec!["SET", "t", "ttl", "EX", "1000"],
        vec!["SET", "k1", "1"],
        vec!["SET", "k2", "2"],
        vec!["SET", "busy", "here"],
        vec!["SET", "k3", "3"],
    ];
    let target_setup: Vec<Vec<&str>> = vec![vec!["SET", "busy", "there"]];
    for (src, dst) in [(r1.addr, r2.addr), (s1.addr, s2.addr)] {
        let mut c = Raw::connect(src);
        for command in &setup {
            c.call(&words(command));
        }
        let mut c = Raw::connect(dst);
        for command in &target_setup {
            c.call(&words(command));
        }
    }
    let script = |to: u16| -> Vec<Vec<String>> {
        let to = to.to_string();
        let m = |rest: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = ["MIGRATE", "127.0.0.1", to.as_str()]
                .iter()
                .map(|s| s.to_string())
                .collect();
            v.extend(rest.iter().map(|s| s.to_string()));
            v
        };
        vec![
            m(&["s", "0", "1000"]),
            m(&["s", "0", "1000"]),
            m(&["l", "0", "1000", "COPY"]),
            m(&["", "0", "1000", "KEYS", "h", "set", "z", "t", "nokey"]),
            m(&["", "0", "1000", "KEYS", "k1", "k2"]),
            m(&["busy", "0", "1000"]),
            // The target refuses `busy` (BUSYKEY); `k3` still moves, as Redis carries on.
            m(&["", "0", "1000", "KEYS", "busy", "k3"]),
            vec!["EXISTS".into(), "k3".into()],
            m(&["busy", "0", "1000", "REPLACE"]),
            m(&["x", "0", "1000", "KEYS", "a"]),
            m(&["x", "0", "1000", "BOGUS"]),
            m(&["s", "0", "notanumber"]),
            vec![
                "EXISTS".into(),
                "s".into(),
                "l".into(),
                "h".into(),
                "busy".into(),
            ],
        ]
    };
    let mut src_r = Raw::connect(r1.addr);
    let mut src_s = Raw::connect(s1.addr);
    let (script_r, script_s) = (script(r2.addr.port()), script(s2.addr.port()));
    for (cr, cs) in script_r.iter().zip(&script_s) {
        let to_bytes =
            |c: &Vec<String>| c.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let want = src_r.call(&to_bytes(cr));
        let got = src_s.call(&to_bytes(cs));
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{cs:?} (left: Strata, right: redis-server)"
        );
    }
    // What the targets hold.
    let reads: Vec<Vec<&str>> = vec![
        vec!["GET", "s"],
        vec!["LRANGE", "l", "0", "-1"],
        vec!["HGETALL", "h"],
        vec!["SMEMBERS", "set"],
        vec!["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        vec!["GET", "t"],
        vec!["GET", "busy"],
        vec!["MGET", "k1", "k2"],
        vec!["EXISTS", "nokey"],
    ];
    let mut dst_r = Raw::connect(r2.addr);
    let mut dst_s = Raw::connect(s2.addr);
    for command in &reads {
        let (want, got) = (dst_r.call(&words(command)), dst_s.call(&words(command)));
        let sorted = |b: &[u8]| {
            let mut lines: Vec<String> = String::from_utf8_lossy(b)
                .lines()
                .map(String::from)
                .collect();
            lines.sort();
            lines
        };
        assert_eq!(sorted(&got), sorted(&want), "{command:?} on the target");
    }
    let ttl = dst_s.call(&words(&["TTL", "t"]));
    assert!(
        ttl.starts_with(b":99") || ttl == b":1000\r\n",
        "TTL kept: {}",
        String::from_utf8_lossy(&ttl)
    );

    // Across: Strata -> redis-server -> Strata.
    let mut c = Raw::connect(s2.addr);
    c.call(&words(&["RPUSH", "across", "1", "2", "3"]));
    c.call(&words(&["PEXPIRE", "across", "500000"]));
    let r2port = r1.addr.port().to_string();
    assert_eq!(
        c.call(&words(&[
            "MIGRATE",
            "127.0.0.1",
            &r2port,
            "across",
            "0",
            "1000"
        ])),
        b"+OK\r\n".to_vec()
    );
    let mut r = Raw::connect(r1.addr);
    assert_eq!(
        r.call(&words(&["LRANGE", "across", "0", "-1"])),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n".to_vec()
    );
    let back = s2.addr.port().to_string();
    assert_eq!(
        r.call(&words(&[
            "MIGRATE",
            "127.0.0.1",
            &back,
            "across",
            "0",
            "1000"
        ])),
        b"+OK\r\n".to_vec()
    );
    assert_eq!(
        c.call(&words(&["LRANGE", "across", "0", "-1"])),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n".to_vec()
    );
    let pttl = String::from_utf8_lossy(&c.call(&words(&["PTTL", "across"]))).to_string();
    let left: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
    assert!(
        (400_000..=500_000).contains(&left),
        "PTTL after two moves: {left}"
    );
    assert_eq!(r.call(&words(&["EXISTS", "across"])), b":0\r\n".to_vec());
}

/// A client blocked in BLPOP on a key whose slot the map gives to another node gets MOVED when
/// the map changes (Redis redirects blocked clients too), not after its timeout.
#[test]
fn blocked_clients_are_redirected_when_their_slot_moves_away() {
    let config = strata_server::ServerConfig {
        cluster: true,
        ..strata_server::ServerConfig::default()
    };
    let server = super::TestServer::start_with(config);
    let mut c = server.client();
    let id: String = redis::cmd("CLUSTER").arg("MYID").query(&mut c).unwrap();
    let other = "b".repeat(40);
    let set_map = |c: &mut redis::Connection, mine: &str, theirs: &str, v: u64| {
        let map = format!(
            "{id} 127.0.0.1 {} master - {mine}\n{other} 127.0.0.1 1 master - {theirs}",
            server.addr.port()
        );
        let _: () = redis::cmd("CLUSTERX")
            .arg("SETNODES")
            .arg(map)
            .arg(v)
            .query(c)
            .unwrap();
    };
    // "q" is in slot 11958.
    set_map(&mut c, "0-16383", "", 1);
    let mut blocked = server.client();
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let reply = super::call(&mut blocked, &["BLPOP", "q", "0"]);
        (reply, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    set_map(&mut c, "0-11957 11959-16383", "11958", 2);
    let (reply, waited) = waiter.join().unwrap();
    assert_eq!(reply.unwrap_err(), "MOVED 11958 127.0.0.1:1");
    assert!(
        waited < Duration::from_secs(10),
        "redirected only after {waited:?}"
    );
}
