//! `ringscan-executor`: parses SQL, plans what to push to the IO daemon, consumes the
//! ring and finishes the query.
//!
//! This first part is the SQL front end and the planner:
//! - [`parse_sql`] turns text into an unbound [`SelectStatement`] of the supported subset
//!   (`SELECT [DISTINCT] ... FROM table|'glob' [WHERE] [GROUP BY] [HAVING] [ORDER BY]
//!   [LIMIT] [OFFSET]`, and `EXPLAIN` of it), refusing anything else by name;
//! - [`bind`] checks it against the table's Arrow schema (columns, types, grouping) and
//!   gives a typed [`LogicalPlan`];
//! - [`physical_plan`] splits that between the daemon (a [`ScanRequest`]: projection,
//!   pushed predicate, pushed limit) and executor [`Operator`]s; [`PhysicalPlan::explain`]
//!   renders it;
//! - [`Planner`] ties the steps to a [`Catalog`] and a byte-bounded [`PlanCache`].
//!
//! ```
//! use std::sync::Arc;
//! use arrow_schema::{DataType, Field, Schema};
//! use ringscan_executor::{MemoryCatalog, Planner};
//!
//! let schema = Schema::new(vec![
//!     Field::new("symbol", DataType::Utf8, false),
//!     Field::new("close", DataType::Float64, false),
//! ]);
//! let mut catalog = MemoryCatalog::default();
//! catalog.insert("ohlcv", Arc::new(schema));
//! let mut planner = Planner::new(catalog, 1 << 20);
//! let plan = planner.plan("SELECT symbol FROM ohlcv WHERE close > 450 LIMIT 10").unwrap();
//! assert_eq!(plan.scan.limit, Some(10));
//! assert!(plan.explain().contains("pushed predicate: (close > 450)"));
//! let err = planner.plan("SELECT upper(symbol) FROM ohlcv").unwrap_err();
//! assert_eq!(err.to_string(), "unsupported: function upper");
//! ```
#![forbid(unsafe_code)]

mod bind;
pub mod builder;
mod cache;
pub mod engine;
mod error;
mod exec;
mod expr;
pub mod format;
mod pushdown;
mod result_cache;
pub mod session;
mod sql;
mod sql_terms;
mod stats;
mod temporal;
mod types;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::SchemaRef;
pub use ringscan_ipc::msg::{Predicate, ScanRequest, ScanSource};

pub use bind::{bind, LogicalPlan, OutputColumn, SortKey};
pub use cache::{ByteLru, CacheStats, PlanCache};
pub use error::PlanError;
pub use exec::{execute, owned_copy, scan_schema, ExecError, Execution, Flow, QueryResult};
pub use expr::{AggFunc, BinaryOp, Expr, ScalarValue, TruncUnit};
pub use pushdown::{format_predicate, physical_plan, Operator, PhysicalPlan};
pub use result_cache::{DataVersion, ResultCache, ResultKey};
pub use sql::{parse_sql, OrderItem, SelectItem, SelectStatement};
pub use stats::{aggregate_row, statistics_aggregates, statistics_columns, StatsAggregate};

/// Where table and file schemas come from.
pub trait Catalog {
    /// The schema of `source`, or `None` when it does not exist.
    fn schema(&self, source: &ScanSource) -> Option<SchemaRef>;
}

/// A catalog of named tables held in memory (tests, embedding). Files are unknown.
#[derive(Debug, Default, Clone)]
pub struct MemoryCatalog {
    tables: HashMap<String, SchemaRef>,
}

impl MemoryCatalog {
    /// Registers (or replaces) `name`.
    pub fn insert(&mut self, name: &str, schema: SchemaRef) {
        self.tables.insert(name.to_ascii_lowercase(), schema);
    }
}

impl Catalog for MemoryCatalog {
    fn schema(&self, source: &ScanSource) -> Option<SchemaRef> {
        match source {
            ScanSource::Table { name } => self.tables.get(&name.to_ascii_lowercase()).cloned(),
            ScanSource::Files { .. } => None,
        }
    }
}

/// Parses, binds and splits `sql` against `catalog`, without caching.
pub fn plan_sql(sql: &str, catalog: &dyn Catalog) -> Result<PhysicalPlan, PlanError> {
    let stmt = parse_sql(sql)?;
    let schema = catalog
        .schema(&stmt.source)
        .ok_or_else(|| PlanError::UnknownTable {
            name: stmt.source_name.clone(),
        })?;
    Ok(physical_plan(bind(&stmt, schema)?))
}

/// Plans SQL through a plan cache keyed by the SQL text.
#[derive(Debug)]
pub struct Planner<C> {
    catalog: C,
    cache: PlanCache,
}

impl<C: Catalog> Planner<C> {
    /// A planner over `catalog` whose cache holds at most `cache_capacity_bytes`.
    pub fn new(catalog: C, cache_capacity_bytes: usize) -> Self {
        Self {
            catalog,
            cache: PlanCache::new(cache_capacity_bytes),
        }
    }

    /// The cached plan for `sql`, or a new one (errors are not cached).
    pub fn plan(&mut self, sql: &str) -> Result<Arc<PhysicalPlan>, PlanError> {
        let key = sql.to_owned();
        if let Some(plan) = self.cache.get(&key) {
            return Ok(plan);
        }
        let plan = Arc::new(plan_sql(sql, &self.catalog)?);
        let size_bytes = plan.approx_size_bytes() + key.len();
        self.cache.insert(key, plan.clone(), size_bytes);
        Ok(plan)
    }

    /// Cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Drops every cached plan (call when a schema changes).
    pub fn invalidate(&mut self) {
        self.cache.clear();
    }

    /// The catalog.
    pub fn catalog(&self) -> &C {
        &self.catalog
    }
}
