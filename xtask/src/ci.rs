//! The checks `cargo xtask ci` runs, and the runner that times them and stops at the
//! first failure. Every command runs from the repository root.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cmd::{self, cmd, Result};
use crate::install;

/// Every check, in the order they run: the cheap ones first, so a formatting slip fails
/// in seconds rather than after the test suite. Adding a check is adding a line.
pub const STEPS: &[Step] = &[
    Step::custom("install", install),
    Step::cargo("fmt", &["fmt", "--all", "--check"]),
    Step::custom("layers", layers),
    Step::custom("timing", timing),
    Step::cargo(
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    ),
    Step::custom("doc", doc),
    // Release: the tests include heavy proptests and simulations.
    Step::cargo("test", &["test", "--workspace", "--release"]),
    Step::custom("bare-metal", bare_metal),
    Step::custom("fuzz", fuzz),
    Step::custom("firmware", firmware),
    Step::custom("soc", soc),
];

/// What the steps share.
pub struct Ctx {
    /// The repository root, absolute (it is also the current directory).
    pub root: PathBuf,
    /// Seconds per fuzz target; `None` picks [`default_fuzz_seconds`](crate::fuzz::default_fuzz_seconds).
    pub fuzz_seconds: Option<u64>,
}

pub struct Step {
    pub name: &'static str,
    action: Action,
}

enum Action {
    /// `cargo ARGS` at the root.
    Cargo(&'static [&'static str]),
    /// Anything else. It may find nothing to check yet and say so.
    Custom(fn(&Ctx) -> Result<Outcome>),
}

