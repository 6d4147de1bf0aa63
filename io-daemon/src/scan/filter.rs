//! Evaluating a [`Predicate`] on a decoded batch with Arrow kernels, in SQL three-valued
//! logic: the result is NULL where the predicate is unknown, and only TRUE rows pass.
//!
//! Comparisons are `column op literal` (either side), or `column op column` of one type.
//! The literal is converted to the column's type; when it is not a value of that type
//! (`int_col < 2.5`, `int8_col = 300`) the comparison is rewritten exactly
//! (`int_col <= 2`, FALSE) rather than by casting the column. Floats compare by the
//! workspace's one rule ([`ringscan_values::float`], DuckDB's): `-0.0 = +0.0`, every NaN
//! equal to every other and above +infinity, so above every integer too
//! (`int_col < NaN` is TRUE). That is Arrow's total order (what the kernels use) on
//! values made [`canonical_f64`] first.

use std::path::Path;
use std::sync::Arc;

use arrow_arith::boolean::{and_kleene, is_not_null, is_null, not, or_kleene};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, Datum, Float64Array, GenericStringArray,
    Int32Array, Int64Array, LargeStringArray, OffsetSizeTrait, RecordBatch, Scalar, StringArray,
    StringViewArray, UInt64Array,
};
use arrow_buffer::BooleanBuffer;
use arrow_schema::{ArrowError, DataType, TimeUnit};
use ringscan_ipc::scan_data::{CmpOp, Literal, Operand, Predicate};
use ringscan_values::float::{any_needs_canonical_f64, canonical_f64};

use super::ScanError;

type Kernel = fn(&dyn Datum, &dyn Datum) -> Result<BooleanArray, ArrowError>;

/// Evaluate `pred` on every row of `batch` (whose columns are named as in the predicate).
pub(crate) fn evaluate(
    pred: &Predicate,
    batch: &RecordBatch,
    file: &Path,
) -> Result<BooleanArray, ScanError> {
    Eval { batch, file }.eval(pred)
}

struct Eval<'a> {
    batch: &'a RecordBatch,
    file: &'a Path,
}

/// A numeric literal: an exact rational `n / d` (`d > 0`) or a float.
#[derive(Debug, Clone, Copy)]
enum Num {
    Ratio(i128, i128),
    Float(f64),
}

/// `integer_column op literal`, rewritten so that the literal is a value of the column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntCmp {
    /// The same for every non-NULL row.
    Const(bool),
    Cmp(CmpOp, i128),
}

fn kernel(op: CmpOp) -> Kernel {
    match op {
        CmpOp::Eq => arrow_ord::cmp::eq,
        CmpOp::NotEq => arrow_ord::cmp::neq,
        CmpOp::Lt => arrow_ord::cmp::lt,
        CmpOp::LtEq => arrow_ord::cmp::lt_eq,
        CmpOp::Gt => arrow_ord::cmp::gt,
        CmpOp::GtEq => arrow_ord::cmp::gt_eq,
    }
}

/// Rewrite `column op num` for a column holding integers in `lo..=hi`.
fn int_cmp(op: CmpOp, num: Num, lo: i128, hi: i128) -> IntCmp {
    let (floor, ceil) = match num {
        Num::Ratio(n, d) => (n.div_euclid(d), -(-n).div_euclid(d)),
        // NaN is above every integer and equal to none: for an integer column it is
        // +infinity (`ringscan_values::float::cmp_int_f64`).
        Num::Float(f) if f.is_nan() => return int_cmp(op, Num::Float(f64::INFINITY), lo, hi),
        // `as` saturates, which keeps huge values and infinities outside `lo..=hi`.
        Num::Float(f) => (f.floor() as i128, f.ceil() as i128),
    };
    if floor == ceil && (lo..=hi).contains(&floor) {
        return IntCmp::Cmp(op, floor);
    }
    // The literal is not a value of the column's type.
    match op {
        CmpOp::Eq => IntCmp::Const(false),
        CmpOp::NotEq => IntCmp::Const(true),
        CmpOp::Lt | CmpOp::LtEq if floor < lo => IntCmp::Const(false),
        CmpOp::Lt | CmpOp::LtEq if floor >= hi => IntCmp::Const(true),
        CmpOp::Lt | CmpOp::LtEq => IntCmp::Cmp(CmpOp::LtEq, floor),
        CmpOp::Gt | CmpOp::GtEq if ceil > hi => IntCmp::Const(false),
        CmpOp::Gt | CmpOp::GtEq if ceil <= lo => IntCmp::Const(true),
        CmpOp::Gt | CmpOp::GtEq => IntCmp::Cmp(CmpOp::GtEq, ceil),
    }
}

