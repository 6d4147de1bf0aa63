//! The daemon's log: `<data>/.ringscan/io.log`, one line per event, appended.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// The log is renamed to `io.log.1` when it passes this size.
pub const MAX_LOG_BYTES: u64 = 16 << 20;

/// An append-only log file; a log that cannot be written is silently dropped (logging
/// must never fail a scan), and nothing ever goes to stdout or stderr.
#[derive(Debug)]
pub struct Log {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl Log {
    /// Opens (creates) the log at `path`.
    pub fn open(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            file: Mutex::new(open(path)),
        }
    }

    /// Appends one line, prefixed with the time (seconds since the epoch) and pid.
    pub fn line(&self, text: &str) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let one_line = text.replace('\n', " | ");
        let mut guard = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if guard
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .is_some_and(|m| m.len() > MAX_LOG_BYTES)
        {
            let _ = fs::rename(&self.path, self.path.with_extension("log.1"));
            *guard = open(&self.path);
        }
        if let Some(file) = guard.as_mut() {
            let _ = writeln!(file, "{now:.3} [{}] {one_line}", std::process::id());
        }
    }
}

fn open(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // Private: the log holds queries and paths.
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .ok()
}
