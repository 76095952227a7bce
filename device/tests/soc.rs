//! Two NIC SoCs (`hdl-sim/rtl/soc/nic_soc.sv`, each running the firmware image
//! `make-images.sh` wrote) behind the device boundary: the host driver opens each one
//! (QUERY_DEVICE) and reaches it only through its register port and its DMA engine;
//! RC SEND, WRITE, READ, FETCH_AND_ADD and CMP_AND_SWP between verbs applications carry
//! the right data, also with 1 % of the frames lost on the wire; the firmware's own
//! frame counts match what the wire carried. PFC on the SoC's DCB block (received
//! pauses stop only their priority, XOFF/XON from its receive buffer) is the model's,
//! cycle for cycle.
//!
//! Without the image the tests print SKIPPED and pass, unless `ROCE_SOC_REQUIRED=1`
//! (what `cargo xtask ci`'s `soc` step sets after making the image); without the model
//! they fail under `CI=true`.

mod soc_pair;

use roce_abi::counters::FastPathCounters;
use roce_core::dcb::{DcbRegs, PfcThresholds, Priorities};
use roce_core::engine::DcbConfig;
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{
    ipv4_gid, Mtu, QpAttr, QpState, QpType, RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WrOp,
};
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::frame::parse;
use roce_core::wire::pfc::PfcRepr;
use roce_device::soc::{test_image, SocNic, CLOCK_HZ};
use roce_device::NicModel;
use roce_hdl_sim::soc::boards;
use roce_hdl_sim::{DcbCounters, DcbLockstep};
use roce_host::{ConnectOptions, Context, QueuePair};
use soc_pair::{connect, mac, pair, rc_mix, rc_ops, Wire};
use std::rc::Rc;

#[test]
fn rc_between_two_socs() {
    let Some(image) = test_image() else { return };
    let mut p = pair(&image, 0.0, 14);
    let before = p.wire.nics.each_ref().map(|n| n.firmware_stats());
    rc_ops(&mut p, 3000, 20_000_000);
    // Let the last ACKs arrive, then the firmware's own frame counts must equal what
    // the wire carried: every frame sent was received, none lost inside the SoCs.
    for _ in 0..50 {
        p.wire.step(2_000);
    }
    assert_eq!(p.wire.dropped, 0);
    let s = p.wire.nics.each_ref().map(|n| n.firmware_stats());
    let d = [s[0].since(&before[0]), s[1].since(&before[1])];
    let sent: u64 = d.iter().map(|d| u64::from(d.frames_tx)).sum();
    let received: u64 = d.iter().map(|d| u64::from(d.frames_rx)).sum();
    assert_eq!((sent, received), (p.wire.carried, p.wire.carried));
    for (i, d) in d.iter().enumerate() {
        assert!(d.busy_polls > 0 && d.busy_instret > 0 && d.busy_cycles >= d.busy_instret);
        eprintln!(
            "SoC {i}: {} frames sent, {} received; per frame {} cycles, {} instructions (busy polls of the firmware's loop)",
            d.frames_tx,
            d.frames_rx,
            d.busy_cycles / d.frames(),
            d.busy_instret / d.frames()
        );
    }
}

/// Issue 14's budget lines on the SoC: one 64 KiB RDMA WRITE at path MTU 4096 (16 data
/// packets) from SoC 0 to SoC 1, the instructions each SoC's firmware retired in the
/// polls that found work (`minstret`, as the firmware counts itself), per data packet:
/// the sender's and the receiver's, as the QEMU self-test reports them: first on the
/// firmware alone (the fast path's strap off; BENCHMARKS.md "The NIC SoC"), then with
/// the SoC's fast path ("The RC fast path in the SoC"). The firmware-only bounds are
/// what that version reaches with ~15 % margin.
#[test]
fn budget_of_a_64k_write_at_mtu_4096_per_end() {
    let Some(image) = test_image() else { return };
    let alone = write_64k(&image, false);
    let per = alone.per_packet();
    assert_eq!(
        (alone.d[0].frames_tx, alone.d[1].frames_rx),
        (PACKETS as u32, PACKETS as u32),
        "the data packets each end counted"
    );
    alone.report("firmware only");
    assert!(
        per[0] <= SOC_SENDER_BUDGET && per[1] <= SOC_RECEIVER_BUDGET,
        "SoC firmware per data packet regressed: sender {}, receiver {}",
        per[0],
        per[1]
    );
    // The same WRITE with the SoCs' RC fast path (`soc_fp`, `docs/fastpath.md` §6 "In
    // the SoC"), the run above (the firmware alone: the engine) its reference: the
    // same bytes land (`write_64k` checks them), the same completion comes, and the
    // data packets reach neither firmware: the sender's segmenter sent them and the
    // receiver's fast path placed them.
    let fast = write_64k(&image, true);
    fast.report("fast path");
    assert_eq!(fast.wc, alone.wc, "the completions differ");
    let fp = |w: &Write64k, i: usize| w.counters[i].runtime.fastpath;
    assert_eq!(
        (fp(&alone, 0).tx_frames, fp(&alone, 1).rx_handled),
        (0, 0),
        "without the strap the fast path carries nothing"
    );
    assert!(
        fp(&fast, 0).tx_frames >= PACKETS && fp(&fast, 1).rx_handled >= PACKETS,
        "the fast path carried the data packets: sender {:?}, receiver {:?}",
        fp(&fast, 0),
        fp(&fast, 1)
    );
    assert_eq!(
        (fast.d[0].frames_tx, fast.d[1].frames_rx),
        (0, 0),
        "no data packet went through either firmware"
    );
    // The WRITE's CQE: the sender's firmware wrote it alone, its fast path's CQE writer
    // (`fp_cqw`, driven through `MmioFastPath`) with the strap.
    let cqes = |w: &Write64k| w.counters[0].runtime.cqes;
    assert_eq!(
        cqes(&alone) - cqes(&fast),
        1,
        "the sender's CQE writer wrote the WRITE's CQE: firmware CQEs alone {}, with the fast path {}",
        cqes(&alone),
        cqes(&fast)
    );
    // The host's doorbell reached the SoC's WQE fetch without the firmware (`soc_fp`
    // takes the send doorbells of the queues the fetch holds): half the data packets
    // were on the wire before the sender's firmware had worked at all (a poll that
    // handed the doorbell on would have ended by then); alone, it built them.
    assert_eq!(
        (fast.to_half.busy_polls, fast.to_half.busy_instret),
        (0, 0),
        "the sender's firmware worked before half the data packets left"
    );
    assert!(alone.to_half.busy_instret > 0);
    let per = fast.per_packet();
    assert!(
        per[0] <= SOC_FP_SENDER_BUDGET && per[1] <= SOC_FP_RECEIVER_BUDGET,
        "SoC firmware per data packet with the fast path: sender {}, receiver {}",
        per[0],
        per[1]
    );
}

/// Data packets of [`write_64k`]'s WRITE.
const PACKETS: u64 = 16;

/// What [`write_64k`] saw.
struct Write64k {
    /// The WRITE's completion at SoC 0.
    wc: roce_core::transport::WorkCompletion,
    /// What each SoC's firmware measured of itself during the WRITE.
    d: [roce_hdl_sim::soc::FirmwareStats; 2],
    /// What the sender's firmware did from the post until half the data packets were
    /// on the wire.
    to_half: roce_hdl_sim::soc::FirmwareStats,
    /// Each SoC's port counters (the ABI's), at the end.
    counters: [roce_host::PortCounters; 2],
    /// SoC cycles from the post to the completion.
    cycles: u64,
}

impl Write64k {
    fn per_packet(&self) -> [u64; 2] {
        self.d.each_ref().map(|d| d.busy_instret / PACKETS)
    }

    fn report(&self, what: &str) {
        let per = self.per_packet();
        for ((end, d), per) in ["sender", "receiver"].iter().zip(&self.d).zip(per) {
            eprintln!(
                "budget (SoC, {what}): 1 x RDMA WRITE of 65536 B at MTU 4096: {end}: {} instructions in {} busy polls = {} per data packet ({} cycles per data packet, CPI {:.2}; {} frames sent, {} received by the firmware)",
                d.busy_instret,
                d.busy_polls,
                per,
                d.busy_cycles / PACKETS,
                d.busy_cycles as f64 / d.busy_instret.max(1) as f64,
                d.frames_tx,
                d.frames_rx
            );
        }
        eprintln!(
            "SoC ({what}): post to completion {} cycles = {:.1} us, {:.3} Gb/s",
            self.cycles,
            self.cycles as f64 * 1e6 / CLOCK_HZ as f64,
            65536.0 * 8.0 * CLOCK_HZ as f64 / self.cycles as f64 / 1e9
        );
    }
}

/// One 64 KiB RDMA WRITE at path MTU 4096 (16 data packets) from SoC 0 to SoC 1, the
/// SoCs' fast path on or off; checks the data that landed.
fn write_64k(image: &std::path::Path, fastpath: bool) -> Write64k {
    const LEN: usize = 65536;
    let opts = ConnectOptions {
        mtu: roce_core::transport::Mtu::Mtu4096,
        timeout: 14,
        ..ConnectOptions::default()
    };
    let mut p = soc_pair::pair_on(image, 0.0, &opts, fastpath);
    let data: Vec<u8> = (0..LEN).map(|i| (i * 7 + i / 4096) as u8).collect();
    p.mr[0].write(0, &data).unwrap();
    // The set-up's last polls settle first.
    for _ in 0..20 {
        p.wire.step(2_000);
    }
    let before = p.wire.nics.each_ref().map(|n| n.firmware_stats());
    let start = p.wire.nics[0].cycles();
    let wr = SendWr::new(
        7,
        WrOp::RdmaWrite {
            remote_addr: p.mr[1].addr(),
            rkey: p.mr[1].rkey(),
        },
    )
    .sge(p.mr[0].addr(), LEN as u32, p.mr[0].lkey())
    .flags(SendFlags::SIGNALED);
    p.qp[0].post_send(&wr).unwrap();
    let carried = p.wire.carried;
    let mut steps = 0;
    while p.wire.carried < carried + PACKETS / 2 {
        assert!(steps < 1_000_000, "the data packets did not leave SoC 0");
        p.wire.step(100);
        steps += 1;
    }
    let to_half = p.wire.nics[0].firmware_stats().since(&before[0]);
    let wc = p.wire.completions(&p.cq[0], 1, 200_000_000);
    assert_eq!((wc[0].wr_id, wc[0].status), (7, WcStatus::Success));
    let cycles = p.wire.nics[0].cycles() - start;
    let s = p.wire.nics.each_ref().map(|n| n.firmware_stats());
    let d = [s[0].since(&before[0]), s[1].since(&before[1])];
    let mut got = vec![0; LEN];
    p.mr[1].read(0, &mut got).unwrap();
    assert!(got == data, "the WRITE's data differ at SoC 1");
    let counters = p._ctx.each_ref().map(|c| c.query_counters().unwrap());
    Write64k {
        wc: wc[0],
        d,
        to_half,
        counters,
        cycles,
    }
}

/// The SoC's firmware per data packet with its fast path: the sender's measured 49
/// (2026-12-03, BENCHMARKS.md "The WQE fetch hears the host in the SoC": one poll, the
/// completion's news; the doorbell reaches the WQE fetch without the firmware) with
/// ~15 % margin, as the firmware-only bounds (issue 14 asks at most 100). The
/// receiver's firmware does nothing: its bound is issue 14's 100.
const SOC_FP_SENDER_BUDGET: u64 = 57;
const SOC_FP_RECEIVER_BUDGET: u64 = 100;

/// What the SoC's firmware reaches per data packet (see the test above: sender 86,149,
/// receiver 57,179 on 2026-12-02, BENCHMARKS.md "The NIC SoC"), with ~15 % margin.
const SOC_SENDER_BUDGET: u64 = 99_000;
const SOC_RECEIVER_BUDGET: u64 = 66_000;

