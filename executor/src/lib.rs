//! `ringscan-executor`: parses SQL, plans what to push to the IO daemon, consumes the
//! ring and finishes the query.
//!
//! Filled by the executor issue: SQL front end, planner, plan and result caches,
//! operators (filter, projection, hash aggregation, top-k, offset/limit).
#![forbid(unsafe_code)]
