//! `avg` of a decimal as DuckDB computes it: the sum exact in 128 bits, one division
//! in floating point at the end, a `DOUBLE`.
//!
//! Before this, [`DuckDbSemantics`](super::rules::DuckDbSemantics) cast every value to
//! `Float64` and averaged doubles: a 128-bit-integer-to-double conversion per row
//! (`__floattidf`, in software) that took a sixth of the executor's time on TPC-H Q1,
//! and an answer that drifted from DuckDB's in the last digits, since DuckDB sums the
//! decimals exactly and divides once (`sum / (count * 10^scale)`).
//!
//! Only plain aggregates use it: `avg(DISTINCT x)` and `avg(x) OVER (...)` keep the cast
//! (DataFusion dedups or slides its own `avg`).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, UInt64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, Decimal128Array, Float64Array, UInt64Array};
use arrow_schema::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

/// Digits up to which a sum of any number of values cannot overflow 128 bits (a value
/// below 10^18 < 2^60 needs more than 2^67 rows to), so the hot loop adds unchecked.
const UNCHECKED_PRECISION: u8 = 18;

/// The `avg` that [`DuckDbSemantics`](super::rules::DuckDbSemantics) puts in place of
/// DataFusion's for a `DECIMAL128` argument.
pub(crate) fn decimal_avg() -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::new_from_impl(DecimalAvg {
        signature: Signature::any(1, Volatility::Immutable),
    }))
}

/// Whether `udf` is the one [`decimal_avg`] makes.
pub(crate) fn is_decimal_avg(udf: &AggregateUDF) -> bool {
    let inner: &dyn std::any::Any = udf.inner().as_ref();
    inner.is::<DecimalAvg>()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DecimalAvg {
    signature: Signature,
}

/// The precision and scale of the argument.
fn decimal_of(t: &DataType) -> Result<(u8, i8)> {
    match t {
        DataType::Decimal128(p, s) => Ok((*p, *s)),
        other => plan_err!("ringscan's decimal avg takes a DECIMAL128, not {other}"),
    }
}

impl AggregateUDFImpl for DecimalAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [t] => decimal_of(t).map(|_| DataType::Float64),
            _ => plan_err!("avg takes one argument"),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        let (_, scale) = decimal_of(args.input_fields[0].data_type())?;
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "sum"),
                DataType::Decimal128(38, scale),
                false,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "count"),
                DataType::UInt64,
                false,
            )),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        if args.is_distinct {
            return exec_err!("ringscan's decimal avg does not take DISTINCT");
        }
        let (_, scale) = decimal_of(args.expr_fields[0].data_type())?;
        Ok(Box::new(AvgAccumulator {
            sum: 0,
            count: 0,
            scale,
        }))
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs<'_>) -> bool {
        !args.is_distinct
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let (precision, scale) = decimal_of(args.expr_fields[0].data_type())?;
        Ok(Box::new(AvgGroups {
            sums: Vec::new(),
            counts: Vec::new(),
            precision,
            scale,
        }))
    }
}

/// `sum / (count * 10^scale)`, DuckDB's division; NULL for no values.
fn average(sum: i128, count: u64, scale: i8) -> Option<f64> {
    (count > 0).then(|| sum as f64 / (count as f64 * 10f64.powi(i32::from(scale))))
}

fn add(sum: i128, value: i128) -> Result<i128> {
    match sum.checked_add(value) {
        Some(s) => Ok(s),
        None => exec_err!("avg: the sum of the decimals overflows 128 bits"),
    }
}

#[derive(Debug)]
struct AvgAccumulator {
    sum: i128,
    count: u64,
    scale: i8,
}

