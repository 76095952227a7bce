//! The library behind the `roce` command, so tests drive the same code the binary runs.

pub mod capture;
#[cfg(target_os = "linux")]
pub mod interop;
pub mod json;
pub mod perf;
pub mod perf_cmd;
pub mod progress;
pub mod scenario;
pub mod summary;

use anyhow::{Context, Result};
use roce_core::wire;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

/// Which decoder reads the frames.
pub enum Decoder {
    /// roce-core's `wire::parse`.
    Software,
    /// The Verilated RX datapath (`hdl-sim/`), optionally writing an FST waveform.
    Rtl { waves: Option<std::path::PathBuf> },
}

/// `roce decode [--json] FILE`: one line per frame of the capture into `out`.
pub fn decode(path: &Path, as_json: bool, out: &mut impl Write) -> Result<()> {
    decode_with(path, as_json, &Decoder::Software, out)
}

/// `roce decode [--datapath rtl [--waves F]] [--json] FILE`.
pub fn decode_with(
    path: &Path,
    as_json: bool,
    decoder: &Decoder,
    out: &mut impl Write,
) -> Result<()> {
    let mut rtl = match decoder {
        Decoder::Software => None,
        Decoder::Rtl { waves } => {
            let width = roce_hdl_sim::DataWidth::W512;
            let dp = match waves {
                Some(w) => roce_hdl_sim::RtlDatapath::with_trace(width, w),
                None => roce_hdl_sim::RtlDatapath::new(width),
            };
            Some(dp.map_err(|e| anyhow::anyhow!("the RTL datapath: {e}"))?)
        }
    };
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
        let parsed;
        let verdict;
        let result: Result<json::Decoded<'_>, (&str, String)> = match &mut rtl {
            None => {
                parsed = wire::parse(&f.data);
                match &parsed {
                    Ok(p) => Ok(json::Decoded::from_packet(p)),
                    Err(e) => Err((e.name(), e.to_string())),
                }
            }
            Some(dp) => {
                verdict = dp
                    .rx(&f.data)
                    .map_err(|e| anyhow::anyhow!("the RTL datapath: {e}"))?;
                rtl_decoded(&verdict, &f.data)
            }
        };
        let line = if as_json {
            let v: Value = match &result {
                Ok(d) => json!({"index": index, "ok": true, "packet": json::decoded_to_json(d)}),
                Err((name, detail)) => {
                    json!({"index": index, "ok": false, "error": name, "detail": detail})
                }
            };
            v.to_string()
        } else {
            let secs = f.timestamp.saturating_sub(start).as_secs_f64();
            summary::line(
                index,
                secs,
                result.as_ref().map_err(|(n, d)| (*n, d.clone())),
            )
        };
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// What the RTL made of a frame, in the decoder's terms.
fn rtl_decoded<'a>(
    v: &'a roce_hdl_sim::RxVerdict,
    frame: &'a [u8],
) -> Result<json::Decoded<'a>, (&'static str, String)> {
    if let Some(e) = v.error() {
        return Err((e.name(), format!("the RTL datapath reports {}", e.name())));
    }
    let m = &v.meta;
    let headers = v
        .headers()
        .ok_or(("unsupported_ethertype", "no network header".to_string()))?;
    let trailer = frame.len().saturating_sub(m.trailer_len as usize);
    Ok(json::Decoded {
        headers,
        ip_length: m.ip.length,
        ip_checksum: m.ip.checksum,
        udp_length: m.udp.map_or(0, |u| u.length),
        payload: &v.payload,
        pad: m.pad_bytes(),
        icrc: m.icrc,
        trailer: frame.get(trailer..).unwrap_or(&[]),
    })
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
