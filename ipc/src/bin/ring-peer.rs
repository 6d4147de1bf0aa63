//! `ring-peer`: the peer process of `ringscan-ipc`'s cross-process tests.
//!
//! Usage: `ring-peer <role> --key value ...` (see `ringscan_ipc::bench::PeerSpec`).
//! The CLI hosts the same code as `ringscan __peer`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match ringscan_ipc::bench::peer_main(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ring-peer: {}", ringscan_ipc::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
