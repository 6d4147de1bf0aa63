//! Statements that write: `CREATE TABLE`, `DROP TABLE`, `TRUNCATE` (here, from the
//! statement's syntax: the daemon does them) and `INSERT` (planned by DataFusion, whose
//! insert plan ends in [`DaemonSink`], which hands the statement's rows to the daemon
//! and returns once they are durable).
//!
//! Column types of a new table follow PostgreSQL's names: `SMALLINT`, `INTEGER`,
//! `BIGINT`, `REAL`, `DOUBLE PRECISION`, `NUMERIC(p, s)`, `TEXT`/`VARCHAR`, `BOOLEAN`,
//! `DATE`, `TIMESTAMP`, `TIMESTAMPTZ`, `BYTEA` (and their usual aliases); timestamps
//! are kept in microseconds, as PostgreSQL and DuckDB keep them.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use datafusion::sql::sqlparser::ast;
use futures::StreamExt;
use ringscan_ipc::msg::ClientMessage;

use super::daemon::Daemon;

/// How long a write waits for the daemon to make it durable.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(600);

/// A statement this module runs itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ddl {
    /// `CREATE TABLE name (columns...)` and, with `query`, `CREATE TABLE name AS query`.
    Create {
        name: String,
        schema: Option<Schema>,
        primary_key: Vec<String>,
        if_not_exists: bool,
        query: Option<String>,
    },
    /// `DROP TABLE a, b`.
    Drop { names: Vec<String>, if_exists: bool },
    /// `TRUNCATE a, b`.
    Truncate { names: Vec<String> },
    /// `CHECKPOINT`: every written table's rows in memory to Parquet now.
    Checkpoint,
}

impl Ddl {
    /// The command tag a PostgreSQL client expects.
    pub(crate) fn tag(&self) -> &'static str {
        match self {
            Self::Create { query: Some(_), .. } => "SELECT",
            Self::Create { .. } => "CREATE TABLE",
            Self::Drop { .. } => "DROP TABLE",
            Self::Truncate { .. } => "TRUNCATE TABLE",
            Self::Checkpoint => "CHECKPOINT",
        }
    }
}

/// Whether `sql` may be one of [`Ddl`]'s statements (its first word), cheaply: the
/// statements that are not skip parsing here.
pub(crate) fn may_be_ddl(sql: &str) -> bool {
    let head: String = sql
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_uppercase();
    matches!(head.as_str(), "CREATE" | "DROP" | "TRUNCATE" | "CHECKPOINT")
}

/// Whether `sql` is `CHECKPOINT` (which the SQL parser does not know).
pub(crate) fn is_checkpoint(sql: &str) -> bool {
    sql.trim()
        .trim_end_matches(';')
        .trim_end()
        .eq_ignore_ascii_case("CHECKPOINT")
}

/// `statement` as a [`Ddl`], `Ok(None)` when it is none (a view, a query...).
pub(crate) fn ddl(statement: &ast::Statement) -> Result<Option<Ddl>> {
    match statement {
        ast::Statement::CreateTable(create) => create_table(create).map(Some),
        ast::Statement::Drop {
            object_type: ast::ObjectType::Table,
            if_exists,
            names,
            ..
        } => Ok(Some(Ddl::Drop {
            names: names.iter().map(table_name).collect::<Result<_>>()?,
            if_exists: *if_exists,
        })),
        ast::Statement::Truncate(truncate) => Ok(Some(Ddl::Truncate {
            names: truncate
                .table_names
                .iter()
                .map(|t| table_name(&t.name))
                .collect::<Result<_>>()?,
        })),
        _ => Ok(None),
    }
}

fn not_supported(what: impl Into<String>) -> DataFusionError {
    DataFusionError::NotImplemented(what.into())
}

