//! Table resolution over object storage: the same rule for which files make a table as
//! the local walk, applied to a listing of keys (objects under `<root>/<name>/`, hidden
//! components skipped, `*.parquet` for a table, the glob's matches for paths).
//!
//! A bucket has no directories, so a listing records no directory versions: whether a
//! table changed is known only by listing it again. Each object's version is its size,
//! last-modified time and ETag (as a digest where a file has its inode).

use std::path::{Path, PathBuf};

use ringscan_ipc::msg::{FileVersion, ScanSource};
use ringscan_ipc::names::{is_data_file, is_hidden_entry};

use super::{
    check_relative, edit_distance, glob_match, pattern_components, pattern_text, Listing,
    TableError, MAX_DEPTH, MAX_FILES,
};
use crate::storage::object::{
    object_root, split_url, Failure, ListedObject, ObjectRoot, Scheme, StorageError,
};

/// Lists `source`'s objects under the data root `data_url` (`s3://bucket/prefix`).
pub(super) fn list(data_url: &Path, source: &ScanSource) -> Result<Listing, TableError> {
    let io = |e: StorageError| TableError::Io {
        path: data_url.to_path_buf(),
        source: e.into_io(),
    };
    let url = data_url.to_string_lossy().into_owned();
    let root = object_root(&url).map_err(io)?;
    match source {
        ScanSource::Table { name } => list_table(&root, data_url, name),
        ScanSource::Files { paths } => list_files(&root, data_url, paths),
    }
}

/// Lists objects named by URL (`s3://bucket/key`, globs allowed), all in one bucket:
/// the listing's root is the bucket, so hive partitions come from the whole key.
pub(super) fn list_urls(urls: &[PathBuf]) -> Result<Listing, TableError> {
    let mut bucket: Option<(Scheme, String)> = None;
    let mut keys = Vec::with_capacity(urls.len());
    for url in urls {
        let text = url.to_string_lossy();
        let invalid = |reason| TableError::InvalidName {
            what: "path",
            name: text.clone().into_owned(),
            reason,
        };
        let (scheme, b, key) =
            split_url(&text).map_err(|_| invalid("not an s3://, gs:// or az://bucket/key URL"))?;
        match &bucket {
            Some((first_scheme, first)) if (*first_scheme, first.as_str()) != (scheme, b) => {
                return Err(invalid("the paths of one FROM must lie in one bucket"))
            }
            _ => bucket = Some((scheme, b.to_owned())),
        }
        if key.is_empty() {
            return Err(invalid("names a bucket, not objects in it"));
        }
        keys.push(PathBuf::from(key));
    }
    let Some((scheme, bucket)) = bucket else {
        return Err(TableError::NoMatch {
            pattern: String::new(),
        });
    };
    list(
        Path::new(&format!("{}{bucket}", scheme.prefix())),
        &ScanSource::Files { paths: keys },
    )
}

/// Whether no component of `relative` is hidden.
fn visible(relative: &str) -> bool {
    !relative.split('/').any(is_hidden_entry)
}

fn version(path: PathBuf, object: &ListedObject) -> FileVersion {
    FileVersion {
        path,
        size_bytes: object.version.size,
        modified_ns: object.version.modified_ns,
        device: 0,
        inode: object.version.e_tag_digest(),
        changed_ns: object.version.modified_ns,
    }
}

fn listing_error(url: &str) -> impl FnOnce(StorageError) -> TableError + '_ {
    move |e| TableError::Io {
        path: PathBuf::from(url),
        source: e.into_io(),
    }
}

fn check_depth(relative: &str) -> Result<(), TableError> {
    if relative.split('/').count() > MAX_DEPTH {
        return Err(TableError::TooLarge {
            what: "the directory depth",
            limit: MAX_DEPTH,
        });
    }
    Ok(())
}

fn list_table(root: &ObjectRoot, data_url: &Path, name: &str) -> Result<Listing, TableError> {
    check_relative("table name", name)?;
    let name = name
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/");
    let table_url = format!("{}/{name}", data_url.display());
    let objects = root
        .list(&table_url, MAX_FILES)
        .map_err(listing_error(&table_url))?;
    if objects.is_empty() {
        return Err(TableError::NoSuchTable {
            name: name.clone(),
            data_dir: data_url.to_path_buf(),
            nearest: nearest_table(root, data_url, &name),
        });
    }
    let mut files = Vec::new();
    let mut versions = Vec::new();
    for object in &objects {
        let file_name = object.relative.rsplit('/').next().unwrap_or_default();
        if !visible(&object.relative) || !is_data_file(file_name) {
            continue;
        }
        check_depth(&object.relative)?;
        files.push(PathBuf::from(&object.relative));
        versions.push(version(Path::new(&name).join(&object.relative), object));
    }
    if files.is_empty() {
        return Err(TableError::EmptyTable { name });
    }
    Ok(Listing {
        root: data_url.join(&name),
        files,
        file_versions: versions,
        dirs: Vec::new(),
    })
}

