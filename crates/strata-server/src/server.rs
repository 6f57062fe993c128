//! The listening server: binds, accepts connections (turning away those over `maxclients`),
//! spawns one task per connection, and shuts down gracefully: stop accepting, let every
//! connection finish the batch it is running, wait for them (bounded), then sync the engine's
//! write-ahead logs. [`Server`] is the async face; [`ServerThread`] runs one on its own thread and
//! runtime for synchronous callers (tests, embedding).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::backend::KvBackend;
use crate::config::ServerConfig;
use crate::conn;
use crate::error::{Error, Result};
use crate::state::Shared;

/// How long shutdown waits for connections to finish their current batch.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the drain looks for a busy script to stop.
const DRAIN_POLL: Duration = Duration::from_millis(50);
/// How long shutdown waits for a running BGSAVE.
const BGSAVE_WAIT_MAX: Duration = Duration::from_secs(60);
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(50);

/// A running server on the current tokio runtime.
pub struct Server {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
    /// Active expiry (`expire.rs`); ends at shutdown.
    expire_task: JoinHandle<()>,
    drained: mpsc::Receiver<()>,
}

/// Asks a server to shut down; cheap to clone and usable from any thread.
#[derive(Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    /// Requests shutdown (as the SHUTDOWN command does); returns at once.
    pub fn shutdown(&self) {
        self.shared.request_shutdown();
    }
}

impl Server {
    /// Binds `config.bind:config.port` (port 0 picks a free port) and starts accepting. Must be
    /// called inside a tokio runtime (any flavor: engine calls run on its blocking pool).
    pub async fn bind(
        config: ServerConfig,
        backend: Arc<dyn KvBackend + Send + Sync>,
    ) -> Result<Server> {
        let mut config = config;
        config
            .validate()
            .map_err(|reason| Error::Config { file: None, reason })?;
        let where_ = format!("{}:{}", config.bind, config.port);
        let listener = TcpListener::bind((config.bind.as_str(), config.port))
            .await
            .map_err(|e| Error::io(format!("binding {where_}"), e))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| Error::io(format!("reading the address bound for {where_}"), e))?;
        config.port = local_addr.port();
        if !local_addr.ip().is_loopback() && config.requirepass.is_none() {
            tracing::warn!(
                "listening on {local_addr} without a password: anyone who can reach this address can read and change all data"
            );
        }
        let text_listener = match config.text_port {
            Some(port) => {
                let where_ = format!("{}:{port}", config.bind);
                let l = TcpListener::bind((config.bind.as_str(), port))
                    .await
                    .map_err(|e| Error::io(format!("binding the text listener {where_}"), e))?;
                let addr = l
                    .local_addr()
                    .map_err(|e| Error::io(format!("reading the address bound for {where_}"), e))?;
                config.text_port = Some(addr.port());
                tracing::info!("seed 004 line protocol on {addr}");
                Some(l)
            }
            None => None,
        };
        let shared = Arc::new(Shared::new(backend, config)?);
        if let Some(l) = text_listener {
            tokio::spawn(crate::text::accept_loop(l, shared.clone()));
        }
        let (drain_tx, drained) = mpsc::channel(1);
        let accept_task = tokio::spawn(accept_loop(listener, shared.clone(), drain_tx));
        let expire_task = tokio::spawn(crate::expire::run(shared.clone()));
        tracing::info!("listening on {local_addr} (RESP2/RESP3)");
        Ok(Server {
            local_addr,
            shared,
            accept_task,
            expire_task,
            drained,
        })
    }

    /// The port of seed 004's line protocol, when enabled.
    pub fn text_port(&self) -> Option<u16> {
        self.shared.config().text_port
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle that can request shutdown from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: self.shared.clone(),
        }
    }

    /// Resolves once shutdown has been requested (SHUTDOWN command or a [`ShutdownHandle`]).
    pub async fn shutdown_requested(&self) {
        let mut rx = self.shared.shutdown.subscribe();
        // The sender lives in `shared`, which `self` keeps alive, so this cannot fail.
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// Stops accepting, waits (bounded) for connections to finish their current batch, and syncs
    /// the write-ahead logs.
    pub async fn shutdown(mut self) -> Result<()> {
        self.shared.request_shutdown();
        if let Err(e) = (&mut self.accept_task).await {
            tracing::warn!("accept loop ended abnormally: {e}");
        }
        if let Err(e) = (&mut self.expire_task).await {
            tracing::warn!("active expiry ended abnormally: {e}");
        }
        let open = self
            .shared
            .counters
            .connected_clients
            .load(Ordering::Relaxed);
        if open > 0 {
            tracing::info!(open, "waiting for connections to finish");
        }
        // `recv` yields `None` once every connection (each holds a sender) is gone. A script
        // past busy-reply-threshold would hold its connection (and a blocking thread) forever:
        // it is stopped and its writes dropped, as Redis exits during a busy script (`busy.rs`);
        // one still running when the drain gives up is stopped the same way.
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        loop {
            if self.shared.running_script.busy().is_some() {
                self.shared.running_script.abandon();
            }
            match tokio::time::timeout(DRAIN_POLL, self.drained.recv()).await {
                Ok(_) => break,
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    tracing::warn!(
                        "connections still open after {DRAIN_TIMEOUT:?}; syncing without them"
                    );
                    self.shared.running_script.abandon();
                    break;
                }
                Err(_) => {}
            }
        }
        // A background save holds the engine; let it finish so the caller can close the engine.
        let bgsave_deadline = tokio::time::Instant::now() + BGSAVE_WAIT_MAX;
        while self.shared.bgsave_running.load(Ordering::Acquire)
            && tokio::time::Instant::now() < bgsave_deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let backend = self.shared.backend.clone();
        conn::run_blocking(move || backend.sync()).await??;
        tracing::info!("server stopped; write-ahead logs synced");
        Ok(())
    }
}