/// An identifier as DataFusion normalizes it: unquoted ones in lower case.
fn ident(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

/// A table's name: the last part of `public.t` or `t`.
fn table_name(name: &ast::ObjectName) -> Result<String> {
    match name.0.last() {
        Some(ast::ObjectNamePart::Identifier(id)) => {
            if name.0.len() > 1 {
                let schema = match &name.0[name.0.len() - 2] {
                    ast::ObjectNamePart::Identifier(s) => ident(s),
                    ast::ObjectNamePart::Function(_) => String::new(),
                };
                if schema != "public" {
                    return Err(DataFusionError::Plan(format!(
                        "schema \"{schema}\" does not exist (tables live in \"public\")"
                    )));
                }
            }
            Ok(ident(id))
        }
        _ => Err(DataFusionError::Plan(format!("{name}: not a table name"))),
    }
}

fn create_table(create: &ast::CreateTable) -> Result<Ddl> {
    if create.external {
        return Err(not_supported(
            "CREATE EXTERNAL TABLE: a table of the data directory is its directory of Parquet files",
        ));
    }
    if create.temporary {
        return Err(not_supported("CREATE TEMPORARY TABLE"));
    }
    if create.or_replace {
        return Err(not_supported(
            "CREATE OR REPLACE TABLE (DROP TABLE, then CREATE TABLE)",
        ));
    }
    let name = table_name(&create.name)?;
    let mut primary_key: Vec<String> = Vec::new();
    let mut set_key = |columns: Vec<String>| {
        if !primary_key.is_empty() {
            return Err(DataFusionError::Plan(format!(
                "multiple primary keys for table \"{name}\" are not allowed"
            )));
        }
        primary_key = columns;
        Ok(())
    };
    let mut fields = Vec::with_capacity(create.columns.len());
    for column in &create.columns {
        let column_name = ident(&column.name);
        let data_type = column_type(&column.data_type)
            .map_err(|e| DataFusionError::Plan(format!("column \"{column_name}\": {e}")))?;
        let mut nullable = true;
        for option in &column.options {
            match &option.option {
                ast::ColumnOption::NotNull => nullable = false,
                ast::ColumnOption::Null => nullable = true,
                ast::ColumnOption::PrimaryKey(_) => {
                    nullable = false;
                    set_key(vec![column_name.clone()])?;
                }
                other => {
                    return Err(not_supported(format!(
                        "column \"{column_name}\": the option {other} (NOT NULL, NULL and \
                         PRIMARY KEY are supported)"
                    )))
                }
            }
        }
        fields.push(Field::new(column_name, data_type, nullable));
    }
    for constraint in &create.constraints {
        match constraint {
            ast::TableConstraint::PrimaryKey(key) => {
                let columns = key
                    .columns
                    .iter()
                    .map(|c| match &c.column.expr {
                        ast::Expr::Identifier(id) => Ok(ident(id)),
                        other => Err(not_supported(format!(
                            "a primary key on the expression {other} (name columns)"
                        ))),
                    })
                    .collect::<Result<Vec<_>>>()?;
                set_key(columns)?;
            }
            other => {
                return Err(not_supported(format!(
                    "the constraint {other} (PRIMARY KEY is supported)"
                )))
            }
        }
    }
    for key in &primary_key {
        if let Some(field) = fields.iter_mut().find(|f| f.name() == key) {
            *field = field.clone().with_nullable(false);
        }
    }
    let query = create.query.as_ref().map(|q| q.to_string());
    let schema = match (&query, fields.is_empty()) {
        (None, true) => {
            return Err(DataFusionError::Plan(format!(
                "CREATE TABLE {name}: a table needs at least one column"
            )))
        }
        (Some(_), false) => {
            return Err(not_supported(
                "CREATE TABLE with both columns and AS query (name the columns in the query)",
            ))
        }
        (Some(_), true) => None,
        (None, false) => Some(Schema::new(fields)),
    };
    Ok(Ddl::Create {
        name,
        schema,
        primary_key,
        if_not_exists: create.if_not_exists,
        query,
    })
}

/// The Arrow type a column of a written table gets for its SQL type.
fn column_type(sql: &ast::DataType) -> Result<DataType, String> {
    use ast::DataType as T;
    Ok(match sql {
        T::SmallInt(_) | T::Int2(_) | T::Int16 => DataType::Int16,
        T::Int(_) | T::Integer(_) | T::Int4(_) | T::Int32 => DataType::Int32,
        T::BigInt(_) | T::Int8(_) | T::Int64 => DataType::Int64,
        T::Real | T::Float4 | T::Float32 => DataType::Float32,
        T::Double(_) | T::DoublePrecision | T::Float8 | T::Float64 => DataType::Float64,
        T::Float(info) => match info {
            ast::ExactNumberInfo::Precision(p) if *p <= 24 => DataType::Float32,
            _ => DataType::Float64,
        },
        T::Numeric(info) | T::Decimal(info) | T::Dec(info) => {
            let (precision, scale) = match info {
                // DuckDB's default; PostgreSQL's unbounded numeric has no Arrow type.
                ast::ExactNumberInfo::None => (18, 3),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s),
            };
            let precision = u8::try_from(precision)
                .ok()
                .filter(|p| (1..=38).contains(p))
                .ok_or_else(|| format!("NUMERIC precision {precision} must be between 1 and 38"))?;
            let scale = i8::try_from(scale)
                .ok()
                .filter(|s| (0..=precision as i8).contains(s))
                .ok_or_else(|| {
                    format!("NUMERIC scale {scale} must be between 0 and {precision}")
                })?;
            DataType::Decimal128(precision, scale)
        }
        T::Text
        | T::Varchar(_)
        | T::CharacterVarying(_)
        | T::CharVarying(_)
        | T::Char(_)
        | T::Character(_)
        | T::String(_) => DataType::Utf8,
        T::Bool | T::Boolean => DataType::Boolean,
        T::Date => DataType::Date32,
        T::Timestamp(_, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        T::Timestamp(_, _) => DataType::Timestamp(TimeUnit::Microsecond, None),
        T::Bytea | T::Blob(_) | T::Varbinary(_) | T::Binary(_) => DataType::Binary,
        T::Custom(name, _) if name.to_string().eq_ignore_ascii_case("timestamptz") => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        other => {
            return Err(format!(
                "type {other} is not supported in a table ringscan writes"
            ))
        }
    })
}

/// The type a written table stores for a column a query produced (`CREATE TABLE AS`):
/// views of strings as strings, timestamps in microseconds.
pub(crate) fn stored_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::Int8 => DataType::Int16,
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::Timestamp(_, zone) => DataType::Timestamp(TimeUnit::Microsecond, zone.clone()),
        DataType::Dictionary(_, value) => stored_type(value),
        other => other.clone(),
    }
}

