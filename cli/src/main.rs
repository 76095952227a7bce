//! `roce`: decode and encode RoCE captures (and, as the project grows, run the
//! simulator and perftest-style benchmarks).

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

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
    /// perftest's benchmarks between two NICs (simulated fabric by default).
    Perf(roce_cli::perf_cmd::PerfArgs),
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
        Command::Decode { file, json } => {
            let mut out = BufWriter::new(std::io::stdout().lock());
            roce_cli::decode(&file, json, &mut out)?;
            out.flush()?;
        }
        Command::Perf(args) => {
            let mut out = std::io::stdout().lock();
            roce_cli::perf_cmd::run(&args, &mut out)?;
        }
        Command::Encode { input, output } => {
            let n = roce_cli::encode(&input, &output)?;
            eprintln!("wrote {n} frames to {}", output.display());
        }
    }
    Ok(())
}
