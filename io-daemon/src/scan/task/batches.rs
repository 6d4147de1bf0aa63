//! Small operations on decoded batches shared by the phases of a task.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow_schema::{FieldRef, Schema, SchemaRef};
use arrow_select::concat::concat_batches;
use arrow_select::filter::filter_record_batch;

use super::super::file::{project, project_schema, with_partitions};
use super::super::plan::{FileCtx, RgTask};
use super::super::ScanError;

pub(super) fn mismatch(ctx: &FileCtx, task: &RgTask) -> ScanError {
    ScanError::Invalid {
        file: ctx.path.clone(),
        reason: format!(
            "row group {}: columns decoded to different row counts",
            task.row_group
        ),
    }
}
pub(super) fn rows(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}
pub(super) fn arrow_err(ctx: &FileCtx) -> impl Fn(arrow_schema::ArrowError) -> ScanError + '_ {
    |source| ScanError::Arrow {
        file: ctx.path.clone(),
        source,
    }
}
/// `batch` filtered by `mask` (no NULLs), zero-column batches included.
pub(super) fn filter_batch(
    batch: &RecordBatch,
    mask: &BooleanArray,
    ctx: &FileCtx,
) -> Result<RecordBatch, ScanError> {
    if batch.num_columns() == 0 {
        return row_count_batch(batch.schema(), mask.true_count(), ctx);
    }
    filter_record_batch(batch, mask).map_err(arrow_err(ctx))
}
pub(super) fn row_count_batch(
    schema: SchemaRef,
    n: usize,
    ctx: &FileCtx,
) -> Result<RecordBatch, ScanError> {
    RecordBatch::try_new_with_options(
        schema,
        Vec::new(),
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(arrow_err(ctx))
}
pub(super) fn concat_masks(
    masks: &[BooleanArray],
    ctx: &FileCtx,
) -> Result<BooleanArray, ScanError> {
    if let [one] = masks {
        return Ok(one.clone());
    }
    let refs: Vec<&dyn Array> = masks.iter().map(|m| m as &dyn Array).collect();
    let joined = arrow_select::concat::concat(&refs).map_err(arrow_err(ctx))?;
    Ok(arrow_array::cast::AsArray::as_boolean(&joined).clone())
}
pub(super) fn concat(batches: &[RecordBatch], ctx: &FileCtx) -> Result<RecordBatch, ScanError> {
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .unwrap_or_else(|| Arc::new(Schema::empty()));
    if schema.fields().is_empty() {
        let n = batches.iter().map(RecordBatch::num_rows).sum();
        return row_count_batch(schema, n, ctx);
    }
    concat_batches(&schema, batches).map_err(arrow_err(ctx))
}
/// The columns of `a` then those of `b` (same row count).
pub(super) fn zip(
    a: &RecordBatch,
    b: &RecordBatch,
    ctx: &FileCtx,
) -> Result<RecordBatch, ScanError> {
    let fields: Vec<FieldRef> = a
        .schema()
        .fields()
        .iter()
        .chain(b.schema().fields().iter())
        .cloned()
        .collect();
    let columns: Vec<ArrayRef> = a.columns().iter().chain(b.columns()).cloned().collect();
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
    )
    .map_err(arrow_err(ctx))
}
/// The output batch: partition columns added, projected in output order.
pub(super) fn assemble(ctx: &FileCtx, batch: &RecordBatch) -> Result<RecordBatch, ScanError> {
    let working = with_partitions(batch, &ctx.partitions, &ctx.out_partitions, &ctx.path)?;
    let schema = ctx
        .output_schema
        .get_or_init(|| project_schema(working.schema_ref(), &ctx.output))
        .clone();
    project(&working, schema, &ctx.output, &ctx.path)
}
