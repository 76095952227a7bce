//! Congestion control at the NIC: the DCQCN reaction point (per-QP rate control driven by
//! CNPs), the notification point (CNP generation on ECN-CE), and the pacer that enforces
//! the current rate. Sans-IO: time is passed in as nanoseconds; nothing reads a clock.
//!
//! The algorithm follows the DCQCN authors' simulator as summarised in roce-facts §7.3
//! (ns3-rdma `rpr_cnm_received`, `ResumeAlpha`, `rpr_*`, `AdjustRates`):
//! * on a CNP: `Rt <- Rc`, `alpha <- (1 - g) alpha + g`, `Rc <- max(Rmin, Rc (1 - alpha/2))`,
//!   reset the stage counters T and BC and restart both timers;
//! * every `alpha_timer` without a CNP: `alpha <- (1 - g) alpha`;
//! * a rate-increase event (every `increase_timer`, and every `byte_counter` bytes sent)
//!   bumps T or BC, then: fast recovery while `max(T, BC) < F` (`Rc <- (Rt + Rc)/2`),
//!   additive increase when one of them reached F (`Rt += R_AI`), hyper increase when
//!   both did (`Rt += i R_HAI`, `i = min(T, BC) - F + 1`), and `Rc <- (Rt + Rc)/2`;
//!   both rates are capped at line rate.
//!
//! Arithmetic is integer (rates in bit/s, alpha in Q20 fixed point), so a soft core
//! without an FPU runs it cheaply and every platform computes the same numbers.
//!
//! The engine holds one [`QpCc`] per QP slot and drives it: CE-marked packets and CNPs
//! from `handle_packet`, pacing and CNP emission in `poll_transmit`, the timers through
//! `poll_timeout` / `handle_timeout`. [`CcConfig`] (in `PortConfig::cc`) turns it on;
//! by default it is off and the wire is as without it.

/// Fixed-point one for alpha and g (Q20).
pub const ONE: u32 = 1 << 20;

/// Timer periods of each kind one `handle_timeout` call applies at most (a QP back
/// from host memory after a long time; see [`ReactionPoint::handle_timeout`]).
pub const MAX_CATCH_UP: u32 = 1 << 16;

/// Reaction-point parameters. Defaults are the DCQCN paper's set as listed in roce-facts
/// §7.4 (g, K, timer, B, F, R_AI), with the ns3-rdma values where the paper's are not
/// known (R_HAI 200 Mb/s, minimum rate 100 Mb/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DcqcnConfig {
    /// Line rate in bit/s: the starting rate and the cap.
    pub line_rate: u64,
    /// Gain g in Q20 (1/256 = 4096).
    pub g: u32,
    /// Alpha before the first CNP, Q20.
    pub initial_alpha: u32,
    /// K: alpha decays after this long without a CNP (ns).
    pub alpha_timer_ns: u64,
    /// Rate-increase timer period (ns).
    pub increase_timer_ns: u64,
    /// Byte counter B: a rate-increase event every B bytes sent.
    pub byte_counter: u64,
    /// F: fast-recovery steps.
    pub fast_recovery_steps: u32,
    /// R_AI: additive increase step (bit/s).
    pub rate_ai: u64,
    /// R_HAI: hyper increase step (bit/s).
    pub rate_hai: u64,
    /// Floor of the current rate (bit/s).
    pub min_rate: u64,
}

impl DcqcnConfig {
    /// The default parameter set for a link of `line_rate` bit/s.
    pub const fn new(line_rate: u64) -> Self {
        Self {
            line_rate,
            g: ONE / 256,
            initial_alpha: ONE,
            alpha_timer_ns: 55_000,
            increase_timer_ns: 55_000,
            byte_counter: 10 * 1024 * 1024,
            fast_recovery_steps: 5,
            rate_ai: 40_000_000,
            rate_hai: 200_000_000,
            min_rate: 100_000_000,
        }
    }
}

/// Per-QP reaction point state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReactionPoint {
    /// Current rate Rc (bit/s).
    rc: u64,
    /// Target rate Rt (bit/s).
    rt: u64,
    /// Alpha, Q20.
    alpha: u32,
    /// Timer stage counter T.
    t: u32,
    /// Byte stage counter BC.
    bc: u32,
    /// Bytes sent since the last byte-counter event.
    bytes: u64,
    /// When alpha next decays (None until the first CNP).
    alpha_at: Option<u64>,
    /// When the rate next increases (None while at line rate).
    increase_at: Option<u64>,
}

