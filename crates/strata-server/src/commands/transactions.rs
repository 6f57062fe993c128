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
fn stored_but_expired(ctx: &Ctx<'_>, db: DbIndex, key: &[u8], now: u64) -> Result<bool> {
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
            replies.push(dispatch(&mut sub, args, spec).unwrap_or_else(Reply::from));
        }
        sub.session.in_exec = false;
    }
    overlay.commit()?;
    // A queued push reached the store only now: wake blocked lists' readers after it.
    ctx.shared.note_list_push();
    Ok(Reply::Array(replies))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::resp::Reply;

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
