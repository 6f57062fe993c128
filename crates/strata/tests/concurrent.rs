//! The seed's multi-thread test: 1 PUT_HEAVY + 1 DELETE_HEAVY + 8 GET_HEAVY threads on a
//! 4-partition store, each thread checking its own keys against its own model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{tiny, Model, Op, OpGen, Workload, ENGINES};
use strata::{Db, Engine, Options};

#[test]
fn ten_threads_of_mixed_workloads_lose_no_key() {
    for engine in ENGINES {
        ten_threads(engine);
    }
}

fn ten_threads(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options {
                partitions: 4,
                ..tiny(engine)
            },
        )
        .unwrap(),
    );
    let mut workloads = vec![Workload::PutHeavy, Workload::DeleteHeavy];
    workloads.extend([Workload::GetHeavy; 8]);
    let handles: Vec<_> = workloads
        .into_iter()
        .enumerate()
        .map(|(t, workload)| {
            let db = db.clone();
            std::thread::spawn(move || {
                let prefix = format!("t{t:02}/");
                let mut gen = OpGen::new(1000 + t as u64, workload, 0.5, prefix.as_bytes());
                let mut model = Model::new();
                for i in 0..4_000 {
                    match gen.next_op() {
                        Op::Put(k, v) => {
                            db.put(&k, &v).unwrap();
                            model.insert(k, v);
                        }
                        Op::Delete(k) => {
                            db.delete(&k).unwrap();
                            model.remove(&k);
                        }
                        Op::Get(k) => {
                            assert_eq!(
                                db.get(&k).unwrap().as_deref(),
                                model.get(&k).map(|v| &v[..]),
                                "thread {t} op {i}"
                            );
                        }
                    }
                }
                // Everything this thread wrote is there, and nothing else under its prefix.
                let got: Vec<(Vec<u8>, Vec<u8>)> = db
                    .scan_prefix(prefix.as_bytes())
                    .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                    .collect::<Result<_, _>>()
                    .unwrap();
                let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
                assert!(got == want, "thread {t}: scan differs from model");
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = db.stats();
    // Background work really ran: flushes for the LSM; segment rolls for the log engine (its
    // merges need overwrites, which this workload has few of).
    let background: u64 = match engine {
        Engine::Lsm => s.partitions.iter().map(|p| p.flushes).sum(),
        Engine::Log => s.partitions.iter().map(|p| p.levels[0].tables as u64).sum(),
    };
    assert!(
        background > 10,
        "{engine:?}: only {background} flushes/segments"
    );
}
