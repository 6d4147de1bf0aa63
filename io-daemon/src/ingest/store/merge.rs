//! A compaction's merge of a table's files, a batch at a time.
//!
//! Every file the daemon writes is sorted by the primary key, so merging them needs one
//! batch of each in memory, not their rows (reading up to 512 MiB of Parquet whole and
//! sorting it took 3.7 GB of a daemon that had just loaded 30M rows in 640 MB). Each
//! step takes, from the input whose next key is smallest, the run of rows up to the
//! next key of any other input: where the files' key ranges do not overlap (a load in
//! key order), whole batches go at once. A table without a key keeps its files' order.

use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

use super::*;

/// Rows per batch read from each input.
const READ_ROWS: usize = 8 * 1024;
/// Rows per batch handed to the writer.
const OUT_ROWS: usize = 32 * 1024;

/// One input file: its reader and the batch being taken from.
struct Input {
    path: PathBuf,
    reader: ParquetRecordBatchReader,
    batch: RecordBatch,
    /// The batch's encoded keys (empty without a key).
    keys: Option<Rows>,
    /// The next row of `batch` to take.
    at: usize,
    /// The last key taken, to check the file's order across its batches.
    last: Option<Box<[u8]>>,
}

/// The merged rows of a table's files, in key order.
pub(super) struct Merge<'t> {
    table: &'t Table,
    inputs: Vec<Input>,
}

impl<'t> Merge<'t> {
    /// Opens `paths` (files of `table`, each sorted by its key).
    pub(super) fn open(table: &'t Table, paths: &[PathBuf]) -> Result<Self, String> {
        let mut inputs = Vec::with_capacity(paths.len());
        for path in paths {
            let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(File::open(path).map_err(|e| err(&e))?)
                    .map_err(|e| err(&e))?
                    .with_batch_size(READ_ROWS)
                    .build()
                    .map_err(|e| err(&e))?;
            inputs.push(Input {
                path: path.clone(),
                reader,
                batch: RecordBatch::new_empty(Arc::clone(&table.schema)),
                keys: None,
                at: 0,
                last: None,
            });
        }
        Ok(Self { table, inputs })
    }

    /// Loads the next batch of each input that has taken all of its own; drops the
    /// inputs that are done.
    fn refill(&mut self) -> Result<(), String> {
        let table = self.table;
        let mut i = 0;
        while i < self.inputs.len() {
            let input = &mut self.inputs[i];
            while input.at == input.batch.num_rows() {
                match input.reader.next() {
                    None => break,
                    Some(batch) => {
                        let err =
                            |e: &dyn std::fmt::Display| format!("{}: {e}", input.path.display());
                        let batch = batch.map_err(|e| err(&e))?;
                        let batch = table
                            .conform(vec![batch])?
                            .pop()
                            .unwrap_or_else(|| RecordBatch::new_empty(Arc::clone(&table.schema)));
                        input.keys = if table.key.is_empty() {
                            None
                        } else {
                            let keys = table.encode_keys(&batch)?;
                            check_order(&input.path, input.last.as_deref(), &keys)?;
                            if keys.num_rows() > 0 {
                                input.last = Some(keys.row(keys.num_rows() - 1).data().into());
                            }
                            Some(keys)
                        };
                        input.batch = batch;
                        input.at = 0;
                    }
                }
            }
            if input.at == input.batch.num_rows() {
                self.inputs.remove(i);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// The next run of rows in key order: (input, end of the run in its batch).
    fn next_run(&self) -> (usize, usize) {
        fn key(input: &Input) -> Option<arrow_row::Row<'_>> {
            input.keys.as_ref().map(|k| k.row(input.at))
        }
        // Without a key: the first input's batch, whole.
        let Some(_) = key(&self.inputs[0]) else {
            return (0, self.inputs[0].batch.num_rows());
        };
        let mut min = 0;
        for (i, input) in self.inputs.iter().enumerate().skip(1) {
            if key(input) < key(&self.inputs[min]) {
                min = i;
            }
        }
        let bound = self
            .inputs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != min)
            .filter_map(|(_, input)| key(input))
            .min();
        let input = &self.inputs[min];
        let (keys, rows) = (input.keys.as_ref(), input.batch.num_rows());
        let end = match (keys, bound) {
            (Some(keys), Some(bound)) => {
                // The batch's keys rise: the run ends at the first key above the bound.
                let (mut lo, mut hi) = (input.at + 1, rows);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if keys.row(mid) <= bound {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
            _ => rows,
        };
        (min, end)
    }
}

/// Refuses a batch whose keys do not rise from `last` (the file's key before it): a
/// merge of files that are not sorted would write one that is not.
fn check_order(path: &Path, last: Option<&[u8]>, keys: &Rows) -> Result<(), String> {
    let mut previous = last;
    for row in keys.iter() {
        let key = row.data();
        if previous.is_some_and(|p| p > key) {
            return Err(format!(
                "{}: its rows are not in key order, so it cannot be merged",
                path.display()
            ));
        }
        previous = Some(key);
    }
    Ok(())
}

impl Iterator for Merge<'_> {
    type Item = Result<RecordBatch, String>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut pieces = Vec::new();
        let mut rows = 0;
        while rows < OUT_ROWS {
            if let Err(e) = self.refill() {
                return Some(Err(e));
            }
            if self.inputs.is_empty() {
                break;
            }
            let (i, end) = self.next_run();
            let input = &mut self.inputs[i];
            let end = end.min(input.at + (OUT_ROWS - rows)).max(input.at + 1);
            pieces.push(input.batch.slice(input.at, end - input.at));
            rows += end - input.at;
            input.at = end;
        }
        if pieces.is_empty() {
            return None;
        }
        Some(
            arrow_select::concat::concat_batches(&self.table.schema, &pieces)
                .map_err(|e| format!("table {}: merging its files: {e}", self.table.name)),
        )
    }
}
