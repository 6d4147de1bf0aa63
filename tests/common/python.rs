//! The Python side of the integration tests: a virtual environment made on first use
//! (under cargo's target directory) from `tests/interop/requirements.txt`, with DuckDB
//! pyarrow and psycopg. Without Python or the package registry a test is skipped with the reason
//! printed, unless `RINGSCAN_REQUIRE_INTEROP=1` (CI sets it), which makes it a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The venv's python, or why there is none.
pub(crate) fn python() -> Result<&'static Path, &'static str> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(make_venv) {
        Ok(p) => Ok(p.as_path()),
        Err(why) => Err(why.as_str()),
    }
}

fn make_venv() -> Result<PathBuf, String> {
    // The workspace root: this file is shared by crates at different depths.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("tests/interop/requirements.txt").is_file())
        .ok_or("tests/interop/requirements.txt not found above the crate")?;
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-venv");
    let python = venv.join("bin/python");
    let ready = |py: &Path| {
        Command::new(py)
            .args(["-c", "import duckdb, pyarrow, pytz, psycopg"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // The venv holds what the requirements named when it was made; new requirements
    // (a package added, a pin moved) make it again.
    let requirements = root.join("tests/interop/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let stamp = venv.join("requirements.installed");
    let installed = std::fs::read_to_string(&stamp).unwrap_or_default();
    if python.exists() && installed == wanted && ready(&python) {
        return Ok(python);
    }
    let host = std::env::var("RINGSCAN_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&host)
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("no Python interpreter ({host}: {e})"))?;
    if !out.status.success() {
        return Err(format!(
            "`{host} -m venv` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&requirements)
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !out.status.success() || !ready(&python) {
        return Err(format!(
            "cannot install duckdb and pyarrow: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::fs::write(&stamp, wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(python)
}

/// The venv's python, or `None` after saying why the test is skipped.
pub(crate) fn python_or_skip(test: &str) -> Option<&'static Path> {
    or_skip(test, "Python (duckdb, pyarrow)", python())
}

/// What an interop installer gave (`found`), or `None` after saying why `test` is
/// skipped without it (`needs`: what it needs, in words); under
/// `RINGSCAN_REQUIRE_INTEROP=1` (CI) a skip is a failure instead.
pub(crate) fn or_skip<T>(test: &str, needs: &str, found: Result<T, &str>) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(why) => {
            assert!(
                std::env::var("RINGSCAN_REQUIRE_INTEROP").as_deref() != Ok("1"),
                "test {test} needs {needs} and RINGSCAN_REQUIRE_INTEROP=1 is set: {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}
