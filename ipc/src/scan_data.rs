//! What a scan is asked and what it reports: the predicate tree the daemon prunes and
//! filters with, the summary of what a scan did, and the version of a file (what its
//! caches are keyed by). Plain data, shared by the
//! daemon's scan library (which knows nothing of frames or rings) and the control
//! protocol ([`msg`](crate::msg), which carries them and bounds them against hostile
//! peers: `Predicate::validate_tree`, `ScanSummary::validate`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A literal value in a predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Literal {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer (any width; compared after casting to the column's type).
    Int(i64),
    /// An unsigned integer above `i64::MAX`.
    UInt(u64),
    /// A float.
    Float(f64),
    /// A string.
    Utf8(String),
    /// A date, days since the Unix epoch.
    Date32(i32),
    /// A timestamp, microseconds since the Unix epoch (UTC).
    TimestampMicros(i64),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CmpOp {
    /// The operator as SQL writes it.
    pub fn sql(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::NotEq => "<>",
            Self::Lt => "<",
            Self::LtEq => "<=",
            Self::Gt => ">",
            Self::GtEq => ">=",
        }
    }

    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub fn flipped(self) -> Self {
        match self {
            Self::Lt => Self::Gt,
            Self::LtEq => Self::GtEq,
            Self::Gt => Self::Lt,
            Self::GtEq => Self::LtEq,
            Self::Eq | Self::NotEq => self,
        }
    }

    /// Whether `a op b` holds when `a.cmp(b)` is `ordering`.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        match self {
            Self::Eq => ordering.is_eq(),
            Self::NotEq => ordering.is_ne(),
            Self::Lt => ordering.is_lt(),
            Self::LtEq => ordering.is_le(),
            Self::Gt => ordering.is_gt(),
            Self::GtEq => ordering.is_ge(),
        }
    }
}

/// A leaf operand: a column or a literal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operand {
    /// A column of the table, by name.
    Column(String),
    /// A constant.
    Literal(Literal),
}

/// The predicate tree the daemon uses to prune and filter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Predicate {
    /// `left op right`.
    Compare {
        /// Left operand.
        left: Operand,
        /// Operator.
        op: CmpOp,
        /// Right operand.
        right: Operand,
    },
    /// All of these (an empty list is true).
    And(Vec<Predicate>),
    /// Any of these (an empty list is false).
    Or(Vec<Predicate>),
    /// Negation.
    Not(Box<Predicate>),
    /// `expr [NOT] IN (list)`.
    InList {
        /// The tested operand.
        expr: Operand,
        /// The values.
        list: Vec<Literal>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `expr [NOT] BETWEEN low AND high` (inclusive).
    Between {
        /// The tested operand.
        expr: Operand,
        /// Lower bound.
        low: Literal,
        /// Upper bound.
        high: Literal,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `expr IS [NOT] NULL`.
    IsNull {
        /// The tested operand.
        expr: Operand,
        /// `IS NOT NULL`.
        negated: bool,
    },
}

impl Predicate {
    /// `column op literal`, the shape the daemon can prune with.
    pub fn compare(column: &str, op: CmpOp, value: Literal) -> Self {
        Self::Compare {
            left: Operand::Column(column.to_owned()),
            op,
            right: Operand::Literal(value),
        }
    }

    /// Depth of the tree (a leaf is 1).
    pub fn depth(&self) -> usize {
        match self {
            Self::And(v) | Self::Or(v) => 1 + v.iter().map(Self::depth).max().unwrap_or(0),
            Self::Not(p) => 1 + p.depth(),
            _ => 1,
        }
    }

    /// The column names referenced, in order of first appearance, without duplicates.
    pub fn columns(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_columns(&mut out);
        out
    }

    fn collect_columns<'a>(&'a self, out: &mut Vec<&'a str>) {
        let mut add = |o: &'a Operand| {
            if let Operand::Column(c) = o {
                if !out.contains(&c.as_str()) {
                    out.push(c);
                }
            }
        };
        match self {
            Self::Compare { left, right, .. } => {
                add(left);
                add(right);
            }
            Self::InList { expr, .. } | Self::Between { expr, .. } | Self::IsNull { expr, .. } => {
                add(expr)
            }
            Self::And(v) | Self::Or(v) => v.iter().for_each(|p| p.collect_columns(out)),
            Self::Not(p) => p.collect_columns(out),
        }
    }
}

