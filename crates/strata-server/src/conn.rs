//! One client connection: read bytes, parse every complete command in the buffer, run them in
//! order, encode their replies into one output buffer, write it with one call, repeat. A pipeline
//! of N commands that arrives in one read costs one engine hand-off and one write, not N.
//!
//! Consecutive pipelined plain `SET key value` commands are merged into one engine write batch:
//! the engine's group commit only groups concurrent writers, and one connection's pipeline is
//! sequential, so under `appendfsync always` this turns N fsyncs into one per partition
//! (`redis-benchmark -P 16 -t set`: 2-5k SET/s before, 80-118k after; everysec 290k -> 300-390k).
//!
//! Bounds: the input buffer holds at most one partial command beyond what was parsed (the parser
//! limits each argument and line); at most [`BATCH_COMMANDS_MAX`] parsed commands wait; replies are
//! written out whenever they pass [`OUT_BYTES_SOFT_MAX`], before more commands run, so a client that
//! pipelines big reads gets its replies in pieces instead of growing server memory.
//!
//! Where commands run. Engine calls may block: a write fsyncs under `appendfsync always` or
//! sleeps while compaction is behind, and a read of data outside the page cache waits for the
//! disk. Such calls must not run on a tokio worker, where they would freeze every connection of
//! that worker; but handing every batch to the blocking pool (`spawn_blocking`) costs two thread
//! hand-offs per batch, which dominated small requests (a quarter of the CPU in futex wake-ups
//! and scheduling under `redis-benchmark -P 16 -t get`). So each batch first runs on the network
//! thread, command by command, as far as it can without waiting ([`Placement`]):
//!
//! - reads run with `strata::without_waiting`: table blocks and values are read with
//!   `RWF_NOWAIT`, so a read that would wait for the disk fails instead, having changed nothing;
//! - writes run there while `KvBackend::writes_would_wait` is false (never under `always`);
//! - whatever remains (the first command that would wait, keyspace walks such as KEYS, SCAN,
//!   DBSIZE, FLUSHDB, admin commands) runs on the blocking pool, in order, after the replies
//!   already encoded.
//!
//! Writes on the network thread are run inside `strata::deferring_log_writes`: their records
//! are appended and applied, and handed to the OS (one `write()` per partition) only just before
//! the replies go out, after the task has yielded once so that the other connections of the
//! thread ran their commands too. Many clients' writes then share one `write()`, as Redis writes
//! its append-only file once per event-loop round; nothing is acknowledged before its record is
//! in the OS, so a killed server still loses no acknowledged write. Another client may read such
//! a write in that short window (as Redis clients read writes before the append-only file is
//! written): a kill then can lose a value that was read, though never one whose writer was told
//! it succeeded.
//!
//! A pipeline of writes to one key (`SADD k ...` x 16, `LPUSH k ...`, `INCR k`...:
//! [`HELD_RUN_COMMANDS`]) runs under one hold of the key's partition write lock
//! (`KvBackend::hold_group`, `strata::Db::hold_group`): each command still decides on the
//! state the commands before it left, but the lock is taken once per run instead of once per
//! command, their writes are staged and applied to the engine together (one batch, one write
//! per key: `backend.rs` `HeldDb`), and committed together before any reply of the run.
//!
//! Measured with `bench/redis-compare.sh` (1 M requests, 50 clients, 1 KiB values, medians of
//! 2 rounds, same machine and run as Redis with `appendfsync everysec`), ratio to Redis:
//! everything on the blocking pool: SET 0.69 / GET 0.42 with `-P 16`, 0.46 / 0.46 with `-P 1`;
//! network threads first: 0.72 / 0.61 and 0.60 / 0.64; plus the engine's cheaper block search:
//! 1.10 / 0.75 and 0.68 / 0.76 (BENCHMARKS.md has the final run).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::commands::strings::set_run;
use crate::commands::{
    execute, execute_here, execute_without_waiting, placement_in, resolve, Ctx, Locking, Placement,
};
use crate::error::Error;
use crate::resp::{Limits, Parsed, Reply, RequestParser};
use crate::state::{lock, AfterReply, ClientControl, ClientEntry, Session, Shared, UNBLOCK_ERROR};

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Parsed commands waiting to run.
const BATCH_COMMANDS_MAX: usize = 1024;
/// Most pipelined SETs merged into one engine write.
const SET_RUN_COMMANDS_MAX: usize = 256;
/// Longest key a merged SET may have: a key the engine refuses (past its `key_bytes_max`,
/// 64 KiB by default) must fail alone, not the whole merged write; longer keys run one by one.
const SET_RUN_KEY_BYTES_MAX: usize = 1024;
/// Most key and value bytes merged into one engine write.
const SET_RUN_BYTES_MAX: usize = 4 << 20;
/// Most pipelined writes of one key run under one hold of its partition's write lock.
const HELD_RUN_COMMANDS_MAX: usize = 64;
/// Writes of one key that a pipeline runs back to back under one hold of the key's partition
/// write lock (`KvBackend::hold_group`), instead of taking the lock per command (two network
/// threads serving pipelines on one hot key handed it back and forth at every command: a
/// fifth of the CPU in futex calls). Each writes only its key's record and elements, in one
/// atomic update per command; one that writes elsewhere after all stops the run and runs on
/// its own.
const HELD_RUN_COMMANDS: &[&str] = &[
    "incr",
    "decr",
    "incrby",
    "decrby",
    "hset",
    "hsetnx",
    "hmset",
    "hdel",
    "hincrby",
    "hincrbyfloat",
    "sadd",
    "srem",
    "spop",
    "lpush",
    "rpush",
    "lpushx",
    "rpushx",
    "lpop",
    "rpop",
    "zadd",
    "zincrby",
    "zrem",
    "zpopmin",
    "zpopmax",
    "xadd",
    "xdel",
    "xtrim",
    "xack",
];
/// Most scripts a pipeline runs under one hold of the exec lock (others wait meanwhile).
const SCRIPT_RUN_COMMANDS_MAX: usize = 64;
/// Replies are sent once this many bytes are pending, even mid-batch.
const OUT_BYTES_SOFT_MAX: usize = 1 << 20;

