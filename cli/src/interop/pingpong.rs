//! `roce pingpong rc|uc|ud`: rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong` and
//! `ibv_ud_pingpong`, either end, over a raw link.
//!
//! The exchange (rdma-core `libibverbs/examples`): on TCP, the client writes
//! `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, GID as 32 hex digits) and a NUL, 52 bytes; the
//! server reads it, connects its QP, and answers the same way; the client writes
//! `"done\0"`. Then SENDs go back and forth `iters` times, the client first: each side
//! sends when both its last send and its last receive have completed. The tools send
//! from the buffer they receive into, so the server echoes what the client sent; their
//! `--chk` option expects a zero byte at every 4 KiB page offset of what arrives.

use super::{gid_hex, parse_gid_hex, random_psn, LinkArgs, Oob, Role, Station};
use crate::perf::check;
use anyhow::{bail, Context as _, Result};
use roce_core::memory::AccessFlags;
use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::transport::{
    AddressVector, Mtu, QpType, RecvWr, SendFlags, SendWr, UdDest, WorkCompletion, WrOp,
};
use roce_host::{CompletionQueue, ConnectOptions, MemoryRegion, QpEndpoint, QueuePair};
use std::time::Instant;

/// The Q_Key the pingpong tools give their UD QPs.
const PP_QKEY: u32 = 0x1111_1111;
/// Bytes of GRH space before a UD receive's payload.
const GRH: usize = 40;
/// The page size of the tools' `--chk` rule.
const PAGE: usize = 4096;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Rc,
    Uc,
    Ud,
}

impl Transport {
    fn qp_type(self) -> QpType {
        match self {
            Self::Rc => QpType::Rc,
            Self::Uc => QpType::Uc,
            Self::Ud => QpType::Ud,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Rc => "rc",
            Self::Uc => "uc",
            Self::Ud => "ud",
        }
    }
}

/// `roce pingpong` options (the tools' where they exist).
#[derive(clap::Args, Debug, Clone)]
pub struct PingpongArgs {
    /// The transport, as ibv_rc_pingpong / ibv_uc_pingpong / ibv_ud_pingpong.
    #[arg(value_enum)]
    pub transport: Transport,
    /// Wait for the peer's client.
    #[arg(long, conflicts_with = "client")]
    pub server: bool,
    /// Connect to the peer's server at this host.
    #[arg(long)]
    pub client: Option<String>,
    /// The RC fast path (`docs/fastpath.md`): its model as the NIC's hardware, or the
    /// firmware handling every packet.
    #[arg(long, value_enum, default_value_t = super::OnOff::On)]
    pub fastpath: super::OnOff,
    /// Message size [default: 4096, UD 2048].
    #[arg(short = 's', long)]
    pub size: Option<usize>,
    /// Round trips.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub iters: usize,
    /// Path MTU (256..4096), as the tools' -m; both ends must agree.
    #[arg(short = 'm', long, default_value_t = 1024)]
    pub mtu: u32,
    /// Receives kept posted.
    #[arg(short = 'r', long, default_value_t = 32)]
    pub rx_depth: usize,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// What a run did.
#[derive(Clone, Debug, PartialEq)]
pub struct PingpongResult {
    pub iters: usize,
    pub size: usize,
    pub usec_per_iter: f64,
    pub mbit_per_s: f64,
    pub retransmits: u64,
}

/// The 52-byte message: `"%04x:%06x:%06x:%s"` and a NUL.
pub fn pp_message(qpn: u32, psn: u32, gid: &[u8; 16]) -> Vec<u8> {
    let mut m = format!("{:04x}:{qpn:06x}:{psn:06x}:{}", 0, gid_hex(gid)).into_bytes();
    m.push(0);
    m
}

/// (QPN, PSN, GID) from the peer's message.
pub fn parse_pp_message(m: &[u8]) -> Result<(u32, u32, [u8; 16])> {
    let text = std::str::from_utf8(m.split(|&b| b == 0).next().unwrap_or(&[]))
        .context("the peer's address is not text")?;
    let f: Vec<&str> = text.split(':').collect();
    if f.len() != 4 {
        bail!("the peer's address {text:?}: LID:QPN:PSN:GID expected");
    }
    let qpn = u32::from_str_radix(f[1], 16).context("QPN")?;
    let psn = u32::from_str_radix(f[2], 16).context("PSN")?;
    Ok((qpn, psn, parse_gid_hex(f[3])?))
}

/// What the client sends: the `--chk` rule's zero at each page offset, a counting
/// pattern elsewhere.
fn pattern(size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| {
            if i % PAGE == 0 {
                0
            } else {
                (i % 251) as u8 + 1
            }
        })
        .collect()
}

