//! The daemon process: one per data directory, serving scans over the control socket
//! `<data>/.ringscan/io.sock` and streaming their batches through shared-memory rings.
//!
//! - **One daemon per data directory**: [`run`] holds an exclusive lock on
//!   `<data>/.ringscan/io.lock` for its whole life (a second daemon gets
//!   [`DaemonError::AlreadyRunning`]); only with the lock held does it remove a stale
//!   socket and bind a new one.
//! - **A thread per connection**, bounded: when [`DaemonConfig::max_connections`] are
//!   open, a new one takes the place of the one that has waited longest for its
//!   client, and gets a "busy" error only when none is waiting; a connection idle for
//!   [`DaemonConfig::session_idle_timeout`] is closed anyway. More than
//!   `max_concurrent_scans` scans get a "busy" error.
//! - **One memory budget** ([`DaemonConfig::memory_budget_bytes`]) over the footer and
//!   column caches, the rings and every running scan's read-ahead (see `budget`).
//! - **Every failure stays in its connection**: malformed or hostile frames, invalid
//!   requests, unreadable files and panics inside a scan end in an
//!   [`Error`](ringscan_ipc::msg::DaemonMessage::Error) reply and a closed connection;
//!   the daemon goes on serving.
//! - **Idle exit** after [`DaemonConfig::idle_timeout`] without connections; on exit
//!   (idle or [`Stop`](ringscan_ipc::msg::ClientMessage::Stop)) running scans are
//!   cancelled, the socket is removed and the lock released.
//! - **Logs** go to `<data>/.ringscan/io.log`, one line per scan, never to the
//!   spawner's stdout or stderr.
//! - **An object-storage root** (`s3://bucket/prefix`, [`DaemonConfig::data_dir`]) is
//!   served read-only; its socket, lock and log live under the local
//!   [`DaemonConfig::state_dir`] (`<state>/.ringscan/`) instead, and writes are refused.

mod budget;
mod conn;
mod log;
mod pool;
mod reply;
mod report;
mod rings;
mod scan;

use std::collections::HashMap;
use std::fs::{self, File, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::net::Shutdown;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::scan::{IoMode, MetadataCache};

pub use self::log::{Log, MAX_LOG_BYTES};

/// How often the exit path checks whether its connections have closed.
const EXIT_POLL: Duration = Duration::from_millis(20);
/// How often the watchdog checks for the idle timeout and a `Stop`.
const WATCHDOG_POLL: Duration = Duration::from_millis(50);
/// How often the files kept open between scans are checked for deletion.
const OPEN_FILES_SWEEP: Duration = Duration::from_secs(2);
/// How long exit waits for connection threads to wind down.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// The data directory it serves: a local directory, or an object-storage prefix
    /// (`s3://bucket/prefix`, read-only).
    pub data_dir: PathBuf,
    /// For an object-storage root: the local directory standing in for it, whose
    /// `.ringscan/` holds the socket, lock and log (required then; ignored for a local
    /// root, whose state lives in `<data>/.ringscan/`).
    pub state_dir: Option<PathBuf>,
    /// For an object-storage root: how long a table's listing is served again before
    /// the bucket is listed anew (an object added or rewritten is seen that much later).
    pub list_ttl: Duration,
    /// For an object-storage root: a directory for an on-disk cache of the byte ranges
    /// fetched, and its bound in bytes (`--cache-dir`, `--cache-bytes`); `None`: none.
    /// Several daemons may share one directory.
    pub range_cache: Option<(PathBuf, u64)>,
    /// Exit after this long with no connection open.
    pub idle_timeout: Duration,
    /// A connection waiting this long for its client's next request (or a session's
    /// next scan) is closed; clients reconnect on their next request. Zero: never.
    pub session_idle_timeout: Duration,
    /// Scans streaming at once; more get a "busy" error.
    pub max_concurrent_scans: usize,
    /// Memory the daemon may hold: caches, rings and the scans' read-ahead together
    /// (`None`: half of the machine's memory).
    pub memory_budget_bytes: Option<u64>,
    /// Budget of the footer cache (`None`: 256 MiB, less when the memory budget is small).
    pub metadata_cache_bytes: Option<usize>,
    /// Budget of the column cache (decoded column chunks of hot files; 0: off; `None`:
    /// 256 MiB, less when the memory budget is small).
    pub column_cache_bytes: Option<usize>,
    /// How scans read local files ([`IoMode::default`] unless told).
    pub io_mode: IoMode,
    /// Shared memory all scans' rings may take at once (`None`: half of the size of
    /// `/dev/shm`). A scan asking for a ring that does not fit gets a smaller one.
    pub ring_budget_bytes: Option<u64>,
    /// The largest ring a scan gets, whatever it asks for.
    pub max_ring_bytes: u64,
    /// Started in the background by a client: leave the caller's session (`setsid`),
    /// so that its terminal closing sends nothing here.
    pub detach: bool,
    /// When written tables' rows in memory go to Parquet.
    pub ingest: crate::ingest::store::IngestConfig,
}

