//! The crate layering of `ARCHITECTURE.md`, checked against `cargo tree`: each workspace
//! crate may reach (through its normal dependencies, transitively) only the workspace
//! crates listed for it. Build and dev dependencies do not count: a test may use what
//! the library must not. This is what keeps the driver from growing a dependency on
//! the runtime behind the ABI, or the datapath model one on a host crate.

use crate::cmd::{self, cmd, Result};

/// Crate, and the workspace crates it may depend on. Keep in step with the table in
/// `ARCHITECTURE.md`.
pub const LAYERS: &[(&str, &[&str])] = &[
    // The ICRC's CRC (its SIMD kernel is the one `unsafe` under roce-core).
    ("roce-crc32", &[]),
    ("roce-core", &["roce-crc32"]),
    ("roce-abi", &["roce-crc32", "roce-core"]),
    ("roce-firmware", &["roce-crc32", "roce-core", "roce-abi"]),
    ("roce-sim", &["roce-crc32", "roce-core"]),
    ("roce-plot", &[]),
    // Captures: the wire codecs and the figures' look (feature `rtl` adds roce-hdl-sim
    // for `roce decode --datapath rtl`).
    ("roce-capture", &["roce-crc32", "roce-core", "roce-plot"]),
    // The datapath model: no host crate (roce-host, roce-device, roce-testbed).
    (
        "roce-hdl-sim",
        &["roce-crc32", "roce-core", "roce-abi", "roce-firmware"],
    ),
    // The driver: roce-core's types and the ABI, never the runtime or a NIC model.
    ("roce-host", &["roce-crc32", "roce-core", "roce-abi"]),
    (
        "roce-device",
        &[
            "roce-crc32",
            "roce-core",
            "roce-abi",
            "roce-firmware",
            "roce-hdl-sim",
            "roce-host",
        ],
    ),
    // The simulated worlds: NIC models on the fabric, nothing of the CLI.
    (
        "roce-testbed",
        &[
            "roce-crc32",
            "roce-core",
            "roce-abi",
            "roce-firmware",
            "roce-hdl-sim",
            "roce-host",
            "roce-device",
            "roce-sim",
        ],
    ),
];

/// Runs `cargo tree` for every crate of [`LAYERS`] and names every dependency that
/// breaks the layering.
pub fn check() -> Result {
    let mut errors = Vec::new();
    for (krate, allowed) in LAYERS {
        let tree = cmd::stdout(&mut cmd(
            "cargo",
            &[
                "tree", "-p", krate, "-e", "normal", "--prefix", "none", "--format", "{p}",
            ],
        ))?;
        let deps = workspace_deps(&tree, krate);
        for dep in &deps {
            if !allowed.contains(&dep.as_str()) {
                errors.push(format!("{krate} depends on {dep}"));
            }
        }
        println!("{krate} -> {}", deps.join(", "));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the crate layering of ARCHITECTURE.md is broken: {}",
            errors.join("; ")
        ))
    }
}

/// The workspace crates (named `roce-*`) in `cargo tree --prefix none --format {p}`
/// output, other than `krate` itself, sorted and without repeats.
fn workspace_deps(tree: &str, krate: &str) -> Vec<String> {
    let mut deps: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with("roce-") && *name != krate)
        .map(str::to_string)
        .collect();
    deps.sort();
    deps.dedup();
    deps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_workspace_crates_from_cargo_tree() {
        let tree = "roce-host v0.1.0 (/r/host-driver)\nroce-abi v0.1.0 (/r/abi)\n\
                    roce-core v0.1.0 (/r/core)\nheapless v0.9.1\nroce-core v0.1.0 (/r/core) (*)\n";
        assert_eq!(workspace_deps(tree, "roce-host"), ["roce-abi", "roce-core"]);
    }

    #[test]
    fn every_layer_lists_only_crates_that_have_a_layer() {
        for (krate, allowed) in LAYERS {
            for dep in *allowed {
                assert!(
                    LAYERS.iter().any(|(k, _)| k == dep),
                    "{krate} allows {dep}, which has no layer"
                );
            }
        }
    }
}
