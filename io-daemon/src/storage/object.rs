//! Objects in S3-compatible storage (`s3://bucket/key`), Google Cloud Storage
//! (`gs://bucket/key`) and Azure Blob Storage (`az://container/key`) behind
//! [`ByteRangeSource`]: ranged GETs through the `object_store` crate ([`Scheme`]).
//!
//! - One [`ObjectRoot`] per bucket and process ([`object_root`]), configured from the
//!   standard environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
//!   `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ALLOW_HTTP`) and
//!   the AWS profile (`AWS_PROFILE`, `~/.aws/credentials`, `~/.aws/config`:
//!   [`super::aws_profile`]); for `gs://` and `az://` from the `GOOGLE_*` and `AZURE_*`
//!   variables their clients read. Each root has its own small tokio runtime: the
//!   scan's threads are plain threads and block on it.
//! - Requests are retried with exponential backoff on 5xx answers, timeouts and broken
//!   connections ([`RETRY`]), each bounded in time ([`REQUEST_TIMEOUT`]).
//! - An object's version is its size and ETag (its last-modified time where the store
//!   gives no ETag), taken from the listing that found it. Every GET carries
//!   `If-Match: <ETag>`, so an object rewritten during a scan fails the scan ("changed
//!   while being read") instead of mixing two versions' bytes.
//! - [`ObjectSource::read_ranges`] splits and fetches ranges concurrently
//!   ([`MAX_CONCURRENT_REQUESTS`] in flight, at most [`MAX_REQUEST_BYTES`] each);
//!   [`ObjectSource::start_reads`] starts them without waiting (the scan reads row
//!   groups ahead of its decoders) and hands back a [`PendingReads`] whose wait gives up
//!   when the scan is cancelled, and whose drop aborts the requests still in flight; and
//!   [`ObjectSource::coalesce_gap`] asks callers to merge ranges closer than
//!   [`COALESCE_GAP_BYTES`]: a request costs more than a few kilobytes, but a gap of a
//!   whole column chunk is bytes the scan does not need (with the concurrency, more
//!   requests cost little time).
//!
//! Every error names the object (`s3://bucket/key`) and says why in words: no such
//! bucket, no such object, access denied, unreachable endpoint, changed while read.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path as Location;
use object_store::{
    BackoffConfig, ClientConfigKey, GetOptions, GetRange, ObjectStore, ObjectStoreExt, RetryConfig,
};

use super::aws_profile::AwsEnvironment;
use super::range_cache::{ObjectKey, Piece, RangeCache};
use super::ByteRangeSource;

/// The URL scheme of S3-compatible object storage.
pub const S3_SCHEME: &str = "s3://";

/// The object stores a root URL can name: the three the `object_store` crate's `aws`,
/// `gcp` and `azure` features give (together 16 s more of its compile, no new crates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `s3://bucket/key`: S3 and S3-compatible stores, configured by `AWS_*` variables
    /// and AWS profiles.
    S3,
    /// `gs://bucket/key`: Google Cloud Storage, configured by `GOOGLE_*` variables
    /// (`GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_APPLICATION_CREDENTIALS`, `GOOGLE_BASE_URL`...).
    Gcs,
    /// `az://container/key`: Azure Blob Storage, configured by `AZURE_*` variables
    /// (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`...).
    Azure,
}

impl Scheme {
    /// Every scheme.
    pub const ALL: [Self; 3] = [Self::S3, Self::Gcs, Self::Azure];

    /// `s3://`, `gs://` or `az://`.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::S3 => S3_SCHEME,
            Self::Gcs => "gs://",
            Self::Azure => "az://",
        }
    }

    /// The scheme `url` starts with.
    pub fn of(url: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| url.starts_with(s.prefix()))
    }

    /// The prefix of the environment variables that configure its client.
    fn variable_prefix(self) -> &'static str {
        match self {
            Self::S3 => "AWS_",
            Self::Gcs => "GOOGLE_",
            Self::Azure => "AZURE_",
        }
    }

    /// What the store calls a bucket.
    fn bucket_word(self) -> &'static str {
        match self {
            Self::S3 | Self::Gcs => "bucket",
            Self::Azure => "container",
        }
    }

    /// What to check when the store refuses the credentials.
    fn credentials_hint(self) -> &'static str {
        match self {
            Self::S3 => "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",
            Self::Gcs => "check GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS",
            Self::Azure => "check AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
        }
    }
}
/// Ranges closer than this are fetched as one request. At 1 MiB, the gaps between the
/// column chunks a scan needs (other columns' chunks of ~100 KiB each) were merged in:
/// the 1M-row ohlcv files fetched 6.9 MiB for a two-column scan that reads 1.6 MiB from
/// local files, and 2.6 MiB for a selective query that reads 524 KiB.
pub const COALESCE_GAP_BYTES: u64 = 64 << 10;
/// The largest single ranged GET: larger ranges are split, and the parts fetched
/// concurrently.
pub const MAX_REQUEST_BYTES: u64 = 8 << 20;
/// Requests in flight at once for one [`ObjectSource::read_ranges`] call.
pub const MAX_CONCURRENT_REQUESTS: usize = 16;
/// How many trailing bytes the first read of a footer fetches: most footers fit, so one
/// GET gets the length, the magic and the metadata, and with them the page indexes
/// that writers put just before the footer (kept for the scans: a 35 MB ohlcv object
/// of 39 row groups has 118 KB of them and a 33 KB footer). At 64 KiB, a filtered scan
/// made two more GETs per object for its page indexes; on a loopback S3 server each
/// request costs as much as a few MiB of transfer.
pub const FOOTER_HINT_BYTES: u64 = 256 << 10;
/// One request's limit (connect, send, answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Retries of a failed request: 5xx answers, timeouts, broken connections.
pub const RETRY: RetrySettings = RetrySettings {
    max_retries: 4,
    first_backoff: Duration::from_millis(100),
    max_backoff: Duration::from_secs(5),
    total: Duration::from_secs(60),
};
/// Objects whose versions a root remembers from its listings (cleared when full).
const MAX_KNOWN_OBJECTS: usize = 1 << 20;
/// How often a thread waiting on requests asks whether its scan was cancelled.
const STOP_POLL: Duration = Duration::from_millis(10);

