//! The wire protocol's handlers for one connection: startup, simple query, extended
//! query (Parse / Bind / Describe / Execute), and cancel requests.

use std::fmt::Debug;
use std::sync::{Arc, LazyLock, PoisonError};

use arrow_schema::DataType;
use async_trait::async_trait;
use futures::{Sink, SinkExt};
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
    DefaultServerParameterProvider, StartupHandler,
};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{FieldInfo, Response};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::PgWireConnectionState;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, PgWireServerHandlers, PidSecretKeyGenerator,
    RandomPidSecretKeyGenerator, Type,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::data::RowDescription;
use pgwire::messages::startup::{Authentication, PasswordMessageFamily};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use ringscan_executor::engine::{split_statements, Param};

use crate::binary;
use crate::conn::{engine_error, Connection, Taken};
use crate::packed::pack_rows;
use crate::rewrite::{rewrite, Rewritten};
use crate::rows;
use crate::scram;
use crate::settings::Settings;
use crate::socket::{Lane, MAX_BUFFERED};
use crate::statement::{classify, Class};
use crate::text::pg_type;

/// The handlers of one connection.
pub(crate) struct Handlers(pub(crate) Arc<Connection>);

impl Handlers {
    /// The extended query handler with its statement type named (the trait's
    /// `extended_query_handler` hides it).
    pub(crate) fn extended(&self) -> Arc<Handler> {
        Arc::new(Handler(Arc::clone(&self.0)))
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::new(Handler(Arc::clone(&self.0)))
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::new(Handler(Arc::clone(&self.0)))
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::new(Handler(Arc::clone(&self.0)))
    }

    fn copy_handler(&self) -> Arc<impl pgwire::api::copy::CopyHandler> {
        Arc::new(Handler(Arc::clone(&self.0)))
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::new(Cancel {
            shared: Arc::clone(&self.0.shared),
            pgwire: DefaultCancelHandler::new(Arc::clone(&self.0.shared.manager)),
        })
    }
}

/// A cancel request (it comes on a connection of its own): stops the statement running
/// on the connection it names. A statement runs on its connection's thread, so that
/// connection does not see pgwire's own signal until the statement ends: its interrupt
/// stops it.
struct Cancel {
    shared: Arc<crate::conn::Shared>,
    pgwire: DefaultCancelHandler,
}

#[async_trait]
impl pgwire::api::cancel::CancelHandler for Cancel {
    async fn on_cancel_request(&self, request: pgwire::messages::cancel::CancelRequest) {
        self.shared
            .cancel(request.pid, &request.secret_key.to_bytes());
        self.pgwire.on_cancel_request(request).await;
    }
}

/// The protocol's view of a [`Connection`].
pub(crate) struct Handler(Arc<Connection>);

#[async_trait]
impl pgwire::api::copy::CopyHandler for Handler {
    async fn on_copy_data<C>(
        &self,
        _client: &mut C,
        copy_data: pgwire::messages::copy::CopyData,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.0
            .copy_data(&copy_data.data)
            .await
            .map_err(PgWireError::UserError)
    }

    async fn on_copy_done<C>(
        &self,
        client: &mut C,
        _done: pgwire::messages::copy::CopyDone,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        use futures::SinkExt;
        match self.0.copy_done().await {
            Ok(tag) => {
                let complete = pgwire::messages::response::CommandComplete::new(tag);
                client
                    .send(PgWireBackendMessage::CommandComplete(complete))
                    .await?;
                Ok(())
            }
            Err(e) => {
                log_error(&self.0, &e, "COPY ... FROM STDIN");
                Err(PgWireError::UserError(e))
            }
        }
    }

    async fn on_copy_fail<C>(
        &self,
        _client: &mut C,
        fail: pgwire::messages::copy::CopyFail,
    ) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.0.copy_abandoned().await;
        PgWireError::UserError(error(
            "57014",
            format!("COPY from stdin failed: {}", fail.message),
        ))
    }
}

fn error(code: &str, message: String) -> Box<ErrorInfo> {
    Box::new(ErrorInfo::new("ERROR".into(), code.into(), message))
}

fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".into(),
        code.into(),
        message,
    )))
}

static KEYS: LazyLock<RandomPidSecretKeyGenerator> =
    LazyLock::new(RandomPidSecretKeyGenerator::default);

