//! One connection: read requests, answer them; a scan takes the connection over.

use std::io;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ringscan_ipc::msg::{
    encode_schema, read_frame, write_frame, ClientMessage, DaemonMessage, MessageError, ScanSource,
    TableInfo, TableStatistics,
};

use ringscan_ipc::error_chain as chain;

use super::reply::reply_error;
use super::{report, scan, Activity, Shared};

/// A client that does not read its answers for this long is dropped.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves requests until the client closes, a scan ends, or an error closes it.
pub(crate) fn serve(shared: &Arc<Shared>, mut stream: UnixStream, activity: &Arc<Activity>) {
    let _ = stream.set_read_timeout(Some(shared.config.session_idle_timeout));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    loop {
        activity.idle();
        let message: ClientMessage = match read_frame(&mut stream) {
            Ok(Some(message)) => message,
            Ok(None) => return,
            Err(MessageError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                shared.idle_closed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) => {
                shared.log.line(&format!("bad frame: {}", chain(&e)));
                reply_error(&mut stream, format!("bad request frame: {}", chain(&e)));
                return;
            }
        };
        activity.busy();
        if let Err(e) = message.validate() {
            shared.log.line(&format!("invalid request: {}", chain(&e)));
            reply_error(&mut stream, chain(&e));
            return;
        }
        let answer = match message {
            ClientMessage::Ping => DaemonMessage::Pong,
            ClientMessage::Status => DaemonMessage::Status(report::status(shared)),
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
                scan::serve(shared, stream, request, activity);
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

fn statistics(
    shared: &Shared,
    source: &ScanSource,
    columns: &[String],
) -> Result<TableStatistics, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::source_stats::table_statistics(&shared.data_dir, source, columns, &shared.cache)
    }))
    .map_err(|_| "internal error: reading statistics panicked".to_owned())?
    .map_err(|e| chain(&e))
}

fn describe(shared: &Shared, source: &ScanSource) -> Result<TableInfo, String> {
    let resolved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shared
            .resolved
            .resolve(&shared.data_dir, source, &shared.cache)
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
