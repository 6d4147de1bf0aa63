//! One client connection: its SQL session, its session parameters, and what runs a
//! statement for either protocol (simple or extended).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use pgwire::api::portal::Format;
use pgwire::api::results::{Response, Tag};
use pgwire::api::ConnectionManager;
use pgwire::error::ErrorInfo;
use ringscan_executor::engine::{
    BulkInsert, EngineError, EngineOptions, Handing, Interrupt, Param, SqlSession,
};
use ringscan_executor::QueryOutcome;

use crate::rewrite::{rewrite, Rewritten};
use crate::rows;
use crate::settings::{Refused, Settings};
use crate::statement::Class;

/// Starts the data directory's IO daemon when no daemon answers.
pub type Spawn = Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

/// What every connection of one host shares.
pub(crate) struct Shared {
    /// The accepting runtime: statement timers run there, not on the connection's own
    /// runtime, whose thread is busy with the statement.
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) data: PathBuf,
    pub(crate) engine: EngineOptions,
    pub(crate) spawn: Spawn,
    /// Cancel requests find their connection here.
    pub(crate) manager: Arc<ConnectionManager>,
    /// Connections accepted and not yet closed.
    pub(crate) open: AtomicUsize,
    /// Past this many, a new connection is refused with SQLSTATE 53300.
    pub(crate) max_connections: usize,
    /// The statements running now, by number: what a shutdown waits for, then stops.
    pub(crate) running: Mutex<std::collections::HashMap<u64, RunningStatement>>,
    pub(crate) next_statement: std::sync::atomic::AtomicU64,
    pub(crate) next_connection: std::sync::atomic::AtomicU64,
    /// Statements slower than this are logged.
    pub(crate) slow_statement: Duration,
    /// A result the client takes whole is held up to this many bytes; past them, the
    /// rest is read as it is sent ([`hold_bytes`]).
    pub(crate) hold_bytes: usize,
    /// With a password, clients prove they know it (SCRAM-SHA-256).
    pub(crate) password: Option<crate::scram::Verifier>,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
}

impl Shared {
    /// Stops every running statement with `reason`.
    pub(crate) fn interrupt_all(&self, reason: &str) {
        for interrupt in self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            interrupt.interrupt.fire(reason);
        }
    }

    /// Stops the running statement of the connection whose cancel key is `pid` and
    /// `key` (a cancel request), if one runs.
    pub(crate) fn cancel(&self, pid: i32, key: &[u8]) {
        for statement in self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|s| s.key.as_ref().is_some_and(|(p, k)| *p == pid && k == key))
        {
            statement
                .interrupt
                .fire("canceling statement due to user request");
        }
    }

    /// How many statements are running.
    pub(crate) fn running(&self) -> usize {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A running statement: what stops it, and how to see that its client went away.
pub(crate) struct RunningStatement {
    interrupt: Interrupt,
    /// A duplicate of its client's socket.
    peer: Option<Arc<std::net::TcpStream>>,
    /// Its connection's cancel key (process id and secret).
    key: Option<(i32, bytes::Bytes)>,
    /// Its connection's log span.
    span: tracing::Span,
    started: std::time::Instant,
}

/// A statement's entry in [`Shared::running`], removed when it ends.
struct Running {
    shared: Arc<Shared>,
    id: u64,
}

impl Running {
    fn register(connection: &Connection, interrupt: &Interrupt) -> Self {
        let shared = Arc::clone(&connection.shared);
        let id = shared.next_statement.fetch_add(1, Ordering::Relaxed);
        let statement = RunningStatement {
            interrupt: interrupt.clone(),
            peer: connection.peer.clone(),
            key: connection.cancel_key.get().cloned(),
            span: tracing::Span::current(),
            started: std::time::Instant::now(),
        };
        shared
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, statement);
        Self { shared, id }
    }
}

