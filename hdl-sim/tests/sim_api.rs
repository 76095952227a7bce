//! The cycle-level API: model lifetime, waveforms, reset, beat splitting.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use roce_hdl_sim::{rtl_available, Beat, DataWidth, RtlSim};

/// Verilator 5.006 tears a model down through the thread's current context;
/// a model dropped after another model's context is gone used to deadlock.
#[test]
fn models_can_be_dropped_in_any_order_after_tracing() {
    if common::datapath(DataWidth::W64).is_none() {
        return;
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for w in DataWidth::ALL {
            let mut plain = RtlSim::new(w).unwrap();
            plain.run(10);
            let path = common::wave_path("drop_order", w);
            let mut traced = RtlSim::with_trace(w, &path).unwrap();
            traced.run(10);
            traced.close_trace();
            drop(traced);
            plain.run(10);
            drop(plain);
            assert!(
                std::fs::metadata(&path).unwrap().len() > 0,
                "empty waveform"
            );
        }
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("model teardown hung");
}

#[test]
fn beats_split_and_reassemble() {
    let frame: Vec<u8> = (0..=200u8).collect();
    for w in DataWidth::ALL {
        let beats = Beat::split(&frame, w);
        assert_eq!(beats.len(), frame.len().div_ceil(w.bytes()));
        assert!(beats.last().unwrap().last && beats.iter().filter(|b| b.last).count() == 1);
        let back: Vec<u8> = beats
            .iter()
            .flat_map(|b| b.bytes().collect::<Vec<_>>())
            .collect();
        assert_eq!(back, frame);
    }
}

#[test]
fn reset_drops_queued_work_and_the_model_keeps_going() {
    let Some(mut dp) = common::datapath(DataWidth::W512) else {
        return;
    };
    let frame = common::unhex(
        common::load_jsonl("valid.jsonl")[0]["hex"]
            .as_str()
            .unwrap(),
    );
    let sim = dp.sim();
    sim.push_rx_frame(&frame);
    sim.run(1);
    sim.reset();
    assert_eq!(sim.pending_input(), 0);
    sim.run(50);
    assert_eq!(
        sim.rx_meta_len(),
        0,
        "a frame cut by reset must not produce a record"
    );
    let v = dp.rx(&frame).unwrap();
    assert!(v.is_ok(), "{:?}", v.error());
    assert!(rtl_available());
}
