//! `ringscan-io-daemon`: the IO daemon that turns a scan request into pruned, decoded,
//! filtered Arrow batches in a shared-memory ring.
//!
//! Filled by the IO-daemon issue: metadata cache, pruning (partitions, statistics, page
//! index, bloom filters), the column-chunk scheduler and the decode pipeline.
#![forbid(unsafe_code)]