impl DaemonConfig {
    /// [`Self::session_idle_timeout`] as a limit: `None` (no limit) for zero, for a
    /// connection between requests and a session between scans alike.
    pub(crate) fn session_idle_limit(&self) -> Option<Duration> {
        let idle = self.session_idle_timeout;
        (!idle.is_zero()).then_some(idle)
    }

    /// Default idle timeout (10 minutes).
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
    /// Default idle timeout of one connection (5 minutes).
    pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default scan limit.
    pub const DEFAULT_MAX_CONCURRENT_SCANS: usize = 16;
    /// Default footer cache budget (256 MiB).
    pub const DEFAULT_METADATA_CACHE_BYTES: usize = budget::DEFAULT_METADATA_CACHE_BYTES as usize;
    /// Default column cache budget (256 MiB).
    pub const DEFAULT_COLUMN_CACHE_BYTES: usize = budget::DEFAULT_COLUMN_CACHE_BYTES as usize;
    /// Default largest ring (1 GiB).
    pub const DEFAULT_MAX_RING_BYTES: u64 = 1 << 30;

    /// Defaults for `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            state_dir: None,
            list_ttl: crate::table::DEFAULT_OBJECT_LISTING_TTL,
            range_cache: None,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            session_idle_timeout: Self::DEFAULT_SESSION_IDLE_TIMEOUT,
            max_concurrent_scans: Self::DEFAULT_MAX_CONCURRENT_SCANS,
            memory_budget_bytes: None,
            metadata_cache_bytes: None,
            column_cache_bytes: None,
            io_mode: IoMode::default(),
            ring_budget_bytes: None,
            max_ring_bytes: Self::DEFAULT_MAX_RING_BYTES,
            detach: false,
            ingest: crate::ingest::store::IngestConfig::default(),
        }
    }

    /// Connections open at once: request connections, scans, and the scan connections
    /// sessions keep between their queries (up to two each, to reuse their rings).
    pub fn max_connections(&self) -> usize {
        self.max_concurrent_scans.saturating_mul(4) + 16
    }
}

/// Set by the SIGTERM/SIGINT handler; the watchdog then stops the daemon as a `Stop`
/// would: no new connections, running scans cut, socket removed, exit status 0.
static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_termination_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    TERMINATED.store(true, Ordering::Release);
}

