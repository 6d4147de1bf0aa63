//! `ringscan serve`: a long-running query host that PostgreSQL clients connect to.
//!
//! One tokio runtime accepts connections, handles signals, metrics and statement
//! timers, and watches for clients that go away mid-statement. Each connection runs on
//! its own thread with its own single-threaded runtime, which speaks the wire protocol
//! (the `pgwire` crate) and runs the connection's statements inline: the engine blocks
//! on the daemon's answers, and on its own thread that costs nothing, where handing each
//! statement to a pool thread and back cost a point lookup most of its time (thread
//! wake-ups). Each connection gets its own [`SqlSession`] (its plan and result caches,
//! its rings, a runtime whose workers run a plan's partitions), opened on its first
//! statement. The IO daemon of the data directory is shared and started on demand, as
//! for `ringscan query`.
//!
//! - Protocol: simple and extended query (named and unnamed statements and portals,
//!   `$n` parameters typed by the client or by their use, text and binary formats for
//!   parameters and results, row limits on portals), PostgreSQL's type OIDs and column
//!   names, errors with SQLSTATE codes ([`handlers`], [`rows`], [`binary`]).
//! - Session: BEGIN / COMMIT / ROLLBACK with the right transaction status; `SET`,
//!   `SHOW`, `RESET` of PostgreSQL's parameters, startup values included
//!   ([`settings`]); `statement_timeout` and cancel requests stop a running query
//!   (SQLSTATE 57014), as does a client that goes away.
//! - Limits: `max_connections` (SQLSTATE 53300 past it); loopback only.
//! - SIGTERM / SIGINT stop the listener.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use ringscan_executor::engine::EngineOptions;

mod binary;
mod catalog;
mod conn;
mod copy;
pub mod copy_in;
mod encode;
mod handlers;
mod metrics;
mod packed;
mod rewrite;
mod rows;
mod scram;
mod settings;
mod socket;
mod statement;
pub mod text;
pub mod tls;

/// The PostgreSQL version the host answers as: the catalog queries of clients
/// (psql's `\d`) are chosen by it.
pub const SERVER_VERSION: &str = "15.0 (ringscan)";
/// [`SERVER_VERSION`] as `server_version_num`.
pub const SERVER_VERSION_NUM: &str = "150000";

pub use conn::Spawn;

/// How `ringscan serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The data directory its sessions query.
    pub data: PathBuf,
    /// Where it listens.
    pub listen: SocketAddr,
    /// Each session's engine settings.
    pub engine: EngineOptions,
    /// Connections served at once; the next is refused (SQLSTATE 53300).
    pub max_connections: usize,
    /// On SIGTERM / SIGINT, how long running statements may go on before they are
    /// stopped.
    pub shutdown_grace: Duration,
    /// Statements that take longer are logged.
    pub slow_statement: Duration,
    /// A connection idle this long is closed.
    pub idle_timeout: Option<Duration>,
    /// Clients must prove they know it (SCRAM-SHA-256); without one, only loopback
    /// addresses may be listened on.
    pub password: Option<String>,
    /// Where Prometheus scrapes `/metrics` (a loopback address).
    pub metrics: Option<SocketAddr>,
    /// TLS offered to clients that ask for it ([`tls::acceptor`]).
    pub tls: Option<tls::Acceptor>,
}

/// The socket and a duplicate of it (`None` where the system would not make one) that
/// shows whether the client is still there while a statement runs.
/// Both leave the accepting runtime: the connection's own thread registers the socket
/// with its runtime.
fn duplicate(
    socket: tokio::net::TcpStream,
) -> io::Result<(std::net::TcpStream, Option<std::net::TcpStream>)> {
    let socket = socket.into_std()?;
    let peer = socket.try_clone().ok();
    Ok((socket, peer))
}

thread_local! {
    /// The last panic on this thread, for the connection it closes to report.
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The host's threads' panics are reported by what they stop (a connection, a
/// statement) in one log line; other threads' go to the hook installed before.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() != Some(THREAD_NAME) {
                return previous(info);
            }
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message}{at}")));
        }));
    });
}

