//! Verilates `rtl/` at two bus widths and builds the cxx bridge.
//!
//! * Verilator is found as `$VERILATOR` or `verilator` on PATH. When it is
//!   missing (or `ROCE_HDL_SIM_DISABLE=1`), the build does not fail: it warns,
//!   sets `cfg(roce_rtl_unavailable)`, and the crate compiles a stub whose
//!   constructors report "unavailable".
//! * Debian's Verilator 5.006 does not put its runtime into the generated
//!   archive, so `verilated.cpp`, `verilated_threads.cpp` and
//!   `verilated_fst_c.cpp` are compiled here, once per OUT_DIR (stamped with
//!   the Verilator version and flags).
//! * Each Verilated model is compiled into its own static library, stamped
//!   with a hash of the RTL sources and flags, so editing only the C++ wrapper
//!   or the Rust code does not re-Verilate or recompile the models.
//! * C++ is always compiled at -O2, also in debug builds: an -O0 model crawls.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The datapath's RTL sources, in compile order (package first).
const DP_RTL: &[&str] = &[
    "roce_rx_pkg.sv",
    "roce_fifo.sv",
    "axis_skid.sv",
    "icrc.sv",
    "rx_hdr_decode.sv",
    "rx_parser.sv",
    "tx_icrc_insert.sv",
    "roce_dp_top.sv",
];
/// The fast path's, in compile order after the datapath's (whose modules it uses).
const FP_RTL: &[&str] = &[
    "fp_pkg.sv",
    "roce_ram.sv",
    "roce_bram_fifo.sv",
    "fp_tx_plan.sv",
    "fp_tx_hdr.sv",
    "fp_tx_emit.sv",
    "fp_tx.sv",
    "fp_rx_check.sv",
    "fp_rx_move.sv",
    "fp_rx.sv",
    "roce_fp_top.sv",
];
/// The Verilated models: (top module, its sources beyond `DP_RTL`, bus width). The
/// datapath (RX parser, TX ICRC) and the RC fast path, each at 64 and 512 bits.
const MODELS: &[(&str, &[&str], u32)] = &[
    ("roce_dp_top", &[], 64),
    ("roce_dp_top", &[], 512),
    ("roce_fp_top", FP_RTL, 64),
    ("roce_fp_top", FP_RTL, 512),
];
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
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=rtl");
    println!("cargo::rerun-if-changed=csrc");
    println!("cargo::rerun-if-changed=src/ffi.rs");
    println!("cargo::rerun-if-env-changed=ROCE_HDL_SIM_DISABLE");
    println!("cargo::rerun-if-env-changed=VERILATOR");

    if env::var("ROCE_HDL_SIM_DISABLE").is_ok_and(|v| v == "1") {
        return unavailable("ROCE_HDL_SIM_DISABLE=1");
    }
    let verilator = env::var("VERILATOR").unwrap_or_else(|_| "verilator".to_string());
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
    let rtl_path = |f: &&str| manifest.join("rtl").join(f);
    let rtl: Vec<PathBuf> = DP_RTL.iter().chain(FP_RTL).map(rtl_path).collect();

    // ---- Verilate (both widths at once) and compile the models, if stale
    let mut stamp_src = version.clone().into_bytes();
    for f in &rtl {
        stamp_src.extend(fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
    }
    for f in VERILATOR_FLAGS {
        stamp_src.extend(f.as_bytes());
    }
    let rtl_hash = format!("{:016x}", fnv1a(&stamp_src));

    let mut verilating = Vec::new();
    for &(top, extra, w) in MODELS {
        let mdir = out.join(format!("vobj_{top}_{w}"));
        if read_stamp(&mdir) == Some(rtl_hash.clone())
            && out.join(lib_file(&model_lib(top, w))).exists()
        {
            continue;
        }
        let _ = fs::remove_dir_all(&mdir);
        let mut cmd = Command::new(&verilator);
        cmd.args(VERILATOR_FLAGS)
            .arg("--top-module")
            .arg(top)
            .arg("--prefix")
            .arg(format!("V{top}_{w}"))
            .arg(format!("-GDATA_WIDTH={w}"))
            .arg("--Mdir")
            .arg(&mdir)
            .args(DP_RTL.iter().chain(extra).map(rtl_path))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("running {verilator}: {e}"));
        verilating.push((top, w, mdir, child));
    }
    let mut stale = Vec::new();
    for (top, w, mdir, child) in verilating {
        let o = child.wait_with_output().expect("waiting for verilator");
        if !o.status.success() {
            panic!(
                "verilator failed for {top} DATA_WIDTH={w}:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        stale.push((top, w, mdir));
    }
    for (top, w, mdir) in &stale {
        let mut b = cxx_base(&include);
        b.include(mdir);
        let mut files: Vec<PathBuf> = fs::read_dir(mdir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
            .collect();
        files.sort();
        b.files(&files);
        b.compile(&model_lib(top, *w));
        fs::write(mdir.join("roce.stamp"), &rtl_hash).unwrap();
    }

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

    // ---- the bridge and the wrapper (always: it is small)
    let mut b = cxx_build::bridge("src/ffi.rs");
    b.file("csrc/dp_model.cpp")
        .file("csrc/fp_model.cpp")
        .std("c++17")
        .opt_level(2)
        .debug(false)
        .include(&include)
        .include(include.join("vltstd"));
    for &(top, _, w) in MODELS {
        b.include(out.join(format!("vobj_{top}_{w}")));
    }
    for (k, v) in CXX_DEFINES {
        b.define(k, *v);
    }
    b.flag_if_supported("-Wno-unused-parameter");
    b.compile("roce_hdl_bridge");

    // link order: bridge (emitted by compile above), models, runtime, system
    println!("cargo::rustc-link-search=native={}", out.display());
    for &(top, _, w) in MODELS {
        println!("cargo::rustc-link-lib=static={}", model_lib(top, w));
    }
    println!("cargo::rustc-link-lib=static=vruntime");
    println!("cargo::rustc-link-lib=dylib=z");
    println!("cargo::rustc-link-lib=dylib=atomic");
    println!("cargo::rustc-link-lib=dylib=pthread");
}

fn unavailable(why: &str) {
    println!("cargo::warning=roce-hdl-sim: RTL simulation unavailable: {why}. Install Verilator 5 (apt-get install verilator) to enable it.");
    println!("cargo::rustc-cfg=roce_rtl_unavailable");
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

fn model_lib(top: &str, w: u32) -> String {
    format!("vmodel_{top}_{w}")
}

fn lib_file(name: &str) -> String {
    format!("lib{name}.a")
}

fn read_stamp(dir: &Path) -> Option<String> {
    fs::read_to_string(dir.join("roce.stamp")).ok()
}

/// FNV-1a, 64 bit: a stable content hash (std's hasher may change between releases).
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
