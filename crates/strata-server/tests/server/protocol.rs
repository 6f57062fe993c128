//! The wire protocol over raw sockets: inline commands, pipelining, RESP3, hostile input, and
//! connection limits.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use strata_server::ServerConfig;

use super::{call, read_exact_text, read_to_end, send_and_read_to_end, TestServer};

#[test]
fn inline_commands_work_with_crlf_and_bare_lf() {
    let server = TestServer::start();
    let mut s = server.raw();
    let (out, closed) = send_and_read_to_end(
        &mut s,
        b"SET hello world\r\nGET hello\nSET quoted \"two words\"\nGET quoted\r\nQUIT\r\n",
    );
    assert!(closed);
    assert_eq!(
        String::from_utf8_lossy(&out),
        "+OK\r\n$5\r\nworld\r\n+OK\r\n$9\r\ntwo words\r\n+OK\r\n"
    );
}

#[test]
fn pipelined_commands_in_one_write_are_answered_in_order() {
    let server = TestServer::start();
    let mut s = server.raw();
    let mut req = Vec::new();
    for i in 0..100 {
        strata_server::resp::parse::encode_command(
            &["SET", &format!("k{i}"), &i.to_string()],
            &mut req,
        );
        strata_server::resp::parse::encode_command(&["GET", &format!("k{i}")], &mut req);
    }
    s.write_all(&req).unwrap();
    let mut want = String::new();
    for i in 0..100 {
        let v = i.to_string();
        want.push_str(&format!("+OK\r\n${}\r\n{v}\r\n", v.len()));
    }
    assert_eq!(read_exact_text(&mut s, want.len()), want);
}

#[test]
fn thousands_of_tiny_commands_in_one_write_are_all_answered() {
    // More commands than one batch holds arrive in a single read; the client then only waits.
    let server = TestServer::start();
    let mut s = server.raw();
    s.write_all(&b"PING\r\n".repeat(5_000)).unwrap();
    let want = "+PONG\r\n".repeat(5_000);
    assert_eq!(read_exact_text(&mut s, want.len()), want);
}

#[test]
fn resp3_after_hello_3() {
    let server = TestServer::start();
    let mut s = server.raw();
    s.write_all(b"HELLO 3\r\n").unwrap();
    let mut head = [0u8; 4];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"%7\r\n");
    // Drain the rest of the HELLO map, then check a null and a double.
    s.write_all(b"PING\r\n").unwrap();
    let mut seen = Vec::new();
    while !seen.ends_with(b"+PONG\r\n") {
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    s.write_all(b"GET nothing\r\n").unwrap();
    assert_eq!(read_exact_text(&mut s, 3), "_\r\n");
}

/// Inputs that break the protocol, each answered with `-ERR Protocol error: ...` and a close.
const GARBAGE: &[(&str, &[u8])] = &[
    ("bad type byte inside a multibulk", b"*1\r\n+PING\r\n"),
    ("negative bulk length", b"*1\r\n$-3\r\n"),
    ("huge bulk length", b"*1\r\n$99999999999\r\n"),
    ("non-numeric multibulk count", b"*x\r\n"),
    ("huge multibulk count", b"*9999999999\r\n"),
    ("missing CRLF after bulk data", b"*1\r\n$4\r\nPINGxx"),
    ("LF-only header", b"*1\n$4\nPING\n"),
    ("binary garbage", b"\x00\xff\x13\x37garbage"),
    (
        "TLS client hello",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ),
    ("unbalanced quotes", b"SET a \"unterminated\r\n"),
];

#[test]
fn protocol_garbage_gets_an_error_and_a_close_and_others_are_unaffected() {
    let server = TestServer::start();
    let mut bystander = server.client();
    for (what, input) in GARBAGE {
        let mut s = server.raw();
        let (out, closed) = send_and_read_to_end(&mut s, input);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("-ERR Protocol error: ") && text.ends_with("\r\n"),
            "{what}: got {text:?}"
        );
        assert!(closed, "{what}: connection left open");
        assert_eq!(
            call(&mut bystander, &["PING"]),
            Ok(redis::Value::SimpleString("PONG".into()))
        );
    }
}

