//! pcap taps on links. A tap records what its link delivers, in both directions: each
//! frame as its receiver gets it (after loss, corruption, duplication and reordering),
//! stamped with the simulated instant its last bit arrived; or (`Fabric::tap_end`) what
//! one end of the link sees, as tcpdump on a host would: the frames it sends, stamped
//! when their transmission starts and before the link loses any, and those delivered to
//! it. The file is a little-endian nanosecond-resolution pcap with DataLink ETHERNET
//! that Wireshark and `roce decode` open. Frames carry no FCS (it is not modelled).

use crate::queue::Nanos;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An in-memory capture that the caller keeps a clone of while the fabric writes to the
/// other (for tests and in-process analysis).
#[derive(Debug, Clone, Default)]
pub struct MemoryCapture(Arc<Mutex<Vec<u8>>>);

impl MemoryCapture {
    pub fn new() -> Self {
        Self::default()
    }
    /// The pcap bytes written so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.0.lock().expect("capture lock").clone()
    }
}

impl Write for MemoryCapture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A pcap writer attached to one link.
pub(crate) struct Tap {
    writer: PcapWriter<Box<dyn Write + Send>>,
    /// The first write error: a tap cannot fail the event loop, so it stops writing and
    /// reports the error when closed.
    error: Option<io::Error>,
}

impl Tap {
    pub fn new(out: Box<dyn Write + Send>) -> io::Result<Self> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            endianness: Endianness::Little,
            ts_resolution: TsResolution::NanoSecond,
            ..Default::default()
        };
        let writer = PcapWriter::with_header(out, header).map_err(io::Error::other)?;
        Ok(Self {
            writer,
            error: None,
        })
    }

    pub fn record(&mut self, at: Nanos, frame: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let packet = PcapPacket::new(Duration::from_nanos(at), frame.len() as u32, frame);
        if let Err(e) = self.writer.write_packet(&packet) {
            self.error = Some(io::Error::other(e));
        }
    }

    /// Flushes and returns the first error, if any.
    pub fn close(self) -> io::Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.writer.into_writer().flush()
    }
}
