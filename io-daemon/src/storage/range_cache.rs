//! An on-disk cache of byte ranges fetched from object storage (`--cache-dir`), so that
//! a restarted daemon, or a second host sharing the directory, does not GET again what
//! one already fetched.
//!
//! - **Keyed by version.** An object's entries live in one directory named after a
//!   digest of its URL, ETag (its last-modified time where it has none) and size
//!   ([`ObjectKey`]). A rewritten object has another ETag, so another directory: its old
//!   bytes are never served, only evicted in time.
//! - **One entry per fetched range**, `<start>-<end>` in the object's directory: what a
//!   GET brought back, kept as fetched (no rounding to blocks: a selective scan pays no
//!   extra bytes for the cache). A read is served from the entries that cover it; the
//!   gaps are fetched and become entries of their own.
//! - **Checked before it is served.** An entry holds a header (magic, the object key in
//!   full, its range, a CRC32C of the bytes): a truncated, corrupt or foreign entry is
//!   removed and its range fetched again, never served.
//! - **Safe to share.** Entries are written to `tmp/` and renamed into place, so a
//!   reader sees a whole entry or none; an entry another process evicted between the
//!   look-up and the read is a miss. Each process keeps an index of the entries it
//!   has seen, read from an object's directory the first time it is asked about it.
//! - **Bounded in bytes, LRU.** An entry's modification time is its last use (touched
//!   on every hit, in whichever process). Once the bytes this process knows of pass the
//!   bound, a sweep lists the whole directory and removes the least recently used
//!   entries until it holds [`LOW_WATER_PERCENT`] of the bound, left-over temporary
//!   files of crashed writers too.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::object::ObjectVersion;

/// Written at the start of every entry (and its format's version).
const MAGIC: &[u8; 8] = b"RSRANGE1";
/// Magic, key length (u32), range start and end (u64 each), CRC32C (u32); the key
/// follows, then the bytes.
const HEADER_BYTES: usize = 8 + 4 + 8 + 8 + 4;
/// A sweep leaves this share of the bound in use: room for the next writes before the
/// next sweep.
pub const LOW_WATER_PERCENT: u64 = 80;
/// A temporary file older than this was left by a writer that died: a sweep removes it.
const STALE_TEMP: Duration = Duration::from_secs(600);
/// Objects whose entries one process indexes at once (the index is cleared when full;
/// the entries stay on disk and are read again when asked for).
const MAX_INDEXED_OBJECTS: usize = 1 << 16;
/// The longest object key an entry may carry (URLs are far shorter).
const MAX_KEY_BYTES: usize = 4096;

/// Which bytes an entry holds: an object at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    /// `url`, ETag (else last-modified time) and size, one per line.
    text: String,
    /// The directory name: a digest of `text`.
    dir: String,
}