impl ReactionPoint {
    /// A flow at line rate that has seen no CNP.
    pub const fn new(cfg: &DcqcnConfig) -> Self {
        Self {
            rc: cfg.line_rate,
            rt: cfg.line_rate,
            alpha: cfg.initial_alpha,
            t: 0,
            bc: 0,
            bytes: 0,
            alpha_at: None,
            increase_at: None,
        }
    }

    /// Current rate Rc in bit/s.
    pub const fn rate(&self) -> u64 {
        self.rc
    }
    /// Target rate Rt in bit/s.
    pub const fn target_rate(&self) -> u64 {
        self.rt
    }
    /// Alpha in Q20.
    pub const fn alpha(&self) -> u32 {
        self.alpha
    }

    /// A CNP arrived for this flow.
    pub fn on_cnp(&mut self, cfg: &DcqcnConfig, now: u64) {
        self.rt = self.rc;
        self.alpha = mix(self.alpha, cfg.g, ONE);
        let cut = mul_q20(self.rc, self.alpha) / 2;
        self.rc = self.rc.saturating_sub(cut).max(cfg.min_rate);
        self.t = 0;
        self.bc = 0;
        self.bytes = 0;
        self.alpha_at = Some(now + cfg.alpha_timer_ns);
        self.increase_at = Some(now + cfg.increase_timer_ns);
    }

    /// `n` bytes left the NIC for this flow; may trigger byte-counter increase events.
    pub fn on_sent(&mut self, cfg: &DcqcnConfig, n: u64) {
        if self.increase_at.is_none() || cfg.byte_counter == 0 {
            return; // at line rate: nothing to recover
        }
        self.bytes += n;
        while self.bytes >= cfg.byte_counter && self.increase_at.is_some() {
            self.bytes -= cfg.byte_counter;
            self.bc = self.bc.saturating_add(1);
            self.increase(cfg);
        }
    }

