//! `roce srq-pingpong`: rdma-core's `ibv_srq_pingpong`, either end: `num_qp` RC QPs
//! whose receives all come from one shared receive queue.
//!
//! The exchange (rdma-core `libibverbs/examples/srq_pingpong.c`) is the pingpongs'
//! 52-byte `LID:QPN:PSN:GID` message, but always `MAX_QP` (256) of them each way, the
//! ones past `num_qp` all zeros: the client writes its 256, reads the server's 256 and
//! writes `"done\0"`; the server reads, connects its QPs (QP i to the peer's QP i),
//! answers, and reads `"done"`. The loop: the client first SENDs once on every QP; on
//! each QP a side SENDs again when both its last SEND and its last receive on that QP
//! have completed, until `iters` SENDs in all have completed; both ends run until they
//! have received `iters` messages in all and completed `iters` SENDs.
//!
//! The tool sends from the buffer it receives into (zeros until something arrives), so
//! its server echoes what came last. Our receives each get their own slot, filled with
//! a marker before they are posted, so every message is checked: the client gets its
//! own pattern back, the server gets the same message every time (the tool's zeros).

use super::pingpong::{parse_pp_message, pp_message};
use super::{random_psn, LinkArgs, OnOff, Oob, Role, Station};
use crate::perf::check;
use anyhow::{bail, Context as _, Result};
use roce_core::memory::AccessFlags;
use roce_core::num::{Psn, Qpn};
use roce_core::transport::{QpType, RecvWr, SendFlags, SendWr, WorkCompletion, WrOp};
use roce_host::{
    CompletionQueue, ConnectOptions, MemoryRegion, QpEndpoint, QueuePair, SharedReceiveQueue,
};
use std::time::Instant;

/// The tool's `MAX_QP`: how many address messages go each way.
pub const MAX_QP: usize = 256;
/// What a receive slot holds until a message lands in it.
const MARKER: u8 = 0xA5;
/// Receive completions carry their slot above this bit; SENDs their QP index.
const RECV_TAG: u64 = 1 << 32;

/// `roce srq-pingpong` options (the tool's letters).
#[derive(clap::Args, Debug, Clone)]
pub struct SrqPingpongArgs {
    /// Wait for the peer's client.
    #[arg(long, conflicts_with = "client")]
    pub server: bool,
    /// Connect to the peer's server at this host.
    #[arg(long)]
    pub client: Option<String>,
    /// The RC fast path (`docs/fastpath.md`).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub fastpath: OnOff,
    /// Message size.
    #[arg(short = 's', long, default_value_t = 4096)]
    pub size: usize,
    /// SENDs (and receives) in all, over every QP.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub iters: usize,
    /// Path MTU (256..4096), as the tool's -m; both ends must agree.
    #[arg(short = 'm', long, default_value_t = 1024)]
    pub mtu: u32,
    /// QPs sharing the receive queue (at most 256, the tool's MAX_QP).
    #[arg(short = 'q', long, default_value_t = 16)]
    pub num_qp: usize,
    /// Receives kept posted on the shared queue (at most the NIC's receive queue depth,
    /// 64 for the host-side NIC).
    #[arg(short = 'r', long, default_value_t = 64)]
    pub rx_depth: usize,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// Runs one srq pingpong, printing the tool's two result lines to `out`.
pub fn run(args: &SrqPingpongArgs, out: &mut impl std::io::Write) -> Result<()> {
    let role = match (&args.client, args.server) {
        (Some(h), false) => Role::Client(h.clone()),
        (None, true) => Role::Server,
        _ => bail!("give --server or --client HOST"),
    };
    if args.num_qp == 0 || args.num_qp > MAX_QP {
        bail!("{} QPs: 1..={MAX_QP}", args.num_qp);
    }
    if args.rx_depth < args.num_qp {
        bail!(
            "rx_depth {} is too small for {} QPs",
            args.rx_depth,
            args.num_qp
        );
    }
    let st = Station::open(&args.link, args.fastpath)?;
    let pp = SrqPingpong::create(&st, args, role)?;
    pp.exchange(args)?;
    let t0 = Instant::now();
    pp.ping(args.iters)?;
    let secs = t0.elapsed().as_secs_f64();
    let bytes = (args.size * args.iters * 2) as f64;
    writeln!(
        out,
        "{} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as u64,
        bytes * 8.0 / secs / 1e6
    )?;
    writeln!(
        out,
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        args.iters,
        secs * 1e6 / args.iters as f64
    )?;
    writeln!(
        out,
        "srq_pingpong {}: {} QPs, {} x {} B, data checked, retransmitted packets {}",
        pp.role.name(),
        args.num_qp,
        args.iters,
        args.size,
        st.retransmits()?
    )?;
    writeln!(out, "{}", st.path_counters()?)?;
    Ok(())
}

/// One side: the QPs, the shared receive queue, and one region of [send area][one slot
/// per posted receive].
struct SrqPingpong<'a> {
    st: &'a Station,
    role: Role,
    size: usize,
    rx_depth: usize,
    cq: CompletionQueue,
    srq: SharedReceiveQueue,
    qps: Vec<QueuePair>,
    psns: Vec<u32>,
    mr: MemoryRegion,
    /// What the client sends; the server learns it from the first message.
    mine: Vec<u8>,
}