pub enum Outcome {
    Passed,
    Skipped(&'static str),
}

impl Step {
    const fn cargo(name: &'static str, args: &'static [&'static str]) -> Self {
        Step {
            name,
            action: Action::Cargo(args),
        }
    }

    const fn custom(name: &'static str, check: fn(&Ctx) -> Result<Outcome>) -> Self {
        Step {
            name,
            action: Action::Custom(check),
        }
    }

    fn run(&self, ctx: &Ctx) -> Result<Outcome> {
        match self.action {
            Action::Cargo(args) => cmd::run(&mut cmd("cargo", args)).map(|()| Outcome::Passed),
            Action::Custom(check) => check(ctx),
        }
    }
}

fn install(ctx: &Ctx) -> Result<Outcome> {
    install::all(&ctx.root).map(|()| Outcome::Passed)
}

/// The crate layering of `ARCHITECTURE.md`, checked with `cargo tree`.
fn layers(_: &Ctx) -> Result<Outcome> {
    crate::layers::check().map(|()| Outcome::Passed)
}

/// The datapath's timing record (`xtask/src/synth/record.rs`): the RTL that CI tests
/// is the RTL whose place and route closed its clock.
fn timing(ctx: &Ctx) -> Result<Outcome> {
    crate::synth::record::check(&ctx.root).map(|()| Outcome::Passed)
}

/// The API documentation builds without a warning: a broken intra-doc link is a
/// comment that points nowhere.
fn doc(_: &Ctx) -> Result<Outcome> {
    let mut doc = cmd("cargo", &["doc", "--workspace", "--no-deps"]);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    cmd::run(&mut doc).map(|()| Outcome::Passed)
}

/// Building the core for targets that have no `std` proves it does not use it. (Not
/// that it avoids `alloc`: these targets ship it, and only linking a binary without a
/// global allocator would fail.)
fn bare_metal(_: &Ctx) -> Result<Outcome> {
    install::rust_targets()?;
    for target in install::BARE_METAL_TARGETS {
        let args = ["build", "-p", "roce-core", "--target", target, "--release"];
        cmd::run(&mut cmd("cargo", &args))?;
    }
    Ok(Outcome::Passed)
}

/// The fuzz targets' smoke run (`xtask/src/fuzz.rs`).
fn fuzz(ctx: &Ctx) -> Result<Outcome> {
    if !Path::new(crate::fuzz::FUZZ_DIR).join("Cargo.toml").exists() {
        return Ok(Outcome::Skipped("no fuzz/ yet"));
    }
    crate::fuzz::smoke(ctx.fuzz_seconds).map(|_| Outcome::Passed)
}

/// The firmware image: its own workspace, since it only builds for riscv32 with its own
/// `.cargo/config.toml`, which cargo reads from the current directory only.
const FIRMWARE_DIR: &str = "firmware/image";

/// What the firmware step runs there; `run` boots the image in QEMU through the
/// runner in that `.cargo/config.toml`.
/// The image's own workspace: the fmt and clippy steps above cover the main workspace
/// only, so the image is held to the same two checks here before it is built and run.
const FIRMWARE_COMMANDS: &[&[&str]] = &[
    &["fmt", "--check"],
    &["clippy", "--release", "--", "-D", "warnings"],
    &["build", "--release"],
    &["run", "--release"],
];

fn firmware(ctx: &Ctx) -> Result<Outcome> {
    if !Path::new(FIRMWARE_DIR).join("Cargo.toml").exists() {
        return Ok(Outcome::Skipped("no firmware/image/ yet"));
    }
    let qemu_dir = install::qemu(&ctx.root)?;
    install::defmt_print()?;
    let path = prepend_to_path(&qemu_dir)?;
    for args in FIRMWARE_COMMANDS {
        let mut cargo = cmd("cargo", args);
        // `cargo xtask` runs us with RUSTUP_TOOLCHAIN set to its own toolchain, which
        // would override a rust-toolchain.toml in the image's workspace.
        cargo
            .current_dir(FIRMWARE_DIR)
            .env("PATH", &path)
            .env_remove("RUSTUP_TOOLCHAIN");
        cmd::run(&mut cargo)?;
    }
    Ok(Outcome::Passed)
}

/// The SoC model with the image `make-images.sh` writes: it boots and answers
/// QUERY_DEVICE (`hdl-sim/tests/soc.rs`), two SoCs run RC traffic through the host
/// driver (`device/tests/soc.rs`) and `roce perf --backend soc` (`tests/tests/perf.rs`). The test step skips these while the image is
/// missing; here it is made first and required. (With the image in place, a local
/// `cargo test` also runs `host-driver/tests`' suites on the SoC: minutes, not CI's.)
fn soc(ctx: &Ctx) -> Result<Outcome> {
    install::python_packages(&ctx.root, &[install::VEXRISCV])?;
    let mut images = cmd("./make-images.sh", &[]);
    images
        .current_dir(FIRMWARE_DIR)
        .env_remove("RUSTUP_TOOLCHAIN");
    cmd::run(&mut images)?;
    let args = [
        "test",
        "--release",
        "-p",
        "roce-hdl-sim",
        "--test",
        "soc",
        "-p",
        "roce-device",
        "--test",
        "soc",
    ];
    cmd::run(cmd("cargo", &args).env("ROCE_SOC_REQUIRED", "1"))?;
    // `roce perf --backend soc` (tests/tests/perf.rs, a few seconds).
    let perf = [
        "test",
        "--release",
        "-p",
        "roce-tests",
        "--test",
        "perf",
        "--",
        "on_two_socs",
    ];
    cmd::run(cmd("cargo", &perf).env("ROCE_SOC_REQUIRED", "1"))?;
    Ok(Outcome::Passed)
}

fn prepend_to_path(dir: &Path) -> Result<std::ffi::OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path));
    std::env::join_paths(dirs).map_err(|e| format!("cannot put {} on PATH: {e}", dir.display()))
}

/// The steps to run: all of them, minus `--skip`, or only `--only`.
#[derive(Default)]
pub struct Selection {
    only: Vec<String>,
    skip: Vec<String>,
}

impl Selection {
    pub fn only(name: &str) -> Self {
        Selection {
            only: vec![name.to_string()],
            skip: Vec::new(),
        }
    }