    /// The next instant a timer fires.
    pub fn poll_timeout(&self) -> Option<u64> {
        match (self.alpha_at, self.increase_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs every timer due at `now`, each period in turn, however many have passed (a
    /// QP whose context was in host memory catches up when it comes back,
    /// `Engine::restore_qp`). A period that can change nothing ends the walk (later
    /// ones are only counted), and at most [`MAX_CATCH_UP`] periods of each timer are
    /// applied per call, so any gap, under any configuration, costs bounded time; the
    /// default parameters reach line rate and alpha 0 well within that.
    pub fn handle_timeout(&mut self, cfg: &DcqcnConfig, now: u64) {
        let period = cfg.alpha_timer_ns.max(1);
        let mut budget = MAX_CATCH_UP;
        while let Some(at) = self.alpha_at.filter(|&at| at <= now) {
            let alpha = mix(self.alpha, cfg.g, 0);
            if budget == 0 || (alpha == self.alpha && alpha != 0) {
                // g = 0 moves alpha in no period; or the walk's budget is spent.
                self.alpha_at = Some(skip_periods(at, now, period).1);
                break;
            }
            budget -= 1;
            self.alpha = alpha;
            // Once alpha reached 0 the timer can change nothing: stop it, so an idle
            // flow stops asking to be woken.
            self.alpha_at = (self.alpha != 0).then_some(at + period);
        }
        let period = cfg.increase_timer_ns.max(1);
        let mut budget = MAX_CATCH_UP;
        while let Some(at) = self.increase_at.filter(|&at| at <= now) {
            if budget == 0 {
                self.skip_increases(at, now, period);
                break;
            }
            budget -= 1;
            let before = (self.rc, self.rt);
            self.increase_at = Some(at + period);
            self.t = self.t.saturating_add(1);
            self.increase(cfg);
            if self.increase_at.is_some()
                && (self.rc, self.rt) == before
                && self.t >= cfg.fast_recovery_steps
            {
                // Past fast recovery an event that moved neither rate is a fixed point
                // (no increase step, or Rt capped with Rc at it): later timer events
                // only count T.
                self.skip_increases(at + period, now, period);
                break;
            }
        }
    }

    /// Counts in T the rate-increase periods from `at` to `now` without applying them.
    fn skip_increases(&mut self, at: u64, now: u64, period: u64) {
        let (n, next) = skip_periods(at, now, period);
        self.t = self.t.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        self.increase_at = Some(next);
    }

    fn increase(&mut self, cfg: &DcqcnConfig) {
        let f = cfg.fast_recovery_steps;
        if self.t.max(self.bc) < f {
            // fast recovery: Rt unchanged
        } else if self.t.min(self.bc) >= f {
            let i = u64::from(self.t.min(self.bc) - f + 1);
            self.rt = self.rt.saturating_add(i.saturating_mul(cfg.rate_hai));
        } else {
            self.rt = self.rt.saturating_add(cfg.rate_ai);
        }
        self.rt = self.rt.min(cfg.line_rate);
        self.rc = (self.rt + self.rc).div_ceil(2).min(cfg.line_rate);
        if self.rc >= cfg.line_rate {
            // Fully recovered: stop the increase timer (alpha keeps decaying).
            self.increase_at = None;
            self.bytes = 0;
        }
    }
}

/// A timer of `period` due at `at` (not after `now`): how many of its periods end at or
/// before `now`, and when the first one after `now` ends.
fn skip_periods(at: u64, now: u64, period: u64) -> (u64, u64) {
    if at > now {
        return (0, at);
    }
    let n = (now - at) / period + 1;
    (n, at.saturating_add(n.saturating_mul(period)))
}

/// `(1 - g) x + g target`, all Q20.
fn mix(x: u32, g: u32, target: u32) -> u32 {
    let g = u64::from(g.min(ONE));
    let v = (u64::from(x) * (u64::from(ONE) - g) + u64::from(target) * g) >> 20;
    v as u32
}

/// `rate * q / 2^20` without overflow.
fn mul_q20(rate: u64, q: u32) -> u64 {
    ((u128::from(rate) * u128::from(q)) >> 20) as u64
}

/// Paces transmissions at a rate: a packet may leave when the previous one's
/// serialisation at the paced rate has passed (a token bucket of one packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pacer {
    next_at: u64,
}

impl Pacer {
    /// A pacer whose next packet may leave at `next_at` (a fast path's pacing entry
    /// takes the engine's, `fastpath::Pace`).
    pub const fn at(next_at: u64) -> Self {
        Self { next_at }
    }
    /// Earliest instant the next packet may leave.
    pub const fn ready_at(&self) -> u64 {
        self.next_at
    }
    /// Whether a packet may leave at `now`.
    pub const fn ready(&self, now: u64) -> bool {
        now >= self.next_at
    }
    /// Account a packet of `wire_bytes` sent at `now` at `rate` bit/s.
    pub fn on_sent(&mut self, now: u64, wire_bytes: u64, rate: u64) {
        let gap = (wire_bytes * 8 * 1_000_000_000).div_ceil(rate.max(1));
        self.next_at = self.next_at.max(now) + gap;
    }
}

/// Notification point: sends at most one CNP per flow per interval (roce-facts §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NotificationPoint {
    last: Option<u64>,
}

/// The DCQCN authors' CNP interval: 50 us.
pub const DEFAULT_CNP_INTERVAL_NS: u64 = 50_000;

impl NotificationPoint {
    /// A CE-marked packet of this flow arrived at `now`: returns true if a CNP should be
    /// sent now.
    pub fn on_ce(&mut self, now: u64, interval_ns: u64) -> bool {
        match self.last {
            Some(t) if now < t.saturating_add(interval_ns) => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }
}

/// ECN codepoint ECT(0), which this NIC puts on the frames of rate-controlled QPs so that
/// switches mark rather than ignore them (the ConnectX CNP capture carries ECT(0) too,
/// roce-facts §1.4).
pub const ECN_ECT0: u8 = 0b10;
/// ECN codepoint CE (Congestion Experienced).
pub const ECN_CE: u8 = 0b11;

/// Engine-wide congestion control settings ([`crate::engine::PortConfig::cc`]). The
/// default turns everything off: frames are Not-ECT, nothing is paced, CE marks are only
/// counted, and CNPs are counted and ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcConfig {
    /// Notification point: answer CE-marked packets of RC/UC QPs with CNPs.
    pub np: bool,
    /// Reaction point for QPs created from now on (`Engine::set_qp_cc` switches one QP):
    /// their frames carry ECT(0), CNPs for them cut their rate, and their data packets
    /// are paced at that rate.
    pub rp: bool,
    /// Fewest nanoseconds between two CNPs for one QP (roce-facts §7.2: 50 us in the
    /// DCQCN authors' simulator; ConnectX firmware uses 2-4 us).
    pub cnp_interval_ns: u64,
    /// DSCP of CNPs (ConnectX default 48, roce-facts §7.2).
    pub cnp_dscp: u8,
    /// 802.1p priority of CNPs on a VLAN-tagged QP (ConnectX default 6).
    pub cnp_prio: u8,
    /// Reaction-point parameters; `line_rate` is the rate a QP starts at and the cap.
    pub dcqcn: DcqcnConfig,
}

impl Default for CcConfig {
    fn default() -> Self {
        Self::OFF
    }
}

impl CcConfig {
    /// The default: everything off (a `const` for NICs built at compile time).
    pub const OFF: Self = Self {
        np: false,
        rp: false,
        cnp_interval_ns: DEFAULT_CNP_INTERVAL_NS,
        cnp_dscp: 48,
        cnp_prio: 6,
        dcqcn: DcqcnConfig::new(100_000_000_000),
    };

