//! The fuzz targets: what each needs (seeds, sanitizer, long-run budget), the smoke run
//! `cargo xtask ci` does, and the long campaign of `cargo xtask fuzz --long`.
//!
//! Corpora: `fuzz/corpus/<target>/` holds each target's corpus, minimized with
//! `cargo fuzz cmin` at the end of a long run and committed, so every smoke run starts
//! from the coverage the last campaign reached instead of from nothing. The smoke run
//! never writes there: new inputs go to a scratch directory under `fuzz/target/`, and
//! the committed directories are read-only inputs, so CI leaves the tree clean.
//!
//! The smoke run builds every target in one cargo invocation, without the Verilated RTL:
//! the three builds it did before (AddressSanitizer, none, the RTL target's
//! instrumented C++), each compiling every RTL model again, took most of CI's fuzz step.
//! So the RTL target is compiled against `roce-hdl-sim`'s stub there and its inputs run
//! in `hdl-sim/tests/fuzz_corpus.rs` in the test step, on the models that step builds
//! anyway. The long campaign builds each target with its own sanitizer and the real RTL.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cmd::{self, cmd, Result};
use crate::install;

/// cargo-fuzz's own workspace, built with nightly.
pub const FUZZ_DIR: &str = "fuzz";

/// How long a target runs in the long campaign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// This many inputs.
    Runs(u64),
    /// This many seconds (the RTL target: the Verilated parser with its coverage hook
    /// runs about 2,000 inputs/s, too slow for 10^7 in an hour).
    Seconds(u64),
}

/// What the CI smoke run does with a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Smoke {
    /// Its committed corpus and seeds, then fuzzing for the smoke run's seconds.
    Fuzz,
    /// Only built; its committed corpus and seeds run as this test of the test step.
    Test(&'static str),
}

/// One fuzz target.
#[derive(Debug)]
pub struct Target {
    pub name: &'static str,
    /// It takes frames, so `seeds/frames` (the shared vectors) are seeds too.
    frames: bool,
    build: &'static Build,
    long: Budget,
    smoke: Smoke,
}

/// How a target is built.
#[derive(Debug)]
pub struct Build {
    /// cargo-fuzz's `--sanitizer`.
    sanitizer: &'static str,
    /// Cargo features of `fuzz/Cargo.toml` (`rtl`: the Verilated RTL).
    features: &'static str,
    /// Environment of the build.
    env: &'static [(&'static str, &'static str)],
    /// Its build directory under `fuzz/target/`: each build has its own, or every switch
    /// between them would rebuild everything.
    dir: &'static str,
    /// libFuzzer's comparison tracing (`-sanitizer-coverage-trace-compares`; cargo-fuzz's
    /// `--no-trace-compares` when false).
    trace_compares: bool,
}

/// With AddressSanitizer: the wire targets.
const ASAN: Build = Build {
    sanitizer: "address",
    features: "",
    env: &[],
    dir: "sanitizer-address",
    trace_compares: true,
};

/// Without a sanitizer: the engine-level targets. Their code is safe Rust that
/// bounds-checks anyway, and AddressSanitizer's fake stacks and shadow poisoning of the
/// per-input engine snapshot made them five times slower.
const PLAIN: Build = Build {
    sanitizer: "none",
    features: "",
    env: &[],
    dir: "sanitizer-none",
    trace_compares: true,
};

/// `abi`: as [`PLAIN`], without libFuzzer's comparison tracing. Its hooks were over half
/// of the target's time (every comparison of the firmware, the engine and the harness's
/// DMA checks: ~100 polls and ~2,400 checked DMA accesses per input), and the target
/// mostly draws handles and keys from the NIC's live objects itself instead of leaving
/// the fuzzer to find their values. Side by side for the same CPU time from the
/// committed corpus, the untraced build ran 2.4x the inputs and reached the same edges
/// and more features (BENCHMARKS.md, "Fuzzing speed"): 10^7 inputs in about an hour of
/// a core instead of two and a half.
const PLAIN_UNTRACED: Build = Build {
    trace_compares: false,
    dir: "sanitizer-none-untraced",
    ..PLAIN
};

/// The RTL target: Verilated C++ next to Rust. AddressSanitizer would need the C++ built
/// with it too (g++'s libasan and Rust's compiler-rt one cannot share a process), so
/// none; g++ instruments the C++ with trace-pc and `fuzz/csrc/rtl_coverage.c` turns that
/// into libFuzzer counters, so the RTL's own branches guide the fuzzer. Only the
/// datapath's models are built (`ROCE_HDL_SIM_DATAPATH_ONLY`, `hdl-sim/build.rs`): the
/// target uses nothing else, and the fast path, DCB block and SoC were three quarters
/// of the C++ this build compiled.
const RTL_COVERAGE: Build = Build {
    sanitizer: "none",
    features: "rtl",
    env: &[
        ("CXXFLAGS", "-fsanitize-coverage=trace-pc"),
        ("ROCE_FUZZ_RTL_COVERAGE", "1"),
        ("ROCE_HDL_SIM_DATAPATH_ONLY", "1"),
    ],
    dir: "rtl-coverage",
    trace_compares: true,
};

