//! What the daemon tells about itself: its status, caches and memory.

use std::sync::atomic::Ordering;

use ringscan_ipc::msg::{CacheStatus, ColumnCacheStatus, DaemonStatus, MemoryStatus};

use super::Shared;

pub(crate) fn status(shared: &Shared) -> DaemonStatus {
    DaemonStatus {
        pid: std::process::id(),
        uptime_ms: u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        idle_timeout_ms: u64::try_from(shared.config.idle_timeout.as_millis()).unwrap_or(u64::MAX),
        scans_active: shared.scans_active.load(Ordering::Acquire),
        scans_served: shared.scans_served.load(Ordering::Relaxed),
        rings_reused: shared.rings_reused.load(Ordering::Relaxed),
        metadata_cache: metadata_cache_status(shared),
        column_cache: column_cache_status(shared),
        memory: memory_status(shared),
        data_dir: shared.data_dir.clone(),
        ingest: ingest_status(shared),
    }
}

fn ingest_status(shared: &Shared) -> ringscan_ipc::msg::IngestStatus {
    let ingest = match &shared.ingest {
        Ok(ingest) => ingest,
        Err(why) => {
            return ringscan_ipc::msg::IngestStatus {
                refused: why.clone(),
                ..Default::default()
            }
        }
    };
    let (memtable_rows, memtable_bytes) = ingest.memory();
    let wal = ingest.wal_stats();
    ringscan_ipc::msg::IngestStatus {
        refused: String::new(),
        memtable_rows,
        memtable_bytes,
        commits: wal.commits,
        records: wal.records,
        syncs: wal.syncs,
        groups: wal.groups,
        group_records_max: wal.group_records_max,
        sync_us_total: wal.sync_us_total,
        bytes: wal.bytes,
    }
}

fn memory_status(shared: &Shared) -> MemoryStatus {
    let plan = shared.memory.plan();
    MemoryStatus {
        budget_bytes: plan.budget_bytes,
        metadata_cache_bytes: plan.metadata_cache_bytes,
        column_cache_bytes: plan.column_cache_bytes,
        ring_bytes: plan.ring_bytes,
        scan_bytes: plan.scan_bytes,
        max_scans: plan.max_scans,
        scan_bytes_in_use: shared.memory.used_bytes(),
        idle_connections_closed: shared.idle_closed.load(Ordering::Relaxed),
    }
}

pub(crate) fn metadata_cache_status(shared: &Shared) -> CacheStatus {
    let stats = shared.cache.stats();
    CacheStatus {
        hits: stats.hits,
        misses: stats.misses,
        evictions: stats.evictions,
        entries: stats.entries as u64,
        bytes: stats.bytes as u64,
        capacity_bytes: shared.cache.capacity_bytes() as u64,
        page_index_hits: stats.page_index_hits,
        page_index_misses: stats.page_index_misses,
        page_indexes: stats.page_indexes as u64,
    }
}

pub(crate) fn column_cache_status(shared: &Shared) -> ColumnCacheStatus {
    let columns = shared.cache.columns();
    let stats = columns.stats();
    ColumnCacheStatus {
        hits: stats.hits,
        misses: stats.misses,
        admitted: stats.admitted,
        evictions: stats.evictions,
        invalidated: stats.invalidated,
        entries: stats.entries as u64,
        bytes: stats.bytes as u64,
        capacity_bytes: columns.capacity_bytes() as u64,
    }
}