    /// DCQCN on (notification and reaction point, every new QP) for a link of
    /// `line_rate` bit/s, with the default parameters.
    pub fn dcqcn(line_rate: u64) -> Self {
        Self {
            np: true,
            rp: true,
            dcqcn: DcqcnConfig::new(line_rate),
            ..Self::default()
        }
    }
}

/// Bytes a frame of `len` bytes (without FCS) occupies on the wire: padded to 60, plus
/// FCS 4, preamble and SFD 8 and the inter-frame gap 12. The pacer spaces frames by this,
/// so a QP paced at line rate is exactly as fast as the link.
pub const fn wire_bytes(len: usize) -> u64 {
    let len = if len < 60 { 60 } else { len };
    len as u64 + 24
}

/// A QP's congestion control state and counters, as [`crate::engine::Engine::qp_cc`]
/// reports them (for time series).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpCcInfo {
    /// The reaction point is on: frames are ECT(0) and data is paced at `rate`.
    pub rp_enabled: bool,
    /// Current rate Rc (bit/s).
    pub rate: u64,
    /// Target rate Rt (bit/s).
    pub target_rate: u64,
    /// Alpha, Q20.
    pub alpha: u32,
    /// CNPs this QP reacted to (mlx5 `rp_cnp_handled`, per QP).
    pub rp_cnp_handled: u64,
    /// CNPs this QP sent (mlx5 `np_cnp_sent`, per QP).
    pub np_cnp_sent: u64,
    /// CE-marked packets this QP received (mlx5 `np_ecn_marked_roce_packets`, per QP).
    pub np_ecn_marked_roce_packets: u64,
}

/// Per-QP congestion control: the reaction point, its pacer, the notification point and
/// the CNP waiting to go out. The engine keeps these beside the QP contexts (not in
/// them: the firmware's contexts stay within their 256 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCc {
    rp_on: bool,
    rp: ReactionPoint,
    pacer: Pacer,
    np: NotificationPoint,
    /// A CNP is owed to the peer QP.
    cnp_pending: bool,
    /// `poll_transmit` held a data packet back for the pacer: wake at `pacer.ready_at()`.
    held: bool,
    info: QpCcInfo,
}

impl QpCc {
    /// Writes the whole state into a stored QP context (`engine::ctx`).
    pub(crate) fn save(&self, w: &mut crate::engine::ctx::Put<'_>) {
        w.bool(self.rp_on);
        let rp = &self.rp;
        w.u64(rp.rc);
        w.u64(rp.rt);
        w.u32(rp.alpha);
        w.u32(rp.t);
        w.u32(rp.bc);
        w.u64(rp.bytes);
        w.opt_u64(rp.alpha_at);
        w.opt_u64(rp.increase_at);
        w.u64(self.pacer.next_at);
        w.opt_u64(self.np.last);
        w.bool(self.cnp_pending);
        w.bool(self.held);
        let i = &self.info;
        w.bool(i.rp_enabled);
        for v in [
            i.rate,
            i.target_rate,
            i.rp_cnp_handled,
            i.np_cnp_sent,
            i.np_ecn_marked_roce_packets,
        ] {
            w.u64(v);
        }
        w.u32(i.alpha);
    }