/// Runs a [`Ddl`] other than `CREATE TABLE AS`'s rows (the caller inserts those).
pub(crate) fn run(daemon: &Daemon, ddl: &Ddl) -> Result<()> {
    let messages: Vec<ClientMessage> = match ddl {
        Ddl::Create {
            name,
            schema: Some(schema),
            primary_key,
            if_not_exists,
            ..
        } => vec![ClientMessage::CreateTable {
            name: name.clone(),
            schema_ipc: ringscan_ipc::msg::encode_schema(schema)?,
            primary_key: primary_key.clone(),
            if_not_exists: *if_not_exists,
        }],
        Ddl::Create { schema: None, .. } => {
            return Err(DataFusionError::Internal(
                "CREATE TABLE AS runs its query first".into(),
            ))
        }
        Ddl::Drop { names, if_exists } => names
            .iter()
            .map(|name| ClientMessage::DropTable {
                name: name.clone(),
                if_exists: *if_exists,
            })
            .collect(),
        Ddl::Truncate { names } => names
            .iter()
            .map(|name| ClientMessage::Truncate { name: name.clone() })
            .collect(),
        Ddl::Checkpoint => vec![ClientMessage::Flush],
    };
    for message in &messages {
        daemon.write(message, &[])?;
    }
    Ok(())
}

/// The end of an `INSERT`'s plan: the statement's rows, all of them, to the daemon in
/// one write (all or nothing), answered once durable.
#[derive(Debug)]
pub(crate) struct DaemonSink {
    daemon: Arc<Daemon>,
    table: String,
    /// The rows as DataFusion hands them (the table's columns, instants in the
    /// session's zone).
    schema: SchemaRef,
    /// The table's columns as stored.
    stored: SchemaRef,
}