impl ObjectKey {
    /// The key of `url` at `version`.
    pub fn new(url: &str, version: &ObjectVersion) -> Self {
        let tag = match &version.e_tag {
            Some(tag) => format!("etag {tag}"),
            None => format!("modified {}", version.modified_ns),
        };
        let text = format!("{url}\n{tag}\nsize {}", version.size);
        // Two FNV-1a digests with different seeds: 128 bits, so that two keys sharing a
        // directory is not a thing to plan for (the header's full key catches it anyway).
        let digest = |seed: u64| {
            text.bytes().fold(seed, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        let dir = format!(
            "{:016x}{:016x}",
            digest(0xcbf2_9ce4_8422_2325),
            digest(0x6c62_272e_07bb_0142)
        );
        Self { text, dir }
    }
}

/// Where each byte of a read comes from.
#[derive(Debug)]
pub enum Piece {
    /// Bytes found in the cache.
    Cached(Bytes),
    /// A range to fetch (in the object's offsets).
    Missing(Range<u64>),
}

/// What the cache did so far (this process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeCacheStats {
    /// Bytes served from entries.
    pub hit_bytes: u64,
    /// Bytes asked for and not found.
    pub miss_bytes: u64,
    /// Entries found damaged (wrong length, checksum or key) and removed.
    pub corrupt_entries: u64,
    /// Entries removed by this process's sweeps.
    pub evicted_entries: u64,
}

/// The cache in one directory, bounded in bytes.
#[derive(Debug)]
pub struct RangeCache {
    dir: PathBuf,
    max_bytes: u64,
    /// Bytes in the directory as this process knows it: the last sweep's count plus
    /// what it wrote since.
    known_bytes: AtomicU64,
    /// Per object directory, the entries seen: start -> end.
    index: Mutex<HashMap<String, BTreeMap<u64, u64>>>,
    /// Held while sweeping: one sweep at a time in this process.
    sweeping: Mutex<()>,
    temp_seq: AtomicU64,
    hit_bytes: AtomicU64,
    miss_bytes: AtomicU64,
    corrupt_entries: AtomicU64,
    evicted_entries: AtomicU64,
}

impl RangeCache {
    /// The cache in `dir` (made if missing), holding at most about `max_bytes`; counts
    /// what is there already, and sweeps if that is over the bound.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Self> {
        fs::create_dir_all(dir.join("tmp"))?;
        let cache = Self {
            dir: dir.to_path_buf(),
            max_bytes,
            known_bytes: AtomicU64::new(0),
            index: Mutex::default(),
            sweeping: Mutex::default(),
            temp_seq: AtomicU64::new(0),
            hit_bytes: AtomicU64::new(0),
            miss_bytes: AtomicU64::new(0),
            corrupt_entries: AtomicU64::new(0),
            evicted_entries: AtomicU64::new(0),
        };
        let entries = cache.walk()?;
        let total = entries.iter().map(|e| e.bytes).sum();
        cache.known_bytes.store(total, Ordering::Relaxed);
        if total > max_bytes {
            cache.sweep()?;
        }
        Ok(cache)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What this process's cache did so far.
    pub fn stats(&self) -> RangeCacheStats {
        RangeCacheStats {
            hit_bytes: self.hit_bytes.load(Ordering::Relaxed),
            miss_bytes: self.miss_bytes.load(Ordering::Relaxed),
            corrupt_entries: self.corrupt_entries.load(Ordering::Relaxed),
            evicted_entries: self.evicted_entries.load(Ordering::Relaxed),
        }
    }

    /// `range` of the object `key` cut into pieces, in order: the bytes the cache holds
    /// (each entry checked) and the ranges it does not. A damaged entry is removed and
    /// its range reported missing.
    pub fn lookup(&self, key: &ObjectKey, range: Range<u64>) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut at = range.start;
        // Entries read for this call: one entry may serve several pieces.
        let mut read: HashMap<u64, Option<Bytes>> = HashMap::new();
        while at < range.end {
            let covering = self.with_entries(key, |entries| {
                let before = entries
                    .range(..=at)
                    .next_back()
                    .filter(|(_, end)| **end > at)
                    .map(|(s, e)| (*s, *e));
                let next = entries.range(at + 1..range.end).next().map(|(s, _)| *s);
                (before, next)
            });
            match covering {
                (Some((start, end)), _) => {
                    let bytes = read
                        .entry(start)
                        .or_insert_with(|| self.read_entry(key, start..end))
                        .clone();
                    let stop = end.min(range.end);
                    match bytes {
                        Some(bytes) => {
                            let from = usize::try_from(at - start).unwrap_or(usize::MAX);
                            let to = usize::try_from(stop - start).unwrap_or(usize::MAX);
                            pieces.push(Piece::Cached(bytes.slice(from..to)));
                            self.hit_bytes.fetch_add(stop - at, Ordering::Relaxed);
                            at = stop;
                        }
                        // Gone or damaged: dropped from the index, looked up again.
                        None => continue,
                    }
                }
                (None, next) => {
                    let stop = next.unwrap_or(range.end).min(range.end);
                    self.miss_bytes.fetch_add(stop - at, Ordering::Relaxed);
                    match pieces.last_mut() {
                        Some(Piece::Missing(gap)) if gap.end == at => gap.end = stop,
                        _ => pieces.push(Piece::Missing(at..stop)),
                    }
                    at = stop;
                }
            }
        }
        pieces
    }

