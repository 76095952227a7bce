//! Data Center Bridging at a port: what the MAC does per 802.1p priority. These are the
//! software models of the NIC's DCB hardware (`hdl-sim/rtl/dcb_*.sv` is tested against
//! them cycle for cycle) and the rules the simulated switch shares.
//!
//! * [`PriorityMap`]: the priority of a frame: its PCP through a map when it is
//!   VLAN-tagged, else its IP DSCP through a map (roce-facts §8: "PFC pauses the 802.1p
//!   priority of the VLAN tag, or the priority mapped from DSCP").
//! * [`PauseTimers`]: PFC reception (IEEE 802.1Qbb, roce-facts §8): a pause of `q`
//!   quanta stops a priority for `q` x 512 bit times of the link
//!   ([`quanta_to_nanos`]), counted from the end
//!   of the pause frame; a later request replaces the timer, 0 quanta resumes at once.
//!   Requests for priorities without PFC are ignored.
//! * [`Ets`]: transmission selection (IEEE 802.1Qaz ETS): strict-priority classes first,
//!   the highest eligible one; the rest share what is left by their bandwidth shares.
//! * [`PfcGen`]: pause generation from a receive buffer's occupancy per priority: XOFF
//!   above a threshold, refreshed every half pause time while above XON, XON at XON.
//! * [`SharedBuffer`]: one buffer shared by the eight priorities with per-priority
//!   accounting: a reserve each and a shared part, so a priority that stops draining
//!   (paused) cannot take the room the others need.
//!
//! ETS schedules traffic classes: [`EtsConfig::prio_tc`] is 802.1Qaz's priority
//! assignment table. By default it is the identity (eight TCs, each one priority, as
//! ConnectX NICs expose them), so "class" and "priority" are then the same number.
//!
//! Everything is sans-IO: time is passed in as nanoseconds.

use crate::wire::pfc::{quanta_to_nanos, PfcRepr, BITS_PER_QUANTUM};

/// Number of 802.1p priorities.
pub const PRIORITIES: usize = 8;

/// A set of 802.1p priorities (bit n = priority n), as carried by a PFC frame's
/// priority-enable vector (roce-facts §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Priorities(pub u8);

impl Priorities {
    /// No priority.
    pub const NONE: Self = Self(0);
    /// All eight priorities.
    pub const ALL: Self = Self(0xFF);

    /// The set holding only `prio` (0..7).
    pub const fn only(prio: u8) -> Self {
        Self(1 << (prio & 7))
    }
    /// True when `prio` (0..7) is in the set.
    pub const fn contains(self, prio: u8) -> bool {
        self.0 & (1 << (prio & 7)) != 0
    }
    /// True when the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The highest priority in the set.
    pub const fn highest(self) -> Option<u8> {
        if self.0 == 0 {
            None
        } else {
            Some(7 - self.0.leading_zeros() as u8)
        }
    }
    /// Priorities in both sets.
    pub const fn and(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }
    /// Priorities in this set and not in `other`.
    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
    /// The set with `prio` added.
    pub const fn with(self, prio: u8) -> Self {
        Self(self.0 | 1 << (prio & 7))
    }
}

// ---------------------------------------------------------------------------------------
// Classification

/// How a port maps frames to priorities: tagged frames by their PCP, untagged IP frames
/// by their DSCP. The defaults are the identity for the PCP and DSCP >> 3 (the class
/// selector: DSCP 26 is priority 3, the CNPs' DSCP 48 priority 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PriorityMap {
    /// Priority of each DSCP (0..63), untagged frames.
    pub dscp: [u8; 64],
    /// Priority of each PCP (0..7), tagged frames.
    pub pcp: [u8; 8],
}

impl Default for PriorityMap {
    fn default() -> Self {
        Self::new()
    }
}

/// EtherTypes the classifier reads (roce-facts §1.3).
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;

impl PriorityMap {
    /// PCP p is priority p; DSCP d is priority d >> 3.
    pub const fn new() -> Self {
        let mut dscp = [0u8; 64];
        let mut d = 0;
        while d < 64 {
            dscp[d] = (d >> 3) as u8;
            d += 1;
        }
        Self {
            dscp,
            pcp: [0, 1, 2, 3, 4, 5, 6, 7],
        }
    }

    /// Whether every entry names a priority (0..7).
    pub fn is_valid(&self) -> bool {
        self.dscp.iter().chain(self.pcp.iter()).all(|&p| p < 8)
    }

    /// The priority of a frame with this DSCP and, when tagged, this PCP.
    pub fn priority(&self, dscp: u8, pcp: Option<u8>) -> u8 {
        match pcp {
            Some(pcp) => self.pcp[usize::from(pcp & 7)] & 7,
            None => self.dscp[usize::from(dscp & 63)] & 7,
        }
    }

