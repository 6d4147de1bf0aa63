//! Table resolution: from a [`ScanSource`] to the files to scan, the table's schema and
//! its data version.
//!
//! - `Table { name }` is the directory `<data>/<name>`: every `*.parquet` file below it,
//!   recursively, in sorted order, hidden entries (`.ringscan`, `.part-*.tmp`) skipped.
//! - `Files { paths }` are paths or globs (`*`, `?` within a path component, `**` for
//!   any number of components) relative to the data directory.
//!
//! Nothing may escape the data directory: absolute paths, `..` and hidden components
//! are refused, and every file found is checked (after resolving symbolic links) to lie
//! inside it. The schema is the first file's Arrow schema (as the scan's reader maps it)
//! followed by the hive partition columns of its path (in path order, typed as DuckDB
//! types them over all the files: [`crate::hive`]); every other file must agree up to
//! dictionary encoding and nullability.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use ringscan_ipc::msg::{FileVersion, ScanSource};
use ringscan_ipc::watch::{table_paths, WatchToken};

use crate::hive::PartitionTypes;
use crate::prune::PartitionValues;
use crate::scan::{MetadataCache, ScanError};
use crate::storage::is_object_url;

mod object_listing;

/// Most files one source may resolve to.
pub const MAX_FILES: usize = 1_000_000;
/// Deepest directory nesting walked below a table root.
pub const MAX_DEPTH: usize = 64;
/// Most components (and at most 4 of them `**`) in one glob pattern.
pub const MAX_PATTERN_COMPONENTS: usize = 64;

/// What can go wrong resolving a table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// A table name or path that is absolute, climbs out (`..`) or is hidden.
    #[error("{what} {name:?} is not allowed: {reason}")]
    InvalidName {
        /// `table name` or `path`.
        what: &'static str,
        /// The rejected text.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// No such table.
    #[error("no table {name:?} in {}{}", .data_dir.display(), match .nearest { Some(n) => format!(" (did you mean {n:?}?)"), None => String::new() })]
    NoSuchTable {
        /// The requested name.
        name: String,
        /// The data directory.
        data_dir: PathBuf,
        /// The closest existing table name.
        nearest: Option<String>,
    },
    /// A table without Parquet files.
    #[error("table {name:?} has no Parquet files")]
    EmptyTable {
        /// The table.
        name: String,
    },
    /// A literal path that does not exist.
    #[error("{}: no such file in the data directory", .path.display())]
    NoSuchFile {
        /// The path, relative to the data directory.
        path: PathBuf,
    },
    /// A glob that matches nothing.
    #[error("{pattern:?} matches no file in the data directory")]
    NoMatch {
        /// The pattern.
        pattern: String,
    },
    /// A path resolving (through a symbolic link) outside the data directory.
    #[error("{}: resolves outside the data directory", .path.display())]
    Escapes {
        /// The path.
        path: PathBuf,
    },
    /// Too many files or too deep.
    #[error("{what} exceeds the limit of {limit}")]
    TooLarge {
        /// What.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// Listing or stat-ing failed.
    #[error("{}: I/O error", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An encrypted file.
    #[error("{}: encrypted Parquet is not supported", .file.display())]
    Encrypted {
        /// The file.
        file: PathBuf,
    },
    /// Reading a file's footer or schema failed.
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// Two files disagree on the schema.
    #[error("{} and {}: schemas differ: {detail}", .first.display(), .other.display())]
    SchemaMismatch {
        /// The file that set the table schema.
        first: PathBuf,
        /// The file that disagrees.
        other: PathBuf,
        /// How.
        detail: String,
    },
}

/// The files of a source, before any footer is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The directory the scan's paths and partition values are relative to
    /// (`<data>/<name>` for a table, the data directory for files).
    pub root: PathBuf,
    /// The files, relative to `root`, in scan order.
    pub files: Vec<PathBuf>,
    /// Versions of the files (paths relative to the data directory).
    pub file_versions: Vec<FileVersion>,
    /// Versions of every directory listed (paths relative to the data directory).
    pub dirs: Vec<FileVersion>,
}

