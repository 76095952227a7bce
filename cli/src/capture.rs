//! Reading pcap / pcapng captures and writing pcap files (through `pcap-file`).

use anyhow::{bail, Context, Result};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, Endianness};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

/// One captured frame.
pub struct Captured {
    /// Seconds since the epoch, as recorded.
    pub timestamp: Duration,
    pub data: Vec<u8>,
    /// The link type is Ethernet (the only one `roce` decodes).
    pub ethernet: bool,
}

const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

/// Reads every frame of a pcap or pcapng file, in capture order.
pub fn read(path: &Path) -> Result<Vec<Captured>> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::new(f).read_to_end(&mut bytes))
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.starts_with(&PCAPNG_MAGIC) {
        read_pcapng(&bytes).with_context(|| format!("{}: bad pcapng", path.display()))
    } else {
        read_pcap(&bytes).with_context(|| format!("{}: bad pcap", path.display()))
    }
}

fn read_pcap(bytes: &[u8]) -> Result<Vec<Captured>> {
    let mut reader = PcapReader::new(bytes)?;
    let ethernet = reader.header().datalink == DataLink::ETHERNET;
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p?;
        out.push(Captured {
            timestamp: p.timestamp,
            data: p.data.into_owned(),
            ethernet,
        });
    }
    Ok(out)
}

fn read_pcapng(bytes: &[u8]) -> Result<Vec<Captured>> {
    let mut reader = PcapNgReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(block) = reader.next_block() {
        let (timestamp, data, interface) = match block? {
            Block::EnhancedPacket(p) => (p.timestamp, p.data.into_owned(), p.interface_id),
            Block::SimplePacket(p) => (Duration::ZERO, p.data.into_owned(), 0),
            // The obsolete Packet block counts in the default resolution, microseconds.
            Block::Packet(p) => (
                Duration::from_micros(p.timestamp),
                p.data.into_owned(),
                u32::from(p.interface_id),
            ),
            _ => continue,
        };
        let Some(iface) = reader.interfaces().get(interface as usize) else {
            bail!("packet on undeclared interface {interface}");
        };
        let ethernet = iface.linktype == DataLink::ETHERNET;
        out.push(Captured {
            timestamp,
            data,
            ethernet,
        });
    }
    Ok(out)
}

/// Writes Ethernet frames to a pcap file, one microsecond apart unless told otherwise.
pub struct Writer {
    inner: PcapWriter<BufWriter<File>>,
}

impl Writer {
    pub fn create(path: &Path) -> Result<Self> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        // Little-endian, as tcpdump writes on the hosts people use (the crate defaults to big).
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            endianness: Endianness::Little,
            ..Default::default()
        };
        Ok(Self {
            inner: PcapWriter::with_header(BufWriter::new(file), header)?,
        })
    }

    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> Result<()> {
        let len = u32::try_from(frame.len()).context("frame too long for pcap")?;
        self.inner
            .write_packet(&PcapPacket::new(timestamp, len, frame))?;
        Ok(())
    }

    pub fn finish(self) -> Result<()> {
        self.inner.into_writer().flush()?;
        Ok(())
    }
}
