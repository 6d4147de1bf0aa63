//! One client connection: its SQL session and the protocol handlers that drive it.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::RecordBatch;
use async_trait::async_trait;
use futures::{stream, Sink};
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::query::SimpleQueryHandler;
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::{ClientInfo, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::data::DataRow;
use pgwire::messages::PgWireBackendMessage;
use ringscan_executor::engine::{split_statements, EngineError, EngineOptions, SqlSession};
use ringscan_executor::QueryOutcome;

use crate::text::{pg_type, text};

/// Starts the data directory's IO daemon when no daemon answers.
pub type Spawn = Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

/// What every connection of one host shares.
pub(crate) struct Shared {
    pub(crate) data: PathBuf,
    pub(crate) engine: EngineOptions,
    pub(crate) spawn: Spawn,
}

/// One connection's handlers and session.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    /// Opened on the first statement; used on a blocking thread, one statement at a
    /// time (the protocol runs a connection's statements in order).
    session: Arc<Mutex<Option<SqlSession>>>,
}

impl Connection {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            session: Arc::new(Mutex::new(None)),
        }
    }

    /// Runs one statement on the session, opening it first if need be.
    async fn run(&self, sql: String) -> Result<QueryOutcome, EngineError> {
        let session = Arc::clone(&self.session);
        let shared = Arc::clone(&self.shared);
        let joined = tokio::task::spawn_blocking(move || {
            let mut slot = session.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.is_none() {
                let spawn = || (shared.spawn)();
                *slot = Some(SqlSession::open(&shared.data, &spawn, &shared.engine)?);
            }
            let session = slot.as_mut().expect("opened above");
            session.query(&sql, true)
        })
        .await;
        joined.unwrap_or_else(|e| {
            Err(EngineError::Runtime(std::io::Error::other(format!(
                "the statement's thread failed: {e}"
            ))))
        })
    }
}

impl PgWireServerHandlers for Connection {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::new(self.handler())
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        Arc::new(self.handler())
    }
}

impl Connection {
    fn handler(&self) -> Handler {
        Handler {
            conn: Arc::new(Self {
                shared: Arc::clone(&self.shared),
                session: Arc::clone(&self.session),
            }),
        }
    }
}

/// The protocol's view of a [`Connection`].
pub(crate) struct Handler {
    conn: Arc<Connection>,
}

impl NoopStartupHandler for Handler {}

/// What a statement is, by its first word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Rows come back.
    Rows,
    Begin,
    Commit,
    Rollback,
    /// A command: its tag is its first word(s).
    Command,
}

fn kind(sql: &str) -> (Kind, String) {
    let words: Vec<String> = sql
        .split_whitespace()
        .take(2)
        .map(|w| {
            w.trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_ascii_uppercase()
        })
        .collect();
    let first = words.first().cloned().unwrap_or_default();
    let kind = match first.as_str() {
        "SELECT" | "WITH" | "VALUES" | "SHOW" | "EXPLAIN" | "TABLE" | "DESCRIBE" => Kind::Rows,
        "BEGIN" | "START" => Kind::Begin,
        "COMMIT" | "END" => Kind::Commit,
        "ROLLBACK" | "ABORT" => Kind::Rollback,
        _ => Kind::Command,
    };
    (kind, first)
}

#[async_trait]
impl SimpleQueryHandler for Handler {
    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statements = match split_statements(query) {
            Ok(s) => s,
            Err(e) => return Ok(vec![error_response(&e)]),
        };
        let mut responses = Vec::with_capacity(statements.len());
        for sql in statements {
            let (kind, tag) = kind(sql);
            let response = match kind {
                // The engine is read-only: a transaction is a bracket that changes
                // nothing, and clients (psql, pgjdbc, psycopg) open them on their own.
                Kind::Begin => Response::TransactionStart(Tag::new("BEGIN")),
                Kind::Commit => Response::TransactionEnd(Tag::new("COMMIT")),
                Kind::Rollback => Response::TransactionEnd(Tag::new("ROLLBACK")),
                Kind::Rows | Kind::Command => match self.conn.run(sql.to_owned()).await {
                    Ok(outcome) if kind == Kind::Rows => rows_response(&outcome)?,
                    Ok(_) => Response::Execution(Tag::new(&tag)),
                    Err(e) => error_response(&e),
                },
            };
            let failed = matches!(response, Response::Error(_));
            responses.push(response);
            // As PostgreSQL does: the statements after a failed one do not run.
            if failed {
                break;
            }
        }
        Ok(responses)
    }
}

/// The rows of a query (or the lines of its EXPLAIN) as a text-format response.
fn rows_response(outcome: &QueryOutcome) -> PgWireResult<Response> {
    if let Some(plan) = &outcome.explain {
        let fields = Arc::new(vec![FieldInfo::new(
            "QUERY PLAN".into(),
            None,
            None,
            Type::TEXT,
            FieldFormat::Text,
        )]);
        let mut encoder = DataRowEncoder::new(Arc::clone(&fields));
        let mut rows = Vec::new();
        for line in plan.lines() {
            encoder.encode_field(&line)?;
            rows.push(Ok(encoder.take_row()));
        }
        return Ok(Response::Query(QueryResponse::new(
            fields,
            stream::iter(rows),
        )));
    }
    let result = &outcome.result;
    let fields: Arc<Vec<FieldInfo>> = Arc::new(
        result
            .schema
            .fields()
            .iter()
            .map(|f| {
                FieldInfo::new(
                    f.name().clone(),
                    None,
                    None,
                    pg_type(f.data_type()),
                    FieldFormat::Text,
                )
            })
            .collect(),
    );
    let mut encoder = DataRowEncoder::new(Arc::clone(&fields));
    let mut rows: Vec<PgWireResult<DataRow>> = Vec::with_capacity(result.rows);
    for batch in &result.batches {
        encode_batch(batch, &mut encoder, &mut rows)?;
    }
    let mut response = QueryResponse::new(fields, stream::iter(rows));
    response.set_command_tag("SELECT");
    Ok(Response::Query(response))
}

fn encode_batch(
    batch: &RecordBatch,
    encoder: &mut DataRowEncoder,
    rows: &mut Vec<PgWireResult<DataRow>>,
) -> PgWireResult<()> {
    for i in 0..batch.num_rows() {
        for column in batch.columns() {
            encoder.encode_field(&text(column.as_ref(), i))?;
        }
        rows.push(Ok(encoder.take_row()));
    }
    Ok(())
}

/// An engine error as the client sees it, with the SQLSTATE a PostgreSQL client
/// expects for its kind.
fn error_response(e: &EngineError) -> Response {
    let message = e.to_string();
    let code = match e {
        EngineError::Query(_) => query_code(&message.to_ascii_lowercase()),
        // The daemon or the runtime: a system error.
        _ => "58000",
    };
    Response::Error(Box::new(ErrorInfo::new(
        "ERROR".into(),
        code.into(),
        message,
    )))
}

/// The SQLSTATE of a planning or execution error, from DataFusion's message.
fn query_code(lower: &str) -> &'static str {
    if lower.contains("parser error")
        || lower.contains("parsererror")
        || lower.starts_with("sql syntax")
    {
        "42601" // syntax_error
    } else if lower.contains("no table \"")
        || (lower.contains("table") && lower.contains("not found"))
    {
        "42P01" // undefined_table
    } else if lower.contains("no field named") || lower.contains("unknown column") {
        "42703" // undefined_column
    } else if lower.contains("not implemented") || lower.contains("unsupported") {
        "0A000" // feature_not_supported
    } else {
        "XX000" // internal_error
    }
}