fn last_panic() -> Option<String> {
    LAST_PANIC.with(|p| p.borrow_mut().take())
}

/// The name of the host's runtime threads.
const THREAD_NAME: &str = "ringscan-serve";

/// Sends the host's log (the `tracing` events of this crate) to stderr, one line per
/// event with the UTC time, level, connection span and fields. `RINGSCAN_LOG` sets the
/// level (error, warn, info, debug, trace; default info). Call once, before [`run`].
pub fn init_logging() -> Result<(), String> {
    let level = match std::env::var("RINGSCAN_LOG") {
        Ok(v) => v
            .parse::<tracing_subscriber::filter::LevelFilter>()
            .map_err(|_| {
                format!("RINGSCAN_LOG={v:?}: not a level (error, warn, info, debug, trace, off)")
            })?,
        Err(_) => tracing_subscriber::filter::LevelFilter::INFO,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false)
        .try_init()
        .map_err(|e| format!("cannot set up the log: {e}"))
}

/// Why the host could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a password.
    #[error(
        "refusing to listen on {0}: without a password only a loopback address (127.0.0.1, \
         ::1) may be listened on (set RINGSCAN_PASSWORD or --password-file)"
    )]
    NotLoopback(SocketAddr),
    /// Binding or accepting failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: io::Error,
    },
    /// A non-loopback metrics address: the metrics have no password.
    #[error("refusing to serve metrics on {0}: only a loopback address may be used")]
    MetricsNotLoopback(SocketAddr),
    /// The runtime could not start.
    #[error("cannot start the server's runtime: {0}")]
    Runtime(io::Error),
}