/// Lists at least this long are looked up in an [`IntSet`].
const IN_SET_MIN: usize = 8;
/// The widest key range (in values) an [`IntSet`] covers with a bitmap (1 MiB).
const IN_SET_BITMAP_RANGE: u64 = 8 << 20;

/// A set of integers: a bitmap over `min..=max` where that range is narrow, else the
/// sorted keys.
enum IntSet {
    Bitmap { min: i64, bits: Vec<u64> },
    Sorted(Vec<i64>),
}

impl IntSet {
    fn new(mut keys: Vec<i64>) -> Self {
        keys.sort_unstable();
        keys.dedup();
        let (Some(&min), Some(&max)) = (keys.first(), keys.last()) else {
            return Self::Sorted(keys);
        };
        let range = max.abs_diff(min);
        if range >= IN_SET_BITMAP_RANGE {
            return Self::Sorted(keys);
        }
        let mut bits = vec![0u64; (range / 64 + 1) as usize];
        for k in keys {
            let at = k.abs_diff(min);
            bits[(at / 64) as usize] |= 1 << (at % 64);
        }
        Self::Bitmap { min, bits }
    }

    fn contains(&self, v: i64) -> bool {
        match self {
            Self::Bitmap { min, bits } => {
                if v < *min {
                    return false;
                }
                let at = v.abs_diff(*min);
                bits.get((at / 64) as usize)
                    .is_some_and(|w| w & (1 << (at % 64)) != 0)
            }
            Self::Sorted(keys) => keys.binary_search(&v).is_ok(),
        }
    }
}

/// `value` for every row, NULL where `nulls_of` is NULL.
fn constant(value: bool, nulls_of: &dyn Array) -> BooleanArray {
    let len = nulls_of.len();
    let values = if value {
        BooleanBuffer::new_set(len)
    } else {
        BooleanBuffer::new_unset(len)
    };
    BooleanArray::new(values, nulls_of.logical_nulls())
}

fn all(value: bool, len: usize) -> BooleanArray {
    BooleanArray::new(
        if value {
            BooleanBuffer::new_set(len)
        } else {
            BooleanBuffer::new_unset(len)
        },
        None,
    )
}

/// `column = lit` (or `<>` when `negated`) over a UTF-8 array's offsets and bytes,
/// NULL where the column is: a value's length, then its first byte, are compared before
/// its bytes (arrow's kernel called `memcmp` for every value of the literal's length:
/// half a three-filter count's time over a status column).
fn utf8_eq<O: OffsetSizeTrait>(
    column: &GenericStringArray<O>,
    lit: &[u8],
    negated: bool,
) -> BooleanArray {
    let bytes = column.value_data();
    let n = lit.len();
    // Each value's (start, end) from consecutive offsets, in order: no index checks.
    let mut spans = column
        .value_offsets()
        .windows(2)
        .map(|w| (w[0].as_usize(), w[1].as_usize()));
    let bits = match lit.split_first() {
        None => BooleanBuffer::collect_bool(column.len(), |_| {
            spans.next().is_some_and(|(start, end)| start == end) != negated
        }),
        Some((first, _)) => BooleanBuffer::collect_bool(column.len(), |_| {
            spans.next().is_some_and(|(start, end)| {
                end.wrapping_sub(start) == n
                    && bytes.get(start) == Some(first)
                    && bytes.get(start..end) == Some(lit)
            }) != negated
        }),
    };
    BooleanArray::new(bits, column.logical_nulls())
}

