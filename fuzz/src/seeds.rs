//! The seed corpus: valid inputs of each target, made by the code that makes them for
//! real (parquet's writer, the ring's producer, the messages' encoder), so that the
//! fuzzer starts from deep inside each format.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    StringViewArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use ringscan_ipc::msg::{
    encode_min_max, encode_schema, write_frame, ClientMessage, CmpOp, ColumnStatistics,
    DaemonMessage, DaemonStatus, Literal, Operand, Predicate, ScanRequest, ScanSource, ScanSummary,
    TableInfo, TableStatistics,
};
use ringscan_ipc::{unique_name, Consumer, Producer, TryNext};

use crate::footer::{page_region, TEMPLATES};
use crate::ring::{at, CAPACITY_BYTES, FINISHED, RUNNING};

/// Writes the seeds of every target into `dir/<target>/seed-*` (replacing older seeds,
/// keeping every other file: inputs a run found).
pub fn write_seeds(dir: &Path) -> io::Result<()> {
    let sets = [
        ("footer", footer_seeds()?),
        ("pages", page_seeds()),
        ("ring", ring_seeds()?),
        ("messages", message_seeds()?),
    ];
    for (target, seeds) in sets {
        let dir = dir.join(target);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let is_seed = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("seed-"));
            if is_seed {
                std::fs::remove_file(path)?;
            }
        }
        for (name, bytes) in seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        }
    }
    Ok(())
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(e)
}

/// The templates, and a file written the way ringscan's flushes write (statistics per
/// page, page index, bloom filter, several row groups and pages, dictionaries).
fn footer_seeds() -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut seeds: Vec<(String, Vec<u8>)> = TEMPLATES
        .iter()
        .map(|(name, bytes)| (format!("{name}.parquet"), bytes.to_vec()))
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("symbol", DataType::Utf8, true),
        Field::new("price", DataType::Float64, true),
    ]));
    let ids: Vec<i64> = (0..300).collect();
    let symbols: Vec<Option<&str>> = (0..300)
        .map(|i| [Some("SPY"), Some("QQQ"), None, Some("IWM")][i % 4])
        .collect();
    let prices: Vec<Option<f64>> = (0..300)
        .map(|i| (i % 7 != 0).then_some(i as f64 * 0.25))
        .collect();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(symbols)),
            Arc::new(Float64Array::from(prices)),
        ],
    )
    .map_err(other)?;
    let props = WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_bloom_filter_enabled(true)
        .set_data_page_row_count_limit(50)
        .set_write_batch_size(50)
        .set_max_row_group_row_count(Some(150))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props)).map_err(other)?;
    writer.write(&batch).map_err(other)?;
    writer.close().map_err(other)?;
    seeds.push(("ringscan-like.parquet".into(), out));
    Ok(seeds)
}

/// Each template with its own pages: `[index][pages]`.
fn page_seeds() -> Vec<(String, Vec<u8>)> {
    TEMPLATES
        .iter()
        .enumerate()
        .filter_map(|(i, (name, bytes))| {
            let region = page_region(bytes)?;
            let mut seed = vec![i as u8];
            seed.extend_from_slice(&bytes[region]);
            Some((name.to_string(), seed))
        })
        .collect()
}

