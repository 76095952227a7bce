//! The firmware runtime, unchanged, on the Verilated datapath: two NICs whose frames pass
//! through the RTL RX parser and TX ICRC inserter carry RC WRITE, SEND, READ and both
//! atomics between verbs applications; the RTL's ICRCs equal the engine's.

mod rc_mix;

use roce_core::engine::PortConfig;
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{ipv4_gid, QpType};
use roce_device::rtl::{rtl_available, rtl_nic};
use roce_device::{Capacities, LocalNic, NicModel};
use roce_hdl_sim::DataWidth;
use roce_host::{ConnectOptions, Context, QpEndpoint};
use std::rc::Rc;

fn run(nics: &[Rc<LocalNic>; 2]) {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut busy = nics[0].poll() | nics[1].poll();
        for (from, to) in [(0, 1), (1, 0)] {
            while let Some(n) = nics[from].transmit_frame(&mut buf) {
                nics[to].receive_frame(&buf[..n]);
                busy = true;
            }
        }
        if !busy {
            break;
        }
    }
}

#[test]
fn verbs_traffic_through_the_rtl_datapath() {
    if !rtl_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the RTL model is required under CI"
        );
        eprintln!("SKIPPED: the Verilated model was not built");
        return;
    }
    for width in [DataWidth::W64, DataWidth::W512] {
        let (nics, counters): (Vec<_>, Vec<_>) = [1u8, 2]
            .map(|l| {
                let cfg = PortConfig::new([2, 0, 0, 0, 0, l], ipv4_gid([10, 0, 0, l]));
                rtl_nic(cfg, Capacities::Firmware, width).unwrap()
            })
            .into_iter()
            .unzip();
        let nics: [Rc<LocalNic>; 2] = [nics[0].clone(), nics[1].clone()];
        let ctx = nics.clone().map(|n| Context::open(n).unwrap());
        let all = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let pd = ctx.each_ref().map(|c| c.alloc_pd().unwrap());
        let cq = ctx.each_ref().map(|c| c.create_cq(32).unwrap());
        let qp = [0, 1].map(|i| pd[i].create_qp(QpType::Rc, &cq[i], &cq[i]).build().unwrap());
        let mr = pd.each_ref().map(|p| p.reg_mr(65536, all).unwrap());
        for (i, j) in [(0, 1), (1, 0)] {
            let (gid, mac) = ctx[j].port_addr();
            let ep = QpEndpoint {
                qpn: qp[j].qpn(),
                psn: Psn::new(0xFF_FFF8),
                gid,
                mac,
            };
            qp[i]
                .connect(&ep, Psn::new(0xFF_FFF8), &ConnectOptions::default())
                .unwrap();
        }
        let data = rc_mix::post([&qp[0], &qp[1]], &mr[0], &mr[1], 9000);
        run(&nics);
        let sent = cq[0].wait(5, 5).unwrap();
        let received = cq[1].wait(1, 5).unwrap();
        rc_mix::check(
            &format!("{width:?}"),
            &mr[0],
            &mr[1],
            &data,
            &sent,
            &received,
        );
        for c in &counters {
            let c = c.borrow();
            assert!(c.rx_ok > 0 && c.rx_dropped.is_empty(), "{width:?}: {c:?}");
            assert_eq!(
                c.tx_icrc_mismatch, 0,
                "{width:?}: the RTL's ICRC differs from the engine's"
            );
        }
    }
}