/// Time spent in the daemon's stages of one scan, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScanTimings {
    /// Whole scan, request to end of stream.
    pub total_us: u64,
    /// Listing files, reading footers, pruning.
    pub plan_us: u64,
    /// Waiting for reads.
    pub io_us: u64,
    /// Decompressing and decoding.
    pub decode_us: u64,
    /// Evaluating the predicate on decoded rows.
    pub filter_us: u64,
    /// Blocked on a full ring (back-pressure from the executor).
    pub ring_wait_us: u64,
    /// The scan's coordinator waiting for the next row group to be decoded.
    #[serde(default)]
    pub wait_us: u64,
}

/// What the daemon did for one scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanSummary {
    /// Protocol version ([`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)).
    pub version: u32,
    /// Files matching the source.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_considered: u64,
    /// Files skipped by partition values or statistics.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_pruned: u64,
    /// Row groups in the remaining files.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_considered: u64,
    /// Row groups skipped by statistics or bloom filters.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_pruned: u64,
    /// Pages skipped thanks to the page index.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pages_skipped: u64,
    /// Files skipped by their hive partition values (part of `files_pruned`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_pruned_by_partition: u64,
    /// Row groups skipped by column-chunk statistics (part of `row_groups_pruned`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_pruned_by_stats: u64,
    /// Row groups skipped by bloom filters (part of `row_groups_pruned`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_pruned_by_bloom: u64,
    /// Row groups none of whose pages survived the page index (part of
    /// `row_groups_pruned`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_pruned_by_page_index: u64,
    /// Row groups skipped by the scan's dynamic filter (part of `row_groups_pruned`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_pruned_by_dynamic_filter: u64,
    /// Pages of the predicate's columns that the page index covered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pages_considered: u64,
    /// Row groups whose statistics prove that every row passes the predicate: read
    /// whole (their output columns only), the predicate not evaluated.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_all_pass: u64,
    /// Row groups whose non-predicate columns were decoded only for passing rows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_late_materialized: u64,
    /// Reads (one row group's columns for one phase of a task) served decoded from the
    /// daemon's column cache: no IO, no decompression, no decoding.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub column_cache_hits: u64,
    /// Row groups of an unfiltered scan skipped whole by the request's offset (never
    /// read); also counted in `row_groups_pruned`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub row_groups_skipped_by_offset: u64,
    /// Rows the offset skipped (never sent through the ring).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows_skipped_by_offset: u64,
    /// Bytes read from storage (from object storage: the bytes needed, not the gaps
    /// between them that coalescing fetched too; see `store_bytes_fetched`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_read: u64,
    /// Of `bytes_read`, page index bytes (column and offset indexes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub page_index_bytes_read: u64,
    /// Of `bytes_read`, bloom filter bytes (a filter kept from an earlier scan is not
    /// read again).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bloom_filter_bytes_read: u64,
    /// Column indexes (one per row group and predicate column) read and decoded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub column_indexes_loaded: u64,
    /// Offset indexes (one per row group and read column) read and decoded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset_indexes_loaded: u64,
    /// Page indexes (either kind, per row group and column) served by the daemon's
    /// metadata cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub page_index_cache_hits: u64,
    /// Rows decoded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows_decoded: u64,
    /// Rows sent through the ring.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows_emitted: u64,
    /// Requests the scan sent to object storage (ranged GETs and HEADs; 0 for local
    /// files). Counted per bucket over the scan's time, so scans of one bucket running
    /// at once see each other's too.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub store_requests: u64,
    /// Bytes object storage sent the scan: the column data `bytes_read` counts (what
    /// the decoders needed), plus the gaps that coalescing fetched along, the footers and
    /// the page indexes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub store_bytes_fetched: u64,
    /// Time spent waiting on object storage, summed over the scan's threads
    /// (microseconds).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub store_wait_us: u64,
    /// Bytes object storage did not send because the daemon's on-disk range cache
    /// (`--cache-dir`) held them. Counted over the scan's time, as `store_requests`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub store_cache_hit_bytes: u64,
    /// Stage timings. On the wire as an array in declaration order (its derived
    /// reading takes that as well as an object), as the caches' figures.
    #[serde(default, serialize_with = "timings_figures")]
    pub timings: ScanTimings,
    /// The daemon's counters (perf events, cache hits...), as recorded by `profiling`
    /// (`null`, as a summary without them once had, reads as none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub counters: DaemonCounters,
}