    /// Keeps `bytes`, the object's bytes at `range` as fetched. Best effort: a failure
    /// to write costs a later GET, nothing else.
    pub fn store(&self, key: &ObjectKey, range: Range<u64>, bytes: &[u8]) {
        let len = range.end.saturating_sub(range.start);
        if len == 0 || len != bytes.len() as u64 || len > self.max_bytes / 4 {
            return;
        }
        if self.write_entry(key, &range, bytes).is_err() {
            return;
        }
        self.with_entries(key, |entries| entries.insert(range.start, range.end));
        let total = self.known_bytes.fetch_add(len, Ordering::Relaxed) + len;
        if total > self.max_bytes {
            let _ = self.sweep();
        }
    }

    fn object_dir(&self, key: &ObjectKey) -> PathBuf {
        self.dir.join(&key.dir)
    }

    /// Runs `f` on the index of `key`'s entries, read from its directory first if this
    /// process has not looked there yet.
    fn with_entries<T>(&self, key: &ObjectKey, f: impl FnOnce(&mut BTreeMap<u64, u64>) -> T) -> T {
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        if !index.contains_key(&key.dir) {
            if index.len() >= MAX_INDEXED_OBJECTS {
                index.clear();
            }
            let mut entries = BTreeMap::new();
            if let Ok(dir) = fs::read_dir(self.object_dir(key)) {
                for entry in dir.flatten() {
                    if let Some(range) = entry.file_name().to_str().and_then(parse_name) {
                        entries.insert(range.start, range.end);
                    }
                }
            }
            index.insert(key.dir.clone(), entries);
        }
        f(index.get_mut(&key.dir).expect("inserted above"))
    }

