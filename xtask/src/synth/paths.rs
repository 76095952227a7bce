//! Register-to-register paths of a flat netlist (yosys `write_json` after technology
//! mapping), weighted the way their delay grows on an FPGA: a LUT level (the LUT and
//! the general routing into it) counts 1, a wide-function mux next to its LUTs 0.15,
//! a hop along a carry chain 0.05. yosys `ltp` counts every cell as 1, which makes a
//! 32-bit carry chain (16 cells, about 1 ns on an ECP5) look deeper than five LUT
//! levels (about 8 ns with their routing); these weights do not.
//!
//! A figure of every report, and the only timing figure for parts without an open
//! place and route (UltraScale+). It is not a guard: on the ECP5 it does not predict
//! nextpnr's Fmax (`record.rs`, `BENCHMARKS.md` "Timing on an FPGA").

use std::collections::HashMap;

use super::json::Json;
use crate::cmd::Result;

/// Weights in hundredths of a LUT level.
const LUT: u32 = 100;
const MUX: u32 = 15;
const CARRY: u32 = 5;

/// How a cell type's pins relate, per technology.
#[derive(Clone, Copy)]
enum Kind {
    /// Every input to every output, `weight` each.
    Logic(u32),
    /// A carry cell: the carry input to every output `CARRY`, the other inputs `LUT`.
    Carry,
    /// A LUT RAM: the read address to the data out `LUT`; the write side registered.
    LutRam,
    /// Flip-flops, block RAM, anything else: inputs end paths, outputs start them.
    Sequential,
}

fn kind(cell_type: &str) -> Kind {
    match cell_type {
        // ECP5
        "LUT4" => Kind::Logic(LUT),
        "PFUMX" | "L6MUX21" => Kind::Logic(MUX),
        "CCU2C" => Kind::Carry,
        "TRELLIS_DPR16X4" => Kind::LutRam,
        // Xilinx
        "LUT1" | "LUT2" | "LUT3" | "LUT5" | "LUT6" => Kind::Logic(LUT),
        "MUXF7" | "MUXF8" | "MUXF9" => Kind::Logic(MUX),
        "CARRY4" | "CARRY8" => Kind::Carry,
        t if t.starts_with("RAM32") || t.starts_with("RAM64") || t.starts_with("RAM128") => {
            Kind::LutRam
        }
        _ => Kind::Sequential,
    }
}

fn is_carry_in(pin: &str) -> bool {
    matches!(pin, "CIN" | "CI" | "CI_TOP")
}

/// LUT RAM read-address pins (ECP5 `RAD`, Xilinx `ADDR*`/`DPRA*`, and the `A*` of
/// the single-port ones).
fn is_read_address(pin: &str) -> bool {
    pin.starts_with("RAD")
        || pin.starts_with("ADDR")
        || pin.starts_with("DPRA")
        || pin == "A"
        || (pin.starts_with('A') && pin[1..].chars().all(|c| c.is_ascii_digit()))
}

/// One register-to-register path: its weighted depth and where it starts and ends.
pub struct Path {
    /// Hundredths of a LUT level.
    pub depth: u32,
    pub luts: u32,
    pub from: String,
    pub to: String,
}

impl Path {
    pub fn levels(&self) -> f64 {
        f64::from(self.depth) / 100.0
    }
}

/// The modules of a netlist that hold logic (the cell library's blackboxes left out),
/// in file order.
pub fn modules(doc: &Json) -> Vec<(&str, &Json)> {
    doc.get("modules")
        .map(Json::members)
        .unwrap_or(&[])
        .iter()
        .filter(|(_, m)| {
            m.get("attributes")
                .and_then(|a| a.get("blackbox"))
                .is_none()
        })
        .filter(|(_, m)| m.get("cells").is_some_and(|c| !c.members().is_empty()))
        .map(|(name, m)| (name.as_str(), m))
        .collect()
}