/// Runs the host until SIGTERM or SIGINT: binds `options.listen`, calls `ready` with
/// the address bound (its port when 0 was asked for), then serves each connection.
pub fn run(
    options: ServeOptions,
    spawn: Spawn,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    if !options.listen.ip().is_loopback() && options.password.is_none() {
        return Err(ServeError::NotLoopback(options.listen));
    }
    if let Some(addr) = options.metrics.filter(|a| !a.ip().is_loopback()) {
        return Err(ServeError::MetricsNotLoopback(addr));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(THREAD_NAME)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    install_panic_hook();
    let served = runtime.block_on(serve(options, spawn, ready));
    // Sessions close on blocking threads; a stuck one does not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(5));
    served
}

async fn serve(
    options: ServeOptions,
    spawn: Spawn,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    use tokio::signal::unix::{signal, SignalKind};
    let listen_err = |source| ServeError::Listen {
        addr: options.listen,
        source,
    };
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(listen_err)?;
    let bound = listener.local_addr().map_err(listen_err)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(ServeError::Runtime)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(ServeError::Runtime)?;
    let metrics = Arc::new(metrics::Metrics::new());
    let metrics_listener = match options.metrics {
        Some(addr) => {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Listen { addr, source })?;
            let at = l
                .local_addr()
                .map_err(|source| ServeError::Listen { addr, source })?;
            Some((l, at))
        }
        None => None,
    };
    ready(bound);
    // Set once the host stops: every connection's thread ends its connection.
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let shared = Arc::new(conn::Shared {
        runtime: tokio::runtime::Handle::current(),
        data: options.data,
        engine: options.engine,
        spawn,
        manager: Arc::new(pgwire::api::ConnectionManager::new()),
        open: std::sync::atomic::AtomicUsize::new(0),
        max_connections: options.max_connections,
        running: std::sync::Mutex::new(std::collections::HashMap::new()),
        next_statement: std::sync::atomic::AtomicU64::new(0),
        next_connection: std::sync::atomic::AtomicU64::new(0),
        slow_statement: options.slow_statement,
        hold_bytes: crate::conn::hold_bytes(),
        metrics: Arc::clone(&metrics),
        password: match &options.password {
            Some(p) => Some(scram::Verifier::new(
                p,
                scram::random(16).map_err(ServeError::Runtime)?,
            )),
            None => None,
        },
    });
    if let Some((listener, at)) = metrics_listener {
        tracing::info!("metrics on http://{at}/metrics");
        let counted = Arc::clone(&shared);
        tokio::spawn(metrics::serve(listener, metrics, move || {
            counted.open.load(std::sync::atomic::Ordering::Relaxed) as u64
        }));
    }
    tokio::spawn(conn::watch_clients(Arc::clone(&shared)));
    // One task per connection, which ends when the connection's thread does.
    let mut connections = tokio::task::JoinSet::new();
    let signal = loop {
        tokio::select! {
            _ = terminate.recv() => break "SIGTERM",
            _ = interrupt.recv() => break "SIGINT",
            // Finished connections are reaped as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(a) => a,
                    // A connection that failed before we got it (reset, out of files):
                    // the next one may do better.
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                let (socket, watcher) = match duplicate(socket) {
                    Ok(pair) => pair,
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "a connection failed at once");
                        continue;
                    }
                };
                shared.metrics.connection();
                let slot = conn::Slot::take(&shared);
                let id = slot.id;
                let connection = Arc::new(conn::Connection::new(Arc::clone(&shared), slot, watcher));
                let handlers = handlers::Handlers(Arc::clone(&connection));
                let idle_timeout = options.idle_timeout;
                let tls = options.tls.clone();
                let span = tracing::info_span!("connection", id, %peer);
                let mut stop = stop.clone();
                let (ended, end) = tokio::sync::oneshot::channel::<()>();
                let serve_one = async move {
                    let started = Instant::now();
                    tracing::debug!("accepted");
                    // A message pgwire's decoder cannot take makes it panic: that
                    // closes this connection, with one line saying why.
                    let serving = std::panic::AssertUnwindSafe(async {
                        let socket = tokio::net::TcpStream::from_std(socket)?;
                        socket::process(
                            socket,
                            peer,
                            handlers,
                            connection.idle_for(idle_timeout),
                            tls,
                        )
                        .await
                    })
                    .catch_unwind();
                    let why = tokio::select! {
                        served = serving => match served {
                            Ok(Ok(None)) => "the client closed it".to_owned(),
                            Ok(Ok(Some(idle))) => {
                                format!("idle for {:.1} s: --idle-timeout", idle.as_secs_f64())
                            }
                            Ok(Err(e)) => e.to_string(),
                            Err(_) => format!(
                                "a malformed protocol message: {}",
                                last_panic().unwrap_or_default()
                            ),
                        },
                        _ = stop.wait_for(|stopped| *stopped) => "the host stopped".to_owned(),
                    };
                    let (statements, failed) = connection.statement_counts();
                    tracing::info!(
                        seconds = format_args!("{:.3}", started.elapsed().as_secs_f64()),
                        statements,
                        failed,
                        why,
                        "connection closed"
                    );
                };
                let thread = std::thread::Builder::new()
                    .name(THREAD_NAME.into())
                    .spawn(move || {
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build();
                        match runtime {
                            Ok(runtime) => {
                                runtime.block_on(tracing::Instrument::instrument(serve_one, span))
                            }
                            Err(e) => tracing::warn!(error = %e, "a connection's runtime failed"),
                        }
                        drop(ended);
                    });
                match thread {
                    Ok(_) => drop(connections.spawn(async move {
                        let _ = end.await;
                    })),
                    Err(e) => tracing::warn!(%peer, error = %e, "a connection's thread failed"),
                }
            }
        }
    };
    // Stop accepting; let running statements finish within the grace period, then
    // stop them and close every connection.
    drop(listener);
    tracing::info!(
        running = shared.running(),
        open = connections.len(),
        "{signal}: stopped listening"
    );
    let deadline = Instant::now() + options.shutdown_grace;
    while shared.running() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = shared.running();
    if left > 0 {
        tracing::warn!(
            "stopping {left} statement(s) still running after {} s",
            options.shutdown_grace.as_secs_f64()
        );
        shared.interrupt_all("terminating connection due to administrator command");
        // Their errors reach their clients before the connections close.
        let deadline = Instant::now() + Duration::from_secs(2);
        while shared.running() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let _ = stopping.send(true);
    // A connection's thread ends at its next await; one stuck in a statement that
    // does not stop is left to the process's exit.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}
