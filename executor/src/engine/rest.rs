//! The rest of a result that is sent as it comes instead of held whole
//! ([`super::SqlSession::query_each`] with a limit on what it holds).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::ExecutionPlan;
use futures::{Stream, StreamExt};
use ringscan_ipc::msg::ScanSummary;

use super::{EngineError, Interrupt};
use crate::{QueryResult, ResultCache, ResultKey};

/// Bytes of a result read as it is sent that are copied for the result cache at most:
/// past them the copies are dropped and the result is not kept.
pub(crate) const STREAMED_CACHE_BYTES: usize = 8 << 20;

/// The batches of a result after those the query returned with, as its plan makes
/// them. Polled from any thread (the session's runtime is entered while it is), it
/// ends with an error when the statement's interrupt fires (a cancel request, the
/// statement timeout); dropping it stops the query (its scans with it). Read to its
/// end, it puts the result in the result cache where the statement's would go (and it
/// is small enough), and hands its scans' summary to [`Rest::on_end`]'s callback.
pub struct Rest {
    stream: SendableRecordBatchStream,
    /// The result's schema where its instants are relabelled into the session zone.
    zoned: Option<SchemaRef>,
    runtime: tokio::runtime::Handle,
    stopped: Pin<Box<dyn Future<Output = String> + Send>>,
    done: bool,
    /// The plan, whose scans' summaries are the statement's once it ends.
    physical: Arc<dyn ExecutionPlan>,
    filling: Option<Filling>,
    on_end: Option<OnEnd>,
}

/// What [`Rest::on_end`] is given.
type OnEnd = Box<dyn FnOnce(Option<&ScanSummary>) + Send>;

/// A result on its way into the result cache: copies of its batches so far.
pub(crate) struct Filling {
    pub(crate) cache: Arc<Mutex<ResultCache>>,
    pub(crate) key: ResultKey,
    pub(crate) schema: SchemaRef,
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) rows: usize,
    /// What the batches span ([`super::held_bytes`]).
    pub(crate) bytes: usize,
}

impl Filling {
    /// Puts the result in the cache.
    pub(crate) fn fill(self) {
        let result = QueryResult {
            schema: self.schema,
            batches: self.batches,
            rows: self.rows,
        };
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(self.key, Arc::new(result));
    }

    /// Adds a copy of `batch`; `false` when the result has outgrown what is copied.
    fn add(&mut self, batch: &RecordBatch) -> bool {
        self.bytes += super::held_bytes(batch);
        if self.bytes > STREAMED_CACHE_BYTES {
            return false;
        }
        match crate::owned_copy(batch.schema(), std::slice::from_ref(batch)) {
            Ok(copy) => {
                self.rows += copy.num_rows();
                self.batches.push(copy);
                true
            }
            Err(_) => false,
        }
    }
}

impl std::fmt::Debug for Rest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rest").field("done", &self.done).finish()
    }
}

impl Rest {
    pub(crate) fn new(
        stream: SendableRecordBatchStream,
        zoned: Option<SchemaRef>,
        runtime: tokio::runtime::Handle,
        interrupt: &Interrupt,
        physical: Arc<dyn ExecutionPlan>,
        filling: Option<Filling>,
    ) -> Self {
        let interrupt = interrupt.clone();
        Self {
            stream,
            zoned,
            runtime,
            stopped: Box::pin(async move { interrupt.fired().await }),
            done: false,
            physical,
            filling,
            on_end: None,
        }
    }

    /// Calls `f` when the rest has been read to its end without an error, with the
    /// statement's scans' summary (the whole scan, not what the outcome counted when
    /// it returned; `None` where the plan scanned nothing).
    pub fn on_end(&mut self, f: impl FnOnce(Option<&ScanSummary>) + Send + 'static) {
        self.on_end = Some(Box::new(f));
    }

    /// The result has been read to its end.
    fn ended(&mut self) {
        if let Some(filling) = self.filling.take() {
            filling.fill();
        }
        if let Some(f) = self.on_end.take() {
            let (scans, any) = super::daemon_scans(&self.physical, true);
            f(any.then(|| super::combined_summary(scans)).as_ref());
        }
    }
}

impl Stream for Rest {
    type Item = Result<RecordBatch, EngineError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(reason) = this.stopped.as_mut().poll(cx) {
            this.done = true;
            return Poll::Ready(Some(Err(EngineError::Interrupted(reason))));
        }
        // What the plan spawns as it runs goes to the session's runtime; and outside
        // tokio's cooperative budget, as `poll_here` polls a whole query: polled from a
        // connection's task, a channel past that task's budget would defer its wake-up
        // to the entered runtime, which never wakes this task (each read of the rest
        // waited for the next wake-up of another kind, seconds).
        let _session = this.runtime.enter();
        let next = std::pin::pin!(tokio::task::unconstrained(this.stream.next()));
        let item = match next.poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => None,
            Poll::Ready(Some(Err(e))) => Some(Err(EngineError::from(e))),
            Poll::Ready(Some(Ok(batch))) => Some(match &this.zoned {
                Some(zoned) => crate::zone::zoned_batch(zoned, batch)
                    .map_err(|e| EngineError::from(datafusion::error::DataFusionError::from(e))),
                None => Ok(batch),
            }),
        };
        match &item {
            Some(Ok(batch)) => {
                if this.filling.as_mut().is_some_and(|f| !f.add(batch)) {
                    this.filling = None;
                }
            }
            None => this.ended(),
            Some(Err(_)) => this.filling = None,
        }
        this.done = !matches!(item, Some(Ok(_)));
        Poll::Ready(item)
    }
}
