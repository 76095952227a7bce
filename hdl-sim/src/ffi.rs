//! The cxx bridge to the Verilated model (C++ side: `csrc/dp_model.cpp`).

#[cxx::bridge(namespace = "roce_hdl")]
pub(crate) mod bridge {
    /// One AXI-stream beat driven into the model.
    #[derive(Clone, Copy, Debug, Default)]
    struct AxisIn {
        /// tdata, little-endian 64-bit words (byte 0 of the beat = bits 7..0 of word 0)
        data: [u64; 8],
        keep: u64,
        valid: bool,
        last: bool,
    }

    /// One AXI-stream beat presented by the model.
    #[derive(Clone, Copy, Debug, Default)]
    struct AxisOut {
        data: [u64; 8],
        keep: u64,
        valid: bool,
        last: bool,
    }

    /// Inputs of one clock cycle.
    #[derive(Clone, Copy, Debug, Default)]
    struct CycleIn {
        rx: AxisIn,
        rx_payload_ready: bool,
        rx_meta_ready: bool,
        tx: AxisIn,
        tx_out_ready: bool,
    }

    /// Outputs presented during one clock cycle. `data`/`keep`/`last` and
    /// `rx_meta` are only written when the matching `valid` is set.
    #[derive(Clone, Copy, Debug)]
    struct CycleOut {
        rx_in_ready: bool,
        tx_in_ready: bool,
        rx_payload: AxisOut,
        rx_meta_valid: bool,
        /// the metadata record, little-endian 64-bit words (bit 0 = LSB of the record)
        rx_meta: [u64; 32],
        tx_out: AxisOut,
    }

    unsafe extern "C++" {
        include!("roce-hdl-sim/csrc/dp_model.h");

        type DpModel;

        fn new_dp_model(width: u32, trace: bool) -> Result<UniquePtr<DpModel>>;
        fn data_width(self: &DpModel) -> u32;
        fn meta_width(self: &DpModel) -> u32;
        fn reset(self: Pin<&mut DpModel>, cycles: u32);
        fn cycle(self: Pin<&mut DpModel>, input: &CycleIn, out: &mut CycleOut);
        fn open_trace(self: Pin<&mut DpModel>, path: &str) -> Result<()>;
        fn close_trace(self: Pin<&mut DpModel>);
        fn cycles(self: &DpModel) -> u64;
    }
}
