//! One connection: read requests, answer them; a scan takes the connection over.

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ringscan_ipc::msg::{
    encode_schema, read_frame, write_frame, ClientMessage, DaemonMessage, MessageError, ScanSource,
    TableInfo, TableStatistics,
};

use ringscan_ipc::error_chain as chain;

use crate::ingest::store::{InsertRecord, Staged};

use super::reply::reply_error;
use super::{report, scan, Activity, Shared};

/// A client that does not read its answers for this long is dropped.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves requests until the client closes, a scan ends, or an error closes it.
pub(crate) fn serve(shared: &Arc<Shared>, mut stream: UnixStream, activity: &Arc<Activity>) {
    let idle = shared.config.session_idle_limit();
    let _ = stream.set_read_timeout(idle);
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    // The parts of a statement staged on this connection: removed when it ends.
    let mut staged: Option<Staged> = None;
    loop {
        activity.idle();
        // Waiting in `poll`, not in the read: a thread blocked in a read of this socket
        // is woken for nothing each time the client reads an answer (a poll error
        // leaves the wait to the read and its timeout). A connection holding staged
        // parts waits without a limit: its client may take a while to send the next
        // (a COPY fed slowly), and a client that ends closes the socket, which ends
        // the wait and drops the parts.
        let wait = if staged.is_some() { None } else { idle };
        if let Ok(false) = ringscan_ipc::wait_readable(stream.as_fd(), wait) {
            shared.idle_closed.fetch_add(1, Ordering::Relaxed);
            return;
        }
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
            ClientMessage::ListTables => match crate::table::table_names(&shared.data_dir) {
                Ok(names) => DaemonMessage::Tables { names },
                Err(e) => {
                    reply_error(&mut stream, chain(&e));
                    continue;
                }
            },
            ClientMessage::Describe { source } => match describe(shared, &source, &stream) {
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
                        if !message.starts_with(ROWS_IN_MEMORY) {
                            shared
                                .log
                                .line(&format!("statistics {source:?}: error: {message}"));
                        }
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
            ClientMessage::Insert { table, bytes } => {
                let Some(record) = read_rows(shared, &mut stream, &table, bytes) else {
                    return;
                };
                match insert(shared, &table, record) {
                    Ok((rows, lsn)) => DaemonMessage::Written { rows, lsn },
                    Err(message) => {
                        reply_error(&mut stream, message);
                        continue;
                    }
                }
            }
            ClientMessage::CreateTable {
                name,
                schema_ipc,
                primary_key,
                if_not_exists,
            } => match create_table(shared, &name, &schema_ipc, &primary_key, if_not_exists) {
                Ok(()) => DaemonMessage::Written { rows: 0, lsn: 0 },
                Err(message) => {
                    reply_error(&mut stream, message);
                    continue;
                }
            },
            ClientMessage::DropTable { name, if_exists } => {
                match ingest(shared).and_then(|i| i.drop_table(&name, if_exists)) {
                    Ok(dropped) => {
                        if dropped {
                            shared.log.line(&format!("dropped table {name}"));
                        }
                        DaemonMessage::Written { rows: 0, lsn: 0 }
                    }
                    Err(message) => {
                        reply_error(&mut stream, message);
                        continue;
                    }
                }
            }
            ClientMessage::Truncate { name } => {
                match ingest(shared).and_then(|i| i.truncate(&name)) {
                    Ok(()) => DaemonMessage::Written { rows: 0, lsn: 0 },
                    Err(message) => {
                        reply_error(&mut stream, message);
                        continue;
                    }
                }
            }
            ClientMessage::Stage {
                table,
                statement,
                part,
                bytes,
            } => {
                let Some(record) = read_rows(shared, &mut stream, &table, bytes) else {
                    return;
                };
                match stage(shared, &mut staged, &table, (statement, part), record) {
                    Ok(rows) => DaemonMessage::Written { rows, lsn: 0 },
                    Err(message) => {
                        reply_error(&mut stream, message);
                        continue;
                    }
                }
            }
            ClientMessage::Adopt {
                table,
                statement,
                parts,
            } => {
                match ingest(shared)
                    .and_then(|i| i.adopt(staged.take(), &table, (statement, parts)))
                {
                    Ok(rows) => DaemonMessage::Written { rows, lsn: 0 },
                    Err(message) => {
                        shared
                            .log
                            .line(&format!("copy into {table}: not committed: {message}"));
                        reply_error(&mut stream, message);
                        continue;
                    }
                }
            }
            ClientMessage::Discard => {
                staged = None;
                DaemonMessage::Written { rows: 0, lsn: 0 }
            }
            ClientMessage::Flush => match ingest(shared).and_then(|i| i.flush(true)) {
                Ok(rows) => DaemonMessage::Written { rows, lsn: 0 },
                Err(message) => {
                    reply_error(&mut stream, message);
                    continue;
                }
            },
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

/// Why a written table has no footer statistics (not worth a log line: it is common).
const ROWS_IN_MEMORY: &str = "the table has rows in memory";

/// The daemon's written tables, or why writes are refused.
fn ingest(shared: &Shared) -> Result<&crate::ingest::store::Ingest, String> {
    shared
        .ingest
        .as_ref()
        .map_err(|e| format!("writes are refused: {e}"))
}

/// Reads the `bytes` of rows that follow an insert's or a part's frame. `None` when
/// they were cut off (the client went away mid-statement): nothing of it is applied,
/// and the connection, out of step, is closed.
fn read_rows(
    shared: &Shared,
    stream: &mut UnixStream,
    table: &str,
    bytes: u64,
) -> Option<InsertRecord> {
    // Sized once (`bytes` is bounded by validate), with room for the log record's head:
    // a large COPY's stream is read once and never copied.
    let mut record = InsertRecord::new(table, usize::try_from(bytes).unwrap_or(0));
    let read = stream.take(bytes).read_to_end(record.stream_buf());
    if read.is_err() || record.stream_len() as u64 != bytes {
        shared.log.line(&format!(
            "insert into {table}: the rows ended after {} of {bytes} bytes",
            record.stream_len()
        ));
        return None;
    }
    Some(record)
}

/// A part of a large statement (see `ingest::store::Staged`).
fn stage(
    shared: &Shared,
    staged: &mut Option<Staged>,
    table: &str,
    statement: (u64, u64),
    record: InsertRecord,
) -> Result<u64, String> {
    let ingest = ingest(shared)?;
    // As for an insert: a panic in arrow's casts refuses the part (and its statement).
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ingest.stage(staged, table, statement, record)
    }))
    .unwrap_or_else(|_| {
        *staged = None;
        Err(format!(
            "internal error: checking the rows for {table} panicked"
        ))
    })
}