    /// The bytes of the entry `range` of `key`, checked; `None` (and the entry dropped)
    /// when it is gone or damaged.
    fn read_entry(&self, key: &ObjectKey, range: Range<u64>) -> Option<Bytes> {
        let path = self.object_dir(key).join(entry_name(&range));
        let checked = File::open(&path).and_then(|mut file| {
            let mut raw = Vec::new();
            file.read_to_end(&mut raw)?;
            let bytes = check_entry(&raw, key, &range)?;
            // Its last use, for the LRU order all processes share.
            let _ = file.set_modified(SystemTime::now());
            Ok(bytes)
        });
        match checked {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                if e.kind() == io::ErrorKind::InvalidData {
                    self.corrupt_entries.fetch_add(1, Ordering::Relaxed);
                    let _ = fs::remove_file(&path);
                }
                self.with_entries(key, |entries| entries.remove(&range.start));
                None
            }
        }
    }

    fn write_entry(&self, key: &ObjectKey, range: &Range<u64>, bytes: &[u8]) -> io::Result<()> {
        let dir = self.object_dir(key);
        fs::create_dir_all(&dir)?;
        let temp = self.dir.join("tmp").join(format!(
            "{}-{}",
            std::process::id(),
            self.temp_seq.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = File::create(&temp)?;
            file.write_all(&entry_header(key, range, bytes))?;
            file.write_all(key.text.as_bytes())?;
            file.write_all(bytes)?;
            // Rename only a whole entry: a reader sees all of it or none.
            fs::rename(&temp, dir.join(entry_name(range)))
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }

    /// Every entry in the directory (and stale temporary files removed).
    fn walk(&self) -> io::Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for object in fs::read_dir(&self.dir)?.flatten() {
            let name = object.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == "tmp" {
                remove_stale_temps(&object.path());
                continue;
            }
            let Ok(files) = fs::read_dir(object.path()) else {
                continue;
            };
            for file in files.flatten() {
                let file_name = file.file_name();
                if file_name.to_str().and_then(parse_name).is_none() {
                    continue;
                }
                // Gone meanwhile (another process's sweep): not counted.
                let Ok(meta) = file.metadata() else { continue };
                entries.push(Entry {
                    path: file.path(),
                    object: name.to_owned(),
                    bytes: meta.len(),
                    used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
        Ok(entries)
    }

    /// Removes the least recently used entries until the directory holds at most
    /// [`LOW_WATER_PERCENT`] of the bound. Another sweep running (this process) is
    /// enough.
    fn sweep(&self) -> io::Result<()> {
        let Ok(_sweeping) = self.sweeping.try_lock() else {
            return Ok(());
        };
        let mut entries = self.walk()?;
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let target = self.max_bytes / 100 * LOW_WATER_PERCENT;
        entries.sort_by_key(|e| e.used);
        let mut removed: Vec<(String, u64)> = Vec::new();
        for entry in entries {
            if total <= target {
                break;
            }
            // Another process may have removed it first: gone either way.
            let _ = fs::remove_file(&entry.path);
            total = total.saturating_sub(entry.bytes);
            let start = entry
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_name)
                .map_or(0, |r| r.start);
            removed.push((entry.object, start));
        }
        self.evicted_entries
            .fetch_add(removed.len() as u64, Ordering::Relaxed);
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        for (object, start) in removed {
            if let Some(entries) = index.get_mut(&object) {
                entries.remove(&start);
            }
        }
        self.known_bytes.store(total, Ordering::Relaxed);
        Ok(())
    }
}

/// One entry file as a sweep sees it.
#[derive(Debug)]
struct Entry {
    path: PathBuf,
    object: String,
    bytes: u64,
    used: SystemTime,
}

fn entry_name(range: &Range<u64>) -> String {
    format!("{}-{}", range.start, range.end)
}

/// `start-end` as a range (non-empty), else `None`.
fn parse_name(name: &str) -> Option<Range<u64>> {
    let (start, end) = name.split_once('-')?;
    let (start, end) = (start.parse().ok()?, end.parse().ok()?);
    (start < end).then_some(start..end)
}

fn entry_header(key: &ObjectKey, range: &Range<u64>, bytes: &[u8]) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[..8].copy_from_slice(MAGIC);
    let key_len = u32::try_from(key.text.len()).unwrap_or(u32::MAX);
    header[8..12].copy_from_slice(&key_len.to_le_bytes());
    header[12..20].copy_from_slice(&range.start.to_le_bytes());
    header[20..28].copy_from_slice(&range.end.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(key.text.as_bytes()), bytes);
    header[28..32].copy_from_slice(&crc.to_le_bytes());
    header
}

/// The bytes of entry `raw`, if it is whole and is `key`'s `range`; else an
/// `InvalidData` error saying what is wrong.
fn check_entry(raw: &[u8], key: &ObjectKey, range: &Range<u64>) -> io::Result<Bytes> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    if raw.len() < HEADER_BYTES || &raw[..8] != MAGIC {
        return Err(bad("no entry header"));
    }
    let word = |at: usize| u64::from_le_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
    let key_len = u32::from_le_bytes(raw[8..12].try_into().expect("4 bytes")) as usize;
    if key_len > MAX_KEY_BYTES || word(12) != range.start || word(20) != range.end {
        return Err(bad("the header names another range"));
    }
    let body = &raw[HEADER_BYTES..];
    let len = usize::try_from(range.end - range.start).map_err(|_| bad("range too long"))?;
    if body.len() != key_len + len {
        return Err(bad("truncated or overlong"));
    }
    let (text, bytes) = body.split_at(key_len);
    if text != key.text.as_bytes() {
        return Err(bad("another object's entry"));
    }
    let crc = u32::from_le_bytes(raw[28..32].try_into().expect("4 bytes"));
    if crc32c::crc32c_append(crc32c::crc32c(text), bytes) != crc {
        return Err(bad("checksum mismatch"));
    }
    Ok(Bytes::copy_from_slice(bytes))
}

fn remove_stale_temps(dir: &Path) {
    let Ok(files) = fs::read_dir(dir) else { return };
    for file in files.flatten() {
        let old = file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_TEMP);
        if old {
            let _ = fs::remove_file(file.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(tag: &str, size: u64) -> ObjectVersion {
        ObjectVersion {
            size,
            e_tag: Some(tag.to_owned()),
            modified_ns: 0,
        }
    }

    fn bytes_of(pieces: &[Piece]) -> (Vec<u8>, Vec<Range<u64>>) {
        let mut cached = Vec::new();
        let mut missing = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Cached(b) => cached.extend_from_slice(b),
                Piece::Missing(r) => missing.push(r.clone()),
            }
        }
        (cached, missing)
    }

    #[test]
    fn reads_are_served_from_entries_and_gaps_reported() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let key = ObjectKey::new("s3://b/k", &version("\"a\"", 10_000));
        let cache = RangeCache::open(dir.path(), 1 << 20).unwrap();
        cache.store(&key, 100..200, &data[100..200]);
        cache.store(&key, 300..400, &data[300..400]);
        // A second process over the same directory sees them.
        let other = RangeCache::open(dir.path(), 1 << 20).unwrap();
        let pieces = other.lookup(&key, 150..350);
        let (cached, missing) = bytes_of(&pieces);
        assert_eq!(missing, vec![200..300]);
        assert_eq!(cached, [&data[150..200], &data[300..350]].concat());
        assert!(matches!(&pieces[0], Piece::Cached(b) if b.len() == 50));
        // Another version of the object shares nothing.
        let rewritten = ObjectKey::new("s3://b/k", &version("\"b\"", 10_000));
        let (cached, missing) = bytes_of(&other.lookup(&rewritten, 100..200));
        assert!(cached.is_empty());
        assert_eq!(missing, vec![100..200]);
    }

    #[test]
    fn a_damaged_entry_is_removed_and_never_served() {
        let dir = tempfile::tempdir().unwrap();
        let key = ObjectKey::new("s3://b/k", &version("\"a\"", 1000));
        let cache = RangeCache::open(dir.path(), 1 << 20).unwrap();
        let good = vec![7u8; 100];
        for (range, damage) in [
            (0..100u64, "truncate"),
            (200..300, "flip"),
            (400..500, "empty"),
        ] {
            cache.store(&key, range.clone(), &good);
            let path = dir.path().join(&key.dir).join(entry_name(&range));
            let mut raw = fs::read(&path).unwrap();
            match damage {
                "truncate" => raw.truncate(raw.len() - 1),
                "flip" => *raw.last_mut().unwrap() ^= 1,
                _ => raw.clear(),
            }
            fs::write(&path, raw).unwrap();
            let fresh = RangeCache::open(dir.path(), 1 << 20).unwrap();
            let (cached, missing) = bytes_of(&fresh.lookup(&key, range.clone()));
            assert!(cached.is_empty(), "{damage}");
            assert_eq!(missing, vec![range], "{damage}");
            assert_eq!(fresh.stats().corrupt_entries, 1, "{damage}");
            assert!(!path.exists(), "{damage}");
        }
    }

    #[test]
    fn the_least_recently_used_entries_go_first_and_the_bound_holds() {
        let dir = tempfile::tempdir().unwrap();
        let key = ObjectKey::new("s3://b/k", &version("\"a\"", 1 << 20));
        let entry = HEADER_BYTES as u64 + key.text.len() as u64 + 1000;
        let cache = RangeCache::open(dir.path(), entry * 10).unwrap();
        let old = SystemTime::now() - Duration::from_secs(100);
        for i in 0..8u64 {
            cache.store(&key, i * 1000..(i + 1) * 1000, &[i as u8; 1000]);
            let path = dir
                .path()
                .join(&key.dir)
                .join(entry_name(&(i * 1000..(i + 1) * 1000)));
            let file = File::options().write(true).open(path).unwrap();
            file.set_modified(old + Duration::from_secs(i)).unwrap();
        }
        // Entry 0 used last: it stays, entries 1.. go first.
        assert_eq!(bytes_of(&cache.lookup(&key, 0..1000)).0, vec![0u8; 1000]);
        for i in 8..12u64 {
            cache.store(&key, i * 1000..(i + 1) * 1000, &[i as u8; 1000]);
        }
        let on_disk: u64 = cache.walk().unwrap().iter().map(|e| e.bytes).sum();
        assert!(on_disk <= entry * 10, "{on_disk}");
        let fresh = RangeCache::open(dir.path(), entry * 10).unwrap();
        let (_, missing) = bytes_of(&fresh.lookup(&key, 0..12_000));
        assert!(!missing.contains(&(0..1000)), "{missing:?}");
        assert!(missing.iter().any(|r| r.contains(&1000)), "{missing:?}");
        assert!(bytes_of(&fresh.lookup(&key, 11_000..12_000)).1.is_empty());
    }
}