    /// Reads what [`QpCc::save`] wrote.
    pub(crate) fn load(
        r: &mut crate::engine::ctx::Get<'_>,
    ) -> Result<Self, crate::engine::ctx::CtxError> {
        let rp_on = r.bool()?;
        let rp = ReactionPoint {
            rc: r.u64()?,
            rt: r.u64()?,
            alpha: r.u32()?,
            t: r.u32()?,
            bc: r.u32()?,
            bytes: r.u64()?,
            alpha_at: r.opt_u64()?,
            increase_at: r.opt_u64()?,
        };
        let pacer = Pacer { next_at: r.u64()? };
        let np = NotificationPoint { last: r.opt_u64()? };
        let (cnp_pending, held, rp_enabled) = (r.bool()?, r.bool()?, r.bool()?);
        let (rate, target_rate) = (r.u64()?, r.u64()?);
        let (rp_cnp_handled, np_cnp_sent, np_ecn) = (r.u64()?, r.u64()?, r.u64()?);
        Ok(Self {
            rp_on,
            rp,
            pacer,
            np,
            cnp_pending,
            held,
            info: QpCcInfo {
                rp_enabled,
                rate,
                target_rate,
                alpha: r.u32()?,
                rp_cnp_handled,
                np_cnp_sent,
                np_ecn_marked_roce_packets: np_ecn,
            },
        })
    }

    /// Fresh state for a new QP under `cfg`.
    pub const fn new(cfg: &CcConfig) -> Self {
        Self {
            rp_on: cfg.rp,
            rp: ReactionPoint::new(&cfg.dcqcn),
            pacer: Pacer { next_at: 0 },
            np: NotificationPoint { last: None },
            cnp_pending: false,
            held: false,
            info: QpCcInfo {
                rp_enabled: cfg.rp,
                rate: 0,
                target_rate: 0,
                alpha: 0,
                rp_cnp_handled: 0,
                np_cnp_sent: 0,
                np_ecn_marked_roce_packets: 0,
            },
        }
    }

    /// Switches the reaction point; the rate restarts at line rate.
    pub fn set_rp(&mut self, cfg: &CcConfig, on: bool) {
        self.rp_on = on;
        self.info.rp_enabled = on;
        self.rp = ReactionPoint::new(&cfg.dcqcn);
        self.pacer = Pacer::default();
        self.held = false;
    }

    /// The reaction point is on (frames carry ECT(0)).
    pub const fn rp_on(&self) -> bool {
        self.rp_on
    }

    /// A data packet may not leave at `now`: the QP is below line rate and its pacer
    /// has not yet allowed the next one.
    pub fn gated(&self, cfg: &CcConfig, now: u64) -> bool {
        self.rp_on && self.rp.rate() < cfg.dcqcn.line_rate && !self.pacer.ready(now)
    }

    /// `poll_transmit` held a data packet back (or did not).
    pub fn set_held(&mut self, held: bool) {
        self.held = held;
    }

    /// A data frame of `len` bytes left at `now`: paces the next one and feeds the byte
    /// counter when `count` (not when a fast path's pacing entry counts the QP's bytes,
    /// `fastpath::Pace`).
    pub fn on_sent(&mut self, cfg: &CcConfig, now: u64, len: usize, count: bool) {
        if !self.rp_on || self.rp.rate() >= cfg.dcqcn.line_rate {
            return; // at line rate the link itself is the pacer
        }
        self.pacer.on_sent(now, wire_bytes(len), self.rp.rate());
        if count {
            self.rp.on_sent(&cfg.dcqcn, wire_bytes(len));
        }
    }

    /// Takes a fast path's pacer (its pacing entry's, which paced the QP's packets
    /// since the engine last sent one).
    pub fn set_pacer(&mut self, pacer: Pacer) {
        self.pacer = pacer;
    }

    /// A CNP for this QP arrived; false when the reaction point is off (ignored).
    pub fn on_cnp(&mut self, cfg: &CcConfig, now: u64) -> bool {
        if !self.rp_on {
            return false;
        }
        self.rp.on_cnp(&cfg.dcqcn, now);
        self.info.rp_cnp_handled += 1;
        true
    }

    /// A CE-marked packet arrived; `np` says whether this QP may answer with a CNP.
    /// Returns true when a CNP is now owed.
    pub fn on_ce(&mut self, cfg: &CcConfig, now: u64, np: bool) -> bool {
        self.info.np_ecn_marked_roce_packets += 1;
        if np && self.np.on_ce(now, cfg.cnp_interval_ns) {
            self.cnp_pending = true;
        }
        self.cnp_pending
    }

