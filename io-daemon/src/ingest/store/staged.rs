//! A statement too large to hold in memory until it ends (a long `COPY`, a big file for
//! `ringscan ingest`), written ahead in parts.
//!
//! Each part is checked (types, `NOT NULL`, the primary key) and written as a sorted,
//! synced Parquet file under a hidden temporary name, which no scan and no reader of
//! the directory takes for data. When the statement ends, [`Ingest::adopt`] renames its
//! files and adds them to the table's manifest in one durable update: every scan after
//! it sees all of the statement's rows, none before. A statement that fails, is
//! discarded, or whose connection ends leaves nothing: its files are removed, and
//! recovery removes those a crash left (they are temporary files the manifest does not
//! name). The log never carries these rows: the files are their durable copy, written
//! once.
//!
//! The primary key stays exact. A part's keys are checked against each other, against
//! the table's files, and against the statement's earlier parts (their files' keys in
//! brief, [`FileKeys`]). At adoption, with flushes and compactions held off, the
//! statement's files are checked against the rows in memory and the commits on their
//! way, and against the files the table gained since the first part; then, under the
//! table's lock, against the rows that arrived meanwhile. A commit checked after that
//! sees the new files as it sees a flush's (they join a newer file generation).

use super::*;

/// A statement's parts written so far: see the module's doc. Dropping it removes them.
#[derive(Debug)]
pub struct Staged {
    table: Arc<Table>,
    statement: u64,
    /// What its files' names share (unique to the statement).
    stem: String,
    /// Each part's temporary path, what the manifest will say of it, and its keys.
    files: Vec<(PathBuf, ManifestFile, Option<Arc<FileKeys>>)>,
    /// Parts taken (a part without rows makes no file).
    parts: u64,
    rows: u64,
    /// The table's file generation when the first part was checked against its files.
    file_gen: u64,
}

impl Drop for Staged {
    fn drop(&mut self) {
        for (path, _, _) in &self.files {
            let _ = fs::remove_file(path);
        }
    }
}

impl Staged {
    /// Rows staged so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The parts' files (their temporary paths).
    #[cfg(test)]
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|(p, _, _)| p.clone()).collect()
    }
}

impl Ingest {
    /// Stages `record` (an Arrow IPC stream of rows, read off the socket) as part
    /// `part` (from 0) of statement `statement` into table `name`; returns the
    /// statement's rows so far. `staged` is the connection's staged statement: one of
    /// another statement or table is dropped first (a client that moved on abandoned
    /// it), a part out of turn is refused (its earlier parts are not here), and a part
    /// that fails drops the whole statement.
    pub fn stage(
        &self,
        staged: &mut Option<Staged>,
        name: &str,
        (statement, part): (u64, u64),
        record: InsertRecord,
    ) -> Result<u64, String> {
        let Some(table) = self.table(name) else {
            *staged = None;
            return Err(self.no_table(name));
        };
        if staged
            .as_ref()
            .is_some_and(|s| s.statement != statement || !Arc::ptr_eq(&s.table, &table))
        {
            *staged = None;
        }
        let taken = staged.as_ref().map_or(0, |s| s.parts);
        if part != taken {
            *staged = None;
            return Err(gone(name, &format!("part {part} came after {taken}")));
        }
        let result = Self::stage_part(staged, table, statement, record);
        if result.is_err() {
            *staged = None;
        }
        result
    }