/// How failed requests are retried (see [`RETRY`]).
#[derive(Debug, Clone, Copy)]
pub struct RetrySettings {
    /// Retries after the first attempt.
    pub max_retries: usize,
    /// The first wait; each later one doubles, up to `max_backoff`.
    pub first_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// No retry starts this long after the first attempt.
    pub total: Duration,
}

/// What can go wrong with object storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// Not an `s3://`, `gs://` or `az://bucket[/prefix]` URL.
    #[error("{url:?} is not an object-storage URL: {reason}")]
    BadUrl {
        /// The text.
        url: String,
        /// Why.
        reason: &'static str,
    },
    /// The client could not be configured (environment variables).
    #[error("cannot configure the object-store client for {url}: {reason}")]
    Config {
        /// The bucket's URL.
        url: String,
        /// The client's complaint.
        reason: String,
    },
    /// A request failed (after its retries).
    #[error("{url}: {reason}")]
    Request {
        /// The object or prefix.
        url: String,
        /// What failed, in words.
        reason: String,
        /// What kind of failure.
        failure: Failure,
    },
}

/// What kind of failure a [`StorageError::Request`] was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The bucket does not exist.
    NoSuchBucket,
    /// The object does not exist.
    NoSuchObject,
    /// The credentials were refused.
    AccessDenied,
    /// The object is not the version listed (rewritten, or shorter than listed).
    Changed,
    /// The caller stopped waiting (its scan was cancelled); the requests were aborted.
    Cancelled,
    /// Anything else: unreachable, 5xx after the retries, too many objects...
    Other,
}

impl StorageError {
    /// As an `io::Error` (kind `NotFound` for a missing object), for the byte-range
    /// interface, whose callers name the object: a failed request's message is only
    /// its reason.
    pub fn into_io(self) -> io::Error {
        match self {
            Self::Request {
                reason, failure, ..
            } => {
                let kind = match failure {
                    Failure::NoSuchBucket | Failure::NoSuchObject => io::ErrorKind::NotFound,
                    Failure::Cancelled => io::ErrorKind::Interrupted,
                    _ => io::ErrorKind::Other,
                };
                io::Error::new(kind, reason)
            }
            other => io::Error::other(other.to_string()),
        }
    }
}

/// Whether `path` names an object-storage location (`s3://...`, `gs://...`, `az://...`).
pub fn is_object_url(path: &Path) -> bool {
    path.to_str().and_then(Scheme::of).is_some()
}

/// `s3://bucket/key` taken apart: the scheme, the bucket (the container, for `az://`)
/// and the key (empty for the bucket itself), without leading, trailing or doubled
/// slashes.
pub fn split_url(url: &str) -> Result<(Scheme, &str, String), StorageError> {
    let bad = |reason| StorageError::BadUrl {
        url: url.to_owned(),
        reason,
    };
    let scheme =
        Scheme::of(url).ok_or_else(|| bad("only s3://, gs:// and az:// URLs are supported"))?;
    let rest = &url[scheme.prefix().len()..];
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("no bucket name"));
    }
    if !bucket
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '_'))
        || bucket.len() > 63
    {
        return Err(bad(
            "a bucket name has at most 63 lowercase letters, digits, '-', '.' and '_'",
        ));
    }
    let key: Vec<&str> = key.split('/').filter(|c| !c.is_empty()).collect();
    if key.iter().any(|c| *c == "." || *c == "..") {
        return Err(bad("'.' and '..' are not key components"));
    }
    Ok((scheme, bucket, key.join("/")))
}

