//! The firmware's statistics window: what the main loop of a firmware image measures of
//! itself, published past the ABI's registers at offsets the host reads from its BAR.
//! The image writes it (`firmware/image/src/mmio.rs`); simulations of the SoC read it
//! (`roce_hdl_sim::soc`). Not part of the ABI: a host driver must not need it.

/// The firmware's statistics (offsets in the host window, past the ABI's registers):
/// the host reads them at the same offsets of its BAR. What the firmware measures of
/// itself with `mcycle` and `minstret`: the polls of its main loop that found work, what
/// they cost, and the frames they moved. Each 64-bit figure is two words, low first.
pub mod stat_reg {
    /// Polls of the main loop that did something (`Nic::poll` returned true).
    pub const BUSY_POLLS: u32 = 0x4000;
    /// Frames the runtime handed to the datapath (low 32 bits).
    pub const FRAMES_TX: u32 = 0x4004;
    /// Frames the runtime took from the datapath (low 32 bits).
    pub const FRAMES_RX: u32 = 0x4008;
    /// Polls of the main loop that found nothing to do: two of them after the host's
    /// last doorbell or frame tell a simulation the firmware has gone idle.
    pub const IDLE_POLLS: u32 = 0x400C;
    /// Cycles spent in busy polls (`mcycle`), low and high word.
    pub const BUSY_CYCLES: u32 = 0x4010;
    /// Instructions retired in busy polls (`minstret`), low and high word.
    pub const BUSY_INSTRET: u32 = 0x4018;
    /// Cycles from reset to the first poll (boot, including building the NIC).
    pub const BOOT_CYCLES: u32 = 0x4020;
    /// When the engine's next timer is due, ns of the board clock, low and high word
    /// (all ones: none armed): a simulation advances an idle SoC to then.
    pub const NEXT_TIMEOUT: u32 = 0x4028;
    /// Bytes of stack the firmware has used since reset (its deepest point, measured:
    /// the image paints the stack at boot and probes it while idle).
    pub const STACK_USED: u32 = 0x4030;
    /// The largest busy poll since the last poll that ran a command (issue 14's
    /// "any single packet": commands are the control path, so the host resets this
    /// figure with any command, e.g. QUERY_COUNTERS): its instructions (`minstret`),
    /// 0 before one.
    pub const MAX_POLL_INSTRET: u32 = 0x4034;
    /// That poll's cycles (`mcycle`).
    pub const MAX_POLL_CYCLES: u32 = 0x4038;
    /// What that poll handled, two words ([`super::PollWork`]'s bytes).
    pub const MAX_POLL_WORK: u32 = 0x403C;
    /// Bytes of the statistics area.
    pub const LEN: u32 = 0x100;
}

/// The runtime's counts that say what one poll handled: taken after every busy poll,
/// the difference of two is that poll's [`PollWork`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollCounts {
    /// Commands run: a poll that ran one is not a packet's.
    pub commands: u32,
    work: [u32; 7],
}

impl PollCounts {
    /// The counts now (low 32 bits: a poll's differences are small).
    pub fn of(c: &crate::abi::RuntimeCounters) -> Self {
        Self {
            commands: c.commands as u32,
            work: [
                c.frames_tx as u32,
                c.frames_rx as u32,
                c.fp_events as u32,
                c.fp_descriptors as u32,
                c.send_wqes as u32,
                c.recv_wqes as u32,
                c.cqes as u32,
            ],
        }
    }

    /// What the polls since `earlier` handled, each count saturated at 255.
    pub fn since(&self, earlier: &PollCounts) -> PollWork {
        let mut bytes = [0u8; 8];
        for ((b, now), then) in bytes.iter_mut().zip(&self.work).zip(&earlier.work) {
            *b = now.wrapping_sub(*then).min(255) as u8;
        }
        PollWork(bytes)
    }
}

/// What one busy poll handled, a byte a count (saturated at 255), in this order:
/// frames sent, frames received, fast-path events, fast-path descriptors, send WQEs
/// fetched, receive WQEs fetched, CQEs written; the eighth byte is 0. Published as two
/// little-endian words at [`stat_reg::MAX_POLL_WORK`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollWork(pub [u8; 8]);

impl PollWork {
    /// Frames the poll sent.
    pub fn frames_tx(&self) -> u8 {
        self.0[0]
    }
    /// Frames the poll took from the datapath.
    pub fn frames_rx(&self) -> u8 {
        self.0[1]
    }
    /// Fast-path events the poll handled.
    pub fn fp_events(&self) -> u8 {
        self.0[2]
    }
    /// Message descriptors the poll posted to the fast path.
    pub fn fp_descriptors(&self) -> u8 {
        self.0[3]
    }
    /// Send WQEs the poll fetched and posted.
    pub fn send_wqes(&self) -> u8 {
        self.0[4]
    }
    /// Receive WQEs the poll fetched and posted.
    pub fn recv_wqes(&self) -> u8 {
        self.0[5]
    }
    /// CQEs the poll wrote.
    pub fn cqes(&self) -> u8 {
        self.0[6]
    }

    /// The two words of [`stat_reg::MAX_POLL_WORK`].
    pub fn words(&self) -> [u32; 2] {
        let b = self.0;
        [
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        ]
    }

    /// From the two words of [`stat_reg::MAX_POLL_WORK`].
    pub fn from_words(w: [u32; 2]) -> Self {
        let (a, b) = (w[0].to_le_bytes(), w[1].to_le_bytes());
        Self([a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_polls_work_saturates_and_goes_through_its_two_words() {
        let mut c = crate::abi::RuntimeCounters {
            commands: 7,
            frames_tx: u64::from(u32::MAX),
            ..Default::default()
        };
        let before = PollCounts::of(&c);
        c.frames_tx += 2; // wraps in 32 bits
        c.frames_rx = 300;
        c.fp_events = 1;
        c.cqes = 5;
        let now = PollCounts::of(&c);
        assert_eq!(now.commands, before.commands);
        let w = now.since(&before);
        assert_eq!(w, PollWork([2, 255, 1, 0, 0, 0, 5, 0]));
        assert_eq!(
            (w.frames_tx(), w.frames_rx(), w.fp_events(), w.cqes()),
            (2, 255, 1, 5)
        );
        assert_eq!(PollWork::from_words(w.words()), w);
        assert_eq!(w.words(), [0x0001_FF02, 0x0005_0000]);
    }
}
