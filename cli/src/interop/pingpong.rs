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
    AddressVector, Mtu, QpType, RecvWr, SendFlags, SendWr, UdDest, WcStatus, WorkCompletion, WrOp,
};
use roce_host::{ConnectOptions, QpEndpoint};
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
    let ud = args.transport == Transport::Ud;
    let size = args.size.unwrap_or(if ud { 2048 } else { 4096 });
    let mtu = Mtu::from_bytes_floor(args.mtu)
        .filter(|m| m.bytes() == args.mtu)
        .ok_or_else(|| anyhow::anyhow!("MTU {}: use 256, 512, 1024, 2048 or 4096", args.mtu))?;
    if ud && size > mtu.bytes() as usize {
        bail!("UD messages must fit the MTU ({} > {})", size, mtu.bytes());
    }
    let st = Station::open(&args.link, args.fastpath)?;
    let pd = st.ctx.alloc_pd()?;
    let cq = st.ctx.create_cq(args.rx_depth + 4)?;
    let qp = pd
        .create_qp(args.transport.qp_type(), &cq, &cq)
        .max_recv_wr(args.rx_depth)
        .max_send_wr(4)
        .build()?;
    // [receive area: GRH space + message][send area: message]
    let slot = size + GRH;
    let mr = pd.reg_mr(2 * slot, AccessFlags::LOCAL_WRITE)?;
    let recv_at = if ud { 0 } else { GRH };
    let send_at = slot;
    let recv_len = if ud { slot } else { size } as u32;
    let post_recv = || {
        qp.post_recv(&RecvWr::new(RECV_WRID).sge(mr.addr() + recv_at as u64, recv_len, mr.lkey()))
    };
    let mine = pattern(size);
    if matches!(role, Role::Client(_)) {
        mr.write(send_at, &mine)?;
    }

    let my_psn = random_psn();
    let (gid, _) = st.ctx.port_addr();
    let msg = pp_message(qp.qpn().value(), my_psn, &gid);
    let mut oob = Oob::open(&role, args.link.port)?;
    let opts = ConnectOptions {
        mtu,
        qkey: Qkey(PP_QKEY),
        ..ConnectOptions::default()
    };
    let connect = |rem: &(u32, u32, [u8; 16])| -> Result<QpEndpoint> {
        let ep = QpEndpoint {
            qpn: Qpn::new(rem.0),
            psn: Psn::new(rem.1),
            gid: rem.2,
            mac: st.resolve_gid(&rem.2)?,
        };
        qp.connect(&ep, Psn::new(my_psn), &opts)?;
        // Receives wait before the peer can send: the server answers only after this,
        // and the client's peer sends only after the client's first message.
        for _ in 0..args.rx_depth {
            post_recv()?;
        }
        Ok(ep)
    };
    let remote = match role {
        Role::Client(_) => {
            oob.write(&msg)?;
            let rem = parse_pp_message(&oob.read(&st, msg.len())?)?;
            oob.write(b"done\0")?;
            connect(&rem)?
        }
        Role::Server => {
            let rem = parse_pp_message(&oob.read(&st, msg.len())?)?;
            let ep = connect(&rem)?;
            oob.write(&msg)?;
            let done = oob.read(&st, 5)?;
            if done != b"done\0" {
                bail!("the client did not finish the exchange with \"done\"");
            }
            ep
        }
    };
    let ud_dest = UdDest {
        av: AddressVector {
            dmac: remote.mac,
            dgid: remote.gid,
            hop_limit: 64,
            ..AddressVector::default()
        },
        remote_qpn: remote.qpn,
        remote_qkey: Qkey(PP_QKEY),
    };
    let post_send = || {
        let mut wr = SendWr::new(SEND_WRID, WrOp::Send)
            .sge(mr.addr() + send_at as u64, size as u32, mr.lkey())
            .flags(SendFlags::SIGNALED);
        if ud {
            wr = wr.ud(ud_dest);
        }
        qp.post_send(&wr)
    };

    let t0 = Instant::now();
    let mut pending = RECV_WRID;
    if matches!(role, Role::Client(_)) {
        post_send()?;
        pending |= SEND_WRID;
    }
    let (mut scnt, mut rcnt) = (0usize, 0usize);
    let mut first: Option<Vec<u8>> = None;
    let mut got = vec![0u8; size];
    let mut buf = [WorkCompletion::new(
        0,
        Qpn::new(0),
        roce_core::transport::WcOpcode::Send,
        WcStatus::Success,
    ); 4];
    let mut idle = Instant::now();
    while rcnt < args.iters || scnt < args.iters {
        let n = cq.poll(&mut buf)?;
        if n == 0 {
            if idle.elapsed().as_secs() > 30 {
                bail!("stuck after {scnt} sends and {rcnt} receives");
            }
            st.progress();
            continue;
        }
        idle = Instant::now();
        for wc in &buf[..n] {
            check(wc)?;
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    let want = if ud { size + GRH } else { size };
                    if wc.byte_len as usize != want {
                        bail!("receive {rcnt}: {} bytes, expected {want}", wc.byte_len);
                    }
                    mr.read(GRH, &mut got)?;
                    match role {
                        // The server sends back our own message.
                        Role::Client(_) => {
                            if got != mine {
                                bail!("receive {rcnt}: the echoed message differs from ours");
                            }
                        }
                        Role::Server => {
                            if let Some(p) = (0..size).step_by(PAGE).find(|&i| got[i] != 0) {
                                bail!("receive {rcnt}: invalid data in page {}", p / PAGE);
                            }
                            match &first {
                                Some(f) if *f != got => {
                                    bail!("receive {rcnt}: the client's message changed")
                                }
                                Some(_) => {}
                                None => first = Some(got.clone()),
                            }
                            // Echo it, as the tools do from their one buffer.
                            mr.write(send_at, &got)?;
                        }
                    }
                    rcnt += 1;
                    post_recv()?;
                }
                other => bail!("completion for unknown work request {other}"),
            }
            pending &= !wc.wr_id;
            if scnt < args.iters && pending == 0 {
                post_send()?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let bytes = (size * args.iters * 2) as f64;
    let r = PingpongResult {
        iters: args.iters,
        size,
        usec_per_iter: secs * 1e6 / args.iters as f64,
        mbit_per_s: bytes * 8.0 / secs / 1e6,
        retransmits: st.retransmits(),
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
        role.name(),
        args.iters,
        size,
        r.retransmits
    )?;
    Ok(r)
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
