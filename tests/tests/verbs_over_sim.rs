//! Applications written against the verbs API, over the simulated fabric with loss,
//! duplication and reordering: data arrives intact, every WR completes exactly once and
//! in order, and when retries run out the WRs complete in error.

use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{QpType, RecvWr, SendFlags, SendWr, WcStatus, WorkCompletion, WrOp};
use roce_device::Capacities;
use roce_hdl_sim::DataWidth;
use roce_host::{CompletionQueue, ConnectOptions, Context, MemoryRegion, QueuePair};
use roce_sim::{Faults, LinkConfig};
use roce_testbed::nic::{self, Datapath};
use roce_testbed::{Sim, World};

struct Side {
    ctx: Context,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
}

/// Which datapath the NICs use: roce-core in software, or the Verilated RTL.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Model,
    Rtl,
}

/// The backends to run: the RTL only where its model was built (always under CI).
fn backends() -> Vec<Backend> {
    if roce_hdl_sim::rtl_available() {
        vec![Backend::Model, Backend::Rtl]
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the RTL model is required under CI"
        );
        eprintln!("skipped the RTL backend: the Verilated model was not built");
        vec![Backend::Model]
    }
}

fn setup(faults: Faults, seed: u64, opts: ConnectOptions, backend: Backend) -> (Sim, [Side; 2]) {
    let datapath = match backend {
        Backend::Model => Datapath::Software,
        Backend::Rtl => Datapath::Rtl(DataWidth::W64),
    };
    let nics = [0, 1]
        .map(|i| nic::boot(datapath, false, nic::port_config(i), Capacities::Firmware).unwrap());
    let sim = Sim::back_to_back(
        nics,
        LinkConfig::new(100_000_000_000, 2_000).with_faults(faults),
        seed,
    )
    .unwrap();
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let sides = sim.contexts().map(|ctx| {
        let ctx = ctx.clone();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(256).unwrap();
        let qp = pd
            .create_qp(QpType::Rc, &cq, &cq)
            .max_send_wr(32)
            .max_recv_wr(32)
            .build()
            .unwrap();
        let mr = pd.reg_mr(1 << 20, access).unwrap();
        Side { ctx, cq, qp, mr }
    });
    let psn = Psn::new(0xFF_FF00);
    for (a, b) in [(0, 1), (1, 0)] {
        let peer = sides[b].qp.endpoint(psn);
        sides[a].qp.connect(&peer, psn, &opts).unwrap();
    }
    (sim, sides)
}