/// Stops the statements whose client has gone (its socket reached end of file, or it
/// sent Terminate): looks every 100 ms at those running for 100 ms or more, without
/// consuming anything (a peek at a duplicate of the socket). Runs for the host's life.
pub(crate) async fn watch_clients(shared: Arc<Shared>) {
    const EVERY: Duration = Duration::from_millis(100);
    loop {
        tokio::time::sleep(EVERY).await;
        let running = shared
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for statement in running.values() {
            let Some(peer) = &statement.peer else {
                continue;
            };
            if statement.started.elapsed() < EVERY || statement.interrupt.reason().is_some() {
                continue;
            }
            if let Some(why) = client_gone(peer) {
                statement
                    .span
                    .in_scope(|| tracing::info!(%why, "stopping its statement"));
                statement
                    .interrupt
                    .fire(format!("canceling statement: {why}"));
            }
        }
    }
}

/// Whether the client of `peer` has gone, and how.
fn client_gone(peer: &std::net::TcpStream) -> Option<&'static str> {
    let mut first = [0u8; 1];
    match peer.peek(&mut first) {
        Ok(0) => Some("the client closed the connection"),
        Ok(_) if first[0] == b'X' => Some("the client ended the session"),
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => None,
        Err(_) => Some("the connection to the client failed"),
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// A counted connection: the count drops when it closes.
pub(crate) struct Slot {
    shared: Arc<Shared>,
    /// Its number among the open connections, from 1.
    pub(crate) number: usize,
    /// Its number among all connections the host accepted (for the log).
    pub(crate) id: u64,
}

impl Slot {
    pub(crate) fn take(shared: &Arc<Shared>) -> Self {
        let number = shared.open.fetch_add(1, Ordering::SeqCst) + 1;
        let id = shared.next_connection.fetch_add(1, Ordering::Relaxed) + 1;
        Self {
            shared: Arc::clone(shared),
            number,
            id,
        }
    }

    /// Whether this connection is one too many.
    pub(crate) fn over_limit(&self) -> bool {
        self.number > self.shared.max_connections
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One connection's state, shared by its protocol handlers.
pub(crate) struct Connection {
    pub(crate) shared: Arc<Shared>,
    pub(crate) slot: Slot,
    /// Opened on the first statement that needs the engine; used on a blocking
    /// thread, one statement at a time.
    session: Arc<Mutex<Option<SqlSession>>>,
    pub(crate) settings: Arc<Mutex<Settings>>,
    /// The database the client named at startup (`current_database()`).
    pub(crate) database: Mutex<String>,
    /// When a statement last arrived or ended, and how many are running.
    activity: Arc<Activity>,
    /// A SCRAM exchange between the server's challenge and the client's proof.
    pub(crate) scram: Mutex<Option<crate::scram::Exchange>>,
    /// A duplicate of the client's socket (non-blocking, as tokio's), peeked at while
    /// a statement runs to see whether the client is still there.
    peer: Option<Arc<std::net::TcpStream>>,
    /// The cancel key the client was given at startup.
    pub(crate) cancel_key: std::sync::OnceLock<(i32, bytes::Bytes)>,
    /// Statements executed, and those that failed (for the log's closing line).
    statements: std::sync::atomic::AtomicU64,
    failed: std::sync::atomic::AtomicU64,
    /// A `COPY ... FROM STDIN` between its CopyInResponse and the client's CopyDone.
    /// Once a line failed: the failure, reported at CopyDone (the client's further
    /// data is dropped meanwhile, as PostgreSQL does).
    pub(crate) copy_in: Mutex<Option<Result<crate::copy_in::CopyIn, Box<ErrorInfo>>>>,
    /// The rows of that COPY parsed so far, and its parts staged with the daemon once
    /// they outgrow memory (`BulkInsert`).
    copy_rows: Mutex<Option<BulkInsert>>,
    /// Data rows sent past pgwire (`socket::Lane`).
    pub(crate) lane: Arc<crate::socket::Lane>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // A session owns a runtime, which must not be dropped on the async thread
        // that closes the connection.
        let session = self
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(session) = session {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => drop(handle.spawn_blocking(move || drop(session))),
                Err(_) => drop(session),
            }
        }
    }
}

/// What a statement produced, before it is put in a format.
pub(crate) enum Outcome {
    /// A query's rows, the first of them written while it ran, and the rest of them
    /// still to read (a result past [`Shared::hold_bytes`]); the statement counts as
    /// running until they are all sent (`Active`: a slow client reading a large
    /// result is not idle).
    Rows(
        Box<QueryOutcome>,
        Box<crate::rows::Early>,
        Option<Box<Rest>>,
        Active,
    ),
    /// A `COPY ... TO STDOUT`'s rows.
    Copy(Box<crate::copy::CopyOut>, Box<QueryOutcome>),
    /// A `COPY ... FROM STDIN` ready for the client's rows: its input columns.
    CopyIn(usize),
    /// Text rows with their column names (`SHOW`).
    Text(Vec<String>, Vec<Vec<String>>),
    Begin,
    Commit,
    Rollback,
    Done(String),
}

/// How the client takes a statement's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// All of them as they come: an Execute without a row limit, a simple query's
    /// last statement. They go in packs, and past [`Shared::hold_bytes`] the rest is
    /// read as it is sent.
    Whole,
    /// In parts of a portal's row limit, each part when the client asks (JDBC's fetch
    /// size): past [`Shared::hold_bytes`] the rest is read as the parts are sent, the
    /// portal holding its scan in between, as a PostgreSQL cursor does. (Its
    /// `statement_timeout` runs from the first Execute to the last part, where
    /// PostgreSQL's runs per Execute.)
    InParts,
    /// After the statements that follow it have run (a simple query's statements
    /// before its last): held whole, so that its scan and ring are not held while the
    /// others run (and their writes are not seen by it).
    Later,
}