/// `url` with its key normalized (`s3://bucket/a/b`, no trailing slash).
pub fn normalize_url(url: &str) -> Result<String, StorageError> {
    let (scheme, bucket, key) = split_url(url)?;
    let prefix = scheme.prefix();
    Ok(if key.is_empty() {
        format!("{prefix}{bucket}")
    } else {
        format!("{prefix}{bucket}/{key}")
    })
}

/// The on-disk cache of fetched ranges every [`ObjectRoot`] made after this call reads
/// through (the daemon's `--cache-dir`). Set once, before the first root; a second call
/// is refused (the cache is given back).
pub fn set_default_range_cache(cache: Arc<RangeCache>) -> Result<(), Arc<RangeCache>> {
    DEFAULT_RANGE_CACHE.set(cache)
}

static DEFAULT_RANGE_CACHE: OnceLock<Arc<RangeCache>> = OnceLock::new();

/// The client of `url`'s bucket: made from the environment on first use, then shared by
/// every scan of this process.
pub fn object_root(url: &str) -> Result<Arc<ObjectRoot>, StorageError> {
    static ROOTS: OnceLock<Mutex<HashMap<String, Arc<ObjectRoot>>>> = OnceLock::new();
    let (scheme, bucket, _) = split_url(url)?;
    let key = format!("{}{bucket}", scheme.prefix());
    let mut roots = ROOTS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(root) = roots.get(&key) {
        return Ok(Arc::clone(root));
    }
    let root = Arc::new(ObjectRoot::from_env(scheme, bucket)?);
    roots.insert(key, Arc::clone(&root));
    Ok(root)
}

/// One object as a listing or a HEAD request saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// Its size in bytes.
    pub size: u64,
    /// Its ETag (quoted, as the store gives it), if the store gives one.
    pub e_tag: Option<String>,
    /// Its last-modified time, nanoseconds since the Unix epoch.
    pub modified_ns: i128,
}

impl ObjectVersion {
    /// Whether `self` and `other` are the same bytes: same size, and the same ETag
    /// (the same last-modified time where either has none).
    pub fn same_contents(&self, other: &Self) -> bool {
        self.size == other.size
            && match (&self.e_tag, &other.e_tag) {
                (Some(a), Some(b)) => a == b,
                _ => self.modified_ns == other.modified_ns,
            }
    }

    /// A stable 64-bit digest of the ETag (FNV-1a; 0 without one): where a file's
    /// identity is a number (an inode), an object's is this.
    pub fn e_tag_digest(&self) -> u64 {
        self.e_tag.as_deref().map_or(0, |tag| {
            tag.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        })
    }
}

/// An object found by [`ObjectRoot::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// Its key relative to the listed prefix (`/`-separated).
    pub relative: String,
    /// Its version.
    pub version: ObjectVersion,
}

/// What a root's requests cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Requests sent (GET, HEAD, LIST pages), retries not counted.
    pub requests: u64,
    /// Bytes received in GET answers.
    pub bytes_fetched: u64,
    /// Time callers waited on the store, summed over callers (microseconds).
    pub wait_us: u64,
    /// Bytes read from the on-disk range cache (`--cache-dir`) instead of fetched: the
    /// cache's count, which the roots sharing it add to alike.
    pub range_cache_hit_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    bytes_fetched: AtomicU64,
    wait_us: AtomicU64,
    /// A moving average of one ranged GET's time, first byte asked to last byte
    /// received (microseconds; 0 before the first).
    latency_us: AtomicU64,
}

impl Counters {
    /// Folds one GET's time into the moving average (weight 1/8: a few requests move it,
    /// one outlier does not).
    fn add_latency(&self, since: Instant) {
        let sample = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
        // Relaxed: an estimate; concurrent updates may lose one sample, never tear.
        let old = self.latency_us.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.latency_us.store(new.max(1), Ordering::Relaxed);
    }
}

/// The client of one bucket, and the runtime its requests run on.
pub struct ObjectRoot {
    scheme: Scheme,
    bucket: String,
    store: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
    counters: Arc<Counters>,
    /// Versions of the objects the latest listings found, by URL: a scan opening one
    /// needs no HEAD request.
    known: Mutex<HashMap<String, ObjectVersion>>,
    /// Fetched ranges kept on disk (`--cache-dir`), if any.
    range_cache: Option<Arc<RangeCache>>,
}

impl fmt::Debug for ObjectRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectRoot")
            .field("scheme", &self.scheme)
            .field("bucket", &self.bucket)
            .field("store", &self.store.to_string())
            .finish_non_exhaustive()
    }
}

