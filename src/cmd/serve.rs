//! `ringscan serve`: the query host PostgreSQL clients connect to (see ringscan-serve).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use ringscan_executor::engine::EngineOptions;
use ringscan_serve::{ServeOptions, Spawn};

use super::common::data_dir;
use super::daemon::spawn_detached;

/// How long a daemon started by the host stays up without work.
const DAEMON_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Arguments of `ringscan serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Data directory [default: $RINGSCAN_DATA, else ./ringscan-data].
    #[arg(long)]
    data: Option<PathBuf>,
    /// Address to listen on (port 0: any free port, printed when ready).
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: SocketAddr,
    /// Connections served at once; past it a client is refused with SQLSTATE 53300.
    #[arg(long, default_value_t = 100)]
    max_connections: usize,
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    let data = data_dir(args.data.as_deref());
    if !data.is_dir() {
        anyhow::bail!(
            "data directory {} does not exist (generate data with `ringscan generate`, or pass --data)",
            data.display()
        );
    }
    let exe = std::env::current_exe()?;
    let daemon_data = data.clone();
    let spawn: Spawn =
        Arc::new(move || spawn_detached(&exe, &daemon_data, DAEMON_IDLE_TIMEOUT).map(drop));
    let options = ServeOptions {
        data,
        listen: args.listen,
        engine: EngineOptions::default(),
        max_connections: args.max_connections,
    };
    ringscan_serve::run(options, spawn, |addr| {
        println!("listening on {addr}");
    })?;
    Ok(std::process::ExitCode::SUCCESS)
}
