//! A written table's rows in memory: acknowledged, not yet in a Parquet file.
//!
//! Rows are appended in log order and each gets an id (its position since the table
//! was opened), which is how the primary key's index names a row whatever batch holds
//! it. Single-row inserts would make one tiny batch each (a few KiB of buffers for a
//! row, and a scan of many thousands of batches): a run of small batches at the tail
//! is concatenated into one, which keeps the ids, as they count rows, not batches.

use std::time::Instant;

use arrow_array::RecordBatch;

use super::wal::Lsn;

/// Batches smaller than this are merged with their neighbours at the tail.
const SMALL_ROWS: usize = 4096;
/// A run of this many small batches at the tail is merged into one.
const MERGE_RUN: usize = 64;

/// One batch of the memtable.
#[derive(Debug, Clone)]
struct Part {
    /// Id of its first row.
    first_row: u64,
    /// The newest log position among its rows.
    last_lsn: Lsn,
    batch: RecordBatch,
}

/// A table's rows in memory.
#[derive(Debug, Default)]
pub(crate) struct Memtable {
    parts: Vec<Part>,
    /// Id of the next row appended.
    next_row: u64,
    /// Where the run of small batches at the tail begins.
    small_from: usize,
    bytes: u64,
    /// When the oldest row held arrived.
    oldest: Option<Instant>,
}

impl Memtable {
    /// Appends the rows of the commit at `lsn`; returns the id of its first row.
    pub(crate) fn append(&mut self, lsn: Lsn, batches: Vec<RecordBatch>) -> u64 {
        let first = self.next_row;
        for batch in batches.into_iter().filter(|b| b.num_rows() > 0) {
            let rows = batch.num_rows() as u64;
            self.bytes += batch.get_array_memory_size() as u64;
            self.parts.push(Part {
                first_row: self.next_row,
                last_lsn: lsn,
                batch,
            });
            self.next_row += rows;
            if self
                .parts
                .last()
                .is_some_and(|p| p.batch.num_rows() >= SMALL_ROWS)
            {
                self.small_from = self.parts.len();
            }
        }
        if self.parts.len() - self.small_from >= MERGE_RUN {
            self.merge_tail();
        }
        if self.oldest.is_none() && !self.parts.is_empty() {
            self.oldest = Some(Instant::now());
        }
        first
    }

    /// Concatenates the run of small batches at the tail (their ids stay the same).
    fn merge_tail(&mut self) {
        let run = &self.parts[self.small_from..];
        let Some(first) = run.first() else {
            return;
        };
        let schema = first.batch.schema();
        let batches: Vec<&RecordBatch> = run.iter().map(|p| &p.batch).collect();
        let Ok(merged) = arrow_select::concat::concat_batches(&schema, batches) else {
            return;
        };
        let part = Part {
            first_row: first.first_row,
            last_lsn: run.iter().map(|p| p.last_lsn).max().unwrap_or(0),
            batch: merged,
        };
        let large = part.batch.num_rows() >= SMALL_ROWS;
        self.parts.truncate(self.small_from);
        self.parts.push(part);
        if large {
            self.small_from = self.parts.len();
        }
        self.recount();
    }

    fn recount(&mut self) {
        self.bytes = self
            .parts
            .iter()
            .map(|p| p.batch.get_array_memory_size() as u64)
            .sum();
    }

    /// Every batch, in row order.
    pub(crate) fn batches(&self) -> Vec<RecordBatch> {
        self.parts.iter().map(|p| p.batch.clone()).collect()
    }

    /// The row with id `row`, if it is still held.
    pub(crate) fn row(&self, row: u64) -> Option<RecordBatch> {
        let at = self
            .parts
            .partition_point(|p| p.first_row <= row)
            .checked_sub(1)?;
        let part = &self.parts[at];
        let offset = usize::try_from(row - part.first_row).ok()?;
        (offset < part.batch.num_rows()).then(|| part.batch.slice(offset, 1))
    }

