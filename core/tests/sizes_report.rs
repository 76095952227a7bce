//! Reports (and bounds) the memory the engine needs: the RC QP context and whole
//! engines for a few configurations. `cargo test -p roce-core --test sizes_report --
//! --nocapture` prints the table.

use roce_core::engine::Engine;

#[test]
fn qp_context_stays_small() {
    type Small = Engine<4, 2, 2, 16, 16, 16, 64, 4>;
    let ctx = Small::qp_context_size();
    println!("QP context: {ctx} bytes");
    // DCQCN state lives beside the context, one per QP slot.
    println!(
        "QP congestion control: {} bytes",
        core::mem::size_of::<roce_core::cc::QpCc>()
    );
    assert!(ctx <= 256, "QP context is {ctx} bytes");
}

#[test]
fn engine_sizes() {
    type Firmware = Engine<16, 16, 4, 64, 32, 32, 256, 8>;
    type Tests = Engine<8, 4, 2, 32, 64, 64, 1024, 8>;
    type Big = Engine<256, 64, 16, 1024, 64, 64, 1024, 16>;
    println!("config (QPS,CQS,PDS,MRS,SQ,RQ,CQE,RD)    queues/QP    engine");
    println!(
        "firmware (16,16,4,64,32,32,256,8)   {:>10} {:>10}",
        Firmware::qp_queues_size(),
        Firmware::size()
    );
    println!(
        "tests    (8,4,2,32,64,64,1024,8)    {:>10} {:>10}",
        Tests::qp_queues_size(),
        Tests::size()
    );
    println!(
        "big      (256,64,16,1024,64,64,1024,16) {:>6} {:>10}",
        Big::qp_queues_size(),
        Big::size()
    );
}
