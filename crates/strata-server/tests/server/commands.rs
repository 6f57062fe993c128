//! Every command over a real socket, against the replies Redis gives.

use redis::{Commands, Value};

use super::{bulk, call, TestServer};

fn ok() -> Result<Value, String> {
    Ok(Value::Okay)
}

fn int(n: i64) -> Result<Value, String> {
    Ok(Value::Int(n))
}

fn b(s: &str) -> Result<Value, String> {
    Ok(bulk(s))
}

fn e(s: &str) -> Result<Value, String> {
    Err(s.to_string())
}

#[test]
fn string_commands_reply_like_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(call(&mut c, &["SET", "k", "v"]), ok());
    assert_eq!(call(&mut c, &["GET", "k"]), b("v"));
    assert_eq!(call(&mut c, &["GET", "missing"]), Ok(Value::Nil));
    assert_eq!(call(&mut c, &["SET", "k", "x", "NX"]), Ok(Value::Nil));
    assert_eq!(call(&mut c, &["SET", "k", "x", "XX", "GET"]), b("v"));
    assert_eq!(
        call(&mut c, &["SET", "k", "x", "NX", "XX"]),
        e("ERR syntax error")
    );
    assert_eq!(call(&mut c, &["SET", "k", "v", "EX", "100"]), ok());
    assert_eq!(call(&mut c, &["TTL", "k"]), int(100));
    assert_eq!(call(&mut c, &["SETNX", "k", "y"]), int(0));
    assert_eq!(call(&mut c, &["SETNX", "k2", "y"]), int(1));
    assert_eq!(call(&mut c, &["GETSET", "k2", "z"]), b("y"));
    assert_eq!(call(&mut c, &["GETDEL", "k2"]), b("z"));
    assert_eq!(call(&mut c, &["GETDEL", "k2"]), Ok(Value::Nil));
    assert_eq!(call(&mut c, &["MSET", "a", "1", "b", "2"]), ok());
    assert_eq!(
        call(&mut c, &["MGET", "a", "b", "nope"]),
        Ok(Value::Array(vec![bulk("1"), bulk("2"), Value::Nil]))
    );
    assert_eq!(call(&mut c, &["MSETNX", "a", "9", "c", "3"]), int(0));
    assert_eq!(call(&mut c, &["MSETNX", "c", "3", "d", "4"]), int(1));
    assert_eq!(
        call(&mut c, &["MSET", "a"]),
        e("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(call(&mut c, &["INCR", "n"]), int(1));
    assert_eq!(call(&mut c, &["INCRBY", "n", "10"]), int(11));
    assert_eq!(call(&mut c, &["DECR", "n"]), int(10));
    assert_eq!(call(&mut c, &["DECRBY", "n", "20"]), int(-10));
    assert_eq!(
        call(&mut c, &["INCR", "k"]),
        e("ERR value is not an integer or out of range")
    );
    assert_eq!(
        call(&mut c, &["INCRBY", "n", "1.5"]),
        e("ERR value is not an integer or out of range")
    );
    assert_eq!(call(&mut c, &["INCRBYFLOAT", "f", "10.5"]), b("10.5"));
    assert_eq!(call(&mut c, &["INCRBYFLOAT", "f", "0.1"]), b("10.6"));
    assert_eq!(
        call(&mut c, &["INCRBYFLOAT", "k", "1"]),
        e("ERR value is not a valid float")
    );
    assert_eq!(call(&mut c, &["APPEND", "s", "Hello"]), int(5));
    assert_eq!(call(&mut c, &["APPEND", "s", " World"]), int(11));
    assert_eq!(call(&mut c, &["STRLEN", "s"]), int(11));
    assert_eq!(call(&mut c, &["GETRANGE", "s", "-5", "-1"]), b("World"));
    assert_eq!(call(&mut c, &["SETRANGE", "s", "6", "Redis"]), int(11));
    assert_eq!(call(&mut c, &["GET", "s"]), b("Hello Redis"));
    assert_eq!(
        call(&mut c, &["GET"]),
        e("ERR wrong number of arguments for 'get' command")
    );
    // Binary-safe values survive the round trip.
    let binary: Vec<u8> = (0..=255u8).collect();
    let _: () = c.set("bin", &binary).unwrap();
    let back: Vec<u8> = c.get("bin").unwrap();
    assert_eq!(back, binary);
}

#[test]
fn keyspace_commands_cover_every_key() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..150 {
        let _: () = c.set(format!("user:{i:03}"), i).unwrap();
    }
    let _: () = c.set("other", "x").unwrap();
    assert_eq!(call(&mut c, &["DBSIZE"]), int(151));
    assert_eq!(call(&mut c, &["EXISTS", "other", "other", "nope"]), int(2));
    assert_eq!(
        call(&mut c, &["TYPE", "other"]),
        Ok(Value::SimpleString("string".into()))
    );
    assert_eq!(
        call(&mut c, &["TYPE", "nope"]),
        Ok(Value::SimpleString("none".into()))
    );
    assert_eq!(call(&mut c, &["TTL", "other"]), int(-1));
    assert_eq!(call(&mut c, &["TTL", "nope"]), int(-2));
    let mut keys: Vec<String> = c.keys("user:1*").unwrap();
    keys.sort();
    assert_eq!(keys.len(), 50);
    assert_eq!(keys[0], "user:100");
    // The client's SCAN iterator follows our cursors to the end and sees each key once.
    let mut scanned: Vec<String> = c.scan_match("user:*").unwrap().collect();
    scanned.sort();
    scanned.dedup();
    assert_eq!(scanned.len(), 150);
    let all: Vec<String> = c.scan().unwrap().collect();
    assert_eq!(all.len(), 151);
    assert_eq!(
        call(&mut c, &["SCAN", "notanumber"]),
        e("ERR invalid cursor")
    );
    assert_eq!(call(&mut c, &["DEL", "other", "user:000", "nope"]), int(2));
    assert_eq!(call(&mut c, &["UNLINK", "user:001"]), int(1));
    assert_eq!(call(&mut c, &["DBSIZE"]), int(148));
    assert_eq!(call(&mut c, &["FLUSHDB"]), ok());
    assert_eq!(call(&mut c, &["DBSIZE"]), int(0));
    let _: () = c.set("x", 1).unwrap();
    assert_eq!(call(&mut c, &["FLUSHALL", "SYNC"]), ok());
    assert_eq!(call(&mut c, &["KEYS", "*"]), Ok(Value::Array(vec![])));
}

