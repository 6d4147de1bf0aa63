//! The benchmark suites and their scenarios, in ONE place.
//!
//! Each scenario carries its SQL (what `ringscan query`, DuckDB and Polars run) and the
//! same query as a [`Shape`] (what the in-memory baseline runs). `ringscan bench <suite>
//! --list-json` prints a [`SuiteSpec`], which the Python compare script reads, so every
//! engine runs exactly these queries.
//!
//! Thresholds that depend on the data (the close price that keeps 10% of the bars, a key
//! that exists) are [`Params`] derived from the generated files, never guessed.

use std::collections::BTreeMap;
use std::path::Path;

use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate};
use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::latency::nearest_rank;
use crate::load::read_column_f64;

/// The suites of `ringscan bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuiteKind {
    /// Seed 000: ohlcv, filters of 90/50/10% selectivity, no filter, AND, a cache hit.
    Pushdown,
    /// Seed 001: `wide`, 15 page/filter/sort shapes and a full load.
    Pages,
    /// Seed 002: the generator's rows/s writing `contacts`.
    Generate,
    /// Seed 003: point lookups on a key column, cold and hot.
    Lookup,
    /// Seed 004: `SELECT DISTINCT` of one column, cold and warm.
    Distinct,
    /// The shared-memory ring next to memcpy.
    Ring,
}

impl SuiteKind {
    /// Every suite, in the order `all` runs them.
    pub const ALL: [SuiteKind; 6] = [
        SuiteKind::Pushdown,
        SuiteKind::Pages,
        SuiteKind::Lookup,
        SuiteKind::Distinct,
        SuiteKind::Generate,
        SuiteKind::Ring,
    ];

    /// The suite's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pushdown => "pushdown",
            Self::Pages => "pages",
            Self::Generate => "generate",
            Self::Lookup => "lookup",
            Self::Distinct => "distinct",
            Self::Ring => "ring",
        }
    }

    /// The suite named `name`.
    pub fn from_name(name: &str) -> Result<Self, BenchError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| BenchError::Unknown {
                kind: "suite",
                name: name.to_owned(),
            })
    }
}

/// The data a suite runs on: one table, written by `ringscan generate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataSpec {
    /// Generator dataset (`ohlcv`, `wide`, `contacts`); also the table's name.
    pub dataset: String,
    /// Rows to write.
    pub rows: u64,
    /// Generator seed.
    pub seed: u64,
    /// `ohlcv` symbols.
    pub symbols: usize,
    /// Rows per row group (seed 000: 10 row groups of 10,000 bars).
    pub row_group_rows: usize,
    /// Rows per data page.
    pub page_rows: usize,
}

impl DataSpec {
    /// The table's name in SQL (`FROM ohlcv`), and its directory under the suite's data
    /// directory.
    pub fn table(&self) -> &str {
        &self.dataset
    }
}

/// The seed every suite generates with.
pub const BENCH_SEED: u64 = 7;

/// The data of `suite`, with `rows` overriding the default row count (for quick runs).
pub fn data_spec(suite: SuiteKind, rows: Option<u64>) -> Option<DataSpec> {
    let spec = |dataset: &str, default_rows: u64, symbols, row_group_rows, page_rows| DataSpec {
        dataset: dataset.to_owned(),
        rows: rows.unwrap_or(default_rows),
        seed: BENCH_SEED,
        symbols,
        row_group_rows,
        page_rows,
    };
    match suite {
        // 100,000 bars of one symbol in 10 row groups, as in seed 000.
        SuiteKind::Pushdown => Some(spec("ohlcv", 100_000, 1, 10_000, 1_000)),
        SuiteKind::Pages => Some(spec("wide", 357_814, 1, 32_768, 4_096)),
        SuiteKind::Lookup => Some(spec("wide", 1_000_000, 1, 65_536, 4_096)),
        SuiteKind::Distinct => Some(spec("ohlcv", 10_000_000, 500, 131_072, 10_000)),
        SuiteKind::Generate => Some(spec("contacts", 10_000_000, 1, 131_072, 10_000)),
        SuiteKind::Ring => None,
    }
}

