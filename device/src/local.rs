//! The native NIC model: the firmware runtime compiled for the host, over a register file
//! (with the ABI's host access rules) and the host's memory.

use crate::model::NicModel;
use crate::port::{PortQueues, QueuePort};
use roce_abi::reg;
use roce_core::dcb::Priorities;
use roce_core::engine::{DcbConfig, PortConfig};
use roce_firmware::fastpath::FastPathPort;
use roce_firmware::hal::{Datapath, FastPath, Hal, RegFile};
use roce_firmware::runtime::{Nic, NicRuntime};
use roce_host::{Device, HostMemory};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// How big a model's tables are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacities {
    /// The soft-core firmware's (`roce_firmware::config`): 8 QPs.
    Firmware,
    /// A host-sized NIC: 64 QPs with deeper queues, for benchmarks.
    Host,
}

/// What the driver's side and the firmware's side share.
struct Shared {
    regs: RefCell<RegFile>,
    mem: HostMemory,
    clock: Cell<u64>,
    /// A doorbell was written since the firmware last looked (the hardware's pending bit).
    doorbell: Cell<bool>,
}

/// A datapath chosen at run time, as the HAL's one datapath type.
struct DynDatapath(Box<dyn Datapath>);

impl Datapath for DynDatapath {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.0.transmit(frame)
    }
    fn can_transmit(&self) -> bool {
        self.0.can_transmit()
    }
    fn tx_blocked(&self) -> Priorities {
        self.0.tx_blocked()
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.0.receive(buf)
    }
    fn verifies_icrc(&self) -> bool {
        self.0.verifies_icrc()
    }
    fn fastpath(&mut self) -> Option<&mut dyn FastPath> {
        self.0.fastpath()
    }
}

/// The datapath of a model whose frames go straight to and from the engine: it takes
/// and gives nothing.
struct NoPort;

impl Datapath for NoPort {
    fn transmit(&mut self, _: &[u8]) -> bool {
        false
    }
    fn can_transmit(&self) -> bool {
        false
    }
    fn receive(&mut self, _: &mut [u8]) -> Option<usize> {
        None
    }
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
        self.shared.regs.borrow().nic_read(offset)
    }
    fn reg_write(&mut self, offset: u32, value: u32) {
        self.shared.regs.borrow_mut().nic_write(offset, value);
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
    fn take_rung_qps(&mut self, rung: &mut roce_firmware::hal::QpMap) -> bool {
        self.shared.regs.borrow_mut().take_rung_qps(rung)
    }
}

/// Where the model's frames go.
enum Frames {
    /// Straight between the harness and the engine: the software datapath, whose
    /// receive checks are the engine's own parse (structure, lengths, ICRC). No queue,
    /// no copy.
    Direct,
    /// Through frame queues and the datapath model in front of them.
    Queued(Rc<RefCell<PortQueues>>),
}

/// The firmware runtime on the host: a register file, host memory, and a port.
pub struct LocalNic {
    shared: Rc<Shared>,
    frames: Frames,
    fw: RefCell<Box<dyn NicRuntime>>,
    /// The last poll found nothing to do and nothing a poll reads has changed since:
    /// the clock, a frame in or out, a register the host wrote (`write_reg`: doorbells,
    /// the command queue's producer index, the CQs' consumer indexes). A poll now would
    /// find nothing again, so [`NicModel::run_until_idle`] skips it: the harness runs
    /// the NIC after a frame arrives and again when it pulls the port at the same
    /// nanosecond, and that second poll was one of three per packet of a stream
    /// (BENCHMARKS.md, scale13). Only over the software datapath ([`Frames::Direct`]):
    /// a datapath model in front of queues (RTL) may move a frame along in a poll
    /// that reports nothing.
    settled: Cell<bool>,
}

/// Context entries of the fast path's model: at least the host capacity's QPs, and as
/// many as the Verilated RTL's, so the two context caches map QPs to entries alike.
const FASTPATH_QPS: usize = roce_hdl_sim::FP_CTX_ENTRIES;

/// Frames the port's transmit queue holds before the runtime waits (a datapath model's
/// FIFO, with room kept per priority: `PortQueues`).
const TX_QUEUE: usize = 64;

/// Frames of each priority the port's transmit queue holds in front of a fast path. The
/// segmenter builds a frame when the port has room; frames it built ahead would be
/// beyond a FLUSH's reach: after a NAK, each would go out before the resends and be
/// sent again after them (with 64, a Go-Back-N rewind took 12 us and resent 50 packets
/// per NAK against the firmware's 15; `docs/fastpath.md` §2.2).
const FASTPATH_TX_QUEUE: usize = 1;

