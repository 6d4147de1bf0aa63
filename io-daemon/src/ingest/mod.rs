//! Durable ingest: what `INSERT` writes before it answers.
//!
//! - [`file`] is the storage under the log, behind two small traits ([`file::LogDir`],
//!   [`file::LogFile`]) so that tests can cut the power or fail an `fdatasync`
//!   ([`file::testing`]);
//! - [`wal`] is the write-ahead log: checksummed records in numbered segments, recovery
//!   that cuts a torn tail and refuses real corruption, and one writer thread that makes
//!   each group of concurrent commits durable with one `fdatasync`.

pub mod file;
mod file_keys;
mod key_index;
pub mod manifest;
mod memtable;
pub mod store;
pub mod wal;
