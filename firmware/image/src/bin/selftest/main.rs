//! The QEMU self-test: the NIC runtime ([`FirmwareNic`]) on a RAM platform whose port is
//! looped back on itself, driven by a host that uses only the ABI (registers and rings).
//! It runs twice: on a NIC whose firmware handles every packet (the fast path switched
//! off) and on one with the RC fast path's model as its hardware (`docs/fastpath.md`).
//! Each brings up RC QPs connected to each other, runs SEND, RDMA WRITE, RDMA READ and
//! both atomics, checks memory and every CQE, and measures the budgets. A third NIC
//! holds 4,096 QPs in its 8 slots, their contexts in host memory (`docs/scale.md`), and
//! WRITEs on every pair twice. It exits through semihosting: 0 when every check
//! passed, 1 on a failed check, 101 on a panic.

#![no_std]
#![no_main]

use defmt::{error, info};
use defmt_semihosting as _;
use static_cell::{ConstStaticCell, StaticCell};

use roce_core::engine::{Engine, PortConfig};
use roce_core::memory::{AccessFlags, SliceMemory};
use roce_core::num::{Lkey, Psn, Qpn, Rkey};
use roce_core::transport::{
    ipv4_gid, AckTimeout, AddressVector, Mtu, QpAttr, QpState, RecvWr, RetryCount, RnrTimer,
    SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use roce_firmware::abi::{self, reg, CmdOp, CmdStatus, DeviceStatus, EventStatus, Version};
use roce_firmware::config::{self, FirmwareNic};
use roce_firmware::datapath::Loopback;
use roce_firmware::fastpath::FastPathPort;
use roce_firmware::runtime::Nic;
use roce_firmware_image::clock::instret;
use roce_firmware_image::mmio::MmioHal;
use roce_firmware_image::ram_hal::RamHal;
use roce_firmware_image::BOARD;
use zerocopy::little_endian::{U32, U64};
use zerocopy::IntoBytes;

/// Logs a failed check and exits 1.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            defmt::error!($($arg)+);
            $crate::fail();
        }
    };
}

mod host;
mod probe;

use host::{Cq, Host, Qp};
use probe::{DmaProbe, DpProbe, FpProbe, Split, Sum};

/// Frames the loopback holds between a poll's transmit and the next poll's receive.
const LOOP_FRAMES: usize = 8;
/// Host memory: rings and buffers.
const HOST_MEM: usize = 2 * BUF_LEN + 32 * 1024;

/// The port: its MAC and (IPv4-mapped) GID. The port is looped back, so both QPs
/// address it.
const MAC: [u8; 6] = [0x02, 0x52, 0x4F, 0x43, 0x45, 0x01];
const GID: [u8; 16] = ipv4_gid([10, 0, 0, 1]);

/// Host memory, page-aligned; the NIC's DMA reaches it at its own address.
#[repr(C, align(4096))]
struct HostMem([u8; HOST_MEM]);

/// The port: the fast path's model (switched off on the first NIC) in front of the
/// loopback, each behind its probes.
type TestPort = FpProbe<FastPathPort<DpProbe<Loopback<LOOP_FRAMES>>, { config::QPS }>>;
type TestHal = RamHal<DmaProbe<SliceMemory<'static>>, TestPort>;
/// The NIC under test: the firmware's capacities over the RAM platform.
pub type TestNic = FirmwareNic<TestHal>;

static HOST: ConstStaticCell<HostMem> = ConstStaticCell::new(HostMem([0; HOST_MEM]));
static HOST_FP: ConstStaticCell<HostMem> = ConstStaticCell::new(HostMem([0; HOST_MEM]));
static NIC: StaticCell<TestNic> = StaticCell::new();
static NIC_FP: StaticCell<TestNic> = StaticCell::new();

/// QPs of the third NIC, whose contexts live in host memory (issue 16, `docs/scale.md`).
const ICM_QPS: usize = 4096;
/// Bytes each of those QPs writes.
const ICM_LEN: usize = 64;
/// Its host memory: the ICM, every QP's rings and doorbell record, the buffers.
const ICM_HOST_MEM: usize = ICM_QPS * (abi::ICM_ENTRY_LEN + 512 + ICM_LEN) + 64 * 1024;

#[repr(C, align(4096))]
struct IcmHostMem([u8; ICM_HOST_MEM]);
static HOST_ICM: ConstStaticCell<IcmHostMem> = ConstStaticCell::new(IcmHostMem([0; ICM_HOST_MEM]));
static NIC_ICM: StaticCell<TestNic> = StaticCell::new();
/// Those QPs, as the host keeps them.
static ICM_QP_TABLE: ConstStaticCell<[Qp; ICM_QPS]> = ConstStaticCell::new([Qp::NONE; ICM_QPS]);

/// Exit after a failed check.
pub fn fail() -> ! {
    error!("self-test FAILED");
    semihosting::process::exit(1)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    error!("panic: {}", defmt::Display2Format(info));
    semihosting::process::exit(101)
}

/// Any trap is a failure: report where and why, and exit.
#[export_name = "ExceptionHandler"]
fn exception_handler(_frame: &riscv_rt::TrapFrame) -> ! {
    roce_firmware_image::log_trap();
    semihosting::process::exit(102)
}

#[riscv_rt::entry]
fn main() -> ! {
    info!(
        "roce-firmware self-test: board {=str}, RAM {=u32:#x}+{=u32:#x}",
        BOARD.name, BOARD.ram_origin, BOARD.ram_len
    );
    sizes();

    // The firmware alone: every packet through the engine (the "before" of issue 14).
    let nic = boot(&NIC, &mut HOST.take().0, true);
    let mut t = Test::bring_up(nic, "firmware only");
    t.functional();
    t.budget_write(16, 1024);
    t.budget_write(16, 64);
    t.budget_bulk();
    t.tear_down();
    t.final_checks();

    // The same with the fast path's model as the hardware.
    let nic = boot(&NIC_FP, &mut HOST_FP.take().0, false);
    let mut t = Test::bring_up(nic, "fast path");
    t.functional();
    t.budget_bulk();
    t.budget_packets();
    t.tear_down();
    t.final_checks();

    // Thousands of QPs through the firmware's slots, their contexts in host memory.
    many_qps(boot(&NIC_ICM, &mut HOST_ICM.take().0, true));

    info!("self-test PASSED");
    semihosting::process::exit(0)
}

/// Boots a NIC over host memory `mem`, its fast path switched off (`bypass`) or on.
fn boot(
    cell: &'static StaticCell<TestNic>,
    mem: &'static mut [u8],
    bypass: bool,
) -> (&'static mut TestNic, Host) {
    let (base, len) = (mem.as_ptr() as u64, mem.len());
    // Built inside the closure: the NIC is large, and a HAL built in `main` would sit in
    // main's frame while it is moved (see the README on the boot stack).
    let nic = cell.init_with(|| {
        let dma = DmaProbe {
            inner: SliceMemory::new(base, mem),
        };
        let mut port = FastPathPort::new(DpProbe::new(Loopback::default()));
        port.bypass = bypass;
        let hal = RamHal::new(dma, FpProbe::new(port));
        TestNic::new(hal, PortConfig::new(MAC, GID))
    });
    (nic, Host::new(base, len))
}

