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
    /// The file and its length (as this process wrote it, from its length when opened).
    file: Mutex<Option<(File, u64)>>,
}

impl Log {
    /// Opens (creates) the log at `path`.
    pub fn open(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            file: Mutex::new(open(path)),
        }
    }

    /// Appends one line, prefixed with the time (seconds since the epoch) and pid, in
    /// one write.
    pub fn line(&self, text: &str) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let line = format!(
            "{now:.3} [{}] {}\n",
            std::process::id(),
            text.replace('\n', " | ")
        );
        let mut guard = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.as_ref().is_some_and(|(_, len)| *len > MAX_LOG_BYTES) {
            let _ = fs::rename(&self.path, self.path.with_extension("log.1"));
            *guard = open(&self.path);
        }
        if let Some((file, len)) = guard.as_mut() {
            if file.write_all(line.as_bytes()).is_ok() {
                *len += line.len() as u64;
            }
        }
    }
}

fn open(path: &Path) -> Option<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    // Private: the log holds queries and paths.
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .ok()?;
    let len = file.metadata().map_or(0, |m| m.len());
    Some((file, len))
}
