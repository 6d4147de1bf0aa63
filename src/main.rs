//! `ringscan`: the command-line front end of the ringscan Parquet query host.
//!
//! The binary is thin: each subcommand lives in `cmd/<name>.rs`, parses its own flags
//! (clap `Args`), calls into the library crates and returns an exit code. Library errors
//! are typed; only this binary turns them into words (`report_error`).
#![forbid(unsafe_code)]

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: the daemon and the executor allocate and free
/// decode buffers and zstd contexts per column chunk on several threads, and glibc's
/// per-allocation mmap/munmap and arena trimming turned that into page faults and TLB
/// shootdowns (measured: see benches/RESULTS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ringscan: fast, trustworthy Parquet queries on one machine.
#[derive(Debug, Parser)]
#[command(name = "ringscan", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the demo on the default data directory (creates the dataset if missing).
    Demo(cmd::demo::DemoArgs),
    /// Run a SQL query over a table or files of the data directory.
    Query(cmd::query::QueryArgs),
    /// Serve SQL to PostgreSQL clients (psql, psycopg, JDBC) over the wire protocol.
    Serve(cmd::serve::ServeArgs),
    /// Write a deterministic synthetic Parquet dataset (ohlcv, contacts, wide).
    Generate(cmd::generate::GenerateArgs),
    /// Write CSV, text, JSON-lines or Parquet files into a table (made by CREATE TABLE).
    Ingest(cmd::ingest::IngestArgs),
    /// Show recorded runs (counters, wall time, rows/s) and compare two of them.
    Runs(cmd::runs::RunsArgs),
    /// Run a benchmark suite.
    Bench(cmd::bench::BenchArgs),
    /// The IO daemon of a data directory: run, start, status, stop.
    Daemon(cmd::daemon::DaemonArgs),
    /// Internal: the peer process of cross-process benchmarks and tests.
    #[command(name = "__peer", hide = true)]
    Peer(cmd::bench::PeerArgs),
    /// Internal: one side (baseline or ringscan) of `ringscan bench`, driven over stdin.
    #[command(name = "__bench-side", hide = true)]
    BenchSide(cmd::bench_side::BenchSideArgs),
    /// Panics on a worker thread (tests of the panic report).
    #[command(name = "__panic", hide = true)]
    Panic,
}

/// Exit status after an internal error (a panic): `EX_SOFTWARE` of sysexits.h.
const EXIT_INTERNAL_ERROR: u8 = 70;

fn main() -> ExitCode {
    install_panic_report();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with exit 0, usage errors with exit 2.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // A panic anywhere (a bug, or a file or query that reaches one in a dependency) is
    // one report from the hook and exit status 70, like the daemon's scans, which
    // report theirs as the scan's error.
    let result = std::panic::catch_unwind(move || match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Query(args) => cmd::query::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Generate(args) => cmd::generate::run(args),
        Command::Ingest(args) => cmd::ingest::run(args),
        Command::Runs(args) => cmd::runs::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Daemon(args) => cmd::daemon::run(args),
        Command::Peer(args) => cmd::bench::peer(args),
        Command::BenchSide(args) => cmd::bench_side::run(args),
        Command::Panic => panic_on_a_worker(),
    });
    match result {
        Ok(Ok(code)) => code,
        Ok(Err(err)) => report_error(&err),
        Err(_) => ExitCode::from(EXIT_INTERNAL_ERROR),
    }
}

/// Replaces Rust's panic message with one line that says what happened and that it is
/// a bug (the backtrace follows with `RUST_BACKTRACE=1`).
fn install_panic_report() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_owned());
        let thread = std::thread::current();
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "ringscan: internal error: thread '{}' panicked{location}: {message}\n  this is a \
             bug in ringscan; please report it with the command that hit it",
            thread.name().unwrap_or("unnamed")
        );
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            eprintln!("{}", std::backtrace::Backtrace::force_capture());
        }
    }));
}

/// `ringscan __panic`: a panic on another thread, resumed on the main one (how a
/// query's worker panic reaches the CLI).
fn panic_on_a_worker() -> anyhow::Result<ExitCode> {
    let worker = std::thread::Builder::new()
        .name("worker".into())
        .spawn(|| -> ExitCode { panic!("deliberate panic for the test of the panic report") })?;
    match worker.join() {
        Ok(code) => Ok(code),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Prints an error and its causes on one or two lines and picks the exit code.
///
/// A broken pipe (`ringscan runs | head`) is not an error worth a message.
fn report_error(err: &anyhow::Error) -> ExitCode {
    for cause in err.chain() {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::BrokenPipe {
                return ExitCode::SUCCESS;
            }
        }
    }
    let mut message = format!("ringscan: error: {err}");
    let causes = ringscan_ipc::causes(err.as_ref());
    if !causes.is_empty() {
        message.push_str("\n  caused by: ");
        message.push_str(&causes.join(": "));
    }
    eprintln!("{message}");
    ExitCode::from(1)
}
