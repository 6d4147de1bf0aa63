//! [`DaemonTable`]: a table of the data directory (or a quoted path or glob) as a
//! DataFusion [`TableProvider`] whose scans the IO daemon runs.
//!
//! - Projection: the columns DataFusion needs, by name, in the request.
//! - Filters: each WHERE conjunct mapped by [`push_filter`]; reported `Exact` only where
//!   the daemon applies all of it, `Inexact` where it applies a part.
//! - Limit: pushed when DataFusion hands one to the scan (it does only when nothing above
//!   the scan filters rows).
//! - Time zone: instant columns (`Timestamp` with a zone) are shown in the session zone
//!   whatever zone their files name (see [`crate::zone`]); the values are the same
//!   instants, so what goes to the daemon (projection, predicates on instants) does not
//!   change.
//! - Statistics: row count and per-column null counts, minimums and maximums from the
//!   footers, `Exact` where the footers are (so `count(*)`, `min` and `max` are answered
//!   without a scan) and inexact once a filter is pushed.

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_schema::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Result, ScalarValue, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use ringscan_ipc::msg::{Predicate, ScanRequest, TableStatistics};

use super::daemon::{source_label, Daemon, TableEntry};
use super::filter::{push_filter, Pushed};
use super::scan::{DaemonScanExec, ParamFilters};
use super::ScanSettings;

/// Rows the daemon decodes per batch of a scan (a row group of the generator's and of
/// flushed tables is one batch). At the protocol's default of 8,192, a 10%-selective
/// filter sent batches of ~800 rows, each paying the ring's hand-off, the host's
/// decode and the plan's per-batch work: in-process over 1M rows of `wide`, `SELECT *`
/// with that filter took 15.3 ms at 8,192 and 12.4 ms at 65,536, its 4 columns 3.55
/// and 2.9 ms, an unfiltered `GROUP BY` 8.3 and 7.3 ms, `SELECT *` of all 1M rows 26
/// and 20 ms (point lookups and `LIMIT 10` unchanged). The producer splits a batch too
/// large for its ring.
const SCAN_BATCH_ROWS: usize = 65_536;
/// A table whose scans the daemon runs.
#[derive(Debug)]
pub(crate) struct DaemonTable {
    daemon: Arc<Daemon>,
    entry: Arc<TableEntry>,
    settings: Arc<ScanSettings>,
    /// The entry's schema with its instants in the session zone when planned.
    schema: SchemaRef,
}

impl DaemonTable {
    pub(crate) fn new(
        daemon: Arc<Daemon>,
        entry: Arc<TableEntry>,
        settings: Arc<ScanSettings>,
    ) -> Self {
        let schema = crate::zone::zoned_schema(&entry.schema, &settings.time_zone());
        Self {
            daemon,
            entry,
            settings,
            schema,
        }
    }

    /// The entry (schema and data version) this provider plans with.
    pub(crate) fn entry(&self) -> &Arc<TableEntry> {
        &self.entry
    }
}

#[async_trait]
impl TableProvider for DaemonTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// The table's bytes: its files' sizes as the daemon listed them (nothing else is
    /// known without asking the daemon for the footers' statistics). What
    /// `pg_table_size` answers where the files are not in a local directory (a bucket).
    fn statistics(&self) -> Option<Statistics> {
        let bytes = self
            .entry
            .info
            .files
            .iter()
            .map(|f| f.size_bytes)
            .fold(0u64, u64::saturating_add);
        Some(Statistics {
            num_rows: Precision::Absent,
            total_byte_size: Precision::Exact(usize::try_from(bytes).unwrap_or(usize::MAX)),
            column_statistics: Statistics::unknown_column(&self.schema),
        })
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match push_filter(f, &self.schema) {
                Pushed::Exact(_) => TableProviderFilterPushDown::Exact,
                Pushed::Part(_) => TableProviderFilterPushDown::Inexact,
                Pushed::No => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: datafusion::logical_expr::dml::InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        use datafusion::logical_expr::dml::InsertOp;
        let ringscan_ipc::msg::ScanSource::Table { name } = &self.entry.source else {
            return datafusion::common::not_impl_err!(
                "INSERT into files named by path: insert into a table (CREATE TABLE makes one)"
            );
        };
        if insert_op != InsertOp::Append {
            return datafusion::common::not_impl_err!("{insert_op}: only INSERT INTO appends");
        }
        let sink = super::write::DaemonSink::new(
            Arc::clone(&self.daemon),
            name.clone(),
            Arc::clone(&self.schema),
            Arc::clone(&self.entry.schema),
        );
        Ok(Arc::new(datafusion::datasource::sink::DataSinkExec::new(
            input,
            Arc::new(sink),
            None,
        )))
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let table_schema = &self.schema;
        let indices: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..table_schema.fields().len()).collect(),
        };
        let schema = Arc::new(table_schema.project(&indices)?);
        let mut predicates = Vec::new();
        let mut exact_filters = Vec::new();
        let mut inexact = 0;
        let mut param_filters = Vec::new();
        for f in filters {
            // A prepared statement's generic plan: a filter on a parameter goes to the
            // scan when it runs, with the value; only one pushed whole can wait so.
            if super::filter::has_placeholder(f) {
                match push_filter(f, table_schema) {
                    Pushed::Exact(_) => param_filters.push(f.clone()),
                    _ => {
                        return datafusion::common::plan_err!(
                            "the filter {f} on a parameter is not pushed whole to the scan"
                        )
                    }
                }
                continue;
            }
            match push_filter(f, table_schema) {
                Pushed::Exact(p) => {
                    predicates.push(p);
                    exact_filters.push(f.clone());
                }
                Pushed::Part(p) => {
                    predicates.push(p);
                    inexact += 1;
                }
                Pushed::No => {}
            }
        }
        let mut request = ScanRequest::new(self.entry.source.clone());
        request.projection = Some(schema.fields().iter().map(|f| f.name().clone()).collect());
        request.predicate = match predicates.len() {
            0 => None,
            1 => predicates.pop(),
            _ => Some(Predicate::And(predicates)),
        };
        request.limit = limit.map(|l| l as u64);
        request.ring_capacity_bytes = self.settings.ring_capacity_bytes;
        request.inline_bytes = self.settings.inline_answer_bytes;
        request.batch_size = SCAN_BATCH_ROWS;
        let stats = if self.settings.use_statistics() {
            self.daemon.statistics(&self.entry)
        } else {
            None
        };
        let min_max = stats.and_then(|_| self.daemon.min_max(&self.entry));
        let mut statistics = match &stats {
            Some(stats) => footer_statistics(stats, min_max, table_schema, &indices),
            None => Statistics::new_unknown(&schema),
        };
        if request.predicate.is_some() || !param_filters.is_empty() {
            statistics = statistics.to_inexact();
        }
        if let (Some(stats), false) = (&stats, exact_filters.is_empty()) {
            let all: Vec<usize> = (0..table_schema.fields().len()).collect();
            let table = footer_statistics(stats, min_max, table_schema, &all);
            let selectivity = filter_selectivity(state, &exact_filters, table_schema, &table);
            statistics.num_rows = statistics
                .num_rows
                .map(|rows| (rows as f64 * selectivity).ceil() as usize);
        }
        if let Some(limit) = limit {
            statistics = statistics.with_fetch(Some(limit), 0, 1)?;
        }
        Ok(Arc::new(
            DaemonScanExec::new(
                Arc::clone(&self.daemon),
                request,
                source_label(&self.entry.source),
                schema,
                statistics,
                inexact,
            )
            .with_param_filters(ParamFilters {
                filters: param_filters,
                table_schema: Arc::clone(table_schema),
            }),
        ))
    }
}