/// A resolved source: its files and schema.
#[derive(Debug, Clone)]
pub struct ResolvedTable {
    /// The files.
    pub listing: Listing,
    /// The table schema: file columns, then partition columns.
    pub schema: SchemaRef,
    /// The partition columns' types (over all the files).
    pub partition_types: PartitionTypes,
}

/// Lists `source`'s files under `data_dir` (a local directory, or an object-storage
/// prefix `s3://bucket/prefix`: then `root` and the files are URLs below it).
pub fn list(data_dir: &Path, source: &ScanSource) -> Result<Listing, TableError> {
    // `FROM 's3://bucket/key/*.parquet'`: objects named by URL, whatever the root.
    if let ScanSource::Files { paths } = source {
        if paths.iter().any(|p| is_object_url(p)) {
            return object_listing::list_urls(paths);
        }
    }
    if is_object_url(data_dir) {
        return object_listing::list(data_dir, source);
    }
    let data_dir = canonical(data_dir)?;
    match source {
        ScanSource::Table { name } => list_table(&data_dir, name),
        ScanSource::Files { paths } => list_files(&data_dir, paths),
    }
}

/// Most table names [`table_names`] gives.
pub const MAX_TABLE_NAMES: usize = 10_000;

/// The root's tables by name, sorted: its directories (for an object-storage root, the
/// prefixes with objects below them), hidden ones (`.x`, `_x`) left out; at most
/// [`MAX_TABLE_NAMES`]. What `\dt` lists: whether each holds Parquet is found when it
/// is described.
pub fn table_names(data_dir: &Path) -> Result<Vec<String>, TableError> {
    let mut names = if is_object_url(data_dir) {
        object_listing::table_names(data_dir)?
    } else {
        let entries = fs::read_dir(data_dir).map_err(|source| TableError::Io {
            path: data_dir.to_path_buf(),
            source,
        })?;
        entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect()
    };
    names.sort();
    names.truncate(MAX_TABLE_NAMES);
    Ok(names)
}

/// Lists `source` and reads its schema (footers through `cache`).
pub fn resolve(
    data_dir: &Path,
    source: &ScanSource,
    cache: &MetadataCache,
) -> Result<ResolvedTable, TableError> {
    resolve_until(data_dir, source, cache, &|| false)
}

/// [`resolve`], giving up on the footers' requests (an object-storage root) once `stop`
/// says the asker is gone: [`ScanError::Cancelled`].
pub fn resolve_until(
    data_dir: &Path,
    source: &ScanSource,
    cache: &MetadataCache,
    stop: &dyn Fn() -> bool,
) -> Result<ResolvedTable, TableError> {
    let listing = list(data_dir, source)?;
    let partition_types = crate::scan::infer_partition_types(&listing.root, &listing.files);
    let schema = typed_table_schema(&listing, &partition_types, cache, stop)?;
    Ok(ResolvedTable {
        listing,
        schema,
        partition_types,
    })
}

/// Tables resolved by earlier scans, each served again while `stat` shows every file
/// and directory of its listing unchanged: a point lookup then costs a `stat` per file
/// and directory, not a walk, a `realpath` per file and the schema's footers.
///
/// File system timestamps are coarse (a clock tick, up to 10 ms, behind the real
/// time): a directory changed within a tick of its listing could change again with the
/// same mtime. A listing is kept only when everything in it is older than
/// [`SETTLED`] before the listing began (as git treats "racily clean" files).
///
/// An object-storage listing has no directory versions to check: it is served again
/// for [`object_listing_ttl`](Self::with_object_listing_ttl) after it was made (one
/// statement asks for its tables' descriptions, statistics and scans within that), then
/// listed anew; an object added or rewritten in the bucket is seen that much later.
#[derive(Debug)]
pub struct ResolveCache {
    kept: Mutex<ringscan_lru::ByteLru<(PathBuf, ScanSource), KeptTable>>,
    object_listing_ttl: Duration,
}

/// A resolved table; for an object-storage root when it was listed, for a local one
/// where the watches of its files stood when they last stat-ed the same.
type KeptTable = (ResolvedTable, Option<Instant>, Option<WatchToken>);