impl DaemonSink {
    pub(crate) fn new(
        daemon: Arc<Daemon>,
        table: String,
        schema: SchemaRef,
        stored: SchemaRef,
    ) -> Self {
        // Every column nullable for DataFusion: the daemon checks NOT NULL and says
        // which column and row in PostgreSQL's words.
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        Self {
            daemon,
            table,
            schema: Arc::new(Schema::new(fields)),
            stored,
        }
    }
}

impl DisplayAs for DaemonSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DaemonSink: table={}", self.table)
    }
}

#[async_trait]
impl DataSink for DaemonSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        _context: &Arc<TaskContext>,
    ) -> Result<u64> {
        // Rows past what a statement holds in memory go to the daemon in parts as the
        // query makes them (see `bulk`): an `INSERT ... SELECT` of any size.
        let mut rows = super::BulkInsert::new(&self.table);
        let taken = async {
            while let Some(batch) = data.next().await {
                let batch = batch?;
                if batch.num_rows() > 0 && rows.push([stored_batch(&batch, &self.stored)?]) {
                    self.daemon.bulk_stage(&mut rows)?;
                }
            }
            Ok::<(), DataFusionError>(())
        }
        .await;
        match taken {
            Ok(()) => self.daemon.bulk_finish(rows),
            Err(e) => {
                // Its staged parts go (they would with the session's connection).
                let _ = self.daemon.bulk_abandon(rows);
                Err(e)
            }
        }
    }
}

/// Whether `plan` is an `INSERT INTO t VALUES ...` that [`values_rows`] makes the rows
/// of (its shape; whether each value is a constant is seen when it runs).
pub(crate) fn is_values_insert(plan: &datafusion::logical_expr::LogicalPlan) -> bool {
    use datafusion::logical_expr::LogicalPlan;
    let LogicalPlan::Dml(dml) = plan else {
        return false;
    };
    match dml.input.as_ref() {
        LogicalPlan::Projection(p) => matches!(p.input.as_ref(), LogicalPlan::Values(_)),
        LogicalPlan::Values(_) => true,
        _ => false,
    }
}

