//! The NIC's DCB MAC as RTL: `hdl-sim/rtl/roce_dcb_top.sv` (Verilated,
//! `roce_hdl_sim::DcbSim`) between a [`crate::NicNode`]'s NIC and its link, clocked
//! with the fabric's time. What the hardware does there, the RTL does here:
//!
//! * every frame from the wire enters the block: PFC frames drive its per-priority
//!   pause timers (802.1Qbb, quanta of 512 bit times at the link rate), the others go
//!   through its receive buffer to the NIC, and the buffer's occupancy per priority
//!   against the XOFF/XON thresholds makes the PFC frames the block sends;
//! * every frame the NIC builds goes into the block's queue of its priority (the port's
//!   map), and the block's ETS picks what the wire carries next among the queues that
//!   hold a frame and are not paused; the NIC builds a frame only for a priority whose
//!   queue has room (`tx_room`), so a paused priority's queue fills and stops only that
//!   priority.
//!
//! The fabric keeps no pause timers for such a port (`Node::own_mac_control`).
//!
//! Time. Cycle `n` of the block is at `n * period_ns` of the fabric's clock. The block is
//! clocked up to the fabric's `now` at every call the fabric makes; while it is idle
//! (nothing queued or in its buffer, nothing paused, no XOFF) its state does not change
//! with time and the cycles are skipped. While it is busy the node asks to be woken every
//! [`WAKE_CYCLES`] cycles, so a frame reaches the NIC or the wire up to that much later
//! than the block had it. The wire side holds one frame: the block may choose the next
//! frame while the fabric serializes the last one (a MAC's one-frame transmit buffer).
//!
//! With `lockstep`, the core's model (`roce_hdl_sim::DcbLockstep`: `PauseTimers`,
//! `PfcGen`, `Ets`) runs beside the block, fed with the same frames, and every cycle's
//! pause state, XOFF/XON state, PFC frame and scheduling decision, and every frame on the
//! wire, must be the model's ([`RtlDcb::lockstep_error`] says where they first differed).

use roce_core::dcb::Priorities;
use roce_core::engine::DcbConfig;
use roce_hdl_sim::{DataWidth, DcbLockstep, DcbRegs, DcbSim, SimError};
use roce_sim::Nanos;
use std::collections::VecDeque;

/// How the block is built and clocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtlDcbConfig {
    /// Its bus width.
    pub width: DataWidth,
    /// Its clock period, whole nanoseconds (the bus must be faster than the link).
    pub period_ns: u64,
    /// Rate at which the NIC takes frames out of the receive buffer, bit/s (`None`: as
    /// fast as the bus).
    pub drain_bps: Option<u64>,
    /// Run the core's model beside it and check every cycle.
    pub lockstep: bool,
}

impl Default for RtlDcbConfig {
    /// 512 bits at 250 MHz (128 Gb/s of bus: a 100G port), drained at bus rate, checked
    /// against the model.
    fn default() -> Self {
        Self {
            width: DataWidth::W512,
            period_ns: 4,
            drain_bps: None,
            lockstep: true,
        }
    }
}

/// Cycles between wake-ups while the block is busy.
pub const WAKE_CYCLES: u64 = 32;

/// What the block did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtlDcbCounters {
    /// PFC frames it sent.
    pub pfc_frames_sent: u64,
    /// PFC frames it received.
    pub pfc_frames_received: u32,
    /// Frames its receive buffer had no room for.
    pub rx_drops: u32,
    /// Cycles clocked (idle cycles skipped apart).
    pub cycles: u64,
    /// Scheduling decisions the model checked.
    pub decisions_checked: u64,
    /// Priorities the block ever paused (received PFC) and ever sent XOFF for.
    pub ever_paused: Priorities,
    pub ever_xoff: Priorities,
}