impl Connection {
    pub(crate) fn new(shared: Arc<Shared>, slot: Slot, peer: Option<std::net::TcpStream>) -> Self {
        Self {
            peer: peer.map(Arc::new),
            cancel_key: std::sync::OnceLock::new(),
            scram: Mutex::new(None),
            shared,
            slot,
            session: Arc::new(Mutex::new(None)),
            settings: Arc::new(Mutex::new(Settings::default())),
            database: Mutex::new("ringscan".into()),
            activity: Arc::new(Mutex::new((std::time::Instant::now(), 0))),
            statements: 0.into(),
            failed: 0.into(),
            copy_in: Mutex::new(None),
            copy_rows: Mutex::new(None),
            lane: Arc::default(),
        }
    }

    /// A CopyData message of the running `COPY ... FROM STDIN`. Once the rows parsed
    /// outgrow [`ringscan_executor::engine::stage_bytes`], they are staged with the
    /// daemon here (the client's next data waits meanwhile).
    pub(crate) async fn copy_data(&self, bytes: &[u8]) -> Result<(), Box<ErrorInfo>> {
        let due = {
            let mut copy = self.copy_in.lock().unwrap_or_else(PoisonError::into_inner);
            match copy.as_mut() {
                None => {
                    return Err(Box::new(ErrorInfo::new(
                        "ERROR".into(),
                        "08P01".into(),
                        "CopyData outside of a COPY FROM STDIN".into(),
                    )))
                }
                Some(Ok(running)) => match running.data(bytes) {
                    Err((code, message)) => {
                        // Nothing of it is applied; the rest of the data is dropped.
                        *copy = Some(Err(Box::new(ErrorInfo::new(
                            "ERROR".into(),
                            code.into(),
                            message,
                        ))));
                        None
                    }
                    Ok(()) => {
                        let mut rows = self.copy_rows();
                        let bulk = rows.get_or_insert_with(|| BulkInsert::new(&running.table));
                        if bulk.push(running.take_batches()) {
                            rows.take()
                        } else {
                            None
                        }
                    }
                },
                Some(Err(_)) => None,
            }
        };
        if let Some(mut bulk) = due {
            match self
                .with_session(move |s| s.bulk_stage(&mut bulk).map(|()| bulk))
                .await
            {
                Ok(bulk) => *self.copy_rows() = Some(bulk),
                // The daemon dropped the statement's parts; the rest of the data is
                // dropped here, and CopyDone reports this.
                Err(e) => {
                    *self.copy_in.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(Err(engine_error(e)));
                }
            }
        }
        Ok(())
    }