#[async_trait]
impl StartupHandler for Handler {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let startup = match message {
            PgWireFrontendMessage::Startup(startup) => startup,
            PgWireFrontendMessage::PasswordMessageFamily(password) => {
                return self.authenticate(client, password).await;
            }
            _ => return Ok(()),
        };
        protocol_negotiation(client, &startup).await?;
        save_startup_parameters_to_metadata(client, &startup);
        let conn = &self.0;
        if conn.slot.over_limit() {
            conn.shared.metrics.refused();
            return Err(fatal(
                "53300",
                format!(
                    "sorry, too many clients already (ringscan serve --max-connections {})",
                    conn.shared.max_connections
                ),
            ));
        }
        let settings = Settings::from_startup(
            startup
                .parameters
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .map_err(|r| fatal(r.code, r.message))?;
        *conn.settings.lock().unwrap_or_else(PoisonError::into_inner) = settings;
        if let Some(database) = startup
            .parameters
            .get("database")
            .or_else(|| startup.parameters.get("user"))
        {
            database.clone_into(&mut conn.database.lock().unwrap_or_else(PoisonError::into_inner));
        }
        let param = |k: &str| startup.parameters.get(k).map_or("", String::as_str);
        tracing::info!(
            user = param("user"),
            database = param("database"),
            application = param("application_name"),
            "session started"
        );
        if conn.shared.password.is_some() {
            // SCRAM-SHA-256: the client answers with its first message.
            client.set_state(PgWireConnectionState::AuthenticationInProgress);
            client
                .send(PgWireBackendMessage::Authentication(Authentication::SASL(
                    vec![scram::MECHANISM.to_owned()],
                )))
                .await?;
            return Ok(());
        }
        self.admit(client).await
    }
}

impl Handler {
    /// The client is in: its cancel key, the server's parameters, ReadyForQuery.
    async fn admit<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let conn = &self.0;
        let (pid, key) = KEYS.generate(client);
        client.set_pid_and_secret_key(pid, key.clone());
        let _ = conn.cancel_key.set((pid, key.to_bytes()));
        let (handle, guard) = conn.shared.manager.register(pid, key);
        client
            .session_extensions()
            .insert::<Arc<ConnectionHandle>>(handle);
        client.session_extensions().insert(guard);
        let zone = match conn
            .settings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get("TimeZone")
        {
            z if z.is_empty() => conn.shared.engine.time_zone.clone(),
            z => z,
        };
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = crate::SERVER_VERSION.into();
        parameters.time_zone = zone;
        parameters.date_style = "ISO, MDY".into();
        parameters.is_superuser = false;
        parameters.default_transaction_read_only = true;
        finish_authentication(client, &parameters).await
    }

    /// One step of SCRAM-SHA-256: the client's first message gets the server's
    /// challenge, its final message (the proof) gets the server's signature and the
    /// connection; a wrong password, SQLSTATE 28P01.
    async fn authenticate<C>(
        &self,
        client: &mut C,
        message: PasswordMessageFamily,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let conn = &self.0;
        let Some(verifier) = &conn.shared.password else {
            return Err(fatal("08P01", "no authentication is in progress".into()));
        };
        let user = client.metadata().get("user").cloned().unwrap_or_default();
        let failed = |f: scram::Failure| match f {
            scram::Failure::Malformed(why) => fatal("08P01", why),
            scram::Failure::WrongPassword => {
                conn.shared.metrics.auth_failure();
                tracing::warn!(user, "password authentication failed");
                fatal(
                    "28P01",
                    format!("password authentication failed for user \"{user}\""),
                )
            }
        };
        let pending = conn
            .scram
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match pending {
            None => {
                let initial = message.into_sasl_initial_response()?;
                if initial.auth_method != scram::MECHANISM {
                    return Err(fatal(
                        "28000",
                        format!("SASL mechanism {} is not supported", initial.auth_method),
                    ));
                }
                let data = initial.data.unwrap_or_default();
                let nonce = scram::random(18).map_err(|e| fatal("58000", e.to_string()))?;
                let (exchange, server_first) =
                    scram::first(verifier, &data, &nonce).map_err(failed)?;
                *conn.scram.lock().unwrap_or_else(PoisonError::into_inner) = Some(exchange);
                client
                    .send(PgWireBackendMessage::Authentication(
                        Authentication::SASLContinue(server_first.into_bytes().into()),
                    ))
                    .await?;
                Ok(())
            }
            Some(exchange) => {
                let response = message.into_sasl_response()?;
                let server_final =
                    scram::last(verifier, &exchange, &response.data).map_err(failed)?;
                client
                    .send(PgWireBackendMessage::Authentication(
                        Authentication::SASLFinal(server_final.into_bytes().into()),
                    ))
                    .await?;
                self.admit(client).await
            }
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for Handler {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statements = match split_statements(query) {
            Ok(s) => s,
            Err(e) => return Ok(vec![Response::Error(engine_error(e))]),
        };
        let mut responses = Vec::with_capacity(statements.len());
        let last = statements.len().saturating_sub(1);
        for (i, sql) in statements.into_iter().enumerate() {
            let class = classify(sql);
            // Only the last statement's rows are sent as soon as they are made: the
            // others' are sent after the statements that follow them have run, and a
            // result still being read would hold its scan (and ring) meanwhile.
            let taken = if i == last {
                Taken::Whole
            } else {
                Taken::Later
            };
            let response = match self
                .0
                .execute(sql, &class, Vec::new(), &Format::UnifiedText, taken)
                .await
            {
                Ok(outcome) => outcome.into_response(&Format::UnifiedText),
                Err(e) => Response::Error(e),
            };
            if let Response::Error(e) = &response {
                log_error(&self.0, e, sql);
            }
            let failed = matches!(response, Response::Error(_));
            let response = match response {
                // One statement: its rows go as they are read, nothing before them.
                Response::Query(rows) if last == 0 => {
                    Response::Execution(send_rows(client, &self.0.lane, rows, true).await?)
                }
                other => other,
            };
            responses.push(response);
            // As PostgreSQL does: the statements after a failed one do not run.
            if failed {
                break;
            }
        }
        Ok(responses)
    }
}

/// A statement of the extended protocol: parsed, classified and, if it returns rows,
/// planned (its parameter types and columns known for Describe).
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    sql: String,
    class: Class,
    /// `$1`, `$2`... as the plan uses them (`None`: the plan does not say).
    params: Vec<Option<DataType>>,
    /// The columns, for a statement that returns rows: named and typed as its row
    /// description gives them, once (`rows::columns`).
    columns: Option<Arc<[(String, Type)]>>,
    /// The columns of a catalog query that is empty whatever the data (text).
    empty: Option<Vec<String>>,
}