    /// The priority of an Ethernet frame (without FCS), read from its first 16 bytes:
    /// the PCP of an 802.1Q tag (byte 14); else the DSCP of an IPv4 TOS (byte 15) or
    /// IPv6 traffic class (bytes 14-15); else 0 (shorter than 16 bytes, or neither IP nor
    /// tagged). The RTL (`dcb_pkg::frame_prio`) reads the same bytes.
    pub fn of_frame(&self, frame: &[u8]) -> u8 {
        let Some(&[.., t0, t1, b14, b15]) = frame.get(..16) else {
            return 0;
        };
        match u16::from_be_bytes([t0, t1]) {
            ETHERTYPE_VLAN => self.priority(0, Some(b14 >> 5)),
            ETHERTYPE_IPV4 => self.priority(b15 >> 2, None),
            ETHERTYPE_IPV6 => self.priority((b14 & 0x0F) << 2 | b15 >> 6, None),
            _ => 0,
        }
    }
}

// ---------------------------------------------------------------------------------------
// PFC reception

/// Half the pause time of `quanta` (rounded up, at least 1 ns): how often an XOFF is
/// refreshed, so the partner never resumes while the congestion lasts even if one
/// refresh is lost.
pub fn refresh_nanos(quanta: u16, link_bps: u64) -> u64 {
    bit_times_nanos(u64::from(quanta) * BITS_PER_QUANTUM / 2, link_bps).max(1)
}

fn bit_times_nanos(bits: u64, link_bps: u64) -> u64 {
    if link_bps == 0 {
        return u64::MAX;
    }
    (u128::from(bits) * 1_000_000_000).div_ceil(u128::from(link_bps)) as u64
}

/// The pause timers of a port's transmitter, one per priority (802.1Qbb reception).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseTimers {
    /// Priority p is paused while `now < until[p]`.
    until: [u64; PRIORITIES],
}

impl PauseTimers {
    /// Applies a PFC request that ended arriving at `now` on a link of `link_bps`:
    /// each priority it enables that has PFC on (`enabled`) is paused for its quanta
    /// (0: resumes). Returns the priorities that were paused and resumed by it.
    pub fn apply(
        &mut self,
        now: u64,
        req: &PfcRepr,
        link_bps: u64,
        enabled: Priorities,
    ) -> Priorities {
        let mut resumed = Priorities::NONE;
        for p in 0..PRIORITIES as u8 {
            if !Priorities(req.enable).and(enabled).contains(p) {
                continue;
            }
            let until = &mut self.until[usize::from(p)];
            let q = req.quanta[usize::from(p)];
            if q == 0 {
                if now < *until {
                    resumed = resumed.with(p);
                }
                *until = now;
            } else {
                *until = now.saturating_add(quanta_to_nanos(q, link_bps));
            }
        }
        resumed
    }

    /// The priorities paused at `now`.
    pub fn paused(&self, now: u64) -> Priorities {
        let mut m = Priorities::NONE;
        for (p, &u) in self.until.iter().enumerate() {
            if now < u {
                m = m.with(p as u8);
            }
        }
        m
    }

    /// When priority `prio`'s pause ends (a time at or before now when it is not paused).
    pub fn until(&self, prio: u8) -> u64 {
        self.until[usize::from(prio & 7)]
    }

    /// The earliest pause end after `now`.
    pub fn next_end(&self, now: u64) -> Option<u64> {
        self.until.iter().copied().filter(|&u| u > now).min()
    }

    /// Ends every pause (PFC turned off, link down).
    pub fn clear(&mut self) {
        self.until = [0; PRIORITIES];
    }
}

// ---------------------------------------------------------------------------------------
// ETS

/// Transmission selection (802.1Qaz): the traffic class of each priority, which classes
/// are strict, and the bandwidth shares of the others (percent, summing to 100).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EtsConfig {
    /// Strict-priority traffic classes (bit `t` for class `t`); the others are ETS
    /// classes.
    pub strict: Priorities,
    /// Bandwidth share in percent of each ETS class (0 for strict ones).
    pub bw: [u8; PRIORITIES],
    /// The traffic class of each priority (802.1Qaz's priority assignment table, Linux
    /// dcbnl's `prio_tc`): the priorities of one class share its share (or its strict
    /// rank) and are served in turn. [`ONE_CLASS_PER_PRIORITY`] unless set.
    pub prio_tc: [u8; PRIORITIES],
}

/// The identity priority assignment: priority `p` is traffic class `p`.
pub const ONE_CLASS_PER_PRIORITY: [u8; PRIORITIES] = [0, 1, 2, 3, 4, 5, 6, 7];

impl Default for EtsConfig {
    /// Every class strict: 802.1Q's default transmission selection.
    fn default() -> Self {
        Self::STRICT
    }
}

/// Why an ETS configuration is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtsError {
    /// A strict class has a bandwidth share.
    StrictWithShare(u8),
    /// An ETS class has no share (each needs at least 1 %).
    NoShare(u8),
    /// The ETS classes' shares do not add up to 100 % (the sum given).
    Sum(u32),
    /// A priority assigned to a class above 7 (the priority).
    Class(u8),
}

/// Cost of one byte at a 1 % share; a class of `bw` % pays `COST_ONE / bw` per byte.
pub const COST_ONE: u32 = 1 << 16;

impl EtsConfig {
    /// Every class strict.
    pub const STRICT: Self = Self {
        strict: Priorities::ALL,
        bw: [0; PRIORITIES],
        prio_tc: ONE_CLASS_PER_PRIORITY,
    };

