//! Helpers shared by the root integration tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub(crate) mod azurite;
pub(crate) mod cli;
pub(crate) mod python;
pub(crate) mod serve;