impl LocalNic {
    /// The runtime over the software datapath: frames go straight to and from the engine
    /// ([`NicModel::receive_frame`], [`NicModel::transmit_frame`]).
    pub fn new(cfg: PortConfig, caps: Capacities) -> Rc<Self> {
        Self::boot(cfg, caps, Frames::Direct, Box::new(NoPort))
    }

    /// The runtime over the datapath `make` builds in front of the port's frame queues
    /// (the RTL of `roce-hdl-sim`, say): frames enter the queues with
    /// [`NicModel::receive_frame`] and pass the datapath when the runtime polls.
    pub fn with_datapath<E>(
        cfg: PortConfig,
        caps: Capacities,
        make: impl FnOnce(QueuePort) -> Result<Box<dyn Datapath>, E>,
    ) -> Result<Rc<Self>, E> {
        Self::with_queues(cfg, caps, PortQueues::new(TX_QUEUE), make)
    }

    /// [`LocalNic::with_datapath`] for a datapath with an RC fast path in it (the RTL's,
    /// say): the port holds `FASTPATH_TX_QUEUE` frame per priority.
    pub fn with_fastpath_datapath<E>(
        cfg: PortConfig,
        caps: Capacities,
        make: impl FnOnce(QueuePort) -> Result<Box<dyn Datapath>, E>,
    ) -> Result<Rc<Self>, E> {
        Self::with_queues(cfg, caps, PortQueues::per_priority(FASTPATH_TX_QUEUE), make)
    }

    fn with_queues<E>(
        cfg: PortConfig,
        caps: Capacities,
        queues: PortQueues,
        make: impl FnOnce(QueuePort) -> Result<Box<dyn Datapath>, E>,
    ) -> Result<Rc<Self>, E> {
        let queues = Rc::new(RefCell::new(queues));
        let dp = make(QueuePort(queues.clone()))?;
        Ok(Self::boot(cfg, caps, Frames::Queued(queues), dp))
    }

    /// The runtime over the RC fast path's software model (`docs/fastpath.md`), the
    /// model standing in for the hardware, in front of the port's frame queues.
    pub fn with_fastpath(cfg: PortConfig, caps: Capacities) -> Rc<Self> {
        Self::with_fastpath_over(cfg, caps, |port| {
            Ok::<_, std::convert::Infallible>(Box::new(port))
        })
        .unwrap_or_else(|e| match e {})
    }

    /// The fast path's model in front of the datapath `make` builds (the RTL, say).
    pub fn with_fastpath_over<E, D: Datapath + 'static>(
        cfg: PortConfig,
        caps: Capacities,
        make: impl FnOnce(QueuePort) -> Result<Box<D>, E>,
    ) -> Result<Rc<Self>, E> {
        Self::with_fastpath_datapath(cfg, caps, |port| {
            let dp = make(port)?;
            Ok(Box::new(FastPathPort::<D, FASTPATH_QPS>::new(*dp)) as Box<dyn Datapath>)
        })
    }

    fn boot(cfg: PortConfig, caps: Capacities, frames: Frames, dp: Box<dyn Datapath>) -> Rc<Self> {
        let shared = Rc::new(Shared {
            regs: RefCell::new(RegFile::new()),
            mem: HostMemory::default(),
            clock: Cell::new(0),
            doorbell: Cell::new(false),
        });
        let hal = LocalHal {
            shared: shared.clone(),
            mem: shared.mem.clone(),
            port: DynDatapath(dp),
        };
        let fw: Box<dyn NicRuntime> = match caps {
            Capacities::Firmware => Box::new(roce_firmware::config::FirmwareNic::new(hal, cfg)),
            Capacities::Host => Box::new(Nic::<_, 64, 64, 8, 64, 64, 64, 128, 16>::new(hal, cfg)),
        };
        Rc::new(Self {
            shared,
            frames,
            fw: RefCell::new(fw),
            settled: Cell::new(false),
        })
    }

    /// The port's frame queues, when its frames go through a datapath model.
    pub fn queues(&self) -> Option<&Rc<RefCell<PortQueues>>> {
        match &self.frames {
            Frames::Direct => None,
            Frames::Queued(q) => Some(q),
        }
    }
}

