//! `cargo xtask`: the project's automation. Plain `std`, no dependencies, so it builds
//! in a second on a fresh machine before anything else is installed.

mod chaos;
mod ci;
mod cmd;
mod fuzz;
mod install;
mod interop;
mod layers;
mod newcomer;
mod synth;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ci::{Ctx, Selection};
use cmd::Result;

const USAGE: &str = "\
usage: cargo xtask <command>

  ci [--skip STEP,..] [--only STEP,..]
                   install what is missing, then run every check
  install          only install what is missing
  fuzz [SECONDS]   only the fuzz smoke test, SECONDS per target
  fuzz --long [--max-seconds N] [TARGET..]
                   the long campaign: 10^7 inputs per target (an hour for the RTL),
                   one at a time under nice; grows and minimizes fuzz/corpus/;
                   --max-seconds stops each target after N seconds at the latest
  chaos [FIRST..LAST]
                   the long whole-stack chaos run (seeds 1..100 by default; about an
                   hour; ROCE_CHAOS_OPS, ROCE_CHAOS_QPS, ROCE_CHAOS_RTL_EVERY)
  interop          our stack against Linux rxe and rdma-core's tools in a VM
                   (root, ~10 min; not part of ci; INTEROP_ONLY=NAME filters cases)
  newcomer         the README's two commands on a fresh clone of HEAD, without
                   Verilator first, then with it (a full build of its own)
  synth [--list] [TARGET..]
                   synthesize, place and route the RTL targets (all, or those
                   named): Fmax, critical path, resources per module, logic
                   depth (yowasp tools from PyPI; tens of minutes; not part of ci);
                   a guarded target's run rewrites its line of hdl-sim/timing.txt,
                   which ci checks against the sources (commit it with the RTL)
  synth --top MODULE TARGET
                   one module of TARGET alone, out of context (quicker while
                   working on it); results in target/synth/TARGET/MODULE/

environment: FUZZ_SECONDS  seconds per fuzz target (default: a minute shared by all, 5 to 30 each)
             XTASK_NICE    niceness of fuzz --long and chaos (default 10)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let command = args.first().map_or("", String::as_str);
            eprintln!("\nxtask {command}: {error}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result {
    let root = repo_root();
    // Steps name paths relative to the root, wherever `cargo xtask` was started.
    std::env::set_current_dir(&root).map_err(|e| format!("cd {}: {e}", root.display()))?;
    let fuzz_seconds = std::env::var("FUZZ_SECONDS").ok();
    let (command, rest) = args
        .split_first()
        .map_or(("help", &[][..]), |(c, r)| (c, r));
    let (selection, fuzz_seconds) = match (command, rest) {
        ("ci", flags) => (Selection::parse(flags)?, fuzz_seconds),
        ("install", []) => (Selection::only("install"), fuzz_seconds),
        ("fuzz", []) => (Selection::only("fuzz"), fuzz_seconds),
        ("fuzz", [flag, max, n, targets @ ..]) if flag == "--long" && max == "--max-seconds" => {
            return fuzz::long(targets, Some(parse_seconds(n)?));
        }
        ("fuzz", [flag, targets @ ..]) if flag == "--long" => return fuzz::long(targets, None),
        ("fuzz", [seconds]) => (Selection::only("fuzz"), Some(seconds.clone())),
        ("interop", []) => return interop::interop(&root),
        ("newcomer", []) => return newcomer::newcomer(&root),
        ("chaos", []) => return chaos::chaos(None),
        ("chaos", [seeds]) => return chaos::chaos(Some(seeds)),
        ("synth", targets) => return synth::synth(&root, targets),
        ("help" | "-h" | "--help", _) => {
            println!("{USAGE}\n\nsteps: {}", ci::step_names());
            return Ok(());
        }
        _ => return Err(format!("unknown command `{}`\n\n{USAGE}", args.join(" "))),
    };
    let fuzz_seconds = fuzz_seconds.map(|s| parse_seconds(&s)).transpose()?;
    ci::run(&Ctx { root, fuzz_seconds }, command, &selection)
}

fn parse_seconds(text: &str) -> Result<u64> {
    text.parse()
        .map_err(|_| format!("fuzz seconds must be a whole number, not `{text}`"))
}

/// The workspace root: xtask's own manifest directory is `<root>/xtask`.
fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}