impl Eval<'_> {
    fn arrow(&self, e: ArrowError) -> ScanError {
        ScanError::Arrow {
            file: self.file.to_path_buf(),
            source: e,
        }
    }

    fn unsupported(&self, reason: String) -> ScanError {
        ScanError::Unsupported {
            file: self.file.to_path_buf(),
            reason,
        }
    }

    fn column(&self, name: &str) -> Result<&ArrayRef, ScanError> {
        self.batch
            .column_by_name(name)
            .ok_or_else(|| ScanError::UnknownColumn {
                file: self.file.to_path_buf(),
                column: name.to_owned(),
            })
    }

    fn eval(&self, pred: &Predicate) -> Result<BooleanArray, ScanError> {
        let len = self.batch.num_rows();
        match pred {
            Predicate::Compare { left, op, right } => self.compare_operands(left, *op, right),
            // From the first operand, not from a constant: one kernel fewer.
            Predicate::And(v) => match v.split_first() {
                None => Ok(all(true, len)),
                Some((first, rest)) => rest.iter().try_fold(self.eval(first)?, |acc, p| {
                    and_kleene(&acc, &self.eval(p)?).map_err(|e| self.arrow(e))
                }),
            },
            Predicate::Or(v) => match v.split_first() {
                None => Ok(all(false, len)),
                Some((first, rest)) => rest.iter().try_fold(self.eval(first)?, |acc, p| {
                    or_kleene(&acc, &self.eval(p)?).map_err(|e| self.arrow(e))
                }),
            },
            Predicate::Not(p) => not(&self.eval(p)?).map_err(|e| self.arrow(e)),
            Predicate::InList {
                expr,
                list,
                negated,
            } => {
                let name = self.operand_column(expr, "IN")?;
                if let Some(found) = self.in_int_set(name, list)? {
                    return self.negate_if(found, *negated);
                }
                let any = list.iter().try_fold(all(false, len), |acc, lit| {
                    let eq = self.compare(name, CmpOp::Eq, lit)?;
                    or_kleene(&acc, &eq).map_err(|e| self.arrow(e))
                })?;
                self.negate_if(any, *negated)
            }
            Predicate::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let name = self.operand_column(expr, "BETWEEN")?;
                let ge = self.compare(name, CmpOp::GtEq, low)?;
                let le = self.compare(name, CmpOp::LtEq, high)?;
                let both = and_kleene(&ge, &le).map_err(|e| self.arrow(e))?;
                self.negate_if(both, *negated)
            }
            Predicate::IsNull { expr, negated } => {
                let column = self.column(self.operand_column(expr, "IS NULL")?)?;
                if *negated {
                    is_not_null(column.as_ref())
                } else {
                    is_null(column.as_ref())
                }
                .map_err(|e| self.arrow(e))
            }
        }
    }

    /// `column IN (list)` for an integer column and a long list of integers (a hash
    /// join's keys, pushed as a dynamic filter): one lookup per row in a bitmap over
    /// the list's range, or a binary search where the range is wide, instead of one
    /// comparison kernel per value (200 keys over 6M rows was 1.2G comparisons). `None`
    /// where it does not apply (short lists, NULL or non-integer values, other types).
    fn in_int_set(&self, name: &str, list: &[Literal]) -> Result<Option<BooleanArray>, ScanError> {
        if list.len() < IN_SET_MIN {
            return Ok(None);
        }
        let column = self.column(name)?;
        let values: Vec<i64> = match column.data_type() {
            DataType::Int64 => column.as_primitive::<Int64Type>().values().to_vec(),
            DataType::Int32 => column
                .as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|&v| i64::from(v))
                .collect(),
            _ => return Ok(None),
        };
        let keys: Option<Vec<i64>> = list
            .iter()
            .map(|l| match l {
                Literal::Int(i) => Some(*i),
                _ => None,
            })
            .collect();
        let Some(keys) = keys else {
            return Ok(None);
        };
        let set = IntSet::new(keys);
        let found: BooleanBuffer = values.iter().map(|&v| set.contains(v)).collect();
        Ok(Some(BooleanArray::new(found, column.logical_nulls())))
    }

    fn negate_if(&self, a: BooleanArray, negated: bool) -> Result<BooleanArray, ScanError> {
        if negated {
            not(&a).map_err(|e| self.arrow(e))
        } else {
            Ok(a)
        }
    }

    fn operand_column<'p>(&self, expr: &'p Operand, what: &str) -> Result<&'p str, ScanError> {
        match expr {
            Operand::Column(c) => Ok(c),
            Operand::Literal(l) => Err(self.unsupported(format!("{what} on a literal ({l:?})"))),
        }
    }

    fn compare_operands(
        &self,
        left: &Operand,
        op: CmpOp,
        right: &Operand,
    ) -> Result<BooleanArray, ScanError> {
        match (left, right) {
            (Operand::Column(c), Operand::Literal(l)) => self.compare(c, op, l),
            (Operand::Literal(l), Operand::Column(c)) => self.compare(c, op.flipped(), l),
            (Operand::Column(a), Operand::Column(b)) => {
                let (x, y) = (self.column(a)?, self.column(b)?);
                if x.data_type() != y.data_type() {
                    return Err(self.unsupported(format!(
                        "comparing columns of different types: {a} ({}) and {b} ({})",
                        x.data_type(),
                        y.data_type()
                    )));
                }
                match x.data_type() {
                    DataType::Float32 | DataType::Float64 => {
                        let f = |a: &ArrayRef| {
                            duckdb_floats(match a.data_type() {
                                DataType::Float32 => {
                                    a.as_primitive::<Float32Type>().unary(f64::from)
                                }
                                _ => a.as_primitive::<Float64Type>().clone(),
                            })
                        };
                        kernel(op)(&f(x), &f(y))
                    }
                    _ => kernel(op)(x, y),
                }
                .map_err(|e| self.arrow(e))
            }
            (Operand::Literal(a), Operand::Literal(b)) => {
                Err(self.unsupported(format!("comparing two literals ({a:?}, {b:?})")))
            }
        }
    }

    /// `column op lit`.
    fn compare(&self, name: &str, op: CmpOp, lit: &Literal) -> Result<BooleanArray, ScanError> {
        let column = self.column(name)?;
        if *lit == Literal::Null {
            return Ok(BooleanArray::new_null(column.len()));
        }
        let mismatch = || ScanError::TypeMismatch {
            file: self.file.to_path_buf(),
            column: name.to_owned(),
            data_type: column.data_type().clone(),
            literal: lit.clone(),
        };
        let run = |col: &dyn Datum, scalar: &dyn Datum, op: CmpOp| {
            kernel(op)(col, scalar).map_err(|e| self.arrow(e))
        };
        let dt = column.data_type();
        match dt {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Timestamp(..) => {
                let num = numeric_literal(dt, lit).ok_or_else(mismatch)?;
                self.compare_integers(column, op, num)
            }
            DataType::Float32 | DataType::Float64 => {
                let v = match lit {
                    Literal::Int(i) => *i as f64,
                    Literal::UInt(u) => *u as f64,
                    Literal::Float(f) => *f,
                    _ => return Err(mismatch()),
                };
                let col: Float64Array = match dt {
                    DataType::Float32 => column.as_primitive::<Float32Type>().unary(f64::from),
                    _ => column.as_primitive::<Float64Type>().clone(),
                };
                run(
                    &duckdb_floats(col),
                    &Scalar::new(Float64Array::from(vec![duckdb_float(v)])),
                    op,
                )
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let Literal::Utf8(s) = lit else {
                    return Err(mismatch());
                };
                if matches!(op, CmpOp::Eq | CmpOp::NotEq) {
                    let negated = op == CmpOp::NotEq;
                    match dt {
                        DataType::Utf8 => {
                            return Ok(utf8_eq(column.as_string::<i32>(), s.as_bytes(), negated))
                        }
                        DataType::LargeUtf8 => {
                            return Ok(utf8_eq(column.as_string::<i64>(), s.as_bytes(), negated))
                        }
                        _ => {}
                    }
                }
                let scalar: ArrayRef = match dt {
                    DataType::Utf8 => Arc::new(StringArray::from(vec![s.as_str()])),
                    DataType::LargeUtf8 => Arc::new(LargeStringArray::from(vec![s.as_str()])),
                    _ => Arc::new(StringViewArray::from(vec![s.as_str()])),
                };
                run(column, &Scalar::new(scalar), op)
            }
            DataType::Boolean => {
                let Literal::Bool(b) = lit else {
                    return Err(mismatch());
                };
                run(column, &Scalar::new(BooleanArray::from(vec![*b])), op)
            }
            other => Err(self.unsupported(format!(
                "column {name}: comparisons on {other} are not supported"
            ))),
        }
    }

    fn compare_integers(
        &self,
        column: &ArrayRef,
        op: CmpOp,
        num: Num,
    ) -> Result<BooleanArray, ScanError> {
        // 32-bit columns (dates above all) compare in their own type: widening them
        // to 64 bits first was a copy of the column per comparison, a tenth of a
        // three-filter count's daemon time.
        let (col, lo, hi): (ArrayRef, i128, i128) = match column.data_type() {
            DataType::UInt64 => (Arc::clone(column), 0, u64::MAX.into()),
            DataType::Int32 | DataType::Date32 => {
                (Arc::clone(column), i32::MIN.into(), i32::MAX.into())
            }
            _ => (Arc::new(to_i64(column)), i64::MIN.into(), i64::MAX.into()),
        };
        match int_cmp(op, num, lo, hi) {
            IntCmp::Const(v) => Ok(constant(v, column.as_ref())),
            IntCmp::Cmp(op, k) => {
                let narrow = || i32::try_from(k).expect("k is in the i32 range");
                let scalar: ArrayRef = match col.data_type() {
                    DataType::UInt64 => Arc::new(UInt64Array::from(vec![
                        u64::try_from(k).expect("k is in 0..=u64::MAX")
                    ])),
                    DataType::Int32 => Arc::new(Int32Array::from(vec![narrow()])),
                    DataType::Date32 => Arc::new(Date32Array::from(vec![narrow()])),
                    _ => Arc::new(Int64Array::from(vec![
                        i64::try_from(k).expect("k is in the i64 range")
                    ])),
                };
                kernel(op)(&col, &Scalar::new(scalar)).map_err(|e| self.arrow(e))
            }
        }
    }
}

