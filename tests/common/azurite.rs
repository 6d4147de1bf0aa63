//! Azurite, Microsoft's Azure Blob Storage emulator, for the `az://` tests: installed on
//! first use with `npm ci` under cargo's target directory from
//! `tests/interop/azurite/package-lock.json` (the machine's Node.js and npm; no global
//! install), started on a free loopback port per test and killed when dropped. Without
//! npm or the registry a test is skipped with the reason printed, unless
//! `RINGSCAN_REQUIRE_INTEROP=1` (CI sets it), which makes it a failure.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The emulator's one account and its key, as every Azure SDK knows them.
pub(crate) const ACCOUNT: &str = "devstoreaccount1";
pub(crate) const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The installed `azurite-blob` command, or why there is none.
pub(crate) fn azurite_blob() -> Result<&'static Path, &'static str> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BIN.get_or_init(install) {
        Ok(p) => Ok(p.as_path()),
        Err(why) => Err(why.as_str()),
    }
}

fn install() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("tests/interop/azurite/package.json").is_file())
        .ok_or("tests/interop/azurite/package.json not found above the crate")?;
    let source = root.join("tests/interop/azurite");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("azurite");
    let bin = dir.join("node_modules/.bin/azurite-blob");
    let lock = std::fs::read_to_string(source.join("package-lock.json"))
        .map_err(|e| format!("cannot read {}/package-lock.json: {e}", source.display()))?;
    // The install holds what the lock named when it was made; a new lock installs again.
    let stamp = dir.join("lock.installed");
    if bin.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == lock) {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), dir.join(file))
            .map_err(|e| format!("cannot copy {file} into {}: {e}", dir.display()))?;
    }
    // The lock as written; no development packages, no install scripts (Azurite needs
    // none), no audit or funding requests.
    let out = Command::new("npm")
        .args([
            "ci",
            "--omit=dev",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
        ])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("no npm (Node.js) to install Azurite: {e}"))?;
    if !out.status.success() || !bin.exists() {
        return Err(format!(
            "`npm ci` of Azurite in {} failed ({}): {}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::fs::write(&stamp, lock).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(bin)
}

/// The `azurite-blob` command, or `None` after saying why `test` is skipped.
pub(crate) fn azurite_or_skip(test: &str) -> Option<&'static Path> {
    super::python::or_skip(test, "Azurite (npm)", azurite_blob())
}

/// One test's Azurite blob service on 127.0.0.1, its blobs in memory: killed and reaped
/// when dropped, on every path.
pub(crate) struct Azurite {
    child: Child,
    port: u16,
}

impl Azurite {
    /// Starts `azurite-blob` on a free loopback port (no telemetry: no traffic leaves
    /// the machine; stdin from /dev/null, output to `log`) and waits until it accepts
    /// connections.
    pub(crate) fn start(bin: &Path, log: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let out = File::create(log).expect("azurite log");
        let child = Command::new(bin)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .args([
                "--inMemoryPersistence",
                "--disableTelemetry",
                "--skipApiVersionCheck",
                "--silent",
            ])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        // Owned by the guard from here: a failure below kills and reaps it.
        let azurite = Self { child, port };
        super::wait_listening("azurite-blob", port, log);
        azurite
    }

    /// The blob service's address, as `AZURITE_BLOB_STORAGE_URL` takes it.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The account's endpoint (path style), as `AZURE_STORAGE_ENDPOINT` takes it.
    pub(crate) fn account_endpoint(&self) -> String {
        format!("{}/{ACCOUNT}", self.url())
    }

    /// A connection string for the Python SDK (`azure-storage-blob`).
    pub(crate) fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};\
             BlobEndpoint={};",
            self.account_endpoint()
        )
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
