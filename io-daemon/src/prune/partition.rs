//! Partition pruning: hive-style `key=value` directories between the table root and a file.
//!
//! Every row of a file under `year=2024/` has `year = 2024`, so the partition values are a
//! one-value range per column, typed as the table's partition columns are typed
//! ([`crate::hive`]): they compare with literals of that type under the same rules as
//! statistics do. A text value compared with a literal of another type is parsed as that
//! type, and a value that does not parse makes the comparison "maybe".

use ringscan_ipc::scan_data::{CmpOp, Literal, Predicate};
use ringscan_values::date::parse_date;

use super::eval::{evaluate, Outcomes, Stats};
use super::range::{ColumnKind, ColumnRange, Scalar};
use super::Verdict;
use crate::hive::PartitionValue;
pub use crate::hive::{PartitionValues, HIVE_DEFAULT_PARTITION};

impl PartitionValues {
    /// Whether the file's rows can match `pred`, judging by partition values only.
    pub fn evaluate(&self, pred: &Predicate) -> Verdict {
        Verdict::from_can_be_true(evaluate(pred, self).can_be_true())
    }
}

fn one_value(kind: ColumnKind, scalar: Scalar) -> ColumnRange {
    ColumnRange {
        kind,
        min: Some(scalar.clone()),
        max: Some(scalar),
        null_count: Some(0),
        row_count: None,
        nan_count: Some(0),
    }
}

/// The one-value range of a typed partition value; `None` when nothing is known.
fn typed_range(value: &PartitionValue, lit: &Literal) -> Option<ColumnRange> {
    match value {
        PartitionValue::Int(v) => Some(one_value(
            ColumnKind::Int {
                min: i64::MIN.into(),
                max: i64::MAX.into(),
            },
            Scalar::Int((*v).into()),
        )),
        PartitionValue::Date(d) => Some(one_value(ColumnKind::Date32, Scalar::Int((*d).into()))),
        PartitionValue::Utf8(s) => value_range(s, lit),
        PartitionValue::Null | PartitionValue::Unknown => None,
    }
}

/// The one-value range of a partition value, typed after the literal it meets.
fn value_range(value: &str, lit: &Literal) -> Option<ColumnRange> {
    let (kind, scalar) = match lit {
        Literal::Utf8(_) => (ColumnKind::Utf8, Scalar::Bytes(value.as_bytes().to_vec())),
        Literal::Int(_) | Literal::UInt(_) => {
            let v: i128 = value.parse().ok()?;
            (
                ColumnKind::Int {
                    min: i128::MIN,
                    max: i128::MAX,
                },
                Scalar::Int(v),
            )
        }
        Literal::Float(_) => {
            let v: f64 = value.parse().ok()?;
            (ColumnKind::Float64, Scalar::Float(v))
        }
        Literal::Bool(_) => match value {
            "true" => (ColumnKind::Bool, Scalar::Bool(true)),
            "false" => (ColumnKind::Bool, Scalar::Bool(false)),
            _ => return None,
        },
        Literal::Date32(_) => (ColumnKind::Date32, Scalar::Int(parse_date(value)?.into())),
        Literal::TimestampMicros(_) | Literal::Null => return None,
    };
    let nan_count = match scalar {
        Scalar::Float(f) if f.is_nan() => return None,
        _ => Some(0),
    };
    Some(ColumnRange {
        kind,
        min: Some(scalar.clone()),
        max: Some(scalar),
        null_count: Some(0),
        row_count: None,
        nan_count,
    })
}

impl Stats for PartitionValues {
    fn compare(&self, column: &str, op: CmpOp, lit: &Literal) -> Outcomes {
        if *lit == Literal::Null {
            return Outcomes::NULL;
        }
        match self.value(column) {
            Some(PartitionValue::Null) => Outcomes::NULL,
            Some(value) => match typed_range(value, lit) {
                Some(range) => range.compare(op, lit),
                None => Outcomes::ALL,
            },
            None => Outcomes::ALL,
        }
    }