/// A count left out of the wire form when zero (read back as zero): most of a point
/// lookup's counts are, and the host parsed ~30 zeros from every answer.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The daemon's counters of one scan ([`ScanSummary::counters`]): the perf events of
/// the threads that ran it, and its caches as they stand after it.
///
/// Typed rather than a JSON value: a host built this as maps of maps for every scan,
/// 7% of its CPU time per point lookup. The JSON is the same as the value's was.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonCounters {
    /// Perf events of the scan's threads over the scan (summed over a query's scans
    /// by the host; see `scans_counted`). On the wire in [`compact_sample`]'s form
    /// under `sample`; the full form under `scan`, as daemons of earlier builds wrote
    /// it, is read too.
    #[serde(
        default,
        rename = "sample",
        alias = "scan",
        with = "compact_sample",
        skip_serializing_if = "Option::is_none"
    )]
    pub scan: Option<ringscan_profiling::CounterSample>,
    /// Why no hardware event is counted, when none is.
    #[serde(default)]
    pub hardware_unavailable: Option<String>,
    /// Times the scan waited for room in its ring.
    #[serde(default)]
    pub ring_blocked_waits: u64,
    /// The daemon's footer and page index cache, after the scan. On the wire as an
    /// array of its figures in declaration order (which its derived reading takes as
    /// well as an object): a point lookup's answer parsed 17 keys for the two caches.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "metadata_cache_figures"
    )]
    pub metadata_cache: Option<crate::info::CacheStatus>,
    /// The daemon's decoded column cache, after the scan (on the wire as the above).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "column_cache_figures"
    )]
    pub column_cache: Option<crate::info::ColumnCacheStatus>,
    /// How many scans' samples `scan` sums (set by the host for a query's total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scans_counted: Option<u64>,
    /// Batches the host kept so long that the daemon waited on them and they were
    /// copied out of the ring (set by the host's client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_unpins: Option<Unpins>,
}

impl DaemonCounters {
    /// The counters as JSON for people and scripts (`--stats-json`): the sample and
    /// the caches as objects with named fields, not in their compact wire forms.
    pub fn readable(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.remove("sample");
            let mut put = |key: &str, v: serde_json::Result<serde_json::Value>| {
                if let Some(v) = v.ok().filter(|v| !v.is_null()) {
                    object.insert(key.to_owned(), v);
                }
            };
            put("scan", serde_json::to_value(&self.scan));
            put("metadata_cache", serde_json::to_value(&self.metadata_cache));
            put("column_cache", serde_json::to_value(&self.column_cache));
        }
        value
    }
}

/// A cache's figures as an array (see [`DaemonCounters::metadata_cache`]).
fn figures<S: serde::Serializer, T, F: Serialize>(
    cache: &Option<T>,
    serializer: S,
    of: impl Fn(&T) -> F,
) -> Result<S::Ok, S::Error> {
    cache.as_ref().map(of).serialize(serializer)
}

