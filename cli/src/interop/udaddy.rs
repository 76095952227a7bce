//! `roce udaddy`: librdmacm's `udaddy`, either end: UD QPs found through RDMA CM's UDP
//! port space (a SIDR_REQ for the service, the SIDR_REP with the server's UD QPN and
//! Q_Key), then datagrams.
//!
//! The loop (librdmacm `examples/udaddy.c`): both ends post `-C` receives before the
//! lookup; the client sends `-C` SENDs with immediate of `-S` bytes to the QPN and Q_Key
//! the SIDR_REP named, the immediate its own QPN (big-endian, as `htobe32(qp_num)`);
//! the server, once all have arrived, answers each to the sender of the first (its GRH
//! and the immediate's QPN) with its own Q_Key, and it sends what is at the start of
//! its receive buffer: the 40-byte GRH area of the last datagram, then that datagram's
//! first `-S` - 40 bytes.
//!
//! udaddy checks nothing but counts. Ours do: every datagram has the size and carries
//! its sender's QPN as immediate; our client's datagrams carry a known pattern, so the
//! client checks that a reply (from udaddy too) carries it after the GRH area, and that
//! the GRH area holds the IPv4 header of a frame from us to the server.

use super::{LinkArgs, OnOff, Role, Station};
use crate::perf::check;
use anyhow::{bail, Context as _, Result};
use roce_core::memory::AccessFlags;
use roce_core::num::{Qkey, Qpn};
use roce_core::transport::{
    AddressVector, QpType, RecvWr, SendFlags, SendWr, UdDest, WcFlags, WcOpcode, WorkCompletion,
    WrOp, GRH_LEN,
};
use roce_host::rdma_cm::{init_ud_qp, CmAgent, RdmaCmEvent, RDMA_UDP_QKEY};
use roce_host::{CompletionQueue, MemoryRegion, QueuePair};
use std::time::{Duration, Instant};

/// udaddy's port (it has no option for it).
pub const DEFAULT_PORT: u16 = 7174;
/// How long the peer may keep us waiting for any one step.
const STEP: Duration = Duration::from_secs(60);
/// How long a server waits for its client.
const LISTEN: Duration = Duration::from_secs(150);

/// `roce udaddy` options (udaddy's letters).
#[derive(clap::Args, Debug, Clone)]
pub struct UdaddyArgs {
    /// Listen for the peer's client (udaddy without -s).
    #[arg(long, conflicts_with = "client")]
    pub server: bool,
    /// Send to the peer's udaddy server at this IPv4 address (udaddy -s).
    #[arg(long)]
    pub client: Option<std::net::Ipv4Addr>,
    /// Datagrams each way (udaddy -C).
    #[arg(short = 'C', long, default_value_t = 10)]
    pub count: usize,
    /// Datagram size (udaddy -S), at most the path MTU.
    #[arg(short = 'S', long, default_value_t = 100)]
    pub size: usize,
    /// The RDMA CM port (UDP port space); udaddy always uses 7174.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub cm_port: u16,
    /// The RC fast path (`docs/fastpath.md`; UD never takes it).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub fastpath: OnOff,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// A received datagram's completion and its bytes (after the GRH area).
type Datagram = (WorkCompletion, Vec<u8>);

/// Byte `i` of what our client sends.
pub fn pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 7 + 3) as u8).collect()
}

/// Runs one udaddy end; prints a summary to `out`. Returns the datagrams received.
pub fn run(args: &UdaddyArgs, out: &mut impl std::io::Write) -> Result<usize> {
    let role = match (args.client, args.server) {
        (Some(ip), false) => Role::Client(ip.to_string()),
        (None, true) => Role::Server,
        _ => bail!("give --server or --client ADDR"),
    };
    if args.count == 0 {
        bail!("-C 0: nothing to send");
    }
    let st = Station::open(&args.link, args.fastpath)?;
    let mtu = st.active_mtu().bytes() as usize;
    if !(1..=mtu).contains(&args.size) {
        bail!("size {}: a datagram is 1..={mtu} bytes here", args.size);
    }
    let mut ep = Endpoint::new(&st, args)?;
    match (&role, args.client) {
        (Role::Client(_), Some(ip)) => ep.client(ip, args)?,
        _ => ep.server(args)?,
    }
    // udaddy's datagrams carry whatever its buffer held: our server checks their sizes
    // and immediates only; our client the data of every reply.
    let checked = match role {
        Role::Client(_) => format!("data checked, retransmitted packets {}", st.retransmits()?),
        Role::Server => "sizes and immediates checked".to_string(),
    };
    writeln!(
        out,
        "udaddy {}: {} datagrams of {} B each way, {checked}",
        role.name(),
        args.count,
        args.size,
    )?;
    writeln!(out, "{}", st.path_counters()?)?;
    Ok(args.count)
}

/// One end: the CM agent, a UD QP in RTS, one receive slot (GRH area + datagram) per
/// datagram and, after them, the send buffer.
struct Endpoint<'a> {
    st: &'a Station,
    cm: CmAgent,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
    slot: usize,
    count: usize,
}