    /// ETS over every priority with equal shares (12 % for priorities 0 to 3, 13 % for
    /// 4 to 7): what a NIC port does before anyone configures it, so that every
    /// priority's queue gets a turn, close to a round robin among them.
    pub const EQUAL: Self = Self::shares([12, 12, 12, 12, 13, 13, 13, 13]);

    /// ETS over every priority with these shares, none strict.
    pub const fn shares(bw: [u8; PRIORITIES]) -> Self {
        Self {
            strict: Priorities::NONE,
            bw,
            prio_tc: ONE_CLASS_PER_PRIORITY,
        }
    }

    /// Checks the rules of 802.1Qaz (and Linux dcbnl's): every priority in a class 0..7,
    /// strict classes have no share, each ETS class has one, and the ETS shares add up
    /// to 100 %.
    pub fn validate(&self) -> Result<(), EtsError> {
        if let Some(p) = (0..PRIORITIES).find(|&p| self.prio_tc[p] > 7) {
            return Err(EtsError::Class(p as u8));
        }
        let mut sum = 0u32;
        for p in 0..PRIORITIES as u8 {
            let bw = self.bw[usize::from(p)];
            match (self.strict.contains(p), bw) {
                (true, 0) => {}
                (true, _) => return Err(EtsError::StrictWithShare(p)),
                (false, 0) => return Err(EtsError::NoShare(p)),
                (false, bw) => sum += u32::from(bw),
            }
        }
        if self.strict != Priorities::ALL && sum != 100 {
            return Err(EtsError::Sum(sum));
        }
        Ok(())
    }

    /// What one byte of class `tc` costs in the scheduler's service tags.
    pub fn cost(&self, tc: u8) -> u32 {
        COST_ONE / u32::from(self.bw[usize::from(tc & 7)].max(1))
    }

    /// The traffic class of priority `prio`.
    pub fn class_of(&self, prio: u8) -> u8 {
        self.prio_tc[usize::from(prio & 7)] & 7
    }

    /// The classes of the priorities in `prios`.
    pub fn classes(&self, prios: Priorities) -> Priorities {
        // Over the set bits only: at every frame sent, mostly one priority.
        let (mut rest, mut classes) = (prios.0, Priorities::NONE);
        while rest != 0 {
            classes = classes.with(self.class_of(rest.trailing_zeros() as u8));
            rest &= rest - 1;
        }
        classes
    }

    /// Whether each priority is its own class (what a scheduler with one queue and one
    /// share per priority, the RTL's `dcb_ets`, can run).
    pub fn one_class_per_priority(&self) -> bool {
        self.prio_tc == ONE_CLASS_PER_PRIORITY
    }
}

/// The transmission selection state: a service tag per ETS class (self-clocked fair
/// queuing, Golestani 1994). Among the eligible ETS classes the one with the smallest
/// tag sends next (ties: the higher class); sending `len` bytes adds `len x cost` to
/// its tag, so over time each class's bytes are in proportion to its share. The virtual
/// time is the tag of the last frame sent; a class that was not eligible at a decision
/// is brought up to it, so idle or paused time earns no credit (work-conserving: a class
/// alone takes the whole link). Tags are 32-bit and compared relative to the virtual
/// time: they all lie within one frame's cost (< 2^31) of it. A class is eligible when
/// one of its priorities is; within a class, its eligible priorities take turns (a
/// round robin from the one after the last served), as one FIFO per class would serve
/// them when each keeps frames waiting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ets {
    tag: [u32; PRIORITIES],
    vtime: u32,
    /// Per class: the priority its round robin starts from.
    next: [u8; PRIORITIES],
}

impl Ets {
    /// The priority that sends next among `eligible` (those with a frame that may go:
    /// queued and not paused): of the highest eligible strict class, else of the ETS
    /// class with the smallest tag; within the class, the next in turn.
    pub fn pick(&self, cfg: &EtsConfig, eligible: Priorities) -> Option<u8> {
        // One priority with a frame (a NIC with one busy priority, at every frame): it
        // is the one, whatever the tags say; `sent` still keeps them. None: nothing
        // (an idle NIC asked at every pull), without walking the classes.
        match eligible.0.count_ones() {
            0 => return None,
            1 => return Some(eligible.0.trailing_zeros() as u8),
            _ => {}
        }
        let classes = cfg.classes(eligible);
        let tc = match classes.and(cfg.strict).highest() {
            Some(tc) => tc,
            None => {
                let ets = classes.without(cfg.strict);
                let mut best: Option<(u32, u8)> = None;
                for tc in (0..PRIORITIES as u8).rev() {
                    if !ets.contains(tc) {
                        continue;
                    }
                    let key = self.tag[usize::from(tc)].wrapping_sub(self.vtime);
                    if best.is_none_or(|(k, _)| key < k) {
                        best = Some((key, tc));
                    }
                }
                best?.1
            }
        };
        let start = self.next[usize::from(tc)];
        (0..PRIORITIES as u8)
            .map(|k| (start + k) % PRIORITIES as u8)
            .find(|&p| eligible.contains(p) && cfg.class_of(p) == tc)
    }

