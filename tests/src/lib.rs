//! Helpers shared by the integration tests in `tests/tests/`: where the vectors and the
//! oracle scripts are, scratch files, and running an external tool.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `tests/data/vectors`: the shared corpus, copied into the project.
pub fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/vectors")
}

/// `tests/tools`: the oracle scripts, copied unchanged from `shared/tools`.
pub fn tool(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools")
        .join(name)
}

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("roce-tests-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Whether `program` can be run. When it cannot, a test that needs it is skipped with a
/// message, except under CI (`CI=true`), where a missing oracle is a failure: `cargo xtask
/// ci` installs it.
pub fn have(program: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is required under CI"
        );
        eprintln!("skipped: {program} is not installed (cargo xtask ci installs it)");
    }
    found
}

/// Runs `python3 SCRIPT ARGS...`; returns (success, stdout + stderr).
pub fn python(script: &Path, args: &[&Path]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("run python3");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The last `N passed, N failed` line of an oracle's output, as (passed, failed).
pub fn tally(output: &str) -> Option<(usize, usize)> {
    output.lines().rev().find_map(|l| {
        let (p, f) = l.trim().split_once(" passed, ")?;
        let f = f.strip_suffix(" failed")?;
        Some((p.parse().ok()?, f.parse().ok()?))
    })
}
