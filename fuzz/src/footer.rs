//! Parquet targets: a whole file ([`fuzz_footer`]) and the pages of a known-good file
//! ([`fuzz_pages`]), both scanned through the daemon's own scan path.

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use parquet::basic::Type as PhysicalType;
use ringscan_io_daemon::scan::{
    scan_files, LateMaterialization, MetadataCache, ScanError, ScanSpec,
};
use ringscan_ipc::msg::{CmpOp, Literal, Predicate};

/// Small valid files whose pages [`fuzz_pages`] replaces: one per family of encodings
/// and compressions the daemon decodes, and one with page index and bloom filters
/// (from apache/parquet-testing, Apache-2.0 like ringscan).
pub const TEMPLATES: &[(&str, &[u8])] = &[
    (
        "alltypes_plain",
        include_bytes!("../templates/alltypes_plain.parquet"),
    ),
    (
        "datapage_v2.snappy",
        include_bytes!("../templates/datapage_v2.snappy.parquet"),
    ),
    (
        "delta_encodings",
        include_bytes!("../templates/delta_encoding_optional_column.parquet"),
    ),
    (
        "nested_lists.snappy",
        include_bytes!("../templates/nested_lists.snappy.parquet"),
    ),
    (
        "byte_stream_split.zstd",
        include_bytes!("../templates/byte_stream_split.zstd.parquet"),
    ),
    (
        "index_bloom",
        include_bytes!("../templates/data_index_bloom_encoding_stats.parquet"),
    ),
    (
        "rle_boolean",
        include_bytes!("../templates/rle_boolean_encoding.parquet"),
    ),
    (
        "int32_with_null_pages",
        include_bytes!("../templates/int32_with_null_pages.parquet"),
    ),
];

/// Footer cache budget per run: small, like a busy daemon's share for one file.
const CACHE_BYTES: usize = 16 << 20;
/// Rows per batch: small, so that a few hundred rows make several batches.
const BATCH_ROWS: usize = 100;

thread_local! {
    /// The file a target writes its input to: an unlinked temporary (nothing is left
    /// behind, whatever kills the process), opened again by path as the daemon opens
    /// files, through `/proc/self/fd`.
    static SCRATCH: RefCell<Option<(File, PathBuf)>> = const { RefCell::new(None) };
}

/// Scans `bytes` as a Parquet file the way the daemon does: the footer through a fresh
/// [`MetadataCache`]; every column decoded; then again with a predicate on the first
/// top-level column, which prunes with statistics, page indexes and bloom filters and
/// materializes late. Every outcome but a panic is fine.
pub fn fuzz_footer(bytes: &[u8]) {
    // From the length: a valid file ends in the same bytes whatever it holds.
    let selector = bytes.len() as u8;
    with_file(bytes, |root, path| scan_twice(root, path, selector));
}

/// Scans one of the [`TEMPLATES`] (chosen by the first byte) with its pages (everything
/// between the leading magic and the footer) overwritten by the rest of the input; the
/// file keeps its length, so the footer's offsets still point at the (mutated) pages.
pub fn fuzz_pages(bytes: &[u8]) {
    let Some((&which, pages)) = bytes.split_first() else {
        return;
    };
    let (_, template) = TEMPLATES[usize::from(which) % TEMPLATES.len()];
    let Some(region) = page_region(template) else {
        return;
    };
    let mut file = template.to_vec();
    let n = pages.len().min(region.len());
    file[region.start..region.start + n].copy_from_slice(&pages[..n]);
    with_file(&file, |root, path| scan_twice(root, path, which));
}

/// The byte range of a Parquet file between its leading `PAR1` and its footer.
pub(crate) fn page_region(file: &[u8]) -> Option<std::ops::Range<usize>> {
    let tail = file.len().checked_sub(8)?;
    let footer_len = u32::from_le_bytes(file[tail..tail + 4].try_into().ok()?) as usize;
    let footer_start = tail.checked_sub(footer_len)?;
    (footer_start >= 4).then_some(4..footer_start)
}

fn with_file(bytes: &[u8], f: impl FnOnce(&Path, &Path)) {
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        if scratch.is_none() {
            let file = tempfile::tempfile().expect("a temporary file for the fuzz input");
            let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            *scratch = Some((file, path));
        }
        let Some((file, path)) = scratch.as_ref() else {
            return;
        };
        file.set_len(0).expect("truncate the scratch file");
        file.write_all_at(bytes, 0)
            .expect("write the fuzz input to the scratch file");
        f(Path::new("/proc/self/fd"), path);
    });
}

fn scan_twice(root: &Path, path: &Path, selector: u8) {
    let cache = MetadataCache::new(CACHE_BYTES);
    let files = [path.to_path_buf()];
    let mut rows = 0usize;
    let mut sink = |batch: arrow_array::RecordBatch| -> Result<bool, ScanError> {
        rows += batch.num_rows();
        Ok(true)
    };
    let spec = ScanSpec::new(root, &files)
        .with_threads(1)
        .with_batch_size(BATCH_ROWS);
    if scan_files(&spec, &cache, &mut sink).is_err() {
        return;
    }
    let Some(predicate) = predicate_for(&cache, path, selector) else {
        return;
    };
    let late = if selector & 0x10 == 0 {
        LateMaterialization::Always
    } else {
        LateMaterialization::Never
    };
    let spec = spec
        .with_predicate(Some(&predicate))
        .with_late_materialization(late);
    let _ = scan_files(&spec, &cache, &mut sink);
}

/// A predicate on the first top-level primitive column: `col <op> literal`, operator and
/// literal picked by `selector`, so that statistics, page indexes and (for `=`) bloom
/// filters are all consulted.
fn predicate_for(cache: &MetadataCache, path: &Path, selector: u8) -> Option<Predicate> {
    let file = File::open(path).ok()?;
    let meta = cache.get_or_load(path, &file).ok()?;
    let schema = meta.file_metadata().schema_descr();
    let column = schema
        .columns()
        .iter()
        .find(|c| c.path().parts().len() == 1)?;
    let small = i64::from(selector % 8);
    let literal = match column.physical_type() {
        PhysicalType::BOOLEAN => Literal::Bool(selector & 1 == 1),
        PhysicalType::INT32 | PhysicalType::INT64 | PhysicalType::INT96 => Literal::Int(small),
        PhysicalType::FLOAT | PhysicalType::DOUBLE => Literal::Float(small as f64 / 2.0),
        PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => {
            Literal::Utf8(char::from(b'a' + selector % 26).to_string())
        }
    };
    let op = [CmpOp::Eq, CmpOp::Gt, CmpOp::LtEq, CmpOp::NotEq][usize::from(selector >> 5) % 4];
    Some(Predicate::And(vec![
        Predicate::compare(column.name(), op, literal),
        Predicate::IsNull {
            expr: ringscan_ipc::msg::Operand::Column(column.name().to_owned()),
            negated: true,
        },
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_has_pages_to_replace() {
        for (name, bytes) in TEMPLATES {
            let region = page_region(bytes).unwrap_or_else(|| panic!("{name}: no page region"));
            assert!(region.len() > 16, "{name}: {region:?}");
        }
    }
}
