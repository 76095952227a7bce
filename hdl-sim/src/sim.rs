//! Cycle-level driver of the Verilated datapath: input queues, output
//! collection, random idle cycles and back-pressure, one clock per
//! [`RtlSim::tick`].

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;

use crate::meta::{RawMeta, RxMeta};

/// Bus width of a Verilated model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataWidth {
    /// 64-bit AXI-stream (8 bytes per beat)
    W64,
    /// 512-bit AXI-stream (64 bytes per beat)
    W512,
}

impl DataWidth {
    /// Both widths that `build.rs` Verilates.
    pub const ALL: [DataWidth; 2] = [DataWidth::W64, DataWidth::W512];

    pub fn bits(self) -> u32 {
        match self {
            DataWidth::W64 => 64,
            DataWidth::W512 => 512,
        }
    }

    /// Bytes per beat.
    pub fn bytes(self) -> usize {
        self.bits() as usize / 8
    }

    /// Beats a frame of `len` bytes takes on the bus.
    pub fn beats(self, len: usize) -> usize {
        len.div_ceil(self.bytes()).max(1)
    }
}

impl fmt::Display for DataWidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-bit", self.bits())
    }
}

/// Errors of the simulation layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// The crate was built without Verilator (`cfg(roce_rtl_unavailable)`).
    Unavailable,
    /// The C++ side refused (bad width, trace file, ...).
    Model(String),
    /// Nothing came out within the cycle budget.
    Timeout {
        cycles: u64,
        waiting_for: &'static str,
    },
    /// The model produced a record with an error code outside 0..=16.
    BadErrorCode(u8),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Unavailable => {
                f.write_str("RTL simulation unavailable: roce-hdl-sim was built without Verilator")
            }
            SimError::Model(m) => write!(f, "Verilated model: {m}"),
            SimError::Timeout {
                cycles,
                waiting_for,
            } => {
                write!(f, "no {waiting_for} after {cycles} cycles")
            }
            SimError::BadErrorCode(c) => write!(f, "metadata record with unknown error code {c}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Whether this build has the Verilated models.
pub fn rtl_available() -> bool {
    cfg!(not(roce_rtl_unavailable))
}

/// One AXI-stream beat: `data` holds the bytes, `keep` bit i = byte i valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beat {
    pub data: [u64; 8],
    pub keep: u64,
    pub last: bool,
}

impl Beat {
    /// Splits a frame into beats of `width`.
    pub fn split(frame: &[u8], width: DataWidth) -> Vec<Beat> {
        let k = width.bytes();
        let n = width.beats(frame.len());
        (0..n)
            .map(|i| {
                let chunk = &frame[(i * k).min(frame.len())..((i + 1) * k).min(frame.len())];
                let mut data = [0u64; 8];
                for (j, &byte) in chunk.iter().enumerate() {
                    data[j / 8] |= u64::from(byte) << (8 * (j % 8));
                }
                let keep = if chunk.len() == 64 {
                    u64::MAX
                } else {
                    (1u64 << chunk.len()) - 1
                };
                Beat {
                    data,
                    keep,
                    last: i == n - 1,
                }
            })
            .collect()
    }

    /// The valid bytes, in order (keep must be contiguous from bit 0).
    pub fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        (0..64usize)
            .take_while(move |&i| self.keep >> i & 1 == 1)
            .map(move |i| (self.data[i / 8] >> (8 * (i % 8))) as u8)
    }
}

/// Traffic shaping of the testbench side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shaping {
    /// probability that an input stream inserts an idle cycle before a beat
    pub idle: f64,
    /// probability that an output stream holds tready low in a cycle
    pub backpressure: f64,
    /// seed of the xorshift generator behind both
    pub seed: u64,
}

impl Shaping {
    /// No idle cycles, outputs always ready.
    pub const LINE_RATE: Shaping = Shaping {
        idle: 0.0,
        backpressure: 0.0,
        seed: 1,
    };

    pub fn random(idle: f64, backpressure: f64, seed: u64) -> Shaping {
        Shaping {
            idle,
            backpressure,
            seed,
        }
    }
}

