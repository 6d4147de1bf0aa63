//! Helpers shared by subcommands: the data directory, number parsing and formatting.

use std::path::{Path, PathBuf};

use ringscan_profiling::{append_record, RunRecorder};
use serde_json::{Map, Value};

/// Starts the run record of this process: call before spawning any thread, so that the
/// inherited counters cover every thread of the run.
///
/// `args` are the command's own arguments (the subcommand's name is `command`).
pub(crate) fn start_recording(command: &str, args: Vec<String>) -> RunRecorder {
    let mut recorder = RunRecorder::start(command, args);
    if let Some(revision) = option_env!("RINGSCAN_GIT_REVISION") {
        recorder.set_git_revision(revision);
    }
    recorder
}

/// Finishes the run record, appends it to `runs_file`, prints its one-line counter
/// summary unless `quiet`, and returns it. A record that cannot be written costs a
/// warning, never the command's own result.
pub(crate) fn finish_recording(
    recorder: RunRecorder,
    figures: Map<String, Value>,
    runs_file: &Path,
    quiet: bool,
) -> ringscan_profiling::RunRecord {
    let record = recorder.finish(figures);
    if let Err(e) = append_record(runs_file, &record) {
        eprintln!("ringscan: warning: run record not saved: {e}");
    }
    if !quiet {
        eprintln!("{}", record.summary_line());
    }
    record
}

/// The data directory: `--data`, else `$RINGSCAN_DATA`, else `./ringscan-data`.
pub(crate) fn data_dir(flag: Option<&Path>) -> PathBuf {
    match flag {
        Some(dir) => dir.to_path_buf(),
        None => std::env::var_os("RINGSCAN_DATA")
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from("ringscan-data"), PathBuf::from),
    }
}

/// A command's data root and the local directory that stands for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataRoot {
    /// What the daemon serves: a local directory, or an object-storage prefix
    /// (`s3://bucket/prefix`).
    pub(crate) root: PathBuf,
    /// The local directory whose `.ringscan/` holds the daemon's socket, lock and log
    /// and the run records: the data directory itself, or for an object-storage root
    /// its state directory (`--state`, else one under the user's cache directory
    /// named after the URL).
    pub(crate) local: PathBuf,
    /// For an object-storage root: the on-disk cache of fetched ranges its daemon
    /// reads through (`--cache-dir`, absolute) and its bound in bytes.
    pub(crate) range_cache: Option<(PathBuf, u64)>,
}

/// The on-disk cache of fetched byte ranges, for an object-storage root.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RangeCacheArgs {
    /// For an s3:// root: keep the byte ranges fetched from the store in this directory
    /// (keyed by object, ETag and size; checked on every read), so that a restarted
    /// daemon or another host sharing the directory does not fetch them again. Taken
    /// when this command starts the root's daemon.
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// The most bytes --cache-dir holds; the least recently used ranges go first
    /// (e.g. 500M, 20G).
    #[arg(long, value_name = "BYTES", default_value = "4G", value_parser = parse_count)]
    pub(crate) cache_dir_bytes: u64,
}

impl DataRoot {
    /// `--data` (else `$RINGSCAN_DATA`, else `./ringscan-data`) and `--state`.
    pub(crate) fn new(data: Option<&Path>, state: Option<&Path>) -> anyhow::Result<Self> {
        let root = data_dir(data);
        if !ringscan_io_daemon::storage::is_object_url(&root) {
            anyhow::ensure!(
                state.is_none(),
                "--state is for object-storage roots (s3://...); a local data directory \
                 keeps its state in {}",
                root.join(".ringscan").display()
            );
            return Ok(Self {
                local: root.clone(),
                root,
                range_cache: None,
            });
        }
        let url = ringscan_io_daemon::storage::object::normalize_url(&root.to_string_lossy())?;
        let local = match state {
            Some(dir) => dir.to_path_buf(),
            None => default_state_dir(&url)?,
        };
        Ok(Self {
            root: PathBuf::from(url),
            local,
            range_cache: None,
        })
    }

    /// This root with the range cache of `args` (an object-storage root only).
    pub(crate) fn with_range_cache(mut self, args: &RangeCacheArgs) -> anyhow::Result<Self> {
        let Some(dir) = &args.cache_dir else {
            return Ok(self);
        };
        anyhow::ensure!(
            self.is_remote(),
            "--cache-dir is for object-storage roots (s3://...): local files are read in place"
        );
        anyhow::ensure!(
            args.cache_dir_bytes > 0,
            "--cache-dir-bytes must be more than 0"
        );
        let dir = std::path::absolute(dir)
            .map_err(|e| anyhow::anyhow!("--cache-dir {}: {e}", dir.display()))?;
        self.range_cache = Some((dir, args.cache_dir_bytes));
        Ok(self)
    }

