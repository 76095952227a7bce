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

use roce_core::dcb::{EtsConfig, PfcThresholds, Priorities, PriorityMap, COST_ONE};
use roce_core::wire::pfc::PfcRepr;

use crate::sim::{Beat, DataWidth, SimError, Timed};

/// Register word addresses of the block (`dcb_pkg.sv`).
pub mod reg {
    pub const PFC_ENABLE: u8 = 0;
    pub const STRICT: u8 = 1;
    /// 2..=9: the ETS cost per byte of priority 0..7.
    pub const COST0: u8 = 2;
    pub const XOFF: u8 = 10;
    pub const XON: u8 = 11;
    pub const QUANTA: u8 = 12;
    /// Link bit times per clock, Q16.8.
    pub const BPC: u8 = 13;
    pub const MAC_LO: u8 = 14;
    pub const MAC_HI: u8 = 15;
    /// 16..=23: DSCP 8k..8k+7, four bits each.
    pub const DSCP0: u8 = 16;
    pub const PCP: u8 = 24;
}

/// Everything the block is configured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcbRegs {
    /// Priorities with PFC on (pauses honoured, XOFF sent).
    pub pfc_enable: Priorities,
    pub ets: EtsConfig,
    pub map: PriorityMap,
    pub thresholds: PfcThresholds,
    /// The port's MAC (source of its PFC frames).
    pub mac: [u8; 6],
    /// Link bit times per clock cycle, Q16.8 (100 Gb/s at 250 MHz: 400 << 8).
    pub bits_per_cycle_q8: u32,
}

impl DcbRegs {
    /// Link bit times per clock, Q16.8, for a link of `link_bps` and a clock of `clock_hz`.
    pub fn bits_per_cycle(link_bps: u64, clock_hz: u64) -> u32 {
        (u128::from(link_bps) * 256 / u128::from(clock_hz.max(1))) as u32
    }

    /// The register writes that configure the block so.
    pub fn writes(&self) -> Vec<(u8, u32)> {
        let mut w = vec![
            (reg::PFC_ENABLE, u32::from(self.pfc_enable.0)),
            (reg::STRICT, u32::from(self.ets.strict.0)),
            (reg::XOFF, self.thresholds.xoff.min(0xFF_FFFF)),
            (reg::XON, self.thresholds.xon.min(0xFF_FFFF)),
            (reg::QUANTA, u32::from(self.thresholds.quanta)),
            (reg::BPC, self.bits_per_cycle_q8 & 0xFF_FFFF),
            (
                reg::MAC_LO,
                u32::from_le_bytes([self.mac[0], self.mac[1], self.mac[2], self.mac[3]]),
            ),
            (
                reg::MAC_HI,
                u32::from_le_bytes([self.mac[4], self.mac[5], 0, 0]),
            ),
        ];
        for p in 0..8u8 {
            let cost = if self.ets.strict.contains(p) {
                COST_ONE
            } else {
                self.ets.cost(p)
            };
            w.push((reg::COST0 + p, cost));
        }
        let nibbles = |m: &[u8]| {
            m.iter()
                .enumerate()
                .fold(0u32, |acc, (i, &p)| acc | u32::from(p & 7) << (4 * i))
        };
        for k in 0..8u8 {
            let k8 = usize::from(k) * 8;
            w.push((reg::DSCP0 + k, nibbles(&self.map.dscp[k8..k8 + 8])));
        }
        w.push((reg::PCP, nibbles(&self.map.pcp)));
        w
    }
}

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
        self.counters = DcbCounters {
            rx_pfc_frames: out.rx_pfc_frames,
            rx_bad_mac_ctl: out.rx_bad_mac_ctl,
            rx_drops: out.rx_drops,
        };
        let mut quanta = [0u16; 8];
        for (p, q) in quanta.iter_mut().enumerate() {
            *q = (out.pause_req_quanta[p / 4] >> (16 * (p % 4))) as u16;
        }
        self.last = DcbCycle {
            cycle: cyc,
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
        self.last
    }
}