/// The literal as a number in the column's unit, `None` when the types do not compare.
fn numeric_literal(dt: &DataType, lit: &Literal) -> Option<Num> {
    let exact = |v: i128| Some(Num::Ratio(v, 1));
    match (dt, lit) {
        (DataType::Date32, Literal::Date32(d)) => exact((*d).into()),
        (DataType::Date32, Literal::Int(i)) => exact((*i).into()),
        (DataType::Date32, _) => None,
        (DataType::Timestamp(unit, _), Literal::TimestampMicros(us)) => {
            let us = i128::from(*us);
            Some(match unit {
                TimeUnit::Second => Num::Ratio(us, 1_000_000),
                TimeUnit::Millisecond => Num::Ratio(us, 1_000),
                TimeUnit::Microsecond => Num::Ratio(us, 1),
                TimeUnit::Nanosecond => Num::Ratio(us * 1_000, 1),
            })
        }
        (DataType::Timestamp(..), _) => None,
        (_, Literal::Int(i)) => exact((*i).into()),
        (_, Literal::UInt(u)) => exact((*u).into()),
        (_, Literal::Float(f)) => Some(Num::Float(*f)),
        _ => None,
    }
}

/// Integer-like columns (all but UInt64) widened to Int64, exactly.
fn to_i64(column: &ArrayRef) -> Int64Array {
    match column.data_type() {
        DataType::Int8 => column.as_primitive::<Int8Type>().unary(i64::from),
        DataType::Int16 => column.as_primitive::<Int16Type>().unary(i64::from),
        DataType::Int32 => column.as_primitive::<Int32Type>().unary(i64::from),
        DataType::UInt8 => column.as_primitive::<UInt8Type>().unary(i64::from),
        DataType::UInt16 => column.as_primitive::<UInt16Type>().unary(i64::from),
        DataType::UInt32 => column.as_primitive::<UInt32Type>().unary(i64::from),
        DataType::Date32 => column.as_primitive::<Date32Type>().unary(i64::from),
        DataType::Timestamp(TimeUnit::Second, _) => column
            .as_primitive::<TimestampSecondType>()
            .reinterpret_cast::<Int64Type>(),
        DataType::Timestamp(TimeUnit::Millisecond, _) => column
            .as_primitive::<TimestampMillisecondType>()
            .reinterpret_cast::<Int64Type>(),
        DataType::Timestamp(TimeUnit::Microsecond, _) => column
            .as_primitive::<TimestampMicrosecondType>()
            .reinterpret_cast::<Int64Type>(),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => column
            .as_primitive::<TimestampNanosecondType>()
            .reinterpret_cast::<Int64Type>(),
        _ => column.as_primitive::<Int64Type>().clone(),
    }
}