#[test]
fn connection_and_server_commands() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        call(&mut c, &["PING"]),
        Ok(Value::SimpleString("PONG".into()))
    );
    assert_eq!(call(&mut c, &["PING", "hi"]), b("hi"));
    assert_eq!(call(&mut c, &["ECHO", "hello"]), b("hello"));
    assert_eq!(call(&mut c, &["SELECT", "0"]), ok());
    assert_eq!(call(&mut c, &["SELECT", "1"]), ok());
    assert_eq!(
        call(&mut c, &["SELECT", "16"]),
        e("ERR DB index is out of range")
    );
    assert_eq!(call(&mut c, &["SELECT", "0"]), ok());
    assert_eq!(call(&mut c, &["SELECT", "3"]), ok());
    let client_info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    assert!(client_info.contains(" db=3 "), "{client_info}");
    assert_eq!(call(&mut c, &["SELECT", "0"]), ok());
    assert_eq!(call(&mut c, &["CLIENT", "SETNAME", "tester"]), ok());
    assert_eq!(call(&mut c, &["CLIENT", "GETNAME"]), b("tester"));
    assert!(matches!(call(&mut c, &["CLIENT", "ID"]), Ok(Value::Int(n)) if n > 0));
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains("name=tester"), "{list}");
    assert_eq!(
        call(&mut c, &["NOSUCH", "a"]),
        e("ERR unknown command 'NOSUCH', with args beginning with: 'a' ")
    );
    let Ok(Value::Int(count)) = call(&mut c, &["COMMAND", "COUNT"]) else {
        panic!("COMMAND COUNT")
    };
    assert!(count > 60, "{count}");
    let Ok(Value::Array(all)) = call(&mut c, &["COMMAND"]) else {
        panic!("COMMAND")
    };
    assert_eq!(all.len() as i64, count);
    assert!(
        matches!(call(&mut c, &["COMMAND", "DOCS", "get"]), Ok(Value::Array(a)) if a.len() == 2)
    );
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Engine",
    ] {
        assert!(info.contains(section), "INFO lacks {section}:\n{info}");
    }
    assert!(
        info.contains("partition0:"),
        "INFO lacks engine partitions:\n{info}"
    );
    assert!(info.contains("connected_clients:1"), "{info}");
    let _: () = c.set("k", "v").unwrap();
    let keyspace: String = redis::cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert!(keyspace.contains("db0:keys=1,expires=0"), "{keyspace}");
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, vec!["maxclients".to_string(), "10000".to_string()]);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, vec!["appendfsync".to_string(), "everysec".to_string()]);
    assert_eq!(call(&mut c, &["CONFIG", "SET", "timeout", "300"]), ok());
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("timeout")
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], "300");
    assert!(call(&mut c, &["CONFIG", "SET", "appendfsync", "always"]).is_err());
    // Fixed when the engine opens, like appendfsync.
    assert!(call(&mut c, &["CONFIG", "SET", "background-nice", "3"]).is_err());
    assert_eq!(call(&mut c, &["SAVE"]), ok());
    assert_eq!(
        call(&mut c, &["BGSAVE"]),
        Ok(Value::SimpleString("Background saving started".into()))
    );
    assert!(matches!(call(&mut c, &["LASTSAVE"]), Ok(Value::Int(t)) if t > 1_600_000_000));
    assert!(matches!(call(&mut c, &["TIME"]), Ok(Value::Array(t)) if t.len() == 2));
    assert_eq!(call(&mut c, &["QUIT"]), ok());
}

