//! A platform in RAM: the register window is a [`RegFile`], host memory is any [`Dma`]
//! (the self-test uses a static buffer in the image, at its own address, so DMA is a
//! plain copy), and the datapath is any [`Datapath`] (the self-test loops the port back
//! on itself). The host side of a test reaches the same register file and memory
//! through the public fields, as a host would through MMIO and its own RAM.

use roce_core::memory::Dma;
use roce_firmware::abi::reg;
use roce_firmware::hal::{Datapath, Hal, RegFile};

/// Registers, host memory and datapath, all in RAM; time from [`crate::clock`].
pub struct RamHal<D, P> {
    /// The register window (host side: `host_read` / `host_write`).
    pub regs: RegFile,
    /// Host memory.
    pub mem: D,
    /// The frame path.
    pub datapath: P,
    /// A doorbell was written since the runtime last looked (the hardware's pending
    /// bit): the host side sets it with [`RamHal::ring`].
    pub doorbell: bool,
}

impl<D: Dma, P: Datapath> RamHal<D, P> {
    /// A platform with every register zero.
    pub fn new(mem: D, datapath: P) -> Self {
        Self {
            regs: RegFile::new(),
            mem,
            datapath,
            doorbell: true,
        }
    }

    /// The host side's MMIO write: the register takes it under the ABI's rules, and a
    /// doorbell sets the pending bit.
    pub fn ring(&mut self, offset: u32, value: u32) {
        self.regs.host_write(offset, value);
        if reg::is_queue_doorbell(offset) {
            self.doorbell = true;
        }
    }
}

impl<D: Dma, P: Datapath> Hal for RamHal<D, P> {
    type Dma = D;
    type Datapath = P;

    fn reg_read(&mut self, offset: u32) -> u32 {
        self.regs.nic_read(offset)
    }

    fn reg_write(&mut self, offset: u32, value: u32) {
        self.regs.nic_write(offset, value);
    }

    fn dma(&mut self) -> &mut D {
        &mut self.mem
    }

    fn datapath(&mut self) -> &mut P {
        &mut self.datapath
    }

    fn split(&mut self) -> (&mut D, &mut P) {
        (&mut self.mem, &mut self.datapath)
    }

    fn take_doorbells(&mut self) -> bool {
        core::mem::replace(&mut self.doorbell, false)
    }

    fn take_rung_qps(&mut self, rung: &mut roce_firmware::hal::QpMap) -> bool {
        self.regs.take_rung_qps(rung)
    }

    /// The board clock; also published in `CLOCK_LO/HI` as the hardware would.
    fn now(&mut self) -> u64 {
        let t = crate::clock::now_ns();
        self.regs.nic_write(reg::CLOCK_LO, t as u32);
        self.regs.nic_write(reg::CLOCK_HI, (t >> 32) as u32);
        t
    }
}