impl ObjectRoot {
    /// The client of `bucket` in `scheme`'s store, configured from the environment:
    /// for S3 the `AWS_*` variables and the AWS profile they name, if any
    /// ([`AwsEnvironment::s3_settings`]); for the others their `GOOGLE_*` or `AZURE_*`
    /// variables.
    pub fn from_env(scheme: Scheme, bucket: &str) -> Result<Self, StorageError> {
        let pairs =
            match scheme {
                Scheme::S3 => AwsEnvironment::from_process().s3_settings().map_err(|e| {
                    StorageError::Config {
                        url: format!("{S3_SCHEME}{bucket}"),
                        reason: e.to_string(),
                    }
                })?,
                Scheme::Gcs | Scheme::Azure => std::env::vars()
                    .filter(|(key, _)| key.starts_with(scheme.variable_prefix()))
                    .map(|(key, value)| (key.to_ascii_lowercase(), value))
                    .collect(),
            };
        Self::with_scheme_settings(
            scheme,
            bucket,
            pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )
    }

    /// The S3 client of `bucket` configured by `settings`: `object_store`'s S3 keys
    /// (`aws_endpoint`, `aws_access_key_id`, `aws_allow_http`...); unknown keys are
    /// ignored, as the environment's are.
    pub fn with_settings<'s>(
        bucket: &str,
        settings: impl IntoIterator<Item = (&'s str, &'s str)>,
    ) -> Result<Self, StorageError> {
        Self::with_scheme_settings(Scheme::S3, bucket, settings)
    }

    /// The client of `bucket` in `scheme`'s store configured by `settings`:
    /// `object_store`'s keys of that store (`aws_endpoint`, `google_base_url`,
    /// `azure_storage_account_name`...); unknown keys are ignored, as the environment's
    /// are. Building makes no request.
    pub fn with_scheme_settings<'s>(
        scheme: Scheme,
        bucket: &str,
        settings: impl IntoIterator<Item = (&'s str, &'s str)>,
    ) -> Result<Self, StorageError> {
        let url = format!("{}{bucket}", scheme.prefix());
        let config_error = |reason: String| StorageError::Config {
            url: url.clone(),
            reason,
        };
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: RETRY.first_backoff,
                max_backoff: RETRY.max_backoff,
                base: 2.0,
            },
            max_retries: RETRY.max_retries,
            retry_timeout: RETRY.total,
        };
        let timeout = format!("{}ms", REQUEST_TIMEOUT.as_millis());
        // Each store's builder takes the same steps: its keys from `settings`, the
        // bucket, the retries and the timeouts (after the settings: they are ours). The
        // builders share no trait, hence a macro.
        macro_rules! build {
            ($builder:ty, $key:ident, $bucket:ident) => {{
                let mut builder = <$builder>::new();
                for (key, value) in settings {
                    if let Ok(key) = key.parse::<$key>() {
                        builder = builder.with_config(key, value);
                    }
                }
                let store = builder
                    .$bucket(bucket)
                    .with_retry(retry)
                    .with_config($key::Client(ClientConfigKey::Timeout), timeout)
                    .with_config($key::Client(ClientConfigKey::ConnectTimeout), "5s")
                    .build()
                    .map_err(|e| config_error(e.to_string()))?;
                Arc::new(store) as Arc<dyn ObjectStore>
            }};
        }
        let store: Arc<dyn ObjectStore> = match scheme {
            Scheme::S3 => build!(AmazonS3Builder, AmazonS3ConfigKey, with_bucket_name),
            Scheme::Gcs => build!(GoogleCloudStorageBuilder, GoogleConfigKey, with_bucket_name),
            Scheme::Azure => build!(MicrosoftAzureBuilder, AzureConfigKey, with_container_name),
        };
        // Two threads drive the HTTP connections; the scan's own threads wait on them.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ringscan-store")
            .enable_all()
            .build()
            .map_err(|e| config_error(format!("cannot start its runtime: {e}")))?;
        Ok(Self {
            scheme,
            bucket: bucket.to_owned(),
            store,
            runtime,
            counters: Arc::default(),
            known: Mutex::default(),
            range_cache: DEFAULT_RANGE_CACHE.get().cloned(),
        })
    }

    /// This root with `cache` for fetched ranges instead of the process's default
    /// ([`set_default_range_cache`]); `None`: every read is a GET.
    pub fn with_range_cache(mut self, cache: Option<Arc<RangeCache>>) -> Self {
        self.range_cache = cache;
        self
    }

    /// The on-disk cache of fetched ranges this root reads through, if any.
    pub fn range_cache(&self) -> Option<&Arc<RangeCache>> {
        self.range_cache.as_ref()
    }

    /// The bucket's URL, `s3://bucket` (`gs://bucket`, `az://container`).
    pub fn url(&self) -> String {
        format!("{}{}", self.scheme.prefix(), self.bucket)
    }

    /// What this root's requests cost so far.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            requests: self.counters.requests.load(Ordering::Relaxed),
            bytes_fetched: self.counters.bytes_fetched.load(Ordering::Relaxed),
            wait_us: self.counters.wait_us.load(Ordering::Relaxed),
            range_cache_hit_bytes: self.range_cache.as_ref().map_or(0, |c| c.stats().hit_bytes),
        }
    }

    /// A moving average of the time one ranged GET took lately, from asking to the last
    /// byte (`None` before the first): how far ahead a scan must read to hide it.
    pub fn request_latency(&self) -> Option<Duration> {
        match self.counters.latency_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// Runs `future` on this root's runtime and waits for it (from any thread, inside
    /// a runtime or not).
    fn block_on<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, StorageError> {
        let started = Instant::now();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        let result = rx.recv().map_err(|_| StorageError::Request {
            url: self.url(),
            reason: "the request was dropped (the client's runtime stopped)".to_owned(),
            failure: Failure::Other,
        });
        let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.counters.wait_us.fetch_add(waited, Ordering::Relaxed);
        result
    }

    fn location(&self, url: &str) -> Result<Location, StorageError> {
        let (scheme, bucket, key) = split_url(url)?;
        if scheme != self.scheme || bucket != self.bucket {
            return Err(StorageError::BadUrl {
                url: url.to_owned(),
                reason: "not in this root's bucket",
            });
        }
        Location::parse(&key).map_err(|_| StorageError::BadUrl {
            url: url.to_owned(),
            reason: "not a valid object key",
        })
    }

    /// Every object under `url` (a prefix: `s3://bucket/a/b` lists `a/b/...`), keys
    /// relative to it, sorted as a directory walk visits them (component by component).
    /// At most `max_objects`; more is an error.
    pub fn list(&self, url: &str, max_objects: usize) -> Result<Vec<ListedObject>, StorageError> {
        let prefix = self.location(url)?;
        let store = Arc::clone(&self.store);
        let listed = prefix.clone();
        let metas = self.block_on(async move {
            let prefix = (!listed.as_ref().is_empty()).then_some(&listed);
            store
                .list(prefix)
                .take(max_objects.saturating_add(1))
                .try_collect::<Vec<_>>()
                .await
        })?;
        let metas = metas.map_err(|e| request_error(url, "listing", &e))?;
        // A LIST page holds up to 1,000 keys.
        let pages = metas.len() / 1000 + 1;
        self.counters
            .requests
            .fetch_add(pages as u64, Ordering::Relaxed);
        if metas.len() > max_objects {
            return Err(StorageError::Request {
                url: url.to_owned(),
                reason: format!("more than {max_objects} objects under the prefix"),
                failure: Failure::Other,
            });
        }
        let base = prefix.as_ref();
        let mut objects: Vec<ListedObject> = metas
            .into_iter()
            .filter_map(|meta| {
                let key = meta.location.as_ref();
                let relative = if base.is_empty() {
                    key
                } else {
                    key.strip_prefix(base)?.strip_prefix('/')?
                };
                Some(ListedObject {
                    relative: relative.to_owned(),
                    version: version_of(&meta),
                })
            })
            .collect();
        objects.sort_by(|a, b| a.relative.split('/').cmp(b.relative.split('/')));
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() + objects.len() > MAX_KNOWN_OBJECTS {
            known.clear();
        }
        for object in &objects {
            let full = if base.is_empty() {
                format!("{}/{}", self.url(), object.relative)
            } else {
                format!("{}/{base}/{}", self.url(), object.relative)
            };
            known.insert(full, object.version.clone());
        }
        Ok(objects)
    }

    /// The names directly below `url` that have objects under them ("directories").
    pub fn child_prefixes(&self, url: &str) -> Result<Vec<String>, StorageError> {
        let prefix = self.location(url)?;
        let store = Arc::clone(&self.store);
        let listed = prefix.clone();
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let result = self.block_on(async move {
            let prefix = (!listed.as_ref().is_empty()).then_some(&listed);
            store.list_with_delimiter(prefix).await
        })?;
        let result = result.map_err(|e| request_error(url, "listing", &e))?;
        Ok(result
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_owned))
            .collect())
    }

    /// The version of the object at `url`: as the latest listing found it, else from a
    /// HEAD request.
    pub fn version(&self, url: &str) -> Result<ObjectVersion, StorageError> {
        let known = self
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(url)
            .cloned();
        if let Some(version) = known {
            return Ok(version);
        }
        self.head(url)
    }

    /// The version of the object at `url`, asked of the store (and remembered, as a
    /// listing's are).
    pub fn head(&self, url: &str) -> Result<ObjectVersion, StorageError> {
        let location = self.location(url)?;
        let store = Arc::clone(&self.store);
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let meta = self.block_on(async move { store.head(&location).await })?;
        let meta = meta.map_err(|e| request_error(url, "reading", &e))?;
        let version = version_of(&meta);
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= MAX_KNOWN_OBJECTS {
            known.clear();
        }
        known.insert(url.to_owned(), version.clone());
        Ok(version)
    }

    /// The object at `url` for byte-range reads, at its current version.
    pub fn open(self: &Arc<Self>, url: &str) -> Result<ObjectSource, StorageError> {
        let version = self.version(url)?;
        Ok(ObjectSource {
            root: Arc::clone(self),
            location: self.location(url)?,
            url: PathBuf::from(url),
            cache_key: ObjectKey::new(url, &version),
            version,
        })
    }

    /// Starts reading `ranges` of `object`: what the range cache holds is read from
    /// disk, the rest split into parts of at most [`MAX_REQUEST_BYTES`] and fetched,
    /// [`MAX_CONCURRENT_REQUESTS`] in flight, on this root's runtime (and the parts
    /// fetched kept in the cache once answered). The requests run until they end or
    /// the [`PendingReads`] is dropped.
    fn start_ranges(&self, object: &ObjectSource, ranges: Vec<Range<u64>>) -> PendingReads {
        let store = Arc::clone(&self.store);
        let counters = Arc::clone(&self.counters);
        let location = object.location.clone();
        let e_tag = object.version.e_tag.clone();
        let text = object.url.display().to_string();
        let cache = self
            .range_cache
            .clone()
            .map(|c| (c, object.cache_key.clone()));
        let asked = ranges.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let task = self.runtime.spawn(async move {
            let plan = match &cache {
                Some((cache, key)) => {
                    let (cache, key, asked) = (Arc::clone(cache), key.clone(), ranges.clone());
                    // Disk reads: off the runtime's threads, which drive the requests.
                    tokio::task::spawn_blocking(move || {
                        asked
                            .iter()
                            .map(|r| cache.lookup(&key, r.clone()))
                            .collect()
                    })
                    .await
                    .unwrap_or_else(|_| missing_plan(&ranges))
                }
                None => missing_plan(&ranges),
            };
            let parts = split_parts(&plan);
            let answers = futures::stream::iter(parts.clone())
                .map(|range| {
                    let options = GetOptions {
                        if_match: e_tag.clone(),
                        range: Some(GetRange::Bounded(range)),
                        ..GetOptions::default()
                    };
                    let (store, location) = (Arc::clone(&store), location.clone());
                    let counters = Arc::clone(&counters);
                    async move {
                        // Counted when sent: an aborted request was still made.
                        counters.requests.fetch_add(1, Ordering::Relaxed);
                        let started = Instant::now();
                        let bytes = store.get_opts(&location, options).await?.bytes().await?;
                        counters.add_latency(started);
                        counters
                            .bytes_fetched
                            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        Ok::<Bytes, object_store::Error>(bytes)
                    }
                })
                .buffered(MAX_CONCURRENT_REQUESTS)
                .try_collect::<Vec<Bytes>>()
                .await
                .map_err(|e| request_error(&text, "reading", &e))
                .and_then(|answers| check_parts(&text, &parts, answers));
            let kept = match (&answers, cache) {
                (Ok(answers), Some(cache)) => Some((cache, answers.clone())),
                _ => None,
            };
            let _ = tx.send(answers.map(|answers| assemble(plan, answers)));
            if let Some(((cache, key), answers)) = kept {
                let _ = tokio::task::spawn_blocking(move || {
                    for (range, bytes) in parts.into_iter().zip(answers) {
                        cache.store(&key, range, &bytes);
                    }
                })
                .await;
            }
        });
        PendingReads {
            url: object.url.clone(),
            ranges: asked,
            rx,
            task: task.abort_handle(),
            counters: Arc::clone(&self.counters),
        }
    }
}