    /// Parses `--skip A,B`, `--only C` (also `--skip=A,B`); both may repeat.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut selection = Selection::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            let list = match flag {
                "--skip" => &mut selection.skip,
                "--only" => &mut selection.only,
                _ => return Err(format!("unknown argument `{arg}`")),
            };
            let value = inline
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("{flag} needs a step name"))?;
            for name in value.split(',').filter(|name| !name.is_empty()) {
                if !STEPS.iter().any(|step| step.name == name) {
                    return Err(format!("no step `{name}`; the steps are: {}", step_names()));
                }
                list.push(name.to_string());
            }
        }
        Ok(selection)
    }

    fn steps(&self) -> Vec<&'static Step> {
        let listed = |names: &[String], step: &Step| names.iter().any(|n| n == step.name);
        STEPS
            .iter()
            .filter(|step| self.only.is_empty() || listed(&self.only, step))
            .filter(|step| !listed(&self.skip, step))
            .collect()
    }
}

pub fn step_names() -> String {
    STEPS
        .iter()
        .map(|step| step.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a step ended, for the summary.
struct Record {
    name: &'static str,
    result: String,
    time: Duration,
}

/// Runs the selected steps in order, each under a header and timed; stops at the first
/// failure. `title` names the run in the last line (`xtask ci: ...`).
pub fn run(ctx: &Ctx, title: &str, selection: &Selection) -> Result {
    let steps = selection.steps();
    let mut records = Vec::new();
    let mut skipped = 0;
    for (number, step) in steps.iter().enumerate() {
        println!("\n==> [{}/{}] {}", number + 1, steps.len(), step.name);
        let start = Instant::now();
        let outcome = step.run(ctx);
        let time = start.elapsed();
        let result = match &outcome {
            Ok(Outcome::Passed) => "passed".to_string(),
            Ok(Outcome::Skipped(why)) => format!("skipped: {why}"),
            Err(_) => "FAILED".to_string(),
        };
        println!("<== {} {result} ({})", step.name, seconds(time));
        records.push(Record {
            name: step.name,
            result,
            time,
        });
        if let Err(error) = outcome {
            print_summary(title, &records, &steps);
            return Err(format!("step `{}` failed: {error}", step.name));
        }
        skipped += usize::from(matches!(outcome, Ok(Outcome::Skipped(_))));
    }
    print_summary(title, &records, &steps);
    let skipped = if skipped > 0 {
        format!(" ({skipped} skipped)")
    } else {
        String::new()
    };
    let all = match steps.len() {
        1 => "the 1 step".to_string(),
        n => format!("all {n} steps"),
    };
    println!("xtask {title}: {all} passed{skipped}");
    Ok(())
}

/// One line per selected step, including those a failure kept from running.
fn print_summary(title: &str, records: &[Record], steps: &[&Step]) {
    println!("\nxtask {title} summary:");
    for record in records {
        println!(
            "  {:<12} {:>8}  {}",
            record.name,
            seconds(record.time),
            record.result
        );
    }
    for step in &steps[records.len()..] {
        println!("  {:<12} {:>8}  not run", step.name, "");
    }
    let total: Duration = records.iter().map(|record| record.time).sum();
    println!("  {:<12} {:>8}", "total", seconds(total));
}

fn seconds(time: Duration) -> String {
    format!("{:.1}s", time.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    fn names(selection: &Selection) -> Vec<&'static str> {
        selection.steps().iter().map(|step| step.name).collect()
    }

    #[test]
    fn no_arguments_select_every_step() {
        let selection = Selection::parse(&[]).unwrap();
        assert_eq!(names(&selection).len(), STEPS.len());
    }

    #[test]
    fn skip_and_only_take_lists_in_either_spelling() {
        let selection = Selection::parse(&args("--skip=install,fuzz --skip firmware")).unwrap();
        assert!(!names(&selection).contains(&"fuzz"));
        assert_eq!(names(&selection).len(), STEPS.len() - 3);
        let selection = Selection::parse(&args("--only clippy,fmt")).unwrap();
        assert_eq!(
            names(&selection),
            ["fmt", "clippy"],
            "steps keep their order"
        );
    }

    #[test]
    fn unknown_steps_and_flags_are_errors() {
        assert!(Selection::parse(&args("--skip nope")).is_err());
        assert!(Selection::parse(&args("--only")).is_err());
        assert!(Selection::parse(&args("--fast")).is_err());
    }
}