/// `v` as DuckDB compares it in Arrow's total order (see the module docs).
fn duckdb_float(v: f64) -> f64 {
    canonical_f64(v)
}

/// `col` with [`canonical_f64`] applied; no copy when it has no `-0.0` and no negative NaN.
fn duckdb_floats(col: Float64Array) -> Float64Array {
    if any_needs_canonical_f64(col.values()) {
        col.unary(canonical_f64)
    } else {
        col
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_literals_outside_the_column_type() {
        let (lo, hi) = (i128::from(i64::MIN), i128::from(i64::MAX));
        assert_eq!(
            int_cmp(CmpOp::Lt, Num::Float(2.5), lo, hi),
            IntCmp::Cmp(CmpOp::LtEq, 2)
        );
        assert_eq!(
            int_cmp(CmpOp::Gt, Num::Float(-2.5), lo, hi),
            IntCmp::Cmp(CmpOp::GtEq, -2)
        );
        assert_eq!(
            int_cmp(CmpOp::Eq, Num::Float(2.5), lo, hi),
            IntCmp::Const(false)
        );
        assert_eq!(
            int_cmp(CmpOp::Lt, Num::Ratio(u64::MAX.into(), 1), lo, hi),
            IntCmp::Const(true)
        );
        assert_eq!(
            int_cmp(CmpOp::GtEq, Num::Float(f64::NEG_INFINITY), lo, hi),
            IntCmp::Const(true)
        );
        assert_eq!(
            int_cmp(CmpOp::LtEq, Num::Ratio(-1501, 1000), lo, hi),
            IntCmp::Cmp(CmpOp::LtEq, -2)
        );
        assert_eq!(
            int_cmp(CmpOp::NotEq, Num::Float(f64::NAN), lo, hi),
            IntCmp::Const(true)
        );
    }

    fn int_batch() -> RecordBatch {
        let x: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(i64::MIN),
            Some(-1),
            Some(0),
            Some(7),
            Some(i64::MAX),
            None,
        ]));
        RecordBatch::try_from_iter([("x", x)]).unwrap()
    }

    /// DuckDB: `SELECT x < 'NaN'::DOUBLE` is TRUE for every integer (NaN is the greatest
    /// double), and the engine (Arrow's kernels on the cast column) says the same; the
    /// daemon said FALSE ("NaN is unordered"), so a pushed-down `int_col < NaN` lost
    /// every row.
    #[test]
    fn int_less_than_nan_agrees_between_daemon_and_engine() {
        let batch = int_batch();
        let engine = |op: CmpOp| -> BooleanArray {
            // What DataFusion runs for `CAST(x AS DOUBLE) op NaN`.
            let x = arrow_cast::cast(batch.column(0), &DataType::Float64).unwrap();
            let nan = Scalar::new(Float64Array::from(vec![f64::NAN]));
            kernel(op)(&x, &nan).unwrap()
        };
        for op in [
            CmpOp::Eq,
            CmpOp::NotEq,
            CmpOp::Lt,
            CmpOp::LtEq,
            CmpOp::Gt,
            CmpOp::GtEq,
        ] {
            let daemon = evaluate(
                &Predicate::compare("x", op, Literal::Float(f64::NAN)),
                &batch,
                Path::new("t"),
            )
            .unwrap();
            assert_eq!(daemon, engine(op), "x {op:?} NaN");
        }
        let lt = evaluate(
            &Predicate::compare("x", CmpOp::Lt, Literal::Float(f64::NAN)),
            &batch,
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(
            lt,
            BooleanArray::from(vec![
                Some(true),
                Some(true),
                Some(true),
                Some(true),
                Some(true),
                None
            ])
        );
    }

    fn special_float() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            Just(f64::NAN),
            Just(f64::from_bits(f64::NAN.to_bits() | (1 << 63))),
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(2.5),
            Just(-2.5),
            (-3i32..4).prop_map(f64::from),
        ]
    }

    fn any_op() -> impl proptest::strategy::Strategy<Value = CmpOp> {
        proptest::sample::select(vec![
            CmpOp::Eq,
            CmpOp::NotEq,
            CmpOp::Lt,
            CmpOp::LtEq,
            CmpOp::Gt,
            CmpOp::GtEq,
        ])
    }

    proptest::proptest! {
        /// The daemon's row filter on float and integer columns, with NaN (of either
        /// sign), both zeros, the infinities and NULLs, against a naive row-by-row
        /// reference of the workspace's one rule (`ringscan_values::float`, DuckDB's),
        /// plain and negated, with the literal on either side.
        #[test]
        fn float_filters_follow_the_one_comparison_rule(
            floats in proptest::collection::vec(proptest::option::of(special_float()), 1..24),
            ints in proptest::collection::vec(proptest::option::of(-3i64..4), 1..24),
            lit in special_float(),
            op in any_op(),
            narrow in proptest::bool::ANY,
            flipped in proptest::bool::ANY,
            negated in proptest::bool::ANY,
        ) {
            use ringscan_values::float::{cmp_f64, cmp_int_f64};
            let x: ArrayRef = if narrow {
                Arc::new(arrow_array::Float32Array::from(
                    floats.iter().map(|v| v.map(|v| v as f32)).collect::<Vec<_>>(),
                ))
            } else {
                Arc::new(Float64Array::from(floats.clone()))
            };
            let i: ArrayRef = Arc::new(Int64Array::from(ints.clone()));
            for (column, want) in [
                ("x", floats.iter().map(|v| v.map(|v| op.holds(cmp_f64(v, lit)))).collect::<Vec<_>>()),
                ("i", ints.iter().map(|v| v.map(|v| op.holds(cmp_int_f64(v.into(), lit)))).collect()),
            ] {
                let batch = RecordBatch::try_from_iter([(column, if column == "x" { Arc::clone(&x) } else { Arc::clone(&i) })]).unwrap();
                let mut pred = if flipped {
                    Predicate::Compare {
                        left: Operand::Literal(Literal::Float(lit)),
                        op: op.flipped(),
                        right: Operand::Column(column.into()),
                    }
                } else {
                    Predicate::compare(column, op, Literal::Float(lit))
                };
                let mut want = want;
                if negated {
                    pred = Predicate::Not(Box::new(pred));
                    want = want.into_iter().map(|v| v.map(|b| !b)).collect();
                }
                let got = evaluate(&pred, &batch, Path::new("t")).unwrap();
                proptest::prop_assert_eq!(got, BooleanArray::from(want), "{:?}", pred);
            }
        }
    }

    proptest::proptest! {
        /// String equality and inequality (the offsets path) against a row-by-row
        /// reference: NULL rows NULL, empty strings and literal, values sharing the
        /// literal's length or first byte, 32- and 64-bit offsets, sliced arrays, inside
        /// an AND and an OR with another comparison.
        #[test]
        fn string_equality_matches_a_naive_reference(
            rows in proptest::collection::vec(proptest::option::of("[ab]{0,3}"), 1..40),
            lit in "[ab]{0,3}",
            skip in 0usize..4,
            large in proptest::bool::ANY,
            ne in proptest::bool::ANY,
        ) {
            let op = if ne { CmpOp::NotEq } else { CmpOp::Eq };
            let x: ArrayRef = if large {
                Arc::new(LargeStringArray::from(rows.clone()))
            } else {
                Arc::new(StringArray::from(rows.clone()))
            };
            let skip = skip.min(rows.len() - 1);
            let x = x.slice(skip, rows.len() - skip);
            let rows = &rows[skip..];
            let y: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows.len() as i64));
            let batch = RecordBatch::try_from_iter([("x", x), ("y", y)]).unwrap();
            let naive: Vec<Option<bool>> = rows
                .iter()
                .map(|v| v.as_ref().map(|v| (*v == lit) != ne))
                .collect();
            let eq = Predicate::compare("x", op, Literal::Utf8(lit.clone()));
            let got = evaluate(&eq, &batch, Path::new("t")).unwrap();
            proptest::prop_assert_eq!(&got, &BooleanArray::from(naive.clone()));
            // y < 2 is TRUE on the first two rows, FALSE after: Kleene AND and OR.
            let small = Predicate::compare("y", CmpOp::Lt, Literal::Int(2));
            let and = evaluate(&Predicate::And(vec![eq.clone(), small.clone()]), &batch, Path::new("t")).unwrap();
            let or = evaluate(&Predicate::Or(vec![eq, small]), &batch, Path::new("t")).unwrap();
            for (i, v) in naive.iter().enumerate() {
                let s = i < 2;
                let want_and = match v { Some(false) => Some(false), _ if !s => Some(false), v => *v };
                let want_or = match v { Some(true) => Some(true), _ if s => Some(true), v => *v };
                proptest::prop_assert_eq!(and.is_valid(i).then(|| and.value(i)), want_and, "and, row {}", i);
                proptest::prop_assert_eq!(or.is_valid(i).then(|| or.value(i)), want_or, "or, row {}", i);
            }
        }
    }

    proptest::proptest! {
        /// 32-bit integer and date columns, compared in their own type, against a
        /// row-by-row reference: values at the type's ends, integer literals inside and
        /// outside its range and float ones between values, every operator, either side.
        #[test]
        fn narrow_integer_and_date_filters_match_a_naive_reference(
            rows in proptest::collection::vec(proptest::option::of(proptest::prop_oneof![
                -3i32..4,
                proptest::strategy::Just(i32::MIN),
                proptest::strategy::Just(i32::MAX),
            ]), 1..24),
            int_lit in proptest::prop_oneof![
                -4i64..5,
                proptest::strategy::Just(i64::from(i32::MIN) - 1),
                proptest::strategy::Just(i64::from(i32::MAX)),
                proptest::strategy::Just(i64::from(i32::MAX) + 1),
            ],
            float_lit in proptest::prop_oneof![-4.0f64..4.0, proptest::strategy::Just(3e9)],
            use_float in proptest::bool::ANY,
            date in proptest::bool::ANY,
            op in any_op(),
            flipped in proptest::bool::ANY,
        ) {
            use ringscan_values::float::cmp_int_f64;
            let x: ArrayRef = if date {
                Arc::new(Date32Array::from(rows.clone()))
            } else {
                Arc::new(Int32Array::from(rows.clone()))
            };
            let batch = RecordBatch::try_from_iter([("x", x)]).unwrap();
            // Dates compare with integer literals only (days), as the planner sends them.
            let use_float = use_float && !date;
            let lit = if use_float {
                Literal::Float(float_lit)
            } else if date {
                Literal::Date32(i32::try_from(int_lit.clamp(i32::MIN.into(), i32::MAX.into())).unwrap())
            } else {
                Literal::Int(int_lit)
            };
            let want: Vec<Option<bool>> = rows
                .iter()
                .map(|v| v.map(|v| {
                    let ordering = match &lit {
                        Literal::Float(f) => cmp_int_f64(v.into(), *f),
                        Literal::Date32(d) => v.cmp(d),
                        _ => i64::from(v).cmp(&int_lit),
                    };
                    op.holds(ordering)
                }))
                .collect();
            let pred = if flipped {
                Predicate::Compare {
                    left: Operand::Literal(lit.clone()),
                    op: op.flipped(),
                    right: Operand::Column("x".into()),
                }
            } else {
                Predicate::compare("x", op, lit.clone())
            };
            let got = evaluate(&pred, &batch, Path::new("t")).unwrap();
            proptest::prop_assert_eq!(got, BooleanArray::from(want), "{:?}", pred);
        }
    }

    /// `x IN (list)` as an OR of `x = value`, the path short lists take.
    fn naive_in(batch: &RecordBatch, list: &[Literal], negated: bool) -> BooleanArray {
        let eval = Eval {
            batch,
            file: Path::new("t"),
        };
        let any = list
            .iter()
            .map(|l| {
                eval.eval(&Predicate::compare("x", CmpOp::Eq, l.clone()))
                    .unwrap()
            })
            .fold(all(false, batch.num_rows()), |acc, eq| {
                or_kleene(&acc, &eq).unwrap()
            });
        if negated {
            not(&any).unwrap()
        } else {
            any
        }
    }

    proptest::proptest! {
        /// Long integer lists (bitmap and sorted) answer as the OR of equalities,
        /// NULL rows NULL, for 64- and 32-bit columns, IN and NOT IN.
        #[test]
        fn long_integer_in_lists_equal_the_or_of_equalities(
            rows in proptest::collection::vec(proptest::option::of(-300i64..300), 1..300),
            keys in proptest::collection::vec(-300i64..300, 8..60),
            wide in proptest::bool::ANY,
            int32 in proptest::bool::ANY,
            negated in proptest::bool::ANY,
        ) {
            // A wide list spreads its keys past the bitmap's range.
            let spread = |v: i64| if wide { v * 1_000_000 } else { v };
            let rows: Vec<Option<i64>> = rows.into_iter().map(|v| v.map(spread)).collect();
            let list: Vec<Literal> = keys.into_iter().map(|k| Literal::Int(spread(k))).collect();
            let column: ArrayRef = if int32 && !wide {
                Arc::new(arrow_array::Int32Array::from(
                    rows.iter().map(|v| v.map(|v| v as i32)).collect::<Vec<_>>(),
                ))
            } else {
                Arc::new(Int64Array::from(rows))
            };
            let batch = RecordBatch::try_from_iter([("x", column)]).unwrap();
            let pred = Predicate::InList {
                expr: Operand::Column("x".into()),
                list: list.clone(),
                negated,
            };
            let fast = evaluate(&pred, &batch, Path::new("t")).unwrap();
            proptest::prop_assert_eq!(fast, naive_in(&batch, &list, negated));
        }
    }
}