    fn is_null(&self, column: &str) -> Outcomes {
        match self.value(column) {
            Some(PartitionValue::Null) => Outcomes::TRUE,
            Some(PartitionValue::Unknown) | None => Outcomes::BOOL,
            Some(_) => Outcomes::FALSE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringscan_ipc::scan_data::Operand;

    fn eq(col: &str, lit: Literal) -> Predicate {
        Predicate::compare(col, CmpOp::Eq, lit)
    }

    #[test]
    fn parses_hive_directories() {
        let p = PartitionValues::from_relative_path("symbol=SPY/date=2024-01-02/part-0.parquet");
        assert_eq!(p.get("symbol"), Some("SPY"));
        assert_eq!(p.get("date"), Some("2024-01-02"));
        assert_eq!(p.get("part-0.parquet"), None);
        // The file name is never a partition, even with '='.
        let p = PartitionValues::from_relative_path("a=1/b=2.parquet");
        assert_eq!(p.get("b"), None);
        let p = PartitionValues::from_relative_path("misc/a%3Db=x%2Fy/f.parquet");
        assert_eq!(p.get("a=b"), Some("x/y"));
        let p = PartitionValues::from_relative_path("a=%ZZ/b=1/b=2/c=__HIVE_DEFAULT_PARTITION__/f");
        assert_eq!((p.get("a"), p.get("b"), p.get("c")), (None, None, None));
    }

    #[test]
    fn prunes_exact_strings_only() {
        let p = PartitionValues::from_relative_path("symbol=SPY/date=2024-01-02/f.parquet");
        assert_eq!(
            p.evaluate(&eq("symbol", Literal::Utf8("QQQ".into()))),
            Verdict::Never
        );
        assert_eq!(
            p.evaluate(&eq("symbol", Literal::Utf8("SPY".into()))),
            Verdict::Maybe
        );
        assert_eq!(
            p.evaluate(&eq("symbol", Literal::Utf8("spy".into()))),
            Verdict::Never
        );
        assert_eq!(
            p.evaluate(&eq("other", Literal::Utf8("x".into()))),
            Verdict::Maybe
        );
        assert_eq!(p.evaluate(&eq("symbol", Literal::Null)), Verdict::Never);
        let not_null = Predicate::IsNull {
            expr: Operand::Column("symbol".into()),
            negated: false,
        };
        assert_eq!(p.evaluate(&not_null), Verdict::Never);
        let null_marker =
            PartitionValues::from_relative_path("symbol=__HIVE_DEFAULT_PARTITION__/f");
        assert_eq!(null_marker.evaluate(&not_null), Verdict::Maybe);
        // Hive's marker is NULL (as in DuckDB): no comparison holds for it.
        assert_eq!(
            null_marker.evaluate(&eq("symbol", Literal::Utf8("x".into()))),
            Verdict::Never
        );
    }

    /// `WHERE year = 2024` and `WHERE day >= DATE '2024-01-01'` prune the directories of
    /// other years and earlier days, whatever the text of the directory (`2024-1-5`).
    #[test]
    fn typed_partitions_prune_by_value() {
        use crate::hive::PartitionTypes;
        let paths = [
            "year=2023/day=2023-12-31/f.parquet",
            "year=2024/day=2024-1-5/f.parquet",
            "year=__HIVE_DEFAULT_PARTITION__/day=NULL/f.parquet",
        ];
        let types = PartitionTypes::infer(paths);
        let files: Vec<PartitionValues> = paths
            .iter()
            .map(|p| PartitionValues::typed(p, &types))
            .collect();
        let kept = |pred: &Predicate| -> Vec<usize> {
            (0..files.len())
                .filter(|&i| files[i].evaluate(pred) == Verdict::Maybe)
                .collect()
        };
        assert_eq!(kept(&eq("year", Literal::Int(2024))), [1]);
        assert_eq!(
            kept(&Predicate::compare("year", CmpOp::Lt, Literal::Int(2024))),
            [0]
        );
        let jan1 = ringscan_values::date::parse_date("2024-01-01").unwrap();
        assert_eq!(
            kept(&Predicate::compare(
                "day",
                CmpOp::GtEq,
                Literal::Date32(jan1)
            )),
            [1]
        );
        assert_eq!(kept(&eq("day", Literal::Date32(jan1 + 4))), [1]);
        let is_null = Predicate::IsNull {
            expr: Operand::Column("year".into()),
            negated: false,
        };
        assert_eq!(kept(&is_null), [2]);
        assert_eq!(kept(&Predicate::Not(Box::new(is_null))), [0, 1]);
    }

    #[test]
    fn parses_values_as_the_literal_type() {
        let p = PartitionValues::from_relative_path(
            "n=42/f=2.5/d=2024-01-02/b=true/s=abc/t=1/f.parquet",
        );
        assert_eq!(
            p.evaluate(&Predicate::compare("n", CmpOp::Gt, Literal::Int(42))),
            Verdict::Never
        );
        assert_eq!(
            p.evaluate(&Predicate::compare("n", CmpOp::GtEq, Literal::Int(42))),
            Verdict::Maybe
        );
        assert_eq!(p.evaluate(&eq("f", Literal::Float(2.5))), Verdict::Maybe);
        assert_eq!(p.evaluate(&eq("f", Literal::Float(2.4))), Verdict::Never);
        assert_eq!(
            p.evaluate(&eq("d", Literal::Date32(19_724))),
            Verdict::Maybe
        );
        assert_eq!(
            p.evaluate(&eq("d", Literal::Date32(19_725))),
            Verdict::Never
        );
        assert_eq!(p.evaluate(&eq("b", Literal::Bool(false))), Verdict::Never);
        // Unparseable as the literal's type, or an unsupported type: maybe.
        assert_eq!(p.evaluate(&eq("s", Literal::Int(1))), Verdict::Maybe);
        assert_eq!(
            p.evaluate(&eq("t", Literal::TimestampMicros(5))),
            Verdict::Maybe
        );
        let nan = PartitionValues::from_relative_path("f=NaN/x.parquet");
        assert_eq!(nan.evaluate(&eq("f", Literal::Float(1.0))), Verdict::Maybe);
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;
    use ringscan_ipc::scan_data::Operand;

    fn encode(s: &str) -> String {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '/' | '=' | '%' => out.push_str(&format!("%{:02X}", c as u32)),
                c => out.push(c),
            }
        }
        out
    }

    fn op() -> impl Strategy<Value = CmpOp> {
        prop::sample::select(vec![
            CmpOp::Eq,
            CmpOp::NotEq,
            CmpOp::Lt,
            CmpOp::LtEq,
            CmpOp::Gt,
            CmpOp::GtEq,
        ])
    }

    proptest! {
        /// A file whose partition value satisfies the comparison (as a string, or as an
        /// integer when both sides are integers) is never pruned, plain or negated.
        #[test]
        fn never_prunes_a_matching_partition(
            value in "[-0-9a/=%]{0,6}",
            other in "[-0-9a/=%]{0,6}",
            op in op(),
            as_int in any::<bool>(),
            negate in any::<bool>(),
        ) {
            let path = format!("p={}/x=1/part-0.parquet", encode(&value));
            let parts = PartitionValues::from_relative_path(&path);
            prop_assert_eq!(parts.get("p"), Some(value.as_str()));
            let (lit, matches) = if as_int {
                let Ok(lit) = other.parse::<i64>() else { return Ok(()) };
                let matches = value.parse::<i128>().ok().map(|v| CmpOp::holds(op, v.cmp(&lit.into())));
                (Literal::Int(lit), matches)
            } else {
                (Literal::Utf8(other.clone()), Some(CmpOp::holds(op, value.as_bytes().cmp(other.as_bytes()))))
            };
            let mut pred = Predicate::Compare { left: Operand::Column("p".into()), op, right: Operand::Literal(lit) };
            let mut matches = matches;
            if negate {
                pred = Predicate::Not(Box::new(pred));
                matches = matches.map(|m| !m);
            }
            // An unparseable value has no defined answer: it must stay "maybe".
            if matches != Some(false) {
                prop_assert_eq!(parts.evaluate(&pred), Verdict::Maybe);
            }
        }
    }
}
