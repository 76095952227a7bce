//! The `rtl_parser` fuzz target's inputs as a regression test: every frame of its
//! committed corpus (`fuzz/corpus/rtl_parser/`, what the last long campaign kept) and of
//! its seeds (`fuzz/seeds/frames/`) goes through the Verilated RX datapath at both bus
//! widths and through `roce_core::wire::parse`, which must agree (the comparison of
//! `common/diff.rs`, as in the fuzz target).
//!
//! CI's fuzz step does not build that target: its build Verilates and compiles every
//! model again with coverage instrumentation, minutes of CI for a target that runs
//! ~2,000 inputs/s. Its inputs run here instead, on the models the test step builds
//! anyway; `cargo xtask fuzz --long rtl_parser` is the campaign that grows them.

mod common;

use std::path::Path;

use roce_hdl_sim::DataWidth;

#[test]
fn rtl_parser_fuzz_inputs_agree_with_roce_core() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut frames = Vec::new();
    for dir in ["corpus/rtl_parser", "seeds/frames"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir)) else {
            continue;
        };
        for e in entries {
            let path = e.expect("a directory entry").path();
            frames.push((path.clone(), std::fs::read(&path).expect("an input")));
        }
    }
    assert!(
        frames.len() >= 20,
        "fuzz/seeds/frames holds the shared vectors"
    );
    for width in DataWidth::ALL {
        let Some(mut dp) = common::datapath(width) else {
            return;
        };
        for (path, frame) in &frames {
            let verdict = dp
                .rx(frame)
                .unwrap_or_else(|e| panic!("{width}: no verdict for {}: {e}", path.display()));
            if let Err(d) = common::diff::compare(frame, &verdict) {
                panic!("{width}: RTL and core disagree on {}: {d}", path.display());
            }
        }
    }
}
