//! The runs file: one JSON record per line, appended with a single `O_APPEND` write.
//!
//! Each record is serialized to one buffer ending in `\n` and written with one `write(2)`
//! on a file opened `O_APPEND`: the kernel moves to the end and writes under the inode
//! lock, so lines from concurrent processes never interleave (local filesystems; NFS
//! does not honour `O_APPEND` atomically). A short write is reported, not retried: a
//! second write could land after another process's line.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::ProfilingError;
use crate::record::RunRecord;

/// Longest line written or read (a record with huge figures is refused, not split).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// `<data>/.ringscan/runs.jsonl`.
pub fn runs_path(data_dir: &Path) -> PathBuf {
    data_dir.join(".ringscan").join("runs.jsonl")
}

/// Appends `rec` as one line, creating the file and its parent directories.
pub fn append_record(path: &Path, rec: &RunRecord) -> Result<(), ProfilingError> {
    let mut line = serde_json::to_string(rec).map_err(|source| ProfilingError::Serialize {
        run_id: rec.run_id.clone(),
        source,
    })?;
    // serde_json escapes control characters, so a compact document is one line.
    debug_assert!(!line.contains('\n'));
    line.push('\n');
    if line.len() > MAX_LINE_BYTES {
        return Err(ProfilingError::RecordTooLarge {
            run_id: rec.run_id.clone(),
            line_bytes: line.len(),
            limit_bytes: MAX_LINE_BYTES,
        });
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Private, like the state directory it is by default: run records hold
        // queries and paths.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| ProfilingError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
    }
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| ProfilingError::Open {
            path: path.to_owned(),
            source,
        })?;
    let written_bytes = loop {
        match file.write(line.as_bytes()) {
            Ok(n) => break n,
            // Interrupted before anything was written: retrying cannot interleave.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(ProfilingError::Write {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    };
    if written_bytes != line.len() {
        return Err(ProfilingError::ShortWrite {
            path: path.to_owned(),
            written_bytes,
            line_bytes: line.len(),
        });
    }
    Ok(())
}

/// The records of a runs file, oldest first, and how many lines were skipped.
#[derive(Clone, Debug, Default)]
pub struct RecordsRead {
    /// Every line that parsed as a record.
    pub records: Vec<RunRecord>,
    /// Lines that did not (torn by a crash, hand-edited, too long, another layout).
    pub malformed_lines: usize,
}

/// Reads every record, skipping malformed lines; see [`read_records_counted`].
pub fn read_records(path: &Path) -> Result<Vec<RunRecord>, ProfilingError> {
    read_records_counted(path).map(|r| r.records)
}

/// Reads every record and counts the malformed lines instead of failing on them.
pub fn read_records_counted(path: &Path) -> Result<RecordsRead, ProfilingError> {
    let read_err = |source| ProfilingError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut reader = BufReader::new(file);
    let mut out = RecordsRead::default();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Bounded: read at most MAX_LINE_BYTES + 1 of a line, then skip the rest.
        let n = Read::by_ref(&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(read_err)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') && n > MAX_LINE_BYTES {
            skip_line(&mut reader).map_err(read_err)?;
            out.malformed_lines += 1;
            continue;
        }
        let text = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<RunRecord>(text) {
            Ok(rec) if !rec.run_id.is_empty() => out.records.push(rec),
            _ => out.malformed_lines += 1,
        }
    }
    Ok(out)
}

fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let len = chunk.len();
                reader.consume(len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunRecorder;

    fn record(n: usize) -> RunRecord {
        let mut figures = serde_json::Map::new();
        figures.insert("rows".into(), n.into());
        figures.insert("note".into(), "line\nbreak \"quoted\"".into());
        RunRecorder::start("test", vec![format!("{n}")]).finish(figures)
    }

    #[test]
    fn append_creates_dirs_and_reads_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = runs_path(dir.path());
        assert!(path.ends_with(".ringscan/runs.jsonl"));
        for n in 0..3 {
            append_record(&path, &record(n)).expect("append");
        }
        let read = read_records_counted(&path).expect("read");
        assert_eq!(read.records.len(), 3);
        assert_eq!(read.malformed_lines, 0);
        assert_eq!(read.records[2].figure("rows"), Some(2.0));
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.jsonl");
        append_record(&path, &record(1)).expect("append");
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(b"{\"run_id\": \"torn\", \"wal\n\nnot json\n{}\n")
            .expect("write");
        f.write_all(&vec![b'x'; MAX_LINE_BYTES + 10])
            .expect("write");
        f.write_all(b"\n").expect("write");
        drop(f);
        append_record(&path, &record(2)).expect("append");
        let read = read_records_counted(&path).expect("read");
        assert_eq!(read.records.len(), 2);
        assert_eq!(read.malformed_lines, 4);
    }

    #[test]
    fn missing_file_is_not_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = read_records(&dir.path().join("nope.jsonl")).expect_err("missing");
        assert!(err.is_not_found());
        assert!(err.to_string().contains("nope.jsonl"), "{err}");
    }

    #[test]
    fn each_record_is_exactly_one_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.jsonl");
        append_record(&path, &record(7)).expect("append");
        let mut s = String::new();
        std::fs::File::open(&path)
            .expect("open")
            .read_to_string(&mut s)
            .expect("read");
        assert_eq!(s.matches('\n').count(), 1);
        assert!(s.ends_with('\n'));
    }
}