/// Runs one pingpong, printing the tools' two result lines to `out`.
pub fn run(args: &PingpongArgs, out: &mut impl std::io::Write) -> Result<PingpongResult> {
    let role = match (&args.client, args.server) {
        (Some(h), false) => Role::Client(h.clone()),
        (None, true) => Role::Server,
        _ => bail!("give --server or --client HOST"),
    };
    let st = Station::open(&args.link, args.fastpath)?;
    let pp = Pingpong::create(&st, args, role)?;
    pp.exchange(args)?;
    let t0 = Instant::now();
    pp.ping(args.iters)?;
    let secs = t0.elapsed().as_secs_f64();
    let bytes = (pp.size * args.iters * 2) as f64;
    let r = PingpongResult {
        iters: args.iters,
        size: pp.size,
        usec_per_iter: secs * 1e6 / args.iters as f64,
        mbit_per_s: bytes * 8.0 / secs / 1e6,
        retransmits: st.retransmits()?,
    };
    writeln!(
        out,
        "{} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as u64, r.mbit_per_s
    )?;
    writeln!(
        out,
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        args.iters, r.usec_per_iter
    )?;
    writeln!(
        out,
        "pingpong {} {}: {} x {} B, data checked, retransmitted packets {}",
        args.transport.name(),
        pp.role.name(),
        args.iters,
        pp.size,
        r.retransmits
    )?;
    writeln!(out, "{}", st.path_counters()?)?;
    Ok(r)
}

/// One side of a pingpong: its QP, and one buffer of [receive area: GRH space +
/// message][send area: message], as the tools lay theirs out.
struct Pingpong<'a> {
    st: &'a Station,
    role: Role,
    ud: bool,
    size: usize,
    mtu: Mtu,
    rx_depth: usize,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
    /// What the client sends (the server echoes it).
    mine: Vec<u8>,
    my_psn: u32,
    /// The peer, once the exchange is done (UD sends name it).
    peer: std::cell::Cell<Option<QpEndpoint>>,
}

impl<'a> Pingpong<'a> {
    /// The QP and the buffer; the client writes its message in.
    fn create(st: &'a Station, args: &PingpongArgs, role: Role) -> Result<Self> {
        let ud = args.transport == Transport::Ud;
        let size = args.size.unwrap_or(if ud { 2048 } else { 4096 });
        let mtu = crate::perf_cmd::parse_mtu(args.mtu)?;
        if ud && size > mtu.bytes() as usize {
            bail!("UD messages must fit the MTU ({} > {})", size, mtu.bytes());
        }
        let pd = st.ctx.alloc_pd()?;
        let cq = st.ctx.create_cq(args.rx_depth + 4)?;
        let qp = pd
            .create_qp(args.transport.qp_type(), &cq, &cq)
            .max_recv_wr(args.rx_depth)
            .max_send_wr(4)
            .build()?;
        let mr = pd.reg_mr(2 * (size + GRH), AccessFlags::LOCAL_WRITE)?;
        let pp = Self {
            st,
            ud,
            size,
            mtu,
            rx_depth: args.rx_depth,
            cq,
            qp,
            mr,
            mine: pattern(size),
            my_psn: random_psn(),
            peer: std::cell::Cell::new(None),
            role,
        };
        if matches!(pp.role, Role::Client(_)) {
            pp.mr.write(pp.send_at(), &pp.mine)?;
        }
        Ok(pp)
    }

    fn send_at(&self) -> usize {
        self.size + GRH
    }

    fn post_recv(&self) -> Result<()> {
        // UD receives start with the GRH; RC and UC ones leave its space empty.
        let (at, len) = if self.ud {
            (0, self.size + GRH)
        } else {
            (GRH, self.size)
        };
        let wr = RecvWr::new(RECV_WRID).sge(self.mr.addr() + at as u64, len as u32, self.mr.lkey());
        Ok(self.qp.post_recv(&wr)?)
    }

    fn post_send(&self) -> Result<()> {
        let mut wr = SendWr::new(SEND_WRID, WrOp::Send)
            .sge(
                self.mr.addr() + self.send_at() as u64,
                self.size as u32,
                self.mr.lkey(),
            )
            .flags(SendFlags::SIGNALED);
        if let (true, Some(peer)) = (self.ud, self.peer.get()) {
            wr = wr.ud(UdDest {
                av: AddressVector {
                    dmac: peer.mac,
                    dgid: peer.gid,
                    hop_limit: 64,
                    ..AddressVector::default()
                },
                remote_qpn: peer.qpn,
                remote_qkey: Qkey(PP_QKEY),
            });
        }
        Ok(self.qp.post_send(&wr)?)
    }