#[test]
fn rc_between_two_socs_with_one_percent_loss() {
    let Some(image) = test_image() else { return };
    // ACK timeout 4.096 us x 2^9 = 2.1 ms: 210,000 cycles of the SoC.
    let mut p = pair(&image, 0.01, 9);
    for _ in 0..3 {
        rc_ops(&mut p, 8192, 200_000_000);
    }
    assert!(
        p.wire.dropped > 0,
        "this seed drops frames ({} carried)",
        p.wire.carried
    );
    eprintln!(
        "{} frames carried, {} dropped",
        p.wire.carried, p.wire.dropped
    );
}

/// A host doorbell is heard whatever cycle of the firmware's poll it lands in. The
/// firmware learns that the host rang from one pending bit (`soc_host_regs`'
/// `db_pending`), which its read of the datapath block's DOORBELL register clears: a
/// doorbell written in the very cycle of that read must stay pending for the next poll
/// (the clear once came a cycle after the read and took it: the WQEs behind it waited
/// for another doorbell, for ever if none came). A WRITE posted at each cycle of an idle
/// poll in turn (its period measured on the firmware's idle count, read one cycle at a
/// time) leaves SoC 0, every one.
#[test]
fn a_doorbell_in_any_cycle_of_the_firmwares_poll_is_heard() {
    let Some(image) = test_image() else { return };
    let mut p = pair(&image, 0.0, 14);
    for _ in 0..20 {
        p.wire.step(2_000);
    }
    let period = (0..4)
        .map(|_| next_idle_poll(&p.wire.nics[0]))
        .max()
        .unwrap();
    let mut buf = vec![0u8; 9000];
    let mut held = Vec::new();
    for k in 0..period {
        let n = p.wire.nics[0].clone();
        next_idle_poll(&n);
        n.run(k);
        // One signaled WRITE in 32: the others complete with it.
        let last = k % 32 == 31 || k + 1 == period;
        let flags = if last {
            SendFlags::SIGNALED
        } else {
            SendFlags::NONE
        };
        let wr = SendWr::new(
            k,
            WrOp::RdmaWrite {
                remote_addr: p.mr[1].addr(),
                rkey: p.mr[1].rkey(),
            },
        )
        .sge(p.mr[0].addr(), 8, p.mr[0].lkey())
        .flags(flags);
        p.qp[0].post_send(&wr).unwrap();
        // SoC 0 alone runs until the WRITE is on its wire.
        let mut waited = 0;
        let len = loop {
            if let Some(len) = n.transmit_frame(&mut buf) {
                break len;
            }
            assert!(
                waited < 200_000,
                "the doorbell rung {k} cycles after an idle poll (of {period}) was lost: no WRITE left SoC 0 in {waited} cycles"
            );
            n.run(100);
            waited += 100;
        };
        held.push(buf[..len].to_vec());
        if last {
            for f in held.drain(..) {
                p.wire.nics[1].receive_frame(&f);
            }
            let wc = p.wire.completions(&p.cq[0], 1, 2_000_000);
            assert_eq!((wc[0].wr_id, wc[0].status), (k, WcStatus::Success));
        }
    }
}

/// Runs `nic` a cycle at a time (reading its firmware's idle count) until the count
/// moves: the cycle after an idle poll ended. Returns the cycles it took.
fn next_idle_poll(nic: &SocNic) -> u64 {
    use roce_hdl_sim::soc::stat_reg;
    use roce_host::Device as _;
    let count = nic.read_reg(stat_reg::IDLE_POLLS);
    let mut cycles = 1;
    while nic.read_reg(stat_reg::IDLE_POLLS) == count {
        cycles += 1;
        assert!(cycles < 1_000_000, "the firmware was not idle");
    }
    cycles
}

/// A data packet lost on the SoCs' fast path: nothing answers it, so only the sender's
/// local ACK timer brings it back. Its send queue is the WQE fetch's (`fp_sqf`), which
/// keeps the SoC's time and stops a queue whose deadline passed (the SoC's firmware
/// reads no deadline while the fetch holds the queue): the firmware takes the queue
/// back with that deadline, the engine's timer fires and the packet goes again.
#[test]
fn a_lost_packet_on_the_socs_fast_path_goes_again_at_its_deadline() {
    let Some(image) = test_image() else { return };
    const LEN: usize = 4096;
    // ACK timeout 4.096 us x 2^9 = 2.1 ms: 210,000 cycles of the SoC.
    let opts = ConnectOptions {
        mtu: Mtu::Mtu4096,
        timeout: 9,
        ..ConnectOptions::default()
    };
    let mut p = soc_pair::pair_on(&image, 0.0, &opts, true);
    let data: Vec<u8> = (0..LEN).map(|i| (i * 13 + 5) as u8).collect();
    p.mr[0].write(0, &data).unwrap();
    for _ in 0..20 {
        p.wire.step(2_000);
    }
    // the WRITE's only data packet
    p.wire.drop_next[0] = 1;
    let wr = SendWr::new(
        9,
        WrOp::RdmaWrite {
            remote_addr: p.mr[1].addr(),
            rkey: p.mr[1].rkey(),
        },
    )
    .sge(p.mr[0].addr(), LEN as u32, p.mr[0].lkey())
    .flags(SendFlags::SIGNALED);
    p.qp[0].post_send(&wr).unwrap();
    let wc = p.wire.completions(&p.cq[0], 1, 2_000_000);
    assert_eq!((wc[0].wr_id, wc[0].status), (9, WcStatus::Success));
    assert_eq!(p.wire.dropped, 1, "the data packet was lost once");
    let mut got = vec![0; LEN];
    p.mr[1].read(0, &mut got).unwrap();
    assert!(got == data, "the WRITE's data differ at SoC 1");
    let c = p._ctx[0].query_counters().unwrap();
    let fp = c.runtime.fastpath;
    assert!(
        fp.tx_frames >= 2 && fp.tx_resent + c.engine.retransmitted_pkts >= 1,
        "the packet went twice, the second time resent: {fp:?}, the engine's resent {}",
        c.engine.retransmitted_pkts
    );
}

/// The RC mix (SEND, WRITE, READ, both atomics; data and completions checked on both
/// sides) between two SoCs with their fast path on: the segmenter sends the requests,
/// the receive side places the SEND and WRITE and takes the READ responses and ACKs,
/// the responder's answers the READ and executes the atomics (an `ATOMIC` event each,
/// since rtlatom; exceptions before), and their ATOMIC ACKNOWLEDGEs are the requester's
/// hardware's (its firmware handles no exception at all: two a round before,
/// `docs/fastpath.md` §3.6).
/// Then the same with 1 % of the frames lost (exceptions, FLUSH and REPLAY
/// descriptors: Go-Back-N through the fast path).
///
/// Without loss the mix runs at several timings (the cycles between looks at the wire,
/// and SoC 1 run ahead of SoC 0): whatever the interleaving of the hardware with the
/// two firmwares, nothing is sent twice and every WR completes once. While the
/// responder's firmware handled the SEND's first packet, its last packet waited as a
/// `held` exception; a context released after the first one let the READ behind it be
/// judged out of sequence (a NAK, four resends), and at the requester a response taken
/// on such a released context completed WR 2 twice (`docs/fastpath.md` §3.2, `held`).
#[test]
fn rc_mix_on_the_socs_fast_path() {
    let Some(image) = test_image() else { return };
    let opts = |timeout| ConnectOptions {
        timeout,
        ..ConnectOptions::default()
    };
    let mut p = soc_pair::pair_on(&image, 0.0, &opts(14), true);
    for (step, ahead) in [(2_000, 0), (1_500, 700), (2_600, 1_300), (3_100, 2_900)] {
        p.wire.step_cycles = step;
        p.wire.nics[1].run(ahead);
        rc_ops(&mut p, 3000, 20_000_000);
        let c = p._ctx.each_ref().map(|c| c.query_counters().unwrap());
        let fp = c.each_ref().map(|c| c.runtime.fastpath);
        eprintln!(
            "fast path, no loss, {step} cycles a step, SoC 1 {ahead} ahead: requester {:?} ({} descriptors, {} events the firmware's), responder {:?}",
            fp[0], c[0].runtime.fp_descriptors, c[0].runtime.fp_events, fp[1]
        );
        assert!(
            fp[0].tx_frames > 0 && fp[1].rx_handled > 0 && fp[1].rx_exceptions > 0,
            "the fast path carried the mix and handed the rest on: {fp:?}"
        );
        assert_eq!(
            (
                fp[0].tx_resent + c[0].engine.retransmitted_pkts,
                c[1].runtime.fp_rx_out_of_seq + c[1].engine.out_of_seq_request
            ),
            (0, 0),
            "no loss: nothing out of sequence at the responder, nothing resent ({step} cycles a step, SoC 1 {ahead} ahead)"
        );
        assert_eq!(
            fp[0].rx_exceptions, 0,
            "no loss: the requester's hardware took every response, the ATOMIC ACKNOWLEDGEs too ({step} cycles a step, SoC 1 {ahead} ahead)"
        );
        // The WQE fetch (fp_sqf) takes the READ and the atomics too: the requester's
        // firmware posts no descriptor of the mix (one per READ or atomic and per WQE
        // after them when the fetch stopped at those).
        assert_eq!(
            c[0].runtime.fp_descriptors, 0,
            "no loss: the requester's WQE fetch took every WQE ({step} cycles a step, SoC 1 {ahead} ahead)"
        );
    }
    let mut p = soc_pair::pair_on(&image, 0.01, &opts(9), true);
    for _ in 0..3 {
        rc_ops(&mut p, 8192, 200_000_000);
    }
    assert!(p.wire.dropped > 0, "this seed drops frames");
    let c = p._ctx.each_ref().map(|c| c.query_counters().unwrap());
    eprintln!(
        "fast path, 1 % loss: {} frames carried, {} dropped; requester {:?} (resent {}), responder {:?}",
        p.wire.carried,
        p.wire.dropped,
        c[0].runtime.fastpath,
        c[0].engine.retransmitted_pkts,
        c[1].runtime.fastpath
    );
}

/// Issue 14's "any single packet the firmware handles: at most 500" on the SoC: the
/// largest busy poll of each SoC's firmware (`minstret` around `Nic::poll`, as the
/// image measures every poll; `stat_reg::MAX_POLL_INSTRET`, reset by each command),
/// and what it handled, per kind of request of [`rc_ops`]'s mix, each posted alone
/// (3,000 bytes at MTU 1024: the WRITE and the READ 3 packets, the SEND 2), lossless:
/// on the firmware alone (the engine: the reference) and with the fast path. The
/// completions and the bytes are the same ([`rc_mix::check`]); the largest poll lies
/// between the phase's mean busy poll and its sum (the other counters' truth); with
/// the fast path each kind's largest is held to what it measured with a margin
/// ([`SOC_FP_LARGEST_POLL`]: issue 14's 500 or less, every kind).
#[test]
fn the_largest_poll_per_kind_on_the_socs_fast_path() {
    let Some(image) = test_image() else { return };
    let alone = largest_polls(&image, false);
    let fast = largest_polls(&image, true);
    alone.report("firmware only");
    fast.report("fast path");
    assert_eq!(fast.wc, alone.wc, "the completions differ");
    for run in [&alone, &fast] {
        for (kind, ends) in KINDS.iter().zip(&run.largest) {
            for (end, (l, d)) in ends.iter().enumerate() {
                assert!(
                    u64::from(l.instret) <= d.busy_instret
                        && u64::from(l.instret) * u64::from(d.busy_polls) >= d.busy_instret,
                    "{kind}, SoC {end}: the largest poll {l:?} against the phase's busy polls {d:?}"
                );
            }
        }
    }
    for (kind, (ends, budget)) in KINDS
        .iter()
        .zip(fast.largest.iter().zip(SOC_FP_LARGEST_POLL))
    {
        let got = ends.each_ref().map(|(l, _)| l.instret);
        assert!(
            got[0] <= budget[0] && got[1] <= budget[1],
            "{kind}: the SoC's largest poll with the fast path regressed: requester {}, responder {} (bounds {budget:?})",
            got[0],
            got[1]
        );
    }
}

