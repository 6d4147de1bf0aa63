//! `ringscan-io --data DIR|s3://bucket/prefix [--state DIR] [--list-ttl 1s]
//! [--idle-timeout 10m] [--session-idle-timeout 5m] [--max-scans N]
//! [--memory-budget-mib N] [--cache-bytes N] [--column-cache-bytes N] [--io pread|mmap]`: the
//! IO daemon in the foreground. Exits 0 when stopped or idle, 1 on an error (another
//! daemon already serves the directory, say), 2 on a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use ringscan_io_daemon::server::{parse_duration, run, DaemonConfig};

const USAGE: &str =
    "usage: ringscan-io --data DIR|s3://bucket/prefix [--state DIR] [--list-ttl 1s] [--idle-timeout 10m] [--session-idle-timeout 5m] [--max-scans N] \
     [--memory-budget-mib N] [--cache-bytes N] [--column-cache-bytes N] [--io pread|mmap]";

fn parse(args: &[String]) -> Result<DaemonConfig, String> {
    let mut data: Option<PathBuf> = None;
    let mut config = DaemonConfig::new(PathBuf::new());
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (flag, None),
        };
        if matches!(name, "-h" | "--help") {
            return Err(String::new());
        }
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or(format!("{name} needs a value"))?
            }
        };
        match name {
            "--data" => data = Some(PathBuf::from(value)),
            "--state" => config.state_dir = Some(PathBuf::from(value)),
            "--list-ttl" => config.list_ttl = parse_duration(&value)?,
            "--idle-timeout" => config.idle_timeout = parse_duration(&value)?,
            "--session-idle-timeout" => config.session_idle_timeout = parse_duration(&value)?,
            "--memory-budget-mib" => {
                let mib: u64 = value
                    .parse()
                    .map_err(|_| format!("--memory-budget-mib: invalid size {value:?}"))?;
                config.memory_budget_bytes = Some(mib.saturating_mul(1 << 20));
            }
            "--max-scans" => {
                config.max_concurrent_scans = value
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(format!("--max-scans: invalid count {value:?}"))?;
            }
            "--cache-bytes" => {
                config.metadata_cache_bytes = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--cache-bytes: invalid size {value:?}"))?,
                );
            }
            "--column-cache-bytes" => {
                config.column_cache_bytes = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--column-cache-bytes: invalid size {value:?}"))?,
                );
            }
            "--io" => config.io_mode = value.parse().map_err(|e| format!("--io: {e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
        i += 1;
    }
    config.data_dir = data.ok_or("--data DIR is required")?;
    Ok(config)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse(&args) {
        Ok(c) => c,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ringscan-io: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringscan-io: {}", ringscan_ipc::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
