//! `ringscan-ipc`: the types and transport that cross the process boundary.
#![forbid(unsafe_code)]