/// The kinds of [`rc_mix::wrs`], in its order.
const KINDS: [&str; 5] = ["WRITE", "SEND", "READ", "FETCH_AND_ADD", "CMP_AND_SWP"];

/// The largest busy poll per kind ([`KINDS`]) with the fast path, requester and
/// responder, instructions: what was measured (BENCHMARKS.md "The largest poll on the
/// SoC", after the frame buffers' whole-word copies; the atomics' "Atomics in RTL";
/// the requester, READ and atomics "The SoC's largest polls under 500"; the SEND's
/// responder "A SEND behind a WRITE on the SoC (rctx)"; the responders' latest "The
/// SEND responder under 500 (send500)") with ~10 % margin (~7 % for the SEND's
/// responder, whose bound is issue 14's 500), none over issue 14's 500; the
/// WRITE's responder does not poll (its bound is issue 14's 100 per data packet).
/// (With the copies a word's slice at a time the SEND's responder took 34,142, an
/// atomic's 8,440; an atomic as an exception, before the RTL executed it, 6,873, then
/// 985: its `ATOMIC` event. Before socpoll, the requester 913, the READ's responder
/// 1,021 and an atomic's 987: the news and counters read twice a poll, the event's
/// reserved half copied, the READ/ATOMIC record's descriptor scan; before polls 576,
/// 597 and 569: the news word and the fetch's counts read through the table port, the
/// event copied and decoded a byte at a time, the poll's look for an event and for a
/// new MR table with their register saves. Before rctx the SEND's responder took
/// 18,721: the WRITE before it on the QP unloaded the receive buffer loaded ahead, and
/// the SEND's two packets were exceptions whose frames the firmware copied; then its
/// one `MSG_DONE`, 2,392, until msgdone cut that event's CQE path (the CQE writer's
/// producer index read alone, no completion copied with the CQ's state): 1,708 (2,236 after polls),
/// until cqeport made `soc_fp` hold the bus for a table-port word instead of the firmware
/// polling `STATUS` before each: 1,379; until rxcqe had the CQE writer write the
/// `MSG_DONE`'s receive CQE (the load carries the WQE's `wr_id`) and the engine's
/// completion look the QP up once: 588, BENCHMARKS.md "The hardware writes the receive
/// CQE (rxcqe)"; 582 after rdlimit; until sendpoll inlined `fp_load` into it: 550,
/// BENCHMARKS.md "The SEND responder's receive load inlined (sendpoll)"; until send500
/// read the event without register saves and looked the QP's home slot and line up
/// in the `MSG_DONE`'s own code: 467 (the READ's responder 437 -> 397, the atomics'
/// 407 -> 367), BENCHMARKS.md "The SEND responder under 500 (send500)". Its bound is
/// now issue 14's 500, ~7 % over 467. The requester, a send doorbell's poll, took 367
/// until newspoll left out the call of a doorbell the SoC's fetch heard itself and the
/// GSI QP's look of a NIC without one: 326, BENCHMARKS.md "A doorbell and the fetch's
/// news in one poll (newspoll)".)
const SOC_FP_LARGEST_POLL: [[u32; 2]; 5] =
    [[360, 100], [360, 500], [360, 440], [360, 405], [360, 405]];

/// What [`largest_polls`] saw.
struct LargestPolls {
    /// Per kind, per SoC: the largest busy poll and the phase's busy polls.
    largest: Vec<
        [(
            roce_hdl_sim::soc::LargestPoll,
            roce_hdl_sim::soc::FirmwareStats,
        ); 2],
    >,
    /// The completions, SoC 0's then SoC 1's.
    wc: Vec<(u64, WcStatus, WcOpcode, u32)>,
}

impl LargestPolls {
    fn report(&self, what: &str) {
        for (kind, ends) in KINDS.iter().zip(&self.largest) {
            for (end, (l, d)) in ["requester", "responder"].iter().zip(ends) {
                let w = l.work;
                eprintln!(
                    "largest poll (SoC, {what}): {kind}: {end}: {} instructions, {} cycles (CPI {:.2}); it handled {} frames sent, {} received, {} fast-path events, {} descriptors, {} send WQEs, {} receive WQEs, {} CQEs; the phase: {} instructions in {} busy polls",
                    l.instret,
                    l.cycles,
                    f64::from(l.cycles) / f64::from(l.instret.max(1)),
                    w.frames_tx(),
                    w.frames_rx(),
                    w.fp_events(),
                    w.fp_descriptors(),
                    w.send_wqes(),
                    w.recv_wqes(),
                    w.cqes(),
                    d.busy_instret,
                    d.busy_polls
                );
            }
        }
    }
}

/// [`rc_ops`]'s mix, one request at a time from SoC 0 to SoC 1 (the receive posted
/// before), the SoCs' fast path on or off: each SoC's largest busy poll per request,
/// from its post to its completion and the last ACK's arrival. A QUERY_COUNTERS to each
/// SoC before each request starts the measure anew.
fn largest_polls(image: &std::path::Path, fastpath: bool) -> LargestPolls {
    const LEN: usize = 3000;
    let opts = ConnectOptions {
        timeout: 14,
        ..ConnectOptions::default()
    };
    let mut p = soc_pair::pair_on(image, 0.0, &opts, fastpath);
    let (a, b) = (&p.mr[0], &p.mr[1]);
    let data = rc_mix::prepare(&p.qp[1], a, b, LEN);
    let settle = |w: &mut Wire| {
        for _ in 0..20 {
            w.step(2_000);
        }
    };
    settle(&mut p.wire);
    let (mut largest, mut sent) = (Vec::new(), Vec::new());
    for wr in rc_mix::wrs(a, b, LEN) {
        for ctx in &p._ctx {
            ctx.query_counters().unwrap();
        }
        let before = p.wire.nics.each_ref().map(|n| n.firmware_stats());
        p.qp[0].post_send(&wr).unwrap();
        sent.extend(p.wire.completions(&p.cq[0], 1, 20_000_000));
        settle(&mut p.wire);
        largest.push([0, 1].map(|i| {
            let n = &p.wire.nics[i];
            (n.largest_poll(), n.firmware_stats().since(&before[i]))
        }));
    }
    let received = p.wire.completions(&p.cq[1], 1, 20_000_000);
    rc_mix::check("two SoCs, one by one", a, b, &data, &sent, &received);
    let wc = sent
        .iter()
        .chain(&received)
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len))
        .collect();
    LargestPolls { largest, wc }
}

/// An RNR NAK of a send queue the SoC's WQE fetch holds is the hardware's
/// (`docs/fastpath.md` §3.8, "An RNR NAK"): SoC 1 has no receive WQE when each round's
/// SENDs arrive, so it answers the first with an RNR NAK (`min_rnr_timer` 0.64 ms); the
/// test posts the receive WQEs as soon as that NAK is on the wire, and SoC 0 sends again
/// when the wait is over. Run on the firmware alone (the engine: the reference) and with
/// the fast path: SoC 0's frames (BTH to payload, in order), the completions on both
/// sides, the bytes landed and the RNR NAKs counted (`rcvd_rnr_err`, the hardware's
/// reported through `SqNews::rnr_naks`) are the same, and with the fast path no RNR NAK
/// reached SoC 0's firmware: the hand-over gives the fetch its `rnr_retry`, without
/// which each is an `EXC_NAK_IN` exception (the test fails so). At SoC 1 the RNR NAKs
/// and the SENDs sent again are its hardware's too (`docs/fastpath.md` §3.4 "Receiver
/// not ready", §6 "In the SoC"): its firmware sees no frame of the measured rounds.
#[test]
fn an_rnr_nak_on_the_socs_fast_path_is_the_hardwares() {
    let Some(image) = test_image() else { return };
    let alone = rnr_run(&image, false);
    let fast = rnr_run(&image, true);
    alone.report("firmware only");
    fast.report("fast path");
    assert_eq!(fast.wc, alone.wc, "the completions differ");
    assert!(fast.landed == alone.landed, "the SENDs' bytes differ");
    same_frames(&fast.frames, &alone.frames, "SoC 0");
    assert_eq!(
        (fast.rnr_naks, fast.rcvd_rnr_err),
        (alone.rnr_naks, alone.rnr_naks),
        "the RNR NAKs on the wire, and as SoC 0 counted them"
    );
    assert_eq!(alone.rcvd_rnr_err, alone.rnr_naks, "the engine's count");
    assert_eq!(
        (fast.timeouts, alone.timeouts),
        ((0, 0), (0, 0)),
        "no local ACK timeout: SoC 0 resent at the RNR waits' ends (the last one's from the take-back)"
    );
    assert!(
        fast.fp.sent > 0 && fast.fp.taken > 0,
        "SoC 0's fast path sent the SENDs and took the answers: {:?}",
        fast.fp
    );
    assert_eq!(
        (fast.fp.exceptions, fast.fw.frames_rx),
        (0, 0),
        "no RNR NAK (no frame) reached SoC 0's firmware: {:?}",
        fast.fp
    );
    // The responder's side: SoC 1's hardware RNR NAKs each round's first SEND (its
    // `rq_empty`, set by the firmware after the last MSG_DONE found the queue empty,
    // masked by `soc_fp` from a receive doorbell until the firmware has fetched) and
    // places the SEND sent again (loaded at the RNR event when the receive post came
    // while it waited). With the SoC's `rq_empty` never set (main before this test:
    // `MmioFastPath::rnr_responder` false) each was an exception and the firmware's
    // RNR NAK: (5, 4), measured; the firmware alone (8, 7).
    assert!(
        fast.responder.0 <= 1 && fast.responder.1 <= 1,
        "SoC 1's firmware received and sent {:?} frames over rounds 1 to {RNR_MEASURED}: at most the third round's second SEND, which may come before its WQE is loaded (one buffer ahead)",
        fast.responder
    );
}

/// The rounds of [`rnr_run`]: each round's SEND sizes (posted together), a packet each
/// at MTU 1024. (A SEND of several packets is cut by the RNR NAK where the timing puts
/// it: the firmware alone sent two of three before it came, the fast path three.) In
/// the last round the host queries SoC 0's QP in the RNR wait, which takes the send
/// queue back from the fetch there: the engine must wait out what is left of it
/// (`SqSpent::rnr_at`, read from `SQ_R_FLAGS` bit 9 and the deadline).
const RNR_ROUNDS: [&[usize]; 4] = [&[100], &[1_024], &[64, 200], &[300]];

/// The rounds of [`RNR_ROUNDS`] SoC 0's firmware is measured over (without the query).
const RNR_MEASURED: usize = 3;

/// What [`rnr_run`] saw.
struct RnrRun {
    /// SoC 0's frames in the order they left, BTH to the payload's end.
    frames: Vec<Vec<u8>>,
    /// The completions at SoC 0, then at SoC 1.
    wc: Vec<(u64, WcStatus, WcOpcode, u32)>,
    /// The bytes the SENDs brought to SoC 1.
    landed: Vec<u8>,
    /// RNR NAKs SoC 1 sent.
    rnr_naks: u64,
    /// RNR NAKs SoC 0 counted.
    rcvd_rnr_err: u64,
    /// SoC 0's local ACK timeouts and retries (`local_ack_timeout_err`,
    /// `completer_retry_err`): none, had an RNR wait been cut short or drawn out into one.
    timeouts: (u64, u64),
    /// SoC 0's firmware over the first [`RNR_MEASURED`] rounds.
    fw: roce_hdl_sim::soc::FirmwareStats,
    /// SoC 0's fast path over the rounds.
    fp: FpDelta,
    /// Frames SoC 1's firmware received and sent over the first [`RNR_MEASURED`] rounds.
    responder: (u64, u64),
    /// SoC 1's fast path over the rounds.
    responder_fp: FpDelta,
}

