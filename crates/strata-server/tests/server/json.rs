//! JSON.* commands (RedisJSON-compatible) over strata-doc, through a real socket.

use std::sync::Arc;

use redis::Value;
use strata_doc::{Doc, DocStore, Path};

use super::{bulk, call, TestServer};

#[test]
fn json_commands_reply_like_redisjson() {
    let server = TestServer::start();
    let mut c = server.client();
    let doc = r#"{"name":"strata","stars":1,"tags":["lsm"],"meta":{"lang":"rust"}}"#;
    assert_eq!(
        call(&mut c, &["JSON.SET", "repo", "$", doc]),
        Ok(Value::Okay)
    );
    assert_eq!(call(&mut c, &["JSON.GET", "repo"]), Ok(bulk(doc)));
    assert_eq!(
        call(&mut c, &["JSON.GET", "repo", "$.meta.lang"]),
        Ok(bulk(r#"["rust"]"#))
    );
    assert_eq!(
        call(&mut c, &["JSON.GET", "repo", ".name"]),
        Ok(bulk(r#""strata""#))
    );
    assert_eq!(
        call(
            &mut c,
            &["JSON.GET", "repo", "INDENT", "\t", "NEWLINE", "\n", "SPACE", " ", "$.meta"]
        ),
        Ok(bulk("[\n\t{\n\t\t\"lang\": \"rust\"\n\t}\n]"))
    );
    assert_eq!(
        call(&mut c, &["JSON.SET", "other", "$", r#"{"stars":7}"#]),
        Ok(Value::Okay)
    );
    assert_eq!(
        call(
            &mut c,
            &["JSON.MGET", "repo", "other", "missing", "$.stars"]
        ),
        Ok(Value::Array(vec![bulk("[1]"), bulk("[7]"), Value::Nil]))
    );
    assert_eq!(
        call(&mut c, &["JSON.NUMINCRBY", "repo", "$.stars", "41"]),
        Ok(bulk("[42]"))
    );
    assert_eq!(
        call(&mut c, &["JSON.STRLEN", "repo", "$.name"]),
        Ok(Value::Array(vec![Value::Int(6)]))
    );
    assert_eq!(
        call(
            &mut c,
            &["JSON.ARRAPPEND", "repo", "$.tags", r#""kv""#, r#""docs""#]
        ),
        Ok(Value::Array(vec![Value::Int(3)]))
    );
    assert_eq!(
        call(&mut c, &["JSON.OBJKEYS", "repo", "$"]),
        Ok(Value::Array(vec![Value::Array(vec![
            bulk("name"),
            bulk("stars"),
            bulk("tags"),
            bulk("meta")
        ])]))
    );
    assert_eq!(
        call(&mut c, &["JSON.TYPE", "repo", "$.tags"]),
        Ok(Value::Array(vec![bulk("array")]))
    );
    assert_eq!(
        call(&mut c, &["JSON.TYPE", "repo"]),
        Ok(Value::SimpleString("object".into()))
    );
    assert_eq!(
        call(&mut c, &["TYPE", "repo"]),
        Ok(Value::SimpleString("ReJSON-RL".into()))
    );
    assert_eq!(
        call(&mut c, &["JSON.DEL", "repo", "$.meta"]),
        Ok(Value::Int(1))
    );
    assert_eq!(
        call(&mut c, &["JSON.GET", "repo"]),
        Ok(bulk(
            r#"{"name":"strata","stars":42,"tags":["lsm","kv","docs"]}"#
        ))
    );
    assert_eq!(call(&mut c, &["SET", "plain", "x"]), Ok(Value::Okay));
    assert_eq!(
        call(&mut c, &["JSON.GET", "plain"]),
        Err("WRONGTYPE Operation against a key holding the wrong kind of value".into())
    );
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    keys.sort();
    assert_eq!(keys, vec!["other", "plain", "repo"]);
    assert_eq!(call(&mut c, &["DBSIZE"]), Ok(Value::Int(3)));
    assert_eq!(call(&mut c, &["JSON.DEL", "repo"]), Ok(Value::Int(1)));
    assert_eq!(call(&mut c, &["EXISTS", "repo"]), Ok(Value::Int(0)));
}

#[test]
fn concurrent_numincrby_loses_nothing() {
    const CLIENTS: usize = 16;
    const INCRS: usize = 50;
    let server = TestServer::start();
    let mut c = server.client();
    call(&mut c, &["JSON.SET", "counter", "$", r#"{"hits":0}"#]).unwrap();
    let url = server.url();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..INCRS {
                    call(&mut c, &["JSON.NUMINCRBY", "counter", "$.hits", "1"]).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        call(&mut c, &["JSON.GET", "counter", ".hits"]),
        Ok(bulk(&(CLIENTS * INCRS).to_string()))
    );
}

#[test]
fn documents_set_over_the_protocol_are_docstore_documents() {
    let server = TestServer::start();
    let mut c = server.client();
    call(
        &mut c,
        &["JSON.SET", "user:1", "$", r#"{"name":"ada","visits":3}"#],
    )
    .unwrap();
    let store = DocStore::new(Arc::clone(server.db())).unwrap();
    let key = Doc::String("user:1".into());
    let p = Path::parse("$.visits").unwrap();
    assert_eq!(store.get_path(&key, &p).unwrap(), Some(Doc::Int(3)));
    // And the other way round: a document written through DocStore is visible to JSON.GET.
    store
        .put(
            &Doc::String("user:2".into()),
            &Doc::from_json(r#"{"name":"bob"}"#).unwrap(),
        )
        .unwrap();
    assert_eq!(
        call(&mut c, &["JSON.GET", "user:2", "$.name"]),
        Ok(bulk(r#"["bob"]"#))
    );
    drop(store);
}

/// Documents set over the protocol share their field names through the store's name record;
/// FLUSHDB removes every document but keeps the record (documents set afterwards refer to it),
/// and after a restart every document reads back.
#[test]
fn key_names_survive_flushdb_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let doc = |i: usize| format!(r#"{{"author":"a{i}","score":{i},"meta":{{"author":"m"}}}}"#);
    {
        let server = TestServer::start_in(dir.path(), Default::default());
        let mut c = server.client();
        for i in 0..5 {
            call(&mut c, &["JSON.SET", &format!("d{i}"), "$", &doc(i)]).unwrap();
        }
        let store = DocStore::new(Arc::clone(server.db())).unwrap();
        assert!(store.names().table().id("author").is_some());
        drop(store);
        assert_eq!(call(&mut c, &["FLUSHDB"]), Ok(Value::Okay));
        assert_eq!(call(&mut c, &["DBSIZE"]), Ok(Value::Int(0)));
        assert_eq!(call(&mut c, &["KEYS", "*"]), Ok(Value::Array(vec![])));
        for i in 5..10 {
            call(&mut c, &["JSON.SET", &format!("d{i}"), "$", &doc(i)]).unwrap();
        }
        call(&mut c, &["JSON.NUMINCRBY", "d9", "$.score", "1"]).unwrap();
        server.stop();
    }
    let server = TestServer::start_in(dir.path(), Default::default());
    let mut c = server.client();
    assert_eq!(call(&mut c, &["DBSIZE"]), Ok(Value::Int(5)));
    for i in 5..9 {
        assert_eq!(
            call(&mut c, &["JSON.GET", &format!("d{i}")]),
            Ok(bulk(&doc(i)))
        );
    }
    assert_eq!(
        call(&mut c, &["JSON.GET", "d9", "$.score", "$.meta.author"]),
        Ok(bulk(r#"{"$.score":[10],"$.meta.author":["m"]}"#))
    );
}

/// A server started on a store that already holds documents knows it: a SET of a document's
/// name replaces the document (a name is one kind at a time), and GET of it is WRONGTYPE.
#[test]
fn documents_from_an_earlier_run_keep_names_one_kind() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = TestServer::start_in(dir.path(), Default::default());
        let mut c = server.client();
        call(&mut c, &["JSON.SET", "a", "$", r#"{"x":1}"#]).unwrap();
        call(&mut c, &["JSON.SET", "b", "$", r#"{"x":2}"#]).unwrap();
        server.stop();
    }
    let server = TestServer::start_in(dir.path(), Default::default());
    let mut c = server.client();
    assert!(call(&mut c, &["GET", "a"])
        .unwrap_err()
        .starts_with("WRONGTYPE"));
    assert_eq!(call(&mut c, &["SET", "a", "text"]), Ok(Value::Okay));
    assert_eq!(
        call(&mut c, &["TYPE", "a"]),
        Ok(Value::SimpleString("string".into()))
    );
    assert_eq!(
        call(&mut c, &["JSON.GET", "a"])
            .unwrap_err()
            .split(' ')
            .next(),
        Some("WRONGTYPE")
    );
    assert_eq!(
        call(&mut c, &["MSET", "b", "t2", "c", "t3"]),
        Ok(Value::Okay)
    );
    assert_eq!(call(&mut c, &["DBSIZE"]), Ok(Value::Int(3)));
    assert_eq!(call(&mut c, &["GET", "b"]), Ok(bulk("t2")));
}