impl Accumulator for AvgAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = values[0].as_primitive::<Decimal128Type>();
        for v in values.iter().flatten() {
            self.sum = add(self.sum, v)?;
            self.count += 1;
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = values[0].as_primitive::<Decimal128Type>();
        for v in values.iter().flatten() {
            self.sum = add(self.sum, -v)?;
            self.count -= 1;
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(average(
            self.sum, self.count, self.scale,
        )))
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Decimal128(Some(self.sum), 38, self.scale),
            ScalarValue::UInt64(Some(self.count)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let sums = states[0].as_primitive::<Decimal128Type>();
        let counts = states[1].as_primitive::<UInt64Type>();
        for (sum, count) in sums.iter().zip(counts.iter()) {
            self.sum = add(self.sum, sum.unwrap_or(0))?;
            self.count += count.unwrap_or(0);
        }
        Ok(())
    }
}

/// The grouped form: a sum and a count per group.
#[derive(Debug)]
struct AvgGroups {
    sums: Vec<i128>,
    counts: Vec<u64>,
    precision: u8,
    scale: i8,
}

/// Whether row `i` is taken: not NULL, and TRUE in the FILTER clause if there is one.
fn taken(values: &dyn Array, filter: Option<&BooleanArray>, i: usize) -> bool {
    values.is_valid(i) && filter.is_none_or(|f| f.is_valid(i) && f.value(i))
}

impl AvgGroups {
    fn take(&mut self, emit_to: EmitTo) -> (Vec<i128>, Vec<u64>) {
        (
            emit_to.take_needed(&mut self.sums),
            emit_to.take_needed(&mut self.counts),
        )
    }
}

impl GroupsAccumulator for AvgGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.sums.resize(total_num_groups, 0);
        self.counts.resize(total_num_groups, 0);
        let values = values[0].as_primitive::<Decimal128Type>();
        let raw = values.values();
        if values.null_count() == 0 && opt_filter.is_none() {
            if self.precision <= UNCHECKED_PRECISION {
                for (&g, &v) in group_indices.iter().zip(raw.iter()) {
                    self.sums[g] = self.sums[g].wrapping_add(v);
                    self.counts[g] += 1;
                }
            } else {
                for (&g, &v) in group_indices.iter().zip(raw.iter()) {
                    self.sums[g] = add(self.sums[g], v)?;
                    self.counts[g] += 1;
                }
            }
            return Ok(());
        }
        for (i, &g) in group_indices.iter().enumerate() {
            if taken(values, opt_filter, i) {
                self.sums[g] = add(self.sums[g], raw[i])?;
                self.counts[g] += 1;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let scale = self.scale;
        let (sums, counts) = self.take(emit_to);
        let averages: Float64Array = sums
            .into_iter()
            .zip(counts)
            .map(|(sum, count)| average(sum, count, scale))
            .collect();
        Ok(Arc::new(averages))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let scale = self.scale;
        let (sums, counts) = self.take(emit_to);
        let sums = Decimal128Array::from(sums).with_precision_and_scale(38, scale)?;
        Ok(vec![Arc::new(sums), Arc::new(UInt64Array::from(counts))])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.sums.resize(total_num_groups, 0);
        self.counts.resize(total_num_groups, 0);
        let sums = values[0].as_primitive::<Decimal128Type>();
        let counts = values[1].as_primitive::<UInt64Type>();
        for (i, &g) in group_indices.iter().enumerate() {
            if sums.is_valid(i) && counts.is_valid(i) {
                self.sums[g] = add(self.sums[g], sums.value(i))?;
                self.counts[g] += counts.value(i);
            }
        }
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<Decimal128Type>();
        let (sums, counts): (Vec<i128>, Vec<u64>) = (0..values.len())
            .map(|i| match taken(values, opt_filter, i) {
                true => (values.value(i), 1),
                false => (0, 0),
            })
            .unzip();
        let sums = Decimal128Array::from(sums).with_precision_and_scale(38, self.scale)?;
        Ok(vec![Arc::new(sums), Arc::new(UInt64Array::from(counts))])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<i128>() + self.counts.capacity() * size_of::<u64>()
    }
}