    /// Priority `prio` sent a frame of `len` bytes, chosen by [`Ets::pick`] from
    /// `eligible`: its class pays for it (strict classes leave the tags alone).
    pub fn sent(&mut self, cfg: &EtsConfig, eligible: Priorities, prio: u8, len: u32) {
        let tc = cfg.class_of(prio);
        self.next[usize::from(tc)] = ((prio & 7) + 1) % PRIORITIES as u8;
        if cfg.strict.contains(tc) {
            return;
        }
        let t = usize::from(tc);
        let eligible = cfg.classes(eligible);
        let vtime = self.tag[t];
        self.vtime = vtime;
        self.tag[t] = vtime.wrapping_add(len.wrapping_mul(cfg.cost(tc)));
        for (q, tag) in self.tag.iter_mut().enumerate() {
            // Behind the virtual time: caught up (a class that could not send earns no
            // credit for it). A select, not a branch: the eight lanes in a few vector
            // instructions.
            let idle = eligible.0 >> q & 1 == 0;
            let behind = (tag.wrapping_sub(vtime) as i32) < 0;
            *tag = if idle && behind { vtime } else { *tag };
        }
    }

    /// The service tags and the virtual time (for tests and the RTL comparison).
    pub fn state(&self) -> ([u32; PRIORITIES], u32) {
        (self.tag, self.vtime)
    }
}

// ---------------------------------------------------------------------------------------
// PFC generation

/// A receive buffer's PFC thresholds (bytes per priority).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PfcThresholds {
    /// Send XOFF when a lossless priority holds more than this many bytes.
    pub xoff: u32,
    /// Send XON when it is back to this many bytes or fewer (below `xoff`).
    pub xon: u32,
    /// Pause time of an XOFF, in quanta (refreshed every half of it).
    pub quanta: u16,
}

/// Bytes of the receive buffer of the DCB block at its default size (`BUF_BYTES`,
/// `hdl-sim/rtl/roce_dcb_top.sv`), shared by the priorities: the buffer of the
/// software NIC models and of the RTL DCB block they are checked against. A NIC's own
/// buffer may differ (the SoC's is 16 KiB, `nic_soc`'s `DCB_BUF_BYTES`): the firmware
/// asks its datapath (`Datapath::rx_buffer_bytes`), QUERY_DCB reports it, and PFC
/// thresholds are checked against it, never against this constant alone.
pub const RX_BUFFER_BYTES: u32 = 65_536;

impl PfcThresholds {
    /// XOFF at 16 KiB, XON at 8 KiB, the longest pause: 48 KiB of headroom, enough for
    /// 2 x 12.5 KB in flight on 1 us of 100 Gb/s cable and two 4 KiB frames. These are
    /// [`PfcThresholds::for_buffer`] of [`RX_BUFFER_BYTES`].
    pub const DEFAULT: Self = Self::for_buffer(RX_BUFFER_BYTES);

    /// The defaults for a receive buffer of `rx_buffer` bytes: XOFF at a quarter, XON
    /// at an eighth, the longest pause (three quarters of the buffer are headroom).
    pub const fn for_buffer(rx_buffer: u32) -> Self {
        Self {
            xoff: rx_buffer / 4,
            xon: rx_buffer / 8,
            quanta: 0xFFFF,
        }
    }

    /// Whether the thresholds can run on a receive buffer of `rx_buffer` bytes: XON
    /// below XOFF, XOFF within the buffer, a pause of at least one quantum.
    pub fn is_valid(&self, rx_buffer: u32) -> bool {
        self.is_consistent() && self.xoff <= rx_buffer
    }

    /// The rules that hold whatever the buffer: XON below XOFF, a pause of at least one
    /// quantum.
    pub fn is_consistent(&self) -> bool {
        self.xon < self.xoff && self.quanta > 0
    }

    /// Bytes a buffer of `rx_buffer` bytes still takes for a lossless priority after
    /// its XOFF.
    pub fn headroom(&self, rx_buffer: u32) -> u32 {
        rx_buffer.saturating_sub(self.xoff)
    }
}

/// The XOFF/XON state of one receive buffer: bytes held per priority, which priorities
/// are paused towards the link partner and which must be announced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcGen {
    bytes: [u32; PRIORITIES],
    xoff: Priorities,
    announce: Priorities,
    refresh_at: Option<u64>,
}

impl PfcGen {
    /// `len` bytes of priority `prio` entered the buffer.
    pub fn add(&mut self, prio: u8, len: u32, lossless: Priorities, t: &PfcThresholds) {
        self.update(prio, len, 0, lossless, t);
    }

    /// `len` bytes of priority `prio` left the buffer.
    pub fn remove(&mut self, prio: u8, len: u32, lossless: Priorities, t: &PfcThresholds) {
        self.update(prio, 0, len, lossless, t);
    }