/// The share of rows that `filters` (pushed exactly: no `FilterExec` above estimates
/// them) keep, as DataFusion's `FilterExec` estimates it: from the columns' ranges where
/// the filter allows interval analysis, else its default of 20%. Without it a filtered
/// scan claimed the whole table's rows, and joins took a filtered dimension table
/// (TPC-H's `r_name = 'ASIA'`) for as large as the fact table.
fn filter_selectivity(
    state: &dyn Session,
    filters: &[Expr],
    table_schema: &SchemaRef,
    table: &Statistics,
) -> f64 {
    use datafusion::common::DFSchema;
    use datafusion::logical_expr::utils::conjunction;
    use datafusion::physical_expr::{analyze, AnalysisContext};
    const DEFAULT: f64 = 0.2;
    let estimate = || -> Result<Option<f64>> {
        let Some(filter) = conjunction(filters.iter().cloned()) else {
            return Ok(None);
        };
        let df_schema = DFSchema::try_from(table_schema.as_ref().clone())?;
        let physical = state.create_physical_expr(filter, &df_schema)?;
        let context = AnalysisContext::try_from_statistics(table_schema, &table.column_statistics)?;
        Ok(analyze(&physical, context, table_schema)?.selectivity)
    };
    match estimate() {
        Ok(Some(s)) if (0.0..=1.0).contains(&s) => s,
        _ => DEFAULT,
    }
}

/// DataFusion statistics of the projected columns `indices` of `table_schema`.
fn footer_statistics(
    stats: &TableStatistics,
    min_max: Option<&[ArrayRef]>,
    table_schema: &Schema,
    indices: &[usize],
) -> Statistics {
    let rows = usize::try_from(stats.row_count).ok();
    // The footers' instants in the zone the table shows them in.
    let values = min_max.map(|arrays| {
        arrays
            .iter()
            .zip(&stats.columns)
            .map(|(a, c)| match table_schema.field_with_name(&c.name) {
                Ok(f) => crate::zone::in_zone(a, f.data_type()),
                Err(_) => Arc::clone(a),
            })
            .collect::<Vec<_>>()
    });
    let columns = indices
        .iter()
        .map(|&i| {
            let field = table_schema.field(i);
            let Some(pos) = stats.columns.iter().position(|c| c.name == *field.name()) else {
                return ColumnStatistics::new_unknown();
            };
            let c = &stats.columns[pos];
            let value = |row: usize, exact: bool| -> Precision<ScalarValue> {
                let Some(array) = values.as_ref().map(|v| &v[pos]) else {
                    return Precision::Absent;
                };
                if !exact || array.data_type() != field.data_type() {
                    return Precision::Absent;
                }
                match ScalarValue::try_from_array(array, row) {
                    // Writers store a zero minimum as -0.0 and a zero maximum as +0.0
                    // whichever zero the column holds: the answer is the plain zero.
                    Ok(ScalarValue::Float64(Some(0.0))) => {
                        Precision::Exact(ScalarValue::Float64(Some(0.0)))
                    }
                    Ok(ScalarValue::Float32(Some(0.0))) => {
                        Precision::Exact(ScalarValue::Float32(Some(0.0)))
                    }
                    Ok(v) if !v.is_null() => Precision::Exact(v),
                    _ => Precision::Absent,
                }
            };
            ColumnStatistics {
                null_count: c
                    .null_count
                    .and_then(|n| usize::try_from(n).ok())
                    .map_or(Precision::Absent, Precision::Exact),
                min_value: value(0, c.min_exact),
                max_value: value(1, c.max_exact),
                ..ColumnStatistics::new_unknown()
            }
        })
        .collect();
    Statistics {
        num_rows: rows.map_or(Precision::Absent, Precision::Exact),
        total_byte_size: Precision::Absent,
        column_statistics: columns,
    }
}