/// The rows of `INSERT INTO t VALUES (...), ...` (its optimized plan: the table's
/// columns projected from a VALUES list of constants and parameters), made here
/// without DataFusion's execution: what a single-row insert costs is then its wire
/// protocol and its write, not a physical plan. `None` for any other insert (an
/// `INSERT ... SELECT`, an expression that is not a constant), which DataFusion runs.
pub(crate) fn values_rows(
    plan: &datafusion::logical_expr::LogicalPlan,
    params: Option<&datafusion::common::ParamValues>,
) -> Option<Result<(String, RecordBatch)>> {
    use datafusion::logical_expr::dml::InsertOp;
    use datafusion::logical_expr::{LogicalPlan, WriteOp};
    let LogicalPlan::Dml(dml) = plan else {
        return None;
    };
    if dml.op != WriteOp::Insert(InsertOp::Append) {
        return None;
    }
    let (projection, values) = match dml.input.as_ref() {
        LogicalPlan::Projection(p) => match p.input.as_ref() {
            LogicalPlan::Values(v) => (Some(&p.expr), v),
            _ => return None,
        },
        LogicalPlan::Values(v) => (None, v),
        _ => return None,
    };
    let target = dml.target.schema();
    let width = values.schema.fields().len();
    // The VALUES list as constants, row by row.
    let mut rows: Vec<Vec<datafusion::common::ScalarValue>> =
        Vec::with_capacity(values.values.len());
    for row in &values.values {
        let mut out = Vec::with_capacity(width);
        for (expr, field) in row.iter().zip(values.schema.fields()) {
            match constant(expr, params)? {
                Ok(v) => out.push(match v.cast_to(field.data_type()) {
                    Ok(v) => v,
                    Err(e) => return Some(Err(e)),
                }),
                Err(e) => return Some(Err(e)),
            }
        }
        rows.push(out);
    }
    let mut columns = Vec::with_capacity(target.fields().len());
    for i in 0..target.fields().len() {
        // What the projection makes of the VALUES columns for this table column.
        let expr = match projection {
            Some(exprs) => exprs.get(i)?,
            None => {
                let column: Vec<_> = rows.iter().map(|r| r[i].clone()).collect();
                columns.push(column);
                continue;
            }
        };
        let (source, cast) = projected(expr)?;
        let column: Vec<datafusion::common::ScalarValue> = match source {
            Projected::Column(name) => {
                let at = values.schema.index_of_column_by_name(None, &name)?;
                rows.iter().map(|r| r[at].clone()).collect()
            }
            Projected::Constant(v) => vec![v; rows.len()],
        };
        let column = match cast {
            Some(dt) => match column.into_iter().map(|v| v.cast_to(&dt)).collect() {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            },
            None => column,
        };
        columns.push(column);
    }
    let arrays = columns
        .into_iter()
        .zip(target.fields())
        .map(|(column, field)| {
            let array = datafusion::common::ScalarValue::iter_to_array(column)?;
            if array.data_type() == field.data_type() {
                Ok(array)
            } else {
                Ok(arrow_cast::cast(&array, field.data_type())?)
            }
        })
        .collect::<Result<Vec<_>>>();
    let arrays = match arrays {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    let loose: Vec<Field> = target
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let batch = match RecordBatch::try_new(Arc::new(Schema::new(loose)), arrays) {
        Ok(b) => b,
        Err(e) => return Some(Err(e.into())),
    };
    Some(Ok((dml.table_name.table().to_owned(), batch)))
}

/// What a projection expression of an insert takes: a VALUES column or a constant.
enum Projected {
    Column(String),
    Constant(datafusion::common::ScalarValue),
}

fn projected(expr: &datafusion::logical_expr::Expr) -> Option<(Projected, Option<DataType>)> {
    use datafusion::logical_expr::Expr;
    match expr {
        Expr::Alias(a) => projected(&a.expr),
        Expr::Column(c) => Some((Projected::Column(c.name.clone()), None)),
        Expr::Literal(v, _) => Some((Projected::Constant(v.clone()), None)),
        Expr::Cast(c) => {
            let (inner, None) = projected(&c.expr)? else {
                return None;
            };
            Some((inner, Some(c.field.data_type().clone())))
        }
        _ => None,
    }
}

/// `expr` as a constant: a literal, a parameter's value, or a cast of one (`None`: any
/// other expression).
fn constant(
    expr: &datafusion::logical_expr::Expr,
    params: Option<&datafusion::common::ParamValues>,
) -> Option<Result<datafusion::common::ScalarValue>> {
    use datafusion::logical_expr::Expr;
    Some(match expr {
        Expr::Alias(a) => return constant(&a.expr, params),
        Expr::Literal(v, _) => Ok(v.clone()),
        Expr::Placeholder(p) => params?.get_placeholders_with_values(&p.id).map(|v| v.value),
        Expr::Cast(c) => match constant(&c.expr, params)? {
            Ok(v) => v.cast_to(c.field.data_type()),
            Err(e) => Err(e),
        },
        Expr::Negative(e) => match constant(e, params)? {
            Ok(v) => v.arithmetic_negate(),
            Err(e) => Err(e),
        },
        _ => return None,
    })
}

/// `batch` with the stored schema's types (the same instants in the stored zone).
pub(crate) fn stored_batch(batch: &RecordBatch, stored: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(stored.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(Arc::clone(column))
            } else {
                arrow_cast::cast(column, field.data_type())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Nullability is the daemon's to check (with the row named).
    let loose: Vec<Field> = stored
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(loose)), columns)?)
}

#[cfg(test)]
mod tests {
    use datafusion::sql::parser::{DFParser, Statement};

    use super::*;

    fn parse(sql: &str) -> Result<Option<Ddl>> {
        let mut statements = DFParser::parse_sql(sql).unwrap();
        match statements.pop_front().unwrap() {
            Statement::Statement(s) => ddl(&s),
            _ => Ok(None),
        }
    }

