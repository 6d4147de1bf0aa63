//! `ringscan __bench-side <baseline|ringscan> --suite S --data DIR`: one side of
//! `ringscan bench`, in its own process so that its peak RSS is its own. It serves the
//! line protocol of `ringscan_benches::side` on stdin/stdout.
//!
//! The ringscan side is [`RingscanEngine`]: a placeholder until `ringscan query`'s
//! library path lands. To wire it: implement `prepare` (plan the scenario's SQL against
//! `data_dir`, start or connect to the daemon, honour `scenario.result_cache` by turning
//! the result cache off unless it is set), `run` (execute, materialize every result
//! batch, return the row count and the scan's bytes read) and `make_cold` (stop the
//! daemon and drop the metadata and plan caches).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use ringscan_benches::suites::{self, Scenario, SuiteKind};
use ringscan_benches::{side, Baseline, BenchError, Engine, RunOutcome};

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

/// The message every caller shows while the ringscan side is not wired.
pub(crate) const NOT_AVAILABLE: &str = "ringscan query is not available in this build";

/// ringscan's side of the bench: the placeholder the lead replaces.
#[derive(Debug)]
pub(crate) struct RingscanEngine {
    #[expect(dead_code, reason = "used once the executor is wired in")]
    data_dir: PathBuf,
}

impl Engine for RingscanEngine {
    fn name(&self) -> &str {
        "ringscan"
    }

    fn prepare(&mut self, _scenario: &Scenario) -> Result<(), BenchError> {
        Err(BenchError::NotAvailable(format!(
            "{NOT_AVAILABLE} (the bench's ringscan engine is not wired yet)"
        )))
    }

    fn run(&mut self, scenario: &Scenario) -> Result<RunOutcome, BenchError> {
        self.prepare(scenario).map(|()| RunOutcome::default())
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
        }),
    };
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    side::serve(engine.as_mut(), &scenarios, stdin, stdout).context("bench side I/O")?;
    Ok(ExitCode::SUCCESS)
}