fn list_files(
    root: &ObjectRoot,
    data_url: &Path,
    paths: &[PathBuf],
) -> Result<Listing, TableError> {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut versions: Vec<FileVersion> = Vec::new();
    let mut add = |rel: PathBuf, object: &ListedObject| -> Result<(), TableError> {
        if files.contains(&rel) {
            return Ok(());
        }
        if files.len() >= MAX_FILES {
            return Err(TableError::TooLarge {
                what: "the number of files",
                limit: MAX_FILES,
            });
        }
        versions.push(version(rel.clone(), object));
        files.push(rel);
        Ok(())
    };
    for path in paths {
        let text = pattern_text(path)?;
        let (components, literal) = pattern_components(&text)?;
        if literal == components.len() {
            let rel = components.join("/");
            let url = format!("{}/{rel}", data_url.display());
            let object = match root.head(&url) {
                Ok(version) => ListedObject {
                    relative: rel.clone(),
                    version,
                },
                Err(StorageError::Request {
                    failure: Failure::NoSuchObject,
                    ..
                }) => {
                    return Err(TableError::NoSuchFile {
                        path: PathBuf::from(rel),
                    })
                }
                Err(e) => return Err(listing_error(&url)(e)),
            };
            add(PathBuf::from(&rel), &object)?;
            continue;
        }
        let base = components[..literal].join("/");
        let pattern = &components[literal..];
        let base_url = if base.is_empty() {
            data_url.display().to_string()
        } else {
            format!("{}/{base}", data_url.display())
        };
        let objects = root
            .list(&base_url, MAX_FILES)
            .map_err(listing_error(&base_url))?;
        let mut matched = false;
        for object in &objects {
            let parts: Vec<&str> = object.relative.split('/').collect();
            if !visible(&object.relative) || !glob_match(pattern, &parts) {
                continue;
            }
            check_depth(&object.relative)?;
            let rel = if base.is_empty() {
                object.relative.clone()
            } else {
                format!("{base}/{}", object.relative)
            };
            add(PathBuf::from(rel), object)?;
            matched = true;
        }
        if !matched {
            return Err(TableError::NoMatch { pattern: text });
        }
    }
    Ok(Listing {
        root: data_url.to_path_buf(),
        files,
        file_versions: versions,
        dirs: Vec::new(),
    })
}

/// The table names of the root `data_url`: the prefixes directly below it, hidden
/// ones left out (one delimited LIST request).
pub(super) fn table_names(data_url: &Path) -> Result<Vec<String>, TableError> {
    let url = data_url.to_string_lossy().into_owned();
    let io = |e: StorageError| TableError::Io {
        path: data_url.to_path_buf(),
        source: e.into_io(),
    };
    let root = object_root(&url).map_err(io)?;
    let names = root.child_prefixes(&url).map_err(io)?;
    Ok(names.into_iter().filter(|n| !is_hidden_entry(n)).collect())
}

/// The existing table name closest to `name` (as the local rule: edit distance at most
/// half its length); `None` when the root cannot be listed.
fn nearest_table(root: &ObjectRoot, data_url: &Path, name: &str) -> Option<String> {
    let candidates = root.child_prefixes(&data_url.display().to_string()).ok()?;
    let mut best: Option<(usize, String)> = None;
    for candidate in candidates.into_iter().take(10_000) {
        if is_hidden_entry(&candidate) {
            continue;
        }
        let d = edit_distance(name, &candidate);
        if best
            .as_ref()
            .is_none_or(|(bd, bn)| (d, &candidate) < (*bd, bn))
        {
            best = Some((d, candidate));
        }
    }
    best.filter(|(d, _)| *d <= name.chars().count().max(2) / 2 + 1)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_one_from_must_name_objects_of_one_bucket() {
        let urls = |list: &[&str]| list.iter().map(PathBuf::from).collect::<Vec<_>>();
        for bad in [
            &["s3://a/x.parquet", "s3://b/y.parquet"][..],
            &["s3://a"][..],
            &["s3://a/x.parquet", "local/y.parquet"][..],
            &["s3://A/x.parquet"][..],
            &["s3://a/x.parquet", "gs://a/y.parquet"][..],
        ] {
            let err = list_urls(&urls(bad)).expect_err("refused");
            assert!(
                matches!(err, TableError::InvalidName { .. }),
                "{bad:?}: {err}"
            );
        }
    }
}
