//! P producer threads build batches; W writer threads write them, each to its own files.
//!
//! ```text
//!  producers ──claim chunk (per-writer cursor)──▶ build batch ──bounded channel──▶ writer w
//!      ▲                                                                           │
//!      └──────────────────────── credit returned after the write ─────────────────┘
//! ```
//!
//! Writer `w` owns the contiguous rows `w*N/W .. (w+1)*N/W`, so its files hold the same
//! rows whatever P and the batch size are. Producers claim chunks round-robin over the
//! writers (so all writers are fed at once); a writer may receive its chunks out of
//! order and puts them back in order in a small reorder buffer. A producer must take a
//! credit before it claims a chunk and the writer hands the credit back once the chunk is
//! written, so at most `credits` batches exist at any time: memory is bounded, and since
//! chunks are claimed in order, the oldest unwritten chunk of every writer is always being
//! built by a producer that holds a credit — no deadlock.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use crate::datasets::{Dataset, DatasetRef};
use crate::error::GeneratorError;
use crate::options::GenerateOptions;
use crate::output;
use crate::sink::{FileLayout, Sink, WrittenFile};

/// How often a producer waiting for a credit checks whether the run failed.
const CREDIT_POLL: Duration = Duration::from_millis(50);

/// What a run wrote.
#[derive(Debug, Clone)]
pub struct GenerateSummary {
    /// The dataset's name.
    pub dataset: &'static str,
    /// Rows written.
    pub rows: u64,
    /// The files, in writer order.
    pub files: Vec<WrittenFile>,
    /// Total bytes of the files.
    pub bytes: u64,
    /// Wall time of the whole run, preparation of the directory included.
    pub elapsed: Duration,
    /// Producer and writer threads actually used.
    pub producers: usize,
    /// Writer threads actually used (never more than there are rows).
    pub writers: usize,
}

impl GenerateSummary {
    /// Rows per second of wall time.
    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One chunk of rows on its way to a writer.
#[derive(Debug)]
struct Chunk {
    seq: u64,
    start: u64,
    batch: RecordBatch,
}

/// A writer's row range and the next chunk to hand out from it.
#[derive(Debug)]
struct Cursor {
    next_row: u64,
    end: u64,
    next_seq: u64,
}

/// State shared by all threads of a run.
#[derive(Debug)]
struct Shared<'a> {
    dataset: &'a dyn Dataset,
    batch_rows: u64,
    cursors: Vec<Mutex<Cursor>>,
    round_robin: AtomicUsize,
    /// Set by the first thread that fails; every other thread stops at its next step.
    failed: AtomicBool,
}

impl Shared<'_> {
    /// Claims the next chunk of some writer, round-robin: `(writer, seq, start, len)`.
    fn claim(&self) -> Option<(usize, u64, u64, usize)> {
        let writers = self.cursors.len();
        for _ in 0..writers {
            // Relaxed: the counter only spreads claims; the cursor's mutex orders them.
            let w = self.round_robin.fetch_add(1, Ordering::Relaxed) % writers;
            let mut cursor = self.cursors[w].lock().unwrap_or_else(|p| p.into_inner());
            if cursor.next_row < cursor.end {
                let start = cursor.next_row;
                let end = (start + self.batch_rows)
                    .min(cursor.end)
                    .min(self.dataset.segment_end(start));
                debug_assert!(end > start);
                let seq = cursor.next_seq;
                cursor.next_row = end;
                cursor.next_seq += 1;
                return Some((w, seq, start, (end - start) as usize));
            }
        }
        None
    }
}

/// What a writer thread hands back: its files, the directories it made, and its error.
#[derive(Debug, Default)]
struct WriterOutcome {
    files: Vec<WrittenFile>,
    dirs: Vec<PathBuf>,
    error: Option<GeneratorError>,
}