/// The worst path into each register group of `module` (a register's name up to its
/// last `.`: the instance it lives in, in a flattened design), deepest first. Cells
/// of other modules end paths like registers.
pub fn worst_per_instance(module: &Json) -> Result<Vec<Path>> {
    let graph = Graph::new(module)?;
    let depths = graph.depths();
    let mut worst: HashMap<String, Path> = HashMap::new();
    for end in &graph.ends {
        let Some(&(depth, luts, start)) = depths.get(&end.bit) else {
            continue;
        };
        if depth == 0 {
            continue;
        }
        let instance = end
            .name
            .rsplit_once('.')
            .map_or("(top)", |(inst, _)| inst)
            .to_string();
        let deeper = worst.get(&instance).is_none_or(|p| depth > p.depth);
        if deeper {
            let path = Path {
                depth,
                luts,
                from: graph.name(start),
                to: end.name.clone(),
            };
            worst.insert(instance, path);
        }
    }
    let mut paths: Vec<Path> = worst.into_values().collect();
    paths.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.to.cmp(&b.to)));
    Ok(paths)
}

struct Arc {
    from: u64,
    weight: u32,
    lut: bool,
}

struct End {
    bit: u64,
    name: String,
}

struct Graph {
    /// Combinational arcs into each net bit.
    arcs: HashMap<u64, Vec<Arc>>,
    /// Data inputs of sequential cells.
    ends: Vec<End>,
    /// A readable name per net bit (the first netname without `$`, else any).
    names: HashMap<u64, String>,
}

fn bits(value: &Json) -> Vec<u64> {
    value.items().iter().filter_map(Json::as_u64).collect()
}

impl Graph {
    fn new(module: &Json) -> Result<Graph> {
        let mut names: HashMap<u64, String> = HashMap::new();
        if let Some(netnames) = module.get("netnames") {
            for (name, net) in netnames.members() {
                let public = !name.starts_with('$');
                let net_bits = net.get("bits").map(bits).unwrap_or_default();
                let width = net_bits.len();
                for (i, bit) in net_bits.into_iter().enumerate() {
                    let label = if width > 1 {
                        format!("{name}[{i}]")
                    } else {
                        name.clone()
                    };
                    let replace = public && names.get(&bit).is_none_or(|n| n.starts_with('$'));
                    if replace || !names.contains_key(&bit) {
                        names.insert(bit, label);
                    }
                }
            }
        }
        let mut arcs: HashMap<u64, Vec<Arc>> = HashMap::new();
        let mut ends = Vec::new();
        let cells = module
            .get("cells")
            .ok_or("the netlist module has no cells")?;
        for (cell_name, cell) in cells.members() {
            let cell_type = cell.get("type").and_then(Json::as_str).unwrap_or("");
            let directions = cell.get("port_directions");
            let connections = cell.get("connections").map(Json::members).unwrap_or(&[]);
            let mut inputs: Vec<(&str, Vec<u64>)> = Vec::new();
            let mut outputs: Vec<Vec<u64>> = Vec::new();
            for (pin, net) in connections {
                let direction = directions
                    .and_then(|d| d.get(pin))
                    .and_then(Json::as_str)
                    .ok_or_else(|| {
                        format!("cell {cell_name} ({cell_type}): no direction for {pin}")
                    })?;
                match direction {
                    "output" => outputs.push(bits(net)),
                    _ => inputs.push((pin.as_str(), bits(net))),
                }
            }
            let kind = kind(cell_type);
            let end_name = || {
                let q = connections
                    .iter()
                    .find(|(pin, _)| pin == "Q")
                    .and_then(|(_, net)| bits(net).first().copied())
                    .and_then(|bit| names.get(&bit).cloned());
                q.unwrap_or_else(|| cell_name.clone())
            };
            for (pin, in_bits) in &inputs {
                let arc = match kind {
                    Kind::Logic(weight) => Some((weight, weight == LUT)),
                    Kind::Carry if is_carry_in(pin) => Some((CARRY, false)),
                    Kind::Carry => Some((LUT, true)),
                    Kind::LutRam if is_read_address(pin) => Some((LUT, true)),
                    Kind::LutRam | Kind::Sequential => None,
                };
                match arc {
                    Some((weight, lut)) => {
                        for out in outputs.iter().flatten() {
                            let into = arcs.entry(*out).or_default();
                            for &from in in_bits {
                                into.push(Arc { from, weight, lut });
                            }
                        }
                    }
                    None => {
                        let name = end_name();
                        ends.extend(in_bits.iter().map(|&bit| End {
                            bit,
                            name: name.clone(),
                        }));
                    }
                }
            }
        }
        Ok(Graph { arcs, ends, names })
    }

    fn name(&self, bit: u64) -> String {
        self.names
            .get(&bit)
            .cloned()
            .unwrap_or_else(|| format!("net {bit}"))
    }