/// SIGTERM (a service manager, `kill`) and SIGINT (Ctrl-C on `daemon run`) stop the
/// daemon cleanly instead of killing it with its socket left behind.
#[allow(
    unsafe_code,
    reason = "sigaction: installing a handler that only stores to an atomic"
)]
fn stop_on_termination_signals() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `action` is fully initialised (zeroed, then the handler and an empty
        // mask set); the handler is async-signal-safe (one atomic store) and lives for
        // the whole program. A failure leaves the default action, which still ends the
        // process.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_termination_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Makes this process the leader of a new session without a controlling terminal.
#[allow(unsafe_code, reason = "setsid: a libc call without arguments")]
fn new_session() {
    // SAFETY: setsid has no preconditions; it fails (EPERM) only for a process group
    // leader (the spawner does not make it one), and then the process stays where it is.
    unsafe {
        libc::setsid();
    }
}

/// Tells glibc's allocator (used by the C code linked in: zstd) to keep freed memory
/// rather than hand it back to the kernel at once. Parquet makes a zstd compression and
/// decompression context for every column chunk it reads (about 100 KiB each); with
/// glibc's defaults each came from fresh pages (trimmed or unmapped after the last
/// chunk, then faulted in again). 90%-filtered seed-000 query with the column cache off,
/// 3 interleaved rounds of 300: daemon CPU 2.87-3.27 -> 2.63-2.70 ms per query, p50
/// 1.93-2.19 -> 1.75-1.77 ms. Rust's own allocations go to mimalloc, untouched.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(
    unsafe_code,
    reason = "mallopt: a libc call with plain integer arguments"
)]
fn keep_c_heap() {
    // SAFETY: mallopt only sets allocator parameters; any values are accepted (a
    // refused one leaves the default). Called before the daemon starts its threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_c_heap() {}

/// The daemon's state directory `<data>/.ringscan`.
pub fn state_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(".ringscan")
}

/// Creates the state directory of `data_dir` (and what leads to it) private to its
/// owner, 0700, or makes an existing one so: its log holds queries and paths, its
/// socket answers whoever can reach it.
pub fn create_state_dir(data_dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let state = state_dir(data_dir);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&state)?;
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700))?;
    Ok(state)
}

/// The lock file.
pub fn lock_path(data_dir: &Path) -> PathBuf {
    state_dir(data_dir).join("io.lock")
}

/// The log file.
pub fn log_path(data_dir: &Path) -> PathBuf {
    state_dir(data_dir).join("io.log")
}

pub use ringscan_ipc::client::socket_path;

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// The configuration does not hold together.
    #[error("{0}")]
    Config(String),
    /// Another daemon holds the data directory's lock.
    #[error("another IO daemon{} already serves {}", match .pid { Some(p) => format!(" (pid {p})"), None => String::new() }, .data_dir.display())]
    AlreadyRunning {
        /// The data directory.
        data_dir: PathBuf,
        /// The other daemon's pid, as written in the lock file.
        pid: Option<u32>,
    },
    /// A file operation on the daemon's own state failed.
    #[error("{op} {} failed", .path.display())]
    Io {
        /// What.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> DaemonError + 'a {
    move |source| DaemonError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// State shared by the accept loop and the connection threads.
/// Listings and schemas kept between scans ([`crate::table::ResolveCache`]).
const RESOLVE_CACHE_BYTES: usize = 16 << 20;

#[derive(Debug)]

pub(crate) struct Shared {
    pub(crate) config: DaemonConfig,
    /// Canonical data directory.
    pub(crate) data_dir: PathBuf,
    pub(crate) cache: MetadataCache,
    /// Tables resolved by earlier requests, kept while unchanged.
    pub(crate) resolved: crate::table::ResolveCache,
    pub(crate) log: Log,
    pub(crate) started: Instant,
    pub(crate) scans_active: AtomicU64,
    pub(crate) scans_served: AtomicU64,
    /// Scans that wrote into their connection's ring of the scan before.
    pub(crate) rings_reused: AtomicU64,
    pub(crate) stopping: AtomicBool,
    /// The watchdog found the daemon idle past its timeout.
    idle_exit: AtomicBool,
    /// Open connections (a clone of each stream, to shut down on exit or when idle).
    connections: Mutex<HashMap<u64, Connection>>,
    /// Connections closed for waiting idle.
    pub(crate) idle_closed: AtomicU64,
    /// Raised by a scan that found the rings' budget taken: the connections waiting
    /// idle between scans with a ring kept for their next one close (their rings go),
    /// those that went idle before the raise. See `scan::ring_capacity`.
    pub(crate) reclaim_rings: AtomicU64,
    /// Kept rings given up that way.
    pub(crate) rings_reclaimed: AtomicU64,
    /// The scans' read-ahead shares of the memory budget.
    pub(crate) memory: budget::ScanMemory,
    last_activity: Mutex<Instant>,
    /// Scan rings made ahead and dropped behind.
    pub(crate) rings: rings::RingStock,
    /// Shared memory all rings may take at once.
    pub(crate) ring_budget: u64,
    /// Threads for connections and scan control loops.
    pub(crate) threads: pool::ThreadPool,
    /// The executable this daemon runs, as it stood at start ([`ExeIdentity`]).
    exe: Option<ExeIdentity>,
    /// The tables the daemon writes, or why there are none (a log that cannot be
    /// recovered: reads go on, writes are refused with this).
    pub(crate) ingest: Result<crate::ingest::store::Ingest, String>,
}

/// Where the daemon's executable is and which file it was at start (device, inode).
/// A rebuilt or upgraded `ringscan` replaces that file; a daemon that kept serving would
/// answer new clients with old code (seen: measurements taken after a rebuild ran the
/// previous daemon). Such a daemon exits once it has no connection, and the next
/// client starts the new one.
#[derive(Debug)]
struct ExeIdentity {
    path: PathBuf,
    file: (u64, u64),
}

impl ExeIdentity {
    fn now() -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let path = std::env::current_exe().ok()?;
        let meta = fs::metadata(&path).ok()?;
        Some(Self {
            path,
            file: (meta.dev(), meta.ino()),
        })
    }

    /// Whether the file at the path is no longer the one the daemon started from.
    fn replaced(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&self.path).map_or(true, |m| (m.dev(), m.ino()) != self.file)
    }
}