/// A transfer observed on an output, with the cycle it happened in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timed<T> {
    pub cycle: u64,
    pub value: T,
}

/// Cycle numbers of every transfer, for latency and throughput checks.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// RX input beats accepted: (cycle, last)
    pub rx_in: Vec<(u64, bool)>,
    /// RX payload beats: (cycle, last)
    pub rx_payload: Vec<(u64, bool)>,
    /// RX metadata records
    pub rx_meta: Vec<u64>,
    /// TX input beats accepted: (cycle, last)
    pub tx_in: Vec<(u64, bool)>,
    /// TX output beats: (cycle, last)
    pub tx_out: Vec<(u64, bool)>,
    /// cycles where the RX input offered a beat that was not taken
    pub rx_in_stalls: u64,
}

/// xorshift64*: a tiny deterministic generator (no dependency).
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

#[cfg(not(roce_rtl_unavailable))]
type Inner = cxx::UniquePtr<crate::ffi::bridge::DpModel>;
#[cfg(roce_rtl_unavailable)]
type Inner = core::convert::Infallible;

/// The Verilated datapath (RX parser + TX ICRC inserter) with input queues
/// and output collectors. Each [`tick`](RtlSim::tick) is one clock cycle.
///
/// Push frames (or single beats), tick, pull what came out:
/// metadata records ([`pop_rx_meta`](RtlSim::pop_rx_meta)), payload packets
/// ([`pop_rx_payload`](RtlSim::pop_rx_payload)), TX frames
/// ([`pop_tx_frame`](RtlSim::pop_tx_frame)).
pub struct RtlSim {
    inner: Inner,
    width: DataWidth,
    shaping: Shaping,
    rng: Rng,
    rx_in: VecDeque<Beat>,
    tx_in: VecDeque<Beat>,
    rx_presenting: bool,
    tx_presenting: bool,
    rx_meta: VecDeque<Timed<RxMeta>>,
    rx_payload: VecDeque<Timed<Vec<u8>>>,
    rx_payload_cur: Vec<u8>,
    tx_out: VecDeque<Timed<Vec<u8>>>,
    tx_out_cur: Vec<u8>,
    bad_code: Option<u8>,
    timeline: Option<Timeline>,
    cycle: u64,
}

impl fmt::Debug for RtlSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RtlSim")
            .field("width", &self.width)
            .field("cycle", &self.cycle)
            .finish()
    }
}

impl RtlSim {
    /// A model of `width`, reset, with line-rate shaping.
    pub fn new(width: DataWidth) -> Result<RtlSim, SimError> {
        RtlSim::build(width, false)
    }

    /// Like [`RtlSim::new`], and writes an FST waveform of every cycle to
    /// `path` (GTKWave opens it). Tracing costs speed.
    pub fn with_trace(width: DataWidth, path: &Path) -> Result<RtlSim, SimError> {
        let mut s = RtlSim::build(width, true)?;
        s.open_trace(path)?;
        s.reset();
        Ok(s)
    }

    #[cfg(not(roce_rtl_unavailable))]
    fn build(width: DataWidth, trace: bool) -> Result<RtlSim, SimError> {
        let inner = crate::ffi::bridge::new_dp_model(width.bits(), trace)
            .map_err(|e| SimError::Model(e.to_string()))?;
        assert_eq!(inner.data_width(), width.bits(), "model of the wrong width");
        let meta_width = inner.meta_width();
        assert!(
            (crate::meta::META_BITS..crate::meta::META_BITS + 64).contains(&meta_width),
            "model metadata width {meta_width} does not fit META_FIELDS ({} bits)",
            crate::meta::META_BITS
        );
        let mut s = RtlSim::with_inner(inner, width);
        s.reset();
        Ok(s)
    }

    #[cfg(roce_rtl_unavailable)]
    fn build(_width: DataWidth, _trace: bool) -> Result<RtlSim, SimError> {
        Err(SimError::Unavailable)
    }

