//! `ringscan daemon run|start|status|stop`: the IO daemon of a data directory.
//!
//! `run` serves in the foreground; `start` spawns `ringscan daemon run` detached (its
//! own process group, stdin from /dev/null, stdout and stderr appended to
//! `<data>/.ringscan/io.log`) and waits until it answers; `status` and `stop` talk to
//! the running one over its socket.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ringscan_io_daemon::scan::IoMode;
use ringscan_io_daemon::server::{self, create_state_dir, log_path, parse_duration, DaemonConfig};
use ringscan_ipc::client::{ensure_daemon, socket_path, DaemonClient};

use super::common::{DataRoot, RangeCacheArgs};

/// How long `start` waits for the new daemon to answer, and `stop` for it to exit.
const WAIT: Duration = Duration::from_secs(10);

/// Flags of `ringscan daemon`.
#[derive(Debug, clap::Args)]
pub(crate) struct DaemonArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Serve in the foreground until stopped or idle.
    Run(RunOpts),
    /// Start a daemon in the background (if none runs) and wait until it answers.
    Start(Opts),
    /// Show the running daemon's pid, uptime, scans and cache (exit 1 if none).
    Status(Opts),
    /// Stop the running daemon and wait for it to exit (exit 1 if none).
    Stop(Opts),
}

#[derive(Debug, clap::Args)]
struct Opts {
    /// Data directory, or an object-storage prefix `s3://bucket/prefix` (read-only;
    /// endpoint and credentials from the AWS_* variables and the AWS profile;
    /// `gs://bucket/prefix` and `az://container/prefix` from GOOGLE_* and AZURE_*)
    /// [default: $RINGSCAN_DATA, else ./ringscan-data].
    #[arg(long, value_name = "DIR|URL")]
    data: Option<PathBuf>,
    /// For an s3:// root: the local directory for the daemon's socket, log and run
    /// records [default: one under the user's cache directory named after the URL].
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Exit after this long without connections (e.g. 30s, 10m, 1h).
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
    idle_timeout: Duration,
    #[command(flatten)]
    range_cache: RangeCacheArgs,
}

#[derive(Debug, clap::Args)]
struct RunOpts {
    #[command(flatten)]
    opts: Opts,
    /// How scans read local files: positional reads or memory maps (safe when a file is
    /// truncated while mapped).
    #[arg(long, value_name = "MODE", default_value_t = IoMode::default(), value_parser = parse_io_mode)]
    io: IoMode,
    /// Memory the daemon may hold: footer and column caches, rings and every running
    /// scan's read-ahead together [default: half of the machine's memory]. Scans beyond
    /// what it allows at once are told "busy".
    #[arg(long, value_name = "MIB")]
    memory_budget_mib: Option<u64>,
    /// Memory for decoded column chunks of hot files, kept between scans (0: off)
    /// [default: 256 MiB, less when the memory budget is small].
    #[arg(long, value_name = "BYTES")]
    column_cache_bytes: Option<usize>,
    /// Close a connection that waited this long for its client (clients reconnect).
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = parse_duration)]
    session_idle_timeout: Duration,
    /// Shared memory all scans' rings may take at once [default: half of /dev/shm]; a
    /// scan that asks for more than is left gets a smaller ring, or "busy" below 1 MiB.
    #[arg(long, value_name = "MIB")]
    ring_budget_mib: Option<u64>,
    /// The largest ring one scan gets.
    #[arg(long, value_name = "MIB", default_value_t = DaemonConfig::DEFAULT_MAX_RING_BYTES >> 20)]
    max_ring_mib: u64,
    /// A written table's rows in memory go to a Parquet file once they take this much.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    flush_mib: u64,
    /// ...or once the oldest of them is this old.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = parse_duration)]
    flush_age: Duration,
    /// For an s3:// root: how long a table's listing is reused before the bucket is
    /// listed again (objects added or rewritten are seen that much later; 0: every
    /// request lists).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_duration)]
    list_ttl: Duration,
    /// Started by a client in the background: leave its session.
    #[arg(long, hide = true)]
    detached: bool,
}

fn parse_io_mode(s: &str) -> Result<IoMode, String> {
    s.parse()
}

pub(crate) fn run(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Run(opts) => run_foreground(&opts),
        Action::Start(opts) => start(&opts),
        Action::Status(opts) => status(&opts),
        Action::Stop(opts) => stop(&opts),
    }
}