    fn copy_rows(&self) -> std::sync::MutexGuard<'_, Option<BulkInsert>> {
        self.copy_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// CopyDone: the rows written as one statement; the command tag.
    pub(crate) async fn copy_done(&self) -> Result<String, Box<ErrorInfo>> {
        let running = self
            .copy_in
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let bulk = self.copy_rows().take();
        let finished = match running {
            Some(Ok(running)) => running.finish().map_err(|(code, message)| {
                Box::new(ErrorInfo::new("ERROR".into(), code.into(), message))
            }),
            Some(Err(failed)) => Err(failed),
            None => {
                return Err(Box::new(ErrorInfo::new(
                    "ERROR".into(),
                    "08P01".into(),
                    "CopyDone outside of a COPY FROM STDIN".into(),
                )))
            }
        };
        let (table, batches, rows) = match finished {
            Ok(done) => done,
            Err(e) => {
                self.abandon_rows(bulk).await;
                return Err(e);
            }
        };
        let mut bulk = bulk.unwrap_or_else(|| BulkInsert::new(&table));
        bulk.push(batches);
        if rows > 0 || bulk.staged() {
            self.with_session(move |s| s.bulk_finish(bulk))
                .await
                .map_err(engine_error)?;
        }
        Ok(format!("COPY {rows}"))
    }

    /// CopyFail: nothing of the COPY is applied.
    pub(crate) async fn copy_abandoned(&self) {
        self.copy_in
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let bulk = self.copy_rows().take();
        self.abandon_rows(bulk).await;
    }

    /// Drops the parts a failed COPY staged with the daemon (which also drops them
    /// when the session's connection to it ends).
    async fn abandon_rows(&self, bulk: Option<BulkInsert>) {
        if let Some(bulk) = bulk.filter(BulkInsert::staged) {
            let table = bulk.table().to_owned();
            if let Err(e) = self.with_session(move |s| s.bulk_abandon(bulk)).await {
                tracing::warn!(table = %table, "the failed COPY's staged rows stay until the session ends: {e}");
            }
        }
    }

