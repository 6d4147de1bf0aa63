//! Running the `ringscan` binary against a data directory, and stopping the daemon its
//! queries start.

use std::path::Path;
use std::process::{Command, Output};

/// `ringscan <args> --data <data>`.
pub(crate) fn ringscan(args: &[&str], data: &Path) -> Output {
    ringscan_with(args, data, &[])
}

/// [`ringscan`] with variables `env` set (and no stdin).
pub(crate) fn ringscan_with(args: &[&str], data: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args(args)
        .arg("--data")
        .arg(data)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("spawn ringscan")
}

/// The standard output of a command that must succeed (else its standard error).
pub(crate) fn succeeded(args: &[&str], out: &Output) -> String {
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stops the daemon of a data directory when dropped, whatever the test did.
pub(crate) struct DaemonGuard<'a>(pub(crate) &'a Path);

impl Drop for DaemonGuard<'_> {
    fn drop(&mut self) {
        let _ = ringscan(&["daemon", "stop"], self.0);
    }
}

/// Whether file `name` of a table's directory is a data file (`suffix` ".parquet") or a
/// staged part not yet committed (".tmp": a compaction's temporary file, which the
/// daemon's background merge may be writing meanwhile, is not one).
pub(crate) fn is_file_of(name: &str, suffix: &str) -> bool {
    match suffix {
        ".tmp" => name.starts_with(".part-s") && name.ends_with(".tmp"),
        _ => name.ends_with(suffix),
    }
}
