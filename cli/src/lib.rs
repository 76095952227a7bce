//! The library behind the `roce` command, so tests drive the same code the binary runs.

pub mod capture;
pub mod json;
pub mod perf;
pub mod perf_cmd;
pub mod summary;

use anyhow::{Context, Result};
use roce_core::wire;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

/// `roce decode [--json] FILE`: one line per frame of the capture into `out`.
pub fn decode(path: &Path, as_json: bool, out: &mut impl Write) -> Result<()> {
    let frames = capture::read(path)?;
    let start = frames.first().map_or(Duration::ZERO, |f| f.timestamp);
    for (i, f) in frames.iter().enumerate() {
        let index = i + 1;
        if !f.ethernet {
            let line = if as_json {
                json!({"index": index, "ok": false, "error": "unsupported_ethertype",
                       "detail": "the capture's link type is not Ethernet"})
                .to_string()
            } else {
                format!("{index:5} [not decoded: link type is not Ethernet]")
            };
            writeln!(out, "{line}")?;
            continue;
        }
        let result = wire::parse(&f.data);
        let line = if as_json {
            let v: Value = match &result {
                Ok(p) => json!({"index": index, "ok": true, "packet": json::packet_to_json(p)}),
                Err(e) => {
                    json!({"index": index, "ok": false, "error": e.name(), "detail": e.to_string()})
                }
            };
            v.to_string()
        } else {
            let secs = f.timestamp.saturating_sub(start).as_secs_f64();
            summary::line(index, secs, &result)
        };
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// `roce encode IN.jsonl -o OUT.pcap`: returns the number of frames written.
pub fn encode(input: &Path, output: &Path) -> Result<u64> {
    let file =
        std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
    let mut writer = capture::Writer::create(output)?;
    let mut written = 0u64;
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let where_ = || format!("{}:{}", input.display(), n + 1);
        let v: Value = serde_json::from_str(&line).with_context(where_)?;
        if v.get("ok") == Some(&Value::Bool(false)) {
            eprintln!(
                "{}: skipped: a decode line for a frame that did not decode",
                where_()
            );
            continue;
        }
        let frame = json::json_to_frame(&v).with_context(where_)?;
        writer.write(Duration::from_micros(written), &frame)?;
        written += 1;
    }
    writer.finish()?;
    Ok(written)
}
