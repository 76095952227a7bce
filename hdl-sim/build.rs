//! Verilates `rtl/` at two bus widths and builds the cxx bridge.
//!
//! * Verilator is found as `$VERILATOR` or `verilator` on PATH. When it is
//!   missing (or `ROCE_HDL_SIM_DISABLE=1`), the build does not fail: it warns,
//!   sets `cfg(roce_rtl_unavailable)`, and the crate compiles a stub whose
//!   constructors report "unavailable". That verdict must not outlive the
//!   reason for it: the script runs again when PATH changes, and, while
//!   Verilator is missing, when any directory on PATH changes (installing it
//!   adds an entry there, which changes the directory's modification time;
//!   a newcomer's first `cargo run` comes before `cargo xtask ci` installs it).
//!   `cargo xtask newcomer` checks exactly that on a fresh clone.
//! * Debian's Verilator 5.006 does not put its runtime into the generated
//!   archive, so `verilated.cpp`, `verilated_threads.cpp` and
//!   `verilated_fst_c.cpp` are compiled here, once per OUT_DIR (stamped with
//!   the Verilator version and flags).
//! * Each Verilated model is compiled into its own static library, stamped
//!   with a hash of the RTL sources and flags, so editing only the C++ wrapper
//!   or the Rust code does not re-Verilate or recompile the models.
//! * C++ is always compiled at -O2, also in debug builds: an -O0 model crawls.
//! * The RC fast path (`roce_fp_top`, `docs/fastpath.md`) is a model per width too:
//!   the datapath's RTL and `FP_RTL`; so is the DCB block (`roce_dcb_top`, `DCB_RTL`).
//! * The SoC (`rtl/soc/nic_soc.sv`) is a third model: the datapath's RTL, the DCB
//!   block's, the SoC's blocks and the soft core, `VexRiscv_IMAC.v` from the PyPI package
//!   pythondata-cpu-vexriscv, found through the package (`data_location`) in the
//!   project's virtualenv `target/tools/venv` that `cargo xtask install` makes. Without
//!   it the datapath models still build; the SoC sets `cfg(roce_soc_unavailable)` and
//!   its constructor reports why. The build script runs again when the virtualenv
//!   appears or the package changes. It is built twice, without the RC fast path
//!   (`vmodel_soc`, `Vnic_soc`) and with it (`vmodel_soc_fp`, `Vnic_soc_fp`,
//!   `FASTPATH=1`): a Verilated model evaluates all of its logic every cycle whether
//!   the strap is set or not, and the fast path's made the SoC 5.6 times slower, so a
//!   SoC whose strap is off runs the model without it (`csrc/soc_model.cpp`).
//! * `ROCE_HDL_SIM_DATAPATH_ONLY=1` builds only the datapath's models (`roce_dp_top`);
//!   the fast path's, the DCB block's and the SoC's constructors then report it. For
//!   builds that use nothing else (the `rtl_parser` fuzz target's coverage build).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// RTL sources, in compile order (package first).
const RTL: &[&str] = &[
    "roce_rx_pkg.sv",
    "roce_fifo.sv",
    "axis_skid.sv",
    "icrc.sv",
    "rx_hdr_decode.sv",
    "rx_parser.sv",
    "tx_icrc_insert.sv",
    "roce_dp_top.sv",
];
const TOP: &str = "roce_dp_top";
/// The RC fast path's RTL (after `RTL`, whose parser and ICRC inserter it uses): a
/// second model per width, top `roce_fp_top`.
const FP_RTL: &[&str] = &[
    "fp_pkg.sv",
    "roce_ram.sv",
    "roce_first_set.sv",
    "roce_bram_fifo.sv",
    "fp_mr_copy.sv",
    "fp_resp_q.sv",
    "fp_tx_plan.sv",
    "fp_tx_hdr.sv",
    "fp_tx_emit.sv",
    "fp_tx.sv",
    "fp_inflight.sv",
    "fp_rx_check.sv",
    "fp_rx_move.sv",
    "fp_rx.sv",
    "fp_cqw.sv",
    "fp_sqf.sv",
    "roce_fp_top.sv",
];
const FP_TOP: &str = "roce_fp_top";
// FP_CTX_ENTRIES: the fast path's context entries (`-GNQP`), shared with the crate.
include!("src/fp_params.rs");
/// The DCB block (PFC, ETS; `rtl/roce_dcb_top.sv`): a model per width of its own.
const DCB_RTL: &[&str] = &[
    "dcb_pkg.sv",
    "roce_fifo.sv",
    "roce_bram_fifo.sv",
    "axis_skid.sv",
    "dcb_frame_class.sv",
    "dcb_pause_timers.sv",
    "dcb_pfc_gen.sv",
    "dcb_ets.sv",
    "dcb_tx.sv",
    "dcb_rx.sv",
    "roce_dcb_top.sv",
];
const DCB_TOP: &str = "roce_dcb_top";
/// The SoC's own RTL (after `RTL` and the soft core), and its Verilator config.
const SOC_RTL: &[&str] = &[
    "soc/soc_ram.sv",
    "soc/soc_tdp_ram.sv",
    "soc/soc_host_regs.sv",
    "soc/soc_dma.sv",
    "soc/soc_datapath.sv",
    "soc/soc_timer.sv",
    "soc/soc_log.sv",
    SOC_FP,
    "soc/nic_soc.sv",
];
const SOC_VLT: &str = "soc/vexriscv.vlt";
/// The fast path's block in the SoC (in `SOC_RTL`; only the `FASTPATH` model uses it).
const SOC_FP: &str = "soc/soc_fp.sv";
const SOC_TOP: &str = "nic_soc";
/// The soft core: this file of the PyPI package's `data_location`.
const VEXRISCV: &str = "VexRiscv_IMAC.v";
/// The project's virtualenv (xtask's `install::python_packages`), from the workspace root.
const VENV: &str = "target/tools/venv";
const WIDTHS: &[u32] = &[64, 512];
const VERILATOR_FLAGS: &[&str] = &[
    "--cc",
    "-Wall",
    "-O3",
    "--x-assign",
    "fast",
    "--x-initial",
    "fast",
    "--trace-fst",
    "--trace-structs",
];
const CXX_DEFINES: &[(&str, &str)] = &[
    ("VM_TRACE", "1"),
    ("VM_TRACE_FST", "1"),
    ("VM_TRACE_VCD", "0"),
    ("VM_COVERAGE", "0"),
    ("VM_SC", "0"),
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(roce_rtl_unavailable)");
    println!("cargo::rustc-check-cfg=cfg(roce_soc_unavailable)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=rtl");
    println!("cargo::rerun-if-changed=csrc");
    println!("cargo::rerun-if-changed=src/ffi.rs");
    println!("cargo::rerun-if-env-changed=ROCE_HDL_SIM_DISABLE");
    println!("cargo::rerun-if-env-changed=ROCE_HDL_SIM_DATAPATH_ONLY");
    println!("cargo::rerun-if-env-changed=VERILATOR");
    println!("cargo::rerun-if-env-changed=PATH");

    if env::var("ROCE_HDL_SIM_DISABLE").is_ok_and(|v| v == "1") {
        return unavailable("ROCE_HDL_SIM_DISABLE=1");
    }
    let verilator = match locate_verilator() {
        Ok(path) => path.display().to_string(),
        Err(why) => return unavailable(&why),
    };
    let version = match Command::new(&verilator).arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => {
            return unavailable(&format!(
                "`{verilator} --version` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
        Err(e) => return unavailable(&format!("`{verilator}` not found ({e})")),
    };
    if !version_ok(&version) {
        return unavailable(&format!("{version}: Verilator 5 is needed"));
    }
    let root = match Command::new(&verilator)
        .args(["--getenv", "VERILATOR_ROOT"])
        .output()
    {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => return unavailable("`verilator --getenv VERILATOR_ROOT` failed"),
    };
    let include = root.join("include");
    if !include.join("verilated.cpp").exists() {
        return unavailable(&format!("no verilated.cpp in {}", include.display()));
    }

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let rtl: Vec<PathBuf> = RTL.iter().map(|f| manifest.join("rtl").join(f)).collect();
    let fp_rtl: Vec<PathBuf> = rtl
        .iter()
        .cloned()
        .chain(FP_RTL.iter().map(|f| manifest.join("rtl").join(f)))
        .collect();

    let dcb_rtl: Vec<PathBuf> = DCB_RTL
        .iter()
        .map(|f| manifest.join("rtl").join(f))
        .collect();

    // ---- Verilate (both widths at once) and compile the models, if stale
    let rtl_hash = stamp(&version, &rtl);
    let fp_hash = stamp(&format!("{version} NQP={FP_CTX_ENTRIES}"), &fp_rtl);
    let dcb_hash = stamp(&version, &dcb_rtl);

    let mut models: Vec<Model> = WIDTHS
        .iter()
        .map(|&w| Model {
            lib: model_lib(w),
            mdir: out.join(format!("vobj_{w}")),
            args: [
                "--top-module".to_string(),
                TOP.to_string(),
                "--prefix".to_string(),
                format!("V{TOP}_{w}"),
                format!("-GDATA_WIDTH={w}"),
            ]
            .into_iter()
            .map(Into::into)
            .chain(rtl.iter().map(|f| f.clone().into_os_string()))
            .collect(),
            hash: rtl_hash.clone(),
        })
        .collect();
    // `ROCE_HDL_SIM_DATAPATH_ONLY=1`: only the datapath's models, for a build that uses
    // nothing else (the `rtl_parser` fuzz target's coverage build: its models compiled
    // with trace-pc, in a target directory of its own, where the fast path, the DCB block
    // and the SoC were three quarters of the C++ and of an hour's build under load). Their
    // constructors then report it (`csrc/fp_model.cpp`, `csrc/dcb_model.cpp`, the SoC's
    // `cfg(roce_soc_unavailable)`).
    let datapath_only = env::var("ROCE_HDL_SIM_DATAPATH_ONLY").is_ok_and(|v| v == "1");
    models.extend(WIDTHS.iter().filter(|_| !datapath_only).map(|&w| {
        Model {
            lib: format!("vmodel_fp_{w}"),
            mdir: out.join(format!("vobj_fp_{w}")),
            args: [
                "--top-module".to_string(),
                FP_TOP.to_string(),
                "--prefix".to_string(),
                format!("V{FP_TOP}_{w}"),
                format!("-GDATA_WIDTH={w}"),
                format!("-GNQP={FP_CTX_ENTRIES}"),
            ]
            .into_iter()
            .map(Into::into)
            .chain(fp_rtl.iter().map(|f| f.clone().into_os_string()))
            .collect(),
            hash: fp_hash.clone(),
        }
    }));
    models.extend(WIDTHS.iter().filter(|_| !datapath_only).map(|&w| {
        Model {
            lib: format!("vmodel_dcb_{w}"),
            mdir: out.join(format!("vobj_dcb_{w}")),
            args: [
                "--top-module".to_string(),
                DCB_TOP.to_string(),
                "--prefix".to_string(),
                format!("V{DCB_TOP}_{w}"),
                format!("-GDATA_WIDTH={w}"),
            ]
            .into_iter()
            .map(Into::into)
            .chain(dcb_rtl.iter().map(|f| f.clone().into_os_string()))
            .collect(),
            hash: dcb_hash.clone(),
        }
    }));
    let soc = if datapath_only {
        Err("ROCE_HDL_SIM_DATAPATH_ONLY=1".to_string())
    } else {
        soc_model(&manifest, &out, &rtl, &version)
    };
    let soc = match soc {
        Ok(m) => {
            models.extend(m);
            true
        }
        Err(why) => {
            soc_unavailable(&why);
            false
        }
    };
    build_models(&verilator, &include, &out, &models);

    // ---- Verilator runtime, once per OUT_DIR
    let rt_stamp = format!("{version} {CXX_DEFINES:?}");
    let rt_dir = out.join("vruntime");
    if read_stamp(&rt_dir) != Some(rt_stamp.clone()) || !out.join(lib_file("vruntime")).exists() {
        let mut b = cxx_base(&include);
        for f in [
            "verilated.cpp",
            "verilated_threads.cpp",
            "verilated_fst_c.cpp",
        ] {
            b.file(include.join(f));
        }
        b.compile("vruntime");
        fs::create_dir_all(&rt_dir).unwrap();
        fs::write(rt_dir.join("roce.stamp"), &rt_stamp).unwrap();
    }

    // ---- the bridges and the wrappers (always: they are small)
    let mut bridges = vec!["src/ffi.rs"];
    if soc {
        bridges.push("src/soc_ffi.rs");
    }
    let mut b = cxx_build::bridges(bridges);
    if soc {
        b.file("csrc/soc_model.cpp")
            .include(out.join("vobj_soc"))
            .include(out.join("vobj_soc_fp"));
    }
    b.file("csrc/dp_model.cpp")
        .file("csrc/fp_model.cpp")
        .file("csrc/dcb_model.cpp")
        .std("c++17")
        .opt_level(2)
        .debug(false)
        .include(&include)
        .include(include.join("vltstd"));
    for &w in WIDTHS {
        b.include(out.join(format!("vobj_{w}")));
        b.include(out.join(format!("vobj_fp_{w}")));
        b.include(out.join(format!("vobj_dcb_{w}")));
    }
    for (k, v) in CXX_DEFINES {
        b.define(k, *v);
    }
    if datapath_only {
        b.define("ROCE_HDL_DATAPATH_ONLY", "1");
    }
    b.flag_if_supported("-Wno-unused-parameter");
    b.compile("roce_hdl_bridge");

    // link order: bridge (emitted by compile above), models, runtime, system
    println!("cargo::rustc-link-search=native={}", out.display());
    for m in &models {
        println!("cargo::rustc-link-lib=static={}", m.lib);
    }
    println!("cargo::rustc-link-lib=static=vruntime");
    println!("cargo::rustc-link-lib=dylib=z");
    println!("cargo::rustc-link-lib=dylib=atomic");
    println!("cargo::rustc-link-lib=dylib=pthread");
}

/// The stamp of a model built from `files`: a hash of their contents, the Verilator
/// version and the flags.
fn stamp(version: &str, files: &[PathBuf]) -> String {
    let mut src = version.as_bytes().to_vec();
    for f in files {
        src.extend(fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
    }
    for f in VERILATOR_FLAGS {
        src.extend(f.as_bytes());
    }
    format!("{:016x}", elf2img::sources::fnv1a64(&src))
}

/// One Verilated model: its static library, Verilator's output directory, the
/// arguments that choose its top and sources, and the stamp that says it is current.
struct Model {
    lib: String,
    mdir: PathBuf,
    args: Vec<std::ffi::OsString>,
    hash: String,
}

/// Verilates the stale models (all at once) and compiles each into its library.
fn build_models(verilator: &str, include: &Path, out: &Path, models: &[Model]) {
    let mut verilating = Vec::new();
    for m in models {
        if read_stamp(&m.mdir).as_ref() == Some(&m.hash) && out.join(lib_file(&m.lib)).exists() {
            continue;
        }
        let _ = fs::remove_dir_all(&m.mdir);
        let child = Command::new(verilator)
            .args(VERILATOR_FLAGS)
            .arg("--Mdir")
            .arg(&m.mdir)
            .args(&m.args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("running {verilator}: {e}"));
        verilating.push((m, child));
    }
    let mut stale = Vec::new();
    for (m, child) in verilating {
        let o = child.wait_with_output().expect("waiting for verilator");
        if !o.status.success() {
            panic!(
                "verilator failed for {}:\n{}{}",
                m.lib,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        stale.push(m);
    }
    for m in stale {
        let mut b = cxx_base(include);
        b.include(&m.mdir);
        let mut files: Vec<PathBuf> = fs::read_dir(&m.mdir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
            .collect();
        files.sort();
        b.files(&files);
        b.compile(&m.lib);
        fs::write(m.mdir.join("roce.stamp"), &m.hash).unwrap();
    }
}

/// The SoC's two models (without the fast path and with it), or why they cannot be
/// built: the soft core's Verilog comes from the project's virtualenv.
fn soc_model(
    manifest: &Path,
    out: &Path,
    rtl: &[PathBuf],
    version: &str,
) -> Result<[Model; 2], String> {
    let root = manifest.parent().unwrap_or(manifest);
    let venv = root.join(VENV);
    let python = venv.join("bin/python");
    // Run again when the virtualenv appears (a newcomer's first build comes before
    // `cargo xtask install`): its config file is written when it is made. (While it
    // is missing, cargo runs this script on every build; that costs a second.)
    println!(
        "cargo::rerun-if-changed={}",
        venv.join("pyvenv.cfg").display()
    );
    let query = "import pythondata_cpu_vexriscv as p; print(p.data_location)";
    let location = match Command::new(&python).args(["-c", query]).output() {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        Ok(o) => {
            return Err(format!(
                "pythondata-cpu-vexriscv is not in {}: {}",
                venv.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
        Err(_) => return Err(format!("no virtualenv at {}", venv.display())),
    };
    let core = location.join(VEXRISCV);
    if !core.exists() {
        return Err(format!("{} missing", core.display()));
    }
    println!("cargo::rerun-if-changed={}", core.display());
    let rtl_dir = manifest.join("rtl");
    let vlt = rtl_dir.join(SOC_VLT);
    let soc: Vec<PathBuf> = SOC_RTL.iter().map(|f| rtl_dir.join(f)).collect();
    // the DCB block sits between the datapath and the wire (files the datapath's RTL
    // already lists are given once)
    let dcb = DCB_RTL
        .iter()
        .filter(|f| !RTL.contains(f))
        .map(|f| rtl_dir.join(f));
    // and the fast path in front of the datapath (`FASTPATH`, with the context
    // entries of the fast path's own model), which the firmware uses when the host
    // side sets the strap (`Soc::new`'s `fastpath`)
    let fp: Vec<PathBuf> = FP_RTL
        .iter()
        .filter(|f| !RTL.contains(f) && !DCB_RTL.contains(f))
        .map(|f| rtl_dir.join(f))
        .collect();
    let files: Vec<PathBuf> = std::iter::once(vlt)
        .chain(rtl.iter().cloned())
        .chain(dcb)
        .chain(fp.iter().cloned())
        .chain(std::iter::once(core))
        .chain(soc)
        .collect();
    let mut contents = Vec::new();
    for f in &files {
        contents.push(fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    // Both models read every file (Verilator resolves `soc_fp` in the generate branch
    // that `FASTPATH` 0 leaves out, then drops it), but the one without the fast path
    // does not depend on the fast path's files: its stamp leaves their contents out, so
    // editing the fast path rebuilds only `vmodel_soc_fp`.
    let fp_only = |f: &PathBuf| fp.contains(f) || f.ends_with(SOC_FP);
    let model = |suffix: &str, params: Vec<String>| {
        let with_fp = !params.is_empty();
        let mut stamp = version.as_bytes().to_vec();
        for (f, c) in files.iter().zip(&contents) {
            if with_fp || !fp_only(f) {
                stamp.extend(c);
            }
        }
        for a in VERILATOR_FLAGS
            .iter()
            .copied()
            .chain(params.iter().map(String::as_str))
        {
            stamp.extend(a.as_bytes());
        }
        let args = [
            "--top-module".to_string(),
            SOC_TOP.to_string(),
            "--prefix".to_string(),
            format!("V{SOC_TOP}{suffix}"),
        ]
        .into_iter()
        .chain(params)
        .map(Into::into)
        .chain(files.iter().map(|f| f.clone().into_os_string()))
        .collect();
        Model {
            lib: format!("vmodel_soc{suffix}"),
            mdir: out.join(format!("vobj_soc{suffix}")),
            args,
            hash: format!("{:016x}", elf2img::sources::fnv1a64(&stamp)),
        }
    };
    Ok([
        model("", Vec::new()),
        model(
            "_fp",
            vec![
                "-GFASTPATH=1".to_string(),
                format!("-GFP_NQP={FP_CTX_ENTRIES}"),
            ],
        ),
    ])
}

fn soc_unavailable(why: &str) {
    println!("cargo::rustc-env=ROCE_SOC_UNAVAILABLE={why}");
    println!("cargo::warning=roce-hdl-sim: the SoC model is unavailable: {why}. `cargo xtask install` sets up target/tools/venv with pythondata-cpu-vexriscv.");
    println!("cargo::rustc-cfg=roce_soc_unavailable");
}

/// Where Verilator is: `$VERILATOR` (a path, or a name looked up on PATH), else
/// `verilator` on PATH. Tells cargo when to look again: when the file found changes,
/// or, when none was found, when a directory on PATH does.
fn locate_verilator() -> Result<PathBuf, String> {
    let name = env::var_os("VERILATOR").unwrap_or_else(|| "verilator".into());
    let given = PathBuf::from(&name);
    if given.components().count() > 1 {
        println!("cargo::rerun-if-changed={}", given.display());
        return Ok(given);
    }
    let dirs: Vec<PathBuf> = env::split_paths(&env::var_os("PATH").unwrap_or_default())
        .filter(|d| d.is_absolute() && d.is_dir())
        .collect();
    if let Some(found) = dirs.iter().map(|d| d.join(&given)).find(|f| f.is_file()) {
        println!("cargo::rerun-if-changed={}", found.display());
        return Ok(found);
    }
    for d in &dirs {
        println!("cargo::rerun-if-changed={}", d.display());
    }
    Err(format!("`{}` is not on PATH", given.display()))
}

fn unavailable(why: &str) {
    println!("cargo::warning=roce-hdl-sim: RTL simulation unavailable: {why}. Install Verilator 5 (apt-get install verilator) to enable it.");
    println!("cargo::rustc-cfg=roce_rtl_unavailable");
    println!("cargo::rustc-cfg=roce_soc_unavailable");
}

fn version_ok(v: &str) -> bool {
    // "Verilator 5.006 2023-01-22 rev ..."
    v.split_whitespace()
        .nth(1)
        .and_then(|n| n.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|m| m >= 5)
}

fn cxx_base(include: &Path) -> cc::Build {
    let mut b = cc::Build::new();
    b.cpp(true)
        .std("c++17")
        .opt_level(2)
        .debug(false)
        .warnings(false)
        .cargo_metadata(false)
        .include(include)
        .include(include.join("vltstd"));
    for (k, v) in CXX_DEFINES {
        b.define(k, *v);
    }
    b
}

fn model_lib(w: u32) -> String {
    format!("vmodel_{w}")
}

fn lib_file(name: &str) -> String {
    format!("lib{name}.a")
}

fn read_stamp(dir: &Path) -> Option<String> {
    fs::read_to_string(dir.join("roce.stamp")).ok()
}