impl RnrRun {
    fn report(&self, what: &str) {
        eprintln!(
            "RNR NAKs (SoC, {what}): {} RNR NAKs, {} frames from SoC 0, its ACK timeouts and retries {:?}; SoC 0's firmware over rounds 1 to {RNR_MEASURED} {} instructions in {} busy polls ({} frames received), fast path {:?}",
            self.rnr_naks,
            self.frames.len(),
            self.timeouts,
            self.fw.busy_instret,
            self.fw.busy_polls,
            self.fw.frames_rx,
            self.fp
        );
        eprintln!(
            "RNR NAKs (SoC, {what}): SoC 1's firmware over rounds 1 to {RNR_MEASURED} received and sent {:?} frames; SoC 1's fast path over all rounds {:?}",
            self.responder, self.responder_fp
        );
    }
}

/// SoC 0 SENDs [`RNR_ROUNDS`] to SoC 1, whose receive WQEs are posted only once its RNR
/// NAK of the round's first SEND is on the wire; the SoCs' fast path on or off.
fn rnr_run(image: &std::path::Path, fastpath: bool) -> RnrRun {
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 31 + i / 253) as u8).collect();
    let mut p = filled_pair(image, fastpath, 0, &data);
    let (a, b) = (&p.mr[0], &p.mr[1]);
    let before = p.wire.nics[0].firmware_stats();
    let c0 = p._ctx[0].query_counters().unwrap();
    let r0 = p._ctx[1].query_counters().unwrap().runtime;
    let mut responder = (0, 0);
    p.wire.record = true;
    let (mut wc, mut at, mut id) = (Vec::new(), 0, 0u64);
    let mut fw = None;
    for (round, sizes) in RNR_ROUNDS.iter().enumerate() {
        // SoC 1's firmware finishes with the last round (its last MSG_DONE, where it
        // finds the receive queue empty and sets `rq_empty`) before the next SENDs
        // come; else the first may find the flag not yet set, an exception whose RNR
        // NAK is the engine's (as with the firmware alone).
        for _ in 0..10 {
            p.wire.step(2_000);
        }
        if round == RNR_MEASURED {
            fw = Some(p.wire.nics[0].firmware_stats().since(&before));
            let r = p._ctx[1].query_counters().unwrap().runtime;
            responder = (r.frames_rx - r0.frames_rx, r.frames_tx - r0.frames_tx);
        }
        let first = id;
        let wrs: Vec<_> = sizes
            .iter()
            .scan(at, |at, &len| {
                let wr = SendWr::new(id, WrOp::Send)
                    .sge(a.addr() + *at as u64, len as u32, a.lkey())
                    .flags(SendFlags::SIGNALED);
                (*at, id) = (*at + len, id + 1);
                Some(wr)
            })
            .collect();
        let naks = rnr_naks(&p.wire.sent[1]);
        p.qp[0].post_send_list(&wrs).unwrap();
        let mut cycles = 0;
        while rnr_naks(&p.wire.sent[1]) == naks {
            p.wire.step(500);
            cycles += 500;
            assert!(cycles < 5_000_000, "no RNR NAK from SoC 1");
        }
        if round == RNR_MEASURED {
            p.qp[0].query().unwrap();
        }
        for (i, &len) in sizes.iter().enumerate() {
            p.qp[1]
                .post_recv(&RecvWr::new(first + i as u64).sge(
                    b.addr() + at as u64,
                    len as u32,
                    b.lkey(),
                ))
                .unwrap();
            at += len;
        }
        for cq in &p.cq {
            wc.extend(
                p.wire
                    .completions(cq, sizes.len(), 20_000_000)
                    .iter()
                    .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len)),
            );
        }
    }
    for _ in 0..10 {
        p.wire.step(2_000);
    }
    let c = p._ctx[0].query_counters().unwrap();
    let r = p._ctx[1].query_counters().unwrap().runtime;
    let (f0, f1) = (c0.runtime.fastpath, c.runtime.fastpath);
    let mut landed = vec![0u8; at];
    b.read(0, &mut landed).unwrap();
    assert!(landed == data[..at], "the SENDs brought other bytes");
    RnrRun {
        frames: bth_to_payload(&p.wire.sent[0]),
        wc,
        landed,
        rnr_naks: rnr_naks(&p.wire.sent[1]) as u64,
        rcvd_rnr_err: c.engine.rcvd_rnr_err - c0.engine.rcvd_rnr_err,
        timeouts: (
            c.engine.local_ack_timeout_err - c0.engine.local_ack_timeout_err,
            c.engine.completer_retry_err - c0.engine.completer_retry_err,
        ),
        fw: fw.unwrap(),
        fp: FpDelta::since(&f0, &f1),
        responder,
        responder_fp: FpDelta::since(&r0.fastpath, &r.fastpath),
    }
}

/// SENDs on the SoC are the hardware's (`docs/fastpath.md` §6 "In the SoC", "The
/// receive load"): SoC 1's firmware loads its head receive WQE into the receive context
/// ahead of the SEND through `fp_rx`'s receive-load command (table 1 words 20..23,
/// applied between two frames' checks), so its fast path places a SEND's first packet
/// too and the firmware hears only the `MSG_DONE`. Then two SENDs to SoC 1's empty
/// receive queue: RNR NAKed by its hardware (`rq_empty`, §3.4 "Receiver not ready";
/// before, by its firmware: the SoC set no `rq_empty`), and placed by it when sent
/// again (the WQE posted meanwhile loaded at the receive post or the `RNR` event). Run on
/// the firmware alone (the engine: the reference) and with the fast path: the frames
/// on the wire both ways (BTH to payload, in order), the completions on both sides,
/// the bytes landed and the RNR NAK counts are the same; with the fast path no SEND of
/// the first round reached SoC 1's firmware and it sent no frame for them. On main
/// `MmioFastPath` loaded nothing (`recv_loads` false): every SEND's first packet was an
/// exception (reason 9) and the packets behind it too (10, `held`), and the test fails
/// there (frames received and sent by SoC 1's firmware over the first round `(9, 6)`
/// where it wants `(0, 0)`).
#[test]
fn sends_on_the_socs_fast_path_are_the_hardwares() {
    let Some(image) = test_image() else { return };
    let alone = send_run(&image, false);
    let fast = send_run(&image, true);
    alone.report("firmware only");
    fast.report("fast path");
    assert_eq!(fast.wc, alone.wc, "the completions differ");
    assert!(fast.landed == alone.landed, "the SENDs' bytes differ");
    for side in 0..2 {
        same_frames(
            &fast.frames[side],
            &alone.frames[side],
            &format!("SoC {side}"),
        );
    }
    assert_eq!(
        fast.rnr, alone.rnr,
        "the RNR NAKs on the wire, as SoC 1 and SoC 0 counted them"
    );
    assert_eq!(
        alone.rnr,
        (
            SEND_RNR.len() as u64,
            SEND_RNR.len() as u64,
            SEND_RNR.len() as u64
        )
    );
    // The SENDs into WQEs loaded ahead: none reached SoC 1's firmware, whose hardware
    // placed them and sent their ACKs (the firmware heard their MSG_DONEs).
    assert_eq!(
        (fast.fw_loaded.frames_rx, fast.fw_loaded.frames_tx),
        (0, 0),
        "the SENDs into loaded WQEs reached SoC 1's firmware, or it sent frames for them"
    );
    // The RNR rounds too: SoC 1's hardware sent the RNR NAKs and placed the SENDs sent
    // again (main: SoC 1's firmware received and sent 3 and 2 frames over the run).
    assert_eq!(
        (fast.fw.frames_rx, fast.fw.frames_tx),
        (0, 0),
        "SoC 1's firmware received or sent frames over the run"
    );
    let packets = |l: &[usize]| l.iter().map(|&l| l.div_ceil(1024) as u64).sum::<u64>();
    assert!(
        fast.fp.taken >= packets(&SEND_LOADED),
        "SoC 1's fast path placed the SENDs: {:?}",
        fast.fp
    );
}

/// The SENDs of [`send_run`]'s first round (the receive WQEs all posted before), at
/// MTU 1024.
const SEND_LOADED: [usize; 6] = [1, 100, 1_024, 1_025, 3_000, 64];

/// Its later rounds: a SEND each, to an empty receive queue (the WQE posted once the
/// RNR NAK is on the wire).
const SEND_RNR: [usize; 2] = [200, 2_000];

/// What [`send_run`] saw.
struct SendRun {
    /// Each SoC's frames in the order they left, BTH to the payload's end.
    frames: [Vec<Vec<u8>>; 2],
    /// The completions at SoC 0, then at SoC 1, round by round.
    wc: Vec<(u64, WcStatus, WcOpcode, u32)>,
    /// SoC 1's region after the SENDs.
    landed: Vec<u8>,
    /// RNR NAKs on the wire, SoC 1's count of those it sent (`send_rnr_err`), SoC 0's
    /// of those it got (`rcvd_rnr_err`).
    rnr: (u64, u64, u64),
    /// SoC 1's firmware over the whole run.
    fw: roce_hdl_sim::soc::FirmwareStats,
    /// SoC 1's firmware over the first round ([`SEND_LOADED`]).
    fw_loaded: roce_hdl_sim::soc::FirmwareStats,
    /// SoC 1's fast path over the whole run.
    fp: FpDelta,
}

impl SendRun {
    fn report(&self, what: &str) {
        let n = SEND_LOADED.len() as u64;
        eprintln!(
            "SENDs (SoC, {what}): SoC 1's firmware over the {n} SENDs into WQEs posted ahead: {} instructions in {} busy polls ({} per SEND), {} frames received, {} sent; over the whole run (2 more SENDs, RNR NAKed): {} instructions in {} busy polls, {} frames received, {} sent; RNR NAKs {:?}; its fast path {:?}",
            self.fw_loaded.busy_instret,
            self.fw_loaded.busy_polls,
            self.fw_loaded.busy_instret / n,
            self.fw_loaded.frames_rx,
            self.fw_loaded.frames_tx,
            self.fw.busy_instret,
            self.fw.busy_polls,
            self.fw.frames_rx,
            self.fw.frames_tx,
            self.rnr,
            self.fp
        );
    }
}

/// SoC 0 SENDs [`SEND_LOADED`] to SoC 1, which posted a receive WQE for each first
/// (16 bytes longer than the SEND), then [`SEND_RNR`] to SoC 1's empty receive queue,
/// the WQE posted once SoC 1's RNR NAK is on the wire; one SEND at a time (each posted
/// once the one before completed at both ends); the SoCs' fast path on or off.
fn send_run(image: &std::path::Path, fastpath: bool) -> SendRun {
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 29 + i / 251) as u8).collect();
    let mut p = filled_pair(image, fastpath, 0, &data);
    let (a, ak) = (p.mr[0].addr(), p.mr[0].lkey());
    let (b, bk) = (p.mr[1].addr(), p.mr[1].lkey());
    let before = p.wire.nics[1].firmware_stats();
    let c0 = p._ctx.each_ref().map(|c| c.query_counters().unwrap());
    p.wire.record = true;
    let (mut wc, mut at, mut id) = (Vec::new(), 0usize, 0u64);
    let mut send = |p: &mut soc_pair::Pair, sizes: &[usize], rnr: bool| {
        let recvs: Vec<_> = sizes
            .iter()
            .scan(at, |at, &len| {
                let r = RecvWr::new(100 + id).sge(b + *at as u64, len as u32 + 16, bk);
                let s = SendWr::new(id, WrOp::Send)
                    .sge(a + *at as u64, len as u32, ak)
                    .flags(SendFlags::SIGNALED);
                (*at, id) = (*at + len + 16, id + 1);
                Some((r, s))
            })
            .collect();
        at += sizes.iter().map(|l| l + 16).sum::<usize>();
        if !rnr {
            for (r, _) in &recvs {
                p.qp[1].post_recv(r).unwrap();
            }
        }
        // (the receive doorbell heard and the head WQE loaded before the SENDs come;
        // for an RNR round, the last MSG_DONE handled: the queue found empty, the
        // `rq_empty` its hardware RNR NAKs with set)
        for _ in 0..10 {
            p.wire.step(2_000);
        }
        // One SEND at a time, each once the one before completed on both sides: the
        // firmware loads the next WQE at the MSG_DONE, one buffer ahead (a SEND that
        // comes before that is the firmware's, as on every fast path).
        for (r, s) in &recvs {
            let naks = rnr_naks(&p.wire.sent[1]);
            p.qp[0].post_send(s).unwrap();
            if rnr {
                let mut cycles = 0;
                while rnr_naks(&p.wire.sent[1]) == naks {
                    p.wire.step(500);
                    cycles += 500;
                    assert!(cycles < 5_000_000, "no RNR NAK from SoC 1");
                }
                p.qp[1].post_recv(r).unwrap();
            }
            for cq in &p.cq {
                wc.extend(
                    p.wire
                        .completions(cq, 1, 20_000_000)
                        .iter()
                        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len)),
                );
            }
        }
    };
    send(&mut p, &SEND_LOADED, false);
    for _ in 0..10 {
        p.wire.step(2_000);
    }
    let fw_loaded = p.wire.nics[1].firmware_stats().since(&before);
    for len in SEND_RNR {
        send(&mut p, &[len], true);
    }
    for _ in 0..10 {
        p.wire.step(2_000);
    }
    let fw = p.wire.nics[1].firmware_stats().since(&before);
    let c = p._ctx.each_ref().map(|c| c.query_counters().unwrap());
    let (f0, f1) = (c0[1].runtime.fastpath, c[1].runtime.fastpath);
    let mut landed = vec![0u8; 65536];
    p.mr[1].read(0, &mut landed).unwrap();
    SendRun {
        frames: p.wire.sent.each_ref().map(|s| bth_to_payload(s)),
        wc,
        landed,
        rnr: (
            rnr_naks(&p.wire.sent[1]) as u64,
            c[1].engine.send_rnr_err - c0[1].engine.send_rnr_err,
            c[0].engine.rcvd_rnr_err - c0[0].engine.rcvd_rnr_err,
        ),
        fw,
        fw_loaded,
        fp: FpDelta::since(&f0, &f1),
    }
}

