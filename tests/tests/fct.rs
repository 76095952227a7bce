//! Fat-tree FCT experiments (issue 16) on the parallel engine: a lone flow completes in
//! exactly its ideal time, and a run gives the same bytes on 1 and 2 threads.

use roce_cli::progress::ProgressBar;
use roce_cli::scenario::fct::FctResult;
use roce_cli::scenario::{self, Outcome, Scenario};

fn run(text: &str, threads: usize) -> FctResult {
    let mut s = Scenario::parse(text).unwrap();
    s.threads = Some(threads);
    match scenario::run(&s, &ProgressBar::hidden()).unwrap() {
        Outcome::Fct(r) => r,
        _ => panic!("not an FCT scenario"),
    }
}

const TREE: &str = r#"
name = "t"
title = "t"
seed = 3
[fct]
k = 4
link = { rate = "100g", delay = "1us" }
switch = { port_buffer = 65536, shared_buffer = 4194304, pfc = { xoff = 65536, xon = 32768, headroom = 49152 } }
"#;

#[test]
fn a_flow_alone_completes_in_its_ideal_time_over_1_3_and_5_switches() {
    // One flow at a time (each ends long before the next starts), from host 0 to a host
    // on its edge switch, in its pod, in another pod; sizes of one packet, of one WRITE
    // of 25 packets whose last is short, and of three WRITEs.
    let mut text = TREE.to_string() + "workload = { kind = \"list\", flows = [\n";
    let mut start = 0;
    let mut links = Vec::new();
    for (dst, hops) in [(1, 1), (2, 3), (4, 5)] {
        for size in [1000, 100_000, 3_000_000] {
            text +=
                &format!("  {{ src = 0, dst = {dst}, size = {size}, start = \"{start}us\" }},\n");
            start += 1000;
            links.push(hops + 1);
        }
    }
    text += "] }\n";
    let r = run(&text, 2);
    let flows = &r.runs[0].flows;
    assert_eq!(flows.len(), 9);
    for (x, links) in flows.iter().zip(links) {
        let fct = x.fct_ns.expect("finished");
        // Each transmitter's busy period starts on a whole nanosecond (the fabric's wire
        // clock): up to one nanosecond per link, for the data and the ACK.
        assert!(fct.abs_diff(x.ideal_ns) <= links, "{x:?}");
    }
    // The ideal grows with the path: two more links, each a delay and a frame there and
    // an ACK back.
    assert!(flows[0].ideal_ns < flows[3].ideal_ns && flows[3].ideal_ns < flows[6].ideal_ns);
}

#[test]
fn a_websearch_run_gives_the_same_bytes_on_1_and_2_threads() {
    let text = TREE.to_string()
        + "runs = 2\nlimit = \"20ms\"\n"
        + "workload = { kind = \"poisson\", cdf = \"websearch\", load = 0.6, duration = \"300us\" }\n";
    let (one, two) = (run(&text, 1), run(&text, 2));
    let bytes = |r: &FctResult| {
        let mut csv = Vec::new();
        r.write_csv(&mut csv).unwrap();
        (csv, r.table())
    };
    assert_eq!(bytes(&one), bytes(&two));
    assert_eq!(one.runs[0].events, two.runs[0].events);
    // Something worth comparing happened: flows of many sizes, some slowed by others.
    let flows: Vec<_> = one.runs.iter().flat_map(|r| &r.flows).collect();
    assert!(flows.len() > 20, "{}", flows.len());
    assert!(flows.iter().all(|x| x.fct_ns.is_some()));
    assert!(flows.iter().any(|x| x.slowdown().unwrap() > 1.5));
    assert_ne!(one.runs[0].flows, one.runs[1].flows);
}

#[test]
fn the_shipped_fct_scenarios_parse_and_the_incast_behaves() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("fct_") && name.ends_with(".toml") {
            let s = Scenario::load(&path).unwrap();
            assert!(s.fct.is_some(), "{name}");
            assert_eq!(s.name, name.trim_end_matches(".toml"));
            n += 1;
        }
    }
    assert!(n >= 6, "{n} fct scenarios");
    // The 15:1 incast, one run: 15 MB through one 100 Gb/s port, so the last flow ends
    // no sooner than 15 x 1 MB / 100 Gb/s (1.2 ms) and each flow gets about a fifteenth:
    // slowdowns between 1 and 15 (and above 1 for most).
    let mut s = Scenario::load(&dir.join("fct_incast_k4.toml")).unwrap();
    s.fct.as_mut().unwrap().runs = 1;
    s.threads = Some(2);
    let Outcome::Fct(r) = scenario::run(&s, &ProgressBar::hidden()).unwrap() else {
        panic!("an FCT scenario");
    };
    let run = &r.runs[0];
    assert_eq!(run.flows.len(), 15);
    let last = run.flows.iter().map(|x| x.fct_ns.unwrap()).max().unwrap();
    assert!(last >= 15 * 8_000_000_000 / 100_000, "{last}");
    for x in &run.flows {
        let s = x.slowdown().unwrap();
        assert!((1.0..16.0).contains(&s), "{x:?}");
    }
    assert_eq!(run.drops, 0);
}