impl Shared {
    /// Claims a scan slot and its share of the memory budget, or says why not: the
    /// running scans are as many as allowed, or hold all of the scans' memory.
    pub(crate) fn try_start_scan(self: &Arc<Self>) -> Result<ScanSlot, String> {
        let max = self.config.max_concurrent_scans as u64;
        if self
            .scans_active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_err()
        {
            return Err(format!(
                "busy: {max} scans are running (the limit); try again later"
            ));
        }
        let Some(memory_bytes) = self.memory.reserve() else {
            self.scans_active.fetch_sub(1, Ordering::AcqRel);
            let plan = self.memory.plan();
            return Err(format!(
                "busy: {} running scans hold the daemon's scan memory ({} MiB of its {} MiB \
                 budget); try again later",
                plan.max_scans,
                (plan.scan_bytes * plan.max_scans) >> 20,
                plan.budget_bytes >> 20
            ));
        };
        Ok(ScanSlot {
            shared: Arc::clone(self),
            memory_bytes,
        })
    }

    fn touch(&self) {
        *self
            .last_activity
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn connection_count(&self) -> usize {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A running scan, counted until dropped.
#[derive(Debug)]
pub(crate) struct ScanSlot {
    shared: Arc<Shared>,
    /// Its share of the memory budget: the most it may read ahead.
    pub(crate) memory_bytes: u64,
}

impl Drop for ScanSlot {
    fn drop(&mut self) {
        self.shared.memory.release(self.memory_bytes);
        self.shared.scans_active.fetch_sub(1, Ordering::AcqRel);
        self.shared.scans_served.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs the daemon for `config.data_dir` until it is stopped or idle.
pub fn run(config: DaemonConfig) -> Result<(), DaemonError> {
    if config.detach {
        new_session();
    }
    keep_c_heap();
    stop_on_termination_signals();
    // `anchor`: the local directory whose `.ringscan/` holds the daemon's state.
    let (data_dir, anchor) = if crate::storage::is_object_url(&config.data_dir) {
        let url = crate::storage::object::normalize_url(&config.data_dir.to_string_lossy())
            .map_err(|e| DaemonError::Config(e.to_string()))?;
        let Some(anchor) = config.state_dir.clone() else {
            return Err(DaemonError::Config(format!(
                "{url}: an object-storage root needs a local state directory (--state DIR)"
            )));
        };
        create_state_dir(&anchor).map_err(io_error("creating", &anchor))?;
        let anchor = fs::canonicalize(&anchor)
            .map_err(io_error("resolving the state directory", &anchor))?;
        (PathBuf::from(url), anchor)
    } else {
        // The data directory must exist: a typo must not create a new one.
        let data_dir = fs::canonicalize(&config.data_dir)
            .map_err(io_error("resolving the data directory", &config.data_dir))?;
        (data_dir.clone(), data_dir)
    };
    let state = state_dir(&anchor);
    create_state_dir(&anchor).map_err(io_error("creating", &state))?;

    let lock_file = lock_path(&anchor);
    let mut lock = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_file)
        .map_err(io_error("opening", &lock_file))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = lock.read_to_string(&mut text);
            return Err(DaemonError::AlreadyRunning {
                data_dir,
                pid: text.trim().parse().ok(),
            });
        }
        Err(TryLockError::Error(e)) => return Err(io_error("locking", &lock_file)(e)),
    }
    if let Some((dir, max_bytes)) = &config.range_cache {
        let cache = crate::storage::RangeCache::open(dir, *max_bytes)
            .map_err(io_error("opening the range cache", dir))?;
        // Before any bucket's client is made: each takes the default when made.
        let _ = crate::storage::object::set_default_range_cache(std::sync::Arc::new(cache));
    }
    // The pid, for the "already running" message of the next one.
    let _ = lock.set_len(0);
    let _ = lock.rewind();
    let _ = writeln!(lock, "{}", std::process::id());

    let socket = socket_path(&anchor);
    match fs::remove_file(&socket) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error("removing the stale socket", &socket)(e)),
    }
    let listener = UnixListener::bind(&socket).map_err(io_error("binding", &socket))?;
    fs::set_permissions(&socket, fs::Permissions::from_mode(0o600))
        .map_err(io_error("restricting", &socket))?;
    // The socket this daemon bound, to tell it from one bound later at the same path.
    let bound = fs::symlink_metadata(&socket)
        .map(|m| (m.dev(), m.ino()))
        .map_err(io_error("reading", &socket))?;
    // Blocking accept: a new connection (every scan opens one) is served at once. A
    // polling accept cost each scan up to one poll interval (20 ms measured) of latency.