/// The SoC's READ responder (`docs/fastpath.md` §6, "READ requests in RTL": `fp_rx_check`
/// takes an in-sequence READ request, the segmenter sends its responses, the firmware
/// hears one `READ` event; `MmioFastPath::read_responder`). Six READs from SoC 0 of SoC
/// 1's region at MTU 1024 (1 byte to 16 KiB: ONLY, FIRST/MIDDLE/LAST, PadCnt 1 to 3,
/// across the PSN wrap), on the firmware alone (the engine: the reference) and with the
/// fast path: the same completions, the same bytes landed, and the responder's READ
/// responses the same frames (BTH to payload, in order). With the fast path no READ
/// request reached the responder's firmware and every response came from its segmenter
/// (with `read_responder` false each READ was an exception the firmware answered).
///
/// Then the order behind a READ: a READ, at once a WRITE of other data to the bytes it
/// reads, and a SEND, on the same QP. The fast path takes no packet after a READ until
/// the READ's last response is planned (`docs/fastpath.md` §6, "The order rule the RTL
/// follows"): the READ brings the bytes as they were before the WRITE, as the engine
/// does when it sends the responses before it takes the next packet (the differential
/// tests' reference), and no ACK of the WRITE or SEND goes before a response. (The
/// firmware alone takes every frame waiting before it builds a response, so its READ
/// may see the WRITE: not compared. So does the firmware on the fast path, where each
/// READ is an exception, without `read_responder`: the test fails there.)
#[test]
fn reads_on_the_socs_fast_path_are_the_hardwares() {
    let Some(image) = test_image() else { return };
    let alone = read_mix(&image, false);
    let fast = read_mix(&image, true);
    assert_eq!(fast.wc, alone.wc, "the completions differ");
    assert!(fast.landed == alone.landed, "the READs' bytes differ");
    assert_eq!(
        fast.responses.len(),
        READ_RESPONSES,
        "the responder's READ responses"
    );
    for (i, (f, a)) in fast.responses.iter().zip(&alone.responses).enumerate() {
        assert!(f == a, "READ response {i} differs from the engine's");
    }
    let (fw, fp) = (&fast.fw, &fast.fp);
    assert_eq!(
        (fp.exceptions, fw.frames_rx, fw.frames_tx),
        (0, 0, 0),
        "no READ request reached the responder's firmware, no response left through it: {fp:?}"
    );
    assert_eq!(
        (fp.taken, fp.sent),
        (READ_SIZES.len() as u64, READ_RESPONSES as u64),
        "the responder's fast path took the READ requests and sent every response: {fp:?}"
    );
    assert_eq!(
        alone.fp.sent, 0,
        "without the strap the fast path sends nothing"
    );
}

/// What a SoC's fast path counted over a stretch (its port counters' differences).
#[derive(Debug, PartialEq)]
struct FpDelta {
    /// Frames it took without the firmware (`rx_handled`).
    taken: u64,
    /// Frames it handed to the firmware (`rx_exceptions`).
    exceptions: u64,
    /// Frames its segmenter and ACK path sent (`tx_frames`).
    sent: u64,
}

impl FpDelta {
    /// What the fast path counted from `before` to `after` (its port counters).
    fn since(before: &FastPathCounters, after: &FastPathCounters) -> FpDelta {
        FpDelta {
            taken: after.rx_handled - before.rx_handled,
            exceptions: after.rx_exceptions - before.rx_exceptions,
            sent: after.tx_frames - before.tx_frames,
        }
    }
}

/// Whether frame `f` is an RNR NAK.
fn is_rnr(f: &[u8]) -> bool {
    use roce_core::wire::aeth::Syndrome;
    parse(f)
        .ok()
        .and_then(|pkt| pkt.aeth())
        .is_some_and(|a| matches!(a.syndrome, Syndrome::RnrNak(_)))
}

/// The RNR NAKs among `frames`.
fn rnr_naks(frames: &[Vec<u8>]) -> usize {
    frames.iter().filter(|f| is_rnr(f)).count()
}

/// Each frame of `frames` from its BTH to its payload's end (what one run's frames
/// share with another's: the IPv4 identification is the NIC's).
fn bth_to_payload(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    frames
        .iter()
        .map(|f| {
            let l = parse(f).unwrap().layout();
            f[l.bth..l.icrc].to_vec()
        })
        .collect()
}

/// Asserts that `fast`'s frames (from [`bth_to_payload`]) are `alone`'s: first their
/// opcodes and PSNs (a readable difference), then byte for byte.
fn same_frames(fast: &[Vec<u8>], alone: &[Vec<u8>], what: &str) {
    let names = |r: &[Vec<u8>]| -> Vec<(String, u32)> {
        r.iter()
            .map(|f| {
                let bth = roce_core::wire::bth::Header::new_unchecked(&f[..]);
                (format!("{:?}", bth.opcode()), bth.psn().value())
            })
            .collect()
    };
    assert_eq!(names(fast), names(alone), "{what}'s frames");
    for (i, (f, a)) in fast.iter().zip(alone).enumerate() {
        assert!(f == a, "{what}'s frame {i} differs from the engine's");
    }
}

/// Phase 1 of [`read_mix`]: the READs' sizes, and where they read in SoC 1's region.
const READ_SIZES: [(usize, usize); 6] = [
    (1, 7),
    (1024, 100),
    (1025, 2_000),
    (3_002, 5_003),
    (4_099, 9_000),
    (16_384, 20_000),
];

/// Their responses at MTU 1024.
const READ_RESPONSES: usize = 1 + 1 + 2 + 3 + 5 + 16;

/// What [`read_mix`] saw in its phase 1.
struct ReadMix {
    /// SoC 0's completions of the six READs.
    wc: Vec<(u64, WcStatus, WcOpcode, u32)>,
    /// The bytes the six READs brought to SoC 0, in order.
    landed: Vec<u8>,
    /// SoC 1's READ responses of phase 1 in the order they left, from the BTH to the
    /// payload's end (the IPv4 header's identification is the NIC's, not the READ's).
    responses: Vec<Vec<u8>>,
    /// SoC 1's firmware during phase 1.
    fw: roce_hdl_sim::soc::FirmwareStats,
    /// SoC 1's fast path during phase 1.
    fp: FpDelta,
    /// SoC cycles from the post to the sixth completion.
    cycles: u64,
}

impl ReadMix {
    fn report(&self, what: &str) {
        let reads = READ_SIZES.len() as u64;
        let bytes: usize = READ_SIZES.iter().map(|s| s.0).sum();
        eprintln!(
            "READs (SoC, {what}): {reads} READs of {bytes} B at MTU 1024 ({READ_RESPONSES} responses): responder's firmware {} instructions in {} busy polls = {} per READ ({} cycles per READ; {} frames sent, {} received by the firmware); fast path {:?}; post to last completion {} cycles",
            self.fw.busy_instret,
            self.fw.busy_polls,
            self.fw.busy_instret / reads,
            self.fw.busy_cycles / reads,
            self.fw.frames_tx,
            self.fw.frames_rx,
            self.fp,
            self.cycles
        );
    }
}

/// SoC 0 READs [`READ_SIZES`] from SoC 1 (phase 1, measured), then posts a READ, a WRITE
/// of other data to the bytes it reads and a SEND (phase 2); the SoCs' fast path on or
/// off. Checks every completion and byte, and that SoC 1 sent its responses and ACKs in
/// PSN order (a frame answering a later request never overtook one answering an
/// earlier); with the fast path, that phase 2's READ brought the bytes as they were.
fn read_mix(image: &std::path::Path, fastpath: bool) -> ReadMix {
    let what = if fastpath {
        "fast path"
    } else {
        "firmware only"
    };
    let old: Vec<u8> = (0..65536u32).map(|i| (i * 29 + i / 251) as u8).collect();
    let mut p = filled_pair(image, fastpath, 1, &old);
    let (a, b) = (&p.mr[0], &p.mr[1]);
    // Phase 1: the READs, landing one after the other from a[0].
    let before = p.wire.nics[1].firmware_stats();
    let fp_before = p._ctx[1].query_counters().unwrap().runtime.fastpath;
    p.wire.record = true;
    let mut at = 0;
    let mut wrs = Vec::new();
    for (i, &(len, from)) in READ_SIZES.iter().enumerate() {
        wrs.push(
            SendWr::new(
                i as u64,
                WrOp::RdmaRead {
                    remote_addr: b.addr() + from as u64,
                    rkey: b.rkey(),
                },
            )
            .sge(a.addr() + at as u64, len as u32, a.lkey())
            .flags(SendFlags::SIGNALED),
        );
        at += len;
    }
    let start = p.wire.nics[0].cycles();
    p.qp[0].post_send_list(&wrs).unwrap();
    let wc = p.wire.completions(&p.cq[0], READ_SIZES.len(), 20_000_000);
    let cycles = p.wire.nics[0].cycles() - start;
    for _ in 0..10 {
        p.wire.step(2_000);
    }
    let fw = p.wire.nics[1].firmware_stats().since(&before);
    let fp_after = p._ctx[1].query_counters().unwrap().runtime.fastpath;
    let fp = FpDelta::since(&fp_before, &fp_after);
    let wc: Vec<_> = wc
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len))
        .collect();
    let mut landed = vec![0u8; at];
    a.read(0, &mut landed).unwrap();
    let mut want = Vec::new();
    for &(len, from) in &READ_SIZES {
        want.extend_from_slice(&old[from..from + len]);
    }
    assert!(landed == want, "the READs brought other bytes");
    let sent = std::mem::take(&mut p.wire.sent[1]);
    in_psn_order(&sent, "phase 1");
    let responses: Vec<Vec<u8>> = sent
        .iter()
        .filter_map(|f| {
            let pkt = parse(f).ok()?;
            let l = pkt.layout();
            (0x0D..=0x10)
                .contains(&pkt.opcode().0)
                .then(|| f[l.bth..l.icrc].to_vec())
        })
        .collect();
    let phase1 = ReadMix {
        wc,
        landed,
        responses,
        fw,
        fp,
        cycles,
    };
    phase1.report(what);

    // Phase 2: a READ of b[40_000..44_096], a WRITE of new bytes there, a SEND.
    const AT: usize = 40_000;
    const LEN: usize = 4096;
    let new: Vec<u8> = (0..LEN as u32).map(|i| (i * 7 + 3) as u8).collect();
    a.write(48_000, &new).unwrap();
    p.qp[1]
        .post_recv(&RecvWr::new(60).sge(b.addr() + 60_000, 256, b.lkey()))
        .unwrap();
    let wrs = [
        SendWr::new(
            20,
            WrOp::RdmaRead {
                remote_addr: b.addr() + AT as u64,
                rkey: b.rkey(),
            },
        )
        .sge(a.addr() + AT as u64, LEN as u32, a.lkey())
        .flags(SendFlags::SIGNALED),
        SendWr::new(
            21,
            WrOp::RdmaWrite {
                remote_addr: b.addr() + AT as u64,
                rkey: b.rkey(),
            },
        )
        .sge(a.addr() + 48_000, LEN as u32, a.lkey())
        .flags(SendFlags::SIGNALED),
        SendWr::new(22, WrOp::Send)
            .sge(a.addr() + 48_000, 100, a.lkey())
            .flags(SendFlags::SIGNALED),
    ];
    p.qp[0].post_send_list(&wrs).unwrap();
    let done = p.wire.completions(&p.cq[0], 3, 20_000_000);
    let got: Vec<_> = done.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        [20, 21, 22].map(|i| (i, WcStatus::Success)),
        "phase 2's completions"
    );
    let rx = p.wire.completions(&p.cq[1], 1, 20_000_000);
    assert_eq!(
        (rx[0].wr_id, rx[0].status, rx[0].byte_len),
        (60, WcStatus::Success, 100)
    );
    for _ in 0..10 {
        p.wire.step(2_000);
    }
    in_psn_order(&p.wire.sent[1], "phase 2");
    let mut buf = vec![0u8; LEN];
    b.read(AT, &mut buf).unwrap();
    assert!(buf == new, "the WRITE's bytes at SoC 1");
    b.read(60_000, &mut buf[..100]).unwrap();
    assert!(buf[..100] == new[..100], "the SEND's bytes at SoC 1");
    if fastpath {
        a.read(AT, &mut buf).unwrap();
        assert!(
            buf[..] == old[AT..AT + LEN],
            "the READ brought bytes the WRITE after it wrote"
        );
    }
    phase1
}