fn timings_figures<S: serde::Serializer>(
    t: &ScanTimings,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    [
        t.total_us,
        t.plan_us,
        t.io_us,
        t.decode_us,
        t.filter_us,
        t.ring_wait_us,
        t.wait_us,
    ]
    .serialize(serializer)
}

fn metadata_cache_figures<S: serde::Serializer>(
    cache: &Option<crate::info::CacheStatus>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    figures(cache, serializer, |c| {
        [
            c.hits,
            c.misses,
            c.evictions,
            c.entries,
            c.bytes,
            c.capacity_bytes,
            c.page_index_hits,
            c.page_index_misses,
            c.page_indexes,
        ]
    })
}

fn column_cache_figures<S: serde::Serializer>(
    cache: &Option<crate::info::ColumnCacheStatus>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    figures(cache, serializer, |c| {
        [
            c.hits,
            c.misses,
            c.admitted,
            c.evictions,
            c.invalidated,
            c.entries,
            c.bytes,
            c.capacity_bytes,
        ]
    })
}

/// [`DaemonCounters::scan`] on the wire: `[reason, measured, unmeasured]`, the
/// shared reason no hardware event is counted (or null), then
/// `[kind, value, raw, time_enabled_ns, time_running_ns, user_only]` per measured event
/// and `[kind, reason]` per other event (null: the shared reason), kinds as indexes
/// into [`CounterKind::ALL`](ringscan_profiling::CounterKind::ALL). Every point
/// lookup's answer carries a sample; as objects with named fields (~800 bytes) its
/// parsing was 15% of the host's instructions per lookup. Reads the full object form
/// too.
mod compact_sample {
    use std::fmt;