    let plan = budget::MemoryPlan::new(&budget::Asked {
        budget_bytes: config
            .memory_budget_bytes
            .unwrap_or_else(budget::default_budget_bytes),
        metadata_cache_bytes: config.metadata_cache_bytes.map(|b| b as u64),
        column_cache_bytes: config.column_cache_bytes.map(|b| b as u64),
        ring_bytes: config.ring_budget_bytes,
        shm_half_bytes: rings::default_budget(),
        max_scans: config.max_concurrent_scans as u64,
    })
    .map_err(DaemonError::Config)?;
    let ring_budget = plan.ring_bytes;
    let log = Log::open(&log_path(&anchor));
    let ingest = if crate::storage::is_object_url(&data_dir) {
        Err(format!(
            "{} is an object-storage root, which ringscan reads only: CREATE TABLE, INSERT \
             and COPY need a local data directory",
            data_dir.display()
        ))
    } else {
        crate::ingest::store::Ingest::open(&data_dir, &state, config.ingest.clone())
    };
    match &ingest {
        Ok((_, recovered)) if recovered.tables > 0 || recovered.torn_tail.is_some() => {
            log.line(&format!(
                "written tables: {}; replayed {} log records ({} rows){}{}",
                recovered.tables,
                recovered.records,
                recovered.rows,
                match recovered.orphans_removed {
                    0 => String::new(),
                    n => format!("; removed {n} files of flushes that did not commit"),
                },
                match &recovered.torn_tail {
                    Some(t) => format!("; cut the log's torn tail: {t}"),
                    None => String::new(),
                }
            ))
        }
        Ok(_) => {}
        Err(e) => log.line(&format!("writes are refused: {e}")),
    }
    let shared = Arc::new(Shared {
        ingest: ingest.map(|(ingest, _)| ingest),
        resolved: crate::table::ResolveCache::new(RESOLVE_CACHE_BYTES)
            .with_object_listing_ttl(config.list_ttl),
        cache: MetadataCache::new(usize::try_from(plan.metadata_cache_bytes).unwrap_or(usize::MAX))
            .with_column_cache(usize::try_from(plan.column_cache_bytes).unwrap_or(usize::MAX)),
        log,
        data_dir: data_dir.clone(),
        config,
        started: Instant::now(),
        scans_active: AtomicU64::new(0),
        scans_served: AtomicU64::new(0),
        rings_reused: AtomicU64::new(0),
        stopping: AtomicBool::new(false),
        idle_exit: AtomicBool::new(false),
        connections: Mutex::new(HashMap::new()),
        idle_closed: AtomicU64::new(0),
        reclaim_rings: AtomicU64::new(0),
        rings_reclaimed: AtomicU64::new(0),
        memory: budget::ScanMemory::new(plan),
        last_activity: Mutex::new(Instant::now()),
        rings: rings::RingStock::start(ring_budget),
        ring_budget,
        threads: pool::ThreadPool::default(),
        exe: ExeIdentity::now(),
    });
    // Rings of a daemon that died before their scans' clients attached (or that it
    // kept ready) would stay in /dev/shm: remove those whose producer is gone.
    let stale = ringscan_ipc::remove_stale_rings(ringscan_ipc::RING_PREFIX);
    if stale > 0 {
        shared
            .log
            .line(&format!("removed {stale} stale rings from /dev/shm"));
    }
    shared.log.line(&format!(
        "daemon started: pid {}, data {}, idle timeout {} ms, memory budget {} MiB \
         (footer cache {} MiB, column cache {} MiB, rings {} MiB, {} scans of {} MiB)",
        std::process::id(),
        data_dir.display(),
        shared.config.idle_timeout.as_millis(),
        plan.budget_bytes >> 20,
        plan.metadata_cache_bytes >> 20,
        plan.column_cache_bytes >> 20,
        plan.ring_bytes >> 20,
        plan.max_scans,
        plan.scan_bytes >> 20,
    ));
    let watchdog = spawn_watchdog(&shared, &socket, bound, listener.try_clone());
    let flusher = spawn_flusher(&shared);
    let reason = match accept_loop(&listener, &shared) {
        _ if TERMINATED.load(Ordering::Acquire) => "SIGTERM or SIGINT",
        reason => reason,
    };
    shared.stopping.store(true, Ordering::Release);
    if let Ok(w) = watchdog {
        let _ = w.join();
    }

