//! Answering `count(*)`, `count(x)`, `min(x)` and `max(x)` from Parquet statistics.
//!
//! [`statistics_aggregates`] says whether a plan's shape allows it: one ungrouped
//! aggregation over plain columns with no WHERE, GROUP BY, HAVING or DISTINCT (the
//! select list may compute over the aggregates; ORDER BY / LIMIT run on the one row).
//! [`aggregate_row`] then builds the aggregation's output row from the daemon's
//! [`TableStatistics`], or says which aggregate the statistics cannot answer exactly,
//! in which case the session scans as usual.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use ringscan_ipc::msg::TableStatistics;

use crate::exec::normalize_float;
use crate::expr::{AggFunc, Expr};
use crate::pushdown::{Operator, PhysicalPlan};

/// One aggregate call the statistics may answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsAggregate {
    /// `count(*)`: the row count.
    CountStar,
    /// `count(column)`: rows minus NULLs.
    Count(String),
    /// `min(column)`.
    Min(String),
    /// `max(column)`.
    Max(String),
}

impl StatsAggregate {
    /// The column read, if any.
    pub fn column(&self) -> Option<&str> {
        match self {
            Self::CountStar => None,
            Self::Count(c) | Self::Min(c) | Self::Max(c) => Some(c),
        }
    }
}

impl std::fmt::Display for StatsAggregate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::CountStar => write!(f, "count"),
            Self::Count(c) => write!(f, "count({c})"),
            Self::Min(c) => write!(f, "min({c})"),
            Self::Max(c) => write!(f, "max({c})"),
        }
    }
}

/// The plan's aggregates, in the aggregation's output order, when its shape can be
/// answered from statistics; else why not.
pub fn statistics_aggregates(plan: &PhysicalPlan) -> Result<Vec<StatsAggregate>, String> {
    let logical = &plan.logical;
    if logical.aggregates.is_empty() {
        return Err("no aggregate".into());
    }
    if logical.filter.is_some() {
        return Err("the query has a WHERE clause".into());
    }
    if !logical.group_by.is_empty() {
        return Err("the query has GROUP BY".into());
    }
    if logical.having.is_some() {
        return Err("the query has HAVING".into());
    }
    if logical.distinct {
        return Err("the query has SELECT DISTINCT".into());
    }
    if !matches!(plan.operators.first(), Some(Operator::Aggregate { .. })) {
        return Err("the aggregation is not the first operator".into());
    }
    let mut out = Vec::with_capacity(logical.aggregates.len());
    for a in &logical.aggregates {
        let Expr::Aggregate {
            func,
            arg,
            distinct,
        } = a
        else {
            return Err(format!("{a} is not an aggregate call"));
        };
        if *distinct {
            return Err(format!("{a} is DISTINCT"));
        }
        let column = match arg.as_deref() {
            None => None,
            Some(Expr::Column(c)) => Some(c.clone()),
            Some(_) => return Err(format!("{a} is not over a plain column")),
        };
        out.push(match (func, column) {
            (AggFunc::Count, None) => StatsAggregate::CountStar,
            (AggFunc::Count, Some(c)) => StatsAggregate::Count(c),
            (AggFunc::Min, Some(c)) => StatsAggregate::Min(c),
            (AggFunc::Max, Some(c)) => StatsAggregate::Max(c),
            _ => return Err(format!("{a} cannot come from statistics")),
        });
    }
    Ok(out)
}

/// The distinct columns `aggregates` read, in first-use order.
pub fn statistics_columns(aggregates: &[StatsAggregate]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in aggregates.iter().filter_map(StatsAggregate::column) {
        if !out.iter().any(|x| x == c) {
            out.push(c.to_owned());
        }
    }
    out
}

