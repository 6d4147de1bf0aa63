//! Sorting with row-encoded keys: full sort, bounded top-k, and hash DISTINCT.

use std::collections::HashSet;

use arrow_array::{ArrayRef, RecordBatch, UInt32Array};
use arrow_row::{RowConverter, Rows, SortField};
use arrow_schema::{SchemaRef, SortOptions};

use super::error::ExecError;
use super::eval::{eval_array, normalize_float, Ctx};
use crate::bind::SortKey;
use crate::expr::Expr;

fn err(context: &'static str) -> impl FnOnce(arrow_schema::ArrowError) -> ExecError {
    move |e| ExecError::arrow(context, e)
}

/// Encodes sort keys so that byte order is the ORDER BY order.
#[derive(Debug)]
pub(crate) struct KeyEncoder {
    keys: Vec<SortKey>,
    subst: Vec<Expr>,
    conv: RowConverter,
}

impl KeyEncoder {
    pub(crate) fn new(
        keys: &[SortKey],
        subst: &[Expr],
        input: &SchemaRef,
    ) -> Result<Self, ExecError> {
        let empty = RecordBatch::new_empty(input.clone());
        let ctx = Ctx {
            batch: &empty,
            subst,
        };
        let mut fields = Vec::new();
        for k in keys {
            let t = eval_array(&k.expr, ctx)?.data_type().clone();
            fields.push(SortField::new_with_options(
                t,
                SortOptions {
                    descending: k.descending,
                    nulls_first: k.nulls_first,
                },
            ));
        }
        Ok(Self {
            keys: keys.to_vec(),
            subst: subst.to_vec(),
            conv: RowConverter::new(fields).map_err(err("sort key encoding"))?,
        })
    }

    /// The key columns of `batch` (before encoding).
    pub(crate) fn columns(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, ExecError> {
        let ctx = Ctx {
            batch,
            subst: &self.subst,
        };
        self.keys
            .iter()
            .map(|k| Ok(normalize_float(eval_array(&k.expr, ctx)?)))
            .collect()
    }

    pub(crate) fn encode(&self, batch: &RecordBatch) -> Result<Rows, ExecError> {
        let cols = self.columns(batch)?;
        self.conv
            .convert_columns(&cols)
            .map_err(err("sort key encoding"))
    }
}

/// Indices of `rows` in key order, stable; at most `limit`.
fn sorted_indices(rows: &Rows, limit: Option<usize>) -> UInt32Array {
    let mut idx: Vec<u32> = (0..rows.num_rows() as u32).collect();
    idx.sort_by(|a, b| rows.row(*a as usize).cmp(&rows.row(*b as usize)));
    if let Some(l) = limit {
        idx.truncate(l);
    }
    UInt32Array::from(idx)
}

fn concat(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, ExecError> {
    arrow_select::concat::concat_batches(schema, batches).map_err(err("concatenating batches"))
}

fn take(batch: &RecordBatch, idx: &UInt32Array) -> Result<RecordBatch, ExecError> {
    if batch.num_columns() == 0 {
        let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(idx.len()));
        return RecordBatch::try_new_with_options(batch.schema(), vec![], &opts)
            .map_err(err("selecting rows"));
    }
    arrow_select::take::take_record_batch(batch, idx).map_err(err("selecting rows"))
}

/// Full, stable sort: holds its whole input.
#[derive(Debug)]
pub(crate) struct Sort {
    enc: KeyEncoder,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    /// `batches[..owned]` holds no ring memory.
    owned: usize,
}

impl Sort {
    pub(crate) fn new(
        keys: &[SortKey],
        subst: &[Expr],
        input: &SchemaRef,
    ) -> Result<Self, ExecError> {
        Ok(Self {
            enc: KeyEncoder::new(keys, subst, input)?,
            schema: input.clone(),
            batches: Vec::new(),
            owned: 0,
        })
    }

    /// Copies the batches still in the ring out of it (see `Execution::unpin`).
    pub(crate) fn unpin(&mut self) -> Result<(), ExecError> {
        super::unpin_tail(&mut self.batches, &mut self.owned)
    }

    pub(crate) fn push(&mut self, batch: RecordBatch) {
        if batch.num_rows() > 0 {
            self.batches.push(batch);
        }
    }

    pub(crate) fn finish(self) -> Result<Option<RecordBatch>, ExecError> {
        if self.batches.is_empty() {
            return Ok(None);
        }
        let all = concat(&self.schema, &self.batches)?;
        let rows = self.enc.encode(&all)?;
        Ok(Some(take(&all, &sorted_indices(&rows, None))?))
    }
}

/// ORDER BY + LIMIT: keeps the best `k` rows seen so far, compacting its buffer when
/// it exceeds `max(2k, 4096)` rows, and drops rows that cannot beat the current k-th.
#[derive(Debug)]
pub(crate) struct TopK {
    enc: KeyEncoder,
    schema: SchemaRef,
    k: usize,
    /// The best rows, sorted (after a compaction), then later arrivals.
    held: Vec<RecordBatch>,
    held_rows: usize,
    /// `held[..owned]` holds no ring memory.
    owned: usize,
    /// Encoded key of the k-th row, once `k` rows are held.
    kth: Option<Box<[u8]>>,
    /// Key column values of the k-th row (for the dynamic filter).
    kth_values: Option<Vec<ArrayRef>>,
}

impl TopK {
    pub(crate) fn new(
        keys: &[SortKey],
        k: u64,
        subst: &[Expr],
        input: &SchemaRef,
    ) -> Result<Self, ExecError> {
        Ok(Self {
            enc: KeyEncoder::new(keys, subst, input)?,
            schema: input.clone(),
            k: usize::try_from(k).unwrap_or(usize::MAX),
            held: Vec::new(),
            held_rows: 0,
            owned: 0,
            kth: None,
            kth_values: None,
        })
    }