fn insert(shared: &Shared, table: &str, record: InsertRecord) -> Result<(u64, u64), String> {
    let ingest = ingest(shared)?;
    // Checking the rows against the table runs arrow's casts on what a client sent: a
    // panic there refuses this insert (nothing of it is written) and nothing else.
    let commit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ingest.prepare_insert(table, record)
    }))
    .map_err(|_| format!("internal error: checking the rows for {table} panicked"))??;
    ingest.commit(commit)
}

fn create_table(
    shared: &Shared,
    name: &str,
    schema_ipc: &[u8],
    primary_key: &[String],
    if_not_exists: bool,
) -> Result<(), String> {
    let ingest = ingest(shared)?;
    let schema = ringscan_ipc::msg::decode_schema(schema_ipc)
        .map_err(|e| format!("create table {name}: the schema does not decode: {e}"))?;
    if ingest.create_table(name, &schema, primary_key, if_not_exists)? {
        shared.log.line(&format!(
            "created table {name} ({} columns{})",
            schema.fields().len(),
            if primary_key.is_empty() {
                String::new()
            } else {
                format!(", primary key {}", primary_key.join(", "))
            }
        ));
    }
    Ok(())
}

fn statistics(
    shared: &Shared,
    source: &ScanSource,
    columns: &[String],
) -> Result<TableStatistics, String> {
    if let Some(snapshot) = written(shared, source) {
        if !snapshot.rows.is_empty() {
            // Footers say nothing of the rows in memory: the client scans instead.
            return Err(
                "the table has rows in memory, which footer statistics do not cover".into(),
            );
        }
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::source_stats::resolved_statistics(snapshot.table, columns, &shared.cache)
        }))
        .map_err(|_| "internal error: reading statistics panicked".to_owned())?
        .map_err(|e| chain(&e));
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Through the kept listing, as Describe and Scan resolve: an object-storage root
        // is listed once per statement (within --list-ttl), not once more for this.
        let resolved = shared
            .resolved
            .resolve(&shared.data_dir, source, &shared.cache)
            .map_err(|e| chain(&e))?;
        crate::source_stats::resolved_statistics(resolved, columns, &shared.cache)
            .map_err(|e| chain(&e))
    }))
    .map_err(|_| "internal error: reading statistics panicked".to_owned())?
}

/// The snapshot of `source` when it is a table the daemon writes (with its files'
/// versions: what describe and statistics answer).
fn written(shared: &Shared, source: &ScanSource) -> Option<crate::ingest::store::Snapshot> {
    match (source, &shared.ingest) {
        (ScanSource::Table { name }, Ok(ingest)) => ingest.snapshot(name, true),
        _ => None,
    }
}

/// What `source` is; its footers' requests given up if the client goes away meanwhile.
fn describe(
    shared: &Shared,
    source: &ScanSource,
    client: &UnixStream,
) -> Result<TableInfo, String> {
    if let Some(snapshot) = written(shared, source) {
        let schema_ipc = encode_schema(&snapshot.table.schema).map_err(|e| chain(&e))?;
        return Ok(TableInfo {
            schema_ipc,
            files: snapshot.table.listing.file_versions,
            dirs: snapshot.table.listing.dirs,
        });
    }
    let resolved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let gone = || !ringscan_ipc::client::connection_open(client);
        shared
            .resolved
            .resolve_until(&shared.data_dir, source, &shared.cache, &gone)
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