/// Control-socket frames of every message kind, and the IPC payloads on their own.
fn message_seeds() -> io::Result<Vec<(String, Vec<u8>)>> {
    let schema = mixed_schema();
    let schema_ipc = encode_schema(&schema).map_err(other)?;
    let min_max: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![1, 99])),
        Arc::new(StringArray::from(vec![Some("a"), None])),
    ];
    let values_ipc = encode_min_max(&["id".into(), "s".into()], &min_max).map_err(other)?;

    let mut scan = ScanRequest::new(ScanSource::Files {
        paths: vec!["ohlcv/symbol=SPY/*.parquet".into()],
    });
    scan.projection = Some(vec!["ts".into(), "close".into()]);
    scan.limit = Some(10);
    scan.offset = 3;
    scan.distinct = true;
    let column = |c: &str| Operand::Column(c.into());
    scan.predicate = Some(Predicate::And(vec![
        Predicate::compare("close", CmpOp::Gt, Literal::Float(100.5)),
        Predicate::Or(vec![
            Predicate::InList {
                expr: column("symbol"),
                list: vec![Literal::Utf8("SPY".into()), Literal::Null],
                negated: false,
            },
            Predicate::Not(Box::new(Predicate::IsNull {
                expr: column("ts"),
                negated: true,
            })),
        ]),
        Predicate::Between {
            expr: column("ts"),
            low: Literal::TimestampMicros(0),
            high: Literal::Date32(19000),
            negated: true,
        },
        Predicate::Compare {
            left: column("a"),
            op: CmpOp::NotEq,
            right: Operand::Literal(Literal::UInt(u64::MAX)),
        },
        Predicate::compare("b", CmpOp::LtEq, Literal::Bool(true)),
        Predicate::compare("c", CmpOp::GtEq, Literal::Int(-7)),
    ]));
    let table = ScanSource::Table {
        name: "ohlcv".into(),
    };
    let client = [
        ("scan", ClientMessage::Scan(scan)),
        ("ping", ClientMessage::Ping),
        (
            "describe",
            ClientMessage::Describe {
                source: table.clone(),
            },
        ),
        (
            "statistics",
            ClientMessage::Statistics {
                source: table,
                columns: vec!["close".into()],
            },
        ),
        ("status", ClientMessage::Status),
        ("stop", ClientMessage::Stop),
        (
            "refine",
            ClientMessage::Refine {
                predicate: Predicate::compare("v", CmpOp::Lt, Literal::Int(5)),
            },
        ),
        ("cancel", ClientMessage::Cancel),
        ("list-tables", ClientMessage::ListTables),
        (
            "create-table",
            ClientMessage::CreateTable {
                name: "trades".into(),
                schema_ipc: schema_ipc.clone(),
                primary_key: vec!["id".into()],
                if_not_exists: true,
            },
        ),
        (
            "drop-table",
            ClientMessage::DropTable {
                name: "trades".into(),
                if_exists: true,
            },
        ),
        (
            "truncate",
            ClientMessage::Truncate {
                name: "trades".into(),
            },
        ),
        (
            "insert",
            ClientMessage::Insert {
                table: "trades".into(),
                bytes: 4096,
            },
        ),
        ("flush", ClientMessage::Flush),
        (
            "stage",
            ClientMessage::Stage {
                table: "trades".into(),
                statement: 7,
                part: 1,
                bytes: 4096,
            },
        ),
        (
            "adopt",
            ClientMessage::Adopt {
                table: "trades".into(),
                statement: 7,
                parts: 2,
            },
        ),
        ("discard", ClientMessage::Discard),
    ];
    let daemon = [
        (
            "ring-ready",
            DaemonMessage::RingReady {
                ring_name: "/ringscan-1-2-3".into(),
            },
        ),
        ("summary", DaemonMessage::Summary(ScanSummary::default())),
        (
            "error",
            DaemonMessage::Error {
                message: "no such table".into(),
            },
        ),
        (
            "table",
            DaemonMessage::Table(TableInfo {
                schema_ipc: schema_ipc.clone(),
                files: vec![],
                dirs: vec![],
            }),
        ),
        (
            "table-statistics",
            DaemonMessage::Statistics(TableStatistics {
                row_count: 100,
                file_count: 1,
                row_group_count: 1,
                columns: ["id", "s"]
                    .iter()
                    .map(|n| ColumnStatistics {
                        name: (*n).into(),
                        null_count: Some(1),
                        min_exact: true,
                        max_exact: false,
                        min_inexact_reason: None,
                        max_inexact_reason: Some("truncated".into()),
                    })
                    .collect(),
                values_ipc: values_ipc.clone(),
                files: vec![],
                dirs: vec![],
            }),
        ),
        ("status", DaemonMessage::Status(DaemonStatus::default())),
        ("stopping", DaemonMessage::Stopping),
        (
            "tables",
            DaemonMessage::Tables {
                names: vec!["ohlcv".into(), "trades".into()],
            },
        ),
        ("pong", DaemonMessage::Pong),
        (
            "rows",
            DaemonMessage::Rows {
                summary: ScanSummary::default(),
                bytes: 4096,
            },
        ),
        ("written", DaemonMessage::Written { rows: 10, lsn: 7 }),
    ];
    let mut seeds = Vec::new();
    for (name, message) in client {
        let mut frame = Vec::new();
        write_frame(&mut frame, &message).map_err(other)?;
        seeds.push((format!("client-{name}"), frame));
    }
    for (name, message) in daemon {
        let mut frame = Vec::new();
        write_frame(&mut frame, &message).map_err(other)?;
        seeds.push((format!("daemon-{name}"), frame));
    }
    seeds.push(("schema-ipc".into(), schema_ipc));
    seeds.push(("min-max-ipc".into(), values_ipc));
    Ok(seeds)
}

/// A schema with the column kinds the ring's codec treats specially.
fn mixed_schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
        Field::new(
            "d",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new("v", DataType::Utf8View, true),
    ])
}

fn mixed_batch(schema: &SchemaRef, start: i64, rows: usize) -> io::Result<RecordBatch> {
    let ids: Vec<i64> = (start..start + rows as i64).collect();
    let s: Vec<Option<String>> = ids
        .iter()
        .map(|i| (i % 3 != 0).then(|| format!("s{i}")))
        .collect();
    let keys = Int32Array::from_iter_values(ids.iter().map(|i| (i % 2) as i32));
    let dict = DictionaryArray::try_new(keys, Arc::new(StringArray::from(vec!["x", "yy"])))
        .map_err(other)?;
    let v: Vec<Option<String>> = ids
        .iter()
        .map(|i| Some(format!("a view value long enough to be out of line {i}")))
        .collect();
    RecordBatch::try_new(
        Arc::clone(schema),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(s)),
            Arc::new(dict),
            Arc::new(StringViewArray::from(v)),
        ],
    )
    .map_err(other)
}

/// Builds a ring target input from a real producer's writes.
struct RingScript {
    segment: File,
    written: u64,
    input: Vec<u8>,
}

