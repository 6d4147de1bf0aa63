//! `ringscan bench <suite>`: benchmark suites, and the hidden peer process they spawn.

use std::process::ExitCode;

/// Flags of `ringscan bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {}

/// Flags of the hidden `ringscan __peer` process.
#[derive(Debug, clap::Args)]
pub(crate) struct PeerArgs {}

pub(crate) fn run(_args: BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ringscan bench` is not built yet")
}

pub(crate) fn peer(_args: PeerArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ringscan __peer` is not built yet")
}
