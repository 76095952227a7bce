//! Writing pcap files (through `pcap-file`): what `roce encode` produces.

use anyhow::{Context, Result};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// Writes Ethernet frames to a microsecond pcap.
pub struct Writer<W: Write> {
    inner: PcapWriter<W>,
}

impl Writer<BufWriter<File>> {
    pub fn create(path: &Path) -> Result<Self> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Self::new(BufWriter::new(file))
    }
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Result<Self> {
        // Little-endian, as tcpdump writes on the hosts people use (the crate defaults to big).
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            endianness: Endianness::Little,
            ..Default::default()
        };
        Ok(Self {
            inner: PcapWriter::with_header(out, header)?,
        })
    }

    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> Result<()> {
        let len = u32::try_from(frame.len()).context("frame too long for pcap")?;
        self.inner
            .write_packet(&PcapPacket::new(timestamp, len, frame))?;
        Ok(())
    }

    pub fn finish(self) -> Result<W> {
        let mut out = self.inner.into_writer();
        out.flush()?;
        Ok(out)
    }
}