    fn with_inner(inner: Inner, width: DataWidth) -> RtlSim {
        RtlSim {
            inner,
            width,
            shaping: Shaping::LINE_RATE,
            rng: Rng::new(1),
            rx_in: VecDeque::new(),
            tx_in: VecDeque::new(),
            rx_presenting: false,
            tx_presenting: false,
            rx_meta: VecDeque::new(),
            rx_payload: VecDeque::new(),
            rx_payload_cur: Vec::new(),
            tx_out: VecDeque::new(),
            tx_out_cur: Vec::new(),
            bad_code: None,
            timeline: None,
            cycle: 0,
        }
    }

    pub fn width(&self) -> DataWidth {
        self.width
    }

    /// Clock cycles since the model was made (reset cycles included).
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Random idle cycles and back-pressure from now on.
    pub fn set_shaping(&mut self, shaping: Shaping) {
        self.shaping = shaping;
        self.rng = Rng::new(shaping.seed);
    }

    /// Start recording the cycle of every transfer.
    pub fn record_timeline(&mut self) {
        self.timeline = Some(Timeline::default());
    }

    /// The recorded transfers (empty if [`RtlSim::record_timeline`] was not called).
    pub fn take_timeline(&mut self) -> Timeline {
        self.timeline.take().unwrap_or_default()
    }

    /// Holds reset for 4 cycles and drops everything queued or collected.
    pub fn reset(&mut self) {
        self.model_reset(4);
        self.rx_in.clear();
        self.tx_in.clear();
        self.rx_presenting = false;
        self.tx_presenting = false;
        self.rx_meta.clear();
        self.rx_payload.clear();
        self.rx_payload_cur.clear();
        self.tx_out.clear();
        self.tx_out_cur.clear();
        self.bad_code = None;
    }

    /// Queues a frame for the RX input.
    pub fn push_rx_frame(&mut self, frame: &[u8]) {
        let beats = Beat::split(frame, self.width);
        self.rx_in.extend(beats);
    }

    /// Queues one beat for the RX input.
    pub fn push_rx_beat(&mut self, beat: Beat) {
        self.rx_in.push_back(beat);
    }

    /// Queues a frame (without ICRC) for the TX input.
    pub fn push_tx_frame(&mut self, frame: &[u8]) {
        let beats = Beat::split(frame, self.width);
        self.tx_in.extend(beats);
    }

    /// Beats still waiting at the inputs.
    pub fn pending_input(&self) -> usize {
        self.rx_in.len() + self.tx_in.len()
    }

    /// The next metadata record, with the cycle it came out.
    pub fn pop_rx_meta(&mut self) -> Result<Option<Timed<RxMeta>>, SimError> {
        if let Some(c) = self.bad_code {
            return Err(SimError::BadErrorCode(c));
        }
        Ok(self.rx_meta.pop_front())
    }

    /// Records waiting in [`RtlSim::pop_rx_meta`].
    pub fn rx_meta_len(&self) -> usize {
        self.rx_meta.len()
    }

    /// The next complete payload packet, with the cycle of its last beat.
    pub fn pop_rx_payload(&mut self) -> Option<Timed<Vec<u8>>> {
        self.rx_payload.pop_front()
    }

    /// Packets waiting in [`RtlSim::pop_rx_payload`].
    pub fn rx_payload_len(&self) -> usize {
        self.rx_payload.len()
    }

    /// The next complete TX frame (with ICRC).
    pub fn pop_tx_frame(&mut self) -> Option<Timed<Vec<u8>>> {
        self.tx_out.pop_front()
    }

    /// Frames waiting in [`RtlSim::pop_tx_frame`].
    pub fn tx_frame_len(&self) -> usize {
        self.tx_out.len()
    }

    /// Runs `n` cycles.
    pub fn run(&mut self, n: u64) {
        for _ in 0..n {
            self.tick();
        }
    }

    #[cfg(roce_rtl_unavailable)]
    fn model_reset(&mut self, _cycles: u32) {
        match self.inner {}
    }

    #[cfg(not(roce_rtl_unavailable))]
    fn model_reset(&mut self, cycles: u32) {
        self.inner.pin_mut().reset(cycles);
        self.cycle = self.inner.cycles();
    }