    fn budget(&self) -> usize {
        // Small in tests so that compaction and the k-th key filter are exercised.
        const MIN_BUDGET: usize = if cfg!(test) { 4 } else { 4096 };
        self.k.saturating_mul(2).max(MIN_BUDGET)
    }

    pub(crate) fn push(&mut self, batch: RecordBatch) -> Result<(), ExecError> {
        if self.k == 0 || batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = match &self.kth {
            Some(kth) => {
                // A later row beats the k-th only when its key is strictly smaller
                // (ties keep the earlier row: the sort is stable).
                let rows = self.enc.encode(&batch)?;
                let keep: Vec<u32> = (0..rows.num_rows())
                    .filter(|&i| rows.row(i).as_ref() < &kth[..])
                    .map(|i| i as u32)
                    .collect();
                if keep.is_empty() {
                    return Ok(());
                }
                if keep.len() == batch.num_rows() {
                    batch
                } else {
                    take(&batch, &UInt32Array::from(keep))?
                }
            }
            None => batch,
        };
        self.held_rows += batch.num_rows();
        self.held.push(batch);
        if self.held_rows >= self.budget() {
            self.compact()?;
        }
        Ok(())
    }

    fn compact(&mut self) -> Result<(), ExecError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let all = concat(&self.schema, &self.held)?;
        let rows = self.enc.encode(&all)?;
        let idx = sorted_indices(&rows, Some(self.k));
        let best = take(&all, &idx)?;
        if best.num_rows() == self.k {
            let last = idx.value(self.k - 1) as usize;
            self.kth = Some(rows.row(last).as_ref().into());
            let cols = self.enc.columns(&best.slice(self.k - 1, 1))?;
            self.kth_values = Some(cols);
        }
        self.held_rows = best.num_rows();
        self.held = vec![best];
        self.owned = 1; // `take` copied the rows
        Ok(())
    }

    /// Copies the candidates still in the ring out of it (see `Execution::unpin`).
    pub(crate) fn unpin(&mut self) -> Result<(), ExecError> {
        super::unpin_tail(&mut self.held, &mut self.owned)
    }

    /// The key values of the current k-th row, once `k` rows are held.
    pub(crate) fn kth_values(&self) -> Option<&[ArrayRef]> {
        self.kth_values.as_deref()
    }

    /// The key values of the exact k-th row of everything pushed so far (a compaction
    /// first), or `None` when fewer than `k` rows came.
    pub(crate) fn exact_kth_values(&mut self) -> Result<Option<&[ArrayRef]>, ExecError> {
        if self.held.len() > 1 || self.kth.is_none() {
            self.compact()?;
        }
        Ok(self.kth_values.as_deref())
    }

    /// Whether at least `k` rows came.
    pub(crate) fn saw_k_rows(&self) -> bool {
        self.kth.is_some() || self.held_rows >= self.k
    }

    pub(crate) fn finish(mut self) -> Result<Option<RecordBatch>, ExecError> {
        self.compact()?;
        Ok(self.held.pop())
    }

    /// Rows held now (tests: memory stays bounded).
    #[cfg(test)]
    pub(crate) fn held_rows(&self) -> usize {
        self.held_rows
    }
}

/// SELECT DISTINCT, streaming: passes on each row the first time it is seen.
#[derive(Debug)]
pub(crate) struct Distinct {
    conv: Option<RowConverter>,
    seen: HashSet<Box<[u8]>>,
}

impl Distinct {
    pub(crate) fn new(input: &SchemaRef) -> Result<Self, ExecError> {
        let fields: Vec<SortField> = input
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        let conv = if fields.is_empty() {
            None
        } else {
            Some(RowConverter::new(fields).map_err(err("DISTINCT encoding"))?)
        };
        Ok(Self {
            conv,
            seen: HashSet::new(),
        })
    }

    pub(crate) fn push(&mut self, batch: &RecordBatch) -> Result<Option<RecordBatch>, ExecError> {
        let Some(conv) = &self.conv else {
            // No columns: one empty row at most.
            if batch.num_rows() == 0 || !self.seen.insert(Box::new([])) {
                return Ok(None);
            }
            return take(batch, &UInt32Array::from(vec![0u32])).map(Some);
        };
        let cols: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(|c| normalize_float(c.clone()))
            .collect();
        let rows = conv
            .convert_columns(&cols)
            .map_err(err("DISTINCT encoding"))?;
        let mut keep = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            if !self.seen.contains(r.as_ref()) {
                self.seen.insert(r.as_ref().into());
                keep.push(i as u32);
            }
        }
        if keep.is_empty() {
            return Ok(None);
        }
        take(batch, &UInt32Array::from(keep)).map(Some)
    }
}
