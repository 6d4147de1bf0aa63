//! `ringscan-fuzz`: coverage-guided fuzz targets for the parsers that read bytes someone
//! else wrote.
//!
//! Each target is a plain function from bytes to nothing that must return, never
//! panic, for every input: every malformed input is an error value somewhere inside.
//!
//! - [`fuzz_footer`]: a whole Parquet file, scanned the way the daemon scans it (footer
//!   through the metadata cache, pruning with a predicate, page indexes, bloom filters,
//!   decoding).
//! - [`fuzz_pages`]: the pages of one of a few small valid files (the [`TEMPLATES`])
//!   replaced by the input, footer kept, so that mutations reach page decoding instead of
//!   dying in the footer.
//! - [`fuzz_ring`]: a ring segment whose header and records the input writes, as a
//!   hostile or confused producer would, read by a real [`Consumer`](ringscan_ipc::Consumer).
//! - [`fuzz_messages`]: control-socket frames, decoded as either side decodes them, and
//!   the Arrow IPC payloads they carry (schemas, statistics).
//!
//! [`TARGETS`] names them. `cargo test` replays the corpus kept in `fuzz/corpus/<name>/`
//! through each one (`tests/corpus.rs`); `scripts/fuzz` builds the libFuzzer driver
//! (`src/bin/ringscan-fuzz.rs`, feature `libfuzzer`) with sanitizer coverage and runs
//! it. Whatever a run finds is fixed in the library, gets a regression test named for
//! the bug next to the code, and its input joins the corpus.
//!
//! ```
//! // Garbage is an error inside, not a panic.
//! ringscan_fuzz::fuzz_footer(b"PAR1 not really PAR1");
//! ringscan_fuzz::fuzz_messages(&[3, 0, 0, 0, b'{', b'}', b'x']);
//! ```
#![forbid(unsafe_code)]

mod footer;
mod messages;
mod ring;
mod seeds;

pub use footer::{fuzz_footer, fuzz_pages, TEMPLATES};
pub use messages::fuzz_messages;
pub use ring::{fuzz_ring, ring_batches};
pub use seeds::write_seeds;

/// A fuzz target: bytes in, nothing out; it returns for every input.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus directory and of `scripts/fuzz`'s argument.
pub const TARGETS: &[(&str, Target)] = &[
    ("footer", fuzz_footer),
    ("pages", fuzz_pages),
    ("ring", fuzz_ring),
    ("messages", fuzz_messages),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
