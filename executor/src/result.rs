//! A query's rows and what the query did to produce them.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::{ArrowError, SchemaRef};
use ringscan_ipc::msg::ScanSummary;

/// A finished query's rows.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// The columns.
    pub schema: SchemaRef,
    /// The rows, in order.
    pub batches: Vec<RecordBatch>,
    /// Total number of rows.
    pub rows: usize,
}

impl QueryResult {
    /// Approximate memory held by the batches, in bytes (for cache accounting).
    pub fn approx_size_bytes(&self) -> usize {
        let data: usize = self
            .batches
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum();
        data + std::mem::size_of::<Self>() + self.schema.fields().len() * 64
    }

    /// The same rows in one batch of memory of their own: no buffer is a view into a
    /// scan's ring, so keeping them (a cache, a printer) keeps no ring's mapping alive.
    pub fn owned(&self) -> Result<Self, ArrowError> {
        let one = owned_copy(Arc::clone(&self.schema), &self.batches)?;
        Ok(Self {
            schema: Arc::clone(&self.schema),
            rows: self.rows,
            batches: if one.num_rows() > 0 {
                vec![one]
            } else {
                Vec::new()
            },
        })
    }
}

/// `batches` concatenated into one batch whose buffers are freshly allocated (none of
/// them points into the ring the batches were read from).
pub fn owned_copy(schema: SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, ArrowError> {
    use arrow_data::transform::MutableArrayData;
    if batches.is_empty() {
        return Ok(RecordBatch::new_empty(schema));
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for i in 0..schema.fields().len() {
        let data: Vec<arrow_data::ArrayData> =
            batches.iter().map(|b| b.column(i).to_data()).collect();
        let mut copy = MutableArrayData::new(data.iter().collect(), false, rows);
        for (j, d) in data.iter().enumerate() {
            copy.try_extend(j, 0, d.len())?;
        }
        columns.push(arrow_array::make_array(copy.freeze()));
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema, columns, &opts)
}

/// What one query did and returned.
#[derive(Debug, Clone)]
pub struct QueryOutcome {
    /// The rows (shared with the result cache).
    pub result: Arc<QueryResult>,
    /// `EXPLAIN` text, when the query was an EXPLAIN (then `result` is empty).
    pub explain: Option<String>,
    /// The daemon's summary of the query's scans, summed (`None` on a result-cache hit,
    /// EXPLAIN, or a query that reads no table).
    pub scan: Option<ScanSummary>,
    /// The plan came from the plan cache.
    pub plan_hit: bool,
    /// The values of the statement's parameters went into its generic plan, optimized
    /// once with placeholders, rather than into a plan optimized for them.
    pub generic_plan: bool,
    /// The result came from the result cache.
    pub result_hit: bool,
    /// The query read no column data: footer statistics answered it (`scan` then
    /// counts the files and row groups whose footers answered).
    pub from_statistics: bool,
    /// Wall time of the whole query, microseconds.
    pub total_us: u64,
    /// For a statement that writes rather than returns rows, PostgreSQL's command tag
    /// (`INSERT 0 3`, `CREATE TABLE`, `DROP TABLE`...); `result` then holds the count
    /// of rows written (an `INSERT`'s), or nothing.
    pub command: Option<String>,
}

impl QueryOutcome {
    /// The outcome of a statement that wrote (`CREATE TABLE`, an `INSERT` made without
    /// DataFusion): its command tag, no rows.
    pub(crate) fn command(tag: String, total_us: u64) -> Self {
        Self {
            result: Arc::new(QueryResult {
                schema: Arc::new(arrow_schema::Schema::empty()),
                batches: Vec::new(),
                rows: 0,
            }),
            explain: None,
            scan: None,
            plan_hit: false,
            generic_plan: false,
            result_hit: false,
            from_statistics: false,
            total_us,
            command: Some(tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    #[test]
    fn owned_copy_concatenates_and_keeps_nulls() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = |a: Vec<Option<i64>>, s: Vec<Option<&str>>| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(a)),
                    Arc::new(StringArray::from(s)),
                ],
            )
            .expect("batch")
        };
        let batches = [
            batch(vec![Some(1), None], vec![Some("x"), Some("y")]),
            batch(vec![Some(3)], vec![None]),
        ];
        let one = owned_copy(Arc::clone(&schema), &batches).expect("copy");
        assert_eq!(one.num_rows(), 3);
        let a = one
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("a");
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![Some(1), None, Some(3)]);
        let s = one
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("s");
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![Some("x"), Some("y"), None]
        );
        assert!(s.is_null(2));
        let empty = owned_copy(Arc::clone(&schema), &[]).expect("empty");
        assert_eq!(empty.num_rows(), 0);
    }
}