/// Two SoCs connected at MTU 1024 (`min_rnr_timer` 12, 0.64 ms: the default), the fast
/// path on or off: SoC `with`'s region holds `data`, the other's 0xEE; both run 40,000
/// cycles first.
fn filled_pair(
    image: &std::path::Path,
    fastpath: bool,
    with: usize,
    data: &[u8],
) -> soc_pair::Pair {
    let opts = ConnectOptions {
        mtu: Mtu::Mtu1024,
        timeout: 14,
        ..ConnectOptions::default()
    };
    let mut p = soc_pair::pair_on(image, 0.0, &opts, fastpath);
    p.mr[with].write(0, data).unwrap();
    p.mr[1 - with].write(0, &[0xEE; 65536]).unwrap();
    for _ in 0..20 {
        p.wire.step(2_000);
    }
    p
}

/// Checks that a responder's frames (READ responses, ACKs) left in PSN order: a frame
/// that answers a later request never goes before one that answers an earlier.
fn in_psn_order(frames: &[Vec<u8>], what: &str) {
    let mut last: Option<Psn> = None;
    for (i, f) in frames.iter().enumerate() {
        let pkt = parse(f).unwrap_or_else(|e| panic!("{what}: frame {i} does not parse: {e:?}"));
        let psn = pkt.psn();
        if let Some(l) = last {
            assert!(
                !psn.before(l),
                "{what}: frame {i} ({}, {psn:?}) left after one at {l:?}",
                pkt.info().name
            );
        }
        last = Some(psn);
    }
}

/// QPs in host memory on the SoC (`docs/scale.md`): with an ICM, 12 QP pairs share the
/// firmware's 8 slots and ring through their doorbell records and `QP_DB`. Every WRITE
/// lands, and the register file's queue of `QP_DB` doorbells tells the firmware which
/// QPs rang, so only those are brought in (without it every stored QP would count as
/// rung at each doorbell; before the queue a `QP_DB` write did not even wake the
/// firmware).
#[test]
fn qps_in_host_memory_ring_through_qp_db() {
    let Some(image) = test_image() else { return };
    const N: usize = 12;
    const LEN: usize = 256;
    let nics = [1u8, 2]
        .map(|l| SocNic::new(&image, mac(l), ipv4_gid([10, 0, 0, l]), None, false).unwrap());
    let ctx = nics.clone().map(|n| Context::open(n).unwrap());
    for c in &ctx {
        c.set_icm(64).unwrap();
    }
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let pd = ctx.each_ref().map(|c| c.alloc_pd().unwrap());
    let cq = ctx.each_ref().map(|c| c.create_cq(2 * N).unwrap());
    let mr = pd.each_ref().map(|p| p.reg_mr(N * LEN, access).unwrap());
    let qp: Vec<[QueuePair; 2]> = (0..N)
        .map(|_| [0, 1].map(|i| pd[i].create_qp(QpType::Rc, &cq[i], &cq[i]).build().unwrap()))
        .collect();
    for q in &qp {
        connect(
            &ctx,
            [&q[0], &q[1]],
            Psn::new(0x100),
            &ConnectOptions::default(),
        );
    }
    let src: Vec<u8> = (0..N * LEN).map(|i| (i * 7 + i / 251) as u8).collect();
    mr[0].write(0, &src).unwrap();
    let before = ctx[0].query_counters().unwrap().runtime;
    let start = nics[0].cycles();
    for (k, q) in qp.iter().enumerate() {
        let off = (k * LEN) as u64;
        let wr = SendWr::new(k as u64, WrOp::rdma_write(mr[1].addr() + off, mr[1].rkey()))
            .sge(mr[0].addr() + off, LEN as u32, mr[0].lkey())
            .flags(SendFlags::SIGNALED);
        q[0].post_send(&wr).unwrap();
    }
    let mut wire = Wire::new(nics, 0.0);
    let wcs = wire.completions(&cq[0], N, 40_000_000);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(mr[1].to_vec(), src);
    let c = ctx[0].query_counters().unwrap().runtime;
    let misses = c.qp_cache_misses - before.qp_cache_misses;
    eprintln!(
        "{N} QPs a side through 8 slots: requester {misses} QP cache misses for {N} doorbells; {} cycles from the first post to the last completion",
        wire.nics[0].cycles() - start
    );
    // Each QP that rang comes in about once (it may be pushed out and back while it
    // waits for its ACK); not every stored QP at every doorbell.
    assert!(misses <= N as u64 + 4, "{misses} misses for {N} doorbells");
    // Bringing a stored QP in (`Engine::restore_qp`, a ~10 KiB frame, the firmware's
    // largest) takes the firmware's stack deepest of what the SoC tests run
    // (`BENCHMARKS.md`, "The firmware's stack"): both SoCs brought QPs in, and stay
    // inside the reserve the soft-core boards' link leaves for the stack.
    let used = wire.stack_used();
    let reserve = boards::SOFTCORE.stack_min.min(boards::ECP5_85F.stack_min);
    eprintln!("stack used since reset: {used:?} bytes (the boards reserve {reserve})");
    assert!(
        used.iter().all(|u| (10 * 1024..reserve).contains(u)),
        "{used:?} bytes of stack: restore_qp's frame alone is over 10 KiB, the reserve {reserve}"
    );
}

/// The SoC's port: 5 Gb/s (`nic_soc`'s `LINK_BPC_Q8`, 50 bit times a cycle at 100 MHz).
const SOC_LINK_BPS: u64 = 5_000_000_000;
/// The lossless priority of the PFC test, and its QP's traffic class (DSCP 24, which
/// the default map makes priority 3).
const PFC_PRIO: u8 = 3;
const PFC_TCLASS: u8 = 24 << 2;

/// Two SoCs back to back with a [`DcbLockstep`] beside each one's DCB block: every
/// cycle of the block is checked against the model, every frame it sends against the
/// model's, every frame it receives is fed to both.
struct DcbWire {
    nics: [Rc<SocNic>; 2],
    check: [DcbLockstep; 2],
    /// The cycles at which each SoC's block started a data frame, and its priority.
    starts: [Vec<(u64, u8)>; 2],
    /// The intervals (first cycle, first cycle after) in which each SoC had
    /// [`PFC_PRIO`] paused.
    paused: [Vec<(u64, u64)>; 2],
    /// A data frame of [`PFC_PRIO`] that SoC 0 sent.
    sample: Option<Vec<u8>>,
    /// Each block's counters as of its last cycle.
    counters: [DcbCounters; 2],
}

impl DcbWire {
    fn step(&mut self, cycles: u64) {
        for (i, n) in self.nics.iter().enumerate() {
            n.run(cycles);
            for (c, k) in n.take_dcb() {
                if let Err(e) = self.check[i].check(&c, &k) {
                    panic!("SoC {i}'s DCB block is not the model's: {e}");
                }
                self.counters[i] = k;
                if let Some((_, p)) = c.decision {
                    self.starts[i].push((c.cycle, p));
                }
                let on = c.paused.contains(PFC_PRIO);
                match self.paused[i].last_mut() {
                    Some((_, end)) if *end == c.cycle && on => *end += 1,
                    _ if on => self.paused[i].push((c.cycle, c.cycle + 1)),
                    _ => {}
                }
            }
        }
        let mut buf = vec![0u8; 8192];
        for (from, to) in [(0, 1), (1, 0)] {
            while let Some(n) = self.nics[from].transmit_frame(&mut buf) {
                let f = &buf[..n];
                let at = self.nics[from].cycles();
                if let Err(e) = self.check[from].wire_frame(f, at) {
                    panic!("SoC {from} sent a frame the model did not: {e}");
                }
                let prio = self.check[from].regs().map.of_frame(f);
                if from == 0 && prio == PFC_PRIO && n > 1000 && self.sample.is_none() {
                    self.sample = Some(f.to_vec());
                }
                self.inject(to, f);
            }
        }
    }

    fn inject(&mut self, to: usize, frame: &[u8]) {
        self.check[to].rx_pushed(frame);
        self.nics[to].receive_frame(frame);
    }

    /// Data frames SoC `i` started in `[from, to)`, of priority `prio`.
    fn started(&self, i: usize, prio: u8, (from, to): (u64, u64)) -> usize {
        self.starts[i]
            .iter()
            .filter(|&&(c, p)| p == prio && (from..to).contains(&c))
            .count()
    }
}

