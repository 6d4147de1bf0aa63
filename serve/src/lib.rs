//! `ringscan serve`: a long-running query host that PostgreSQL clients connect to.
//!
//! One tokio runtime accepts connections and speaks the wire protocol (the `pgwire`
//! crate); each connection gets its own [`SqlSession`] (its plan and result caches, its
//! rings), opened on its first statement and run on tokio's blocking threads, since the
//! engine blocks on the daemon's ring. The IO daemon of the data directory is shared
//! and started on demand, as for `ringscan query`.
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

use ringscan_executor::engine::EngineOptions;

mod binary;
mod catalog;
mod conn;
mod handlers;
mod rewrite;
mod rows;
mod settings;
mod statement;
pub mod text;

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
}

/// Why the host could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a password.
    #[error(
        "refusing to listen on {0}: without a password only a loopback address (127.0.0.1, \
         ::1) may be listened on, and passwords are not supported yet"
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
    if !options.listen.ip().is_loopback() {
        return Err(ServeError::NotLoopback(options.listen));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ringscan-serve")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(serve(options, spawn, ready))
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
    ready(bound);
    let shared = Arc::new(conn::Shared {
        data: options.data,
        engine: options.engine,
        spawn,
        manager: Arc::new(pgwire::api::ConnectionManager::new()),
        open: std::sync::atomic::AtomicUsize::new(0),
        max_connections: options.max_connections,
    });
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            accepted = listener.accept() => {
                let (socket, _) = match accepted {
                    Ok(a) => a,
                    // A connection that failed before we got it (reset, out of files):
                    // the next one may do better.
                    Err(_) => continue,
                };
                let _ = socket.set_nodelay(true);
                let slot = conn::Slot::take(&shared);
                let connection = conn::Connection::new(Arc::clone(&shared), slot);
                let handlers = handlers::Handlers(Arc::new(connection));
                tokio::spawn(async move {
                    let _ = pgwire::tokio::process_socket(socket, None, handlers).await;
                });
            }
        }
    }
    Ok(())
}