    // Wind down: stop accepting, cut every connection (scans see `stopping` and the
    // closed socket), wait a bounded time for their threads.
    drop(listener);
    // Only our own socket: after the data directory was removed and made again,
    // another daemon may serve it from a socket at the same path.
    if socket_is(&socket, bound) {
        let _ = fs::remove_file(&socket);
    }
    for stream in shared
        .connections
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
    {
        let _ = stream.stream.shutdown(Shutdown::Read);
    }
    let deadline = Instant::now() + EXIT_GRACE;
    while shared.connection_count() > 0 && Instant::now() < deadline {
        std::thread::sleep(EXIT_POLL);
    }
    shared.rings.stop();
    if let Ok(f) = flusher {
        let _ = f.join();
    }
    if let Ok(ingest) = &shared.ingest {
        // A clean stop leaves no row only in the log.
        match ingest.close() {
            Ok(0) => {}
            Ok(rows) => shared.log.line(&format!("flushed {rows} rows to Parquet")),
            Err(e) => shared.log.line(&format!(
                "flush at exit failed (the log keeps the rows): {e}"
            )),
        }
    }
    shared.log.line(&format!(
        "daemon exiting ({reason}): {} scans served",
        shared.scans_served.load(Ordering::Relaxed)
    ));
    drop(lock); // unlocks
    Ok(())
}

/// Flushes the written tables' memtables that are due, once a second, until the
/// daemon stops.
fn spawn_flusher(shared: &Arc<Shared>) -> io::Result<std::thread::JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("ringscan-flush".into())
        .spawn(move || {
            let Ok(ingest) = &shared.ingest else {
                return;
            };
            let mut last_error = String::new();
            let stopping = || shared.stopping.load(Ordering::Acquire);
            while !stopping() {
                // In slices: the daemon's exit must not wait a whole poll for this.
                let slept = Instant::now();
                while slept.elapsed() < FLUSH_POLL && !stopping() {
                    std::thread::sleep(EXIT_POLL);
                }
                if stopping() {
                    break;
                }
                match ingest.flush(false).and_then(|rows| {
                    let files = ingest.compact()?;
                    if files > 0 {
                        shared
                            .log
                            .line(&format!("compacted {files} small files into one"));
                    }
                    Ok(rows)
                }) {
                    Ok(0) => {}
                    Ok(rows) => shared.log.line(&format!("flushed {rows} rows to Parquet")),
                    // Once per distinct cause: a full disk fails every second.
                    Err(e) if e != last_error => {
                        shared
                            .log
                            .line(&format!("flush failed (the log keeps the rows): {e}"));
                        last_error = e;
                    }
                    Err(_) => {}
                }
            }
        })
}

