//! Distinct scans: each row group sends each distinct row once.

use arrow_array::{RecordBatch, RecordBatchOptions};

/// The rows one task has sent, for a distinct scan: each batch keeps only rows not seen
/// before in this task, in order (first occurrences). A single dictionary column is
/// first reduced by its keys (one pass over integers), so that only a batch's distinct
/// keys are compared as rows; rows are compared bit for bit in Arrow's row format.
#[derive(Default)]
pub(super) struct Dedupe {
    converter: Option<arrow_row::RowConverter>,
    seen: std::collections::HashSet<Box<[u8]>>,
}
impl Dedupe {
    pub(super) fn keep_new(
        &mut self,
        batch: &RecordBatch,
    ) -> Result<RecordBatch, arrow_schema::ArrowError> {
        if batch.num_columns() == 0 {
            // Zero columns: every row is the same empty row.
            let n = usize::from(batch.num_rows() > 0 && self.seen.insert(Box::from([])));
            return RecordBatch::try_new_with_options(
                batch.schema(),
                Vec::new(),
                &RecordBatchOptions::new().with_row_count(Some(n)),
            );
        }
        let candidates = match first_keys(batch)? {
            Some(c) => c,
            None => batch.clone(),
        };
        if self.converter.is_none() {
            let fields = candidates
                .schema_ref()
                .fields()
                .iter()
                .map(|f| arrow_row::SortField::new(f.data_type().clone()))
                .collect();
            self.converter = Some(arrow_row::RowConverter::new(fields)?);
        }
        let Some(converter) = &self.converter else {
            return Ok(candidates);
        };
        let rows = converter.convert_columns(candidates.columns())?;
        let mut keep: Vec<u32> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let bytes: &[u8] = row.as_ref();
            if !self.seen.contains(bytes) {
                self.seen.insert(Box::from(bytes));
                keep.push(u32::try_from(i).unwrap_or(u32::MAX));
            }
        }
        if keep.len() == candidates.num_rows() {
            return Ok(candidates);
        }
        let indices = arrow_array::UInt32Array::from(keep);
        arrow_select::take::take_record_batch(&candidates, &indices)
    }
}
/// For a batch of one dictionary column: its rows at the first occurrence of each key
/// (a NULL once), in order. `None` for anything else.
fn first_keys(batch: &RecordBatch) -> Result<Option<RecordBatch>, arrow_schema::ArrowError> {
    use arrow_array::cast::AsArray;
    let [column] = batch.columns() else {
        return Ok(None);
    };
    let Some(dict) = column.as_dictionary_opt::<arrow_array::types::Int32Type>() else {
        return Ok(None);
    };
    let mut seen = vec![false; dict.values().len()];
    let mut null_seen = false;
    let mut first: Vec<u32> = Vec::new();
    for (i, key) in dict.keys().iter().enumerate() {
        let new = match key.and_then(|k| usize::try_from(k).ok()) {
            Some(k) if k < seen.len() => !std::mem::replace(&mut seen[k], true),
            // A key past the dictionary: let the row comparison decide (never here
            // for a valid array).
            Some(_) => true,
            None => !std::mem::replace(&mut null_seen, true),
        };
        if new {
            first.push(u32::try_from(i).unwrap_or(u32::MAX));
        }
    }
    let indices = arrow_array::UInt32Array::from(first);
    arrow_select::take::take_record_batch(batch, &indices).map(Some)
}