    /// The tools' TCP exchange, the QP connected to the peer's and receives posted: the
    /// client writes its address first, the server answers after connecting, the client
    /// closes with "done".
    fn exchange(&self, args: &PingpongArgs) -> Result<()> {
        let (gid, _) = self.st.ctx.port_addr();
        let msg = pp_message(self.qp.qpn().value(), self.my_psn, &gid);
        let mut oob = Oob::open(&self.role, args.link.port)?;
        match self.role {
            Role::Client(_) => {
                oob.write(&msg)?;
                let rem = parse_pp_message(&oob.read(self.st, msg.len())?)?;
                oob.write(b"done\0")?;
                self.connect(&rem)
            }
            Role::Server => {
                let rem = parse_pp_message(&oob.read(self.st, msg.len())?)?;
                self.connect(&rem)?;
                oob.write(&msg)?;
                if oob.read(self.st, 5)? != b"done\0" {
                    bail!("the client did not finish the exchange with \"done\"");
                }
                Ok(())
            }
        }
    }

    fn connect(&self, (qpn, psn, gid): &(u32, u32, [u8; 16])) -> Result<()> {
        let ep = QpEndpoint {
            qpn: Qpn::new(*qpn),
            psn: Psn::new(*psn),
            gid: *gid,
            mac: self.st.resolve_gid(gid)?,
        };
        let opts = ConnectOptions {
            mtu: self.mtu,
            qkey: Qkey(PP_QKEY),
            ..ConnectOptions::default()
        };
        self.qp.connect(&ep, Psn::new(self.my_psn), &opts)?;
        self.peer.set(Some(ep));
        // Receives wait before the peer can send: the server answers only after this,
        // and the client's peer sends only after the client's first message.
        for _ in 0..self.rx_depth {
            self.post_recv()?;
        }
        Ok(())
    }

    /// `iters` round trips, the client first: each side sends when both its last send
    /// and its last receive have completed; every message is checked.
    fn ping(&self, iters: usize) -> Result<()> {
        let mut pending = RECV_WRID;
        if matches!(self.role, Role::Client(_)) {
            self.post_send()?;
            pending |= SEND_WRID;
        }
        let (mut scnt, mut rcnt) = (0usize, 0usize);
        let mut first: Option<Vec<u8>> = None;
        let mut buf = [WorkCompletion::default(); 4];
        let mut idle = Instant::now();
        while rcnt < iters || scnt < iters {
            let wcs = self.cq.poll(&mut buf)?;
            if wcs.is_empty() {
                if idle.elapsed().as_secs() > 30 {
                    bail!("stuck after {scnt} sends and {rcnt} receives");
                }
                self.st.progress();
                continue;
            }
            idle = Instant::now();
            for wc in wcs.iter() {
                check(wc)?;
                match wc.wr_id {
                    SEND_WRID => scnt += 1,
                    RECV_WRID => {
                        self.check_receive(rcnt, wc.byte_len as usize, &mut first)?;
                        rcnt += 1;
                        self.post_recv()?;
                    }
                    other => bail!("completion for unknown work request {other}"),
                }
                pending &= !wc.wr_id;
                if scnt < iters && pending == 0 {
                    self.post_send()?;
                    pending = RECV_WRID | SEND_WRID;
                }
            }
        }
        Ok(())
    }

    /// Receive `n` of `len` bytes: the client gets its own message back; the server
    /// checks the tools' `--chk` rule and that the message never changes, and echoes it.
    fn check_receive(&self, n: usize, len: usize, first: &mut Option<Vec<u8>>) -> Result<()> {
        let want = if self.ud { self.size + GRH } else { self.size };
        if len != want {
            bail!("receive {n}: {len} bytes, expected {want}");
        }
        let mut got = vec![0u8; self.size];
        self.mr.read(GRH, &mut got)?;
        match self.role {
            Role::Client(_) => {
                if got != self.mine {
                    bail!("receive {n}: the echoed message differs from ours");
                }
            }
            Role::Server => {
                if let Some(p) = (0..self.size).step_by(PAGE).find(|&i| got[i] != 0) {
                    bail!("receive {n}: invalid data in page {}", p / PAGE);
                }
                match first {
                    Some(f) if *f != got => bail!("receive {n}: the client's message changed"),
                    Some(_) => {}
                    None => *first = Some(got.clone()),
                }
                // Echo it, as the tools do from their one buffer.
                self.mr.write(self.send_at(), &got)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_the_tools_52_bytes() {
        let g = roce_core::transport::ipv4_gid([10, 77, 0, 1]);
        let m = pp_message(0x11, 0x123, &g);
        assert_eq!(m.len(), 52);
        assert_eq!(
            &m[..51],
            b"0000:000011:000123:00000000000000000000ffff0a4d0001"
        );
        assert_eq!(parse_pp_message(&m).unwrap(), (0x11, 0x123, g));
    }

    #[test]
    fn pattern_passes_the_chk_rule() {
        let p = pattern(3 * PAGE);
        assert!((0..p.len()).step_by(PAGE).all(|i| p[i] == 0));
        assert!(p.iter().filter(|&&b| b == 0).count() == 3);
    }
}
