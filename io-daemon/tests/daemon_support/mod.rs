//! Shared by the `daemon_*` tests: start a `ringscan-io` process on a data directory
//! (stopped and killed on drop), write small Parquet tables, scan in-process for the
//! reference answer.
#![allow(dead_code, reason = "each test binary uses a different part")]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use ringscan_io_daemon::scan::{scan_files, MetadataCache, ScanSpec};
use ringscan_io_daemon::table;
use ringscan_ipc::client::{socket_path, DaemonClient};
use ringscan_ipc::msg::ScanRequest;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_ringscan-io");

/// A daemon process; Drop sends Stop, waits a little, then kills it.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) data: PathBuf,
}

impl Daemon {
    /// Starts `ringscan-io --data <data> <extra>` and waits until it answers.
    pub(crate) fn start(data: &Path, extra: &[&str]) -> Self {
        let child = spawn(data, extra);
        let daemon = Self {
            child,
            data: data.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = DaemonClient::connect(daemon.socket()) {
                if c.ping().is_ok() {
                    return daemon;
                }
            }
            assert!(Instant::now() < deadline, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn socket(&self) -> PathBuf {
        socket_path(&self.data)
    }

    pub(crate) fn client(&self) -> DaemonClient {
        DaemonClient::connect(self.socket())
            .expect("connect")
            .with_timeout(Duration::from_secs(30))
    }

    /// Waits for the process to exit; its status, or None after `within`.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if let Ok(c) = DaemonClient::connect(self.socket()) {
            let _ = c.with_timeout(Duration::from_secs(1)).stop();
        }
        if self.wait_exit(Duration::from_secs(3)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Spawns the daemon binary with its stdio detached (stderr into `<data>.stderr`).
pub(crate) fn spawn(data: &Path, extra: &[&str]) -> Child {
    let stderr = File::create(data.with_extension("stderr")).expect("stderr file");
    Command::new(BIN)
        .arg("--data")
        .arg(data)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn ringscan-io")
}

pub(crate) fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

/// Rows `first..first + rows`: id, v = id / 2 (NULL every 7th), s = "s{id % 5}".
pub(crate) fn batch(first: i64, rows: usize) -> RecordBatch {
    let ids: Vec<i64> = (first..first + rows as i64).collect();
    let v: Float64Array = ids
        .iter()
        .map(|&i| (i % 7 != 0).then_some(i as f64 / 2.0))
        .collect();
    let s: StringArray = ids.iter().map(|&i| Some(format!("s{}", i % 5))).collect();
    let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ids)), Arc::new(v), Arc::new(s)];
    RecordBatch::try_new(schema(), columns).expect("batch")
}

/// Writes one Parquet file of rows `first..first + rows` (row groups of 1000 rows).
pub(crate) fn write_file(path: &Path, first: i64, rows: usize) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1000))
        .build();
    let file = File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema(), Some(props)).expect("writer");
    writer.write(&batch(first, rows)).expect("write");
    writer.close().expect("close");
}

/// The in-process answer: what `scan_files` returns for `request` on `data`.
pub(crate) fn reference(data: &Path, request: &ScanRequest) -> Vec<RecordBatch> {
    let cache = MetadataCache::new(1 << 24);
    let resolved = table::resolve(data, &request.source, &cache).expect("resolve");
    let projection: Vec<String> = match &request.projection {
        Some(p) => p.clone(),
        None => resolved
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
    };
    let spec = ScanSpec::new(&resolved.listing.root, &resolved.listing.files)
        .with_projection(Some(&projection))
        .with_predicate(request.predicate.as_ref())
        .with_limit(request.limit)
        .with_batch_size(request.batch_size)
        .with_threads(1);
    let mut out = Vec::new();
    scan_files(&spec, &cache, &mut |b| {
        out.push(b);
        Ok(true)
    })
    .expect("in-process scan");
    out
}

/// Rows as strings, one per row, columns joined (a type-agnostic comparison).
pub(crate) fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        let formatters: Vec<_> = b
            .columns()
            .iter()
            .map(|c| {
                arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &Default::default())
                    .expect("formatter")
            })
            .collect();
        for row in 0..b.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            out.push(cells.join("|"));
        }
    }
    out
}

/// All batches of a scan through the daemon, and its summary.
pub(crate) fn scan_via(
    client: &DaemonClient,
    request: &ScanRequest,
) -> Result<(Vec<RecordBatch>, ringscan_ipc::msg::ScanSummary), ringscan_ipc::client::ClientError> {
    let mut stream = client.scan(request)?;
    let mut batches = Vec::new();
    while let Some(b) = stream.next_batch()? {
        batches.push(b);
    }
    let summary = stream.finish()?;
    Ok((batches, summary))
}
