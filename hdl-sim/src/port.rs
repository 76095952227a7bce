//! The Verilated datapath as the firmware's `Datapath`: the same firmware runtime runs
//! unchanged on it. Received frames pass through the RTL RX parser (frames it rejects are
//! dropped and counted by error, as the hardware would); frames the engine built go
//! through the RTL TX ICRC inserter, which appends the ICRC the wire carries.

use crate::datapath::RtlDatapath;
use crate::meta::RxError;
use crate::sim::DataWidth;
use roce_core::engine::PortConfig;
use roce_firmware::hal::Datapath;
use roce_host::{Capacities, LocalNic, PortQueues};
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

/// The RTL datapath between a NIC's port queues and its firmware.
pub struct RtlPort {
    dp: RtlDatapath,
    port: Rc<RefCell<PortQueues>>,
    counters: Rc<RefCell<RtlPortCounters>>,
}

impl Datapath for RtlPort {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        if !self.can_transmit() {
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
        self.port.borrow_mut().tx.push_back(out);
        true
    }

    fn can_transmit(&self) -> bool {
        let q = self.port.borrow();
        q.tx.len() < q.tx_limit
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        loop {
            let frame = self.port.borrow_mut().rx.pop_front()?;
            let Ok(v) = self.dp.rx(&frame) else { continue };
            let mut c = self.counters.borrow_mut();
            match v.error() {
                None if frame.len() <= buf.len() => {
                    c.rx_ok += 1;
                    buf[..frame.len()].copy_from_slice(&frame);
                    return Some(frame.len());
                }
                None => {}
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

/// An in-process NIC (the firmware runtime) whose datapath is the Verilated RTL at
/// `width`, and its port's counters. Fails when the model cannot be built or started.
pub fn rtl_nic(
    cfg: PortConfig,
    caps: Capacities,
    width: DataWidth,
) -> Result<(Rc<LocalNic>, Rc<RefCell<RtlPortCounters>>), crate::SimError> {
    let counters = Rc::new(RefCell::new(RtlPortCounters::default()));
    let mut dp = Some(RtlDatapath::new(width)?);
    let c = counters.clone();
    let nic = LocalNic::with_datapath(cfg, caps, move |port| {
        let dp = dp.take().expect("the closure runs once");
        Box::new(RtlPort {
            dp,
            port,
            counters: c,
        })
    });
    Ok((nic, counters))
}
