//! The output directory: refuse to clobber, replace only what ringscan wrote, and
//! remove every file of a failed run.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::GeneratorError;

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> GeneratorError {
    let path = path.to_path_buf();
    move |source| GeneratorError::Io {
        action,
        path,
        source,
    }
}

/// Whether a directory entry looks like something `generate` writes: a Parquet file, a
/// temporary file of an interrupted run, or a hive partition directory (`key=value`).
fn is_ours(path: &Path, is_dir: bool) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if is_dir {
        name.contains('=') && !name.starts_with('=')
    } else {
        name.ends_with(".parquet") || name.ends_with(".parquet.tmp")
    }
}

/// Collects the entries to delete for `--overwrite`, or names the first foreign one.
fn collect_ours(
    root: &Path,
    dir: &Path,
    files: &mut Vec<PathBuf>,
    dirs: &mut Vec<PathBuf>,
) -> Result<(), GeneratorError> {
    for entry in fs::read_dir(dir).map_err(io_err("read directory", dir))? {
        let entry = entry.map_err(io_err("read directory", dir))?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(io_err("inspect", &path))?;
        // A symlink is never ours: following it could delete someone else's data.
        let is_dir = file_type.is_dir();
        if file_type.is_symlink() || !is_ours(&path, is_dir) {
            return Err(GeneratorError::ForeignContent {
                path: root.to_path_buf(),
                entry: path,
            });
        }
        if is_dir {
            collect_ours(root, &path, files, dirs)?;
            dirs.push(path);
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// Makes `out` ready for a run: creates it, or checks that it is empty, or (with
/// `overwrite`) removes the Parquet files and partition directories in it after checking
/// that nothing else is there.
///
/// Returns the directories it created (outermost first), so that a failed run can
/// remove them again.
pub(crate) fn prepare(out: &Path, overwrite: bool) -> Result<Vec<PathBuf>, GeneratorError> {
    match fs::metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut created = Vec::new();
            let mut dir = Some(out);
            while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
                created.push(d.to_path_buf());
                dir = d.parent();
            }
            created.reverse();
            fs::create_dir_all(out).map_err(io_err("create directory", out))?;
            return Ok(created);
        }
        Err(e) => return Err(io_err("inspect", out)(e)),
        Ok(meta) if !meta.is_dir() => {
            return Err(io_err("use as output directory", out)(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "it exists and is not a directory",
            )));
        }
        Ok(_) => {}
    }
    let mut entries = fs::read_dir(out).map_err(io_err("read directory", out))?;
    if entries.next().is_none() {
        return Ok(Vec::new());
    }
    if !overwrite {
        return Err(GeneratorError::OutputNotEmpty {
            path: out.to_path_buf(),
        });
    }
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    collect_ours(out, out, &mut files, &mut dirs)?;
    for file in &files {
        fs::remove_file(file).map_err(io_err("remove", file))?;
    }
    // Children were pushed before their parents.
    for dir in &dirs {
        fs::remove_dir(dir).map_err(io_err("remove directory", dir))?;
    }
    Ok(Vec::new())
}

/// Removes what a failed run left: its files, then the directories it created, deepest
/// first. Best effort: a failure here must not hide the error that caused it.
pub(crate) fn remove_partial(files: &[PathBuf], dirs: &[PathBuf]) {
    for file in files {
        let _ = fs::remove_file(file);
    }
    let mut dirs = dirs.to_vec();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for dir in dirs {
        let _ = fs::remove_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_non_empty_and_foreign_content() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        prepare(&out, false).unwrap();
        fs::create_dir_all(out.join("symbol=SPY")).unwrap();
        fs::write(out.join("symbol=SPY/part-00000.parquet"), b"x").unwrap();
        assert!(matches!(
            prepare(&out, false),
            Err(GeneratorError::OutputNotEmpty { .. })
        ));
        prepare(&out, true).unwrap();
        assert_eq!(fs::read_dir(&out).unwrap().count(), 0);

        fs::write(out.join("notes.txt"), b"mine").unwrap();
        fs::write(out.join("a.parquet"), b"x").unwrap();
        let err = prepare(&out, true).unwrap_err();
        assert!(
            matches!(err, GeneratorError::ForeignContent { .. }),
            "{err}"
        );
        assert!(
            out.join("a.parquet").exists(),
            "nothing removed when refusing"
        );
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("f");
        fs::write(&out, b"x").unwrap();
        let err = prepare(&out, true).unwrap_err();
        assert!(err.to_string().contains("use as output directory"), "{err}");
    }
}