impl<'a> Endpoint<'a> {
    fn new(st: &'a Station, args: &UdaddyArgs) -> Result<Self> {
        let cm = CmAgent::new(&st.ctx)?;
        let pd = st.ctx.alloc_pd()?;
        let cq = st.ctx.create_cq(2 * args.count)?;
        let qp = pd
            .create_qp(QpType::Ud, &cq, &cq)
            .max_send_wr(args.count)
            .max_recv_wr(args.count)
            .build()?;
        init_ud_qp(&qp)?;
        let slot = GRH_LEN + args.size;
        let mr = pd.reg_mr((args.count + 1) * slot, AccessFlags::LOCAL_WRITE)?;
        for i in 0..args.count {
            let a = mr.addr() + (i * slot) as u64;
            qp.post_recv(&RecvWr::new(i as u64).sge(a, slot as u32, mr.lkey()))?;
        }
        Ok(Self {
            st,
            cm,
            cq,
            qp,
            mr,
            slot,
            count: args.count,
        })
    }

    fn client(&mut self, ip: std::net::Ipv4Addr, args: &UdaddyArgs) -> Result<()> {
        let gid = roce_core::transport::ipv4_gid(ip.octets());
        // The peer's server may not be up yet (no ARP answer, or SIDR_REP "unsupported"
        // from its CM): ask again for a while.
        let t0 = Instant::now();
        let (qpn, qkey, av) = loop {
            match self.lookup(gid, args.cm_port) {
                Ok(found) => break found,
                Err(e) if t0.elapsed() > STEP => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(300)),
            }
        };
        let data = pattern(args.size);
        self.send_all(&data, qpn, qkey, av)?;
        let (_, replies) = self.receive_all("reply")?;
        for (n, (wc, m)) in replies.iter().enumerate() {
            if wc.src_qp != qpn || wc.imm_data != qpn.value() {
                bail!(
                    "reply {n}: from QP {:#x} with immediate {:#x}, not the server's {:#x}",
                    wc.src_qp.value(),
                    wc.imm_data,
                    qpn.value()
                );
            }
            let (ours, _) = self.st.ctx.port_addr();
            let us = [ours[12], ours[13], ours[14], ours[15]];
            check_reply(m, &data, ip.octets(), us).with_context(|| format!("reply {n}"))?;
        }
        Ok(())
    }

    /// `rdma_resolve_addr` + `rdma_connect` of a UD id: the server's QPN, Q_Key and the
    /// address vector to it.
    fn lookup(&mut self, gid: [u8; 16], port: u16) -> Result<(Qpn, Qkey, AddressVector)> {
        let mac = self.st.resolve_gid(&gid)?;
        self.cm.add_neighbour(gid, mac);
        self.cm.connect_ud(gid, port, &[])?;
        let t0 = Instant::now();
        loop {
            self.st.progress();
            self.cm.progress()?;
            while let Some(e) = self.cm.poll_event() {
                match e {
                    RdmaCmEvent::UdEstablished {
                        remote_qpn,
                        remote_qkey,
                        av,
                        ..
                    } => return Ok((remote_qpn, remote_qkey, av)),
                    RdmaCmEvent::Rejected { reason, .. } => {
                        bail!("rdma_connect: SIDR_REP status {reason}")
                    }
                    RdmaCmEvent::Unreachable { .. } => bail!("rdma_connect: no SIDR_REP"),
                    _ => {}
                }
            }
            if t0.elapsed() > STEP {
                bail!("rdma_connect: no answer in {} s", STEP.as_secs());
            }
        }
    }

    fn server(&mut self, args: &UdaddyArgs) -> Result<()> {
        self.cm.listen_udp(args.cm_port)?;
        let t0 = Instant::now();
        let id = 'wait: loop {
            self.st.progress();
            self.cm.progress()?;
            while let Some(e) = self.cm.poll_event() {
                if let RdmaCmEvent::ConnectRequest { id, .. } = e {
                    break 'wait id;
                }
            }
            if t0.elapsed() > LISTEN {
                bail!("rdma_listen: no SIDR_REQ in {} s", LISTEN.as_secs());
            }
        };
        let peer = self.cm.peer_gid(id).context("the request is gone")?;
        let mac = self.st.resolve_gid(&peer)?;
        self.cm.add_neighbour(peer, mac);
        self.cm.accept(id, &self.qp)?;
        let (last, got) = self.receive_all("datagram")?;
        let (first, _) = got.first().context("no datagram")?;
        for (n, (wc, _)) in got.iter().enumerate() {
            if wc.imm_data != wc.src_qp.value() {
                bail!(
                    "datagram {n}: immediate {:#x} is not its sender's QPN {:#x}",
                    wc.imm_data,
                    wc.src_qp.value()
                );
            }
        }
        // udaddy answers the sender of the first datagram (ibv_create_ah_from_wc, the
        // QPN from its immediate) with the start of its receive buffer: the last one.
        let av = AddressVector {
            dmac: mac,
            dgid: peer,
            hop_limit: 64,
            ..AddressVector::default()
        };
        let mut reply = vec![0u8; args.size];
        self.mr.read(last * self.slot, &mut reply)?;
        self.send_all(&reply, Qpn::new(first.imm_data), RDMA_UDP_QKEY, av)
    }

    /// `count` SENDs with immediate (our QPN) of `data` to `qpn`, and their completions.
    fn send_all(&mut self, data: &[u8], qpn: Qpn, qkey: Qkey, av: AddressVector) -> Result<()> {
        let at = self.count * self.slot;
        self.mr.write(at, data)?;
        for i in 0..self.count {
            let mut wr = SendWr::new(
                i as u64,
                WrOp::SendWithImm {
                    imm: self.qp.qpn().value(),
                },
            )
            .sge(
                self.mr.addr() + at as u64,
                data.len() as u32,
                self.mr.lkey(),
            )
            .flags(SendFlags::SIGNALED);
            wr.ud = Some(UdDest {
                av,
                remote_qpn: qpn,
                remote_qkey: qkey,
            });
            self.qp.post_send(&wr)?;
        }
        let mut done = 0;
        let t0 = Instant::now();
        let mut wcs = [WorkCompletion::default(); 8];
        while done < self.count {
            let got = self.cq.poll(&mut wcs)?;
            for wc in got.iter() {
                check(wc)?;
                if wc.opcode == WcOpcode::Send {
                    done += 1;
                }
            }
            if got.is_empty() {
                if t0.elapsed() > STEP {
                    bail!("{done} of {} sends completed", self.count);
                }
                self.st.progress();
                self.cm.progress()?;
            }
        }
        Ok(())
    }

    /// Waits for `count` datagrams, each checked for its size and immediate; returns
    /// the last one's slot and every completion with its datagram (after the GRH area).
    fn receive_all(&mut self, what: &str) -> Result<(usize, Vec<Datagram>)> {
        let mut got = Vec::with_capacity(self.count);
        let mut last = 0;
        let t0 = Instant::now();
        let mut wcs = [WorkCompletion::default(); 8];
        while got.len() < self.count {
            let polled = self.cq.poll(&mut wcs)?;
            for wc in polled.iter() {
                check(wc)?;
                if wc.opcode != WcOpcode::Recv {
                    continue;
                }
                let n = got.len();
                if wc.byte_len as usize != self.slot {
                    bail!(
                        "{what} {n}: {} bytes with the GRH, expected {}",
                        wc.byte_len,
                        self.slot
                    );
                }
                if !wc.wc_flags.contains(WcFlags::WITH_IMM) {
                    bail!("{what} {n}: no immediate");
                }
                last = wc.wr_id as usize;
                let mut m = vec![0u8; self.slot - GRH_LEN];
                self.mr.read(last * self.slot + GRH_LEN, &mut m)?;
                got.push((*wc, m));
            }
            if polled.is_empty() {
                if t0.elapsed() > STEP {
                    bail!("{} of {} {what}s arrived", got.len(), self.count);
                }
                self.st.progress();
                self.cm.progress()?;
            }
        }
        Ok((last, got))
    }
}

