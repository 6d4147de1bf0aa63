//! Row-group pruning with split-block bloom filters, for `=` and `IN`.
//!
//! A bloom filter answers "definitely absent" for a value; that removes TRUE from the
//! outcomes of `column = value` in the row group, and the whole predicate is then
//! re-evaluated with the column-chunk statistics, so `=` under AND, OR and NOT all work.

use std::collections::HashMap;
use std::sync::Arc;

use parquet::bloom_filter::Sbbf;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::ChunkReader;
use ringscan_ipc::scan_data::{CmpOp, Literal, Operand, Predicate};

use super::column::{ColumnMap, Decode, LeafColumn};
use super::eval::{evaluate, Outcomes, Stats};
use super::range::{literal_to_scalar, Scalar};
use super::row_group::{row_group_may_match, RowGroupPruning, RowGroupStats};
use crate::error::PruneError;

/// Bloom filters larger than this are not read (the length comes from the file).
pub const MAX_BLOOM_FILTER_BYTES: u64 = 16 << 20;

struct BloomStats<'a> {
    inner: RowGroupStats<'a>,
    filters: HashMap<&'a str, (&'a LeafColumn, Arc<Sbbf>)>,
}

/// Gives the bloom filter of (row group, leaf column), `None` where the chunk has none.
pub type BloomLoad<'a> = dyn FnMut(usize, usize) -> Result<Option<Arc<Sbbf>>, ParquetError> + 'a;

/// `Some(false)` when the filter proves `lit` absent; `None` when it cannot be asked.
fn filter_check(leaf: &LeafColumn, filter: &Sbbf, lit: &Literal) -> Option<bool> {
    // Hash the value exactly as the writer did: its physical representation.
    let scalar = literal_to_scalar(leaf.kind, lit)?;
    match (leaf.decode, scalar) {
        (Decode::I32, Scalar::Int(v)) => Some(filter.check(&i32::try_from(v).ok()?)),
        (Decode::U32, Scalar::Int(v)) => Some(filter.check(&(u32::try_from(v).ok()? as i32))),
        (Decode::I64, Scalar::Int(v)) => Some(filter.check(&i64::try_from(v).ok()?)),
        (Decode::U64, Scalar::Int(v)) => Some(filter.check(&(u64::try_from(v).ok()? as i64))),
        (Decode::Bytes, Scalar::Bytes(b)) => Some(filter.check(b.as_slice())),
        // Floats (two zeros, many NaNs) and booleans: not worth the risk.
        _ => None,
    }
}

impl Stats for BloomStats<'_> {
    fn compare(&self, column: &str, op: CmpOp, lit: &Literal) -> Outcomes {
        let out = self.inner.compare(column, op, lit);
        if op == CmpOp::Eq {
            if let Some((leaf, filter)) = self.filters.get(column) {
                if filter_check(leaf, filter, lit) == Some(false) {
                    return out.without(Outcomes::TRUE);
                }
            }
        }
        out
    }
    fn is_null(&self, column: &str) -> Outcomes {
        self.inner.is_null(column)
    }
}

/// Columns compared for equality with a literal somewhere in `pred`.
fn equality_columns<'p>(pred: &'p Predicate, out: &mut Vec<&'p str>) {
    let mut add = |c: &'p str| {
        if !out.contains(&c) {
            out.push(c);
        }
    };
    match pred {
        Predicate::Compare {
            left,
            op: CmpOp::Eq,
            right,
        } => match (left, right) {
            (Operand::Column(c), Operand::Literal(_))
            | (Operand::Literal(_), Operand::Column(c)) => add(c),
            _ => {}
        },
        Predicate::InList {
            expr: Operand::Column(c),
            ..
        } => add(c),
        Predicate::And(v) | Predicate::Or(v) => v.iter().for_each(|p| equality_columns(p, out)),
        Predicate::Not(p) => equality_columns(p, out),
        _ => {}
    }
}

pub(crate) fn filter<R: ChunkReader>(
    meta: &ParquetMetaData,
    columns: &ColumnMap,
    reader: &R,
    pred: &Predicate,
    row_groups: &[usize],
    file: &str,
) -> Result<RowGroupPruning, PruneError> {
    let mut read = |g: usize, leaf: usize| {
        Sbbf::read_from_column_chunk(meta.row_group(g).column(leaf), reader)
            .map(|f| f.map(Arc::new))
    };
    filter_with(meta, columns, pred, row_groups, file, &mut read)
}

/// [`filter`] with the bloom filter of (row group, leaf column) from `load`: read from
/// the file, or kept from an earlier scan.
pub(crate) fn filter_with(
    meta: &ParquetMetaData,
    columns: &ColumnMap,
    pred: &Predicate,
    row_groups: &[usize],
    file: &str,
    load: &mut BloomLoad<'_>,
) -> Result<RowGroupPruning, PruneError> {
    let mut names = Vec::new();
    equality_columns(pred, &mut names);
    let leaves: Vec<(&str, &LeafColumn)> = names
        .iter()
        .filter_map(|&n| columns.get(n).map(|l| (n, l)))
        .collect();
    let mut out = RowGroupPruning {
        considered: row_groups.len(),
        ..Default::default()
    };
    for &g in row_groups {
        if g >= meta.num_row_groups() {
            return Err(PruneError::RowGroupOutOfRange {
                file: file.to_owned(),
                row_group: g,
                num_row_groups: meta.num_row_groups(),
            });
        }
        if !row_group_may_match(meta, columns, pred, g) {
            out.pruned += 1;
            continue;
        }
        let row_group = meta.row_group(g);
        let mut filters = HashMap::new();
        for &(name, leaf) in &leaves {
            let chunk = row_group.column(leaf.index);
            let too_big = chunk
                .bloom_filter_length()
                .is_some_and(|len| u64::try_from(len).map_or(true, |l| l > MAX_BLOOM_FILTER_BYTES));
            if too_big {
                continue;
            }
            let sbbf = load(g, leaf.index).map_err(|source| PruneError::BloomFilter {
                file: file.to_owned(),
                row_group: g,
                column: name.to_owned(),
                source,
            })?;
            if let Some(sbbf) = sbbf {
                filters.insert(name, (leaf, sbbf));
            }
        }
        let stats = BloomStats {
            inner: RowGroupStats {
                columns,
                meta,
                index: g,
            },
            filters,
        };
        if evaluate(pred, &stats).can_be_true() {
            out.kept.push(g);
        } else {
            out.pruned += 1;
        }
    }
    Ok(out)
}
