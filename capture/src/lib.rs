//! RoCE captures: reading pcap and pcapng as a stream ([`read`]), decoding every frame to
//! text or the packet JSON of `packet-json.md` ([`decode`](mod@decode), [`json`], [`text`]) with
//! filters ([`filter`]), building frames from that JSON ([`encode`]), and the per-
//! connection analysis of `roce analyze` ([`analyze`]). The `roce` command parses its
//! arguments and prints; everything it does with a capture is here.

pub mod analyze;
pub mod decode;
pub mod filter;
pub mod hex;
pub mod json;
pub mod read;
#[cfg(feature = "rtl")]
pub mod rtl;
pub mod text;
pub mod write;

pub use decode::{decode, Decoded, Decoder, Failure, Format, Outcome, Software};
pub use filter::Filter;
pub use read::{Frame, LinkType, Reader, Truncation};
pub use write::Writer;

use anyhow::{anyhow, Context, Result};
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::time::Duration;

/// The conventional name for standard input and output.
pub const STDIO: &str = "-";

/// Opens a capture file, or standard input for `-`, and reads its header.
pub fn open(path: &Path) -> Result<Reader<Box<dyn Read>>> {
    let src: Box<dyn Read> = if path == Path::new(STDIO) {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        )
    };
    Reader::new(src).map_err(|e| anyhow!("{}: {e}", name(path)))
}

/// How a path is named in messages (`standard input` for `-`).
pub fn name(path: &Path) -> String {
    if path == Path::new(STDIO) {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}

/// Opens a text input, or standard input for `-`.
pub fn open_text(path: &Path) -> Result<Box<dyn BufRead>> {
    Ok(if path == Path::new(STDIO) {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        ))
    })
}

/// What `roce encode` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Encoded {
    pub frames: u64,
    /// Decode lines of frames that did not decode (`"ok": false`): nothing to build.
    pub skipped: u64,
    /// The line number of the first of them.
    pub first_skipped: Option<usize>,
}

/// `roce encode`: a frame for every packet object of `input` (JSON Lines), written to
/// `out`, one microsecond apart. `name` names the input in errors (`FILE:LINE: ...`).
pub fn encode<W: Write>(input: impl BufRead, name: &str, out: &mut Writer<W>) -> Result<Encoded> {
    let mut done = Encoded::default();
    for (n, line) in input.lines().enumerate() {
        let line = line.with_context(|| format!("reading {name}"))?;
        let at = || format!("{name}:{}", n + 1);
        match json::read::frame_from_line(&line).with_context(at)? {
            Some(frame) => {
                out.write(Duration::from_micros(done.frames), &frame)?;
                done.frames += 1;
            }
            None if line.trim().is_empty() => {}
            None => {
                done.skipped += 1;
                done.first_skipped.get_or_insert(n + 1);
            }
        }
    }
    Ok(done)
}