#[test]
fn resp3_clients_get_resp3_types() {
    let server = TestServer::start();
    let mut c = redis::Client::open(format!("{}?protocol=resp3", server.url()))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(call(&mut c, &["GET", "nope"]), Ok(Value::Nil));
    let Ok(Value::Map(pairs)) = call(&mut c, &["CONFIG", "GET", "port"]) else {
        panic!("CONFIG GET must be a map under RESP3")
    };
    assert_eq!(pairs.len(), 1);
    let Ok(Value::Map(hello)) = call(&mut c, &["HELLO", "3"]) else {
        panic!("HELLO 3 must be a map")
    };
    // Keys are bulk strings, as Redis sends them (differential::server_introspection_matches_redis).
    assert!(hello.contains(&(Value::BulkString(b"proto".to_vec()), Value::Int(3))));
}

#[test]
fn requirepass_needs_auth_first() {
    let server = TestServer::start_with(strata_server::ServerConfig {
        requirepass: Some("hunter2".into()),
        ..Default::default()
    });
    let mut anon = server.client();
    assert_eq!(
        call(&mut anon, &["GET", "k"]),
        e("NOAUTH Authentication required.")
    );
    assert_eq!(
        call(&mut anon, &["AUTH", "wrong"]),
        e("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(call(&mut anon, &["AUTH", "hunter2"]), ok());
    assert_eq!(call(&mut anon, &["SET", "k", "v"]), ok());
    // Credentials in the URL: the client sends AUTH on connect.
    let mut authed = redis::Client::open(format!("redis://:hunter2@{}/", server.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(call(&mut authed, &["GET", "k"]), b("v"));
    let bad = redis::Client::open(format!("redis://:nope@{}/", server.addr))
        .unwrap()
        .get_connection();
    assert!(bad.is_err());
    // HELLO with AUTH authenticates and switches protocol at once.
    let mut raw = server.raw();
    std::io::Write::write_all(&mut raw, b"HELLO 3 AUTH default hunter2\r\nGET k\r\n").unwrap();
    let mut got = String::new();
    while !got.ends_with("$1\r\nv\r\n") {
        let mut buf = [0u8; 1024];
        let n = std::io::Read::read(&mut raw, &mut buf).unwrap();
        assert!(n > 0, "closed early: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(got.starts_with("%7\r\n"), "{got}");
}

/// MEMORY USAGE counts what the store keeps for a key: between two strings of equal-length
/// names it differs by exactly their values' length difference; a hash counted whole
/// (`SAMPLES 0`) grows by exactly the extra value bytes when one field's value is longer; a
/// sample of one element estimates from it; a document counts its stored bytes; an expired key
/// is nil.
#[test]
fn memory_usage_counts_stored_bytes() {
    let server = TestServer::start();
    let mut c = server.client();
    let usage = |c: &mut redis::Connection, args: &[&str]| -> i64 {
        let mut cmd = vec!["MEMORY", "USAGE"];
        cmd.extend_from_slice(args);
        match call(c, &cmd) {
            Ok(Value::Int(n)) => n,
            other => panic!("MEMORY USAGE {args:?}: {other:?}"),
        }
    };
    let _: () = c.set("s1", "x".repeat(10)).unwrap();
    let _: () = c.set("s2", "x".repeat(1010)).unwrap();
    assert_eq!(usage(&mut c, &["s2"]) - usage(&mut c, &["s1"]), 1000);
    for (i, len) in [(0, 5), (1, 5), (2, 5)] {
        let _: i64 = c.hset("h1", format!("f{i}"), "v".repeat(len)).unwrap();
        let _: i64 = c
            .hset(
                "h2",
                format!("f{i}"),
                "v".repeat(if i == 2 { len + 300 } else { len }),
            )
            .unwrap();
    }
    let (h1, h2) = (
        usage(&mut c, &["h1", "SAMPLES", "0"]),
        usage(&mut c, &["h2", "SAMPLES", "0"]),
    );
    // h1 is compact (a listpack in Redis) and its record lists its fields' order: the
    // floor's length byte and 4 bytes per field; h2 outgrew the encoding and lists none.
    assert_eq!(h2 - h1, 300 - (1 + 3 * 4), "h1 {h1}, h2 {h2}");
    // Three equal fields: one sampled stands for all three.
    assert_eq!(usage(&mut c, &["h1", "SAMPLES", "1"]), h1);
    // A sorted set's members have two entries each: more than a set of the same members.
    let _: i64 = c.zadd("z", "member", 1).unwrap();
    let _: i64 = c.sadd("s", "member").unwrap();
    assert!(usage(&mut c, &["z"]) > usage(&mut c, &["s"]));
    assert_eq!(call(&mut c, &["SET", "gone", "v", "PX", "1"]), ok());
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(call(&mut c, &["MEMORY", "USAGE", "gone"]), Ok(Value::Nil));
    assert_eq!(
        call(&mut c, &["JSON.SET", "doc", "$", r#"{"a":[1,2,3]}"#]),
        ok()
    );
    let small = usage(&mut c, &["doc"]);
    assert_eq!(
        call(
            &mut c,
            &[
                "JSON.SET",
                "doc",
                "$",
                &format!(r#"{{"a":"{}"}}"#, "y".repeat(500))
            ]
        ),
        ok()
    );
    assert!(usage(&mut c, &["doc"]) > small + 400);
}

/// A script that never ends runs until SCRIPT KILL stops it (past `busy-reply-threshold`;
/// others meanwhile are answered BUSY), also when it catches the kill with pcall; one that
/// wrote cannot be killed (SHUTDOWN NOSAVE stops the server without its writes); one that eats
/// memory fails at the limit; the server goes on serving.
#[test]
fn runaway_scripts_are_stopped_and_the_server_goes_on() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        call(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "100"]),
        ok()
    );
    for looping in [
        "while true do end",
        // Catching the kill with pcall does not keep a loop going.
        "while true do pcall(function() while true do end end) end",
    ] {
        let mut runner = server.client();
        let script = looping.to_string();
        let running = std::thread::spawn(move || call(&mut runner, &["EVAL", &script, "0"]));
        let started = std::time::Instant::now();
        loop {
            match call(&mut c, &["SCRIPT", "KILL"]) {
                Ok(_) => break,
                Err(e) if e.contains("NOTBUSY") => {
                    assert!(started.elapsed() < std::time::Duration::from_secs(30));
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("SCRIPT KILL answered {e}"),
            }
        }
        let Ok(Err(text)) = running.join() else {
            panic!("a killed script answered otherwise")
        };
        assert!(text.contains("Script killed by user"), "{text}");
    }
    assert_eq!(call(&mut c, &["SET", "after", "2"]), ok());
    // There are no coroutines to hide a loop in (the kill's hook does not reach into them).
    let co = call(
        &mut c,
        &[
            "EVAL",
            "local co = coroutine.create(function() while true do end end) return 1",
            "0",
        ],
    );
    let Err(text) = co else {
        panic!("coroutines answered {co:?}")
    };
    assert!(
        text.contains("nonexistent global variable 'coroutine'"),
        "{text}"
    );
    let hungry = call(
        &mut c,
        &[
            "EVAL",
            "local t = {} for i = 1, 1e9 do t[i] = string.rep(i .. 'x', 150) end",
            "0",
        ],
    );
    let Err(text) = hungry else {
        panic!("a memory-hungry script answered {hungry:?}")
    };
    assert!(text.to_lowercase().contains("memory"), "{text}");
    assert_eq!(call(&mut c, &["SET", "after", "2"]), ok());
    assert_eq!(
        call(
            &mut c,
            &["EVAL", "return redis.call('GET', KEYS[1])", "1", "after"]
        ),
        b("2")
    );
}

/// What a script forces into its environment (`table.insert` writes raw, past the
/// environment's guard; Redis's patched Lua refuses it) is gone for the next script: scripts
/// share no state.
#[test]
fn scripts_leave_no_state_for_each_other() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        call(&mut c, &["EVAL", "table.insert(_G, 'x') return _G[1]", "0"]),
        b("x")
    );
    for _ in 0..3 {
        let Err(text) = call(&mut c, &["EVAL", "return _G[1]", "0"]) else {
            panic!("a global from an earlier script was seen")
        };
        assert!(text.contains("nonexistent global variable '1'"), "{text}");
    }
}

/// The ways a Lua 5.1 script can reach the state's real globals or the shared libraries
/// (`getfenv`, a C function's environment, `loadstring`, `setfenv`, the string metatable) are
/// refused, so no script can leave state for the next one or break the libraries it uses: each
/// attempt fails, and later scripts see nothing of it.
#[test]
fn scripts_cannot_reach_the_real_globals_or_the_libraries() {
    let server = TestServer::start();
    let mut c = server.client();
    let attacks = [
        "getfenv(0).leak = 'x'",
        "getfenv(print).leak = 'x'",
        "rawset(getfenv(0), 'leak', 'x')",
        "rawset(getfenv(tostring), 'leak', 'x')",
        "loadstring(\"leak = 'x'\")()",
        "setfenv(0, { leak = 'x' })",
        "setfenv(1, { leak = 'x' })",
        "getmetatable('').__index.upper = function() return 'broken' end",
        "rawset(getmetatable('').__index, 'upper', function() return 'broken' end)",
        "getfenv(0).string = { upper = function() return 'broken' end }",
        "rawset(getfenv(print), 'tostring', nil)",
    ];
    for attack in attacks {
        let r = call(&mut c, &["EVAL", attack, "0"]);
        assert!(r.is_err(), "{attack}: answered {r:?}");
        for _ in 0..3 {
            let Err(text) = call(&mut c, &["EVAL", "return leak", "0"]) else {
                panic!("after {attack}: a later script saw the leaked global")
            };
            assert!(
                text.contains("nonexistent global variable 'leak'"),
                "after {attack}: {text}"
            );
            assert_eq!(
                call(
                    &mut c,
                    &["EVAL", "return string.upper('a') .. tostring(1)", "0"]
                ),
                b("A1"),
                "after {attack}"
            );
        }
    }
}

/// A script that returns a table containing itself gets an error, and the server lives on
/// (the conversion to a reply recursed until the stack overflowed and killed the process).
#[test]
fn a_script_returning_a_table_that_contains_itself_gets_an_error() {
    let server = TestServer::start();
    let mut c = server.client();
    let r = call(&mut c, &["EVAL", "local t = {} t[1] = t return t", "0"]);
    let Err(text) = r else {
        panic!("a self-containing table answered {r:?}")
    };
    assert!(text.contains("reached lua stack limit"), "{text}");
    let nested = call(
        &mut c,
        &[
            "EVAL",
            "local t = {} local c = t for i = 1, 20 do c[1] = {} c = c[1] end return t",
            "0",
        ],
    );
    assert!(nested.is_ok(), "{nested:?}");
    assert_eq!(
        call(&mut c, &["PING"]),
        Ok(Value::SimpleString("PONG".into()))
    );
}

/// ACL SAVE writes the users to the `aclfile`, a server started again reads them back (the
/// default user's password included), ACL LOAD replaces the users with the file's (closing
/// connections of users it no longer has), and a file with an error changes nothing and
/// names the line.
#[test]
fn acl_users_survive_a_restart_through_the_acl_file() {
    let dir = tempfile::tempdir().unwrap();
    let aclfile = dir.path().join("users.acl");
    let config = || strata_server::config::ServerConfig {
        aclfile: Some(aclfile.clone()),
        ..Default::default()
    };
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    {
        let server = TestServer::start_in(&data, config());
        let mut c = server.client();
        assert_eq!(
            call(
                &mut c,
                &[
                    "ACL",
                    "SETUSER",
                    "alice",
                    "on",
                    ">pw",
                    "~cache:*",
                    "+get",
                    "+ping",
                    "(+set ~w:*)"
                ]
            ),
            ok()
        );
        assert_eq!(
            call(&mut c, &["ACL", "SETUSER", "default", ">rootpw"]),
            ok()
        );
        assert_eq!(call(&mut c, &["ACL", "SAVE"]), ok());
        server.stop();
    }
    let server = TestServer::start_in(&data, config());
    let mut c = server.client();
    // The default user now has a password: unauthenticated, then AUTH.
    assert_eq!(
        call(&mut c, &["GET", "x"]),
        e("NOAUTH Authentication required.")
    );
    assert_eq!(call(&mut c, &["AUTH", "rootpw"]), ok());
    assert_eq!(
        call(&mut c, &["ACL", "USERS"]),
        Ok(Value::Array(vec![bulk("alice"), bulk("default")]))
    );
    let mut a = server.client();
    assert_eq!(call(&mut a, &["AUTH", "alice", "pw"]), ok());
    assert_eq!(call(&mut a, &["GET", "cache:1"]), Ok(Value::Nil));
    assert_eq!(call(&mut a, &["SET", "w:1", "v"]), ok());
    assert_eq!(
        call(&mut a, &["GET", "other"]),
        e("NOPERM this user has no permissions to access one of the keys used as arguments")
    );
    assert_eq!(
        call(&mut a, &["PING"]),
        Ok(Value::SimpleString("PONG".into()))
    );
    // A bad file: refused with its line, users unchanged.
    std::fs::write(
        &aclfile,
        "user bob on nopass +@all ~*\nuser carol +nosuch\n",
    )
    .unwrap();
    let err = call(&mut c, &["ACL", "LOAD"]).unwrap_err();
    assert!(
        err.contains("line 2: Error in user declaration '+nosuch'"),
        "{err}"
    );
    assert_eq!(
        call(&mut c, &["ACL", "USERS"]),
        Ok(Value::Array(vec![bulk("alice"), bulk("default")]))
    );
    // A good one replaces them: alice's connection is closed, bob exists, default (not in
    // the file) stays as it was.
    std::fs::write(&aclfile, "# users\nuser bob on nopass +@all ~*\n").unwrap();
    assert_eq!(call(&mut c, &["ACL", "LOAD"]), ok());
    assert_eq!(
        call(&mut c, &["ACL", "USERS"]),
        Ok(Value::Array(vec![bulk("bob"), bulk("default")]))
    );
    assert!(
        call(&mut a, &["PING"]).is_err(),
        "alice's connection is closed"
    );
    assert_eq!(call(&mut c, &["CONFIG", "SET", "aclfile", "x"]).unwrap_err(),
        "ERR CONFIG SET failed (possibly related to argument 'aclfile') - can't set immutable config");
}

/// WAITAOF (Redis 7.2, which has no differential reference here: the replies and errors are
/// those of Redis 7.2's `waitaofCommand`): `[1, 0]` once the log is forced with `numlocal` 1,
/// `[0, 0]` with 0; the argument checks in Redis's order; inside MULTI nothing is forced (the
/// transaction is not committed yet) and the log is answered 0; refused in scripts
/// (`noscript`). That it forces the log is proven by the power-cut test.
#[test]
fn waitaof_replies_as_redis_7_2() {
    let server = TestServer::start();
    let mut c = server.client();
    let pair = |a: i64, b: i64| Ok(Value::Array(vec![Value::Int(a), Value::Int(b)]));
    assert_eq!(call(&mut c, &["SET", "k", "v"]), ok());
    assert_eq!(call(&mut c, &["WAITAOF", "1", "0", "0"]), pair(1, 0));
    assert_eq!(call(&mut c, &["WAITAOF", "0", "0", "0"]), pair(0, 0));
    // No replicas: answered at once, as WAIT is.
    assert_eq!(call(&mut c, &["WAITAOF", "1", "2", "10"]), pair(1, 0));
    for (args, err) in [
        (
            ["2", "0", "0"],
            "ERR value is out of range, value must between 0 and 1",
        ),
        (
            ["x", "0", "0"],
            "ERR value is not an integer or out of range",
        ),
        (
            ["1", "-1", "0"],
            "ERR value is out of range, must be positive",
        ),
        (
            ["1", "x", "0"],
            "ERR value is not an integer or out of range",
        ),
        (["1", "0", "-1"], "ERR timeout is negative"),
        (
            ["1", "0", "x"],
            "ERR timeout is not an integer or out of range",
        ),
    ] {
        let mut cmd = vec!["WAITAOF"];
        cmd.extend(args);
        assert_eq!(call(&mut c, &cmd), e(err), "{args:?}");
    }
    assert_eq!(
        call(&mut c, &["WAITAOF", "1", "0"]),
        e("ERR wrong number of arguments for 'waitaof' command")
    );
    assert_eq!(call(&mut c, &["MULTI"]), ok());
    assert_eq!(
        call(&mut c, &["SET", "k", "w"]),
        Ok(Value::SimpleString("QUEUED".into()))
    );
    assert_eq!(
        call(&mut c, &["WAITAOF", "1", "0", "0"]),
        Ok(Value::SimpleString("QUEUED".into()))
    );
    assert_eq!(
        call(&mut c, &["EXEC"]),
        Ok(Value::Array(vec![
            Value::Okay,
            Value::Array(vec![Value::Int(0), Value::Int(0)])
        ]))
    );
    let in_script = call(
        &mut c,
        &["EVAL", "return redis.call('waitaof', 1, 0, 0)", "0"],
    );
    assert!(
        matches!(&in_script, Err(m) if m.contains("This Redis command is not allowed from script")),
        "{in_script:?}"
    );
}

/// A command's run time is its own (SLOWLOG, INFO commandstats): neither the time its
/// connection waited for the client before it, nor, for a script's call, the Lua code the
/// script ran before the call. (The commands of one batch chain their times, each starting
/// where the one before ended: `Session::clock_mark`.)
#[test]
fn a_commands_time_counts_neither_client_waits_nor_a_scripts_code() {
    let server = TestServer::start();
    let mut c = server.client();
    let slower_than_us: u64 = 100_000;
    let threshold = slower_than_us.to_string();
    assert_eq!(
        call(
            &mut c,
            &["CONFIG", "SET", "slowlog-log-slower-than", &threshold]
        ),
        ok()
    );
    assert_eq!(call(&mut c, &["SLOWLOG", "RESET"]), ok());
    assert_eq!(
        call(&mut c, &["PING"]),
        Ok(Value::SimpleString("PONG".into()))
    );
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(
        call(&mut c, &["PING"]),
        Ok(Value::SimpleString("PONG".into()))
    );
    // Lua busy between two calls, long enough for the EVAL itself to be logged.
    let script = "redis.call('ECHO', 'before') local i = 0 \
                  while i < tonumber(ARGV[1]) do i = i + 1 end \
                  return redis.call('ECHO', 'after')";
    let mut loops: u64 = 1_000_000;
    loop {
        let started = std::time::Instant::now();
        assert_eq!(
            call(&mut c, &["EVAL", script, "0", &loops.to_string()]),
            b("after")
        );
        if started.elapsed() >= std::time::Duration::from_micros(3 * slower_than_us)
            || loops >= 1 << 32
        {
            break;
        }
        loops *= 4;
    }
    let Ok(Value::Array(entries)) = call(&mut c, &["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET did not answer an array");
    };
    let names: Vec<String> = entries
        .iter()
        .map(|entry| match entry {
            Value::Array(fields) => match fields.get(3) {
                Some(Value::Array(args)) => match args.first() {
                    Some(Value::BulkString(name)) => String::from_utf8_lossy(name).into_owned(),
                    other => panic!("an entry's command: {other:?}"),
                },
                other => panic!("an entry's arguments: {other:?}"),
            },
            other => panic!("a slow log entry: {other:?}"),
        })
        .collect();
    assert!(
        names.iter().any(|n| n.eq_ignore_ascii_case("eval")),
        "the long EVAL is logged: {names:?}"
    );
    assert!(
        names.iter().all(|n| n.eq_ignore_ascii_case("eval")),
        "only the EVAL took long: {names:?}"
    );
}
