//! Talking to other RoCE implementations over a real link: the in-process NIC on a Linux
//! interface (`roce_device::RawNic`), and the out-of-band TCP exchanges of rdma-core's
//! `ibv_*_pingpong` (`pingpong`) and of perftest (`perftest`), so `roce perf --client` /
//! `--server` and `roce pingpong` run against `ib_write_bw`, `ibv_rc_pingpong` and the
//! like on another machine.

pub mod cm_channel;
pub mod perftest;
pub mod pingpong;
pub mod rping;
pub mod srq_pingpong;
pub mod udaddy;

use anyhow::{bail, Context as _, Result};
use roce_core::transport::Mtu;
use roce_device::{Capacities, RawNic};
use roce_host::{Context, Device};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The TCP port of both exchanges (perftest's and the pingpongs' default).
pub const DEFAULT_PORT: u16 = 18515;

/// Where the NIC sits on the network.
#[derive(clap::Args, Debug, Clone)]
pub struct LinkArgs {
    /// The Linux interface whose frames the NIC sends and receives (AF_PACKET).
    #[arg(long, default_value = "br0")]
    pub iface: String,
    /// The NIC's own IPv4 address on that link (its GID is ::ffff:IP); not the host's.
    #[arg(long, default_value = "10.77.0.10")]
    pub ip: Ipv4Addr,
    /// The NIC's Ethernet address [default: 02:00 and the four bytes of --ip].
    #[arg(long)]
    pub mac: Option<String>,
    /// TCP port of the out-of-band exchange.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
}

/// A switch on the command line (`--fastpath on|off`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}

/// Which end of the exchange this side is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Waits for the peer on the TCP port.
    Server,
    /// Connects to the peer's TCP port at this host.
    Client(String),
}

impl Role {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Client(_) => "client",
        }
    }
}

fn parse_mac(s: &str) -> Result<[u8; 6]> {
    let parts: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16))
        .collect::<std::result::Result<_, _>>()
        .with_context(|| format!("bad MAC {s:?}"))?;
    parts
        .try_into()
        .map_err(|_| anyhow::anyhow!("bad MAC {s:?}: six bytes"))
}

/// The NIC on its link, opened as a verbs device.
pub struct Station {
    pub nic: Rc<RawNic>,
    pub ctx: Context,
}

impl Station {
    /// Opens the NIC on `link`, the RC fast path's model as its hardware when
    /// `fastpath` is on (`docs/fastpath.md`).
    pub fn open(link: &LinkArgs, fastpath: OnOff) -> Result<Self> {
        let ip = link.ip.octets();
        let mac = match &link.mac {
            Some(m) => parse_mac(m)?,
            None => [0x02, 0x00, ip[0], ip[1], ip[2], ip[3]],
        };
        let nic = RawNic::open(
            &link.iface,
            ip,
            mac,
            Capacities::Host,
            fastpath == OnOff::On,
        )
        .with_context(|| format!("open a raw port on {}", link.iface))?;
        let ctx = Context::open(nic.clone()).context("open the NIC")?;
        Ok(Self { nic, ctx })
    }

    /// Lets the NIC run (it sleeps up to a millisecond when there is nothing to do).
    pub fn progress(&self) {
        self.nic.progress();
    }

    /// The port's active path MTU (from the link MTU).
    pub fn active_mtu(&self) -> Mtu {
        self.ctx.active_mtu()
    }

    /// The Ethernet address for a peer's IPv4-mapped GID, by ARP.
    pub fn resolve_gid(&self, gid: &[u8; 16]) -> Result<[u8; 6]> {
        if gid[..10] != [0; 10] || gid[10..12] != [0xFF, 0xFF] {
            bail!("the peer's GID is not IPv4-mapped (RoCEv2 over IPv4 only)");
        }
        let ip = [gid[12], gid[13], gid[14], gid[15]];
        Ok(self.nic.resolve(ip, Duration::from_secs(5))?)
    }

    /// Retransmitted packets (Go-Back-N) so far.
    pub fn retransmits(&self) -> Result<u64> {
        Ok(self.ctx.query_counters()?.engine.retransmitted_pkts)
    }