/// Runs the fabric until `n` completions arrive on `cq` (or the fabric has nothing left).
fn wait(sim: &mut Sim, cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut buf = [WorkCompletion::default(); 16];
    while out.len() < n {
        let got = cq.poll(&mut buf).unwrap();
        out.extend_from_slice(got);
        if got.is_empty() && !sim.advance() {
            break;
        }
    }
    out
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn lossy(loss: f64) -> Faults {
    Faults {
        loss,
        duplicate: loss / 2.0,
        reorder: loss,
        reorder_max_delay_ns: 3_000,
        ..Faults::default()
    }
}

#[test]
fn writes_reads_and_sends_survive_loss_duplication_and_reordering() {
    for (backend, seed) in backends()
        .into_iter()
        .flat_map(|b| (1..=4).map(move |s| (b, s)))
    {
        let (mut sim, [a, b]) = setup(
            lossy(0.02),
            seed,
            ConnectOptions {
                timeout: 8,
                ..ConnectOptions::default()
            },
            backend,
        );
        // Three WRITEs, one READ back, one SEND: every byte checked.
        let data = pattern(200_000, seed);
        a.mr.write(0, &data).unwrap();
        for (i, chunk) in [(0usize, 50_000usize), (50_000, 100_000), (150_000, 50_000)]
            .iter()
            .enumerate()
        {
            let wr = SendWr::new(
                i as u64,
                WrOp::RdmaWrite {
                    remote_addr: b.mr.addr() + chunk.0 as u64,
                    rkey: b.mr.rkey(),
                },
            )
            .sge(a.mr.addr() + chunk.0 as u64, chunk.1 as u32, a.mr.lkey())
            .flags(SendFlags::SIGNALED);
            a.qp.post_send(&wr).unwrap();
        }
        let read = SendWr::new(
            3,
            WrOp::RdmaRead {
                remote_addr: b.mr.addr(),
                rkey: b.mr.rkey(),
            },
        )
        .sge(a.mr.addr() + 400_000, 200_000, a.mr.lkey())
        .flags(SendFlags::SIGNALED);
        a.qp.post_send(&read).unwrap();
        b.qp.post_recv(&RecvWr::new(77).sge(b.mr.addr() + 600_000, 4096, b.mr.lkey()))
            .unwrap();
        let msg = pattern(3000, seed + 100);
        a.mr.write(800_000, &msg).unwrap();
        a.qp.post_send(
            &SendWr::new(4, WrOp::Send)
                .sge(a.mr.addr() + 800_000, 3000, a.mr.lkey())
                .flags(SendFlags::SIGNALED),
        )
        .unwrap();
        sim.kick(0);
        sim.kick(1);

        let wcs = wait(&mut sim, &a.cq, 5);
        let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(
            got,
            (0..5).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(),
            "{backend:?} seed {seed}"
        );
        let rx = wait(&mut sim, &b.cq, 1);
        assert_eq!(
            (rx[0].wr_id, rx[0].status, rx[0].byte_len),
            (77, WcStatus::Success, 3000)
        );
        // Exactly once: nothing more arrives.
        for _ in 0..10_000 {
            if !sim.advance() {
                break;
            }
        }
        let mut extra = [WorkCompletion::default(); 4];
        assert_eq!(a.cq.poll(&mut extra).unwrap().len(), 0);
        assert_eq!(b.cq.poll(&mut extra).unwrap().len(), 0);
        let mut buf = vec![0; 200_000];
        b.mr.read(0, &mut buf).unwrap();
        assert!(
            buf == data,
            "{backend:?} seed {seed}: remote memory differs"
        );
        a.mr.read(400_000, &mut buf).unwrap();
        assert!(buf == data, "{backend:?} seed {seed}: READ data differs");
        let mut m = vec![0; 3000];
        b.mr.read(600_000, &mut m).unwrap();
        assert_eq!(m, msg);
        let c = sim.counters();
        assert!(
            c.drops > 0 && c.retransmits > 0,
            "{backend:?} seed {seed}: the faults did nothing: {c:?}"
        );
    }
}

#[test]
fn exhausted_retries_complete_in_error_and_flush_the_rest() {
    for backend in backends() {
        retries_run_out(backend);
    }
}

fn retries_run_out(backend: Backend) {
    // A link that loses everything from A to B: no ACK ever comes back.
    let (mut sim, [a, _b]) = setup(
        Faults {
            loss: 1.0,
            ..Faults::default()
        },
        7,
        ConnectOptions {
            timeout: 4,
            retry_cnt: 2,
            ..ConnectOptions::default()
        },
        backend,
    );
    for i in 0..3 {
        let wr = SendWr::new(
            i,
            WrOp::RdmaWrite {
                remote_addr: 0x1000,
                rkey: roce_core::num::Rkey(1),
            },
        )
        .sge(a.mr.addr(), 64, a.mr.lkey())
        .flags(SendFlags::SIGNALED);
        a.qp.post_send(&wr).unwrap();
    }
    sim.kick(0);
    let wcs = wait(&mut sim, &a.cq, 3);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        [
            (0, WcStatus::RetryExcErr),
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(a.ctx.take_events().qp_fatal, Some(a.qp.qpn()));
    // timeout 4 = 65.5 us; the first WR was tried 1 + retry_cnt times.
    assert!(sim.now() >= 3 * 65_536, "gave up after {} ns", sim.now());
}
