//! `ringscan-profiling`: hardware and software counters and run records.
#![forbid(unsafe_code)]
