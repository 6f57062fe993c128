//! MULTI, EXEC, DISCARD, WATCH, UNWATCH with Redis's semantics: commands after MULTI are
//! queued (the dispatcher answers `+QUEUED`; a command refused while queueing makes EXEC answer
//! EXECABORT); EXEC runs them in order on a transaction overlay under the exec lock held
//! exclusively and writes all their changes as one atomic engine batch (`txn.rs`); EXEC answers
//! nil, running nothing, when a watched key was written (or expired) since WATCH.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::{count_command, dispatch, resolve, Ctx, Locking, Spec};
use crate::error::{Error, Result};
use crate::keyspace::{self, doc_ttl_key, now_ms, string_key, DbIndex, Space};
use crate::resp::Reply;
use crate::state::{Multi, WatchState};
use crate::txn::Overlay;

const TXN: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "multi", arity: 1, flags: TXN, keys: (0, 0, 0), group: "transactions", summary: "Starts a transaction.", handler: multi },
    Spec { name: "exec", arity: 1, flags: &["noscript", "loading", "stale", "skip_slowlog"], keys: (0, 0, 0), group: "transactions", summary: "Executes all commands in a transaction.", handler: exec },
    Spec { name: "discard", arity: 1, flags: TXN, keys: (0, 0, 0), group: "transactions", summary: "Discards a transaction.", handler: discard },
    Spec { name: "watch", arity: -2, flags: TXN, keys: (1, -1, 1), group: "transactions", summary: "Monitors changes to keys to determine the execution of a transaction.", handler: watch },
    Spec { name: "unwatch", arity: 1, flags: TXN, keys: (0, 0, 0), group: "transactions", summary: "Forgets about all watched keys of a transaction.", handler: unwatch },
];

fn multi(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    if ctx.session.multi.is_some() {
        return Err(Error::command("MULTI calls can not be nested"));
    }
    ctx.session.multi = Some(Multi::default());
    Ok(Reply::ok())
}

fn discard(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    if ctx.session.multi.take().is_none() {
        return Err(Error::command("DISCARD without MULTI"));
    }
    ctx.session.watch = None;
    Ok(Reply::ok())
}

fn unwatch(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    ctx.session.watch = None;
    Ok(Reply::ok())
}

/// The engine keys a write to `key` in `db` may touch.
fn engine_keys(db: DbIndex, key: &[u8]) -> Vec<Vec<u8>> {
    let mut keys = vec![string_key(db, key), doc_ttl_key(db, key)];
    keys.extend(Space::Docs.key(db, key));
    keys
}

/// Whether `key` is stored but past its expiry time (Redis's `keyIsExpired`).
pub(crate) fn stored_but_expired(ctx: &Ctx<'_>, db: DbIndex, key: &[u8], now: u64) -> Result<bool> {
    let live = keyspace::lookup(ctx.db(), db, key, now, true)?.is_some();
    if live {
        return Ok(false);
    }
    let string = ctx.db().get(&string_key(db, key))?.is_some();
    let doc = match Space::Docs.key(db, key) {
        Some(k) => ctx.db().get(&k)?.is_some(),
        None => false,
    };
    Ok(string || doc)
}

fn watch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if ctx.session.multi.is_some() {
        return Err(Error::command("WATCH inside MULTI is not allowed"));
    }
    let now = now_ms();
    let db = ctx.dbi();
    let mut added = Vec::new();
    for key in &args[1..] {
        added.push((db, key.clone(), stored_but_expired(ctx, db, key, now)?));
    }
    let watches = ctx.shared.watches.clone();
    let state = ctx.session.watch.get_or_insert_with(|| WatchState {
        watches,
        flag: Arc::default(),
        engine_keys: Vec::new(),
        keys: Vec::new(),
    });
    for (db, key, expired) in added {
        if state.keys.iter().any(|(d, k, _)| *d == db && *k == key) {
            continue;
        }
        let keys = engine_keys(db, &key);
        state.watches.add(&keys, &state.flag, expired);
        state.engine_keys.extend(keys);
        state.keys.push((db, key, expired));
    }
    Ok(Reply::ok())
}

