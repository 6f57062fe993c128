//! Hashes on the engine: the storage layout against a model through flushes, compactions and
//! restarts, and deleting a large hash (one write; compaction reclaims the fields).

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::Commands;
use strata_server::ServerConfig;

use crate::TestServer;

type Model = BTreeMap<String, BTreeMap<String, String>>;

fn check(c: &mut redis::Connection, model: &Model, keys: usize, when: &str) {
    for k in 0..keys {
        let key = format!("h{k}");
        let got: BTreeMap<String, String> = c.hgetall(&key).unwrap();
        let want = model.get(&key).cloned().unwrap_or_default();
        assert_eq!(got, want, "{key} {when}");
        let len: usize = c.hlen(&key).unwrap();
        assert_eq!(len, want.len(), "HLEN {key} {when}");
    }
}

/// Random hash writes over a few keys with tiny memtables (many flushes and compactions),
/// the server restarted between rounds: every hash equals the model each time.
#[test]
fn hashes_match_a_model_through_flushes_compactions_and_restarts() {
    const KEYS: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut model = Model::new();
    for round in 0..3 {
        let server = TestServer::start_in(dir.path(), ServerConfig::default());
        let mut c = server.client();
        check(&mut c, &model, KEYS, &format!("after restart {round}"));
        for _ in 0..1500 {
            let key = format!("h{}", rng.gen_range(0..KEYS));
            let field = format!("f{}", rng.gen_range(0..40));
            let value = "v".repeat(rng.gen_range(0..200)) + &rng.gen_range(0..1000).to_string();
            match rng.gen_range(0..10) {
                0..=4 => {
                    let _: i64 = c.hset(&key, &field, &value).unwrap();
                    model.entry(key).or_default().insert(field, value);
                }
                5 | 6 => {
                    let _: i64 = c.hdel(&key, &field).unwrap();
                    if let Some(h) = model.get_mut(&key) {
                        h.remove(&field);
                        if h.is_empty() {
                            model.remove(&key);
                        }
                    }
                }
                7 => {
                    let n: i64 = c.hincr(&key, "n", 3).unwrap();
                    let h = model.entry(key).or_default();
                    let old: i64 = h.get("n").map_or(0, |v| v.parse().unwrap());
                    assert_eq!(n, old + 3);
                    h.insert("n".into(), n.to_string());
                }
                8 => {
                    let _: i64 = c.del(&key).unwrap();
                    model.remove(&key);
                }
                _ => {
                    let to = format!("h{}", rng.gen_range(0..KEYS));
                    let renamed: redis::RedisResult<()> = c.rename(&key, &to);
                    match model.remove(&key) {
                        Some(h) => {
                            renamed.unwrap();
                            model.insert(to, h);
                        }
                        None => assert!(renamed.is_err()),
                    }
                }
            }
        }
        check(&mut c, &model, KEYS, &format!("in round {round}"));
        server.db().compact().unwrap();
        check(
            &mut c,
            &model,
            KEYS,
            &format!("after compaction in round {round}"),
        );
        drop(c);
        server.stop();
    }
}

/// Engine keys that are hash fields (`'m'` + ...), live or not yet reclaimed.
fn field_keys(db: &strata::Db) -> usize {
    db.scan_prefix(b"m").count()
}

#[test]
fn deleting_a_large_hash_is_one_write_and_compaction_reclaims_its_fields() {
    const FIELDS: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let mut options = strata::Options::tiny();
    options.memtable_bytes_max = 4 << 20;
    options.table_bytes_target = 4 << 20;
    options.level1_bytes_target = 16 << 20;
    let server = TestServer::start_with_options(dir.path(), ServerConfig::default(), options);
    let mut c = server.client();
    for chunk in 0..FIELDS / 1000 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("big");
        for i in chunk * 1000..(chunk + 1) * 1000 {
            cmd.arg(format!("field:{i:06}")).arg(format!("value:{i}"));
        }
        let added: usize = cmd.query(&mut c).unwrap();
        assert_eq!(added, 1000);
    }
    let _: () = c.set("other", "stays").unwrap();
    assert_eq!(c.hlen::<_, usize>("big").unwrap(), FIELDS);
    assert_eq!(field_keys(server.db()), FIELDS);
    // DEL writes the record's tombstone only: every field is still in the engine, unseen.
    assert_eq!(c.del::<_, i64>("big").unwrap(), 1);
    assert_eq!(c.exists::<_, i64>("big").unwrap(), 0);
    assert_eq!(c.hlen::<_, usize>("big").unwrap(), 0);
    assert_eq!(field_keys(server.db()), FIELDS);
    // A new incarnation under the same name, before compaction, sees none of the old fields
    // and keeps its own through compaction.
    let _: i64 = c.hset("big", "field:000001", "new").unwrap();
    let all: BTreeMap<String, String> = c.hgetall("big").unwrap();
    assert_eq!(all.len(), 1);
    server.db().compact().unwrap();
    assert_eq!(field_keys(server.db()), 1, "old fields not reclaimed");
    let all: BTreeMap<String, String> = c.hgetall("big").unwrap();
    assert_eq!(
        all.into_iter().collect::<Vec<_>>(),
        vec![("field:000001".to_string(), "new".to_string())]
    );
    assert_eq!(c.get::<_, String>("other").unwrap(), "stays");
    // A hash replaced by a string loses its fields the same way.
    let _: i64 = c.hset("h2", "a", "1").unwrap();
    let _: () = c.set("big", "now a string").unwrap();
    server.db().compact().unwrap();
    assert_eq!(field_keys(server.db()), 1, "only h2's field is left");
    drop(c);
    server.stop();
}
