//! The NIC SoC (`rtl/soc/nic_soc.sv`) at its pins, running the firmware image
//! `make-images.sh` wrote (`firmware/image/target/images/softcore/firmware.hex`, or
//! `$ROCE_SOC_IMAGE`): it boots, publishes the ABI's identity, keeps the host off the
//! read-only registers, runs the NIC clock at its own, logs over the log channel, and
//! answers a command the host puts in memory and rings. (`device/tests/soc.rs` drives
//! two SoCs through the host driver.)
//!
//! Without the image the tests print SKIPPED and pass, unless `ROCE_SOC_REQUIRED=1`
//! (what `cargo xtask ci`'s `soc` step sets after making the image); without the model
//! they fail under `CI=true`.

use roce_core::memory::{Dma, DmaError};
use roce_core::transport::ipv4_gid;
use roce_firmware::abi::{self, reg, CmdEntry, CmdOp, CmdStatus, DeviceAttr};
use roce_hdl_sim::soc::{board_image, boards, test_image, Soc, SocError};
use std::cell::RefCell;
use std::rc::Rc;
use zerocopy::{FromBytes, IntoBytes};

/// Host memory for the SoC's DMA engine: one region at `BASE`, shared with the test.
#[derive(Clone)]
struct Mem(Rc<RefCell<Vec<u8>>>);

const BASE: u64 = 0x1_0000_0000;

impl Mem {
    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, DmaError> {
        let at = addr
            .checked_sub(BASE)
            .and_then(|a| usize::try_from(a).ok())
            .filter(|&a| a + len <= self.0.borrow().len())
            .ok_or(DmaError { addr, len })?;
        Ok(at..at + len)
    }
}

impl Dma for Mem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.0.borrow()[r]);
        Ok(())
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let r = self.range(addr, data.len())?;
        self.0.borrow_mut()[r].copy_from_slice(data);
        Ok(())
    }
}

fn mac(l: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, l]
}

/// A SoC out of reset running `image`, with 4 KiB of host memory at `BASE`.
fn new_soc(image: &std::path::Path) -> (Soc, Mem) {
    let mem = Mem(Rc::new(RefCell::new(vec![0; 4096])));
    let soc = Soc::new(
        image,
        mac(7),
        ipv4_gid([10, 0, 0, 7]),
        Box::new(mem.clone()),
        None,
        false,
    )
    .unwrap();
    (soc, mem)
}

#[test]
fn boots_and_answers_query_device() {
    let Some(image) = test_image() else { return };
    let (mut soc, mem) = new_soc(&image);
    // Out of reset the window is empty: the firmware writes the identity when it boots.
    assert_eq!(soc.reg_read(reg::DEVICE_ID), 0);
    let cycles = soc.boot(2_000_000).unwrap();
    assert!(
        cycles > 1000,
        "booted in {cycles} cycles: too fast to be real"
    );
    assert_eq!(soc.reg_read(reg::DEVICE_ID), abi::DEVICE_ID);
    let version = abi::Version(soc.reg_read(reg::VERSION));
    assert_eq!(
        (version.major(), version.minor()),
        (abi::ABI_MAJOR, abi::ABI_MINOR)
    );
    // The host cannot overwrite read-only registers.
    soc.reg_write(reg::DEVICE_ID, 0);
    soc.reg_write(reg::STATUS, 0);
    assert_eq!(soc.reg_read(reg::DEVICE_ID), abi::DEVICE_ID);
    assert!(abi::DeviceStatus(soc.reg_read(reg::STATUS)).ready());
    // The NIC clock runs at the SoC's 100 MHz: 10 ns a cycle.
    let t0 = u64::from(soc.reg_read(reg::CLOCK_LO));
    soc.run(1000);
    let t1 = u64::from(soc.reg_read(reg::CLOCK_LO));
    assert_eq!(
        t1 - t0,
        10 * 1001,
        "1000 cycles and one read between the reads"
    );
    // The defmt log channel carried the boot messages (rzCOBS frames end with 0).
    let log = soc.take_log();
    assert!(log.len() > 8 && log.ends_with(&[0]), "{log:?}");

    query_device(&mut soc, &mem);
}