/// PFC on the SoC (`docs/dcb.md` §3): the DCB block between the datapath and the wire
/// (no transmit queues), set up by the firmware from MODIFY_DCB, runs beside the model
/// (`DcbLockstep::without_queues`, every cycle, both SoCs). Priority 3 is lossless, two
/// QPs (priorities 0 and 3) stream WRITEs from SoC 0 to SoC 1.
/// * Reception: once both QPs send, a PFC frame pausing priority 3 for 50,000 quanta
///   (and priority 5, which has no PFC) stops SoC 0's priority 3 for 50,000 x 512 bit
///   times at 5 Gb/s = 5.12 ms = 512,000 cycles, counted by hand; priority 0 keeps
///   sending meanwhile at the firmware's own pace (it builds every frame in software:
///   about 25,700 instructions, 53,000 to 67,000 cycles as the code falls in the core's
///   4 KiB direct-mapped instruction cache), measured in the same run after the pause.
/// * Generation: twenty copies of a 1 KiB frame of priority 3 arriving at once fill the
///   datapath's 16 KiB ring behind the block (about 12 of them; the firmware reads
///   frames from there) and take the block's receive buffer over its XOFF threshold
///   (4,096 bytes): it sends XOFF, then XON once the firmware has drained it to 2,048;
///   SoC 0 honours the pause. (The ring's frames are not counted for PFC:
///   `docs/dcb.md` §3.)
///
/// Every WRITE completes with its data.
#[test]
fn pfc_on_the_soc_is_the_models() {
    let Some(image) = test_image() else { return };
    const N: usize = 4;
    const LEN: usize = 4096;
    const QUANTA: u16 = 50_000;
    let nics = [1u8, 2]
        .map(|l| SocNic::new(&image, mac(l), ipv4_gid([10, 0, 0, l]), None, false).unwrap());
    let ctx = nics.clone().map(|n| Context::open(n).unwrap());
    let dcb = DcbConfig {
        pfc_enable: 1 << PFC_PRIO,
        pfc_thresholds: PfcThresholds {
            xoff: 4096,
            xon: 2048,
            quanta: QUANTA,
        },
        ..DcbConfig::OFF
    };
    for c in &ctx {
        c.set_dcb(&dcb).unwrap();
    }
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let pd = ctx.each_ref().map(|c| c.alloc_pd().unwrap());
    let cq = ctx.each_ref().map(|c| c.create_cq(4 * N).unwrap());
    let mr = pd
        .each_ref()
        .map(|p| p.reg_mr(2 * N * LEN, access).unwrap());
    let qp: Vec<[QueuePair; 2]> = [0, PFC_TCLASS]
        .iter()
        .map(|&tc| {
            let q = [0, 1].map(|i| pd[i].create_qp(QpType::Rc, &cq[i], &cq[i]).build().unwrap());
            let opts = ConnectOptions {
                traffic_class: tc,
                mtu: Mtu::Mtu1024,
                ..ConnectOptions::default()
            };
            connect(&ctx, [&q[0], &q[1]], Psn::new(0x100), &opts);
            q
        })
        .collect();
    // The blocks as the firmware configured them: the model starts from here.
    let regs = |l: u8| dcb.registers(mac(l), DcbRegs::bits_per_cycle(SOC_LINK_BPS, CLOCK_HZ));
    let ns = 1_000_000_000 / CLOCK_HZ;
    let mut w = DcbWire {
        check: [1, 2].map(|l| DcbLockstep::without_queues(regs(l), ns, SOC_LINK_BPS)),
        nics,
        starts: Default::default(),
        paused: Default::default(),
        sample: None,
        counters: Default::default(),
    };
    for n in &w.nics {
        n.watch_dcb(true);
    }

    let src: Vec<u8> = (0..2 * N * LEN).map(|i| (i * 7 + i / 251) as u8).collect();
    mr[0].write(0, &src).unwrap();
    let mut pause = PfcRepr {
        enable: 1 << PFC_PRIO | 1 << 5,
        ..PfcRepr::default()
    };
    pause.quanta[usize::from(PFC_PRIO)] = QUANTA;
    pause.quanta[5] = 9000;
    let mut frame = [0u8; 64];
    let n = pause.emit_frame(MacAddr(mac(9)), &mut frame).unwrap();
    for (k, q) in qp.iter().enumerate() {
        for j in 0..N {
            let off = ((k * N + j) * LEN) as u64;
            let wr = SendWr::new(off, WrOp::rdma_write(mr[1].addr() + off, mr[1].rkey()))
                .sge(mr[0].addr() + off, LEN as u32, mr[0].lkey())
                .flags(SendFlags::SIGNALED);
            q[0].post_send(&wr).unwrap();
        }
    }
    let start = w.nics[0].cycles();
    while w.starts[0].len() < 2 {
        assert!(
            w.nics[0].cycles() - start < 2_000_000,
            "SoC 0 sends nothing"
        );
        w.step(2_000);
    }
    w.inject(0, &frame[..n]);
    let mut done = 0;
    let mut wcs = [Default::default(); 8];
    while done < 2 * N {
        assert!(
            w.nics[0].cycles() - start < 20_000_000,
            "{done} of {} WRITEs",
            2 * N
        );
        w.step(2_000);
        for wc in cq[0].poll(&mut wcs).unwrap() {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            done += 1;
        }
    }
    assert_eq!(mr[1].to_vec(), src);

    // Reception: one pause of priority 3, exactly as long as the hand count says (the
    // model checked every cycle of it); only priority 0 started frames meanwhile.
    let hand = u64::from(QUANTA) * 512 * CLOCK_HZ / SOC_LINK_BPS;
    assert_eq!(hand, 512_000);
    let [(t0, t1)] = w.paused[0][..] else {
        panic!("SoC 0's pauses of priority 3: {:?}", w.paused[0]);
    };
    assert_eq!(t1 - t0, hand, "paused from cycle {t0} to {t1}");
    let (p0, p3) = (
        w.started(0, 0, (t0 + 1, t1 + 1)),
        w.started(0, PFC_PRIO, (t0 + 1, t1 + 1)),
    );
    eprintln!("during SoC 0's pause: {p0} frames of priority 0, {p3} of priority 3 started");

    // Priority 0 kept the pace the firmware has when nothing is paused: its slowest
    // frame-to-frame gap after the pause, measured here because the same instructions
    // take up to 20 % more cycles as the code's layout moves (a fixed count of 8 held on
    // one build and failed on another with the same traffic and the same work).
    // The first frame of the pause comes up to one gap after it starts, hence the 1.
    let after: Vec<u64> = w.starts[0]
        .iter()
        .map(|&(c, _)| c)
        .filter(|&c| c > t1)
        .collect();
    let gap = after
        .windows(2)
        .map(|f| f[1] - f[0])
        .max()
        .expect("SoC 0 sent frames after the pause");
    let pace = ((t1 - t0) / gap).saturating_sub(1);
    eprintln!("slowest gap after the pause {gap} cycles: at least {pace} frames in the pause");
    assert!(pace >= 4, "a frame-to-frame gap of {gap} cycles");
    assert!(
        p0 as u64 >= pace && p3 == 0,
        "{p0} frames of priority 0 (at least {pace}), {p3} of 3"
    );
    assert!(w.started(0, PFC_PRIO, (t1 + 1, u64::MAX)) > 0);
    assert_eq!(w.check[0].max_paused, Priorities::only(PFC_PRIO));

    // Generation: twenty copies of a WRITE packet of priority 3 (duplicates SoC 1 has
    // had).
    let sample = w.sample.clone().expect("SoC 0 sent frames of priority 3");
    assert!(
        (1000..1200).contains(&sample.len()),
        "{} bytes",
        sample.len()
    );
    for _ in 0..20 {
        w.inject(1, &sample);
    }
    let mut waited = 0;
    while w.check[1].takes < 2 || w.paused[0].len() < 2 || w.counters[0].rx_pfc_frames < 2 {
        waited += 2_000;
        assert!(
            waited < 2_000_000,
            "no XOFF and XON from SoC 1: {:?}",
            w.paused[0]
        );
        w.step(2_000);
    }
    let c1 = &w.check[1];
    eprintln!(
        "SoC 1: {} PFC frames sent ({} refreshes), SoC 0 paused {:?}",
        c1.takes, c1.fires, w.paused[0]
    );
    assert_eq!(c1.max_xoff, Priorities::only(PFC_PRIO));
    assert!(c1.takes >= 2, "an XOFF and an XON: {} PFC frames", c1.takes);
    assert_eq!(
        w.paused[0].len(),
        2,
        "SoC 0 honoured SoC 1's XOFF: {:?}",
        w.paused[0]
    );
    for (i, k) in w.counters.iter().enumerate() {
        assert_eq!(k.rx_drops, 0, "SoC {i}'s receive buffer dropped frames");
    }
}