/// How long an object-storage listing is served again, unless told.
pub const DEFAULT_OBJECT_LISTING_TTL: Duration = Duration::from_secs(1);

/// How old a file or directory must be for a listing that includes it to be kept.
const SETTLED: Duration = Duration::from_millis(50);

impl ResolveCache {
    /// Holding at most `capacity_bytes` of listings (an estimate: paths and versions).
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            kept: Mutex::new(ringscan_lru::ByteLru::new(capacity_bytes)),
            object_listing_ttl: DEFAULT_OBJECT_LISTING_TTL,
        }
    }

    /// Serves an object-storage listing again for `ttl` after it was made (0: never).
    pub fn with_object_listing_ttl(mut self, ttl: Duration) -> Self {
        self.object_listing_ttl = ttl;
        self
    }

    /// [`resolve`], from the kept listing while it is current.
    pub fn resolve(
        &self,
        data_dir: &Path,
        source: &ScanSource,
        cache: &MetadataCache,
    ) -> Result<ResolvedTable, TableError> {
        self.resolve_until(data_dir, source, cache, &|| false)
    }

    /// [`resolve_until`], from the kept listing while it is current.
    pub fn resolve_until(
        &self,
        data_dir: &Path,
        source: &ScanSource,
        cache: &MetadataCache,
        stop: &dyn Fn() -> bool,
    ) -> Result<ResolvedTable, TableError> {
        let key = (data_dir.to_path_buf(), source.clone());
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        let object = is_object_url(data_dir);
        if let Some((table, listed, token)) = kept {
            let current = match listed {
                Some(at) => at.elapsed() < self.object_listing_ttl,
                None => self.local_listing_current(&key, &table.listing, token.as_ref()),
            };
            if current {
                return Ok(table);
            }
        }
        let began = SystemTime::now();
        let listed = Instant::now();
        let table = resolve_until(data_dir, source, cache, stop)?;
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = if object {
            !self.object_listing_ttl.is_zero()
        } else {
            listing_settled(&table.listing, began)
        };
        if keep {
            let bytes = table
                .listing
                .file_versions
                .iter()
                .chain(&table.listing.dirs)
                .map(|v| v.path.as_os_str().len() * 2 + 96)
                .sum::<usize>()
                + 512 * table.schema.fields().len();
            kept.insert(key, (table.clone(), object.then_some(listed), None), bytes);
        } else {
            kept.remove(&key);
        }
        Ok(table)
    }
}

impl ResolveCache {
    /// Whether the kept local `listing` of `key` is current: while the inotify watches
    /// of its files and directories saw no change since they last stat-ed the same,
    /// without stat-ing them (a point lookup stat-ed its table's files on every scan).
    fn local_listing_current(
        &self,
        key: &(PathBuf, ScanSource),
        listing: &Listing,
        token: Option<&WatchToken>,
    ) -> bool {
        let data_dir = &key.0;
        let Some(watch) = ringscan_ipc::watch::shared() else {
            return listing_current(data_dir, listing);
        };
        if token.is_some_and(|t| watch.unchanged(t)) {
            return true;
        }
        // The token is taken before the stat: a change racing the stat makes it stale.
        let paths = table_paths(data_dir, listing.file_versions.iter().chain(&listing.dirs));
        let fresh = watch.token(paths.iter().map(PathBuf::as_path));
        let current = listing_current(data_dir, listing);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        // Only on the listing it was checked against (another scan may have listed
        // the table anew meanwhile).
        if let Some(entry) = kept.peek_mut(key).filter(|e| e.0.listing == *listing) {
            entry.2 = fresh.filter(|_| current);
        }
        current
    }
}

/// Whether every file and directory of `listing` still has its recorded version.
fn listing_current(data_dir: &Path, listing: &Listing) -> bool {
    listing
        .file_versions
        .iter()
        .chain(&listing.dirs)
        .all(|recorded| {
            fs::metadata(data_dir.join(&recorded.path)).is_ok_and(|m| {
                FileVersion::from_metadata(PathBuf::new(), &m).same_contents(recorded)
            })
        })
}