const TEN_MILLION: Budget = Budget::Runs(10_000_000);

/// Every target, in the order they run.
pub const TARGETS: &[Target] = &[
    Target {
        name: "parse",
        frames: true,
        build: &ASAN,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "roundtrip",
        frames: true,
        build: &ASAN,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "responder",
        frames: false,
        build: &PLAIN,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "requester",
        frames: false,
        build: &PLAIN,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "uc_ud",
        frames: false,
        build: &PLAIN,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "abi",
        frames: false,
        build: &PLAIN_UNTRACED,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "encode",
        frames: false,
        build: &PLAIN,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "pfc_cnp",
        frames: false,
        build: &PLAIN,
        long: TEN_MILLION,
        smoke: Smoke::Fuzz,
    },
    Target {
        name: "rtl_parser",
        frames: true,
        build: &RTL_COVERAGE,
        long: Budget::Seconds(3600),
        smoke: Smoke::Test("hdl-sim/tests/fuzz_corpus.rs"),
    },
];

/// How `cargo fuzz cmin` minimizes a corpus for committing: the smallest set of inputs
/// that covers every edge the corpus reaches (set cover over edges, not over libFuzzer's
/// per-edge hit-count buckets). The committed corpus is CI's seed and lives in git:
/// with the buckets the engine targets kept 500 to 1,200 inputs (0.2 to 0.6 MB) each,
/// with edges alone 30 to 320 (11 to 134 KB), covering the same edges.
const CMIN_ARGS: [&str; 3] = ["--", "-set_cover_merge=1", "-use_counters=0"];

/// Seconds each input may take before libFuzzer calls it a hang (its default is 20
/// minutes, which would let a hang eat the whole smoke run).
const INPUT_TIMEOUT: &str = "-timeout=20";

/// The smoke run's one build of every target: no sanitizer, and `roce-hdl-sim` without
/// Verilator (its stub), so no C++ model is compiled.
const SMOKE_BUILD: &Build = &Build {
    sanitizer: "none",
    features: "rtl",
    env: &[("ROCE_HDL_SIM_DISABLE", "1")],
    dir: "smoke",
    trace_compares: true,
};

/// `cargo +nightly fuzz ARGS` in `fuzz/`, in the environment of `build`.
fn cargo_fuzz(build: &Build, args: &[&str]) -> std::process::Command {
    let mut command = cmd("cargo", &[&["+nightly", "fuzz"], args].concat());
    command
        .current_dir(FUZZ_DIR)
        .envs(build.env.iter().copied());
    command
}

/// `SUBCOMMAND -s SANITIZER [--features F] [--no-trace-compares] --target-dir target/DIR
/// [TARGET]`.
fn build_args(subcommand: &str, build: &Build, target: Option<&str>) -> Vec<String> {
    let dir = format!("target/{}", build.dir);
    let features = (!build.features.is_empty()).then_some(["--features", build.features]);
    let untraced = (!build.trace_compares).then_some("--no-trace-compares");
    [subcommand, "-s", build.sanitizer, "--target-dir", &dir]
        .into_iter()
        .chain(features.into_iter().flatten())
        .chain(untraced)
        .chain(target)
        .map(str::to_string)
        .collect()
}

/// The targets `cargo fuzz list` reports, checked against [`TARGETS`]: a target added
/// to `fuzz/Cargo.toml` needs its line here, and the other way round.
fn listed() -> Result<Vec<&'static Target>> {
    install::nightly()?;
    install::cargo_fuzz()?;
    let mut list = cmd("cargo", &["+nightly", "fuzz", "list"]);
    let list = cmd::stdout(list.current_dir(FUZZ_DIR))?;
    let mut names: Vec<&str> = list.split_whitespace().collect();
    names.sort_unstable();
    let mut known: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    known.sort_unstable();
    if names != known {
        return Err(format!(
            "fuzz/Cargo.toml has the targets {names:?} but xtask/src/fuzz.rs lists {known:?}"
        ));
    }
    Ok(TARGETS.iter().collect())
}

/// The seed directories of `t` that exist, relative to `fuzz/`: its own, and the shared
/// frames if it takes frames.
fn seeds(t: &Target) -> Vec<String> {
    let mut dirs = vec![format!("seeds/{}", t.name)];
    if t.frames {
        dirs.push("seeds/frames".to_string());
    }
    dirs.retain(|d| Path::new(FUZZ_DIR).join(d).is_dir());
    dirs
}