/// Every range to fetch, nothing from a cache.
fn missing_plan(ranges: &[Range<u64>]) -> Vec<Vec<Piece>> {
    ranges
        .iter()
        .map(|r| vec![Piece::Missing(r.clone())])
        .collect()
}

/// The requests a plan needs: its missing ranges, in order, cut into parts of at most
/// [`MAX_REQUEST_BYTES`] (empty ones dropped).
fn split_parts(plan: &[Vec<Piece>]) -> Vec<Range<u64>> {
    let mut parts = Vec::new();
    for piece in plan.iter().flatten() {
        let Piece::Missing(r) = piece else { continue };
        let mut at = r.start;
        while at < r.end {
            let end = r.end.min(at.saturating_add(MAX_REQUEST_BYTES));
            parts.push(at..end);
            at = end;
        }
    }
    parts
}

/// `answers` if each has its part's length, else a [`Failure::Changed`] error.
fn check_parts(
    text: &str,
    parts: &[Range<u64>],
    answers: Vec<Bytes>,
) -> Result<Vec<Bytes>, StorageError> {
    for (range, bytes) in parts.iter().zip(&answers) {
        if bytes.len() as u64 != range.end - range.start {
            return Err(StorageError::Request {
                url: text.to_owned(),
                reason: format!(
                    "asked for bytes {}..{}, got {} bytes: the object is shorter than \
                     listed (rewritten?)",
                    range.start,
                    range.end,
                    bytes.len()
                ),
                failure: Failure::Changed,
            });
        }
    }
    Ok(answers)
}