/// Whether everything in `listing` was last changed well before `began`.
fn listing_settled(listing: &Listing, began: SystemTime) -> bool {
    let Ok(began) = began.duration_since(UNIX_EPOCH) else {
        return false;
    };
    let limit = i128::try_from(began.saturating_sub(SETTLED).as_nanos()).unwrap_or(i128::MAX);
    listing
        .file_versions
        .iter()
        .chain(&listing.dirs)
        .all(|v| v.modified_ns < limit && v.changed_ns < limit)
}

fn canonical(path: &Path) -> Result<PathBuf, TableError> {
    fs::canonicalize(path).map_err(|source| TableError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Checks a relative path given by a client: no root, no `..`, no hidden component.
fn check_relative(what: &'static str, text: &str) -> Result<(), TableError> {
    let invalid = |reason| TableError::InvalidName {
        what,
        name: text.to_owned(),
        reason,
    };
    if text.is_empty() {
        return Err(invalid("empty"));
    }
    if text.contains('\0') {
        return Err(invalid("contains NUL"));
    }
    let mut named = false;
    for component in Path::new(text).components() {
        match component {
            Component::Normal(c) if c.to_string_lossy().starts_with('.') => {
                return Err(invalid("hidden components are not tables or data"));
            }
            Component::Normal(_) => named = true,
            Component::CurDir => {}
            Component::ParentDir => return Err(invalid("'..' leaves the data directory")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(invalid("must be relative to the data directory"));
            }
        }
    }
    if !named {
        // `.` would read every table of the data directory as one.
        return Err(invalid(
            "names the data directory itself, not a table in it",
        ));
    }
    Ok(())
}

fn list_table(data_dir: &Path, name: &str) -> Result<Listing, TableError> {
    check_relative("table name", name)?;
    let root = data_dir.join(name);
    if !root.is_dir() {
        return Err(TableError::NoSuchTable {
            name: name.to_owned(),
            data_dir: data_dir.to_path_buf(),
            nearest: nearest_table(data_dir, name),
        });
    }
    let mut walk = Walk::new(data_dir);
    walk.dir(&root, 0, &mut |rel| {
        rel.file_name()
            .is_some_and(|n| ringscan_ipc::names::is_data_file(&n.to_string_lossy()))
    })?;
    if walk.files.is_empty() {
        return Err(TableError::EmptyTable {
            name: name.to_owned(),
        });
    }
    let prefix = Path::new(name);
    let files = walk
        .files
        .iter()
        .map(|rel| rel.strip_prefix(prefix).unwrap_or(rel).to_path_buf())
        .collect();
    walk.finish(files, root)
}

/// A path or glob pattern of a `Files` source as text with `/` separators, checked to
/// stay inside the data root.
fn pattern_text(path: &Path) -> Result<String, TableError> {
    let text = path.to_string_lossy().replace('\\', "/");
    check_relative("path", &text)?;
    Ok(text)
}

/// The components of a pattern (empty and `.` ones dropped), bounded, and how many lead
/// before the first glob.
fn pattern_components(text: &str) -> Result<(Vec<&str>, usize), TableError> {
    let components: Vec<&str> = text
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if components.len() > MAX_PATTERN_COMPONENTS
        || components.iter().filter(|c| **c == "**").count() > 4
    {
        return Err(TableError::TooLarge {
            what: "a glob pattern",
            limit: MAX_PATTERN_COMPONENTS,
        });
    }
    let literal = components.iter().take_while(|c| !is_glob(c)).count();
    Ok((components, literal))
}

fn list_files(data_dir: &Path, paths: &[PathBuf]) -> Result<Listing, TableError> {
    let mut walk = Walk::new(data_dir);
    for path in paths {
        let text = pattern_text(path)?;
        let (components, literal) = pattern_components(&text)?;
        if literal == components.len() {
            let rel: PathBuf = components.iter().collect();
            let full = data_dir.join(&rel);
            if !full.is_file() {
                return Err(TableError::NoSuchFile { path: rel });
            }
            walk.file(&rel)?;
            if let Some(parent) = rel.parent() {
                walk.stat_dir(parent)?;
            }
            continue;
        }
        let base: PathBuf = components[..literal].iter().collect();
        let before = walk.files.len();
        let pattern = &components[literal..];
        if data_dir.join(&base).is_dir() {
            walk.dir(&data_dir.join(&base), 0, &mut |rel| {
                let rel = rel.strip_prefix(&base).unwrap_or(rel);
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                glob_match(pattern, &parts)
            })?;
        }
        if walk.files.len() == before {
            return Err(TableError::NoMatch { pattern: text });
        }
    }
    let mut seen = BTreeSet::new();
    let mut files = Vec::new();
    let mut versions = Vec::new();
    for (file, version) in walk.files.iter().zip(&walk.versions) {
        if seen.insert(file.clone()) {
            files.push(file.clone());
            versions.push(version.clone());
        }
    }
    walk.files = files.clone();
    walk.versions = versions;
    walk.finish(files, data_dir.to_path_buf())
}

fn is_glob(component: &str) -> bool {
    component.contains(['*', '?'])
}

/// Whether the path `components` match the glob `pattern` components.
pub fn glob_match(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| glob_match(rest, &path[skip..])),
        Some((first, rest)) => match path.split_first() {
            Some((name, path_rest)) => segment_match(first, name) && glob_match(rest, path_rest),
            None => false,
        },
    }
}