    /// A statement failed (its error is logged).
    pub(crate) fn failed(&self) {
        self.failed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Statements executed and failed on this connection.
    pub(crate) fn statement_counts(&self) -> (u64, u64) {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        (get(&self.statements), get(&self.failed))
    }

    fn settings(&self) -> std::sync::MutexGuard<'_, Settings> {
        self.settings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the session (opened first if need be), here: the connection's
    /// thread has nothing else to do meanwhile (a cancel request, a timeout and a
    /// client gone reach the statement from other threads, through its interrupt).
    pub(crate) async fn with_session<T>(
        &self,
        f: impl FnOnce(&mut SqlSession) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let shared = &self.shared;
        let mut slot = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            let zone = self.settings().get("TimeZone");
            let settings = Arc::clone(&self.settings);
            let database = self
                .database
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            {
                let spawn = || (shared.spawn)();
                let mut options = shared.engine.clone();
                if !zone.is_empty() {
                    options.time_zone = zone;
                }
                let opened = SqlSession::open(&shared.data, &spawn, &options)?;
                crate::catalog::register(
                    opened.context(),
                    crate::catalog::Facts {
                        database,
                        data: shared.data.clone(),
                    },
                    settings,
                    shared.engine.time_zone.clone(),
                )
                .map_err(EngineError::Query)?;
                *slot = Some(opened);
            }
        }
        let session = slot.as_mut().expect("opened above");
        // A panic fails the statement, not the connection.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(session))).unwrap_or_else(|_| {
            Err(EngineError::Runtime(std::io::Error::other(format!(
                "the statement failed: {}",
                crate::last_panic().unwrap_or_default()
            ))))
        })
    }

    /// Notes that a statement arrived (`+1`) or ended (`-1`).
    pub(crate) fn active(&self, change: isize) {
        note_activity(&self.activity, change);
    }

    /// Resolves once the connection has been idle for `timeout` (never without one):
    /// no statement running, none arrived for that long. Resolves with the idle time.
    pub(crate) async fn idle_for(&self, timeout: Option<Duration>) -> Duration {
        let Some(timeout) = timeout else {
            return std::future::pending().await;
        };
        loop {
            let (since, running) = *self.activity.lock().unwrap_or_else(PoisonError::into_inner);
            let idle = since.elapsed();
            if running == 0 && idle >= timeout {
                return idle;
            }
            let wait = if running > 0 { timeout } else { timeout - idle };
            tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
        }
    }

    /// Runs one statement of class `class` with `params` as its `$1`, `$2`..., its
    /// rows in `formats`, taken by the client as `taken` says.
    pub(crate) async fn execute(
        &self,
        sql: &str,
        class: &Class,
        params: Vec<Param>,
        formats: &Format,
        taken: Taken,
    ) -> Result<Outcome, Box<ErrorInfo>> {
        self.statements
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Ends with the statement, also when its future is dropped (a cancel); a
        // result's rows hold another until they are sent.
        let _active = Active::new(&self.activity);
        self.execute_now(sql, class, params, formats, taken).await
    }

    async fn execute_now(
        &self,
        sql: &str,
        class: &Class,
        params: Vec<Param>,
        formats: &Format,
        taken: Taken,
    ) -> Result<Outcome, Box<ErrorInfo>> {
        match class {
            Class::Begin => Ok(Outcome::Begin),
            Class::Commit => Ok(Outcome::Commit),
            Class::Rollback => Ok(Outcome::Rollback),
            Class::Acknowledge(tag) => Ok(Outcome::Done(tag.clone())),
            Class::Set { name, value, tag } => {
                let canonical = Settings::canonical(name).map_err(refusal)?;
                if canonical == "TimeZone" {
                    self.set_time_zone(value.as_deref()).await?;
                }
                self.settings()
                    .set(canonical, value.as_deref())
                    .map_err(refusal)?;
                Ok(Outcome::Done((*tag).to_owned()))
            }
            Class::ResetAll => {
                self.settings().reset_all();
                self.set_time_zone(None).await?;
                Ok(Outcome::Done("RESET".into()))
            }
            Class::Show(name) => self.show(name).await,
            Class::Copy => {
                let copy = crate::copy::parse(sql).map_err(|(code, message)| {
                    Box::new(ErrorInfo::new("ERROR".into(), code.into(), message))
                })?;
                if let Some((table, columns)) = copy.into.clone() {
                    let name = table.clone();
                    let schema = self
                        .with_session(move |s| s.table_schema(&name))
                        .await
                        .map_err(engine_error)?;
                    let copy_in = crate::copy_in::CopyIn::new(table, copy, schema, &columns)
                        .map_err(|(code, message)| {
                            Box::new(ErrorInfo::new("ERROR".into(), code.into(), message))
                        })?;
                    let columns = copy_in.columns();
                    *self.copy_rows() = Some(BulkInsert::new(&copy_in.table));
                    *self.copy_in.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(Ok(copy_in));
                    return Ok(Outcome::CopyIn(columns));
                }
                let timeout = self.settings().statement_timeout();
                let (outcome, _, _) = self
                    .run(copy.query.clone(), params, timeout, false, None)
                    .await
                    .map_err(engine_error)?;
                Ok(Outcome::Copy(Box::new(copy), Box::new(outcome)))
            }
            Class::Rows | Class::Command(_) => {
                let (sql, catalog) = match rewrite(sql) {
                    Rewritten::Same => (sql.to_owned(), false),
                    Rewritten::Sql(rewritten) => (rewritten, true),
                    Rewritten::Empty(columns) => return Ok(Outcome::Text(columns, Vec::new())),
                };
                let timeout = self.settings().statement_timeout();
                let rows = matches!(class, Class::Rows).then_some((formats, taken));
                let (outcome, early, rest) = self
                    .run(sql, params, timeout, catalog, rows)
                    .await
                    .map_err(engine_error)?;
                Ok(match class {
                    // The engine's tag where it has one (`INSERT 0 3`: the count).
                    Class::Command(tag) => {
                        Outcome::Done(outcome.command.unwrap_or_else(|| tag.clone()))
                    }
                    _ => Outcome::Rows(
                        Box::new(outcome),
                        Box::new(early),
                        rest.map(Box::new),
                        Active::new(&self.activity),
                    ),
                })
            }
        }
    }

    /// Runs `sql` on the engine, stopped by `timeout` or by this future being dropped
    /// (a cancel request, a client gone); the result's first rows written in `rows`,
    /// where given, while the rest are still scanned.
    async fn run(
        &self,
        sql: String,
        params: Vec<Param>,
        timeout: Option<Duration>,
        catalog: bool,
        rows: Option<(&Format, Taken)>,
    ) -> Result<(QueryOutcome, crate::rows::Early, Option<Rest>), EngineError> {
        let interrupt = Interrupt::new();
        let stop_on_drop = FireOnDrop(interrupt.clone());
        // Seen by cancel requests, the shutdown and the watch for clients gone.
        let running = Running::register(self, &interrupt);
        let started = std::time::Instant::now();
        let timer = timeout.map(|after| {
            let interrupt = interrupt.clone();
            self.shared.runtime.spawn(async move {
                tokio::time::sleep(after).await;
                interrupt.fire("canceling statement due to statement timeout");
            })
        });
        let use_cache = !catalog && self.settings().result_cache();
        let mut early = rows
            .map(|(formats, taken)| crate::rows::Early::new(formats, taken == Taken::Whole))
            .unwrap_or_default();
        // A result the client takes as it comes (whole, or in parts of a portal's row
        // limit) is read as it is sent past what is held; the rows written as the query
        // runs need no batch of theirs kept.
        let how = Handing {
            hold: rows
                .filter(|&(_, taken)| taken != Taken::Later)
                .map(|_| self.shared.hold_bytes),
            takes: rows.is_some(),
        };
        let result = self
            .with_session(|session| {
                let outcome =
                    session.query_each(&sql, params, use_cache, &interrupt, how, &mut |handed| {
                        early.push(handed)
                    });
                if catalog {
                    // The catalog is computed when scanned: its plans must not outlive
                    // the tables they listed.
                    session.forget_plan(&sql);
                }
                outcome
            })
            .await;
        let (result, unread) = match result {
            Ok((outcome, unread)) => (Ok(outcome), unread),
            Err(e) => (Err(e), None),
        };
        // A result still being read keeps the statement's guards until it ends: its
        // timeout, its entry for cancel requests, its stop when dropped.
        let timer = timer.map(AbortOnDrop);
        let rest = unread.map(|mut unread| {
            // Its duration and its scans' work are counted when its last row is read.
            let shared = Arc::clone(&self.shared);
            let statement = sql.clone();
            unread.on_end(move |end| {
                use crate::metrics::Outcome;
                use ringscan_executor::engine::RestEnd;
                let took = started.elapsed();
                let (outcome, scans) = match end {
                    RestEnd::Read(scans) => (Outcome::Ok, scans),
                    RestEnd::Failed(e) => (failure(e), None),
                    RestEnd::Dropped => (Outcome::Canceled, None),
                };
                shared.metrics.ended(outcome, took.as_secs_f64(), scans);
                log_if_slow(&shared, took, &statement);
            });
            Rest {
                unread,
                _guards: (timer, running, stop_on_drop),
            }
        });
        let took = started.elapsed();
        let outcome = match &result {
            Ok(_) => crate::metrics::Outcome::Ok,
            Err(e) => failure(e),
        };
        self.shared.metrics.statement(
            outcome,
            took.as_secs_f64(),
            result.as_ref().ok(),
            rest.is_none(),
        );
        if rest.is_none() {
            log_if_slow(&self.shared, took, &sql);
        }
        result.map(|outcome| (outcome, early, rest))
    }

    /// Moves the engine's session zone: to `zone`, or back to the startup value or the
    /// host's default.
    async fn set_time_zone(&self, zone: Option<&str>) -> Result<(), Box<ErrorInfo>> {
        let zone = match zone {
            Some(z) => z.to_owned(),
            None => self
                .settings()
                .startup_value("TimeZone")
                .unwrap_or_else(|| self.shared.engine.time_zone.clone()),
        };
        let sql = format!("SET TimeZone = '{}'", zone.replace('\'', "''"));
        self.with_session(move |s| s.query(&sql, false))
            .await
            .map(drop)
            .map_err(engine_error)
    }

    async fn show(&self, name: &str) -> Result<Outcome, Box<ErrorInfo>> {
        if name == "all" {
            let mut all = self.settings().all();
            let zone = self.time_zone().await?;
            for (n, v) in &mut all {
                if *n == "TimeZone" {
                    *v = zone.clone();
                }
            }
            let rows = all
                .into_iter()
                .map(|(n, v)| vec![n.to_owned(), v, String::new()])
                .collect();
            let names = ["name", "setting", "description"]
                .map(String::from)
                .to_vec();
            return Ok(Outcome::Text(names, rows));
        }
        let canonical = Settings::canonical(name).map_err(refusal)?;
        let value = if canonical == "TimeZone" {
            self.time_zone().await?
        } else {
            self.settings().get(canonical)
        };
        Ok(Outcome::Text(vec![canonical.to_owned()], vec![vec![value]]))
    }

    async fn time_zone(&self) -> Result<String, Box<ErrorInfo>> {
        self.with_session(|s| Ok(s.time_zone().to_string()))
            .await
            .map_err(engine_error)
    }
}