/// Runs `f`, which may block on the engine, on the blocking pool.
pub(crate) async fn run_blocking<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::command(format!("internal error: engine task failed: {e}")))
}

/// Unregisters the connection however its task ends (return, error, or abort at runtime drop).
struct Registration {
    shared: Arc<Shared>,
    id: u64,
    /// Held so the server's drain wait ends only when every connection is gone.
    _drain: mpsc::Sender<()>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared
            .counters
            .connected_clients
            .fetch_sub(1, Ordering::Relaxed);
        lock(&self.shared.clients).remove(&self.id);
        self.shared.watches.tracking.disconnect(self.id);
    }
}

/// How a batch ended.
enum Step {
    /// All buffered commands ran; read more input.
    NeedInput,
    /// Output passed its soft limit with commands still queued: write, then keep running.
    OutputFull,
    /// The command at the head of the queue blocks (BLPOP with nothing to take,
    /// `Session::blocked`): write what is pending, then wait for a list push, its deadline or
    /// input, and run it again.
    Blocked,
    /// The last command may have pushed to a list a client is blocked on: let the blocked
    /// clients take what they can before the next command runs (as Redis serves them right
    /// after the pushing command; `ListWaiters::settled`), then keep running.
    ServeWaiters,
    /// CLIENT PAUSE holds the command at the head of the queue: write what is pending, then
    /// wait out the pause (the loop's top) and keep running.
    Paused,
}