/// The block and its clocking.
pub struct RtlDcb {
    sim: DcbSim,
    cfg: RtlDcbConfig,
    link_bps: u64,
    /// The registers as last written.
    regs: Option<DcbRegs>,
    lockstep: Option<DcbLockstep>,
    lockstep_error: Option<String>,
    /// Idle cycles passed over: the block's cycle count plus these is the fabric's time
    /// over the period.
    skipped: u64,
    /// Data frames in and out of each side (PFC frames apart).
    tx_in: u64,
    tx_out: u64,
    rx_in: u64,
    rx_out: u64,
    /// The priority of each frame handed to the block's transmit side and not yet in
    /// whole, oldest first.
    going_in: VecDeque<u8>,
    /// Frames the block put on the wire, not yet handed to the fabric.
    wire: VecDeque<Vec<u8>>,
    /// The receive drain's credit, in 1e-9 bits.
    credit: u128,
    counters: RtlDcbCounters,
}

impl RtlDcb {
    /// The block, reset. Fails when the RTL model is unavailable.
    pub fn new(cfg: RtlDcbConfig) -> Result<Self, SimError> {
        let mut sim = DcbSim::new(cfg.width)?;
        // One cycle, so the block's outputs (room per queue) are known.
        sim.tick();
        Ok(Self {
            sim,
            cfg,
            link_bps: 0,
            regs: None,
            lockstep: None,
            lockstep_error: None,
            skipped: 0,
            tx_in: 0,
            tx_out: 0,
            rx_in: 0,
            rx_out: 0,
            going_in: VecDeque::new(),
            wire: VecDeque::new(),
            credit: 0,
            counters: RtlDcbCounters::default(),
        })
    }

    /// The link's rate (the pause timers count its bit times).
    pub fn set_link(&mut self, bps: u64) {
        self.link_bps = bps;
    }

    /// Writes the registers for the port's DCB settings (PFC, ETS, the maps, the
    /// receive buffer's thresholds) and MAC, when they changed (the firmware's job in
    /// hardware, after a MODIFY_DCB). The model restarts with
    /// them if the block is idle; otherwise checking stops (the block keeps its ETS
    /// state across a change, which the model cannot know).
    pub fn configure(&mut self, mac: [u8; 6], dcb: &DcbConfig) {
        let regs = dcb.registers(
            mac,
            DcbRegs::bits_per_cycle(self.link_bps, 1_000_000_000 / self.cfg.period_ns.max(1)),
        );
        if self.regs == Some(regs) {
            return;
        }
        self.regs = Some(regs);
        self.sim.configure(&regs);
        let fresh = self.is_quiet() && self.counters.decisions_checked == 0;
        self.lockstep = (self.cfg.lockstep && fresh && self.lockstep_error.is_none())
            .then(|| DcbLockstep::new(regs, self.cfg.period_ns, self.link_bps));
        if self.cfg.lockstep && !fresh && self.lockstep_error.is_none() {
            self.lockstep_error = Some("reconfigured while busy: no longer checked".into());
        }
    }

    /// Whether the block's state stands still with time: nothing going in (frames or
    /// register writes), queued or buffered, no pause running, no XOFF.
    fn is_idle(&self) -> bool {
        !self.sim.inputs_pending() && self.is_quiet()
    }

    /// Whether the block holds no frame and no pause or XOFF state (register writes may
    /// be going in).
    fn is_quiet(&self) -> bool {
        let k = self.sim.counters();
        let last = self.sim.last();
        self.sim.tx_pending() == 0
            && self.tx_in == self.tx_out
            && self.rx_in
                == self.rx_out
                    + u64::from(k.rx_pfc_frames)
                    + u64::from(k.rx_bad_mac_ctl)
                    + u64::from(k.rx_drops)
            && last.paused.is_empty()
            && last.xoff.is_empty()
            && last.announce.is_empty()
    }

    /// Whether the drain takes a beat this cycle.
    fn drain_ready(&mut self) -> bool {
        let Some(bps) = self.cfg.drain_bps else {
            return true;
        };
        let beat = u128::from(self.cfg.width.bits()) * 1_000_000_000;
        self.credit =
            (self.credit + u128::from(bps) * u128::from(self.cfg.period_ns)).min(2 * beat);
        if self.credit >= beat {
            self.credit -= beat;
            true
        } else {
            false
        }
    }

