//! Two SoCs joined back to back, connected RC QPs on each, and an RC workload that
//! checks its data: shared by `tests/soc.rs` and `benches/soc_speed.rs`.

#[path = "../rc_mix/mod.rs"]
pub mod rc_mix;

use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{ipv4_gid, QpType, WorkCompletion};
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
    /// Frames from SoC 0 and SoC 1 to drop next, whatever `loss` says.
    pub drop_next: [u32; 2],
    /// The cycles each SoC runs between two looks at the wire in [`Wire::completions`]:
    /// how the two SoCs' work interleaves (a test varies it to shift that timing).
    pub step_cycles: u64,
    /// With `record`, every frame each SoC sent (lost or carried), in the order it
    /// left: what a test checks the wire's order and bytes on.
    pub record: bool,
    pub sent: [Vec<Vec<u8>>; 2],
}

impl Wire {
    /// The two SoCs joined back to back, losing frames with probability `loss`.
    pub fn new(nics: [Rc<SocNic>; 2], loss: f64) -> Self {
        Self {
            nics,
            loss,
            rng: 0xC8DD_E6E5_FD29_F054,
            dropped: 0,
            carried: 0,
            drop_next: [0; 2],
            step_cycles: 2_000,
            record: false,
            sent: [Vec::new(), Vec::new()],
        }
    }

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
                if self.record {
                    self.sent[from].push(buf[..n].to_vec());
                }
                let forced = self.drop_next[from] > 0;
                self.drop_next[from] = self.drop_next[from].saturating_sub(1);
                if forced || self.drop_this() {
                    self.dropped += 1;
                } else {
                    self.carried += 1;
                    self.nics[to].receive_frame(&buf[..n]);
                }
            }
        }
    }

    /// The bytes of stack each SoC's firmware has used since reset, once both have run
    /// idle long enough for their stack probes to pass over the whole painted stack
    /// (`firmware/image/src/stack.rs`, 64 words an idle poll: the softcore image's
    /// ~220 KiB of free RAM take 1.3 M cycles, measured; the idle run is 2 M).
    pub fn stack_used(&mut self) -> [u32; 2] {
        for _ in 0..20 {
            self.step(100_000);
        }
        self.nics.each_ref().map(|n| n.firmware_stats().stack_used)
    }

    /// Runs until `cq` holds `n` completions, at most `max_cycles` per SoC.
    pub fn completions(
        &mut self,
        cq: &CompletionQueue,
        n: usize,
        max_cycles: u64,
    ) -> Vec<WorkCompletion> {
        let mut out = Vec::new();
        let mut buf = [WorkCompletion::default(); 8];
        let start = self.nics[0].cycles();
        while out.len() < n {
            let got = cq.poll(&mut buf).unwrap();
            out.extend_from_slice(got);
            assert!(
                self.nics[0].cycles() - start < max_cycles,
                "{} of {n} completions after {max_cycles} cycles: {out:?}",
                out.len()
            );
            self.step(self.step_cycles);
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
    let opts = ConnectOptions {
        timeout,
        ..ConnectOptions::default()
    };
    pair_with(image, loss, &opts)
}

/// [`pair`] with the QPs connected with `opts`.
pub fn pair_with(image: &std::path::Path, loss: f64, opts: &ConnectOptions) -> Pair {
    pair_on(image, loss, opts, false)
}

/// [`pair_with`], the SoCs' fast path on or off (`SocNic::new`'s `fastpath`).
pub fn pair_on(image: &std::path::Path, loss: f64, opts: &ConnectOptions, fastpath: bool) -> Pair {
    let nics = [1u8, 2]
        .map(|l| SocNic::new(image, mac(l), ipv4_gid([10, 0, 0, l]), None, fastpath).unwrap());
    let ctx = nics.clone().map(|n| Context::open(n).unwrap());
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let pd = ctx.each_ref().map(|c| c.alloc_pd().unwrap());
    let cq = ctx.each_ref().map(|c| c.create_cq(32).unwrap());
    let qp = [0, 1].map(|i| pd[i].create_qp(QpType::Rc, &cq[i], &cq[i]).build().unwrap());
    let mr = pd.each_ref().map(|p| p.reg_mr(65536, all).unwrap());
    connect(&ctx, [&qp[0], &qp[1]], Psn::new(0xFF_FFF8), opts);
    Pair {
        wire: Wire::new(nics, loss),
        _ctx: ctx,
        cq,
        qp,
        mr,
    }
}

/// Connects `qp[0]` on SoC 0 with `qp[1]` on SoC 1 (both directions starting at `psn`).
pub fn connect(ctx: &[Context; 2], qp: [&QueuePair; 2], psn: Psn, opts: &ConnectOptions) {
    for (i, j) in [(0, 1), (1, 0)] {
        let (gid, mac) = ctx[j].port_addr();
        let ep = QpEndpoint {
            qpn: qp[j].qpn(),
            psn,
            gid,
            mac,
        };
        qp[i].connect(&ep, psn, opts).unwrap();
    }
}

/// RC SEND, WRITE, READ and both atomics from SoC 0 to SoC 1 ([`rc_mix`]); checks
/// every completion and the data on both sides.
pub fn rc_ops(p: &mut Pair, len: usize, max_cycles: u64) {
    let (a, b) = (&p.mr[0], &p.mr[1]);
    let data = rc_mix::post([&p.qp[0], &p.qp[1]], a, b, len);
    let sent = p.wire.completions(&p.cq[0], 5, max_cycles);
    let received = p.wire.completions(&p.cq[1], 1, max_cycles);
    rc_mix::check("two SoCs", a, b, &data, &sent, &received);
}