    use ringscan_profiling::{CounterKind, CounterSample, CounterValue};
    use serde::de::{self, MapAccess, SeqAccess, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    type Measured = (u8, u64, u64, u64, u64, bool);
    type Unmeasured = (u8, Option<String>);

    pub(super) fn serialize<S: Serializer>(
        sample: &Option<CounterSample>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let Some(sample) = sample else {
            return serializer.serialize_none();
        };
        // Eleven kinds: every index fits a u8.
        let index = |kind: CounterKind| u8::try_from(kind.index()).unwrap_or(u8::MAX);
        let shared = sample.hardware_unavailable.as_ref();
        let mut measured: Vec<Measured> = Vec::new();
        let mut unmeasured: Vec<Unmeasured> = Vec::new();
        for v in &sample.values {
            match v.value {
                Some(value) if v.measured => measured.push((
                    index(v.kind),
                    value,
                    v.raw,
                    v.time_enabled_ns,
                    v.time_running_ns,
                    v.user_only,
                )),
                _ => unmeasured.push((
                    index(v.kind),
                    v.unavailable.clone().filter(|r| Some(r) != shared),
                )),
            }
        }
        (shared, measured, unmeasured).serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<CounterSample>, D::Error> {
        deserializer.deserialize_option(OptionVisitor)
    }

    struct OptionVisitor;

    impl<'de> Visitor<'de> for OptionVisitor {
        type Value = Option<CounterSample>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a counter sample or null")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(SampleVisitor).map(Some)
        }
    }

    struct SampleVisitor;

    impl<'de> Visitor<'de> for SampleVisitor {
        type Value = CounterSample;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a counter sample: [reason, measured, unmeasured] or an object")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CounterSample, A::Error> {
            CounterSample::deserialize(de::value::MapAccessDeserializer::new(map))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CounterSample, A::Error> {
            let missing = |i| de::Error::invalid_length(i, &"3 elements");
            let shared: Option<String> = seq.next_element()?.ok_or_else(|| missing(0))?;
            let measured: Vec<Measured> = seq.next_element()?.ok_or_else(|| missing(1))?;
            let unmeasured: Vec<Unmeasured> = seq.next_element()?.ok_or_else(|| missing(2))?;
            if seq.next_element::<de::IgnoredAny>()?.is_some() {
                return Err(de::Error::invalid_length(4, &"3 elements"));
            }
            let mut slots: [Option<CounterValue>; CounterKind::ALL.len()] = Default::default();
            let mut place = |i: u8, value: CounterValue| -> Result<(), A::Error> {
                let slot = slots
                    .get_mut(usize::from(i))
                    .ok_or_else(|| de::Error::custom(format!("counter kind {i} out of range")))?;
                if slot.replace(value).is_some() {
                    return Err(de::Error::custom(format!("counter kind {i} given twice")));
                }
                Ok(())
            };
            let kind = |i: u8| CounterKind::ALL.get(usize::from(i)).copied();
            for (i, value, raw, time_enabled_ns, time_running_ns, user_only) in measured {
                let Some(kind) = kind(i) else {
                    return Err(de::Error::custom(format!("counter kind {i} out of range")));
                };
                place(
                    i,
                    CounterValue {
                        kind,
                        measured: true,
                        value: Some(value),
                        raw,
                        time_enabled_ns,
                        time_running_ns,
                        unavailable: None,
                        user_only,
                    },
                )?;
            }
            for (i, reason) in unmeasured {
                let Some(kind) = kind(i) else {
                    return Err(de::Error::custom(format!("counter kind {i} out of range")));
                };
                place(
                    i,
                    CounterValue::unmeasured(kind, reason.or_else(|| shared.clone())),
                )?;
            }
            Ok(CounterSample {
                values: slots.into_iter().flatten().collect(),
                hardware_unavailable: shared,
            })
        }
    }
}

/// Batches copied out of a ring for the daemon to go on (`Consumer::unpin`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unpins {
    /// Batches copied.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Default for ScanSummary {
    fn default() -> Self {
        Self {
            version: crate::PROTOCOL_VERSION,
            files_considered: 0,
            files_pruned: 0,
            row_groups_considered: 0,
            row_groups_pruned: 0,
            pages_skipped: 0,
            files_pruned_by_partition: 0,
            row_groups_pruned_by_stats: 0,
            row_groups_pruned_by_bloom: 0,
            row_groups_pruned_by_page_index: 0,
            row_groups_pruned_by_dynamic_filter: 0,
            pages_considered: 0,
            row_groups_all_pass: 0,
            row_groups_late_materialized: 0,
            column_cache_hits: 0,
            row_groups_skipped_by_offset: 0,
            rows_skipped_by_offset: 0,
            bytes_read: 0,
            page_index_bytes_read: 0,
            bloom_filter_bytes_read: 0,
            column_indexes_loaded: 0,
            offset_indexes_loaded: 0,
            page_index_cache_hits: 0,
            rows_decoded: 0,
            rows_emitted: 0,
            store_requests: 0,
            store_bytes_fetched: 0,
            store_wait_us: 0,
            store_cache_hit_bytes: 0,
            timings: ScanTimings::default(),
            counters: DaemonCounters::default(),
        }
    }
}

impl ScanSummary {
    /// Adds another scan's whole summary to this one: planning counts (files, row
    /// groups, what pruned them) and work alike. For totals over separate scans.
    pub fn absorb(&mut self, other: &ScanSummary) {
        self.files_considered += other.files_considered;
        self.files_pruned += other.files_pruned;
        self.files_pruned_by_partition += other.files_pruned_by_partition;
        self.row_groups_considered += other.row_groups_considered;
        self.row_groups_pruned += other.row_groups_pruned;
        self.row_groups_pruned_by_stats += other.row_groups_pruned_by_stats;
        self.row_groups_pruned_by_bloom += other.row_groups_pruned_by_bloom;
        self.row_groups_pruned_by_page_index += other.row_groups_pruned_by_page_index;
        self.row_groups_pruned_by_dynamic_filter += other.row_groups_pruned_by_dynamic_filter;
        self.row_groups_skipped_by_offset += other.row_groups_skipped_by_offset;
        self.row_groups_all_pass += other.row_groups_all_pass;
        self.absorb_work(other);
    }

