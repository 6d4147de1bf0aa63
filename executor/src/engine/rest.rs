//! The rest of a result that is sent as it comes instead of held whole
//! ([`super::SqlSession::query_each`] with a limit on what it holds).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use futures::{Stream, StreamExt};

use super::{EngineError, Interrupt};

/// The batches of a result after those the query returned with, as its plan makes
/// them. Polled from any thread (the session's runtime is entered while it is), it
/// ends with an error when the statement's interrupt fires (a cancel request, the
/// statement timeout); dropping it stops the query (its scans with it).
pub struct Rest {
    stream: SendableRecordBatchStream,
    /// The result's schema where its instants are relabelled into the session zone.
    zoned: Option<SchemaRef>,
    runtime: tokio::runtime::Handle,
    stopped: Pin<Box<dyn Future<Output = String> + Send>>,
    done: bool,
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
    ) -> Self {
        let interrupt = interrupt.clone();
        Self {
            stream,
            zoned,
            runtime,
            stopped: Box::pin(async move { interrupt.fired().await }),
            done: false,
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
        this.done = !matches!(item, Some(Ok(_)));
        Poll::Ready(item)
    }
}
