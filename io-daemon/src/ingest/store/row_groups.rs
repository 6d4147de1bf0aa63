//! Where a table file's row groups end.
//!
//! A file sorted by a key of several columns, say `(symbol, ts)`, is pruned column by
//! column: a row group's statistics say `symbol` in `[META, MSFT]` and `ts` in
//! `[2024-01-02, 2036-03-11]`, which admits `(MSFT, 2024-01-03)` although the group
//! holds META's last and MSFT's first rows only. Row groups cut every 64Ki rows straddle
//! each change of the first column, and a point lookup then reads the group that holds
//! its key and the group at the end of its first column's run. A row group that holds
//! one value of the first column has exact bounds for the second (that value's rows are
//! sorted by it), so its statistics prune as the whole key would.
//!
//! So a row group ends early where the key's first column changes, when it held one
//! value of it so far and at least `min` rows: a run of the first column that fills
//! row groups starts a fresh one, and a few long runs (ticks per symbol) give row
//! groups that each hold one. Short runs (a key whose first column is near-unique)
//! change it at once, and their row groups fill to `max` as before.

use std::cmp::Ordering;

use arrow_array::{Array, ArrayRef};
use arrow_ord::ord::make_comparator;
use arrow_ord::partition::partition;
use arrow_schema::{ArrowError, SortOptions};

/// Row-group boundaries of one file written in key order, batch by batch.
pub(super) struct GroupCuts {
    max: usize,
    min: usize,
    /// Rows in the current row group.
    rows: usize,
    /// Whether the current row group holds more than one value of the first column.
    mixed: bool,
    /// The first column's last value written (a one-row slice).
    last: Option<ArrayRef>,
}

impl GroupCuts {
    /// Row groups of at most `max` rows, cut early at a change of the first key column
    /// once they hold `min`.
    pub(super) fn new(max: usize, min: usize) -> Self {
        Self {
            max: max.max(1),
            min: min.max(1),
            rows: 0,
            mixed: false,
            last: None,
        }
    }

    /// The positions in the next batch (whose first key column is `lead`) before which
    /// a row group ends, ascending, each in `0..=lead.len()` (0: the row group before
    /// this batch ends; `len`: the batch fills it). Call once per batch, in order.
    pub(super) fn cuts(&mut self, lead: &ArrayRef) -> Result<Vec<usize>, ArrowError> {
        let len = lead.len();
        if len == 0 {
            return Ok(Vec::new());
        }
        let continues = match &self.last {
            Some(last) => {
                make_comparator(last.as_ref(), lead.as_ref(), SortOptions::default())?(0, 0).is_eq()
            }
            None => false,
        };
        let mut cuts = Vec::new();
        for (i, run) in partition(std::slice::from_ref(lead))?
            .ranges()
            .into_iter()
            .enumerate()
        {
            let new_value = i > 0 || !continues;
            if new_value && self.rows > 0 {
                if !self.mixed && self.rows >= self.min {
                    cuts.push(run.start);
                    self.rows = 0;
                } else {
                    self.mixed = true;
                }
            }
            let mut at = run.start;
            while self.rows + (run.end - at) >= self.max {
                at += self.max - self.rows;
                cuts.push(at);
                // The next row group starts inside this run: one value so far.
                self.rows = 0;
                self.mixed = false;
            }
            self.rows += run.end - at;
        }
        self.last = Some(lead.slice(len - 1, 1));
        debug_assert!(cuts.windows(2).all(|w| w[0].cmp(&w[1]) == Ordering::Less));
        Ok(cuts)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};

    use super::*;

    /// Row-group sizes `GroupCuts` makes of `batches` (first-column values).
    fn sizes(max: usize, min: usize, batches: &[Vec<&str>]) -> Vec<usize> {
        let mut cuts = GroupCuts::new(max, min);
        let mut sizes = Vec::new();
        let mut current = 0;
        for batch in batches {
            let lead: ArrayRef = Arc::new(StringArray::from(batch.clone()));
            let mut start = 0;
            for cut in cuts.cuts(&lead).unwrap() {
                current += cut - start;
                if current > 0 {
                    sizes.push(current);
                }
                current = 0;
                start = cut;
            }
            current += batch.len() - start;
        }
        if current > 0 {
            sizes.push(current);
        }
        sizes
    }

    fn run(v: &'static str, n: usize) -> Vec<&'static str> {
        vec![v; n]
    }

    #[test]
    fn long_runs_of_the_first_column_get_row_groups_of_their_own() {
        // 10 rows of a, 10 of b, 3 of c: groups of at most 4, cut early from 2 rows.
        let rows = [run("a", 10), run("b", 10), run("c", 3)].concat();
        assert_eq!(
            sizes(4, 2, std::slice::from_ref(&rows)),
            [4, 4, 2, 4, 4, 2, 3]
        );
        // The same rows in batches of 3: the same groups.
        let batches: Vec<Vec<&str>> = rows.chunks(3).map(<[_]>::to_vec).collect();
        assert_eq!(sizes(4, 2, &batches), [4, 4, 2, 4, 4, 2, 3]);
        // Batches of 1: every change is at a batch's start.
        let batches: Vec<Vec<&str>> = rows.chunks(1).map(<[_]>::to_vec).collect();
        assert_eq!(sizes(4, 2, &batches), [4, 4, 2, 4, 4, 2, 3]);
    }

    #[test]
    fn short_runs_fill_row_groups_as_before() {
        // A near-unique first column changes on every row: never cut early.
        let rows: Vec<&str> = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"].to_vec();
        assert_eq!(sizes(4, 2, &[rows]), [4, 4, 2]);
        // A run shorter than `min` at a group's end shares a group with the next
        // value's rows, up to the next cut.
        let rows = [run("a", 5), run("b", 6), run("c", 2)].concat();
        // a a a a | a b b b | b b b | c c
        assert_eq!(sizes(4, 2, &[rows]), [4, 4, 3, 2]);
        let rows = [run("a", 5), run("b", 2), run("c", 2)].concat();
        // a a a a | a b b c | c
        assert_eq!(sizes(4, 2, &[rows]), [4, 4, 1]);
    }

    #[test]
    fn a_change_at_a_batch_boundary_is_seen() {
        // A batch ending one value's run and the next starting another's.
        assert_eq!(sizes(8, 2, &[run("a", 3), run("b", 3)]), [3, 3]);
        // The same value across batches is one run.
        assert_eq!(sizes(8, 2, &[run("a", 3), run("a", 3)]), [6]);
        // Integers too, and empty batches change nothing.
        let mut cuts = GroupCuts::new(8, 2);
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, 1, 1]));
        let empty: ArrayRef = Arc::new(Int64Array::from(Vec::<i64>::new()));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![2, 2]));
        assert_eq!(cuts.cuts(&a).unwrap(), Vec::<usize>::new());
        assert_eq!(cuts.cuts(&empty).unwrap(), Vec::<usize>::new());
        assert_eq!(cuts.cuts(&b).unwrap(), [0]);
    }
}
