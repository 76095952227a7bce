//! Cycle-level driver of the Verilated DCB block (`rtl/roce_dcb_top.sv`): PFC reception
//! with per-priority quanta timers, PFC generation from the receive buffer's occupancy,
//! eight priority queues scheduled by ETS. Its software model is `roce_core::dcb`;
//! `tests/dcb.rs` runs the two side by side.
//!
//! The wire side: [`DcbSim::push_rx_frame`] (frames arriving) and
//! [`DcbSim::pop_tx_frame`] (frames sent); the datapath side: [`DcbSim::push_tx_frame`]
//! (frames to send) and [`DcbSim::pop_rx_frame`] (frames received). Whether the wire
//! takes frames and the datapath drains the buffer is the caller's choice, cycle by
//! cycle ([`DcbSim::set_ready`]).

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;

use roce_core::dcb::Priorities;
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::pfc::PfcRepr;

use crate::sim::{Beat, DataWidth, SimError, Timed};

pub use roce_core::dcb::{reg, DcbRegs};

/// What the block showed during one clock cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DcbCycle {
    pub cycle: u64,
    /// TX queues with room for a frame.
    pub tx_room: Priorities,
    /// Priorities paused by the link partner (pause timer running, PFC on).
    pub paused: Priorities,
    /// Priorities this port has paused towards its link partner.
    pub xoff: Priorities,
    /// Priorities whose state the next PFC frame announces.
    pub announce: Priorities,
    /// The transmitter took the announcement into a PFC frame.
    pub pfc_take: bool,
    /// The refresh timer fired (XOFF priorities announced again).
    pub refresh_fire: bool,
    /// A PFC request received (applied to the timers at this cycle's edge).
    pub pause_req: Option<PfcRepr>,
    /// A frame (priority, bytes) entered the receive buffer.
    pub add: Option<(u8, u16)>,
    /// A frame left it.
    pub sub: Option<(u8, u16)>,
    /// A transmission selection: the eligible set it was made from, and the priority.
    pub decision: Option<(Priorities, u8)>,
}

/// Counters of the block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DcbCounters {
    pub rx_pfc_frames: u32,
    pub rx_bad_mac_ctl: u32,
    pub rx_drops: u32,
}

#[cfg(not(roce_rtl_unavailable))]
type Inner = cxx::UniquePtr<crate::ffi::bridge::DcbModel>;
#[cfg(roce_rtl_unavailable)]
type Inner = core::convert::Infallible;

/// The Verilated DCB block with its input queues and output collectors.
pub struct DcbSim {
    inner: Inner,
    width: DataWidth,
    cycle: u64,
    cfg_wr: VecDeque<(u8, u32)>,
    rx_in: VecDeque<Beat>,
    tx_in: VecDeque<Beat>,
    wire_ready: bool,
    drain_ready: bool,
    tx_cur: Vec<u8>,
    tx_frames: VecDeque<Timed<Vec<u8>>>,
    rx_cur: Vec<u8>,
    rx_frames: VecDeque<Timed<Vec<u8>>>,
    tx_in_frames: usize,
    counters: DcbCounters,
    last: DcbCycle,
}

impl fmt::Debug for DcbSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DcbSim")
            .field("width", &self.width)
            .field("cycle", &self.cycle)
            .finish()
    }
}

impl DcbSim {
    /// A block of `width`, reset, its wire and datapath always ready.
    pub fn new(width: DataWidth) -> Result<DcbSim, SimError> {
        DcbSim::build(width, false)
    }

    /// Like [`DcbSim::new`], writing an FST waveform of every cycle to `path`.
    pub fn with_trace(width: DataWidth, path: &Path) -> Result<DcbSim, SimError> {
        let mut s = DcbSim::build(width, true)?;
        s.open_trace(path)?;
        s.reset();
        Ok(s)
    }

