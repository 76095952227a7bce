//! The whole-stack chaos run (issue 17): applications on the verbs API, the ABI, the
//! firmware runtime, the engine and a datapath (roce-core's, or the Verilated RTL), two
//! NICs on the simulated fabric with loss, duplication, reordering and corruption.
//!
//! Each QP pair runs a random mix of WRITE, WRITE_WITH_IMM, READ, SEND, FETCH_ADD and
//! CMP_SWAP of random sizes; every WR is signaled. A reference model applies each QP's
//! WRs in posting order (RC executes them in PSN order at the responder, whatever the
//! wire did) and predicts every byte of both hosts' memory and every completion. The run
//! then checks:
//! * every send and receive completion arrives exactly once, in posting order, with
//!   status success, the WR's opcode, length and immediate data;
//! * both hosts' memory equals the model's: WRITE targets, SEND buffers, READ
//!   destinations, atomic counters and the original values atomics return;
//! * no QP is stuck: every one is back in RTS with nothing outstanding, within a bound
//!   on simulated time; except a requester whose whole retry budget the link spent
//!   (IBTA's `retry_cnt` is at most 7: under these faults a long run meets it now and
//!   then), which ends `RETRY_EXC_ERR` as the spec says, and only where both ends'
//!   captures prove it was the link (`proof`).
//!
//! The QPs' areas do not overlap, so their WRs commute and the model needs no
//! cross-QP order. Within a QP, READ destinations and atomic results each get a slot of
//! their own, so each READ is checked against the target as it was when the READ ran.

mod proof;

use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{
    AckTimeout, QpState, QpType, RecvWr, SendFlags, SendWr, SrAttr, WcFlags, WcOpcode, WcStatus,
    WorkCompletion, WrOp,
};
use roce_device::{Capacities, NicModel};
use roce_host::{CompletionQueue, ConnectOptions, Context, MemoryRegion, QueuePair};
use roce_sim::{Faults, LinkConfig, MemoryCapture};
use roce_testbed::nic::{boot, port_config, Datapath};
use roce_testbed::{Sim, World};
use std::fmt;
use std::rc::Rc;

/// Which datapath the NICs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// roce-core's parser and ICRC in software.
    Software,
    /// The Verilated RX parser and TX ICRC inserter (64-bit bus).
    Rtl,
}

/// One chaos run.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub seed: u64,
    pub backend: Backend,
    /// QP pairs.
    pub qps: usize,
    /// Work requests per QP pair.
    pub ops: usize,
    /// Faults on each direction of the link.
    pub faults: Faults,
    /// Selective repeat instead of Go-Back-N.
    pub selective_repeat: bool,
}

/// 10 % loss, 5 % duplication, 5 % reordering by up to 20 us, 1 % corruption.
pub const FAULTS: Faults = Faults {
    loss: 0.10,
    corrupt: 0.01,
    duplicate: 0.05,
    reorder: 0.05,
    reorder_max_delay_ns: 20_000,
};

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Work requests posted, by kind (WRITE, WRITE_IMM, READ, SEND, FETCH_ADD, CMP_SWAP).
    pub ops: [u64; KINDS],
    /// Payload bytes the WRs moved.
    pub bytes: u64,
    /// Frames on the wire (both directions), and what the faults did to them.
    pub frames: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// Request packets sent again.
    pub retransmits: u64,
    /// Simulated time the run took.
    pub sim_ns: u64,
    /// QP pairs whose requester ended `RETRY_EXC_ERR` because the link lost every retry
    /// or its answer (`proof`), each with the account the captures give.
    pub spent_by_link: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ops: u64 = self.ops.iter().sum();
        write!(
            f,
            "{ops} WRs ({}), {} KB; {} frames: {} lost, {} duplicated, {} reordered, {} corrupted; \
             {} retransmits; {:.1} ms simulated",
            KIND_NAMES
                .iter()
                .zip(self.ops)
                .map(|(n, c)| format!("{c} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            self.bytes / 1000,
            self.frames,
            self.lost,
            self.duplicated,
            self.reordered,
            self.corrupted,
            self.retransmits,
            self.sim_ns as f64 / 1e6
        )?;
        for s in &self.spent_by_link {
            write!(f, "; RETRY_EXC_ERR by the link: {s}")?;
        }
        Ok(())
    }
}

