//! Two NIC SoCs (`hdl-sim/rtl/soc/nic_soc.sv`, each running the firmware image
//! `make-images.sh` wrote) behind the device boundary: the host driver opens each one
//! (QUERY_DEVICE) and reaches it only through its register port and its DMA engine;
//! RC SEND, WRITE, READ, FETCH_AND_ADD and CMP_AND_SWP between verbs applications carry
//! the right data, also with 1 % of the frames lost on the wire; the firmware's own
//! frame counts match what the wire carried.
//!
//! Without the image the tests print SKIPPED and pass, unless `ROCE_SOC_REQUIRED=1`
//! (what `cargo xtask ci`'s `soc` step sets after making the image); without the model
//! they fail under `CI=true`.

mod soc_pair;

use roce_device::soc::test_image;
use soc_pair::{pair, rc_ops};

#[test]
fn rc_between_two_socs() {
    let Some(image) = test_image() else { return };
    let mut p = pair(&image, 0.0, 14);
    let before = p.wire.nics.each_ref().map(|n| n.firmware_stats());
    rc_ops(&mut p, 3000, 20_000_000);
    // Let the last ACKs arrive, then the firmware's own frame counts must equal what
    // the wire carried: every frame sent was received, none lost inside the SoCs.
    for _ in 0..50 {
        p.wire.step(2_000);
    }
    assert_eq!(p.wire.dropped, 0);
    let s = p.wire.nics.each_ref().map(|n| n.firmware_stats());
    let d = [s[0].since(&before[0]), s[1].since(&before[1])];
    let sent: u64 = d.iter().map(|d| u64::from(d.frames_tx)).sum();
    let received: u64 = d.iter().map(|d| u64::from(d.frames_rx)).sum();
    assert_eq!((sent, received), (p.wire.carried, p.wire.carried));
    for (i, d) in d.iter().enumerate() {
        assert!(d.busy_polls > 0 && d.busy_instret > 0 && d.busy_cycles >= d.busy_instret);
        eprintln!(
            "SoC {i}: {} frames sent, {} received; per frame {} cycles, {} instructions (busy polls of the firmware's loop)",
            d.frames_tx,
            d.frames_rx,
            d.busy_cycles / d.frames(),
            d.busy_instret / d.frames()
        );
    }
}

#[test]
fn rc_between_two_socs_with_one_percent_loss() {
    let Some(image) = test_image() else { return };
    // ACK timeout 4.096 us x 2^9 = 2.1 ms: 210,000 cycles of the SoC.
    let mut p = pair(&image, 0.01, 9);
    for _ in 0..3 {
        rc_ops(&mut p, 8192, 200_000_000);
    }
    assert!(
        p.wire.dropped > 0,
        "this seed drops frames ({} carried)",
        p.wire.carried
    );
    eprintln!(
        "{} frames carried, {} dropped",
        p.wire.carried, p.wire.dropped
    );
}