/// Each range's bytes: its cached pieces and its fetched parts (`answers`, in the order
/// [`split_parts`] gave them), joined; a range of one piece is not copied.
fn assemble(plan: Vec<Vec<Piece>>, answers: Vec<Bytes>) -> Vec<Bytes> {
    let mut answers = answers.into_iter();
    plan.into_iter()
        .map(|pieces| {
            let mut chunks: Vec<Bytes> = Vec::new();
            for piece in pieces {
                match piece {
                    Piece::Cached(bytes) => chunks.push(bytes),
                    Piece::Missing(r) => {
                        let mut at = r.start;
                        while at < r.end {
                            let end = r.end.min(at.saturating_add(MAX_REQUEST_BYTES));
                            chunks.push(answers.next().unwrap_or_default());
                            at = end;
                        }
                    }
                }
            }
            if chunks.len() == 1 {
                return chunks.pop().unwrap_or_default();
            }
            let total = chunks.iter().map(Bytes::len).sum();
            let mut joined = BytesMut::with_capacity(total);
            for chunk in chunks {
                joined.extend_from_slice(&chunk);
            }
            joined.freeze()
        })
        .collect()
}

/// Ranged GETs of one object started and not yet waited for
/// ([`ObjectSource::start_reads`]). Dropping it aborts the requests still in flight: a
/// cancelled or failed scan leaves nothing running against the store.
#[derive(Debug)]
pub struct PendingReads {
    /// `s3://bucket/key`, for messages.
    url: PathBuf,
    ranges: Vec<Range<u64>>,
    /// Each range's bytes, once fetched (or read from the range cache).
    rx: std::sync::mpsc::Receiver<Result<Vec<Bytes>, StorageError>>,
    task: tokio::task::AbortHandle,
    counters: Arc<Counters>,
}