/// How often the flusher looks at the memtables.
const FLUSH_POLL: Duration = Duration::from_millis(500);

/// Why the accept loop should end, decided by [`spawn_watchdog`]'s thread or a `Stop`.
fn exit_reason(shared: &Shared) -> Option<&'static str> {
    if shared.stopping.load(Ordering::Acquire) {
        return Some("stopped");
    }
    if TERMINATED.load(Ordering::Acquire) {
        shared.stopping.store(true, Ordering::Release);
        return Some("SIGTERM or SIGINT");
    }
    if shared.connection_count() == 0 && shared.exe.as_ref().is_some_and(ExeIdentity::replaced) {
        return Some("the executable was replaced");
    }
    let idle = shared.connection_count() == 0
        && shared
            .last_activity
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
            >= shared.config.idle_timeout;
    idle.then_some("idle")
}

/// Whether the path `socket` names the socket bound as `bound` (device, inode).
fn socket_is(socket: &Path, bound: (u64, u64)) -> bool {
    fs::symlink_metadata(socket).is_ok_and(|m| (m.dev(), m.ino()) == bound)
}

/// A thread that watches for the idle timeout, a `Stop` and the socket's removal, and
/// then wakes the blocking `accept`: by connecting to the socket, or, where its path
/// is gone (the data directory was removed: no client can reach this daemon again),
/// by shutting the listener down (`listener`, a duplicate of it). Without the latter
/// a daemon whose directory was deleted never left its `accept`: not when idle, not
/// on SIGTERM (test runs left such daemons behind for hours).
fn spawn_watchdog(
    shared: &Arc<Shared>,
    socket: &Path,
    bound: (u64, u64),
    listener: io::Result<UnixListener>,
) -> io::Result<JoinHandle<()>> {
    let mut listener = listener.ok();
    let shared = Arc::clone(shared);
    let socket = socket.to_path_buf();
    std::thread::Builder::new()
        .name("daemon-watchdog".into())
        .spawn(move || {
            let mut swept = Instant::now();
            loop {
                // Files deleted or replaced since a scan kept them open (a compaction's
                // inputs, say) are closed within a sweep, freeing their space.
                if swept.elapsed() >= OPEN_FILES_SWEEP {
                    shared.cache.open_files().sweep();
                    swept = Instant::now();
                }
                let removed = (!socket_is(&socket, bound))
                    .then_some("its socket was removed (the data directory with it?)");
                if let Some(reason) = exit_reason(&shared).or(removed) {
                    if reason != "stopped" && reason != "SIGTERM or SIGINT" {
                        shared.log.line(&format!("exiting: {reason}"));
                        shared.idle_exit.store(true, Ordering::Release);
                    }
                    // Wake the accept; the loop sees the flag.
                    if !socket_is(&socket, bound) || UnixStream::connect(&socket).is_err() {
                        // `shutdown(2)` of the listening socket: through a stream
                        // over the duplicate's descriptor, which std can shut down.
                        if let Some(listener) = listener.take() {
                            let fd = std::os::fd::OwnedFd::from(listener);
                            let _ = UnixStream::from(fd).shutdown(Shutdown::Both);
                        }
                    }
                    return;
                }
                std::thread::sleep(WATCHDOG_POLL);
            }
        })
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) -> &'static str {
    let mut next_id = 0u64;
    loop {
        if shared.stopping.load(Ordering::Acquire) {
            return "stopped";
        }
        if shared.idle_exit.load(Ordering::Acquire) {
            return "idle";
        }
        match listener.accept() {
            Ok((stream, _)) => {
                if shared.stopping.load(Ordering::Acquire)
                    || shared.idle_exit.load(Ordering::Acquire)
                {
                    // The watchdog's wake-up call (or a client racing the exit).
                    continue;
                }
                shared.touch();
                next_id += 1;
                spawn_connection(shared, stream, next_id);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // The watchdog shut the listener down to wake this loop.
            Err(_)
                if shared.stopping.load(Ordering::Acquire)
                    || shared.idle_exit.load(Ordering::Acquire) => {}
            Err(e) => {
                // EMFILE and friends: back off rather than spin, keep serving.
                shared.log.line(&format!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// An open connection: a clone of its stream (to shut it down) and whether it waits.
#[derive(Debug)]
struct Connection {
    stream: UnixStream,
    activity: Arc<Activity>,
}

/// Whether a connection is waiting for its client, and since when: set by the thread
/// serving it, read by the accept loop to choose which to close when full.
#[derive(Debug)]
pub(crate) struct Activity {
    epoch: Instant,
    /// Milliseconds since `epoch` when it began to wait; [`Activity::BUSY`] when not.
    idle_since_ms: AtomicU64,
}

impl Activity {
    const BUSY: u64 = u64::MAX;

    fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            idle_since_ms: AtomicU64::new(Self::BUSY),
        }
    }

    /// The connection now waits for its client (no effect if it already did).
    pub(crate) fn idle(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(Self::BUSY - 1);
        // Relaxed: a hint for choosing whom to close; closing a connection that just
        // got a request costs that client one reconnect, never a wrong answer.
        let _ = self.idle_since_ms.compare_exchange(
            Self::BUSY,
            now,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The connection works for its client.
    pub(crate) fn busy(&self) {
        self.idle_since_ms.store(Self::BUSY, Ordering::Relaxed);
    }

    fn idle_since_ms(&self) -> Option<u64> {
        let t = self.idle_since_ms.load(Ordering::Relaxed);
        (t != Self::BUSY).then_some(t)
    }
}

/// Serves connection `id` on a pooled thread (see [`pool`]).
fn spawn_connection(shared: &Arc<Shared>, stream: UnixStream, id: u64) {
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let activity = Arc::new(Activity::new(shared.started));
    {
        let mut connections = shared
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if connections.len() >= shared.config.max_connections() {
            // Full: the connection that has waited longest for its client makes room
            // (its client reconnects on its next request); busy only when all work.
            let longest_idle = connections
                .iter()
                .filter_map(|(id, c)| c.activity.idle_since_ms().map(|t| (t, *id)))
                .min();
            match longest_idle.and_then(|(_, id)| connections.remove(&id)) {
                Some(idle) => {
                    let _ = idle.stream.shutdown(Shutdown::Both);
                    shared.idle_closed.fetch_add(1, Ordering::Relaxed);
                    shared
                        .log
                        .line("connections full: closed the longest idle one for a new one");
                }
                None => {
                    drop(connections);
                    reply::refuse_busy(stream, "too many connections, all of them busy");
                    return;
                }
            }
        }
        connections.insert(
            id,
            Connection {
                stream: clone,
                activity: Arc::clone(&activity),
            },
        );
    }
    let thread_shared = Arc::clone(shared);
    let spawned = shared.threads.execute("conn", move || {
        let shared = thread_shared;
        // A panic outside a scan (which has its own guard) ends this connection only.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            conn::serve(&shared, stream, &activity)
        }));
        if result.is_err() {
            shared
                .log
                .line("connection handler panicked; connection closed");
        }
        shared
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        shared.touch();
    });
    if let Err(e) = spawned {
        shared
            .log
            .line(&format!("cannot spawn a connection thread: {e}"));
        shared
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }
}

/// Parses a duration: `500ms`, `30s`, `10m`, `2h`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit_ms) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60e3)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600e3)
    } else {
        (t, 1e3)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (examples: 500ms, 30s, 10m, 1h)"))?;
    let ms = value * unit_ms;
    if !(0.0..=1e12).contains(&ms) {
        return Err(format!("duration {text:?} out of range"));
    }
    Ok(Duration::from_micros((ms * 1000.0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