    /// `add` bytes of priority `prio` entered the buffer and `sub` left it at once (the
    /// hardware counts both in one clock), then the state follows the new count: a
    /// lossless priority above XOFF that is not paused is to be announced as XOFF, a
    /// paused one back at XON or below as XON.
    pub fn update(
        &mut self,
        prio: u8,
        add: u32,
        sub: u32,
        lossless: Priorities,
        t: &PfcThresholds,
    ) {
        let p = usize::from(prio & 7);
        let bytes = self.bytes[p].saturating_add(add).saturating_sub(sub);
        self.bytes[p] = bytes;
        if self.xoff.contains(prio) {
            if bytes <= t.xon {
                self.xoff = self.xoff.without(Priorities::only(prio));
                self.announce = self.announce.with(prio);
            }
        } else if lossless.contains(prio) && bytes > t.xoff {
            self.xoff = self.xoff.with(prio);
            self.announce = self.announce.with(prio);
        }
    }

    /// Timers due at `now`: an XOFF to refresh is announced again.
    pub fn handle_timeout(&mut self, now: u64) {
        if self.refresh_at.is_some_and(|t| t <= now) {
            self.refresh_at = None;
            self.announce = Priorities(self.announce.0 | self.xoff.0);
        }
    }

    /// Whether a pause frame is waiting to be sent.
    pub fn has_frame(&self) -> bool {
        !self.announce.is_empty()
    }

    /// The pause frame to send now, if the state changed or needs refreshing: XOFF
    /// (`t.quanta`) or XON (0) for each priority to announce. Arms the refresh for half
    /// the pause time from `now` while something is paused.
    pub fn take_frame(&mut self, now: u64, t: &PfcThresholds, link_bps: u64) -> Option<PfcRepr> {
        if self.announce.is_empty() {
            return None;
        }
        let mut req = PfcRepr {
            enable: self.announce.0,
            quanta: [0; PRIORITIES],
        };
        for (p, q) in req.quanta.iter_mut().enumerate() {
            if self.announce.and(self.xoff).contains(p as u8) {
                *q = t.quanta;
            }
        }
        self.announce = Priorities::NONE;
        self.refresh_at = (!self.xoff.is_empty() && link_bps > 0)
            .then(|| now.saturating_add(refresh_nanos(t.quanta, link_bps)));
        Some(req)
    }

    /// When the refresh is due, if armed.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.refresh_at
    }

    /// Bytes held of priority `prio`.
    pub fn bytes(&self, prio: u8) -> u32 {
        self.bytes[usize::from(prio & 7)]
    }

    /// Priorities paused towards the link partner.
    pub fn xoff(&self) -> Priorities {
        self.xoff
    }

    /// Priorities whose state the next pause frame announces.
    pub fn announce(&self) -> Priorities {
        self.announce
    }
}

// ---------------------------------------------------------------------------------------
// Shared buffers

/// Room in a buffer the eight priorities share, counted per priority (in whatever unit
/// the buffer counts: frames, bytes): each priority has `reserve` units of its own, and
/// the units each holds above its reserve come from one shared part of `shared` units.
/// A priority takes room while it is within its reserve or the shared part has room, so
/// whatever one priority holds (a paused one holds all it was given), every other still
/// finds its reserve. One FIFO with this accounting serves each priority in order
/// without head-of-line blocking as long as its reader skips the frames of blocked
/// priorities. The datapath's transmit queue in front of the DCB MAC
/// (`roce_device::port::PortQueues`) runs it in frames, and `docs/dcb.md` sizes the
/// SoC's receive buffer with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedBuffer {
    reserve: u32,
    shared: u32,
    held: [u32; PRIORITIES],
    /// Units held above the reserves, all priorities.
    shared_used: u32,
}

impl SharedBuffer {
    /// A buffer of `PRIORITIES * reserve + shared` units, empty.
    pub const fn new(reserve: u32, shared: u32) -> Self {
        Self {
            reserve,
            shared,
            held: [0; PRIORITIES],
            shared_used: 0,
        }
    }

    /// Units above the reserve that `held` units of one priority use.
    fn above(&self, held: u32) -> u32 {
        held.saturating_sub(self.reserve)
    }

    /// Whether priority `prio` (0..7) may take `n` more units.
    pub fn admits(&self, prio: u8, n: u32) -> bool {
        let held = self.held[usize::from(prio & 7)];
        let more = self.above(held.saturating_add(n)) - self.above(held);
        self.shared_used.saturating_add(more) <= self.shared
    }

    /// The priorities that may not take `n` more units now.
    pub fn blocked(&self, n: u32) -> Priorities {
        (0..PRIORITIES as u8).fold(Priorities::NONE, |m, p| {
            if self.admits(p, n) {
                m
            } else {
                m.with(p)
            }
        })
    }

    /// Takes `n` units for `prio`; false (and nothing taken) when it may not.
    pub fn add(&mut self, prio: u8, n: u32) -> bool {
        if !self.admits(prio, n) {
            return false;
        }
        let p = usize::from(prio & 7);
        self.shared_used += self.above(self.held[p] + n) - self.above(self.held[p]);
        self.held[p] += n;
        true
    }

    /// Gives back `n` units of `prio` (at most what it holds).
    pub fn remove(&mut self, prio: u8, n: u32) {
        let p = usize::from(prio & 7);
        let n = n.min(self.held[p]);
        self.shared_used -= self.above(self.held[p]) - self.above(self.held[p] - n);
        self.held[p] -= n;
    }