/// Numbers derived from a suite's data (quantiles, keys), by name.
pub type Params = BTreeMap<String, f64>;

/// What a query returns, past filter, sort and page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// The rows themselves.
    Rows,
    /// `SELECT count(*)`: one row.
    CountStar,
    /// `SELECT DISTINCT column`: one row per distinct value (NULL is one value).
    Distinct(String),
}

/// One sort key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortKey {
    /// Column name.
    pub column: String,
    /// Descending order.
    pub descending: bool,
}

/// A scenario as the baseline runs it: load the projected columns of every file, then
/// filter, sort and page in memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// The table (a directory of Parquet files under the data directory).
    pub table: String,
    /// Output columns; `None` is every column.
    pub projection: Option<Vec<String>>,
    /// WHERE.
    pub filter: Option<Predicate>,
    /// ORDER BY (NULLs last ascending, first descending, as DuckDB).
    pub sort: Vec<SortKey>,
    /// OFFSET.
    pub offset: usize,
    /// LIMIT.
    pub limit: Option<usize>,
    /// What is returned.
    pub output: Output,
}

/// One query of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Short name (`filter_90`), unique in its suite.
    pub name: String,
    /// What it stands for, for tables.
    pub description: String,
    /// The SQL every SQL engine runs (the table is named as in [`Shape::table`]).
    pub sql: String,
    /// The same query for the in-memory baseline.
    pub shape: Shape,
    /// Measure cold: fresh daemon / fresh metadata before every run.
    pub cold: bool,
    /// Leave ringscan's result cache on (the cache-hit scenario); otherwise ringscan runs
    /// with `--no-cache`.
    pub result_cache: bool,
}

/// Against what a target ratio is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Versus {
    /// ringscan p50 / DuckDB p50.
    Duckdb,
    /// ringscan p50 / in-memory baseline p50.
    Baseline,
    /// ringscan p50 itself, in microseconds.
    AbsoluteUs,
    /// ringscan peak RSS, in MiB.
    PeakRssMib,
}

/// A target of issue 7: `scenario`'s figure against `versus` must be at most `max`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Scenario name.
    pub scenario: String,
    /// What the figure is relative to.
    pub versus: Versus,
    /// The largest passing value.
    pub max: f64,
    /// Where the target comes from.
    pub why: String,
}

/// Everything the compare script needs to run a suite (`--list-json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteSpec {
    /// The suite.
    pub suite: SuiteKind,
    /// The suite's data directory (pass as `ringscan query --data`).
    pub data_dir: String,
    /// Its data, when it has any.
    pub data: Option<DataSpec>,
    /// Derived numbers.
    pub params: Params,
    /// The queries.
    pub scenarios: Vec<Scenario>,
    /// The targets.
    pub targets: Vec<Target>,
}

