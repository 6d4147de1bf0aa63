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
    fn numbers_format_for_people() {
        assert_eq!(human_count(0), "0");
        assert_eq!(human_count(1_234_567), "1,234,567");
        assert_eq!(human_count(100), "100");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
