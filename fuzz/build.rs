//! With `ROCE_FUZZ_RTL_COVERAGE=1` (set by `cargo xtask fuzz` for `rtl_parser` only),
//! links `csrc/rtl_coverage.c`: the hook that turns g++'s trace-pc instrumentation of
//! the Verilated C++ into libFuzzer coverage.

fn main() {
    println!("cargo::rerun-if-env-changed=ROCE_FUZZ_RTL_COVERAGE");
    println!("cargo::rerun-if-changed=csrc/rtl_coverage.c");
    if std::env::var("ROCE_FUZZ_RTL_COVERAGE").is_ok_and(|v| v == "1") {
        cc::Build::new()
            .file("csrc/rtl_coverage.c")
            .opt_level(2)
            .compile("rtl_coverage");
        println!("cargo::rustc-link-arg=-Wl,--wrap=__sanitizer_cov_trace_pc");
    }
}