impl<'a> SrqPingpong<'a> {
    fn create(st: &'a Station, args: &SrqPingpongArgs, role: Role) -> Result<Self> {
        let pd = st.ctx.alloc_pd()?;
        let cq = st.ctx.create_cq(args.rx_depth + args.num_qp)?;
        let srq = pd.create_srq(args.rx_depth, 0)?;
        let qps = (0..args.num_qp)
            .map(|_| {
                pd.create_qp(QpType::Rc, &cq, &cq)
                    .srq(&srq)
                    .max_send_wr(1)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mr = pd.reg_mr((1 + args.rx_depth) * args.size, AccessFlags::LOCAL_WRITE)?;
        let mine = match role {
            Role::Client(_) => (0..args.size).map(|i| (i % 253) as u8 + 1).collect(),
            Role::Server => Vec::new(),
        };
        mr.write(0, &mine)?;
        Ok(Self {
            st,
            role,
            size: args.size,
            rx_depth: args.rx_depth,
            cq,
            srq,
            psns: (0..args.num_qp).map(|_| random_psn()).collect(),
            qps,
            mr,
            mine,
        })
    }

    fn slot_at(&self, slot: usize) -> usize {
        (1 + slot) * self.size
    }

    fn post_recv(&self, slot: usize) -> Result<()> {
        let at = self.slot_at(slot);
        self.mr.write(at, &vec![MARKER; self.size])?;
        let wr = RecvWr::new(RECV_TAG | slot as u64).sge(
            self.mr.addr() + at as u64,
            self.size as u32,
            self.mr.lkey(),
        );
        Ok(self.srq.post_recv(&wr)?)
    }

    fn post_send(&self, qp: usize) -> Result<()> {
        let wr = SendWr::new(qp as u64, WrOp::Send)
            .sge(self.mr.addr(), self.size as u32, self.mr.lkey())
            .flags(SendFlags::SIGNALED);
        Ok(self.qps[qp].post_send(&wr)?)
    }

    /// The 256 messages of one side: ours for the first `num_qp`, zeros after.
    fn messages(&self) -> Vec<u8> {
        let (gid, _) = self.st.ctx.port_addr();
        let mut m = Vec::with_capacity(MAX_QP * 52);
        for i in 0..MAX_QP {
            m.extend(match self.qps.get(i) {
                Some(qp) => pp_message(qp.qpn().value(), self.psns[i], &gid),
                None => pp_message(0, 0, &[0; 16]),
            });
        }
        m
    }

    fn exchange(&self, args: &SrqPingpongArgs) -> Result<()> {
        for slot in 0..self.rx_depth {
            self.post_recv(slot)?;
        }
        let mine = self.messages();
        let mut oob = Oob::open(&self.role, args.link.port)?;
        match self.role {
            Role::Client(_) => {
                oob.write(&mine)?;
                let theirs = oob.read(self.st, mine.len())?;
                oob.write(b"done\0")?;
                self.connect(&theirs, args)
            }
            Role::Server => {
                let theirs = oob.read(self.st, mine.len())?;
                self.connect(&theirs, args)?;
                oob.write(&mine)?;
                if oob.read(self.st, 5)? != b"done\0" {
                    bail!("the client did not finish the exchange with \"done\"");
                }
                Ok(())
            }
        }
    }

    /// Connects our QP i to the peer's QP i.
    fn connect(&self, theirs: &[u8], args: &SrqPingpongArgs) -> Result<()> {
        let opts = ConnectOptions {
            mtu: crate::perf_cmd::parse_mtu(args.mtu)?,
            ..ConnectOptions::default()
        };
        let mut mac = None;
        for (i, qp) in self.qps.iter().enumerate() {
            let (qpn, psn, gid) = parse_pp_message(&theirs[i * 52..(i + 1) * 52])
                .with_context(|| format!("the peer's address {i}"))?;
            if qpn == 0 {
                bail!("the peer has fewer QPs than our {}", self.qps.len());
            }
            let mac = match mac {
                Some(m) => m,
                None => *mac.insert(self.st.resolve_gid(&gid)?),
            };
            let ep = QpEndpoint {
                qpn: Qpn::new(qpn),
                psn: Psn::new(psn),
                gid,
                mac,
            };
            qp.connect(&ep, Psn::new(self.psns[i]), &opts)?;
        }
        Ok(())
    }

    /// The tool's loop (see the module comment); every received message is checked.
    fn ping(&self, iters: usize) -> Result<()> {
        const RECV: u8 = 1;
        const SEND: u8 = 2;
        let mut pending = vec![RECV; self.qps.len()];
        if matches!(self.role, Role::Client(_)) {
            for (i, p) in pending.iter_mut().enumerate() {
                self.post_send(i)?;
                *p = RECV | SEND;
            }
        }
        let (mut scnt, mut rcnt) = (0usize, 0usize);
        let mut first: Option<Vec<u8>> = None;
        let mut wcs = [WorkCompletion::default(); 16];
        let mut idle = Instant::now();
        while rcnt < iters || scnt < iters {
            let got = self.cq.poll(&mut wcs)?;
            if got.is_empty() {
                if idle.elapsed().as_secs() > 30 {
                    bail!("stuck after {scnt} sends and {rcnt} receives");
                }
                self.st.progress();
                continue;
            }
            idle = Instant::now();
            for wc in got.iter() {
                check(wc)?;
                let Some(q) = self.qps.iter().position(|qp| qp.qpn() == wc.qp_num) else {
                    bail!(
                        "a completion for QPN {:#x}, not one of ours",
                        wc.qp_num.value()
                    );
                };
                if wc.wr_id & RECV_TAG != 0 {
                    let slot = (wc.wr_id & !RECV_TAG) as usize;
                    self.check_receive(rcnt, slot, wc.byte_len as usize, &mut first)?;
                    self.post_recv(slot)?;
                    rcnt += 1;
                    pending[q] &= !RECV;
                } else {
                    scnt += 1;
                    pending[q] &= !SEND;
                }
                if scnt < iters && pending[q] == 0 {
                    self.post_send(q)?;
                    pending[q] = RECV | SEND;
                }
            }
        }
        Ok(())
    }

    /// Receive `n`, in `slot`: the client's own pattern back; at the server, the same
    /// message every time, which it then echoes.
    fn check_receive(
        &self,
        n: usize,
        slot: usize,
        len: usize,
        first: &mut Option<Vec<u8>>,
    ) -> Result<()> {
        if len != self.size {
            bail!("receive {n}: {len} bytes, expected {}", self.size);
        }
        let mut got = vec![0u8; self.size];
        self.mr.read(self.slot_at(slot), &mut got)?;
        match self.role {
            Role::Client(_) if got != self.mine => {
                bail!("receive {n}: the echoed message differs from ours")
            }
            Role::Client(_) => {}
            Role::Server => match first {
                Some(f) if *f != got => bail!("receive {n}: the client's message changed"),
                Some(_) => {}
                None => {
                    if got.iter().all(|&b| b == MARKER) {
                        bail!("receive {n}: nothing was written into the buffer");
                    }
                    self.mr.write(0, &got)?;
                    *first = Some(got);
                }
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unused_qps_are_zero_messages() {
        // srq_pingpong.c memsets my_dest and sends all MAX_QP entries.
        let m = pp_message(0, 0, &[0; 16]);
        assert_eq!(
            &m[..51],
            b"0000:000000:000000:00000000000000000000000000000000"
        );
        assert_eq!(m.len() * MAX_QP, 13_312);
    }
}
