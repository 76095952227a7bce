//! The Verilated datapath as the firmware's `Datapath`: the same firmware runtime runs
//! unchanged on it. [`RtlPort`] stands between the runtime and a port (any `Datapath`
//! that moves whole frames to and from a wire: a NIC model's frame queues, say).
//! Received frames pass through the RTL RX parser (frames it rejects are dropped and
//! counted by error, as the hardware would); frames the engine built go through the RTL
//! TX ICRC inserter, which appends the ICRC the wire carries.

use crate::datapath::RtlDatapath;
use crate::meta::RxError;
use crate::sim::{DataWidth, SimError};
use roce_core::dcb::Priorities;
use roce_firmware::hal::Datapath;
use std::cell::RefCell;
use std::rc::Rc;

/// Counters of the RTL port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RtlPortCounters {
    /// Frames the RX parser accepted.
    pub rx_ok: u64,
    /// Frames it rejected, with the error it gave.
    pub rx_dropped: Vec<(RxError, u64)>,
    /// Frames whose ICRC from the RTL differed from the engine's (a bug in one of them).
    pub tx_icrc_mismatch: u64,
}

/// The RTL datapath in front of the port `P`.
pub struct RtlPort<P> {
    dp: RtlDatapath,
    port: P,
    /// Shared, so the harness can read them while the runtime owns the port.
    counters: Rc<RefCell<RtlPortCounters>>,
}

impl<P: Datapath> RtlPort<P> {
    /// The RTL at `width` in front of `port`. Fails when the model cannot be built or
    /// started (Verilator missing when this crate was built, say).
    pub fn new(width: DataWidth, port: P) -> Result<Self, SimError> {
        Ok(Self {
            dp: RtlDatapath::new(width)?,
            port,
            counters: Rc::default(),
        })
    }

    /// The port's counters (a handle that stays valid after the port is handed over).
    pub fn counters(&self) -> Rc<RefCell<RtlPortCounters>> {
        self.counters.clone()
    }
}

impl<P: Datapath> Datapath for RtlPort<P> {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        if !self.port.can_transmit() {
            return false;
        }
        // The engine's frame ends with its ICRC; the hardware gets it without and
        // appends its own.
        let body = &frame[..frame.len().saturating_sub(4)];
        let Ok(out) = self.dp.tx(body) else {
            return false;
        };
        if out != frame {
            self.counters.borrow_mut().tx_icrc_mismatch += 1;
        }
        self.port.transmit(&out)
    }

    fn can_transmit(&self) -> bool {
        self.port.can_transmit()
    }

    fn tx_blocked(&self) -> Priorities {
        self.port.tx_blocked()
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        loop {
            let n = self.port.receive(buf)?;
            let Some(frame) = buf.get(..n) else { continue };
            let Ok(v) = self.dp.rx(frame) else { continue };
            let mut c = self.counters.borrow_mut();
            match v.error() {
                None => {
                    c.rx_ok += 1;
                    return Some(n);
                }
                Some(e) => match c.rx_dropped.iter_mut().find(|(k, _)| *k == e) {
                    Some((_, n)) => *n += 1,
                    None => c.rx_dropped.push((e, 1)),
                },
            }
        }
    }

    fn verifies_icrc(&self) -> bool {
        true
    }
}