#[test]
fn valid_commands_before_garbage_still_run() {
    let server = TestServer::start();
    let mut s = server.raw();
    let (out, closed) = send_and_read_to_end(&mut s, b"SET a 1\r\n*1\r\n$x\r\n");
    assert!(closed);
    assert_eq!(
        String::from_utf8_lossy(&out),
        "+OK\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
}

#[test]
fn oversized_requests_are_refused_without_buffering_them() {
    let server = TestServer::start_with(ServerConfig {
        proto_max_bulk_len_bytes: 4096,
        ..ServerConfig::default()
    });
    // A declared length over the limit is refused before any data is read.
    let mut s = server.raw();
    let (out, closed) = send_and_read_to_end(&mut s, b"*2\r\n$3\r\nGET\r\n$4097\r\n");
    assert!(String::from_utf8_lossy(&out).starts_with("-ERR Protocol error: invalid bulk length"));
    assert!(closed);
    // An inline line longer than 64 KiB with no newline.
    let mut s = server.raw();
    let line = vec![b'a'; 70 * 1024];
    let (out, closed) = send_and_read_to_end(&mut s, &line);
    assert!(
        String::from_utf8_lossy(&out).starts_with("-ERR Protocol error: too big inline request")
    );
    assert!(closed);
    // A value within the limit is fine.
    let mut c = server.client();
    let v = "x".repeat(4096);
    assert_eq!(call(&mut c, &["SET", "big", &v]), Ok(redis::Value::Okay));
}

#[test]
fn http_requests_are_cut_off() {
    let server = TestServer::start();
    let mut s = server.raw();
    let (out, closed) = send_and_read_to_end(&mut s, b"POST / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed);
    assert!(out.is_empty(), "{:?}", String::from_utf8_lossy(&out));
}

#[test]
fn maxclients_turns_extra_clients_away() {
    let server = TestServer::start_with(ServerConfig {
        maxclients: 2,
        ..ServerConfig::default()
    });
    let mut a = server.client();
    let _b = server.client();
    let mut third = server.raw();
    let (out, closed) = read_to_end(&mut third);
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR max number of clients reached\r\n"
    );
    assert!(closed);
    assert_eq!(
        call(&mut a, &["PING"]),
        Ok(redis::Value::SimpleString("PONG".into()))
    );
    let Ok(redis::Value::BulkString(info)) = call(&mut a, &["INFO", "stats"]) else {
        panic!("INFO")
    };
    assert!(String::from_utf8_lossy(&info).contains("rejected_connections:1"));
}

#[test]
fn idle_clients_are_disconnected_after_timeout() {
    let server = TestServer::start_with(ServerConfig {
        timeout_secs: 1,
        ..ServerConfig::default()
    });
    let mut s = server.raw();
    s.write_all(b"PING\r\n").unwrap();
    assert_eq!(read_exact_text(&mut s, 7), "+PONG\r\n");
    let started = Instant::now();
    let (_, closed) = read_to_end(&mut s);
    assert!(closed);
    let idle = started.elapsed();
    assert!(
        idle >= Duration::from_millis(900) && idle < Duration::from_secs(4),
        "{idle:?}"
    );
}

/// Subscribers are exempt from the idle timeout (as in Redis): one that sends nothing for twice
/// the timeout still gets its messages.
#[test]
fn subscribers_outlive_the_idle_timeout() {
    let server = TestServer::start_with(ServerConfig {
        timeout_secs: 1,
        ..ServerConfig::default()
    });
    let mut s = server.raw();
    s.write_all(b"SUBSCRIBE news\r\n").unwrap();
    let confirm = "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n";
    assert_eq!(read_exact_text(&mut s, confirm.len()), confirm);
    std::thread::sleep(Duration::from_millis(2200));
    let mut publisher = server.raw();
    publisher.write_all(b"PUBLISH news hello\r\n").unwrap();
    assert_eq!(read_exact_text(&mut publisher, 4), ":1\r\n");
    let message = "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n";
    assert_eq!(read_exact_text(&mut s, message.len()), message);
}

#[test]
fn pipelined_sets_before_auth_are_all_refused() {
    let server = TestServer::start_with(ServerConfig {
        requirepass: Some("pw".into()),
        ..ServerConfig::default()
    });
    let mut s = server.raw();
    s.write_all(b"SET a 1\r\nSET b 2\r\nAUTH pw\r\nSET a 1\r\nSET b 2\r\nGET b\r\n")
        .unwrap();
    let want = "-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n+OK\r\n+OK\r\n+OK\r\n$1\r\n2\r\n";
    assert_eq!(read_exact_text(&mut s, want.len()), want);
}
