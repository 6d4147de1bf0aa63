//! Control-socket target: frames as the daemon reads them from a client, as the client
//! reads them from the daemon, and the Arrow IPC payloads the answers carry.

use std::io::Cursor;

use ringscan_ipc::msg::{
    decode_min_max, decode_schema, read_frame, read_frame_limited, write_frame, ClientMessage,
    DaemonMessage,
};

/// Smallest frame limit tried (the daemon's own is [`MAX_FRAME_BYTES`]): a limit hit
/// halfway through a stream of frames must be an error too.
///
/// [`MAX_FRAME_BYTES`]: ringscan_ipc::msg::MAX_FRAME_BYTES
const SMALL_LIMIT_BYTES: usize = 64;

/// Decodes `bytes` as a stream of frames on either side of the control socket (each
/// decoded request is validated as the daemon validates it, and whatever decodes is
/// encoded again), then as the Arrow IPC schema and statistics payloads of a daemon's
/// answers.
pub fn fuzz_messages(bytes: &[u8]) {
    let mut reader = Cursor::new(bytes);
    while let Ok(Some(message)) = read_frame::<_, ClientMessage>(&mut reader) {
        let _ = message.validate();
        let mut out = Vec::new();
        if write_frame(&mut out, &message).is_ok() {
            // What was written must read back.
            let again = read_frame::<_, ClientMessage>(&mut Cursor::new(&out));
            assert!(
                matches!(again, Ok(Some(_))),
                "a re-encoded request does not decode: {again:?}"
            );
        }
    }

    let mut reader = Cursor::new(bytes);
    while let Ok(Some(message)) = read_frame::<_, DaemonMessage>(&mut reader) {
        match message {
            DaemonMessage::Table(info) => {
                let _ = info.schema();
            }
            DaemonMessage::Statistics(stats) => {
                let _ = stats.min_max();
            }
            DaemonMessage::Summary(summary) => {
                let _ = summary.validate();
            }
            _ => {}
        }
    }

    let mut reader = Cursor::new(bytes);
    while let Ok(Some(_)) = read_frame_limited::<_, ClientMessage>(&mut reader, SMALL_LIMIT_BYTES) {
    }

    let _ = decode_schema(bytes);
    let _ = decode_min_max(bytes);
}