impl Opts {
    fn root(&self) -> anyhow::Result<DataRoot> {
        DataRoot::new(self.data.as_deref(), self.state.as_deref())?
            .with_range_cache(&self.range_cache)
    }
}

fn run_foreground(run: &RunOpts) -> anyhow::Result<ExitCode> {
    let opts = &run.opts;
    let root = opts.root()?;
    let data = root.root.clone();
    let mut config = DaemonConfig::new(&data);
    config.state_dir = root.is_remote().then(|| root.local.clone());
    config.idle_timeout = opts.idle_timeout;
    config.io_mode = run.io;
    config.column_cache_bytes = run.column_cache_bytes;
    config.memory_budget_bytes = run.memory_budget_mib.map(|m| m.saturating_mul(1 << 20));
    config.session_idle_timeout = run.session_idle_timeout;
    config.ring_budget_bytes = run.ring_budget_mib.map(|m| m.saturating_mul(1 << 20));
    config.max_ring_bytes = run.max_ring_mib.saturating_mul(1 << 20);
    config.detach = run.detached;
    config.list_ttl = run.list_ttl;
    config.range_cache = root.range_cache.clone();
    config.ingest.flush_bytes = run.flush_mib.saturating_mul(1 << 20);
    config.ingest.flush_age = run.flush_age;
    server::run(config).with_context(|| format!("IO daemon for {}", data.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// Spawns `exe daemon run --data <root> [--state <local>] [--cache-dir <dir>
/// --cache-dir-bytes <n>] --idle-timeout <idle_timeout> --detached`:
/// the first thing it does is to leave our session for its own (no controlling
/// terminal: a Ctrl-C or hang-up of the caller's terminal does not reach it; not a
/// process group of its own first, whose leader could not), stdin from /dev/null,
/// stdout and stderr appended to `<local>/.ringscan/io.log`. A thread reaps it if it
/// exits while we live (a long-lived caller would otherwise keep a zombie that
/// `kill(pid, 0)` reports alive); once we exit, init does. Returns its pid once spawned;
/// the caller waits for it to answer (see `ensure_daemon`). `ringscan query` passes
/// this to `ringscan_ipc::client::ensure_daemon`.
pub(crate) fn spawn_detached(
    exe: &Path,
    data: &DataRoot,
    idle_timeout: Duration,
) -> std::io::Result<u32> {
    use std::os::unix::fs::OpenOptionsExt;
    create_state_dir(&data.local)?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log_path(&data.local))?;
    let mut command = Command::new(exe);
    command
        .arg("daemon")
        .arg("run")
        .arg("--data")
        .arg(&data.root);
    if data.is_remote() {
        command.arg("--state").arg(&data.local);
    }
    if let Some((dir, max_bytes)) = &data.range_cache {
        command
            .arg("--cache-dir")
            .arg(dir)
            .arg("--cache-dir-bytes")
            .arg(max_bytes.to_string());
    }
    let child = command
        .arg("--idle-timeout")
        .arg(format!("{}ms", idle_timeout.as_millis()))
        .arg("--detached")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let pid = child.id();
    let mut child = child;
    // If the thread cannot start, the child is dropped unwaited as before: init reaps it
    // after we exit.
    let _ = std::thread::Builder::new()
        .name("daemon-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        });
    Ok(pid)
}

fn start(opts: &Opts) -> anyhow::Result<ExitCode> {
    let root = opts.root()?;
    root.check()?;
    let data = root.root.clone();
    let exe = std::env::current_exe().context("cannot find the ringscan executable")?;
    let spawned = std::cell::Cell::new(false);
    let spawn = || {
        spawned.set(true);
        spawn_detached(&exe, &root, opts.idle_timeout).map(drop)
    };
    let mut client = ensure_daemon(&root.local, &spawn, WAIT).with_context(|| {
        format!(
            "the IO daemon did not start (see {})",
            log_path(&root.local).display()
        )
    })?;
    let status = client
        .status()
        .context("asking the daemon for its status")?;
    println!(
        "IO daemon {} (pid {}) for {}",
        if spawned.get() {
            "started"
        } else {
            "already running"
        },
        status.pid,
        data.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn connect(data: &Path) -> Option<DaemonClient> {
    let mut client = DaemonClient::connect(socket_path(data))
        .ok()?
        .with_timeout(Duration::from_secs(5));
    client.ping().ok()?;
    Some(client)
}

fn status(opts: &Opts) -> anyhow::Result<ExitCode> {
    let root = opts.root()?;
    let data = root.root.clone();
    let Some(mut client) = connect(&root.local) else {
        println!("no daemon running for {}", data.display());
        return Ok(ExitCode::FAILURE);
    };
    let s = client
        .status()
        .context("asking the daemon for its status")?;
    let cache = &s.metadata_cache;
    println!("pid            {}", s.pid);
    println!("data           {}", s.data_dir.display());
    println!("uptime         {:.1} s", s.uptime_ms as f64 / 1000.0);
    println!("idle timeout   {:.1} s", s.idle_timeout_ms as f64 / 1000.0);
    println!(
        "scans          {} active, {} served ({} on their session's ring of the scan before)",
        s.scans_active, s.scans_served, s.rings_reused
    );
    println!(
        "footer cache   {} entries, {} of {} bytes, {} hits, {} misses, {} evictions",
        cache.entries, cache.bytes, cache.capacity_bytes, cache.hits, cache.misses, cache.evictions
    );
    let w = &s.ingest;
    if w.refused.is_empty() {
        println!(
            "ingest         {} rows ({} bytes) in memory; log: {} commits, {} durable, {} fdatasyncs \
             ({} groups, at most {} commits in one, {:.1} ms syncing), {} bytes",
            w.memtable_rows,
            w.memtable_bytes,
            w.commits,
            w.records,
            w.syncs,
            w.groups,
            w.group_records_max,
            w.sync_us_total as f64 / 1000.0,
            w.bytes
        );
    } else {
        println!("ingest         writes refused: {}", w.refused);
    }
    let columns = &s.column_cache;
    println!(
        "column cache   {} chunks, {} of {} bytes, {} hits, {} misses, {} admitted, {} evicted, {} invalidated",
        columns.entries,
        columns.bytes,
        columns.capacity_bytes,
        columns.hits,
        columns.misses,
        columns.admitted,
        columns.evictions,
        columns.invalidated
    );
    Ok(ExitCode::SUCCESS)
}

fn stop(opts: &Opts) -> anyhow::Result<ExitCode> {
    let root = opts.root()?;
    let Some(mut client) = connect(&root.local) else {
        println!("no daemon running for {}", root.root.display());
        return Ok(ExitCode::FAILURE);
    };
    let data = root.local.clone();
    let pid = client.status().map(|s| s.pid).ok();
    client.stop().context("asking the daemon to stop")?;
    let start = Instant::now();
    while socket_path(&data).exists() && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    anyhow::ensure!(
        !socket_path(&data).exists(),
        "the IO daemon did not exit within {} s",
        WAIT.as_secs()
    );
    // The socket goes just before the lock: wait for the lock too, so that a `start`
    // right after this finds the directory free.
    let lock = server::lock_path(&data);
    while start.elapsed() < WAIT {
        let free = std::fs::File::open(&lock)
            .map(|f| f.try_lock().is_ok())
            .unwrap_or(true);
        if free {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match pid {
        Some(pid) => println!("stopped IO daemon pid {pid} for {}", root.root.display()),
        None => println!("stopped IO daemon for {}", root.root.display()),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `stat` of process `pid`: (state, session id), `None` once it is gone.
    fn proc_stat(pid: u32) -> Option<(char, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid pgrp session ...": the name may hold spaces.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
        Some((fields[0].chars().next()?, fields[3].parse().ok()?))
    }

    /// Issue 17 (12): a daemon spawned in the background leaves the caller's session,
    /// and one that exits while the caller lives is reaped, not left a zombie that
    /// `kill(pid, 0)` reports alive. The "daemon" here is a script that records its
    /// session and exits.
    #[test]
    fn a_spawned_daemon_gets_its_own_session_and_is_reaped() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fake-ringscan");
        let session = dir.path().join("session");
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\nsid=$(cut -d' ' -f6 /proc/$$/stat)\necho \"$$ $sid\" > {}\n",
                session.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let pid = spawn_detached(&exe, &DataRoot::local(&data), Duration::from_secs(1)).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while proc_stat(pid).is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "pid {pid} still there: {:?} (a zombie is 'Z')",
                proc_stat(pid)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The script ran (it is a shell, not the daemon, so it did not call setsid):
        // what it recorded shows the spawner's part, a fresh process in our session.
        let recorded = std::fs::read_to_string(&session).unwrap();
        assert!(recorded.starts_with(&format!("{pid} ")), "{recorded}");
    }
}