impl NicModel for LocalNic {
    fn set_time(&self, now: u64) {
        // The harness sets the time before every event, mostly to the time it already
        // is: nothing changes then (only this writes the clock registers, and they start
        // at zero with the clock).
        if now <= self.shared.clock.get() {
            return;
        }
        self.shared.clock.set(now);
        self.settled.set(false);
        // The device clock the host reads (`CLOCK_LO`/`CLOCK_HI`, docs/abi.md), as the
        // SoC's RAM HAL publishes it: `roce_host::rdma_cm` runs its CM timers on it.
        let mut regs = self.shared.regs.borrow_mut();
        regs.nic_write(reg::CLOCK_LO, now as u32);
        regs.nic_write(reg::CLOCK_HI, (now >> 32) as u32);
    }

    fn now(&self) -> u64 {
        self.shared.clock.get()
    }

    fn poll(&self) -> bool {
        if let Frames::Queued(q) = &self.frames {
            // The classifier in front of the transmit queue follows the port's map (the
            // firmware's register write after a MODIFY_DCB, in hardware).
            let map = self.fw.borrow().port_config().dcb.map;
            q.borrow_mut().set_map(map);
        }
        let busy = self.fw.borrow_mut().poll();
        self.settled
            .set(!busy && matches!(self.frames, Frames::Direct));
        busy
    }

    fn run_until_idle(&self) {
        if self.settled.get() {
            // What the skipped poll would have done, checked where tests run: nothing
            // (not a counter moves). Its only trace, the runtime's poll count (`tick`),
            // orders the QP cache's uses and is compared only with itself, so one poll
            // fewer shifts every later use alike.
            #[cfg(debug_assertions)]
            {
                let mut fw = self.fw.borrow_mut();
                let before = *fw.counters();
                let busy = fw.poll();
                debug_assert!(
                    !busy && *fw.counters() == before,
                    "a settled NIC's poll did something"
                );
            }
            return;
        }
        while self.poll() {}
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.fw.borrow().poll_timeout()
    }

    fn receive_frame(&self, frame: &[u8]) {
        self.settled.set(false);
        match &self.frames {
            Frames::Direct => self.fw.borrow_mut().receive_frame(frame),
            Frames::Queued(q) => q.borrow_mut().rx.push_back(frame.to_vec()),
        }
    }

    fn transmit_frame(&self, buf: &mut [u8]) -> Option<usize> {
        self.transmit_frame_except(buf, Priorities::NONE)
    }

    /// Straight from the engine, only the unblocked priorities are built; from a
    /// datapath's queue, the oldest frame of an unblocked priority.
    fn transmit_frame_except(&self, buf: &mut [u8], blocked: Priorities) -> Option<usize> {
        self.settled.set(false);
        match &self.frames {
            Frames::Direct => self.fw.borrow_mut().transmit_frame_except(buf, blocked),
            Frames::Queued(q) => {
                let frame = q.borrow_mut().pop_tx_except(blocked)?;
                let dst = buf.get_mut(..frame.len())?;
                dst.copy_from_slice(&frame);
                Some(frame.len())
            }
        }
    }

    /// Straight from the engine, its own answer; a datapath's queue is not looked at.
    /// Not asking leaves the NIC settled: the call it stands for would only have
    /// cleared the engine's summary flag, which no poll acts on but to find nothing.
    fn may_transmit_except(&self, blocked: Priorities) -> bool {
        match &self.frames {
            Frames::Direct => self.fw.borrow().tx_waiting_except(blocked),
            Frames::Queued(_) => true,
        }
    }

    fn port_config(&self) -> PortConfig {
        *self.fw.borrow().port_config()
    }

    fn dcb(&self) -> DcbConfig {
        self.fw.borrow().port_config().dcb
    }

    fn context_dma(&self) -> (u64, u64) {
        let fw = self.fw.borrow();
        let c = fw.counters();
        (c.qp_cache_misses, c.qp_cache_evictions)
    }
}

impl Device for LocalNic {
    fn read_reg(&self, offset: u32) -> u32 {
        self.shared.regs.borrow().host_read(offset)
    }

    fn write_reg(&self, offset: u32, value: u32) {
        self.settled.set(false);
        self.shared.regs.borrow_mut().host_write(offset, value);
        if reg::is_queue_doorbell(offset) {
            self.shared.doorbell.set(true);
        }
    }

    fn memory(&self) -> &HostMemory {
        &self.shared.mem
    }

    fn progress(&self) {
        self.poll();
    }
}