/// Issue 16: `ICM_QPS` RC QPs on a NIC with `config::QPS` slots. The host hands the NIC
/// host memory for their contexts (SET_ICM), creates them in pairs, connects each pair,
/// and WRITEs `ICM_LEN` bytes on each pair's first QP; then, with every QP created (all
/// but a few written back to the ICM), WRITEs again on every pair, which brings both
/// QPs of each pair back in. Every WRITE's bytes and CQE are checked, and at the end
/// the first QP still answers QUERY_QP in RTS.
fn many_qps((nic, mut host): (&'static mut TestNic, Host)) {
    let qps = ICM_QP_TABLE.take();
    info!("--- NIC with {=usize} QPs in host memory ---", ICM_QPS);
    host.enable_cmdq(nic, 4);
    let icm = host.alloc(ICM_QPS * abi::ICM_ENTRY_LEN, 4096);
    let arg = abi::IcmArg {
        addr: U64::new(icm),
        entries: U32::new(ICM_QPS as u32),
        reserved: U32::new(0),
    };
    host.command(nic, CmdOp::SetIcm, arg.as_bytes());
    let e = host.command(nic, CmdOp::QueryDevice, &[]);
    let dev: abi::DeviceAttr = abi::payload(&e);
    ensure!(
        dev.max_qp.get() as usize == ICM_QPS,
        "QUERY_DEVICE with an ICM: max_qp {=u32}",
        dev.max_qp.get()
    );
    let pd = host.command(nic, CmdOp::AllocPd, &[]).out.get();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let buf = host.alloc(ICM_QPS * ICM_LEN, 4096);
    let arg = abi::RegMrArg {
        pd: U32::new(pd),
        access: U32::new(access.bits()),
        addr: U64::new(buf),
        length: U64::new((ICM_QPS * ICM_LEN) as u64),
        ..Default::default()
    };
    let e = host.command(nic, CmdOp::RegMr, arg.as_bytes());
    let mr: abi::RegMrArg = abi::payload(&e);
    let (lkey, rkey) = (Lkey(mr.lkey.get()), Rkey(mr.rkey.get()));
    let mut cq = host.create_cq(nic, 4);
    let av = AddressVector {
        dmac: dev.mac,
        dgid: dev.gid,
        hop_limit: 64,
        ..Default::default()
    };
    // One WRITE on pair `pair`'s first QP, its bytes from `round`, checked.
    let write = |nic: &mut TestNic, qps: &mut [Qp], cq: &mut Cq, pair: usize, round: u8| {
        let (src, dst) = (2 * pair * ICM_LEN, (2 * pair + 1) * ICM_LEN);
        let mut data = [0u8; ICM_LEN];
        for (i, d) in data.iter_mut().enumerate() {
            *d = pattern(round.wrapping_add(pair as u8), i + pair);
        }
        Host::write(nic, buf + src as u64, &data);
        let id = u64::from(round) << 32 | pair as u64;
        let wr = SendWr::new(
            id,
            WrOp::RdmaWrite {
                remote_addr: buf + dst as u64,
                rkey,
            },
        )
        .sge(buf + src as u64, ICM_LEN as u32, lkey)
        .flags(SendFlags::SIGNALED);
        let a = &mut qps[2 * pair];
        Host::post_send(nic, a, &wr);
        let wc = Host::wait_cq(nic, cq);
        ensure!(
            wc.status == WcStatus::Success && wc.wr_id == id && wc.qp_num == a.qpn,
            "QP pair {=usize}: CQE wr_id {=u64:#x} status {=str}",
            pair,
            wc.wr_id,
            wc.status.name()
        );
        let mut got = [0u8; ICM_LEN];
        Host::read(nic, buf + dst as u64, &mut got);
        ensure!(
            got == data,
            "QP pair {=usize}: the WRITE's bytes differ",
            pair
        );
    };
    let t0 = instret();
    for pair in 0..ICM_QPS / 2 {
        let a = host.create_rc_qp_with(nic, pd, &cq, 0, true);
        let b = host.create_rc_qp_with(nic, pd, &cq, 0, true);
        let (pa, pb) = (0x10 + pair as u32, 0x8000 + pair as u32);
        connect(nic, &mut host, &a, &b, av, pa, pb, access, Mtu::Mtu1024, 14);
        connect(nic, &mut host, &b, &a, av, pb, pa, access, Mtu::Mtu1024, 14);
        qps[2 * pair] = a;
        qps[2 * pair + 1] = b;
        write(nic, &mut qps[..], &mut cq, pair, 1);
    }
    let created = nic.counters().qp_cache_misses;
    for pair in 0..ICM_QPS / 2 {
        write(nic, &mut qps[..], &mut cq, pair, 2);
    }
    let spent = instret() - t0;
    {
        let qpn = qps[0].qpn;
        let (status, e) = host.try_command(
            nic,
            CmdOp::QueryQp,
            abi::HandleArg {
                handle: U32::new(qpn.value()),
            }
            .as_bytes(),
        );
        let attr: abi::QpAttrArg = abi::payload(&e);
        ensure!(
            status == Some(CmdStatus::Ok) && attr.qp_state == QpState::Rts as u8,
            "QUERY_QP of the first QP from the ICM: state {=u8}",
            attr.qp_state
        );
    }
    let rt = *nic.counters();
    ensure!(
        rt.qp_cache_misses - created >= (ICM_QPS - config::QPS) as u64
            && rt.qp_cache_evictions >= (ICM_QPS - config::QPS) as u64
            && rt.qp_ctx_dma_bytes
                == abi::ICM_ENTRY_LEN as u64 * (rt.qp_cache_misses + rt.qp_cache_evictions)
            && rt.qp_cache_drops == 0
            && rt.dma_errors == 0,
        "QP cache counters: {=u64} misses, {=u64} evictions, {=u64} drops, {=u64} context DMA bytes",
        rt.qp_cache_misses,
        rt.qp_cache_evictions,
        rt.qp_cache_drops,
        rt.qp_ctx_dma_bytes
    );
    info!(
        "{=usize} QPs in {=usize} slots: {=usize} WRITEs checked (half of them on QPs brought back from the ICM); cache {=u64} hits, {=u64} misses, {=u64} evictions, {=u64} KiB of context DMA; {=u64} instructions from the first CREATE_QP to the last CQE",
        ICM_QPS,
        config::QPS,
        ICM_QPS,
        rt.qp_cache_hits,
        rt.qp_cache_misses,
        rt.qp_cache_evictions,
        rt.qp_ctx_dma_bytes / 1024,
        spent
    );
    // One doorbell among 4,096 QPs: the last QP used (resident) rings with nothing new
    // in its record, and the NIC polls once. The poll must cost what that QP needs,
    // not a pass over the map of every QP index (a pass over the doorbell latch's 1,024
    // words and the pending map's 64 made it 17,614; 2,184 with the summary bitmaps,
    // BENCHMARKS.md).
    let last = &qps[ICM_QPS - 2];
    Host::ring_record(nic, last);
    let t0 = instret();
    nic.poll();
    let poll = instret() - t0;
    info!(
        "one QP_DB doorbell among {=usize} QPs: one poll {=u64} instructions",
        ICM_QPS, poll
    );
    ensure!(
        poll < ONE_DOORBELL_POLL_BUDGET,
        "a poll for one doorbell among {=usize} QPs took {=u64} instructions (budget {=u64})",
        ICM_QPS,
        poll,
        ONE_DOORBELL_POLL_BUDGET
    );
}

/// Instructions one poll may take for one rung QP among 4,096 (`many_qps`).
const ONE_DOORBELL_POLL_BUDGET: u64 = 5_000;
/// Idle polls measured after the 64 KiB WRITE: what one costs when it finds nothing.
const IDLE_POLLS: u32 = 8;

/// Static RAM: the NIC as configured, and what one more QP or CQ costs.
fn sizes() {
    use config::{CQE, CQS, MRS, PDS, QPS, RD, RQ, SQ};
    use core::mem::size_of;
    type Eng = Engine<{ QPS }, { CQS }, { PDS }, { MRS }, { SQ }, { RQ }, { CQE }, { RD }>;
    let nic = size_of::<FirmwareNic<MmioHal>>();
    let per_qp = size_of::<Nic<MmioHal, 2, CQS, PDS, MRS, SQ, RQ, CQE, RD>>()
        - size_of::<Nic<MmioHal, 1, CQS, PDS, MRS, SQ, RQ, CQE, RD>>();
    let per_cq = size_of::<Nic<MmioHal, QPS, 2, PDS, MRS, SQ, RQ, CQE, RD>>()
        - size_of::<Nic<MmioHal, QPS, 1, PDS, MRS, SQ, RQ, CQE, RD>>();
    info!(
        "config: {=usize} QPs, {=usize} CQs, {=usize} PDs, {=usize} MRs, SQ {=usize}, RQ {=usize}, CQE {=usize}, RD {=usize}",
        QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD
    );
    info!(
        "static RAM: FirmwareNic<MmioHal> {=usize} B (engine {=usize} B); per QP {=usize} B (context {=usize} B, queues {=usize} B); per CQ {=usize} B",
        nic,
        Eng::size(),
        per_qp,
        Eng::qp_context_size(),
        Eng::qp_queues_size(),
        per_cq
    );
    info!(
        "self-test statics: NIC over RAM HAL {=usize} B, host memory {=usize} B",
        size_of::<TestNic>(),
        HOST_MEM
    );
}

/// Deterministic bytes for a buffer.
fn pattern(seed: u8, i: usize) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8
}

/// One side's buffer: where it is and its keys.
#[derive(Clone, Copy)]
struct Buf {
    addr: u64,
    lkey: Lkey,
    rkey: Rkey,
}

/// Bytes of each side's data buffer.
const BUF_LEN: usize = 96 * 1024;
/// Offsets in the buffers used by each step.
const SEND_AT: u64 = 0;
const WRITE_AT: u64 = 4096;
const READ_AT: u64 = 12 * 1024;
const ATOMIC_AT: u64 = 15 * 1024;
const BULK_AT: u64 = 16 * 1024;

struct Test {
    nic: &'static mut TestNic,
    pd: u32,
    cq_a: Cq,
    cq_b: Cq,
    qp_a: Qp,
    /// A second pair at path MTU 4096, for the 64 KiB budget.
    qp_c: Qp,
    qp_d: Qp,
    /// Which NIC: "firmware only" or "fast path".
    label: &'static str,
    /// Engine error counts `budget_packets` made on purpose.
    injected_errors: u64,
    qp_b: Qp,
    a: Buf,
    b: Buf,
    host: Host,
    wr_id: u64,
}

