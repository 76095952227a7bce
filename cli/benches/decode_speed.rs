//! `roce decode` against tshark on the same capture, in one run (issues 12 and 20).
//!
//! The capture: scapy's vector corpus (`tests/data/vectors/valid.pcap`, 366 frames of
//! every opcode, IPv4 and IPv6, VLAN or not, payloads up to 4 KiB) repeated 300 times:
//! 109,800 frames, 46 MB. Each command runs as a process with its output to /dev/null,
//! interleaved, five rounds; the table gives the least wall time and the least CPU time
//! (user + system, from `getrusage`) of each, and the ratios. CPU time is the steadier
//! figure on a shared machine. tshark is skipped (with a note) when it is not installed.
//!
//! Run: `cargo bench -p roce-cli --bench decode_speed` (`--rounds N` to change five).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// CPU seconds (user + system) of every child process waited for so far.
fn children_cpu() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_CHILDREN, u.as_mut_ptr());
        u.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Runs `program args` with its output to /dev/null: (wall seconds, CPU seconds).
fn time(program: &Path, args: &[&str]) -> (f64, f64) {
    let cpu = children_cpu();
    let t = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run the command");
    let wall = t.elapsed().as_secs_f64();
    assert!(status.success(), "{} {args:?}: {status}", program.display());
    (wall, children_cpu() - cpu)
}

fn have_tshark() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The corpus repeated `times` times, as one pcap.
fn corpus(times: usize) -> PathBuf {
    let valid = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vectors/valid.pcap");
    let bytes = std::fs::read(valid).expect("the vectors");
    let (header, records) = bytes.split_at(24);
    let path = std::env::temp_dir().join(format!("roce-decode-speed-{}.pcap", std::process::id()));
    let mut out = header.to_vec();
    for _ in 0..times {
        out.extend_from_slice(records);
    }
    std::fs::write(&path, out).expect("write the capture");
    path
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benchmarks; there are none to list here
    }
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(5usize);
    let capture = corpus(300);
    let cap = capture.to_str().unwrap();
    let frames = 366.0 * 300.0;
    let roce = Path::new(env!("CARGO_BIN_EXE_roce"));
    let tshark = have_tshark().then(|| PathBuf::from("tshark"));
    if tshark.is_none() {
        println!("tshark is not installed: only roce is timed");
    }
    let commands: Vec<(&str, &Path, Vec<&str>)> = [
        ("roce decode --json", roce, vec!["decode", "--json", cap]),
        ("roce decode (text)", roce, vec!["decode", cap]),
    ]
    .into_iter()
    .chain(tshark.as_deref().into_iter().flat_map(|t| {
        [
            ("tshark -T json", t, vec!["-r", cap, "-T", "json"]),
            ("tshark (text summary)", t, vec!["-r", cap]),
        ]
    }))
    .collect();
    let mut best = vec![(f64::MAX, f64::MAX); commands.len()];
    for _ in 0..rounds {
        for (i, (_, program, a)) in commands.iter().enumerate() {
            let (wall, cpu) = time(program, a);
            best[i] = (best[i].0.min(wall), best[i].1.min(cpu));
        }
    }
    println!(
        "{frames} frames, {} MB, best of {rounds} rounds",
        std::fs::metadata(&capture).unwrap().len() / 1_000_000
    );
    println!(
        "{:<24} {:>10} {:>10} {:>14}",
        "command", "wall s", "CPU s", "frames/s (CPU)"
    );
    for ((name, _, _), (wall, cpu)) in commands.iter().zip(&best) {
        println!("{name:<24} {wall:>10.3} {cpu:>10.3} {:>14.0}", frames / cpu);
    }
    if tshark.is_some() {
        for (what, ours, theirs) in [("JSON", 0, 2), ("text", 1, 3)] {
            println!(
                "{what}: roce is {:.1}x tshark by CPU time, {:.1}x by wall time",
                best[theirs].1 / best[ours].1,
                best[theirs].0 / best[ours].0
            );
        }
    }
    let _ = std::fs::remove_file(&capture);
}