    #[cfg(not(roce_rtl_unavailable))]
    fn build(width: DataWidth, trace: bool) -> Result<DcbSim, SimError> {
        let inner = crate::ffi::bridge::new_dcb_model(width.bits(), trace)
            .map_err(|e| SimError::Model(e.to_string()))?;
        let mut s = DcbSim::with_inner(inner, width);
        s.reset();
        Ok(s)
    }

    #[cfg(roce_rtl_unavailable)]
    fn build(_width: DataWidth, _trace: bool) -> Result<DcbSim, SimError> {
        Err(SimError::Unavailable)
    }

    fn with_inner(inner: Inner, width: DataWidth) -> DcbSim {
        DcbSim {
            inner,
            width,
            cycle: 0,
            cfg_wr: VecDeque::new(),
            rx_in: VecDeque::new(),
            tx_in: VecDeque::new(),
            wire_ready: true,
            drain_ready: true,
            tx_cur: Vec::new(),
            tx_frames: VecDeque::new(),
            rx_cur: Vec::new(),
            rx_frames: VecDeque::new(),
            tx_in_frames: 0,
            counters: DcbCounters::default(),
            last: DcbCycle::default(),
        }
    }

    pub fn width(&self) -> DataWidth {
        self.width
    }

    /// Clock cycles since reset.
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Holds reset for 4 cycles and drops everything queued or collected (the
    /// configuration returns to its reset values).
    pub fn reset(&mut self) {
        self.model_reset(4);
        self.cycle = 0;
        self.cfg_wr.clear();
        self.rx_in.clear();
        self.tx_in.clear();
        self.tx_cur.clear();
        self.tx_frames.clear();
        self.rx_cur.clear();
        self.rx_frames.clear();
        self.tx_in_frames = 0;
        self.last = DcbCycle::default();
    }

    /// Queues the register writes of `regs` (one per cycle, before anything else).
    pub fn configure(&mut self, regs: &DcbRegs) {
        self.cfg_wr.extend(regs.writes());
    }

    /// Queues one register write.
    pub fn write_reg(&mut self, addr: u8, data: u32) {
        self.cfg_wr.push_back((addr, data));
    }

    /// Whether the wire takes transmitted beats and the datapath takes received ones,
    /// from the next cycle on.
    pub fn set_ready(&mut self, wire: bool, drain: bool) {
        self.wire_ready = wire;
        self.drain_ready = drain;
    }

    /// Queues a frame arriving from the wire.
    pub fn push_rx_frame(&mut self, frame: &[u8]) {
        self.rx_in.extend(Beat::split(frame, self.width));
    }

    /// Queues a frame from the datapath, to be sent.
    pub fn push_tx_frame(&mut self, frame: &[u8]) {
        self.tx_in.extend(Beat::split(frame, self.width));
        self.tx_in_frames += 1;
    }

    /// Frames from the datapath not yet taken in whole.
    pub fn tx_pending(&self) -> usize {
        self.tx_in_frames
    }

    /// Whether register writes are still waiting to go in.
    pub fn config_pending(&self) -> bool {
        !self.cfg_wr.is_empty()
    }

    /// Whether frames are still waiting to enter the block from either side.
    pub fn inputs_pending(&self) -> bool {
        !self.rx_in.is_empty() || !self.tx_in.is_empty() || !self.cfg_wr.is_empty()
    }

    /// The next frame the block sent on the wire, with the cycle of its last beat.
    pub fn pop_tx_frame(&mut self) -> Option<Timed<Vec<u8>>> {
        self.tx_frames.pop_front()
    }

    /// The next frame the block handed to the datapath.
    pub fn pop_rx_frame(&mut self) -> Option<Timed<Vec<u8>>> {
        self.rx_frames.pop_front()
    }

    /// What the last cycle showed.
    pub fn last(&self) -> &DcbCycle {
        &self.last
    }

    /// The counters as of the last cycle.
    pub fn counters(&self) -> DcbCounters {
        self.counters
    }

    #[cfg(roce_rtl_unavailable)]
    fn model_reset(&mut self, _cycles: u32) {
        match self.inner {}
    }

    #[cfg(not(roce_rtl_unavailable))]
    fn model_reset(&mut self, cycles: u32) {
        self.inner.pin_mut().reset(cycles);
    }

    trace_methods!();

    /// One clock cycle; what the block showed during it.
    #[cfg(roce_rtl_unavailable)]
    pub fn tick(&mut self) -> DcbCycle {
        match self.inner {}
    }

    /// One clock cycle; what the block showed during it.
    #[cfg(not(roce_rtl_unavailable))]
    pub fn tick(&mut self) -> DcbCycle {
        use crate::ffi::bridge::{AxisIn, DcbIn, DcbOut};

        let axis = |b: Option<&Beat>| match b {
            Some(b) => AxisIn {
                data: b.data,
                keep: b.keep,
                valid: true,
                last: b.last,
            },
            None => AxisIn::default(),
        };
        let mut input = DcbIn {
            rx: axis(self.rx_in.front()),
            tx: axis(self.tx_in.front()),
            tx_out_ready: self.wire_ready,
            rx_out_ready: self.drain_ready,
            ..DcbIn::default()
        };
        if let Some(&(a, d)) = self.cfg_wr.front() {
            (input.cfg_wr_valid, input.cfg_wr_addr, input.cfg_wr_data) = (true, a, d);
        }
        let mut out = DcbOut::default();
        self.inner.pin_mut().cycle(&input, &mut out);
        let cyc = self.cycle;
        self.cycle += 1;

        if input.cfg_wr_valid {
            self.cfg_wr.pop_front();
        }
        if input.rx.valid && out.rx_in_ready {
            self.rx_in.pop_front();
        }
        if input.tx.valid && out.tx_in_ready {
            self.tx_in.pop_front();
            if input.tx.last {
                self.tx_in_frames -= 1;
            }
        }
        let collect = |o: &crate::ffi::bridge::AxisOut,
                       cur: &mut Vec<u8>,
                       frames: &mut VecDeque<Timed<Vec<u8>>>| {
            let b = Beat {
                data: o.data,
                keep: o.keep,
                last: o.last,
            };
            cur.extend(b.bytes());
            if b.last {
                frames.push_back(Timed {
                    cycle: cyc,
                    value: std::mem::take(cur),
                });
            }
        };
        if out.tx_out.valid && input.tx_out_ready {
            collect(&out.tx_out, &mut self.tx_cur, &mut self.tx_frames);
        }
        if out.rx_out.valid && input.rx_out_ready {
            collect(&out.rx_out, &mut self.rx_cur, &mut self.rx_frames);
        }
        (self.last, self.counters) = observe(cyc, &out);
        self.last
    }
}

/// What the block's observation ports showed in cycle `cycle` (its model's, or the
/// SoC's block's), as the lockstep takes it.
#[cfg(not(roce_rtl_unavailable))]
pub(crate) fn observe(cycle: u64, out: &crate::ffi::bridge::DcbOut) -> (DcbCycle, DcbCounters) {
    let mut quanta = [0u16; 8];
    for (p, q) in quanta.iter_mut().enumerate() {
        *q = (out.pause_req_quanta[p / 4] >> (16 * (p % 4))) as u16;
    }
    let c = DcbCycle {
        cycle,
        tx_room: Priorities(out.tx_room),
        paused: Priorities(out.paused),
        xoff: Priorities(out.xoff),
        announce: Priorities(out.announce),
        pfc_take: out.pfc_take,
        refresh_fire: out.refresh_fire,
        pause_req: out.pause_req_valid.then_some(PfcRepr {
            enable: out.pause_req_enable,
            quanta,
        }),
        add: out.add_valid.then_some((out.add_prio, out.add_len)),
        sub: out.sub_valid.then_some((out.sub_prio, out.sub_len)),
        decision: out
            .dec_valid
            .then_some((Priorities(out.dec_eligible), out.dec_prio)),
    };
    let k = DcbCounters {
        rx_pfc_frames: out.rx_pfc_frames,
        rx_bad_mac_ctl: out.rx_bad_mac_ctl,
        rx_drops: out.rx_drops,
    };
    (c, k)
}

/// The software model (`roce_core::dcb`) beside a running block, fed with what the block
/// was given and what it showed, checking every cycle: the pause state against the
/// model's pause timers, the XOFF/XON state and every PFC frame sent against `PfcGen`,
/// each scheduling decision against `Ets` (from the eligible set the block used, which
/// must hold only queued, unpaused priorities), and the wire's frames in order.
///
/// Used by the block's own differential (`tests/dcb.rs`), by a NIC whose MAC is the
/// block (`roce_testbed::rtl_dcb`), where the clock is the fabric's time, and by the
/// SoC's block ([`DcbLockstep::without_queues`]: frames pass in order, each one's start
/// a decision from its own priority, which must not be paused).
#[derive(Debug)]
pub struct DcbLockstep {
    cfg: DcbRegs,
    period_ns: u64,
    link_bps: u64,
    timers: roce_core::dcb::PauseTimers,
    gen: roce_core::dcb::PfcGen,
    ets: roce_core::dcb::Ets,
    /// Frames handed to the block, per priority, not yet chosen.
    queues: [VecDeque<Vec<u8>>; 8],
    /// The block is built without transmit queues (`QUEUE_BYTES = 0`).
    no_queues: bool,
    /// What the wire must carry next, in order.
    wire: VecDeque<Expect>,
    /// Data frames fed from the wire, not yet in the buffer / in it.
    rx_expected: VecDeque<Vec<u8>>,
    rx_held: VecDeque<Vec<u8>>,
    /// PFC requests fed from the wire, not yet through.
    pfc_expected: VecDeque<PfcRepr>,
    /// The block's paused set of the last few cycles (decisions look 5 back).
    paused_hist: VecDeque<Priorities>,
    drops: u32,
    /// The buffer's count changes of the cycle before (into the buffer, out of it):
    /// the block compares a count with the thresholds a cycle after it changes.
    counted: (BufferChange, BufferChange),
    /// Scheduling decisions checked.
    pub decisions: u64,
    /// PFC frames the block built (announcements taken).
    pub takes: u64,
    /// XOFF refreshes.
    pub fires: u64,
    /// Every priority the block ever had in XOFF.
    pub max_xoff: Priorities,
    /// Every priority it ever had paused.
    pub max_paused: Priorities,
}

/// Bytes of one priority entering or leaving the receive buffer in a cycle.
type BufferChange = Option<(u8, u16)>;

/// Cycles of the block's pipeline between the eligible set and its decision.
const DECISION_LAG: usize = 5;
/// The same without queues (the decision is registered once).
const DIRECT_LAG: usize = 1;

/// A frame the wire must carry.
#[derive(Debug)]
enum Expect {
    /// These bytes (a queued frame, a PFC frame).
    Frame(Vec<u8>),
    /// A frame of this priority passed through (no queues: the bytes are the
    /// datapath's).
    Data(u8),
}

impl DcbLockstep {
    /// The model of a block just configured with `cfg` (nothing queued, nothing paused),
    /// clocked every `period_ns` on a link of `link_bps`.
    pub fn new(cfg: DcbRegs, period_ns: u64, link_bps: u64) -> Self {
        Self {
            cfg,
            period_ns,
            link_bps,
            timers: Default::default(),
            gen: Default::default(),
            ets: Default::default(),
            queues: Default::default(),
            no_queues: false,
            wire: VecDeque::new(),
            rx_expected: VecDeque::new(),
            rx_held: VecDeque::new(),
            pfc_expected: VecDeque::new(),
            paused_hist: VecDeque::new(),
            drops: 0,
            counted: (None, None),
            decisions: 0,
            takes: 0,
            fires: 0,
            max_xoff: Priorities::NONE,
            max_paused: Priorities::NONE,
        }
    }