/// Serves one accepted connection until the client leaves, breaks the protocol, idles out, or the
/// server shuts down. The caller has already counted it in `connected_clients`.
pub(crate) async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    drain: mpsc::Sender<()>,
    mut shutdown: watch::Receiver<bool>,
) {
    let id = shared.next_client_id();
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let control = Arc::new(ClientControl::default());
    control.queued.store(-1, Ordering::Relaxed);
    #[cfg(unix)]
    let fd = i64::from(std::os::fd::AsRawFd::as_raw_fd(&stream));
    #[cfg(not(unix))]
    let fd = -1i64;
    lock(&shared.clients).insert(
        id,
        ClientEntry {
            peer: peer.to_string(),
            local,
            name: None,
            lib_name: None,
            lib_ver: None,
            user: Bytes::from_static(crate::acl::DEFAULT_USER),
            connected_at: Instant::now(),
            protocol: Default::default(),
            db: 0,
            fd,
            control: control.clone(),
        },
    );
    let _registration = Registration {
        shared: shared.clone(),
        id,
        _drain: drain,
    };
    // Replies are written whole per batch; Nagle would only delay them.
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, "set_nodelay failed: {e}");
    }
    let mut batch = Batch {
        session: Session {
            peer: Bytes::from(peer.to_string()),
            control: Some(control.clone()),
            ..Session::new(id, &shared)
        },
        queue: VecDeque::new(),
        output: BytesMut::new(),
    };
    // Pub/Sub messages for this connection (`pubsub.rs`), written between batches.
    let Some(mut mailbox) = batch.session.mailbox.take() else {
        return;
    };
    shared
        .watches
        .tracking
        .connect(id, batch.session.subs.mailbox());
    let mailbox_bytes = batch.session.mailbox_bytes.clone();
    let mailbox_overflowed = batch.session.mailbox_overflowed.clone();
    let mut list_pushes = shared.list_waiters.changes.subscribe();
    let mut parser = RequestParser::new();
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut protocol_error: Option<String> = None;
    // Writes run on the network thread whose records are not yet handed to the OS: completed
    // before any reply is written (see the module comment).
    let mut log_writes = strata::LogWrites::default();
    loop {
        if control.kill.load(Ordering::Acquire) {
            // CLIENT KILL from another connection.
            return;
        }
        let unblock = control.unblock.swap(0, Ordering::AcqRel);
        if unblock != 0 && batch.session.blocked.is_some() {
            // CLIENT UNBLOCK: the waiting command answers now, as timed out or with an error.
            if batch.queue.pop_front().is_some() {
                // As Redis's `replyToBlockedClientTimedOut`: a null array for every blocking
                // list and sorted-set command (BLMOVE included).
                let reply = if unblock == UNBLOCK_ERROR {
                    Reply::from(Error::Coded(
                        "UNBLOCKED client unblocked via CLIENT UNBLOCK".into(),
                    ))
                } else {
                    Reply::NilArray
                };
                batch.session.answer(&reply, &mut batch.output);
            }
            batch.session.blocked = None;
            batch.session.wait_ticket = None;
        }
        if !batch.session.authenticated && shared.acl.default_is_open() {
            // The default user needs no password any more (CONFIG SET requirepass ""): every
            // connection may go on, as in Redis (`authRequired`).
            batch.session.authenticated = true;
        }
        let unauthenticated = !batch.session.authenticated;
        let limits = Limits {
            unauthenticated,
            ..shared.limits()
        };
        // False when the queue filled up before the input ran out: more complete commands may
        // be buffered, and the client may be waiting for their replies without sending more.
        let input_drained = loop {
            if protocol_error.is_some() {
                break true;
            }
            if batch.queue.len() >= BATCH_COMMANDS_MAX {
                break false;
            }
            if unauthenticated && !batch.queue.is_empty() {
                // One command at a time until AUTH succeeds: the next is parsed under the
                // limits that then apply.
                break false;
            }
            if batch.session.blocked.is_some() && !batch.queue.is_empty() {
                // Nothing more is taken out of the input while a command waits: what the client
                // sends meanwhile stays there, counted against client-query-buffer-limit.
                break true;
            }
            match parser.parse(&mut input, &limits) {
                Parsed::Command(args) => batch.queue.push_back(args),
                Parsed::Incomplete => break true,
                Parsed::Error(e) => protocol_error = Some(e),
            }
        };
        // CLIENT PAUSE: the next command waits here, holding nothing, until the pause ends
        // (ALL), or while it may write (WRITE); `Batch::run` checks each one before it runs.
        while let Some(p) = shared.pause.current() {
            let Some(head) = batch.queue.front() else {
                break;
            };
            if !p.all && !crate::commands::may_write(head, &batch.session, &shared) {
                break;
            }
            // CLIENT KILL and shutdown reach a paused connection too.
            tokio::select! {
                _ = shared.pause.changed_or_over(p) => {}
                _ = control.wake.notified() => {}
                _ = shutdown.changed() => {}
            }
            if control.kill.load(Ordering::Acquire) || *shutdown.borrow() {
                return;
            }
        }
        let step = if batch.queue.is_empty() {
            Step::NeedInput
        } else if let Some(step) = {
            let (step, writes) =
                strata::deferring_log_writes(|| batch.run(&shared, Where::NetworkThread));
            log_writes.merge(writes);
            step
        } {
            step
        } else {
            // A command that may wait is at the head of the queue: it and the rest run on the
            // blocking pool (replies so far stay in the output, in order).
            let job_shared = shared.clone();
            match run_blocking(move || {
                let step = batch.run(&job_shared, Where::Pool);
                (batch, step.unwrap_or(Step::NeedInput))
            })
            .await
            {
                Ok((back, step)) => {
                    batch = back;
                    step
                }
                Err(e) => {
                    tracing::error!(%peer, "closing the connection: {e}");
                    return;
                }
            }
        };
        if matches!(step, Step::ServeWaiters) {
            // The push goes to the OS first (a waiter's reply must not acknowledge an element
            // whose push could still be lost), then the blocked clients take their turn.
            if let Err(e) = log_writes.complete() {
                tracing::error!(%peer, "closing the connection: {e}");
                return;
            }
            shared.list_waiters.settled().await;
        }
        // CLIENT TRACKING BCAST: the keys this batch changed go to their listeners now (Redis
        // sends them before its event loop sleeps).
        shared.watches.tracking.broadcast();
        let closing = batch.session.after_reply != AfterReply::Continue;
        if let (Some(e), true, false) = (&protocol_error, batch.queue.is_empty(), closing) {
            shared
                .counters
                .protocol_errors
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%peer, "protocol error: {e}");
            let reply = Reply::from(Error::Protocol(e.clone()));
            if let Reply::Error(message) = &reply {
                shared.command_stats.note_error(message);
            }
            reply.encode(batch.session.protocol, &mut batch.output);
        }
        if !batch.output.is_empty() {
            if !log_writes.is_empty() {
                // Let the other connections of this network thread run their commands first:
                // then one `write()` per partition hands all their records to the OS.
                tokio::task::yield_now().await;
                if let Err(e) = log_writes.complete() {
                    // The replies would acknowledge writes that may be lost: send none.
                    tracing::error!(%peer, "closing the connection: {e}");
                    return;
                }
            }
            if let Err(e) = stream.write_all(&batch.output).await {
                tracing::debug!(%peer, "write failed: {e}");
                return;
            }
            shared
                .counters
                .net_output_bytes
                .fetch_add(batch.output.len() as u64, Ordering::Relaxed);
            batch.output.clear();
        }
        if closing || (protocol_error.is_some() && batch.queue.is_empty()) {
            // Half-close so the client reads the final reply before seeing the end.
            let _ = stream.shutdown().await;
            return;
        }
        let blocked = batch
            .session
            .blocked
            .filter(|_| matches!(step, Step::Blocked));
        control.blocked.store(blocked.is_some(), Ordering::Release);
        if blocked.is_none()
            && (matches!(step, Step::OutputFull | Step::ServeWaiters | Step::Paused)
                || !input_drained)
        {
            continue;
        }
        if *shutdown.borrow() {
            return;
        }
        input.reserve(READ_CHUNK_BYTES);
        // Subscribers wait for messages, not for their own requests: Redis exempts them from
        // the idle timeout.
        let idle_secs = if batch.session.subs.count() > 0 || blocked.is_some() {
            0
        } else {
            shared.idle_timeout_secs()
        };
        let read = async {
            if idle_secs == 0 {
                Some(stream.read_buf(&mut input).await)
            } else {
                tokio::time::timeout(Duration::from_secs(idle_secs), stream.read_buf(&mut input))
                    .await
                    .ok()
            }
        };
        // A blocked command waits for a write that may have added to a list, or its deadline;
        // then it runs again (the loop's top). Input keeps being read meanwhile (queued behind
        // it), so a client that leaves is noticed and its command never takes an element.
        // A change of lists this command does not wait on wakes it too: it then waits on
        // without running again (`ListWaiters::needs_look`).
        let ticket = batch.session.wait_ticket.as_ref().map(|t| t.id());
        let waiters = &shared.list_waiters;
        let list_pushed = async {
            match blocked {
                Some(b) => {
                    let mut seen = b.seen_pushes;
                    loop {
                        let Ok(now) = list_pushes.wait_for(|n| *n != seen).await.map(|n| *n) else {
                            break;
                        };
                        match ticket {
                            Some(t) if !waiters.needs_look(t) => seen = now,
                            _ => break,
                        }
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        let deadline = async {
            match blocked.and_then(|b| b.deadline) {
                Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = list_pushed => {},
            () = deadline => {},
            () = control.wake.notified() => {},
            m = mailbox.recv() => {
                // Always `Some`: the session holds a sender. Encode this message and whatever
                // else is queued, then write them (top of the loop).
                let mut next = m;
                while let Some(m) = next {
                    mailbox_bytes.fetch_sub(m.bytes(), Ordering::AcqRel);
                    encode_message(m, &batch.session, &mut batch.output);
                    if batch.output.len() >= OUT_BYTES_SOFT_MAX {
                        break;
                    }
                    next = mailbox.try_recv().ok();
                }
                if mailbox_overflowed.load(Ordering::Acquire) {
                    tracing::warn!(%peer, "closing a subscriber that fell {} MiB behind", crate::pubsub::QUEUE_BYTES_MAX >> 20);
                    return;
                }
            },
            r = read => match r {
                Some(Ok(0)) => return,
                Some(Ok(n)) => {
                    // Messages published before this input arrived go out before its replies,
                    // as Redis has them in the output buffer already (`select!` may pick the
                    // input first when both are ready).
                    // (At most the mailbox's bound, `pubsub::QUEUE_BYTES_MAX`.)
                    while let Ok(m) = mailbox.try_recv() {
                        mailbox_bytes.fetch_sub(m.bytes(), Ordering::AcqRel);
                        encode_message(m, &batch.session, &mut batch.output);
                    }
                    if mailbox_overflowed.load(Ordering::Acquire) {
                        tracing::warn!(%peer, "closing a subscriber that fell {} MiB behind", crate::pubsub::QUEUE_BYTES_MAX >> 20);
                        return;
                    }
                    shared.counters.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    // Input piles up only while commands cannot run (a blocked command, a full
                    // queue): past the limit the client goes, as Redis closes it.
                    if input.len() > shared.query_buffer_limit_bytes() {
                        tracing::warn!(%peer, bytes = input.len(), "closing a client that reached the query buffer limit (client-query-buffer-limit)");
                        return;
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(%peer, "read failed: {e}");
                    return;
                }
                None => {
                    tracing::debug!(%peer, idle_secs, "closing idle connection");
                    return;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// What a connection hands to the blocking pool for one batch, and gets back.
struct Batch {
    session: Session,
    /// Parsed commands not yet run.
    queue: VecDeque<Vec<Bytes>>,
    /// Encoded replies not yet written.
    output: BytesMut,
}

/// Where a batch runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    /// On the connection's tokio worker: only what cannot wait (see [`Placement`]).
    NetworkThread,
    /// On the blocking pool: anything.
    Pool,
}

impl Batch {
    /// Runs queued commands in order, encoding replies, until the queue is empty, a command asks
    /// to close the connection, or the output is large enough to send first. On the network
    /// thread it stops (returns `None`) at the first command that may wait, leaving it queued.
    fn run(&mut self, shared: &Shared, at: Where) -> Option<Step> {
        // Times are chained between the commands of one batch only: before and after it the
        // connection waits for its client.
        self.session.clock_mark = None;
        let step = self.run_batch(shared, at);
        self.session.clock_mark = None;
        step
    }

    fn run_batch(&mut self, shared: &Shared, at: Where) -> Option<Step> {
        let on_network = at == Where::NetworkThread;
        // Writes wait for an fsync under `appendfsync always`, or while compaction is behind.
        let writes_here = !on_network || !shared.backend.writes_would_wait();
        // Cleared when the backend cannot hold a partition, or a held run stopped at a command
        // that writes elsewhere (it runs on its own next).
        let mut hold_runs = true;
        // Cleared when a script is busy: pipelined scripts then run one by one.
        let mut script_runs = true;
        loop {
            // CLIENT PAUSE: each command is checked before it runs (one load while no pause is
            // set), and while one is, commands run one at a time, so none that it holds runs
            // once CLIENT PAUSE has answered.
            let pause = shared.pause.current();
            if let (Some(p), Some(head)) = (pause, self.queue.front()) {
                if p.all || crate::commands::may_write(head, &self.session, shared) {
                    return Some(Step::Paused);
                }
            }
            let one_at_a_time = pause.is_some();
            let held = if hold_runs && writes_here && !one_at_a_time {
                self.held_run()
            } else {
                0
            };
            if held >= 2 {
                let guard = if on_network {
                    shared.exec_lock.try_read()?
                } else {
                    match shared.exec_read_unless_busy() {
                        Ok(guard) => guard,
                        // A script is busy: one by one, each answered BUSY.
                        Err(_) => {
                            hold_runs = false;
                            continue;
                        }
                    }
                };
                let commands: Vec<Vec<Bytes>> = self.queue.drain(..held).collect();
                let route = crate::keyspace::string_key(
                    shared.physical_db(self.session.db),
                    &commands[0][1],
                );
                let mut replies: Vec<Reply> = Vec::with_capacity(held);
                let session = &mut self.session;
                session.in_held_run = true;
                session.pop_window = None;
                let mut serve_waiters = false;
                let outcome = shared.backend.hold_group(&route, &mut |store| {
                    for args in &commands[replies.len()..] {
                        if !is_pop(args) {
                            session.pop_window = None;
                        }
                        let pushes_before = pushes_seen(shared);
                        let mut ctx = Ctx {
                            shared,
                            session: &mut *session,
                            store,
                            locking: Locking::Held,
                        };
                        match execute_here(&mut ctx, args, resolve(args)) {
                            Some(reply) => {
                                if reply.is_error() {
                                    session.pop_window = None;
                                }
                                replies.push(reply);
                            }
                            // Writes another partition: runs again without the hold.
                            None => break,
                        }
                        // Its pushes wake their waiters once the run is committed and its
                        // events published (`publish_session_events`).
                        if pushed(shared, pushes_before)
                            || (pushes_before.is_some()
                                && shared.list_waiters.concerns(&session.pushed))
                        {
                            // The waiters take the partition's lock: let it go first.
                            serve_waiters = true;
                            break;
                        }
                    }
                });
                session.in_held_run = false;
                session.pop_window = None;
                drop(guard);
                let committed = outcome.is_ok();
                match outcome {
                    Ok(true) => {}
                    Ok(false) => hold_runs = false,
                    // Nothing ran: the commands meet the error on their own.
                    Err(_) if replies.is_empty() => hold_runs = false,
                    // The run's writes were applied but not committed: none is acknowledged.
                    Err(e) => {
                        let failed = Reply::from(e);
                        for r in &mut replies {
                            *r = failed.clone();
                        }
                    }
                }
                // The run's keyspace events, once its writes are committed (none otherwise).
                if committed {
                    crate::commands::publish_session_events(shared, &mut self.session);
                } else {
                    self.session.events.clear();
                    // Nothing was pushed; a waiter woken for nothing looks and waits on.
                    self.session.wake_pushed(&shared.list_waiters);
                }
                for args in commands[replies.len()..].iter().rev() {
                    self.queue.push_front(args.clone());
                }
                if replies.len() < held {
                    hold_runs = false;
                }
                for reply in replies {
                    self.session.answer(&reply, &mut self.output);
                }
                if serve_waiters {
                    return Some(Step::ServeWaiters);
                }
                if self.output.len() >= OUT_BYTES_SOFT_MAX && !self.queue.is_empty() {
                    return Some(Step::OutputFull);
                }
                continue;
            }
            let scripts = if one_at_a_time || !script_runs {
                0
            } else {
                self.script_run()
            };
            if scripts >= 2 {
                if on_network {
                    // Scripts take the exec lock exclusively: only on the blocking pool.
                    return None;
                }
                let Ok(guard) = shared.exec_write_unless_busy() else {
                    // A script is busy: one by one, each answered BUSY.
                    script_runs = false;
                    continue;
                };
                let commands: Vec<Vec<Bytes>> = self.queue.drain(..scripts).collect();
                let mut replies = Vec::with_capacity(scripts);
                let mut serve_waiters = false;
                {
                    let mut ctx = Ctx::new(shared, &mut self.session, Locking::Held);
                    for args in &commands {
                        let pushes_before = pushes_seen(shared);
                        replies.push(execute(&mut ctx, args));
                        if pushed(shared, pushes_before) {
                            // The waiters need the exec lock this run holds.
                            serve_waiters = true;
                            break;
                        }
                    }
                }
                drop(guard);
                for args in commands[replies.len()..].iter().rev() {
                    self.queue.push_front(args.clone());
                }
                for reply in replies {
                    self.session.answer(&reply, &mut self.output);
                }
                if serve_waiters {
                    return Some(Step::ServeWaiters);
                }
                if self.output.len() >= OUT_BYTES_SOFT_MAX && !self.queue.is_empty() {
                    return Some(Step::OutputFull);
                }
                continue;
            }
            let mut run = if one_at_a_time {
                0
            } else {
                self.plain_set_run(shared)
            };
            let mut guard = None;
            if run >= 2 {
                if !writes_here {
                    return None;
                }
                // Writes hold the exec lock's shared side (`txn.rs`).
                guard = if on_network {
                    Some(shared.exec_lock.try_read()?)
                } else {
                    shared.exec_read_unless_busy().ok()
                };
                if guard.is_none() {
                    // A script is busy: the SETs run one by one, each answered BUSY.
                    run = 0;
                } else if self.session.cluster {
                    // The slots again, under the lock: one may have started moving since, and
                    // MIGRATE holds the lock exclusively.
                    run = self.plain_set_run(shared);
                }
            }
            if run >= 2 {
                let commands: Vec<Vec<Bytes>> = self.queue.drain(..run).collect();
                let started = Instant::now();
                let ctx = Ctx::new(shared, &mut self.session, Locking::Held);
                let reply = set_run(&ctx, &commands);
                drop(guard);
                // The slow log sees each SET of a merged run as taking the run's time.
                let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                let stats = &shared.command_stats;
                match &reply {
                    Reply::Error(message) => {
                        for _ in 0..run {
                            stats.note_error(message);
                            stats.note(
                                "set",
                                &[],
                                crate::watchers::Outcome::Ran {
                                    nanos: micros.saturating_mul(1000),
                                    failed: true,
                                },
                            );
                        }
                    }
                    _ => stats.note_run("set", run as u64, micros),
                }
                for args in &commands {
                    shared.watchers.note_duration(
                        micros,
                        args,
                        &self.session.peer,
                        self.session.name.as_ref(),
                    );
                }
                for _ in 0..run {
                    self.session.answer(&reply, &mut self.output);
                }
                if self.output.len() >= OUT_BYTES_SOFT_MAX && !self.queue.is_empty() {
                    return Some(Step::OutputFull);
                }
                continue;
            }
            // (A run the recheck cut short: the lock goes before the command takes it again.)
            drop(guard);
            let Some(args) = self.queue.pop_front() else {
                break;
            };
            let locking = if on_network {
                Locking::Try
            } else {
                Locking::Wait
            };
            let pushes_before = pushes_seen(shared);
            let mut ctx = Ctx::new(shared, &mut self.session, locking);
            let reply = if on_network {
                let spec = resolve(&args);
                let reply = match placement_in(spec, ctx.session) {
                    Placement::Read => execute_without_waiting(&mut ctx, &args, spec),
                    Placement::Write if writes_here => execute_here(&mut ctx, &args, spec),
                    Placement::Write | Placement::Pool => None,
                };
                let Some(reply) = reply else {
                    self.queue.push_front(args);
                    return None;
                };
                reply
            } else {
                execute(&mut ctx, &args)
            };
            if self.session.blocked.is_some() {
                // Nothing to answer yet: the command runs again when a list may have grown.
                self.queue.push_front(args);
                return Some(Step::Blocked);
            }
            // Answered (an error included): a blocked command leaves the lists' queues.
            self.session.wait_ticket = None;
            match self.session.after_reply {
                AfterReply::CloseSilently => {
                    self.queue.clear();
                    return Some(Step::NeedInput);
                }
                AfterReply::Close => {
                    self.session.answer(&reply, &mut self.output);
                    self.queue.clear();
                    return Some(Step::NeedInput);
                }
                AfterReply::Continue => self.session.answer(&reply, &mut self.output),
            }
            if pushed(shared, pushes_before) {
                return Some(Step::ServeWaiters);
            }
            if self.output.len() >= OUT_BYTES_SOFT_MAX && !self.queue.is_empty() {
                return Some(Step::OutputFull);
            }
        }
        Some(Step::NeedInput)
    }

    /// How many commands at the head of the queue are writes of one key that may run under one
    /// hold of its partition's write lock ([`HELD_RUN_COMMANDS`]).
    fn held_run(&self) -> usize {
        if !self.session.plain_sets_run_now() {
            return 0;
        }
        let Some(key) = self.queue.front().and_then(|a| a.get(1)) else {
            return 0;
        };
        self.queue
            .iter()
            .take(HELD_RUN_COMMANDS_MAX)
            .take_while(|args| {
                args.len() >= 2
                    && args[1] == *key
                    && HELD_RUN_COMMANDS
                        .iter()
                        .any(|name| args[0].eq_ignore_ascii_case(name.as_bytes()))
            })
            .count()
    }

    /// How many commands at the head of the queue are EVAL / EVALSHA (at most
    /// [`SCRIPT_RUN_COMMANDS_MAX`]): a pipeline of scripts runs under one exclusive hold of the
    /// exec lock instead of taking it per script (each script is atomic either way; measured:
    /// 50 clients pipelining scripts spent 38 % of the CPU switching threads at every script's
    /// hand-over of the lock). Not in cluster mode, where each script's keys are checked by the
    /// dispatcher as it takes the lock.
    fn script_run(&self) -> usize {
        if !self.session.plain_sets_run_now() || self.session.cluster {
            return 0;
        }
        self.queue
            .iter()
            .take(SCRIPT_RUN_COMMANDS_MAX)
            .take_while(|args| {
                args.first().is_some_and(|c| {
                    c.eq_ignore_ascii_case(b"eval") || c.eq_ignore_ascii_case(b"evalsha")
                })
            })
            .count()
    }

    /// How many commands at the head of the queue are plain `SET key value` that may run as one
    /// engine write (bounded in count and bytes so one write stays small).
    fn plain_set_run(&self, shared: &Shared) -> usize {
        // MONITOR shows every command on its own, as it runs: no merging while anyone watches.
        // Nor while keyspace notifications of SETs (or of new keys) are published: each SET
        // reports its own through the dispatcher.
        // A tracking client's own invalidations follow each SET's reply: no merging either.
        // Nor for a user whose ACL rules must be checked, or past maxmemory: the dispatcher
        // checks those.
        if !self.session.plain_sets_run_now()
            || !self.session.acl_unrestricted(shared)
            || shared.over_maxmemory()
            || self.session.asking
            || self.session.tracking.is_some()
            || shared.watchers.monitored()
            || shared
                .notify
                .wants(crate::notify::STRING | crate::notify::NEW)
        {
            return 0;
        }
        // Cluster mode: only keys whose slot this node serves without any redirection.
        let cluster = shared.cluster.as_ref().map(|c| c.read());
        let mut bytes = 0usize;
        let mut n = 0;
        for args in self.queue.iter().take(SET_RUN_COMMANDS_MAX) {
            let plain_set = args.len() == 3
                && args[0].eq_ignore_ascii_case(b"SET")
                && args[1].len() <= SET_RUN_KEY_BYTES_MAX
                && cluster.as_ref().is_none_or(|c| c.serves_plainly(&args[1]));
            bytes = bytes.saturating_add(args.iter().map(Bytes::len).sum::<usize>());
            if !plain_set || (n > 0 && bytes > SET_RUN_BYTES_MAX) {
                break;
            }
            n += 1;
        }
        n
    }
}

/// The count of changes blocked clients must look at, before a command, when some client is
/// blocked (`None`: none is, and the command's pushes wake nobody): see [`pushed`].
fn pushes_seen(shared: &Shared) -> Option<u64> {
    let waiters = &shared.list_waiters;
    waiters.any_waiting().then(|| waiters.concerning())
}

/// Whether a list a client is blocked on changed since [`pushes_seen`]: then the blocked
/// clients are served before the next command ([`Step::ServeWaiters`]). Pushes to lists nobody
/// waits on do not count, so they keep a pipeline's held run going.
fn pushed(shared: &Shared, before: Option<u64>) -> bool {
    before.is_some_and(|g| shared.list_waiters.concerning() != g)
}

/// Whether `args` is a pop that may take from the window the held run's previous pop left
/// (`collection::PopWindow`): SPOP and ZPOPMIN.
fn is_pop(args: &[Bytes]) -> bool {
    args.first()
        .is_some_and(|c| c.eq_ignore_ascii_case(b"spop") || c.eq_ignore_ascii_case(b"zpopmin"))
}

/// Writes a mailbox message as `session` receives it now (its protocol, and for a tracking
/// message in RESP2 whether it is subscribed: otherwise nothing is written).
fn encode_message(m: crate::pubsub::Message, session: &Session, out: &mut BytesMut) {
    match m {
        crate::pubsub::Message::Tracking { push, redirected } => {
            push.encode(session.protocol, redirected, session.subs.count() > 0, out);
        }
        m => message_reply(m).encode(session.protocol, out),
    }
}

/// A published message as the push a subscriber receives; a MONITOR line as the status reply
/// Redis sends (in both protocols).
fn message_reply(m: crate::pubsub::Message) -> Reply {
    match m {
        crate::pubsub::Message::Published {
            pattern: None,
            shard,
            channel,
            payload,
        } => Reply::Push(vec![
            Reply::bulk(if shard { "smessage" } else { "message" }),
            Reply::Bulk(channel),
            Reply::Bulk(payload),
        ]),
        crate::pubsub::Message::Published {
            pattern: Some(p),
            channel,
            payload,
            ..
        } => Reply::Push(vec![
            Reply::bulk("pmessage"),
            Reply::Bulk(p),
            Reply::Bulk(channel),
            Reply::Bulk(payload),
        ]),
        crate::pubsub::Message::Monitor(line) => Reply::Simple(std::borrow::Cow::Owned(
            String::from_utf8_lossy(&line).into_owned(),
        )),
        // Written by `encode_message`, which knows the session.
        crate::pubsub::Message::Tracking { .. } => Reply::Several(Vec::new()),
    }
}

/// Tells a client over the limit why it is being turned away, then closes.
pub(crate) async fn reject(mut stream: TcpStream, message: &str) {
    let reply = Reply::Error(message.to_string()).to_bytes(Default::default());
    // Bounded: a client that does not read must not hold the rejecting task.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&reply).await;
        let _ = stream.shutdown().await;
    })
    .await;
}