impl Statement {
    /// The row description under `formats`; empty for a statement without rows.
    fn fields(&self, formats: &Format) -> Vec<FieldInfo> {
        if let Some(columns) = &self.empty {
            return rows::text_fields(columns, formats);
        }
        match &self.class {
            Class::Rows if first_word_is(&self.sql, "EXPLAIN") => {
                rows::text_fields(&["QUERY PLAN"], formats)
            }
            Class::Rows => self
                .columns
                .as_ref()
                .map(|c| rows::fields_of(c, formats))
                .unwrap_or_default(),
            Class::Show(name) if name == "all" => {
                rows::text_fields(&["name", "setting", "description"], formats)
            }
            Class::Show(name) => match Settings::canonical(name) {
                Ok(n) => rows::text_fields(&[n], formats),
                Err(_) => Vec::new(),
            },
            _ => Vec::new(),
        }
    }
}

fn first_word_is(sql: &str, word: &str) -> bool {
    sql.trim_start()
        .get(..word.len())
        .is_some_and(|w| w.eq_ignore_ascii_case(word))
}

/// Parses and plans statements for the extended protocol.
pub(crate) struct Parser(Arc<Connection>);

#[async_trait]
impl QueryParser for Parser {
    type Statement = Statement;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let user = PgWireError::UserError;
        let statements = split_statements(sql).map_err(|e| user(engine_error(e)))?;
        let sql = match statements.as_slice() {
            [] => return Ok(None),
            [one] => (*one).to_owned(),
            _ => {
                return Err(user(error(
                    "42601",
                    "cannot insert multiple commands into a prepared statement".into(),
                )))
            }
        };
        self.0.active(0);
        let class = classify(&sql);
        let mut empty = None;
        // An INSERT's parameters are typed by the table's columns: planned here too,
        // though it returns no rows.
        let insert = matches!(&class, Class::Command(tag) if tag == "INSERT");
        let (params, columns) = if class == Class::Rows || insert {
            let planned = match rewrite(&sql) {
                Rewritten::Same => sql.clone(),
                Rewritten::Sql(rewritten) => rewritten,
                Rewritten::Empty(columns) => {
                    empty = Some(columns);
                    String::new()
                }
            };
            let declared: Vec<Option<DataType>> = types
                .iter()
                .map(|t| t.as_ref().and_then(binary::arrow_type))
                .collect();
            if empty.is_some() {
                (Vec::new(), None)
            } else {
                let prepared = self
                    .0
                    .with_session(move |s| s.prepare_typed(&planned, &declared))
                    .await
                    .map_err(|e| user(engine_error(e)))?;
                let columns = (!insert).then(|| rows::columns(&prepared.schema).into());
                (prepared.params, columns)
            }
        } else {
            (Vec::new(), None)
        };
        Ok(Some(Statement {
            sql,
            class,
            params,
            columns,
            empty,
        }))
    }

    fn get_parameter_types(&self, stmt: &Statement) -> PgWireResult<Vec<Type>> {
        // A parameter whose use says nothing of its type is sent as text.
        Ok(stmt
            .params
            .iter()
            .map(|t| t.as_ref().map_or(Type::TEXT, pg_type))
            .collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Statement,
        formats: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(stmt.fields(formats.unwrap_or(&Format::UnifiedText)))
    }
}