impl RingScript {
    /// Starts from the segment as the producer left it after writing the schema.
    fn start(segment: File, flags: u8) -> io::Result<Self> {
        let mut wp = [0u8; 8];
        segment.read_exact_at(&mut wp, at::WRITE_POS)?;
        let written = u64::from_le_bytes(wp);
        let mut data = vec![0u8; written as usize];
        segment.read_exact_at(&mut data, at::DATA)?;
        let mut input = vec![flags];
        input.extend_from_slice(&written.to_le_bytes());
        input.extend_from_slice(&(data.len() as u16).to_le_bytes());
        input.extend_from_slice(&data);
        Ok(Self {
            segment,
            written,
            input,
        })
    }

    /// Copies what the producer wrote since the last call (write ops) and publishes it.
    fn sync(&mut self) -> io::Result<()> {
        let mut wp = [0u8; 8];
        self.segment.read_exact_at(&mut wp, at::WRITE_POS)?;
        let wp = u64::from_le_bytes(wp);
        let mut pos = self.written;
        while pos < wp {
            let offset = pos % CAPACITY_BYTES;
            let n = (wp - pos).min(CAPACITY_BYTES - offset);
            let mut bytes = vec![0u8; n as usize];
            self.segment.read_exact_at(&mut bytes, at::DATA + offset)?;
            self.input.push(2);
            self.input.extend_from_slice(&(offset as u16).to_le_bytes());
            self.input.extend_from_slice(&(n as u16).to_le_bytes());
            self.input.extend_from_slice(&bytes);
            pos += n;
        }
        self.written = wp;
        self.op(3);
        self.input.extend_from_slice(&(wp as u32).to_le_bytes());
        Ok(())
    }

    fn op(&mut self, op: u8) {
        self.input.push(op);
    }

    fn state(&mut self, state: u32) {
        self.input.extend_from_slice(&[4, state as u8]);
    }
}

/// Reads everything published, in the real consumer and in the script (kept batches
/// dropped in the order `keep` allows).
fn drain(consumer: &mut Consumer, script: &mut RingScript, keep: bool) -> io::Result<()> {
    loop {
        match consumer.try_next().map_err(other)? {
            TryNext::Batch(batch) => {
                script.op(0);
                if !keep {
                    drop(batch);
                    script.input.extend_from_slice(&[1, 0]);
                }
            }
            TryNext::End => {
                script.op(0);
                return Ok(());
            }
            TryNext::Empty => return Ok(()),
        }
    }
}

/// Streams from a real producer, replayed as ring inputs: batches that wrap around the
/// ring, a batch split in parts, out-of-order release with unpin, an error record, and
/// a second stream after a rearm.
fn ring_seeds() -> io::Result<Vec<(String, Vec<u8>)>> {
    let schema: SchemaRef = Arc::new(mixed_schema());
    let mut seeds = Vec::new();
    for variant in ["wrap", "keep-unpin", "error", "restart"] {
        let name = unique_name("ringscan-seed");
        let mut producer =
            Producer::create(&name, Arc::clone(&schema), CAPACITY_BYTES as usize).map_err(other)?;
        let segment = File::open(Path::new("/dev/shm").join(&name[1..]))?;
        let mut script = RingScript::start(segment, FINISHED as u8)?;
        let mut consumer = Consumer::attach(&name).map_err(other)?;
        script.state(RUNNING);
        let pushes = match variant {
            "wrap" => 12,
            _ => 3,
        };
        for k in 0..pushes {
            // One large batch: more than an eighth of the ring, pushed in parts.
            let rows = if k == 1 && variant == "wrap" { 40 } else { 4 };
            producer
                .push(&mixed_batch(&schema, k * 10, rows)?)
                .map_err(other)?;
            script.sync()?;
            drain(&mut consumer, &mut script, variant == "keep-unpin")?;
        }
        if variant == "keep-unpin" {
            script.op(5);
            script.input.extend_from_slice(&[1, 1]);
        }
        match variant {
            "error" => {
                producer.fail("the producer failed").map_err(other)?;
                script.sync()?;
                script.state(3);
                script.op(0);
            }
            "restart" => {
                producer.end().map_err(other)?;
                script.sync()?;
                script.state(FINISHED);
                drain(&mut consumer, &mut script, false)?;
                assert!(consumer.rearm(), "the seed's consumer can rearm");
                producer.restart(Arc::clone(&schema)).map_err(other)?;
                script.sync()?;
                script.op(6);
                consumer.begin_stream().map_err(other)?;
                script.state(RUNNING);
                producer
                    .push(&mixed_batch(&schema, 500, 3)?)
                    .map_err(other)?;
                script.sync()?;
                drain(&mut consumer, &mut script, false)?;
                producer.finish().map_err(other)?;
                script.sync()?;
                script.state(FINISHED);
                drain(&mut consumer, &mut script, false)?;
            }
            _ => {
                producer.finish().map_err(other)?;
                script.sync()?;
                script.state(FINISHED);
                drain(&mut consumer, &mut script, false)?;
            }
        }
        seeds.push((variant.to_string(), script.input));
    }
    Ok(seeds)
}