    fn stage_part(
        staged: &mut Option<Staged>,
        table: Arc<Table>,
        statement: u64,
        record: InsertRecord,
    ) -> Result<u64, String> {
        let InsertRecord { buf, stream, .. } = record;
        let (_, batches) = ringscan_ipc::msg::read_ipc_buffer(Buffer::from_vec(buf).slice(stream))
            .map_err(|e| format!("copy into {}: the rows do not decode: {e}", table.name))?;
        let before = staged.as_ref().map_or(0, Staged::rows);
        let batches = table.conform_from(batches, before)?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let (files, file_gen) = table.files_now();
        let s = staged.get_or_insert_with(|| {
            let stamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            Staged {
                table: Arc::clone(&table),
                statement,
                stem: format!("s{stamp}-{}", std::process::id()),
                files: Vec::new(),
                parts: 0,
                rows: 0,
                file_gen,
            }
        });
        if rows == 0 {
            s.parts += 1;
            return Ok(s.rows);
        }
        let keys = table.keys_of(&batches)?;
        // Whether the part's rows are already in key order (true without a key).
        let mut rising = true;
        if keys.len() > 0 {
            // Within the part: rows in rising key order (a load in key or time order)
            // cannot repeat one; others go through an index, whose exact check compares
            // the two rows' keys.
            rising = keys.iter().zip(keys.iter().skip(1)).all(|(a, b)| a < b);
            if !rising {
                let mut seen = KeyIndex::default();
                let same = |i: usize, row: u64| {
                    usize::try_from(row).is_ok_and(|r| r < keys.len() && keys.key(r) == keys.key(i))
                };
                if let Err((i, _)) = seen.insert_new_all(&keys.fingerprints, 0, same) {
                    return Err(table.duplicate(&batches, keys.at(i)));
                }
            }
            let earlier: Vec<Arc<FileKeys>> =
                s.files.iter().filter_map(|(_, _, k)| k.clone()).collect();
            for against in [&files, &earlier] {
                if let Some(i) = table.first_in(against, &keys)? {
                    return Err(table.duplicate(&batches, keys.at(i)));
                }
            }
        }
        let file_name = format!("part-{}-{:05}.parquet", s.stem, s.files.len());
        drop(keys);
        // A part in key order (a load in key or time order) is written as it came: no
        // copy of it concatenated, none sorted.
        let (temp, written) = if rising {
            table.write_sorted(&file_name, &mut batches.into_iter().map(Ok))?
        } else {
            table.write_temp(&file_name, &batches)?
        };
        let file_keys = match &table.converter {
            None => None,
            Some(converter) => match FileKeys::load(&temp, &table.key, converter, 0, false) {
                Ok(k) => Some(Arc::new(k)),
                Err(e) => {
                    let _ = fs::remove_file(&temp);
                    return Err(e);
                }
            },
        };
        s.files.push((temp, written, file_keys));
        s.parts += 1;
        s.rows += rows;
        Ok(s.rows)
    }

