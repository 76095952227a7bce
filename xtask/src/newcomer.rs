//! `cargo xtask newcomer`: the README's two commands as a newcomer runs them, on a fresh
//! clone (issue 12). The build script of `roce-hdl-sim` once found no Verilator during
//! the first command, and cargo kept that verdict after `cargo xtask ci` had installed
//! it, so CI's RTL tests refused to skip and `--backend rtl` stayed "unavailable".
//!
//! On a fresh clone of this repository's HEAD, in a target directory of its own, with a
//! PATH that is a directory of links to every program on the real PATH except
//! Verilator's (a machine without it):
//!
//! 1. **The README's order.** Its first command, `cargo run --release -p roce-cli --
//!    perf write_bw` (fewer iterations), works, and its build says the RTL is
//!    unavailable (the premise). Then Verilator appears in that same PATH directory,
//!    as `apt-get install verilator` (what `cargo xtask ci` runs) puts it in `/usr/bin`,
//!    and what failed then passes: `CI=true cargo test --release -p roce-hdl-sim --test
//!    differential`, the RTL tests that refuse to skip under CI.
//! 2. **Verilator later, `--backend rtl`.** In the same clone, `roce perf write_bw
//!    --backend rtl` (built first without Verilator) now runs on the Verilated
//!    datapath.

use crate::cmd::{self, cmd, Result};
use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What marks the programs of the Verilator package.
const VERILATOR_PREFIX: &str = "verilator";
/// The build script's verdict when it finds no Verilator.
const UNAVAILABLE: &str = "RTL simulation unavailable";

pub fn newcomer(root: &Path) -> Result {
    crate::install::all(root)?;
    let work = root.join("target/newcomer");
    if work.exists() {
        fs::remove_dir_all(&work).map_err(|e| format!("remove {}: {e}", work.display()))?;
    }
    let clone = work.join("repo");
    let bin = work.join("bin");
    fs::create_dir_all(&bin).map_err(|e| format!("create {}: {e}", bin.display()))?;
    let mut git = cmd("git", &["clone", "--quiet"]);
    git.arg(root).arg(&clone);
    cmd::run(&mut git)?;
    let verilator_dir = shadow_path(&bin)?;
    let cargo = |args: &[&str]| {
        let mut c = cmd("cargo", args);
        c.current_dir(&clone)
            .env("PATH", &bin)
            .env("CARGO_TARGET_DIR", work.join("target"))
            .env_remove("CI");
        c
    };

    // The README's first command, with fewer iterations, and `extra` options.
    let perf = |extra: &[&str]| {
        let readme = [
            "run",
            "--release",
            "-p",
            "roce-cli",
            "--",
            "perf",
            "write_bw",
        ];
        output(&mut cargo(&[&readme[..], extra].concat()))
    };

    println!("\n-- 1. the README's first command, with no Verilator on PATH");
    let out = perf(&["-n", "200"])?;
    if !out.contains(UNAVAILABLE) {
        return Err(format!(
            "the first build found a Verilator: the check proves nothing (no \"{UNAVAILABLE}\")"
        ));
    }
    println!("\n-- Verilator appears on the same PATH (as apt-get puts it in /usr/bin)");
    link_verilator(&verilator_dir, &bin)?;
    println!("\n-- then what `cargo xtask ci` runs of the RTL, under CI=true");
    let mut tests = cargo(&[
        "test",
        "--release",
        "-p",
        "roce-hdl-sim",
        "--test",
        "differential",
    ]);
    let out = output(tests.env("CI", "true"))?;
    if out.contains(UNAVAILABLE) {
        return Err("the build after Verilator appeared still says it is unavailable".into());
    }

    println!("\n-- 2. `roce perf --backend rtl` in the same clone, after Verilator appeared");
    let out = perf(&["--backend", "rtl", "-n", "50"])?;
    if !out.contains("#bytes") || out.contains(UNAVAILABLE) {
        return Err("`roce perf --backend rtl` did not run on the RTL".into());
    }
    println!("\nxtask newcomer: the README's order works on a fresh clone, and a Verilator installed after the first build is used");
    Ok(())
}

/// Fills `bin` with links to every program on PATH (the first of each name) except
/// Verilator's; returns the directory Verilator's programs are in.
fn shadow_path(bin: &Path) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut seen = HashSet::new();
    let mut verilator = None;
    for dir in std::env::split_paths(&path).filter(|d| d.is_dir()) {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(VERILATOR_PREFIX) {
                verilator.get_or_insert_with(|| dir.clone());
                continue;
            }
            if seen.insert(name.clone()) {
                link(&entry.path(), &bin.join(&name))?;
            }
        }
    }
    verilator.ok_or_else(|| "no Verilator on PATH to install later (cargo xtask install)".into())
}

/// Links Verilator's programs from `from` into `bin`.
fn link_verilator(from: &Path, bin: &Path) -> Result {
    let entries = fs::read_dir(from).map_err(|e| format!("read {}: {e}", from.display()))?;
    let mut names: Vec<OsString> = entries
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with(VERILATOR_PREFIX))
        .collect();
    names.sort();
    for name in names {
        println!("  {}", name.to_string_lossy());
        link(&from.join(&name), &bin.join(&name))?;
    }
    Ok(())
}

fn link(target: &Path, at: &Path) -> Result {
    std::os::unix::fs::symlink(target, at)
        .map_err(|e| format!("link {} to {}: {e}", at.display(), target.display()))
}

/// Runs `command`, prints what it printed, and returns stdout and stderr together; an
/// error if it failed.
fn output(command: &mut Command) -> Result<String> {
    println!("$ {}", cmd::display(command));
    let o = command
        .output()
        .map_err(|e| format!("cannot start `{}`: {e}", cmd::display(command)))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for line in text
        .lines()
        .filter(|l| !l.trim_start().starts_with("Compiling"))
    {
        println!("  {line}");
    }
    if o.status.success() {
        Ok(text)
    } else {
        Err(format!("`{}` failed ({})", cmd::display(command), o.status))
    }
}
