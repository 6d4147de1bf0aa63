//! `ringscan ingest`: files (CSV, PostgreSQL text, JSON lines, Parquet) into a table the
//! IO daemon writes (made by `CREATE TABLE`). Each file is one statement: all of its
//! rows are durable when it is reported, or, on any bad line, none of them. A file of
//! any size: its rows are staged with the daemon in parts as they are read
//! (`BulkInsert`), so memory holds one part at a time.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use arrow_array::{new_null_array, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};
use indicatif::{ProgressBar, ProgressStyle};
use ringscan_executor::engine::{BulkInsert, EngineOptions};

use super::common::data_dir;

/// Bytes read from a file at a time.
const CHUNK_BYTES: usize = 8 << 20;

#[derive(Debug, clap::Args)]
pub(crate) struct IngestArgs {
    /// Data directory [default: $RINGSCAN_DATA, else ./ringscan-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// How to read the files [default: by extension: .csv, .tsv/.txt (PostgreSQL's
    /// text format), .jsonl/.ndjson/.json, .parquet].
    #[arg(long, value_name = "FORMAT")]
    format: Option<FileFormat>,
    /// CSV files have no header line.
    #[arg(long)]
    no_header: bool,
    /// The CSV or text field delimiter [default: ',' for CSV, tab for text].
    #[arg(long, value_name = "CHAR")]
    delimiter: Option<char>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// The table (made by `CREATE TABLE`).
    table: String,
    /// The files, each one statement.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FileFormat {
    Csv,
    Text,
    Jsonl,
    Parquet,
}

impl FileFormat {
    fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "csv" => Self::Csv,
            "tsv" | "txt" | "tab" => Self::Text,
            "jsonl" | "ndjson" | "json" => Self::Jsonl,
            "parquet" | "pq" => Self::Parquet,
            _ => return None,
        })
    }
}

pub(crate) fn run(args: IngestArgs) -> anyhow::Result<ExitCode> {
    let data = data_dir(args.data.as_deref());
    anyhow::ensure!(
        !ringscan_io_daemon::storage::is_object_url(&data),
        "{} is an object-storage root, which ringscan reads only: ingest needs a local data \
         directory",
        data.display()
    );
    let mut session = super::query::open_sql_session(&data, &EngineOptions::default())?;
    let schema = session
        .table_schema(&args.table)
        .with_context(|| format!("table {}", args.table))?;
    let mut total = 0u64;
    let started = Instant::now();
    for path in &args.files {
        let format = match args.format.or_else(|| FileFormat::of(path)) {
            Some(f) => f,
            None => bail!(
                "{}: cannot tell the format from the name; give --format csv|text|jsonl|parquet",
                path.display()
            ),
        };
        let file_started = Instant::now();
        let mut rows = BulkInsert::new(&args.table);
        let mut read_rows = || -> anyhow::Result<()> {
            read(path, format, &args, &schema, &mut |batches| {
                if rows.push(batches) {
                    session.bulk_stage(&mut rows)?;
                }
                Ok(())
            })
        };
        let written = match read_rows() {
            Ok(()) => {
                let taken = rows.rows();
                session
                    .bulk_finish(rows)
                    .inspect(|&written| debug_assert_eq!(written, taken))
                    .map_err(anyhow::Error::from)
            }
            Err(e) => {
                // Its parts staged with the daemon go (they would with the session).
                let _ = session.bulk_abandon(rows);
                Err(e)
            }
        }
        .with_context(|| format!("{}: nothing of it was written", path.display()))?;
        total += written;
        if !args.quiet {
            let secs = file_started.elapsed().as_secs_f64();
            eprintln!(
                "{}: {written} rows into {} ({:.0} rows/s), durable",
                path.display(),
                args.table,
                written as f64 / secs.max(1e-9)
            );
        }
    }
    if !args.quiet && args.files.len() > 1 {
        eprintln!(
            "{total} rows from {} files in {:.2} s",
            args.files.len(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn progress(path: &Path, quiet: bool) -> anyhow::Result<ProgressBar> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("{}", path.display()))?
        .len();
    if quiet {
        return Ok(ProgressBar::hidden());
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(path.display().to_string());
    Ok(bar)
}

/// The file's rows as batches of the table's columns, handed to `sink` as they are
/// read.
fn read(
    path: &Path,
    format: FileFormat,
    args: &IngestArgs,
    schema: &SchemaRef,
    sink: &mut dyn FnMut(Vec<RecordBatch>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let bar = progress(path, args.quiet)?;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    match format {
        FileFormat::Csv | FileFormat::Text => {
            let csv = format == FileFormat::Csv;
            let delimiter = args.delimiter.unwrap_or(if csv { ',' } else { '\t' });
            let mut rows = ringscan_serve::copy_in::FileRows::new(
                &args.table,
                Arc::clone(schema),
                csv,
                csv && !args.no_header,
                delimiter,
            )
            .map_err(anyhow::Error::msg)?;
            let mut file = file;
            let mut buf = vec![0u8; CHUNK_BYTES];
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                rows.push(&buf[..n]).map_err(anyhow::Error::msg)?;
                sink(rows.take_batches())?;
                bar.inc(n as u64);
            }
            sink(rows.finish().map_err(anyhow::Error::msg)?.0)?;
        }
        FileFormat::Jsonl => {
            let loose = loose(schema);
            let reader = arrow_json::ReaderBuilder::new(Arc::clone(&loose))
                .with_batch_size(64 * 1024)
                .build(BufReader::with_capacity(
                    CHUNK_BYTES,
                    Counted(file, bar.clone()),
                ))?;
            for batch in reader {
                sink(vec![batch?])?;
            }
        }
        FileFormat::Parquet => {
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?
                    .with_batch_size(64 * 1024)
                    .build()?;
            let total = reader_rows(path).unwrap_or(0);
            let mut done = 0u64;
            for batch in reader {
                let batch = batch?;
                done += batch.num_rows() as u64;
                sink(vec![by_name(&batch, schema)?])?;
                if let Some(at) = (bar.length().unwrap_or(0) * done).checked_div(total) {
                    bar.set_position(at);
                }
            }
            bar.set_position(bar.length().unwrap_or(0));
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Rows of the Parquet file `path` (from its footer), for the progress bar.
fn reader_rows(path: &Path) -> Option<u64> {
    let file = File::open(path).ok()?;
    let builder =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).ok()?;
    u64::try_from(builder.metadata().file_metadata().num_rows()).ok()
}

/// `schema` with every column nullable (the daemon checks `NOT NULL`, naming the row).
fn loose(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<Field>>(),
    ))
}

/// A Parquet file's batch as the table's columns, taken by name and cast; a column the
/// file lacks is NULL.
fn by_name(batch: &RecordBatch, schema: &SchemaRef) -> anyhow::Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.schema().index_of(field.name()) {
            Ok(i) => arrow_cast::cast(batch.column(i), field.data_type()).with_context(|| {
                format!(
                    "column \"{}\" is {} in the file, {} in the table",
                    field.name(),
                    batch.column(i).data_type(),
                    field.data_type()
                )
            }),
            Err(_) => Ok(new_null_array(field.data_type(), batch.num_rows())),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(loose(schema), columns)?)
}

/// A reader that moves a progress bar by what it reads.
struct Counted<R>(R, ProgressBar);

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1.inc(n as u64);
        Ok(n)
    }
}
