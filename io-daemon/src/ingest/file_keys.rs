//! What a written table's files hold of its primary key, in two bytes a key: per file a
//! bloom filter of its encoded keys, and per row group the smallest and largest key.
//! A new key is checked against the files by these alone; only a key they cannot rule
//! out (a duplicate, or one in a thousand or so of the rest) costs a read of the key
//! columns of the row groups that may hold it, one read per row group for a whole
//! statement. Holding every key of the files in memory took about 60 bytes a key (600
//! MB for 10M keys) and a read of every key at start-up.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_row::RowConverter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

/// Bits of bloom filter per key: about 0.1% false positives with 8 probes in one
/// 256-bit block.
const BITS_PER_KEY: u64 = 16;

/// A split-block bloom filter: each key sets one bit in each of the eight 32-bit words
/// of one 256-bit block, so a probe touches one cache line.
#[derive(Debug)]
struct Bloom {
    blocks: Vec<[u32; 8]>,
}

/// Odd constants that spread a key's 32-bit hash over the eight words of its block.
const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

fn hash(key: &[u8]) -> u64 {
    // Fixed seed: filters live in this process only, and a test can reproduce them.
    foldhash::quality::FixedState::with_seed(0x5eed).hash_one(key)
}

impl Bloom {
    fn for_keys(keys: u64) -> Self {
        let blocks = (keys.max(1) * BITS_PER_KEY).div_ceil(256);
        Self {
            blocks: vec![[0; 8]; usize::try_from(blocks).unwrap_or(usize::MAX / 64)],
        }
    }

    fn masks(h: u64) -> (usize, [u32; 8]) {
        let low = h as u32;
        let mut masks = [0u32; 8];
        for (m, salt) in masks.iter_mut().zip(SALT) {
            *m = 1 << (low.wrapping_mul(salt) >> 27);
        }
        ((h >> 32) as usize, masks)
    }

    fn block(&self, high: usize) -> usize {
        // Multiply-shift onto the blocks (no modulo).
        ((high as u64 * self.blocks.len() as u64) >> 32) as usize
    }

    fn insert(&mut self, key: &[u8]) {
        let (high, masks) = Self::masks(hash(key));
        let i = self.block(high);
        for (word, m) in self.blocks[i].iter_mut().zip(masks) {
            *word |= m;
        }
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        let (high, masks) = Self::masks(hash(key));
        let block = &self.blocks[self.block(high)];
        block.iter().zip(masks).all(|(word, m)| word & m != 0)
    }
}

/// The smallest and largest encoded key of a row group.
type KeyRange = (Box<[u8]>, Box<[u8]>);

/// The keys (their index, their bytes) a row group of a file may hold.
type Reads<'k> = BTreeMap<(usize, usize), Vec<(usize, &'k [u8])>>;

/// One file's keys in brief.
#[derive(Debug)]
pub(crate) struct FileKeys {
    path: PathBuf,
    bloom: Bloom,
    /// Per row group: its smallest and largest encoded key (`None`: no rows).
    groups: Vec<Option<KeyRange>>,
    /// The file's smallest and largest key (`None`: no rows): most keys of a load in
    /// key order are ruled out by it before the filter is probed.
    range: Option<KeyRange>,
    /// The table's file generation when this file joined it (see `TableState`).
    pub(crate) added: u64,
    /// A compaction's output: every key in it was in the files it replaced.
    pub(crate) merged: bool,
}

/// Reads the columns `key` of the row groups `groups` of `path` (all when `None`),
/// calling `each` with every batch's key columns in the key's order.
pub(crate) fn read_keys(
    path: &Path,
    key: &[usize],
    groups: Option<Vec<usize>>,
    each: &mut dyn FnMut(&[ArrayRef]) -> Result<(), String>,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = File::open(path).map_err(|e| err(&e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(&e))?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), key.iter().copied());
    let builder = builder.with_projection(mask).with_batch_size(64 * 1024);
    let builder = match groups {
        Some(groups) => builder.with_row_groups(groups),
        None => builder,
    };
    // A projection gives the columns in the file's order; the key's may differ.
    let mut in_file = key.to_vec();
    in_file.sort_unstable();
    let order: Vec<usize> = key
        .iter()
        .map(|k| in_file.iter().position(|c| c == k).unwrap_or(0))
        .collect();
    for batch in builder.build().map_err(|e| err(&e))? {
        let batch: RecordBatch = batch.map_err(|e| err(&e))?;
        let columns: Vec<ArrayRef> = order.iter().map(|&i| Arc::clone(batch.column(i))).collect();
        each(&columns)?;
    }
    Ok(())
}