const KINDS: usize = 6;
const KIND_NAMES: [&str; KINDS] = [
    "WRITE",
    "WRITE_IMM",
    "READ",
    "SEND",
    "FETCH_ADD",
    "CMP_SWAP",
];

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Bytes of each QP's areas.
const SRC: usize = 64 * 1024;
const TARGET: usize = 64 * 1024;
/// Largest message.
const MAX_LEN: u64 = 12 * 1024;
/// Atomic words at the responder, per QP.
const WORDS: usize = 8;
/// Send and receive queue depths: posting waits for room.
const SQ: usize = 32;
const RQ: usize = 64;

/// One WR and what the model says it does.
#[derive(Clone, Debug)]
struct Op {
    wr: SendWr,
    kind: usize,
    len: u32,
    /// Fenced (`IBV_SEND_FENCE`: it waits for every earlier READ and atomic to
    /// complete), as `docs/selective-repeat.md` says an application must: a READ's data
    /// is read when its response is sent, and again when a duplicate READ is answered,
    /// so a later WRITE to the bytes can show through it without the fence; under
    /// selective repeat the pieces of WRITEs land in any order too.
    fence: bool,
}

/// A QP pair's memory layout (offsets into the sides' memory regions) and its model.
struct Pair {
    /// A: the source bytes, then a READ destination slot per READ, then a result word
    /// per atomic.
    a_src: usize,
    a_read: usize,
    a_result: usize,
    /// B: the target of WRITEs and READs, the receive slots, the atomic words.
    b_target: usize,
    b_recv: usize,
    b_words: usize,
    ops: Vec<Op>,
    /// The source bytes; the responder's target and atomic words before any WR.
    src: Vec<u8>,
    initial_target: Vec<u8>,
    initial_words: [u64; WORDS],
    /// The model's target and words after every WR.
    target: Vec<u8>,
    words: [u64; WORDS],
    /// Per READ slot and per atomic result: what must be there.
    read_expect: Vec<(usize, Vec<u8>)>,
    result_expect: Vec<(usize, u64)>,
    /// Per receive: the bytes and length that must arrive, and the immediate.
    recv_expect: Vec<(Vec<u8>, Option<u32>)>,
}

/// Per-QP area sizes in A's and B's region.
fn a_area(ops: usize) -> usize {
    SRC + ops * (MAX_LEN as usize) + ops * 8
}
fn b_area(ops: usize) -> usize {
    TARGET + ops * (MAX_LEN as usize) + WORDS * 8
}