/// How a statement that failed with `e` is counted: canceled where it was interrupted
/// (a cancel request, the statement timeout, the client gone).
fn failure(e: &EngineError) -> crate::metrics::Outcome {
    match e {
        EngineError::Interrupted(_) => crate::metrics::Outcome::Canceled,
        _ => crate::metrics::Outcome::Error,
    }
}

/// The log line of a statement that took `took`, if that is slow.
fn log_if_slow(shared: &Shared, took: Duration, sql: &str) {
    if took >= shared.slow_statement {
        tracing::warn!(
            ms = took.as_millis(),
            statement = %one_line(sql),
            "slow statement"
        );
    }
}

/// `sql` on one line, cut to 300 characters, for the log.
pub(crate) fn one_line(sql: &str) -> String {
    let line: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

/// The rest of a result read as it is sent (past [`Shared::hold_bytes`]), with its
/// statement's guards.
pub(crate) struct Rest {
    pub(crate) unread: ringscan_executor::engine::Rest,
    _guards: (Option<AbortOnDrop>, Running, FireOnDrop),
}

/// Bytes of a result held before the rest is read as it is sent:
/// `RINGSCAN_HOLD_BYTES`, else 64 KiB: a result past a few hundred rows goes to the
/// client while the daemon still scans, which on two cores is what keeps a large
/// reply near the scan's own time (a 100,000-row, 21-column reply: 23 ms held to
/// 8 MiB, 17-19 ms past 64 KiB, against 15.5 ms in-process). What is held is whole
/// when sent: a statement that fails inside it sends no rows.
pub(crate) fn hold_bytes() -> usize {
    std::env::var("RINGSCAN_HOLD_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64 << 10)
}

/// When a connection's last statement arrived or ended, and how many are running.
type Activity = Mutex<(std::time::Instant, usize)>;

fn note_activity(activity: &Activity, change: isize) {
    let mut a = activity.lock().unwrap_or_else(PoisonError::into_inner);
    a.0 = std::time::Instant::now();
    a.1 = a.1.saturating_add_signed(change);
}

/// A statement counted as running (for the idle-session timeout) while it lives.
pub(crate) struct Active(Arc<Activity>);

impl Active {
    fn new(activity: &Arc<Activity>) -> Self {
        note_activity(activity, 1);
        Self(Arc::clone(activity))
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        note_activity(&self.0, -1);
    }
}

/// Aborts a statement's timer when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Fires its interrupt when dropped: the statement's future was dropped before its
/// query ended (a cancel request won the race, or the connection closed).
struct FireOnDrop(Interrupt);

impl Drop for FireOnDrop {
    fn drop(&mut self) {
        self.0.fire("canceling statement due to user request");
    }
}

impl Outcome {
    /// The response, rows in `formats` (an EXPLAIN's plan is one text column).
    pub(crate) fn into_response(self, formats: &Format) -> Response {
        match self {
            Outcome::Begin => Response::TransactionStart(Tag::new("BEGIN")),
            Outcome::Commit => Response::TransactionEnd(Tag::new("COMMIT")),
            Outcome::Rollback => Response::TransactionEnd(Tag::new("ROLLBACK")),
            Outcome::Done(tag) => Response::Execution(Tag::new(&tag)),
            Outcome::Text(names, lines) => {
                let mut r = rows::text_response(rows::text_fields(&names, formats), &lines);
                r.set_command_tag("SHOW");
                Response::Query(r)
            }
            Outcome::CopyIn(columns) => Response::CopyIn(pgwire::api::results::CopyResponse::new(
                0,
                columns,
                futures::stream::empty(),
            )),
            Outcome::Copy(copy, outcome) => {
                let names: Vec<String> = outcome
                    .result
                    .schema
                    .fields()
                    .iter()
                    .map(|f| rows::column_name(f.name()))
                    .collect();
                Response::CopyOut(copy.response(&names, &outcome.result.batches))
            }
            Outcome::Rows(outcome, early, rest, active) => {
                if let Some(plan) = &outcome.explain {
                    let lines: Vec<Vec<String>> =
                        plan.lines().map(|l| vec![l.to_owned()]).collect();
                    let fields = rows::text_fields(&["QUERY PLAN"], formats);
                    let mut r = rows::text_response(fields, &lines);
                    r.set_command_tag("EXPLAIN");
                    return Response::Query(r);
                }
                let result = &outcome.result;
                let fields = rows::fields(&result.schema, formats);
                let unread = rest.map(|rest| {
                    let Rest { unread, _guards } = *rest;
                    // The guards go when the last row is read or the reply is dropped.
                    let unread = unread.map(move |batch| {
                        let _ = &_guards;
                        batch.map_err(engine_error)
                    });
                    Box::pin(unread) as rows::Unread
                });
                let mut r = rows::response(fields, result.batches.clone(), *early, unread, active);
                r.set_command_tag("SELECT");
                Response::Query(r)
            }
        }
    }
}

/// A refused `SET` or `SHOW` as an error response.
fn refusal(r: Refused) -> Box<ErrorInfo> {
    Box::new(ErrorInfo::new("ERROR".into(), r.code.into(), r.message))
}

/// An engine error as the client sees it, with the SQLSTATE a PostgreSQL client
/// expects for its kind.
pub(crate) fn engine_error(e: EngineError) -> Box<ErrorInfo> {
    let message = e.to_string();
    let code = match &e {
        EngineError::Query(_) => query_code(&message.to_ascii_lowercase()),
        // admin_shutdown, or query_canceled (a cancel request, statement_timeout).
        EngineError::Interrupted(reason) if reason.contains("administrator") => "57P01",
        EngineError::Interrupted(_) => "57014",
        // The daemon or the runtime: a system error.
        _ => "58000",
    };
    Box::new(ErrorInfo::new("ERROR".into(), code.into(), message))
}

/// The SQLSTATE of a planning or execution error, from DataFusion's message.
fn query_code(lower: &str) -> &'static str {
    if lower.contains("parser error")
        || lower.contains("parsererror")
        || lower.starts_with("sql syntax")
    {
        "42601" // syntax_error
    } else if lower.contains("duplicate key value violates unique constraint") {
        "23505" // unique_violation
    } else if lower.contains("violates not-null constraint") {
        "23502" // not_null_violation
    } else if lower.contains("relation \"") && lower.contains("already exists") {
        "42P07" // duplicate_table
    } else if (lower.contains("relation \"") && lower.contains("does not exist"))
        || lower.contains("no table \"")
        || (lower.contains("table") && lower.contains("not found"))
    {
        "42P01" // undefined_table
    } else if lower.contains("no field named") || lower.contains("unknown column") {
        "42703" // undefined_column
    } else if lower.contains("no function ") || lower.contains("invalid function") {
        "42883" // undefined_function
    } else if lower.contains("out of memory for this query") {
        "53200" // out_of_memory
    } else if lower.contains("division by zero") || lower.contains("divide by zero") {
        "22012" // division_by_zero
    } else if lower.contains("not implemented") || lower.contains("unsupported") {
        "0A000" // feature_not_supported
    } else {
        "XX000" // internal_error
    }
}
