//! Stamps the binary with its git revision (for run records), when built from a
//! checkout with git on the PATH; otherwise the records say the revision is unknown.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    let revision = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    if let Some(revision) = revision {
        println!("cargo:rustc-env=RINGSCAN_GIT_REVISION={revision}");
    }
}