/// Builds the WR mix of one QP pair and runs the model over it.
fn plan(rng: &mut Rng, q: usize, ops: usize, sr: bool, a: &MemoryRegion, b: &MemoryRegion) -> Pair {
    let (a0, b0) = (q * a_area(ops), q * b_area(ops));
    let src = rng.bytes(SRC);
    let target = rng.bytes(TARGET);
    let words: [u64; WORDS] = std::array::from_fn(|_| rng.next());
    let mut p = Pair {
        a_src: a0,
        a_read: a0 + SRC,
        a_result: a0 + SRC + ops * MAX_LEN as usize,
        b_target: b0,
        b_recv: b0 + TARGET,
        b_words: b0 + TARGET + ops * MAX_LEN as usize,
        ops: Vec::new(),
        src,
        initial_target: target.clone(),
        initial_words: words,
        target,
        words,
        read_expect: Vec::new(),
        result_expect: Vec::new(),
        recv_expect: Vec::new(),
    };
    let (a_addr, b_addr) = (a.addr(), b.addr());
    for i in 0..ops {
        let kind = rng.below(KINDS as u64) as usize;
        // Mostly small, sometimes several MTUs, sometimes empty.
        let len = match rng.below(10) {
            0 => 0,
            1..=5 => 1 + rng.below(1024),
            _ => 1 + rng.below(MAX_LEN),
        } as u32;
        let src_off = rng.below((SRC as u64) - u64::from(len)) as usize;
        let tgt_off = rng.below((TARGET as u64) - u64::from(len)) as usize;
        let remote = b_addr + (p.b_target + tgt_off) as u64;
        let local = |off: usize, n: u32| (a_addr + off as u64, n);
        let id = (q as u64) << 32 | i as u64;
        let data = p.src[src_off..src_off + len as usize].to_vec();
        let wr = match kind {
            0 | 1 => {
                p.target[tgt_off..tgt_off + len as usize].copy_from_slice(&data);
                if kind == 0 {
                    SendWr::new(id, WrOp::rdma_write(remote, b.rkey()))
                } else {
                    let imm = rng.next() as u32;
                    p.recv_expect.push((Vec::new(), Some(imm)));
                    let op = WrOp::RdmaWriteWithImm {
                        remote_addr: remote,
                        rkey: b.rkey(),
                        imm,
                    };
                    SendWr::new(id, op)
                }
            }
            2 => {
                let slot = p.a_read + p.read_expect.len() * MAX_LEN as usize;
                let got = p.target[tgt_off..tgt_off + len as usize].to_vec();
                p.read_expect.push((slot, got));
                let (addr, n) = local(slot, len);
                let wr = SendWr::new(id, WrOp::rdma_read(remote, b.rkey())).sge(addr, n, a.lkey());
                p.ops.push(Op {
                    wr,
                    kind,
                    len,
                    fence: false,
                });
                continue;
            }
            3 => {
                p.recv_expect.push((data.clone(), None));
                SendWr::new(id, WrOp::Send)
            }
            _ => {
                let k = rng.below(WORDS as u64) as usize;
                let remote_addr = b_addr + (p.b_words + 8 * k) as u64;
                let old = p.words[k];
                let op = if kind == 4 {
                    let add = rng.next();
                    p.words[k] = old.wrapping_add(add);
                    WrOp::AtomicFetchAndAdd {
                        remote_addr,
                        rkey: b.rkey(),
                        add,
                    }
                } else {
                    // Half the compares match.
                    let compare = if rng.below(2) == 0 { old } else { rng.next() };
                    let swap = rng.next();
                    if compare == old {
                        p.words[k] = swap;
                    }
                    WrOp::AtomicCmpAndSwp {
                        remote_addr,
                        rkey: b.rkey(),
                        compare,
                        swap,
                    }
                };
                let slot = p.a_result + 8 * p.result_expect.len();
                p.result_expect.push((slot, old));
                let (addr, _) = local(slot, 8);
                p.ops.push(Op {
                    wr: SendWr::new(id, op).sge(addr, 8, a.lkey()),
                    kind,
                    len: 8,
                    fence: false,
                });
                continue;
            }
        };
        let (addr, n) = local(p.a_src + src_off, len);
        let wr = if len > 0 {
            wr.sge(addr, n, a.lkey())
        } else {
            wr
        };
        // A WRITE after a READ; under selective repeat, after any earlier WRITE too.
        let fence = kind <= 1 && p.ops.iter().any(|o| o.kind == 2 || (sr && o.kind <= 1));
        p.ops.push(Op {
            wr,
            kind,
            len,
            fence,
        });
    }
    p
}

/// One side: its CQ, region and QPs.
struct Side {
    cq: CompletionQueue,
    mr: MemoryRegion,
    qps: Vec<QueuePair>,
}

/// NIC `index` (0 or 1): the firmware handles every packet (no fast path), so the run
/// exercises the runtime and the engine under faults.
fn nic(backend: Backend, index: usize) -> Result<Rc<dyn NicModel>, String> {
    let datapath = match backend {
        Backend::Software => Datapath::Software,
        Backend::Rtl => Datapath::Rtl(roce_hdl_sim::DataWidth::W64),
    };
    boot(datapath, false, port_config(index), Capacities::Firmware)
        .map_err(|e| format!("the RTL model: {e}"))
}

