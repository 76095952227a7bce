//! The timing record: what the last full run of each guarded target measured, and a
//! fingerprint of what it ran on (the target's sources, parameters and the pinned
//! tools). `cargo xtask synth TARGET` rewrites the target's line after place and route;
//! `cargo xtask ci` checks, in milliseconds, that every guarded target's sources are
//! still those of its line and that the Fmax there meets the target's floor
//! (`Target::guard_mhz`: its clock once closed).
//!
//! That is the regression guard of issue 19. The full flow takes 30 to 60 minutes on
//! the 2-core machine, too long for CI, and no quicker proxy predicts its result: the
//! weighted logic depth said 8.00 levels both for a design at 113.6 MHz and for ones
//! near 140, because on an ECP5 the routing is 60 to 75 % of the critical path. So an
//! RTL change cannot land without a run of the real flow on exactly that RTL, and a run
//! that misses the clock cannot be recorded as passing.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use elf2img::sources::{fnv1a64_extend, FNV1A64_BASIS};

use super::{Target, TARGETS, TOOLS};
use crate::cmd::Result;

/// The record, relative to the repository root; committed with the RTL it describes.
pub const RECORD: &str = "hdl-sim/timing.txt";

const HEADER: &str = "\
# Written by `cargo xtask synth TARGET` after place and route (xtask/src/synth/record.rs);
# checked by `cargo xtask ci`. One line per guarded target:
# TARGET fingerprint-of-sources-parameters-and-tools Fmax-MHz target-MHz
";

/// One target's line.
#[derive(Debug, PartialEq)]
struct Entry {
    target: String,
    fingerprint: String,
    fmax_mhz: f64,
}

/// The fingerprint of what a run of `target` depends on: the pinned tools, the
/// parameters, and each source file's path (relative) and contents.
pub fn fingerprint(root: &Path, target: &Target) -> Result<String> {
    // FNV-1a 64: a change detector, not a defence against forgery.
    let mut hash = FNV1A64_BASIS;
    for tool in TOOLS {
        hash = fnv1a64_extend(hash, format!("{} {}\n", tool.name, tool.version).as_bytes());
    }
    for (k, v) in target.params {
        hash = fnv1a64_extend(hash, format!("{k}={v}\n").as_bytes());
    }
    for file in target.files() {
        let path = root.join(file);
        let text = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        hash = fnv1a64_extend(hash, format!("{file} {}\n", text.len()).as_bytes());
        hash = fnv1a64_extend(hash, &text);
    }
    Ok(format!("{hash:016x}"))
}

fn parse(text: &str) -> Result<Vec<Entry>> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let fmax = words.get(2).and_then(|w| w.parse::<f64>().ok());
            match (words.as_slice(), fmax) {
                ([target, fingerprint, _, _], Some(fmax_mhz)) => Ok(Entry {
                    target: target.to_string(),
                    fingerprint: fingerprint.to_string(),
                    fmax_mhz,
                }),
                _ => Err(format!("{RECORD}: cannot read the line `{line}`")),
            }
        })
        .collect()
}

fn read(root: &Path) -> Result<Vec<Entry>> {
    match fs::read_to_string(root.join(RECORD)) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("{RECORD}: {e}")),
    }
}

/// Notes a full run of a guarded target (passing or not: the check then fails on it),
/// with the fingerprint of the sources it read.
pub fn write(root: &Path, target: &Target, fingerprint: &str, fmax_mhz: f64) -> Result {
    let mut entries = read(root)?;
    entries.retain(|e| e.target != target.name);
    entries.push(Entry {
        target: target.name.to_string(),
        fingerprint: fingerprint.to_string(),
        fmax_mhz,
    });
    entries.sort_by(|a, b| a.target.cmp(&b.target));
    let mut text = HEADER.to_string();
    for e in &entries {
        let clock = TARGETS
            .iter()
            .find(|t| t.name == e.target)
            .map_or(0, |t| t.clock_mhz);
        let _ = writeln!(
            text,
            "{} {} {:.2} {clock}",
            e.target, e.fingerprint, e.fmax_mhz
        );
    }
    let path = root.join(RECORD);
    fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("recorded in {RECORD}: {} at {fmax_mhz:.2} MHz", target.name);
    Ok(())
}

/// The CI check: every guarded target has a line, made on its current sources, with an
/// Fmax that meets its floor.
pub fn check(root: &Path) -> Result {
    let entries = read(root)?;
    for target in TARGETS {
        let Some(floor) = target.guard_mhz else {
            continue;
        };
        let rerun = format!(
            "run `cargo xtask synth {}` (30 to 60 minutes) and commit {RECORD} with the RTL",
            target.name
        );
        let Some(entry) = entries.iter().find(|e| e.target == target.name) else {
            return Err(format!("{}: no line in {RECORD}: {rerun}", target.name));
        };
        if entry.fingerprint != fingerprint(root, target)? {
            return Err(format!(
                "{}: its sources ({}) changed since the place and route of {RECORD} \
                 ({:.2} MHz): {rerun}",
                target.name,
                target.files().join(", "),
                entry.fmax_mhz
            ));
        }
        if entry.fmax_mhz < floor {
            return Err(format!(
                "{}: {RECORD} says {:.2} MHz after place and route, below its floor of \
                 {floor:.1} MHz: a timing regression",
                target.name, entry.fmax_mhz
            ));
        }
        println!(
            "{}: {:.2} MHz after place and route on these sources (floor {floor:.1}, \
             target {} MHz)",
            target.name, entry.fmax_mhz, target.clock_mhz
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_bad_lines_are_refused() {
        let text = format!("{HEADER}dp64-ecp5 00ff00ff00ff00ff 126.31 125\n\n");
        assert_eq!(
            parse(&text).unwrap(),
            vec![Entry {
                target: "dp64-ecp5".to_string(),
                fingerprint: "00ff00ff00ff00ff".to_string(),
                fmax_mhz: 126.31,
            }]
        );
        assert!(parse("dp64-ecp5 00ff 126.31\n").is_err());
        assert!(parse("dp64-ecp5 00ff fast 125\n").is_err());
    }
}