    /// Clocks the block up to `now`; each frame its receive side hands on goes to
    /// `deliver`.
    pub fn advance(&mut self, now: Nanos, deliver: &mut dyn FnMut(&[u8])) {
        let target = now / self.cfg.period_ns.max(1);
        while self.sim.cycle() + self.skipped < target {
            if self.is_idle() {
                self.skipped = target - self.sim.cycle();
                break;
            }
            let drain = self.drain_ready();
            self.sim.set_ready(self.wire.is_empty(), drain);
            let c = self.sim.tick();
            self.counters.cycles += 1;
            while self.going_in.len() > self.sim.tx_pending() {
                self.going_in.pop_front();
            }
            self.counters.ever_paused = Priorities(self.counters.ever_paused.0 | c.paused.0);
            self.counters.ever_xoff = Priorities(self.counters.ever_xoff.0 | c.xoff.0);
            let k = self.sim.counters();
            if let Some(m) = self.lockstep.as_mut() {
                if let Err(e) = m.check(&c, &k) {
                    self.lockstep_error = Some(e);
                    self.lockstep = None;
                }
            }
            while let Some(f) = self.sim.pop_tx_frame() {
                if let Some(m) = self.lockstep.as_mut() {
                    if let Err(e) = m.wire_frame(&f.value, f.cycle) {
                        self.lockstep_error = Some(e);
                        self.lockstep = None;
                    }
                }
                if f.value.get(12..14) == Some(&[0x88, 0x08][..]) {
                    self.counters.pfc_frames_sent += 1;
                } else {
                    self.tx_out += 1;
                }
                self.wire.push_back(f.value);
            }
            while let Some(f) = self.sim.pop_rx_frame() {
                self.rx_out += 1;
                deliver(&f.value);
            }
        }
        let k = self.sim.counters();
        self.counters.pfc_frames_received = k.rx_pfc_frames;
        self.counters.rx_drops = k.rx_drops;
        if let Some(m) = &self.lockstep {
            self.counters.decisions_checked = m.decisions;
        }
    }

    /// Priorities whose transmit queue takes a frame now: room for a frame at the last
    /// cycle, and no frame of theirs still going in (none while the configuration is).
    pub fn room(&self) -> Priorities {
        if self.sim.config_pending() {
            return Priorities::NONE;
        }
        let going_in = self
            .going_in
            .iter()
            .fold(Priorities::NONE, |m, &p| m.with(p));
        self.sim.last().tx_room.without(going_in)
    }

    /// A frame from the NIC for the wire, of priority `prio` (the port's map).
    pub fn push_tx(&mut self, frame: &[u8], prio: u8) {
        self.going_in.push_back(prio);
        self.sim.push_tx_frame(frame);
        if let Some(m) = self.lockstep.as_mut() {
            m.tx_pushed(frame);
        }
        self.tx_in += 1;
    }

    /// A frame from the wire.
    pub fn push_rx(&mut self, frame: &[u8]) {
        self.sim.push_rx_frame(frame);
        if let Some(m) = self.lockstep.as_mut() {
            m.rx_pushed(frame);
        }
        self.rx_in += 1;
    }

    /// The next frame for the wire, if the block has put one out.
    pub fn pop_wire(&mut self) -> Option<Vec<u8>> {
        self.wire.pop_front()
    }

    /// When the block next needs clocking (while it is busy), after `now`.
    pub fn next_wake(&self, now: Nanos) -> Option<Nanos> {
        (!self.is_idle()).then(|| now + WAKE_CYCLES * self.cfg.period_ns)
    }

    /// The registers as last written (what the port's settings made of them).
    pub fn regs(&self) -> Option<&DcbRegs> {
        self.regs.as_ref()
    }

    /// What the block did.
    pub fn counters(&self) -> RtlDcbCounters {
        self.counters
    }

    /// Where the block and the model first differed (or why checking stopped), if
    /// they did.
    pub fn lockstep_error(&self) -> Option<&str> {
        self.lockstep_error.as_deref()
    }

    /// Whether the model is still checking every cycle.
    pub fn lockstep_running(&self) -> bool {
        self.lockstep.is_some()
    }
}
