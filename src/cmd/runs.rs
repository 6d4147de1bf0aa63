//! `ringscan runs`: recorded runs as a table, and comparisons.

use std::process::ExitCode;

/// Flags of `ringscan runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {}

pub(crate) fn run(_args: RunsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ringscan runs` is not built yet")
}