/// The next connection on `listener`, or `None` once shutdown is requested. A failed accept
/// (out of descriptors, a connection reset before it was taken) is logged and retried after
/// [`ACCEPT_RETRY_DELAY`]. Both listeners (RESP and seed 004's lines) take connections here.
pub(crate) async fn next_connection(
    listener: &TcpListener,
    shutdown: &mut watch::Receiver<bool>,
    what: &str,
) -> Option<(tokio::net::TcpStream, std::net::SocketAddr)> {
    loop {
        if *shutdown.borrow() {
            return None;
        }
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return None,
        };
        match accepted {
            Ok(pair) => return Some(pair),
            Err(e) => {
                tracing::warn!("{what}: accept failed: {e}");
                tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
            }
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, drain: mpsc::Sender<()>) {
    let mut shutdown: watch::Receiver<bool> = shared.shutdown.subscribe();
    while let Some((stream, peer)) =
        next_connection(&listener, &mut shutdown, "RESP listener").await
    {
        shared
            .counters
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        let before = shared
            .counters
            .connected_clients
            .fetch_add(1, Ordering::Relaxed);
        if before >= shared.maxclients() {
            shared
                .counters
                .connected_clients
                .fetch_sub(1, Ordering::Relaxed);
            shared
                .counters
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%peer, "rejecting connection: maxclients reached");
            tokio::spawn(conn::reject(stream, "ERR max number of clients reached"));
            continue;
        }
        tokio::spawn(conn::serve(
            stream,
            peer,
            shared.clone(),
            drain.clone(),
            shutdown.clone(),
        ));
    }
}

/// A server running on its own thread with its own multi-thread runtime, for synchronous code.
pub struct ServerThread {
    local_addr: SocketAddr,
    text_port: Option<u16>,
    handle: ShutdownHandle,
    thread: std::thread::JoinHandle<Result<()>>,
}

impl ServerThread {
    /// Starts a server on a new thread; returns once it is listening.
    pub fn start(
        config: ServerConfig,
        backend: Arc<dyn KvBackend + Send + Sync>,
    ) -> Result<ServerThread> {
        // Two connection threads unless the config says how many: embedders and tests share
        // the machine with the server.
        const WORKER_THREADS: usize = 2;
        let runtime = crate::connection_runtime(config.io_threads.unwrap_or(WORKER_THREADS))
            .map_err(|e| Error::io("starting the server runtime", e))?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("strata-server-main".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let server = match Server::bind(config, backend).await {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return Ok(());
                        }
                    };
                    let _ = ready_tx.send(Ok((
                        server.local_addr(),
                        server.text_port(),
                        server.shutdown_handle(),
                    )));
                    server.shutdown_requested().await;
                    server.shutdown().await
                })
            })
            .map_err(|e| Error::io("starting the server thread", e))?;
        match ready_rx.recv() {
            Ok(Ok((local_addr, text_port, handle))) => Ok(ServerThread {
                local_addr,
                text_port,
                handle,
                thread,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::command("server thread ended before it was ready")),
        }
    }

    /// The port of seed 004's line protocol, when enabled.
    pub fn text_port(&self) -> Option<u16> {
        self.text_port
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle that can request shutdown.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.handle.clone()
    }

    /// Requests shutdown and waits until the server has stopped and synced.
    pub fn shutdown(self) -> Result<()> {
        self.handle.shutdown();
        self.join()
    }

    /// Waits until the server stops (after SHUTDOWN or a handle's request).
    pub fn join(self) -> Result<()> {
        self.thread
            .join()
            .map_err(|_| Error::command("server thread panicked"))?
    }
}