fn side(ctx: &Context, qps: usize, region: usize) -> Result<Side, String> {
    fn e(what: &'static str) -> impl Fn(roce_host::Error) -> String {
        move |err| format!("{what}: {err}")
    }
    let pd = ctx.alloc_pd().map_err(e("alloc_pd"))?;
    let cq = ctx.create_cq(4096).map_err(e("create_cq"))?;
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mr = pd.reg_mr(region, access).map_err(e("reg_mr"))?;
    let qps = (0..qps)
        .map(|_| {
            pd.create_qp(QpType::Rc, &cq, &cq)
                .max_send_wr(SQ)
                .max_recv_wr(RQ)
                .build()
                .map_err(e("create_qp"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Side { cq, mr, qps })
}

/// Runs one chaos configuration; `Err` says what was violated.
///
/// A QP pair whose requester ends `RETRY_EXC_ERR` leaves the run (the others go on);
/// the run, deterministic, is then repeated with both ends captured in memory, and it
/// passes only if `proof::retry_budget_spent_by_link` shows that the link lost every
/// retry or its answer. Its completions up to the failure, the receives and the READ
/// and atomic results among them are still checked; its target memory is not (which of
/// the WRs in flight executed is not known).
pub fn run(cfg: &Config) -> Result<Report, String> {
    match run_once(cfg, None)? {
        Some(report) => Ok(report),
        None => {
            let captures = [MemoryCapture::new(), MemoryCapture::new()];
            run_once(cfg, Some(&captures))?
                .ok_or_else(|| "the repeated run asked for captures again".into())
        }
    }
}

/// One run; `None` when a requester ended `RETRY_EXC_ERR` and `captures` (each end's)
/// were not given to prove that the link caused it.
fn run_once(cfg: &Config, captures: Option<&[MemoryCapture; 2]>) -> Result<Option<Report>, String> {
    let mut rng = Rng(cfg.seed);
    let nics = [nic(cfg.backend, 0)?, nic(cfg.backend, 1)?];
    let link = LinkConfig::new(100_000_000_000, 2_000).with_faults(cfg.faults);
    let mut sim = Sim::back_to_back(nics, link, cfg.seed).map_err(|e| format!("open: {e}"))?;
    if let Some(dir) = std::env::var_os("ROCE_CHAOS_PCAP") {
        // What each NIC sends (lost or not) and receives, and what the link delivers.
        let dir = std::path::Path::new(&dir);
        for (name, end) in [
            ("a.pcap", Some(0)),
            ("b.pcap", Some(1)),
            ("delivered.pcap", None),
        ] {
            let f = std::fs::File::create(dir.join(name)).map_err(|e| e.to_string())?;
            let out = std::io::BufWriter::new(f);
            match end {
                Some(end) => sim.fabric.tap_end(sim.link, end, out),
                None => sim.fabric.tap(sim.link, out),
            }
            .map_err(|e| e.to_string())?;
        }
    }
    for (end, cap) in captures.into_iter().flatten().enumerate() {
        sim.fabric
            .tap_end(sim.link, end, cap.clone())
            .map_err(|e| e.to_string())?;
    }
    let [ca, cb] = sim.contexts().map(Context::clone);
    let a = side(&ca, cfg.qps, cfg.qps * a_area(cfg.ops))?;
    let b = side(&cb, cfg.qps, cfg.qps * b_area(cfg.ops))?;
    let opts = ConnectOptions {
        // 4.2 ms: retries come back quickly enough for hundreds of losses.
        timeout: 10,
        selective_repeat: cfg.selective_repeat.then(|| SrAttr {
            enabled: true,
            max_inflight: 0,
            rto_low: AckTimeout::new(4).unwrap_or(AckTimeout::INFINITE),
        }),
        ..ConnectOptions::default()
    };
    let mut pairs = Vec::new();
    for q in 0..cfg.qps {
        // PSNs near the wrap.
        let (pa, pb) = (0xFF_FF00 + q as u32 * 16, 0xFF_FFF0 - q as u32 * 16);
        let (qa, qb) = (&a.qps[q], &b.qps[q]);
        let (pa, pb) = (Psn::new(pa), Psn::new(pb));
        qa.connect(&qb.endpoint(pb), pa, &opts)
            .map_err(|e| format!("connect: {e}"))?;
        qb.connect(&qa.endpoint(pa), pb, &opts)
            .map_err(|e| format!("connect: {e}"))?;
        let p = plan(&mut rng, q, cfg.ops, cfg.selective_repeat, &a.mr, &b.mr);
        a.mr.write(p.a_src, &p.src).map_err(|e| e.to_string())?;
        let words: Vec<u8> = p
            .initial_words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        b.mr.write(p.b_target, &p.initial_target)
            .and_then(|()| b.mr.write(p.b_words, &words))
            .map_err(|e| e.to_string())?;
        pairs.push(p);
    }
    let mut report = Report::default();
    let mut next = vec![0usize; cfg.qps];
    let mut next_recv = vec![0usize; cfg.qps];
    let mut sends: Vec<Vec<WorkCompletion>> = vec![Vec::new(); cfg.qps];
    let mut recvs: Vec<Vec<WorkCompletion>> = vec![Vec::new(); cfg.qps];
    let expected_recvs: Vec<usize> = pairs.iter().map(|p| p.recv_expect.len()).collect();
    let mut buf = [WorkCompletion::default(); 64];
    // Pairs whose requester ended RETRY_EXC_ERR: no more WRs for them.
    let mut spent = vec![false; cfg.qps];
    // A bound on simulated time: a stuck QP ends the run instead of spinning.
    let limit = 30_000_000_000u64;
    loop {
        for (q, p) in pairs.iter().enumerate().filter(|&(q, _)| !spent[q]) {
            // Receives stay posted ahead of the SENDs (an RNR wait would only slow it).
            while next_recv[q] < p.recv_expect.len() && next_recv[q] - recvs[q].len() < RQ {
                let r = next_recv[q];
                let slot = b.mr.addr() + (p.b_recv + r * MAX_LEN as usize) as u64;
                let wr = RecvWr::new(recv_id(q, r)).sge(slot, MAX_LEN as u32, b.mr.lkey());
                b.qps[q]
                    .post_recv(&wr)
                    .map_err(|e| format!("post_recv: {e}"))?;
                next_recv[q] += 1;
                sim.kick(1);
            }
            while next[q] < p.ops.len() && next[q] - sends[q].len() < SQ {
                let op = &p.ops[next[q]];
                let flags = if op.fence {
                    SendFlags::SIGNALED | SendFlags::FENCE
                } else {
                    SendFlags::SIGNALED
                };
                let wr = op.wr.clone().flags(flags);
                a.qps[q]
                    .post_send(&wr)
                    .map_err(|e| format!("post_send: {e}"))?;
                report.ops[op.kind] += 1;
                report.bytes += u64::from(op.len);
                next[q] += 1;
                sim.kick(0);
            }
        }
        for (cq, out) in [(&a.cq, &mut sends), (&b.cq, &mut recvs)] {
            loop {
                let wcs = cq.poll(&mut buf).map_err(|e| format!("poll: {e}"))?;
                let n = wcs.len();
                for wc in wcs.iter() {
                    let q = (wc.wr_id >> 32) as usize;
                    out.get_mut(q)
                        .ok_or_else(|| format!("a completion for no QP: {wc:?}"))?
                        .push(*wc);
                }
                if n == 0 {
                    break;
                }
            }
        }
        for (q, s) in spent.iter_mut().enumerate() {
            *s |= sends[q].iter().any(|c| c.status == WcStatus::RetryExcErr);
        }
        let done = (0..cfg.qps).all(|q| {
            spent[q]
                || (sends[q].len() == pairs[q].ops.len() && recvs[q].len() == expected_recvs[q])
        });
        if done {
            break;
        }
        if !sim.advance() || sim.now() > limit {
            let waiting: Vec<String> = (0..cfg.qps)
                .filter(|&q| {
                    !spent[q]
                        && (sends[q].len() < pairs[q].ops.len()
                            || recvs[q].len() < expected_recvs[q])
                })
                .map(|q| {
                    let failed = sends[q]
                        .iter()
                        .chain(&recvs[q])
                        .find(|c| c.status != WcStatus::Success);
                    format!(
                        "QP pair {q}: {}/{} sends, {}/{} receives, QPs in {:?} and {:?}, \
                         first failed completion {failed:?}",
                        sends[q].len(),
                        pairs[q].ops.len(),
                        recvs[q].len(),
                        expected_recvs[q],
                        device_state(&a.qps[q]),
                        device_state(&b.qps[q]),
                    )
                })
                .collect();
            return Err(format!("stuck at {} ns: {}", sim.now(), waiting.join("; ")));
        }
    }
    report.sim_ns = sim.now();
    for c in sim.fabric.link_counters(sim.link) {
        report.frames += c.frames;
        report.lost += c.lost;
        report.duplicated += c.duplicated;
        report.reordered += c.reordered;
        report.corrupted += c.corrupted;
    }
    report.retransmits = sim.counters().retransmits;
    if spent.contains(&true) {
        let Some([cap_a, cap_b]) = captures else {
            return Ok(None);
        };
        let (pcap_a, pcap_b) = (cap_a.bytes(), cap_b.bytes());
        for q in (0..cfg.qps).filter(|&q| spent[q]) {
            let end = |pcap, i, qp: &QueuePair| proof::End {
                pcap,
                mac: port_config(i).mac,
                qpn: qp.qpn(),
            };
            let why = proof::retry_budget_spent_by_link(
                &end(&pcap_a, 0, &a.qps[q]),
                &end(&pcap_b, 1, &b.qps[q]),
                opts.retry_cnt,
            )
            .map_err(|e| format!("QP pair {q} ended RETRY_EXC_ERR, not the link's doing: {e}"))?;
            report.spent_by_link.push(format!("QP pair {q}: {why}"));
        }
    }

    for (q, p) in pairs.iter().enumerate() {
        if spent[q] {
            check_spent(q, p, &sends[q], &recvs[q], &a.mr, &b.mr)?;
            let states = (device_state(&a.qps[q]), device_state(&b.qps[q]));
            if states != (Some(QpState::Err), Some(QpState::Rts)) {
                return Err(format!(
                    "QP pair {q}: after RETRY_EXC_ERR the QPs are in {states:?}, not (Err, Rts)"
                ));
            }
            continue;
        }
        check_sends(q, p, &sends[q])?;
        check_recvs(q, p, &recvs[q])?;
        check_memory(q, p, &a.mr, &b.mr)?;
        for qp in [&a.qps[q], &b.qps[q]] {
            let state = device_state(qp);
            if state != Some(QpState::Rts) || qp.send_outstanding() != 0 {
                return Err(format!(
                    "QP pair {q}: QP {:?} left in {state:?} with {} outstanding",
                    qp.qpn(),
                    qp.send_outstanding()
                ));
            }
        }
    }
    Ok(Some(report))
}

/// The QP's state as the device has it (`ibv_query_qp`: it may have gone to ERR on
/// its own since the last modify).
fn device_state(qp: &QueuePair) -> Option<QpState> {
    qp.query().ok().and_then(|a| a.qp_state)
}

fn recv_id(q: usize, r: usize) -> u64 {
    (q as u64) << 32 | (1 << 31) | r as u64
}

fn check_sends(q: usize, p: &Pair, got: &[WorkCompletion]) -> Result<(), String> {
    for (op, wc) in p.ops.iter().zip(got) {
        let opcode = op.wr.op.opcode().wc_opcode();
        let want = (op.wr.wr_id, WcStatus::Success, opcode);
        if (wc.wr_id, wc.status, wc.opcode) != want {
            return Err(format!(
                "QP pair {q}: send completion {wc:?}, expected {want:?} (in posting order)"
            ));
        }
        if matches!(op.kind, 2 | 4 | 5) && wc.byte_len != op.len {
            return Err(format!(
                "QP pair {q}: byte_len of {wc:?}, expected {}",
                op.len
            ));
        }
    }
    Ok(())
}

fn check_recvs(q: usize, p: &Pair, got: &[WorkCompletion]) -> Result<(), String> {
    for (r, ((data, imm), wc)) in p.recv_expect.iter().zip(got).enumerate() {
        let opcode = if imm.is_some() {
            WcOpcode::RecvRdmaWithImm
        } else {
            WcOpcode::Recv
        };
        let with_imm = wc.wc_flags.contains(WcFlags::WITH_IMM);
        let ok = wc.wr_id == recv_id(q, r)
            && wc.status == WcStatus::Success
            && wc.opcode == opcode
            && (imm.is_none() || (with_imm && Some(wc.imm_data) == *imm))
            && (imm.is_some() || wc.byte_len as usize == data.len());
        if !ok {
            return Err(format!(
                "QP pair {q}: receive {r} completed as {wc:?}, expected {opcode:?} of {} bytes, imm {imm:?}",
                data.len()
            ));
        }
    }
    Ok(())
}

/// A pair whose requester ended `RETRY_EXC_ERR`: its send completions are the model's
/// in posting order up to the failed one, then flushes; the receives that completed are
/// right, bytes included; so are the READ data and atomic results of the WRs that
/// completed (every earlier WR executed before them: RC executes in order).
fn check_spent(
    q: usize,
    p: &Pair,
    sends: &[WorkCompletion],
    recvs: &[WorkCompletion],
    a: &MemoryRegion,
    b: &MemoryRegion,
) -> Result<(), String> {
    let ok = sends
        .iter()
        .position(|c| c.status != WcStatus::Success)
        .unwrap_or(sends.len());
    check_sends(q, p, &sends[..ok])?;
    let rest: Vec<WcStatus> = sends[ok..].iter().map(|c| c.status).collect();
    if rest.first() != Some(&WcStatus::RetryExcErr)
        || rest[1..].iter().any(|&s| s != WcStatus::WrFlushErr)
    {
        return Err(format!(
            "QP pair {q}: after {ok} successful sends the statuses {rest:?}, expected \
             RETRY_EXC_ERR then flushes"
        ));
    }
    check_recvs(q, p, recvs)?;
    let done = &p.ops[..ok];
    let counts = Done {
        recvs: recvs.len(),
        reads: done.iter().filter(|o| o.kind == 2).count(),
        atomics: done.iter().filter(|o| o.kind >= 4).count(),
    };
    check_results(q, p, a, b, counts)
}

/// How many of a pair's receives, READs and atomics completed.
struct Done {
    recvs: usize,
    reads: usize,
    atomics: usize,
}

fn read(mr: &MemoryRegion, off: usize, len: usize) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; len];
    mr.read(off, &mut v).map(|()| v).map_err(|e| e.to_string())
}

fn check_memory(q: usize, p: &Pair, a: &MemoryRegion, b: &MemoryRegion) -> Result<(), String> {
    if read(b, p.b_target, TARGET)? != p.target {
        return Err(format!(
            "QP pair {q}: the responder's target differs from the model"
        ));
    }
    let words = read(b, p.b_words, WORDS * 8)?;
    for (k, want) in p.words.iter().enumerate() {
        let got = u64::from_le_bytes(words[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        if got != *want {
            return Err(format!(
                "QP pair {q}: atomic word {k} is {got:#x}, model {want:#x}"
            ));
        }
    }
    let all = Done {
        recvs: p.recv_expect.len(),
        reads: p.read_expect.len(),
        atomics: p.result_expect.len(),
    };
    check_results(q, p, a, b, all)
}

/// The first `done.recvs` receive buffers, `done.reads` READ destinations and
/// `done.atomics` atomic results hold what the model says.
fn check_results(
    q: usize,
    p: &Pair,
    a: &MemoryRegion,
    b: &MemoryRegion,
    done: Done,
) -> Result<(), String> {
    for (r, (data, _)) in p.recv_expect.iter().enumerate().take(done.recvs) {
        if read(b, p.b_recv + r * MAX_LEN as usize, data.len())? != *data {
            return Err(format!(
                "QP pair {q}: receive {r} holds other bytes than sent"
            ));
        }
    }
    for (i, (slot, data)) in p.read_expect.iter().enumerate().take(done.reads) {
        if read(a, *slot, data.len())? != *data {
            return Err(format!(
                "QP pair {q}: READ {i} brought other bytes than the model's"
            ));
        }
    }
    for (i, (slot, old)) in p.result_expect.iter().enumerate().take(done.atomics) {
        let got = u64::from_le_bytes(read(a, *slot, 8)?.try_into().expect("8 bytes"));
        if got != *old {
            return Err(format!(
                "QP pair {q}: atomic {i} returned {got:#x}, model {old:#x}"
            ));
        }
    }
    Ok(())
}