/// `*` (any run of characters) and `?` (one character) within one component; hidden
/// names are matched only by a pattern that starts with a literal dot.
fn segment_match(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Collects files and directory versions below the data directory.
struct Walk<'a> {
    data_dir: &'a Path,
    files: Vec<PathBuf>,
    versions: Vec<FileVersion>,
    dirs: Vec<FileVersion>,
}

impl<'a> Walk<'a> {
    fn new(data_dir: &'a Path) -> Self {
        Self {
            data_dir,
            files: Vec::new(),
            versions: Vec::new(),
            dirs: Vec::new(),
        }
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TableError + '_ {
        move |source| TableError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    fn rel(&self, full: &Path) -> PathBuf {
        full.strip_prefix(self.data_dir)
            .unwrap_or(full)
            .to_path_buf()
    }

    fn stat_dir(&mut self, rel: &Path) -> Result<(), TableError> {
        let full = self.data_dir.join(rel);
        let meta = fs::metadata(&full).map_err(Self::io(&full))?;
        self.dirs.push(version(rel.to_path_buf(), &meta));
        Ok(())
    }

    /// Adds a file given relative to the data directory.
    fn file(&mut self, rel: &Path) -> Result<(), TableError> {
        let full = self.data_dir.join(rel);
        let real = fs::canonicalize(&full).map_err(Self::io(&full))?;
        if !real.starts_with(self.data_dir) {
            return Err(TableError::Escapes {
                path: rel.to_path_buf(),
            });
        }
        let meta = fs::metadata(&real).map_err(Self::io(&full))?;
        if self.files.len() >= MAX_FILES {
            return Err(TableError::TooLarge {
                what: "the number of files",
                limit: MAX_FILES,
            });
        }
        self.files.push(rel.to_path_buf());
        self.versions.push(version(rel.to_path_buf(), &meta));
        Ok(())
    }

    /// Walks `dir` (absolute) recursively in sorted order, adding the files (paths
    /// relative to the data directory) for which `keep` says yes.
    fn dir(
        &mut self,
        dir: &Path,
        depth: usize,
        keep: &mut dyn FnMut(&Path) -> bool,
    ) -> Result<(), TableError> {
        if depth > MAX_DEPTH {
            return Err(TableError::TooLarge {
                what: "the directory depth",
                limit: MAX_DEPTH,
            });
        }
        let rel_dir = self.rel(dir);
        self.stat_dir(&rel_dir)?;
        let mut entries = Vec::new();
        for entry in fs::read_dir(dir).map_err(Self::io(dir))? {
            let entry = entry.map_err(Self::io(dir))?;
            let name = entry.file_name();
            if ringscan_ipc::names::is_hidden_entry(&name.to_string_lossy()) {
                continue;
            }
            let file_type = entry.file_type().map_err(Self::io(&entry.path()))?;
            entries.push((name, file_type));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, file_type) in entries {
            let full = dir.join(&name);
            let rel = rel_dir.join(&name);
            // Symbolic links to directories are not followed (no cycles); links to files
            // are, if they stay inside the data directory (checked in `file`).
            let is_file = file_type.is_file()
                || (file_type.is_symlink() && fs::metadata(&full).is_ok_and(|m| m.is_file()));
            if file_type.is_dir() {
                self.dir(&full, depth + 1, keep)?;
            } else if is_file && keep(&rel) {
                self.file(&rel)?;
            }
        }
        Ok(())
    }

    fn finish(mut self, files: Vec<PathBuf>, root: PathBuf) -> Result<Listing, TableError> {
        self.dirs.sort_by(|a, b| a.path.cmp(&b.path));
        self.dirs.dedup_by(|a, b| a.path == b.path);
        Ok(Listing {
            root,
            files,
            file_versions: self.versions,
            dirs: self.dirs,
        })
    }
}

fn version(path: PathBuf, meta: &fs::Metadata) -> FileVersion {
    FileVersion::from_metadata(path, meta)
}

/// The existing table name closest to `name` (edit distance at most half its length).
fn nearest_table(data_dir: &Path, name: &str) -> Option<String> {
    let entries = fs::read_dir(data_dir).ok()?;
    let mut best: Option<(usize, String)> = None;
    for entry in entries.flatten().take(10_000) {
        let candidate = entry.file_name().to_string_lossy().into_owned();
        if candidate.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let d = edit_distance(name, &candidate);
        if best
            .as_ref()
            .is_none_or(|(bd, bn)| (d, &candidate) < (*bd, bn))
        {
            best = Some((d, candidate));
        }
    }
    best.filter(|(d, _)| *d <= name.chars().count().max(2) / 2 + 1)
        .map(|(_, n)| n)
}

pub use ringscan_ipc::names::edit_distance;

/// The file a scan error is about, when the error could be an encrypted file's.
fn failed_file(error: &ScanError) -> Option<&Path> {
    match error {
        ScanError::Corrupt { file, .. }
        | ScanError::Decode { file, .. }
        | ScanError::DecoderPanic { file, .. }
        | ScanError::Unsupported { file, .. }
        | ScanError::Arrow { file, .. } => Some(file),
        _ => None,
    }
}

/// [`TableError::Encrypted`] when `error` is about a file that is encrypted (the
/// parquet crate, built without encryption, reports those as corrupt).
pub fn encrypted_error(error: &ScanError) -> Option<TableError> {
    let file = failed_file(error)?;
    crate::footer_probe::is_encrypted(file).then(|| TableError::Encrypted {
        file: file.to_path_buf(),
    })
}

fn with_encryption_check(error: ScanError) -> TableError {
    encrypted_error(&error).unwrap_or(TableError::Scan(error))
}

/// The Arrow schema of one file, as the scan's reader maps it.
fn file_schema(
    path: &Path,
    cache: &MetadataCache,
    stop: &dyn Fn() -> bool,
) -> Result<SchemaRef, TableError> {
    if is_object_url(path) {
        let (_, meta) = crate::scan::open_object(path, cache, stop)?;
        let derived = cache.derived(&meta, path)?;
        return Ok(Arc::clone(derived.arrow.schema()));
    }
    let file = File::open(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => TableError::Scan(ScanError::Missing {
            file: path.to_path_buf(),
        }),
        _ => TableError::Io {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let meta = cache
        .get_or_load(path, &file)
        .map_err(with_encryption_check)?;
    let derived = cache.derived(&meta, path).map_err(with_encryption_check)?;
    Ok(Arc::clone(derived.arrow.schema()))
}

/// Hive partition keys of `rel` (relative to the table root), in path order.
fn partition_keys(rel: &Path) -> Vec<String> {
    let text = rel.to_string_lossy().replace('\\', "/");
    let values = PartitionValues::from_relative_path(&text);
    let mut keys: Vec<String> = Vec::new();
    let mut components: Vec<&str> = text.split('/').filter(|c| !c.is_empty()).collect();
    components.pop();
    for c in components {
        if let Some((k, _)) = c.split_once('=') {
            if values.contains(k) && !keys.iter().any(|x| x == k) {
                keys.push(k.to_owned());
            }
        }
    }
    for (k, _) in values.iter() {
        if !keys.iter().any(|x| x == k) {
            keys.push(k.to_owned());
        }
    }
    keys
}

/// Strips dictionary encoding: the logical type a column compares by.
fn logical(data_type: &DataType) -> &DataType {
    match data_type {
        DataType::Dictionary(_, value) => logical(value),
        other => other,
    }
}

/// The table schema of `listing`: the first file's columns, then its partition columns;
/// every other file must agree.
pub fn table_schema(listing: &Listing, cache: &MetadataCache) -> Result<SchemaRef, TableError> {
    let types = crate::scan::infer_partition_types(&listing.root, &listing.files);
    typed_table_schema(listing, &types, cache, &|| false)
}

fn typed_table_schema(
    listing: &Listing,
    partition_types: &PartitionTypes,
    cache: &MetadataCache,
    stop: &dyn Fn() -> bool,
) -> Result<SchemaRef, TableError> {
    let Some(first_rel) = listing.files.first() else {
        return Ok(Arc::new(Schema::empty()));
    };
    let first_path = listing.root.join(first_rel);
    let first = file_schema(&first_path, cache, stop)?;
    let mut fields: Vec<Field> = first.fields().iter().map(|f| f.as_ref().clone()).collect();
    let partitions: Vec<String> = partition_keys(first_rel)
        .into_iter()
        .filter(|k| first.index_of(k).is_err())
        .collect();
    for other_rel in &listing.files[1..] {
        let other_path = listing.root.join(other_rel);
        let other = file_schema(&other_path, cache, stop)?;
        let mismatch = |detail: String| TableError::SchemaMismatch {
            first: first_path.clone(),
            other: other_path.clone(),
            detail,
        };
        if other.fields().len() != first.fields().len() {
            return Err(mismatch(format!(
                "{} columns vs {}",
                first.fields().len(),
                other.fields().len()
            )));
        }
        for (table_field, field) in fields.iter_mut().zip(other.fields()) {
            if table_field.name() != field.name() {
                return Err(mismatch(format!(
                    "column {:?} vs {:?}",
                    table_field.name(),
                    field.name()
                )));
            }
            if logical(table_field.data_type()) != logical(field.data_type()) {
                return Err(mismatch(format!(
                    "column {:?} is {} vs {}",
                    field.name(),
                    table_field.data_type(),
                    field.data_type()
                )));
            }
            if field.is_nullable() && !table_field.is_nullable() {
                *table_field = table_field.clone().with_nullable(true);
            }
        }
        let keys = partition_keys(other_rel);
        if let Some(missing) = partitions.iter().find(|k| !keys.contains(k)) {
            return Err(mismatch(format!("partition column {missing:?} is missing")));
        }
    }
    fields.extend(partitions.into_iter().map(|k| {
        let data_type = partition_types.get(&k).data_type();
        Field::new(k, data_type, true)
    }));
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        first.metadata().clone(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_parquet(path: &Path, rows: i64) {
        use arrow_array::{Int64Array, RecordBatch};
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from_iter_values(0..rows))],
        )
        .unwrap();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(File::create(path).unwrap(), schema, None)
                .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    /// Waits until what was just changed is past [`SETTLED`], so that a listing of it
    /// is kept (its ctime, which no call sets back, must be that old).
    fn settle() {
        std::thread::sleep(SETTLED + Duration::from_millis(20));
    }

    /// A kept listing is served again, checked by its watch once a stat has; a file
    /// added, rewritten in place with its size and mtime, or removed right before a
    /// resolve is seen by it.
    #[test]
    fn kept_listings_see_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let table = data.join("t");
        fs::create_dir(&table).unwrap();
        let (a, b) = (table.join("a.parquet"), table.join("b.parquet"));
        write_parquet(&a, 10);
        settle();
        let cache = MetadataCache::new(1 << 20);
        let kept = ResolveCache::new(1 << 20);
        let source = ScanSource::Table { name: "t".into() };
        let names = |r: &ResolvedTable| -> Vec<PathBuf> {
            r.listing
                .file_versions
                .iter()
                .map(|v| v.path.clone())
                .collect()
        };
        let first = kept.resolve(data, &source, &cache).unwrap();
        // The second resolve stats and takes a token, the third trusts it.
        for _ in 0..2 {
            assert_eq!(
                kept.resolve(data, &source, &cache).unwrap().listing,
                first.listing
            );
        }
        write_parquet(&b, 20);
        let added = kept.resolve(data, &source, &cache).unwrap();
        assert_eq!(names(&added).len(), 2, "{:?}", names(&added));
        settle();
        let settled = kept.resolve(data, &source, &cache).unwrap();
        for _ in 0..2 {
            assert_eq!(
                kept.resolve(data, &source, &cache).unwrap().listing,
                settled.listing
            );
        }
        let mtime = fs::metadata(&a).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        write_parquet(&a, 10);
        File::options()
            .write(true)
            .open(&a)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let rewritten = kept.resolve(data, &source, &cache).unwrap();
        assert_ne!(
            rewritten.listing, settled.listing,
            "a same-size rewrite keeping its mtime"
        );
        settle();
        for _ in 0..3 {
            kept.resolve(data, &source, &cache).unwrap();
        }
        fs::remove_file(&b).unwrap();
        let removed = kept.resolve(data, &source, &cache).unwrap();
        assert_eq!(names(&removed).len(), 1, "{:?}", names(&removed));
    }

    fn m(pattern: &str, path: &str) -> bool {
        let p: Vec<&str> = pattern.split('/').collect();
        let q: Vec<&str> = path.split('/').collect();
        glob_match(&p, &q)
    }

    #[test]
    fn globs_match_like_a_shell() {
        assert!(m("*.parquet", "a.parquet"));
        assert!(!m("*.parquet", "x/a.parquet"));
        assert!(m("**/*.parquet", "a.parquet"));
        assert!(m("**/*.parquet", "x/y/a.parquet"));
        assert!(m(
            "symbol=*/date=2024-0?-*/*.parquet",
            "symbol=SPY/date=2024-01-02/p.parquet"
        ));
        assert!(!m("symbol=*/*.parquet", "symbol=SPY/date=x/p.parquet"));
        assert!(m("a*b*c", "abc"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(!m("a*b*c", "axxbyy"));
        assert!(!m("*", ".hidden"));
        assert!(m("**", "x/y/z"));
        assert!(m("x/**/z", "x/z"));
        assert!(m("é?", "éü"));
    }

    /// The obvious exponential matcher, as the reference for `segment_match`.
    fn naive(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| naive(rest, &n[i..])),
            Some((c, rest)) => n
                .split_first()
                .is_some_and(|(m, nrest)| (*c == '?' || c == m) && naive(rest, nrest)),
        }
    }

    proptest::proptest! {
        #[test]
        fn segment_match_agrees_with_the_naive_matcher(
            pattern in "[ab*?é]{0,8}",
            name in "[abé]{0,10}",
        ) {
            let p: Vec<char> = pattern.chars().collect();
            let n: Vec<char> = name.chars().collect();
            proptest::prop_assert_eq!(segment_match(&pattern, &name), naive(&p, &n));
        }
    }

    #[test]
    fn escaping_names_are_refused() {
        for bad in [
            "../x",
            "/etc",
            "a/../../b",
            ".ringscan",
            "a/.hidden",
            "",
            ".",
            "./",
            "./.",
        ] {
            assert!(check_relative("path", bad).is_err(), "{bad}");
        }
        for good in ["ohlcv", "ohlcv/symbol=SPY/*.parquet", "./a"] {
            assert!(check_relative("path", good).is_ok(), "{good}");
        }
    }

    #[test]
    fn partition_keys_keep_path_order() {
        assert_eq!(
            partition_keys(Path::new("symbol=SPY/date=2024-01-02/p.parquet")),
            ["symbol", "date"]
        );
        assert!(partition_keys(Path::new("p.parquet")).is_empty());
    }
}