    /// The model of a block built without transmit queues (the SoC's).
    pub fn without_queues(cfg: DcbRegs, period_ns: u64, link_bps: u64) -> Self {
        Self {
            no_queues: true,
            ..Self::new(cfg, period_ns, link_bps)
        }
    }

    /// The configuration it checks against.
    pub fn regs(&self) -> &DcbRegs {
        &self.cfg
    }

    /// A frame was handed to the block's transmit side.
    pub fn tx_pushed(&mut self, frame: &[u8]) {
        let p = self.cfg.map.of_frame(frame);
        self.queues[usize::from(p)].push_back(frame.to_vec());
    }

    /// A frame was handed to the block's receive side (from the wire): PFC requests go
    /// to the pause timers, other MAC control frames nowhere, the rest to the buffer.
    pub fn rx_pushed(&mut self, frame: &[u8]) {
        match PfcRepr::parse_frame(frame) {
            Ok((_, req)) => self.pfc_expected.push_back(req),
            Err(_) if is_mac_control(frame) => {}
            Err(_) => self.rx_expected.push_back(frame.to_vec()),
        }
    }

    /// Bytes fed from the wire that the model expects in the receive buffer or on its
    /// way there.
    pub fn rx_bytes(&self) -> usize {
        self.rx_expected
            .iter()
            .chain(&self.rx_held)
            .map(Vec::len)
            .sum()
    }

