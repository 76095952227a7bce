//! Two SoCs joined back to back, connected RC QPs on each, and an RC workload that
//! checks its data: shared by `tests/soc.rs` and `benches/soc_speed.rs`.

use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{
    ipv4_gid, QpType, RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use roce_device::soc::SocNic;
use roce_device::NicModel;
use roce_host::{CompletionQueue, ConnectOptions, Context, MemoryRegion, QpEndpoint, QueuePair};
use std::rc::Rc;

pub fn mac(l: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, l]
}

/// A fabric of two SoCs joined back to back, dropping frames with probability `loss`
/// (a seeded xorshift: the same frames every run).
pub struct Wire {
    pub nics: [Rc<SocNic>; 2],
    loss: f64,
    rng: u64,
    pub dropped: u64,
    pub carried: u64,
}

impl Wire {
    fn drop_this(&mut self) -> bool {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64 <= self.loss
    }

    /// Runs both SoCs `cycles` each, then carries what they sent.
    pub fn step(&mut self, cycles: u64) {
        for n in &self.nics {
            n.run(cycles);
        }
        let mut buf = vec![0u8; 8192];
        for (from, to) in [(0, 1), (1, 0)] {
            while let Some(n) = self.nics[from].transmit_frame(&mut buf) {
                if self.drop_this() {
                    self.dropped += 1;
                } else {
                    self.carried += 1;
                    self.nics[to].receive_frame(&buf[..n]);
                }
            }
        }
    }

    /// Runs until `cq` holds `n` completions, at most `max_cycles` per SoC.
    pub fn completions(
        &mut self,
        cq: &CompletionQueue,
        n: usize,
        max_cycles: u64,
    ) -> Vec<WorkCompletion> {
        let mut out = Vec::new();
        let mut buf = [WorkCompletion::new(
            0,
            roce_core::num::Qpn::new(0),
            WcOpcode::Send,
            WcStatus::Success,
        ); 8];
        let start = self.nics[0].cycles();
        while out.len() < n {
            let got = cq.poll(&mut buf).unwrap();
            out.extend_from_slice(&buf[..got]);
            assert!(
                self.nics[0].cycles() - start < max_cycles,
                "{} of {n} completions after {max_cycles} cycles: {out:?}",
                out.len()
            );
            self.step(2_000);
        }
        out
    }
}

pub struct Pair {
    pub wire: Wire,
    /// The two devices' contexts, kept open.
    pub _ctx: [Context; 2],
    pub cq: [CompletionQueue; 2],
    pub qp: [QueuePair; 2],
    pub mr: [MemoryRegion; 2],
}

pub fn pair(image: &std::path::Path, loss: f64, timeout: u8) -> Pair {
    let nics = [1u8, 2].map(|l| SocNic::new(image, mac(l), ipv4_gid([10, 0, 0, l]), None).unwrap());
    let ctx = nics.clone().map(|n| Context::open(n).unwrap());
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let pd = ctx.each_ref().map(|c| c.alloc_pd().unwrap());
    let cq = ctx.each_ref().map(|c| c.create_cq(32).unwrap());
    let qp = [0, 1].map(|i| pd[i].create_qp(QpType::Rc, &cq[i], &cq[i]).build().unwrap());
    let mr = pd.each_ref().map(|p| p.reg_mr(65536, all).unwrap());
    let opts = ConnectOptions {
        timeout,
        ..ConnectOptions::default()
    };
    for (i, j) in [(0, 1), (1, 0)] {
        let (gid, mac) = ctx[j].port_addr();
        let ep = QpEndpoint {
            qpn: qp[j].qpn(),
            psn: Psn::new(0xFF_FFF8),
            gid,
            mac,
        };
        qp[i].connect(&ep, Psn::new(0xFF_FFF8), &opts).unwrap();
    }
    Pair {
        wire: Wire {
            nics,
            loss,
            rng: 0xC8DD_E6E5_FD29_F054,
            dropped: 0,
            carried: 0,
        },
        _ctx: ctx,
        cq,
        qp,
        mr,
    }
}

/// RC SEND, WRITE, READ and both atomics from SoC 0 to SoC 1; checks every completion
/// and the data on both sides.
pub fn rc_ops(p: &mut Pair, len: usize, max_cycles: u64) {
    let data: Vec<u8> = (0..len as u32).map(|i| (i * 13 + 5) as u8).collect();
    let (a, b) = (&p.mr[0], &p.mr[1]);
    a.write(0, &data).unwrap();
    b.write(40_000, &77u64.to_ne_bytes()).unwrap();
    p.qp[1]
        .post_recv(&RecvWr::new(50).sge(b.addr() + 20_000, 16_384, b.lkey()))
        .unwrap();
    let sig = SendFlags::SIGNALED;
    let wrs = [
        SendWr::new(
            1,
            WrOp::RdmaWrite {
                remote_addr: b.addr(),
                rkey: b.rkey(),
            },
        )
        .sge(a.addr(), len as u32, a.lkey())
        .flags(sig),
        SendWr::new(2, WrOp::Send)
            .sge(a.addr(), len as u32 / 2 + 1, a.lkey())
            .flags(sig),
        SendWr::new(
            3,
            WrOp::RdmaRead {
                remote_addr: b.addr(),
                rkey: b.rkey(),
            },
        )
        .sge(a.addr() + 16_384, len as u32, a.lkey())
        .flags(sig),
        SendWr::new(
            4,
            WrOp::AtomicFetchAndAdd {
                remote_addr: b.addr() + 40_000,
                rkey: b.rkey(),
                add: 3,
            },
        )
        .sge(a.addr() + 36_000, 8, a.lkey())
        .flags(sig),
        SendWr::new(
            5,
            WrOp::AtomicCmpAndSwp {
                remote_addr: b.addr() + 40_000,
                rkey: b.rkey(),
                compare: 80,
                swap: 1,
            },
        )
        .sge(a.addr() + 36_008, 8, a.lkey())
        .flags(sig),
    ];
    p.qp[0].post_send_list(&wrs).unwrap();
    let wcs = p.wire.completions(&p.cq[0], 5, max_cycles);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        (1..=5).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
    let rx = p.wire.completions(&p.cq[1], 1, max_cycles);
    assert_eq!(
        (rx[0].wr_id, rx[0].status, rx[0].opcode, rx[0].byte_len),
        (50, WcStatus::Success, WcOpcode::Recv, len as u32 / 2 + 1)
    );
    let mut buf = vec![0u8; len];
    b.read(0, &mut buf).unwrap();
    assert!(buf == data, "WRITE data differs");
    a.read(16_384, &mut buf).unwrap();
    assert!(buf == data, "READ data differs");
    let mut sent = vec![0u8; len / 2 + 1];
    b.read(20_000, &mut sent).unwrap();
    assert!(sent[..] == data[..len / 2 + 1], "SEND data differs");
    let mut w = [0u8; 8];
    a.read(36_000, &mut w).unwrap();
    assert_eq!(
        u64::from_ne_bytes(w),
        77,
        "FETCH_AND_ADD returns the old value"
    );
    a.read(36_008, &mut w).unwrap();
    assert_eq!(
        u64::from_ne_bytes(w),
        80,
        "CMP_AND_SWP returns the old value"
    );
    b.read(40_000, &mut w).unwrap();
    assert_eq!(
        u64::from_ne_bytes(w),
        1,
        "80 after the add, then swapped for 1"
    );
}