    /// Per net bit: (weighted depth, LUT levels, the start bit of its deepest path).
    /// Bits without arcs into them (register outputs, ports, constants) start paths.
    /// Iterative, so that long chains do not overflow the stack; a combinational loop
    /// (none should exist) is cut where it closes.
    fn depths(&self) -> HashMap<u64, (u32, u32, u64)> {
        let mut done: HashMap<u64, (u32, u32, u64)> = HashMap::new();
        let mut on_stack: HashMap<u64, bool> = HashMap::new();
        for end in &self.ends {
            let mut stack = vec![(end.bit, false)];
            while let Some((bit, expanded)) = stack.pop() {
                if done.contains_key(&bit) {
                    continue;
                }
                let arcs = self.arcs.get(&bit).map(Vec::as_slice).unwrap_or(&[]);
                if expanded {
                    let mut best = (0, 0, bit);
                    for arc in arcs {
                        if let Some(&(d, l, s)) = done.get(&arc.from) {
                            let candidate = (d + arc.weight, l + u32::from(arc.lut), s);
                            if candidate.0 > best.0 {
                                best = candidate;
                            }
                        }
                    }
                    done.insert(bit, best);
                    on_stack.remove(&bit);
                } else if on_stack.insert(bit, true).is_none() {
                    stack.push((bit, true));
                    for arc in arcs {
                        if !done.contains_key(&arc.from) && !on_stack.contains_key(&arc.from) {
                            stack.push((arc.from, false));
                        }
                    }
                }
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::json;

    // r1 -> LUT -> LUT -> carry chain of 3 cells -> r2; r1 -> PFUMX -> r3
    const NETLIST: &str = r#"{ "modules": { "top": {
      "netnames": { "r1": { "bits": [2] }, "a": { "bits": [3] }, "b": { "bits": [4] },
                    "c": { "bits": [5, 6, 7] }, "r2": { "bits": [8] }, "m": { "bits": [9] },
                    "r3": { "bits": [10] }, "u.r2q": { "bits": [11] }, "r3q": { "bits": [12] } },
      "cells": {
        "l1": { "type": "LUT4", "port_directions": { "A": "input", "Z": "output" },
                "connections": { "A": [2], "Z": [3] } },
        "l2": { "type": "LUT4", "port_directions": { "A": "input", "B": "input", "Z": "output" },
                "connections": { "A": [3], "B": [2], "Z": [4] } },
        "c1": { "type": "CCU2C", "port_directions": { "A0": "input", "CIN": "input", "COUT": "output" },
                "connections": { "A0": [4], "CIN": ["0"], "COUT": [5] } },
        "c2": { "type": "CCU2C", "port_directions": { "A0": "input", "CIN": "input", "COUT": "output" },
                "connections": { "A0": ["0"], "CIN": [5], "COUT": [6] } },
        "c3": { "type": "CCU2C", "port_directions": { "A0": "input", "CIN": "input", "S0": "output" },
                "connections": { "A0": ["0"], "CIN": [6], "S0": [7] } },
        "f2": { "type": "TRELLIS_FF", "port_directions": { "DI": "input", "Q": "output" },
                "connections": { "DI": [7], "Q": [11] } },
        "mx": { "type": "PFUMX", "port_directions": { "ALUT": "input", "Z": "output" },
                "connections": { "ALUT": [2], "Z": [9] } },
        "f3": { "type": "TRELLIS_FF", "port_directions": { "DI": "input", "Q": "output" },
                "connections": { "DI": [9], "Q": [12] } }
      } } } }"#;

    #[test]
    fn luts_count_one_carry_hops_and_muxes_little() {
        let doc = json::parse(NETLIST).unwrap();
        let modules = modules(&doc);
        assert_eq!(modules.len(), 1);
        let paths = worst_per_instance(modules[0].1).unwrap();
        assert_eq!(paths.len(), 2);
        // two LUTs, one entry into the chain, two carry hops
        assert_eq!(paths[0].depth, 3 * LUT + 2 * CARRY);
        assert_eq!(paths[0].luts, 3);
        assert_eq!(paths[0].from, "r1");
        assert_eq!(paths[0].to, "u.r2q");
        assert_eq!(paths[1].depth, MUX);
        assert_eq!(paths[1].luts, 0);
        assert_eq!(paths[1].to, "r3q");
    }
}
