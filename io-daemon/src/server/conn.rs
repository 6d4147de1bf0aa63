//! One connection: read requests, answer them; a scan takes the connection over.

use std::io;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ringscan_ipc::msg::{
    encode_schema, read_frame, write_frame, CacheStatus, ClientMessage, ColumnCacheStatus,
    DaemonMessage, DaemonStatus, MessageError, ScanSource, TableInfo, TableStatistics,
};

use super::{scan, Shared};
use crate::table;

/// A request connection silent for this long is closed.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// A client that does not read its answers for this long is dropped.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// An error and its causes on one line, each cause once.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Sends an error reply (best effort: the client may be gone).
pub(crate) fn reply_error(stream: &mut UnixStream, message: String) {
    let _ = write_frame(stream, &DaemonMessage::Error { message });
}

/// Answers "busy" and closes.
pub(crate) fn refuse_busy(mut stream: UnixStream, why: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    reply_error(&mut stream, format!("busy: {why}; try again later"));
}

/// Serves requests until the client closes, a scan ends, or an error closes it.
pub(crate) fn serve(shared: &Arc<Shared>, mut stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(REQUEST_READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    loop {
        let message: ClientMessage = match read_frame(&mut stream) {
            Ok(Some(message)) => message,
            Ok(None) => return,
            Err(MessageError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return;
            }
            Err(e) => {
                shared.log.line(&format!("bad frame: {}", chain(&e)));
                reply_error(&mut stream, format!("bad request frame: {}", chain(&e)));
                return;
            }
        };
        if let Err(e) = message.validate() {
            shared.log.line(&format!("invalid request: {}", chain(&e)));
            reply_error(&mut stream, chain(&e));
            return;
        }
        let answer = match message {
            ClientMessage::Ping => DaemonMessage::Pong,
            ClientMessage::Status => DaemonMessage::Status(status(shared)),
            ClientMessage::Describe { source } => match describe(shared, &source) {
                Ok(info) => DaemonMessage::Table(info),
                Err(message) => {
                    shared
                        .log
                        .line(&format!("describe {source:?}: error: {message}"));
                    reply_error(&mut stream, message);
                    return;
                }
            },
            ClientMessage::Statistics { source, columns } => {
                match statistics(shared, &source, &columns) {
                    Ok(stats) => DaemonMessage::Statistics(stats),
                    Err(message) => {
                        shared
                            .log
                            .line(&format!("statistics {source:?}: error: {message}"));
                        // The executor falls back to a scan and goes on using this
                        // connection: keep it open.
                        reply_error(&mut stream, message);
                        continue;
                    }
                }
            }
            ClientMessage::Stop => {
                shared.log.line("stop requested");
                let _ = write_frame(&mut stream, &DaemonMessage::Stopping);
                shared.stopping.store(true, Ordering::Release);
                return;
            }
            ClientMessage::Scan(request) => {
                scan::serve(shared, stream, request);
                return;
            }
            ClientMessage::Refine { .. } | ClientMessage::Cancel => {
                reply_error(
                    &mut stream,
                    "refine and cancel are only valid on a running scan's connection".into(),
                );
                return;
            }
        };
        if let Err(e) = write_frame(&mut stream, &answer) {
            shared.log.line(&format!("cannot answer: {}", chain(&e)));
            reply_error(&mut stream, chain(&e));
            return;
        }
    }
}

fn status(shared: &Shared) -> DaemonStatus {
    let stats = shared.cache.stats();
    DaemonStatus {
        pid: std::process::id(),
        uptime_ms: u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        idle_timeout_ms: u64::try_from(shared.config.idle_timeout.as_millis()).unwrap_or(u64::MAX),
        scans_active: shared.scans_active.load(Ordering::Acquire),
        scans_served: shared.scans_served.load(Ordering::Relaxed),
        rings_reused: shared.rings_reused.load(Ordering::Relaxed),
        metadata_cache: CacheStatus {
            hits: stats.hits,
            misses: stats.misses,
            evictions: stats.evictions,
            entries: stats.entries as u64,
            bytes: stats.bytes as u64,
            capacity_bytes: shared.cache.capacity_bytes() as u64,
            page_index_hits: stats.page_index_hits,
            page_index_misses: stats.page_index_misses,
            page_indexes: stats.page_indexes as u64,
        },
        column_cache: column_cache_status(shared),
        data_dir: shared.data_dir.clone(),
    }
}

pub(crate) fn column_cache_status(shared: &Shared) -> ColumnCacheStatus {
    let columns = shared.cache.columns();
    let stats = columns.stats();
    ColumnCacheStatus {
        hits: stats.hits,
        misses: stats.misses,
        admitted: stats.admitted,
        evictions: stats.evictions,
        invalidated: stats.invalidated,
        entries: stats.entries as u64,
        bytes: stats.bytes as u64,
        capacity_bytes: columns.capacity_bytes() as u64,
    }
}

fn statistics(
    shared: &Shared,
    source: &ScanSource,
    columns: &[String],
) -> Result<TableStatistics, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::stats::table_statistics(&shared.data_dir, source, columns, &shared.cache)
    }))
    .map_err(|_| "internal error: reading statistics panicked".to_owned())?
    .map_err(|e| chain(&e))
}

fn describe(shared: &Shared, source: &ScanSource) -> Result<TableInfo, String> {
    let resolved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        table::resolve(&shared.data_dir, source, &shared.cache)
    }))
    .map_err(|_| "internal error: describing the table panicked".to_owned())?
    .map_err(|e| chain(&e))?;
    let schema_ipc = encode_schema(&resolved.schema).map_err(|e| chain(&e))?;
    Ok(TableInfo {
        schema_ipc,
        files: resolved.listing.file_versions,
        dirs: resolved.listing.dirs,
    })
}