impl FileKeys {
    /// Reads the key columns `key` of the table file `path`.
    pub(crate) fn load(
        path: &Path,
        key: &[usize],
        converter: &RowConverter,
        added: u64,
        merged: bool,
    ) -> Result<Self, String> {
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let file = File::open(path).map_err(|e| err(&e))?;
        let metadata = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| err(&e))?
            .metadata()
            .clone();
        let group_rows: Vec<u64> = metadata
            .row_groups()
            .iter()
            .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
            .collect();
        let mut keys = Self {
            path: path.to_path_buf(),
            bloom: Bloom::for_keys(group_rows.iter().sum()),
            groups: vec![None; group_rows.len()],
            range: None,
            added,
            merged,
        };
        // Rows left in the row group being read, and its smallest and largest key so
        // far (kept in buffers that are reused: in a file sorted by the key each row
        // is a new largest, and a boxed copy per row was most of the load's time).
        let (mut group, mut left) = (0usize, group_rows.first().copied().unwrap_or(0));
        let (mut min, mut max) = (Vec::new(), Vec::new());
        let mut seen = false;
        read_keys(path, key, None, &mut |columns| {
            let rows = converter.convert_columns(columns).map_err(|e| err(&e))?;
            for row in rows.iter() {
                while left == 0 {
                    if std::mem::take(&mut seen) {
                        keys.groups[group] = Some((min.as_slice().into(), max.as_slice().into()));
                    }
                    group += 1;
                    left = *group_rows
                        .get(group)
                        .ok_or_else(|| err(&"more rows than its row groups hold"))?;
                }
                left -= 1;
                let row = row.as_ref();
                keys.bloom.insert(row);
                if !seen {
                    seen = true;
                    min.clear();
                    min.extend_from_slice(row);
                    max.clear();
                    max.extend_from_slice(row);
                } else if row < min.as_slice() {
                    min.clear();
                    min.extend_from_slice(row);
                } else if row > max.as_slice() {
                    max.clear();
                    max.extend_from_slice(row);
                }
            }
            Ok(())
        })?;
        if seen {
            keys.groups[group] = Some((min.as_slice().into(), max.as_slice().into()));
        }
        keys.range = keys
            .groups
            .iter()
            .flatten()
            .fold(None, |range, (lo, hi)| match range {
                None => Some((lo.clone(), hi.clone())),
                Some((a, b)) => Some((
                    if lo < &a { lo.clone() } else { a },
                    if hi > &b { hi.clone() } else { b },
                )),
            });
        Ok(keys)
    }

    /// The row groups that may hold `key` (none when the filter rules it out).
    fn candidates<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
        let maybe = self
            .range
            .as_ref()
            .is_some_and(|(min, max)| key >= &**min && key <= &**max)
            && self.bloom.may_contain(key);
        self.groups
            .iter()
            .enumerate()
            .filter(move |(_, g)| {
                maybe
                    && g.as_ref()
                        .is_some_and(|(min, max)| key >= &**min && key <= &**max)
            })
            .map(|(i, _)| i)
    }

    /// The same keys, of the file now at `path` (renamed).
    pub(crate) fn moved_to(mut self, path: PathBuf) -> Self {
        self.path = path;
        self
    }

    /// Whether `key` may be in the file (no read: for a point lookup's plan).
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        self.candidates(key).next().is_some()
    }
}

/// The first of `keys` that one of `files` holds, read exactly where the filters cannot
/// rule a key out: each row group that may hold any of them is read once.
pub(crate) fn first_in_files<'k>(
    files: &[Arc<FileKeys>],
    keys: impl Iterator<Item = (usize, &'k [u8])>,
    key: &[usize],
    converter: &RowConverter,
) -> Result<Option<usize>, String> {
    // (file, row group) -> the keys (their index) it may hold.
    let mut reads: Reads<'k> = BTreeMap::new();
    for (i, k) in keys {
        for (f, file) in files.iter().enumerate() {
            for g in file.candidates(k) {
                reads.entry((f, g)).or_default().push((i, k));
            }
        }
    }
    let mut found: Option<usize> = None;
    for ((f, g), wanted) in reads {
        let mut present: HashSet<Box<[u8]>> = HashSet::new();
        let wanted_set: HashSet<&[u8]> = wanted.iter().map(|(_, k)| *k).collect();
        let path = &files[f].path;
        read_keys(path, key, Some(vec![g]), &mut |columns| {
            let rows = converter
                .convert_columns(columns)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            for row in rows.iter() {
                if wanted_set.contains(row.as_ref()) {
                    present.insert(row.as_ref().into());
                }
            }
            Ok(())
        })?;
        if let Some(&(i, _)) = wanted.iter().find(|(_, k)| present.contains(*k)) {
            found = Some(found.map_or(i, |f| f.min(i)));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bloom_filter_has_every_key_and_few_others() {
        let mut bloom = Bloom::for_keys(10_000);
        for i in 0..10_000u64 {
            bloom.insert(&i.to_be_bytes());
        }
        assert!((0..10_000u64).all(|i| bloom.may_contain(&i.to_be_bytes())));
        let false_positives = (10_000..110_000u64)
            .filter(|i| bloom.may_contain(&i.to_be_bytes()))
            .count();
        // 16 bits a key: about 0.1%; a tenth of that margin would still be 1%.
        assert!(false_positives < 1_000, "{false_positives} of 100,000");
    }
}
