//! Running the `ringscan` binary against a data directory, and stopping the daemon its
//! queries start.

use std::path::Path;
use std::process::{Command, Output};

/// `ringscan <args> --data <data>`.
pub(crate) fn ringscan(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("spawn ringscan")
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