    /// A local data directory.
    pub(crate) fn local(dir: &Path) -> Self {
        Self {
            root: dir.to_path_buf(),
            local: dir.to_path_buf(),
            range_cache: None,
        }
    }

    /// Whether the root is in object storage.
    pub(crate) fn is_remote(&self) -> bool {
        self.root != self.local
    }

    /// Fails for a local data directory that does not exist; makes a remote root's
    /// state directory.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.is_remote() {
            std::fs::create_dir_all(&self.local).map_err(|e| {
                anyhow::anyhow!(
                    "cannot create the state directory {} of {}: {e}",
                    self.local.display(),
                    self.root.display()
                )
            })?;
            return Ok(());
        }
        anyhow::ensure!(
            self.root.is_dir(),
            "data directory {} does not exist (generate data with `ringscan generate`, or pass --data)",
            self.root.display()
        );
        Ok(())
    }
}

/// `$XDG_CACHE_HOME/ringscan/<url as a name>` (else under `~/.cache`): the URL's
/// characters that are not letters or digits become `_`, and a digest of the URL tells
/// apart the URLs that would then look alike.
fn default_state_dir(url: &str) -> anyhow::Result<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{url}: no cache directory (set HOME or XDG_CACHE_HOME, or pass --state DIR)"
            )
        })?;
    let name: String = url
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let digest = url.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Ok(cache
        .join("ringscan")
        .join(format!("{name}-{:08x}", digest as u32)))
}

/// Parses a count: `10000000`, `10_000_000`, `10,000,000`, `10M`, `1.5k`, `1e7`.
pub(crate) fn parse_count(text: &str) -> Result<u64, String> {
    let cleaned: String = text
        .trim()
        .chars()
        .filter(|c| *c != '_' && *c != ',')
        .collect();
    let (number, scale) = match cleaned.chars().last() {
        Some('k' | 'K') => (&cleaned[..cleaned.len() - 1], 1e3),
        Some('m' | 'M') => (&cleaned[..cleaned.len() - 1], 1e6),
        Some('g' | 'G' | 'b' | 'B') => (&cleaned[..cleaned.len() - 1], 1e9),
        _ => (cleaned.as_str(), 1.0),
    };
    if let Ok(n) = number.parse::<u64>() {
        return n
            .checked_mul(scale as u64)
            .ok_or_else(|| format!("{text:?} is too large"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a count (try 1000000, 1_000_000, 1M or 1e6)"))?;
    let value = value * scale;
    if !value.is_finite() || value < 0.0 || value.fract() != 0.0 || value > u64::MAX as f64 {
        return Err(format!("{text:?} is not a whole, non-negative count"));
    }
    Ok(value as u64)
}

/// `1234567` -> `1,234,567`.
pub(crate) fn human_count(n: u64) -> String {
    ringscan_profiling::thousands(n)
}

/// `1536` -> `1.5 KiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_in_every_spelling() {
        for text in [
            "10000000",
            "10_000_000",
            "10,000,000",
            "10M",
            "10m",
            "1e7",
            "0.01G",
        ] {
            assert_eq!(parse_count(text), Ok(10_000_000), "{text}");
        }
        assert_eq!(parse_count("1.5k"), Ok(1_500));
        assert!(parse_count("-5").is_err());
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("lots").is_err());
        assert!(parse_count("1e30").is_err());
        assert!(parse_count("99999999999999999999").is_err());
    }

    #[test]
    fn object_storage_roots_get_a_local_state_directory() {
        let state = Path::new("/tmp/state");
        let root = DataRoot::new(Some(Path::new("s3://bucket/a/b/")), Some(state)).unwrap();
        assert_eq!(root.root, Path::new("s3://bucket/a/b"));
        assert_eq!(root.local, state);
        assert!(root.is_remote());
        let a = default_state_dir("s3://bucket/a_b").unwrap();
        let b = default_state_dir("s3://bucket/a/b").unwrap();
        assert_ne!(a, b);
        assert!(
            a.to_string_lossy().contains("s3___bucket_a_b-"),
            "{}",
            a.display()
        );
        let local = DataRoot::new(Some(Path::new("data")), None).unwrap();
        assert_eq!(local, DataRoot::local(Path::new("data")));
        assert!(!local.is_remote());
        assert!(DataRoot::new(Some(Path::new("data")), Some(state)).is_err());
        assert!(DataRoot::new(Some(Path::new("s3://Bad/x")), None).is_err());
    }

    #[test]
    fn numbers_format_for_people() {
        assert_eq!(human_count(0), "0");
        assert_eq!(human_count(1_234_567), "1,234,567");
        assert_eq!(human_count(100), "100");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