impl Test {
    /// Identity, command queue, device query, PD, MRs, CQs, two RC QPs connected to each
    /// other through the looped-back port.
    fn bring_up((nic, mut host): (&'static mut TestNic, Host), label: &'static str) -> Self {
        info!("--- NIC {=str} ---", label);
        let id = Host::reg(nic, reg::DEVICE_ID);
        let version = Version(Host::reg(nic, reg::VERSION));
        let status = DeviceStatus(Host::reg(nic, reg::STATUS));
        ensure!(id == abi::DEVICE_ID, "DEVICE_ID {=u32:#x}", id);
        ensure!(
            version.major() == abi::ABI_MAJOR,
            "ABI major {=u16}",
            version.major()
        );
        ensure!(status.ready(), "STATUS not ready: {=u32:#x}", status.0);
        info!(
            "registers: DEVICE_ID {=u32:#x}, ABI {=u16}.{=u16}, ready",
            id,
            version.major(),
            version.minor()
        );

        host.enable_cmdq(nic, 4);
        let e = host.command(nic, CmdOp::QueryDevice, &[]);
        let dev: abi::DeviceAttr = abi::payload(&e);
        ensure!(
            dev.mac == MAC && dev.gid == GID,
            "QUERY_DEVICE: wrong port address"
        );
        ensure!(
            dev.max_qp.get() as usize == config::QPS,
            "QUERY_DEVICE: max_qp {=u32}",
            dev.max_qp.get()
        );
        info!(
            "QUERY_DEVICE: max_qp {=u32} max_cq {=u32} max_mr {=u32} max_pd {=u32} max_sge {=u8} max_qp_rd_atom {=u8} mtu enum {=u8}, MAC {=[u8]:02x}, GID {=[u8]:02x}",
            dev.max_qp.get(),
            dev.max_cq.get(),
            dev.max_mr.get(),
            dev.max_pd.get(),
            dev.max_sge,
            dev.max_qp_rd_atom,
            dev.active_mtu,
            dev.mac[..],
            dev.gid[..]
        );

        let clock = |nic: &mut TestNic| {
            let lo = Host::reg(nic, reg::CLOCK_LO);
            u64::from(lo) | u64::from(Host::reg(nic, reg::CLOCK_HI)) << 32
        };
        let t0 = clock(nic);
        let pd = host.command(nic, CmdOp::AllocPd, &[]).out.get();
        info!("ALLOC_PD: pd {=u32}", pd);

        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let reg_mr = |nic: &mut TestNic, host: &mut Host| {
            let addr = host.alloc(BUF_LEN, 4096);
            let arg = abi::RegMrArg {
                pd: U32::new(pd),
                access: U32::new(access.bits()),
                addr: U64::new(addr),
                length: U64::new(BUF_LEN as u64),
                ..Default::default()
            };
            let e = host.command(nic, CmdOp::RegMr, arg.as_bytes());
            let out: abi::RegMrArg = abi::payload(&e);
            ensure!(
                out.lkey.get() == e.out.get(),
                "REG_MR: out and payload L_Key differ"
            );
            info!(
                "REG_MR: {=u64:#x}+{=usize:#x} lkey {=u32:#x} rkey {=u32:#x}",
                addr,
                BUF_LEN,
                out.lkey.get(),
                out.rkey.get()
            );
            Buf {
                addr,
                lkey: Lkey(out.lkey.get()),
                rkey: Rkey(out.rkey.get()),
            }
        };
        let a = reg_mr(nic, &mut host);
        let b = reg_mr(nic, &mut host);

        let cq_a = host.create_cq(nic, 4);
        let cq_b = host.create_cq(nic, 4);
        info!("CREATE_CQ: cqn {=u32} and {=u32}", cq_a.cqn, cq_b.cqn);
        let qp_a = host.create_rc_qp(nic, pd, &cq_a, 4);
        let qp_b = host.create_rc_qp(nic, pd, &cq_b, 4);
        info!(
            "CREATE_QP: RC qpn {=u32} and {=u32}",
            qp_a.qpn.value(),
            qp_b.qpn.value()
        );

        // The port is looped back: each QP's path leads to the port's own MAC and GID.
        let av = AddressVector {
            dmac: dev.mac,
            dgid: dev.gid,
            hop_limit: 64,
            ..Default::default()
        };
        let (psn_a, psn_b) = (0x00_1000, 0xFF_FFF0); // B's PSNs wrap during the test
        let m = Mtu::Mtu1024;
        connect(
            nic, &mut host, &qp_a, &qp_b, av, psn_a, psn_b, access, m, 14,
        );
        connect(
            nic, &mut host, &qp_b, &qp_a, av, psn_b, psn_a, access, m, 14,
        );
        let qp_c = host.create_rc_qp(nic, pd, &cq_a, 4);
        let qp_d = host.create_rc_qp(nic, pd, &cq_b, 4);
        let m = Mtu::Mtu4096;
        connect(
            nic, &mut host, &qp_c, &qp_d, av, psn_a, psn_b, access, m, 14,
        );
        connect(
            nic, &mut host, &qp_d, &qp_c, av, psn_b, psn_a, access, m, 14,
        );
        for qp in [&qp_a, &qp_b] {
            let (status, e) = host.try_command(
                nic,
                CmdOp::QueryQp,
                abi::HandleArg {
                    handle: U32::new(qp.qpn.value()),
                }
                .as_bytes(),
            );
            let attr: abi::QpAttrArg = abi::payload(&e);
            ensure!(
                status == Some(CmdStatus::Ok) && attr.qp_state == QpState::Rts as u8,
                "QUERY_QP {=u32}: state {=u8}",
                qp.qpn.value(),
                attr.qp_state
            );
        }
        let t1 = clock(nic);
        ensure!(t1 > t0, "the NIC clock does not advance ({=u64} ns)", t1);
        info!(
            "clock: CLOCK_LO/HI advanced {=u64} ns during bring-up (board clock)",
            t1 - t0
        );
        info!(
            "MODIFY_QP: both RESET -> INIT -> RTR -> RTS (MTU 1024), QUERY_QP says RTS; peers {=u32} <-> {=u32}",
            qp_a.qpn.value(),
            qp_b.qpn.value()
        );

        Self {
            nic,
            pd,
            cq_a,
            cq_b,
            qp_a,
            qp_b,
            a,
            b,
            host,
            wr_id: 0,
            qp_c,
            qp_d,
            label,
            injected_errors: 0,
        }
    }

    fn next_wr_id(&mut self) -> u64 {
        self.wr_id += 1;
        0x5E1F_0000_0000 | self.wr_id
    }

    fn fill(&mut self, addr: u64, len: usize, seed: u8) {
        let mut chunk = [0u8; 256];
        for start in (0..len).step_by(chunk.len()) {
            let n = chunk.len().min(len - start);
            for (i, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(seed, start + i);
            }
            Host::write(self.nic, addr + start as u64, &chunk[..n]);
        }
    }

    fn check_pattern(&mut self, what: &str, addr: u64, len: usize, seed: u8) {
        let mut chunk = [0u8; 256];
        for start in (0..len).step_by(chunk.len()) {
            let n = chunk.len().min(len - start);
            Host::read(self.nic, addr + start as u64, &mut chunk[..n]);
            for (i, b) in chunk[..n].iter().enumerate() {
                ensure!(
                    *b == pattern(seed, start + i),
                    "{=str}: byte {=usize} is {=u8:#x}, expected {=u8:#x}",
                    what,
                    start + i,
                    *b,
                    pattern(seed, start + i)
                );
            }
        }
    }

    /// Waits for one completion on A's CQ (or B's) and checks it.
    fn expect_wc(
        &mut self,
        on_b: bool,
        wr_id: u64,
        opcode: WcOpcode,
        byte_len: u32,
    ) -> WorkCompletion {
        let cq = if on_b { &mut self.cq_b } else { &mut self.cq_a };
        let wc = Host::wait_cq(self.nic, cq);
        ensure!(
            wc.status == WcStatus::Success,
            "CQE wr_id {=u64:#x}: status {=str}",
            wc.wr_id,
            wc.status.name()
        );
        ensure!(
            wc.wr_id == wr_id && wc.opcode == opcode && wc.byte_len == byte_len,
            "CQE: wr_id {=u64:#x} opcode {=u8} byte_len {=u32}, expected {=u64:#x} {=u8} {=u32}",
            wc.wr_id,
            wc.opcode as u8,
            wc.byte_len,
            wr_id,
            opcode as u8,
            byte_len
        );
        let qps = if on_b {
            [&self.qp_b, &self.qp_d]
        } else {
            [&self.qp_a, &self.qp_c]
        };
        ensure!(
            qps.iter().any(|q| wc.qp_num == q.qpn),
            "CQE for QP {=u32} on the wrong CQ",
            wc.qp_num.value()
        );
        wc
    }

    fn post_send(&mut self, wr: &SendWr) {
        Host::post_send(self.nic, &mut self.qp_a, wr);
    }

    /// RC SEND of a 3-packet message from A into a receive B posted.
    fn send(&mut self) {
        const LEN: usize = 3000;
        let (src, dst) = (self.a.addr + SEND_AT, self.b.addr + SEND_AT);
        self.fill(src, LEN, 1);
        let recv_id = self.next_wr_id();
        let recv = RecvWr::new(recv_id).sge(dst, 4096, self.b.lkey);
        Host::post_recv(self.nic, &mut self.qp_b, &recv);
        let id = self.next_wr_id();
        let wr = SendWr::new(id, WrOp::Send)
            .sge(src, LEN as u32, self.a.lkey)
            .flags(SendFlags::SIGNALED);
        self.post_send(&wr);
        self.expect_wc(false, id, WcOpcode::Send, LEN as u32);
        self.expect_wc(true, recv_id, WcOpcode::Recv, LEN as u32);
        self.check_pattern("SEND data", dst, LEN, 1);
        info!(
            "RC SEND: {=usize} bytes A -> B (3 packets): send and recv CQEs ok, data ok",
            LEN
        );
    }

    /// A signaled RDMA WRITE of `len` bytes from A's `src` to B's `dst`.
    fn write_wr(&self, id: u64, src: u64, dst: u64, len: usize) -> SendWr {
        SendWr::new(
            id,
            WrOp::RdmaWrite {
                remote_addr: dst,
                rkey: self.b.rkey,
            },
        )
        .sge(src, len as u32, self.a.lkey)
        .flags(SendFlags::SIGNALED)
    }

    /// RDMA WRITE from A into B's buffer.
    fn write(&mut self) {
        const LEN: usize = 5000;
        let (src, dst) = (self.a.addr + WRITE_AT, self.b.addr + WRITE_AT);
        self.fill(src, LEN, 2);
        let id = self.next_wr_id();
        let wr = self.write_wr(id, src, dst, LEN);
        self.post_send(&wr);
        self.expect_wc(false, id, WcOpcode::RdmaWrite, LEN as u32);
        self.check_pattern("WRITE data", dst, LEN, 2);
        ensure!(
            Host::poll_cq(self.nic, &mut self.cq_b).is_none(),
            "a WRITE completed on the responder"
        );
        info!(
            "RDMA WRITE: {=usize} bytes A -> B (5 packets): CQE ok, data ok",
            LEN
        );
    }

    /// RDMA READ by A of B's buffer.
    fn read(&mut self) {
        const LEN: usize = 2500;
        let (dst, src) = (self.a.addr + READ_AT, self.b.addr + READ_AT);
        self.fill(src, LEN, 3);
        let id = self.next_wr_id();
        let wr = SendWr::new(
            id,
            WrOp::RdmaRead {
                remote_addr: src,
                rkey: self.b.rkey,
            },
        )
        .sge(dst, LEN as u32, self.a.lkey)
        .flags(SendFlags::SIGNALED);
        self.post_send(&wr);
        self.expect_wc(false, id, WcOpcode::RdmaRead, LEN as u32);
        self.check_pattern("READ data", dst, LEN, 3);
        info!(
            "RDMA READ: {=usize} bytes B -> A (3 responses): CQE ok, data ok",
            LEN
        );
    }

    /// One atomic from A on B's 8-byte word; returns the value A got back.
    fn atomic(&mut self, op: WrOp, opcode: WcOpcode) -> u64 {
        let local = self.a.addr + ATOMIC_AT;
        Host::write(self.nic, local, &[0xEE; 8]);
        let id = self.next_wr_id();
        let wr = SendWr::new(id, op)
            .sge(local, 8, self.a.lkey)
            .flags(SendFlags::SIGNALED);
        self.post_send(&wr);
        self.expect_wc(false, id, opcode, 8);
        Host::read_u64(self.nic, local)
    }

    /// CMP_AND_SWP (matching, then not matching) and FETCH_AND_ADD.
    fn atomics(&mut self) {
        const OLD: u64 = 0x1111_2222_3333_4444;
        const NEW: u64 = 0x5555_6666_7777_8888;
        const ADD: u64 = 0x0000_0001_0000_0010;
        let target = self.b.addr + ATOMIC_AT;
        let rkey = self.b.rkey;
        Host::write(self.nic, target, &OLD.to_le_bytes());

        let cas = |compare, swap| WrOp::AtomicCmpAndSwp {
            remote_addr: target,
            rkey,
            compare,
            swap,
        };
        let got = self.atomic(cas(OLD, NEW), WcOpcode::CompSwap);
        let now = Host::read_u64(self.nic, target);
        ensure!(
            got == OLD && now == NEW,
            "CMP_AND_SWP: got {=u64:#x}, memory {=u64:#x}",
            got,
            now
        );
        info!(
            "ATOMIC CMP_AND_SWP: compare {=u64:#x} matched, swapped in {=u64:#x}, returned the old value",
            OLD,
            NEW
        );

        let got = self.atomic(cas(OLD, 0), WcOpcode::CompSwap);
        let now = Host::read_u64(self.nic, target);
        ensure!(
            got == NEW && now == NEW,
            "CMP_AND_SWP (no match): got {=u64:#x}, memory {=u64:#x}",
            got,
            now
        );
        info!(
            "ATOMIC CMP_AND_SWP: compare mismatched, memory unchanged, returned the current value"
        );

        let op = WrOp::AtomicFetchAndAdd {
            remote_addr: target,
            rkey,
            add: ADD,
        };
        let got = self.atomic(op, WcOpcode::FetchAdd);
        let now = Host::read_u64(self.nic, target);
        ensure!(
            got == NEW && now == NEW.wrapping_add(ADD),
            "FETCH_AND_ADD: got {=u64:#x}, memory {=u64:#x}",
            got,
            now
        );
        info!(
            "ATOMIC FETCH_AND_ADD: added {=u64:#x}, memory {=u64:#x}, returned the old value",
            ADD, now
        );
    }

    /// `count` RDMA WRITEs of `len` bytes (the last one signaled) under the probes: the
    /// instructions per packet sent and received.
    fn budget_write(&mut self, count: usize, len: usize) {
        let (src, dst) = (self.a.addr + BULK_AT, self.b.addr + BULK_AT);
        let total = count * len;
        self.fill(src, total, 4);
        self.dp().reset();
        let packets = (count * len.div_ceil(1024)) as u32;
        probe::enable(true);
        let t0 = instret();
        let mut last = 0;
        for i in 0..count {
            last = self.next_wr_id();
            let flags = if i + 1 == count {
                SendFlags::SIGNALED
            } else {
                SendFlags::NONE
            };
            let at = (i * len) as u64;
            let wr = SendWr::new(
                last,
                WrOp::RdmaWrite {
                    remote_addr: dst + at,
                    rkey: self.b.rkey,
                },
            )
            .sge(src + at, len as u32, self.a.lkey)
            .flags(flags);
            self.post_send(&wr);
        }
        self.expect_wc(false, last, WcOpcode::RdmaWrite, len as u32);
        let spent = instret() - t0;
        probe::enable(false);
        self.check_pattern("bulk WRITE data", dst, total, 4);

        let stats = self.dp().stats;
        let (tx, rx) = (stats.tx[0], stats.rx[0]);
        ensure!(
            tx.frames == packets && rx.frames == packets,
            "bulk WRITE: {=u32} data frames sent, {=u32} received, expected {=u32}",
            tx.frames,
            rx.frames,
            packets
        );
        let spent = spent - stats.overhead;
        info!(
            "budget: {=usize} x RDMA WRITE of {=usize} B = {=u32} data packets, {=u32} ACKs; whole loop {=u64} instructions from the first post to the CQE = {=u64} per data packet (host posts and polls, every poll, the software datapath's receive checks, every ICRC and copy)",
            count,
            len,
            tx.frames,
            stats.rx[1].frames,
            spent,
            spent / u64::from(tx.frames.max(1))
        );
        report("TX data packet (engine poll_transmit)", &tx);
        report("RX data packet (engine handle_packet)", &rx);
        report("TX ACK", &stats.tx[1]);
        report("RX ACK", &stats.rx[1]);
    }

    /// SEND, WRITE, READ and the atomics, each checked.
    fn functional(&mut self) {
        self.send();
        self.write();
        self.read();
        self.atomics();
    }

    /// The loopback's probe (the frames the firmware itself builds and takes).
    fn dp(&mut self) -> &mut DpProbe<Loopback<LOOP_FRAMES>> {
        &mut self.nic.hal().datapath.inner.inner
    }

    /// Issue 14's budget: one 64 KiB RDMA WRITE at path MTU 4096 (16 data packets)
    /// from A's QP to B's on the one NIC, from the post to the CQE. Counts every
    /// instruction inside the NIC's polls and takes out what hardware does: DMA copies,
    /// the ICRC, the loopback's receive checks and, with the fast path, everything its
    /// model does (the model stands in for the hardware). What is left is the firmware:
    /// the sender's and the receiver's work together, so each side's is at most that.
    fn budget_bulk(&mut self) {
        const LEN: usize = 64 * 1024;
        const PACKETS: u32 = (LEN / 4096) as u32;
        let (src, dst) = (self.a.addr + BULK_AT, self.b.addr + BULK_AT);
        // The earlier phase's last events are not this one's: the fast path writes an
        // atomic's CQE as it takes its ATOMIC ACKNOWLEDGE, before the firmware handles
        // the `ACKED` event (as a READ's), so the host may see it first.
        for _ in 0..8 {
            if !self.nic.poll() {
                break;
            }
        }
        self.fill(src, LEN, 6);
        self.dp().reset();
        self.nic.hal().datapath.reset();
        self.nic.hal().datapath.receiver = self.qp_d.qpn.value();
        let id = self.next_wr_id();
        let wr = self.write_wr(id, src, dst, LEN);
        let c0 = self.nic.counters().fastpath;
        probe::enable(true);
        let s0 = Split::now();
        Host::post_send(self.nic, &mut self.qp_c, &wr);
        self.expect_wc(false, id, WcOpcode::RdmaWrite, LEN as u32);
        let s1 = Split::now();
        // What a poll that finds nothing costs: the same NIC, right after (a phase of
        // its own for `tools/profile.py`).
        probe::enable(false);
        probe::enable(true);
        for _ in 0..IDLE_POLLS {
            ensure!(!probe::poll(self.nic), "an idle poll found work");
        }
        let idle = Split::now();
        probe::enable(false);
        self.check_pattern("64 KiB WRITE data", dst, LEN, 6);
        let dp = self.dp().stats;
        // The engine computes the ICRC of the frames it builds (hardware would).
        let icrc: u64 = dp.tx.iter().map(|t| t.icrc).sum();
        let fw = u64::from(s0.firmware_until(&s1)).saturating_sub(icrc);
        let fp = self.nic.hal().datapath.stats;
        // Each end, as if each were its own NIC polling as often: every poll's fixed
        // cost (an idle poll's) is charged to both; the work for the receiving QP (the
        // frames it took and the ACKs it built, or its fast-path events) to the
        // receiver; everything else (WQE fetch, descriptors, ACKs taken, CQEs) to the
        // sender.
        let polls = u64::from(s0.polls_until(&s1));
        let idle_poll = u64::from(s1.firmware_until(&idle)) / u64::from(IDLE_POLLS);
        let fw_of = |s: &Sum| s.total.saturating_sub(s.dma + s.icrc);
        let c1 = self.nic.counters().fastpath;
        let c = roce_firmware::hal::FastPathCounters {
            tx_frames: c1.tx_frames - c0.tx_frames,
            rx_handled: c1.rx_handled - c0.rx_handled,
            rx_exceptions: c1.rx_exceptions - c0.rx_exceptions,
            rx_dropped: c1.rx_dropped - c0.rx_dropped,
            tx_dma_errors: c1.tx_dma_errors - c0.tx_dma_errors,
            tx_resent: c1.tx_resent - c0.tx_resent,
        };
        // Without the fast path the receiver's work is the frames it took and the ACKs
        // it built; with it, the events of its QP (none at all when the hardware
        // fetches the WQE and writes the CQE, §3.8).
        let receiver_own = if c.tx_frames == 0 {
            fw_of(&dp.rx[0]) + fw_of(&dp.tx[1])
        } else {
            fp.receiver.total
        };
        let receiver = polls * idle_poll + receiver_own;
        let sender = fw.saturating_sub(receiver_own);
        info!(
            "budget ({=str}): 1 x RDMA WRITE of {=usize} B at MTU 4096 = {=u32} data packets: firmware {=u64} instructions in all polls from the post to the CQE = {=u64} per data packet, sender and receiver together (DMA, ICRC, datapath and fast-path model excluded)",
            self.label,
            LEN,
            PACKETS,
            fw,
            fw / u64::from(PACKETS)
        );
        info!(
            "budget ({=str}): per end, over {=u64} polls of which an idle one costs {=u64}: sender {=u64} instructions = {=u64} per data packet; receiver {=u64} = {=u64} per data packet ({=u64} of its own work)",
            self.label,
            polls,
            idle_poll,
            sender,
            sender / u64::from(PACKETS),
            receiver,
            receiver / u64::from(PACKETS),
            receiver_own
        );
        if c.tx_frames == 0 {
            report("TX data packet (engine poll_transmit)", &dp.tx[0]);
            report("RX data packet (engine handle_packet)", &dp.rx[0]);
            report("TX ACK", &dp.tx[1]);
            report("RX ACK", &dp.rx[1]);
            return;
        }
        info!(
            "budget ({=str}): the model sent {=u64} frames and took {=u64} itself, {=u64} went to the firmware; the firmware built {=u32} frames",
            self.label,
            c.tx_frames,
            c.rx_handled,
            c.rx_exceptions,
            dp.tx.iter().map(|t| t.frames).sum::<u32>()
        );
        let work = |what: &str, w: &probe::Work| {
            info!(
                "budget (fast path): {=str}: {=u32} x avg {=u32} instructions, max {=u32} (DMA excluded)",
                what,
                w.count,
                w.avg(),
                w.max
            );
        };
        work(
            "TX message descriptor built and posted (per WQE)",
            &fp.descriptors,
        );
        work("event EXCEPTION handled", &fp.events[1]);
        work("event MSG_DONE handled", &fp.events[2]);
        work("event ACKED handled (ACK received)", &fp.events[3]);
        work("event READ handled (READ request taken)", &fp.events[4]);
        work("event CE handled (CE-marked request taken)", &fp.events[5]);
        work(
            "event ATOMIC handled (atomic request executed)",
            &fp.events[6],
        );
        work(
            "event RNR handled (RNR NAK sent for an empty receive queue)",
            &fp.events[7],
        );
        // Issue 14 asks for at most 100 per data packet at each end and 500 for any one
        // packet the firmware handles. Said plainly either way; the run fails only if
        // the figures regress past what this version reaches, with ~15 % margin (an
        // engine change that slows the fast path's firmware side shows here).
        let per_packet = sender.max(receiver) / u64::from(PACKETS);
        let worst = fp
            .events
            .iter()
            .map(|w| w.max)
            .max()
            .unwrap_or(0)
            .max(fp.descriptors.max);
        let handled = fp.events.iter().map(|w| w.count).sum::<u32>() + fp.descriptors.count;
        let met = |ok: bool| if ok { "met" } else { "NOT met" };
        info!(
            "budget (fast path): issue 14's targets: <= 100 per data packet at each end: {=str} ({=u64}, the sender); <= 500 for one event or descriptor: {=str} ({=u32}, the most of the {=u32} the firmware handled)",
            met(per_packet <= 100),
            per_packet,
            met(worst <= 500),
            worst,
            handled
        );
        // Guards (~15 % over what this version reaches: with the WQE fetch, sender 98,
        // receiver 43 per data packet, no event or descriptor in this phase; the 800
        // for one event or descriptor is the last version's that had them here).
        ensure!(
            sender <= 115 * u64::from(PACKETS)
                && receiver <= 50 * u64::from(PACKETS)
                && worst <= 800,
            "budget (fast path) regressed: {=u64} (sender) and {=u64} (receiver) per data packet, {=u32} for one event or descriptor",
            sender / u64::from(PACKETS),
            receiver / u64::from(PACKETS),
            worst
        );
    }

    /// Issue 14's "any single packet the firmware handles: at most 500": every kind of
    /// packet the fast path hands to the firmware, made a few at a time, and the
    /// firmware's instructions for each, counted as above (DMA, ICRC and the model
    /// out): an event from `poll_event` to the next (the engine's handling, the take-
    /// back of a fetched send queue, the contexts written back), a descriptor from
    /// `tx_room` to `post_tx`, a frame the firmware builds (NAK, READ response, ...)
    /// from `can_transmit` to `transmit`, and the local ACK timeout as the firmware's
    /// part of the poll it fires in. SEND, READ and the atomics run on A and B; the
    /// loopback's wire loses or marks one frame for the rest, on a pair E, F with a
    /// ~1 ms local ACK timeout.
    fn budget_packets(&mut self) {
        const LEN: usize = 3000;
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let av = AddressVector {
            dmac: MAC,
            dgid: GID,
            hop_limit: 64,
            ..Default::default()
        };
        let mut e = self.host.create_rc_qp(self.nic, self.pd, &self.cq_a, 4);
        let mut f = self.host.create_rc_qp(self.nic, self.pd, &self.cq_b, 4);
        let (host, m) = (&mut self.host, Mtu::Mtu1024);
        connect(self.nic, host, &e, &f, av, 0x10, 0x20, access, m, 8);
        connect(self.nic, host, &f, &e, av, 0x20, 0x10, access, m, 8);
        let c0 = *self.nic.engine().counters();
        self.nic.hal().datapath.reset();
        self.dp().reset();
        // The requests the fast path answers itself (out of sequence, duplicates).
        let answered =
            |t: &mut Self| roce_firmware::hal::FastPath::rx_answered(&t.nic.hal().datapath);
        let hw0 = answered(self);
        probe::reset_timer_polls();
        probe::enable(true);

        // SEND (MSG_DONE), READ (the request at B, the responses at A) and the atomics.
        self.functional();

        let (src, dst) = (self.a.addr + BULK_AT, self.b.addr + BULK_AT);
        let write = |t: &mut Self, e: &mut Qp, seed: u8, len: usize, fault: probe::Fault| {
            t.fill(src, len, seed);
            t.dp().fault = Some(fault);
            let id = t.next_wr_id();
            let wr = t.write_wr(id, src, dst, len);
            Host::post_send(t.nic, e, &wr);
            let wc = t.wait_wc(false);
            ensure!(
                wc.status == WcStatus::Success && wc.wr_id == id && wc.qp_num == e.qpn,
                "WRITE on E: CQE wr_id {=u64:#x} status {=str}",
                wc.wr_id,
                wc.status.name()
            );
            t.check_pattern("WRITE on E", dst, len, seed);
            ensure!(t.dp().fault.is_none(), "the fault met no frame");
        };
        // Out of sequence: the WRITE's first packet is lost; the second and third come
        // out of sequence, B's fast path NAKs once (sequence error) and drops them, A
        // takes the NAK back from the fast path and rewinds (FLUSH, REPLAY).
        let lost = |opcode| probe::Fault {
            opcode,
            syndrome: 0,
            skip: 0,
            what: probe::FaultKind::Drop,
        };
        write(self, &mut e, 7, LEN, lost(0x06));
        // Duplicate: the ACK of a one-packet WRITE is lost; A's local ACK timer fires,
        // the packet is sent again, B's fast path answers the duplicate with an ACK.
        write(self, &mut e, 8, 1000, lost(0x11));
        // ECN: a one-packet WRITE arrives CE-marked; B's fast path places and ACKs it
        // and tells B's engine (a CE event), which owes E a CNP, which A's reaction
        // point takes.
        let cc = self.set_cc(Some(e.qpn));
        write(
            self,
            &mut e,
            9,
            1000,
            probe::Fault {
                opcode: 0x0A,
                syndrome: 0,
                skip: 0,
                what: probe::FaultKind::MarkCe,
            },
        );
        host::run_until(self.nic, "the CNP", |nic| {
            nic.engine().counters().rp_cnp_handled > c0.rp_cnp_handled
        });
        self.restore_cc(cc, e.qpn);
        // RNR: a SEND finds no receive WQE at F; F's engine answers RNR NAK until the
        // host posts one, A waits out the RNR timer and sends again.
        self.fill(src, 500, 10);
        let id = self.next_wr_id();
        let wr = SendWr::new(id, WrOp::Send)
            .sge(src, 500, self.a.lkey)
            .flags(SendFlags::SIGNALED);
        Host::post_send(self.nic, &mut e, &wr);
        let naks = self.nic.engine().counters().rcvd_rnr_err;
        host::run_until(self.nic, "an RNR NAK", |nic| {
            nic.engine().counters().rcvd_rnr_err > naks
        });
        let recv_id = self.next_wr_id();
        Host::post_recv(
            self.nic,
            &mut f,
            &RecvWr::new(recv_id).sge(dst, 4096, self.b.lkey),
        );
        let wc = self.wait_wc(false);
        ensure!(
            wc.status == WcStatus::Success && wc.wr_id == id,
            "SEND after RNR: CQE wr_id {=u64:#x} status {=str}",
            wc.wr_id,
            wc.status.name()
        );
        let wc = self.wait_wc(true);
        ensure!(
            wc.status == WcStatus::Success && wc.wr_id == recv_id && wc.byte_len == 500,
            "RECV after RNR: CQE wr_id {=u64:#x} status {=str}",
            wc.wr_id,
            wc.status.name()
        );
        self.check_pattern("SEND after RNR", dst, 500, 10);
        // F's send queue is the hardware's (its WQE fetch) while E's READ request at F
        // is an exception: F's acknowledged PSN stays the hardware's, so F's own READ
        // after it is placed by the hardware (an `una` written back from the engine,
        // behind the WRITE F sent before, would make its response an exception).
        let (f_buf, e_buf) = (self.b.addr + BULK_AT, self.a.addr + BULK_AT + 8192);
        let op = |t: &mut Self, qp: &mut Qp, on_b: bool, seed: u8, wr: SendWr| {
            let id = wr.wr_id;
            Host::post_send(t.nic, qp, &wr);
            let wc = t.wait_wc(on_b);
            ensure!(
                wc.status == WcStatus::Success && wc.wr_id == id && wc.qp_num == qp.qpn,
                "READ/WRITE {=u8} between E and F: CQE wr_id {=u64:#x} status {=str}",
                seed,
                wc.wr_id,
                wc.status.name()
            );
        };
        self.fill(f_buf, 1000, 11);
        let id = self.next_wr_id();
        let wr = SendWr::new(
            id,
            WrOp::RdmaWrite {
                remote_addr: e_buf,
                rkey: self.a.rkey,
            },
        )
        .sge(f_buf, 1000, self.b.lkey)
        .flags(SendFlags::SIGNALED);
        op(self, &mut f, true, 11, wr);
        self.check_pattern("WRITE from F", e_buf, 1000, 11);
        let id = self.next_wr_id();
        let read = |id, local, lkey, remote, rkey| {
            SendWr::new(
                id,
                WrOp::RdmaRead {
                    remote_addr: remote,
                    rkey,
                },
            )
            .sge(local, 1000, lkey)
            .flags(SendFlags::SIGNALED)
        };
        let (a, b) = (self.a, self.b);
        op(
            self,
            &mut e,
            false,
            12,
            read(id, e_buf + 4096, a.lkey, f_buf, b.rkey),
        );
        self.check_pattern("READ by E", e_buf + 4096, 1000, 11);
        self.fill(e_buf, 1000, 13);
        let id = self.next_wr_id();
        op(
            self,
            &mut f,
            true,
            13,
            read(id, f_buf + 4096, b.lkey, e_buf, a.rkey),
        );
        self.check_pattern("READ by F", f_buf + 4096, 1000, 13);
        probe::enable(false);

        // The faults happened as meant; the out-of-sequence requests and the duplicate
        // were the fast path's to answer (docs/fastpath.md §3.4), not the engine's.
        let c = *self.nic.engine().counters();
        let d = |f: fn(&roce_core::transport::Counters) -> u64| f(&c) - f(&c0);
        let hw = answered(self);
        let (hw_oos, hw_dup) = (hw[0] - hw0[0], hw[1] - hw0[1]);
        ensure!(
            d(|c| c.out_of_seq_request) == 0 && d(|c| c.duplicate_request) == 0,
            "the engine met {=u64} requests out of sequence and {=u64} duplicates (the fast path's)",
            d(|c| c.out_of_seq_request),
            d(|c| c.duplicate_request)
        );
        ensure!(
            hw_oos >= 1
                && d(|c| c.rcvd_seq_err) >= 1
                && d(|c| c.local_ack_timeout_err) == 1
                && hw_dup == 1
                && d(|c| c.np_cnp_sent) == 1
                && d(|c| c.rp_cnp_handled) == 1
                && d(|c| c.send_rnr_err) >= 1
                && d(|c| c.rcvd_rnr_err) >= 1,
            "fault injection: out of sequence {=u64}, NAKs taken {=u64}, ACK timeouts {=u64}, duplicates {=u64}, CNPs sent {=u64} / taken {=u64}, RNR NAKs sent {=u64} / taken {=u64}",
            hw_oos,
            d(|c| c.rcvd_seq_err),
            d(|c| c.local_ack_timeout_err),
            hw_dup,
            d(|c| c.np_cnp_sent),
            d(|c| c.rp_cnp_handled),
            d(|c| c.send_rnr_err),
            d(|c| c.rcvd_rnr_err)
        );
        let fp = self.nic.hal().datapath.stats;
        let read_response = fp
            .kinds
            .iter()
            .find(|(k, _)| probe::class(*k) == 1 && matches!(*k as u8, 0x0D..=0x10));
        ensure!(
            read_response.is_none(),
            "a READ response went to the firmware ({=u32:#x})",
            read_response.map_or(0, |(k, _)| k)
        );
        // The READ requests and the atomics come in sequence: the model's receive path
        // takes them, its segmenter sends the READ responses and the ATOMIC
        // ACKNOWLEDGEs (docs/fastpath.md §3.4, "READ requests", "Atomic requests"); the
        // firmware only records each READ's resource and each atomic's original value
        // (READ and ATOMIC events).
        let taken = fp.kinds.iter().find(|(k, _)| {
            (probe::class(*k) == 0 && matches!(*k as u8, 0x0C | 0x13 | 0x14))
                || (probe::class(*k) == 7 && matches!(*k as u8, 0x0D..=0x10 | 0x12))
        });
        ensure!(
            taken.is_none(),
            "a READ or atomic request, or its response frame, was the firmware's ({=u32:#x})",
            taken.map_or(0, |(k, _)| k)
        );
        ensure!(
            fp.events[4].count > 0 && fp.events[6].count > 0,
            "READ events {=u32}, ATOMIC events {=u32}: the fast path took no READ or no atomic",
            fp.events[4].count,
            fp.events[6].count
        );
        self.injected_errors += errors(&c) - errors(&c0);
        for qp in [e.qpn, f.qpn] {
            let arg = abi::HandleArg {
                handle: U32::new(qp.value()),
            };
            let st = self
                .host
                .try_command(self.nic, CmdOp::DestroyQp, arg.as_bytes())
                .0;
            ensure!(st == Some(CmdStatus::Ok), "DESTROY_QP of E or F");
        }
        self.report_packets();
    }

    /// The table of `budget_packets`, and its guards.
    fn report_packets(&mut self) {
        let fp = self.nic.hal().datapath.stats;
        let dp = self.dp().stats;
        let timer = probe::timer_polls();
        // The most for one packet, per class (`probe::class`), and the key; all of it.
        let mut worst = [(0u32, 0u32); probe::CLASSES];
        let mut all = 0u64;
        let kinds = fp.kinds.iter().chain(dp.kinds.iter());
        for (key, w) in kinds.chain([(probe::kind::TIMER, &timer)]) {
            let (what, a, b) = probe::kind_name(key);
            info!(
                "budget (one packet): {=str} {=str} {=str}: {=u32} x avg {=u32}, max {=u32} instructions",
                what,
                a,
                b,
                w.count,
                w.avg(),
                w.max
            );
            all += w.total;
            if let Some(c) = worst.get_mut(probe::class(key)) {
                if w.max > c.1 {
                    *c = (key, w.max);
                }
            }
        }
        let top = worst
            .iter()
            .copied()
            .max_by_key(|c| c.1)
            .unwrap_or_default();
        let (what, a, b) = probe::kind_name(top.0);
        info!(
            "budget (fast path): issue 14's <= 500 for one packet the firmware handles: {=str} (the most {=u32}: {=str} {=str} {=str}); {=u64} instructions for all of this phase's packets",
            if top.1 <= 500 { "met" } else { "NOT met" },
            top.1,
            what,
            a,
            b,
            all
        );
        // Guards per class (`probe::class`: a request's exception, a response's or
        // CNP's, MSG_DONE, ACKED, a descriptor, a frame built off the fast path's kinds,
        // the timeout's poll, a response frame built, a READ event: 283, ~15 % over
        // (394 before evcut's dispatch cut and probe correction, 464 before that);
        // a CE event: 239, ~15 % over (353); an ATOMIC event: 253, ~15 % over (363); an
        // RNR event: 301, ~15 % over (168 before it loaded a receive WQE posted while it
        // waited, lead34; 281 before that);
        // a frame built off the fast path's kinds ~5 %: a request frame's 1,761, 1,885
        // with a UD WR's destination copied for every request and 2,233 with its
        // descriptor copied out of a temporary, fwexc3; a CNP built: 441, bounded by
        // issue 14's 500, ~13 % over (822 with the template copied, re-marked and
        // emitted by the generic path, until cnpcut; 2,091 with its headers built
        // afresh and emitted field by field, fwexc4)
        // and for all of them together (a
        // regression of a small kind shows there): ~15 % over what this version
        // reaches (a request's exception 2,655, an atomic's, since a SEND's first packet
        // is the model's, sendrq; 2,776 before; 2,922 with its whole receive context
        // decoded, fwexc), ~7 % for a response's exception (1,744, an ACK of a QP
        // whose fast path is off, since the response path takes the ATOMIC
        // ACKNOWLEDGE itself, atomack: its exception was 2,757, now an ACKED event;
        // 2,757 since the WQE fetch takes the RNR NAK itself, rnrfetch; the
        // RNR NAK's with its send queue taken back was 4,152, 4,160 before fwexc4;
        // 4,416 with the fetched
        // WQE's WR moved out of `to_wr`'s `Result`, fwexc3; 4,918 with a buffer
        // zeroed per fetched WQE and the WR cloned into the engine's send queue and moved
        // twice, fwexc2; 5,380 with the send
        // queue's line copied out and back at its take-back and the fetched WR moved out
        // of its `Result`, fwexc; 5,288 then: its receive context
        // decoded, loaded and encoded again made 5,991), ~12 % for a
        // descriptor (947, 956 with `run_qp`'s epilogue inlined into every caller, 995 when
        // set: `MsgOp::of` out of line made 1,124, the scan before it running
        // QPs with nothing to hand out 1,246, a READ's `TxMsg` copied at a `?` 1,332) and ~12 % for a response frame
        // (963; 1,001 and 980 before the IPv4 ICRC correction was written out, whose loop
        // each build's inliner unrolled or not: the responder's descriptor copied once more made
        // 1,509, the frame scan looking at every QP in full 1,185), ~9 % for ACKED (1,074;
        // 1,103 with the timeout worked out when nothing was outstanding, 1,116 with the
        // send queue walked through `heapless`' own iterator, 1,141 with the hand-over
        // check's line look-up and call out of line, 1,155 with its QP looked up a
        // second time for it; avg 913, 945, 1,009), and the timeout's poll by issue
        // 14's 500, ~7 % over its 469 (tmo: the fast path's Go-Back-N takes the
        // timeout, the firmware reads its news once and takes no queue back. 987 when
        // the poll looked at every fetched queue at every passed deadline, ~250, and read
        // the news a second time for it, ~200; 583 without that, 509 with the counters
        // in the news copied without a `memcpy` call, 469 with the poll's rare paths out
        // of line: an idle poll 321 -> 269. Before the WQE fetch took Go-Back-N it was the
        // take-back, the engine's timer and its rewind: 3,079, and 4,639 refreshing
        // every QP and with a `poll_transmit` scan). All of the
        // phase before Go-Back-N and the READ responder were the model's: 91,377; 98,915 before the cuts since
        // the fast path answers requests out of sequence and duplicates itself (116,904
        // when its 6 exceptions and the NAK and ACK frames the firmware built for them
        // were the firmware's). The counts are exact under `-icount`.
        // A response's or CNP's exception (class 1) and a frame built off the fast
        // path's kinds (class 5) are gone from the phase since E, the QP with DCQCN's
        // reaction point, is the fast path's (dcqcnfp, docs/fastpath.md §2.5: its
        // WRITE_ONLY frame 1,750, its ACK's exception 1,676 and its CNP's 947, now a
        // CNP event of 316): bounded by issue 14's 500, so that they do not come back.
        // The CNP event ~15 % over, 365; a BYTES event (not made here) by the 500.
        const BOUNDS: [u32; probe::CLASSES] = [
            3_050, 500, 545, 1_175, 1_060, 500, 500, 1_075, 325, 275, 290, 345, 500, 365, 500,
        ];
        // (79,775 on main 7cb411f, the READ request's exception and its responses the
        // firmware's; 68,019 with the model's READ responder; 61,052 with the RNR NAK,
        // its FLUSH and replay the firmware's, 54,647 with them the WQE fetch's,
        // 49,206 with the ATOMIC ACKNOWLEDGEs the response path's, atomack; 44,239
        // (on 54,647) with a SEND's first packet the model's, into the receive WQE the
        // firmware loaded ahead: its exceptions, 2,634 + 2,617 + 2,757 and two
        // SEND_ONLYs' up to 2,750, became two MSG_DONEs of 1,070, sendrq; 38,786 with both.
        // MSG_DONE's 1,070 is its WQE's CQE and the next WQE loaded; 1,475 with the
        // whole receive context decoded; 27,178 with the READs and atomics the WQE
        // fetch's too, rdfetch: their 6 descriptors and 7 ACKED events gone; 24,170 with
        // the CE-marked WRITE the model's, ecnhw: its exception, 2,590, and the ACK the
        // engine built for it, 892, became a CE event of 344 (the engine's notification
        // point: its CNP, 822, is still the firmware's frame), bounded ~15 % over;
        // 14,328 with the atomics the model's receive path executes, rspatom: two
        // CMP_SWAP exceptions of 2,670 and a FETCH_ADD's of 2,667 and the three ATOMIC
        // ACKNOWLEDGEs the engine built, 995 each, became three ATOMIC events of 361,
        // bounded ~15 % over, 420; 11,681 with a SEND to an empty receive queue answered
        // by the model's receive path, rnrhw: its exception, 2,285, and the RNR NAK the
        // engine built, 893, became an RNR event of 281, bounded ~15 % over, 325, while
        // each MSG_DONE that finds the queue empty sets `rq_empty`: 1,091 became 1,212,
        // bounded ~13 % over, 1,375; 10,555 with MSG_DONE taking no receive context
        // (`Engine::fastpath_msg_done`, msgdone: the context read, decoded and loaded,
        // `with_qp`'s environment and epilogue, a second look-up and the CQ push's
        // `memcpy` gone), 1,213 became 646, bounded ~13 % over, 730; 9,174 with the
        // event dispatch cut (evcut: the QP's line looked up only by the kinds that need
        // it, `fp_msg_done` and `fp_sq_of` inlined, `recv_next_at` without its
        // out-of-line closure) and the probe's own instructions taken out of the event
        // brackets, 646 became 481 (553 of it the firmware's cuts, measured with the old
        // probe), bounded ~13 % over, 545; 8,791 with the CNP emitted from the
        // template's bytes, re-marked in the frame, its BTH written inline (cnpcut: 822
        // became 441); 8,234 with the local ACK timeout's poll the fast path's Go-Back-N
        // and its news read once (tmo: 987 became 469), the idle polls' rare paths out of
        // line; the phase ~15 %; 4,239 with the paced QP E on the fast path, dcqcnfp:
        // its frame, ACK and CNP exceptions, 4,373, became a CNP event of 316, while
        // the notification point's CNP frame went 425 -> 485 and the CE event 238 ->
        // 252, bounded ~15 % over.)
        const ALL: u64 = 4_875;
        for (i, (c, bound)) in worst.iter().zip(BOUNDS).enumerate() {
            let (what, a, b) = probe::kind_name(c.0);
            ensure!(
                c.1 <= bound,
                "budget (one packet) regressed: {=str} {=str} {=str} took {=u32} instructions (bound {=u32}, class {=usize})",
                what,
                a,
                b,
                c.1,
                bound,
                i
            );
        }
        // A SEND or WRITE out of sequence (reason 3 PSN, or 8 behind the gap's NAK) or
        // duplicate is the fast path's to answer (docs/fastpath.md §3.4): none may reach
        // the firmware (~2,170 instructions each when they did).
        let psn = fp.kinds.iter().find(|(k, _)| {
            *k >> 16 == 0
                && matches!((*k >> 8) as u8, 3 | 8)
                && matches!(*k as u8, 0x00..=0x0B | 0x16 | 0x17)
        });
        ensure!(
            psn.is_none(),
            "a SEND/WRITE out of sequence or duplicate went to the firmware ({=u32:#x})",
            psn.map_or(0, |(k, _)| k)
        );
        ensure!(
            all <= ALL,
            "budget (one packet) regressed: {=u64} instructions for all of the phase's packets (bound {=u64})",
            all,
            ALL
        );
    }

    /// Switches DCQCN on (notification point and QP `rp`'s reaction point); returns
    /// the port's settings before.
    fn set_cc(&mut self, rp: Option<Qpn>) -> abi::CcArg {
        let e = self.host.command(self.nic, CmdOp::QueryCc, &[]);
        let old: abi::CcArg = abi::payload(&e);
        let mut cc = old;
        cc.flags = abi::CcArg::NP | abi::CcArg::RP;
        self.host.command(self.nic, CmdOp::ModifyCc, cc.as_bytes());
        if let Some(qpn) = rp {
            self.set_qp_cc(qpn, true);
        }
        old
    }

    fn restore_cc(&mut self, old: abi::CcArg, rp: Qpn) {
        self.set_qp_cc(rp, false);
        self.host.command(self.nic, CmdOp::ModifyCc, old.as_bytes());
    }

    fn set_qp_cc(&mut self, qpn: Qpn, on: bool) {
        let arg = abi::QpCcArg {
            qpn: U32::new(qpn.value()),
            flags: if on { abi::QpCcArg::RP } else { 0 },
            ..Default::default()
        };
        self.host
            .command(self.nic, CmdOp::ModifyQpCc, arg.as_bytes());
    }

    /// Waits for a completion on A's CQ (or B's), whatever its QP.
    fn wait_wc(&mut self, on_b: bool) -> WorkCompletion {
        let cq = if on_b { &mut self.cq_b } else { &mut self.cq_a };
        let mut got = None;
        host::run_until(self.nic, "a completion", |nic| {
            got = Host::poll_cq(nic, cq);
            got.is_some()
        });
        match got {
            Some(wc) => wc,
            None => fail(),
        }
    }

    /// Destroys everything, exercising the remaining commands (and one that must fail).
    fn tear_down(&mut self) {
        let nic = &mut *self.nic;
        let host = &mut self.host;
        let mut host_cmd = |op: CmdOp, handle: u32| {
            let arg = abi::HandleArg {
                handle: U32::new(handle),
            };
            host.try_command(nic, op, arg.as_bytes()).0
        };
        // A PD with MRs and QPs is busy: the command fails and changes nothing.
        let st = host_cmd(CmdOp::DeallocPd, self.pd);
        ensure!(
            st == Some(CmdStatus::Busy),
            "DEALLOC_PD of a PD in use: status {=u32}",
            st.map_or(99, |s| s as u32)
        );
        for qp in [self.qp_a.qpn, self.qp_b.qpn, self.qp_c.qpn, self.qp_d.qpn] {
            let st = host_cmd(CmdOp::DestroyQp, qp.value());
            ensure!(st == Some(CmdStatus::Ok), "DESTROY_QP");
        }
        for cq in [self.cq_a.cqn, self.cq_b.cqn] {
            let st = host_cmd(CmdOp::DestroyCq, cq);
            ensure!(st == Some(CmdStatus::Ok), "DESTROY_CQ");
        }
        for key in [self.a.lkey, self.b.lkey] {
            let st = host_cmd(CmdOp::DeregMr, key.0);
            ensure!(st == Some(CmdStatus::Ok), "DEREG_MR");
        }
        let st = host_cmd(CmdOp::DeallocPd, self.pd);
        ensure!(st == Some(CmdStatus::Ok), "DEALLOC_PD");
        info!("DEALLOC_PD of a busy PD refused (Busy); DESTROY_QP, DESTROY_CQ, DEREG_MR, DEALLOC_PD ok");
    }

    /// Counters: nothing dropped, retried or failed; events raised and cleared.
    fn final_checks(&mut self) {
        let events = EventStatus(Host::reg(self.nic, reg::EVENT_STATUS));
        ensure!(
            events.cmd_done() && events.completion() && !events.cq_error() && !events.qp_fatal(),
            "EVENT_STATUS {=u32:#x}",
            events.0
        );
        Host::set_reg(self.nic, reg::EVENT_STATUS, events.0);
        let cleared = Host::reg(self.nic, reg::EVENT_STATUS);
        ensure!(cleared == 0, "EVENT_STATUS not cleared: {=u32:#x}", cleared);

        let rt = *self.nic.counters();
        let c = *self.nic.engine().counters();
        let dropped = self.dp().inner.rx.total_dropped();
        info!(
            "runtime: {=u64} commands ({=u64} failed), {=u64} send WQEs, {=u64} recv WQEs, {=u64} frames tx, {=u64} rx, {=u64} CQEs",
            rt.commands,
            rt.command_errors,
            rt.send_wqes,
            rt.recv_wqes,
            rt.frames_tx,
            rt.frames_rx,
            rt.cqes
        );
        ensure!(
            rt.command_errors == 1
                && rt.bad_wqes == 0
                && rt.dma_errors == 0
                && rt.cq_overflows == 0
                && dropped == 0,
            "runtime counters: command_errors {=u64} bad_wqes {=u64} dma_errors {=u64} cq_overflows {=u64} datapath drops {=u64}",
            rt.command_errors,
            rt.bad_wqes,
            rt.dma_errors,
            rt.cq_overflows,
            dropped
        );
        // Less those the fault injection of `budget_packets` made (it checks them).
        let bad = errors(&c) - self.injected_errors;
        info!(
            "engine: sent_pkts {=u64} rcvd_pkts {=u64} rdma_sends {=u64} rdma_recvs {=u64}; errors, retries and drops {=u64}",
            c.sent_pkts,
            c.rcvd_pkts,
            c.rdma_sends,
            c.rdma_recvs,
            bad
        );
        ensure!(bad == 0, "engine error counters are not zero ({=u64})", bad);
        // (The CNP `budget_packets` makes is its paced QP's: the fast path takes it, a
        // `CNP` event, neither a frame the runtime took nor a packet the engine
        // received; sent, the engine counts it.)
        ensure!(
            c.sent_pkts == rt.frames_tx && c.rcvd_pkts == rt.frames_rx,
            "engine and runtime frame counts differ: sent {=u64} / {=u64}, received {=u64} / {=u64}",
            c.sent_pkts,
            rt.frames_tx,
            c.rcvd_pkts,
            rt.frames_rx
        );
    }
}

/// The engine's error, retry and drop counters, summed.
fn errors(c: &roce_core::transport::Counters) -> u64 {
    c.duplicate_request
        + c.out_of_seq_request
        + c.rcvd_rnr_err
        + c.send_rnr_err
        + c.rcvd_seq_err
        + c.retry_exceeded_err
        + c.completer_retry_err
        + c.rcvd_parse_err
        + c.rcvd_not_for_us
        + c.rcvd_wrong_state
        + c.rcvd_pkey_err
        + c.rcvd_addr_err
        + c.rcvd_bad_resp
}

/// Logs one line of per-packet instruction counts.
fn report(what: &str, s: &Sum) {
    let (total, dma, icrc, rest) = s.per_frame();
    info!(
        "budget: {=str}: {=u32} frames of {=u32} B avg: {=u32} instructions = {=u32} DMA copy + {=u32} ICRC + {=i32} firmware",
        what,
        s.frames,
        s.bytes / s.frames.max(1),
        total,
        dma,
        icrc,
        rest
    );
}

/// Connects `qp` to `peer` over `av`: RESET -> INIT -> RTR -> RTS, local ACK timeout
/// code `timeout` (4.096 us x 2^timeout).
#[allow(clippy::too_many_arguments)]
fn connect(
    nic: &mut TestNic,
    host: &mut Host,
    qp: &Qp,
    peer: &Qp,
    av: AddressVector,
    sq_psn: u32,
    rq_psn: u32,
    access: AccessFlags,
    mtu: Mtu,
    timeout: u8,
) {
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags = Some(access);
    host.modify_qp(nic, qp, &init);
    let mut rtr = QpAttr::to_state(QpState::Rtr);
    rtr.ah_attr = Some(av);
    rtr.path_mtu = Some(mtu);
    rtr.dest_qp_num = Some(peer.qpn);
    rtr.rq_psn = Some(Psn::new(rq_psn));
    rtr.max_dest_rd_atomic = Some(config::RD as u8);
    rtr.min_rnr_timer = RnrTimer::new(1);
    host.modify_qp(nic, qp, &rtr);
    let mut rts = QpAttr::to_state(QpState::Rts);
    rts.sq_psn = Some(Psn::new(sq_psn));
    rts.timeout = AckTimeout::new(timeout);
    rts.retry_cnt = RetryCount::new(7);
    rts.rnr_retry = RetryCount::new(7);
    rts.max_rd_atomic = Some(config::RD as u8);
    host.modify_qp(nic, qp, &rts);
}