    #[test]
    fn create_table_maps_postgres_types_keys_and_not_null() {
        let got = parse(
            "CREATE TABLE IF NOT EXISTS Ticks (id BIGINT PRIMARY KEY, \"Sym\" VARCHAR(8) NOT NULL, \
             px DOUBLE PRECISION, qty INTEGER, small SMALLINT, r REAL, amount NUMERIC(12, 2), \
             ok BOOLEAN, d DATE, ts TIMESTAMP, tz TIMESTAMPTZ, raw BYTEA, note TEXT)",
        )
        .unwrap()
        .unwrap();
        let Ddl::Create {
            name,
            schema: Some(schema),
            primary_key,
            if_not_exists,
            query: None,
        } = got
        else {
            panic!("{got:?}")
        };
        assert_eq!(name, "ticks");
        assert!(if_not_exists);
        assert_eq!(primary_key, ["id"]);
        let types: Vec<(&str, &DataType, bool)> = schema
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.data_type(), f.is_nullable()))
            .collect();
        let micros =
            |z: Option<&str>| DataType::Timestamp(TimeUnit::Microsecond, z.map(Into::into));
        assert_eq!(
            types,
            [
                ("id", &DataType::Int64, false),
                ("Sym", &DataType::Utf8, false),
                ("px", &DataType::Float64, true),
                ("qty", &DataType::Int32, true),
                ("small", &DataType::Int16, true),
                ("r", &DataType::Float32, true),
                ("amount", &DataType::Decimal128(12, 2), true),
                ("ok", &DataType::Boolean, true),
                ("d", &DataType::Date32, true),
                ("ts", &micros(None), true),
                ("tz", &micros(Some("UTC")), true),
                ("raw", &DataType::Binary, true),
                ("note", &DataType::Utf8, true),
            ]
        );
    }

    #[test]
    fn table_keys_drop_and_truncate_parse() {
        let got = parse("CREATE TABLE t (a INT, b TEXT, PRIMARY KEY (b, a))")
            .unwrap()
            .unwrap();
        let Ddl::Create {
            primary_key,
            schema: Some(schema),
            ..
        } = &got
        else {
            panic!("{got:?}")
        };
        assert_eq!(primary_key, &["b", "a"]);
        assert!(schema.fields().iter().all(|f| !f.is_nullable()));
        assert_eq!(
            parse("DROP TABLE IF EXISTS a, public.b").unwrap(),
            Some(Ddl::Drop {
                names: vec!["a".into(), "b".into()],
                if_exists: true
            })
        );
        assert_eq!(
            parse("TRUNCATE TABLE t").unwrap(),
            Some(Ddl::Truncate {
                names: vec!["t".into()]
            })
        );
        assert_eq!(parse("CREATE VIEW v AS SELECT 1").unwrap(), None);
        let ctas = parse("CREATE TABLE c AS SELECT 1 AS x").unwrap().unwrap();
        assert!(matches!(
            ctas,
            Ddl::Create {
                schema: None,
                query: Some(_),
                ..
            }
        ));
        assert_eq!(ctas.tag(), "SELECT");
    }

    #[test]
    fn what_is_not_supported_is_refused_by_name() {
        for (sql, needle) in [
            (
                "CREATE TABLE t (a INT PRIMARY KEY, b INT PRIMARY KEY)",
                "multiple primary keys",
            ),
            ("CREATE TABLE t (a INT[])", "not supported"),
            ("CREATE TABLE t (a NUMERIC(50, 2))", "precision"),
            ("CREATE TABLE t (a INT DEFAULT 3)", "DEFAULT"),
            ("CREATE TEMPORARY TABLE t (a INT)", "TEMPORARY"),
            ("CREATE TABLE other.t (a INT)", "schema \"other\""),
            ("CREATE TABLE t (a INT, UNIQUE (a))", "UNIQUE"),
        ] {
            let err = parse(sql).unwrap_err().to_string();
            assert!(err.contains(needle), "{sql}: {err}");
        }
    }
}