    /// Checks one cycle of the block (`c`, with its counters `k` after it).
    pub fn check(&mut self, c: &DcbCycle, k: &DcbCounters) -> Result<(), String> {
        let now = c.cycle * self.period_ns;
        let on = self.cfg.pfc_enable;
        let t = self.cfg.thresholds;
        let cyc = c.cycle;
        let same = |what: &str, rtl: Priorities, model: Priorities| {
            if rtl == model {
                Ok(())
            } else {
                Err(format!(
                    "{what} at cycle {cyc}: RTL {rtl:?}, model {model:?}"
                ))
            }
        };
        // What the block shows this cycle is the model after the cycle before.
        same("paused", c.paused, self.timers.paused(now).and(on))?;
        same("xoff", c.xoff, self.gen.xoff())?;
        same("announce", c.announce, self.gen.announce())?;
        self.max_xoff = Priorities(self.max_xoff.0 | c.xoff.0);
        self.max_paused = Priorities(self.max_paused.0 | c.paused.0);
        // This cycle's events, in the block's order: the take, the refresh, the counts.
        if c.pfc_take {
            let req = self
                .gen
                .take_frame(now, &t, self.link_bps)
                .ok_or_else(|| format!("a PFC frame with nothing to announce, cycle {cyc}"))?;
            let mut buf = [0u8; 60];
            let n = req
                .emit_frame(MacAddr(self.cfg.mac), &mut buf)
                .map_err(|_| "PFC frame".to_string())?;
            self.wire.push_back(Expect::Frame(buf[..n].to_vec()));
            self.takes += 1;
        }
        let due = self.gen.poll_timeout().is_some_and(|at| at <= now);
        if c.refresh_fire != due {
            return Err(format!(
                "refresh at cycle {cyc}: RTL {}, model {due}",
                c.refresh_fire
            ));
        }
        self.fires += u64::from(due);
        self.gen.handle_timeout(now);
        // The counts that changed in the cycle before, compared now (the block
        // registers the compare, dcb_pfc_gen.sv).
        let (add, sub) = std::mem::take(&mut self.counted);
        match (add, sub) {
            (Some((p, a)), Some((q, b))) if p == q => {
                self.gen.update(p, a.into(), b.into(), on, &t);
            }
            _ => {
                if let Some((p, a)) = add {
                    self.gen.add(p, a.into(), on, &t);
                }
                if let Some((q, b)) = sub {
                    self.gen.remove(q, b.into(), on, &t);
                }
            }
        }
        // A frame the buffer had no room for (the RTL counts it as it arrives).
        while self.drops < k.rx_drops {
            self.drops += 1;
            self.rx_expected.pop_front();
        }
        let map = self.cfg.map;
        let matches = |f: &[u8], (p, len): (u8, u16), what: &str| {
            if (map.of_frame(f), f.len()) == (p, usize::from(len)) {
                Ok(())
            } else {
                Err(format!(
                    "{what} at cycle {cyc}: RTL priority {p}, {len} bytes; model {}, {}",
                    map.of_frame(f),
                    f.len()
                ))
            }
        };
        let (add, sub) = (c.add, c.sub);
        if let Some(a) = add {
            let f = self
                .rx_expected
                .pop_front()
                .ok_or_else(|| format!("a frame entered the buffer from nowhere, cycle {cyc}"))?;
            matches(&f, a, "buffer in")?;
            self.rx_held.push_back(f);
        }
        if let Some(s) = sub {
            let f = self
                .rx_held
                .pop_front()
                .ok_or_else(|| format!("a frame left an empty buffer, cycle {cyc}"))?;
            matches(&f, s, "buffer out")?;
        }
        self.counted = (add, sub);
        if let Some(req) = c.pause_req {
            let want = self.pfc_expected.pop_front();
            if want != Some(req) {
                return Err(format!(
                    "PFC request at cycle {cyc}: RTL {req:?}, fed {want:?}"
                ));
            }
            self.timers
                .apply(now + self.period_ns, &req, self.link_bps, on);
        }
        if let Some((elig, prio)) = c.decision {
            // The set was taken a few cycles before: queued frames (or the frame at the
            // input), none paused.
            let lag = if self.no_queues {
                DIRECT_LAG
            } else {
                DECISION_LAG
            };
            let then = self
                .paused_hist
                .len()
                .checked_sub(lag)
                .and_then(|i| self.paused_hist.get(i))
                .copied()
                .unwrap_or_default();
            if !elig.and(then).is_empty() {
                return Err(format!("a paused class was eligible, cycle {cyc}"));
            }
            if self.no_queues {
                if elig != Priorities::only(prio) {
                    return Err(format!(
                        "decision from {elig:?} for {prio} without queues, cycle {cyc}"
                    ));
                }
                self.wire.push_back(Expect::Data(prio));
                self.decisions += 1;
            } else {
                if let Some(p) =
                    (0..8u8).find(|&p| elig.contains(p) && self.queues[usize::from(p)].is_empty())
                {
                    return Err(format!("empty queue {p} eligible, cycle {cyc}"));
                }
                let want = self.ets.pick(&self.cfg.ets, elig);
                if want != Some(prio) {
                    return Err(format!(
                        "decision {} from {elig:?} at cycle {cyc}: RTL {prio}, model {want:?}",
                        self.decisions
                    ));
                }
                let f = self.queues[usize::from(prio)]
                    .pop_front()
                    .ok_or_else(|| format!("decision for an empty queue, cycle {cyc}"))?;
                self.ets.sent(&self.cfg.ets, elig, prio, f.len() as u32);
                self.wire.push_back(Expect::Frame(f));
                self.decisions += 1;
            }
        }
        self.paused_hist.push_back(c.paused);
        if self.paused_hist.len() > DECISION_LAG {
            self.paused_hist.pop_front();
        }
        Ok(())
    }

    /// Checks a frame the block put on the wire: the next one the model sent.
    pub fn wire_frame(&mut self, frame: &[u8], cycle: u64) -> Result<(), String> {
        let prio = self.cfg.map.of_frame(frame);
        match self.wire.pop_front() {
            Some(Expect::Frame(f)) if f == frame => Ok(()),
            Some(Expect::Data(p)) if p == prio && !is_mac_control(frame) => Ok(()),
            Some(Expect::Frame(f)) => Err(format!(
                "wire frame at cycle {cycle}: RTL {} bytes of priority {prio}, model {} bytes of priority {}",
                frame.len(),
                f.len(),
                self.cfg.map.of_frame(&f)
            )),
            Some(Expect::Data(p)) => Err(format!(
                "wire frame at cycle {cycle}: RTL {} bytes of priority {prio}, model a data frame of priority {p}",
                frame.len()
            )),
            None => Err(format!("wire frame at cycle {cycle} the model did not send")),
        }
    }
}

fn is_mac_control(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x88, 0x08][..])
}