    /// A CNP is owed.
    pub const fn cnp_pending(&self) -> bool {
        self.cnp_pending
    }

    /// The owed CNP went out.
    pub fn cnp_sent(&mut self) {
        self.cnp_pending = false;
        self.info.np_cnp_sent += 1;
    }

    /// The next instant `handle_timeout` has work: a DCQCN timer, or the pacer releasing
    /// a held packet.
    pub fn poll_timeout(&self) -> Option<u64> {
        if !self.rp_on {
            return None;
        }
        let pace = self.held.then_some(self.pacer.ready_at());
        match (self.rp.poll_timeout(), pace) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the DCQCN timers due at `now`; a held packet whose time came is released
    /// (the next `poll_transmit` sends it).
    pub fn handle_timeout(&mut self, cfg: &CcConfig, now: u64) {
        if !self.rp_on {
            return;
        }
        self.rp.handle_timeout(&cfg.dcqcn, now);
        if self.held && self.pacer.ready(now) {
            self.held = false;
        }
    }

    /// The QP's pacing entry for a fast path's segmenter (`docs/fastpath.md` §2.5), or
    /// `None` with the reaction point off: the rate while below line rate (0: the link
    /// paces), the pacer, the increase timer's next expiry while paced, and the byte
    /// counter as `on_sent` keeps them.
    pub fn pace(&self, cfg: &CcConfig) -> Option<crate::fastpath::Pace> {
        if !self.rp_on {
            return None;
        }
        let paced = self.rp.rate() < cfg.dcqcn.line_rate;
        Some(crate::fastpath::Pace {
            rate: if paced { self.rp.rate() } else { 0 },
            pacer: self.pacer,
            timer_at: self.rp.increase_at.filter(|_| paced),
            bytes: self.rp.bytes,
            byte_counter: cfg.dcqcn.byte_counter,
        })
    }

    /// The byte counter as a fast path's segmenter counted it (the wire bytes of the
    /// data packets it paced since the counter was last written, from the value then,
    /// `fastpath::Pace::on_sent`): runs the byte-counter increase events they make,
    /// exactly as `on_sent` per packet would have (the hardware stops the QP at the
    /// packet that reaches the threshold, so no later packet is counted before this).
    pub fn take_bytes(&mut self, cfg: &CcConfig, bytes: u64) {
        if !self.rp_on {
            return;
        }
        self.rp.bytes = 0;
        self.rp.on_sent(&cfg.dcqcn, bytes);
    }

    /// Where the rate-increase timer and the rate stand: what a run of the timers that
    /// changes it must tell a fast path's pacing entry.
    pub const fn increase_state(&self) -> (Option<u64>, u64) {
        (self.rp.increase_at, self.rp.rc)
    }

    /// The QP's rate and counters.
    pub fn info(&self) -> QpCcInfo {
        QpCcInfo {
            rate: self.rp.rate(),
            target_rate: self.rp.target_rate(),
            alpha: self.rp.alpha(),
            ..self.info
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G100: u64 = 100_000_000_000;

    #[test]
    fn first_cnp_halves_the_rate_with_alpha_one() {
        // alpha = (1 - 1/256) * 1 + 1/256 = 1; Rc = 100G * (1 - 1/2) = 50G; Rt = 100G.
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        assert_eq!(rp.alpha(), ONE);
        assert_eq!(rp.rate(), 50_000_000_000);
        assert_eq!(rp.target_rate(), G100);
        // A second CNP at once: Rt = 50G, Rc = 25G.
        rp.on_cnp(&cfg, 0);
        assert_eq!(
            (rp.rate(), rp.target_rate()),
            (25_000_000_000, 50_000_000_000)
        );
    }

    #[test]
    fn alpha_decays_by_one_minus_g_per_period() {
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        rp.handle_timeout(&cfg, 55_000); // also the first increase event
                                         // alpha = 1 * 255/256 = 0.99609375 -> Q20 1044480.
        assert_eq!(rp.alpha(), 1_044_480);
        rp.handle_timeout(&cfg, 110_000);
        // 0.99609375 * 255/256 = 0.992202758..., Q20 floor 1040400.
        assert_eq!(rp.alpha(), 1_040_400);
    }

    #[test]
    fn fast_recovery_then_additive_then_hyper_increase() {
        let mut cfg = DcqcnConfig::new(G100);
        cfg.byte_counter = 0; // timer events only: T grows, BC stays 0
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0); // Rc 50G, Rt 100G
                            // Fast recovery (T = 1..4 < F = 5): Rc halves the gap to Rt each time.
        let mut expect_rc = 50_000_000_000u64;
        for k in 1..=4u64 {
            rp.handle_timeout(&cfg, 55_000 * k);
            expect_rc = (G100 + expect_rc).div_ceil(2);
            assert_eq!(rp.rate(), expect_rc, "step {k}");
            assert_eq!(rp.target_rate(), G100);
        }
        // T = 5 >= F, BC = 0 < F: additive increase, Rt capped at line rate.
        rp.handle_timeout(&cfg, 55_000 * 5);
        assert_eq!(rp.target_rate(), G100);

        // Hyper increase needs both counters >= F: from a low rate, with B small.
        let mut cfg = DcqcnConfig::new(G100);
        cfg.byte_counter = 1000;
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        rp.on_cnp(&cfg, 0);
        rp.on_cnp(&cfg, 0); // Rc = 12.5G, Rt = 25G
        assert_eq!(
            (rp.rate(), rp.target_rate()),
            (12_500_000_000, 25_000_000_000)
        );
        rp.on_sent(&cfg, 5 * 1000); // BC = 5: one of the counters at F -> additive
                                    // BC=1..4 fast recovery: Rc -> 18.75, 21.875, 23.4375, 24.21875 G; BC=5: Rt += 40M.
        assert_eq!(rp.target_rate(), 25_040_000_000);
        assert_eq!(rp.rate(), (25_040_000_000u64 + 24_218_750_000).div_ceil(2));
        for k in 1..=5u64 {
            rp.handle_timeout(&cfg, 55_000 * k); // T = 1..5; at T = 5 both >= F: hyper
        }
        // T=1..4 with BC=5: additive (+40M each): Rt = 25.2G; T=5: i = 1 -> +200M.
        assert_eq!(rp.target_rate(), 25_400_000_000);
    }

    #[test]
    fn rate_never_falls_below_the_floor() {
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        for _ in 0..100 {
            rp.on_cnp(&cfg, 0);
        }
        assert_eq!(rp.rate(), cfg.min_rate);
    }

    #[test]
    fn recovery_returns_to_line_rate_and_stops_the_timer() {
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        let mut now = 0;
        while rp.rate() < G100 {
            now = rp.poll_timeout().unwrap();
            rp.handle_timeout(&cfg, now);
            assert!(now < 10_000_000_000, "no recovery");
        }
        assert_eq!(rp.target_rate(), G100);
        // Only the alpha timer remains, still on its 55 us grid.
        let next = rp.poll_timeout().unwrap();
        assert!(next > now && next % 55_000 == 0);
    }

    #[test]
    fn pacer_spaces_packets_at_the_rate() {
        let mut p = Pacer::default();
        p.on_sent(0, 1250, 10_000_000_000); // 10 000 bits at 10 Gb/s = 1 us
        assert_eq!(p.ready_at(), 1000);
        assert!(!p.ready(999) && p.ready(1000));
        p.on_sent(5000, 1250, 10_000_000_000); // idle gap: no credit is banked
        assert_eq!(p.ready_at(), 6000);
    }

    #[test]
    fn alpha_timer_stops_once_alpha_is_zero() {
        // alpha only decays; at 0 the timer could change nothing, so it stops and an
        // idle flow at line rate asks for no more wake-ups.
        let mut cfg = DcqcnConfig::new(G100);
        cfg.g = ONE / 2; // alpha halves per period: 2^20 -> 0 after 21 periods
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        let mut wakeups = 0;
        while let Some(t) = rp.poll_timeout() {
            rp.handle_timeout(&cfg, t);
            wakeups += 1;
            assert!(wakeups < 1000);
        }
        assert_eq!((rp.alpha(), rp.rate()), (0, G100));
    }

    #[test]
    fn a_long_gap_is_caught_up_period_by_period() {
        // One call covering 20 periods gives what 20 calls, one per period, give.
        let cfg = DcqcnConfig::new(G100);
        let (mut one, mut each) = (ReactionPoint::new(&cfg), ReactionPoint::new(&cfg));
        for rp in [&mut one, &mut each] {
            rp.on_cnp(&cfg, 0);
            rp.on_cnp(&cfg, 0);
        }
        one.handle_timeout(&cfg, 20 * 55_000 + 7);
        for k in 1..=20 {
            each.handle_timeout(&cfg, k * 55_000);
        }
        assert_eq!(one, each);
        assert!(
            one.rate() < G100,
            "still recovering: the test covers increases"
        );
    }

    #[test]
    fn a_gap_of_a_year_costs_no_more_than_its_changes() {
        // g = 0 and no increase step: neither timer ever converges. A QP away for a
        // year must come back at once, T counted and both timers on their grid.
        let mut cfg = DcqcnConfig::new(G100);
        (cfg.g, cfg.rate_ai, cfg.rate_hai) = (0, 0, 0);
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0); // Rc 50G, Rt 100G, alpha 1
        let year = 365 * 86_400 * 1_000_000_000u64;
        rp.handle_timeout(&cfg, year); // period by period: 5.7e11 of each
        assert_eq!(rp.alpha(), ONE);
        // Fast recovery then additive steps of 0: Rc converges to Rt = 100G... which is
        // line rate, so the increase timer stopped.
        assert_eq!((rp.rate(), rp.target_rate()), (G100, G100));
        let next = rp.poll_timeout().unwrap();
        assert_eq!(
            next,
            (year / 55_000 + 1) * 55_000,
            "alpha's timer on its grid"
        );

        // Rt below line rate and nothing to raise it: Rc settles at Rt for ever.
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        rp.on_cnp(&cfg, 0); // Rc 25G, Rt 50G
        rp.handle_timeout(&cfg, year);
        assert_eq!(
            (rp.rate(), rp.target_rate()),
            (50_000_000_000, 50_000_000_000)
        );
        assert_eq!(rp.t, u32::try_from(year / 55_000).unwrap_or(u32::MAX));
        assert_eq!(rp.increase_at, Some((year / 55_000 + 1) * 55_000));
    }

    /// The fast path's byte counter (`fastpath::Pace`): it counts the paced packets'
    /// wire bytes from the entry's `bytes` and stops the QP at the packet that reaches
    /// the threshold; `take_bytes` with that count leaves the reaction point as
    /// `on_sent` per packet does, and the entry the engine then writes back
    /// (`QpCc::pace`) goes on from the same place. (`take_bytes` adding to the bytes
    /// it had instead of starting from the count fails it: tried.)
    #[test]
    fn the_fast_paths_byte_counter_is_the_engines() {
        let mut cfg = CcConfig::dcqcn(G100);
        cfg.dcqcn.byte_counter = 5000;
        let (mut engine, mut fp) = (QpCc::new(&cfg), QpCc::new(&cfg));
        for c in [&mut engine, &mut fp] {
            assert!(c.on_cnp(&cfg, 0));
        }
        let mut pace = fp.pace(&cfg).unwrap();
        let mut now = 0;
        for (k, len) in [1082usize, 1082, 606, 1082, 62, 1082, 1082, 1082, 300, 1082]
            .into_iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            now = now.max(engine.pacer.ready_at());
            engine.on_sent(&cfg, now, len, true);
            if pace.on_sent(now, len) {
                fp.take_bytes(&cfg, pace.bytes);
                let back = fp.pace(&cfg).unwrap();
                (pace.rate, pace.timer_at, pace.bytes) = (back.rate, back.timer_at, back.bytes);
            }
            assert_eq!(pace.pacer, engine.pacer, "packet {k}: the pacer");
            assert_eq!(fp.info(), engine.info(), "packet {k}: the rates");
        }
        assert!(
            engine.info().rate > G100 / 2,
            "the byte counter raised the rate"
        );
    }

    #[test]
    fn notification_point_sends_one_cnp_per_interval() {
        let mut np = NotificationPoint::default();
        assert!(np.on_ce(0, DEFAULT_CNP_INTERVAL_NS));
        assert!(!np.on_ce(49_999, DEFAULT_CNP_INTERVAL_NS));
        assert!(np.on_ce(50_000, DEFAULT_CNP_INTERVAL_NS));
        assert!(!np.on_ce(60_000, DEFAULT_CNP_INTERVAL_NS));
    }
}
