//! The optional line-protocol listener of seed 004's key-value store (`strata serve
//! --text-port 7878`, off by default), so that its clients work unchanged:
//! `echo 'SET hello world' | nc 127.0.0.1 7878`. One command per line, words split on spaces:
//! `SET key value` answers `success`, `GET key` the value or `no value stored`, `DELETE key`
//! `success`; anything else `Unknown command`, as the seed does; a failure of the store answers
//! `error: ...` (the seed crashed). As in the seed, a value is one word (`SET k a b` stores
//! `a`). Keys are the server's: database 0 strings, the ones `GET` over RESP reads.

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::commands::{execute, Ctx, Locking};
use crate::resp::Reply;
use crate::state::{Session, Shared};

/// Longest line accepted (as Redis's inline commands).
const LINE_BYTES_MAX: usize = crate::resp::parse::INLINE_BYTES_MAX;

/// Accepts text-protocol connections until shutdown.
pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    while let Some((stream, peer)) =
        crate::server::next_connection(&listener, &mut shutdown, "text listener").await
    {
        tokio::spawn(serve(stream, shared.clone(), peer));
    }
}

/// The reply line to one request line.
fn answer(shared: &Shared, session: &mut Session, line: &[u8]) -> String {
    let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let (args, kind): (Vec<&[u8]>, _) = match words.as_slice() {
        [b"GET", key, ..] => (vec![b"GET", key], "get"),
        [b"SET", key, value, ..] => (vec![b"SET", key, value], "set"),
        [b"DELETE", key, ..] => (vec![b"DEL", key], "delete"),
        _ => return "Unknown command".into(),
    };
    let args: Vec<Bytes> = args.into_iter().map(Bytes::copy_from_slice).collect();
    let mut ctx = Ctx::new(shared, session, Locking::Wait);
    match (execute(&mut ctx, &args), kind) {
        (Reply::Error(e), _) => format!("error: {e}"),
        (Reply::Bulk(v), "get") => String::from_utf8_lossy(&v).into_owned(),
        (Reply::Nil, "get") => "no value stored".into(),
        _ => "success".into(),
    }
}

async fn serve(stream: TcpStream, shared: Arc<Shared>, peer: std::net::SocketAddr) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut session = Some(Session::new(shared.next_client_id(), &shared));
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(LINE_BYTES_MAX as u64 + 1);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, "text listener: read failed: {e}");
                return;
            }
        }
        if line.len() > LINE_BYTES_MAX {
            let _ = write.write_all(b"error: line too long\n").await;
            return;
        }
        while line.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
            line.pop();
        }
        let (Some(mut s), request) = (session.take(), std::mem::take(&mut line)) else {
            return;
        };
        let job_shared = shared.clone();
        let done = tokio::task::spawn_blocking(move || {
            let reply = answer(&job_shared, &mut s, &request);
            (s, reply, request)
        })
        .await;
        let Ok((s, reply, request)) = done else {
            return;
        };
        session = Some(s);
        line = request;
        if write
            .write_all(format!("{reply}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::MemoryBackend;
    use crate::config::ServerConfig;

    #[test]
    fn the_seed_protocol_answers_like_the_seed() {
        let shared = Shared::new(Arc::new(MemoryBackend::new()), ServerConfig::default()).unwrap();
        let mut s = Session::new(1, &shared);
        assert_eq!(answer(&shared, &mut s, b"GET hello"), "no value stored");
        assert_eq!(answer(&shared, &mut s, b"SET hello world"), "success");
        assert_eq!(answer(&shared, &mut s, b"GET hello world"), "world");
        assert_eq!(answer(&shared, &mut s, b"SET hello a b"), "success");
        assert_eq!(answer(&shared, &mut s, b"GET hello"), "a");
        assert_eq!(answer(&shared, &mut s, b"DELETE hello"), "success");
        assert_eq!(answer(&shared, &mut s, b"GET hello"), "no value stored");
        assert_eq!(answer(&shared, &mut s, b"get hello"), "Unknown command");
        assert_eq!(answer(&shared, &mut s, b"SET lonely"), "Unknown command");
        assert_eq!(answer(&shared, &mut s, b""), "Unknown command");
    }

    /// The line protocol has no AUTH: with a password on the default user (requirepass, or
    /// ACL rules) its commands are refused, not run as an open door.
    #[test]
    fn the_seed_protocol_is_refused_while_the_default_user_needs_a_password() {
        let config = ServerConfig {
            requirepass: Some("secret".into()),
            ..ServerConfig::default()
        };
        let shared = Shared::new(Arc::new(MemoryBackend::new()), config).unwrap();
        let mut s = Session::new(1, &shared);
        assert_eq!(
            answer(&shared, &mut s, b"SET hello world"),
            "error: NOAUTH Authentication required."
        );
        assert_eq!(
            answer(&shared, &mut s, b"GET hello"),
            "error: NOAUTH Authentication required."
        );
        // With the default user open but without the key, ACL refuses.
        shared.acl.set_requirepass(None);
        let rules: Vec<Bytes> = ["resetkeys", "~allowed:*"]
            .iter()
            .map(|r| Bytes::from(r.to_string()))
            .collect();
        shared
            .acl
            .set_user(&Bytes::from_static(b"default"), &rules)
            .unwrap();
        let mut s = Session::new(2, &shared);
        assert_eq!(
            answer(&shared, &mut s, b"SET hello world"),
            "error: NOPERM this user has no permissions to access one of the keys used as arguments"
        );
        assert_eq!(answer(&shared, &mut s, b"SET allowed:1 v"), "success");
    }
}
