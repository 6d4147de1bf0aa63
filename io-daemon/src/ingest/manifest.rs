//! A written table's manifest: its definition, the Parquet files that hold its rows,
//! and the write-ahead log position those files cover.
//!
//! The manifest is the table: a file of the table's directory that it does not name (a
//! flush that died before its manifest, a compaction's replaced inputs) is no part of
//! it, and recovery removes it. It changes only by [`Manifest::store`]: written to a
//! temporary file, synced, renamed over the old one, and the directory synced, so that
//! after a crash it is the old manifest or the new one, whole.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use arrow_schema::{Schema, SchemaRef};
use serde::{Deserialize, Serialize};

/// The manifest's file name in the table's directory (hidden: not data, not a table).
pub const MANIFEST_FILE: &str = ".ringscan-table.json";
/// This build's manifest format.
const FORMAT: u32 = 1;

/// A table the daemon writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version.
    pub format: u32,
    /// The table's identity: records of the write-ahead log name it, so that rows of a
    /// dropped table never reach a new table of the same name.
    pub id: u64,
    /// The table's columns as an Arrow IPC schema message, in hex.
    pub schema_ipc_hex: String,
    /// The primary key's columns, in key order.
    #[serde(default)]
    pub primary_key: Vec<String>,
    /// The Parquet files (names in the table's directory), in scan order.
    #[serde(default)]
    pub files: Vec<ManifestFile>,
    /// Every log record of this table up to this position is in `files` (or was
    /// removed by a truncate): recovery replays only the records after it.
    #[serde(default)]
    pub flushed_lsn: u64,
}

/// One Parquet file of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// File name in the table's directory.
    pub name: String,
    /// Rows in it.
    pub rows: u64,
    /// Its size.
    pub bytes: u64,
}

/// Errors reading or writing a manifest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The file system refused.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The manifest is not one this build reads.
    #[error("{}: not a table manifest this build reads: {detail}", .path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

impl Manifest {
    /// A new table's manifest: no files yet.
    pub fn new(id: u64, schema: &Schema, primary_key: Vec<String>) -> Result<Self, String> {
        let ipc = ringscan_ipc::msg::encode_schema(schema).map_err(|e| e.to_string())?;
        Ok(Self {
            format: FORMAT,
            id,
            schema_ipc_hex: hex(&ipc),
            primary_key,
            files: Vec::new(),
            flushed_lsn: 0,
        })
    }

    /// The table's schema.
    pub fn schema(&self) -> Result<SchemaRef, String> {
        let bytes = unhex(&self.schema_ipc_hex).ok_or("the schema is not hex")?;
        ringscan_ipc::msg::decode_schema(&bytes)
            .map(std::sync::Arc::new)
            .map_err(|e| format!("the schema does not decode: {e}"))
    }

    /// The manifest of the table in `dir`, if it has one.
    pub fn load(dir: &Path) -> Result<Option<Self>, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ManifestError::Io { path, source }),
        };
        let manifest: Self = serde_json::from_slice(&text).map_err(|e| ManifestError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        if manifest.format != FORMAT {
            return Err(ManifestError::Corrupt {
                path,
                detail: format!("format {} (this build writes {FORMAT})", manifest.format),
            });
        }
        if let Err(detail) = manifest.schema() {
            return Err(ManifestError::Corrupt { path, detail });
        }
        Ok(Some(manifest))
    }

    /// Replaces the manifest of the table in `dir` with this one, durably (temporary
    /// file, fsync, rename, fsync of the directory).
    pub fn store(&self, dir: &Path) -> Result<(), ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let temp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ManifestError::Io { path, source }
        };
        let text = serde_json::to_vec_pretty(self).map_err(|e| ManifestError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let mut file = File::create(&temp).map_err(io(&temp))?;
        file.write_all(&text).map_err(io(&temp))?;
        file.sync_all().map_err(io(&temp))?;
        drop(file);
        fs::rename(&temp, &path).map_err(io(&path))?;
        sync_dir(dir)
    }
}

/// Makes a directory's entries durable (a rename or a new file in it).
pub fn sync_dir(dir: &Path) -> Result<(), ManifestError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| ManifestError::Io {
            path: dir.to_path_buf(),
            source,
        })
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            let digit = |c: u8| (c as char).to_digit(16);
            Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use arrow_schema::{DataType, Field};

    use super::*;

    #[test]
    fn manifests_round_trip_and_replace_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap(), None);
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]);
        let mut manifest = Manifest::new(7, &schema, vec!["id".into()]).unwrap();
        manifest.store(dir.path()).unwrap();
        assert_eq!(
            Manifest::load(dir.path()).unwrap().as_ref(),
            Some(&manifest)
        );
        assert_eq!(*manifest.schema().unwrap(), schema);
        manifest.files.push(ManifestFile {
            name: "part-1.parquet".into(),
            rows: 3,
            bytes: 100,
        });
        manifest.flushed_lsn = 9;
        manifest.store(dir.path()).unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap(), Some(manifest));
        assert!(!dir.path().join(format!("{MANIFEST_FILE}.tmp")).exists());
    }

    #[test]
    fn a_damaged_manifest_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        for text in [
            "{",
            "{\"format\":1}",
            "{\"format\":9,\"id\":1,\"schema_ipc_hex\":\"\"}",
        ] {
            fs::write(dir.path().join(MANIFEST_FILE), text).unwrap();
            let err = Manifest::load(dir.path()).unwrap_err().to_string();
            assert!(err.contains(MANIFEST_FILE), "{err}");
        }
        let bad_schema = "{\"format\":1,\"id\":1,\"schema_ipc_hex\":\"zz\"}";
        fs::write(dir.path().join(MANIFEST_FILE), bad_schema).unwrap();
        assert!(Manifest::load(dir.path()).is_err());
    }

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)).unwrap(), bytes);
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("g0"), None);
    }
}
