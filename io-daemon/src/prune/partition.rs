//! Partition pruning: hive-style `key=value` directories between the table root and a file.
//!
//! Every row of a file under `symbol=SPY/` has `symbol = 'SPY'`, so the partition values
//! are a one-value range per column. Values are strings on disk: they compare exactly with
//! UTF-8 literals; for another literal type the value is parsed as that type, and a value
//! that does not parse makes the comparison "maybe".

use std::collections::BTreeMap;

use ringscan_ipc::msg::{CmpOp, Literal, Predicate};

use super::eval::{evaluate, Outcomes, Stats};
use super::range::{ColumnKind, ColumnRange, Scalar};
use super::Verdict;

/// The directory name hive writes for a NULL partition value. What an engine makes of it
/// differs (NULL, or the string itself), so it is treated as unknown.
pub const HIVE_DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The partition values of one file, from its path relative to the table root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionValues {
    /// Column -> decoded value; `None` when unknown (hive's NULL marker, an undecodable
    /// escape, or the same key twice with different values).
    values: BTreeMap<String, Option<String>>,
}

impl PartitionValues {
    /// Parse `symbol=SPY/date=2024-01-02/part-0.parquet` (relative to the table root,
    /// `/`-separated). The last component is the file and is never a partition; directory
    /// components without `=` are ignored. Hive's `%XX` escapes are decoded.
    pub fn from_relative_path(path: &str) -> Self {
        let mut values: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        components.pop();
        for component in components {
            let Some((key, value)) = component.split_once('=') else {
                continue;
            };
            let Some(key) = percent_decode(key) else {
                continue;
            };
            let value = if value == HIVE_DEFAULT_PARTITION {
                None
            } else {
                percent_decode(value)
            };
            match values.get(&key) {
                Some(existing) if *existing != value => {
                    values.insert(key, None);
                }
                Some(_) => {}
                None => {
                    values.insert(key, value);
                }
            }
        }
        Self { values }
    }

    /// The decoded value of `column`, if it is a known partition column.
    pub fn get(&self, column: &str) -> Option<&str> {
        self.values.get(column)?.as_deref()
    }

    /// The partition columns in name order, with their decoded values (`None`: unknown).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_deref()))
    }

    /// Whether `column` is a partition column of this file (even with an unknown value).
    pub fn contains(&self, column: &str) -> bool {
        self.values.contains_key(column)
    }

    /// Whether the file's rows can match `pred`, judging by partition values only.
    pub fn evaluate(&self, pred: &Predicate) -> Verdict {
        Verdict::from_can_be_true(evaluate(pred, self).can_be_true())
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Days since 1970-01-01 for a strict `YYYY-MM-DD`.
fn parse_date32(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > month_days[(m - 1) as usize] {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    i32::try_from(era * 146_097 + doe - 719_468).ok()
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
        Literal::Date32(_) => (ColumnKind::Date32, Scalar::Int(parse_date32(value)?.into())),
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
        match self.get(column).and_then(|v| value_range(v, lit)) {
            Some(range) => range.compare(op, lit),
            None => Outcomes::ALL,
        }
    }

    fn is_null(&self, column: &str) -> Outcomes {
        match self.get(column) {
            Some(_) => Outcomes::FALSE,
            None => Outcomes::BOOL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringscan_ipc::msg::Operand;

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
        assert_eq!(
            null_marker.evaluate(&eq("symbol", Literal::Utf8("x".into()))),
            Verdict::Maybe
        );
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

    #[test]
    fn dates() {
        assert_eq!(parse_date32("1970-01-01"), Some(0));
        assert_eq!(parse_date32("2024-01-02"), Some(19_724));
        assert_eq!(parse_date32("1969-12-31"), Some(-1));
        assert_eq!(parse_date32("2000-02-29"), Some(11_016));
        assert_eq!(parse_date32("1900-02-29"), None);
        assert_eq!(parse_date32("2024-13-01"), None);
        assert_eq!(parse_date32("2024-1-02"), None);
        assert_eq!(parse_date32("+024-01-02"), None);
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;
    use ringscan_ipc::msg::Operand;

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