    /// Which frames the RC fast path carried and which the firmware did, as the port
    /// counters name them (`frames_tx`/`frames_rx` are the firmware's, exceptions the
    /// fast path handed up included): the interop harness's evidence of which path ran.
    pub fn path_counters(&self) -> Result<String> {
        let r = self.ctx.query_counters()?.runtime;
        Ok(format!(
            "interop-path fp_tx_frames={} fp_rx_handled={} fp_rx_exceptions={} frames_tx={} frames_rx={}",
            r.fastpath.tx_frames,
            r.fastpath.rx_handled,
            r.fastpath.rx_exceptions,
            r.frames_tx,
            r.frames_rx
        ))
    }
}

/// The TCP connection of the exchange. Reads keep the NIC running: the peer may be
/// waiting for our responder while we wait for its message.
pub struct Oob {
    stream: TcpStream,
}

/// How long a peer may keep us waiting on the TCP connection.
const OOB_TIMEOUT: Duration = Duration::from_secs(120);

impl Oob {
    /// Connects (client, retrying for 60 s while the server is not up yet) or accepts
    /// one connection (server).
    pub fn open(role: &Role, port: u16) -> Result<Self> {
        let stream = match role {
            Role::Client(host) => {
                let t0 = Instant::now();
                loop {
                    match TcpStream::connect((host.as_str(), port)) {
                        Ok(s) => break s,
                        // Not listening yet: the peer's server may still be starting.
                        Err(_) if t0.elapsed() < Duration::from_secs(60) => {
                            std::thread::sleep(Duration::from_millis(300));
                        }
                        Err(e) => return Err(e).context(format!("connect to {host}:{port}")),
                    }
                }
            }
            Role::Server => {
                let l = TcpListener::bind(("0.0.0.0", port))
                    .with_context(|| format!("listen on TCP port {port}"))?;
                l.accept().context("accept")?.0
            }
        };
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(Self { stream })
    }

    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        self.stream.set_nonblocking(false)?;
        let r = self.stream.write_all(data);
        self.stream.set_nonblocking(true)?;
        r.context("write to the peer")
    }

    /// Reads exactly `n` bytes, letting the NIC run meanwhile.
    pub fn read(&mut self, st: &Station, n: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; n];
        let mut got = 0;
        let t0 = Instant::now();
        while got < n {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => bail!("the peer closed the connection ({got} of {n} bytes read)"),
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if t0.elapsed() > OOB_TIMEOUT {
                        bail!("the peer sent nothing for {} s", OOB_TIMEOUT.as_secs());
                    }
                    st.progress();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("read from the peer"),
            }
        }
        Ok(buf)
    }

    /// Sends ours, then reads theirs (of the same length). Writing first never
    /// deadlocks whichever order the peer uses: these messages fit the socket buffers.
    pub fn exchange(&mut self, st: &Station, mine: &[u8]) -> Result<Vec<u8>> {
        self.write(mine)?;
        self.read(st, mine.len())
    }
}

/// A PSN to start from: 24 bits that differ from run to run (as the tools' lrand48).
pub fn random_psn() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(7)
        });
    (t ^ (std::process::id() << 8)) & 0xFF_FFFF
}

/// Parses the 32 hex digits of a GID as the tools write it (its bytes in order).
pub fn parse_gid_hex(s: &str) -> Result<[u8; 16]> {
    if s.len() != 32 {
        bail!("GID {s:?}: 32 hex digits expected");
    }
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).with_context(|| format!("GID {s:?}"))?;
    }
    Ok(g)
}

pub fn gid_hex(g: &[u8; 16]) -> String {
    g.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_text_is_the_bytes_in_order() {
        // rdma-core's gid_to_wire_gid on ::ffff:10.77.0.2 (the rxe VM's GID index 1).
        let g = roce_core::transport::ipv4_gid([10, 77, 0, 2]);
        assert_eq!(gid_hex(&g), "00000000000000000000ffff0a4d0002");
        assert_eq!(
            parse_gid_hex("00000000000000000000ffff0a4d0002").unwrap(),
            g
        );
        assert!(parse_gid_hex("0000").is_err());
    }

    #[test]
    fn macs_parse() {
        assert_eq!(
            parse_mac("52:54:00:77:00:01").unwrap(),
            [0x52, 0x54, 0, 0x77, 0, 1]
        );
        assert!(parse_mac("52:54:00").is_err());
    }
}
