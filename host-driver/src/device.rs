//! Devices the driver can open, and the in-process NIC: the real firmware runtime over a
//! register file and host memory in this process, with frame queues as its port.

use crate::memory::HostMemory;
use roce_core::cc::QpCcInfo;
use roce_core::engine::PortConfig;
use roce_core::num::Qpn;
use roce_core::transport::Counters;
use roce_firmware::abi::reg;
use roce_firmware::datapath::RxCheck;
use roce_firmware::hal::{Datapath, Hal};
use roce_firmware::runtime::{Nic, NicRuntime, RuntimeCounters};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// What the driver needs of a NIC: its register window, the host memory it DMAs, and a
/// way to let it make progress while the driver waits for it.
pub trait Device {
    /// Reads a 32-bit register.
    fn read_reg(&self, offset: u32) -> u32;
    /// Writes a 32-bit register (a doorbell, or configuration).
    fn write_reg(&self, offset: u32, value: u32);
    /// The host memory the device reaches by DMA.
    fn memory(&self) -> &HostMemory;
    /// Gives the device a chance to run (the in-process NIC polls its firmware once).
    fn progress(&self);
}

/// The port of an in-process NIC: frames it sent, frames for it to receive.
#[derive(Default)]
pub struct PortQueues {
    /// Frames the NIC transmitted, oldest first.
    pub tx: VecDeque<Vec<u8>>,
    /// Frames waiting to be received, oldest first.
    pub rx: VecDeque<Vec<u8>>,
    /// The transmit queue takes no more than this many frames (back-pressure).
    pub tx_limit: usize,
    /// The datapath's receive checks.
    pub rx_check: RxCheck,
}

/// The software datapath between the port's queues and the firmware: roce-core's
/// receive checks, frames as the engine built them.
pub struct PortDatapath(Rc<RefCell<PortQueues>>);

/// A datapath chosen at run time (software, or the RTL model from `roce-hdl-sim`).
pub struct DynDatapath(pub Box<dyn Datapath>);

impl Datapath for DynDatapath {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.0.transmit(frame)
    }
    fn can_transmit(&self) -> bool {
        self.0.can_transmit()
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.0.receive(buf)
    }
    fn verifies_icrc(&self) -> bool {
        self.0.verifies_icrc()
    }
}

impl Datapath for PortDatapath {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        let mut q = self.0.borrow_mut();
        if q.tx.len() >= q.tx_limit {
            return false;
        }
        q.tx.push_back(frame.to_vec());
        true
    }
    fn can_transmit(&self) -> bool {
        let q = self.0.borrow();
        q.tx.len() < q.tx_limit
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut q = self.0.borrow_mut();
        while let Some(frame) = q.rx.pop_front() {
            if q.rx_check.check(&frame) && frame.len() <= buf.len() {
                buf[..frame.len()].copy_from_slice(&frame);
                return Some(frame.len());
            }
        }
        None
    }
    fn verifies_icrc(&self) -> bool {
        true
    }
}

struct Shared {
    regs: RefCell<Vec<u32>>,
    mem: HostMemory,
    clock: Cell<u64>,
    /// A doorbell was written since the firmware last looked (the hardware's pending bit).
    doorbell: Cell<bool>,
}

struct LocalHal {
    shared: Rc<Shared>,
    mem: HostMemory,
    port: DynDatapath,
}

impl Hal for LocalHal {
    type Dma = HostMemory;
    type Datapath = DynDatapath;

    fn reg_read(&mut self, offset: u32) -> u32 {
        self.shared
            .regs
            .borrow()
            .get((offset / 4) as usize)
            .copied()
            .unwrap_or(0)
    }
    fn reg_write(&mut self, offset: u32, value: u32) {
        if let Some(r) = self.shared.regs.borrow_mut().get_mut((offset / 4) as usize) {
            *r = value;
        }
    }
    fn dma(&mut self) -> &mut HostMemory {
        &mut self.mem
    }
    fn datapath(&mut self) -> &mut DynDatapath {
        &mut self.port
    }
    fn split(&mut self) -> (&mut HostMemory, &mut DynDatapath) {
        (&mut self.mem, &mut self.port)
    }
    fn now(&mut self) -> u64 {
        self.shared.clock.get()
    }
    fn take_doorbells(&mut self) -> bool {
        self.shared.doorbell.replace(false)
    }
}

/// How big an in-process NIC's tables are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacities {
    /// The soft-core firmware's (`roce_firmware::config`): 8 QPs.
    Firmware,
    /// A host-sized NIC: 64 QPs with deeper queues, for benchmarks.
    Host,
}

/// An in-process NIC: the firmware runtime, a register file, host memory and a port.
pub struct LocalNic {
    cfg: PortConfig,
    shared: Rc<Shared>,
    port: Rc<RefCell<PortQueues>>,
    fw: RefCell<Box<dyn NicRuntime>>,
}