/// libFuzzer's `-dict=dicts/<target>.dict`, if `t` has a dictionary.
fn dict(t: &Target) -> Option<String> {
    let path = format!("dicts/{}.dict", t.name);
    Path::new(FUZZ_DIR)
        .join(&path)
        .is_file()
        .then(|| format!("-dict={path}"))
}

/// `corpus/<target>`, relative to `fuzz/`.
fn corpus(t: &Target) -> String {
    format!("corpus/{}", t.name)
}

/// `fuzz/<dir>`, emptied and created.
fn fresh_dir(dir: &str) -> Result<()> {
    let path = Path::new(FUZZ_DIR).join(dir);
    if path.exists() {
        std::fs::remove_dir_all(&path).map_err(|e| format!("cannot empty fuzz/{dir}: {e}"))?;
    }
    std::fs::create_dir_all(&path).map_err(|e| format!("cannot create fuzz/{dir}: {e}"))
}

/// The CI smoke run: every target built in one go, then each run from its committed
/// corpus and seeds for `seconds` (or left to the test named by [`Smoke::Test`]). A
/// crash fails it (libFuzzer exits non-zero and leaves the input in
/// `fuzz/artifacts/<target>/`).
pub fn smoke(seconds: Option<u64>) -> Result<usize> {
    let targets = listed()?;
    let fuzzed = targets.iter().filter(|t| t.smoke == Smoke::Fuzz).count();
    let seconds = seconds.unwrap_or_else(|| default_fuzz_seconds(fuzzed));
    let start = Instant::now();
    let build = build_args("build", SMOKE_BUILD, None);
    cmd::run(&mut cargo_fuzz(SMOKE_BUILD, &strs(&build)))?;
    println!(
        "fuzz: {} target(s) built in {} s; {fuzzed} run {seconds} s each",
        targets.len(),
        start.elapsed().as_secs()
    );
    let max_time = format!("-max_total_time={seconds}");
    for t in &targets {
        if let Smoke::Test(test) = t.smoke {
            println!("fuzz: {}'s inputs run in {test}", t.name);
            continue;
        }
        let scratch = format!("target/smoke-corpus/{}", t.name);
        fresh_dir(&scratch)?;
        let mut args = build_args("run", SMOKE_BUILD, Some(t.name));
        args.push(scratch);
        if Path::new(FUZZ_DIR).join(corpus(t)).is_dir() {
            args.push(corpus(t));
        }
        args.extend(seeds(t));
        args.extend(["--", &max_time, INPUT_TIMEOUT].map(str::to_string));
        args.extend(dict(t));
        cmd::run(&mut cargo_fuzz(SMOKE_BUILD, &strs(&args)))?;
    }
    Ok(targets.len())
}

/// Seconds of fuzzing per target in the smoke run: about a minute in all, shared by the
/// fuzzed targets, at least five and at most thirty each (CI's whole fuzz step, builds
/// included, should stay under four minutes). `FUZZ_SECONDS` overrides.
pub fn default_fuzz_seconds(targets: usize) -> u64 {
    let targets = u64::try_from(targets.max(1)).unwrap_or(u64::MAX);
    (60 / targets).clamp(5, 30)
}

/// What a long run of one target reached, from libFuzzer's last status line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stats {
    runs: u64,
    cov: u64,
    ft: u64,
    corpus: u64,
}