    /// Commits statement `statement` into table `name` from its staged parts (see the
    /// module's doc); returns its rows. On an error nothing of it is applied and its
    /// files are removed.
    pub fn adopt(
        &self,
        staged: Option<Staged>,
        name: &str,
        (statement, parts): (u64, u64),
    ) -> Result<u64, String> {
        let Some(mut staged) =
            staged.filter(|s| s.statement == statement && s.table.name == name && s.parts == parts)
        else {
            return Err(gone(name, "they are not all on this connection"));
        };
        let table = Arc::clone(&staged.table);
        let dropped = || format!("relation \"{}\" was dropped", table.name);
        let ours: Vec<Arc<FileKeys>> = staged
            .files
            .iter()
            .filter_map(|(_, _, k)| k.clone())
            .collect();
        // No flush or compaction moves rows into new files while this checks.
        let _flush = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        let (seen_to, abandoned) = {
            let (held, newer, seen_to, abandoned) = {
                let state = lock_read(&table.state);
                if state.dropped {
                    return Err(dropped());
                }
                let mut held = state.mem.batches();
                held.extend(state.pending.iter().flat_map(|(_, b)| b.iter().cloned()));
                let newer: Vec<PathBuf> = state
                    .file_keys
                    .iter()
                    .filter(|(_, k)| k.added > staged.file_gen)
                    .map(|(n, _)| table.dir.join(n))
                    .collect();
                let seen_to = state.next_id.max(state.mem.next_row());
                (held, newer, seen_to, state.abandoned)
            };
            if !ours.is_empty() {
                table.check_staged(&ours, &held)?;
                for path in newer {
                    file_keys::read_keys(&path, &table.key, None, &mut |columns| {
                        table.check_staged_keys(&ours, columns)
                    })?;
                }
            }
            (seen_to, abandoned)
        };
        let mut state = lock_write(&table.state);
        if state.dropped {
            return Err(dropped());
        }
        if !ours.is_empty() {
            // The rows that arrived since the check above (a few, on a busy table): the
            // ids from `seen_to` on, unless a commit was abandoned meanwhile and handed
            // its ids back to later ones (a failed write: then every row held).
            let from = if state.abandoned == abandoned {
                seen_to
            } else {
                0
            };
            let mut since: Vec<RecordBatch> = (from..state.mem.next_row())
                .filter_map(|id| state.mem.row(id))
                .collect();
            since.extend(
                state
                    .pending
                    .iter()
                    .filter(|(first, _)| *first >= from)
                    .flat_map(|(_, b)| b.iter().cloned()),
            );
            table.check_staged(&ours, &since)?;
        }
        // Published: renamed to data files' names (the parts' bytes were synced when
        // written), the directory synced, then the manifest that names them.
        let mut published = Vec::with_capacity(staged.files.len());
        let mut result = Ok(());
        for (temp, written, _) in &staged.files {
            let path = table.dir.join(&written.name);
            if let Err(e) = fs::rename(temp, &path) {
                result = Err(format!("{}: cannot write: {e}", path.display()));
                break;
            }
            published.push(path);
        }
        let mut manifest = state.manifest.clone();
        manifest
            .files
            .extend(staged.files.iter().map(|(_, w, _)| w.clone()));
        let result = result
            .and_then(|()| sync_dir(&table.dir).map_err(|e| e.to_string()))
            .and_then(|()| manifest.store(&table.dir).map_err(|e| e.to_string()));
        if let Err(e) = result {
            drop(state);
            for path in published {
                let _ = fs::remove_file(path);
            }
            return Err(e);
        }
        state.manifest = manifest;
        drop(ours);
        for (_, written, keys) in std::mem::take(&mut staged.files) {
            let path = table.dir.join(&written.name);
            let keys = match keys.map(Arc::try_unwrap) {
                None => Ok(None),
                Some(Ok(k)) => Ok(Some(k.moved_to(path))),
                // Still shared (it cannot be: `ours` is gone): read again.
                Some(Err(_)) => table.file_keys(&written.name, false),
            };
            match keys {
                Ok(keys) => table.add_file(&mut state, written.name, keys),
                // Not reachable in practice (the keys were in hand). The statement is
                // committed; say so with the cause, since later statements' keys are
                // not checked against this file until the daemon restarts.
                Err(e) => {
                    return Err(format!(
                        "copy into {}: committed, but its file's keys could not be read                          back: {e}",
                        table.name
                    ))
                }
            }
        }
        self.tables.version.bump();
        Ok(staged.rows)
    }
}

/// Why a staged statement cannot go on: its earlier parts are not here.
fn gone(table: &str, why: &str) -> String {
    format!(
        "copy into {table}: the statement's staged rows are gone ({why}: the connection to the \
         IO daemon was lost, or a later statement replaced it): nothing of it was written"
    )
}

impl Table {
    /// Refuses the first row of `batches` whose key one of the staged files `staged`
    /// holds.
    fn check_staged(
        &self,
        staged: &[Arc<FileKeys>],
        batches: &[RecordBatch],
    ) -> Result<(), String> {
        let keys = self.keys_of(batches)?;
        match self.first_in(staged, &keys)? {
            Some(i) => Err(self.duplicate(batches, keys.at(i))),
            None => Ok(()),
        }
    }

    /// [`Self::check_staged`] of a file's key columns (in key order).
    fn check_staged_keys(
        &self,
        staged: &[Arc<FileKeys>],
        columns: &[ArrayRef],
    ) -> Result<(), String> {
        let converter = self.key_converter()?;
        let rows = converter
            .convert_columns(columns)
            .map_err(|e| format!("table {}: its key: {e}", self.name))?;
        let found = file_keys::first_in_files(
            staged,
            rows.iter().map(|r| r.data()).enumerate(),
            &self.key,
            converter,
        )?;
        match found {
            Some(r) => {
                let columns: Vec<&dyn Array> = columns.iter().map(|c| c.as_ref()).collect();
                Err(self.duplicate_key(&columns, r))
            }
            None => Ok(()),
        }
    }
}
