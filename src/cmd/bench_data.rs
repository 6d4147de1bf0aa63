//! The data of `ringscan bench` suites: generated on first use, regenerated when the
//! suite's data spec changed (another `--rows`), with the derived parameters cached.
//!
//! Layout: `<root>/<suite>/<table>/*.parquet` (the suite directory is what
//! `ringscan query --data` gets), `<root>/<suite>/.bench/{spec,params}.json`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ringscan_benches::suites::{self, DataSpec, Params, SuiteKind, SuiteSpec};
use ringscan_generator::{DatasetKind, GenerateOptions};

use super::generate::run_generator;

/// A suite's data, ready.
#[derive(Debug)]
pub(crate) struct SuiteData {
    /// `<root>/<suite>`.
    pub(crate) dir: PathBuf,
    /// What was generated.
    pub(crate) spec: Option<DataSpec>,
    /// Derived numbers.
    pub(crate) params: Params,
}

impl SuiteData {
    /// The suite's scenarios and targets, for `--list-json` and the sides.
    pub(crate) fn suite_spec(&self, suite: SuiteKind) -> SuiteSpec {
        let dir = std::fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone());
        SuiteSpec {
            suite,
            data_dir: dir.display().to_string(),
            data: self.spec.clone(),
            params: self.params.clone(),
            scenarios: suites::scenarios(suite, &self.params),
            targets: suites::targets(suite),
        }
    }
}

/// The generator options that write `spec` into `out`.
pub(crate) fn generate_options(spec: &DataSpec, out: PathBuf) -> anyhow::Result<GenerateOptions> {
    let dataset = match spec.dataset.as_str() {
        "ohlcv" => DatasetKind::Ohlcv,
        "wide" => DatasetKind::Wide,
        "contacts" => DatasetKind::Contacts,
        other => anyhow::bail!("unknown dataset {other:?} in a bench data spec"),
    };
    let mut opts = GenerateOptions::new(dataset, out);
    opts.rows = spec.rows;
    opts.seed = spec.seed;
    opts.symbols = spec.symbols;
    opts.row_group_rows = spec.row_group_rows;
    opts.page_rows = spec.page_rows;
    opts.overwrite = true;
    opts.validate()?;
    Ok(opts)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Makes sure `suite`'s data exists under `root` (generating it if missing or written
/// with another spec) and returns it. The `generate` suite's data is what it measures,
/// so nothing is generated for it here.
pub(crate) fn ensure(
    suite: SuiteKind,
    root: &Path,
    rows: Option<u64>,
) -> anyhow::Result<SuiteData> {
    let dir = root.join(suite.name());
    let spec = suites::data_spec(suite, rows);
    let meta = dir.join(".bench");
    let (spec_file, params_file) = (meta.join("spec.json"), meta.join("params.json"));
    let Some(data) = spec.clone().filter(|_| suite != SuiteKind::Generate) else {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        return Ok(SuiteData {
            dir,
            spec,
            params: Params::new(),
        });
    };
    let table_dir = dir.join(data.table());
    let have_files = ringscan_benches::baseline::parquet_files(&table_dir).is_ok();
    let same_spec = read_json::<DataSpec>(&spec_file).as_ref() == Some(&data);
    if !(have_files && same_spec) {
        eprintln!(
            "ringscan bench: generating {} ({} rows, seed {}) into {}",
            data.dataset,
            data.rows,
            data.seed,
            table_dir.display()
        );
        let _ = std::fs::remove_file(&params_file);
        let opts = generate_options(&data, table_dir)?;
        run_generator(&opts, false)?;
        write_json(&spec_file, &data)?;
    }
    let params = match read_json::<Params>(&params_file) {
        Some(p) if same_spec && have_files => p,
        _ => {
            let p = suites::derive_params(suite, &dir)
                .with_context(|| format!("reading the {} data", suite.name()))?;
            write_json(&params_file, &p)?;
            p
        }
    };
    Ok(SuiteData {
        dir,
        spec: Some(data),
        params,
    })
}