impl Drop for PendingReads {
    fn drop(&mut self) {
        // Aborting a finished task does nothing.
        self.task.abort();
    }
}

impl PendingReads {
    /// The ranges asked for (sorted, disjoint).
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Waits for the bytes of every range, in order. Every [`STOP_POLL`] it asks
    /// `stop`: once that says yes, the requests are aborted and the answer is
    /// [`Failure::Cancelled`].
    pub fn wait(self, stop: &dyn Fn() -> bool) -> Result<Vec<Bytes>, StorageError> {
        let started = Instant::now();
        let text = self.url.display().to_string();
        let answers = loop {
            match self.rx.recv_timeout(STOP_POLL) {
                Ok(answers) => break Some(answers),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !stop() => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break None,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break Some(Err(StorageError::Request {
                        url: text.clone(),
                        reason: "reading: the requests were dropped (the client's runtime \
                                 stopped)"
                            .to_owned(),
                        failure: Failure::Other,
                    }));
                }
            }
        };
        let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.counters.wait_us.fetch_add(waited, Ordering::Relaxed);
        answers.unwrap_or_else(|| {
            Err(StorageError::Request {
                url: text,
                reason: "reading: cancelled".to_owned(),
                failure: Failure::Cancelled,
            })
        })
    }
}

fn version_of(meta: &object_store::ObjectMeta) -> ObjectVersion {
    let modified_ns = meta
        .last_modified
        .timestamp_nanos_opt()
        .map_or(0, i128::from);
    ObjectVersion {
        size: meta.size,
        e_tag: meta.e_tag.clone(),
        modified_ns,
    }
}

/// `error` of `what` on `url` in words: the store's own message says much, in XML.
fn request_error(url: &str, what: &str, error: &object_store::Error) -> StorageError {
    use object_store::Error as E;
    let text = error_chain(error);
    let scheme = Scheme::of(url).unwrap_or(Scheme::S3);
    let has_code = |codes: &[&str]| codes.iter().any(|code| text.contains(code));
    // The error codes S3 (and GCS's XML API) and Azure Blob Storage answer with; Azure's
    // listing errors reach us as generic ones, their code only in the text.
    let (reason, failure) = if has_code(&["NoSuchBucket", "ContainerNotFound"]) {
        let bucket = split_url(url).map_or(url, |(_, bucket, _)| bucket);
        (
            format!("{what}: {} {bucket:?} does not exist", scheme.bucket_word()),
            Failure::NoSuchBucket,
        )
    } else if has_code(&[
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AuthenticationFailed",
        "AuthorizationFailure",
        "AuthorizationPermissionMismatch",
        "InvalidAuthenticationInfo",
    ]) || matches!(
        error,
        E::PermissionDenied { .. } | E::Unauthenticated { .. }
    ) {
        (
            format!(
                "{what}: access denied: {} ({})",
                scheme.credentials_hint(),
                short(&text)
            ),
            Failure::AccessDenied,
        )
    } else {
        match error {
            E::NotFound { .. } => (format!("{what}: no such object"), Failure::NoSuchObject),
            E::Precondition { .. } => (
                format!("{what}: the object changed while being read (its ETag moved)"),
                Failure::Changed,
            ),
            _ => (format!("{what}: {}", short(&text)), Failure::Other),
        }
    };
    StorageError::Request {
        url: url.to_owned(),
        reason,
        failure,
    }
}