impl Stats {
    /// The last `#N ... cov: C ft: F corp: K/...` line of a libFuzzer log.
    fn from_log(log: &str) -> Stats {
        let field = |line: &str, key: &str| -> u64 {
            line.split_whitespace()
                .skip_while(|w| *w != key)
                .nth(1)
                .and_then(|v| v.split('/').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let Some(line) = log
            .lines()
            .rev()
            .find(|l| l.starts_with('#') && l.contains(" cov: "))
        else {
            return Stats::default();
        };
        Stats {
            runs: line
                .trim_start_matches('#')
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            cov: field(line, "cov:"),
            ft: field(line, "ft:"),
            corpus: field(line, "corp:"),
        }
    }
}

/// `cargo xtask fuzz --long [--max-seconds N] [TARGET...]`: each target (all by
/// default), one at a time and under `nice`, for its budget (or `max_seconds`, if that
/// ends first: on a shared machine the slow targets cannot reach 10^7 in a session),
/// growing `fuzz/corpus/<target>/`, which is then minimized in place. Logs go to
/// `fuzz/target/long-logs/`; a summary is printed.
pub fn long(names: &[String], max_seconds: Option<u64>) -> Result {
    let all = listed()?;
    let selected: Vec<&Target> = if names.is_empty() {
        all
    } else {
        names
            .iter()
            .map(|n| {
                all.iter()
                    .copied()
                    .find(|t| t.name == n)
                    .ok_or_else(|| format!("no fuzz target `{n}`"))
            })
            .collect::<Result<_>>()?
    };
    let logs = PathBuf::from(FUZZ_DIR).join("target/long-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let mut summary = Vec::new();
    for t in selected {
        let corpus = corpus(t);
        std::fs::create_dir_all(Path::new(FUZZ_DIR).join(&corpus))
            .map_err(|e| format!("cannot create fuzz/{corpus}: {e}"))?;
        let (runs, seconds) = match t.long {
            Budget::Runs(n) => (Some(format!("-runs={n}")), max_seconds),
            Budget::Seconds(s) => (None, Some(max_seconds.map_or(s, |m| m.min(s)))),
        };
        let seconds = seconds.map(|s| format!("-max_total_time={s}"));
        let mut args = build_args("run", t.build, Some(t.name));
        args.push(corpus.clone());
        args.extend(seeds(t));
        args.push("--".to_string());
        args.extend(runs.into_iter().chain(seconds));
        args.extend([INPUT_TIMEOUT, "-print_final_stats=1"].map(str::to_string));
        args.extend(dict(t));
        let log = logs.join(format!("{}.log", t.name));
        let start = Instant::now();
        niced(t, &strs(&args), &log)?;
        let seconds = start.elapsed().as_secs();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let stats = Stats::from_log(&text);
        let before = count_files(&Path::new(FUZZ_DIR).join(&corpus));
        let mut cmin = build_args("cmin", t.build, Some(t.name));
        cmin.push(corpus.clone());
        cmin.extend(CMIN_ARGS.map(str::to_string));
        cmd::run(&mut cargo_fuzz(t.build, &strs(&cmin)))?;
        let after = count_files(&Path::new(FUZZ_DIR).join(&corpus));
        summary.push(format!(
            "{:<12} {:>11} runs {:>6} s  cov {:>5}  ft {:>6}  corpus {before} -> {after} files",
            t.name, stats.runs, seconds, stats.cov, stats.ft
        ));
    }
    println!("\nfuzz --long summary:");
    for line in &summary {
        println!("  {line}");
    }
    Ok(())
}

/// `nice -n XTASK_NICE cargo +nightly fuzz ARGS`, its output into `log`; fails if it does.
fn niced(t: &Target, args: &[&str], log: &Path) -> Result {
    let out =
        std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let mut command = cmd::niced("cargo", &[&["+nightly", "fuzz"], args].concat())?;
    command
        .current_dir(FUZZ_DIR)
        .envs(t.build.env.iter().copied())
        .stdout(out)
        .stderr(err);
    println!("$ {}  > {}", cmd::display(&command), log.display());
    let status = command
        .status()
        .map_err(|e| format!("cannot start cargo fuzz: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "fuzzing failed ({status}); the log is {}, the input under fuzz/artifacts/",
            log.display()
        ))
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoke_fuzzing_is_about_a_minute_in_all() {
        assert_eq!(default_fuzz_seconds(1), 30);
        assert_eq!(default_fuzz_seconds(2), 30);
        assert_eq!(default_fuzz_seconds(8), 7);
        assert_eq!(default_fuzz_seconds(100), 5);
    }

    #[test]
    fn stats_come_from_the_last_status_line() {
        let log = "INFO: Seed: 1\n\
            #2\tINITED cov: 282 ft: 283 corp: 1/36b exec/s: 0 rss: 28Mb\n\
            #1873574\tDONE   cov: 418 ft: 2115 corp: 529/125Kb lim: 4096 exec/s: 20588 rss: 29Mb\n\
            Done 1873574 runs in 91 second(s)\n";
        assert_eq!(
            Stats::from_log(log),
            Stats {
                runs: 1_873_574,
                cov: 418,
                ft: 2115,
                corpus: 529
            }
        );
        assert_eq!(Stats::from_log("no status"), Stats::default());
    }

    #[test]
    fn an_untraced_build_says_so_and_has_its_own_directory() {
        let args = build_args("run", &PLAIN_UNTRACED, Some("abi"));
        assert!(args.iter().any(|a| a == "--no-trace-compares"), "{args:?}");
        assert!(args.iter().any(|a| a == "target/sanitizer-none-untraced"));
        let traced = build_args("run", &PLAIN, Some("abi"));
        assert!(
            !traced.iter().any(|a| a == "--no-trace-compares"),
            "{traced:?}"
        );
    }

    #[test]
    fn target_names_are_unique() {
        let mut names: Vec<_> = TARGETS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TARGETS.len());
    }
}