fn exec(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    let Some(multi) = ctx.session.multi.take() else {
        return Err(Error::command("EXEC without MULTI"));
    };
    // EXEC unwatches whatever happens.
    let watch = ctx.session.watch.take();
    if multi.failed {
        return Err(Error::Coded(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    // The dispatcher holds the exec lock exclusively: no write lands between this check, the
    // commands and the batch.
    if let Some(w) = &watch {
        if w.flag.load(Ordering::Acquire) {
            return Ok(Reply::NilArray);
        }
        let now = now_ms();
        for (db, key, expired_at_watch) in &w.keys {
            if !expired_at_watch && stored_but_expired(ctx, *db, key, now)? {
                return Ok(Reply::NilArray);
            }
        }
    }
    drop(watch);
    // A SWAPDB among the commands changes the map at once; if the batch fails, it goes back.
    let map_before = ctx.shared.db_map();
    let overlay = Overlay::new(ctx.store);
    let mut replies = Vec::with_capacity(multi.queued.len());
    {
        let mut sub = Ctx {
            shared: ctx.shared,
            session: &mut *ctx.session,
            store: &overlay,
            locking: Locking::Held,
        };
        // The slot check ran for the transaction as a whole (`cluster::route`).
        sub.session.in_exec = true;
        for args in &multi.queued {
            let spec = resolve(args);
            count_command(&sub);
            // ACL rules are checked again as each queued command runs, in case they changed
            // since it was queued (Redis's execCommand).
            if let Some(command) = spec {
                if let Some((denied, _)) = super::acl_denial(&mut sub, command, args, "multi") {
                    let reason = match denied {
                        crate::acl::Denied::Command => {
                            "no permission to execute the command or subcommand"
                        }
                        crate::acl::Denied::Key(_) => "no permission to touch the specified keys",
                        crate::acl::Denied::Channel(_) => {
                            "no permission to access one of the channels used as arguments"
                        }
                    };
                    replies.push(Reply::Error(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}")));
                    continue;
                }
            }
            replies.push(dispatch(&mut sub, args, spec).unwrap_or_else(Reply::from));
        }
        sub.session.in_exec = false;
    }
    if let Err(e) = overlay.commit() {
        ctx.shared.set_db_map(&map_before);
        // Nothing of it happened: no keyspace events either.
        ctx.session.events.clear();
        return Err(e);
    }
    // A queued push reached the store only now: wake blocked lists' readers after it.
    ctx.session.note_list_push();
    Ok(Reply::Array(replies))
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::super::testing::*;
    use crate::backend::{BatchOp, GroupFn, KvBackend, MemoryBackend, UpdateFn, VisitFn};
    use crate::config::ServerConfig;
    use crate::error::{Error, Result};
    use crate::resp::Reply;

    /// A memory backend with a hook run before every write, given the keys it writes (and, for
    /// a group update, the group's route): a failing hook fails the write (a full disk, say),
    /// a waiting one holds it in flight.
    struct HookedWrites {
        inner: MemoryBackend,
        hook: Box<WriteHook>,
    }

    /// What [`HookedWrites`] runs before a write, given its keys.
    type WriteHook = dyn Fn(&mut dyn Iterator<Item = &[u8]>) -> Result<()> + Send + Sync;

    impl HookedWrites {
        fn new(
            hook: impl Fn(&mut dyn Iterator<Item = &[u8]>) -> Result<()> + Send + Sync + 'static,
        ) -> Self {
            HookedWrites {
                inner: MemoryBackend::new(),
                hook: Box::new(hook),
            }
        }

        fn before(&self, key: &[u8]) -> Result<()> {
            (self.hook)(&mut std::iter::once(key))
        }
    }

    fn any_key(keys: &mut dyn Iterator<Item = &[u8]>, f: impl Fn(&[u8]) -> bool) -> bool {
        for k in keys {
            if f(k) {
                return true;
            }
        }
        false
    }

    impl KvBackend for HookedWrites {
        fn get(&self, key: &[u8]) -> Result<Option<bytes::Bytes>> {
            self.inner.get(key)
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            self.before(key)?;
            self.inner.put(key, value)
        }
        fn delete(&self, key: &[u8]) -> Result<()> {
            self.before(key)?;
            self.inner.delete(key)
        }
        fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
            (self.hook)(&mut ops.iter().map(|op| match op {
                BatchOp::Put(k, _) | BatchOp::Delete(k) => &k[..],
            }))?;
            self.inner.write(ops)
        }
        fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
            self.before(key)?;
            self.inner.update(key, f)
        }
        fn update_group(&self, route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
            self.before(route)?;
            self.inner.update_group(route, f)
        }
        fn scan(
            &self,
            start: Bound<Vec<u8>>,
            end: Bound<Vec<u8>>,
            visit: &mut VisitFn<'_>,
        ) -> Result<()> {
            self.inner.scan(start, end, visit)
        }
        fn flush(&self) -> Result<()> {
            self.inner.flush()
        }
        fn sync(&self) -> Result<()> {
            self.inner.sync()
        }
        fn writes_would_wait(&self) -> bool {
            false
        }
        fn stats_lines(&self) -> Vec<(String, String)> {
            Vec::new()
        }
    }

    /// A WATCH that arrives while another client's write is in flight cannot miss that write:
    /// either WATCH comes first and the write breaks it, or WATCH (and every read after it)
    /// comes after the write. The writer used to look for watchers before its write, so a
    /// WATCH registered in between was never marked, its client read the old value, and its
    /// EXEC overwrote the write.
    #[test]
    fn a_watch_registered_during_a_write_is_not_missed() {
        // Group updates (HSET's) wait at a gate until it opens or 300 ms pass.
        let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let entered = Arc::new(AtomicBool::new(false));
        let backend = {
            let (gate, entered) = (gate.clone(), entered.clone());
            Arc::new(HookedWrites::new(move |keys| {
                if any_key(keys, |k| k.first() == Some(&b'k')) {
                    entered.store(true, Ordering::SeqCst);
                    let open = gate.0.lock().unwrap();
                    let _open = gate
                        .1
                        .wait_timeout_while(open, std::time::Duration::from_millis(300), |o| !*o)
                        .unwrap();
                }
                Ok(())
            }))
        };
        let h = Harness::with_backend(backend.clone(), ServerConfig::default());
        let mut writer = h.second_session();
        let mut watcher = h.second_session();
        std::thread::scope(|s| {
            let w = s.spawn(|| h.run_as(&mut writer, &["HSET", "h", "f", "writer"]));
            while !entered.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // The writer is inside its write.
            assert_eq!(h.run_as(&mut watcher, &["WATCH", "h"]), Reply::ok());
            let seen = h.run_as(&mut watcher, &["HGET", "h", "f"]);
            assert_eq!(h.run_as(&mut watcher, &["MULTI"]), Reply::ok());
            h.run_as(&mut watcher, &["HSET", "h", "f", "watcher"]);
            *gate.0.lock().unwrap() = true;
            gate.1.notify_all();
            let exec = h.run_as(&mut watcher, &["EXEC"]);
            assert_eq!(w.join().unwrap(), Reply::Int(1));
            // Committed only if the watcher had seen the writer's value.
            if exec != Reply::NilArray {
                assert_eq!(seen, bulk("writer"), "EXEC overwrote a write it never saw");
            }
        });
    }

    /// SWAPDB inside a transaction or a script is part of its one batch: when the batch cannot
    /// be written, the databases stay where they were, in the store and for every client (the
    /// swap used to be written straight to the store and kept).
    #[test]
    fn a_swap_in_a_transaction_that_fails_to_commit_is_undone() {
        // Writes of keys ending in `poison` fail while `failing` is set.
        let failing = Arc::new(AtomicBool::new(false));
        let backend = {
            let failing = failing.clone();
            Arc::new(HookedWrites::new(move |keys| {
                if failing.load(Ordering::Relaxed) && any_key(keys, |k| k.ends_with(b"poison")) {
                    return Err(Error::command("injected write failure"));
                }
                Ok(())
            }))
        };
        let mut h = Harness::with_backend(backend.clone(), ServerConfig::default());
        assert_eq!(h.run(&["SET", "zero", "in 0"]), Reply::ok());
        failing.store(true, Ordering::Relaxed);
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        assert_eq!(h.run(&["SWAPDB", "0", "1"]), Reply::simple("QUEUED"));
        assert_eq!(h.run(&["SET", "poison", "x"]), Reply::simple("QUEUED"));
        assert!(h.run(&["EXEC"]).is_error());
        let unchanged = |h: &mut Harness, after: &str| {
            assert_eq!(h.run(&["GET", "zero"]), bulk("in 0"), "{after}");
            assert_eq!(h.run(&["GET", "poison"]), Reply::Nil, "{after}");
            // What the store says, as a restarted server would read it.
            assert_eq!(
                crate::keyspace::read_db_map(backend.as_ref()).unwrap(),
                crate::keyspace::identity_db_map(),
                "{after}"
            );
        };
        unchanged(&mut h, "a failed EXEC");
        let script = "redis.call('swapdb', '0', '1') redis.call('set', 'poison', 'x')";
        assert!(h.run(&["EVAL", script, "0"]).is_error());
        unchanged(&mut h, "a failed script");
        failing.store(false, Ordering::Relaxed);
        // A transaction that commits keeps its swap.
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        assert_eq!(h.run(&["SWAPDB", "0", "1"]), Reply::simple("QUEUED"));
        assert_eq!(h.run(&["SET", "one", "in 1"]), Reply::simple("QUEUED"));
        assert!(!h.run(&["EXEC"]).is_error());
        assert_eq!(h.run(&["GET", "zero"]), Reply::Nil);
        assert_eq!(h.run(&["SELECT", "1"]), Reply::ok());
        assert_eq!(h.run(&["GET", "zero"]), bulk("in 0"));
        assert_ne!(
            crate::keyspace::read_db_map(backend.as_ref()).unwrap(),
            crate::keyspace::identity_db_map()
        );
    }

    #[test]
    fn queued_commands_run_at_exec_and_errors_follow_redis() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["EXEC"]), err("ERR EXEC without MULTI"));
        assert_eq!(h.run(&["DISCARD"]), err("ERR DISCARD without MULTI"));
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        assert_eq!(h.run(&["MULTI"]), err("ERR MULTI calls can not be nested"));
        assert_eq!(h.run(&["SET", "a", "1"]), Reply::simple("QUEUED"));
        assert_eq!(h.run(&["INCR", "a"]), Reply::simple("QUEUED"));
        assert_eq!(h.run(&["GET", "a"]), Reply::simple("QUEUED"));
        assert_eq!(
            h.run(&["EXEC"]),
            Reply::Array(vec![Reply::ok(), Reply::Int(2), bulk("2")])
        );
        // A refused command aborts the whole transaction.
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        assert_eq!(h.run(&["SET", "a", "3"]), Reply::simple("QUEUED"));
        assert!(h.run(&["GET"]).is_error());
        assert_eq!(
            h.run(&["EXEC"]),
            err("EXECABORT Transaction discarded because of previous errors.")
        );
        assert_eq!(h.run(&["GET", "a"]), bulk("2"));
        // A runtime error fails only its own command.
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        h.run(&["SET", "s", "x"]);
        h.run(&["INCR", "s"]);
        h.run(&["SET", "t", "y"]);
        let r = h.run(&["EXEC"]);
        let Reply::Array(items) = r else {
            panic!("{r:?}")
        };
        assert!(items[1].is_error());
        assert_eq!(h.run(&["GET", "t"]), bulk("y"));
    }

    #[test]
    fn a_written_watched_key_makes_exec_answer_nil() {
        let mut h = Harness::new();
        let mut other = h.second_session();
        assert_eq!(h.run(&["WATCH", "k"]), Reply::ok());
        assert_eq!(h.run_as(&mut other, &["SET", "k", "changed"]), Reply::ok());
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        h.run(&["SET", "k", "mine"]);
        assert_eq!(h.run(&["EXEC"]), Reply::NilArray);
        assert_eq!(h.run(&["GET", "k"]), bulk("changed"));
        // After EXEC the watch is gone.
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        h.run(&["SET", "k", "mine"]);
        assert_eq!(h.run(&["EXEC"]), Reply::Array(vec![Reply::ok()]));
        // Writes to other keys do not matter.
        assert_eq!(h.run(&["WATCH", "k"]), Reply::ok());
        h.run_as(&mut other, &["SET", "other", "1"]);
        assert_eq!(h.run(&["MULTI"]), Reply::ok());
        assert_eq!(
            h.run(&["WATCH", "x"]),
            err("ERR WATCH inside MULTI is not allowed")
        );
        h.run(&["GET", "k"]);
        assert_eq!(h.run(&["EXEC"]), Reply::Array(vec![bulk("mine")]));
    }
}
