//! Helpers shared by the root integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Python of a virtual environment with `tests/interop/requirements.txt` installed
/// (DuckDB, pyarrow), created on first use under cargo's target directory; or why there
/// is none.
pub fn python() -> Result<&'static Path, &'static str> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(make_venv) {
        Ok(p) => Ok(p.as_path()),
        Err(why) => Err(why.as_str()),
    }
}

fn make_venv() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-venv");
    let python = venv.join("bin/python");
    let ready = |py: &Path| {
        Command::new(py)
            .args(["-c", "import duckdb, pyarrow"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if python.exists() && ready(&python) {
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
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(root.join("tests/interop/requirements.txt"))
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !out.status.success() || !ready(&python) {
        return Err(format!(
            "cannot install duckdb and pyarrow: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(python)
}

/// Whether a skipped interop test must fail instead (`RINGSCAN_REQUIRE_INTEROP=1`).
pub fn interop_required() -> bool {
    std::env::var("RINGSCAN_REQUIRE_INTEROP").as_deref() == Ok("1")
}