    trace_methods!(pub);

    /// One clock cycle.
    #[cfg(roce_rtl_unavailable)]
    pub fn tick(&mut self) {
        match self.inner {}
    }

    /// One clock cycle.
    #[cfg(not(roce_rtl_unavailable))]
    pub fn tick(&mut self) {
        use crate::ffi::bridge::{AxisIn, AxisOut, CycleIn, CycleOut};

        let sh = self.shaping;
        // AXI: once tvalid is up it stays up until the transfer; idle cycles
        // are only inserted between beats.
        if !self.rx_presenting && !self.rx_in.is_empty() && !self.rng.chance(sh.idle) {
            self.rx_presenting = true;
        }
        if !self.tx_presenting && !self.tx_in.is_empty() && !self.rng.chance(sh.idle) {
            self.tx_presenting = true;
        }
        let axis = |b: Option<&Beat>| match b {
            Some(b) => AxisIn {
                data: b.data,
                keep: b.keep,
                valid: true,
                last: b.last,
            },
            None => AxisIn::default(),
        };
        let input = CycleIn {
            rx: axis(if self.rx_presenting {
                self.rx_in.front()
            } else {
                None
            }),
            rx_payload_ready: !self.rng.chance(sh.backpressure),
            rx_meta_ready: !self.rng.chance(sh.backpressure),
            tx: axis(if self.tx_presenting {
                self.tx_in.front()
            } else {
                None
            }),
            tx_out_ready: !self.rng.chance(sh.backpressure),
        };
        let empty = AxisOut::default();
        let mut out = CycleOut {
            rx_in_ready: false,
            tx_in_ready: false,
            rx_payload: empty,
            rx_meta_valid: false,
            rx_meta: [0; 32],
            tx_out: empty,
        };
        self.inner.pin_mut().cycle(&input, &mut out);
        let cyc = self.cycle;
        self.cycle += 1;

        if input.rx.valid {
            if out.rx_in_ready {
                self.rx_in.pop_front();
                self.rx_presenting = false;
                if let Some(t) = &mut self.timeline {
                    t.rx_in.push((cyc, input.rx.last));
                }
            } else if let Some(t) = &mut self.timeline {
                t.rx_in_stalls += 1;
            }
        }
        if input.tx.valid && out.tx_in_ready {
            self.tx_in.pop_front();
            self.tx_presenting = false;
            if let Some(t) = &mut self.timeline {
                t.tx_in.push((cyc, input.tx.last));
            }
        }
        if out.rx_payload.valid && input.rx_payload_ready {
            let b = Beat {
                data: out.rx_payload.data,
                keep: out.rx_payload.keep,
                last: out.rx_payload.last,
            };
            self.rx_payload_cur.extend(b.bytes());
            if let Some(t) = &mut self.timeline {
                t.rx_payload.push((cyc, b.last));
            }
            if b.last {
                let value = std::mem::take(&mut self.rx_payload_cur);
                self.rx_payload.push_back(Timed { cycle: cyc, value });
            }
        }
        if out.rx_meta_valid && input.rx_meta_ready {
            match RxMeta::decode(&RawMeta(out.rx_meta)) {
                Ok(m) => self.rx_meta.push_back(Timed {
                    cycle: cyc,
                    value: m,
                }),
                Err(c) => self.bad_code = Some(c),
            }
            if let Some(t) = &mut self.timeline {
                t.rx_meta.push(cyc);
            }
        }
        if out.tx_out.valid && input.tx_out_ready {
            let b = Beat {
                data: out.tx_out.data,
                keep: out.tx_out.keep,
                last: out.tx_out.last,
            };
            self.tx_out_cur.extend(b.bytes());
            if let Some(t) = &mut self.timeline {
                t.tx_out.push((cyc, b.last));
            }
            if b.last {
                let value = std::mem::take(&mut self.tx_out_cur);
                self.tx_out.push_back(Timed { cycle: cyc, value });
            }
        }
    }
}