/// An error and its sources, `: `-joined.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

/// At most 400 characters of `text`.
fn short(text: &str) -> String {
    const MAX: usize = 400;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// One object at one version, read by ranged GETs.
#[derive(Debug)]
pub struct ObjectSource {
    root: Arc<ObjectRoot>,
    location: Location,
    /// `s3://bucket/key`, for messages.
    url: PathBuf,
    version: ObjectVersion,
    /// Its entries' key in the range cache.
    cache_key: ObjectKey,
}

impl ObjectSource {
    /// The version read.
    pub fn version(&self) -> &ObjectVersion {
        &self.version
    }

    /// The object's URL.
    pub fn url(&self) -> &Path {
        &self.url
    }

    /// Starts reading `ranges` (sorted, disjoint, inside the object) without waiting:
    /// [`PendingReads::wait`] gives their bytes, and dropping it aborts what is still in
    /// flight.
    pub fn start_reads(&self, ranges: Vec<Range<u64>>) -> io::Result<PendingReads> {
        for r in &ranges {
            self.check(r)?;
        }
        Ok(self.root.start_ranges(self, ranges))
    }

    fn check(&self, range: &Range<u64>) -> io::Result<()> {
        if range.start > range.end || range.end > self.version.size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "byte range {}..{} lies outside the object ({} bytes)",
                    range.start, range.end, self.version.size
                ),
            ));
        }
        Ok(())
    }
}

impl ByteRangeSource for ObjectSource {
    fn len(&self) -> u64 {
        self.version.size
    }

    fn read_range(&self, range: Range<u64>) -> io::Result<Bytes> {
        let mut parts = self.read_ranges(std::slice::from_ref(&range))?;
        Ok(parts.pop().unwrap_or_default())
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Bytes>> {
        self.read_ranges_until(ranges, &|| false)
    }

    fn read_ranges_until(
        &self,
        ranges: &[Range<u64>],
        stop: &dyn Fn() -> bool,
    ) -> io::Result<Vec<Bytes>> {
        self.start_reads(ranges.to_vec())?
            .wait(stop)
            .map_err(StorageError::into_io)
    }

    fn start_reads(&self, ranges: Vec<Range<u64>>) -> Option<io::Result<PendingReads>> {
        Some(ObjectSource::start_reads(self, ranges))
    }

    fn coalesce_gap(&self) -> u64 {
        COALESCE_GAP_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart_and_checked() {
        assert_eq!(
            split_url("s3://bucket/a//b/").unwrap(),
            (Scheme::S3, "bucket", "a/b".to_owned())
        );
        assert_eq!(
            split_url("s3://bucket").unwrap(),
            (Scheme::S3, "bucket", String::new())
        );
        assert_eq!(
            split_url("gs://b/k/x.parquet").unwrap(),
            (Scheme::Gcs, "b", "k/x.parquet".to_owned())
        );
        assert_eq!(
            split_url("az://container//k/").unwrap(),
            (Scheme::Azure, "container", "k".to_owned())
        );
        assert_eq!(normalize_url("s3://b-1/x/").unwrap(), "s3://b-1/x");
        assert_eq!(normalize_url("gs://b-1//x/").unwrap(), "gs://b-1/x");
        assert_eq!(normalize_url("az://c").unwrap(), "az://c");
        for bad in [
            "s3://",
            "s3:///x",
            "gs:///x",
            "az://",
            "abfs://c/x",
            "gcs://b/x",
            "S3://b/x",
            "s3://Bucket/x",
            "s3://b/../x",
        ] {
            assert!(split_url(bad).is_err(), "{bad}");
        }
        for url in ["s3://b/x", "gs://b/x", "az://c/x"] {
            assert!(is_object_url(Path::new(url)), "{url}");
        }
        assert!(!is_object_url(Path::new("/data/s3")));
        assert!(!is_object_url(Path::new("gs:/b")));
    }

    #[test]
    fn versions_compare_by_etag_then_time() {
        let v = |size, tag: Option<&str>, t| ObjectVersion {
            size,
            e_tag: tag.map(str::to_owned),
            modified_ns: t,
        };
        assert!(v(10, Some("a"), 1).same_contents(&v(10, Some("a"), 2)));
        assert!(!v(10, Some("a"), 1).same_contents(&v(10, Some("b"), 1)));
        assert!(!v(10, Some("a"), 1).same_contents(&v(11, Some("a"), 1)));
        assert!(v(10, None, 1).same_contents(&v(10, Some("a"), 1)));
        assert!(!v(10, None, 1).same_contents(&v(10, None, 2)));
        assert_ne!(
            v(1, Some("a"), 0).e_tag_digest(),
            v(1, Some("b"), 0).e_tag_digest()
        );
        assert_eq!(v(1, None, 0).e_tag_digest(), 0);
    }
}
