//! `roce`: decode and encode RoCE captures (and, as the project grows, run the
//! simulator and perftest-style benchmarks).

mod capture;
mod json;
mod summary;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use roce_core::wire;
use serde_json::{json, Value};
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "roce",
    version,
    about = "An open RoCEv2 RNIC: tools for its frames and its fabric"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode every frame of a pcap or pcapng capture (Ethernet link type).
    Decode {
        /// The capture to read.
        file: PathBuf,
        /// One JSON object per frame (packet-json.md) instead of one line of text.
        #[arg(long)]
        json: bool,
    },
    /// Build a pcap from packet objects, one JSON object per line (packet-json.md).
    Encode {
        /// JSON Lines input: bare packet objects or `roce decode --json` lines.
        input: PathBuf,
        /// The pcap to write.
        #[arg(short, long)]
        output: PathBuf,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Decode { file, json } => decode(&file, json),
        Command::Encode { input, output } => encode(&input, &output),
    }
}

fn decode(path: &Path, as_json: bool) -> Result<()> {
    let frames = capture::read(path)?;
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
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

fn encode(input: &Path, output: &Path) -> Result<()> {
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
    eprintln!("wrote {written} frames to {}", output.display());
    Ok(())
}