/// A server's reply to our datagrams `sent`: the GRH area of our last one as the
/// server's NIC wrote it (for RoCEv2 over IPv4: 20 bytes, then the IPv4 header from
/// `us` to `server`), then the first bytes of what we sent.
fn check_reply(m: &[u8], sent: &[u8], server: [u8; 4], us: [u8; 4]) -> Result<()> {
    if m.len() <= GRH_LEN {
        // Too short to carry anything but a piece of the GRH area.
        return Ok(());
    }
    let ip = &m[20..40];
    if ip[0] != 0x45 || ip[9] != 17 || ip[12..16] != us || ip[16..20] != server {
        bail!("the GRH area does not hold our datagram's IPv4 header: {ip:02x?}");
    }
    if m[GRH_LEN..] != sent[..m.len() - GRH_LEN] {
        bail!("the datagram after the GRH area is not what we sent");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_our_ipv4_header_then_our_bytes() {
        let sent = pattern(100);
        let mut m = vec![0u8; 100];
        // IPv4, UDP, 10.77.0.10 -> 10.77.0.2 (the rest of the header does not matter).
        m[20] = 0x45;
        m[29] = 17;
        m[32..36].copy_from_slice(&[10, 77, 0, 10]);
        m[36..40].copy_from_slice(&[10, 77, 0, 2]);
        m[40..].copy_from_slice(&sent[..60]);
        assert!(check_reply(&m, &sent, [10, 77, 0, 2], [10, 77, 0, 10]).is_ok());
        m[99] ^= 1;
        assert!(check_reply(&m, &sent, [10, 77, 0, 2], [10, 77, 0, 10]).is_err());
        m[99] ^= 1;
        m[36] = 11;
        assert!(check_reply(&m, &sent, [10, 77, 0, 2], [10, 77, 0, 10]).is_err());
    }
}