/// Reads `suite`'s data under `suite_dir` for the numbers its scenarios need.
pub fn derive_params(suite: SuiteKind, suite_dir: &Path) -> Result<Params, BenchError> {
    let mut params = Params::new();
    let quantiles = |column: &str, table: &str, qs: &[(&str, f64)], params: &mut Params| {
        let mut values = read_column_f64(suite_dir, table, column)?;
        values.sort_by(f64::total_cmp);
        for (name, q) in qs {
            params.insert((*name).to_owned(), round2(nearest_rank(&values, *q)));
        }
        if let (Some(min), Some(max)) = (values.first(), values.last()) {
            params.insert(format!("{column}_min"), *min);
            params.insert(format!("{column}_max"), *max);
        }
        Ok::<(), BenchError>(())
    };
    match suite {
        SuiteKind::Pushdown => {
            quantiles(
                "close",
                "ohlcv",
                &[
                    ("close_q10", 0.10),
                    ("close_q50", 0.50),
                    ("close_q90", 0.90),
                ],
                &mut params,
            )?;
            quantiles("volume", "ohlcv", &[("volume_q50", 0.50)], &mut params)?;
        }
        SuiteKind::Pages => {
            quantiles(
                "total",
                "wide",
                &[
                    ("total_q25", 0.25),
                    ("total_q50", 0.50),
                    ("total_q75", 0.75),
                ],
                &mut params,
            )?;
            quantiles("order_date", "wide", &[], &mut params)?;
        }
        SuiteKind::Lookup => quantiles("order_id", "wide", &[], &mut params)?,
        SuiteKind::Distinct | SuiteKind::Generate | SuiteKind::Ring => {}
    }
    Ok(params)
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn param(params: &Params, name: &str) -> f64 {
    params.get(name).copied().unwrap_or(0.0)
}

pub use ringscan_values::date::format_date;

/// A typed SQL literal and the same value for the predicate tree.
#[derive(Debug, Clone)]
struct Lit {
    sql: String,
    value: Literal,
}

fn price(v: f64) -> Lit {
    let sql = format!("{v:.2}");
    let value = Literal::Float(sql.parse().unwrap_or(v));
    Lit { sql, value }
}

fn int(v: i64) -> Lit {
    Lit {
        sql: v.to_string(),
        value: Literal::Int(v),
    }
}

fn text(v: &str) -> Lit {
    Lit {
        sql: format!("'{}'", v.replace('\'', "''")),
        value: Literal::Utf8(v.to_owned()),
    }
}

fn date(days: i32) -> Lit {
    Lit {
        sql: format!("DATE '{}'", format_date(days)),
        value: Literal::Date32(days),
    }
}

/// A filter written once, rendered to SQL and to the predicate tree.
#[derive(Debug, Clone)]
enum F {
    Cmp(&'static str, CmpOp, Lit),
    Between(&'static str, Lit, Lit),
    In(&'static str, Vec<Lit>),
    And(Vec<F>),
}

impl F {
    fn sql(&self) -> String {
        match self {
            F::Cmp(c, op, l) => {
                format!("{c} {} {}", op.sql(), l.sql)
            }
            F::Between(c, lo, hi) => format!("{c} BETWEEN {} AND {}", lo.sql, hi.sql),
            F::In(c, list) => {
                let items: Vec<&str> = list.iter().map(|l| l.sql.as_str()).collect();
                format!("{c} IN ({})", items.join(", "))
            }
            F::And(parts) => parts.iter().map(F::sql).collect::<Vec<_>>().join(" AND "),
        }
    }

    fn predicate(&self) -> Predicate {
        match self {
            F::Cmp(c, op, l) => Predicate::compare(c, *op, l.value.clone()),
            F::Between(c, lo, hi) => Predicate::Between {
                expr: Operand::Column((*c).to_owned()),
                low: lo.value.clone(),
                high: hi.value.clone(),
                negated: false,
            },
            F::In(c, list) => Predicate::InList {
                expr: Operand::Column((*c).to_owned()),
                list: list.iter().map(|l| l.value.clone()).collect(),
                negated: false,
            },
            F::And(parts) => Predicate::And(parts.iter().map(F::predicate).collect()),
        }
    }
}

/// A query written once: builds both the SQL and the [`Shape`].
#[derive(Debug, Clone)]
struct Q {
    table: &'static str,
    output: Output,
    filter: Option<F>,
    sort: Vec<(&'static str, bool)>,
    offset: usize,
    limit: Option<usize>,
}

impl Q {
    fn rows(table: &'static str) -> Self {
        Self {
            table,
            output: Output::Rows,
            filter: None,
            sort: Vec::new(),
            offset: 0,
            limit: None,
        }
    }

    fn filter(mut self, f: F) -> Self {
        self.filter = Some(f);
        self
    }

    fn order_by(mut self, column: &'static str, descending: bool) -> Self {
        self.sort.push((column, descending));
        self
    }

    fn page(mut self, limit: usize, offset: usize) -> Self {
        self.limit = Some(limit);
        self.offset = offset;
        self
    }

    fn sql(&self) -> String {
        let select = match &self.output {
            Output::Rows => "SELECT *".to_owned(),
            Output::CountStar => "SELECT count(*)".to_owned(),
            Output::Distinct(c) => format!("SELECT DISTINCT {c}"),
        };
        let mut sql = format!("{select} FROM {}", self.table);
        if let Some(f) = &self.filter {
            sql.push_str(" WHERE ");
            sql.push_str(&f.sql());
        }
        if !self.sort.is_empty() {
            let keys: Vec<String> = self
                .sort
                .iter()
                .map(|(c, d)| {
                    if *d {
                        format!("{c} DESC")
                    } else {
                        (*c).to_owned()
                    }
                })
                .collect();
            sql.push_str(" ORDER BY ");
            sql.push_str(&keys.join(", "));
        }
        if let Some(limit) = self.limit {
            sql.push_str(&format!(" LIMIT {limit}"));
        }
        if self.offset > 0 {
            sql.push_str(&format!(" OFFSET {}", self.offset));
        }
        sql
    }

    fn shape(&self) -> Shape {
        Shape {
            table: self.table.to_owned(),
            projection: None,
            filter: self.filter.as_ref().map(F::predicate),
            sort: self
                .sort
                .iter()
                .map(|(c, d)| SortKey {
                    column: (*c).to_owned(),
                    descending: *d,
                })
                .collect(),
            offset: self.offset,
            limit: self.limit,
            output: self.output.clone(),
        }
    }

    fn scenario(self, name: &str, description: &str) -> Scenario {
        Scenario {
            name: name.to_owned(),
            description: description.to_owned(),
            sql: self.sql(),
            shape: self.shape(),
            cold: false,
            result_cache: false,
        }
    }
}

/// Rows per page in the `pages` suite.
pub const PAGE_ROWS: usize = 50;

/// The scenarios of `suite` over data described by `params`.
pub fn scenarios(suite: SuiteKind, params: &Params) -> Vec<Scenario> {
    let p = |name: &str| param(params, name);
    match suite {
        SuiteKind::Pushdown => {
            let close_ge = |q: &str| F::Cmp("close", CmpOp::GtEq, price(p(q)));
            let ohlcv = || Q::rows("ohlcv");
            let mut cache_hit = ohlcv()
                .filter(close_ge("close_q90"))
                .scenario("cache_hit", "90% filtered, repeated: a result-cache hit");
            cache_hit.result_cache = true;
            vec![
                ohlcv()
                    .filter(close_ge("close_q90"))
                    .scenario("filter_90", "close >= p90: 90% of bars filtered out"),
                ohlcv()
                    .filter(close_ge("close_q50"))
                    .scenario("filter_50", "close >= p50: 50% filtered out"),
                ohlcv()
                    .filter(close_ge("close_q10"))
                    .scenario("filter_10", "close >= p10: 10% filtered out"),
                ohlcv().scenario("no_filter", "every bar"),
                ohlcv()
                    .filter(F::And(vec![
                        close_ge("close_q50"),
                        F::Cmp("volume", CmpOp::GtEq, int(p("volume_q50") as i64)),
                    ]))
                    .scenario(
                        "and_2",
                        "close >= p50 AND volume >= p50: about 75% filtered",
                    ),
                cache_hit,
            ]
        }
        SuiteKind::Pages => pages(params),
        SuiteKind::Lookup => {
            let (min, max) = (p("order_id_min") as i64, p("order_id_max") as i64);
            // A key in the middle of the table, off any row-group boundary.
            let key = min + (max - min) / 2 + 17;
            let q = || Q::rows("wide").filter(F::Cmp("order_id", CmpOp::Eq, int(key.min(max))));
            let mut cold = q().scenario("point_cold", "order_id = k, fresh daemon");
            cold.cold = true;
            vec![q().scenario("point_hot", "order_id = k, warm daemon"), cold]
        }
        SuiteKind::Distinct => {
            let q = || Q {
                output: Output::Distinct("symbol".to_owned()),
                ..Q::rows("ohlcv")
            };
            let mut cold = q().scenario("distinct_cold", "SELECT DISTINCT symbol, fresh daemon");
            cold.cold = true;
            vec![
                cold,
                q().scenario("distinct_warm", "SELECT DISTINCT symbol, warm daemon"),
            ]
        }
        SuiteKind::Generate | SuiteKind::Ring => Vec::new(),
    }
}

fn pages(params: &Params) -> Vec<Scenario> {
    let p = |name: &str| param(params, name);
    let wide = || Q::rows("wide");
    let (day_min, day_max) = (p("order_date_min") as i32, p("order_date_max") as i32);
    let span = (day_max - day_min).max(1);
    let mid = day_min + span / 2;
    let status = || F::Cmp("status", CmpOp::Eq, text("shipped"));
    let three = || {
        F::And(vec![
            status(),
            F::Cmp("total", CmpOp::GtEq, price(p("total_q50"))),
            F::Cmp("order_date", CmpOp::GtEq, date(mid)),
        ])
    };
    let n = PAGE_ROWS;
    vec![
        wide()
            .page(n, 0)
            .scenario("first_page", "first page, no filter"),
        wide()
            .page(n, 9 * n)
            .scenario("page_10", "page 10, no filter"),
        wide()
            .page(n, 300_000)
            .scenario("deep_page", "OFFSET 300000, no filter"),
        wide()
            .filter(F::Cmp("status", CmpOp::Eq, text("cancelled")))
            .page(n, 0)
            .scenario("eq_string", "status = 'cancelled' (low-cardinality string)"),
        wide()
            .filter(F::Between(
                "total",
                price(p("total_q25")),
                price(p("total_q75")),
            ))
            .page(n, 0)
            .scenario("numeric_range", "total BETWEEN p25 AND p75"),
        wide()
            .filter(F::Between(
                "order_date",
                date(mid),
                date(mid + (span / 10).max(1)),
            ))
            .page(n, 0)
            .scenario("date_range", "order_date in a tenth of the range"),
        wide()
            .filter(F::In("country", vec![text("DE"), text("FR"), text("JP")]))
            .page(n, 0)
            .scenario("in_list", "country IN (3 values)"),
        wide()
            .filter(three())
            .page(n, 0)
            .scenario("three_filters", "status, total and date filters ANDed"),
        wide()
            .filter(three())
            .page(n, 2_000)
            .scenario("three_filters_deep", "three filters, OFFSET 2000"),
        wide()
            .order_by("total", true)
            .order_by("order_id", false)
            .page(n, 0)
            .scenario("sort_numeric_desc", "ORDER BY total DESC"),
        wide()
            .order_by("order_date", false)
            .order_by("order_id", false)
            .page(n, 4 * n)
            .scenario("sort_date_page_5", "ORDER BY order_date, page 5"),
        wide()
            .filter(F::Cmp("category", CmpOp::Eq, text("books")))
            .order_by("total", true)
            .order_by("order_id", false)
            .page(n, 0)
            .scenario("filter_sort", "category = 'books' ORDER BY total DESC"),
        wide()
            .filter(three())
            .order_by("total", true)
            .order_by("order_id", false)
            .page(n, 2 * n)
            .scenario("all_filters_sort_page", "three filters, sorted, page 3"),
        Q {
            output: Output::CountStar,
            ..wide().filter(three())
        }
        .scenario("count_filtered", "count(*) with three filters"),
        wide().scenario("full_load", "every row and column"),
    ]
}

/// The targets for `suite`.
pub fn targets(suite: SuiteKind) -> Vec<Target> {
    let t = |scenario: &str, versus, max, why: &str| Target {
        scenario: scenario.to_owned(),
        versus,
        max,
        why: why.to_owned(),
    };
    match suite {
        SuiteKind::Pushdown => vec![
            t(
                "filter_90",
                Versus::Duckdb,
                0.25,
                "90%-filtered p50 <= 0.25x DuckDB",
            ),
            t(
                "no_filter",
                Versus::Duckdb,
                1.0,
                "unfiltered p50 <= 1.0x DuckDB",
            ),
            t(
                "filter_90",
                Versus::Baseline,
                1.0 / 10.4,
                "10.4x faster than in-memory (seed 000)",
            ),
            t(
                "filter_50",
                Versus::Baseline,
                1.0 / 3.8,
                "3.8x faster than in-memory (seed 000)",
            ),
            t(
                "filter_10",
                Versus::Baseline,
                1.0 / 2.6,
                "2.6x faster than in-memory (seed 000)",
            ),
        ],
        SuiteKind::Pages => {
            let mut out = Vec::new();
            for s in scenarios(SuiteKind::Pages, &Params::new()) {
                if s.name == "full_load" {
                    out.push(t(
                        &s.name,
                        Versus::Baseline,
                        1.0,
                        "full load not slower than in-memory",
                    ));
                } else {
                    out.push(t(
                        &s.name,
                        Versus::Duckdb,
                        0.5,
                        "every shape <= 0.5x DuckDB p50",
                    ));
                    out.push(t(
                        &s.name,
                        Versus::Baseline,
                        0.2,
                        "every shape >= 5x faster than in-memory",
                    ));
                    out.push(t(
                        &s.name,
                        Versus::PeakRssMib,
                        64.0,
                        "executor peak RSS < 64 MB",
                    ));
                }
            }
            out
        }
        SuiteKind::Lookup => vec![t(
            "point_hot",
            Versus::AbsoluteUs,
            100.0,
            "hot p50 < 100 us in-engine",
        )],
        SuiteKind::Distinct => vec![t(
            "distinct_cold",
            Versus::Duckdb,
            1.0,
            "cold <= 1.0x DuckDB",
        )],
        SuiteKind::Generate | SuiteKind::Ring => Vec::new(),
    }
}

/// The scenario named `name` of a list.
pub fn find<'a>(scenarios: &'a [Scenario], name: &str) -> Result<&'a Scenario, BenchError> {
    scenarios
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| BenchError::Unknown {
            kind: "scenario",
            name: name.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_as_iso() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(18_993), "2022-01-01");
        assert_eq!(format_date(19_724), "2024-01-02");
        assert_eq!(format_date(-1), "1969-12-31");
        assert_eq!(format_date(11_016), "2000-02-29");
    }

    #[test]
    fn pages_has_the_seed_s_fifteen_shapes_with_unique_names() {
        let all = scenarios(SuiteKind::Pages, &Params::new());
        assert_eq!(all.len(), 15);
        let mut names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 15);
    }

    #[test]
    fn sql_and_shape_say_the_same_thing() {
        let mut params = Params::new();
        params.insert("close_q90".into(), 480.5);
        params.insert("close_q50".into(), 450.0);
        params.insert("close_q10".into(), 420.0);
        params.insert("volume_q50".into(), 5000.0);
        let s = scenarios(SuiteKind::Pushdown, &params);
        let f90 = find(&s, "filter_90").expect("filter_90");
        assert_eq!(f90.sql, "SELECT * FROM ohlcv WHERE close >= 480.50");
        assert_eq!(
            f90.shape.filter,
            Some(Predicate::compare(
                "close",
                CmpOp::GtEq,
                Literal::Float(480.5)
            ))
        );
        let and2 = find(&s, "and_2").expect("and_2");
        assert_eq!(
            and2.sql,
            "SELECT * FROM ohlcv WHERE close >= 450.00 AND volume >= 5000"
        );
        let pages = scenarios(SuiteKind::Pages, &Params::new());
        let sorted = find(&pages, "all_filters_sort_page").expect("shape");
        assert!(sorted
            .sql
            .ends_with("ORDER BY total DESC, order_id LIMIT 50 OFFSET 100"));
        assert_eq!(sorted.shape.offset, 100);
        assert_eq!(sorted.shape.limit, Some(50));
        assert!(find(&pages, "nope").is_err());
    }

    #[test]
    fn suite_names_round_trip() {
        for k in SuiteKind::ALL {
            assert_eq!(SuiteKind::from_name(k.name()).ok(), Some(k));
        }
        assert!(SuiteKind::from_name("nope").is_err());
    }
}