impl LocalNic {
    /// Boots a NIC with the given port addresses.
    pub fn new(cfg: PortConfig, caps: Capacities) -> Rc<Self> {
        Self::with_datapath(cfg, caps, |port| Box::new(PortDatapath(port)))
    }

    /// Boots a NIC whose datapath `make` builds around the port's queues (the RTL model
    /// of `roce-hdl-sim`, say): frames still enter and leave through `port()`.
    pub fn with_datapath(
        cfg: PortConfig,
        caps: Capacities,
        make: impl FnOnce(Rc<RefCell<PortQueues>>) -> Box<dyn Datapath>,
    ) -> Rc<Self> {
        let shared = Rc::new(Shared {
            regs: RefCell::new(vec![0; (reg::WINDOW / 4) as usize]),
            mem: HostMemory::default(),
            clock: Cell::new(0),
            doorbell: Cell::new(false),
        });
        let port = Rc::new(RefCell::new(PortQueues {
            tx_limit: 64,
            ..PortQueues::default()
        }));
        let hal = LocalHal {
            shared: shared.clone(),
            mem: shared.mem.clone(),
            port: DynDatapath(make(port.clone())),
        };
        let fw: Box<dyn NicRuntime> = match caps {
            Capacities::Firmware => Box::new(roce_firmware::config::FirmwareNic::new(hal, cfg)),
            Capacities::Host => Box::new(Nic::<_, 64, 64, 8, 64, 64, 64, 128, 16>::new(hal, cfg)),
        };
        Rc::new(Self {
            cfg,
            shared,
            port,
            fw: RefCell::new(fw),
        })
    }

    /// The port configuration it booted with.
    pub fn port_config(&self) -> &PortConfig {
        &self.cfg
    }

    /// Sets the NIC's clock (nanoseconds; must not go backwards).
    pub fn set_time(&self, now: u64) {
        self.shared.clock.set(now.max(self.shared.clock.get()));
    }

    /// The NIC's clock.
    pub fn now(&self) -> u64 {
        self.shared.clock.get()
    }

    /// Runs the firmware loop once; true if it did anything.
    pub fn poll(&self) -> bool {
        self.fw.borrow_mut().poll()
    }

    /// Runs the firmware loop until it has nothing left to do now.
    pub fn run_until_idle(&self) {
        while self.poll() {}
    }

    /// When a timer of the NIC is next due.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.fw.borrow().poll_timeout()
    }

    /// Processes a received frame at once, from the caller's buffer (no port queue).
    pub fn receive_frame(&self, frame: &[u8]) {
        self.fw.borrow_mut().receive_frame(frame);
    }

    /// Writes the next frame to send into `buf`, straight from the engine. A caller that
    /// pulls frames this way sets the port's `tx_limit` to 0 so none queue there.
    pub fn transmit_frame(&self, buf: &mut [u8]) -> Option<usize> {
        self.fw.borrow_mut().transmit_frame(buf)
    }

    /// The port's frame queues.
    pub fn port(&self) -> &Rc<RefCell<PortQueues>> {
        &self.port
    }

    /// The engine's protocol counters (rxe's names).
    pub fn counters(&self) -> Counters {
        self.fw.borrow().engine_counters()
    }

    /// The firmware runtime's counters.
    pub fn runtime_counters(&self) -> RuntimeCounters {
        self.fw.borrow().runtime_counters()
    }

    /// DCQCN's reaction point on or off for one QP (the port's `cc` config sets the
    /// default). A harness control beside the ABI, as `counters` is.
    pub fn set_qp_cc(&self, qpn: Qpn, rp: bool) -> Result<(), roce_core::transport::Error> {
        self.fw.borrow_mut().set_qp_cc(qpn, rp)
    }

    /// A QP's congestion control state (current rate, CNP and ECN counters), for time
    /// series.
    pub fn qp_cc(&self, qpn: Qpn) -> Option<QpCcInfo> {
        self.fw.borrow().qp_cc(qpn)
    }
}

impl Device for LocalNic {
    fn read_reg(&self, offset: u32) -> u32 {
        self.shared
            .regs
            .borrow()
            .get((offset / 4) as usize)
            .copied()
            .unwrap_or(0)
    }
    fn write_reg(&self, offset: u32, value: u32) {
        if let Some(r) = self.shared.regs.borrow_mut().get_mut((offset / 4) as usize) {
            // EVENT_STATUS is write-one-to-clear for the host.
            if offset == reg::EVENT_STATUS {
                *r &= !value;
            } else {
                *r = value;
            }
            if (reg::SQ_DB..reg::CQ_DB).contains(&offset) {
                self.shared.doorbell.set(true);
            }
        }
    }
    fn memory(&self) -> &HostMemory {
        &self.shared.mem
    }
    fn progress(&self) {
        self.poll();
    }
}