#[async_trait]
impl ExtendedQueryHandler for Handler {
    type Statement = Statement;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Parser> {
        Arc::new(Parser(Arc::clone(&self.0)))
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let stored = &portal.statement;
        let stmt = &stored.statement;
        let params = match bind(portal) {
            Ok(p) => p,
            Err(e) => return Ok(Response::Error(e)),
        };
        let formats = &portal.result_column_format;
        let taken = if max_rows == 0 {
            Taken::Whole
        } else {
            Taken::InParts
        };
        let response = match self
            .0
            .execute(&stmt.sql, &stmt.class, params, formats, taken)
            .await
        {
            Ok(outcome) => outcome.into_response(&portal.result_column_format),
            Err(e) => {
                log_error(&self.0, &e, &stmt.sql);
                Response::Error(e)
            }
        };
        match (max_rows, response) {
            (0, Response::Query(rows)) => send_whole(client, &self.0.lane, portal, rows).await,
            (_, response) => Ok(response),
        }
    }
}

/// Sends `response`'s data rows as they are read (after its RowDescription where
/// `describe`, as a simple query's); the CommandComplete's tag is what is left to send.
/// Packs of rows go on the connection's lane, past pgwire's encoder (`socket::Lane`).
/// pgwire's own Execute collects a portal's rows whole before it sends any (its
/// `fetch`), so a result read as it is sent (`conn::Rest`) waited for its last row
/// all the same.
async fn send_rows<C>(
    client: &mut C,
    lane: &Lane,
    mut response: pgwire::api::results::QueryResponse,
    describe: bool,
) -> PgWireResult<pgwire::api::results::Tag>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    use futures::StreamExt;
    if describe {
        let fields = response.row_schema();
        let description = RowDescription::new(fields.iter().map(Into::into).collect());
        client
            .feed(PgWireBackendMessage::RowDescription(description))
            .await?;
    }
    let mut rows = 0;
    // Whether all that pgwire was handed has reached the socket's buffer, so that
    // what the lane takes goes after it.
    let mut flushed = false;
    let data = response.data_rows();
    while let Some(row) = data.next().await {
        let row = row?;
        match pack_rows(&row) {
            Some(n) => {
                if !flushed {
                    client.flush().await?;
                    flushed = true;
                }
                rows += n;
                if lane.push(row.data.freeze()) >= MAX_BUFFERED {
                    client.flush().await?;
                }
            }
            None => {
                client.feed(PgWireBackendMessage::DataRow(row)).await?;
                rows += 1;
                flushed = false;
            }
        }
    }
    Ok(pgwire::api::results::Tag::new(response.command_tag()).with_rows(rows))
}

/// Sends the rows of a portal executed without a row limit as they are read
/// ([`send_rows`]), and leaves the portal finished.
async fn send_whole<C>(
    client: &mut C,
    lane: &Lane,
    portal: &Portal<Statement>,
    response: pgwire::api::results::QueryResponse,
) -> PgWireResult<Response>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let tag = send_rows(client, lane, response, false).await?;
    // A second Execute of the portal gets no rows, as from pgwire's finished portal.
    *portal.state.lock().await = pgwire::api::portal::PortalExecutionState::Finished;
    Ok(Response::Execution(tag))
}

/// One log line per failed statement.
fn log_error(conn: &Connection, e: &ErrorInfo, sql: &str) {
    conn.failed();
    tracing::warn!(
        code = e.code,
        error = e.message,
        statement = %crate::conn::one_line(sql),
        "statement failed"
    );
}

/// The portal's parameter values, each read as the type the client gave it, else the
/// type its use in the statement gives it, else as text.
fn bind(portal: &Portal<Statement>) -> Result<Vec<Param>, Box<ErrorInfo>> {
    let stored = &portal.statement;
    let wanted = stored
        .parameter_types
        .len()
        .max(stored.statement.params.len());
    if portal.parameters.len() != wanted {
        return Err(error(
            "08P01",
            format!(
                "bind message supplies {} parameters, but the prepared statement requires {wanted}",
                portal.parameters.len()
            ),
        ));
    }
    portal
        .parameters
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let given = stored
                .parameter_types
                .get(i)
                .cloned()
                .flatten()
                .filter(|t| *t != Type::UNKNOWN);
            let inferred = stored.statement.params.get(i).cloned().flatten();
            let t = given
                .or_else(|| inferred.as_ref().map(pg_type))
                .unwrap_or(Type::UNKNOWN);
            let binary = rows::format_for(&portal.parameter_format, i)
                == pgwire::api::results::FieldFormat::Binary;
            binary::param(i + 1, bytes.as_deref(), binary, &t).map_err(|m| error("22P02", m))
        })
        .collect()
}
