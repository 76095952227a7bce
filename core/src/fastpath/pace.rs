//! The pacing entry (`docs/fastpath.md` §2.5): DCQCN's reaction point's rate as the
//! segmenter applies it to a QP's data packets, exactly as the engine's pacer
//! (`cc::QpCc::gated` and `on_sent`) applies it to the frames it builds. The firmware's
//! engine keeps every DCQCN decision (the rate cut at a CNP, the timers, the byte
//! counter's increase events) and writes the entry when they change it.

use crate::cc::{wire_bytes, Pacer};

/// One QP's pacing entry, for a QP with DCQCN's reaction point on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pace {
    /// The current rate Rc in bit/s while it is below line rate; 0: the link paces
    /// (the engine neither paces nor counts bytes at line rate). FW.
    pub rate: u64,
    /// When the next data packet may leave (RW: the segmenter advances it per data
    /// packet while paced, as `cc::Pacer::on_sent`).
    pub pacer: Pacer,
    /// While paced: when the rate-increase timer next fires (ns). From then until the
    /// firmware's next write the QP's data waits: the engine runs its timers before it
    /// sends, so the packet after the timer goes at the rate the timer made. FW.
    pub timer_at: Option<u64>,
    /// The byte counter: wire bytes of the data packets sent while paced since the
    /// last byte-counter event (RW).
    pub bytes: u64,
    /// The byte counter's threshold B (`DcqcnConfig::byte_counter`; 0: none). FW.
    pub byte_counter: u64,
}

impl Pace {
    /// Whether a data packet (a request, a READ response, an ATOMIC ACKNOWLEDGE) of the
    /// QP may leave at `now`.
    pub fn ready(&self, now: u64) -> bool {
        self.rate == 0 || (self.pacer.ready(now) && self.timer_at.is_none_or(|t| t > now))
    }

    /// When a data packet held at `now` may leave by the pacer alone (`None`: it waits
    /// for the firmware, its increase timer is due).
    pub fn wakes_at(&self, now: u64) -> Option<u64> {
        (self.rate != 0 && self.timer_at.is_none_or(|t| t > now)).then_some(self.pacer.ready_at())
    }

    /// A data frame of `len` bytes (without FCS) left at `now`: paces the next one and
    /// counts its bytes. True when the byte counter reached its threshold: the QP's
    /// data waits until the firmware ran the increase events and wrote the entry.
    pub fn on_sent(&mut self, now: u64, len: usize) -> bool {
        if self.rate == 0 {
            return false;
        }
        let n = wire_bytes(len);
        self.pacer.on_sent(now, n, self.rate);
        self.bytes += n;
        self.byte_counter != 0 && self.bytes >= self.byte_counter
    }
}

/// What the firmware writes into a pacing entry after DCQCN changed the QP's rate: the
/// rate and the increase timer, and the byte counter when it restarted (a CNP) or took
/// its bytes (a byte-counter event). Either write ends the wait for the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaceWrite {
    pub rate: u64,
    pub timer_at: Option<u64>,
    pub bytes: Option<u64>,
}
