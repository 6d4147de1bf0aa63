//! Reads a Parquet footer back and reports what a writer promised: row groups,
//! statistics, page index, bloom filters, sorting columns. Used by `ringscan demo` and by
//! the tests that hold the generator to its word.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::page_index::column_index::ColumnIndexMetaData;

use crate::error::GeneratorError;

/// What a Parquet file's footer says.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Rows.
    pub rows: u64,
    /// Row groups, with their row counts.
    pub row_group_rows: Vec<u64>,
    /// Leaf column paths (`phones.list.item.number`).
    pub columns: Vec<String>,
    /// Compression codec of the first column chunk.
    pub compression: String,
    /// Leaf columns with min/max statistics in every row group.
    pub columns_with_statistics: Vec<String>,
    /// Leaf columns with a column index (page statistics) in every row group.
    pub columns_with_column_index: Vec<String>,
    /// Whether every column chunk has an offset index.
    pub offset_index: bool,
    /// Leaf columns with a bloom filter in every row group.
    pub bloom_columns: Vec<String>,
    /// The sorting columns of the first row group, by path.
    pub sorted_by: Vec<String>,
    /// Data pages per column chunk, summed over the file (from the offset index).
    pub data_pages: usize,
}

/// Reads the footer of `path`.
pub fn describe(path: &Path) -> Result<FileReport, GeneratorError> {
    let parquet_err = |source| GeneratorError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(|source| GeneratorError::Io {
        action: "open",
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = file
        .metadata()
        .map_err(|source| GeneratorError::Io {
            action: "inspect",
            path: path.to_path_buf(),
            source,
        })?
        .len();
    let meta = ParquetMetaDataReader::new()
        .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Optional)
        .parse_and_finish(&file)
        .map_err(parquet_err)?;
    let schema = meta.file_metadata().schema_descr();
    let columns: Vec<String> = schema.columns().iter().map(|c| c.path().string()).collect();
    let groups = meta.row_groups();
    let every = |pred: &dyn Fn(usize, usize) -> bool| -> Vec<String> {
        columns
            .iter()
            .enumerate()
            .filter(|(c, _)| !groups.is_empty() && (0..groups.len()).all(|g| pred(g, *c)))
            .map(|(_, name)| name.clone())
            .collect()
    };
    let columns_with_statistics = every(&|g, c| {
        groups[g].column(c).statistics().is_some_and(|s| {
            s.min_bytes_opt().is_some() || s.null_count_opt() == Some(groups[g].num_rows() as u64)
        })
    });
    let column_index = |g: usize, c: usize| {
        meta.column_index()
            .and_then(|all| all.get(g)?.get(c))
            .filter(|ix| !matches!(ix, ColumnIndexMetaData::NONE))
    };
    let offset_index = |g: usize, c: usize| meta.offset_index().and_then(|all| all.get(g)?.get(c));
    let columns_with_column_index = every(&|g, c| column_index(g, c).is_some());
    let data_pages = (0..groups.len())
        .map(|g| {
            (0..columns.len())
                .filter_map(|c| offset_index(g, c))
                .map(|oi| oi.page_locations().len())
                .sum::<usize>()
        })
        .sum();
    let offset_index =
        (0..groups.len()).all(|g| (0..columns.len()).all(|c| offset_index(g, c).is_some()));
    let bloom_columns = every(&|g, c| groups[g].column(c).bloom_filter_offset().is_some());
    let sorted_by = groups
        .first()
        .and_then(|g| g.sorting_columns())
        .map(|cols| {
            cols.iter()
                .filter_map(|s| columns.get(s.column_idx as usize).cloned())
                .collect()
        })
        .unwrap_or_default();
    Ok(FileReport {
        path: path.to_path_buf(),
        bytes,
        rows: meta.file_metadata().num_rows() as u64,
        row_group_rows: groups.iter().map(|g| g.num_rows() as u64).collect(),
        compression: groups
            .first()
            .filter(|g| g.num_columns() > 0)
            .map(|g| format!("{:?}", g.column(0).compression()))
            .unwrap_or_default(),
        columns_with_statistics,
        columns_with_column_index,
        offset_index: !groups.is_empty() && offset_index,
        bloom_columns,
        sorted_by,
        data_pages,
        columns,
    })
}

/// The Parquet files of the table in `dir`, by the daemon's rule
/// ([`table_files`](ringscan_ipc::names::table_files): hidden entries skipped).
pub fn parquet_files(dir: &Path) -> Result<Vec<PathBuf>, GeneratorError> {
    ringscan_ipc::names::table_files(dir).map_err(|source| GeneratorError::Io {
        action: "read directory",
        path: dir.to_path_buf(),
        source,
    })
}