/// `Soc::new` takes only an image built from this checkout's sources: a copy of the
/// image whose record says one source had other bytes is refused, naming that file and
/// the script to run (`tests/image_sources.rs` edits the sources instead, on a copy).
#[test]
fn an_image_of_other_sources_is_refused() {
    use elf2img::sources::{record_path, Change, ImageError, UNCHECKED_ENV};
    let Some(image) = test_image() else { return };
    if std::env::var_os(UNCHECKED_ENV).is_some() {
        eprintln!("SKIPPED: {UNCHECKED_ENV} is set");
        return;
    }
    let dir = std::env::temp_dir().join(format!("roce-soc-stale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("firmware.hex");
    std::fs::copy(&image, &copy).unwrap();
    let record = std::fs::read_to_string(record_path(&image)).unwrap();
    let edited = "firmware/src/fastpath.rs";
    let record: String = record
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((hash, path)) if path == edited => {
                let hash = u64::from_str_radix(hash, 16).unwrap() ^ 1;
                format!("{hash:016x} {path}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(record_path(&copy), record).unwrap();
    let mem = Mem(Rc::new(RefCell::new(vec![0; 4096])));
    let got = Soc::new(
        &copy,
        mac(7),
        ipv4_gid([10, 0, 0, 7]),
        Box::new(mem),
        None,
        false,
    );
    let _ = std::fs::remove_dir_all(&dir);
    match got {
        Err(SocError::ImageSources(e)) => {
            let text = e.to_string();
            assert!(text.contains("run firmware/image/make-images.sh"), "{text}");
            assert_eq!(
                e,
                ImageError::Stale {
                    image: copy,
                    changes: vec![Change::Changed(edited.into())]
                }
            );
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("an image of other sources was loaded"),
    }
}

/// The image for the LFE5UM5G-85F (320 KiB of RAM, which holds code, data and the NIC
/// with room for the stack) boots on the same SoC and answers too, and the stack it
/// measured itself stays inside the board's reserve (`boards.rs` `stack_min`): the NIC
/// is built at compile time, so no NIC-sized temporary passes through the stack.
#[test]
fn the_ecp5_image_boots() {
    if test_image().is_none() {
        return;
    }
    let (mut soc, mem) = new_soc(&board_image("ecp5-85f"));
    soc.boot(2_000_000).unwrap();
    query_device(&mut soc, &mem);
    // The firmware probes its painted stack 64 words per idle poll: a pass over the
    // RAM its code and data leave for the stack (33 KiB in December 2026, less as they
    // grow) takes about 130 idle polls.
    soc.run(1_500_000);
    let used = soc.firmware_stats().stack_used;
    println!("ecp5-85f image: {used} bytes of stack used (boot and QUERY_DEVICE)");
    let reserve = boards::ECP5_85F.stack_min;
    assert!(
        (512..reserve).contains(&used),
        "{used} bytes of stack: the reserve is {reserve}"
    );
}

/// QUERY_DEVICE through a one-entry command ring in host memory: the DMA engine fetches
/// the entry and writes the result; the attributes carry the pins' MAC and GID.
fn query_device(soc: &mut Soc, mem: &Mem) {
    soc.reg_write(reg::CMDQ_BASE_LO, BASE as u32);
    soc.reg_write(reg::CMDQ_BASE_HI, (BASE >> 32) as u32);
    soc.reg_write(reg::CMDQ_LOG_DEPTH, 0);
    let mut cmd = CmdEntry::default();
    cmd.opcode.set(CmdOp::QueryDevice as u16);
    cmd.token.set(0x55);
    cmd.status.set(CmdStatus::Pending as u32);
    mem.0.borrow_mut()[..cmd.as_bytes().len()].copy_from_slice(cmd.as_bytes());
    soc.reg_write(reg::CMDQ_PI, 1);
    let mut waited = 0;
    while soc.reg_read(reg::CMDQ_CI) != 1 {
        soc.run(1000);
        waited += 1000;
        assert!(waited < 2_000_000, "QUERY_DEVICE not done");
    }
    let done = CmdEntry::read_from_prefix(&mem.0.borrow()[..]).unwrap().0;
    assert_eq!(done.status.get(), CmdStatus::Ok as u32);
    assert_eq!(done.token.get(), 0x55);
    let attr: DeviceAttr = abi::payload(&done);
    assert_eq!((attr.mac, attr.gid), (mac(7), ipv4_gid([10, 0, 0, 7])));
    // The firmware advances CMDQ_CI first and raises `cmd_done` after it (docs/abi.md:
    // an interrupt-driven host that reads CI on the event never misses the entry), so
    // the bit may follow CI by a few instructions.
    let mut waited = 0;
    while !abi::EventStatus(soc.reg_read(reg::EVENT_STATUS)).cmd_done() {
        soc.run(10);
        waited += 10;
        assert!(
            waited < 10_000,
            "cmd_done not raised {waited} cycles after CMDQ_CI"
        );
    }
    // The host clears the event bit (write one to clear).
    let events = soc.reg_read(reg::EVENT_STATUS);
    soc.reg_write(reg::EVENT_STATUS, events);
    assert_eq!(soc.reg_read(reg::EVENT_STATUS), 0);
}
