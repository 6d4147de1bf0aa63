//! `ringscan __bench-side <baseline|ringscan> --suite S --data DIR`: one side of
//! `ringscan bench`, in its own process so that its peak RSS is its own. It serves the
//! line protocol of `ringscan_benches::side` on stdin/stdout.
//!
//! The ringscan side is [`RingscanEngine`]: a SQL session on the suite's data
//! directory, through the same daemon -> ring -> engine path as
//! `ringscan query`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use ringscan_benches::suites::{self, Scenario, SuiteKind};
use ringscan_benches::{side, Baseline, BenchError, Engine, RunOutcome};

use ringscan_executor::engine::{EngineOptions, SqlSession};

use super::query::open_sql_session;

/// The sides `ringscan bench` runs.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum SideKind {
    /// The in-memory baseline.
    Baseline,
    /// ringscan's executor and daemon.
    Ringscan,
}

/// Flags of the hidden `ringscan __bench-side`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchSideArgs {
    /// Which side.
    #[arg(value_enum)]
    side: SideKind,
    /// The suite whose scenarios are served.
    #[arg(long)]
    suite: String,
    /// The suite's data directory (`<root>/<suite>`, holding `.bench/params.json`).
    #[arg(long)]
    data: PathBuf,
}

/// The message shown when the ringscan side cannot run.
pub(crate) const NOT_AVAILABLE: &str = "the ringscan side could not run";

/// ringscan's side of the bench: a session on the suite's data directory.
#[derive(Debug)]
pub(crate) struct RingscanEngine {
    data_dir: PathBuf,
    session: Option<SqlSession>,
}

impl RingscanEngine {
    fn session(&mut self) -> Result<&mut SqlSession, BenchError> {
        if self.session.is_none() {
            let session = open_sql_session(&self.data_dir, &EngineOptions::default())
                .map_err(|e| BenchError::NotAvailable(format!("{e:#}")))?;
            self.session = Some(session);
        }
        Ok(self.session.as_mut().expect("just opened"))
    }
}

impl Engine for RingscanEngine {
    fn name(&self) -> &str {
        "ringscan"
    }

    fn prepare(&mut self, scenario: &Scenario) -> Result<(), BenchError> {
        // Plans now (plan cache), so that the timed runs measure what a warm host does.
        self.session()?
            .prepare(&scenario.sql)
            .map_err(|e| BenchError::NotAvailable(format!("planning {}: {e}", scenario.name)))?;
        Ok(())
    }

    fn run(&mut self, scenario: &Scenario) -> Result<RunOutcome, BenchError> {
        let outcome = self
            .session()?
            .query(&scenario.sql, scenario.result_cache)
            .map_err(|e| BenchError::NotAvailable(format!("{}: {e:#}", scenario.name)))?;
        Ok(RunOutcome {
            rows: outcome.result.rows as u64,
            bytes_read: outcome.scan.as_ref().map(|s| s.bytes_read),
        })
    }

    fn make_cold(&mut self) -> Result<(), BenchError> {
        // A fresh daemon: its footer cache is empty. The session's caches go with it.
        self.session = None;
        let client = ringscan_ipc::client::DaemonClient::connect(
            ringscan_ipc::client::socket_path(&self.data_dir),
        );
        if let Ok(client) = client {
            let pid = client_pid(client);
            if let Some(pid) = pid {
                wait_gone(pid);
            }
        }
        Ok(())
    }
}

/// Stops the daemon behind `client`, returning its pid.
fn client_pid(mut client: ringscan_ipc::client::DaemonClient) -> Option<u32> {
    let pid = client.status().ok().map(|s| s.pid);
    client.stop().ok()?;
    pid
}

/// Waits (bounded, 5 s) until process `pid` has exited.
fn wait_gone(pid: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

pub(crate) fn run(args: BenchSideArgs) -> anyhow::Result<ExitCode> {
    let suite = SuiteKind::from_name(&args.suite)?;
    let params_file = args.data.join(".bench").join("params.json");
    let params: suites::Params = serde_json::from_str(
        &std::fs::read_to_string(&params_file)
            .with_context(|| format!("cannot read {}", params_file.display()))?,
    )
    .with_context(|| format!("{} is not a parameter file", params_file.display()))?;
    let scenarios = suites::scenarios(suite, &params);
    let mut engine: Box<dyn Engine> = match args.side {
        SideKind::Baseline => Box::new(Baseline::new(&args.data)),
        SideKind::Ringscan => Box::new(RingscanEngine {
            data_dir: args.data.clone(),
            session: None,
        }),
    };
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    side::serve(engine.as_mut(), &scenarios, stdin, stdout).context("bench side I/O")?;
    Ok(ExitCode::SUCCESS)
}