    /// What a flush takes now: the batches, the newest log position among them, and
    /// the id after their last row (`None` when empty).
    pub(crate) fn to_flush(&self) -> Option<(Vec<RecordBatch>, Lsn, u64)> {
        let last = self.parts.iter().map(|p| p.last_lsn).max()?;
        Some((self.batches(), last, self.next_row))
    }

    /// Drops the rows before id `end` (a flush put them in a file).
    pub(crate) fn drop_before(&mut self, end: u64) {
        self.parts
            .retain(|p| p.first_row + p.batch.num_rows() as u64 > end);
        if let Some(first) = self.parts.first_mut() {
            if first.first_row < end {
                // Merged after the flush took its rows: keep the newer ones only.
                let skip = usize::try_from(end - first.first_row).unwrap_or(0);
                first.batch = first.batch.slice(skip, first.batch.num_rows() - skip);
                first.first_row = end;
            }
        }
        self.small_from = self
            .parts
            .iter()
            .rposition(|p| p.batch.num_rows() >= SMALL_ROWS)
            .map_or(0, |i| i + 1);
        self.recount();
        if self.parts.is_empty() {
            self.oldest = None;
        }
    }

    /// Drops every row (a truncate).
    pub(crate) fn clear(&mut self) {
        self.parts.clear();
        self.small_from = 0;
        self.bytes = 0;
        self.oldest = None;
    }

    /// Whether a row id is older than every row held (a flush moved it into a file).
    #[cfg(test)]
    fn flushed(&self, row: u64) -> bool {
        self.parts.first().is_none_or(|p| row < p.first_row)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub(crate) fn rows(&self) -> u64 {
        self.parts.iter().map(|p| p.batch.num_rows() as u64).sum()
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn oldest(&self) -> Option<Instant> {
        self.oldest
    }

    /// The id the next appended row gets.
    pub(crate) fn next_row(&self) -> u64 {
        self.next_row
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    fn batch(values: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values.to_vec()))]).unwrap()
    }

    fn value(b: &RecordBatch) -> i64 {
        b.column(0).as_primitive::<Int64Type>().value(0)
    }

    fn all(m: &Memtable) -> Vec<i64> {
        m.batches()
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn single_rows_are_merged_and_keep_their_ids() {
        let mut m = Memtable::default();
        for i in 0..1000 {
            assert_eq!(m.append(i as u64 + 1, vec![batch(&[i])]), i as u64);
        }
        assert!(
            m.parts.len() < 70,
            "{} batches for 1000 rows",
            m.parts.len()
        );
        assert!(m.bytes() < 1000 * 256, "{} bytes", m.bytes());
        assert_eq!(all(&m), (0..1000).collect::<Vec<_>>());
        for id in [0, 1, 63, 64, 500, 999] {
            assert_eq!(value(&m.row(id).unwrap()), id as i64);
        }
        assert!(m.row(1000).is_none());
    }

    #[test]
    fn a_flush_drops_what_it_took_even_when_merged_with_newer_rows() {
        let mut m = Memtable::default();
        for i in 0..100 {
            m.append(i as u64 + 1, vec![batch(&[i])]);
        }
        let (taken, lsn, end) = m.to_flush().unwrap();
        assert_eq!(
            (
                taken.iter().map(RecordBatch::num_rows).sum::<usize>(),
                lsn,
                end
            ),
            (100, 100, 100)
        );
        // Rows arrive (and merge with the taken ones) before the flush commits.
        for i in 100..150 {
            m.append(i as u64 + 1, vec![batch(&[i])]);
        }
        m.drop_before(end);
        assert_eq!(all(&m), (100..150).collect::<Vec<_>>());
        assert!(m.flushed(99) && !m.flushed(100));
        assert_eq!(value(&m.row(120).unwrap()), 120);
        assert!(m.row(50).is_none());
        m.drop_before(150);
        assert!(m.is_empty() && m.oldest().is_none() && m.flushed(149));
        assert_eq!(m.append(151, vec![batch(&[7, 8])]), 150);
        assert_eq!(value(&m.row(151).unwrap()), 8);
    }
}