/// A MODIFY_QP to ERR while the fast path runs beside the firmware (`docs/fastpath.md`
/// §3.7): every WQE of the QP completes once, by its CQE from the writer (success) or
/// the engine's (success or flushed), none twice, none lost. The receiver: SoC 0's
/// WRITE of `w` bytes, then its SEND into a receive WQE loaded ahead, reach SoC 1 at
/// once, and SoC 1's QP goes to ERR: the WRITE's packets delay the SEND's last one by
/// `w` bytes of placing, so across the sizes it lands before, inside and after the
/// firmware's MODIFY_QP (the `MSG_DONE`, the receive CQE). The sender: SoC 1's WRITE
/// of `w` bytes, then the ACKs of SoC 0's SENDs, reach SoC 0 at once, and SoC 0's QP
/// goes to ERR (the `ACKED`, the send CQEs). Before the QP was taken off the fast path
/// ahead of the flush, a SEND placed (an ACK taken) between the firmware's look at the
/// events and the take-off after the flush had its CQE written and its WQE flushed too
/// (SEND 100, ACKed SEND 0: success and WR_FLUSH_ERR) behind the WRITEs of 8 KiB and
/// more at the receiver and 12 KiB and more at the sender.
#[test]
fn a_modify_to_err_on_the_socs_fast_path_completes_each_wqe_once() {
    let Some(image) = test_image() else { return };
    let mut bad = Vec::new();
    for side in [1, 0] {
        for w in ERR_WRITES {
            let (wc, want) = err_run(&image, side, w);
            eprintln!("SoC {side} to ERR behind a {w}-byte WRITE: {wc:?}");
            let mut ids: Vec<u64> = wc.iter().map(|w| w.0).collect();
            ids.sort_unstable();
            if ids != want {
                bad.push(format!(
                    "SoC {side}, WRITE {w}: {wc:?}, wanted {want:?} once each"
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a WQE completed twice or never:\n{}",
        bad.join("\n")
    );
}

/// The WRITEs ahead of [`err_run`]'s SEND or ACKs (bytes, at MTU 1024).
const ERR_WRITES: [u32; 6] = [0, 4_096, 8_192, 12_288, 16_384, 24_576];

/// Runs SoC `n` alone until it sent nothing for a while: the frames it sent.
fn run_alone(p: &mut soc_pair::Pair, n: usize) -> Vec<Vec<u8>> {
    let (mut out, mut quiet) = (Vec::new(), 0);
    let mut buf = vec![0u8; 8192];
    while quiet < 20 {
        p.wire.nics[n].run(2_000);
        quiet += 1;
        while let Some(len) = p.wire.nics[n].transmit_frame(&mut buf) {
            out.push(buf[..len].to_vec());
            quiet = 0;
        }
    }
    out
}

/// [`a_modify_to_err_on_the_socs_fast_path_completes_each_wqe_once`]'s run for SoC
/// `side` behind a WRITE of `w` bytes: SoC `side`'s completions (`wr_id`, status),
/// every one it made, and the `wr_id`s of its WQEs.
fn err_run(image: &std::path::Path, side: usize, w: u32) -> (Vec<(u64, WcStatus)>, Vec<u64>) {
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 31 + i / 7) as u8).collect();
    let mut p = filled_pair(image, true, 0, &data);
    let mr = [0, 1].map(|n| (p.mr[n].addr(), p.mr[n].lkey(), p.mr[n].rkey()));
    let sends = if side == 1 { 1 } else { 3 };
    for i in 0..sends + 1 {
        let r = RecvWr::new(100 + i).sge(mr[1].0 + 2_048 * i, 2_048, mr[1].1);
        p.qp[1].post_recv(&r).unwrap();
    }
    // (the receive doorbell heard, the head WQE loaded)
    for _ in 0..10 {
        p.wire.step(2_000);
    }
    // The WRITE from the other side, into the last 32 KiB.
    let from = 1 - side;
    let write = |p: &mut soc_pair::Pair| {
        if w > 0 {
            let op = WrOp::RdmaWrite {
                remote_addr: mr[side].0 + 32_768,
                rkey: mr[side].2,
            };
            let s = SendWr::new(50, op).sge(mr[from].0, w, mr[from].1);
            p.qp[from].post_send(&s).unwrap();
        }
    };
    let post_sends = |p: &mut soc_pair::Pair| {
        for i in 0..sends {
            let s = SendWr::new(i, WrOp::Send)
                .sge(mr[0].0 + 2_048 * i, 1_500, mr[0].1)
                .flags(SendFlags::SIGNALED);
            p.qp[0].post_send(&s).unwrap();
        }
    };
    let backlog = if side == 1 {
        write(&mut p);
        post_sends(&mut p);
        run_alone(&mut p, 0)
    } else {
        write(&mut p);
        let mut frames = run_alone(&mut p, 1);
        post_sends(&mut p);
        for f in run_alone(&mut p, 0) {
            p.wire.nics[1].receive_frame(&f);
        }
        frames.extend(run_alone(&mut p, 1));
        frames
    };
    for f in &backlog {
        p.wire.nics[side].receive_frame(f);
    }
    p.qp[side].modify(&QpAttr::to_state(QpState::Err)).unwrap();
    // Every WQE flushed by now, or completed: what comes later is a second completion.
    let mut wc = Vec::new();
    let mut buf = [roce_core::transport::WorkCompletion::default(); 8];
    for _ in 0..50 {
        p.wire.step(2_000);
        wc.extend(
            p.cq[side]
                .poll(&mut buf)
                .unwrap()
                .iter()
                .filter(|w| w.wr_id != 50)
                .map(|w| (w.wr_id, w.status)),
        );
    }
    let first = if side == 1 { 100 } else { 0 };
    let n = if side == 1 { sends + 1 } else { sends };
    (wc, (first..first + n).collect())
}

/// The engine's own timer fails a QP on the SoC's fast path (retry count 0: the first
/// local ACK timeout is RETRY_EXC_ERR) while the responder's late ACKs of both SENDs come
/// in: each WQE completes once, in order, whatever the cycle the ACKs land in (the RC
/// rule: both succeed, or the first fails with RETRY_EXC_ERR and the second is flushed,
/// or the first succeeds and the second fails; which one depends on when the timer
/// fires, which the spec leaves late). At the deadline the fetch stops the queue, the
/// firmware takes it back and the engine's timer fails the QP, in one poll of ~26,000
/// cycles; the ACKs land in it (`docs/fastpath.md` §3.7, "No second or lost CQE").
/// Before lostcqe, with the ACKs 9,000 to 20,000 cycles before the error: the hardware
/// retired the first SEND (its
/// CQE written) with the QP still on the fast path, the engine completed it again with
/// RETRY_EXC_ERR (the QP was taken off only after the flush), and the writer, holding
/// that ACK's event for the firmware, waited for the firmware's pop while the firmware
/// waited for the writer to take its RETRY_EXC_ERR CQE: 65,535 cycles a port read, the
/// second WQE's completion never seen within the test's 200,000 cycles.
#[test]
fn retries_running_out_on_the_socs_fast_path_complete_each_wqe_once() {
    let Some(image) = test_image() else { return };
    // Without the ACKs: the cycle the RETRY_EXC_ERR is seen in the host's CQ.
    let (wc, seen) = retry_run(&image, None);
    let failed = vec![(0, WcStatus::RetryExcErr), (1, WcStatus::WrFlushErr)];
    assert_eq!(wc, failed, "without an ACK the retries run out");
    let legal = [
        vec![(0, WcStatus::Success), (1, WcStatus::Success)],
        vec![(0, WcStatus::Success), (1, WcStatus::RetryExcErr)],
        failed,
    ];
    let mut bad = Vec::new();
    for back in RETRY_BACK {
        let (wc, _) = retry_run(&image, Some(seen - back));
        eprintln!("SoC 0, the ACKs {back} cycles before the error was seen: {wc:?}");
        if !legal.contains(&wc) {
            bad.push(format!("the ACKs {back} cycles before: {wc:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "a WQE completed twice, never or out of order:\n{}",
        bad.join("\n")
    );
}

/// How many cycles before the error [`retry_run`] calibrated its ACKs land: in the poll
/// that takes the queue back and fails the QP.
const RETRY_BACK: [u64; 4] = [4_000, 9_000, 14_000, 20_000];

/// SoC 0 sends two signaled SENDs (retry count 0, ACK timeout 4.096 us x 2^5 = 131 us,
/// 13,100 cycles) and SoC 1 answers them; SoC 1's ACKs reach SoC 0 at cycle `ack_at`
/// (never without): SoC 0's completions (`wr_id`, status) and the cycle its first one
/// was in the CQ.
fn retry_run(image: &std::path::Path, ack_at: Option<u64>) -> (Vec<(u64, WcStatus)>, u64) {
    let opts = ConnectOptions {
        mtu: Mtu::Mtu1024,
        timeout: 5,
        retry_cnt: 0,
        ..ConnectOptions::default()
    };
    let mut p = soc_pair::pair_on(image, 0.0, &opts, true);
    let mr = [0, 1].map(|n| (p.mr[n].addr(), p.mr[n].lkey()));
    for i in 0..2 {
        let r = RecvWr::new(100 + i).sge(mr[1].0 + 2_048 * i, 2_048, mr[1].1);
        p.qp[1].post_recv(&r).unwrap();
    }
    for _ in 0..20 {
        p.wire.step(2_000);
    }
    for i in 0..2 {
        let s = SendWr::new(i, WrOp::Send)
            .sge(mr[0].0 + 2_048 * i, 1_000, mr[0].1)
            .flags(SendFlags::SIGNALED);
        p.qp[0].post_send(&s).unwrap();
    }
    // SoC 0's two SENDs, then SoC 1's answers (held).
    let mut buf = vec![0u8; 8192];
    let mut sends = Vec::new();
    while sends.len() < 2 {
        p.wire.nics[0].run(100);
        while let Some(len) = p.wire.nics[0].transmit_frame(&mut buf) {
            sends.push(buf[..len].to_vec());
        }
    }
    for f in &sends {
        p.wire.nics[1].receive_frame(f);
    }
    let acks = run_alone(&mut p, 1);
    // (the BTH's PSN: IPv4, no VLAN tag)
    let psn = |f: &[u8]| {
        f.get(51..54)
            .map(|b| u32::from_be_bytes([0, b[0], b[1], b[2]]))
    };
    assert_eq!(
        acks.last().and_then(|f| psn(f)),
        psn(&sends[1]),
        "SoC 1's ACKs acknowledge both SENDs"
    );
    let mut wc = Vec::new();
    let mut seen = 0;
    let mut cqe = [roce_core::transport::WorkCompletion::default(); 8];
    let mut ack = ack_at.map(|_| acks);
    for _ in 0..4_000 {
        let nic = &p.wire.nics[0];
        if let (Some(at), Some(_)) = (ack_at, &ack) {
            if nic.cycles() >= at {
                for f in ack.take().unwrap_or_default() {
                    nic.receive_frame(&f);
                }
            }
        }
        nic.run(50);
        while nic.transmit_frame(&mut buf).is_some() {}
        let got = p.cq[0].poll(&mut cqe).unwrap();
        if seen == 0 && !got.is_empty() {
            seen = nic.cycles();
        }
        wc.extend(got.iter().map(|w| (w.wr_id, w.status)));
    }
    (wc, seen)
}

/// A send queue deeper than the messages the SoC's response path knows per QP
/// (`fp_inflight`'s 8, `layout::IF_ENTRIES`): 24 signaled 1 KiB WRITEs at MTU 1024 posted
/// at once, on the firmware alone (the engine: the reference) and with the fast path.
/// The same completions, the same bytes landed, and SoC 0's request frames the same
/// (BTH to payload, in order). With the fast path every ACK is the hardware's: SoC 0's
/// firmware takes no frame, since the engine keeps no more messages in flight than the
/// list holds (`TransportConfig::max_msgs_in_flight`, the WQE fetch's depth with it;
/// `docs/fastpath.md` §3.8 "How deep a queue runs"). Before, the fetch sent all 24, 16
/// ACKs found no entry and went to the firmware, ~4,300 instructions each (one poll of
/// 69,306).
#[test]
fn a_deep_send_queue_on_the_socs_fast_path_is_the_hardwares() {
    let Some(image) = test_image() else { return };
    let alone = deep_run(&image, false);
    let fast = deep_run(&image, true);
    alone.report("firmware only");
    fast.report("fast path");
    assert_eq!(fast.wc, alone.wc, "the completions differ");
    assert!(fast.landed == alone.landed, "the WRITEs' bytes differ");
    same_frames(&fast.frames, &alone.frames, "SoC 0");
    assert_eq!(
        (fast.fw.frames_rx, fast.fw.frames_tx),
        (0, 0),
        "SoC 0's firmware took or sent frames: {:?}",
        fast.fw
    );
    assert!(
        fast.largest.instret <= SOC_FP_DEEP_POLL,
        "SoC 0's largest poll with the fast path: {:?}",
        fast.largest
    );
}

/// WRITEs [`deep_run`] posts at once.
const DEEP_WRITES: usize = 24;

/// The largest poll of SoC 0 in [`a_deep_send_queue_on_the_socs_fast_path_is_the_hardwares`]
/// with the fast path: measured 446 (BENCHMARKS.md "A doorbell and the fetch's news in
/// one poll (newspoll)"), with ~10 % margin, under issue 14's 500. (531 before newspoll,
/// lead44: a send doorbell's look and the news of the WQEs the fetch took in one poll,
/// the MR check and call of a doorbell the SoC's fetch had heard itself, and the news'
/// deadlines and counters, which the SoC's never has; main's images fail this bound.)
const SOC_FP_DEEP_POLL: u32 = 490;

/// What [`deep_run`] saw.
struct DeepRun {
    wc: Vec<(u64, WcStatus, WcOpcode, u32)>,
    landed: Vec<u8>,
    /// SoC 0's frames, BTH to payload.
    frames: Vec<Vec<u8>>,
    /// SoC 0's firmware from the post to the end.
    fw: roce_hdl_sim::soc::FirmwareStats,
    largest: roce_hdl_sim::soc::LargestPoll,
    cycles: u64,
}

impl DeepRun {
    fn report(&self, what: &str) {
        eprintln!(
            "deep send queue (SoC, {what}): {DEEP_WRITES} x 1 KiB WRITE at MTU 1024 posted at once: SoC 0's firmware {} instructions in {} busy polls ({} frames sent, {} received), largest poll {:?}; post to last completion {} cycles",
            self.fw.busy_instret,
            self.fw.busy_polls,
            self.fw.frames_tx,
            self.fw.frames_rx,
            self.largest,
            self.cycles
        );
    }
}

/// [`DEEP_WRITES`] signaled 1 KiB WRITEs from SoC 0 to SoC 1 at MTU 1024, posted at
/// once, the SoCs' fast path on or off.
fn deep_run(image: &std::path::Path, fastpath: bool) -> DeepRun {
    const LEN: usize = 1024;
    let opts = ConnectOptions {
        mtu: Mtu::Mtu1024,
        timeout: 14,
        ..ConnectOptions::default()
    };
    let mut p = soc_pair::pair_on(image, 0.0, &opts, fastpath);
    let data: Vec<u8> = (0..DEEP_WRITES * LEN)
        .map(|i| (i * 13 + i / 1021) as u8)
        .collect();
    p.mr[0].write(0, &data).unwrap();
    for _ in 0..20 {
        p.wire.step(2_000);
    }
    // (a command starts the largest poll's measure anew)
    for ctx in &p._ctx {
        ctx.query_counters().unwrap();
    }
    p.wire.record = true;
    let before = p.wire.nics[0].firmware_stats();
    let start = p.wire.nics[0].cycles();
    for i in 0..DEEP_WRITES {
        let at = (i * LEN) as u64;
        let wr = SendWr::new(
            i as u64,
            WrOp::RdmaWrite {
                remote_addr: p.mr[1].addr() + at,
                rkey: p.mr[1].rkey(),
            },
        )
        .sge(p.mr[0].addr() + at, LEN as u32, p.mr[0].lkey())
        .flags(SendFlags::SIGNALED);
        p.qp[0].post_send(&wr).unwrap();
    }
    let wc = p.wire.completions(&p.cq[0], DEEP_WRITES, 50_000_000);
    let cycles = p.wire.nics[0].cycles() - start;
    for _ in 0..20 {
        p.wire.step(2_000);
    }
    let fw = p.wire.nics[0].firmware_stats().since(&before);
    let largest = p.wire.nics[0].largest_poll();
    let mut landed = vec![0u8; data.len()];
    p.mr[1].read(0, &mut landed).unwrap();
    DeepRun {
        wc: wc
            .iter()
            .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len))
            .collect(),
        landed,
        frames: bth_to_payload(&p.wire.sent[0]),
        fw,
        largest,
        cycles,
    }
}
