//! Names shared by both ends of the protocol: which files make a table (the daemon's
//! listing, the benchmark baseline and the tools agree on it), and name suggestions
//! (the daemon suggests the nearest table, the executor the nearest column).

use std::io;
use std::path::{Path, PathBuf};

/// Whether a directory entry is skipped when listing a table: hidden names (`.ringscan`,
/// the generator's `.part-*.tmp`, editors' swap files).
pub fn is_hidden_entry(name: &str) -> bool {
    name.starts_with('.')
}

/// Whether a file name is one of a table's data files: a `.parquet` file, not hidden.
pub fn is_data_file(name: &str) -> bool {
    !is_hidden_entry(name) && Path::new(name).extension().is_some_and(|e| e == "parquet")
}

/// The files of the table in directory `dir`: every [data file](is_data_file) below it,
/// recursively, hidden entries skipped, symbolic links to directories not followed,
/// sorted by path. This is the rule of `ScanSource::Table`; the daemon applies it with
/// its own checks on top (nothing may leave the data directory).
pub fn table_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_hidden_entry(&name) {
                continue;
            }
            let file_type = entry.file_type()?;
            let path = entry.path();
            if file_type.is_dir() {
                stack.push(path);
            } else if is_data_file(&name) && std::fs::metadata(&path)?.is_file() {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Levenshtein distance over characters (case-sensitive: lowercase both for a
/// case-insensitive distance).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn a_table_is_its_visible_parquet_files_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for rel in [
            "b/x.parquet",
            "a.parquet",
            ".ringscan/io.parquet",
            "b/.part-1.tmp",
            "b/.hidden.parquet",
            "notes.txt",
            "z=1/c.parquet",
        ] {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"").unwrap();
        }
        let got: Vec<String> = super::table_files(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(got, ["a.parquet", "b/x.parquet", "z=1/c.parquet"]);
        assert!(!super::is_data_file(".x.parquet") && super::is_data_file("x.parquet"));
    }

    #[test]
    fn edit_distance_is_levenshtein() {
        assert_eq!(edit_distance("ohlcv", "ohlcv"), 0);
        assert_eq!(edit_distance("ohlvc", "ohlcv"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("Close", "close"), 1);
    }
}
