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
/// is small enough). [`Rest::on_end`]'s callback learns how it ended: read (with its
/// scans' summary), failed, or dropped first.
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

/// How a result read as it was sent ended ([`Rest::on_end`]).
#[derive(Debug)]
pub enum RestEnd<'a> {
    /// Read to its end: the statement's scans' summary (the whole scan, not what the
    /// outcome counted when it returned; `None` where the plan scanned nothing).
    Read(Option<&'a ScanSummary>),
    /// Its reading failed (an interrupt is [`EngineError::Interrupted`]).
    Failed(&'a EngineError),
    /// Dropped before its end: the client went, or closed the portal.
    Dropped,
}

/// What [`Rest::on_end`] is given.
type OnEnd = Box<dyn FnOnce(RestEnd<'_>) + Send>;

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

    /// Calls `f` once, when the rest ends: read to its end, failed, or dropped first.
    pub fn on_end(&mut self, f: impl FnOnce(RestEnd<'_>) + Send + 'static) {
        self.on_end = Some(Box::new(f));
    }

    /// The result has been read to its end.
    fn ended(&mut self) {
        if let Some(filling) = self.filling.take() {
            filling.fill();
        }
        if let Some(f) = self.on_end.take() {
            let (scans, any) = super::daemon_scans(&self.physical, true);
            f(RestEnd::Read(
                any.then(|| super::combined_summary(scans)).as_ref(),
            ));
        }
    }

    /// Reading the result failed with `e`.
    fn failed(&mut self, e: &EngineError) {
        self.filling = None;
        if let Some(f) = self.on_end.take() {
            f(RestEnd::Failed(e));
        }
    }
}

impl Drop for Rest {
    fn drop(&mut self) {
        if let Some(f) = self.on_end.take() {
            f(RestEnd::Dropped);
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
            let e = EngineError::Interrupted(reason);
            this.failed(&e);
            return Poll::Ready(Some(Err(e)));
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
            Some(Err(e)) => this.failed(e),
        }
        this.done = !matches!(item, Some(Ok(_)));
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use datafusion::error::DataFusionError;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
    use futures::StreamExt;

    use super::*;

    /// How each rest ended, as its `on_end` callback was told (once).
    fn ends(
        items: Vec<Result<RecordBatch, DataFusionError>>,
        read: usize,
        interrupt_after: Option<usize>,
    ) -> Vec<String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "a",
            arrow_schema::DataType::Int64,
            false,
        )]));
        let stream = Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&schema),
            futures::stream::iter(items),
        ));
        let interrupt = Interrupt::new();
        let physical: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(Arc::clone(&schema)));
        let mut rest = Rest::new(
            stream,
            None,
            runtime.handle().clone(),
            &interrupt,
            physical,
            None,
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let told = Arc::clone(&seen);
        rest.on_end(move |end| {
            let what = match end {
                RestEnd::Read(scans) => format!("read {}", scans.is_some()),
                RestEnd::Failed(EngineError::Interrupted(why)) => format!("interrupted: {why}"),
                RestEnd::Failed(e) => format!("failed: {e}"),
                RestEnd::Dropped => "dropped".into(),
            };
            told.lock().unwrap().push(what);
        });
        runtime.block_on(async {
            for i in 0..read {
                if interrupt_after == Some(i) {
                    interrupt.fire("the statement timeout");
                }
                if rest.next().await.is_none() {
                    break;
                }
            }
        });
        drop(rest);
        let seen = seen.lock().unwrap().clone();
        seen
    }

    fn batch() -> RecordBatch {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        RecordBatch::try_from_iter([("a", a)]).unwrap()
    }

    #[test]
    fn a_rest_tells_how_it_ended_once() {
        let error = || Err(DataFusionError::Execution("division by zero".into()));
        assert_eq!(
            ends(vec![Ok(batch()), Ok(batch())], 5, None),
            ["read false"]
        );
        let failed = ends(vec![Ok(batch()), error(), Ok(batch())], 5, None);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].starts_with("failed: ") && failed[0].contains("division by zero"));
        assert_eq!(
            ends(vec![Ok(batch()), Ok(batch())], 1, None),
            ["dropped"],
            "dropped after one batch of two"
        );
        assert_eq!(
            ends(vec![Ok(batch()), Ok(batch())], 5, Some(1)),
            ["interrupted: the statement timeout"]
        );
    }
}