    /// Adds the work of `earlier`, a scan that ran before this one for the same query
    /// (a top-k's first pass over its sort key): bytes, pages, rows and times are
    /// summed; what the source is (files and row groups considered, and what pruning
    /// made of them) stays this scan's.
    pub fn absorb_work(&mut self, earlier: &ScanSummary) {
        self.pages_considered += earlier.pages_considered;
        self.pages_skipped += earlier.pages_skipped;
        self.row_groups_late_materialized += earlier.row_groups_late_materialized;
        self.column_cache_hits += earlier.column_cache_hits;
        self.rows_skipped_by_offset += earlier.rows_skipped_by_offset;
        self.bytes_read += earlier.bytes_read;
        self.page_index_bytes_read += earlier.page_index_bytes_read;
        self.bloom_filter_bytes_read += earlier.bloom_filter_bytes_read;
        self.column_indexes_loaded += earlier.column_indexes_loaded;
        self.offset_indexes_loaded += earlier.offset_indexes_loaded;
        self.page_index_cache_hits += earlier.page_index_cache_hits;
        self.rows_decoded += earlier.rows_decoded;
        self.rows_emitted += earlier.rows_emitted;
        self.store_requests += earlier.store_requests;
        self.store_bytes_fetched += earlier.store_bytes_fetched;
        self.store_wait_us += earlier.store_wait_us;
        self.store_cache_hit_bytes += earlier.store_cache_hit_bytes;
        let (t, e) = (&mut self.timings, &earlier.timings);
        t.total_us += e.total_us;
        t.plan_us += e.plan_us;
        t.io_us += e.io_us;
        t.decode_us += e.decode_us;
        t.filter_us += e.filter_us;
        t.ring_wait_us += e.ring_wait_us;
        t.wait_us += e.wait_us;
    }
}

/// One file or directory of a table as the daemon saw it: stat it again to learn
/// whether it changed. Size and mtime alone miss a same-size rewrite that keeps its
/// mtime (`cp -p`, `rsync -t`, `tar x`); the device and inode tell a replaced file
/// apart, and the ctime (which no user call can set back) an overwrite in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileVersion {
    /// Relative to the data directory.
    pub path: PathBuf,
    /// `st_size`.
    pub size_bytes: u64,
    /// `st_mtime`, nanoseconds since the Unix epoch (negative before it).
    pub modified_ns: i128,
    /// `st_dev`.
    #[serde(default)]
    pub device: u64,
    /// `st_ino`.
    #[serde(default)]
    pub inode: u64,
    /// `st_ctime`, nanoseconds since the Unix epoch.
    #[serde(default)]
    pub changed_ns: i128,
}

impl FileVersion {
    /// The version of `path` (relative to the data directory) from its metadata.
    pub fn from_metadata(path: PathBuf, meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let modified_ns = meta
            .modified()
            .ok()
            .map(|t| match t.duration_since(std::time::UNIX_EPOCH) {
                Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
                Err(e) => -i128::try_from(e.duration().as_nanos()).unwrap_or(i128::MAX),
            })
            .unwrap_or(0);
        Self {
            path,
            size_bytes: meta.len(),
            modified_ns,
            device: meta.dev(),
            inode: meta.ino(),
            changed_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    /// Whether `self` and `other` are the same bytes of the same file as far as `stat`
    /// can tell (the path aside).
    pub fn same_contents(&self, other: &Self) -> bool {
        (
            self.size_bytes,
            self.modified_ns,
            self.device,
            self.inode,
            self.changed_ns,
        ) == (
            other.size_bytes,
            other.modified_ns,
            other.device,
            other.inode,
            other.changed_ns,
        )
    }
}