fn producer(
    shared: &Shared<'_>,
    credits: &Receiver<()>,
    to_writers: &[Sender<Chunk>],
) -> Result<(), GeneratorError> {
    loop {
        // Wait for a credit, but look at the failure flag every so often: when a writer
        // fails, the credits its pending chunks held never come back.
        loop {
            // Relaxed: a stale `false` costs at most one more poll before the producer
            // sees the failure; no data is published through this flag.
            if shared.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            match credits.recv_timeout(CREDIT_POLL) {
                Ok(()) => break,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
        let Some((w, seq, start, len)) = shared.claim() else {
            return Ok(());
        };
        let batch =
            shared
                .dataset
                .encoded_batch(start, len)
                .map_err(|source| GeneratorError::Build {
                    dataset: shared.dataset.name(),
                    start,
                    end: start + len as u64,
                    source,
                })?;
        debug_assert_eq!(batch.num_rows(), len);
        if to_writers[w].send(Chunk { seq, start, batch }).is_err() {
            // The writer is gone: it failed and said why.
            return Ok(());
        }
    }
}

fn writer(
    shared: &Shared<'_>,
    mut sink: Sink<'_>,
    chunks: &Receiver<Chunk>,
    credits: &Sender<()>,
    progress: &(dyn Fn(u64) + Sync),
) -> WriterOutcome {
    let mut pending: BTreeMap<u64, Chunk> = BTreeMap::new();
    let mut next_seq = 0u64;
    let mut error = None;
    'recv: for chunk in chunks {
        if shared.failed.load(Ordering::Relaxed) {
            break;
        }
        pending.insert(chunk.seq, chunk);
        while let Some(chunk) = pending.remove(&next_seq) {
            let partition = shared.dataset.partition_dir(chunk.start);
            if let Err(e) = sink.write(partition, &chunk.batch) {
                error = Some(e);
                break 'recv;
            }
            next_seq += 1;
            progress(chunk.batch.num_rows() as u64);
            // The receiver lives in the producers; if they are all gone, nobody needs it.
            let _ = credits.send(());
        }
    }
    if error.is_none() && !shared.failed.load(Ordering::Relaxed) && !pending.is_empty() {
        error = Some(GeneratorError::ThreadPanicked {
            role: "producer",
            message: format!("a writer never received its chunk {next_seq}"),
        });
    }
    let dirs = std::mem::take(&mut sink.created_dirs);
    if error.is_some() || shared.failed.load(Ordering::Relaxed) {
        let files = std::mem::take(&mut sink.done);
        return WriterOutcome { files, dirs, error };
    }
    let files_so_far = sink.done.clone();
    match sink.finish() {
        Ok(files) => WriterOutcome {
            files,
            dirs,
            error: None,
        },
        Err(e) => WriterOutcome {
            files: files_so_far,
            dirs,
            error: Some(e),
        },
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// Writes the dataset `opts` describes. `progress` is called with the number of rows
/// each time a batch is written (from writer threads).
pub fn generate(
    opts: &GenerateOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GenerateSummary, GeneratorError> {
    opts.validate()?;
    let started = Instant::now();
    let created_out_dirs = output::prepare(&opts.out, opts.overwrite)?;
    let dataset: DatasetRef = opts.build_dataset();
    let rows = dataset.rows();
    let writers = opts
        .writers
        .min(usize::try_from(rows).unwrap_or(usize::MAX))
        .max(1);
    let producers = opts.producers;
    let layout = FileLayout::new(dataset.as_ref(), opts);
    let cursors = (0..writers as u64)
        .map(|w| {
            Mutex::new(Cursor {
                next_row: rows * w / writers as u64,
                end: rows * (w + 1) / writers as u64,
                next_seq: 0,
            })
        })
        .collect();
    let shared = Shared {
        dataset: dataset.as_ref(),
        batch_rows: opts.batch_rows as u64,
        cursors,
        round_robin: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
    };

    // Enough batches in flight to keep every thread busy, few enough to bound memory.
    let credit_count = 2 * producers + writers;
    let (credit_tx, credit_rx) = bounded::<()>(credit_count);
    for _ in 0..credit_count {
        credit_tx
            .send(())
            .expect("the channel has room for every credit");
    }
    let (chunk_txs, chunk_rxs): (Vec<_>, Vec<_>) =
        (0..writers).map(|_| bounded::<Chunk>(2)).unzip();

    let mut outcomes = Vec::with_capacity(writers);
    let mut first_error: Option<GeneratorError> = None;
    std::thread::scope(|scope| {
        let shared = &shared;
        let writer_handles: Vec<_> = chunk_rxs
            .into_iter()
            .enumerate()
            .map(|(w, rx)| {
                let sink = Sink::new(&layout, &opts.out, w);
                let credits = credit_tx.clone();
                std::thread::Builder::new()
                    .name(format!("gen-writer-{w}"))
                    .spawn_scoped(scope, move || {
                        let outcome = writer(shared, sink, &rx, &credits, progress);
                        if outcome.error.is_some() {
                            shared.failed.store(true, Ordering::Relaxed);
                        }
                        outcome
                    })
                    .expect("spawning a writer thread")
            })
            .collect();
        drop(credit_tx);
        let producer_handles: Vec<_> = (0..producers)
            .map(|p| {
                let credits = credit_rx.clone();
                let txs = chunk_txs.clone();
                std::thread::Builder::new()
                    .name(format!("gen-producer-{p}"))
                    .spawn_scoped(scope, move || {
                        let result = producer(shared, &credits, &txs);
                        if result.is_err() {
                            shared.failed.store(true, Ordering::Relaxed);
                        }
                        result
                    })
                    .expect("spawning a producer thread")
            })
            .collect();
        drop(chunk_txs);
        drop(credit_rx);

        for handle in producer_handles {
            let result = handle.join().unwrap_or_else(|payload| {
                shared.failed.store(true, Ordering::Relaxed);
                Err(GeneratorError::ThreadPanicked {
                    role: "producer",
                    message: panic_message(payload.as_ref()),
                })
            });
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        for handle in writer_handles {
            match handle.join() {
                Ok(mut outcome) => {
                    if let Some(e) = outcome.error.take() {
                        first_error.get_or_insert(e);
                    }
                    outcomes.push(outcome);
                }
                Err(payload) => {
                    shared.failed.store(true, Ordering::Relaxed);
                    first_error.get_or_insert(GeneratorError::ThreadPanicked {
                        role: "writer",
                        message: panic_message(payload.as_ref()),
                    });
                }
            }
        }
    });

    let files: Vec<WrittenFile> = outcomes
        .iter()
        .flat_map(|o| o.files.iter().cloned())
        .collect();
    if let Some(error) = first_error {
        let paths: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
        let dirs: Vec<PathBuf> = outcomes
            .into_iter()
            .flat_map(|o| o.dirs)
            .chain(created_out_dirs)
            .collect();
        output::remove_partial(&paths, &dirs);
        return Err(error);
    }
    let written: u64 = files.iter().map(|f| f.rows).sum();
    assert_eq!(written, rows, "every row is written exactly once");
    Ok(GenerateSummary {
        dataset: dataset.name(),
        rows,
        bytes: files.iter().map(|f| f.bytes).sum(),
        files,
        elapsed: started.elapsed(),
        producers,
        writers,
    })
}