    /// Units `prio` holds.
    pub fn held(&self, prio: u8) -> u32 {
        self.held[usize::from(prio & 7)]
    }
}

// ---------------------------------------------------------------------------------------
// The DCB block's registers

/// Register word addresses of the port's DCB block (`hdl-sim/rtl/dcb_pkg.sv`), which
/// the firmware writes from the port's `DcbConfig` (the SoC's block at MMIO 0x5_0000)
/// and the RTL's tests write directly.
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
    /// Register writes a whole configuration takes ([`super::DcbRegs::writes`]).
    pub const WRITES: usize = 25;
}

/// Everything the port's DCB block is configured with.
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

    /// The register writes (word address, value) that configure the block so. The
    /// block's ETS has a queue and a share per priority: each priority gets its class's
    /// strict rank or share, which is `ets` exactly when each class is one priority
    /// ([`EtsConfig::one_class_per_priority`]; the harnesses that run the queued block
    /// refuse anything else).
    pub fn writes(&self) -> [(u8, u32); reg::WRITES] {
        let ets = &self.ets;
        let strict = (0..8u8).fold(Priorities::NONE, |m, p| {
            if ets.strict.contains(ets.class_of(p)) {
                m.with(p)
            } else {
                m
            }
        });
        let mut w = [(0u8, 0u32); reg::WRITES];
        w[..8].copy_from_slice(&[
            (reg::PFC_ENABLE, u32::from(self.pfc_enable.0)),
            (reg::STRICT, u32::from(strict.0)),
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
        ]);
        let nibbles = |m: &[u8]| {
            m.iter()
                .enumerate()
                .fold(0u32, |acc, (i, &p)| acc | u32::from(p & 7) << (4 * i))
        };
        for p in 0..8u8 {
            let cost = if strict.contains(p) {
                COST_ONE
            } else {
                ets.cost(ets.class_of(p))
            };
            w[8 + usize::from(p)] = (reg::COST0 + p, cost);
            let k8 = usize::from(p) * 8;
            w[16 + usize::from(p)] = (reg::DSCP0 + p, nibbles(&self.map.dscp[k8..k8 + 8]));
        }
        w[24] = (reg::PCP, nibbles(&self.map.pcp));
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G100: u64 = 100_000_000_000;

    #[test]
    fn pause_times_by_hand() {
        // 512 bit times per quantum: 5.12 ns at 100 Gb/s, 20.48 ns at 25 Gb/s,
        // 12.8 ns at 40 Gb/s (roce-facts §8).
        assert_eq!(quanta_to_nanos(1000, G100), 5120);
        assert_eq!(quanta_to_nanos(0xFFFF, G100), 335_540); // 335_539.2 rounded up
        assert_eq!(quanta_to_nanos(1, 25_000_000_000), 21); // 20.48
        assert_eq!(quanta_to_nanos(100, 25_000_000_000), 2048);
        assert_eq!(quanta_to_nanos(10, 40_000_000_000), 128);
        assert_eq!(refresh_nanos(0xFFFF, G100), 167_770); // 65535 x 256 / 100 = 167_769.6
        assert_eq!(refresh_nanos(0, G100), 1);
    }

    #[test]
    fn a_pause_stops_only_its_priority_and_only_with_pfc_on() {
        let mut t = PauseTimers::default();
        let mut req = PfcRepr {
            enable: 0b1000_1000,
            quanta: [0; 8],
        };
        req.quanta[3] = 1000;
        req.quanta[7] = 10;
        // PFC on priority 3 only: the request for 7 is ignored.
        let on = Priorities::only(3);
        assert_eq!(t.apply(100, &req, G100, on), Priorities::NONE);
        assert_eq!(t.paused(100), Priorities::only(3));
        assert_eq!(t.paused(5219), Priorities::only(3));
        assert_eq!(t.paused(5220), Priorities::NONE);
        assert_eq!(t.next_end(100), Some(5220));
        // A later frame replaces the timer; 0 quanta resumes at once.
        t.apply(1000, &req, G100, on);
        assert_eq!(t.until(3), 6120);
        req.quanta[3] = 0;
        assert_eq!(t.apply(2000, &req, G100, on), Priorities::only(3));
        assert_eq!(t.paused(2000), Priorities::NONE);
        assert_eq!(t.apply(2001, &req, G100, on), Priorities::NONE);
    }

    #[test]
    fn frames_are_classified_by_pcp_when_tagged_else_by_dscp() {
        let mut m = PriorityMap::new();
        let mut v4 = [0u8; 34];
        v4[12..14].copy_from_slice(&[0x08, 0x00]);
        v4[14] = 0x45;
        v4[15] = 26 << 2 | 2; // DSCP 26, ECT(0)
        assert_eq!(m.of_frame(&v4), 3);
        m.dscp[26] = 5;
        assert_eq!(m.of_frame(&v4), 5);
        // CNPs: DSCP 48 -> 6.
        v4[15] = 48 << 2;
        assert_eq!(m.of_frame(&v4), 6);
        let mut v6 = [0u8; 54];
        v6[12..14].copy_from_slice(&[0x86, 0xDD]);
        // Version 6, traffic class 0x68 (DSCP 26, ECN 0).
        v6[14] = 0x66;
        v6[15] = 0x80;
        assert_eq!(m.of_frame(&v6), 5);
        let mut tagged = [0u8; 38];
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        tagged[14] = 4 << 5; // PCP 4
        tagged[16..18].copy_from_slice(&[0x08, 0x00]);
        tagged[19] = 26 << 2;
        assert_eq!(m.of_frame(&tagged), 4);
        m.pcp[4] = 1;
        assert_eq!(m.of_frame(&tagged), 1);
        // Too short, or not IP: priority 0.
        assert_eq!(m.of_frame(&v4[..15]), 0);
        assert_eq!(m.of_frame(&tagged[..16]), 1);
        assert_eq!(m.of_frame(&tagged[..15]), 0);
        let mut arp = v4;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(m.of_frame(&arp), 0);
    }

    #[test]
    fn ets_rules_are_checked() {
        assert_eq!(EtsConfig::STRICT.validate(), Ok(()));
        let mut c = EtsConfig::shares([50, 50, 0, 0, 0, 0, 0, 0]);
        assert_eq!(c.validate(), Err(EtsError::NoShare(2)));
        c.strict = Priorities(0b1111_1100);
        assert_eq!(c.validate(), Ok(()));
        c.bw[0] = 40;
        assert_eq!(c.validate(), Err(EtsError::Sum(90)));
        c.bw[7] = 10;
        assert_eq!(c.validate(), Err(EtsError::StrictWithShare(7)));
        c.bw = [50, 50, 0, 0, 0, 0, 0, 0];
        c.prio_tc[5] = 8;
        assert_eq!(c.validate(), Err(EtsError::Class(5)));
    }

    /// Several priorities in one traffic class (802.1Qaz's priority assignment table):
    /// priorities 1 and 2 in class 1, priority 3 in class 3, ETS 50/50 between the
    /// classes. The two classes' bytes follow the shares within 2 % whatever the frame
    /// sizes; within class 1 the priorities take turns frame by frame. A strict class's
    /// priorities go first, and a class is eligible whenever one of its priorities is.
    #[test]
    fn priorities_of_one_class_share_its_share() {
        let mut cfg = EtsConfig::STRICT;
        cfg.prio_tc = [0, 1, 1, 3, 4, 5, 6, 7];
        cfg.strict = Priorities(0b1111_0101);
        cfg.bw[1] = 50;
        cfg.bw[3] = 50;
        cfg.validate().unwrap();
        assert_eq!(cfg.classes(Priorities(0b1110)), Priorities(0b1010));
        assert!(!cfg.one_class_per_priority() && EtsConfig::EQUAL.one_class_per_priority());
        let sizes = [0, 1024, 2048, 4096, 0, 0, 0, 0];
        let sent = run(&cfg, sizes, Priorities(0b1110), 30_000);
        let class1 = (sent[1] + sent[2]) as f64 / (sent[1] + sent[2] + sent[3]) as f64;
        assert!((class1 - 0.5).abs() <= 0.01, "class 1 got {class1}");
        // Frames in turn: twice the bytes for the priority of twice the frame size.
        let ratio = sent[2] as f64 / sent[1] as f64;
        assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
        // Priority 2 alone keeps its class's share against priority 3.
        let sent = run(&cfg, sizes, Priorities(0b1100), 30_000);
        let class1 = sent[2] as f64 / (sent[2] + sent[3]) as f64;
        assert!((class1 - 0.5).abs() <= 0.01, "{class1}");
        // Priorities 1 and 2 as one strict class: they starve class 3.
        cfg.strict = Priorities(0b1111_0111);
        cfg.bw[1] = 0;
        cfg.bw[3] = 100;
        let sent = run(&cfg, sizes, Priorities(0b1110), 100);
        assert_eq!(sent[3], 0);
        assert_eq!(sent[1] / 1024, sent[2] / 2048, "in turn");
    }

    /// Bytes each class sends when all of `busy` always have frames of the given sizes.
    fn run(cfg: &EtsConfig, sizes: [u32; 8], busy: Priorities, frames: usize) -> [u64; 8] {
        let mut ets = Ets::default();
        let mut sent = [0u64; 8];
        for _ in 0..frames {
            let p = ets.pick(cfg, busy).unwrap();
            let len = sizes[usize::from(p)];
            ets.sent(cfg, busy, p, len);
            sent[usize::from(p)] += u64::from(len);
        }
        sent
    }

    #[test]
    fn ets_shares_follow_the_weights_whatever_the_frame_sizes() {
        let mut bw = [0u8; 8];
        bw[1] = 80;
        bw[3] = 20;
        let mut cfg = EtsConfig::shares(bw);
        cfg.strict = Priorities(0b1111_0101);
        cfg.validate().unwrap();
        let sizes = [0, 1024, 0, 4154, 0, 0, 0, 0];
        let sent = run(&cfg, sizes, Priorities(0b1010), 20_000);
        let share = sent[1] as f64 / (sent[1] + sent[3]) as f64;
        assert!((share - 0.8).abs() < 0.001, "{share}");
        // A strict class with frames always goes first.
        let sent = run(&cfg, sizes, Priorities(0b1_1010), 100);
        assert_eq!((sent[1], sent[3]), (0, 0));
    }

    #[test]
    fn a_priority_alone_with_a_frame_is_picked_whatever_its_class() {
        // Classes 0 and 1 ETS, the rest strict; priorities 2 and 5 share class 1.
        let cfg = EtsConfig {
            strict: Priorities(0b1111_1100),
            bw: [30, 70, 0, 0, 0, 0, 0, 0],
            prio_tc: [0, 2, 1, 3, 4, 1, 6, 7],
        };
        cfg.validate().unwrap();
        let mut ets = Ets::default();
        for p in 0..PRIORITIES as u8 {
            for _ in 0..3 {
                assert_eq!(ets.pick(&cfg, Priorities::only(p)), Some(p));
                ets.sent(&cfg, Priorities::only(p), p, 1500);
            }
        }
        assert_eq!(ets.pick(&cfg, Priorities::NONE), None);
    }

    #[test]
    fn an_idle_or_paused_class_earns_no_credit() {
        let cfg = EtsConfig {
            strict: Priorities(0b1111_1100),
            bw: [50, 50, 0, 0, 0, 0, 0, 0],
            prio_tc: ONE_CLASS_PER_PRIORITY,
        };
        let mut ets = Ets::default();
        // Class 0 alone for 1000 frames: it takes the whole link.
        for _ in 0..1000 {
            assert_eq!(ets.pick(&cfg, Priorities(1)), Some(0));
            ets.sent(&cfg, Priorities(1), 0, 1000);
        }
        // Class 1 comes back: from then on they share, class 1 does not get the frames
        // it "missed" (start-time fair queuing: it may go first, one frame ahead).
        let both = Priorities(0b11);
        let mut ones = 0;
        for i in 0..100 {
            let p = ets.pick(&cfg, both).unwrap();
            ets.sent(&cfg, both, p, 1000);
            ones += u32::from(p);
            assert!(ones <= i / 2 + 2, "class 1 ran ahead: {ones} of {}", i + 1);
        }
        assert!((50..=51).contains(&ones), "{ones}");
    }

    #[test]
    fn xoff_above_the_threshold_refreshed_then_xon() {
        let t = PfcThresholds {
            xoff: 2500,
            xon: 1000,
            quanta: 0xFFFF,
        };
        let lossless = Priorities::only(3);
        let mut g = PfcGen::default();
        g.add(3, 1000, lossless, &t);
        g.add(3, 1000, lossless, &t);
        g.add(0, 5000, lossless, &t); // lossy: never paused
        assert!(!g.has_frame());
        g.add(3, 1000, lossless, &t); // 3000 > 2500
        let req = g.take_frame(0, &t, G100).unwrap();
        assert_eq!((req.enable, req.quanta[3]), (0b1000, 0xFFFF));
        assert_eq!(g.poll_timeout(), Some(167_770));
        g.handle_timeout(167_769);
        assert!(!g.has_frame());
        g.handle_timeout(167_770);
        let req = g.take_frame(167_770, &t, G100).unwrap();
        assert_eq!((req.enable, req.quanta[3]), (0b1000, 0xFFFF));
        g.remove(3, 1000, lossless, &t); // 2000 > XON
        assert!(!g.has_frame());
        // In and out in the same clock: the state follows the sum.
        g.update(3, 4000, 4000, lossless, &t);
        assert!(!g.has_frame());
        g.remove(3, 1000, lossless, &t); // 1000: XON
        let req = g.take_frame(200_000, &t, G100).unwrap();
        assert_eq!((req.enable, req.quanta[3]), (0b1000, 0));
        assert_eq!(g.poll_timeout(), None);
        assert_eq!(g.xoff(), Priorities::NONE);
    }

    #[test]
    fn a_full_priority_leaves_every_other_its_reserve() {
        // 8 x 4 reserved + 32 shared = 64 units.
        let mut b = SharedBuffer::new(4, 32);
        // Priority 0 stops draining: it gets its reserve and the whole shared part.
        let mut taken = 0;
        while b.add(0, 1) {
            taken += 1;
        }
        assert_eq!(taken, 36);
        assert_eq!(b.blocked(1), Priorities::only(0));
        // Every other priority still takes its 4, and no more.
        for p in 1..8 {
            for _ in 0..4 {
                assert!(b.add(p, 1), "priority {p}");
            }
            assert!(!b.admits(p, 1), "priority {p}");
        }
        assert_eq!(b.blocked(1), Priorities::ALL);
        // Room above a reserve goes back to the shared part: priority 0 drains 10,
        // priority 5 may take them.
        b.remove(0, 10);
        assert_eq!(b.held(0), 26);
        assert!(b.admits(5, 10) && !b.admits(5, 11));
        assert!(b.add(5, 10));
        // Draining within a reserve frees no shared room.
        b.remove(3, 4);
        assert_eq!(b.blocked(1), Priorities::ALL.without(Priorities::only(3)));
        // More given back than held is clamped.
        b.remove(3, 9);
        assert_eq!(b.held(3), 0);
    }
}
