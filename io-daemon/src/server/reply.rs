//! Error replies on a connection: a leaf that the request loop, the scans and the
//! accept loop share.

use std::os::unix::net::UnixStream;
use std::time::Duration;

use ringscan_ipc::msg::{write_frame, DaemonMessage};

/// Sends an error reply (best effort: the client may be gone).
pub(crate) fn reply_error(stream: &mut impl std::io::Write, message: String) {
    let _ = write_frame(stream, &DaemonMessage::Error { message });
}

/// Answers "busy" and closes.
pub(crate) fn refuse_busy(mut stream: UnixStream, why: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    reply_error(&mut stream, format!("busy: {why}; try again later"));
}
