//! `cargo xtask chaos [FIRST..LAST]`: the long whole-stack chaos run (`roce_tests::chaos`,
//! the ignored test `chaos_long` of `tests/tests/chaos.rs`), in release, under `nice` (`XTASK_NICE`),
//! every seed's report printed. `ROCE_CHAOS_OPS`, `ROCE_CHAOS_QPS` and
//! `ROCE_CHAOS_RTL_EVERY` pass through; the seeds default to 1..100.

use crate::cmd::{self, Result};

pub fn chaos(seeds: Option<&str>) -> Result {
    let seeds = seeds.unwrap_or("1..100");
    if seeds
        .split_once("..")
        .is_none_or(|(a, b)| a.parse::<u64>().is_err() || b.parse::<u64>().is_err())
    {
        return Err(format!("seeds are FIRST..LAST, not `{seeds}`"));
    }
    let args = [
        "test",
        "--release",
        "-p",
        "roce-tests",
        "--test",
        "chaos",
        "chaos_long",
        "--",
        "--ignored",
        "--nocapture",
    ];
    let mut command = cmd::niced("cargo", &args)?;
    command.env("ROCE_CHAOS_SEEDS", seeds);
    cmd::run(&mut command)
}
