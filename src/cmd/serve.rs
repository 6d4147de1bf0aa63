//! `ringscan serve`: the query host PostgreSQL clients connect to (see ringscan-serve).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use ringscan_executor::engine::EngineOptions;
use ringscan_serve::{ServeOptions, Spawn};

use super::common::{DataRoot, RangeCacheArgs};
use super::daemon::spawn_detached;
use ringscan_ipc::client::{socket_path, DaemonClient};

/// How long a daemon started by the host stays up without work.
const DAEMON_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Arguments of `ringscan serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Data directory, or an object-storage prefix `s3://bucket/prefix` (read-only;
    /// endpoint and credentials from the AWS_* variables and the AWS profile;
    /// `gs://bucket/prefix` and `az://container/prefix` from GOOGLE_* and AZURE_*)
    /// [default: $RINGSCAN_DATA, else ./ringscan-data].
    #[arg(long, value_name = "DIR|URL")]
    data: Option<PathBuf>,
    /// For an s3:// root: the local directory for the daemon's socket, log and run
    /// records [default: one under the user's cache directory named after the URL].
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    #[command(flatten)]
    range_cache: RangeCacheArgs,
    /// Address to listen on (port 0: any free port, printed when ready).
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: SocketAddr,
    /// Connections served at once; past it a client is refused with SQLSTATE 53300.
    #[arg(long, default_value_t = 100)]
    max_connections: usize,
    /// On SIGTERM or SIGINT, seconds running statements may go on before they are
    /// stopped.
    #[arg(long, default_value_t = 10.0)]
    shutdown_grace: f64,
    /// Statements slower than this many milliseconds are logged.
    #[arg(long, default_value_t = 1000)]
    slow_statement_ms: u64,
    /// Memory each statement's joins, sorts and aggregations may hold before they
    /// spill to disk, in MiB [default: half the machine's memory].
    #[arg(long, value_parser = clap::value_parser!(u64).range(16..))]
    memory_limit_mib: Option<u64>,
    /// Close a connection idle (no statement running or arriving) this many seconds;
    /// 0 never does.
    #[arg(long, default_value_t = 0.0)]
    idle_timeout: f64,
    /// A file holding the password clients must give (SCRAM-SHA-256); the
    /// RINGSCAN_PASSWORD variable does the same. Without one, only loopback addresses
    /// may be listened on.
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (a loopback address).
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Offer TLS to clients that ask for it (sslmode=require and the like): the
    /// certificate chain, PEM. Needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1). Needs --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    let root = DataRoot::new(args.data.as_deref(), args.state.as_deref())?
        .with_range_cache(&args.range_cache)?;
    root.check()?;
    // The host sees the local directory standing for the root (the daemon's socket).
    let data = root.local.clone();
    let exe = std::env::current_exe()?;
    let daemon_data = root;
    // Whether this host started the daemon: then it stops it when it exits.
    let started = Arc::new(AtomicBool::new(false));
    let started_by_us = Arc::clone(&started);
    let spawn: Spawn = Arc::new(move || {
        spawn_detached(&exe, &daemon_data, DAEMON_IDLE_TIMEOUT)?;
        started_by_us.store(true, Ordering::SeqCst);
        Ok(())
    });
    anyhow::ensure!(
        args.shutdown_grace.is_finite() && args.shutdown_grace >= 0.0,
        "--shutdown-grace must be a number of seconds, 0 or more"
    );
    anyhow::ensure!(
        args.idle_timeout.is_finite() && args.idle_timeout >= 0.0,
        "--idle-timeout must be a number of seconds, 0 or more"
    );
    let mut engine = EngineOptions::default();
    if let Some(mib) = args.memory_limit_mib {
        engine.memory_limit_bytes = usize::try_from(mib << 20).unwrap_or(usize::MAX);
    }
    let password = match (&args.password_file, std::env::var("RINGSCAN_PASSWORD")) {
        (Some(file), _) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the password file {}", file.display()))?;
            Some(text.trim_end_matches(['\n', '\r']).to_owned())
        }
        (None, Ok(p)) => Some(p),
        (None, Err(_)) => None,
    };
    anyhow::ensure!(
        password.as_deref() != Some(""),
        "the password is empty (RINGSCAN_PASSWORD or --password-file)"
    );
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(ringscan_serve::tls::acceptor(cert, key)?),
        _ => None,
    };
    ringscan_serve::init_logging().map_err(anyhow::Error::msg)?;
    let daemon_socket = socket_path(&data);
    let options = ServeOptions {
        data,
        listen: args.listen,
        engine,
        max_connections: args.max_connections,
        shutdown_grace: Duration::from_secs_f64(args.shutdown_grace),
        slow_statement: Duration::from_millis(args.slow_statement_ms),
        password,
        metrics: args.metrics,
        idle_timeout: (args.idle_timeout > 0.0).then(|| Duration::from_secs_f64(args.idle_timeout)),
        tls,
    };
    let served = ringscan_serve::run(options, spawn, |addr| {
        println!("listening on {addr}");
    });
    if started.load(Ordering::SeqCst) {
        // Another client of the daemon would start it again on demand.
        let stopped = DaemonClient::connect(&daemon_socket).and_then(DaemonClient::stop);
        if let Err(e) = stopped {
            eprintln!("ringscan serve: the IO daemon it started did not stop: {e}");
        }
    }
    served?;
    Ok(std::process::ExitCode::SUCCESS)
}