/// The aggregation's output row (of `schema`, the aggregate's output schema) from
/// `stats` (answered for [`statistics_columns`] of `aggregates`), or why the statistics
/// do not answer it exactly.
pub fn aggregate_row(
    aggregates: &[StatsAggregate],
    stats: &TableStatistics,
    schema: &SchemaRef,
) -> Result<RecordBatch, String> {
    if schema.fields().len() != aggregates.len() {
        return Err("the aggregate row has another shape".into());
    }
    let values = stats
        .min_max()
        .map_err(|e| format!("unreadable statistics values: {e}"))?;
    let column = |name: &str| {
        stats
            .columns
            .iter()
            .position(|c| c.name == name)
            .map(|i| (&stats.columns[i], &values[i]))
            .ok_or_else(|| format!("no statistics for {name}"))
    };
    let rows = i64::try_from(stats.row_count).map_err(|_| "row count overflows".to_owned())?;
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(aggregates.len());
    for (agg, field) in aggregates.iter().zip(schema.fields()) {
        let array: ArrayRef = match agg {
            StatsAggregate::CountStar => Arc::new(Int64Array::from(vec![rows])),
            StatsAggregate::Count(c) => {
                let (s, _) = column(c)?;
                let nulls = s
                    .null_count
                    .ok_or_else(|| format!("{agg}: a row group has no null count"))?;
                let nulls = i64::try_from(nulls).map_err(|_| "null count overflows".to_owned())?;
                if nulls > rows {
                    return Err(format!("{agg}: more NULLs than rows"));
                }
                Arc::new(Int64Array::from(vec![rows - nulls]))
            }
            StatsAggregate::Min(c) | StatsAggregate::Max(c) => {
                let (s, v) = column(c)?;
                let is_max = matches!(agg, StatsAggregate::Max(_));
                let (exact, why) = if is_max {
                    (s.max_exact, &s.max_inexact_reason)
                } else {
                    (s.min_exact, &s.min_inexact_reason)
                };
                if !exact {
                    let why = why.as_deref().unwrap_or("not exact");
                    return Err(format!("{agg}: {why}"));
                }
                if matches!(v.data_type(), DataType::Float32 | DataType::Float64) && is_max {
                    return Err(format!("{agg}: a float max may be NaN"));
                }
                normalize_float(v.slice(usize::from(is_max), 1))
            }
        };
        if array.data_type() != field.data_type() {
            return Err(format!(
                "{agg}: statistics are {}, the aggregate is {}",
                array.data_type(),
                field.data_type()
            ));
        }
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::clone(schema), arrays).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    use arrow_array::{Float64Array, StringArray};
    use arrow_schema::{Field, Schema};
    use ringscan_ipc::msg::{encode_min_max, ColumnStatistics};

    use super::*;
    use crate::{MemoryCatalog, Planner};

    fn planner() -> Planner<MemoryCatalog> {
        let schema = Schema::new(vec![
            Field::new("i", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        let mut catalog = MemoryCatalog::default();
        catalog.insert("t", Arc::new(schema));
        Planner::new(catalog, 1 << 20)
    }

    #[test]
    fn only_plain_ungrouped_aggregates_are_eligible() {
        let mut p = planner();
        let ok = p
            .plan("SELECT count(*), min(i) + 1, max(s), count(f) FROM t ORDER BY 1 LIMIT 3")
            .unwrap();
        assert_eq!(
            statistics_aggregates(&ok).unwrap(),
            vec![
                StatsAggregate::CountStar,
                StatsAggregate::Min("i".into()),
                StatsAggregate::Max("s".into()),
                StatsAggregate::Count("f".into()),
            ]
        );
        for (sql, why) in [
            ("SELECT i FROM t", "no aggregate"),
            ("SELECT count(*) FROM t WHERE i > 1", "WHERE"),
            ("SELECT i, count(*) FROM t GROUP BY i", "GROUP BY"),
            ("SELECT count(*) FROM t HAVING count(*) > 1", "HAVING"),
            ("SELECT sum(i) FROM t", "cannot come from statistics"),
            ("SELECT min(i + 1) FROM t", "plain column"),
            ("SELECT count(DISTINCT i) FROM t", "DISTINCT"),
        ] {
            let plan = p.plan(sql).unwrap();
            let err = statistics_aggregates(&plan).unwrap_err();
            assert!(err.contains(why), "{sql}: {err}");
        }
    }

    fn stats(min_exact: bool, max_exact: bool, nulls: Option<u64>) -> TableStatistics {
        let columns = vec![
            ColumnStatistics {
                name: "f".into(),
                null_count: nulls,
                min_exact,
                max_exact,
                min_inexact_reason: None,
                max_inexact_reason: None,
            },
            ColumnStatistics {
                name: "s".into(),
                null_count: nulls,
                min_exact,
                max_exact,
                min_inexact_reason: None,
                max_inexact_reason: None,
            },
        ];
        let values: Vec<ArrayRef> = vec![
            Arc::new(Float64Array::from(vec![-0.0, 9.0])),
            Arc::new(StringArray::from(vec![Some("a"), Some("z")])),
        ];
        TableStatistics {
            row_count: 10,
            file_count: 1,
            row_group_count: 2,
            columns,
            values_ipc: encode_min_max(&["f".into(), "s".into()], &values).unwrap(),
            files: vec![],
            dirs: vec![],
        }
    }

    #[test]
    fn rows_are_built_only_from_exact_statistics() {
        let aggs = vec![
            StatsAggregate::CountStar,
            StatsAggregate::Count("f".into()),
            StatsAggregate::Min("f".into()),
            StatsAggregate::Max("s".into()),
        ];
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Int64, true),
            Field::new("c", DataType::Float64, true),
            Field::new("d", DataType::Utf8, true),
        ]));
        let row = aggregate_row(&aggs, &stats(true, true, Some(3)), &schema).unwrap();
        assert_eq!(row.column(0).as_primitive::<Int64Type>().value(0), 10);
        assert_eq!(row.column(1).as_primitive::<Int64Type>().value(0), 7);
        let min = row.column(2).as_primitive::<Float64Type>().value(0);
        assert!(min == 0.0 && min.is_sign_positive(), "-0.0 normalized");
        assert_eq!(row.column(3).as_string::<i32>().value(0), "z");
        assert!(aggregate_row(&aggs, &stats(false, true, Some(3)), &schema).is_err());
        assert!(aggregate_row(&aggs, &stats(true, false, Some(3)), &schema).is_err());
        assert!(aggregate_row(&aggs, &stats(true, true, None), &schema).is_err());
        let float_max = [StatsAggregate::Max("f".into())];
        let one: SchemaRef = Arc::new(Schema::new(vec![Field::new("m", DataType::Float64, true)]));
        let err = aggregate_row(&float_max, &stats(true, true, Some(0)), &one).unwrap_err();
        assert!(err.contains("NaN"), "{err}");
        let wrong: SchemaRef = Arc::new(Schema::new(vec![Field::new("m", DataType::Int32, true)]));
        let min_f = [StatsAggregate::Min("f".into())];
        assert!(aggregate_row(&min_f, &stats(true, true, Some(0)), &wrong).is_err());
    }
}
