//! The libFuzzer driver: one binary for every target, the target named by
//! `RINGSCAN_FUZZ_TARGET` (`footer`, `pages`, `ring`, `messages`), so that the
//! instrumented build links once. Built and run by `scripts/fuzz`;
//! `RINGSCAN_FUZZ_WRITE_SEEDS=DIR` writes the seed corpus into `DIR` instead
//! (`scripts/fuzz --seeds`).
//!
//! A panic that escapes a target aborts (libFuzzer records the input as a crash). A
//! panic the library catches and turns into an error (the scan's guard around the
//! parquet crate's decoders) is an error like any other, unless
//! `RINGSCAN_FUZZ_STRICT=1`, which aborts on every panic (to hunt for the parquet
//! crate's own).
#![no_main]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

/// The message of the last panic, printed if it escapes (caught ones stay quiet: the
/// parquet crate's, turned into errors by the scan, would flood the log).
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// The chosen target, and whether every panic aborts. First called from libFuzzer's
/// initialization, before any input (an exit there is not a crash).
fn setup() -> &'static (ringscan_fuzz::Target, bool) {
    static SETUP: OnceLock<(ringscan_fuzz::Target, bool)> = OnceLock::new();
    SETUP.get_or_init(|| {
        if let Some(dir) = std::env::var_os("RINGSCAN_FUZZ_WRITE_SEEDS") {
            if let Err(e) = ringscan_fuzz::write_seeds(std::path::Path::new(&dir)) {
                eprintln!("writing the seeds failed: {e}");
                std::process::exit(1);
            }
            std::process::exit(0);
        }
        let name = std::env::var("RINGSCAN_FUZZ_TARGET").unwrap_or_default();
        let Some(target) = ringscan_fuzz::target(&name) else {
            let names: Vec<&str> = ringscan_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
            eprintln!("RINGSCAN_FUZZ_TARGET={name:?}: not one of {names:?}");
            std::process::exit(2);
        };
        let strict = std::env::var("RINGSCAN_FUZZ_STRICT").is_ok_and(|v| v == "1");
        if !strict {
            // libfuzzer-sys's hook aborts on every panic, caught or not; keep the
            // message instead and let caught panics unwind to their catch.
            std::panic::set_hook(Box::new(|info| {
                let mut last = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
                *last = info.to_string();
            }));
        }
        (target, strict)
    })
}

libfuzzer_sys::fuzz_target!(init: { setup(); }, |data: &[u8]| {
    let (target, _) = setup();
    if catch_unwind(AssertUnwindSafe(|| target(data))).is_err() {
        let last = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("a panic escaped the target: {last}");
        std::process::abort();
    }
});
